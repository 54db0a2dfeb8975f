"""Claude Code's and Gemini CLI's hook output, read as they read it.

Hooks written for those CLIs print JSON without hookbus's ``behavior``:
``hookSpecificOutput.permissionDecision``, ``updatedInput``, ``additionalContext``, the
legacy ``decision: block|approve``, ``continue: false``, PermissionRequest's
``hookSpecificOutput.decision``, Gemini's ``decision: deny`` and
``hookSpecificOutput.tool_input``. What they mean depends on the event (a ``block`` on Stop
means "keep going"), so reading them needs it. Shapes that only say "no opinion" (``{}``,
``continue: true``, ``suppressOutput``, ``systemMessage``) allow without an error.

As Claude Code does, a ``hookSpecificOutput`` is read only for the event it names
(``hookEventName``; another event's is an error), and only for what that event takes:
``permissionDecision``, ``updatedInput`` (and Gemini's ``tool_input``) on PreToolUse,
``decision`` on PermissionRequest, ``additionalContext`` where context reaches the model.
``continue: false`` ends the turn, whatever else the object says.
"""

from __future__ import annotations

from typing import Any

from hookbus.dialects import claude_names, gemini_names
from hookbus.dialects.claude_names import CLAUDE_EVENT
from hookbus.decision import Behavior, Outcome, Permission, cap_text
from hookbus.events import CONTINUE_EVENTS, EVENTS, PERMISSION_EVENTS
from hookbus.dialects.gemini_names import GEMINI_EVENT

#: vixd's events on which Claude Code or Gemini CLI take ``additionalContext``.
CONTEXT_EVENTS = frozenset(claude_names.CONTEXT_EVENTS + gemini_names.CONTEXT_EVENTS)

#: The top-level keys that make an object Claude Code's (or Gemini CLI's) output. (A
#: ``reason`` alone is not one: it explains a decision, and without one it is a mistake.)
FOREIGN_KEYS = frozenset({"hookSpecificOutput", "decision", "continue", "suppressOutput", "systemMessage"})
#: The message for a JSON object that is nobody's decision.
UNDERSTOOD = (
    'hookbus\'s {"behavior": "allow"|"deny"|"modify"|"context", ...}, or Claude Code\'s '
    "hookSpecificOutput (permissionDecision, updatedInput, additionalContext), decision "
    '("block"/"approve") with reason, or continue: false with stopReason (Gemini CLI\'s '
    'decision "deny" and hookSpecificOutput.tool_input too)'
)


class ForeignDecisionError(ValueError):
    """A Claude-style object whose keys hold values neither CLI would accept."""


def is_foreign(decision: dict[str, Any]) -> bool:
    """Whether ``decision`` (without ``behavior``) is in Claude Code's or Gemini's shape."""
    return not FOREIGN_KEYS.isdisjoint(decision)


def _text(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ForeignDecisionError(f'"{where}" must be a string')
    return value.strip() or None


def _object(value: object, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ForeignDecisionError(f'"{where}" must be an object')
    return value


class _Reading:
    """What the keys of one object say, gathered before they are made one Outcome."""

    def __init__(self) -> None:
        self.deny: str | None = None
        self.denied = False
        self.input: dict[str, Any] | None = None
        self.contexts: list[str] = []
        self.permission: Permission | None = None
        self.reason: str | None = None
        self.continue_with: str | None = None
        self.halt: str | None = None

    def outcome(self) -> Outcome:
        behavior: Behavior = "allow"
        context = "\n\n".join(self.contexts) or None
        if self.denied:
            behavior = "deny"
        elif self.input is not None:
            behavior = "modify"
        elif context is not None:
            behavior = "context"
        permission = None if self.denied else self.permission
        reason = self.deny if self.denied else (self.reason if permission == "ask" else None)
        return Outcome(
            behavior,
            reason=cap_text(reason) if reason else None,
            input=self.input if behavior == "modify" else None,
            context=cap_text(context) if context else None,
            permission=permission,
            # Ending the turn wins over going on (Claude Code: continue: false over block).
            continue_with=cap_text(self.continue_with) if self.continue_with and not self.halt else None,
            halt=cap_text(self.halt) if self.halt else None,
        )


def outcome_from_foreign(decision: dict[str, Any], event: str | None) -> Outcome:
    """The Outcome Claude Code (or Gemini CLI) would take from ``decision`` on ``event``.

    ForeignDecisionError when a key holds a value neither CLI accepts. Without an event
    (a runner that does not say), ``block`` denies."""
    reading = _Reading()
    can_block = event is None or (event in EVENTS and EVENTS[event].can_block)
    if decision.get("continue") is False:
        stop = _text(decision.get("stopReason"), "stopReason") or "a hook stopped the turn"
        reading.halt = stop
        if can_block:
            reading.denied, reading.deny = True, stop
    specific = _object(decision.get("hookSpecificOutput"), "hookSpecificOutput") or {}
    _read_specific(specific, event, reading)
    _read_legacy(decision, event, reading)
    return reading.outcome()


#: What a hookSpecificOutput may call each event: vixd's name, Claude's, Gemini's.
_NAMES_OF = {
    event: tuple(dict.fromkeys((event, CLAUDE_EVENT.get(event, event), GEMINI_EVENT.get(event, event))))
    for event in EVENTS
}


def _read_specific(specific: dict[str, Any], event: str | None, reading: _Reading) -> None:
    """``hookSpecificOutput``, for what ``event`` takes of it (everything, for no event)."""
    named = specific.get("hookEventName")
    if named is not None and event is not None and named not in _NAMES_OF.get(event, (event,)):
        expected = " or ".join(repr(name) for name in _NAMES_OF.get(event, (event,)))
        raise ForeignDecisionError(f'"hookSpecificOutput.hookEventName" is {named!r:.40}, not {expected}: another event\'s output')

    def takes(wanted: str) -> bool:
        return event is None or event == wanted

    context = _text(specific.get("additionalContext"), "hookSpecificOutput.additionalContext")
    if context and (event is None or event in CONTEXT_EVENTS):
        reading.contexts.append(context)
    answer = _object(specific.get("decision"), "hookSpecificOutput.decision")
    if answer is not None and takes("PermissionRequest"):  # the answer to the prompt
        behavior = answer.get("behavior")
        if behavior == "deny":
            reading.denied = True
            reading.deny = reading.deny or _text(answer.get("message"), "hookSpecificOutput.decision.message")
        elif behavior == "allow":
            reading.permission = "approve"
            updated = _object(answer.get("updatedInput"), "hookSpecificOutput.decision.updatedInput")
            if updated is not None:
                reading.input = updated
        else:
            raise ForeignDecisionError(
                f'"hookSpecificOutput.decision.behavior" must be "allow" or "deny" (got {behavior!r:.40})'
            )
    if not takes("PreToolUse"):
        return  # permissionDecision and updatedInput are PreToolUse's (Claude Code reads them nowhere else)
    verdict = specific.get("permissionDecision")
    reason = _text(specific.get("permissionDecisionReason"), "hookSpecificOutput.permissionDecisionReason")
    if verdict == "deny":
        reading.denied = True
        reading.deny = reading.deny or reason
    elif verdict == "ask":
        reading.permission, reading.reason = "ask", reason
    elif verdict == "allow":
        if reading.permission != "ask":
            reading.permission = "approve"
    elif verdict is not None:
        raise ForeignDecisionError(
            f'"hookSpecificOutput.permissionDecision" must be "allow", "deny" or "ask" (got {verdict!r:.40})'
        )
    for key in ("updatedInput", "tool_input"):  # Claude Code's, Gemini CLI's
        updated = _object(specific.get(key), f"hookSpecificOutput.{key}")
        if updated is not None and reading.input is None:
            reading.input = updated


def _read_legacy(decision: dict[str, Any], event: str | None, reading: _Reading) -> None:
    verdict = decision.get("decision")
    reason = _text(decision.get("reason"), "reason")
    if verdict in ("block", "deny"):
        if event in CONTINUE_EVENTS:
            reading.continue_with = reason or "a hook asked to keep going"
        elif event is not None and not EVENTS.get(event, EVENTS["Stop"]).can_block:
            if reason:  # PostToolUse: the tool ran; the reason is fed to the model
                reading.contexts.append(reason)
        else:
            reading.denied = True
            reading.deny = reading.deny or reason
    elif verdict in ("approve", "allow"):
        if event is None or event in PERMISSION_EVENTS:
            reading.permission = reading.permission or "approve"
    elif verdict is not None:
        raise ForeignDecisionError(
            f'"decision" must be "block" or "approve" (Gemini CLI: "deny" or "allow"), got {verdict!r:.40}'
        )


# -- Codex CLI ---------------------------------------------------------------------------

#: The top-level keys of Codex CLI's hook output (its schemas allow no others).
CODEX_KEYS = frozenset({"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason", "hookSpecificOutput"})
#: The ``hookSpecificOutput`` keys Codex CLI reads, by vixd's event (``hookEventName`` aside).
_CODEX_SPECIFIC = {
    "PreToolUse": frozenset({"permissionDecision", "permissionDecisionReason", "updatedInput", "additionalContext"}),
    "PermissionRequest": frozenset({"decision"}),
    "PostToolUse": frozenset({"additionalContext", "updatedMCPToolOutput"}),
    "UserPromptSubmit": frozenset({"additionalContext"}),
    "ThreadStart": frozenset({"additionalContext"}),
    "SubagentStart": frozenset({"additionalContext"}),
}


class CodexRefusal(ForeignDecisionError):
    """An answer Codex CLI reports as "Failed" and does nothing with: the hook's failure."""


def outcome_from_codex(decision: dict[str, Any], event: str | None) -> Outcome:
    """The Outcome Codex CLI (0.169) takes from ``decision`` on vixd's ``event``.

    Codex is stricter than Claude Code: what it reports as "Failed" (and then goes on as if
    the hook had said nothing: it runs the tool) raises CodexRefusal, so that it is the
    hook's failure and its ``on_error`` decides. Those are: a key Codex does not know; on
    PreToolUse, ``permissionDecision`` "deny" without a reason, "allow" without
    ``updatedInput``, "ask", ``updatedInput`` without "allow", ``decision: "approve"`` or a
    block without a reason, ``continue: false``, ``stopReason`` and ``suppressOutput``; on
    PermissionRequest, PreToolUse's fields, and ``updatedInput``, ``updatedPermissions`` or
    ``interrupt`` in the answer; on PostToolUse, ``updatedToolOutput``.

    What it honours reads as Claude Code's: a deny (``permissionDecision``, ``decision:
    "block"`` with a reason), ``allow`` with ``updatedInput`` (a modify), context, the
    PermissionRequest answer, Stop's and SubagentStop's block (go on), and ``continue:
    false`` where Codex stops (ThreadStart, UserPromptSubmit, Stop). On PostToolUse, whose
    output Codex replaces with a block's reason or a ``stopReason``, that text is context."""
    unknown = [key for key in decision if key not in CODEX_KEYS]
    if unknown:
        raise CodexRefusal(f"Codex CLI takes no key {unknown[0]!r:.40} in a hook's output")
    specific = _object(decision.get("hookSpecificOutput"), "hookSpecificOutput") or {}
    allowed = _CODEX_SPECIFIC.get(event or "", frozenset())
    for key in specific:
        if key != "hookEventName" and key not in allowed:
            raise CodexRefusal(f'Codex CLI reads no "hookSpecificOutput.{key:.40}" on {event}')
    halt = decision.get("continue") is False
    if event == "PreToolUse":
        for key in ("stopReason", "suppressOutput"):
            if key in decision:
                raise CodexRefusal(f'Codex CLI refuses "{key}" on PreToolUse')
        if halt:
            raise CodexRefusal('Codex CLI refuses "continue": false on PreToolUse')
        verdict = specific.get("permissionDecision")
        if verdict == "deny" and not _text(specific.get("permissionDecisionReason"), "hookSpecificOutput.permissionDecisionReason"):
            raise CodexRefusal('"permissionDecision": "deny" without a "permissionDecisionReason": Codex CLI refuses it')
        if verdict == "ask":
            raise CodexRefusal('"permissionDecision": "ask": Codex CLI does not support it')
        if verdict == "allow" and specific.get("updatedInput") is None:
            raise CodexRefusal('"permissionDecision": "allow" without "updatedInput": Codex CLI refuses it')
        if specific.get("updatedInput") is not None and verdict != "allow":
            raise CodexRefusal('"updatedInput" without "permissionDecision": "allow": Codex CLI refuses it')
        if verdict is not None and verdict not in ("allow", "deny"):
            raise CodexRefusal(f'"permissionDecision" must be "allow" or "deny" for Codex CLI (got {verdict!r:.40})')
    if event == "PermissionRequest":
        answer = _object(specific.get("decision"), "hookSpecificOutput.decision") or {}
        for key in ("updatedInput", "updatedPermissions", "interrupt"):
            if key in answer:
                raise CodexRefusal(f'Codex CLI refuses "hookSpecificOutput.decision.{key}"')
        if "decision" in decision:
            raise CodexRefusal('Codex CLI reads PermissionRequest\'s answer from "hookSpecificOutput.decision" only')
    verdict = decision.get("decision")
    if verdict == "approve":
        raise CodexRefusal('"decision": "approve": Codex CLI does not support it')
    if verdict is not None and verdict != "block":
        raise CodexRefusal(f'"decision" must be "block" for Codex CLI (got {verdict!r:.40})')
    if verdict == "block" and event in ("PreToolUse", "UserPromptSubmit", "PostToolUse") and not _text(decision.get("reason"), "reason"):
        raise CodexRefusal('"decision": "block" without a "reason": Codex CLI refuses it')
    if halt and event not in ("ThreadStart", "UserPromptSubmit", "Stop", None):
        # Codex does not stop the turn there: on PostToolUse the reason replaces the tool's
        # output (context, for vixd); elsewhere it is said and nothing else.
        stop = _text(decision.get("stopReason"), "stopReason")
        decision = {key: value for key, value in decision.items() if key not in ("continue", "stopReason")}
        outcome = outcome_from_foreign(decision, event) if is_foreign(decision) else Outcome("allow")
        if stop and event == "PostToolUse":
            contexts = [text for text in (outcome.context, stop) if text]
            return Outcome("context", context=cap_text("\n\n".join(contexts)))
        return outcome
    outcome = outcome_from_foreign(decision, event)
    context = _text(specific.get("additionalContext"), "hookSpecificOutput.additionalContext")
    if event == "SubagentStart" and context and outcome.behavior == "allow":
        # Codex hands it to the subagent; Claude Code's reading has no context there.
        return Outcome("context", context=cap_text(context))
    return outcome
