"""hookbus-http against a real HTTP server on 127.0.0.1.

``hookbus_home``, ``hookbus_fire``, ``hookbus_bus`` and ``hookbus_capture`` are hookbus's own
pytest fixtures (``hookbus.testing``), loaded automatically once hookbus is installed. The
plugin itself comes in through its entry point, as it would for a user: these tests need
``pip install contrib/hookbus-http`` first.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hookbus import CancelToken, HookBus
from hookbus.redaction import MARKER, redact
from hookbus.testing import CaptureRecorder, Fired, TestHome
from hookbus_http import MAX_RESPONSE_BYTES, HttpOptions

Fire = Callable[..., Fired]

ENVELOPE = {"tool_name": "write_file", "tool_input": {"path": ".env"}, "cwd": "/tmp"}


# -- a server that records what it receives --------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What the server answers: a status and a body, or no answer at all."""

    status: int = 200
    body: bytes = b""
    #: Never answer: wait until the server closes.
    hang: bool = False
    #: Send the headers at once, then one byte of the body every 200 ms.
    drip: bool = False
    #: Answer with the request's own head (method line and headers) as the body.
    echo: bool = False


@dataclass
class Received:
    method: str
    path: str
    #: Names in lower case.
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Endpoint:
    """What the test server received, and what it answers next."""

    port: int = 0
    reply: Reply = field(default_factory=Reply)
    requests: list[Received] = field(default_factory=list)
    received: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(endpoint: Endpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            endpoint.requests.append(Received(self.command, self.path, headers, body))
            endpoint.received.set()
            reply = endpoint.reply
            if reply.hang:
                endpoint.closing.wait()
                return
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            if reply.drip:
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self._drip()
                return
            body = reply.body
            if reply.echo:
                body = f"you sent:\n{self.requestline}\n{self.headers}".encode()
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_PUT = do_POST

        def _drip(self) -> None:
            while not endpoint.closing.wait(0.2):
                try:
                    self.wfile.write(b"x")
                except OSError:  # the client hung up: that is the point
                    return

    return Handler


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="test-endpoint")
    thread.start()
    yield state
    state.closing.set()
    server.shutdown()
    server.server_close()  # joins the handler threads: nothing outlives the test
    thread.join(5)


def sync_hook(home: TestHome, http: dict[str, Any], **fields: Any) -> None:
    """A blocking PreToolUse hook "h" that runs ``http``."""
    spec: dict[str, Any] = {"mode": "sync", "blocking": True, "http": http, **fields}
    home.write_hook("h", event="PreToolUse", **spec)


# -- the short version: what a plugin author's first test looks like --------------------------


def test_text_reply_becomes_context(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    endpoint.reply = Reply(body=b"this repo uses pnpm, not npm")
    hookbus_home.write_hook("h", event="Stop", mode="sync", http={"url": endpoint.url()})
    fired = hookbus_fire("Stop")
    assert fired.decision.context == "this repo uses pnpm, not npm"


# -- what is sent ----------------------------------------------------------------------------


def test_the_envelope_is_the_json_body_and_headers_are_sent(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    headers = {"Authorization": "Bearer t0k3n", "X-Vix-Team": "platform"}
    sync_hook(hookbus_home, {"url": endpoint.url("/vix/pre-tool-use"), "headers": headers})

    fired = hookbus_fire("PreToolUse", ENVELOPE)

    assert fired.decision.behavior == "allow"
    [request] = endpoint.requests
    assert (request.method, request.path) == ("POST", "/vix/pre-tool-use")
    assert request.headers["content-type"] == "application/json"
    assert request.headers["authorization"] == "Bearer t0k3n"
    assert request.headers["x-vix-team"] == "platform"
    assert request.json() == {**ENVELOPE, "hook_event_name": "PreToolUse"}


def test_put_keeps_the_query_string_and_a_custom_content_type(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    http = {
        "url": endpoint.url("/hooks?team=platform"),
        "method": "PUT",
        "headers": {"content-type": "application/json; charset=utf-8"},
    }
    sync_hook(hookbus_home, http)

    hookbus_fire("PreToolUse", ENVELOPE)

    [request] = endpoint.requests
    assert (request.method, request.path) == ("PUT", "/hooks?team=platform")
    assert request.headers["content-type"] == "application/json; charset=utf-8"
    assert request.json()["hook_event_name"] == "PreToolUse"


# -- how the reply decides (the core's final-text contract) ----------------------------------

REPLIES = [
    pytest.param(
        b'{"behavior": "deny", "reason": "no writes to .env"}',
        {"behavior": "deny", "reason": "no writes to .env"},
        id="json-deny",
    ),
    pytest.param(
        b'Rewritten:\n```json\n{"behavior": "modify", "input": {"path": "env.example"}}\n```\n',
        {"behavior": "modify", "input": {"path": "env.example"}},
        id="fenced-json-modify",
    ),
    pytest.param(
        b"Checked the path.\nBLOCK: secrets live in .env\n",
        {"behavior": "deny", "reason": "secrets live in .env"},
        id="block-line",
    ),
    pytest.param(
        b"remember to update the changelog",
        {"behavior": "context", "context": "remember to update the changelog"},
        id="text-is-context",
    ),
    pytest.param(b"", {"behavior": "allow"}, id="empty-allows"),
]


@pytest.mark.parametrize(("body", "decision"), REPLIES)
def test_the_reply_decides(
    hookbus_home: TestHome,
    hookbus_fire: Fire,
    endpoint: Endpoint,
    body: bytes,
    decision: dict[str, Any],
) -> None:
    endpoint.reply = Reply(body=body)
    sync_hook(hookbus_home, {"url": endpoint.url()})

    fired = hookbus_fire("PreToolUse", ENVELOPE)

    record = fired.record_of("h")
    assert record.decision == decision
    assert (record.status, record.error) == (decision["behavior"], None)
    assert fired.decision.behavior == decision["behavior"]
    if "input" in decision:
        assert fired.decision.input == decision["input"]
    if "reason" in decision:
        assert fired.decision.reason == f"hook 'h' denied: {decision['reason']}"


# -- failing open ----------------------------------------------------------------------------


def test_an_http_error_fails_open_naming_the_url_and_status(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    endpoint.reply = Reply(status=500, body=b"BLOCK: this must not count\n")
    sync_hook(hookbus_home, {"url": endpoint.url("/hook?token=s3cr3t")})

    fired = hookbus_fire("PreToolUse", ENVELOPE)

    assert fired.decision.behavior == "allow"
    record = fired.record_of("h")
    assert record.status == "allow"
    assert record.error == (
        f"{endpoint.url('/hook')} answered HTTP 500 Internal Server Error: "
        "BLOCK: this must not count"
    )
    assert "s3cr3t" not in record.error


@pytest.mark.timeout(10)
def test_a_hanging_server_cannot_outlast_the_hook_timeout(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    endpoint.reply = Reply(hang=True)
    sync_hook(hookbus_home, {"url": endpoint.url()}, timeout="1s")

    started = time.monotonic()
    fired = hookbus_fire("PreToolUse", ENVELOPE)
    elapsed = time.monotonic() - started

    assert elapsed < 2.0
    assert fired.decision.behavior == "allow"
    assert fired.record_of("h").error == f"timed out after 1s waiting for {endpoint.url()}"


@pytest.mark.timeout(10)
def test_a_server_that_drips_its_reply_cannot_stretch_the_deadline(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    # Every read gets a byte within 200 ms, so a per-read socket timeout alone never fires.
    endpoint.reply = Reply(drip=True)
    sync_hook(hookbus_home, {"url": endpoint.url()}, timeout="1s")

    started = time.monotonic()
    fired = hookbus_fire("PreToolUse", ENVELOPE)

    assert time.monotonic() - started < 2.0
    assert fired.record_of("h").error == f"timed out after 1s waiting for {endpoint.url()}"


@pytest.mark.timeout(10)
def test_the_http_timeout_option_bounds_the_request_below_the_hook_timeout(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    endpoint.reply = Reply(hang=True)
    sync_hook(hookbus_home, {"url": endpoint.url(), "timeout": "300ms"}, timeout="5s")

    started = time.monotonic()
    fired = hookbus_fire("PreToolUse", ENVELOPE)

    assert time.monotonic() - started < 1.5
    assert fired.record_of("h").error == f"timed out after 300ms waiting for {endpoint.url()}"


@pytest.mark.timeout(10)
def test_an_unreachable_port_fails_open(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, then released
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sync_hook(hookbus_home, {"url": f"http://127.0.0.1:{port}/hook"})

    fired = hookbus_fire("PreToolUse", ENVELOPE)

    assert fired.decision.behavior == "allow"
    error = fired.record_of("h").error
    assert error is not None
    assert error.startswith(f"request to http://127.0.0.1:{port}/hook failed: ")
    assert "refused" in error


def test_a_reply_over_1_mib_fails_open(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    endpoint.reply = Reply(body=b"BLOCK: big\n" + b"x" * MAX_RESPONSE_BYTES)
    sync_hook(hookbus_home, {"url": endpoint.url()})

    fired = hookbus_fire("PreToolUse", ENVELOPE)

    assert fired.decision.behavior == "allow"
    assert fired.record_of("h").error == f"{endpoint.url()} answered with more than 1 MiB"


@pytest.mark.timeout(15)
def test_closing_the_bus_cuts_a_request_in_flight(
    hookbus_home: TestHome,
    hookbus_bus: HookBus,
    hookbus_capture: CaptureRecorder,
    endpoint: Endpoint,
) -> None:
    endpoint.reply = Reply(hang=True)
    hookbus_home.write_hook(
        "h", event="Stop", mode="async", timeout="1m", http={"url": endpoint.url()}
    )
    hookbus_bus.reload()
    hookbus_bus.emit("Stop", {})
    assert endpoint.received.wait(5), "the request never arrived"

    started = time.monotonic()
    hookbus_bus.close(timeout=0.1)

    assert time.monotonic() - started < 3.0
    [record] = hookbus_capture.wait_for(1)
    assert (record.status, record.error) == ("error", "cancelled at shutdown")


# -- secrets ---------------------------------------------------------------------------------

TOKEN = "ghp_0123456789abcdefABCDEF"
API_KEY = "key-9f8e7d6c5b4a3210"
QUERY_TOKEN = "qt-5a4b3c2d1e0f"


@pytest.mark.parametrize("status", [200, 500], ids=["context", "http-500"])
def test_secret_headers_and_query_tokens_an_endpoint_echoes_are_masked(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint, status: int
) -> None:
    endpoint.reply = Reply(status=status, echo=True)
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": API_KEY, "X-Team": "platform"}
    url = endpoint.url(f"/hook?team=a&access_token={QUERY_TOKEN}")
    sync_hook(hookbus_home, {"url": url, "headers": headers})

    fired = hookbus_fire("PreToolUse", ENVELOPE)

    [request] = endpoint.requests
    assert request.headers["authorization"] == f"Bearer {TOKEN}"  # sent as given
    record = fired.record_of("h")
    shown = json.dumps([record.error, record.decision, fired.decision.context])
    for secret in (TOKEN, API_KEY, QUERY_TOKEN):
        assert secret not in shown
    assert f"Authorization: {MARKER}" in shown
    assert "X-Team: platform" in shown  # not a secret by its name: not masked


def test_the_password_of_a_basic_authorization_header_is_a_secret(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    password = "correct-horse-battery"
    token = base64.b64encode(f"me:{password}".encode()).decode()
    sync_hook(hookbus_home, {"url": endpoint.url(), "headers": {"Authorization": f"Basic {token}"}})

    hookbus_fire("PreToolUse", ENVELOPE)

    assert redact(f"{token} {password}") == f"{MARKER} {MARKER}"


# -- the deadline machinery ------------------------------------------------------------------


def test_a_deadline_292_years_away_gives_a_socket_timeout_cpython_can_take() -> None:
    """CPython hands poll() an int of milliseconds and wraps past 2**31 of them."""
    from hookbus.exchange import Cutoff

    cutoff = Cutoff(time.monotonic() + threading.TIMEOUT_MAX, CancelToken())
    with cutoff:
        assert 0 < cutoff.timeout() * 1000 < 2**31


@pytest.mark.timeout(10)
def test_the_deadline_thread_ends_when_idle(
    hookbus_home: TestHome, hookbus_fire: Fire, endpoint: Endpoint
) -> None:
    sync_hook(hookbus_home, {"url": endpoint.url()})
    hookbus_fire("PreToolUse", ENVELOPE)

    def watchdogs() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name == "hookbus-deadline"]

    deadline = time.monotonic() + 5
    while watchdogs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watchdogs() == []


# -- validation ------------------------------------------------------------------------------

INVALID = [
    pytest.param(
        {"ulr": "http://example.com/"},
        ["required field missing @ $.http.url", "unknown field 'ulr' (did you mean 'url'?) @ $.http"],
        id="typo",
    ),
    pytest.param({}, ["required field missing @ $.http.url"], id="no-url"),
    pytest.param(
        "http://example.com/", ["expected an object, got a string @ $.http"], id="not-an-object"
    ),
    pytest.param(
        {"url": "ftp://example.com/x"},
        ["expected an http:// or https:// URL, got scheme 'ftp' @ $.http.url"],
        id="scheme",
    ),
    pytest.param({"url": "http:///hook"}, ["the URL has no host @ $.http.url"], id="no-host"),
    pytest.param(
        {"url": "https://me:pw@example.com/"},
        ["credentials in the URL are not sent: put them in headers (Authorization) @ $.http.url"],
        id="credentials-in-url",
    ),
    pytest.param(
        {"url": "http://example.com:99999/"},
        ["invalid port: Port out of range 0-65535 @ $.http.url"],
        id="port",
    ),
    pytest.param(
        {"url": "http://example.com/a b"},
        ["the URL must be ASCII without spaces: percent-encode the rest @ $.http.url"],
        id="space-in-url",
    ),
    pytest.param(
        {"url": "http://example.com/", "method": "GET"},
        ["method must be \"POST\" or \"PUT\", got 'GET' @ $.http.method"],
        id="method",
    ),
    pytest.param(
        {"url": "http://example.com/", "headers": {"X-Token": 5}},
        ["expected a string, got an integer @ $.http.headers['X-Token']"],
        id="header-type",
    ),
    pytest.param(
        {"url": "http://example.com/", "headers": {"X Token": "a"}},
        ["invalid header name 'X Token' @ $.http.headers['X Token']"],
        id="header-name",
    ),
    pytest.param(
        {"url": "http://example.com/", "headers": {"X-Token": "a\r\nInjected: yes"}},
        ["a header value must be one line of Latin-1 text @ $.http.headers['X-Token']"],
        id="header-injection",
    ),
    pytest.param(
        {"url": "http://example.com/", "headers": {"Content-Length": "3"}},
        ["Content-Length is set by the runner: remove it @ $.http.headers['Content-Length']"],
        id="managed-header",
    ),
    pytest.param(
        {"url": "http://example.com/", "timeout": "soon"},
        [
            "invalid duration 'soon': use a number and a unit, like 500ms, 5s, 10m or 1h30m"
            " @ $.http.timeout"
        ],
        id="timeout",
    ),
    pytest.param(
        {"url": "http://example.com/", "headers": ["X-Token: a"]},
        ["expected an object, got an array @ $.http.headers"],
        id="headers-not-an-object",
    ),
]


@pytest.mark.parametrize(("http", "messages"), INVALID)
def test_invalid_options_are_reported_at_their_field(
    hookbus_home: TestHome, http: object, messages: list[str]
) -> None:
    hookbus_home.write_hook("h", event="PreToolUse", mode="sync", http=http)
    hookbus_home.write_hook("ok", event="Stop", http={"url": "http://example.com/"})

    with HookBus(hookbus_home.root) as bus:
        problems = [str(problem) for problem in bus.problems]
        loaded = sorted(bus.snapshot.hooks)

    assert problems == [f"hooks/h/hook.json: {message}" for message in messages]
    assert loaded == ["ok"]  # one bad hook never keeps the others from loading


def test_valid_options_get_their_defaults(hookbus_home: TestHome) -> None:
    hookbus_home.write_hook("h", event="Stop", http={"url": "https://example.com/hook"})

    with HookBus(hookbus_home.root) as bus:
        assert bus.problems == ()
        hook = bus.snapshot.hooks["h"]

    assert hook.runner_plugin == "http"
    assert hook.options == HttpOptions(url="https://example.com/hook", headers={}, method="POST")


# -- the entry point -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_hookbus_plugins_lists_http(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "plugins", "--home", str(tmp_path / "home")],
        capture_output=True,
        text=True,
        timeout=50,
    )

    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    [row] = [row for row in rows if row and row[0] == "http"]
    assert row[1:4] == ["hookbus-http", "0.1.0", "loaded"]
    assert "runner:http" in row[4:]
