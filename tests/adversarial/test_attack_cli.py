"""The command line under attack: model-controlled text, hostile ids, signals, bad usage.

- Promise 3: a terminal never obeys escape sequences that a hook or a model put in a reason
  (``hookbus log``, ``list``, ``emit``), and an envelope nested past Python's limits is one
  line of error, exit 1.
- Promise 6 and 4: Ctrl-C or SIGTERM during ``emit`` or ``trigger`` kills the hooks' own
  process groups (and nothing else), records each fire as interrupted, and exits 130 or 143
  without a traceback.
- Usage errors exit 1, never 2: 2 means "denied" to whoever runs ``hookbus emit``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from attackkit import attack
from conftest import is_alive, read_log
from hookbus import HookBus

Writer = Callable[..., Path]
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
#: What a model could put in a reason: a colour, a cursor move that rewrites the line above,
#: OSC 52 (set the clipboard), OSC 0 (set the title), CSI as one C1 byte, a bidi override.
HOSTILE = "\x1b[31mred\x1b[1A\x1b[2K\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07\x9b31m\u202eevil"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def run(home: Path, *args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOOKBUS, "--home", str(home), *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


def assert_no_raw_controls(*texts: str) -> None:
    for text in texts:
        for raw in RAW:
            assert raw not in text, f"{raw!r} reached the terminal: {text!r}"


# -- usage ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["emit", "Stop", "--bogus"], ["emit"], ["no-such-verb"], ["log", "--limit", "x"], ["--home"]]
)
def test_usage_errors_exit_1_not_the_deny_code(argv: list[str], home: Path) -> None:
    with attack(3, f"usage error: hookbus {' '.join(argv)}"):
        result = subprocess.run([HOOKBUS, *argv], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stderr
        assert "error:" in result.stderr and "Traceback" not in result.stderr


# -- model-controlled text ------------------------------------------------------------------


@pytest.fixture
def hostile_home(home: Path, write_hook: Writer) -> Path:
    """A home whose hooks have denied with a hostile reason and failed with a hostile error."""
    files = {"reason.txt": HOSTILE}
    write_hook("guard", mode="sync", blocking=True, command='cat "$HOOKBUS_HOOK_DIR/reason.txt" >&2; exit 2', files=files)
    write_hook("broken", mode="sync", command='cat "$HOOKBUS_HOOK_DIR/reason.txt" >&2; exit 1', files=files)
    with HookBus(home) as bus:
        assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "deny"
    return home


def test_log_never_prints_escape_sequences(hostile_home: Path) -> None:
    with attack(3, "hookbus log: ESC, OSC 52, C1 CSI and a bidi override in a reason"):
        plain = run(hostile_home, "log")
        assert plain.returncode == 0
        assert_no_raw_controls(plain.stdout, plain.stderr)
        assert "\\x1b[31mred" in plain.stdout  # shown, as an escape


def test_log_json_stays_json_and_safe(hostile_home: Path) -> None:
    with attack(3, "hookbus log --json: the same hostile reason"):
        result = run(hostile_home, "log", "--json")
        assert_no_raw_controls(result.stdout)
        entries = [json.loads(line) for line in result.stdout.splitlines()]
        reasons = [entry["decision"].get("reason") for entry in entries if entry["hook_id"] == "guard"]
        assert reasons == [HOSTILE.strip()]  # the value is intact once decoded


def test_list_and_emit_never_print_escape_sequences(hostile_home: Path) -> None:
    with attack(3, "hookbus list and emit: the same hostile reason"):
        listing = run(hostile_home, "list")
        assert_no_raw_controls(listing.stdout, listing.stderr)
        emitted = run(hostile_home, "emit", "PreToolUse", stdin='{"tool_name": "bash"}')
        assert emitted.returncode == 2
        assert_no_raw_controls(emitted.stdout, emitted.stderr)
        assert HOSTILE.strip() in json.loads(emitted.stdout)["reason"]


@pytest.mark.parametrize("name", ["evil\nok  hooks-fake", "esc\x1b[2Jx", "bidi\u202etxt.sh", "bell\x07", "c1\x9bx"])
def test_hook_ids_with_control_characters_are_refused(name: str, home: Path) -> None:
    with attack(3, f"hook id {name!r}"):
        directory = home / "hooks" / name
        directory.mkdir()
        (directory / "hook.json").write_text(json.dumps({"trigger": {"event": "Stop"}, "command": "true"}))
        with HookBus(home) as bus:
            assert bus.snapshot.hooks == {}
            [problem] = bus.problems
            assert "must be printable text" in problem.message
        validate = run(home, "validate")
        listing = run(home, "list")
        assert validate.returncode == 1
        assert_no_raw_controls(validate.stdout, listing.stdout)
        assert "ok  hooks-fake" not in validate.stdout.splitlines()


def test_a_deep_envelope_is_decided_by_emit_and_refused_by_trigger_in_one_line(home: Path, write_hook: Writer) -> None:
    with attack(3, "hookbus emit: an envelope nested 100,000 deep on stdin"):
        write_hook("h", event="Stop", mode="sync", command="true")
        deep = '{"a":' * 100_000 + "1" + "}" * 100_000
        # Valid JSON a host may send: emit decides it, as each hook's on_error says for a
        # hook hookbus could not run (here: fail open), and says so in one line.
        emitted = run(home, "emit", "Stop", stdin=deep)
        assert (emitted.returncode, emitted.stdout) == (0, '{"behavior": "allow"}\n')
        assert emitted.stderr.count("\n") == 1 and "nested deeper than 10,000 levels" in emitted.stderr
        triggered = run(home, "trigger", "h", stdin=deep)
        assert triggered.returncode == 1
        assert triggered.stderr.count("\n") == 1 and "nested deeper than 10,000 levels" in triggered.stderr
        for result in (emitted, triggered):
            assert "Traceback" not in result.stderr


# -- signals --------------------------------------------------------------------------------


def start(home: Path, *args: str, stdin: str = "{}") -> subprocess.Popen[str]:
    envelope = home.parent / "envelope.json"
    envelope.write_text(stdin)
    return subprocess.Popen(
        [HOOKBUS, "--home", str(home), *args, "--input", str(envelope)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_file(path: Path, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def group_is_gone(pgid: int, timeout: float = 5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(pgid):
            return True
        time.sleep(0.02)
    return False


#: A hook whose process group holds a sleeping child, and which tells its group id.
SLEEPER = 'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; sleep 60 & sleep 60'


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("verb", ["emit", "trigger", "emit-async"])
def test_a_signal_kills_the_hooks_records_the_fire_and_exits_cleanly(
    signum: int, code: int, verb: str, home: Path, write_hook: Writer
) -> None:
    name = signal.Signals(signum).name
    with attack(6, f"{name} during hookbus {verb}"):
        mode = "async" if verb == "emit-async" else "sync"
        write_hook("slow", event="Stop", mode=mode, command=SLEEPER, timeout="50s")
        args = ["trigger", "slow"] if verb == "trigger" else ["emit", "Stop"]
        process = start(home, *args)
        pgid = int(wait_for_file(home / "hooks" / "slow" / "pid"))
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=20)
        assert process.returncode == code, stderr
        assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
        assert group_is_gone(pgid), "the hook's process group outlived the interrupt"
        [entry] = read_log(home)
        assert entry["error"] == f"interrupted by {name}"


@pytest.mark.timeout(60)
def test_an_interrupted_fail_closed_guard_denies(home: Path, write_hook: Writer) -> None:
    with attack(1, "SIGTERM during a blocking guard with on_error deny"):
        write_hook("guard", mode="sync", blocking=True, on_error="deny", command=SLEEPER, timeout="50s")
        process = start(home, "emit", "PreToolUse", stdin='{"tool_name": "bash"}')
        wait_for_file(home / "hooks" / "guard" / "pid")
        process.send_signal(signal.SIGTERM)
        stdout, _ = process.communicate(timeout=20)
        assert process.returncode == 143
        decision: dict[str, Any] = json.loads(stdout)
        assert decision["behavior"] == "deny"
        assert "was killed (interrupted by SIGTERM)" in decision["reason"]


@pytest.mark.timeout(60)
def test_an_interrupt_signals_only_the_hooks_own_processes(home: Path, write_hook: Writer, tmp_path: Path) -> None:
    with attack(6, "SIGINT during emit, with a bystander process of the same user"):
        bystander = subprocess.Popen(["sleep", "60"])
        try:
            write_hook("slow", event="Stop", mode="sync", command=SLEEPER, timeout="50s")
            process = start(home, "emit", "Stop")
            wait_for_file(home / "hooks" / "slow" / "pid")
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=20)
            assert process.returncode == 130
            assert bystander.poll() is None and is_alive(bystander.pid)
        finally:
            bystander.kill()
            bystander.wait()
    assert os.getpgid(0)  # the test's own group was never signalled either
