"""Promise 10 at the host edges: what hookbus writes for a host, and tells it, is what runs.

End to end through the real command line, as a host runs it: the env file a dialect hook
writes (one per exact thread), the scripts ``validate`` vouches for, the command
``--install-bridge`` writes, what Gemini CLI is told, and the subagent's last message a
Claude Code hook reads. (Finer cases: tests/test_host_names.py, test_validate_scripts.py,
test_claude_import.py, test_gemini_bridge.py, test_claude_compat.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from attackkit import attack
from servekit import Served, environment

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
SHOWN = 10


def run(*arguments: str, stdin: str = "", env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOOKBUS, *arguments], input=stdin, capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


def test_threads_whose_ids_print_alike_never_share_an_env_file(home: Path, write_hook: Writer) -> None:
    with attack(SHOWN, "CLAUDE_ENV_FILE for thread ids team/alice and team_alice"):
        write_hook(
            "cc", event="ThreadStart", mode="sync", dialect="claude-code",
            command='cat > /dev/null; echo "export WHO=$HOOKBUS_EVENT" >> "$CLAUDE_ENV_FILE"; echo "$CLAUDE_ENV_FILE"',
        )
        files = set()
        for thread in ("team/alice", "team_alice", "x" * 120 + "1", "x" * 120 + "2"):
            result = run("emit", "ThreadStart", "--home", str(home), stdin=json.dumps({"thread_id": thread, "source": "startup"}))
            files.add(json.loads(result.stdout)["context"].strip())
        assert len(files) == 4
        assert all(Path(name).read_text() == "export WHO=ThreadStart\n" for name in files)


def test_validate_does_not_vouch_for_a_guard_whose_script_cannot_run(home: Path, write_hook: Writer) -> None:
    with attack(SHOWN, "validate: a guard's script beside hook.json is missing, then not executable"):
        spec = write_hook("guard", matcher="bash", mode="sync", blocking=True, command='"$HOOKBUS_HOOK_DIR/check.sh"')
        missing = run("validate", "--home", str(home))
        assert missing.returncode == 1 and "check.sh, which does not exist" in missing.stdout + missing.stderr
        script = spec.parent / "check.sh"
        script.write_text("#!/bin/sh\nexit 2\n")
        script.chmod(0o644)
        idle = run("validate", "--home", str(home))
        assert idle.returncode == 1 and "not executable" in idle.stdout + idle.stderr
        script.chmod(0o755)
        assert run("validate", "--home", str(home)).returncode == 0


def test_the_installed_bridge_runs_on_a_plain_path_and_reaches_the_home_from_vix_home(home: Path, write_hook: Writer, tmp_path: Path) -> None:
    with attack(SHOWN, "import --install-bridge with the home from VIX_HOME, run on PATH=/usr/bin:/bin"):
        write_hook("guard", matcher="bash", mode="sync", blocking=True, command="cat > /dev/null; echo no >&2; exit 2")
        settings = tmp_path / "project" / ".claude" / "settings.json"
        settings.parent.mkdir(parents=True)
        settings.write_text("{}\n")
        installed = run("import", "claude-code", str(settings), "--install-bridge", env=environment(VIX_HOME=str(home)))
        assert installed.returncode == 0, installed.stderr
        [group] = json.loads(settings.read_text())["hooks"]["PreToolUse"]
        [entry] = group["hooks"]
        assert entry["command"].startswith("/") and f"--home {home}" in entry["command"]
        host = subprocess.run(
            ["/bin/sh", "-c", entry["command"]], input=json.dumps({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}}),
            capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}, cwd="/",
        )
        assert json.loads(host.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny", host


def gemini(home: Path, envelope: dict[str, object], *flags: str) -> subprocess.CompletedProcess[str]:
    return run("gemini-cli-hook", "--home", str(home), *flags, stdin=json.dumps(envelope))


def test_gemini_cli_is_told_what_it_obeys(home: Path, write_hook: Writer) -> None:
    with attack(SHOWN, "gemini-cli-hook: an ask, a rewrite, and AfterAgent's stop_hook_active: false"):
        write_hook("ask", matcher="bash", mode="sync", blocking=True,
                   command="""cat > /dev/null; echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "sure?"}}'""")
        asked = gemini(home, {"hook_event_name": "BeforeTool", "session_id": "s", "tool_name": "run_shell_command", "tool_input": {"command": "ls", "dir_path": "sub"}})
        assert json.loads(asked.stdout) == {"decision": "ask", "reason": "sure?"}
        write_hook("gate", event="Stop", mode="sync", dialect="claude-code",
                   command='''grep -q '"stop_hook_active": *true' && exit 0; echo "keep going" >&2; exit 2''')
        stop = {"hook_event_name": "AfterAgent", "session_id": "s", "prompt": "p", "prompt_response": "r", "stop_hook_active": False}
        with Served(home):
            first = gemini(home, stop)
            second = gemini(home, stop)  # Gemini sends false again: the bus's memory says true
        assert json.loads(first.stdout)["decision"] == "deny"
        assert json.loads(second.stdout) == {}


def test_a_claude_code_hook_reads_the_subagents_last_message(home: Path, write_hook: Writer) -> None:
    with attack(SHOWN, "claude-code dialect on SubagentStop: vixd's result as last_assistant_message"):
        spec = write_hook("review", event="SubagentStop", mode="sync", dialect="claude-code", command='cat > "$HOOKBUS_HOOK_DIR/seen.json"')
        result = run("emit", "SubagentStop", "--home", str(home), stdin=json.dumps({"agent_type": "general", "result": "all tests pass"}))
        assert result.returncode == 0, result.stderr
        seen = json.loads((spec.parent / "seen.json").read_text())
        assert seen["last_assistant_message"] == "all tests pass" and seen["hook_event_name"] == "SubagentStop"
