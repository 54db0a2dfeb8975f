"""``hookbus import codex FILE``: Codex CLI's hooks as ``"dialect": "codex"`` hooks, read
as Codex reads them; and ``--install-bridge`` / ``--uninstall-bridge`` for Codex CLI, with
the trust entries of its config.toml written, checked (by config.toml, or by a
``codex app-server`` when CODEX_BIN names one) and taken out again."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus.contract import outcome_from_command
from hookbus.dialects import codex_names
from hookbus.hosts.codex_trust import trust_hash, trust_key
from hookbus.hosts.settingsfile import load_toml
from servekit import environment, hookbus

pytestmark = pytest.mark.timeout(120)
#: A real Codex CLI to ask, when the run names one (the tests' own CODEX_BIN is cleared).
REAL_CODEX = os.environ.get("CODEX_BIN")


@pytest.fixture(autouse=True)
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME and a CODEX_HOME of the test's own: the install writes trust into
    $CODEX_HOME/config.toml, which must never be the real one."""
    home = tmp_path / "user"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    codex = tmp_path / "codex"
    codex.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex))
    monkeypatch.delenv("CODEX_BIN", raising=False)
    return codex


def run(*arguments: str, input: str | None = None, **variables: str | None) -> Any:
    env = environment(VIX_HOME=None, VIX_DISABLE_HOOKS=None, HOOKBUS_SOCKET=None, **variables)
    return hookbus(*arguments, input=input, env=env)


def bridge(home: Path) -> str:
    return f"{shlex.quote(sys.executable)} -m hookbus codex-hook --home {shlex.quote(str(home))}"


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
    return path


HOOKS: dict[str, Any] = {
    "hooks": {
        "PreToolUse": [
            {"matcher": "^Bash$", "hooks": [
                {"type": "command", "command": "./guard.sh", "timeout": 5, "statusMessage": "checking"},
                {"type": "prompt", "prompt": "is it safe?"},
                {"type": "mcp_tool", "server": "s", "tool": "t"},
            ]},
        ],
        "Stop": [{"hooks": [{"type": "command", "command": "echo stop", "async": True}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "cat NOTES.md"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye"}]}],
        "PreModelRequest": [{"hooks": [{"type": "command", "command": "true"}]}],
    }
}


# -- hookbus import codex ----------------------------------------------------------------------


def test_a_hooks_json_becomes_codex_dialect_hooks(tmp_path: Path, codex_home: Path) -> None:
    source = write_json(codex_home / "hooks.json", HOOKS)
    target = tmp_path / "vix"
    done = run("import", "codex", str(source), "--home", str(target))
    assert done.returncode == 0, done.stderr
    ids = sorted(path.name for path in (target / "hooks").iterdir())
    assert ids == ["pretooluse-bash-guard-sh", "sessionstart-startup-cat-notes-md", "stop-echo-stop"]
    guard = json.loads((target / "hooks" / "pretooluse-bash-guard-sh" / "hook.json").read_text())
    assert guard == {
        "id": "pretooluse-bash-guard-sh",
        "name": "PreToolUse ^Bash$: ./guard.sh",
        "created_by": f"import:codex:{source}",
        "trigger": {"event": "PreToolUse", "matcher": ".*(?:^Bash$).*"},
        "mode": "sync",
        "blocking": True,
        "timeout": "5s",
        "dialect": "codex",
        "command": "./guard.sh",
    }
    start = json.loads((target / "hooks" / "sessionstart-startup-cat-notes-md" / "hook.json").read_text())
    assert start["trigger"] == {"event": "ThreadStart", "matcher": "startup"}
    assert start["timeout"] == "600s"  # Codex's default
    assert json.loads((target / "hooks" / "stop-echo-stop" / "hook.json").read_text())["mode"] == "async"
    out = done.stdout
    assert "skipped event SessionEnd (1 hook): hookbus has no counterpart" in out
    assert "skipped event PreModelRequest (1 hook)" in out
    assert "$.hooks.PreToolUse[0].hooks[1]: Codex CLI does not run prompt hooks" in out
    assert "$.hooks.PreToolUse[0].hooks[2]: hookbus has no runner for Codex's 'mcp_tool' hooks" in out
    assert "ThreadStart (Codex's SessionStart)" in out
    assert run("validate", "--home", str(target)).returncode == 0


def test_a_config_toml_hooks_tables_are_imported_and_its_trust_is_not_an_event(tmp_path: Path, codex_home: Path) -> None:
    config = codex_home / "config.toml"
    config.write_text(
        'model = "gpt-5"\n\n[[hooks.PreToolUse]]\nmatcher = "Bash"\n\n[[hooks.PreToolUse.hooks]]\n'
        'type = "command"\ncommand = "echo inline"\ntimeout = 30\n\n'
        '[hooks.state."/x/hooks.json:stop:0:0"]\ntrusted_hash = "sha256:abc"\n'
    )
    target = tmp_path / "vix"
    done = run("import", "codex", str(config), "--home", str(target), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would import" in done.stdout and "pretooluse-bash-echo-inline" in done.stdout
    assert "state" not in done.stdout and not target.exists()
    assert run("import", "codex", str(config), "--home", str(target)).returncode == 0
    hook = json.loads((target / "hooks" / "pretooluse-bash-echo-inline" / "hook.json").read_text())
    assert hook["trigger"] == {"event": "PreToolUse", "matcher": "Bash"} and hook["timeout"] == "30s"


def test_a_broken_file_imports_nothing(tmp_path: Path, codex_home: Path) -> None:
    target = tmp_path / "vix"
    bad_toml = codex_home / "config.toml"
    bad_toml.write_text("[[hooks.PreToolUse]\n")
    done = run("import", "codex", str(bad_toml), "--home", str(target))
    assert done.returncode == 1 and "invalid TOML" in done.stderr and "nothing was imported" in done.stderr
    bad = write_json(tmp_path / "hooks.json", {"hooks": {"PreToolUse": [
        {"hooks": [{"type": "command", "command": "ok"}]},
        {"hooks": [{"type": "command", "command": "x", "timeout": "soon"}]},
    ]}})
    done = run("import", "codex", str(bad), "--home", str(target))
    assert done.returncode == 1 and "@ $.hooks.PreToolUse[1].hooks[0].timeout" in done.stderr
    assert not target.exists()
    assert run("import", "codex", str(bad), "--plugin-root", str(tmp_path)).returncode == 1


# -- the codex dialect: Codex's envelope, Codex's reading ---------------------------------------


@pytest.mark.parametrize("event, code, stdout, stderr, expected", [
    # What Codex honours.
    ("PreToolUse", 2, "", "no rm", ("deny", "no rm")),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", '
     '"permissionDecisionReason": "no"}}', "", ("deny", "no")),
    ("PreToolUse", 0, '{"decision": "block", "reason": "legacy"}', "", ("deny", "legacy")),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}}', "",
     ("modify", None)),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"additionalContext": "note"}}', "", ("context", None)),
    ("PreToolUse", 0, "plain words", "", ("allow", None)),
    ("UserPromptSubmit", 0, "plain words", "", ("context", None)),
    ("ThreadStart", 0, '{"continue": false, "stopReason": "enough"}', "", ("allow", None)),
    ("PostToolUse", 2, "", "replaced", ("context", None)),
    ("PostToolUse", 0, '{"continue": false, "stopReason": "why"}', "", ("context", None)),
    ("PermissionRequest", 0, '{"hookSpecificOutput": {"decision": {"behavior": "deny", "message": "no"}}}', "",
     ("deny", "no")),
    # What Codex reports as "Failed": the hook's failure, so it fails open.
    ("PreToolUse", 2, "", "", ("failed", None)),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"permissionDecision": "deny"}}', "", ("failed", None)),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "?"}}', "",
     ("failed", None)),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"permissionDecision": "allow"}}', "", ("failed", None)),
    ("PreToolUse", 0, '{"hookSpecificOutput": {"updatedInput": {"command": "ls"}}}', "", ("failed", None)),
    ("PreToolUse", 0, '{"decision": "approve"}', "", ("failed", None)),
    ("PreToolUse", 0, '{"continue": false, "stopReason": "stop"}', "", ("failed", None)),
    ("PreToolUse", 0, '{"behavior": "deny", "reason": "hookbus shape"}', "", ("failed", None)),
    ("PreToolUse", 0, "{not json", "", ("failed", None)),
    ("PreToolUse", 1, "", "oops", ("failed", None)),
    ("PreToolUse", 3, "", "oops", ("failed", None)),
    ("ThreadStart", 2, "", "why", ("failed", None)),
    ("PermissionRequest", 0, '{"hookSpecificOutput": {"permissionDecision": "allow"}}', "", ("failed", None)),
    ("PostToolUse", 0, '{"hookSpecificOutput": {"updatedToolOutput": "x"}}', "", ("failed", None)),
])
def test_codex_reads_output_strictly(event: str, code: int, stdout: str, stderr: str, expected: tuple[str, str | None]) -> None:
    outcome = outcome_from_command(code, stdout.encode(), stderr.encode(), event, "codex")
    behavior, reason = expected
    if behavior == "failed":
        assert outcome.behavior == "allow" and outcome.error, outcome
        return
    assert outcome.error is None, outcome.error
    assert outcome.behavior == behavior
    if reason is not None:
        assert outcome.reason == reason
    if event == "ThreadStart" and code == 0:
        assert outcome.halt == "enough"


def emit(home: Path, event: str, envelope: dict[str, Any]) -> Any:
    return run("emit", event, "--home", str(home), "--no-server", input=json.dumps(envelope))


def test_imported_hooks_see_codexs_envelope_and_fail_open_as_in_codex(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    source = write_json(tmp_path / "hooks.json", {"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": f"cat > {shlex.quote(str(seen))}; "
            "grep -q 'rm -rf' \"$0\" 2>/dev/null; "
            "jq -e '.tool_input.command | test(\"rm -rf\")' " + shlex.quote(str(seen)) + " >/dev/null "
            "&& { echo 'no rm -rf' >&2; exit 2; } || exit 0"}]},
        {"matcher": "Bash", "hooks": [{"type": "command", "command":
            "echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"deny\"}}'"}]},
    ], "PostToolUse": [{"hooks": [{"type": "command", "command": f"cat > {shlex.quote(str(seen))}.post"}]}]}})
    target = tmp_path / "vix"
    assert run("import", "codex", str(source), "--home", str(target)).returncode == 0
    if os.system("command -v jq >/dev/null") != 0:
        pytest.skip("jq is not installed")
    denied = emit(target, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/", "thread_id": "t1"})
    assert denied.returncode == 2, denied.stdout + denied.stderr
    assert "no rm -rf" in json.loads(denied.stdout)["reason"]
    envelope = json.loads(seen.read_text())
    assert envelope["tool_name"] == "Bash" and envelope["hook_event_name"] == "PreToolUse"
    assert envelope["session_id"] == "t1"
    # The deny without a reason is Codex's "Failed": it fails open, the call goes on.
    allowed = emit(target, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"})
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    # PostToolUse's tool_response is text under Codex.
    assert emit(target, "PostToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": "a"},
                                        "cwd": "/"}).returncode == 0
    assert json.loads(Path(f"{seen}.post").read_text())["tool_response"] == '{"stdout":"a"}'
    # Other tools keep their names under Codex: the Bash matcher does not take them.
    assert emit(target, "PreToolUse", {"tool_name": "apply_patch", "tool_input": {"command": "rm -rf"}, "cwd": "/"}).returncode == 0


# -- --install-bridge ------------------------------------------------------------------------


def hooks_of(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())["hooks"]
    return document


def state_of(codex_home: Path) -> dict[str, Any]:
    state: dict[str, Any] = load_toml((codex_home / "config.toml").read_text(), "config.toml").get("hooks", {}).get("state", {})
    return state


USER_CONFIG = '# mine\nmodel = "gpt-5"  # keep\n\n[projects."/work"]\ntrust_level = "trusted"\n'


def test_the_bridge_goes_on_every_codex_event_and_is_trusted(tmp_path: Path, codex_home: Path) -> None:
    source = write_json(codex_home / "hooks.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "./guard.sh", "timeout": 5}]}]}})
    config = codex_home / "config.toml"
    user_key = trust_key(str(source), "PreToolUse", 0, 0)
    user_hash = trust_hash("PreToolUse", "Bash", {"type": "command", "command": "./guard.sh", "timeout": 5})
    config.write_text(USER_CONFIG + f'\n[hooks.state."{user_key}"]\ntrusted_hash = "{user_hash}"\n')
    target = tmp_path / "vix"
    done = run("import", "codex", str(source), "--home", str(target), "--install-bridge")
    assert done.returncode == 0, done.stdout + done.stderr
    hooks = hooks_of(source)
    # The ten events hookbus has: not those the bridge would answer with nothing.
    assert set(hooks) == set(codex_names.VIX_EVENT)
    command = bridge(target)
    for event in codex_names.VIX_EVENT:
        assert hooks[event][-1] == {"hooks": [{"type": "command", "command": command, "timeout": 600}]}
    # The user's own hook stays first, where its trust says it is; the bridge comes after.
    assert hooks["PreToolUse"][0]["hooks"][0]["command"] == "./guard.sh"
    state = state_of(codex_home)
    assert state[user_key] == {"trusted_hash": user_hash}
    assert len(state) == 1 + len(codex_names.VIX_EVENT)
    for event in codex_names.VIX_EVENT:
        group = len(hooks[event]) - 1
        entry = hooks[event][group]["hooks"][0]
        assert state[trust_key(str(source), event, group, 0)] == {"trusted_hash": trust_hash(event, None, entry)}
    text = config.read_text()
    assert text.startswith(USER_CONFIG.split("[projects")[0]) and '[projects."/work"]' in text
    assert (codex_home / "config.toml.bak").read_text().startswith("# mine")
    assert (codex_home / "hooks.json.bak").exists()
    assert stat.S_IMODE(config.stat().st_mode) == stat.S_IMODE((codex_home / "config.toml.bak").stat().st_mode)
    assert "checked: Codex CLI trusts all 10 bridge entries" in done.stdout
    assert "import them with `hookbus import codex" in done.stdout
    # Twice: nothing changes, nothing is backed up again.
    before = (source.read_text(), config.read_text())
    again = run("import", "codex", str(source), "--home", str(target), "--install-bridge")
    assert again.returncode == 0, again.stderr
    assert (source.read_text(), config.read_text()) == before
    assert "needs no change" in again.stdout and "checked:" in again.stdout
    assert not (codex_home / "config.toml.bak.1").exists() and not (codex_home / "hooks.json.bak.1").exists()


def test_http_puts_the_gate_on_every_event_and_never_an_http_hook(tmp_path: Path, codex_home: Path) -> None:
    source = codex_home / "hooks.json"
    target = tmp_path / "vix"
    assert run("import", "codex", str(source), "--home", str(target), "--install-bridge").returncode == 0
    done = run("import", "codex", str(source), "--home", str(target), "--install-bridge", "--http", "http://127.0.0.1:9")
    assert done.returncode == 0, done.stdout + done.stderr
    hooks = hooks_of(source)
    state = state_of(codex_home)
    assert len(state) == len(codex_names.VIX_EVENT)
    for event in codex_names.VIX_EVENT:
        assert len(hooks[event]) == 1  # replaced where it was
        entry = hooks[event][0]["hooks"][0]
        assert entry["type"] == "command" and "gate.sh codex" in entry["command"]
        assert state[trust_key(str(source), event, 0, 0)]["trusted_hash"] == trust_hash(event, None, entry)
    assert "Codex CLI has no http hooks" in done.stdout
    refused = run("import", "codex", str(source), "--install-bridge", "--http", "http://127.0.0.1:9", "--http-decisions")
    assert refused.returncode == 1 and "Codex CLI has no http hooks" in refused.stderr


def test_what_the_install_refuses_changes_nothing(tmp_path: Path, codex_home: Path) -> None:
    target = tmp_path / "vix"
    config = codex_home / "config.toml"
    toml = run("import", "codex", str(config), "--home", str(target), "--install-bridge")
    assert toml.returncode == 1 and "$CODEX_HOME/hooks.json" in toml.stderr
    source = write_json(codex_home / "hooks.json", {"hooks": {}})
    config.write_text("model = \n")
    broken = run("import", "codex", str(source), "--home", str(target), "--install-bridge")
    assert broken.returncode == 1 and "invalid TOML" in broken.stderr and "was not changed" in broken.stderr
    assert hooks_of(source) == {} and config.read_text() == "model = \n"
    assert not (codex_home / "hooks.json.bak").exists()
    config.unlink()
    config.mkdir()
    odd = run("import", "codex", str(source), "--home", str(target), "--install-bridge")
    assert odd.returncode == 1 and "a directory" in odd.stderr and hooks_of(source) == {}


def test_a_config_reached_through_your_own_link_is_written_through_it(tmp_path: Path, codex_home: Path) -> None:
    real = tmp_path / "dotfiles" / "codex.toml"
    real.parent.mkdir()
    real.write_text(USER_CONFIG)
    (codex_home / "config.toml").symlink_to(real)
    source = codex_home / "hooks.json"
    done = run("import", "codex", str(source), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert done.returncode == 0, done.stderr
    assert (codex_home / "config.toml").is_symlink() and "trusted_hash" in real.read_text()


def test_dry_run_writes_nothing(tmp_path: Path, codex_home: Path) -> None:
    source = codex_home / "hooks.json"
    done = run("import", "codex", str(source), "--home", str(tmp_path / "vix"), "--install-bridge", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would change as said above" in done.stdout and "trust " in done.stdout
    assert sorted(os.listdir(codex_home)) == []


def test_a_bridge_codex_would_not_run_fails_loudly(tmp_path: Path, codex_home: Path) -> None:
    """The trust of one entry disabled in config.toml: the check says so, exit 1."""
    source = codex_home / "hooks.json"
    target = tmp_path / "vix"
    assert run("import", "codex", str(source), "--home", str(target), "--install-bridge").returncode == 0
    key = trust_key(str(source), "Stop", 0, 0)
    config = codex_home / "config.toml"
    config.write_text(config.read_text().replace(f'[hooks.state."{key}"]\n', f'[hooks.state."{key}"]\nenabled = false\n'))
    done = run("import", "codex", str(source), "--home", str(target), "--install-bridge")
    assert done.returncode == 1
    assert "Codex CLI would skip 1 of the bridge's 10 entries" in done.stderr and "enabled = false" in done.stderr


FAKE_CODEX = r'''#!{python}
"""A stand-in for `codex app-server`: answers initialize, then hooks/list with the
trust status of every entry of $CODEX_HOME/hooks.json, as {status}."""
import json, os, sys
from hookbus.hosts.codex_trust import entries, trust_hash, trust_key
from hookbus.hosts.settingsfile import load_toml
assert sys.argv[1:] == ["app-server"], sys.argv
home = os.environ["CODEX_HOME"]
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        print(json.dumps({{"id": message["id"], "result": {{"userAgent": "fake"}}}}), flush=True)
    elif message.get("method") == "hooks/list":
        source = os.path.join(home, "hooks.json")
        state = load_toml(open(os.path.join(home, "config.toml")).read(), "c").get("hooks", {{}}).get("state", {{}})
        hooks = []
        for (event, group, index), matcher, entry in entries(json.load(open(source))["hooks"]):
            key = trust_key(source, event, group, index)
            trusted = state.get(key, {{}}).get("trusted_hash") == trust_hash(event, matcher, entry)
            hooks.append({{"key": key, "trustStatus": "{status}" if "{status}" != "real" else ("trusted" if trusted else "untrusted")}})
        print(json.dumps({{"id": message["id"], "result": {{"data": [{{"cwd": os.getcwd(), "hooks": hooks}}]}}}}), flush=True)
'''


def fake_codex(tmp_path: Path, status: str) -> Path:
    path = tmp_path / f"codex-{status}"
    path.write_text(FAKE_CODEX.format(python=sys.executable, status=status))
    path.chmod(0o755)
    return path


def test_with_codex_bin_the_app_server_is_asked(tmp_path: Path, codex_home: Path) -> None:
    source = codex_home / "hooks.json"
    target = tmp_path / "vix"
    done = run("import", "codex", str(source), "--home", str(target), "--install-bridge", CODEX_BIN=str(fake_codex(tmp_path, "real")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "asked Codex" in done.stdout and "hooks/list" in done.stdout
    refused = run("import", "codex", str(source), "--home", str(target), "--install-bridge", CODEX_BIN=str(fake_codex(tmp_path, "modified")))
    assert refused.returncode == 1
    assert "Codex says modified" in refused.stderr and "would skip 10 of the bridge's 10 entries" in refused.stderr
    missing = run("import", "codex", str(source), "--home", str(target), "--install-bridge", CODEX_BIN=str(tmp_path / "nope"))
    assert missing.returncode == 1 and "cannot run it" in missing.stderr


@pytest.mark.skipif(not REAL_CODEX, reason="CODEX_BIN names no real Codex CLI")
def test_the_real_codex_trusts_the_bridge(tmp_path: Path, codex_home: Path) -> None:
    source = codex_home / "hooks.json"
    done = run("import", "codex", str(source), "--home", str(tmp_path / "vix"), "--install-bridge", CODEX_BIN=REAL_CODEX)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "asked Codex" in done.stdout


# -- --uninstall-bridge ------------------------------------------------------------------------


def test_uninstall_takes_the_bridge_and_its_trust_out_and_keeps_the_users(tmp_path: Path, codex_home: Path) -> None:
    user = {"type": "command", "command": "./guard.sh", "timeout": 5}
    source = write_json(codex_home / "hooks.json", {"hooks": {"Stop": [{"hooks": [user]}]}})
    config = codex_home / "config.toml"
    config.write_text(USER_CONFIG)
    target = tmp_path / "vix"
    assert run("import", "codex", str(source), "--home", str(target), "--install-bridge").returncode == 0
    # A hook the user added after the bridge, and trusted.
    document = json.loads(source.read_text())
    late = {"type": "command", "command": "echo late"}
    document["hooks"]["Stop"].append({"hooks": [late]})
    source.write_text(json.dumps(document))
    late_hash = trust_hash("Stop", None, late)
    config.write_text(config.read_text() + f'\n[hooks.state."{trust_key(str(source), "Stop", 2, 0)}"]\ntrusted_hash = "{late_hash}"\n')
    done = run("import", "codex", str(source), "--home", str(target), "--uninstall-bridge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert hooks_of(source) == {"Stop": [{"hooks": [user]}, {"hooks": [late]}]}
    assert state_of(codex_home) == {trust_key(str(source), "Stop", 1, 0): {"trusted_hash": late_hash}}
    assert '[projects."/work"]' in config.read_text() and "# mine" in config.read_text()
    again = run("import", "codex", str(source), "--home", str(target), "--uninstall-bridge")
    assert again.returncode == 0 and "nothing to undo" in again.stdout


# -- what the install will not write through ---------------------------------------------------


def test_a_huge_config_is_refused(tmp_path: Path, codex_home: Path) -> None:
    config = codex_home / "config.toml"
    with open(config, "wb") as handle:
        handle.truncate(17 * 1024 * 1024)
    done = run("import", "codex", str(codex_home / "hooks.json"), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert done.returncode == 1 and "more than the" in done.stderr
    assert not (codex_home / "hooks.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_another_users_config_or_link_is_refused(tmp_path: Path, codex_home: Path) -> None:
    config = codex_home / "config.toml"
    config.write_text(USER_CONFIG)
    os.chown(config, 65534, 65534)
    source = codex_home / "hooks.json"
    done = run("import", "codex", str(source), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert done.returncode == 1 and "belongs to another user (uid 65534)" in done.stderr
    assert config.read_text() == USER_CONFIG and not source.exists()
    config.unlink()
    theirs = tmp_path / "theirs.toml"
    theirs.write_text(USER_CONFIG)
    config.symlink_to(theirs)
    os.lchown(config, 65534, 65534)
    done = run("import", "codex", str(source), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert done.returncode == 1 and "a symbolic link of another user's" in done.stderr
    assert theirs.read_text() == USER_CONFIG and not source.exists()


def test_a_file_codex_may_not_read_at_that_path_is_warned_about(tmp_path: Path, codex_home: Path) -> None:
    elsewhere = tmp_path / "dotfiles" / "codex-hooks.json"
    done = run("import", "codex", str(elsewhere), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert done.returncode == 0, done.stderr
    assert "warning: Codex reads hooks from" in done.stderr and str(elsewhere) in done.stderr
    quiet = run("import", "codex", str(codex_home / "hooks.json"), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert "warning: Codex reads hooks from" not in quiet.stderr


def test_a_bridge_of_another_spelling_is_left_alone_and_not_trusted(tmp_path: Path, codex_home: Path) -> None:
    other = "/opt/other/bin/hookbus codex-hook --home /elsewhere"
    source = write_json(codex_home / "hooks.json", {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": other}]}]}})
    done = run("import", "codex", str(source), "--home", str(tmp_path / "vix"), "--install-bridge")
    assert done.returncode == 0, done.stderr
    assert "Stop: left alone" in done.stdout
    key = trust_key(str(source), "Stop", 0, 0)
    assert f"warning: {key} runs a hookbus bridge that this install did not write" in done.stderr
    assert key not in state_of(codex_home) and len(state_of(codex_home)) == len(codex_names.VIX_EVENT) - 1


def test_a_fixture_may_be_written_in_codexs_words(tmp_path: Path) -> None:
    source = write_json(tmp_path / "hooks.json", {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; } || exit 0"}]}]}})
    target = tmp_path / "vix"
    assert run("import", "codex", str(source), "--home", str(target)).returncode == 0
    [hook] = list((target / "hooks").iterdir())
    write_json(hook / "tests" / "rm.json", {
        "dialect": "codex", "event": "PreToolUse",
        "envelope": {"session_id": "s", "cwd": "/", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}},
        "expect": {"behavior": "deny", "reason": "no rm -rf"},
    })
    done = run("test", "--home", str(target))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


@pytest.mark.parametrize("put_back", [True, False])
def test_a_disk_that_refuses_the_trust_puts_the_file_back_or_says_it_could_not(
    tmp_path: Path, codex_home: Path, monkeypatch: pytest.MonkeyPatch, put_back: bool
) -> None:
    """config.toml is written after FILE: when that fails (a full disk), FILE goes back as it
    was, or, when the disk refuses that too, the install says FILE holds an untrusted
    bridge, which Codex skips. Exit 1 either way: hookbus's failure is never said as done."""
    import errno
    import io

    from hookbus.hosts import install as installing
    from hookbus.hosts.codex_config import plan_codex_trust

    source = codex_home / "hooks.json"
    source.write_text('{"hooks": {}}\n')

    class FullDisk:
        def __init__(self, real: Any) -> None:
            self.real = real

        def __getattr__(self, name: str) -> Any:
            return getattr(self.real, name)

        def write(self, out: Any) -> None:
            raise OSError(errno.ENOSPC, "No space left on device", str(codex_home / "config.toml"))

    def planner(*args: Any) -> Any:
        return FullDisk(plan_codex_trust(*args))

    if not put_back:
        monkeypatch.setattr(installing, "_put_back", lambda target, original: "Read-only file system")
    out, err = io.StringIO(), io.StringIO()
    code = installing.install_bridge(str(source), tmp_path / "vix", host=installing.CODEX, trust=planner, out=out, err=err)
    assert code == 1
    assert "No space left on device" in err.getvalue()
    if put_back:
        assert source.read_text() == '{"hooks": {}}\n' and "was put back as it was" in err.getvalue()
    else:
        assert "could not be put back (Read-only file system)" in err.getvalue() and "Codex skips it" in err.getvalue()
    assert not (codex_home / "config.toml").exists()
