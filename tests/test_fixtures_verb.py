"""``hookbus test``: a hook's fixtures (``hooks/<id>/tests/*.json``), run for real but not
as traffic: no record, no state.json, no Stop memory; ``HOOKBUS_TEST=1`` in the hook's
environment; path-qualified errors for a bad fixture, in ``test`` and in ``validate``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from conftest import HookWriter
from servekit import hookbus

pytestmark = pytest.mark.timeout(120)

DENY_RM = "grep -q 'rm -rf' && echo '{\"behavior\": \"deny\", \"reason\": \"no rm -rf\"}' || true"
RM = {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}}
LS = {"tool_name": "bash", "tool_input": {"command": "ls"}}


def fixture(home: Path, hook_id: str, name: str, document: dict[str, Any] | str) -> Path:
    directory = home / "hooks" / hook_id / "tests"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def run_test(home: Path, *extra: str) -> Any:
    return hookbus("test", "--home", str(home), *extra)


@pytest.fixture
def guard(write_hook: HookWriter, home: Path) -> Path:
    return write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=DENY_RM)


def test_passing_and_failing_fixtures_say_so_and_exit_by_it(guard: Path, home: Path) -> None:
    fixture(home, "guard", "deny.json", {"event": "PreToolUse", "envelope": RM, "expect": {"behavior": "deny", "reason": "rm -rf"}})
    fixture(home, "guard", "ls.json", {"event": "PreToolUse", "envelope": LS, "expect": {"behavior": "allow"}})
    passed = run_test(home)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.splitlines() == [
        "PASS  hooks/guard/tests/deny.json", "PASS  hooks/guard/tests/ls.json", "2 fixtures: 2 passed, 0 failed",
    ]
    fixture(home, "guard", "wrong.json", {"event": "PreToolUse", "envelope": LS, "expect": {"behavior": "deny", "reason": "nope"}})
    failed = run_test(home)
    assert failed.returncode == 1
    assert "FAIL  hooks/guard/tests/wrong.json" in failed.stdout
    assert "expected behavior to be 'deny', got 'allow'" in failed.stdout and "expected reason to contain 'nope', got None" in failed.stdout
    assert failed.stdout.splitlines()[-1] == "3 fixtures: 2 passed, 1 failed"
    as_json = json.loads(run_test(home, "--json").stdout)
    assert (as_json["passed"], as_json["failed"]) == (2, 1)
    [wrong] = [result for result in as_json["results"] if not result["ok"]]
    assert wrong["hook"] == "guard" and wrong["fixture"] == "hooks/guard/tests/wrong.json"
    assert wrong["expected"] == {"behavior": "deny", "reason": "nope"} and wrong["got"] == {"behavior": "allow"}


def test_a_test_fire_is_not_traffic(write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    ran_async = tmp_path / "async"
    write_hook("look", event="PreToolUse", mode="sync", command=f'echo "$HOOKBUS_TEST" > {seen}')
    write_hook("later", event="PreToolUse", mode="async", command=f"touch {ran_async}")
    fixture(home, "look", "one.json", {"event": "PreToolUse", "envelope": LS, "expect": {"behavior": "allow"}})
    fixture(home, "later", "one.json", {"event": "PreToolUse", "envelope": LS, "merged": True, "expect": {"behavior": "allow"}})
    assert run_test(home).returncode == 0
    assert seen.read_text().strip() == "1"
    assert not ran_async.exists(), "an async hook ran in a test"
    assert not (home / "hooks" / "look" / "state.json").exists() and not (home / "logs").exists()


def test_the_stop_memory_is_neither_read_nor_changed(write_hook: HookWriter, home: Path) -> None:
    gate = 'if grep -Eq \'"stop_hook_active": ?true\'; then exit 0; fi; echo \'{"decision": "block", "reason": "go on"}\''
    write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=gate)
    stop = {"event": "Stop", "envelope": {"thread_id": "t-1"}, "expect": {"continue_with": "go on"}}
    fixture(home, "gate", "a.json", stop)
    fixture(home, "gate", "b.json", stop)  # the same stop again: still the first one
    result = run_test(home)
    assert result.returncode == 0, result.stdout


def test_a_fixture_runs_its_hook_alone_unless_merged(guard: Path, write_hook: HookWriter, home: Path) -> None:
    write_hook("note", event="PreToolUse", mode="sync", command="echo 'checked by note'")
    fixture(home, "note", "alone.json", {"event": "PreToolUse", "envelope": RM, "expect": {"behavior": "context", "context": "checked by note"}})
    fixture(home, "note", "merged.json", {"event": "PreToolUse", "envelope": RM, "merged": True, "expect": {"behavior": "deny", "reason": "no rm -rf"}})
    result = run_test(home, "note")
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == "2 fixtures: 2 passed, 0 failed"


def test_a_claude_code_fixture_is_translated_as_the_bridge_translates(write_hook: HookWriter, home: Path) -> None:
    write_hook("env-files", event="PreToolUse", matcher="write_file", mode="sync", blocking=True,
               command="grep -q '\"path\": *\"[^\"]*\\.env\"' && echo '{\"behavior\": \"deny\", \"reason\": \"not .env\"}' || true")
    claude = {"event": "PreToolUse", "dialect": "claude-code",
              "envelope": {"session_id": "s", "tool_name": "Write", "tool_input": {"file_path": "app/.env", "content": "x"}},
              "expect": {"behavior": "deny", "reason": "not .env"}}
    fixture(home, "env-files", "claude.json", claude)
    fixture(home, "env-files", "session.json", {"event": "SessionStart", "dialect": "claude-code", "merged": True, "envelope": {}, "expect": {"behavior": "allow"}})
    result = run_test(home)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"event": "PreToolUse", "envelope": {}, "expct": {}}', "unknown field 'expct' (fields: event, envelope, expect, merged, dialect, description) @ $"),
        ('{"event": "preToolUse", "expect": {"behavior": "deny"}}', "unknown event 'preToolUse'; events are"),
        ('{"event": "PreToolUse", "expect": {}}', "expect must be an object with at least one of behavior, reason"),
        ('{"event": "PreToolUse", "expect": {"behavior": "block"}}', "behavior must be one of allow, deny, modify, context, got 'block' @ $.expect.behavior"),
        ('{"event": "PreToolUse", "expect": {"reason": 7}}', "reason must be a string (matched as a substring) @ $.expect.reason"),
        ('{"event": "Write", "dialect": "claude-code", "expect": {"behavior": "deny"}}', "'Write' is not a Claude Code event hookbus takes"),
        ('{"event": "PreToolUse", "dialect": "gemini", "expect": {"behavior": "deny"}}', "unknown dialect 'gemini'; those there are: claude-code, codex @ $.dialect"),
        ('{"event": "PreToolUse", ', "invalid JSON"),
        ("[1]", "expected an object, got list @ $"),
    ],
)
def test_a_bad_fixture_is_refused_with_where(guard: Path, home: Path, text: str, message: str) -> None:
    fixture(home, "guard", "bad.json", text)
    result = run_test(home)
    assert result.returncode == 1
    assert "FAIL  hooks/guard/tests/bad.json" in result.stdout and f"hooks/guard/tests/bad.json: {message}" in result.stdout, result.stdout
    validated = hookbus("validate", "--home", str(home))
    assert validated.returncode == 1 and f"hooks/guard/tests/bad.json: {message}" in validated.stdout


def test_a_fixture_others_may_change_is_not_obeyed(guard: Path, home: Path) -> None:
    path = fixture(home, "guard", "deny.json", {"event": "PreToolUse", "envelope": RM, "expect": {"behavior": "deny"}})
    path.chmod(0o666)
    os.chmod(path.parent, 0o755)
    result = run_test(home)
    assert result.returncode == 1 and "writable by" in result.stdout, result.stdout
    # The hook did not load: that is said, and written nowhere (no state.json of it).
    assert "the hook did not load" in result.stdout and not (home / "hooks" / "guard" / "state.json").exists()


def test_an_unknown_hook_or_no_fixture_at_all(home: Path, guard: Path) -> None:
    none = run_test(home)
    assert none.returncode == 0 and none.stdout.startswith("no fixtures: write hooks/ID/tests/NAME.json")
    missing = run_test(home, "nosuch")
    assert missing.returncode == 1 and "the hook did not load: hooks/nosuch is not a hook of" in missing.stdout


def test_hookbus_new_writes_a_fixture_that_passes(tmp_path: Path) -> None:
    home = tmp_path / "new-home"
    for hook_id, event in (("guard", "PreToolUse"), ("ctx", "Stop")):
        made = hookbus("new", hook_id, "--event", event, "--home", str(home))
        assert made.returncode == 0, made.stderr
        assert "tests/sample.json  a fixture: the sample, expected to be" in made.stdout
    result = run_test(home)
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "2 fixtures: 2 passed, 0 failed", result.stdout


def test_fixtures_run_from_pytest(guard: Path, home: Path) -> None:
    from hookbus.testing import assert_fixtures_pass, run_fixtures

    fixture(home, "guard", "deny.json", {"event": "PreToolUse", "envelope": RM, "expect": {"behavior": "deny"}})
    assert_fixtures_pass(home)
    fixture(home, "guard", "wrong.json", {"event": "PreToolUse", "envelope": LS, "expect": {"behavior": "deny"}})
    with pytest.raises(AssertionError, match="hooks/guard/tests/wrong.json: expected behavior to be 'deny', got 'allow'"):
        assert_fixtures_pass(home)
    assert [result.ok for result in run_fixtures(home, ["guard"])] == [True, False]
