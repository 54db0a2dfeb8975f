"""docs/protocol.md and docs/protocol.schema.json hold what a real ``hookbus serve`` does.

- The schema is a valid JSON Schema (draft 2020-12).
- Against a real server, over a plain Unix socket (bytes, not hookbus.serve.client): every
  request sent and every response received is checked against the schema, for each
  method and for each error code a client can provoke; every request the server refuses
  as malformed is refused by the schema too.
- Every ```json example in docs/protocol.md is a message of the schema, and every error
  code of hookbus.serve.protocol is documented there (and in the schema).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from jsonschema import Draft202012Validator

from hookbus.serve import protocol
from hookbus.serve.protocol import (
    HOOK_NOT_FOUND,
    HOOKS_DISABLED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_LINE_BYTES,
    METHOD_NOT_FOUND,
    OTHER_HOME,
    PARSE_ERROR,
    PERMISSION_DENIED,
    REQUEST_TOO_LARGE,
    SHUTTING_DOWN,
)
from hookbus.serve.server import MAX_IN_FLIGHT
from servekit import Raw, Served, wait_for

Writer = Callable[..., Path]

DOCS = Path(__file__).resolve().parent.parent / "docs"
DOC = DOCS / "protocol.md"
SCHEMA_FILE = DOCS / "protocol.schema.json"
BASH = {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}}
DENIED = {"behavior": "deny", "reason": "hook 'guard' denied: nope"}


@functools.lru_cache(maxsize=None)
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


@functools.lru_cache(maxsize=None)
def validator(name: str | None = None) -> Draft202012Validator:
    """The whole schema (None), or one of its ``$defs`` as a schema of its own."""
    document = schema()
    if name is None:
        return Draft202012Validator(document)
    assert name in document["$defs"], f"the schema has no $defs/{name}"
    return Draft202012Validator({"$schema": document["$schema"], "$defs": document["$defs"], "$ref": f"#/$defs/{name}"})


def check(message: Any, *names: str) -> None:
    """``message`` is a message of the schema, and an instance of each ``$defs`` named."""
    for name in (None, *names):
        errors = [error.message for error in validator(name).iter_errors(message)]
        assert not errors, f"{message!r} is not a valid {name or 'message'}: {errors}"


def refused(message: Any) -> None:
    """``message`` is no request, notification or response of the schema."""
    assert not validator().is_valid(message), f"the schema accepts {message!r}, which the server refuses"


def strict_loads(text: str | bytes) -> Any:
    """JSON as the protocol allows it: no NaN or Infinity."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


class Wire(Raw):
    """A plain AF_UNIX connection: bytes out, lines in, each message checked against the
    schema on its way (requests before they are sent, responses as they arrive)."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        super().__init__(path, timeout)
        #: The method of each request sent, by id: what its response's result must be.
        self.methods: dict[Any, str] = {}

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, id: Any, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        check(message, "request")
        self.methods[id] = method
        self.send_bytes(json.dumps(message).encode() + b"\n")

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        check(message, "notification")
        self.send_bytes(json.dumps(message).encode() + b"\n")

    def response(self) -> dict[str, Any]:
        """The next response, checked: a response of the schema, and for a result, the
        result of the method its id was sent with."""
        line = self.line()
        assert line, "the server closed the connection instead of answering"
        message: dict[str, Any] = strict_loads(line.decode("utf-8"))
        check(message, "response")
        if "result" in message:
            method = self.methods.get(message["id"])
            assert method is not None, f"a result for an id never sent: {message}"
            check(message, f"{method}Response")
        return message

    def call(self, id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.request(id, method, params)
        message = self.response()
        assert message["id"] == id, message
        return message


def deny_hook(write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="echo nope >&2; exit 2")


def error_of(message: dict[str, Any]) -> tuple[Any, int]:
    assert "error" in message, message
    return message["id"], message["error"]["code"]


# -- the schema ---------------------------------------------------------------------------


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    document = schema()
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(document)
    for name in document["$defs"]:
        Draft202012Validator.check_schema(validator(name).schema)


def test_the_schema_names_every_error_code_and_method_of_the_server() -> None:
    defs = schema()["$defs"]
    assert set(defs["errorCode"]["enum"]) == set(error_codes())
    assert defs["call"]["properties"]["method"]["enum"] == list(protocol.METHODS)
    from hookbus.eventnames import EVENT_NAMES

    assert defs["event"]["enum"] == list(EVENT_NAMES)


# -- a real server ------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_each_method_answers_with_what_the_schema_describes(home: Path, write_hook: Writer) -> None:
    deny_hook(write_hook)
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        denied = wire.call(1, "emit", {"event": "PreToolUse", "envelope": BASH})
        assert denied["result"] == DENIED
        allowed = wire.call("two", "emit", {"event": "PreToolUse", "envelope": {"tool_name": "read_file"}})
        assert allowed["result"] == {"behavior": "allow"}
        assert wire.call(3, "emit", {"event": "Stop"})["result"] == {"behavior": "allow"}  # no envelope

        record = wire.call(4, "trigger", {"hook_id": "guard", "envelope": BASH})["result"]
        assert record["hook_id"] == "guard" and record["event"] == "PreToolUse"
        assert record["mode"] == "async" and record["status"] == "done" and record["manual"] is True
        assert record["decision"] == {"behavior": "deny", "reason": "nope"}

        ping = wire.call(5, "ping")["result"]
        assert ping["home"] == str(home) and isinstance(ping["generation"], int)
        assert wire.call(6, "ping", {})["result"]["home"] == str(home)

        reloaded = wire.call(7, "reload")["result"]
        assert reloaded == {"generation": reloaded["generation"], "hooks": 1, "problems": []}
        assert reloaded["generation"] > ping["generation"]

        # Any method may name the home it means; another path to the same directory is it.
        named = wire.call(9, "emit", {"event": "PreToolUse", "envelope": BASH, "home": str(home)})
        assert named["result"] == DENIED
        assert wire.call(10, "ping", {"home": f"{home}/hooks/.."})["result"]["home"] == str(home)

        status = wire.call(11, "status")["result"]
        assert status["home"] == str(home) and status["pid"] == ping["pid"] == served.process.pid
        assert [(hook["id"], hook["state"]) for hook in status["hooks"]] == [("hookbus:protect_home", "enabled"), ("guard", "enabled")]
        explained = wire.call(12, "explain", {"event": "PreToolUse", "envelope": BASH, "dry_run": True})["result"]
        assert [(hook["id"], hook["matched"]) for hook in explained["hooks"]] == [("guard", True), ("hookbus:protect_home", True)]
        assert explained["decision"] is None and explained["home"] == str(home)

        # A notification is run and never answered: the next line answers the next request.
        wire.notify("ping")
        wire.notify("emit", {"event": "PreToolUse", "envelope": BASH})
        assert wire.call(8, "ping")["id"] == 8
        assert wire.call(None, "ping")["result"]["home"] == str(home)  # a null id is echoed
    assert served.process.returncode == 0


def test_the_extras_of_a_decision_are_in_the_schema(home: Path, write_hook: Writer) -> None:
    """permission, continue_with and halt: what Claude Code's output shapes add."""
    write_hook("ask", matcher="bash", mode="sync", blocking=True, command="""cat >/dev/null; echo '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}}'""")
    write_hook("gate", event="Stop", mode="sync", command="""cat >/dev/null; echo '{"decision": "block", "reason": "run the tests"}'""")
    write_hook("budget", event="SubagentStop", mode="sync", command="""cat >/dev/null; echo '{"continue": false, "stopReason": "over budget"}'""")
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        asked = wire.call(1, "emit", {"event": "PreToolUse", "envelope": BASH})["result"]
        going = wire.call(2, "emit", {"event": "Stop", "envelope": {"thread_id": "t"}})["result"]
        halted = wire.call(3, "emit", {"event": "SubagentStop", "envelope": {"thread_id": "t"}})["result"]
    assert asked == {"behavior": "allow", "permission": "ask", "reason": "sure?"}
    assert going == {"behavior": "allow", "continue_with": "run the tests"}
    assert halted == {"behavior": "allow", "halt": "over budget"}


def test_failures_and_problems_are_answered_when_asked_for(home: Path, write_hook: Writer) -> None:
    write_hook("slow", matcher="bash", mode="sync", timeout="200ms", command="sleep 5")
    write_hook("typo", command="exit 0", blockng=True)
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        plain = wire.call(1, "emit", {"event": "PreToolUse", "envelope": BASH})["result"]
        asked = wire.call(2, "emit", {"event": "PreToolUse", "envelope": BASH, "failures": True})["result"]
        refused_line = {"jsonrpc": "2.0", "id": 3, "method": "emit", "params": {"event": "PreToolUse", "failures": "yes"}}
        refused(refused_line)  # the schema says no, and so does the server:
        wire.send_bytes(json.dumps(refused_line).encode() + b"\n")
        answer = wire.response()
    assert plain == {"behavior": "allow"}
    assert asked["failed"] == [{"hook_id": "slow", "failure": "timeout", "error": "timed out after 200ms", "closed": False}]
    assert asked["problems"] == ["skipped hooks/typo/hook.json: unknown field 'blockng' (did you mean 'blocking'?) @ $"]
    assert error_of(answer) == (3, INVALID_PARAMS) and "'failures' must be true or false" in answer["error"]["message"]


@pytest.mark.timeout(60)
def test_each_error_a_client_can_cause_is_answered_as_the_schema_describes(
    home: Path, write_hook: Writer, tmp_path: Path
) -> None:
    deny_hook(write_hook)
    ping = {"jsonrpc": "2.0", "method": "ping"}
    cases: list[tuple[Any, int, Any]] = [
        # (bytes as they are, or a JSON document on a line; the code; the id of the answer)
        (b"{not json\n", PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\xff\xfe"}\n', PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"\n', PARSE_ERROR, None),
        ([], INVALID_REQUEST, None),
        ([{**ping, "id": 1}], INVALID_REQUEST, None),
        (b'"ping"\n', INVALID_REQUEST, None),
        ({**ping, "jsonrpc": "1.0", "id": 10}, INVALID_REQUEST, 10),
        ({"jsonrpc": "2.0", "id": 11}, INVALID_REQUEST, 11),
        ({**ping, "method": 5, "id": 12}, INVALID_REQUEST, 12),
        ({**ping, "id": True}, INVALID_REQUEST, None),
        ({**ping, "id": {"an": "object"}}, INVALID_REQUEST, None),
        ({**ping, "id": 13, "extra": 1}, INVALID_REQUEST, 13),
        ({**ping, "id": 20, "method": "frob"}, METHOD_NOT_FOUND, 20),
        ({**ping, "id": 21, "method": "Ping"}, METHOD_NOT_FOUND, 21),
        ({**ping, "id": 30, "method": "emit", "params": {"event": "NoSuchEvent"}}, INVALID_PARAMS, 30),
        ({**ping, "id": 31, "method": "emit", "params": {"event": "Stop", "x": 1}}, INVALID_PARAMS, 31),
        ({**ping, "id": 32, "params": {"verbose": True}}, INVALID_PARAMS, 32),
        ({**ping, "id": 33, "method": "reload", "params": ["now"]}, INVALID_PARAMS, 33),
        ({**ping, "id": 34, "params": None}, INVALID_PARAMS, 34),
        ({**ping, "id": 35, "method": "emit"}, INVALID_PARAMS, 35),
        ({**ping, "id": 36, "method": "emit", "params": {"event": "Stop", "envelope": None}}, INVALID_PARAMS, 36),
        ({**ping, "id": 37, "method": "emit", "params": {"event": "Stop", "envelope": [1]}}, INVALID_PARAMS, 37),
        ({**ping, "id": 38, "method": "trigger", "params": {"hook_id": 7}}, INVALID_PARAMS, 38),
        ({**ping, "id": 39, "method": "trigger", "params": {"id": "guard"}}, INVALID_PARAMS, 39),
        ({**ping, "id": 40, "params": {"home": 5}}, INVALID_PARAMS, 40),
    ]
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        for sent, code, id in cases:
            if isinstance(sent, bytes):
                wire.send_bytes(sent)
                try:
                    document: Any = strict_loads(sent.decode("utf-8"))
                except ValueError:
                    pass
                else:
                    refused(document)
            else:
                refused(sent)  # what the server refuses, the schema refuses too
                wire.send_bytes(json.dumps(sent).encode() + b"\n")
            answer = wire.response()
            assert error_of(answer) == (id, code), (sent, answer)

        # Requests the schema accepts, refused for what only the server knows.
        missing = wire.call(50, "trigger", {"hook_id": "no-such-hook"})
        assert error_of(missing) == (50, HOOK_NOT_FOUND)
        assert "no-such-hook" in missing["error"]["message"]
        other = wire.call(51, "emit", {"event": "PreToolUse", "envelope": BASH, "home": str(tmp_path)})
        assert error_of(other) == (51, OTHER_HOME)
        assert other["error"]["data"] == {"home": str(home)}
        # Every error left the connection usable, and blank lines are skipped.
        wire.send_bytes(b"\n   \r\n\t\n")
        assert wire.call(52, "ping")["result"]["home"] == str(home)


@pytest.mark.timeout(60)
def test_trigger_while_hooks_are_off_in_settings_is_hooks_disabled(home: Path, write_hook: Writer) -> None:
    deny_hook(write_hook)
    (home / "settings.json").write_text(json.dumps({"features": {"hooks": False}}))
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        answer = wire.call(1, "trigger", {"hook_id": "guard", "envelope": BASH})
        assert error_of(answer) == (1, HOOKS_DISABLED)
        assert '"hooks": false' in answer["error"]["message"]
        # emit is no error: nothing fires, so the answer is allow.
        assert wire.call(2, "emit", {"event": "PreToolUse", "envelope": BASH})["result"] == {"behavior": "allow"}


@pytest.mark.timeout(60)
def test_a_line_over_16_mib_is_request_too_large_and_the_connection_is_closed(home: Path) -> None:
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        wire.send_bytes(b"{" + b" " * MAX_LINE_BYTES)  # one byte past the cap, no newline yet
        answer = wire.response()
        assert error_of(answer) == (None, REQUEST_TOO_LARGE)
        assert wire.line() == b""  # closed
        with Wire(served.socket or "") as other:  # the server carries on
            assert other.call(1, "ping")["result"]["home"] == str(home)


@pytest.mark.timeout(60)
def test_answers_overtake_and_requests_during_shutdown_are_shutting_down(
    home: Path, write_hook: Writer, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    write_hook(
        "slow", event="UserPromptSubmit", mode="sync",
        command=f"touch {shlex.quote(str(started))}; sleep 3; echo slept",
    )
    with Served(home) as served, Wire(served.wait_ready()) as wire:
        path = served.wait_ready()
        wire.request(1, "emit", {"event": "UserPromptSubmit", "envelope": {"prompt": "hi"}})
        wire.request(2, "ping")
        assert wire.response()["id"] == 2  # the ping overtakes the emit its hook holds
        wait_for(started.exists, 20, "the slow hook to start")

        served.send(signal.SIGTERM)
        wait_for(lambda: not os.path.exists(path), 20, "the socket to be removed")
        wire.request(3, "ping")
        assert error_of(wire.response()) == (3, SHUTTING_DOWN)
        frob = {"jsonrpc": "2.0", "id": 4, "method": "frob"}
        refused(frob)
        wire.send_bytes(json.dumps(frob).encode() + b"\n")  # refused before its method is looked up
        assert error_of(wire.response()) == (4, SHUTTING_DOWN)

        drained = wire.response()  # the emit that was running is answered
        assert drained == {"jsonrpc": "2.0", "id": 1, "result": {"behavior": "context", "context": "slept"}}
        assert wire.line() == b""
        assert served.wait() == 0


_FOREIGN_PEER = r"""
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
try:
    os.seteuid(65534)  # SO_PEERCRED reports this uid
    libc.setfsuid(0)  # while files are still opened as root: the socket's 0600 lets us in
except OSError:
    sys.exit(3)
if libc.setfsuid(-1) != 0:
    sys.exit(3)
sock = socket.socket(socket.AF_UNIX)
sock.settimeout(20)
sock.connect(sys.argv[1])
data = b""
while True:
    chunk = sock.recv(65536)
    if not chunk:
        break
    data += chunk
sock.close()
sys.stdout.write(data.decode("utf-8"))
"""


@pytest.mark.timeout(60)
@pytest.mark.skipif(os.geteuid() != 0, reason="only root can connect as another uid past the socket's mode")
def test_a_peer_of_another_uid_gets_one_permission_denied_line(home: Path) -> None:
    with Served(home) as served:
        result = subprocess.run(
            [sys.executable, "-c", _FOREIGN_PEER, served.wait_ready()],
            capture_output=True, text=True, timeout=30,
        )
        if result.returncode == 3:
            pytest.skip("cannot take another uid here (seteuid/setfsuid refused)")
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert len(lines) == 1, result.stdout
        answer = strict_loads(lines[0])
        check(answer, "errorResponse")
        assert error_of(answer) == (None, PERMISSION_DENIED)
        assert "uid 65534" in answer["error"]["message"]
    assert "refused a connection from uid 65534" in served.stderr


# -- the document -------------------------------------------------------------------------


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def json_examples() -> list[str]:
    return re.findall(r"^```json[ \t]*\n(.*?)^```[ \t]*$", doc_text(), flags=re.DOTALL | re.MULTILINE)


def error_codes() -> dict[int, str]:
    """Every error code constant of hookbus.serve.protocol, by value."""
    return {
        value: name
        for name, value in vars(protocol).items()
        if name.isupper() and type(value) is int and -32768 <= value <= -32000
    }


def test_every_json_example_in_the_doc_is_a_message_of_the_schema() -> None:
    examples = json_examples()
    assert len(examples) >= 10, "docs/protocol.md should show each method and error with JSON examples"
    methods: dict[Any, str] = {}
    seen_methods: set[str] = set()
    seen_codes: set[int] = set()
    for text in examples:
        message = strict_loads(text)
        check(message)
        if "method" in message:
            seen_methods.add(message["method"])
            if "id" in message:
                check(message, "request")
                methods[message["id"]] = message["method"]
            else:
                check(message, "notification")
        elif "result" in message:
            # A response shown after its request answers that request's method.
            method = methods.get(message["id"])
            assert method is not None, f"a response example with no request example before it: {text}"
            check(message, f"{method}Response")
        else:
            check(message, "errorResponse")
            seen_codes.add(message["error"]["code"])
    assert seen_methods >= set(protocol.METHODS)
    assert {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, HOOK_NOT_FOUND} <= seen_codes


def test_every_error_code_of_the_protocol_is_in_the_doc() -> None:
    text = doc_text()
    codes = error_codes()
    assert len(codes) == len(protocol.ERROR_NAMES)
    missing = {name: code for code, name in codes.items() if str(code) not in text}
    assert not missing, f"docs/protocol.md does not mention {missing}"


def test_the_doc_gives_the_limits_the_server_enforces() -> None:
    text = doc_text()
    assert MAX_LINE_BYTES == 16 * 1024 * 1024 and "16 MiB" in text and f"{MAX_LINE_BYTES:,}" in text
    assert f"{MAX_IN_FLIGHT} " in text
    for name in ("SO_PEERCRED", "HOOKBUS_SOCKET", "run/hookbus.sock", "run/serve.lock", "0700", "0600"):
        assert name in text, name
    assert "](http" not in text, "docs/protocol.md stands alone: no links out of the repository"
