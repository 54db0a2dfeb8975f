"""Claude Code compatibility, both ways, through the real bus and real bash.

- Every output shape Claude Code (and Gemini CLI) obeys decides as it would there.
- The extras (approve/ask, continue_with, halt) merge and reach the decision JSON.
- A ``"dialect": "claude-code"`` hook sees Claude's envelope, names and variables, is
  matched on Claude's tool names, and its modify comes back in vixd's names.
- ``hookbus claude-code-hook`` answers Claude Code in its own output format.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import HookWriter, read_log, turn_off_home_guard
from hookbus import HookBus
from hookbus.hosts.bridge import claude_output
from hookbus.dialects.claude_names import CLAUDE_EVENT, DEFAULT_NAMES, ToolNames, envelope_to_claude, envelope_to_vix
from servekit import BUILT_INS, Served, environment, imported_modules

pytestmark = pytest.mark.timeout(60)

MakeBus = Callable[..., HookBus]
BASH = {"thread_id": "t-1", "tool_name": "bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/"}
WRITE = {"thread_id": "t-1", "tool_name": "write_file", "tool_input": {"path": ".env", "content": "A=1"}, "cwd": "/"}


def echo(document: Any) -> str:
    """A command that prints ``document`` as JSON."""
    return "cat >/dev/null; printf '%s' " + _quote(json.dumps(document))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# -- the output shapes of the compatibility table, as any hook's JSON -----------------------

SHAPES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    # event, what the hook prints, the decision (as_dict) hookbus answers
    "permissionDecision deny": (
        "PreToolUse",
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm"}},
        {"behavior": "deny", "reason": "hook 'h' denied: no rm"},
    ),
    "permissionDecision allow (approve)": (
        "PreToolUse",
        {"hookSpecificOutput": {"permissionDecision": "allow"}},
        {"behavior": "allow", "permission": "approve"},
    ),
    "permissionDecision ask": (
        "PreToolUse",
        {"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "sure?"}},
        {"behavior": "allow", "permission": "ask", "reason": "sure?"},
    ),
    "legacy decision block": ("PreToolUse", {"decision": "block", "reason": "legacy"}, {"behavior": "deny", "reason": "hook 'h' denied: legacy"}),
    "legacy decision approve": ("PreToolUse", {"decision": "approve"}, {"behavior": "allow", "permission": "approve"}),
    "updatedInput": (
        "PreToolUse",
        {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"command": "ls"}}},
        {"behavior": "modify", "input": {"command": "ls"}, "permission": "approve"},
    ),
    "additionalContext": (
        "PreToolUse",
        {"hookSpecificOutput": {"additionalContext": "careful"}},
        {"behavior": "context", "context": "careful"},
    ),
    "continue false": (
        "PreToolUse",
        {"continue": False, "stopReason": "budget spent"},
        {"behavior": "deny", "reason": "hook 'h' denied: budget spent", "halt": "budget spent"},
    ),
    "continue false where nothing blocks": ("PostToolUse", {"continue": False}, {"behavior": "allow", "halt": "a hook stopped the turn"}),
    "systemMessage only": ("PreToolUse", {"systemMessage": "fyi", "suppressOutput": True}, {"behavior": "allow"}),
    "empty object": ("PreToolUse", {}, {"behavior": "allow"}),
    "continue true": ("PreToolUse", {"continue": True}, {"behavior": "allow"}),
    "PermissionRequest deny": (
        "PermissionRequest",
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "not now"}}},
        {"behavior": "deny", "reason": "hook 'h' denied: not now"},
    ),
    "PermissionRequest allow with updatedInput": (
        "PermissionRequest",
        {"hookSpecificOutput": {"decision": {"behavior": "allow", "updatedInput": {"command": "ls"}}}},
        {"behavior": "modify", "input": {"command": "ls"}, "permission": "approve"},
    ),
    "Stop block keeps going": ("Stop", {"decision": "block", "reason": "run the tests"}, {"behavior": "allow", "continue_with": "run the tests"}),
    "SubagentStop block keeps going": ("SubagentStop", {"decision": "block", "reason": "check"}, {"behavior": "allow", "continue_with": "check"}),
    "PostToolUse block feeds the model": ("PostToolUse", {"decision": "block", "reason": "lint failed"}, {"behavior": "context", "context": "lint failed"}),
    "UserPromptSubmit additionalContext": (
        "UserPromptSubmit",
        {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "on main"}},
        {"behavior": "context", "context": "on main"},
    ),
    "UserPromptSubmit block": ("UserPromptSubmit", {"decision": "block", "reason": "secret"}, {"behavior": "deny", "reason": "hook 'h' denied: secret"}),
    "Gemini decision deny": ("PreToolUse", {"decision": "deny", "reason": "gemini says no"}, {"behavior": "deny", "reason": "hook 'h' denied: gemini says no"}),
    "Gemini tool_input": (
        "PreToolUse",
        {"hookSpecificOutput": {"tool_input": {"command": "ls -la"}}},
        {"behavior": "modify", "input": {"command": "ls -la"}},
    ),
    "Gemini's name for the event": (
        "PreToolUse",
        {"hookSpecificOutput": {"hookEventName": "BeforeTool", "additionalContext": "g"}},
        {"behavior": "context", "context": "g"},
    ),
    # What Claude Code reads only on other events, it ignores here (found by running real
    # hooks: an auto-approver written for PreToolUse, registered on PermissionRequest).
    "permissionDecision on PermissionRequest is not its answer": (
        "PermissionRequest",
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "permissionDecision": "allow"}},
        {"behavior": "allow"},
    ),
    "updatedInput outside PreToolUse": ("PostToolUse", {"hookSpecificOutput": {"updatedInput": {"command": "ls"}}}, {"behavior": "allow"}),
    "additionalContext on Stop reaches no model": (
        "Stop",
        {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "[git] main"}, "systemMessage": "git"},
        {"behavior": "allow"},
    ),
    "PermissionRequest's decision on PreToolUse": (
        "PreToolUse",
        {"hookSpecificOutput": {"decision": {"behavior": "allow"}}},
        {"behavior": "allow"},
    ),
    "continue false wins over a Stop block": (
        "Stop",
        {"continue": False, "stopReason": "blocked for good", "decision": "block", "reason": "go on"},
        {"behavior": "allow", "halt": "blocked for good"},
    ),
}

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PermissionRequest")


@pytest.mark.parametrize(("event", "printed", "expected"), list(SHAPES.values()), ids=list(SHAPES))
def test_claude_output_shapes_decide_as_claude_code(
    make_bus: MakeBus, write_hook: HookWriter, event: str, printed: dict[str, Any], expected: dict[str, Any]
) -> None:
    blocking = event in ("PreToolUse", "UserPromptSubmit", "PermissionRequest")
    write_hook("h", event=event, mode="sync", blocking=blocking, command=echo(printed))
    envelope = BASH if event in TOOL_EVENTS else {"thread_id": "t-1", "prompt": "hi"}
    decision = make_bus().emit(event, envelope)
    assert decision.as_dict() == expected
    (record,) = read_log(make_bus().home.root)
    assert record["error"] is None  # understood, not an error


def test_an_unknown_shape_fails_open_naming_what_is_understood(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("h", mode="sync", blocking=True, command=echo({"verdict": "deny"}))
    assert make_bus().emit("PreToolUse", BASH).behavior == "allow"
    (record,) = read_log(home)
    assert "not understood (keys 'verdict')" in record["error"]
    assert "hookSpecificOutput" in record["error"] and '"behavior"' in record["error"]


def test_another_events_output_is_an_error_not_a_decision(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    """Claude Code refuses a hookSpecificOutput that names another event."""
    printed = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "permissionDecision": "deny"}}
    write_hook("h", mode="sync", blocking=True, command=echo(printed))
    assert make_bus().emit("PreToolUse", BASH).behavior == "allow"
    (record,) = read_log(home)
    assert "hookEventName\" is 'PostToolUse', not 'PreToolUse' or 'BeforeTool'" in record["error"]


def test_a_bad_value_in_a_claude_shape_says_which_key(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("h", mode="sync", blocking=True, command=echo({"hookSpecificOutput": {"permissionDecision": "maybe"}}))
    assert make_bus().emit("PreToolUse", BASH).behavior == "allow"
    (record,) = read_log(home)
    assert "permissionDecision" in record["error"] and "'maybe'" in record["error"]


# -- how the extras merge ------------------------------------------------------------------


def test_ask_beats_approve_and_deny_beats_both(make_bus: MakeBus, write_hook: HookWriter) -> None:
    write_hook("a-approve", mode="sync", blocking=True, command=echo({"hookSpecificOutput": {"permissionDecision": "allow"}}))
    write_hook("b-ask", mode="sync", blocking=True, command=echo({"hookSpecificOutput": {"permissionDecision": "ask"}}))
    assert make_bus().emit("PreToolUse", BASH).permission == "ask"
    write_hook("c-deny", mode="sync", blocking=True, command="exit 2")
    decision = make_bus().emit("PreToolUse", BASH)
    assert (decision.behavior, decision.permission) == ("deny", None)


def test_approve_from_a_hook_that_is_not_blocking_is_not_applied(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    write_hook("h", mode="sync", command=echo({"hookSpecificOutput": {"permissionDecision": "allow"}}))
    assert make_bus().emit("PreToolUse", BASH).as_dict() == {"behavior": "allow"}
    (record,) = read_log(home)
    assert record["note"] == "not applied: approve (it needs a blocking hook of PreToolUse or PermissionRequest)"
    assert record["decision"]["permission"] == "approve"  # what the hook said stays on record


def test_continue_with_and_halt_join_every_hook_and_halt_wins(make_bus: MakeBus, write_hook: HookWriter) -> None:
    write_hook("a", event="Stop", mode="sync", command=echo({"decision": "block", "reason": "run tests"}))
    write_hook("b", event="Stop", mode="sync", command=echo({"decision": "block", "reason": "update docs"}))
    decision = make_bus().emit("Stop", {"thread_id": "t"})
    assert (decision.continue_with, decision.halt) == ("run tests\n\nupdate docs", None)
    write_hook("c", event="Stop", mode="sync", command=echo({"continue": False, "stopReason": "over budget"}))
    write_hook("d", event="Stop", mode="sync", command=echo({"continue": False, "stopReason": "and late"}))
    decision = make_bus().emit("Stop", {"thread_id": "t"})
    assert (decision.continue_with, decision.halt) == (None, "over budget\n\nand late")  # the turn ends
    assert decision.behavior == "allow"  # a host that ignores the extras behaves as before


def test_the_cli_prints_the_extras(write_hook: HookWriter, home: Path) -> None:
    write_hook("h", event="Stop", mode="sync", command=echo({"decision": "block", "reason": "not yet"}))
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "emit", "Stop", "--home", str(home), "--no-server"],
        input="{}", capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"behavior": "allow", "continue_with": "not yet"}


# -- the claude-code dialect -----------------------------------------------------------------

SHOW_ENVELOPE = (
    'cat > "$HOOKBUS_HOOK_DIR/seen.json"; '
    'printf "%s\\n%s\\n%s\\n" "$CLAUDE_PROJECT_DIR" "$CLAUDE_PLUGIN_ROOT" "$CLAUDE_ENV_FILE" > "$HOOKBUS_HOOK_DIR/env.txt"'
)


def test_a_dialect_hook_sees_claude_codes_envelope_and_variables(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    directory = write_hook("cc", matcher="Write", mode="sync", blocking=True, dialect="claude-code", command=SHOW_ENVELOPE).parent
    envelope = {**WRITE, "project_dir": "/work/project"}
    assert make_bus().emit("PreToolUse", envelope).behavior == "allow"
    seen = json.loads((directory / "seen.json").read_text())
    assert seen["hook_event_name"] == "PreToolUse"
    assert seen["tool_name"] == "Write"
    assert seen["tool_input"] == {"file_path": ".env", "content": "A=1"}
    assert seen["session_id"] == "t-1"
    project, plugin_root, env_file = (directory / "env.txt").read_text().splitlines()
    assert project == "/work/project"
    assert plugin_root == str(directory)
    assert env_file == ""  # Claude Code offers one on SessionStart only
    assert not (home / "run").exists()


def test_a_dialect_hook_gets_an_env_file_on_thread_start(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    directory = write_hook("cc", event="ThreadStart", mode="sync", dialect="claude-code", command=SHOW_ENVELOPE).parent
    make_bus().emit("ThreadStart", {"thread_id": "t-1", "source": "startup"})
    digest = hashlib.sha256(b"t-1").hexdigest()[:24]  # one file per exact thread id
    assert (directory / "env.txt").read_text().splitlines()[2] == str(home / "run" / "claude-env" / f"t-1-{digest}.sh")
    assert (home / "run" / "claude-env").stat().st_mode & 0o077 == 0


def test_the_bus_processs_own_claude_variables_do_not_reach_dialect_hooks(
    write_hook: HookWriter, home: Path, tmp_path: Path
) -> None:
    """A vixd started inside a Claude Code session must not point its hooks at that
    session's project: the envelope says which project a fire is about."""
    directory = write_hook("cc", mode="sync", blocking=True, dialect="claude-code", command=SHOW_ENVELOPE).parent
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "emit", "PreToolUse", "--home", str(home), "--no-server"],
        input=json.dumps({**BASH, "cwd": str(tmp_path)}), capture_output=True, text=True, timeout=30,
        env=environment(CLAUDE_PROJECT_DIR="/outer/session", CLAUDE_ENV_FILE="/outer/env"),
    )
    assert result.returncode == 0, result.stderr
    project, _, env_file = (directory / "env.txt").read_text().splitlines()
    assert (project, env_file) == (str(tmp_path), "")


#: A Stop gate as Claude Code users write them: keep going once, then let the agent stop.
ONCE_GATE = (
    'case "$(cat)" in *\'"stop_hook_active":true\'*) exit 0;; esac; '
    'echo \'{"decision": "block", "reason": "run the tests first"}\''
)


def test_a_stop_gate_sees_stop_hook_active_as_claude_code_sets_it(make_bus: MakeBus, write_hook: HookWriter) -> None:
    """vixd sends no stop_hook_active: the bus remembers, per thread, that it said "go on"."""
    write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=ONCE_GATE)
    bus = make_bus()
    answers = [bus.emit("Stop", {"thread_id": thread}).continue_with for thread in ("t-1", "t-1", "t-2", "t-1", "t-2")]
    assert answers == ["run the tests first", None, "run the tests first", "run the tests first", None]
    # What the embedder says is what the hook sees.
    assert bus.emit("Stop", {"thread_id": "t-3", "stop_hook_active": True}).continue_with is None


def test_the_stop_memory_holds_through_a_server(write_hook: HookWriter, home: Path) -> None:
    """One server, many short-lived clients: the guard still lets the second stop through."""
    write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=ONCE_GATE)
    stop = {"hook_event_name": "Stop", "session_id": "s-7", "stop_hook_active": False}
    with Served(home):
        first = bridge(home, {**stop, "stop_hook_active": False}, env=environment())
        emitted = [
            json.loads(subprocess.run(
                [sys.executable, "-m", "hookbus", "emit", "Stop", "--home", str(home)],
                input=json.dumps({"thread_id": "s-8"}), capture_output=True, text=True, timeout=30,
            ).stdout).get("continue_with")
            for _ in range(2)
        ]
    assert json.loads(first.stdout) == {"decision": "block", "reason": "run the tests first"}
    assert emitted == ["run the tests first", None]


def test_thread_start_is_session_start_to_a_dialect_hook(make_bus: MakeBus, write_hook: HookWriter) -> None:
    directory = write_hook("cc", event="ThreadStart", mode="sync", dialect="claude-code", command=SHOW_ENVELOPE).parent
    make_bus().emit("ThreadStart", {"thread_id": "t", "source": "startup", "cwd": "/srv"})
    seen = json.loads((directory / "seen.json").read_text())
    assert (seen["hook_event_name"], seen["source"]) == ("SessionStart", "startup")
    assert (directory / "env.txt").read_text().splitlines()[0] == "/srv"  # the project: cwd


@pytest.mark.parametrize(
    ("matcher", "fires_on"),
    [
        ("Bash", {"bash"}),
        ("Write|Edit", {"write_file", "edit_file"}),
        ("Wr.*", {"write_file"}),
        ("mcp__.*", {"mcp__github__list"}),
        ("*", {"bash", "write_file", "edit_file", "read_file", "mcp__github__list", "delete_file"}),
    ],
)
def test_a_dialect_hooks_matcher_is_tried_on_claude_tool_names(
    make_bus: MakeBus, write_hook: HookWriter, matcher: str, fires_on: set[str]
) -> None:
    write_hook("cc", matcher=matcher, mode="sync", blocking=True, dialect="claude-code", command="cat >/dev/null; exit 2")
    bus = make_bus()
    tools = ["bash", "write_file", "edit_file", "read_file", "mcp__github__list", "delete_file"]
    denied = {tool for tool in tools if bus.emit("PreToolUse", {"tool_name": tool, "tool_input": {}}).behavior == "deny"}
    assert denied == fires_on


def test_a_dialect_hooks_rewrite_comes_back_in_vixd_names(make_bus: MakeBus, write_hook: HookWriter) -> None:
    rewrite = {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"file_path": "safe.txt", "content": "A=1"}}}
    write_hook("cc", matcher="Write", mode="sync", blocking=True, dialect="claude-code", command=echo(rewrite))
    decision = make_bus().emit("PreToolUse", WRITE)
    assert decision.input == {"path": "safe.txt", "content": "A=1"}
    assert decision.permission == "approve"


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        ("PreToolUse", {"behavior": "deny", "reason": "hook 'cc' denied: from stderr"}),
        ("PostToolUse", {"behavior": "context", "context": "from stderr"}),
        ("Stop", {"behavior": "allow", "continue_with": "from stderr"}),
        ("PreCompact", {"behavior": "allow"}),
    ],
)
def test_exit_2_follows_claude_codes_channels(
    make_bus: MakeBus, write_hook: HookWriter, event: str, expected: dict[str, Any]
) -> None:
    blocking = event == "PreToolUse"
    write_hook("cc", event=event, mode="sync", blocking=blocking, dialect="claude-code", command="echo stdout-ignored; echo from stderr >&2; exit 2")
    envelope = BASH if event in TOOL_EVENTS else {"trigger": "auto"}
    assert make_bus().emit(event, envelope).as_dict() == expected


@pytest.mark.parametrize(("event", "context"), [("UserPromptSubmit", "plain words"), ("ThreadStart", "plain words"), ("PreToolUse", None), ("Stop", None)])
def test_plain_stdout_is_context_only_where_claude_code_makes_it_so(
    make_bus: MakeBus, write_hook: HookWriter, event: str, context: str | None
) -> None:
    write_hook("cc", event=event, mode="sync", dialect="claude-code", command="cat >/dev/null; echo plain words")
    envelope = BASH if event in TOOL_EVENTS else {"prompt": "x", "source": "startup"}
    assert make_bus().emit(event, envelope).context == context


def test_without_the_dialect_plain_stdout_stays_context(make_bus: MakeBus, write_hook: HookWriter) -> None:
    write_hook("native", mode="sync", command="cat >/dev/null; echo plain words")
    assert make_bus().emit("PreToolUse", BASH).context == "plain words"


def test_settings_extend_the_tool_map(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    (home / "settings.json").write_text(
        json.dumps({"claude_code": {"tools": {"notebook_edit": {"name": "NotebookEdit", "fields": {"path": "notebook_path"}}}}})
    )
    directory = write_hook("cc", matcher="NotebookEdit", mode="sync", blocking=True, dialect="claude-code", command=SHOW_ENVELOPE).parent
    make_bus().emit("PreToolUse", {"tool_name": "notebook_edit", "tool_input": {"path": "a.ipynb"}})
    seen = json.loads((directory / "seen.json").read_text())
    assert (seen["tool_name"], seen["tool_input"]) == ("NotebookEdit", {"notebook_path": "a.ipynb"})


def test_a_bad_tool_map_in_settings_is_a_warning_and_the_defaults_stay(home: Path) -> None:
    (home / "settings.json").write_text(json.dumps({"claude_code": {"tools": {"x": 5}}}))
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", "--home", str(home)], capture_output=True, text=True, timeout=30
    )
    assert "claude_code.tools.x: expected Claude's tool name" in result.stdout + result.stderr


def test_an_unknown_dialect_is_refused_with_a_suggestion(write_hook: HookWriter, home: Path) -> None:
    write_hook("cc", mode="sync", dialect="claude", command="true")
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", "--home", str(home)], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 1
    assert "unknown dialect 'claude' (did you mean 'claude-code'?)" in result.stdout


def test_env_reaches_the_hooks_process(make_bus: MakeBus, write_hook: HookWriter) -> None:
    write_hook("h", mode="sync", env={"GREETING": "hello"}, command='cat >/dev/null; echo "$GREETING"')
    assert make_bus().emit("PreToolUse", BASH).context == "hello"


# -- the name map, both ways -------------------------------------------------------------------

@pytest.mark.parametrize(
    ("vix", "claude"),
    [
        ({"tool_name": "bash", "tool_input": {"command": "ls"}}, {"tool_name": "Bash", "tool_input": {"command": "ls"}}),
        ({"tool_name": "write_file", "tool_input": {"path": "a", "content": "b"}}, {"tool_name": "Write", "tool_input": {"file_path": "a", "content": "b"}}),
        ({"tool_name": "edit_file", "tool_input": {"path": "a"}}, {"tool_name": "Edit", "tool_input": {"file_path": "a"}}),
        ({"tool_name": "read_file", "tool_input": {"path": "a"}}, {"tool_name": "Read", "tool_input": {"file_path": "a"}}),
        ({"tool_name": "mcp__x__y", "tool_input": {"q": 1}}, {"tool_name": "mcp__x__y", "tool_input": {"q": 1}}),
        ({"tool_name": "delete_file", "tool_input": {"path": "a"}}, {"tool_name": "delete_file", "tool_input": {"path": "a"}}),
    ],
)
def test_the_name_map_both_ways(vix: dict[str, Any], claude: dict[str, Any]) -> None:
    there = envelope_to_claude("PreToolUse", {**vix, "thread_id": "t"}, DEFAULT_NAMES)
    assert {k: there[k] for k in ("tool_name", "tool_input")} == claude
    assert there["session_id"] == "t" and there["hook_event_name"] == "PreToolUse"
    back = envelope_to_vix({**claude, "session_id": "t", "hook_event_name": "PreToolUse"}, DEFAULT_NAMES)
    assert back == {**vix, "session_id": "t", "thread_id": "t"}


def test_a_map_from_settings_replaces_a_default() -> None:
    names, problems = ToolNames.from_settings({"claude_code": {"tools": {"bash": "Shell"}}})
    assert problems == []
    assert names.host_tool("bash") == "Shell" and names.vix_tool("Shell") == "bash"


# -- the bridge: hookbus as Claude Code's hook engine ------------------------------------------

BRIDGE_CASES: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "deny": (
        "PreToolUse",
        {"behavior": "deny", "reason": "no"},
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}},
    ),
    "modify": (
        "PreToolUse",
        {"behavior": "modify", "input": {"path": "b.txt", "content": "x"}},
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {"file_path": "b.txt", "content": "x"}}},
    ),
    "context": (
        "PostToolUse",
        {"behavior": "context", "context": "lint: 2 warnings"},
        {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint: 2 warnings"}},
    ),
    "approve": ("PreToolUse", {"behavior": "allow", "permission": "approve"}, {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}),
    "ask": (
        "PreToolUse",
        {"behavior": "allow", "permission": "ask", "reason": "sure?"},
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask", "permissionDecisionReason": "sure?"}},
    ),
    "allow": ("PreToolUse", {"behavior": "allow"}, {}),
    "prompt denied": ("UserPromptSubmit", {"behavior": "deny", "reason": "secret"}, {"decision": "block", "reason": "secret"}),
    "prompt context": ("UserPromptSubmit", {"behavior": "context", "context": "on main"}, {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "on main"}}),
    "session context": ("ThreadStart", {"behavior": "context", "context": "hi"}, {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "hi"}}),
    "stop continues": ("Stop", {"behavior": "allow", "continue_with": "run tests"}, {"decision": "block", "reason": "run tests"}),
    "halt": ("PostToolUse", {"behavior": "allow", "halt": "enough"}, {"continue": False, "stopReason": "enough"}),
    "permission request denied": (
        "PermissionRequest",
        {"behavior": "deny", "reason": "no"},
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "no"}}},
    ),
    "permission request approved": (
        "PermissionRequest",
        {"behavior": "allow", "permission": "approve"},
        {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}},
    ),
}


@pytest.mark.parametrize(("event", "decision", "expected"), list(BRIDGE_CASES.values()), ids=list(BRIDGE_CASES))
def test_the_bridge_answers_each_decision_in_claude_codes_format(event: str, decision: dict[str, Any], expected: dict[str, Any]) -> None:
    assert claude_output(CLAUDE_EVENT.get(event, event), event, decision, DEFAULT_NAMES, "write_file") == expected


def bridge(home: Path, claude_envelope: dict[str, Any], *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(home), *extra],
        input=json.dumps(claude_envelope), capture_output=True, text=True, timeout=30, env=env,
    )


CLAUDE_BASH = {"session_id": "s-9", "transcript_path": "/tmp/t.jsonl", "cwd": "/", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}}


def test_the_bridge_runs_native_hooks_on_claude_codes_envelope(write_hook: HookWriter, home: Path) -> None:
    directory = write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > "$HOOKBUS_HOOK_DIR/seen.json"; echo "no rm -rf" >&2; exit 2').parent
    result = bridge(home, CLAUDE_BASH, "--no-server")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "hook 'guard' denied: no rm -rf"}
    }
    seen = json.loads((directory / "seen.json").read_text())
    assert (seen["tool_name"], seen["thread_id"], seen["transcript_path"]) == ("bash", "s-9", "/tmp/t.jsonl")
    (record,) = read_log(home)
    assert record["status"] == "deny"


def test_the_bridge_through_a_server_says_the_same(write_hook: HookWriter, home: Path) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command='echo "no rm -rf" >&2; exit 2')
    local = bridge(home, CLAUDE_BASH, "--no-server")
    with Served(home) as served:
        served.wait_ready()
        remote = bridge(home, CLAUDE_BASH)
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, "")
    assert len(read_log(home)) == 2


def test_the_bridge_skips_events_vixd_does_not_have(home: Path) -> None:
    result = bridge(home, {"hook_event_name": "SessionEnd", "session_id": "s", "reason": "exit"})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [("not json", "the envelope is not valid JSON"), ("[1]", "must be a JSON object"), ("{}", 'no "hook_event_name"')],
)
def test_the_bridge_refuses_bad_input_clearly(home: Path, stdin: str, message: str) -> None:
    turn_off_home_guard(home)  # else it denies what it cannot read: the test below
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(home)],
        input=stdin, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("stdin", ["not json", "[1]", '{"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": ' + "[" * 20_000 + "]" * 20_000 + "}"])
def test_what_the_bridge_cannot_read_the_home_guard_denies(home: Path, stdin: str) -> None:
    """It may be a tool call writing into the home: hookbus's own trouble is no allow."""
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(home)],
        input=stdin, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2 or '"permissionDecision": "deny"' in result.stdout, (result.stdout, result.stderr)
    assert ("home guard" in result.stderr or "hookbus:protect_home" in result.stderr) and "Traceback" not in result.stderr


def test_the_bridge_says_what_claude_code_cannot_take(write_hook: HookWriter, home: Path) -> None:
    write_hook("rewrite", event="UserPromptSubmit", mode="sync", blocking=True, command=echo({"behavior": "modify", "input": {"prompt": "other"}}))
    result = bridge(home, {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi"}, "--no-server")
    assert (result.returncode, result.stdout) == (0, "")
    assert "cannot take" in result.stderr


@pytest.mark.parametrize("through_server", [False, True])
def test_the_bridge_hands_claude_codes_project_and_env_file_to_dialect_hooks(
    write_hook: HookWriter, home: Path, tmp_path: Path, through_server: bool
) -> None:
    env_file = tmp_path / "claude.env"
    write_hook(
        "cc", event="ThreadStart", mode="sync", dialect="claude-code",
        command='echo "export PROJECT=$CLAUDE_PROJECT_DIR" >> "$CLAUDE_ENV_FILE"',
    )
    claude_env = environment(CLAUDE_ENV_FILE=str(env_file), CLAUDE_PROJECT_DIR=str(tmp_path))
    session_start = {"hook_event_name": "SessionStart", "session_id": "s", "source": "startup", "cwd": "/"}
    if through_server:
        with Served(home) as served:  # the server's environment has neither variable
            served.wait_ready()
            result = bridge(home, session_start, env=claude_env)
    else:
        result = bridge(home, session_start, "--no-server", env=claude_env)
    assert (result.returncode, result.stderr) == (0, "")
    assert env_file.read_text() == f"export PROJECT={tmp_path}\n"


def test_the_bridge_imports_only_built_in_modules_on_its_way_to_a_server(write_hook: HookWriter, home: Path) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="exit 2")
    with Served(home) as served:
        served.wait_ready()
        result, imported = imported_modules("-m", "hookbus", "claude-code-hook", "--home", str(home), input=json.dumps(CLAUDE_BASH))
    assert result.returncode == 0
    assert {name for name in imported if not name.startswith("hookbus.")} <= BUILT_INS | {"hookbus"}, sorted(imported)
    assert not {"hookbus.cli", "hookbus.serve.client", "hookbus.bus"} & imported
    assert "permissionDecision" in result.stdout


# -- SubagentStop's final message ------------------------------------------------------------------

SUBAGENT_DONE = {"thread_id": "t-1", "agent_type": "reviewer", "agent_id": "a-1", "result": "LGTM: 2 nits", "is_error": False}


def test_a_dialect_hook_gets_subagent_stops_result_as_last_assistant_message(make_bus: MakeBus, write_hook: HookWriter) -> None:
    directory = write_hook("cc", event="SubagentStop", mode="sync", dialect="claude-code", command='cat > "$HOOKBUS_HOOK_DIR/seen.json"').parent
    make_bus().emit("SubagentStop", SUBAGENT_DONE)
    seen = json.loads((directory / "seen.json").read_text())
    assert seen["hook_event_name"] == "SubagentStop"
    assert seen["last_assistant_message"] == "LGTM: 2 nits"
    assert (seen["result"], seen["is_error"]) == ("LGTM: 2 nits", False)  # vixd's own fields stay beside it


def test_the_bridge_gives_claude_codes_last_assistant_message_to_hooks_as_result(write_hook: HookWriter, home: Path) -> None:
    directory = write_hook("seen", event="SubagentStop", mode="sync", command='cat > "$HOOKBUS_HOOK_DIR/seen.json"').parent
    claude = {"hook_event_name": "SubagentStop", "session_id": "s", "agent_id": "a-1", "agent_type": "reviewer",
              "last_assistant_message": "done: 3 files", "stop_hook_active": False}
    result = bridge(home, claude, "--no-server")
    assert (result.returncode, result.stderr) == (0, "")
    seen = json.loads((directory / "seen.json").read_text())
    assert (seen["result"], seen["last_assistant_message"], seen["thread_id"]) == ("done: 3 files", "done: 3 files", "s")
    # A result the envelope has already is left as it is.
    bridge(home, {**claude, "result": "its own"}, "--no-server")
    assert json.loads((directory / "seen.json").read_text())["result"] == "its own"
