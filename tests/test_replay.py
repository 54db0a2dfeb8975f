"""``record_envelopes`` and ``hookbus replay``: recorded emits re-run through changed hooks,
finding exactly the decisions that flip; off by default; nothing of a replay recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import HookWriter, read_log
from hookbus import HookBus
from servekit import hookbus

pytestmark = pytest.mark.timeout(120)

MakeBus = Callable[..., HookBus]
RM = "grep -q 'rm -rf' && echo '{\"behavior\": \"deny\", \"reason\": \"no rm\"}' || true"
RM_OR_FORCE = "grep -Eq 'rm -rf|--force' && echo '{\"behavior\": \"deny\", \"reason\": \"no rm, no force\"}' || true"


def settings(home: Path, **values: Any) -> None:
    path = home / "settings.json"
    path.write_text(json.dumps(values))
    path.chmod(0o600)


def call(command: str, thread: str = "t-1") -> dict[str, Any]:
    return {"tool_name": "bash", "thread_id": thread, "tool_input": {"command": command}}


def emits(home: Path) -> list[dict[str, Any]]:
    lines = []
    for path in sorted((home / "logs" / "emits").glob("*.jsonl")):
        lines += [json.loads(line) for line in path.read_text().splitlines()]
    return lines


def test_envelopes_are_not_recorded_by_default(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, command=RM)
    bus = make_bus()
    bus.emit("PreToolUse", call("ls"))
    bus.close()
    assert not (home / "logs" / "emits").exists()
    result = hookbus("replay", "--home", str(home))
    assert result.returncode == 0
    assert result.stdout.strip() == 'no emit is recorded: set "record_envelopes": true in settings.json, and emits from then on are'


def test_an_emit_record_holds_the_envelope_redacted_the_decision_and_the_hooks(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    from hookbus.redaction import clear_secrets, register_secret

    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, command=RM)
    write_hook("later", event="PreToolUse", mode="async", command="true")
    write_hook("only-async", event="Stop", mode="async", command="true")
    register_secret("sk-the-secret-0123456789")
    try:
        bus = make_bus()
        bus.emit("PreToolUse", call("rm -rf build # sk-the-secret-0123456789"))
        bus.emit("Stop", {"thread_id": "t-1"})  # no sync hook ran: no emit record
        bus.close()
    finally:
        clear_secrets()
    [record] = emits(home)
    assert record["event"] == "PreToolUse" and record["hooks"] == ["guard"]
    assert record["decision"] == {"behavior": "deny", "reason": "hook 'guard' denied: no rm"}
    assert record["envelope"]["tool_input"]["command"] == "rm -rf build # [redacted]"
    assert "cut" not in record


def test_replay_finds_exactly_the_flips_a_hook_change_causes(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=RM)
    bus = make_bus()
    for command in ("ls", "rm -rf build", "git push --force", "git status"):
        bus.emit("PreToolUse", call(command))
    bus.close()
    same = hookbus("replay", "--home", str(home))
    assert same.returncode == 0 and same.stdout.strip() == "4 emits replayed: 4 unchanged, 0 flipped; 0 skipped"
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=RM_OR_FORCE)
    changed = hookbus("replay", "--home", str(home), "--json")
    assert changed.returncode == 3
    report = json.loads(changed.stdout)
    assert (report["replayed"], report["unchanged"], report["skipped"]) == (4, 3, [])
    [flip] = report["flipped"]
    assert flip["recorded"] == {"behavior": "allow"} and flip["now"]["behavior"] == "deny" and flip["by"] == ["guard"]
    assert (flip["event"], flip["tool_name"], flip["thread_id"]) == ("PreToolUse", "bash", "t-1")
    text = hookbus("replay", "--home", str(home)).stdout
    assert "FLIP" in text and "allow -> deny  by 'guard': hook 'guard' denied: no rm, no force" in text
    assert len(read_log(home)) == 4, "a replay recorded fires"


def test_a_removed_hook_flips_a_deny_back_and_is_named(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    import shutil

    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, command=RM)
    write_hook("other", event="PreToolUse", mode="sync", command="true")
    bus = make_bus()
    bus.emit("PreToolUse", call("rm -rf build"))
    bus.close()
    shutil.rmtree(home / "hooks" / "guard")
    report = json.loads(hookbus("replay", "--home", str(home), "--json").stdout)
    [flip] = report["flipped"]
    assert flip["now"] == {"behavior": "allow"} and flip["by"] == ["guard"]


def test_filters_and_what_is_skipped(make_bus: MakeBus, write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    ran_async = tmp_path / "async"
    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, command=f'echo "$HOOKBUS_REPLAY" > {seen}')
    write_hook("gate", event="UserPromptSubmit", mode="sync", blocking=True, command="true")
    bus = make_bus()
    bus.emit("PreToolUse", call("ls"))
    bus.emit("UserPromptSubmit", {"prompt": "x" * (70 * 1024), "thread_id": "t-2"})
    bus.close()
    write_hook("later", event="PreToolUse", mode="async", command=f"touch {ran_async}")
    seen.unlink()
    result = json.loads(hookbus("replay", "--home", str(home), "--json").stdout)
    assert (result["replayed"], len(result["skipped"])) == (1, 1)
    assert "recorded cut (it was over 64 KiB)" in result["skipped"][0]["why"]
    assert seen.read_text().strip() == "1" and not ran_async.exists()
    only_gate = json.loads(hookbus("replay", "--home", str(home), "--hook", "gate", "--json").stdout)
    assert (only_gate["replayed"], len(only_gate["skipped"])) == (0, 1)
    by_event = json.loads(hookbus("replay", "--home", str(home), "--event", "PreToolUse", "--json").stdout)
    assert (by_event["replayed"], by_event["skipped"]) == (1, [])
    future = hookbus("replay", "--home", str(home), "--since", "2999-01-01")
    assert future.returncode == 0 and future.stdout.strip() == "no recorded emit matches"
    backwards = hookbus("replay", "--home", str(home), "--since", "1h", "--until", "2h")
    assert backwards.returncode == 1 and "is not after --since" in backwards.stderr


def test_record_envelopes_must_be_a_boolean(home: Path) -> None:
    settings(home, record_envelopes="yes")
    result = hookbus("validate", "--home", str(home))
    assert "settings.json: expected true or false @ $.record_envelopes" in result.stdout + result.stderr


def test_hookbus_sqlite_keeps_emit_records_too(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    pytest.importorskip("hookbus_sqlite")
    settings(home, record_envelopes=True, recorder="sqlite")
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=RM)
    bus = make_bus()
    bus.emit("PreToolUse", call("git push --force"))
    bus.emit("PreToolUse", call("rm -rf build"))
    assert [record.decision.get("behavior") for record in bus.read_emits()] == ["allow", "deny"]
    bus.close()
    assert not (home / "logs" / "emits").exists()  # only the recorder in use keeps them
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=RM_OR_FORCE)
    report = json.loads(hookbus("replay", "--home", str(home), "--json").stdout)
    assert (report["replayed"], len(report["flipped"])) == (2, 1)


# -- what another user could have written is never replayed ---------------------------------------


def planted(command: str, at: str = "2026-01-02T03:04:05.000Z") -> str:
    return json.dumps({
        "at": at, "event": "PreToolUse", "hooks": ["guard"], "decision": {"behavior": "allow"},
        "envelope": {"tool_name": "bash", "thread_id": "t-9", "tool_input": {"command": command}},
    }) + "\n"


def test_a_day_others_may_write_is_refused_named_and_the_rest_replayed(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=RM)
    bus = make_bus()
    bus.emit("PreToolUse", call("ls"))
    bus.close()
    day = home / "logs" / "emits" / "2026-01-02.jsonl"
    day.write_text(planted("rm -rf build"))  # it would flip: allow recorded, deny now
    day.chmod(0o646)

    text = hookbus("replay", "--home", str(home))
    report = hookbus("replay", "--home", str(home), "--json")

    assert text.returncode == 1 and report.returncode == 1
    assert text.stderr.splitlines() == [
        f"hookbus replay: {day} is writable by others (mode 0646), who could then choose the envelopes hookbus replay "
        f"runs your hooks on: run chmod go-w {day}; its emits were not replayed"
    ]
    assert text.stdout.splitlines()[-1] == "1 emit replayed: 1 unchanged, 0 flipped; 0 skipped; 1 refused (above)"
    document = json.loads(report.stdout)
    assert (document["replayed"], document["flipped"]) == (1, [])
    assert document["refused"] == [text.stderr.splitlines()[0].removeprefix("hookbus replay: ").removesuffix("; its emits were not replayed")]


def test_read_emits_says_what_it_refused_and_hands_back_the_rest(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    from hookbus.records import RefusedRecords

    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", mode="sync", command="true")
    bus = make_bus()
    bus.emit("PreToolUse", call("ls"))
    link = home / "logs" / "emits" / "2026-01-02.jsonl"
    (home / "elsewhere.jsonl").write_text(planted("planted"))
    link.symlink_to(home / "elsewhere.jsonl")
    with pytest.raises(RefusedRecords) as refused:
        bus.read_emits()
    assert [record.tool_name for record in refused.value.records] == ["bash"]
    assert "planted" not in json.dumps([record.envelope for record in refused.value.records])
    [said] = refused.value.refusals
    assert said.startswith(f"{link} is a symbolic link") and f"rm {link}" in said


def test_only_refusals_exit_1_and_say_nothing_was_replayed(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    settings(home, record_envelopes=True)
    write_hook("guard", event="PreToolUse", mode="sync", command="true")
    bus = make_bus()
    bus.emit("PreToolUse", call("ls"))
    bus.close()
    (home / "logs" / "emits").chmod(0o777)
    result = hookbus("replay", "--home", str(home))
    assert result.returncode == 1
    assert result.stdout.strip() == "no emit was replayed: 1 emit log was refused (above)"
    assert f"{home / 'logs' / 'emits'} is writable by group and others (mode 0777)" in result.stderr


def test_hookbus_sqlite_refuses_a_database_others_may_write(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    pytest.importorskip("hookbus_sqlite")
    settings(home, record_envelopes=True, recorder="sqlite")
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=RM)
    bus = make_bus()
    bus.emit("PreToolUse", call("rm -rf build"))
    bus.close()
    database = home / "logs" / "hooks.sqlite3"
    assert os.stat(database).st_mode & 0o777 == 0o600
    database.chmod(0o664)
    result = hookbus("replay", "--home", str(home))
    assert result.returncode == 1, result.stdout
    assert f"hookbus replay: {database} is writable by group (mode 0664)" in result.stderr and f"chmod go-w {database}" in result.stderr
