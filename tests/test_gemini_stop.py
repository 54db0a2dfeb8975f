"""Gemini CLI's Stop (AfterAgent) and ``stop_hook_active``, for hooks of every kind.

Claude Code tells a Stop hook ``stop_hook_active: true`` when the agent stops again after a
Stop hook kept it going, so a gate that checks only that flag lets the second stop through.
Gemini CLI sends ``stop_hook_active: false`` on every AfterAgent: without hookbus's own
memory a native gate (no dialect) would keep the agent going until Gemini's loop detector
ended it. Each bridge call is a process of its own, so the memory is kept on disk, private
to the user; these tests point it at a directory of their own (``XDG_STATE_HOME``).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from hookbus.dialects import stopguard
from hookbus.hosts.bridge import GEMINI_CLI
from servekit import Served, environment

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]

#: A native gate: it keeps the agent going unless the envelope says it did once already, and
#: notes each envelope it got.
NATIVE_GATE = (
    'input=$(cat); printf "%s\\n" "$input" >> "$HOOKBUS_HOOK_DIR/seen.jsonl"; '
    "if printf '%s' \"$input\" | jq -e '.stop_hook_active == true' > /dev/null; then exit 0; fi; "
    """echo '{"decision": "block", "reason": "run the tests"}'"""
)
#: The same gate written for Claude Code (``"dialect": "claude-code"``): exit 2 keeps it going.
DIALECT_GATE = (
    'input=$(cat); printf "%s\\n" "$input" >> "$HOOKBUS_HOOK_DIR/seen.jsonl"; '
    "case \"$input\" in *'\"stop_hook_active\":true'*) exit 0;; esac; "
    'echo "run the tests" >&2; exit 2'
)


def after_agent(session: str = "g-1") -> dict[str, Any]:
    return {
        "hook_event_name": "AfterAgent", "session_id": session, "transcript_path": f"/tmp/{session}.json", "cwd": "/",
        "timestamp": "2026-12-01T00:00:00Z", "prompt": "p", "prompt_response": "done", "stop_hook_active": False,
    }


@pytest.fixture
def memory_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a bridge whose Stop memory lives in this test's directory."""
    return environment(XDG_STATE_HOME=str(tmp_path / "state"), XDG_RUNTIME_DIR=None, HOOKBUS_SOCKET=None, VIX_HOME=None)


def gemini(home: Path, envelope: dict[str, Any], env: dict[str, str], *extra: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "gemini-cli-hook", "--home", str(home), *extra],
        input=json.dumps(envelope), capture_output=True, text=True, timeout=60, env=env,
    )
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def seen_flags(hook_dir: Path) -> list[object]:
    return [json.loads(line).get("stop_hook_active", "absent") for line in (hook_dir / "seen.jsonl").read_text().splitlines()]


KEEP_GOING = {"decision": "deny", "reason": "run the tests"}


@pytest.mark.parametrize("path", ["in-process", "through a server"])
def test_a_native_stop_gate_lets_the_second_stop_through(path: str, home: Path, write_hook: Writer, memory_env: dict[str, str]) -> None:
    native = write_hook("native", event="Stop", mode="sync", command=NATIVE_GATE).parent
    dialect = write_hook("dialect", event="Stop", mode="sync", dialect="claude-code", command=DIALECT_GATE).parent
    if path == "in-process":
        answers = [gemini(home, after_agent(), memory_env, "--no-server") for _ in range(3)]
    else:
        with Served(home, env=memory_env):
            answers = [gemini(home, after_agent(), memory_env) for _ in range(3)]
    # Go on (both gates say so, joined); then stop (each saw it kept the agent going once);
    # then a new round.
    both = {"decision": "deny", "reason": "run the tests\n\nrun the tests"}
    assert answers == [both, {}, both]
    assert seen_flags(native) == ["absent", True, "absent"]
    assert seen_flags(dialect) == ["absent", True, "absent"]


def test_the_memory_holds_when_a_session_moves_between_a_server_and_in_process(
    home: Path, write_hook: Writer, memory_env: dict[str, str]
) -> None:
    """A server that starts (or stops) in the middle of a session: the same memory."""
    native = write_hook("native", event="Stop", mode="sync", command=NATIVE_GATE).parent
    assert gemini(home, after_agent(), memory_env, "--no-server") == KEEP_GOING
    with Served(home, env=memory_env):
        assert gemini(home, after_agent(), memory_env) == {}
        assert gemini(home, after_agent(), memory_env) == KEEP_GOING
    assert gemini(home, after_agent(), memory_env, "--no-server") == {}
    assert seen_flags(native) == ["absent", True, "absent", True]


def test_each_session_has_its_own_memory(home: Path, write_hook: Writer, memory_env: dict[str, str]) -> None:
    native = write_hook("native", event="Stop", mode="sync", command=NATIVE_GATE).parent
    assert gemini(home, after_agent("a"), memory_env, "--no-server") == KEEP_GOING
    assert gemini(home, after_agent("b"), memory_env, "--no-server") == KEEP_GOING  # not a's
    assert gemini(home, after_agent("a"), memory_env, "--no-server") == {}
    assert seen_flags(native) == ["absent", "absent", True]


def test_a_true_flag_from_the_host_is_kept(home: Path, write_hook: Writer, memory_env: dict[str, str]) -> None:
    native = write_hook("native", event="Stop", mode="sync", command=NATIVE_GATE).parent
    assert gemini(home, {**after_agent(), "stop_hook_active": True}, memory_env, "--no-server") == {}
    assert seen_flags(native) == [True]


def test_the_memory_is_private_and_holds_no_id(home: Path, write_hook: Writer, memory_env: dict[str, str], tmp_path: Path) -> None:
    write_hook("native", event="Stop", mode="sync", command=NATIVE_GATE)
    session = "secret-session-" + "x" * 5000  # a host may send any id: the memory keeps a digest
    assert gemini(home, after_agent(session), memory_env, "--no-server") == KEEP_GOING
    directory = tmp_path / "state" / "hookbus" / "stops"
    info = directory.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (os.geteuid(), 0o700)
    [entry] = list(directory.iterdir())
    assert len(entry.name) == 2 * stopguard.DIGEST_BYTES and "secret" not in entry.name
    assert (stat.S_IMODE(entry.stat().st_mode), entry.stat().st_size) == (0o600, 0)
    assert gemini(home, after_agent(session), memory_env, "--no-server") == {}
    assert list(directory.iterdir()) == []  # answered "stop": forgotten


def test_a_missing_memory_is_made_only_to_remember(home: Path, write_hook: Writer, memory_env: dict[str, str], tmp_path: Path) -> None:
    """Stops answered "stop" (most of them) write nothing at all."""
    assert gemini(home, after_agent(), memory_env, "--no-server") == {}
    assert not (tmp_path / "state").exists()


def test_the_memory_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stopguard, "MAX_REMEMBERED_FILES", 5)
    environ = {"XDG_STATE_HOME": str(tmp_path / "state")}
    for index in range(12):
        assert stopguard.remember_stop(environ, "Stop", {"thread_id": f"t-{index}"}, continued=True) is None
    directory = tmp_path / "state" / "hookbus" / "stops"
    assert len(list(directory.iterdir())) == 5
    assert stopguard.remembered_stop(environ, "Stop", {"thread_id": "t-11"})  # the newest are kept
    assert not stopguard.remembered_stop(environ, "Stop", {"thread_id": "t-0"})


def test_a_memory_that_cannot_be_written_is_said_and_never_fails_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the answer stands, one note says the next stop will not be known."""
    import errno

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    real_open = os.open

    def full(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full)
    request = GEMINI_CLI.request(after_agent(), os.environ)
    assert request is not None
    output, notes = GEMINI_CLI.answer("AfterAgent", request[0], request[1], {"behavior": "allow", "continue_with": "go on"})
    assert output == {"decision": "deny", "reason": "go on"}
    assert len(notes) == 1 and "No space left on device" in notes[0] and "stop_hook_active" in notes[0]


def test_the_memory_costs_the_quick_path_no_heavy_import(
    home: Path, write_hook: Writer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On its way to a server, the bridge imports built-in modules only: the memory adds the
    C core of BLAKE2 (hashlib would bring OpenSSL's bindings), on Stop alone."""
    from servekit import BUILT_INS, imported_modules

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    write_hook("native", event="Stop", mode="sync", command=NATIVE_GATE)
    with Served(home):
        for expected in (KEEP_GOING, {}):  # remember; then read and forget
            result, imported = imported_modules("-m", "hookbus", "gemini-cli-hook", "--home", str(home), input=json.dumps(after_agent()))
            assert json.loads(result.stdout) == expected, result.stderr
            assert {name for name in imported if not name.startswith("hookbus.")} <= BUILT_INS | {"hookbus", "_blake2"}, sorted(imported)
            assert not {"hookbus.cli", "hookbus.serve.client", "hookbus.bus", "hookbus.events"} & imported


def test_an_envelope_whose_ids_are_no_text_leaves_no_descriptor_open(tmp_path: Path) -> None:
    """A thread id that is neither text nor a number names no entry: the memory's directory,
    open already, is closed all the same (a server's bridge process would leak one a call)."""
    environ = {"XDG_STATE_HOME": str(tmp_path / "state")}
    assert stopguard.remember_stop(environ, "Stop", {"thread_id": "t"}, continued=True) is None
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        assert not stopguard.remembered_stop(environ, "Stop", {"thread_id": ["not", "text"]})
    assert len(os.listdir("/proc/self/fd")) == before


def test_the_bound_forgets_only_entries_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound, the oldest entries go: never a file the memory did not make (the
    directory is found through places the environment names, and may not be the one it
    made), nor a directory."""
    monkeypatch.setattr(stopguard, "MAX_REMEMBERED_FILES", 2)
    environ = {"XDG_STATE_HOME": str(tmp_path / "state")}
    directory = tmp_path / "state" / "hookbus" / "stops"
    directory.mkdir(parents=True, mode=0o700)
    (directory / "notes.txt").write_text("mine\n")
    (directory / ("0" * 2 * stopguard.DIGEST_BYTES)).mkdir()
    os.utime(directory / "notes.txt", (0, 0))
    for index in range(4):
        assert stopguard.remember_stop(environ, "Stop", {"thread_id": f"t-{index}"}, continued=True) is None
    assert (directory / "notes.txt").read_text() == "mine\n"
    assert (directory / ("0" * 2 * stopguard.DIGEST_BYTES)).is_dir()
    assert [stopguard.remembered_stop(environ, "Stop", {"thread_id": f"t-{index}"}) for index in range(4)] == [False, False, True, True]
