"""``hookbus import claude-code FILE --install-bridge`` moves FILE's own hooks into the
home, so each runs once; ``--uninstall-bridge`` puts them back, exactly as they were.

Real files in tmp_path, the real CLI (a subprocess), and the bridge run as Claude Code runs
it (bash, from the project, with CLAUDE_PROJECT_DIR set), so each test checks what the
migration means for the host, not only what it writes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus.hosts.bridgerecord import DIRECTORY
from hookbus.hosts.install import is_bridge_command
from migratekit import hook_ids, read, write_json
from servekit import environment, hookbus

pytestmark = pytest.mark.timeout(120)

GUARD = "grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; } || exit 0"
#: Hooks on three events: PreToolUse and Stop, which the bridge carries, and SessionEnd,
#: which it does not.
THREE_EVENTS: dict[str, Any] = {
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": GUARD, "timeout": 30}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "echo stopped >> \"$CLAUDE_PROJECT_DIR/stops\""}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye"}]}],
    },
}
#: A file with more to keep: other settings, an env, a group part of which moves (an agent
#: hook stays), a matcher regex, a prompt, a Notification hook.
RICH: dict[str, Any] = {
    "model": "opus",
    "env": {"FOO": "bar"},
    "permissions": {"allow": ["Bash(npm test)"]},
    "hooks": {
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [
                {"type": "command", "command": GUARD},
                {"type": "agent", "prompt": "check it"},
                {"type": "command", "command": "echo second"},
            ]},
            {"matcher": "mcp__.*", "hooks": [{"type": "prompt", "prompt": "Is this MCP call safe?"}]},
        ],
        "PostToolUse": [{"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "npx prettier --write .", "async": True}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "date"}]}],
    },
}
RM_RF = {"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return hookbus(*arguments, env=environment(VIX_HOME=None, HOOKBUS_SOCKET=None, HOOKBUS_HTTP_TOKEN=None, VIX_DISABLE_HOOKS=None))


def install(file: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run("import", "claude-code", str(file), "--install-bridge", "--home", str(home), *extra)


def uninstall(file: Path, home: Path, *extra: str, host: str = "claude-code") -> subprocess.CompletedProcess[str]:
    return run("import", host, str(file), "--uninstall-bridge", "--home", str(home), *extra)


def records(home: Path) -> list[Path]:
    directory = home / DIRECTORY
    return sorted(directory.iterdir()) if directory.exists() else []


def own_entries(document: dict[str, Any]) -> dict[str, list[Any]]:
    """FILE's entries but hookbus's bridge, by event."""
    return {
        event: [entry for group in groups for entry in group["hooks"] if not is_bridge_command(entry.get("command"))]
        for event, groups in document.get("hooks", {}).items()
    }


def the_bridge(file: Path, event: str = "PreToolUse") -> str:
    for group in read(file)["hooks"][event]:
        for entry in group["hooks"]:
            if is_bridge_command(entry.get("command")):
                return str(entry["command"])
    raise AssertionError(f"no bridge on {event}")


def as_claude_code(command: str, envelope: dict[str, Any], project: Path) -> subprocess.CompletedProcess[str]:
    """The command as Claude Code runs it: by bash, in the project, with CLAUDE_PROJECT_DIR."""
    env = environment(CLAUDE_PROJECT_DIR=str(project), VIX_HOME=None, HOOKBUS_SOCKET=None)
    return subprocess.run(
        ["bash", "-c", command], input=json.dumps({**envelope, "cwd": str(project)}),
        capture_output=True, text=True, env=env, cwd=project, timeout=60,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    (directory / ".claude").mkdir(parents=True)
    return directory


@pytest.fixture
def vix(tmp_path: Path) -> Path:
    return tmp_path / "vix"


def test_hooks_on_three_events_move_where_the_bridge_carries_them_and_run_once(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    result = install(file, vix)
    assert result.returncode == 0, result.stderr
    after = read(file)
    assert after["model"] == "opus"
    # PreToolUse and Stop hold the bridge alone now; SessionEnd keeps its hook.
    assert own_entries(after)["PreToolUse"] == [] and own_entries(after)["Stop"] == []
    assert after["hooks"]["SessionEnd"] == THREE_EVENTS["hooks"]["SessionEnd"]
    assert hook_ids(vix) == ["pretooluse-bash-grep-q-rm-rf-echo-no-rm-rf-2", "stop-echo-stopped-stops"]
    assert f"moved $.hooks.PreToolUse[0].hooks[0] (command: {GUARD[:60]}...) into hookbus: {vix / 'hooks' / hook_ids(vix)[0]}" in result.stdout
    assert (
        f"stays in {file}: $.hooks.SessionEnd[0].hooks[0] (command: echo bye): the bridge does not carry SessionEnd; "
        "it still runs in Claude Code"
    ) in result.stdout
    # The guard now runs through the bridge, once, and denies as Claude Code's own did.
    ran = as_claude_code(the_bridge(file), RM_RF, project)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    stopped = as_claude_code(the_bridge(file, "Stop"), {"session_id": "s", "hook_event_name": "Stop", "stop_hook_active": False}, project)
    assert stopped.returncode == 0, stopped.stderr
    assert (project / "stops").read_text() == "stopped\n"


def test_the_moved_hooks_are_those_the_import_writes(project: Path, tmp_path: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", RICH)
    imported = tmp_path / "imported"
    assert run("import", "claude-code", str(file), "--home", str(imported)).returncode == 0
    result = install(file, vix)
    assert result.returncode == 0, result.stderr
    # The same ids and the same hook.json (the plain import takes the Notification hook's
    # event as skipped and the agent hook as unsupported, as the move does).
    assert hook_ids(vix) == hook_ids(imported)
    for hook_id in hook_ids(vix):
        assert (vix / "hooks" / hook_id / "hook.json").read_text() == (imported / "hooks" / hook_id / "hook.json").read_text()
    after = read(file)
    # Part of the Bash group moved: the agent hook stays in it, in its group, with its matcher.
    assert after["hooks"]["PreToolUse"][0] == {"matcher": "Bash", "hooks": [{"type": "agent", "prompt": "check it"}]}
    assert "stays in" in result.stdout and "hookbus has no runner for 'agent' hooks; it still runs in Claude Code" in result.stdout
    assert after["hooks"]["Notification"] == RICH["hooks"]["Notification"]


def test_install_twice_then_uninstall_gives_back_the_original_exactly(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", RICH)
    original = read(file)
    first = install(file, vix)
    assert first.returncode == 0, first.stderr
    installed = file.read_text()
    assert len(hook_ids(vix)) == 5 and len(records(vix)) == 1
    second = install(file, vix)
    assert second.returncode == 0, second.stderr
    assert f"{file} needs no change" in second.stdout and "moved" not in second.stdout
    assert file.read_text() == installed and not Path(f"{file}.bak.1").exists()
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    assert read(file) == original
    assert list(read(file)) == list(original) and list(read(file)["hooks"]) == list(original["hooks"])  # key order too
    assert hook_ids(vix) == [] and records(vix) == []
    # Every state FILE was in is kept: the original first, then the installed one.
    assert read(Path(f"{file}.bak")) == original
    assert Path(f"{file}.bak.1").read_text() == installed
    assert f"backed up {file} to {file}.bak.1" in done.stdout
    again = uninstall(file, vix)
    assert again.returncode == 0 and "nothing to undo" in again.stdout
    assert read(file) == original and not Path(f"{file}.bak.2").exists()


def test_no_backup_is_ever_overwritten(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    states = [file.read_text()]
    for step in range(2):
        assert install(file, vix).returncode == 0
        states.append(file.read_text())
        assert uninstall(file, vix).returncode == 0
        states.append(file.read_text())
    backups = [Path(f"{file}.bak"), *(Path(f"{file}.bak.{number}") for number in (1, 2, 3))]
    assert [backup.read_text() for backup in backups] == states[:4]
    assert not Path(f"{file}.bak.4").exists()
    assert read(file) == THREE_EVENTS


def test_dry_runs_write_nothing(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    text = file.read_text()
    dry = install(file, vix, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would move $.hooks.PreToolUse[0].hooks[0]" in dry.stdout and "would move $.hooks.Stop[0].hooks[0]" in dry.stdout
    assert file.read_text() == text and not vix.exists() and not Path(f"{file}.bak").exists()
    assert install(file, vix).returncode == 0
    installed = file.read_text()
    dry = uninstall(file, vix, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "PreToolUse: put back command: grep" in dry.stdout and "would remove" in dry.stdout
    assert file.read_text() == installed and len(hook_ids(vix)) == 2 and len(records(vix)) == 1
    assert not Path(f"{file}.bak.1").exists()


def test_a_hook_id_taken_by_other_content_writes_nothing_and_says_how_to_fix_it(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    text = file.read_text()
    taken = vix / "hooks" / "stop-echo-stopped-stops"
    write_json(taken / "hook.json", {"trigger": {"event": "Stop"}, "command": "echo mine"})
    result = install(file, vix)
    assert result.returncode == 1
    assert f"{taken}: a hook with other content is there, where {file}'s hook at $.hooks.Stop[0].hooks[0] would move" in result.stderr
    assert f"rm -r {taken}" in result.stderr and f"hookbus import claude-code {file} --force" in result.stderr
    assert "Traceback" not in result.stderr
    assert file.read_text() == text and not Path(f"{file}.bak").exists()
    assert hook_ids(vix) == ["stop-echo-stopped-stops"] and records(vix) == []
    assert read(taken / "hook.json") == {"trigger": {"event": "Stop"}, "command": "echo mine"}
    # The fix the message gives: the import's own version first; then the move goes through.
    assert run("import", "claude-code", str(file), "--home", str(vix), "--force").returncode == 0
    moved = install(file, vix)
    assert moved.returncode == 0, moved.stderr
    assert "(the home holds it already)" in moved.stdout
    # Those hooks were there before the install: the uninstall leaves them.
    assert uninstall(file, vix).returncode == 0
    assert read(file) == THREE_EVENTS
    assert hook_ids(vix) == ["pretooluse-bash-grep-q-rm-rf-echo-no-rm-rf-2", "stop-echo-stopped-stops"]


def test_a_hook_that_reads_the_project_dir_runs_with_it_and_keeps_the_command_bridge_over_http(project: Path, vix: Path) -> None:
    reader = {"hooks": {"PostToolUse": [{"matcher": "Write", "hooks": [
        {"type": "command", "command": 'cat > /dev/null; echo "$CLAUDE_PROJECT_DIR" > "$CLAUDE_PROJECT_DIR/seen"'},
    ]}]}}
    file = write_json(project / ".claude" / "settings.json", reader)
    file.chmod(0o600)
    (vix / "hooks").mkdir(parents=True)  # made by `hookbus serve --http` first, which makes the token
    result = install(file, vix, "--http", "http://127.0.0.1:9", "--http-decisions")
    assert result.returncode == 0, result.stderr
    assert "the command uses $CLAUDE_PROJECT_DIR" in result.stderr  # the import's warning, for the moved hook
    # Over http Claude Code gives a hook no CLAUDE_PROJECT_DIR: the event keeps the command bridge.
    post = [entry for group in read(file)["hooks"]["PostToolUse"] for entry in group["hooks"]]
    assert [entry["type"] for entry in post] == ["command"], post
    assert "use $CLAUDE_PROJECT_DIR, which Claude Code gives to command hooks only" in result.stdout
    assert [entry["type"] for group in read(file)["hooks"]["Stop"] for entry in group["hooks"]] == ["http"]
    ran = as_claude_code(the_bridge(file, "PostToolUse"), {
        "session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Write",
        "tool_input": {"file_path": "x", "content": "y"}, "tool_response": {},
    }, project)
    assert ran.returncode == 0, ran.stderr
    assert (project / "seen").read_text() == f"{project}\n"
    # Out again: the http hooks and the token hookbus wrote go, the hook comes back.
    assert "HOOKBUS_HTTP_TOKEN" in read(file)["env"]
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    assert read(file) == reader
    assert "env: take out HOOKBUS_HTTP_TOKEN, the token hookbus wrote" in done.stdout


def test_a_token_hookbus_did_not_write_stays(project: Path, vix: Path) -> None:
    document = {"env": {"HOOKBUS_HTTP_TOKEN": "the user's own, from elsewhere"}, "hooks": {}}
    file = write_json(project / ".claude" / "settings.json", document)
    assert install(file, vix).returncode == 0
    assert uninstall(file, vix).returncode == 0
    assert read(file) == document


def test_what_the_user_changed_since_the_install_is_kept(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", RICH)
    assert install(file, vix).returncode == 0
    installed = read(file)
    # The user adds a hook of their own to the Bash group's event, and one on a new event.
    mine = {"matcher": "Read", "hooks": [{"type": "command", "command": "echo mine"}]}
    installed["hooks"]["PreToolUse"].insert(1, mine)
    installed["hooks"]["SubagentStart"] = [{"hooks": [{"type": "command", "command": "echo sub"}]}]
    write_json(file, installed)
    # ... and edits one of the moved hooks in the home.
    edited = vix / "hooks" / "userpromptsubmit-date" / "hook.json"
    edited.write_text(edited.read_text().replace('"date"', '"date -u"'))
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    after = read(file)
    # The moved groups come back where they were, the user's own after them.
    expected = json.loads(json.dumps(RICH))
    expected["hooks"]["PreToolUse"].insert(2, mine)
    expected["hooks"]["SubagentStart"] = installed["hooks"]["SubagentStart"]
    assert after == expected
    # The edited hook is the user's now: kept, and said; the others the install made are gone.
    assert hook_ids(vix) == ["userpromptsubmit-date"]
    assert f"kept {vix / 'hooks' / 'userpromptsubmit-date'}: it changed since the install" in done.stdout
    assert "no longer runs from Claude Code" in done.stdout


def test_a_hook_added_after_the_install_moves_on_the_next_and_both_come_back(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    assert install(file, vix).returncode == 0
    installed = read(file)
    added = {"matcher": "Edit", "hooks": [{"type": "command", "command": "echo edited"}]}
    installed["hooks"]["PreToolUse"].insert(0, added)
    write_json(file, installed)
    again = install(file, vix)
    assert again.returncode == 0, again.stderr
    assert "moved $.hooks.PreToolUse[0].hooks[0] (command: echo edited)" in again.stdout
    assert own_entries(read(file))["PreToolUse"] == []
    assert "pretooluse-edit-echo-edited" in hook_ids(vix)
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    # The moved group comes back first, where it was; the one added since, after it.
    expected = json.loads(json.dumps(THREE_EVENTS))
    expected["hooks"]["PreToolUse"].append(added)
    assert read(file) == expected
    assert hook_ids(vix) == []


def test_gemini_cli_loses_the_bridge_only(tmp_path: Path, vix: Path) -> None:
    own = {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "echo mine"}]}
    file = write_json(tmp_path / ".gemini" / "settings.json", {"hooks": {"BeforeTool": [own]}})
    assert run("import", "gemini-cli", str(file), "--install-bridge", "--home", str(vix)).returncode == 0
    assert read(file)["hooks"]["BeforeTool"][0] == own and hook_ids(vix) == []
    done = uninstall(file, vix, host="gemini-cli")
    assert done.returncode == 0, done.stderr
    assert read(file) == {"hooks": {"BeforeTool": [own]}}
    assert "BeforeTool: take out hookbus's bridge" in done.stdout
    nothing = uninstall(file, vix, host="gemini-cli")
    assert nothing.returncode == 0 and "nothing to undo" in nothing.stdout


def test_without_a_record_the_bridge_still_goes_and_the_backups_are_named(project: Path, vix: Path, tmp_path: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    assert install(file, vix).returncode == 0
    # Uninstalled with another home: it has no record of what moved.
    done = uninstall(file, tmp_path / "elsewhere")
    assert done.returncode == 0, done.stderr
    assert own_entries(read(file)) == {"SessionEnd": [THREE_EVENTS["hooks"]["SessionEnd"][0]["hooks"][0]]}
    assert all(not is_bridge_command(entry.get("command")) for groups in read(file)["hooks"].values() for group in groups for entry in group["hooks"])
    assert "holds no record of hooks moved out of" in done.stdout
    assert f"the backups of {file}, oldest first: {file}.bak, {file}.bak.1" in done.stdout
    assert len(hook_ids(vix)) == 2  # not its to remove


def test_nothing_to_undo_says_so(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    done = uninstall(file, vix)
    assert done.returncode == 0
    assert done.stdout == f"{file} holds no hookbus bridge, and hookbus moved nothing out of it: nothing to undo\n"
    assert read(file) == THREE_EVENTS and not Path(f"{file}.bak").exists()
    missing = uninstall(project / "none.json", vix)
    assert missing.returncode == 0 and "does not exist: nothing to undo" in missing.stdout


def test_the_flags_that_do_not_go_together_are_refused(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    both = run("import", "claude-code", str(file), "--install-bridge", "--uninstall-bridge")
    assert both.returncode != 0 and "give one" in both.stderr
    forced = run("import", "claude-code", str(file), "--uninstall-bridge", "--force")
    assert forced.returncode != 0 and "do not apply to --uninstall-bridge" in forced.stderr
    assert read(file) == THREE_EVENTS


def test_the_record_is_private_and_beside_the_hooks(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    assert install(file, vix).returncode == 0
    (record,) = records(vix)
    assert (record.parent.stat().st_mode & 0o777) == 0o700 and (record.stat().st_mode & 0o777) == 0o600
    document = read(record)
    assert document["file"] == os.path.realpath(file) and document["format"] == "hookbus bridge record"
    assert [list(step["events"]) for step in document["steps"]] == [["PreToolUse", "Stop"]]
    # The home loads as it did: the record is no hook, and hookbus validate sees nothing amiss.
    checked = run("validate", "--home", str(vix))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert shlex.quote(DIRECTORY) not in checked.stdout + checked.stderr


def test_the_console_help_names_both_flags() -> None:
    shown = subprocess.run([sys.executable, "-m", "hookbus", "import", "--help"], capture_output=True, text=True, timeout=60)
    assert "--install-bridge" in shown.stdout and "--uninstall-bridge" in shown.stdout
    assert "FILE.bak.N of its own" in " ".join(shown.stdout.split())


def test_a_backup_put_back_by_hand_is_not_undone_twice(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    assert install(file, vix).returncode == 0
    file.write_text(Path(f"{file}.bak").read_text())  # the user undoes the install by hand
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    assert "the hooks moved from it are back in" in done.stdout
    assert read(file) == THREE_EVENTS  # no hook twice
    assert hook_ids(vix) == [] and records(vix) == []


def test_installing_again_after_undoing_by_hand_starts_a_new_record(project: Path, vix: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", THREE_EVENTS)
    assert install(file, vix).returncode == 0
    file.write_text(Path(f"{file}.bak").read_text())
    again = install(file, vix)
    assert again.returncode == 0, again.stderr
    assert "(the home holds it already)" in again.stdout
    (record,) = records(vix)
    assert len(read(record)["steps"]) == 1
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    assert read(file) == THREE_EVENTS
    # The hooks the first install made are still the installs' to remove.
    assert hook_ids(vix) == [] and records(vix) == []


def test_hooks_do_not_move_into_a_home_the_files_bridge_does_not_send_to(project: Path, vix: Path, tmp_path: Path) -> None:
    file = write_json(project / ".claude" / "settings.json", {"hooks": {}})
    other = tmp_path / "other home"
    assert install(file, other).returncode == 0  # the bridge now goes to the other home
    installed = read(file)
    installed["hooks"]["Stop"].insert(0, {"hooks": [{"type": "command", "command": "echo new"}]})
    write_json(file, installed)
    text = file.read_text()
    result = install(file, vix)
    assert result.returncode == 1
    assert f"the bridge on Stop sends to the home {other}, not {vix}" in result.stderr
    assert "Traceback" not in result.stderr
    assert file.read_text() == text and hook_ids(vix) == [] and records(vix) == []
