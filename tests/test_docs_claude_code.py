"""docs/claude-code.md's examples run as written, in a fresh HOME with the venv's bin on
PATH: importing the settings file it shows makes the hooks it says, with the warning it
quotes; installing either bridge writes the host's settings file and keeps FILE.bak; each
bridge then answers in its host's shape; and a link where FILE.bak goes is refused with the
message the page quotes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from docskit import DOCS, BIN, bash, logical_lines, private_dir, section, section_blocks, user_environment, write_hook

DOC = DOCS / "claude-code.md"

pytestmark = pytest.mark.timeout(120)

IMPORT = "2. Import a settings file"
ENGINE = "The command bridge"
HTTP = "Over http: no process per call"
COMING = "Coming from Claude Code"


@pytest.fixture
def user(tmp_path: Path) -> Path:
    return private_dir(tmp_path / "ana")


def test_importing_the_settings_file_shown_makes_the_hooks_it_says(user: Path) -> None:
    [settings] = section_blocks(DOC, IMPORT, "json")
    claude = private_dir(user / ".claude")
    (claude / "settings.json").write_text(settings)
    env = user_environment(user)
    [block] = section_blocks(DOC, IMPORT, "sh")
    dry, real = logical_lines(block)
    planned = bash(dry, env, cwd=user)
    assert planned.returncode == 0, planned.stderr
    assert not (user / ".vix" / "hooks").exists(), "--dry-run wrote something"
    done = bash(real, env, cwd=user)
    assert done.returncode == 0, done.stderr
    hooks = user / ".vix" / "hooks"
    text = " ".join(section(DOC, IMPORT).split())
    first = json.loads((hooks / "pretooluse-bash-no-rm-sh" / "hook.json").read_text())
    assert first["trigger"] == {"event": "PreToolUse", "matcher": "Bash"}
    assert (first["mode"], first["blocking"], first["timeout"], first["dialect"]) == ("sync", True, "30s", "claude-code")
    assert first["command"] == json.loads(settings)["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    second = json.loads((hooks / "sessionstart-git-status-short" / "hook.json").read_text())
    assert (second["trigger"]["event"], second["timeout"], second["dialect"]) == ("ThreadStart", "60s", "claude-code")
    assert "`hooks/pretooluse-bash-no-rm-sh/`" in text and "`hooks/sessionstart-git-status-short/`" in text
    assert "the command uses $CLAUDE_PROJECT_DIR" in done.stderr


@pytest.mark.parametrize(("host", "heading", "envelope", "denied"), [
    ("claude", ENGINE, {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "session_id": "s"},
     {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "hook 'guard' denied: no"}}),
    ("gemini", "Gemini CLI", {"hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf /"}, "session_id": "s"},
     {"decision": "deny", "reason": "hook 'guard' denied: no"}),
])
def test_installing_a_bridge_then_running_it(user: Path, host: str, heading: str, envelope: dict[str, object], denied: dict[str, object]) -> None:
    write_hook(private_dir(user / ".vix"), "guard", {
        "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True,
        "command": "cat >/dev/null; echo no >&2; exit 2",
    })
    [block] = section_blocks(DOC, heading, "sh")
    install, run = logical_lines(block)
    settings_file = install.split()[3].replace("~", str(user))
    settings = Path(settings_file) if Path(settings_file).is_absolute() else user / settings_file
    private_dir(settings.parent)
    settings.write_text("{}\n")
    env = user_environment(user)
    installed = bash(install, env, cwd=user)
    assert installed.returncode == 0, installed.stderr
    assert Path(f"{settings}.bak").read_text() == "{}\n"
    written = json.loads(settings.read_text())
    command = f"{BIN / 'hookbus'} {'claude-code-hook' if host == 'claude' else 'gemini-cli-hook'} --home {user / '.vix'}"
    first_event = next(iter(written["hooks"].values()))
    assert first_event[0]["hooks"][0]["command"] == command
    assert first_event[0]["hooks"][0]["timeout"] == (600 if host == "claude" else 600_000)
    answered = bash(run, env, cwd=user, input=json.dumps(envelope))
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == denied


def test_a_link_where_the_backup_goes_is_refused_with_the_message_quoted(user: Path) -> None:
    project = private_dir(user / "project")
    claude = private_dir(project / ".claude")
    (claude / "settings.json").write_text("{}\n")
    bashrc = user / ".bashrc"
    bashrc.write_text("# mine\n")
    os.symlink(bashrc, claude / "settings.json.bak")
    [block] = section_blocks(DOC, ENGINE, "sh")
    install = logical_lines(block)[0]
    done = bash(install, user_environment(user), cwd=project)
    assert done.returncode == 1
    [quoted] = section_blocks(DOC, ENGINE, "text")
    for line in quoted.splitlines():
        assert line.replace("/home/you", str(user)) in done.stderr.splitlines(), done.stderr
    assert (claude / "settings.json").read_text() == "{}\n" and bashrc.read_text() == "# mine\n"


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("heading", [COMING, HTTP])
def test_the_http_setup_runs_as_shown_and_denies(user: Path, heading: str) -> None:
    """The two lines shown: a server with --http, then the import; Claude Code's request
    (as it sends it: the token from FILE's env in the header) gets the guard's deny."""
    import subprocess

    from httpkit import HttpClient
    from servekit import READY

    home = private_dir(user / ".vix")
    write_hook(home, "guard", {
        "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True,
        "command": "cat >/dev/null; echo no >&2; exit 2",
    })
    [block] = section_blocks(DOC, heading, "sh")
    serve_line, install = logical_lines(block)
    port = _free_port()
    serve_line, install = (line.replace("8787", str(port)) for line in (serve_line, install))
    assert serve_line.split("#")[0].strip().endswith("&")
    env = user_environment(user)
    server = subprocess.Popen(
        ["bash", "-c", "exec " + serve_line.split("#")[0].strip().rstrip("&")], env=env, cwd=user,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert server.stderr is not None
        lines = [server.stderr.readline().strip()]
        while lines[-1] and not lines[-1].startswith(READY + "http") and len(lines) < 20:
            lines.append(server.stderr.readline().strip())  # load lines, then the socket's
        assert lines[-1] == f"{READY}http://127.0.0.1:{port}", lines
        private_dir(user / ".claude")
        installed = bash(install, env, cwd=user)
        assert installed.returncode == 0, installed.stderr
        settings_path = install.split()[3].replace("~", str(user))
        settings = Path(settings_path) if Path(settings_path).is_absolute() else user / settings_path
        written = json.loads(settings.read_text())
        [hook] = written["hooks"]["Stop"][0]["hooks"]
        assert hook["url"] == f"http://127.0.0.1:{port}/claude-code" and hook["headers"]["Authorization"] == "Bearer $HOOKBUS_HTTP_TOKEN"
        # the events whose answer approves or rewrites keep the command bridge, as the page says
        for event in ("PreToolUse", "PermissionRequest", "UserPromptSubmit", "PostToolUse"):
            assert written["hooks"][event][0]["hooks"][0]["type"] == "command", event
        assert written["hooks"]["SessionStart"][0]["hooks"][0]["type"] == "command"
        token = written["env"]["HOOKBUS_HTTP_TOKEN"]
        envelope = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "session_id": "s"}
        with HttpClient(port, token) as http:
            answer = http.post(envelope)
        assert answer.json() == {"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "hook 'guard' denied: no",
        }}
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_the_http_hook_shown_is_the_one_written(user: Path) -> None:
    [shown] = section_blocks(DOC, HTTP, "json")
    env = user_environment(user)
    private_dir(user / ".vix")
    project = private_dir(user / "p")
    done = bash("hookbus import claude-code s.json --install-bridge --http http://127.0.0.1:8787", env, cwd=project)
    assert done.returncode == 0, done.stderr
    written = json.loads((project / "s.json").read_text())
    assert written["hooks"]["Stop"][0]["hooks"][0] == json.loads(shown)
