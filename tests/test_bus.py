"""HookBus end to end: parallel sync hooks, async hooks, guards, rewrites, shutdown."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import is_alive, read_log, read_state
from hookbus import BusClosedError, HookBus, HookBusError, HookNotFoundError, UnknownEventError, hookimpl

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]


@pytest.mark.timeout(30)
def test_sync_hooks_run_in_parallel(write_hook: Writer, make_bus: Maker) -> None:
    """4 hooks of `sleep 1` take about 1 s, not 4: the agent waits for the slowest only."""
    for index in range(4):
        write_hook(f"slow{index}", mode="sync", command=f"sleep 1; echo {index}")
    bus = make_bus()
    started = time.monotonic()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    elapsed = time.monotonic() - started
    assert decision.context == "0\n\n1\n\n2\n\n3"
    assert elapsed < 3.0, f"4 parallel 1 s hooks took {elapsed:.2f}s: they ran in series"


@pytest.mark.timeout(30)
def test_async_hooks_never_delay_emit_and_are_recorded(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("later", command="sleep 1; echo done > \"$HOOKBUS_HOOK_DIR/out\"")
    write_hook("fails", command="exit 3")
    bus = make_bus()
    started = time.monotonic()
    assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
    assert time.monotonic() - started < 0.9  # the 1 s hook is still running
    bus.close()
    assert (home / "hooks" / "later" / "out").read_text() == "done\n"
    assert read_state(home, "later")["last_status"] == "done"
    state = read_state(home, "fails")
    assert state["last_status"] == "error"
    assert state["last_error"] == "exited with status 3"
    assert state["recent_runs"][0]["async"] is True


@pytest.mark.timeout(30)
def test_async_executor_is_bounded(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    """With 2 workers, never more than 2 async hooks run at once."""
    trace = home / "trace"
    for index in range(6):
        write_hook(
            f"a{index}",
            command=f'echo "+ $(date +%s.%N)" >> {trace}; sleep 0.3; echo "- $(date +%s.%N)" >> {trace}',
        )
    bus = make_bus(async_workers=2)
    bus.emit("PreToolUse", {"tool_name": "x"})
    bus.close()
    events = sorted(
        (float(stamp), sign) for sign, stamp in (line.split() for line in trace.read_text().splitlines())
    )
    running = peak = 0
    for _, sign in events:
        running += 1 if sign == "+" else -1
        peak = max(peak, running)
    assert len(events) == 12
    assert peak == 2


@pytest.mark.timeout(30)
def test_close_kills_what_outlives_its_bound_and_records_it(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    pidfile = home / "pid"
    write_hook("forever", command=f"echo $$ > {pidfile}; sleep 30")
    for index in range(10):  # more than the workers: some never start
        write_hook(f"queued{index}", command="sleep 30")
    bus = make_bus(async_workers=2)
    bus.emit("PreToolUse", {"tool_name": "x"})
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pid = int(pidfile.read_text())
    started = time.monotonic()
    bus.close(timeout=0.5)
    assert time.monotonic() - started < 5
    assert not is_alive(pid)
    entries = read_log(home)
    assert len(entries) == 11  # nothing lost silently
    assert {e["status"] for e in entries} == {"error"}
    assert {e["error"] for e in entries} == {"cancelled at shutdown"}
    assert read_state(home, "forever")["last_error"] == "cancelled at shutdown"


def test_non_blocking_sync_hook_adds_context_but_cannot_veto(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook(
        "advisor",
        mode="sync",
        command="""echo '{"behavior": "deny", "reason": "no"}'""",
    )
    write_hook(
        "noter",
        mode="sync",
        command="""echo '{"behavior": "context", "context": "careful"}'""",
    )
    write_hook(
        "rewriter",
        mode="sync",
        command="""echo '{"behavior": "modify", "input": {"path": "x"}}'""",
    )
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "x"})
    assert (decision.behavior, decision.context, decision.input) == ("context", "careful", None)
    bus.close()
    notes = {e["hook_id"]: (e["status"], e.get("note")) for e in read_log(home)}
    assert notes["advisor"][0] == "deny"
    assert "not applied: the hook is not blocking" in notes["advisor"][1]
    assert notes["rewriter"][0] == "modify"
    assert "not blocking" in notes["rewriter"][1]


def test_pretooluse_modify_replaces_tool_input(write_hook: Writer, make_bus: Maker) -> None:
    write_hook(
        "safe",
        mode="sync",
        blocking=True,
        command="""echo '{"behavior": "modify", "input": {"path": "safe.txt"}}'""",
    )
    decision = make_bus().emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "a"}})
    assert (decision.behavior, decision.input, decision.modified_by) == (
        "modify",
        {"path": "safe.txt"},
        "safe",
    )


def test_userpromptsubmit_modify_rewrites_the_prompt(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook(
        "rewrite",
        event="UserPromptSubmit",
        mode="sync",
        blocking=True,
        command="""echo '{"behavior": "modify", "input": {"prompt": "be brief"}}'""",
    )
    write_hook(
        "broken",
        event="UserPromptSubmit",
        mode="sync",
        blocking=True,
        command="""echo '{"behavior": "modify", "input": {"text": "x"}}'""",
    )
    bus = make_bus()
    decision = bus.emit("UserPromptSubmit", {"prompt": "hello"})
    assert (decision.behavior, decision.input) == ("modify", {"prompt": "be brief"})
    bus.close()
    broken = read_state(home, "broken")
    assert broken["last_status"] == "allow"
    assert "needs a string in 'input.prompt'" in broken["last_error"]


class DenyList:
    """An embedder's deny_list for rewritten tool input."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []

    @hookimpl
    def hookbus_check_input(self, event: str, envelope: Any, new_input: dict[str, Any]) -> str | None:
        self.seen.append((event, new_input))
        return "path is on the deny_list" if new_input.get("path") == "/etc/passwd" else None


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest"])
@pytest.mark.parametrize(
    ("rewritten", "behavior"), [("/etc/passwd", "deny"), ("ok.txt", "modify")]
)
def test_rewritten_input_goes_through_the_input_check(
    event: str, rewritten: str, behavior: str, write_hook: Writer, make_bus: Maker
) -> None:
    """The spec: "the modified call is still checked against the deny_list"."""
    write_hook(
        "rewrite",
        event=event,
        mode="sync",
        blocking=True,
        command=f"""echo '{{"behavior": "modify", "input": {{"path": "{rewritten}"}}}}'""",
    )
    deny_list = DenyList()
    decision = make_bus(plugins=[deny_list]).emit(event, {"tool_name": "write_file"})
    assert decision.behavior == behavior
    assert deny_list.seen == [(event, {"path": rewritten})]
    if behavior == "deny":
        assert decision.reason == (
            "input rewritten by hook 'rewrite' was denied: path is on the deny_list"
        )


@pytest.mark.parametrize("event", ["PreToolUse", "PermissionRequest", "UserPromptSubmit"])
def test_a_blocking_deny_takes_effect_on_every_event_that_can_block(
    event: str, write_hook: Writer, make_bus: Maker
) -> None:
    """PermissionRequest: "a blocking deny skips the prompt and rejects the tool";
    UserPromptSubmit: deny keeps the prompt out of the turn."""
    write_hook("no", event=event, mode="sync", blocking=True, command="echo nope >&2; exit 2")
    write_hook("note", event=event, mode="sync", command="echo noted")
    decision = make_bus().emit(event, {"tool_name": "Bash", "prompt": "hi"})
    assert (decision.behavior, decision.reason, decision.context) == ("deny", "hook 'no' denied: nope", "noted")


@pytest.mark.parametrize(
    "envelope", [{"origin": "vix", "tool_name": "x"}], ids=["origin-vix"]
)
def test_recursion_guard(envelope: dict[str, Any], home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("deny", mode="sync", blocking=True, command="exit 2")
    write_hook("async", command="true")
    bus = make_bus()
    assert bus.emit("PreToolUse", envelope).behavior == "allow"
    assert asyncio.run(bus.aemit("PreToolUse", envelope)).behavior == "allow"
    assert bus.emit("PreToolUse", {**envelope, "origin": "user"}).behavior == "deny"
    bus.close()
    # Neither the sync nor the async hook fired for the two vix-initiated emits.
    fired = [e["hook_id"] for e in read_log(home)]
    assert sorted(fired) == ["async", "deny"]


def test_kill_switch_in_settings(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("deny", mode="sync", blocking=True, command="exit 2")
    (home / "settings.json").write_text(json.dumps({"features": {"hooks": False}, "theme": "dark"}))
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
    with pytest.raises(HookBusError, match="hooks are disabled"):
        bus.trigger("deny")
    bus.close()
    assert read_log(home) == []


def test_kill_switch_in_environment(
    home: Path, write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_hook("deny", mode="sync", blocking=True, command="exit 2")
    monkeypatch.setenv("VIX_DISABLE_HOOKS", "1")
    assert make_bus().emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
    monkeypatch.setenv("VIX_DISABLE_HOOKS", "0")
    assert make_bus().emit("PreToolUse", {"tool_name": "x"}).behavior == "deny"


def test_broken_settings_are_reported_and_the_last_trusted_ones_stay(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("deny", mode="sync", blocking=True, command="exit 2")
    (home / "settings.json").write_text('{"features": {"hooks": "no"}}')
    bus = make_bus()
    assert [str(p) for p in bus.problems] == [
        "settings.json: expected true or false; the last settings.json that could be trusted "
        "stays in effect (the defaults, if none was read) @ $.features.hooks"
    ]
    assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "deny"  # the defaults: hooks on
    (home / "settings.json").write_text('{"features": {"hooks": false}}')
    bus.reload()
    assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
    (home / "settings.json").write_text('{"features": {"hooks": false')  # caught mid-edit
    bus.reload()
    assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"  # still off


@pytest.mark.timeout(30)
def test_aemit_never_blocks_the_event_loop(write_hook: Writer, make_bus: Maker) -> None:
    write_hook("slow", mode="sync", command="sleep 0.5; echo waited")
    bus = make_bus()

    async def scenario() -> tuple[str | None, int]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        decision = await bus.aemit("PreToolUse", {"tool_name": "x"})
        stop.set()
        await task
        return decision.context, ticks

    context, ticks = asyncio.run(scenario())
    assert context == "waited"
    assert ticks >= 10, "the loop stalled while the hook ran"


def test_trigger_fires_one_hook_and_records_it_as_async(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("manual", event="SubagentStop", mode="sync", command="cat > \"$HOOKBUS_HOOK_DIR/got\"")
    bus = make_bus()
    record = bus.trigger("manual", {"agent_type": "x"})
    assert (record.status, record.mode, record.manual) == ("done", "async", True)
    got = json.loads((home / "hooks" / "manual" / "got").read_text())
    assert got == {"agent_type": "x", "hook_event_name": "SubagentStop"}
    with pytest.raises(HookNotFoundError, match="no valid hook 'nope'"):
        bus.trigger("nope")
    bus.close()
    assert read_state(home, "manual")["recent_runs"][0]["async"] is True


def test_misuse_raises_clear_errors(write_hook: Writer, make_bus: Maker) -> None:
    write_hook("h", matcher="Bash", command="true")
    bus = make_bus()
    with pytest.raises(UnknownEventError, match="unknown event 'PreTooluse'; events are PreToolUse"):
        bus.emit("PreTooluse", {})
    bus.close()
    # Closed is closed, whether the emit would have matched a hook or not.
    for event, envelope in [
        ("PreToolUse", {"tool_name": "Bash"}),
        ("PreToolUse", {"tool_name": "Read"}),
        ("PreToolUse", {"tool_name": "Bash", "origin": "vix"}),
        ("Stop", {}),
    ]:
        with pytest.raises(BusClosedError):
            bus.emit(event, envelope)
    with pytest.raises(BusClosedError):
        asyncio.run(bus.aemit("PreToolUse", {"tool_name": "Read"}))
    bus.close()  # idempotent


def test_no_match_returns_the_shared_allow_and_records_nothing(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("h", matcher="bash", mode="sync", command="exit 2")
    bus = make_bus()
    first = bus.emit("PreToolUse", {"tool_name": "read_file"})
    assert first is bus.emit("Stop", {})
    assert first.behavior == "allow"
    bus.close()
    assert not (home / "logs").exists()


@pytest.mark.timeout(60)
def test_concurrent_emits_from_many_threads(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("deny", matcher="rm", mode="sync", blocking=True, command="exit 2")
    write_hook("ctx", matcher="ls", mode="sync", command="echo listed")
    bus = make_bus()
    failures: list[str] = []

    def worker() -> None:
        for index in range(25):
            tool = "rm" if index % 2 else "ls"
            decision = bus.emit("PreToolUse", {"tool_name": tool})
            expected = "deny" if tool == "rm" else "context"
            if decision.behavior != expected:
                failures.append(f"{tool}: {decision}")

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    bus.close()
    assert len(read_log(home)) == 200


def test_an_envelope_with_an_undecodable_file_name_or_nan_reaches_the_hook_as_json(tmp_path):
    """A path the OS handed back with undecodable bytes (a lone surrogate) or a NaN must
    neither make emit raise nor put non-JSON on the hook's stdin."""
    import json
    import os

    home = tmp_path / "home"
    hook_dir = home / "hooks" / "echo"
    hook_dir.mkdir(parents=True)
    (hook_dir / "hook.json").write_text(json.dumps(
        {"trigger": {"event": "PreToolUse"}, "mode": "sync", "command": "cat > \"$HOOKBUS_HOOK_DIR/got\""}
    ))
    path = os.fsdecode(b"/work/caf\xe9.txt")
    with HookBus(home) as bus:
        decision = bus.emit("PreToolUse", {"tool_name": "t", "tool_input": {"path": path, "score": float("nan")}})
    assert decision.behavior == "allow"
    got = json.loads((hook_dir / "got").read_bytes(), parse_constant=lambda name: pytest.fail(name))
    assert got["tool_input"] == {"path": "/work/caf\udce9.txt", "score": "nan"}


def test_hooks_of_one_emit_see_the_settings_of_that_emit_after_a_reload(tmp_path):
    """An emit in flight keeps the snapshot it started with, settings included: an async
    hook still queued when settings.json changes runs with the settings it was fired under."""
    import json
    import threading

    from hookbus import HookCall, Outcome, ParseContext, RunnerRegistration

    release = threading.Event()
    seen: list[object] = []

    class Probe:
        def parse(self, key: str, value: object, context: ParseContext) -> object:
            return value

        def run(self, call: HookCall) -> Outcome:
            if call.hook.id == "a":
                assert release.wait(10)
            seen.append((call.hook.id, call.settings.raw.get("marker")))
            return Outcome("allow")

    class ProbePlugin:
        @hookimpl
        def hookbus_register_runners(self, register: RunnerRegistration) -> None:
            register.add("probe", Probe())

    home = tmp_path / "home"
    for hook_id in ("a", "b"):
        (home / "hooks" / hook_id).mkdir(parents=True)
        (home / "hooks" / hook_id / "hook.json").write_text(json.dumps({"trigger": {"event": "Stop"}, "probe": 1}))
    (home / "settings.json").write_text(json.dumps({"marker": "old"}))
    with HookBus(home, plugins=[ProbePlugin()], async_workers=1) as bus:
        bus.emit("Stop", {})  # "a" runs and waits; "b" is queued behind it
        (home / "settings.json").write_text(json.dumps({"marker": "new"}))
        bus.reload()
        release.set()
    assert seen == [("a", "old"), ("b", "old")]


def test_vix_disable_hooks_is_read_when_the_bus_starts(
    write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the README says: set at start, it holds for the bus's life; set later, it waits
    for the next bus (a reload does not read it)."""
    write_hook("deny", mode="sync", blocking=True, command="exit 2")
    on = make_bus()
    monkeypatch.setenv("VIX_DISABLE_HOOKS", "1")
    on.reload()
    assert on.emit("PreToolUse", {"tool_name": "x"}).behavior == "deny"
    off = make_bus()
    assert off.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
    monkeypatch.delenv("VIX_DISABLE_HOOKS")
    off.reload()
    assert off.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
