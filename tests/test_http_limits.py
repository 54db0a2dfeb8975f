"""The http listener's limits, on a listener run in this process with its limits made short
(the real ones are seconds to a minute): a slow client, an idle keep-alive connection, a
flood of connections, the memory a body would take once parsed, the Host of port 80, and
what a stopping listener still answers."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

import httpkit
from conftest import HookWriter, turn_off_home_guard
from hookbus.serve import claudehttp, httplistener
from hookbus.serve.server import request_cost
from httpkit import HttpClient, InProcess, containers_body, in_process

pytestmark = pytest.mark.timeout(60)

TOKEN = httpkit.TOKEN
ENVELOPE = httpkit.PRE_TOOL_USE
Running = InProcess


@pytest.fixture
def running(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcess]:
    monkeypatch.setattr(httplistener, "REQUEST_SECONDS", 0.5)
    monkeypatch.setattr(httplistener, "IDLE_SECONDS", 0.5)
    monkeypatch.setattr(httplistener, "MAX_CONNECTIONS", 4)
    with in_process(home) as listening:
        yield listening


def test_a_request_that_does_not_arrive_whole_in_time_gets_408(running: Running) -> None:
    with running.client() as http:
        request = http.request_bytes(ENVELOPE)
        http.sock.sendall(request[:40])  # and then nothing
        answer = http.read_answer()
        assert answer.status == 408 and b"did not arrive whole within" in answer.body
        assert http.closed_by_server()


def test_a_slow_drip_cannot_hold_a_request_open(running: Running) -> None:
    with running.client() as http:
        request = http.request_bytes(ENVELOPE)
        started = time.monotonic()
        try:
            for byte in request[:-1]:
                http.sock.sendall(bytes([byte]))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert time.monotonic() - started < 20
        assert http.read_answer().status == 408


def test_an_idle_keep_alive_connection_is_closed(running: Running) -> None:
    with running.client() as http:
        assert http.post(ENVELOPE).status == 200
        assert http.closed_by_server(timeout=10)
    with running.client() as http:  # one that never sends a byte, too
        assert http.closed_by_server(timeout=10)


def test_keep_alive_holds_between_requests_within_the_idle_time(running: Running) -> None:
    with running.client() as http:
        for _ in range(5):
            assert http.post(ENVELOPE).status == 200
            time.sleep(0.1)


def test_connections_that_never_sent_the_token_make_room_for_one_that_does(running: Running) -> None:
    idle = [running.client(None) for _ in range(4)]
    try:
        with running.client() as http:
            assert http.post(ENVELOPE).status == 200
        closed = [client.closed_by_server(timeout=0.3) for client in idle]
        assert any(closed)
    finally:
        for client in idle:
            client.close()


def test_past_the_limit_the_longest_idle_connection_makes_room(running: Running) -> None:
    """Connections that sent the token once and then idle do not keep a new one out (they
    used to: it got a 503, and Claude Code ran the tool)."""
    trusted = [running.client() for _ in range(httplistener.MAX_CONNECTIONS)]
    try:
        for client in trusted:
            assert client.post(ENVELOPE).status == 200
        with running.client() as extra:
            assert extra.post(ENVELOPE).status == 200
        assert trusted[0].closed_by_server(timeout=5)
        assert trusted[-1].post(ENVELOPE).status == 200  # the most recently used is kept
    finally:
        for client in trusted:
            client.close()


# -- the memory a body takes once parsed --------------------------------------------------


def test_a_body_past_the_memory_budget_is_not_parsed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    turn_off_home_guard(home)
    parsed: list[int] = []
    real = claudehttp.read_host_envelope

    def counting(data: bytes) -> Any:
        parsed.append(len(data))
        return real(data)

    monkeypatch.setattr(claudehttp, "read_host_envelope", counting)
    body = containers_body(12 << 20)
    assert request_cost(body) > httplistener.MEMORY_BUDGET_BYTES
    with in_process(home) as listening:
        with listening.client() as http:
            answer = http.post(body)
            assert answer.status == 503 and b"would take about" in answer.body and b"no fail-closed hook" in answer.body
            assert parsed == []
            assert http.post(ENVELOPE).status == 200  # the connection goes on: the body was read whole
        assert parsed == [len(ENVELOPE)]
        assert listening.on_loop(lambda: listening.listener.budget.held) == 0


def test_the_budget_is_held_while_the_hooks_run(write_hook: HookWriter, home: Path) -> None:
    turn_off_home_guard(home)
    spec = write_hook("slow", event="PreToolUse", mode="sync", command='while [ ! -e "$HOOKBUS_HOOK_DIR/go" ]; do sleep 0.02; done')
    with in_process(home) as listening:
        with listening.client() as http:
            http.sock.sendall(http.request_bytes(ENVELOPE))
            listening.wait_until(lambda: listening.listener.endpoint.running == 1)
            assert listening.on_loop(lambda: listening.listener.budget.held) == request_cost(ENVELOPE)
            (spec.parent / "go").touch()
            assert http.read_answer().status == 200
        assert listening.on_loop(lambda: listening.listener.budget.held) == 0


# -- Host ---------------------------------------------------------------------------------


def test_on_port_80_the_host_without_its_port_is_the_listeners_own(home: Path) -> None:
    """Clients leave HTTP's default port out of Host: ``Host: 127.0.0.77`` on port 80."""
    try:
        listening_at = in_process(home, ("127.0.0.77", 80))
        listening = listening_at.__enter__()
    except OSError as exc:
        pytest.skip(f"cannot listen on 127.0.0.77:80 here: {exc}")
    try:
        for host in ("127.0.0.77", "127.0.0.77:80"):
            with listening.client() as http:
                assert http.post(ENVELOPE, host_header=host).status == 200, host
        for host in ("127.0.0.78", "127.0.0.77:8080", "localhost", "evil.example"):
            with listening.client() as http:
                assert http.post(ENVELOPE, host_header=host).status == 403, host
    finally:
        listening_at.__exit__(None, None, None)


def test_ipv6_loopback_takes_its_bracketed_host(home: Path) -> None:
    try:
        listening_at = in_process(home, ("::1", 0))
        listening = listening_at.__enter__()
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    try:
        with listening.client() as http:
            assert http.post(ENVELOPE).status == 200  # Host: [::1]:PORT
        with listening.client() as http:
            assert http.post(ENVELOPE, host_header="[::1]").status == 403  # not port 80
    finally:
        listening_at.__exit__(None, None, None)


# -- GET /ping ----------------------------------------------------------------------------


def test_ping_says_which_server_this_is_to_a_client_with_the_token(home: Path) -> None:
    with in_process(home) as listening:
        with listening.client() as http:
            answer = http.post(b"", method="GET", path="/ping")
        assert answer.status == 200 and answer.json()["home"] == str(home) and "hookbus" in answer.json()
        with listening.client(None) as http:
            assert http.post(b"", method="GET", path="/ping").status == 401
        with listening.client() as http:
            refused = http.post(b"", path="/ping")
        assert refused.status == 405 and refused.headers["allow"] == "GET"


# -- stopping -----------------------------------------------------------------------------


def test_a_stopping_listener_answers_what_has_begun_to_arrive(home: Path) -> None:
    """At SIGTERM a request the client had begun to send behind another (pipelined) is
    still taken and answered; an idle keep-alive connection is closed at once."""
    turn_off_home_guard(home)
    with in_process(home) as listening:
        idle = listening.client()
        half = listening.client()
        try:
            assert idle.post(ENVELOPE).status == 200
            request = half.request_bytes(ENVELOPE)
            half.sock.sendall(request + request[:30])
            first = half.read_answer()
            listening.wait_until(lambda: sum(c.in_flight for c in listening.listener.connections) == 1)
            listening.on_loop(listening.listener.stop_accepting)
            assert idle.closed_by_server(timeout=5)
            time.sleep(0.2)
            half.sock.sendall(request[30:])
            second = half.read_answer()
            assert (first.status, second.status) == (200, 200)
            assert second.headers.get("connection") == "close" and half.closed_by_server(timeout=5)
        finally:
            idle.close()
            half.close()


def test_http_and_the_socket_share_one_memory_budget(home: Path) -> None:
    """What an http body holds counts against the socket's requests, and the reverse: one
    budget for the whole server (``hookbus serve`` lends the socket's to the listener)."""
    from hookbus import HookBus
    from hookbus.serve.run import _sockets_budget
    from hookbus.serve.server import MEMORY_BUDGET_BYTES, HookServer

    with socket.socket(socket.AF_UNIX) as unix, HookBus(home) as bus:
        server = HookServer(bus, unix)
        budget = _sockets_budget(server)
        assert budget.take(100) and server.bytes_in_flight == 100
        server.hold_bytes(MEMORY_BUDGET_BYTES - 150)  # the socket's requests in flight
        assert not budget.take(100) and budget.held == MEMORY_BUDGET_BYTES - 50
        budget.give_back(100)
        assert server.bytes_in_flight == MEMORY_BUDGET_BYTES - 150
