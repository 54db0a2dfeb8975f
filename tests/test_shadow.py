"""Shadow hooks (``"shadow": true``): they run and are recorded, with the decision that was
enforced, but never enter the merge and never delay it; explain shows what they would have
said, ``log --shadow`` lists where they disagreed, and no failure path lets one enforce."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import HookWriter, read_log, turn_off_home_guard
from hookbus import HookBus
from servekit import hookbus

pytestmark = pytest.mark.timeout(60)

MakeBus = Callable[..., HookBus]
DENY = "echo '{\"behavior\": \"deny\", \"reason\": \"too strict\"}'"
LS = {"tool_name": "bash", "tool_input": {"command": "ls"}}


def shadow_records(home: Path) -> list[dict[str, Any]]:
    return [entry for entry in read_log(home) if entry.get("shadow")]


def test_a_shadow_deny_never_enters_the_merge(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("old", event="PreToolUse", mode="sync", blocking=True, command="exit 0")
    write_hook("new", event="PreToolUse", mode="sync", blocking=True, shadow=True, command=DENY)
    bus = make_bus()
    assert bus.emit("PreToolUse", LS).behavior == "allow"
    bus.close()
    [record] = shadow_records(home)
    assert (record["hook_id"], record["status"], record["enforced"], record["mode"]) == ("new", "deny", "allow", "sync")
    assert record["decision"] == {"behavior": "deny", "reason": "too strict"}
    assert json.loads((home / "hooks" / "new" / "state.json").read_text())["recent_runs"][-1]["shadow"] is True


def test_a_shadow_hook_never_delays_the_decision(make_bus: MakeBus, write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, shadow=True, timeout="30s",
               command=f"while [ ! -e {release} ]; do sleep 0.02; done; {DENY}")
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, command=DENY)
    bus = make_bus()
    decided: list[Any] = []
    emitting = threading.Thread(target=lambda: decided.append(bus.emit("PreToolUse", LS)))
    emitting.start()
    emitting.join(20)  # the shadow hook is still waiting for release: the emit must not
    assert decided and decided[0].behavior == "deny" and decided[0].denied_by == ("guard",)
    assert not shadow_records(home), "recorded before it finished"
    release.touch()
    bus.close()  # waits for the shadow hook, and records it
    [record] = shadow_records(home)
    assert (record["hook_id"], record["enforced"], record["status"]) == ("slow", "deny", "deny")


def test_only_shadow_hooks_allow_at_once_and_are_recorded(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("new", event="UserPromptSubmit", mode="sync", blocking=True, shadow=True, command=DENY)
    bus = make_bus()
    assert bus.emit("UserPromptSubmit", {"prompt": "hi"}).behavior == "allow"
    bus.close()
    [record] = shadow_records(home)
    assert (record["status"], record["enforced"]) == ("deny", "allow")


def test_a_fail_closed_shadow_hook_never_denies(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("new", event="PreToolUse", mode="sync", blocking=True, shadow=True, on_error="deny", command="exit 1")
    turn_off_home_guard(home)  # it fails closed itself when hookbus cannot decide
    bus = make_bus()
    assert bus.emit("PreToolUse", LS).behavior == "allow"
    assert bus.undecided("PreToolUse", LS, "cannot read it").behavior == "allow"
    bus.close()
    statuses = [(record["status"], record.get("enforced")) for record in shadow_records(home)]
    assert ("deny", "allow") in statuses  # it would have failed closed: recorded, not enforced


def test_explain_and_log_show_what_it_would_have_said(write_hook: HookWriter, home: Path) -> None:
    write_hook("old", event="PreToolUse", mode="sync", blocking=True, command="exit 0")
    write_hook("new", event="PreToolUse", mode="sync", blocking=True, shadow=True, command=DENY)
    write_hook("agree", event="PreToolUse", mode="sync", shadow=True, command="exit 0")
    explained = hookbus("explain", "PreToolUse", "--home", str(home), input=json.dumps(LS))
    assert "'new': shadow: would have said deny (too strict); not in the merge (enforced: allow)" in explained.stdout
    assert 'decision: {"behavior": "allow"}' in explained.stdout
    shown = hookbus("log", "--home", str(home), "--shadow", "--json")
    assert [json.loads(line)["hook_id"] for line in shown.stdout.splitlines()] == ["new"]  # not 'agree'
    table = hookbus("log", "--home", str(home), "--shadow").stdout
    assert " new " in table and " shadow " in table
    listed = json.loads(hookbus("list", "--home", str(home), "--json").stdout)
    assert {row["id"]: row["mode"] for row in listed["hooks"]}["new"] == "shadow (sync blocking)"


def test_shadow_needs_sync_and_the_schema_says_so(write_hook: HookWriter, home: Path) -> None:
    write_hook("bad", event="Stop", mode="async", shadow=True, command="true")
    result = hookbus("validate", "--home", str(home))
    assert result.returncode == 1
    assert 'hooks/bad/hook.json: shadow needs "mode": "sync": an async hook never enters the merge anyway @ $.shadow' in result.stdout
    schema = json.loads(hookbus("schema").stdout)
    assert schema["properties"]["shadow"]["type"] == "boolean"


def test_a_shadow_hooks_fixture_tests_its_own_decision_and_merged_ones_leave_it_out(write_hook: HookWriter, home: Path) -> None:
    write_hook("new", event="PreToolUse", mode="sync", blocking=True, shadow=True, command=DENY)
    tests = home / "hooks" / "new" / "tests"
    tests.mkdir()
    (tests / "alone.json").write_text(json.dumps({"event": "PreToolUse", "envelope": LS, "expect": {"behavior": "deny"}}))
    (tests / "merged.json").write_text(json.dumps({"event": "PreToolUse", "envelope": LS, "merged": True, "expect": {"behavior": "allow"}}))
    result = hookbus("test", "--home", str(home))
    assert result.returncode == 0, result.stdout


def test_a_fail_closed_shadow_hook_is_not_one_for_the_last_resort(write_hook: HookWriter, home: Path) -> None:
    from hookbus.hosts.lastresort import fail_closed_hooks

    write_hook("new", event="PreToolUse", mode="sync", blocking=True, shadow=True, on_error="deny", command="true")
    write_hook("real", event="PreToolUse", mode="sync", blocking=True, on_error="deny", command="true")
    assert fail_closed_hooks(str(home), "PreToolUse") == ["real"]


def test_a_shadow_hook_with_no_thread_to_run_on_is_recorded_without_holding_the_emit(
    make_bus: MakeBus, write_hook: HookWriter, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No thread to be had (the user's processes ran out): the shadow hook's failure is
    recorded once the decision is known, and the emit does not wait for anything."""
    from hookbus.dispatch import Dispatcher

    class NoThreads:
        def submit(self, job: Any) -> Any:
            raise RuntimeError("can't start new thread")

    write_hook("new", event="UserPromptSubmit", mode="sync", blocking=True, shadow=True, command=DENY)
    bus = make_bus()
    monkeypatch.setattr(Dispatcher, "threads", lambda self: NoThreads())
    assert bus.emit("UserPromptSubmit", {"prompt": "hi"}).behavior == "allow"
    bus.close()
    [record] = shadow_records(home)
    assert record["enforced"] == "allow" and "could not start a thread for it" in record["error"]


# -- a shadow hook never holds anything: not the emit, not the command, not close() ------------

#: A shadow hook that runs until it is killed: it says where its process group is first.
UNTIL_KILLED = 'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; sleep 600; touch "$HOOKBUS_HOOK_DIR/finished"'
CLAUDE_BASH = {"hook_event_name": "PreToolUse", "session_id": "s-1", "cwd": "/", "tool_name": "Bash", "tool_input": {"command": "ls"}}
GEMINI_SHELL = {"hook_event_name": "BeforeTool", "session_id": "g-1", "cwd": "/", "tool_name": "run_shell_command", "tool_input": {"command": "ls"}}


def write_shadow_and_guard(write_hook: HookWriter, home: Path, shadow_command: str = UNTIL_KILLED) -> Path:
    """A shadow hook that never ends, and a guard that denies once the shadow hook has
    started (so that it is provably running when the decision is made). Its directory."""
    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, shadow=True, timeout="10m", command=shadow_command)
    started = home / "hooks" / "slow" / "pid"
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, timeout="30s",
               command=f'while [ ! -s "{started}" ]; do sleep 0.01; done; {DENY}')
    return home / "hooks" / "slow"


def shadow_group(directory: Path) -> int:
    return int((directory / "pid").read_text())


def kill_leftovers(directory: Path) -> None:
    """What a failed test left running (the code as it was let it outlive everything)."""
    import os
    import signal

    from conftest import live_processes_in_group

    if (directory / "pid").exists() and live_processes_in_group(shadow_group(directory)):
        os.killpg(shadow_group(directory), signal.SIGKILL)


def assert_cut_short_and_recorded(home: Path, directory: Path, enforced: str, error: str) -> None:
    from conftest import live_processes_in_group

    assert not live_processes_in_group(shadow_group(directory)), "the shadow hook outlived the process that ran it"
    assert not (directory / "finished").exists()
    [record] = shadow_records(home)
    assert (record["hook_id"], record["mode"], record["status"], record["enforced"]) == ("slow", "sync", "error", enforced)
    assert error in record["error"]
    assert "decision" not in record, "a shadow hook cut short said nothing: there is nothing to compare"


@pytest.mark.parametrize("verb, envelope, denied", [
    ("emit", LS, lambda out: json.loads(out)["behavior"] == "deny"),
    ("claude-code-hook", CLAUDE_BASH, lambda out: json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"),
    ("gemini-cli-hook", GEMINI_SHELL, lambda out: json.loads(out)["decision"] == "deny"),
])
@pytest.mark.parametrize("no_server", [False, True], ids=["no-server-running", "--no-server"])
def test_a_command_answers_and_exits_without_waiting_for_a_shadow_hook(
    write_hook: HookWriter, home: Path, verb: str, envelope: dict[str, Any], denied: Callable[[str], bool], no_server: bool
) -> None:
    """Issue 28, item 7: a shadow hook still running held `hookbus emit` and the bridges
    for 5 s (close()'s wait for running work), and item 8: its process outlived them,
    unrecorded. Now the command exits once the enforcing hooks are done; the shadow hook
    is killed and recorded, before it exits, with why."""
    directory = write_shadow_and_guard(write_hook, home)
    arguments = [verb, *(["PreToolUse"] if verb == "emit" else []), "--home", str(home), *(["--no-server"] if no_server else [])]
    try:
        result = hookbus(*arguments, input=json.dumps(envelope), timeout=60)
        assert denied(result.stdout), (result.stdout, result.stderr)
        assert result.returncode == (2 if verb == "emit" else 0)
        assert_cut_short_and_recorded(home, directory, "deny", "cut short")
    finally:
        kill_leftovers(directory)


def test_close_kills_a_shadow_hook_still_running_and_records_it(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    """close(timeout) never leaves a shadow hook running, nor unrecorded."""
    directory = write_shadow_and_guard(write_hook, home)
    bus = make_bus()
    try:
        assert bus.emit("PreToolUse", LS).behavior == "deny"
        bus.close(timeout=1)
        assert_cut_short_and_recorded(home, directory, "deny", "cut short")
    finally:
        kill_leftovers(directory)


def test_interrupt_kills_a_shadow_hook_and_records_it_before_close_returns(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    directory = write_shadow_and_guard(write_hook, home)
    bus = make_bus()
    try:
        assert bus.emit("PreToolUse", LS).behavior == "deny"
        bus.interrupt("interrupted by SIGINT")
        bus.close(timeout=0)
        assert_cut_short_and_recorded(home, directory, "deny", "interrupted by SIGINT")
    finally:
        kill_leftovers(directory)


def test_close_waits_for_other_work_and_a_shadow_hook_that_finishes_meanwhile_says_what_it_said(
    make_bus: MakeBus, write_hook: HookWriter, home: Path, tmp_path: Path
) -> None:
    """A shadow hook is never waited for on its own account, but it runs while close()
    waits for async hooks: one done by then is recorded with its answer."""
    release = tmp_path / "release"
    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, shadow=True, timeout="30s",
               command=f'while [ ! -e {release} ]; do sleep 0.01; done; {DENY}')
    write_hook("later", event="PreToolUse", timeout="30s", command=f'while [ ! -e {release} ]; do sleep 0.01; done; sleep 0.5')
    bus = make_bus()
    assert bus.emit("PreToolUse", LS).behavior == "allow"
    release.touch()
    bus.close(timeout=30)
    [record] = shadow_records(home)
    assert (record["status"], record["enforced"], record["decision"]["behavior"]) == ("deny", "allow", "deny")


def test_a_runner_that_ignores_its_cancel_is_recorded_by_close_and_only_once(
    make_bus: MakeBus, write_hook: HookWriter, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third-party runner that does not stop when told: close() records its shadow fire
    itself once its grace is over, and the late run is not recorded a second time."""
    import hookbus.dispatch
    from hookbus import hookimpl
    from hookbus.decision import Outcome

    released = threading.Event()
    started = threading.Event()
    ran_on: list[threading.Thread] = []

    class Stubborn:
        def parse(self, key: str, value: object, context: Any) -> object:
            return value

        def schema(self, key: str) -> dict[str, Any]:
            return {}

        def run(self, call: Any) -> Outcome:
            ran_on.append(threading.current_thread())
            started.set()
            released.wait(30)
            return Outcome("deny", reason="late")

    class Plugin:
        @hookimpl
        def hookbus_register_runners(self, register: Any) -> None:
            register.add("stubborn", Stubborn())

    monkeypatch.setattr(hookbus.dispatch, "CANCEL_GRACE_SECONDS", 0.2)
    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, shadow=True, stubborn=True)
    bus = make_bus(plugins=[Plugin()])
    try:
        assert bus.emit("PreToolUse", LS).behavior == "allow"
        assert started.wait(10)
        bus.close(timeout=0)
        [record] = shadow_records(home)
        assert (record["status"], record["enforced"]) == ("error", "allow") and "did not stop" in record["error"]
    finally:
        released.set()
    ran_on[0].join(10)  # the late run is over, and its thread ended (the bus is closed)
    assert not ran_on[0].is_alive() and len(shadow_records(home)) == 1


def test_the_wait_a_server_announces_leaves_shadow_hooks_out(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    """`started` tells a client how long to wait for the answer: the enforcing hooks'
    longest timeout. A shadow hook's (an hour) would hold a client of a wedged server
    that long."""
    from hookbus.dispatch import RUNNER_GRACE_SECONDS

    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, shadow=True, timeout="1h", command="exit 0")
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, timeout="20s", command="exit 0")
    bus = make_bus()
    waits: list[float] = []
    assert bus.submit("PreToolUse", LS, on_start=waits.append).result(30).behavior == "allow"
    assert waits == [20.0 + RUNNER_GRACE_SECONDS]
    shadow_only: list[float] = []
    future = bus.submit("UserPromptSubmit", {"prompt": "hi"}, on_start=shadow_only.append)
    assert future.done() and future.result().behavior == "allow" and shadow_only == []


def test_a_server_answers_at_once_and_lets_a_shadow_hook_finish(write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    from servekit import Served, wait_for

    release = tmp_path / "release"
    directory = write_shadow_and_guard(
        write_hook, home, f'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; while [ ! -e {release} ]; do sleep 0.01; done; {DENY}'
    )
    with Served(home):
        result = hookbus("emit", "PreToolUse", "--home", str(home), input=json.dumps(LS))
        assert json.loads(result.stdout)["behavior"] == "deny", result.stderr
        assert "running in-process" not in result.stderr
        from conftest import live_processes_in_group

        assert live_processes_in_group(shadow_group(directory)), "the answer waited for the shadow hook"
        release.touch()
        wait_for(lambda: bool(shadow_records(home)), 30, "the shadow hook's record")
    [record] = shadow_records(home)
    assert (record["status"], record["enforced"]) == ("deny", "deny")


def test_shadow_hooks_past_the_bound_are_not_run_and_are_recorded(
    make_bus: MakeBus, write_hook: HookWriter, home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Shadow hooks are never waited for, so a host that emits faster than they finish
    would pile up their processes until an enforcing hook could start none: past
    MAX_RUNNING_SHADOWS running, a shadow hook does not run, and is recorded so."""
    import hookbus.dispatch

    monkeypatch.setattr(hookbus.dispatch, "MAX_RUNNING_SHADOWS", 1)
    directory = write_shadow_and_guard(write_hook, home)
    write_hook("then", event="PreToolUse", mode="sync", blocking=True, shadow=True, command="exit 0")  # after 'slow'
    bus = make_bus()
    try:
        assert bus.emit("PreToolUse", LS).behavior == "deny"
        [skipped] = shadow_records(home)
        assert (skipped["hook_id"], skipped["status"], skipped["enforced"]) == ("then", "error", "deny")
        assert "not run: 1 shadow hook was running already" in skipped["error"]
        assert bus.emit("PreToolUse", LS).behavior == "deny"
        said = [record.getMessage() for record in caplog.records if "shadow hooks are running" in record.getMessage()]
        assert len(said) == 1 and "MAX_RUNNING_SHADOWS" in said[0], "said once, not once per fire"
        bus.close(timeout=0)
    finally:
        kill_leftovers(directory)


def test_an_undecided_emit_records_its_shadow_hooks_with_the_decision_enforced(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("real", event="PreToolUse", mode="sync", blocking=True, on_error="deny", command="exit 0")
    write_hook("new", event="PreToolUse", mode="sync", blocking=True, shadow=True, on_error="deny", command="exit 0")
    turn_off_home_guard(home)
    bus = make_bus()
    assert bus.undecided("PreToolUse", LS, "cannot read it").behavior == "deny"
    bus.close()
    [record] = shadow_records(home)
    assert (record["status"], record["enforced"]) == ("error", "deny")
    assert "failed as its on_error says" not in record["note"] and "never enforces" in record["note"]
