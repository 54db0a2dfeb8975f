"""docs/codex.md says what ``hookbus import codex`` and its bridge do: the page's files
import as it says, its commands run as a user types them (in a HOME of their own), the
output it says Codex honours or refuses reads that way, the events and timeouts it names
are the bridge's, and the trust table it shows is the one written."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from docskit import DOCS, bash, logical_lines, section, section_blocks, user_environment
from hookbus.contract import outcome_from_command
from hookbus.dialects import codex_names
from hookbus.hosts.codex_trust import parse_key, trust_hash
from hookbus.hosts.settingsfile import load_toml

DOC = DOCS / "codex.md"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def user(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A user with the page's hooks.json and config.toml in ~/.codex."""
    home = tmp_path / "me"
    codex = home / ".codex"
    codex.mkdir(parents=True)
    [hooks_json] = section_blocks(DOC, "1. Import Codex's hooks", "json")
    [config_toml, *_] = section_blocks(DOC, "1. Import Codex's hooks", "toml")
    (codex / "hooks.json").write_text(hooks_json)
    (codex / "config.toml").write_text(config_toml)
    return user_environment(home, CODEX_HOME=str(codex), CODEX_BIN=None), home


def run_block(heading: str, env: dict[str, str], cwd: Path, first: bool = False) -> list[str]:
    """Run the shell blocks under ``heading`` (only its own first one with ``first``)."""
    said = []
    found = section_blocks(DOC, heading, "sh")
    for block in found[:1] if first else found:
        for line in logical_lines(block):
            done = bash(line, env, cwd)
            assert done.returncode == 0, f"{line}\n{done.stdout}{done.stderr}"
            said.append(done.stdout)
    return said


def test_the_import_runs_as_the_page_says(user: tuple[dict[str, str], Path]) -> None:
    env, home = user
    dry, hooks_json, config_toml = run_block("1. Import Codex's hooks", env, home)
    assert "dry run: nothing was written" in dry
    text = " ".join(section(DOC, "1. Import Codex's hooks").split())
    for name in re.findall(r"\(PreModelRequest, [^)]*\)", text)[0].strip("()").split(", "):
        name = name.removeprefix("and ")
        assert name in codex_names.ALL_EVENTS and name not in codex_names.VIX_EVENT
    assert "skipped event SessionEnd" in hooks_json
    hooks = home / ".vix" / "hooks"
    written = {path.name: json.loads((path / "hook.json").read_text()) for path in hooks.iterdir()}
    assert {spec["dialect"] for spec in written.values()} == {"codex"}
    start = next(spec for spec in written.values() if spec["trigger"]["event"] == "ThreadStart")
    assert start["timeout"] == "600s"
    assert "pretooluse-bash-guard-sh" in config_toml and "state" not in config_toml


def honoured_rows() -> list[tuple[str, str]]:
    table = section(DOC, "How a Codex hook's output is read")
    rows = [line.split("|")[1:4] for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    return [(answer.strip(), reading.strip()) for answer, _, reading in rows]


def test_the_rows_are_the_readings() -> None:
    """A sample answer for each row, on its first event, reads as the row says."""
    samples = {
        "exit 2 with a reason on stderr": (2, "", "why"),
        "`hookSpecificOutput.permissionDecision: \"deny\"` with a `permissionDecisionReason`":
            (0, '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "no"}}', ""),
        "`decision: \"block\"` with a `reason`": (0, '{"decision": "block", "reason": "no"}', ""),
        "`permissionDecision: \"allow\"` with `updatedInput`":
            (0, '{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}}', ""),
        "`hookSpecificOutput.decision.behavior` `\"allow\"` or `\"deny\"`":
            (0, '{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "no"}}}', ""),
        "`additionalContext`": (0, '{"hookSpecificOutput": {"additionalContext": "note"}}', ""),
        "plain stdout": (0, "words", ""),
        "`continue: false`": (0, '{"continue": false, "stopReason": "done"}', ""),
    }
    table = section(DOC, "How a Codex hook's output is read")
    rows = [[cell.strip() for cell in line.split("|")[1:4]] for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows
    for answer, events, reading in rows:
        code, stdout, stderr = samples[answer]
        for event in events.split(", "):
            outcome = outcome_from_command(code, stdout.encode(), stderr.encode(), event, "codex")
            assert outcome.error is None, (answer, event, outcome.error)
            if reading.startswith("deny"):
                assert outcome.behavior == "deny", (answer, event)
            elif reading.startswith("context"):
                assert outcome.behavior == "context", (answer, event)
            elif reading == "modify":
                assert outcome.behavior == "modify"
            elif reading.startswith("go on"):
                assert outcome.continue_with == "why"
            elif reading == "approve or deny":
                assert outcome.behavior == "deny"
            else:
                assert reading == "end the turn" and outcome.halt == "done", (answer, event)


def test_what_codex_refuses_is_the_hooks_failure() -> None:
    failures = [
        (2, "", "", "PreToolUse"),
        (2, "", "why", "ThreadStart"),
        (1, "", "x", "PreToolUse"),
        (0, '{"hookSpecificOutput": {"permissionDecision": "deny"}}', "", "PreToolUse"),
        (0, '{"hookSpecificOutput": {"permissionDecision": "allow"}}', "", "PreToolUse"),
        (0, '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "?"}}', "", "PreToolUse"),
        (0, '{"hookSpecificOutput": {"updatedInput": {}}}', "", "PreToolUse"),
        (0, '{"decision": "approve"}', "", "PreToolUse"),
        (0, '{"decision": "block"}', "", "PreToolUse"),
        (0, '{"continue": false}', "", "PreToolUse"),
        (0, '{"stopReason": "x"}', "", "PreToolUse"),
        (0, '{"suppressOutput": true}', "", "PreToolUse"),
        (0, '{"hookSpecificOutput": {"permissionDecision": "allow"}}', "", "PermissionRequest"),
        (0, '{"hookSpecificOutput": {"decision": {"behavior": "allow", "updatedPermissions": []}}}', "", "PermissionRequest"),
        (0, '{"hookSpecificOutput": {"updatedToolOutput": "x"}}', "", "PostToolUse"),
        (0, "{not json", "", "PreToolUse"),
        (0, '{"behavior": "deny"}', "", "PreToolUse"),
    ]
    for code, stdout, stderr, event in failures:
        outcome = outcome_from_command(code, stdout.encode(), stderr.encode(), event, "codex")
        assert outcome.behavior == "allow" and outcome.error, (code, stdout, event)


def test_the_bridge_goes_where_the_page_says_and_is_trusted_as_shown(user: tuple[dict[str, str], Path]) -> None:
    env, home = user
    text = " ".join(section(DOC, "2. Use hookbus as Codex's hook engine").split())
    listed = re.search(r"on every event Codex has that hookbus has: (.*?)\. Not on", text)
    assert listed is not None
    assert listed.group(1).replace(" and ", ", ").split(", ") == list(codex_names.VIX_EVENT)
    (home / ".codex" / "config.toml").write_text('model = "gpt-5"  # mine\n')
    said = run_block("2. Use hookbus as Codex's hook engine", env, home, first=True)
    assert any("checked: Codex CLI trusts all 10 bridge entries" in out for out in said)
    source = str(home / ".codex" / "hooks.json")
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]
    bridged = {event for event, groups in hooks.items() if "codex-hook" in json.dumps(groups)}
    assert bridged == set(codex_names.VIX_EVENT)
    for event in codex_names.VIX_EVENT:
        assert hooks[event][-1]["hooks"][0]["timeout"] == 600
    config = (home / ".codex" / "config.toml").read_text()
    assert config.startswith('model = "gpt-5"  # mine\n')
    state = load_toml(config, "config.toml")["hooks"]["state"]
    assert all(parse_key(key, source) is not None for key in state)
    # The table the page shows has the shape written: the file, the event, the group, the hook.
    [shown] = section_blocks(DOC, "Trust: why the bridge needs it", "toml")
    [(key, value)] = load_toml(shown, "page")["hooks"]["state"].items()
    assert parse_key(key, "/home/me/.codex/hooks.json") == ("PreToolUse", 1, 0)
    command = re.search(r"For the bridge `([^`]*)` \(timeout 600\)", " ".join(section(DOC, "Trust: why the bridge needs it").split()))
    assert command is not None
    assert value["trusted_hash"] == trust_hash("PreToolUse", None, {"type": "command", "command": command.group(1), "timeout": 600})
    # Undoing it takes the bridge and its trust out.
    assert (home / ".codex" / "hooks.json").exists()
    run_block("Undoing it", env, home)
    assert "state" not in load_toml((home / ".codex" / "config.toml").read_text(), "config.toml").get("hooks", {})
