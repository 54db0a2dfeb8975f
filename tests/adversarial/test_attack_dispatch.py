"""Promises 1 and 3 against load (T4), hostile input (T2) and hostile hooks (T3).

1. A blocking hook's deny is never lost to other hooks or other emits: it is lost only when
   that hook itself fails, and then its record says so truthfully.
3. ``emit`` returns within the matched hooks' own timeouts plus a small bound, and raises a
   HookBusError (never anything else) for an envelope it cannot encode; the workers that run
   async hooks never die.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from attackkit import FIGURES, attack
from conftest import hook_processes, read_log
from hookbus import HookBus, HookBusError, HookCall, Outcome, ParseContext, RunnerRegistration, hookimpl

Maker = Callable[..., HookBus]
Writer = Callable[..., Path]
DENY = "echo 'guarded' >&2; exit 2"


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def log_of(home: Path, hook_id: str) -> list[dict[str, Any]]:
    return [entry for entry in read_log(home) if entry["hook_id"] == hook_id]


# -- T4: a pool filled by slow hooks --------------------------------------------------------


@pytest.mark.timeout(120)
def test_slow_hooks_ahead_of_a_deny_cannot_starve_it(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with attack(1, "32 slow non-blocking sync hooks sorting ahead of a blocking deny"):
        # As many as hookbus once had threads for sync hooks: the deny queued behind them.
        slow = 32
        for index in range(slow):
            write_hook(f"a{index:02d}", mode="sync", command="sleep 3", timeout="10s")
        # The deny takes a moment, as a real check does: it must not be cut short by time
        # spent waiting for the others.
        write_hook("z-guard", mode="sync", blocking=True, command=f"sleep 0.5; {DENY}", timeout="1s")
        bus = make_bus()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        bus.close()
        assert decision.behavior == "deny", decision
        [record] = log_of(home, "z-guard")
        assert record["status"] == "deny" and record["error"] is None
        assert record["duration_ms"] < 1000  # its time counts from its own start


@pytest.mark.timeout(120)
def test_other_emits_slow_hooks_cannot_starve_a_deny(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with attack(1, "16 threads emitting with slow formatter hooks beside a PreToolUse deny"):
        for index in range(2):
            write_hook(f"format{index}", event="PostToolUse", mode="sync", command="sleep 3", timeout="10s")
        write_hook("guard", mode="sync", blocking=True, command=DENY, timeout="1s")
        write_hook("note", mode="sync", command="echo noted", timeout="1s")
        bus = make_bus()
        started = threading.Barrier(17)

        def formatter() -> None:
            started.wait()
            bus.emit("PostToolUse", {"tool_name": "write_file"})

        threads = [threading.Thread(target=formatter) for _ in range(16)]
        for thread in threads:
            thread.start()
        started.wait()
        # The formatters' hooks are running now: both of one emit at least, however slowly
        # the machine got there (a fixed 0.3 s could pass before the first started).
        deadline = time.monotonic() + 30
        while len(hook_processes(home, "sleep")) < 2:
            assert time.monotonic() < deadline, "the formatters' hooks did not start"
            time.sleep(0.01)
        decisions = [bus.emit("PreToolUse", {"tool_name": "bash"}) for _ in range(3)]
        for thread in threads:
            thread.join()
        bus.close()
        assert [d.behavior for d in decisions] == ["deny"] * 3
        assert all(r["status"] == "deny" and r["error"] is None for r in log_of(home, "guard"))


@pytest.mark.timeout(120)
def test_a_full_async_pool_does_not_touch_sync_decisions(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with attack(1, "async pool filled by slow hooks, then a blocking deny"):
        for index in range(12):
            write_hook(f"bg{index:02d}", command="sleep 5", timeout="10s")
        write_hook("guard", mode="sync", blocking=True, command=DENY, timeout="1s")
        bus = make_bus(async_workers=2)
        for _ in range(3):
            started = time.monotonic()
            assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "deny"
            assert time.monotonic() - started < 1 + 1.5
        started = time.monotonic()
        bus.close(timeout=0.5)
        assert time.monotonic() - started < 0.5 + 5 + 1  # close()'s documented bound
        statuses = [entry["status"] for entry in read_log(home) if entry["hook_id"].startswith("bg")]
        assert len(statuses) == 36  # every fire recorded: done, or cancelled at shutdown


# -- T2: envelopes hookbus cannot encode ------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_envelope_nested_100000_deep_is_decided_and_recorded(
    mode: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """Deeper than any hook is handed (MAX_NESTING levels): no hook runs, each that matches
    counts as failed under its on_error (here: open), and is recorded; never a crash."""
    with attack(3, f"envelope nested 100,000 deep, {mode} hook"):
        write_hook("h", event="Stop", mode=mode, command="cat > /dev/null")
        write_hook("after", event="SubagentStop", command="true")
        bus = make_bus()
        envelope = deep(100_000)
        for _ in range(12):  # more fires than there are async workers
            decision = bus.emit("Stop", envelope)
            assert decision.behavior == "allow"
            assert [failure.failure for failure in decision.failed] == (["hookbus"] if mode == "sync" else [])
        assert [entry["error"] for entry in log_of(home, "h")] == ["the envelope is nested deeper than 10,000 levels"] * 12
        # The bus is whole: async hooks still run and are recorded, close() is prompt.
        bus.emit("SubagentStop", {"agent_type": "x"})
        started = time.monotonic()
        bus.close()
        assert time.monotonic() - started < 5
        assert [entry["status"] for entry in log_of(home, "after")] == ["done"]


@pytest.mark.timeout(60)
def test_an_envelope_that_is_not_a_mapping_is_a_clear_error(write_hook: Writer, make_bus: Maker) -> None:
    with attack(3, "envelope that is a list, a string, a number"):
        write_hook("h", event="Stop", mode="sync", command="true")
        bus = make_bus()
        for envelope in ([1, 2], "text", 42):
            with pytest.raises(HookBusError, match="must be a mapping"):
                bus.emit("Stop", envelope)  # type: ignore[arg-type]
            with pytest.raises(HookBusError, match="must be a mapping"):
                bus.emit("PreCompact", envelope)  # type: ignore[arg-type]  # no hook on it


@pytest.mark.timeout(60)
def test_an_envelope_holding_itself_is_a_clear_error(write_hook: Writer, make_bus: Maker) -> None:
    with attack(3, "envelope holding a reference to itself"):
        write_hook("h", event="Stop", mode="sync", command="true")
        bus = make_bus()
        envelope: dict[str, Any] = {}
        envelope["self"] = envelope
        with pytest.raises(HookBusError, match="cannot be encoded"):
            bus.emit("Stop", envelope)


# -- T3: runners and timeouts at their limits -------------------------------------------------


class CrashingRunner:
    """A third party's runner that raises what runners must not: SystemExit, RecursionError."""

    def __init__(self) -> None:
        self.runs = 0

    def parse(self, key: str, value: object, context: ParseContext) -> object:
        return value

    def run(self, call: HookCall) -> Outcome:
        self.runs += 1
        if call.hook.options == "exit":
            raise SystemExit(3)
        raise RecursionError("maximum recursion depth exceeded")


class CrashingPlugin:
    def __init__(self) -> None:
        self.runner = CrashingRunner()

    @hookimpl
    def hookbus_register_runners(self, register: RunnerRegistration) -> None:
        register.add("crash", self.runner)


@pytest.mark.timeout(60)
def test_async_workers_survive_runners_that_raise_anything(home: Path, make_bus: Maker) -> None:
    with attack(3, "an async runner raising SystemExit and RecursionError, 12 times"):
        import json

        for hook_id, how in (("exits", "exit"), ("recurses", "recurse")):
            (home / "hooks" / hook_id).mkdir()
            (home / "hooks" / hook_id / "hook.json").write_text(
                json.dumps({"trigger": {"event": "Stop"}, "crash": how})
            )
        (home / "hooks" / "after").mkdir()
        (home / "hooks" / "after" / "hook.json").write_text(
            json.dumps({"trigger": {"event": "SubagentStop"}, "command": "true"})
        )
        plugin = CrashingPlugin()
        bus = make_bus(plugins=[plugin], async_workers=2)
        for _ in range(12):
            bus.emit("Stop", {})
        bus.emit("SubagentStop", {})
        started = time.monotonic()
        bus.close()
        assert time.monotonic() - started < 5
        assert plugin.runner.runs == 24
        errors = [entry for entry in read_log(home) if entry["hook_id"] in ("exits", "recurses")]
        assert len(errors) == 24 and all(entry["status"] == "error" for entry in errors)
        assert [entry["status"] for entry in log_of(home, "after")] == ["done"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hooks", [1, 2])
def test_the_longest_timeout_there_is(hooks: int, home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with attack(3, f"{hooks} sync hook(s) with the maximum timeout, 2562047h47m16s"):
        for index in range(hooks):
            write_hook(f"long{index}", event="Stop", mode="sync", command=f"echo {index}", timeout="2562047h47m16s")
        bus = make_bus()
        decision = bus.emit("Stop", {})
        bus.close()
        assert decision.context == "\n\n".join(str(index) for index in range(hooks))
        assert len(read_log(home)) == hooks


HOSTILE_TREES = {
    "ignores SIGTERM": "trap '' TERM; while :; do sleep 0.05; done",
    "50 children holding stdout": "for i in $(seq 50); do sleep 30 & done; sleep 30",
    "closes its pipes and keeps running": "exec >/dev/null 2>&1 </dev/null; trap '' TERM; sleep 30",
    "a fork loop": "while :; do (sleep 30 &) ; sleep 0.01; done",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("tree", sorted(HOSTILE_TREES))
def test_a_hostile_process_tree_cannot_hold_emit(
    tree: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    with attack(3, f"hook process tree: {tree}"):
        write_hook("hostile", mode="sync", blocking=True, command=HOSTILE_TREES[tree], timeout="1s")
        write_hook("guard", mode="sync", blocking=True, command=DENY, timeout="1s")
        bus = make_bus()
        started = time.monotonic()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        elapsed = time.monotonic() - started
        bus.close()
        FIGURES["emit overrun past its timeout, worst (ms)"] = max(
            FIGURES["emit overrun past its timeout, worst (ms)"], int((elapsed - 1) * 1000)
        )
        assert decision.behavior == "deny"
        assert elapsed < 1 + 1.5, f"emit took {elapsed:.2f}s with a 1s timeout"
        [record] = log_of(home, "hostile")
        assert record["error"] == "timed out after 1s"


@pytest.mark.timeout(60)
def test_a_lone_hostile_hook_on_the_calling_thread_is_bounded_too(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    with attack(3, "a lone sync hook that ignores SIGTERM (runs on the emitting thread)"):
        write_hook("hostile", mode="sync", command=HOSTILE_TREES["ignores SIGTERM"], timeout="1s")
        bus = make_bus()
        started = time.monotonic()
        bus.emit("PreToolUse", {"tool_name": "bash"})
        assert time.monotonic() - started < 1 + 1.5



# -- promise 4: records ------------------------------------------------------------------------


@pytest.mark.parametrize("setting", ["sqllite", ["recorder-typo"], ["otell", "sqlitte"]])
def test_a_misspelled_recorder_never_stops_recording(
    setting: object, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    with attack(4, f"settings.json recorder {setting!r}"):
        import json

        (home / "settings.json").write_text(json.dumps({"recorder": setting}))
        write_hook("h", event="Stop", mode="sync", command="true")
        bus = make_bus()
        for _ in range(5):
            bus.emit("Stop", {})
        bus.close()
        assert len(read_log(home)) == 5
        assert all("recording with 'recorder' instead" in p.message for p in bus.problems)


class RaisingRecorder:
    @hookimpl
    def hookbus_record(self, record: object) -> None:
        raise OSError(28, "No space left on device")


def test_records_a_recorder_refused_are_counted_and_reported_once(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    with attack(4, "a recorder that raises on every record"):
        write_hook("h", event="Stop", mode="sync", command="true")
        bus = make_bus(plugins=[RaisingRecorder()])
        for _ in range(7):
            bus.emit("Stop", {})
        assert bus.lost_records == 7
        bus.close()
        errors = [r.getMessage() for r in caplog.records if r.name == "hookbus" and r.levelname == "ERROR"]
        assert len(errors) == 1 and "the record is lost to it" in errors[0]
        assert any(f"7 fires of {home} were not recorded" in r.getMessage() for r in caplog.records)
        assert len(read_log(home)) == 7  # the built-in recorder beside it lost nothing


@pytest.mark.timeout(60)
def test_the_cli_drains_an_async_hook_with_the_longest_timeout(home: Path, write_hook: Writer) -> None:
    with attack(3, "hookbus emit with an async hook whose timeout is 2562047h47m16s"):
        import os
        import subprocess
        import sys

        write_hook("long", event="Stop", command="true", timeout="2562047h47m16s")
        result = subprocess.run(
            [sys.executable, "-m", "hookbus", "--home", str(home), "emit", "Stop", "--input", os.devnull],
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert [entry["status"] for entry in read_log(home)] == ["done"]
