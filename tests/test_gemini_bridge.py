"""hookbus as Gemini CLI's hook engine: ``hookbus gemini-cli-hook`` and ``hookbus import
gemini-cli FILE --install-bridge``.

Gemini CLI's envelope (BeforeTool, ``run_shell_command``, ``file_path``, ``session_id``) in,
the home's merged decision out as Gemini CLI obeys it (top-level ``decision: deny`` or
``ask`` with a reason, ``hookSpecificOutput.tool_input`` as the whole new input,
``additionalContext``, ``continue: false``), in process and through a server alike.
"""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import read_log, turn_off_home_guard
from hookbus.hosts.bridge import GEMINI_CLI, gemini_output
from hookbus.hosts.install import GEMINI_CLI as GEMINI_INSTALL
from hookbus.hosts.install import install_bridge, is_bridge_command
from hookbus.dialects.claude_names import envelope_to_vix
from hookbus.dialects.gemini_names import GEMINI_EVENT, GEMINI_TOOLS, VIX_EVENT
from servekit import Served, environment

pytestmark = pytest.mark.timeout(90)

Writer = Callable[..., Path]

BEFORE_SHELL = {
    "session_id": "g-1", "transcript_path": "/tmp/g.json", "cwd": "/", "hook_event_name": "BeforeTool",
    "timestamp": "2026-12-01T00:00:00Z", "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf /"},
}


def gemini(home: Path, envelope: dict[str, Any] | str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``hookbus gemini-cli-hook --home HOME``, with the Stop memory of this test alone."""
    stdin = envelope if isinstance(envelope, str) else json.dumps(envelope)
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "gemini-cli-hook", "--home", str(home), *extra],
        input=stdin, capture_output=True, text=True, timeout=60, env=env or stop_memory_of(home),
    )


def stop_memory_of(home: Path, **overrides: str) -> dict[str, str]:
    """This environment, with the bridges' Stop memory beside ``home`` (not the user's)."""
    return environment(XDG_STATE_HOME=str(home.parent / "state"), XDG_RUNTIME_DIR=None, **overrides)


# -- names ------------------------------------------------------------------------------------


def test_every_gemini_event_with_a_counterpart_maps_both_ways() -> None:
    assert VIX_EVENT == {
        "BeforeTool": "PreToolUse", "AfterTool": "PostToolUse", "BeforeAgent": "UserPromptSubmit",
        "AfterAgent": "Stop", "SessionStart": "ThreadStart", "PreCompress": "PreCompact",
    }
    assert all(VIX_EVENT[GEMINI_EVENT[vix]] == vix for vix in GEMINI_EVENT)


@pytest.mark.parametrize(
    ("gemini_tool", "gemini_input", "vix_tool", "vix_input"),
    [
        ("run_shell_command", {"command": "ls", "is_background": False}, "bash", {"command": "ls", "is_background": False}),
        ("write_file", {"file_path": "a.txt", "content": "x"}, "write_file", {"path": "a.txt", "content": "x"}),
        ("replace", {"file_path": "a.txt", "old_string": "a", "new_string": "b"}, "edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}),
        ("read_file", {"file_path": "a.txt"}, "read_file", {"path": "a.txt"}),
        ("grep_search", {"pattern": "x"}, "grep", {"pattern": "x"}),
        ("google_web_search", {"query": "q"}, "web_search", {"query": "q"}),
        ("mcp__github__create_issue", {"title": "t"}, "mcp__github__create_issue", {"title": "t"}),
    ],
)
def test_the_tool_map_both_ways(gemini_tool: str, gemini_input: dict[str, Any], vix_tool: str, vix_input: dict[str, Any]) -> None:
    vix = envelope_to_vix({"hook_event_name": "BeforeTool", "tool_name": gemini_tool, "tool_input": gemini_input, "session_id": "s"}, GEMINI_TOOLS)
    assert (vix["tool_name"], vix["tool_input"], vix["thread_id"]) == (vix_tool, vix_input, "s")
    assert "hook_event_name" not in vix
    assert (GEMINI_TOOLS.host_tool(vix_tool), GEMINI_TOOLS.input_to_host(vix_tool, vix_input)) == (gemini_tool, gemini_input)


def test_the_project_directory_comes_from_geminis_variables() -> None:
    for environ, project in [
        ({"GEMINI_PROJECT_DIR": "/g", "CLAUDE_PROJECT_DIR": "/c"}, "/g"),
        ({"CLAUDE_PROJECT_DIR": "/c"}, "/c"),
        ({}, None),
    ]:
        request = GEMINI_CLI.request(BEFORE_SHELL, environ)
        assert request is not None
        assert request[1].get("project_dir") == project


# -- decisions, as Gemini CLI obeys them ------------------------------------------------------

GEMINI_CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "deny": ("PreToolUse", {"behavior": "deny", "reason": "no"}, {"decision": "deny", "reason": "no"}),
    "rewrite": (
        "PreToolUse",
        {"behavior": "modify", "input": {"path": "b.txt", "content": "x"}},
        {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"file_path": "b.txt", "content": "x"}}},
    ),
    "allow": ("PreToolUse", {"behavior": "allow"}, {}),
    "tool context": (
        "PostToolUse",
        {"behavior": "context", "context": "lint: 2 warnings"},
        {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "lint: 2 warnings"}},
    ),
    "prompt denied": ("UserPromptSubmit", {"behavior": "deny", "reason": "secret"}, {"decision": "deny", "reason": "secret"}),
    "prompt context": (
        "UserPromptSubmit",
        {"behavior": "context", "context": "on main"},
        {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "on main"}},
    ),
    "session context": (
        "ThreadStart",
        {"behavior": "context", "context": "hi"},
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "hi"}},
    ),
    "keep going": ("Stop", {"behavior": "allow", "continue_with": "run the tests"}, {"decision": "deny", "reason": "run the tests"}),
    "halt": ("PostToolUse", {"behavior": "allow", "halt": "enough"}, {"continue": False, "stopReason": "enough"}),
    "context where Gemini takes none": ("PreToolUse", {"behavior": "context", "context": "x"}, {}),
    "approve, which Gemini cannot take": ("PreToolUse", {"behavior": "allow", "permission": "approve"}, {}),
    "ask": ("PreToolUse", {"behavior": "allow", "permission": "ask", "reason": "touches prod"}, {"decision": "ask", "reason": "touches prod"}),
    "ask without a reason": ("PreToolUse", {"behavior": "allow", "permission": "ask"}, {"decision": "ask", "reason": "a hook asks you to confirm this call"}),
    "ask with a rewrite": (
        "PreToolUse",
        {"behavior": "modify", "permission": "ask", "input": {"path": "b.txt", "content": "x"}},
        {"decision": "ask", "reason": "a hook asks you to confirm this call",
         "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"file_path": "b.txt", "content": "x"}}},
    ),
    "a deny beats an ask": ("PreToolUse", {"behavior": "deny", "reason": "no", "permission": "ask"}, {"decision": "deny", "reason": "no"}),
}


@pytest.mark.parametrize(("event", "decision", "expected"), list(GEMINI_CASES.values()), ids=list(GEMINI_CASES))
def test_each_decision_in_gemini_clis_format(event: str, decision: dict[str, Any], expected: dict[str, Any]) -> None:
    assert gemini_output(GEMINI_EVENT[event], event, decision, GEMINI_TOOLS, "write_file") == expected


@pytest.mark.parametrize(
    ("event", "decision", "note"),
    [
        ("UserPromptSubmit", {"behavior": "modify", "input": {"prompt": "x"}}, "cannot take"),
        ("PreToolUse", {"behavior": "context", "context": "x"}, "passes none to the model"),
        ("PreToolUse", {"behavior": "allow", "permission": "approve"}, "'approve' to the permission prompt"),
    ],
)
def test_what_gemini_cli_cannot_hear_is_said_on_stderr(event: str, decision: dict[str, Any], note: str) -> None:
    output, notes = GEMINI_CLI.answer(GEMINI_EVENT[event], event, {"tool_name": "bash"}, decision)
    assert output == {}
    assert any(note in line and "Gemini CLI" in line for line in notes)


# -- end to end ------------------------------------------------------------------------------


def test_native_hooks_run_on_geminis_envelope(write_hook: Writer, home: Path) -> None:
    directory = write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > "$HOOKBUS_HOOK_DIR/seen.json"; echo "no rm -rf" >&2; exit 2').parent
    result = gemini(home, BEFORE_SHELL, "--no-server")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {"decision": "deny", "reason": "hook 'guard' denied: no rm -rf"}
    seen = json.loads((directory / "seen.json").read_text())
    assert (seen["tool_name"], seen["tool_input"], seen["thread_id"], seen["hook_event_name"]) == ("bash", {"command": "rm -rf /"}, "g-1", "PreToolUse")
    (record,) = read_log(home)
    assert record["status"] == "deny"


def test_a_rewrite_goes_back_in_geminis_fields(write_hook: Writer, home: Path) -> None:
    write_hook(
        "safe", matcher="write_file", mode="sync", blocking=True,
        command="""cat > /dev/null; echo '{"behavior": "modify", "input": {"path": "safe.txt", "content": "x"}}'""",
    )
    write_file = {**BEFORE_SHELL, "tool_name": "write_file", "tool_input": {"file_path": ".env", "content": "x"}}
    result = gemini(home, write_file, "--no-server")
    assert json.loads(result.stdout) == {"hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"file_path": "safe.txt", "content": "x"}}}


def test_after_agent_keeps_the_agent_going(write_hook: Writer, home: Path) -> None:
    write_hook("gate", event="Stop", mode="sync", command="""cat > /dev/null; echo '{"decision": "block", "reason": "tests fail"}'""")
    result = gemini(home, {"hook_event_name": "AfterAgent", "session_id": "s", "prompt": "p", "prompt_response": "done", "stop_hook_active": False}, "--no-server")
    assert json.loads(result.stdout) == {"decision": "deny", "reason": "tests fail"}


@pytest.mark.parametrize("event", ["BeforeTool", "SessionStart", "AfterAgent"])
def test_through_a_server_it_says_the_same(write_hook: Writer, home: Path, event: str) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > /dev/null; echo "no" >&2; exit 2')
    write_hook("hello", event="ThreadStart", mode="sync", command="cat > /dev/null; echo hello")
    envelope = {**BEFORE_SHELL, "hook_event_name": event, "source": "startup"}
    local = gemini(home, envelope, "--no-server")
    with Served(home):
        remote = gemini(home, envelope)
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, local.stderr)
    assert json.loads(local.stdout) == {
        "BeforeTool": {"decision": "deny", "reason": "hook 'guard' denied: no"},
        "SessionStart": {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "hello"}},
        "AfterAgent": {},
    }[event]


@pytest.mark.parametrize("through_server", [False, True])
def test_events_without_a_counterpart_say_nothing_in_json(home: Path, through_server: bool) -> None:
    envelope = {"hook_event_name": "BeforeModel", "session_id": "s", "llm_request": {}}
    if through_server:
        with Served(home):
            result = gemini(home, envelope)
    else:
        result = gemini(home, envelope, "--no-server")
    assert (result.returncode, result.stdout, result.stderr) == (0, "{}\n", "")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [("not json", "the envelope is not valid JSON"), ("[1]", "must be a JSON object"), ("{}", 'no "hook_event_name": run it as a Gemini CLI hook')],
)
def test_bad_input_is_refused_clearly(home: Path, stdin: str, message: str) -> None:
    turn_off_home_guard(home)  # else it denies what it cannot read (test_claude_compat tests that)
    result = gemini(home, stdin)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr


def test_geminis_project_directory_reaches_hooks_through_a_server(write_hook: Writer, home: Path, tmp_path: Path) -> None:
    directory = write_hook("seen", matcher="bash", mode="sync", command='cat > "$HOOKBUS_HOOK_DIR/seen.json"').parent
    with Served(home):  # the server's environment has no GEMINI_PROJECT_DIR
        gemini(home, BEFORE_SHELL, env=environment(GEMINI_PROJECT_DIR=str(tmp_path)))
    assert json.loads((directory / "seen.json").read_text())["project_dir"] == str(tmp_path)


# -- installing the bridge ---------------------------------------------------------------------


def test_install_bridge_routes_every_gemini_event_and_keeps_the_rest(tmp_path: Path, home: Path) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    own = {"matcher": "write_file", "hooks": [{"type": "command", "command": "./lint.sh", "timeout": 30000}]}
    settings.write_text(json.dumps({"general": {"vimMode": True}, "hooks": {"BeforeTool": [own]}}))
    out = io.StringIO()
    assert install_bridge(str(settings), home, host=GEMINI_INSTALL, out=out, err=io.StringIO()) == 0
    written = json.loads(settings.read_text())
    assert written["general"] == {"vimMode": True}
    assert set(written["hooks"]) == {"BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "SessionStart", "PreCompress"}
    assert written["hooks"]["BeforeTool"][0] == own
    for event, groups in written["hooks"].items():
        bridge = groups[-1]
        assert "matcher" not in bridge, f"{event}: '*' is no regex to Gemini CLI; no matcher takes every tool"
        (entry,) = bridge["hooks"]
        assert entry == {"type": "command", "command": f"{shlex.quote(sys.executable)} -m hookbus gemini-cli-hook --home {home}", "timeout": 600_000}
        assert is_bridge_command(entry["command"], GEMINI_INSTALL)
    assert "still run as well" in out.getvalue()
    assert json.loads((tmp_path / ".gemini" / "settings.json.bak").read_text())["hooks"] == {"BeforeTool": [own]}
    # Installed twice: nothing changes.
    again = io.StringIO()
    assert install_bridge(str(settings), home, host=GEMINI_INSTALL, out=again, err=io.StringIO()) == 0
    assert "needs no change" in again.getvalue()


def test_import_gemini_cli_without_install_bridge_says_what_it_does(tmp_path: Path, home: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{}")
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "import", "gemini-cli", str(settings), "--home", str(home)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert "--install-bridge" in result.stderr and "Traceback" not in result.stderr
    dry = subprocess.run(
        [sys.executable, "-m", "hookbus", "import", "gemini-cli", str(settings), "--install-bridge", "--dry-run", "--home", str(home)],
        capture_output=True, text=True, timeout=60,
    )
    assert dry.returncode == 0 and f"BeforeTool: add {shlex.quote(sys.executable)} -m hookbus gemini-cli-hook --home {home}" in dry.stdout
    assert settings.read_text() == "{}"


# -- what Gemini CLI 0.61.0 does ----------------------------------------------------------------


def test_an_ask_is_said_to_gemini_cli_and_not_reported_as_lost() -> None:
    output, notes = GEMINI_CLI.answer("BeforeTool", "PreToolUse", {"tool_name": "bash"}, {"behavior": "allow", "permission": "ask", "reason": "prod"})
    assert (output, notes) == ({"decision": "ask", "reason": "prod"}, [])


@pytest.mark.parametrize("through_server", [False, True])
def test_a_hook_that_asks_makes_gemini_cli_ask(write_hook: Writer, home: Path, through_server: bool) -> None:
    asks = {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "this deletes files"}}
    write_hook("asker", matcher="bash", mode="sync", blocking=True, command=f"cat > /dev/null; echo '{json.dumps(asks)}'")
    if through_server:
        with Served(home):
            result = gemini(home, BEFORE_SHELL)
    else:
        result = gemini(home, BEFORE_SHELL, "--no-server")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {"decision": "ask", "reason": "this deletes files"}


def test_a_rewrite_is_the_whole_new_input(write_hook: Writer, home: Path) -> None:
    """Gemini CLI replaces the arguments with tool_input: what the hook leaves out is gone,
    so the bridge sends exactly the hook's input, in Gemini's field names."""
    write_hook(
        "safe", matcher="edit_file", mode="sync", blocking=True,
        command="""cat > /dev/null; echo '{"behavior": "modify", "input": {"path": "notes.txt", "old_string": "a", "new_string": "b"}}'""",
    )
    replace = {**BEFORE_SHELL, "tool_name": "replace", "tool_input": {"file_path": ".env", "old_string": "a", "new_string": "b", "expected_replacements": 3}}
    result = gemini(home, replace, "--no-server")
    assert json.loads(result.stdout)["hookSpecificOutput"]["tool_input"] == {"file_path": "notes.txt", "old_string": "a", "new_string": "b"}


#: A gate that keeps the agent going unless told it did once already, and says what it saw.
ONCE_GATE = (
    'input=$(cat); printf "%s\\n" "$input" >> "$HOOKBUS_HOOK_DIR/seen.jsonl"; '
    'case "$input" in *\'"stop_hook_active":true\'*) exit 0;; esac; '
    'echo \'{"decision": "block", "reason": "run the tests"}\''
)
AFTER_AGENT = {"hook_event_name": "AfterAgent", "session_id": "g-9", "prompt": "p", "prompt_response": "done", "stop_hook_active": False}


def seen_flags(directory: Path) -> list[object]:
    lines = (directory / "seen.jsonl").read_text().splitlines()
    return [json.loads(line).get("stop_hook_active", "absent") for line in lines]


def test_geminis_false_stop_flag_does_not_hide_the_buss_memory(write_hook: Writer, home: Path) -> None:
    """Gemini CLI says stop_hook_active: false on every AfterAgent, even after a hook kept the
    agent going: a gate that trusted it would never let the agent stop."""
    directory = write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=ONCE_GATE).parent
    with Served(home, env=stop_memory_of(home)):
        answers = [json.loads(gemini(home, AFTER_AGENT).stdout) for _ in range(3)]
    assert answers == [{"decision": "deny", "reason": "run the tests"}, {}, {"decision": "deny", "reason": "run the tests"}]
    assert seen_flags(directory) == ["absent", True, "absent"]


def test_without_a_server_the_false_flag_is_left_out_and_a_true_one_kept(write_hook: Writer, home: Path) -> None:
    directory = write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=ONCE_GATE).parent
    native = write_hook("native", event="Stop", mode="sync", command='cat > "$HOOKBUS_HOOK_DIR/seen.json"').parent
    first = gemini(home, AFTER_AGENT, "--no-server")
    assert json.loads(first.stdout) == {"decision": "deny", "reason": "run the tests"}
    assert "stop_hook_active" not in json.loads((native / "seen.json").read_text())
    kept = gemini(home, {**AFTER_AGENT, "stop_hook_active": True}, "--no-server")
    assert json.loads(kept.stdout) == {}
    assert seen_flags(directory) == ["absent", True]
    assert json.loads((native / "seen.json").read_text())["stop_hook_active"] is True


def test_cc_stop_gate_lets_gemini_cli_stop_after_one_block(home: Path, tmp_path: Path) -> None:
    """contrib's cc-stop-gate, unchanged, on Gemini CLI without a server: hookbus's memory
    says stop_hook_active: true after the gate kept the agent going, so it lets the next
    stop through, as under Claude Code (not after CC_STOP_GATE_MAX_BLOCKS of its own)."""
    import shutil

    contrib = Path(__file__).resolve().parents[1] / "contrib" / "hooks" / "cc-stop-gate"
    shutil.copytree(contrib, home / "hooks" / "cc-stop-gate")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".stop-gate").write_text("the docs are not written\n")
    (tmp_path / "tmp").mkdir()
    env = stop_memory_of(home, GEMINI_PROJECT_DIR=str(project), TMPDIR=str(tmp_path / "tmp"), CC_STOP_GATE_MAX_BLOCKS="5")
    answers = [json.loads(gemini(home, AFTER_AGENT, "--no-server", env=env).stdout).get("decision") for _ in range(3)]
    assert answers == ["deny", None, "deny"]
