"""hookbus as Codex CLI's hook engine: ``hookbus codex-hook``.

Codex CLI's envelope (Claude's, with ``model`` and ``turn_id``; ``Bash`` with ``command``;
``tool_response`` a string) in, the home's merged decision out in the only forms Codex
0.169.0 honours: it fails open on any other, so a deny is said twice (the JSON, and exit 2
with the reason on stderr), an ``ask`` becomes a deny, and ``approve`` and allow print
nothing. In process, through a server and through the gate alike. The envelopes are those
observed from the real Codex CLI (its session, turn and call ids generalized).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import read_log, turn_off_home_guard
from hookbus.dialects.claude_names import envelope_to_vix
from hookbus.dialects.codex_names import ALL_EVENTS, CODEX_EVENT, CODEX_TOOLS, VIX_EVENT
from hookbus.hosts.bridge import CODEX_CLI, HOSTS
from hookbus.hosts.codexoutput import ASK_DENIED, NO_REASON, PROMPT_REWRITE_DENIED, REWRITE_DENIED, codex_output, refusal
from servekit import Served, environment

pytestmark = pytest.mark.timeout(90)

Writer = Callable[..., Path]

BASE = {"session_id": "0199-s", "transcript_path": "/h/.codex/sessions/r.jsonl", "cwd": "/work", "model": "gpt-5.1-codex"}
#: Each event as Codex CLI 0.169.0 sent it.
OBSERVED: dict[str, dict[str, Any]] = {
    "SessionStart": {**BASE, "hook_event_name": "SessionStart", "permission_mode": "bypassPermissions", "source": "startup"},
    "UserPromptSubmit": {**BASE, "turn_id": "t-1", "hook_event_name": "UserPromptSubmit", "permission_mode": "default", "prompt": "run echo hi"},
    "PreToolUse": {
        **BASE, "turn_id": "t-1", "hook_event_name": "PreToolUse", "permission_mode": "bypassPermissions",
        "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "tool_use_id": "call_1",
    },
    "PermissionRequest": {
        **BASE, "turn_id": "t-1", "hook_event_name": "PermissionRequest", "permission_mode": "default",
        "tool_name": "Bash", "tool_input": {"command": "rm -rf /", "description": "clean up"},
    },
    "PostToolUse": {
        **BASE, "turn_id": "t-1", "hook_event_name": "PostToolUse", "permission_mode": "bypassPermissions",
        "tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_response": "hi\n", "tool_use_id": "call_1",
    },
    "Stop": {
        **BASE, "turn_id": "t-1", "hook_event_name": "Stop", "permission_mode": "bypassPermissions",
        "stop_hook_active": False, "last_assistant_message": "done",
    },
    "SubagentStart": {**BASE, "turn_id": "t-2", "hook_event_name": "SubagentStart", "agent_id": "a-1", "agent_type": "default"},
    "SubagentStop": {
        **BASE, "turn_id": "t-2", "hook_event_name": "SubagentStop", "agent_id": "a-1", "agent_type": "default",
        "agent_transcript_path": "/h/a.jsonl", "last_assistant_message": "sub done", "stop_hook_active": False,
    },
    "PreCompact": {**BASE, "turn_id": "t-1", "hook_event_name": "PreCompact", "trigger": "auto"},
    "PostCompact": {**BASE, "turn_id": "t-1", "hook_event_name": "PostCompact", "trigger": "auto"},
    "PreModelRequest": {**BASE, "turn_id": "t-1", "hook_event_name": "PreModelRequest"},
    "PostModelRequest": {
        **BASE, "turn_id": "t-1", "hook_event_name": "PostModelRequest", "status": "completed", "error": None,
        "token_usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    },
    "Interrupt": {**BASE, "turn_id": "t-1", "hook_event_name": "Interrupt", "permission_mode": "default"},
    "SessionEnd": {"session_id": "0199-s", "transcript_path": "/h/r.jsonl", "cwd": "/work", "hook_event_name": "SessionEnd", "reason": "other"},
}
APPLY_PATCH = {
    **OBSERVED["PreToolUse"], "tool_name": "apply_patch",
    "tool_input": {"command": "*** Begin Patch\n*** Add File: probe.txt\n+x\n*** End Patch\n"},
}


def codex(home: Path, envelope: dict[str, Any] | str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``hookbus codex-hook --home HOME``, with the Stop memory of this test alone."""
    stdin = envelope if isinstance(envelope, str) else json.dumps(envelope)
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "codex-hook", "--home", str(home), *extra],
        input=stdin, capture_output=True, text=True, timeout=60, env=env or stop_memory_of(home),
    )


def stop_memory_of(home: Path) -> dict[str, str]:
    return environment(XDG_STATE_HOME=str(home.parent / "state"), XDG_RUNTIME_DIR=None)


# -- names -------------------------------------------------------------------------------------


def test_every_observed_event_is_known_and_those_with_a_counterpart_map_both_ways() -> None:
    assert set(OBSERVED) == set(ALL_EVENTS)
    assert VIX_EVENT["SessionStart"] == "ThreadStart" and "Notification" not in VIX_EVENT
    assert all(VIX_EVENT[CODEX_EVENT[vix]] == vix for vix in CODEX_EVENT)
    assert HOSTS["codex-hook"] is CODEX_CLI


@pytest.mark.parametrize("event", sorted(OBSERVED))
def test_every_observed_envelope_reads_as_vixds(event: str) -> None:
    request = CODEX_CLI.request(OBSERVED[event], {})
    if event not in VIX_EVENT:
        assert request is None
        return
    assert request is not None
    vix_event, envelope = request
    assert vix_event == VIX_EVENT[event]
    assert envelope["thread_id"] == "0199-s" and "hook_event_name" not in envelope
    if "tool_name" in OBSERVED[event]:
        assert envelope["tool_name"] == "bash" and envelope["tool_input"]["command"]
    if event == "PostToolUse":
        assert envelope["tool_response"] == "hi\n"  # a string, as Codex sends it
    if event == "SubagentStop":
        assert envelope["result"] == "sub done"


def test_apply_patch_and_other_tools_keep_their_names() -> None:
    envelope = envelope_to_vix(APPLY_PATCH, CODEX_TOOLS)
    assert envelope["tool_name"] == "apply_patch" and envelope["tool_input"] == APPLY_PATCH["tool_input"]
    assert envelope_to_vix({**APPLY_PATCH, "tool_name": "spawn_agent"}, CODEX_TOOLS)["tool_name"] == "spawn_agent"


# -- what Codex hears --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "decision", "expected", "exit_reason"),
    [
        (
            "PreToolUse", {"behavior": "deny", "reason": "no rm"},
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm"}}, "no rm",
        ),
        (
            "PreToolUse", {"behavior": "deny"},
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": NO_REASON}}, NO_REASON,
        ),
        (
            "PreToolUse", {"behavior": "allow", "permission": "ask", "reason": "sure?"},
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": f"{ASK_DENIED} (sure?)"}},
            f"{ASK_DENIED} (sure?)",
        ),
        ("PreToolUse", {"behavior": "allow", "permission": "approve"}, {}, None),
        ("PreToolUse", {"behavior": "allow"}, {}, None),
        (
            "PreToolUse", {"behavior": "modify", "input": {"command": "ls"}, "context": "rewritten"},
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "ls"}, "additionalContext": "rewritten"}},
            None,
        ),
        ("PreToolUse", {"behavior": "context", "context": "careful"}, {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "careful"}}, None),
        (
            "PermissionRequest", {"behavior": "deny", "reason": "no"},
            {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "no"}}}, "no",
        ),
        (
            "PermissionRequest", {"behavior": "allow", "permission": "approve"},
            {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}, None,
        ),
        (
            "PermissionRequest", {"behavior": "modify", "input": {"command": "ls"}},
            {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": REWRITE_DENIED}}}, REWRITE_DENIED,
        ),
        ("PermissionRequest", {"behavior": "allow", "permission": "ask"}, {}, None),
        ("UserPromptSubmit", {"behavior": "deny", "reason": "no secrets"}, {"decision": "block", "reason": "no secrets"}, "no secrets"),
        ("UserPromptSubmit", {"behavior": "modify", "input": {"prompt": "[redacted]"}}, {"decision": "block", "reason": PROMPT_REWRITE_DENIED}, PROMPT_REWRITE_DENIED),
        (
            "PreToolUse", {"behavior": "deny", "reason": " \n "},
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": NO_REASON}}, NO_REASON,
        ),
        ("UserPromptSubmit", {"behavior": "context", "context": "c"}, {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "c"}}, None),
        ("UserPromptSubmit", {"behavior": "allow", "halt": "bye"}, {"continue": False, "stopReason": "bye"}, None),
        ("PostToolUse", {"behavior": "context", "context": "c"}, {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "c"}}, None),
        ("PostToolUse", {"behavior": "allow", "halt": "bye"}, {}, None),
        ("Stop", {"behavior": "allow", "continue_with": "tests fail"}, {"decision": "block", "reason": "tests fail"}, None),
        ("Stop", {"behavior": "allow", "halt": "bye"}, {"continue": False, "stopReason": "bye"}, None),
        ("SubagentStop", {"behavior": "allow", "continue_with": "more"}, {"decision": "block", "reason": "more"}, None),
        ("ThreadStart", {"behavior": "context", "context": "hello"}, {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "hello"}}, None),
        ("SubagentStart", {"behavior": "context", "context": "c"}, {"hookSpecificOutput": {"hookEventName": "SubagentStart", "additionalContext": "c"}}, None),
        ("PreCompact", {"behavior": "context", "context": "c"}, {}, None),
    ],
)
def test_each_decision_in_the_only_form_codex_honours(event: str, decision: dict[str, Any], expected: dict[str, Any], exit_reason: str | None) -> None:
    assert codex_output(CODEX_EVENT[event], event, decision, CODEX_TOOLS, "bash") == expected
    assert refusal(event, decision) == exit_reason


def test_nothing_codex_fails_open_on_is_ever_written() -> None:
    """Over every event and every kind of decision: never ask, approve, allow alone, a deny
    without a reason, updatedInput without allow, continue: false on PreToolUse."""
    decisions = [
        {"behavior": behavior, "reason": reason, "permission": permission, "input": {"command": "x"} if behavior == "modify" else None,
         "context": "c", "halt": halt, "continue_with": "go"}
        for behavior in ("allow", "deny", "modify", "context")
        for reason in (None, "", "why")
        for permission in (None, "ask", "approve")
        for halt in (None, "stop")
    ]
    for event in CODEX_EVENT:
        for decision in decisions:
            out = codex_output(CODEX_EVENT[event], event, decision, CODEX_TOOLS, "bash")
            specific = out.get("hookSpecificOutput", {})
            said = specific.get("permissionDecision")
            assert said in (None, "deny", "allow"), (event, decision, out)
            if said == "deny":
                assert specific["permissionDecisionReason"], (event, decision)
            assert (said == "allow") == ("updatedInput" in specific), (event, decision, out)
            assert out.get("decision") in (None, "block"), (event, decision, out)
            if out.get("decision") == "block":
                assert out["reason"]
            if "continue" in out:
                assert event in ("ThreadStart", "UserPromptSubmit", "Stop"), (event, decision, out)
            permission = specific.get("decision")
            if permission is not None:
                assert permission["behavior"] in ("allow", "deny") and (permission["behavior"] == "allow" or permission["message"])


# -- end to end --------------------------------------------------------------------------------


def test_a_deny_is_json_and_exit_2_with_the_reason_on_stderr(write_hook: Writer, home: Path) -> None:
    directory = write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > "$HOOKBUS_HOOK_DIR/seen.json"; echo "no rm -rf" >&2; exit 2').parent
    result = codex(home, OBSERVED["PreToolUse"], "--no-server")
    assert result.returncode == 2
    assert json.loads(result.stdout)["hookSpecificOutput"]["permissionDecisionReason"] == "hook 'guard' denied: no rm -rf"
    assert result.stderr == "hook 'guard' denied: no rm -rf\n"
    seen = json.loads((directory / "seen.json").read_text())
    assert (seen["tool_name"], seen["tool_input"], seen["thread_id"], seen["turn_id"]) == ("bash", {"command": "rm -rf /"}, "0199-s", "t-1")
    (record,) = read_log(home)
    assert record["status"] == "deny"


@pytest.mark.parametrize("through_server", [False, True])
def test_a_reason_of_several_lines_reaches_codex_with_its_lines(write_hook: Writer, home: Path, through_server: bool) -> None:
    """Codex shows the model stderr whole: its newlines stay newlines, other controls are
    shown as escapes."""
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="""cat > /dev/null; printf 'first line\\nsecond\\x1b[31m line\\n' >&2; exit 2""")
    if through_server:
        with Served(home):
            result = codex(home, OBSERVED["PreToolUse"])
    else:
        result = codex(home, OBSERVED["PreToolUse"], "--no-server")
    assert result.returncode == 2
    assert result.stderr == "hook 'guard' denied: first line\nsecond\\x1b[31m line\n", result.stderr


def test_an_allow_prints_nothing_and_exits_0(write_hook: Writer, home: Path) -> None:
    write_hook("ok", matcher="bash", mode="sync", blocking=True, command="cat > /dev/null")
    result = codex(home, OBSERVED["PreToolUse"], "--no-server")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("event", ["PreModelRequest", "PostModelRequest", "Interrupt", "SessionEnd"])
@pytest.mark.parametrize("through_server", [False, True])
def test_events_without_a_counterpart_print_nothing(home: Path, event: str, through_server: bool) -> None:
    if through_server:
        with Served(home):
            result = codex(home, OBSERVED[event])
    else:
        result = codex(home, OBSERVED[event], "--no-server")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("event", ["PreToolUse", "UserPromptSubmit", "SessionStart", "PostToolUse", "PermissionRequest"])
def test_through_a_server_it_says_the_same(write_hook: Writer, home: Path, event: str) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command='cat > /dev/null; echo "no" >&2; exit 2')
    write_hook("prompt", event="UserPromptSubmit", mode="sync", blocking=True, command='cat > /dev/null; echo "not that" >&2; exit 2')
    write_hook("hello", event="ThreadStart", mode="sync", command="cat > /dev/null; echo hello")
    write_hook("after", event="PostToolUse", mode="sync", command="cat > /dev/null; echo checked")
    write_hook("perm", event="PermissionRequest", mode="sync", blocking=True, command="""cat > /dev/null; echo '{"behavior": "deny", "reason": "ask a human"}'""")
    local = codex(home, OBSERVED[event], "--no-server")
    with Served(home):
        remote = codex(home, OBSERVED[event])
    assert (remote.returncode, remote.stdout, remote.stderr) == (local.returncode, local.stdout, local.stderr)
    assert local.returncode == (2 if event in ("PreToolUse", "UserPromptSubmit", "PermissionRequest") else 0)


def test_a_stop_kept_going_is_bounded(write_hook: Writer, home: Path) -> None:
    write_hook("gate", event="Stop", mode="sync", command="""cat > /dev/null; echo '{"decision": "block", "reason": "go on"}'""")
    answers = []
    for round_ in range(CODEX_CLI.MAX_STOP_ROUNDS + 2):
        stop = {**OBSERVED["Stop"], "stop_hook_active": round_ > 0}
        answers.append(codex(home, stop, "--no-server"))
    kept = [json.loads(result.stdout) for result in answers[: CODEX_CLI.MAX_STOP_ROUNDS]]
    assert kept == [{"decision": "block", "reason": "go on"}] * CODEX_CLI.MAX_STOP_ROUNDS
    stopped = answers[CODEX_CLI.MAX_STOP_ROUNDS]
    assert (stopped.returncode, stopped.stdout) == (0, "")
    assert f"kept the turn going {CODEX_CLI.MAX_STOP_ROUNDS} times in a row" in stopped.stderr
    # The count starts again: the next turn may be kept going.
    assert json.loads(answers[-1].stdout) == {"decision": "block", "reason": "go on"}
    # Another session is counted apart.
    other = codex(home, {**OBSERVED["Stop"], "session_id": "other"}, "--no-server")
    assert json.loads(other.stdout) == {"decision": "block", "reason": "go on"}


def test_a_fail_closed_hook_denies_when_hookbus_cannot_read_the_envelope(write_hook: Writer, home: Path) -> None:
    write_hook("strict", matcher="bash", mode="sync", blocking=True, on_error="deny", command="cat > /dev/null")
    text = json.dumps(OBSERVED["PreToolUse"])[:-1] + ', "tool_input": ' + "[" * 20_000 + "]" * 20_000 + "}"
    result = codex(home, text, "--no-server")
    assert result.returncode == 2, result
    assert result.stderr.splitlines()[0]  # the reason, first: what Codex shows


@pytest.mark.parametrize(("stdin", "message"), [("not json", "the envelope is not valid JSON"), ("{}", 'no "hook_event_name": run it as a Codex CLI hook')])
def test_bad_input_is_refused_clearly(home: Path, stdin: str, message: str) -> None:
    turn_off_home_guard(home)
    result = codex(home, stdin)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr
