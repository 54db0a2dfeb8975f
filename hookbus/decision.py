"""What one hook says (``Outcome``) and what the bus answers for an event (``Decision``)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from hookbus.failures import FAILURES as FAILURES  # re-exported: the bus and runners read it here
from hookbus.failures import failure_line

Behavior = Literal["allow", "deny", "modify", "context"]
BEHAVIORS: tuple[Behavior, ...] = ("allow", "deny", "modify", "context")
#: What a hook may say about the user's permission prompt, beside its behavior (PreToolUse
#: and PermissionRequest): "approve" skips the prompt, "ask" always asks. Merged ask > approve,
#: and neither survives a deny.
Permission = Literal["approve", "ask"]
PERMISSIONS: tuple[Permission, ...] = ("approve", "ask")

#: Context injected by one hook is cut here, with a visible marker.
MAX_CONTEXT_CHARS = 10_000


def cap_text(text: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters plus a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[hookbus: truncated {len(text) - limit} more characters]"


Failure = Literal["timeout", "crash", "killed", "unparseable", "error", "hookbus"]


@attrs.frozen
class Outcome:
    """What one hook run said. A run that failed says ``allow`` and carries ``error``."""

    behavior: Behavior = "allow"
    reason: str | None = None
    input: dict[str, Any] | None = None
    context: str | None = None
    #: Why the hook failed (and so failed open); None when it ran as intended.
    error: str | None = None
    #: The thread an embedder ran a workflow or prompt in, when it says so.
    thread_id: str | None = None
    #: How it failed, when it did: "timeout", "crash" (a non-zero exit, an exception, a
    #: process that could not start), "killed" (a signal, a cancellation), "unparseable"
    #: (an answer that is no valid decision), "hookbus" (hookbus could not run it: see
    #: ``HookBus.undecided``), or "error" (anything else). A blocking hook
    #: with ``"on_error": "deny"`` turns a failure into a deny whose reason says which.
    failure: Failure | None = None
    #: The extras, for what the four behaviors cannot say (Claude Code's hooks say them):
    #: approve or ask (PreToolUse, PermissionRequest, blocking hooks only);
    permission: Permission | None = None
    #: Stop and SubagentStop: do not stop, go on with this instruction;
    continue_with: str | None = None
    #: any event: end the whole turn, telling the user this.
    halt: str | None = None
    #: What the run did that its spec did not say, and why (it ran in the hook's directory:
    #: the envelope's cwd cannot be entered): the run's record carries it as its note. Not
    #: part of the decision.
    note: str | None = None
    #: What the action itself answered, when that is data rather than a process's output:
    #: a CEL expression's value, a Rego query's result, as it came (``explain`` writes it as
    #: JSON beside the decision read from it; kept as it came, so that an emit that is not
    #: explained pays nothing for it). Not part of the decision.
    answer: Any = None

    @classmethod
    def fail_open(cls, error: str, thread_id: str | None = None, failure: Failure = "error") -> Outcome:
        return cls("allow", error=error, thread_id=thread_id, failure=failure)

    def as_dict(self) -> dict[str, Any]:
        """The decision part as the JSON contract spells it, null keys left out."""
        return _decision_dict(self)


@attrs.frozen
class HookFailure:
    """A sync hook of an emit that failed: it timed out, crashed, or answered something
    that is no decision. It failed open (its answer counts as allow), or, with
    ``"on_error": "deny"``, closed (``closed``: its answer is a deny)."""

    hook_id: str
    error: str
    failure: Failure = "error"
    closed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"hook_id": self.hook_id, "failure": self.failure, "error": self.error, "closed": self.closed}

    def line(self) -> str:
        """``hook 'lint' failed open (timed out): ...``, for a person's terminal."""
        return failure_line(self.hook_id, self.failure, self.error, self.closed)


@attrs.frozen
class HookResult:
    """An outcome tagged with the hook that produced it, as the resolver receives it."""

    hook_id: str
    outcome: Outcome


@attrs.frozen
class Decision:
    """The one answer to an event: most restrictive wins, context from every hook joined."""

    behavior: Behavior = "allow"
    reason: str | None = None
    input: dict[str, Any] | None = None
    context: str | None = None
    #: Hooks whose deny made this decision, in hook-id order.
    denied_by: tuple[str, ...] = ()
    #: The hook whose modify supplied ``input``.
    modified_by: str | None = None
    #: The extras (see Outcome), merged: permission ask > approve (none when denied),
    #: continue_with and halt joined from every hook that said them.
    permission: Permission | None = None
    continue_with: str | None = None
    halt: str | None = None
    #: The sync hooks that failed (and so failed open, or closed), in hook-id order. Not
    #: part of ``as_dict`` nor of equality: they explain the decision, they are not it.
    failed: tuple[HookFailure, ...] = attrs.field(default=(), eq=False)

    def as_dict(self) -> dict[str, Any]:
        """``{"behavior", "reason", "input", "context"}`` and the extras
        (``"permission"``, ``"continue_with"``, ``"halt"``), null keys left out."""
        return _decision_dict(self)


ALLOW = Decision()


def deny_line(result: HookResult) -> str:
    """How a merged deny names one hook's: ``hook 'ID' denied: REASON`` (or without the
    reason when it gave none), one line per denying hook."""
    reason = result.outcome.reason
    return f"hook {result.hook_id!r} denied: {reason}" if reason else f"hook {result.hook_id!r} denied"


def _decision_dict(decision: Outcome | Decision) -> dict[str, Any]:
    values = {
        "behavior": decision.behavior,
        "reason": decision.reason,
        "input": decision.input,
        "context": decision.context,
        "permission": decision.permission,
        "continue_with": decision.continue_with,
        "halt": decision.halt,
    }
    return {key: value for key, value in values.items() if value is not None}
