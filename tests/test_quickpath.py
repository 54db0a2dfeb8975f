"""``hookbus``'s quick path to a live server (``hookbus.serve.quickpath``): what it answers says
exactly what the full command line says, and whatever it cannot answer the full command
line gets whole, stdin included.

Attacks: envelopes the built-in JSON reader must not take on trust (NaN, lone surrogates,
nesting 100,000 deep, bytes that are not UTF-8, duplicate keys), decisions that must be made
safe for a terminal, arguments spelt every way argparse accepts, and servers that are not
what they seem (one that hangs up, answers garbage, says internal error, or refuses every
request).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hookbus.serve.rendezvous import reachable

from conftest import read_log, turn_off_home_guard
from hookbus.serve import leanjson
from servekit import Served, environment, hookbus

pytestmark = pytest.mark.timeout(90)

Writer = Callable[..., Path]
BASH = json.dumps({"tool_name": "bash", "tool_input": {"command": "ls"}})


def same_both_ways(home: Path, *arguments: str, input: str | bytes = "") -> subprocess.CompletedProcess[bytes]:
    """Run ``arguments`` in-process and through a server; assert they print and exit alike."""
    data = input.encode() if isinstance(input, str) else input

    def run() -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([sys.executable, "-m", "hookbus", *arguments], input=data, capture_output=True, timeout=60)

    alone = run()
    with Served(home):
        served = run()
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    return alone


# -- the built-in JSON reader and writer -----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "{}", ' \t\n{"a": [1, 2.5, -0, 1e400, "\\u00e9", null, true, false]}\r\n', '{"a": 1, "a": 2}',
        '"s"', "[1, 2]", "123", '{"é": "ü\\ud83d\\ude00"}', '{"a": "\\ud800"}',
    ],
)
def test_lean_loads_reads_what_json_loads_reads(text: str) -> None:
    assert leanjson.loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "{", '{"a": 1}x', '{"a": NaN}', "Infinity", "-Infinity", '{"a": "\x01"}', "[" * 100_000 + "]" * 100_000, "{'a': 1}", "\ufeff{}"],
)
def test_lean_loads_refuses_what_it_cannot_read_as_json_would(text: str) -> None:
    with pytest.raises(leanjson.LeanJSONError):
        leanjson.loads(text)


@pytest.mark.parametrize(
    "value",
    [{"behavior": "deny", "reason": "é\u202e\x1b[2J", "input": {"k": [1, 2.5, None, True]}}, [], "x", {"a": "\ud800"}, {1: 2}],
)
@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("separators", [(", ", ": "), (",", ":")])
def test_lean_dumps_writes_what_json_dumps_writes(value: Any, ensure_ascii: bool, separators: tuple[str, str]) -> None:
    assert leanjson.dumps(value, ensure_ascii=ensure_ascii, separators=separators) == json.dumps(
        value, ensure_ascii=ensure_ascii, separators=separators
    )


@pytest.mark.parametrize("value", [{"a": float("nan")}, [float("inf")], {"a": object()}, {(1, 2): 3}])
def test_lean_dumps_refuses_what_is_not_json(value: Any) -> None:
    with pytest.raises(leanjson.LeanJSONError):
        leanjson.dumps(value)


# -- the same answer, whichever way -----------------------------------------------------------


@pytest.mark.parametrize(
    "stdin",
    [
        pytest.param('{"tool_name": "bash", "n": NaN}', id="NaN"),
        pytest.param('{"tool_name": "bash", "name": "\\udce9"}', id="lone surrogate"),
        pytest.param(b'{"tool_name": "bash", "name": "\xff\xfe"}', id="not UTF-8"),
        pytest.param('{"tool_name": "ls", "tool_name": "bash"}', id="duplicate keys"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="nested 100,000 deep"),
        pytest.param('{"tool_name": "bash"} {"x": 1}', id="two documents"),
        pytest.param(" \n\t ", id="blank"),
        pytest.param("\ufeff" + BASH, id="byte order mark"),
    ],
)
def test_envelopes_the_quick_path_does_not_take_get_the_full_answer(home: Path, write_hook: Writer, stdin: str | bytes) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > /dev/null; echo "no" >&2; exit 2')
    same_both_ways(home, "emit", "PreToolUse", "--home", str(home), input=stdin)


@pytest.mark.parametrize(
    "reason",
    ["plain", "é and ü", "\x1b]52;c;aGVsbG8=\x07 clipboard", "\u202eevil\u202c", "del\x7f", "\x9b2J c1", "a\u2028line"],
)
def test_a_decision_is_printed_safe_for_a_terminal_either_way(home: Path, write_hook: Writer, reason: str) -> None:
    decision = json.dumps({"behavior": "deny", "reason": reason})
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command=f"cat > /dev/null; printf '%s' {json.dumps(decision)}")
    result = same_both_ways(home, "emit", "PreToolUse", "--home", str(home), input=BASH)
    assert result.returncode == 2
    printed = result.stdout.decode()
    assert json.loads(printed)["reason"].endswith(reason)
    assert not any(character in printed for character in "\x1b\x7f\x9b\u202e\u2028")


@pytest.mark.parametrize(
    "spelling",
    [
        ("emit", "PreToolUse", "--home", "{home}"),
        ("emit", "PreToolUse", "--home={home}", "--input=-"),
        ("--home", "{home}", "emit", "PreToolUse", "--input", "-"),
        ("emit", "--home", "{home}", "PreToolUse"),
        ("emit", "PreToolUse", "--home", "{home}", "--hom", "{home}"),
        ("emit", "PreToolUse", "--home", "{home}", "--home", "{home}"),
        ("emit", "PreToolUse", "--home", "{home}", "--input", "{envelope}"),
        ("emit", "PreToolUse", "--home", "{home}", "--socket", "{socket}"),
    ],
)
def test_every_spelling_argparse_takes_answers_the_same(home: Path, write_hook: Writer, tmp_path: Path, spelling: tuple[str, ...]) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > /dev/null; echo "no" >&2; exit 2')
    envelope = tmp_path / "envelope.json"
    envelope.write_text(BASH)
    socket_path = str(home / "run" / "hookbus.sock")
    arguments = [word.format(home=home, envelope=envelope, socket=socket_path) for word in spelling]
    result = same_both_ways(home, *arguments, input=BASH)
    assert result.returncode in (1, 2)


@pytest.mark.parametrize(
    "arguments",
    [("emit", "-h"), ("--help",), ("emit", "Nope"), ("emit",), ("emit", "Stop", "extra"), ("emit", "Stop", "--input"), ("emit", "Stop", "--socket", "-x")],
)
def test_what_argparse_explains_it_explains_either_way(home: Path, arguments: tuple[str, ...]) -> None:
    same_both_ways(home, *arguments[:1], "--home", str(home), *arguments[1:])


def test_the_quick_path_answers_once_and_records_once(home: Path, write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="cat > /dev/null; exit 0")
    with Served(home):
        result = hookbus("emit", "PreToolUse", "--home", str(home), input=BASH)
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"behavior": "allow"}\n', "")
    assert len(read_log(home)) == 1


# -- servers that are not what they seem ------------------------------------------------------


class FakeServer:
    """Listens on the home's socket and answers every request line with ``answer(line)``
    (None: hang up without a word). Counts the requests it got."""

    def __init__(self, home: Path, answer: Callable[[bytes], bytes | None]) -> None:
        run = home / "run"
        run.mkdir(mode=0o700, exist_ok=True)
        self.path = str(run / "hookbus.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with reachable(self.path) as address:  # a deep TMPDIR: past sun_path
            self.listener.bind(address)
        self.listener.listen(8)
        self.answer = answer
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                line = connection.makefile("rb").readline()
                if not line:
                    continue
                self.requests.append(line)
                reply = self.answer(line)
                if reply is not None:
                    connection.sendall(reply)

    def close(self) -> None:
        # shutdown() wakes the thread blocked in accept() (close() alone does not, on Linux):
        # it returns at once instead of after join's 5 s.
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        os.unlink(self.path)
        self.thread.join(5)


@pytest.fixture
def fake(home: Path) -> Iterator[Callable[[Callable[[bytes], bytes | None]], FakeServer]]:
    servers: list[FakeServer] = []

    def start(answer: Callable[[bytes], bytes | None]) -> FakeServer:
        servers.append(FakeServer(home, answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def error_line(code: int, message: str) -> Callable[[bytes], bytes]:
    def answer(line: bytes) -> bytes:
        request = json.loads(line)
        return json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": {"code": code, "message": message}}).encode() + b"\n"

    return answer


def started_then(rest: bytes | None) -> Callable[[bytes], bytes]:
    """A server that says it started the request's hooks, then ``rest`` (None: hangs up)."""

    def answer(line: bytes) -> bytes:
        request = json.loads(line)
        started = {"jsonrpc": "2.0", "method": "started", "params": {"id": request["id"], "wait": 0.5}}
        return json.dumps(started).encode() + b"\n" + (rest or b"")

    return answer


def internal_error(line: bytes) -> bytes:
    request = json.loads(line)
    started = {"jsonrpc": "2.0", "method": "started", "params": {"id": request["id"], "wait": 0.5}}
    error = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "internal error: KeyError: 'x'"}}
    return json.dumps(started).encode() + b"\n" + json.dumps(error).encode() + b"\n"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (started_then(None), "closed the connection before answering, after it had started the hooks"),
        (started_then(b"not json\n"), "after it had started the hooks"),
        (started_then(b'{"jsonrpc": "2.0", "id": 1, "result": "allow"}\n'), "sent no decision"),
        (internal_error, "internal error: KeyError: 'x'"),
    ],
    ids=["hangs up", "garbage", "no decision", "internal error"],
)
@pytest.mark.parametrize("on_error", ["allow", "deny"])
def test_a_server_that_fails_after_it_started_the_hooks_is_decided_by_on_error_and_nothing_runs_again(
    home: Path, write_hook: Writer, fake: Any, answer: Callable[[bytes], bytes | None], said: str, on_error: str
) -> None:
    """The hooks may have run in the server: they must not run a second time here, and the
    decision is what each hook's on_error says for a failure, never a bare exit 1 (which a
    host takes for "no opinion")."""
    write_hook(
        "marker", matcher="bash", mode="sync", blocking=True, on_error=on_error,
        command='cat > /dev/null; touch "$HOOKBUS_HOOK_DIR/ran"',
    )
    turn_off_home_guard(home)  # the user's hook's on_error is what is tested
    server = fake(answer)
    result = hookbus("emit", "PreToolUse", "--home", str(home), input=BASH)
    assert said in result.stderr and "Traceback" not in result.stderr
    decision = json.loads(result.stdout)
    if on_error == "deny":
        assert (result.returncode, decision["behavior"]) == (2, "deny")
        assert "could not be decided by hookbus" in decision["reason"] and said in decision["reason"]
    else:
        assert (result.returncode, decision) == (0, {"behavior": "allow"})
        assert "failed open (could not be decided by hookbus)" in result.stderr
    assert len(server.requests) == 1
    assert not (home / "hooks" / "marker" / "ran").exists()
    assert [entry["note"] for entry in read_log(home)] == [
        'failed closed ("on_error": "deny")' if on_error == "deny" else "not run: hookbus could not decide, so it failed as its on_error says"
    ]


@pytest.mark.parametrize(
    "answer",
    [lambda line: None, lambda line: b"not json\n", error_line(-32602, "invalid params: the server says no")],
    ids=["hangs up", "garbage", "refuses"],
)
def test_a_server_that_fails_before_it_started_anything_leaves_the_hooks_to_this_process(
    home: Path, write_hook: Writer, fake: Any, answer: Callable[[bytes], bytes | None]
) -> None:
    """No "started", or an error that says nothing ran: the hooks run here, once, and the
    server's failure is said on stderr."""
    write_hook("marker", matcher="bash", mode="sync", command='cat > /dev/null; touch "$HOOKBUS_HOOK_DIR/ran"')
    server = fake(answer)
    result = hookbus("emit", "PreToolUse", "--home", str(home), input=BASH)
    assert (result.returncode, result.stdout) == (0, '{"behavior": "allow"}\n')
    assert "running in-process" in result.stderr and "Traceback" not in result.stderr
    assert len(server.requests) == 1
    assert (home / "hooks" / "marker" / "ran").exists()


def test_a_server_of_another_home_is_warned_about_once(home: Path, write_hook: Writer, tmp_path: Path) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > /dev/null; echo "no" >&2; exit 2')
    other = tmp_path / "other"
    (other / "hooks").mkdir(parents=True)
    with Served(other, "--socket", str(tmp_path / "other.sock")) as served:
        result = hookbus("emit", "PreToolUse", "--home", str(home), input=BASH, env=environment(HOOKBUS_SOCKET=served.wait_ready()))
    assert result.returncode == 2
    assert result.stderr.count("running in-process") == 1
