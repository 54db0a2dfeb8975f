"""Shadow hooks (``"shadow": true``) against promises 1 and 3: a shadow hook runs beside the
enforcing hooks and is recorded, but whatever it does, it holds nothing and changes nothing
that is enforced.

- Promise 3: ``emit``, ``hookbus emit`` and the bridges return (and exit) once the enforcing
  hooks are done, whatever a shadow hook does: one that never ends, many at once, one that
  floods its output, one with an hour-long timeout on an event where only it matches. A
  one-shot command kills what is still running and records each, before it exits; a
  ``hookbus serve`` answers at once and lets them run on.
- Promise 1: shadow hooks that pile up (a host emits faster than they finish) never take
  what an enforcing hook needs: past ``MAX_RUNNING_SHADOWS`` running, a shadow hook is not
  run, and is recorded so; no failure of one, and no way it is stopped, ever denies; its
  ``continue_with`` keeps no agent going, nor the Stop memory.

Every attack asserts on behaviour (the decision, the exit, which processes live, what the
log holds), never on a wall-clock figure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import FIGURES, attack, scale
from conftest import live_processes_in_group, processes_with, read_log
from hookbus import HookBus

pytestmark = pytest.mark.timeout(180)

Writer = Callable[..., Path]
MakeBus = Callable[..., HookBus]
DENY = "echo '{\"behavior\": \"deny\", \"reason\": \"no\"}'"
LS = {"tool_name": "bash", "tool_input": {"command": "ls"}}
CLAUDE_BASH = {"hook_event_name": "PreToolUse", "session_id": "s-1", "cwd": "/", "tool_name": "Bash", "tool_input": {"command": "ls"}}
GEMINI_SHELL = {"hook_event_name": "BeforeTool", "session_id": "g-1", "cwd": "/", "tool_name": "run_shell_command", "tool_input": {"command": "ls"}}
#: A shadow hook that runs until it is killed, and says first that it has started.
FOREVER = 'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; sleep 600'


@pytest.fixture
def marker() -> Iterator[str]:
    """A value for ``$SHADOW_ATTACK`` in every shadow hook's environment, by which a test
    finds each process its shadow hooks left (and kills what a failing test left)."""
    value = uuid.uuid4().hex
    yield value
    for pid in processes_with("SHADOW_ATTACK", value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def shadows(home: Path) -> list[dict[str, Any]]:
    return [entry for entry in read_log(home) if entry.get("shadow")]


def write_forever(
    write_hook: Writer, home: Path, marker: str, count: int = 1, event: str = "PreToolUse", timeout: str = "10m", **fields: Any
) -> list[Path]:
    """``count`` shadow hooks that never end (within ``timeout``), and their directories."""
    for index in range(count):
        write_hook(f"shadow-{index:03d}", event=event, mode="sync", blocking=event != "Stop", shadow=True, timeout=timeout,
                   command=FOREVER, env={"SHADOW_ATTACK": marker}, **fields)
    return [home / "hooks" / f"shadow-{index:03d}" for index in range(count)]


def write_guard_after(write_hook: Writer, started: Path) -> None:
    """An enforcing deny that answers only once ``started`` exists: the shadow hook is
    provably running when the decision is made."""
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, timeout="60s",
               command=f'while [ ! -s "{started}" ]; do sleep 0.01; done; {DENY}')


def run(*arguments: str, input: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments], input=json.dumps(input), capture_output=True, text=True, timeout=120,
    )


def assert_none_left(marker: str) -> None:
    assert processes_with("SHADOW_ATTACK", marker) == [], "a shadow hook outlived what fired it"


# -- promise 3: nothing waits for a shadow hook --------------------------------------------------------


@pytest.mark.parametrize("verb, envelope, code", [
    ("emit", LS, 2), ("claude-code-hook", CLAUDE_BASH, 0), ("gemini-cli-hook", GEMINI_SHELL, 0),
])
def test_a_shadow_hook_that_never_ends_holds_no_command(
    write_hook: Writer, home: Path, marker: str, verb: str, envelope: dict[str, Any], code: int
) -> None:
    with attack(3, f"a shadow hook that never ends does not hold hookbus {verb}"):
        [directory, *_] = write_forever(write_hook, home, marker, scale(2, 8))
        write_guard_after(write_hook, directory / "pid")
        result = run(verb, *(["PreToolUse"] if verb == "emit" else []), "--home", str(home), input=envelope)
        assert result.returncode == code and "deny" in result.stdout, (result.stdout, result.stderr)
        assert_none_left(marker)
        records = shadows(home)
        assert len(records) == scale(2, 8) and {record["enforced"] for record in records} == {"deny"}
        assert all(record["status"] == "error" and f"hookbus {verb} exited" in record["error"] for record in records)


def test_a_shadow_hook_that_leaves_a_process_holding_its_pipes_holds_no_command(write_hook: Writer, home: Path, marker: str) -> None:
    """A process that left the shadow hook's group (setsid) keeps its stdout open: it is
    not provably the hook's, so it is left alone (promise 6), but it holds neither the
    command nor the host's pipe to it (subprocess.run reads that to its end)."""
    with attack(3, "a shadow hook leaves a process behind that holds its pipes"):
        write_hook("escape", mode="sync", blocking=True, shadow=True, timeout="10m", env={"SHADOW_ATTACK": marker},
                   command='setsid sleep 600 & echo $$ > "$HOOKBUS_HOOK_DIR/pid"; sleep 600')
        write_guard_after(write_hook, home / "hooks" / "escape" / "pid")
        result = run("claude-code-hook", "--home", str(home), input=CLAUDE_BASH)
        assert json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny", result.stderr
        assert not live_processes_in_group(int((home / "hooks" / "escape" / "pid").read_text()))
        [record] = shadows(home)
        assert (record["status"], record["enforced"]) == ("error", "deny")


def test_many_shadow_hooks_at_once_hold_no_emit(make_bus: MakeBus, write_hook: Writer, home: Path, marker: str) -> None:
    with attack(3, "many shadow hooks at once: the emit returns with the enforcing hooks"):
        count = scale(16, 64)
        directories = write_forever(write_hook, home, marker, count)
        write_guard_after(write_hook, directories[-1] / "pid")
        bus = make_bus()
        decision = bus.emit("PreToolUse", LS)
        assert decision.behavior == "deny" and decision.denied_by == ("guard",)
        FIGURES["shadow: hooks running beside one emit"] = max(FIGURES["shadow: hooks running beside one emit"], count)
        bus.close(timeout=0)
        assert_none_left(marker)
        assert len(shadows(home)) == count


def test_a_shadow_hooks_output_flood_holds_nothing(make_bus: MakeBus, write_hook: Writer, home: Path, marker: str) -> None:
    with attack(3, "a shadow hook floods its stdout"):
        write_hook("flood", mode="sync", blocking=True, shadow=True, timeout="10m", env={"SHADOW_ATTACK": marker},
                   command=f"head -c {scale(8, 64)}000000 /dev/zero")
        write_hook("guard", mode="sync", blocking=True, command=DENY)
        bus = make_bus()
        assert bus.emit("PreToolUse", LS).behavior == "deny"
        bus.close()
        assert_none_left(marker)
        [record] = shadows(home)
        assert record["enforced"] == "deny" and "went over" in record["error"]


def test_a_shadow_hook_alone_with_an_hour_long_timeout(make_bus: MakeBus, write_hook: Writer, home: Path, marker: str) -> None:
    with attack(3, "a lone shadow hook with a 1h timeout: allowed at once, the command exits"):
        write_forever(write_hook, home, marker, event="UserPromptSubmit", timeout="1h")
        bus = make_bus()
        waits: list[float] = []
        future = bus.submit("UserPromptSubmit", {"prompt": "hi"}, on_start=waits.append)
        assert future.done() and future.result().behavior == "allow" and waits == []
        bus.close(timeout=0)
        result = run("emit", "UserPromptSubmit", "--home", str(home), input={"prompt": "hi"})
        assert result.returncode == 0 and json.loads(result.stdout) == {"behavior": "allow"}, result.stderr
        assert_none_left(marker)
        assert len(shadows(home)) == 2


def test_a_server_answers_without_waiting_and_lets_shadow_hooks_run_on(write_hook: Writer, home: Path, marker: str) -> None:
    from servekit import Served

    with attack(3, "through hookbus serve, the answer does not wait for a shadow hook"):
        [directory] = write_forever(write_hook, home, marker)
        write_guard_after(write_hook, directory / "pid")
        with Served(home):
            result = run("claude-code-hook", "--home", str(home), input=CLAUDE_BASH)
            assert json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny", result.stderr
            assert live_processes_in_group(int((directory / "pid").read_text())), "the server killed it, or waited for it"
            assert shadows(home) == []  # it runs on in the server
        # The server's close cuts it short, and records it.
        assert_none_left(marker)
        [record] = shadows(home)
        assert (record["status"], record["enforced"]) == ("error", "deny")


# -- promise 1: a shadow hook changes nothing that is enforced ----------------------------------------


def test_shadow_hooks_piling_up_never_take_what_enforcing_hooks_need(
    make_bus: MakeBus, write_hook: Writer, home: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hookbus.dispatch

    with attack(1, "shadow hooks that never end, fired faster than they finish"):
        bound = scale(4, 64)
        monkeypatch.setattr(hookbus.dispatch, "MAX_RUNNING_SHADOWS", bound)
        write_forever(write_hook, home, marker)
        write_hook("guard", mode="sync", blocking=True, command=DENY)
        bus = make_bus()
        emits = bound + scale(8, 64)
        assert all(bus.emit("PreToolUse", LS).behavior == "deny" for _ in range(emits))
        running = processes_with("SHADOW_ATTACK", marker)
        # Each shadow hook is a bash and its sleep: never more than the bound's worth.
        assert len(running) <= 2 * bound
        skipped = [record for record in shadows(home) if "not run" in (record.get("error") or "")]
        assert len(skipped) >= emits - bound and {record["enforced"] for record in skipped} == {"deny"}
        FIGURES["shadow: fires past the bound, recorded as not run"] += len(skipped)
        bus.close(timeout=0)
        assert_none_left(marker)
        assert len(shadows(home)) == emits, "every shadow fire is recorded, run or not"


def test_a_fail_closed_shadow_hook_never_denies_however_it_is_stopped(make_bus: MakeBus, write_hook: Writer, home: Path, marker: str) -> None:
    from conftest import turn_off_home_guard

    with attack(1, "a fail-closed shadow hook cut short, interrupted or undecided"):
        turn_off_home_guard(home)  # it fails closed itself when hookbus cannot decide
        write_forever(write_hook, home, marker, on_error="deny")
        bus = make_bus()
        assert bus.emit("PreToolUse", LS).behavior == "allow"
        assert bus.undecided("PreToolUse", LS, "the envelope could not be read").behavior == "allow"
        bus.interrupt("interrupted by SIGTERM")
        bus.close(timeout=0)
        result = run("emit", "PreToolUse", "--home", str(home), input=LS)
        assert result.returncode == 0 and json.loads(result.stdout) == {"behavior": "allow"}, result.stderr
        assert_none_left(marker)
        records = shadows(home)
        assert len(records) == 3 and all(record["status"] == "error" and "decision" not in record for record in records)


def test_a_shadow_hooks_continue_with_keeps_no_agent_going(make_bus: MakeBus, write_hook: Writer, home: Path) -> None:
    with attack(1, "a shadow hook says continue_with on Stop"):
        # Claude Code's way to keep the agent going: exit 2 on Stop, the reason on stderr.
        write_hook("keep-going", event="Stop", mode="sync", shadow=True, dialect="claude-code", command="echo 'go on' >&2; exit 2")
        seen = home / "seen.jsonl"
        write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=f"cat >> {seen}; echo >> {seen}")
        bus = make_bus()
        stop = {"thread_id": "t-1", "last_message": "done"}
        first, second = bus.emit("Stop", stop), bus.emit("Stop", stop)
        assert first.continue_with is None and second.continue_with is None
        flags = [json.loads(line).get("stop_hook_active") for line in seen.read_text().splitlines() if line.strip()]
        assert flags == [None, None], "the shadow hook's continue_with reached the Stop memory"
        bus.close()
        assert [record["decision"].get("continue_with") for record in shadows(home)] == ["go on", "go on"]
