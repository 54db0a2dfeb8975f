"""``hookbus claude-code-hook``: hookbus as Claude Code's hook engine.

Claude Code runs this one command for every event (``hookbus import claude-code
--install-bridge`` writes the settings). It reads Claude's envelope on stdin, turns it into
vixd's (SessionStart is ThreadStart, ``Bash`` is ``bash``, ``file_path`` is ``path``,
``session_id`` is ``thread_id``), runs the home's hooks (through ``hookbus serve`` when one
answers, else here), and writes the merged decision back the way Claude Code obeys it.

Exit 0 with Claude's JSON on stdout, or nothing when there is nothing to say; exit 1 on a
usage or config error, which Claude Code reports and treats as no opinion. Standard library
only on the way to a server.
"""

from __future__ import annotations

import json
import os
import sys

from hookbus.claude_names import CLAUDE_EVENT, DEFAULT_NAMES, VIX_EVENT, ToolNames, envelope_to_vix

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any

def claude_output(event: str, decision: dict[str, Any], names: ToolNames, tool: str | None) -> dict[str, Any]:
    """What Claude Code obeys for vixd's ``decision`` on (vixd's) ``event``; {} for nothing.

    ``tool`` is vixd's name of the tool, to put a rewritten input back in Claude's fields."""
    claude_event = CLAUDE_EVENT.get(event, event)
    behavior = decision.get("behavior")
    reason = decision.get("reason")
    context = decision.get("context")
    permission = decision.get("permission")
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    new_input = decision.get("input") if behavior == "modify" else None
    if new_input is not None and tool is not None:
        new_input = names.input_to_claude(tool, new_input)
    if event == "PreToolUse":
        if behavior == "deny":
            specific.update(permissionDecision="deny", permissionDecisionReason=reason or "denied by a hook")
        elif permission is not None:
            specific["permissionDecision"] = "allow" if permission == "approve" else "ask"
            if reason:
                specific["permissionDecisionReason"] = reason
        if new_input is not None:
            specific["updatedInput"] = new_input
    elif event == "PermissionRequest":
        if behavior == "deny":
            specific["decision"] = {"behavior": "deny", "message": reason or "denied by a hook"}
        elif permission == "approve" or new_input is not None:
            specific["decision"] = {"behavior": "allow"}
            if new_input is not None:
                specific["decision"]["updatedInput"] = new_input
    elif event == "UserPromptSubmit" and behavior == "deny":
        out.update(decision="block", reason=reason or "blocked by a hook")
    elif event in ("Stop", "SubagentStop") and decision.get("continue_with"):
        out.update(decision="block", reason=decision["continue_with"])
    if context and event in ("PreToolUse", "PostToolUse", "UserPromptSubmit", "ThreadStart"):
        specific["additionalContext"] = context
    if decision.get("halt"):
        out.update({"continue": False, "stopReason": decision["halt"]})
    if specific:
        out["hookSpecificOutput"] = {"hookEventName": claude_event, **specific}
    return out


def unsaid(event: str, decision: dict[str, Any]) -> str | None:
    """What Claude Code has no way to hear from ``decision``, to say on stderr; or None."""
    if event == "UserPromptSubmit" and decision.get("behavior") == "modify":
        return "a hook rewrote the prompt, which Claude Code cannot take; the prompt is unchanged"
    return None


def cmd_claude_code_hook(args: argparse.Namespace) -> int:
    from hookbus.cli import UsageError, _Interrupts, _read_envelope, decide_in_process, decide_via_server

    claude = _read_envelope("-")
    claude_event = claude.get("hook_event_name")
    if not isinstance(claude_event, str) or not claude_event:
        raise UsageError('the envelope on stdin has no "hook_event_name": run it as a Claude Code hook')
    event = VIX_EVENT.get(claude_event)
    if event is None:
        return 0  # an event vixd has no counterpart for (SessionEnd, Notification, ...)
    # The default map only: settings.json's claude_code.tools is read by the bus, which
    # checks who could have written it; a bridge on its way to a server reads no settings.
    names = DEFAULT_NAMES
    envelope = envelope_to_vix(claude, names)
    # What Claude Code tells its hooks in their environment, the hooks of the home get in
    # the envelope: a server runs them in its own environment, not this process's.
    for variable, field in (("CLAUDE_PROJECT_DIR", "project_dir"), ("CLAUDE_ENV_FILE", "env_file")):
        value = os.environ.get(variable)
        if value and field not in envelope:
            envelope[field] = value
    tool = envelope.get("tool_name") if isinstance(envelope.get("tool_name"), str) else None

    def answer(decision: dict[str, Any]) -> None:
        output = claude_output(event, decision, names, tool)
        if output:
            sys.stdout.write(json.dumps(output) + "\n")
            sys.stdout.flush()
        note = unsaid(event, decision)
        if note:
            print(f"hookbus claude-code-hook: {note}", file=sys.stderr)

    decision = decide_via_server(args, event, envelope, "hookbus claude-code-hook")
    if decision is not None:
        answer(decision)
        return 0
    interrupts = _Interrupts()
    decide_in_process(args, event, envelope, interrupts, answer)
    return interrupts.exit_code(0)


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", metavar="PATH", help="the socket of a `hookbus serve` to use when one answers there")
    parser.add_argument("--no-server", action="store_true", help="run the hooks in this process even if a server answers")
    parser.set_defaults(func=cmd_claude_code_hook)
