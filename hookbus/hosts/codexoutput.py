"""What Codex CLI obeys, for ``hookbus codex-hook``: vixd's decision in the only forms Codex
0.169.0 honours.

Codex is strict, and fails open. An answer it finds wanting is "Failed", and the tool runs
anyway: a deny without a reason, exit 2 with nothing on stderr, ``ask``, ``approve``,
``allow`` without ``updatedInput`` (or the reverse), ``continue: false`` on PreToolUse, or
any key its schema does not list. So nothing hookbus decides may come out in one of those
forms, where it would become an allow no one sees:

- a deny always carries a reason: in the JSON, and again as exit 2 with the reason on
  stderr (``refusal``), either of which Codex takes as a block;
- ``ask`` on PreToolUse becomes a deny that says the user's approval was needed (a hook
  cannot make Codex ask), and a rewrite Codex cannot take (on PermissionRequest, of a
  prompt) a deny that says so (``as_codex``);
- ``approve``, and an allow, print nothing;
- a rewrite is ``permissionDecision: allow`` with the whole ``updatedInput``;
- context is ``additionalContext`` where Codex passes it on, and ``continue: false`` is
  written only on the events that take it.

Built-in modules only: the bridge uses this on its way to a server.
"""

from __future__ import annotations

from hookbus.dialects import codex_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from hookbus.dialects.claude_names import ToolNames

#: The reason of an ``ask`` that Codex cannot put to the user.
ASK_DENIED = "this call needs the user's approval, which Codex CLI cannot be asked for by a hook: denied"
#: The reason of a rewrite Codex cannot take on PermissionRequest.
REWRITE_DENIED = (
    "a hook rewrote this call's input on PermissionRequest, where Codex CLI cannot take a rewrite: denied "
    "rather than run as it was"
)
#: The reason of a prompt rewrite, which Codex cannot take.
PROMPT_REWRITE_DENIED = (
    "a hook rewrote this prompt, which Codex CLI cannot take from a hook: blocked rather than sent as it was"
)
#: A deny that came with no words (Codex fails a deny without a reason open).
NO_REASON = "denied by a hook"


def as_codex(event: str, decision: dict[str, Any]) -> dict[str, Any]:
    """``decision`` as Codex can take it: an ``ask`` on PreToolUse, a rewrite on
    PermissionRequest and a rewritten prompt become denies that say why (a rewrite that
    cannot be made must not let the original through unseen: it may have taken a secret
    out); every deny has a reason that is more than blanks."""
    behavior = decision.get("behavior")
    if behavior != "deny":
        if event == "PreToolUse" and decision.get("permission") == "ask":
            reason = decision.get("reason")
            said = f"{ASK_DENIED} ({reason})" if isinstance(reason, str) and reason.strip() else ASK_DENIED
            return {**decision, "behavior": "deny", "reason": said, "permission": None}
        if behavior == "modify" and event in ("PermissionRequest", "UserPromptSubmit"):
            reason = REWRITE_DENIED if event == "PermissionRequest" else PROMPT_REWRITE_DENIED
            return {**decision, "behavior": "deny", "reason": reason, "input": None}
        return decision
    reason = decision.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        return {**decision, "reason": NO_REASON}
    return decision


def refusal(event: str, decision: dict[str, Any]) -> str | None:
    """The reason to say on stderr with exit 2, for a decision that blocks (a deny on
    PreToolUse, UserPromptSubmit or PermissionRequest); None otherwise."""
    codex = as_codex(event, decision)
    if codex.get("behavior") == "deny" and event in ("PreToolUse", "UserPromptSubmit", "PermissionRequest"):
        reason = codex.get("reason")
        return reason if isinstance(reason, str) and reason.strip() else NO_REASON
    return None


def codex_output(host_event: str, event: str, decision: dict[str, Any], names: ToolNames, tool: str | None) -> dict[str, Any]:
    """What Codex CLI obeys for vixd's ``decision`` on (vixd's) ``event``; {} for nothing
    (then nothing is printed)."""
    decision = as_codex(event, decision)
    behavior = decision.get("behavior")
    reason = decision.get("reason")
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    if event == "PreToolUse":
        if behavior == "deny":
            specific.update(permissionDecision="deny", permissionDecisionReason=reason)
        elif behavior == "modify" and decision.get("input") is not None:
            new_input = decision["input"]
            specific.update(permissionDecision="allow", updatedInput=names.input_to_host(tool, new_input) if tool else new_input)
    elif event == "PermissionRequest":
        if behavior == "deny":
            specific["decision"] = {"behavior": "deny", "message": reason}
        elif decision.get("permission") == "approve":
            specific["decision"] = {"behavior": "allow"}
    elif event == "UserPromptSubmit" and behavior == "deny":
        out.update(decision="block", reason=reason)
    elif event in ("Stop", "SubagentStop") and decision.get("continue_with"):
        out.update(decision="block", reason=decision["continue_with"])
    if behavior != "deny" and decision.get("context") and event in codex_names.CONTEXT_EVENTS:
        specific["additionalContext"] = decision["context"]
    if decision.get("halt") and event in codex_names.HALT_EVENTS:
        out.update({"continue": False, "stopReason": decision["halt"]})
        out.pop("decision", None)  # halted: there is no turn to go on with
        out.pop("reason", None)
    if specific:
        out["hookSpecificOutput"] = {"hookEventName": host_event, **specific}
    return out
