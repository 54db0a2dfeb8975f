"""``hookbus import claude-code FILE --install-bridge --http URL``: http hooks where an
unreachable server cannot weaken a hook, nor a squatter on its port approve or rewrite a
call (unless --http-decisions), the command bridge elsewhere; the token checked against
the server before it is written, and never in a file others can read."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import HookWriter, turn_off_home_guard
from httpkit import http_address, token_of
from servekit import Served, environment, hookbus

URL = "http://127.0.0.1:8787"
ROUTE = f"{URL}/claude-code"


def install(settings: Path, home: Path, *extra: str, token: str | None = None) -> Any:
    return hookbus(
        "import", "claude-code", str(settings), "--install-bridge", "--home", str(home), *extra,
        env=environment(HOOKBUS_HTTP_TOKEN=token),
    )


def entries(settings: Path) -> dict[str, list[dict[str, Any]]]:
    document = json.loads(settings.read_text())
    return {event: [hook for group in groups for hook in group["hooks"]] for event, groups in document["hooks"].items()}


def test_events_whose_answer_approves_or_rewrites_keep_the_command_bridge(home: Path, tmp_path: Path) -> None:
    """Claude Code does not authenticate the server: over http, whoever listens on the port
    while the server is down would be obeyed. Only the events whose answer can at most
    block or add words go over http by default."""
    turn_off_home_guard(home)
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", URL)
    assert result.returncode == 0, result.stderr
    hooks = entries(settings)
    for event in ("PreToolUse", "PermissionRequest", "UserPromptSubmit", "PostToolUse", "SessionStart"):
        assert [hook["type"] for hook in hooks[event]] == ["command"], event
    for event in ("Stop", "SubagentStop", "PreCompact"):
        assert [hook["type"] for hook in hooks[event]] == ["http"], event
    assert "PermissionRequest: add" in result.stdout and "approve the permission prompt" in result.stdout
    assert "--http-decisions posts it all the same" in result.stdout


def test_the_home_guard_keeps_pre_tool_use_on_the_command_bridge(home: Path, tmp_path: Path) -> None:
    """The guard is fail-closed: an http hook Claude Code cannot deliver (a killed server)
    would let a write into the home through, where the command bridge decides in-process."""
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", URL, "--http-decisions")
    assert result.returncode == 0, result.stderr
    hooks = entries(settings)
    assert [hook["type"] for hook in hooks["PreToolUse"]] == ["command"]
    assert [hook["type"] for hook in hooks["PostToolUse"]] == ["http"]
    assert 'home guard ("protect_home") is fail-closed there' in result.stdout


def test_with_http_decisions_every_event_posts_to_the_server_but_session_start(home: Path, tmp_path: Path) -> None:
    turn_off_home_guard(home)
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", URL, "--http-decisions")
    assert result.returncode == 0, result.stderr
    hooks = entries(settings)
    for event in ("PreToolUse", "PostToolUse", "UserPromptSubmit", "PermissionRequest", "Stop", "SubagentStop", "PreCompact"):
        assert hooks[event] == [{
            "type": "http", "url": ROUTE, "headers": {"Authorization": "Bearer $HOOKBUS_HTTP_TOKEN"},
            "allowedEnvVars": ["HOOKBUS_HTTP_TOKEN"], "timeout": 600,
        }], event
    assert [hook["type"] for hook in hooks["SessionStart"]] == ["command"]
    assert "SessionStart: add" in result.stdout and "Claude Code runs command hooks only there" in result.stdout


def test_the_token_is_kept_only_in_a_file_no_one_else_may_read(home: Path, tmp_path: Path) -> None:
    made = tmp_path / "new" / "settings.json"
    assert install(made, home, "--http", URL).returncode == 0
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    token = (home / "run" / "http.token").read_text().strip()
    assert json.loads(made.read_text())["env"] == {"HOOKBUS_HTTP_TOKEN": token}

    shared = tmp_path / "shared.json"
    shared.write_text('{"env": {"OTHER": "1"}}')
    shared.chmod(0o644)
    result = install(shared, home, "--http", URL)
    assert result.returncode == 0
    assert token not in shared.read_text() and json.loads(shared.read_text())["env"] == {"OTHER": "1"}
    assert token not in (tmp_path / "shared.json.bak").read_text()


def test_no_http_hook_is_written_whose_token_claude_code_could_not_send(home: Path, tmp_path: Path) -> None:
    """A file others may read cannot keep the token, and Claude Code would send none: every
    call refused (401), its hooks silently not run. The gate, which reads the token from the
    home's run file, takes every event instead."""
    turn_off_home_guard(home)
    shared = tmp_path / "shared.json"
    shared.write_text("{}")
    shared.chmod(0o644)
    result = install(shared, home, "--http", URL, "--http-decisions")
    assert result.returncode == 0, result.stderr
    hooks = entries(shared)
    assert all([hook["type"] for hook in hooks[event]] == ["command"] and "gate.sh" in hooks[event][0]["command"] for event in hooks)
    assert f"{shared} is readable by others, so it cannot keep the token an http hook sends" in result.stdout
    assert f"chmod 600 {shared}" in result.stdout and "the gate reads the token itself" in result.stdout
    assert f"no hookbus serve --http of {home} runs now" in result.stderr
    shared.chmod(0o600)
    again = install(shared, home, "--http", URL, "--http-decisions")
    assert again.returncode == 0, again.stderr
    assert [hook["type"] for hook in entries(shared)["Stop"]] == ["http"]
    assert "Stop: replace the bridge with http" in again.stdout


def test_a_token_from_the_environment_is_never_written(home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    token = "a-token-the-user-manages-012345"
    result = install(settings, home, "--http", URL, token=token)
    assert result.returncode == 0 and token not in settings.read_text() and "env" not in json.loads(settings.read_text())
    assert "the token is $HOOKBUS_HTTP_TOKEN of this environment, which is never written" in result.stdout
    assert all(hook["type"] == "command" for hooks in entries(settings).values() for hook in hooks)


def test_a_dry_run_makes_no_token(home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", URL, "--dry-run")
    assert result.returncode == 0 and "dry run: nothing was written" in result.stdout
    assert not settings.exists() and not (home / "run" / "http.token").exists()


def test_an_event_with_a_fail_closed_hook_keeps_the_command_bridge(write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    write_hook("guard", event="UserPromptSubmit", mode="sync", blocking=True, on_error="deny", command="true")
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", URL, "--http-decisions")
    assert result.returncode == 0
    hooks = entries(settings)
    assert [hook["type"] for hook in hooks["UserPromptSubmit"]] == ["command"]
    assert [hook["type"] for hook in hooks["PostToolUse"]] == ["http"]
    assert "fail-closed hook(s) 'guard'" in result.stdout


def test_an_event_whose_hook_reads_the_project_dir_keeps_the_command_bridge(write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    write_hook("lint", event="PostToolUse", mode="sync", dialect="claude-code", command='"$CLAUDE_PROJECT_DIR"/lint.sh')
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", URL, "--http-decisions")
    assert [hook["type"] for hook in entries(settings)["PostToolUse"]] == ["command"]
    assert "'lint' use $CLAUDE_PROJECT_DIR" in result.stdout


def test_running_it_again_switches_between_the_bridges(write_hook: HookWriter, home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "mine.sh"}]}]}}))
    settings.chmod(0o600)
    turn_off_home_guard(home)
    assert install(settings, home).returncode == 0
    assert (home / "hooks" / "pretooluse-write-mine-sh" / "hook.json").exists()  # the user's own moved into the home
    assert install(settings, home, "--http", URL, "--http-decisions").returncode == 0
    hooks = entries(settings)
    assert [hook["type"] for hook in hooks["PreToolUse"]] == ["http"]
    again = install(settings, home, "--http", URL, "--http-decisions")
    assert "already routed to http" in again.stdout and f"{settings} needs no change" in again.stdout
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, on_error="deny", command="true")
    switched = install(settings, home, "--http", URL, "--http-decisions")
    assert "PreToolUse: replace the bridge with" in switched.stdout
    assert [hook["type"] for hook in entries(settings)["PreToolUse"]] == ["command"]
    assert "gate.sh claude-code" in entries(settings)["PreToolUse"][0]["command"]
    assert install(settings, home).returncode == 0  # and back to the command bridge everywhere
    assert all(hook["type"] == "command" and "gate.sh" not in hook["command"] for hooks in entries(settings).values() for hook in hooks)
    assert install(settings, home, "--http", URL).returncode == 0  # the gate replaces the command bridge
    assert "gate.sh claude-code" in entries(settings)["SessionStart"][0]["command"]
    undone = hookbus("import", "claude-code", str(settings), "--uninstall-bridge", "--home", str(home))
    assert undone.returncode == 0, undone.stderr
    assert json.loads(settings.read_text())["hooks"] == {
        "PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "mine.sh"}]}]
    }


@pytest.mark.parametrize(
    "url, message",
    [
        ("https://127.0.0.1:8787", "expected http://127.0.0.1:PORT"),
        ("http://localhost:8787", "with the IP address and port"),
        ("http://10.0.0.1:8787", "loopback address and a port"),
        ("http://127.0.0.1", "loopback address and a port"),
        ("http://127.0.0.1:8787/elsewhere", "give the server's address alone"),
        ("http://user:pw@127.0.0.1:8787", "give the server's address alone"),
    ],
)
def test_a_url_that_is_not_the_servers_is_refused(home: Path, tmp_path: Path, url: str, message: str) -> None:
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", url)
    assert result.returncode == 1 and message in result.stderr and "was not changed" in result.stderr
    assert not settings.exists()


def test_the_route_may_be_given_and_ipv6_is_taken(home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    assert install(settings, home, "--http", "http://[::1]:9000/claude-code").returncode == 0
    assert entries(settings)["Stop"][0]["url"] == "http://[::1]:9000/claude-code"


def test_gemini_cli_gets_the_gate_and_http_goes_with_the_bridge_only(home: Path, tmp_path: Path) -> None:
    gemini_file = tmp_path / "g.json"
    gemini = hookbus("import", "gemini-cli", str(gemini_file), "--install-bridge", "--http", URL, "--home", str(home))
    assert gemini.returncode == 0, gemini.stderr
    assert "Gemini CLI has no http hooks: the gate posts to the server" in gemini.stdout
    gemini_hooks = entries(gemini_file)
    assert set(gemini_hooks) == {"BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "SessionStart", "PreCompress"}
    assert all("gate.sh gemini-cli" in hooks[0]["command"] and hooks[0]["timeout"] == 600000 for hooks in gemini_hooks.values())
    bad = hookbus("import", "gemini-cli", str(gemini_file), "--install-bridge", "--http", "http://10.0.0.1:1", "--home", str(home))
    assert bad.returncode == 1 and "loopback address" in bad.stderr
    plain = hookbus("import", "claude-code", str(tmp_path / "s.json"), "--http", URL, "--home", str(home))
    assert plain.returncode == 1 and "--http goes with --install-bridge" in plain.stderr
    decisions = hookbus("import", "claude-code", str(tmp_path / "s.json"), "--install-bridge", "--http-decisions", "--home", str(home))
    assert decisions.returncode == 1 and "--http-decisions goes with --http" in decisions.stderr
    assert not os.path.exists(tmp_path / "s.json")


def test_with_no_server_it_says_the_token_was_not_checked(home: Path, tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    url = closed_port_url()
    first = install(settings, home, "--http", url)
    assert first.returncode == 0
    assert f"env: HOOKBUS_HTTP_TOKEN set to the token of {home}/run/http.token ({settings} is readable by you alone); not checked" in first.stdout
    assert "server's token" not in first.stdout and "the token could not be checked: no hookbus serve answers" in first.stderr
    again = install(settings, home, "--http", url)
    assert "env:" not in again.stdout and "needs no change" in again.stdout


def closed_port_url() -> str:
    """An address where nothing listens (a port just freed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def server(home: Path) -> Iterator[tuple[Served, str]]:
    with Served(home, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None)) as served:
        host, port = http_address(served)
        yield served, f"http://{host}:{port}"


def test_it_says_the_servers_token_only_once_the_server_took_it(home: Path, tmp_path: Path, server: tuple[Served, str]) -> None:
    _, url = server
    settings = tmp_path / "settings.json"
    first = install(settings, home, "--http", url)
    assert first.returncode == 0, first.stderr
    assert f"env: HOOKBUS_HTTP_TOKEN set to the server's token (checked: the server at {url} takes it; {settings} is readable by you alone)" in first.stdout
    assert json.loads(settings.read_text())["env"] == {"HOOKBUS_HTTP_TOKEN": token_of(home)}
    again = install(settings, home, "--http", url)
    assert "env:" not in again.stdout and "needs no change" in again.stdout


def test_a_token_rotated_since_the_server_started_is_refused(home: Path, tmp_path: Path, server: tuple[Served, str]) -> None:
    _, url = server
    token_file = home / "run" / "http.token"
    token_file.write_text("a-new-token-the-server-never-read-0123\n")
    settings = tmp_path / "settings.json"
    result = install(settings, home, "--http", url)
    assert result.returncode == 1 and not settings.exists()
    assert f"the server there refused the token of {token_file} (401)" in result.stderr
    assert "restart the server" in result.stderr and f"{settings} was not changed" in result.stderr


def test_the_gate_is_checked_against_the_homes_server(home: Path, tmp_path: Path, server: tuple[Served, str]) -> None:
    """With the token in the environment (never written), every event gets the gate, which
    sends the token of the server's run file: that is what is checked, wherever the URL
    points."""
    _, url = server
    settings = tmp_path / "settings.json"
    right = install(settings, home, "--http", url, token="a-token-the-server-does-not-know-0123")
    assert right.returncode == 0, right.stderr
    assert "no hookbus serve --http" not in right.stderr and "env" not in json.loads(settings.read_text())
    elsewhere = install(tmp_path / "other.json", home, "--http", closed_port_url(), token="x-0123456789")
    port = url.rsplit(":", 1)[1]
    assert elsewhere.returncode == 0 and f"the server of {home} listens on 127.0.0.1:{port}" in elsewhere.stderr


def test_a_server_of_another_home_is_refused(home: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "hooks").mkdir(parents=True)
    token = "a-token-both-homes-share-0123456789"
    (home / "run").mkdir(mode=0o700, exist_ok=True)
    (home / "run" / "http.token").write_text(token + "\n")
    (home / "run" / "http.token").chmod(0o600)
    with Served(other, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=token)) as served:
        host, port = http_address(served)
        settings = tmp_path / "settings.json"
        result = install(settings, home, "--http", f"http://{host}:{port}")
    assert result.returncode == 1 and f"serves {other}, not {home}" in result.stderr and not settings.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("body", "refused"), [(b"Not Found\n", True), (b"hookbus: no such route '/ping'\n", False)])
def test_a_404_on_ping_is_taken_only_from_an_older_hookbus(home: Path, tmp_path: Path, body: bytes, refused: bool) -> None:
    """Any web server answers 404 to GET /ping: only an older hookbus serve (whose 404 comes
    past the token check, and says "hookbus:") is taken to have the token."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound) as other:
        thread = threading.Thread(target=other.serve_forever, daemon=True)
        thread.start()
        try:
            settings = tmp_path / "settings.json"
            result = install(settings, home, "--http", f"http://127.0.0.1:{other.server_address[1]}")
        finally:
            other.shutdown()
            thread.join(10)
    if refused:
        assert result.returncode == 1 and "is not a hookbus serve --http (it has no GET /ping)" in result.stderr
        assert not settings.exists()
    else:
        assert result.returncode == 0, result.stderr
        assert "an older hookbus serve, which does not say its home" in result.stdout


def test_without_a_bash_the_gate_runs_on_the_command_bridge_is_written_and_said(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS's /bin/bash is 3.2: the gate needs 4.2, so the installer writes the command
    bridge there, and says why."""
    from hookbus.hosts import gate
    from hookbus.hosts.install import CLAUDE_CODE, gate_or_bridge

    old_bash = tmp_path / "bash"
    old_bash.write_text("#!/bin/sh\necho 3 2\n")
    old_bash.chmod(0o755)
    monkeypatch.setattr(gate, "find_bash", lambda: str(old_bash))
    command, why = gate_or_bridge(home, CLAUDE_CODE, ["/opt/hookbus"])
    assert command == f"/opt/hookbus claude-code-hook --home {home}"
    assert why is not None and f"{old_bash} is bash 3.2" in why and "bash 4.2 or later" in why
    monkeypatch.setattr(gate, "find_bash", lambda: None)
    command, why = gate_or_bridge(home, CLAUDE_CODE, ["/opt/hookbus"])
    assert "gate.sh" not in command and why is not None and why.startswith("no bash was found")
