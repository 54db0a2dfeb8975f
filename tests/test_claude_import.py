"""``hookbus import claude-code FILE``: Claude Code's hooks become hookbus hooks.

Real files in tmp_path, run through the real CLI (a subprocess) and through the functions.
The imported hooks are then loaded by hookbus (``hookbus validate``) and fired
(``hookbus emit``), so each test checks what the import means, not only what it writes.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus.hosts.install import bridge_command, install_bridge, is_bridge_command
from hookbus.hosts.claude_import import (
    MAX_ID_LENGTH,
    base_id,
    format_timeout,
    plan_import,
    run_import,
    translate_matcher,
    unique_id,
)
from servekit import environment, hookbus

# A realistic settings.json: several events, a Bash matcher, Write|Edit, an MCP regex, "*",
# timeouts, a prompt hook, SessionStart, and events hookbus has no counterpart for.
SETTINGS: dict[str, Any] = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {"type": "command", "command": "grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; } || exit 0", "timeout": 30},
                    {"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/log-bash.sh", "timeout": 1.5},
                ],
            },
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "echo 'protected' >&2; exit 2"}]},
            {"matcher": "mcp__.*", "hooks": [{"type": "prompt", "prompt": "Is this MCP call safe? $ARGUMENTS", "timeout": 20}]},
        ],
        "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "npx prettier --write ."}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "date"}]}],
        "Stop": [{"matcher": "ignored", "hooks": [{"type": "prompt", "prompt": "Did Claude finish every task?"}]}],
        "SessionStart": [{"matcher": "startup|resume", "hooks": [{"type": "command", "command": "cat NOTES.md"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send a"}, {"type": "command", "command": "notify-send b"}]}],
    },
}

EXPECTED_IDS = [
    "pretooluse-bash-grep-q-rm-rf-echo-no-rm-rf-2",
    "pretooluse-bash-log-bash-sh",
    "pretooluse-write-edit-echo-protected-2-exit-2",
    "pretooluse-mcp-is-this-mcp-call-safe-arguments",
    "posttooluse-npx-prettier-write",
    "userpromptsubmit-date",
    "stop-did-claude-finish-every-task",
    "sessionstart-startup-resume-cat-notes-md",
]


def env() -> dict[str, str]:
    return environment(VIX_HOME=None, VIX_DISABLE_HOOKS=None, HOOKBUS_SOCKET=None)


def run(*arguments: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return hookbus(*arguments, input=input, env=env())


def this_bridge(home: Path | str, verb: str = "claude-code-hook") -> str:
    """The bridge command ``python -m hookbus import ... --install-bridge`` writes: this very
    interpreter, and the home spelled out."""
    return f"{shlex.quote(sys.executable)} -m hookbus {verb} --home {shlex.quote(str(home))}"


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
    return path


def hook_json(home: Path, hook_id: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((home / "hooks" / hook_id / "hook.json").read_text())
    return document


def hook_ids(home: Path) -> list[str]:
    hooks = home / "hooks"
    return sorted(p.name for p in hooks.iterdir()) if hooks.exists() else []


@pytest.fixture
def settings(tmp_path: Path) -> Path:
    return write_json(tmp_path / "project" / ".claude" / "settings.json", SETTINGS)


@pytest.fixture(autouse=True)
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: an install without --home writes into ~/.vix, which must
    not be the real one."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A home that does not exist yet: the import creates it."""
    return tmp_path / "vix"


# -- a realistic settings.json ---------------------------------------------------------------


def test_a_settings_file_becomes_one_valid_hook_per_entry(settings: Path, target: Path) -> None:
    result = run("import", "claude-code", str(settings), "--home", str(target))
    assert result.returncode == 0, result.stderr
    assert hook_ids(target) == sorted(EXPECTED_IDS)
    for hook_id in EXPECTED_IDS:
        assert f"wrote {target / 'hooks' / hook_id / 'hook.json'}" in result.stdout
        text = (target / "hooks" / hook_id / "hook.json").read_text()
        assert text.endswith("}\n") and text.startswith('{\n  "id": ')  # indent 2, final newline
    # hookbus itself loads every one of them.
    validated = run("validate", "--home", str(target))
    assert validated.returncode == 0, validated.stdout
    *oks, summary = validated.stdout.splitlines()
    assert sorted(line.split()[-1] for line in oks) == [f"hooks/{i}" for i in sorted(EXPECTED_IDS)]
    assert summary.startswith(f"{len(EXPECTED_IDS)} valid hooks, no problems in ")


def test_the_written_specs_say_exactly_what_claude_code_meant(settings: Path, target: Path) -> None:
    assert run("import", "claude-code", str(settings), "--home", str(target)).returncode == 0
    created_by = f"import:claude-code:{settings}"
    bash = hook_json(target, "pretooluse-bash-grep-q-rm-rf-echo-no-rm-rf-2")
    assert bash == {
        "id": "pretooluse-bash-grep-q-rm-rf-echo-no-rm-rf-2",
        "name": "PreToolUse Bash: grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; } || exi...",  # 60 characters
        "created_by": created_by,
        "trigger": {"event": "PreToolUse", "matcher": "Bash"},
        "mode": "sync",
        "blocking": True,
        "timeout": "30s",
        "dialect": "claude-code",
        "command": SETTINGS["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
    }
    log = hook_json(target, "pretooluse-bash-log-bash-sh")
    assert log["timeout"] == "1500ms"
    assert log["command"] == '"$CLAUDE_PROJECT_DIR"/.claude/hooks/log-bash.sh'  # unchanged
    assert "env" not in log  # not a plugin
    assert hook_json(target, "pretooluse-write-edit-echo-protected-2-exit-2")["trigger"] == {"event": "PreToolUse", "matcher": "Write|Edit"}
    assert hook_json(target, "pretooluse-write-edit-echo-protected-2-exit-2")["timeout"] == "60s"  # Claude's default
    mcp = hook_json(target, "pretooluse-mcp-is-this-mcp-call-safe-arguments")
    assert mcp["trigger"] == {"event": "PreToolUse", "matcher": ".*(?:mcp__.*).*"}
    assert mcp["prompt"] == "Is this MCP call safe? $ARGUMENTS"
    assert mcp["timeout"] == "20s" and mcp["dialect"] == "claude-code" and mcp["blocking"] is True
    post = hook_json(target, "posttooluse-npx-prettier-write")
    assert post["trigger"] == {"event": "PostToolUse"}  # "*" is left out
    assert post["mode"] == "sync" and "blocking" not in post  # PostToolUse cannot block
    prompt = hook_json(target, "userpromptsubmit-date")
    assert prompt["trigger"] == {"event": "UserPromptSubmit"} and prompt["blocking"] is True
    stop = hook_json(target, "stop-did-claude-finish-every-task")
    assert stop["trigger"] == {"event": "Stop"}  # Stop has no matcher in hookbus
    assert stop["timeout"] == "30s"  # Claude's default for a prompt hook
    assert "blocking" not in stop and stop["mode"] == "sync"
    session = hook_json(target, "sessionstart-startup-resume-cat-notes-md")
    assert session["trigger"] == {"event": "ThreadStart", "matcher": "startup|resume"}
    assert session["name"] == "SessionStart startup|resume: cat NOTES.md"
    assert all(hook_json(target, i)["created_by"] == created_by for i in EXPECTED_IDS)


def test_events_without_a_counterpart_are_listed_and_skipped(settings: Path, target: Path) -> None:
    result = run("import", "claude-code", str(settings), "--home", str(target))
    assert result.returncode == 0
    assert "skipped event SessionEnd (1 hook): hookbus has no counterpart" in result.stdout
    assert "skipped event Notification (2 hooks): hookbus has no counterpart" in result.stdout
    assert not any("bye" in json.dumps(hook_json(target, i)) or "notify" in json.dumps(hook_json(target, i)) for i in hook_ids(target))
    # What changed in translation is said next to the hook.
    assert "matcher 'ignored' dropped: Stop has no matcher in hookbus" in result.stdout
    assert "$ARGUMENTS is not replaced" in result.stdout


def test_a_misspelt_event_is_skipped_with_a_suggestion(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {
        "PreToolUs": [{"hooks": [{"type": "command", "command": "true"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "true"}]}],
    }})
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 0
    assert "skipped event PreToolUs (1 hook): hookbus has no counterpart (did you mean 'PreToolUse'?)" in result.stdout
    assert hook_ids(target) == ["stop-true"]


def test_only_skipped_events_import_nothing_and_fail(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {"SessionEnd": [{"hooks": [{"type": "command", "command": "x"}]}]}})
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 1
    assert "skipped event SessionEnd (1 hook)" in result.stdout
    assert f"{source}: no hook to import" in result.stderr
    assert not target.exists()


# -- the imported hooks run as Claude Code ran them --------------------------------------------


def emit(home: Path, event: str, envelope: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return run("emit", event, "--home", str(home), "--no-server", input=json.dumps(envelope))


def test_imported_guards_deny_what_claude_code_would_deny(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {"PreToolUse": [
        # Claude's envelope on stdin: tool_name "Bash", tool_input.command.
        {"matcher": "Bash", "hooks": [{"type": "command", "command":
            "grep -q '\"tool_name\":\"Bash\".*rm -rf' && { echo 'no rm -rf' >&2; exit 2; } || exit 0"}]},
        {"matcher": "Write|Edit", "hooks": [{"type": "command", "command":
            "grep -q '\"file_path\":\"[^\"]*\\.env\"' && { echo 'protected: .env' >&2; exit 2; } || exit 0"}]},
        {"matcher": "mcp__.*", "hooks": [{"type": "command", "command": "echo 'no MCP here' >&2; exit 2"}]},
    ]}})
    assert run("import", "claude-code", str(source), "--home", str(target)).returncode == 0
    denied = emit(target, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/"})
    assert denied.returncode == 2, denied.stdout + denied.stderr
    assert "no rm -rf" in json.loads(denied.stdout)["reason"]
    assert emit(target, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"}).returncode == 0
    env_write = emit(target, "PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "a/.env"}, "cwd": "/"})
    assert env_write.returncode == 2 and "protected: .env" in env_write.stdout
    # The regex is unanchored, as in Claude Code: it matches inside the name.
    assert emit(target, "PreToolUse", {"tool_name": "mcp__github__create_issue", "cwd": "/"}).returncode == 2
    assert emit(target, "PreToolUse", {"tool_name": "x_mcp__y", "cwd": "/"}).returncode == 2
    # A plain word is exact: WriteFile is not Write.
    assert emit(target, "PreToolUse", {"tool_name": "WriteFile", "tool_input": {"file_path": ".env"}, "cwd": "/"}).returncode == 0


# -- plugins -----------------------------------------------------------------------------------


def make_plugin(tmp_path: Path) -> Path:
    plugin = tmp_path / "plugins" / "reminders"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text('{"name": "reminders"}')
    (plugin / "context.txt").write_text("remember the style guide\n")
    write_json(plugin / "hooks" / "hooks.json", {
        "description": "Reminders for every prompt",
        "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "cat \"${CLAUDE_PLUGIN_ROOT}/context.txt\""}]}]},
    })
    return plugin


def test_a_plugins_hooks_get_its_root(tmp_path: Path, target: Path) -> None:
    plugin = make_plugin(tmp_path)
    result = run("import", "claude-code", str(plugin / "hooks" / "hooks.json"), "--home", str(target))
    assert result.returncode == 0, result.stderr
    assert f"plugin root (CLAUDE_PLUGIN_ROOT): {plugin}" in result.stdout
    assert result.stderr == ""
    (hook_id,) = hook_ids(target)
    spec = hook_json(target, hook_id)
    assert spec["env"] == {"CLAUDE_PLUGIN_ROOT": str(plugin)}
    assert spec["command"] == 'cat "${CLAUDE_PLUGIN_ROOT}/context.txt"'
    # At run time the variable names the plugin, so the file is found.
    fired = emit(target, "UserPromptSubmit", {"prompt": "hi", "cwd": "/"})
    assert fired.returncode == 0
    assert json.loads(fired.stdout)["context"] == "remember the style guide"


def test_plugin_root_can_be_given_and_is_warned_about_when_unknown(tmp_path: Path, target: Path) -> None:
    plugin = make_plugin(tmp_path)
    loose = tmp_path / "elsewhere" / "hooks.json"
    write_json(loose, json.loads((plugin / "hooks" / "hooks.json").read_text()))
    result = run("import", "claude-code", str(loose), "--home", str(target), "--dry-run")
    assert result.returncode == 0
    assert (
        f"warning: {loose}: the command uses CLAUDE_PLUGIN_ROOT, but no plugin root is known "
        "(pass --plugin-root DIR): it will be the hook's directory @ $.hooks.UserPromptSubmit[0].hooks[0].command"
    ) in result.stderr
    given = run("import", "claude-code", str(loose), "--home", str(target), "--plugin-root", str(plugin))
    assert given.returncode == 0 and "warning" not in given.stderr
    (hook_id,) = hook_ids(target)
    assert hook_json(target, hook_id)["env"] == {"CLAUDE_PLUGIN_ROOT": str(plugin)}
    missing = run("import", "claude-code", str(loose), "--home", str(tmp_path / "h2"), "--plugin-root", str(tmp_path / "nope"))
    assert missing.returncode == 1
    assert f"--plugin-root {tmp_path / 'nope'}: not a directory" in missing.stderr


# -- dry run, existing hooks, ids -----------------------------------------------------------


def test_dry_run_prints_the_plan_and_writes_nothing(settings: Path, target: Path) -> None:
    result = run("import", "claude-code", str(settings), "--home", str(target), "--dry-run")
    assert result.returncode == 0
    assert not target.exists()
    lines = result.stdout.splitlines()
    assert lines[0] == f"would import {settings} into {target / 'hooks'}"
    assert lines[-1] == "dry run: nothing was written"
    for hook_id in EXPECTED_IDS:
        (row,) = [line for line in lines if f" {hook_id} " in line]
        assert row.split()[0] == "create"
    (session,) = [line for line in lines if "sessionstart-" in line]
    assert "ThreadStart (Claude's SessionStart)" in session and "matcher startup|resume" in session
    assert "wrote" not in result.stdout


def test_existing_hooks_are_refused_without_force(settings: Path, target: Path) -> None:
    assert run("import", "claude-code", str(settings), "--home", str(target)).returncode == 0
    # The same import again: every hook holds this already.
    again = run("import", "claude-code", str(settings), "--home", str(target))
    assert again.returncode == 0
    assert all(f"unchanged  {i}" in again.stdout for i in EXPECTED_IDS)
    assert "wrote" not in again.stdout
    # A hook edited since is refused, the others are still imported, and it says which.
    edited = target / "hooks" / "userpromptsubmit-date" / "hook.json"
    edited.write_text('{"trigger": {"event": "Stop"}, "command": "mine"}\n')
    changed = json.loads(json.dumps(SETTINGS))
    changed["hooks"]["Stop"][0]["hooks"][0]["prompt"] = "A new prompt"
    write_json(settings, changed)
    refused = run("import", "claude-code", str(settings), "--home", str(target))
    assert refused.returncode == 1
    assert "hooks/userpromptsubmit-date exists already: --force overwrites it" in refused.stdout
    assert "refused (exist already; --force overwrites them): userpromptsubmit-date" in refused.stderr
    assert edited.read_text() == '{"trigger": {"event": "Stop"}, "command": "mine"}\n'
    assert hook_json(target, "stop-a-new-prompt")["prompt"] == "A new prompt"
    forced = run("import", "claude-code", str(settings), "--home", str(target), "--force")
    assert forced.returncode == 0
    assert "overwrote  userpromptsubmit-date" in forced.stdout
    assert hook_json(target, "userpromptsubmit-date")["command"] == "date"


def test_force_replaces_a_yaml_spec(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}})
    directory = target / "hooks" / "stop-true"
    directory.mkdir(parents=True)
    (directory / "hook.yaml").write_text("trigger: {event: Stop}\ncommand: old\n")
    (directory / "script.sh").write_text("kept\n")
    assert run("import", "claude-code", str(source), "--home", str(target)).returncode == 1
    assert not (directory / "hook.json").exists()
    assert run("import", "claude-code", str(source), "--home", str(target), "--force").returncode == 0
    assert not (directory / "hook.yaml").exists()
    assert (directory / "script.sh").read_text() == "kept\n"
    assert run("validate", "--home", str(target)).returncode == 0


def test_colliding_ids_get_numbered(tmp_path: Path, target: Path) -> None:
    same = {"type": "command", "command": "./check.sh"}
    long_command = "echo " + "very-long-words " * 10
    source = write_json(tmp_path / "s.json", {"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [same, same]},
        {"matcher": "Bash", "hooks": [same]},
        {"matcher": "Bash", "hooks": [{"type": "command", "command": long_command}, {"type": "command", "command": long_command}]},
    ]}})
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 0, result.stderr
    long_id = base_id("PreToolUse", "Bash", "command", long_command)
    assert len(long_id) <= MAX_ID_LENGTH
    assert hook_ids(target) == sorted([
        "pretooluse-bash-check-sh", "pretooluse-bash-check-sh-2", "pretooluse-bash-check-sh-3",
        long_id, long_id[: MAX_ID_LENGTH - 2].rstrip("-") + "-2",
    ])
    assert all(len(i) <= MAX_ID_LENGTH for i in hook_ids(target))
    assert run("validate", "--home", str(target)).returncode == 0


def test_id_helpers() -> None:
    assert base_id("PreToolUse", "Write|Edit", "command", '"$CLAUDE_PROJECT_DIR"/.claude/hooks/lint.sh --fix') == "pretooluse-write-edit-lint-sh-fix"
    assert base_id("Stop", None, "prompt", "Done?") == "stop-done"
    assert base_id("Stop", None, "command", "$X") == "stop-command"
    assert base_id("PreToolUse", "mcp__.*", "command", "echo 'unbalanced") == "pretooluse-mcp-echo-unbalanced"
    assert unique_id("a", set()) == "a"
    assert unique_id("a", {"a", "a-2"}) == "a-3"
    assert unique_id("x" * MAX_ID_LENGTH, {"x" * MAX_ID_LENGTH}) == "x" * (MAX_ID_LENGTH - 2) + "-2"


# -- translation rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "matcher", "expected"),
    [
        ("PreToolUse", "Bash", ("Bash", None)),
        ("PreToolUse", "Write|Edit|MultiEdit", ("Write|Edit|MultiEdit", None)),
        ("PreToolUse", "Bash|", ("Bash", None)),  # Claude ignores the empty word
        ("PreToolUse", "*", (None, None)),
        ("PreToolUse", "", (None, None)),
        ("PreToolUse", None, (None, None)),
        ("PreToolUse", "mcp__.*", (".*(?:mcp__.*).*", None)),
        ("PreToolUse", "Notebook.*", (".*(?:Notebook.*).*", None)),
        ("PostToolUse", "^Bash$", (".*(?:^Bash$).*", None)),
        ("ThreadStart", "startup", ("startup", None)),
        ("PreCompact", "manual|auto", ("manual|auto", None)),
        ("UserPromptSubmit", "Bash", (None, "matcher 'Bash' dropped: UserPromptSubmit has no matcher in hookbus")),
        ("Stop", "*", (None, None)),
    ],
)
def test_matchers_keep_claude_codes_meaning(event: str, matcher: str | None, expected: tuple[str | None, str | None]) -> None:
    assert translate_matcher(event, matcher) == expected


@pytest.mark.parametrize(
    ("seconds", "duration"),
    [(30, "30s"), (1.5, "1500ms"), (60.0, "60s"), (0.25, "250ms"), (0.0005, "0.5ms"), (600, "600s"), (2.001, "2001ms")],
)
def test_timeouts_become_go_durations(seconds: float, duration: str) -> None:
    assert format_timeout(seconds) == duration


def test_async_entries_run_in_the_background(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "log.sh", "async": True}]},
    ]}})
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 0
    spec = hook_json(target, "pretooluse-bash-log-sh")
    assert spec["mode"] == "async" and "blocking" not in spec
    assert '"async": true: it runs in the background, and cannot decide' in result.stdout
    assert run("validate", "--home", str(target)).returncode == 0


def test_unsupported_types_and_unknown_fields_are_said(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {"Stop": [
        {"hooks": [
            {"type": "agent", "prompt": "verify the tests pass"},
            {"type": "command", "command": "true", "statusMessage": "checking", "once": True},
        ], "extra": 1},
    ]}})
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 0
    assert "skipped $.hooks.Stop[0].hooks[0]: hookbus has no runner for 'agent' hooks" in result.stdout
    assert f"warning: {source}: field 'once' has no hookbus counterpart and is ignored @ $.hooks.Stop[0].hooks[1]" in result.stderr
    assert f"warning: {source}: unknown field 'extra' ignored @ $.hooks.Stop[0]" in result.stderr
    assert "statusMessage" not in result.stderr
    assert hook_ids(target) == ["stop-true"]


# -- errors: a clear message, exit 1, nothing written ---------------------------------------------


def entry(**fields: Any) -> dict[str, Any]:
    return {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "ok", **fields}]}]}}


BAD_DOCUMENTS: list[tuple[str, Any, str]] = [
    ("top-level array", [], "expected an object at the top level, got an array @ $"),
    ("no hooks", {"model": "opus"}, 'no "hooks" object: expected {"hooks": {"PreToolUse": [...], ...}} @ $'),
    ("hooks not an object", {"hooks": []}, "expected an object of events, got an array @ $.hooks"),
    ("event not a list", {"hooks": {"Stop": {"hooks": []}}}, "expected an array of matcher groups, got an object @ $.hooks.Stop"),
    ("group not an object", {"hooks": {"Stop": ["x"]}}, 'expected a matcher group ({"matcher": ..., "hooks": [...]}), got a string @ $.hooks.Stop[0]'),
    ("group without hooks", {"hooks": {"Stop": [{"matcher": "*"}]}}, 'no "hooks" array @ $.hooks.Stop[0]'),
    ("hooks not a list", {"hooks": {"Stop": [{"hooks": {"type": "command"}}]}}, "expected an array of hooks, got an object @ $.hooks.Stop[0].hooks"),
    ("entry not an object", {"hooks": {"Stop": [{"hooks": ["echo"]}]}}, 'expected a hook ({"type": "command", "command": ...}), got a string @ $.hooks.Stop[0].hooks[0]'),
    ("no type", {"hooks": {"Stop": [{"hooks": [{"command": "x"}]}]}}, 'expected "command" or "prompt", got nothing @ $.hooks.Stop[0].hooks[0].type'),
    ("unknown type", entry(type="comand"), "unknown hook type 'comand' (did you mean 'command'?): expected \"command\" or \"prompt\" @ $.hooks.PreToolUse[0].hooks[0].type"),
    ("command not a string", entry(command=["ls"]), "expected a string, got an array @ $.hooks.PreToolUse[0].hooks[0].command"),
    ("no command", {"hooks": {"Stop": [{"hooks": [{"type": "command"}]}]}}, "expected a string, got nothing @ $.hooks.Stop[0].hooks[0].command"),
    ("empty command", entry(command="  "), "the command is empty @ $.hooks.PreToolUse[0].hooks[0].command"),
    ("prompt not a string", {"hooks": {"Stop": [{"hooks": [{"type": "prompt", "prompt": 3}]}]}}, "expected a string, got an integer @ $.hooks.Stop[0].hooks[0].prompt"),
    ("timeout a string", entry(timeout="30s"), "expected a number of seconds, got a string @ $.hooks.PreToolUse[0].hooks[0].timeout"),
    ("timeout a boolean", entry(timeout=True), "expected a number of seconds, got a boolean @ $.hooks.PreToolUse[0].hooks[0].timeout"),
    ("timeout zero", entry(timeout=0), "the timeout must be more than 0 seconds, got 0 @ $.hooks.PreToolUse[0].hooks[0].timeout"),
    ("async not a boolean", entry(**{"async": "yes"}), "expected true or false, got a string @ $.hooks.PreToolUse[0].hooks[0].async"),
    ("matcher not a string", {"hooks": {"PreToolUse": [{"matcher": ["Bash"], "hooks": [{"type": "command", "command": "x"}]}]}}, "expected a string, got an array @ $.hooks.PreToolUse[0].matcher"),
    ("matcher naming nothing", {"hooks": {"PreToolUse": [{"matcher": "|", "hooks": [{"type": "command", "command": "x"}]}]}}, 'this matcher names no tool: write "*" for all @ $.hooks.PreToolUse[0].matcher'),
    # Valid for Claude Code, refused by hookbus's own loader (RE2 has no lookahead).
    ("matcher hookbus refuses", {"hooks": {"PreToolUse": [{"matcher": "(?!Bash)", "hooks": [{"type": "command", "command": "x"}]}]}},
     "hookbus would refuse this hook: invalid matcher regex '.*(?:(?!Bash)).*': lookahead is not supported"),
    ("timeout past hookbus's maximum", entry(timeout=1e20), "hookbus would refuse this hook: invalid duration '100000000000000000000s': longer than the maximum"),
    ("NUL in command", entry(command="echo \u0000"), "hookbus would refuse this hook: a command cannot hold a NUL character (\\u0000): remove it @ $.hooks.PreToolUse[0].hooks[0].command"),
]


@pytest.mark.parametrize(("case", "document", "message"), BAD_DOCUMENTS, ids=[case for case, _, _ in BAD_DOCUMENTS])
def test_each_malformation_is_reported_where_it_is(tmp_path: Path, target: Path, case: str, document: Any, message: str) -> None:
    source = write_json(tmp_path / "settings.json", document)
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{source}: {message}"), first
    assert result.stderr.splitlines()[-1] == "nothing was imported"
    assert not target.exists()


def test_an_unreadable_or_invalid_file_is_reported(tmp_path: Path, target: Path) -> None:
    missing = run("import", "claude-code", str(tmp_path / "nope.json"), "--home", str(target))
    assert missing.returncode == 1
    assert missing.stderr.splitlines()[0] == f"{tmp_path / 'nope.json'}: cannot read it: No such file or directory"
    broken = tmp_path / "broken.json"
    broken.write_text('{"hooks": {\n  "Stop": [,]}}')
    invalid = run("import", "claude-code", str(broken), "--home", str(target))
    assert invalid.returncode == 1
    assert invalid.stderr.splitlines()[0] == f"{broken}: invalid JSON at line 2, column 12: Expecting value"
    nan = tmp_path / "nan.json"
    nan.write_text('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "x", "timeout": NaN}]}]}}')
    assert run("import", "claude-code", str(nan), "--home", str(target)).stderr.startswith(f"{nan}: invalid JSON: NaN is not valid JSON")
    directory = run("import", "claude-code", str(tmp_path), "--home", str(target))
    assert directory.returncode == 1 and "cannot read it: Is a directory" in directory.stderr
    assert not target.exists()
    usage = run("import", "cursor", str(broken))
    assert usage.returncode == 1 and "invalid choice: 'cursor' (choose from 'claude-code', 'codex', 'gemini-cli')" in usage.stderr


def test_it_is_all_or_nothing(tmp_path: Path, target: Path) -> None:
    document = json.loads(json.dumps(SETTINGS))
    document["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": 42}]})
    document["hooks"]["PostToolUse"][0]["hooks"].append({"type": "command", "command": "x", "timeout": "1m"})
    source = write_json(tmp_path / "settings.json", document)
    result = run("import", "claude-code", str(source), "--home", str(target))
    assert result.returncode == 1
    # Every problem is listed, not only the first; not one of the good hooks is written.
    assert result.stderr.splitlines() == [
        f"{source}: expected a number of seconds, got a string @ $.hooks.PostToolUse[0].hooks[1].timeout",
        f"{source}: expected a string, got an integer @ $.hooks.Stop[1].hooks[0].command",
        "nothing was imported",
    ]
    assert not target.exists()


# -- through the function ----------------------------------------------------------------------


def test_the_functions_plan_and_import(settings: Path, target: Path) -> None:
    plan = plan_import(str(settings), target)
    assert [hook.hook_id for hook in plan.hooks] == EXPECTED_IDS
    assert [hook.action for hook in plan.hooks] == ["create"] * len(EXPECTED_IDS)
    assert [(name, count) for name, count, _ in plan.skipped_events] == [("SessionEnd", 1), ("Notification", 2)]
    assert not target.exists()  # planning writes nothing
    out, err = io.StringIO(), io.StringIO()
    assert run_import(str(settings), target, out=out, err=err) == 0
    # Only the warning for log-bash.sh's $CLAUDE_PROJECT_DIR (what to check under hookbus).
    (warning,) = err.getvalue().splitlines()
    assert warning.startswith(f"warning: {settings}: the command uses $CLAUDE_PROJECT_DIR")
    assert warning.endswith("@ $.hooks.PreToolUse[0].hooks[1].command")
    assert hook_ids(target) == sorted(EXPECTED_IDS)
    assert out.getvalue().count("wrote ") == len(EXPECTED_IDS)
    assert [hook.action for hook in plan_import(str(settings), target).hooks] == ["unchanged"] * len(EXPECTED_IDS)
    # Files only the owner can write, so hookbus's permission checks accept them.
    mode = os.stat(target / "hooks" / EXPECTED_IDS[0] / "hook.json").st_mode
    assert mode & 0o022 == 0
    assert not [p for p in (target / "hooks" / EXPECTED_IDS[0]).iterdir() if p.name != "hook.json"]  # no temp left


def test_the_function_reports_errors_without_raising(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "s.json", {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": 1}]}]}})
    out, err = io.StringIO(), io.StringIO()
    assert run_import(str(source), target, out=out, err=err) == 1
    assert err.getvalue() == f"{source}: expected a string, got an integer @ $.hooks.Stop[0].hooks[0].command\nnothing was imported\n"
    assert out.getvalue() == ""


# -- --install-bridge ------------------------------------------------------------------------


def bridge_entries(document: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        group for group in document["hooks"].get(event, [])
        if any(is_bridge_command(hook.get("command")) for hook in group["hooks"])
    ]


ALL_BRIDGED = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "PermissionRequest", "SessionStart", "Stop", "SubagentStop", "PreCompact")


def test_the_bridge_is_merged_once_and_the_files_own_hooks_move_into_the_home(settings: Path) -> None:
    original = settings.read_text()
    result = run("import", "claude-code", str(settings), "--install-bridge")
    assert result.returncode == 0, result.stderr
    assert f"backed up {settings} to {settings}.bak" in result.stdout
    assert Path(f"{settings}.bak").read_text() == original
    merged = json.loads(settings.read_text())
    assert settings.read_text().endswith("}\n")
    assert merged["model"] == "opus" and merged["permissions"] == SETTINGS["permissions"]
    home = Path(os.path.expanduser("~/.vix"))
    command = this_bridge(home)  # no --home, no VIX_HOME: the default, written out
    for event in ALL_BRIDGED:
        expected: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": 600}]}
        if event in ("PreToolUse", "PostToolUse", "PermissionRequest"):
            expected = {"matcher": "*", **expected}
        # The user's own hooks on the bridge's events moved into the home: the bridge alone is left.
        assert merged["hooks"][event] == [expected], event
    # Each is the hook `hookbus import claude-code FILE` makes, and says it moved.
    assert hook_ids(home) == sorted(EXPECTED_IDS)
    for hook_id in EXPECTED_IDS:
        assert f"into hookbus: {home / 'hooks' / hook_id}" in result.stdout, hook_id
    # Events the bridge does not carry keep their hooks in FILE, each said.
    assert merged["hooks"]["SessionEnd"] == SETTINGS["hooks"]["SessionEnd"]
    assert merged["hooks"]["Notification"] == SETTINGS["hooks"]["Notification"]
    for location in ("$.hooks.SessionEnd[0].hooks[0]", "$.hooks.Notification[0].hooks[0]", "$.hooks.Notification[0].hooks[1]"):
        assert f"stays in {settings}: {location} (" in result.stdout, location
    assert "the bridge does not carry Notification; it still runs in Claude Code" in result.stdout
    assert "note: the other hooks of" not in result.stdout
    # Again: nothing to add, the file and its backup are left alone.
    once = settings.read_text()
    Path(f"{settings}.bak").write_text("sentinel")
    again = run("import", "claude-code", str(settings), "--install-bridge")
    assert again.returncode == 0
    assert f"{settings} needs no change" in again.stdout
    assert all(f"{event}: already routed to {command}" in again.stdout for event in ALL_BRIDGED)
    assert settings.read_text() == once
    assert Path(f"{settings}.bak").read_text() == "sentinel"


def test_the_bridge_creates_a_missing_file_with_the_home(tmp_path: Path) -> None:
    file = tmp_path / "new-project" / ".claude" / "settings.json"
    home = tmp_path / "my home"
    result = run("import", "claude-code", str(file), "--install-bridge", "--home", str(home))
    assert result.returncode == 0, result.stderr
    assert not Path(f"{file}.bak").exists()
    document = json.loads(file.read_text())
    assert list(document) == ["hooks"] and list(document["hooks"]) == list(ALL_BRIDGED)
    command = this_bridge(home)
    assert command == bridge_command(home) and f"--home '{home}'" in command
    assert all(bridge_entries(document, e)[0]["hooks"][0]["command"] == command for e in ALL_BRIDGED)
    # Another home's bridge is not added beside it.
    other = run("import", "claude-code", str(file), "--install-bridge")
    assert other.returncode == 0
    assert f"PreToolUse: left alone: already routed by \"{command}\"" in other.stdout
    assert json.loads(file.read_text()) == document


def test_the_bridge_dry_run_prints_and_writes_nothing(tmp_path: Path, settings: Path) -> None:
    original = settings.read_text()
    result = run("import", "claude-code", str(settings), "--install-bridge", "--dry-run")
    assert result.returncode == 0
    assert settings.read_text() == original and not Path(f"{settings}.bak").exists()
    home = Path(os.path.expanduser("~/.vix"))
    command = this_bridge(home)
    assert f"PreToolUse: add {command} (matcher *)" in result.stdout
    assert f"would move $.hooks.Stop[0].hooks[0] (prompt: Did Claude finish every task?) into hookbus: {home / 'hooks' / 'stop-did-claude-finish-every-task'}" in result.stdout
    assert not home.exists()
    block = result.stdout[result.stdout.index("would hold these hooks:\n{") + 23: result.stdout.rindex("}") + 1]
    printed = json.loads(block)
    assert printed["hooks"]["Stop"] == [{"hooks": [{"type": "command", "command": command, "timeout": 600}]}]
    missing = tmp_path / "none" / "settings.json"
    assert run("import", "claude-code", str(missing), "--install-bridge", "--dry-run").returncode == 0
    assert not missing.parent.exists()


def test_the_bridge_refuses_a_malformed_settings_file(tmp_path: Path) -> None:
    for text, message in [
        ("{oops", "invalid JSON at line 1, column 2"),
        ("[]", "expected an object at the top level, got an array @ $"),
        ('{"hooks": []}', "expected an object of events, got an array @ $.hooks"),
        ('{"hooks": {"Stop": {}}}', "expected an array of matcher groups, got an object @ $.hooks.Stop"),
    ]:
        file = tmp_path / "settings.json"
        file.write_text(text)
        result = run("import", "claude-code", str(file), "--install-bridge")
        assert result.returncode == 1
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and lines[0].startswith(f"{file}: {message}"), lines
        assert lines[1] == f"{file} was not changed"
        assert file.read_text() == text and not Path(f"{file}.bak").exists()
    usage = run("import", "claude-code", str(tmp_path / "x.json"), "--install-bridge", "--force")
    assert usage.returncode == 1 and "--force and --plugin-root do not apply to --install-bridge" in usage.stderr


def test_the_bridge_function_and_a_later_import_skip_the_bridge(settings: Path, target: Path) -> None:
    out = io.StringIO()
    assert install_bridge(str(settings), out=out, err=io.StringIO()) == 0
    assert "wrote" in out.getvalue()
    # Importing a settings.json that holds the bridge must not make hookbus call itself.
    result = run("import", "claude-code", str(settings), "--home", str(target))
    assert result.returncode == 0
    assert "skipped $.hooks.PreToolUse[3].hooks[0]: it is the bridge to hookbus itself (--install-bridge)" in result.stdout
    assert hook_ids(target) == sorted(EXPECTED_IDS)
    assert not any(is_bridge_command(hook_json(target, i).get("command")) for i in hook_ids(target))


@pytest.mark.parametrize(
    ("command", "bridge"),
    [
        ("hookbus claude-code-hook", True),
        ("/opt/venv/bin/hookbus claude-code-hook --home /x", True),
        ("python3 -m hookbus claude-code-hook", True),
        ("hookbus --home /x claude-code-hook", True),
        ("hookbus emit PreToolUse", False),
        ("echo claude-code-hook", False),
        ("echo 'unbalanced", False),
    ],
)
def test_what_counts_as_the_bridge(command: str, bridge: bool) -> None:
    assert is_bridge_command(command) is bridge


# -- the bridge's command runs as written ------------------------------------------------------

#: The console script of this venv: what `hookbus` is to a user who installed it.
HOOKBUS_SCRIPT = str(Path(sys.executable).parent / "hookbus")
#: A PATH without the venv, as a host started from a desktop or a service has.
PLAIN = {"PATH": "/usr/bin:/bin"}
GUARD = {"id": "guard", "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True,
         "command": "cat > /dev/null; echo 'no rm -rf' >&2; exit 2"}
RM_RF = {"session_id": "s", "cwd": "/", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}


def guarded_home(tmp_path: Path) -> Path:
    home = tmp_path / "vix home"  # a space: the command must quote it
    write_json(home / "hooks" / "guard" / "hook.json", GUARD)
    for directory in (home, home / "hooks", home / "hooks" / "guard"):
        directory.chmod(0o755)
    return home


def the_bridge_of(file: Path, event: str = "PreToolUse") -> str:
    (group,) = bridge_entries(json.loads(file.read_text()), event)
    command: str = group["hooks"][0]["command"]
    return command


def run_as_the_host(command: str) -> subprocess.CompletedProcess[str]:
    """The command as Claude Code runs it: by a shell, from another directory, on a plain PATH."""
    return subprocess.run(["bash", "-c", command], input=json.dumps(RM_RF), capture_output=True, text=True, env=PLAIN, cwd="/", timeout=60)


def test_the_console_scripts_bridge_names_itself_and_the_home_from_vix_home(tmp_path: Path) -> None:
    home = guarded_home(tmp_path)
    file = tmp_path / "project" / ".claude" / "settings.json"
    result = subprocess.run(
        [HOOKBUS_SCRIPT, "import", "claude-code", str(file), "--install-bridge"],
        capture_output=True, text=True, timeout=60, env=environment(VIX_HOME=str(home), HOOKBUS_SOCKET=None),
    )
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr, result.stderr
    command = the_bridge_of(file)
    assert command == f"{HOOKBUS_SCRIPT} claude-code-hook --home '{home}'"
    ran = run_as_the_host(command)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_python_m_hookbus_writes_this_interpreter(tmp_path: Path) -> None:
    home = guarded_home(tmp_path)
    file = tmp_path / "settings.json"
    result = run("import", "claude-code", str(file), "--install-bridge", "--home", str(home))
    assert result.returncode == 0 and "warning" not in result.stderr, result.stderr
    command = the_bridge_of(file)
    assert command == this_bridge(home)
    ran = run_as_the_host(command)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_a_bridge_that_would_not_run_is_written_with_a_warning(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "hookbus"
    script.parent.mkdir()
    shutil.copyfile(HOOKBUS_SCRIPT, script)
    script.chmod(0o644)  # copied without its x bit: a host cannot run it
    file = tmp_path / "settings.json"
    result = subprocess.run(
        [sys.executable, str(script), "import", "claude-code", str(file), "--install-bridge", "--home", str(tmp_path / "h")],
        capture_output=True, text=True, timeout=60, env=env(),
    )
    assert result.returncode == 0, result.stderr
    assert the_bridge_of(file) == f"{script} claude-code-hook --home {tmp_path / 'h'}"
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert f"{script} is not executable" in warning and "chmod +x" in warning, warning


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can make a file owned by another user")
def test_the_warning_is_for_the_user_whose_settings_they_are(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    (locked / "bin").mkdir(parents=True)
    locked.chmod(0o700)
    script = locked / "bin" / "hookbus"
    shutil.copy2(HOOKBUS_SCRIPT, script)
    file = write_json(tmp_path / "alice" / "settings.json", {})
    os.chown(file, 4242, 4242)  # Claude Code runs as uid 4242, who may not enter `locked`
    result = subprocess.run(
        [str(script), "import", "claude-code", str(file), "--install-bridge", "--home", str(tmp_path / "h")],
        capture_output=True, text=True, timeout=60, env=env(),
    )
    assert result.returncode == 0, result.stderr
    assert the_bridge_of(file).startswith(f"{script} claude-code-hook")
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    # tmp_path's /tmp/pytest-of-root (0700) already keeps uid 4242 out of `locked`.
    assert warnings and "is a directory uid 4242 may not enter" in warnings[0], result.stderr


def test_a_dotfiles_link_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    real = write_json(tmp_path / "dotfiles" / "claude-settings.json", {"model": "opus"})
    real.chmod(0o640)
    link = tmp_path / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(real)
    result = run("import", "claude-code", str(link), "--install-bridge", "--home", str(tmp_path / "h"))
    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["model"] == "opus" and bridge_entries(json.loads(real.read_text()), "Stop")
    assert (real.stat().st_mode & 0o777) == 0o640
    backup = Path(f"{link}.bak")
    assert not backup.is_symlink() and json.loads(backup.read_text()) == {"model": "opus"}
    assert (backup.stat().st_mode & 0o777) == 0o640


def test_an_old_backup_is_kept_and_the_new_one_gets_a_name_of_its_own_at_the_files_mode(settings: Path) -> None:
    settings.chmod(0o600)
    backup = Path(f"{settings}.bak")
    backup.write_text("an old backup")
    backup.chmod(0o644)
    result = run("import", "claude-code", str(settings), "--install-bridge")
    assert result.returncode == 0, result.stderr
    assert backup.read_text() == "an old backup"
    new = Path(f"{settings}.bak.1")
    assert f"backed up {settings} to {new}" in result.stdout
    assert json.loads(new.read_text()) == SETTINGS
    assert (new.stat().st_mode & 0o777) == 0o600
    # no temp file left
    assert sorted(p.name for p in settings.parent.iterdir()) == ["settings.json", "settings.json.bak", "settings.json.bak.1"]


# -- what an imported command depends on ---------------------------------------------------------


def test_commands_that_depend_on_the_project_or_the_working_directory_are_warned_about(tmp_path: Path, target: Path) -> None:
    source = write_json(tmp_path / "settings.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/guard.sh"},
        {"type": "command", "command": "./hooks/check.sh --strict"},
        {"type": "command", "command": "bash .claude/hooks/lint.sh"},
        {"type": "command", "command": "python3 scripts/audit.py"},
        {"type": "command", "command": "sed -n 's/a/b/p' | grep -q x && echo ok"},
        {"type": "command", "command": "/opt/tools/guard --quiet"},
        {"type": "command", "command": "cat \"${CLAUDE_PLUGIN_ROOT}/x.txt\""},
    ]}]}})
    result = run("import", "claude-code", str(source), "--home", str(target), "--plugin-root", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert len(hook_ids(target)) == 7  # imported all the same
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    at = "@ $.hooks.PreToolUse[0].hooks[{}].command"
    assert len(warnings) == 4, result.stderr
    assert warnings[0].endswith(at.format(0)) and "$CLAUDE_PROJECT_DIR" in warnings[0] and "project_dir" in warnings[0]
    for warning, (index, path) in zip(warnings[1:], [(1, "./hooks/check.sh"), (2, ".claude/hooks/lint.sh"), (3, "scripts/audit.py")]):
        assert warning.endswith(at.format(index)), warning
        assert f"{path!r}" in warning and "the envelope's cwd" in warning and "check" in warning, warning
