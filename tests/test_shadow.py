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
    assert {row["id"]: row["mode"] for row in listed["hooks"]}["new"] == "sync blocking shadow"


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
