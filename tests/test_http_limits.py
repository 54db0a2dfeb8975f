"""The http listener's time and connection limits, on a listener run in this process with
its limits made short (the real ones are seconds to a minute): a slow client, an idle
keep-alive connection, and a flood of connections."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from hookbus import HookBus
from hookbus.serve import httplistener
from hookbus.serve.httplistener import HttpListener
from hookbus.workers import ElasticThreads
from httpkit import HttpClient

pytestmark = pytest.mark.timeout(60)

TOKEN = "a-token-for-the-limits-tests-0123"
ENVELOPE = b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}'


class Running:
    def __init__(self, listener: HttpListener, loop: asyncio.AbstractEventLoop) -> None:
        self.listener = listener
        self.loop = loop
        self.port = listener.port

    def client(self, token: str | None = TOKEN) -> HttpClient:
        return HttpClient(self.port, token)


@pytest.fixture
def running(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    monkeypatch.setattr(httplistener, "REQUEST_SECONDS", 0.5)
    monkeypatch.setattr(httplistener, "IDLE_SECONDS", 0.5)
    monkeypatch.setattr(httplistener, "MAX_CONNECTIONS", 4)
    bus = HookBus(home)
    loop = asyncio.new_event_loop()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.setblocking(False)
    threads = ElasticThreads("test-http")
    listener = HttpListener(bus, sock, TOKEN, threads)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(listener.start(), loop).result(10)
    try:
        yield Running(listener, loop)
    finally:
        asyncio.run_coroutine_threadsafe(listener.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        sock.close()
        threads.shutdown()
        bus.close()


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


def test_past_the_limit_of_trusted_connections_a_new_one_gets_503(running: Running) -> None:
    trusted = [running.client() for _ in range(4)]
    try:
        for client in trusted:
            assert client.post(ENVELOPE).status == 200
        with running.client() as extra:
            answer = extra.read_answer()
        assert answer.status == 503 and b"too many connections" in answer.body
        for client in trusted:  # the trusted ones still work
            assert client.post(ENVELOPE).status == 200
    finally:
        for client in trusted:
            client.close()
