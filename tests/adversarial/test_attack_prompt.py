"""Attacks by a hostile chat-completions server (or HTTP endpoint) on prompt hooks,
workflow prompt steps and hookbus-http.

Promise 3: emit returns within the matched hooks' own timeouts plus a small, documented
bound, whatever model-controlled input, a hostile hook or a failing filesystem do. The
server here controls every byte and its timing: it drips the status line, the headers, the
body or a TLS handshake one byte every half second, accepts and never answers, or never
reads what it is sent. Each sync hook has a 2 s timeout; emit must return within 3.5 s
(the bound the provider promises is the timeout plus scheduling, well under 0.1 s here;
the rest is slack for a loaded machine), record "timed out", and leave no thread or socket.

Promise 5: secrets never reach a record, a log or an error. The server echoes the request
(its ``Authorization`` header) in an HTTP error body, a malformed reply or the model's own
answer; the key, a password in base_url and the Basic token made of it must appear in no
file of the home, in no Decision and in no log message.

The servers are threads on raw sockets on 127.0.0.1, so that the tests choose the bytes.
"""

from __future__ import annotations

import base64
import contextlib
import gc
import json
import logging
import socket
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import attack
from conftest import read_log, read_state
from hookbus import HookBus
from hookbus.decision import Decision

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]

KEY = "sk-attack-4f1d9c2b7e5a3816d0c4"
KEY_VARIABLE = "HOOKBUS_ATTACK_KEY"
PASSWORD = "s3cret-pass"
BASIC = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
ENVELOPE = {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/tmp"}
TIMEOUT = 2.0
#: Generous: the provider ends the request at the deadline plus scheduling; the rest is
#: slack for a loaded machine.
BOUND = TIMEOUT + 1.5
DRIP_SECONDS = 0.5


# -- a server that does whatever the attack needs ------------------------------------------


class RawServer:
    """Listens on 127.0.0.1 and hands each connection to ``behaviour`` on its own thread."""

    def __init__(self, behaviour: Callable[[RawServer, socket.socket], None], backlog: int = 16) -> None:
        self.behaviour = behaviour
        self.stop = threading.Event()
        self.requests: list[bytes] = []
        self.connected = threading.Event()
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(backlog)
        self.port: int = self.listener.getsockname()[1]
        self._accepting = backlog > 0
        self._threads: list[threading.Thread] = []

    def url(self, path: str = "/v1", scheme: str = "http", userinfo: str = "") -> str:
        return f"{scheme}://{userinfo}127.0.0.1:{self.port}{path}"

    def __enter__(self) -> RawServer:
        if self._accepting:
            thread = threading.Thread(target=self._accept, name="attack-server")
            self._threads.append(thread)
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        for thread in list(self._threads):
            thread.join(10)
        self.listener.close()

    def _accept(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connected.set()
            thread = threading.Thread(target=self._serve, args=(connection,), name="attack-connection")
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                self.behaviour(self, connection)
            except OSError:
                pass  # the client hung up: that is what the attack waits for

    # -- what behaviours are made of --

    def read_request(self, connection: socket.socket) -> bytes:
        connection.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = connection.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            chunk = connection.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append(head + b"\r\n\r\n" + body)
        return head

    def drip(self, connection: socket.socket, data: bytes) -> None:
        """One byte every DRIP_SECONDS: each read gets something long before any
        per-operation timeout, so only a deadline over the whole exchange ends it."""
        for index in range(len(data)):
            if self.stop.wait(DRIP_SECONDS):
                return
            connection.sendall(data[index : index + 1])

    def hold(self, connection: socket.socket) -> None:
        """Send nothing until the client hangs up or the test ends."""
        connection.settimeout(0.05)
        while not self.stop.is_set():
            try:
                if not connection.recv(65536):
                    return
            except TimeoutError:
                continue

    def headers(self) -> dict[str, str]:
        """The headers of the first request, names in lower case."""
        head = self.requests[0].split(b"\r\n\r\n")[0].decode("latin-1")
        pairs = (line.partition(":") for line in head.split("\r\n")[1:])
        return {name.strip().lower(): value.strip() for name, _, value in pairs}


def reply(status: int, body: bytes, reason: str = "OK") -> bytes:
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def chat_reply(content: str) -> bytes:
    return reply(200, json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode())


# -- hostile behaviours (promise 3) ------------------------------------------------------------


def drip_headers(server: RawServer, connection: socket.socket) -> None:
    server.read_request(connection)
    server.drip(connection, b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 10_000 + b"\r\n\r\n")


def never_answer(server: RawServer, connection: socket.socket) -> None:
    server.read_request(connection)
    server.hold(connection)


def drip_body(server: RawServer, connection: socket.socket) -> None:
    server.read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    server.drip(connection, b'{"choices": [' + b" " * 99_000)


def headers_then_stall(server: RawServer, connection: socket.socket) -> None:
    server.read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
    server.hold(connection)


def drip_tls_handshake(server: RawServer, connection: socket.socket) -> None:
    """A TLS server hello that never ends: a handshake record of 16 KiB, one byte at a time.
    The client is still connecting: http.client has no socket to give anyone yet."""
    connection.settimeout(10)
    connection.recv(65536)  # the client hello
    server.drip(connection, b"\x16\x03\x03\x40\x00" + b"\x02" * 16_384)


def never_read(server: RawServer, connection: socket.socket) -> None:
    """Never read: once the socket buffers are full, the client's send blocks."""
    server.stop.wait(30)


BEHAVIOURS = [
    pytest.param(drip_headers, "http", id="drip-status-and-headers"),
    pytest.param(never_answer, "http", id="accept-and-never-answer"),
    pytest.param(drip_body, "http", id="drip-body"),
    pytest.param(headers_then_stall, "http", id="headers-then-stall"),
    pytest.param(drip_tls_handshake, "https", id="drip-tls-handshake"),
]


@contextlib.contextmanager
def nothing_left_behind() -> Iterator[None]:
    """No thread more than before (the deadline watchdog ends when idle), and no socket
    left for the garbage collector to warn about."""
    threads = threading.active_count()
    gc.collect()
    yield
    deadline = time.monotonic() + 5
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.02)
    left = [thread.name for thread in threading.enumerate()]
    assert threading.active_count() <= threads, f"threads left over: {left}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        gc.collect()
    leaks = [str(warning.message) for warning in caught if issubclass(warning.category, ResourceWarning)]
    assert leaks == []


def provider_settings(home: Path, base_url: str, api_key: bool = True) -> None:
    provider: dict[str, Any] = {"base_url": base_url, "model": "m"}
    if api_key:
        provider["api_key_env"] = KEY_VARIABLE
    (home / "settings.json").write_text(json.dumps({"prompt_provider": provider}))


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    return KEY


def timed_emit(bus: HookBus, envelope: dict[str, Any] = ENVELOPE) -> tuple[Decision, float]:
    started = time.monotonic()
    decision = bus.emit("PreToolUse", envelope)
    return decision, time.monotonic() - started


def only_entry(bus: HookBus, home: Path, hook_id: str) -> dict[str, Any]:
    bus.read_runs(hook_id)  # flushes the recorder
    (entry,) = [entry for entry in read_log(home) if entry["hook_id"] == hook_id]
    return entry


# -- promise 3: the deadline holds over the whole exchange -----------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("behaviour", "scheme"), BEHAVIOURS)
def test_a_hostile_server_cannot_stretch_a_prompt_hook(
    behaviour: Callable[[RawServer, socket.socket], None],
    scheme: str,
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    with attack(3, f"prompt hook vs a server that does {behaviour.__name__}"), nothing_left_behind():
        with RawServer(behaviour) as server:
            provider_settings(home, server.url(scheme=scheme))
            write_hook("judge", mode="sync", blocking=True, prompt="judge this", timeout="2s")
            bus = make_bus()
            decision, elapsed = timed_emit(bus)
            assert server.connected.is_set()
            assert elapsed < BOUND, f"a 2s prompt hook held emit for {elapsed:.2f}s"
            assert decision.behavior == "allow"
            entry = only_entry(bus, home, "judge")
            assert entry["error"] == "timed out after 2s"
            assert read_state(home, "judge")["last_error"] == "timed out after 2s"
            bus.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("behaviour", "scheme"), [BEHAVIOURS[0], BEHAVIOURS[3], BEHAVIOURS[4]]
)
def test_a_hostile_server_cannot_stretch_a_workflow_prompt_step(
    behaviour: Callable[[RawServer, socket.socket], None],
    scheme: str,
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    with attack(3, f"workflow prompt step vs {behaviour.__name__}"), nothing_left_behind():
        with RawServer(behaviour) as server:
            provider_settings(home, server.url(scheme=scheme))
            workflow = {"steps": [{"bash": "echo checked"}, {"prompt": "judge this", "name": "ask"}]}
            write_hook("flow", mode="sync", blocking=True, workflow=workflow, timeout="2s")
            bus = make_bus()
            decision, elapsed = timed_emit(bus)
            assert elapsed < BOUND, f"a 2s workflow held emit for {elapsed:.2f}s"
            assert decision.behavior == "allow"
            entry = only_entry(bus, home, "flow")
            assert entry["error"] == "step 2 of 2 (ask) failed: timed out after 2s"
            bus.close()


@pytest.mark.timeout(60)
def test_a_server_that_never_reads_cannot_stretch_the_send(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """16 MB of envelope to a server that never reads: the send blocks once the socket
    buffers are full, and must end at the deadline like everything else."""
    with attack(3, "prompt hook vs a server that never reads the request"), nothing_left_behind():
        with RawServer(never_read) as server:
            provider_settings(home, server.url())
            write_hook("judge", mode="sync", blocking=True, prompt="judge this", timeout="2s")
            bus = make_bus()
            decision, elapsed = timed_emit(bus, {**ENVELOPE, "blob": "x" * (16 * 1024 * 1024)})
            assert elapsed < BOUND, f"a 2s prompt hook held emit for {elapsed:.2f}s"
            assert only_entry(bus, home, "judge")["error"] == "timed out after 2s"
            bus.close()


def fill_accept_queue(server: RawServer) -> list[socket.socket]:
    """Connect until the listener's accept queue is full: a further SYN is dropped, so a
    further connect waits. Skips when this kernel answers anyway."""
    held: list[socket.socket] = []
    for _ in range(8):
        probe = socket.socket()
        probe.settimeout(0.3)
        try:
            probe.connect(("127.0.0.1", server.port))
        except TimeoutError:
            probe.close()
            return held
        held.append(probe)
    for sock in held:
        sock.close()
    pytest.skip("this kernel completes every connect: the accept queue never fills")


RUNNERS = ["prompt", "http"]


def hook_fields(runner: str, server: RawServer, home: Path) -> dict[str, Any]:
    """A prompt hook (its provider set up in settings.json) or an http hook, to ``server``."""
    if runner == "http":
        pytest.importorskip("hookbus_http")
        return {"http": {"url": server.url("/hook")}}
    provider_settings(home, server.url())
    return {"prompt": "judge this"}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("runner", RUNNERS)
def test_close_interrupts_a_request_still_connecting(
    runner: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """An async hook (10 minutes to go) connecting to a server that never completes the TCP
    handshake: close() must end the connect, not leave a worker in it for 10 minutes."""
    with attack(3, f"async {runner} hook connecting to a full accept queue, then close()"), nothing_left_behind():
        with RawServer(never_answer, backlog=0) as server:
            held = fill_accept_queue(server)
            try:
                write_hook("bg", event="Stop", **hook_fields(runner, server, home))
                bus = make_bus()
                bus.emit("Stop", {})
                time.sleep(0.3)  # the worker is in connect()
                started = time.monotonic()
                bus.close(timeout=0.2)
                assert time.monotonic() - started < 3
                assert read_state(home, "bg")["last_error"] == "cancelled at shutdown"
            finally:
                for sock in held:
                    sock.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("timeout", ["2562047h47m16s", "1193h2m49s"], ids=["max", "2^32ms+1.7s"])
def test_a_huge_hook_timeout_is_neither_an_error_nor_cut_short(
    timeout: str, runner: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """Hook timeouts go up to threading.TIMEOUT_MAX (292 years). A socket timeout past 2**31
    milliseconds wraps inside CPython (49.7 days + 1.7 s becomes 1.7 s): the runner must
    clamp, not overflow, and not time out a server that answers in 2.5 s."""

    def slow(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        if not server.stop.wait(2.5):
            answer = "BLOCK: slow but sure"
            connection.sendall(reply(200, answer.encode()) if runner == "http" else chat_reply(answer))

    with RawServer(slow) as server, nothing_left_behind():
        write_hook("h", mode="sync", blocking=True, timeout=timeout, **hook_fields(runner, server, home))
        bus = make_bus()
        assert bus.problems == ()
        decision, _ = timed_emit(bus)
        assert only_entry(bus, home, "h")["error"] is None
        assert decision.behavior == "deny"
        bus.close()


# -- promise 5: secrets never reach a record, a log or an error ------------------------------


def echo_in(kind: str) -> Callable[[RawServer, socket.socket], None]:
    """A server that answers with the request's own head (its Authorization header)."""

    def behaviour(server: RawServer, connection: socket.socket) -> None:
        head = server.read_request(connection).decode("latin-1")
        lines = [line for line in head.split("\r\n") if line.lower().startswith("authorization:")]
        authorization = lines[0] if lines else "no Authorization header"
        if kind == "http-400":
            connection.sendall(reply(400, f'{{"error": "bad request", "echo": {json.dumps(head)}}}'.encode(), "Bad Request"))
        elif kind == "malformed-200":
            connection.sendall(reply(200, f"<html>you sent {authorization}</html>".encode()))
        elif kind == "cut-at-300":
            # The key straddles the 300th character, where the error's snippet is cut.
            connection.sendall(reply(500, (" " * 270 + authorization).encode(), "Oops"))
        elif kind == "deny-reason":
            connection.sendall(chat_reply(f"BLOCK: you sent {authorization}"))
        elif kind == "context":
            connection.sendall(chat_reply(f"Note: the request carried {authorization}"))
        elif kind == "modify-input":
            modify = {"behavior": "modify", "input": {"command": f"echo '{authorization}'"}}
            connection.sendall(chat_reply(json.dumps(modify)))
        else:
            raise AssertionError(kind)

    return behaviour


ECHOES = ["http-400", "malformed-200", "cut-at-300", "deny-reason", "context", "modify-input"]


def assert_nowhere(secrets: list[str], home: Path, decision: Decision, logged: str) -> None:
    """Not in any byte of any file hookbus wrote in the home (state.json, logs/**, ...: all
    but the settings.json and hook.json the test wrote), not in the Decision, not in the
    log."""
    written_by_the_user = {home / "settings.json", *home.glob("hooks/*/hook.json")}
    for path in sorted(home.rglob("*")):
        if path.is_file() and path not in written_by_the_user:
            data = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in data, f"{secret[:6]}... is in {path.relative_to(home)}"
    shown = json.dumps([decision.behavior, decision.reason, decision.context, decision.input])
    for secret in secrets:
        assert secret not in shown, "a secret is in the Decision"
        assert secret not in logged, "a secret is in a log message"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ECHOES)
def test_a_reply_that_echoes_the_api_key_does_not_leak_it(
    kind: str, home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with attack(5, f"the API key echoed in {kind}"):
        with RawServer(echo_in(kind)) as server:
            provider_settings(home, server.url())
            write_hook("judge", mode="sync", blocking=True, prompt="judge this", timeout="5s")
            bus = make_bus()
            decision = bus.emit("PreToolUse", ENVELOPE)
            bus.close()
        assert server.headers()["authorization"] == f"Bearer {KEY}"  # it was sent, and echoed
        # The key's start too: an error snippet cut through the key must not keep it.
        assert_nowhere([KEY, KEY[:12]], home, decision, caplog.text)
        entry = only_entry(bus, home, "judge")
        if kind in ("http-400", "malformed-200", "cut-at-300"):
            assert entry["error"] is not None and "[redact" in entry["error"]  # maybe cut
        else:
            assert "[redacted]" in json.dumps(entry["decision"])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["http-400", "context"])
def test_a_password_in_base_url_is_sent_as_basic_auth_and_never_shown(
    kind: str, home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with attack(5, f"a base_url password echoed in {kind}"):
        with RawServer(echo_in(kind)) as server:
            provider_settings(home, server.url(userinfo=f"user:{PASSWORD}@"), api_key=False)
            write_hook("judge", mode="sync", blocking=True, prompt="judge this", timeout="5s")
            bus = make_bus()
            decision = bus.emit("PreToolUse", ENVELOPE)
            bus.close()
        assert server.headers()["authorization"] == f"Basic {BASIC}"
        assert_nowhere([PASSWORD, BASIC], home, decision, caplog.text)
        error = only_entry(bus, home, "judge")["error"]
        if kind == "http-400":
            assert error.startswith(f"http://user:[redacted]@127.0.0.1:{server.port}/v1/chat/completions answered HTTP 400")


@pytest.mark.timeout(30)
def test_a_password_in_base_url_is_not_in_a_connection_error(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with attack(5, "a base_url password in a connection error"):
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        provider_settings(home, f"http://user:{PASSWORD}@127.0.0.1:{port}/v1", api_key=False)
        write_hook("judge", mode="sync", blocking=True, prompt="judge this", timeout="5s")
        bus = make_bus()
        decision = bus.emit("PreToolUse", ENVELOPE)
        bus.close()
        assert_nowhere([PASSWORD, BASIC], home, decision, caplog.text)
        error = only_entry(bus, home, "judge")["error"]
        assert error.startswith(f"cannot reach http://user:[redacted]@127.0.0.1:{port}/v1/chat/completions: ")


@pytest.mark.timeout(30)
def test_a_password_in_an_invalid_base_url_is_not_in_the_problem(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with attack(5, "a password in a base_url that fails validation"):
        provider_settings(home, f"ftp://user:{PASSWORD}@127.0.0.1/v1", api_key=False)
        write_hook("judge", mode="sync", blocking=True, prompt="judge this", timeout="5s")
        bus = make_bus()
        problems = [str(problem) for problem in bus.problems]
        assert problems == [
            "settings.json: base_url must be an http:// or https:// URL, got "
            "'ftp://user:[redacted]@127.0.0.1/v1' @ $.prompt_provider.base_url"
        ]
        decision = bus.emit("PreToolUse", ENVELOPE)
        bus.close()
        assert_nowhere([PASSWORD], home, decision, caplog.text + "\n".join(problems))


@pytest.mark.timeout(30)
def test_an_async_prompt_hook_does_not_record_the_key(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with attack(5, "the API key echoed to an async prompt hook"):
        with RawServer(echo_in("http-400")) as server:
            provider_settings(home, server.url())
            write_hook("bg", event="Stop", prompt="judge this")
            bus = make_bus()
            decision = bus.emit("Stop", {})
            bus.close()
        state = read_state(home, "bg")
        assert state["last_status"] == "error"
        assert "[redacted]" in state["last_error"]
        assert_nowhere([KEY], home, decision, caplog.text)


# -- hookbus-http: the same attacks on the runner that POSTs the envelope ---------------------


def http_spec(url: str, **options: Any) -> dict[str, Any]:
    return {"url": url, **options}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("behaviour", "scheme"),
    [BEHAVIOURS[0], BEHAVIOURS[1], BEHAVIOURS[4], pytest.param(never_read, "http", id="never-read")],
)
def test_a_hostile_server_cannot_stretch_an_http_hook(
    behaviour: Callable[[RawServer, socket.socket], None],
    scheme: str,
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    pytest.importorskip("hookbus_http")
    with attack(3, f"http hook vs a server that does {behaviour.__name__}"), nothing_left_behind():
        with RawServer(behaviour) as server:
            url = server.url("/hook", scheme=scheme)
            write_hook("h", mode="sync", blocking=True, http=http_spec(url), timeout="2s")
            bus = make_bus()
            envelope = {**ENVELOPE, "blob": "x" * (16 * 1024 * 1024)} if behaviour is never_read else ENVELOPE
            decision, elapsed = timed_emit(bus, envelope)
            assert elapsed < BOUND, f"a 2s http hook held emit for {elapsed:.2f}s"
            assert decision.behavior == "allow"
            assert only_entry(bus, home, "h")["error"] == f"timed out after 2s waiting for {url}"
            bus.close()


def echo_request(status: int) -> Callable[[RawServer, socket.socket], None]:
    def behaviour(server: RawServer, connection: socket.socket) -> None:
        head = server.read_request(connection)
        connection.sendall(reply(status, b"you sent:\n" + head, "Echo"))

    return behaviour


HEADER_TOKEN = "ghp_attack0123456789abcdefABCDEF"
QUERY_TOKEN = "q-token-9a8b7c6d5e4f"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("status", [200, 500], ids=["context", "http-500"])
def test_an_http_endpoint_that_echoes_secrets_does_not_leak_them(
    status: int, home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("hookbus_http")
    caplog.set_level(logging.DEBUG)
    with attack(5, f"an http hook's header and query tokens echoed in {status}"):
        with RawServer(echo_request(status)) as server:
            headers = {"Authorization": f"Bearer {HEADER_TOKEN}", "X-Api-Key": KEY, "X-Team": "platform"}
            url = server.url(f"/hook?team=a&token={QUERY_TOKEN}")
            write_hook("h", mode="sync", blocking=True, http=http_spec(url, headers=headers), timeout="5s")
            bus = make_bus()
            decision = bus.emit("PreToolUse", ENVELOPE)
            bus.close()
        sent = server.headers()
        assert (sent["authorization"], sent["x-api-key"]) == (f"Bearer {HEADER_TOKEN}", KEY)
        assert_nowhere([HEADER_TOKEN, KEY, QUERY_TOKEN], home, decision, caplog.text)
        entry = only_entry(bus, home, "h")
        shown = json.dumps(entry)
        assert "[redacted]" in shown
        assert "platform" in shown  # an ordinary header is not a secret: not masked
