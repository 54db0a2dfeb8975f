"""Why each hook of a home did or did not fire for one envelope, and how the bus decided:
``hookbus explain`` and ``HookBus.explain``.

Everything here is data (``Explanation.as_json()``); the command line only formats it.
For each hook of the home: whether it matched, and if not, why (the kill switch, the
recursion guard, a load error, disabled, another event, or the matcher with the field and
value it was tried on); for the matched ones, what each said; then how the resolver merged
them and the final decision. A dry run matches and runs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from hookbus.decision import Decision, Outcome
from hookbus.events import EVENTS
from hookbus.loader import failing_problems
from hookbus.registry import Snapshot

if TYPE_CHECKING:
    from hookbus.merge import Merged
    from hookbus.runners import Hook

    #: Runs the given hooks as an emit does, telling the list what it merged.
    Fire = Callable[[list[Hook], list[Merged]], Decision]

#: Why a hook did not fire, or how a matched one takes part.
MATCHED = "matched"
ASYNC = "async"
NOT_BLOCKING = "not blocking"
#: A shadow hook ("shadow": true): it runs and is recorded, and never enforces anything.
SHADOW = "shadow"
KILL_SWITCH = "kill switch"
RECURSION_GUARD = "recursion guard"
LOAD_ERROR = "load error"
DISABLED = "disabled"
OTHER_EVENT = "other event"
MATCHER = "matcher"
#: The host whose tool names a dialect hook's matcher is also tried on.
_DIALECT_HOSTS = {"claude-code": "Claude Code", "codex": "Codex CLI"}
#: The states in which a hook runs for the event.
RUNS = (MATCHED, ASYNC, NOT_BLOCKING, SHADOW)
#: What a shadow hook does, whatever else its spec says ("blocking", "on_error").
SHADOW_DETAIL = (
    "matched; shadow: never enforces; it runs and is recorded with what it would have said, but its "
    "answer (even a failure under its on_error) stays out of the decision, and an emit never waits for it"
)


@attrs.frozen
class RunTrace:
    """What one matched sync hook said when it ran, and what the bus made of it."""

    hook_id: str
    outcome: Outcome
    duration: float
    #: The bus's note: superseded, not applied, failed closed, denied by the input check.
    note: str | None = None


@attrs.frozen
class HookVerdict:
    """One hook of the home, for one envelope."""

    hook_id: str
    #: MATCHED, ASYNC, NOT_BLOCKING or SHADOW when it runs; else why not (KILL_SWITCH, ...).
    status: str
    #: The same, for people: ``matcher 'bash' did not match tool_name 'write_file'``.
    detail: str
    event: str | None = None
    matcher: str | None = None
    mode: str | None = None
    #: Whether its deny or rewrite takes effect: never for a shadow hook, whatever its spec.
    blocking: bool = False
    #: A shadow hook: it runs and is recorded, its decision never enters the merge.
    shadow: bool = False
    #: The hook's file is broken and its last good version is the one in effect.
    load_error: str | None = None
    run: RunTrace | None = None
    #: "user", "managed" or "builtin" (the home guard).
    tier: str = "user"
    #: The hook's action as its spec writes it (``{"cel": "tool_input..."}``), when its
    #: runner has ``shows_action = True``.
    action: Mapping[str, Any] | None = None

    @property
    def runs(self) -> bool:
        return self.status in RUNS

    def as_json(self) -> dict[str, Any]:
        """This verdict as JSON, with every secret masked (registered, or of a known
        shape; input included): it is a report of what the hook said, as its record is."""
        from hookbus.redaction import mask_value

        run = self.run
        document = {
            "id": self.hook_id,
            "tier": self.tier,
            "matched": self.runs,
            "status": self.status,
            "detail": self.detail,
            "event": self.event,
            "matcher": self.matcher,
            "mode": self.mode,
            "blocking": self.blocking,
            "shadow": self.shadow,
            "load_error": self.load_error,
            "action": None if self.action is None else dict(self.action),
            "result": None if run is None else {
                "decision": run.outcome.as_dict(),
                "answer": None if run.outcome.answer is None else answer_text(run.outcome.answer),
                "error": run.outcome.error,
                "duration_ms": round(run.duration * 1000, 3),
                "note": run.note,
            },
        }
        masked: dict[str, Any] = mask_value(document)
        return masked


@attrs.frozen
class Explanation:
    """The whole answer of ``hookbus explain``."""

    event: str
    #: The envelope field the matchers were tried on, and its value ("" when absent).
    field: str | None
    value: str | None
    hooks: tuple[HookVerdict, ...]
    dry_run: bool
    #: None for a dry run (nothing ran).
    decision: Decision | None
    #: How the hooks' decisions were merged, one line each.
    merge: tuple[str, ...] = ()
    #: The kill switch (it stops the user's hooks) or the recursion guard (every hook but
    #: the home guard), when one stopped them.
    guard: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The explanation as one JSON object, with every registered secret masked: the
        hooks' answers, the merge and the decision (its input too: here it is reported,
        not obeyed)."""
        from hookbus.redaction import mask_value

        document = {
            "event": self.event,
            "field": self.field,
            "value": self.value,
            "guard": self.guard,
            "dry_run": self.dry_run,
            "hooks": [verdict.as_json() for verdict in self.hooks],
            "merge": list(self.merge),
            "decision": None if self.decision is None else self.decision.as_dict(),
        }
        masked: dict[str, Any] = mask_value(document)
        return masked


#: How much of a data action's answer ``explain`` shows.
MAX_ANSWER_CHARS = 2_000


def answer_text(value: Any) -> str:
    """A data action's answer as JSON text, keys sorted (a CEL map has no order of its own,
    and the same value should read the same), cut to MAX_ANSWER_CHARS."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):  # keys that do not sort, a value nested deep
        from hookbus.deepjson import dumps_strict

        try:
            text = dumps_strict(value, (", ", ": "))
        except (TypeError, ValueError):  # past MAX_NESTING, or what JSON cannot write
            text = f"[a {type(value).__name__} hookbus cannot write as JSON]"
    return text if len(text) <= MAX_ANSWER_CHARS else text[: MAX_ANSWER_CHARS - 3] + "..."


def match_verdicts(snapshot: Snapshot, event: str, envelope: Mapping[str, Any]) -> tuple[tuple[HookVerdict, ...], str | None]:
    """A verdict for every hook of ``snapshot`` (valid or not) on ``event``, in id order,
    and the guard that stopped them all, if any. The same rules as ``HookBus.emit``."""
    info = EVENTS[event]
    field = info.matcher_field
    value = _field_value(envelope, field)
    guard = None
    settings = snapshot.settings
    reason = settings.disabled_reason
    managed_off = None if settings.managed_hooks_feature else 'the managed settings.json has "features": {"hooks": false}'
    recursion = None
    if envelope.get("origin") == "vix":
        recursion = f'{RECURSION_GUARD}: the envelope has "origin": "vix" (a thread vix started); no hook fires there'
    if reason is not None:
        guard = f"{KILL_SWITCH}: {reason}; no hook of yours fires"
    elif recursion is not None:
        guard = recursion
    stopped = {
        "user": guard,
        "managed": recursion or (f"{KILL_SWITCH}: {managed_off}; no managed hook fires" if managed_off else None),
        "builtin": None,
    }
    kept = {problem.hook_id: problem for problem in snapshot.problems if problem.kept_last_good and problem.hook_id}
    failing = failing_problems(snapshot)
    verdicts: dict[str, HookVerdict] = {}
    for hook_id, hook in snapshot.every_hook.items():
        problem = kept.get(hook_id)
        verdict = _verdict(hook, event, field, value, stopped[hook.tier], None if problem is None else str(problem))
        if hook_id in failing:
            # Loaded, so that its on_error decides; matched, it would look as if it could decide.
            said = "; ".join(str(problem) for problem in failing[hook_id])
            verdict = attrs.evolve(verdict, detail=f"{verdict.detail} (it will fail when it runs: {said})")
        verdicts[hook_id] = verdict
    for problem in snapshot.problems:
        hook_id = problem.hook_id or problem.path
        if hook_id not in verdicts:
            verdicts[hook_id] = HookVerdict(hook_id, LOAD_ERROR, f"{LOAD_ERROR}: {problem}", load_error=str(problem))
    return tuple(verdicts[hook_id] for hook_id in sorted(verdicts)), guard


def _field_value(envelope: Mapping[str, Any], field: str | None) -> str | None:
    if field is None:
        return None
    value = envelope.get(field)
    return value if isinstance(value, str) else ""


def _verdict(hook: Hook, event: str, field: str | None, value: str | None, guard: str | None, kept: str | None) -> HookVerdict:
    spec = hook.spec
    common: dict[str, Any] = {
        "event": hook.event, "matcher": spec.trigger.matcher, "mode": spec.mode, "blocking": spec.blocking and not spec.shadow,
        "shadow": spec.shadow, "load_error": kept, "tier": hook.tier,
        # Only where its runner says the action is shown (a CEL expression, a Rego query):
        # another's may hold a secret (an http hook's headers), which has no place here.
        "action": {spec.action_key: spec.action} if getattr(hook.runner, "shows_action", False) else None,
    }
    last_good = f" (its file is broken, so its last good version is in effect: {kept})" if kept else ""
    if guard is not None:
        status, detail = guard.split(":", 1)[0], guard
    elif not spec.enabled:
        status, detail = DISABLED, f'{DISABLED}: "enabled": false'
    elif hook.event != event:
        status, detail = OTHER_EVENT, f"{OTHER_EVENT}: it is a {hook.event} hook"
    elif field is not None and value is not None and not hook.matcher.matches(value):
        shown = f"{field} {value!r}" if value else f"no {field} in the envelope"
        matcher = spec.trigger.matcher
        dialect = f" (a {spec.dialect} hook: tried on vixd's names and {_DIALECT_HOSTS.get(spec.dialect, spec.dialect)}'s)" if spec.dialect else ""
        status, detail = MATCHER, f"{MATCHER} {matcher!r} did not match {shown}{dialect}"
    elif not hook.is_sync:
        status, detail = ASYNC, "matched; async: runs in the background and cannot change the decision"
    elif spec.shadow:
        status, detail = SHADOW, SHADOW_DETAIL
    elif hook.tier == "builtin":
        status, detail = MATCHED, "matched; the home guard: it denies a call that would write into the home or the managed directory"
    elif not spec.blocking:
        can_block = EVENTS[event].can_block
        why = 'not "blocking": true' if can_block else f"{event} cannot block"
        status, detail = NOT_BLOCKING, f"matched; sync, {why}: it can add context but not deny or rewrite"
    else:
        status, detail = MATCHED, "matched; sync, blocking: it can deny or rewrite"
    return HookVerdict(hook.id, status, detail + last_good, **common)


def merge_lines(decision: Decision, traces: Sequence[RunTrace]) -> tuple[str, ...]:
    """How ``decision`` came out of the hooks' answers, for people."""
    lines: list[str] = []
    if decision.behavior == "deny":
        if decision.denied_by:
            lines.append(f"deny wins: denied by {_ids(decision.denied_by)}")
        else:
            lines.append(f"deny wins: {decision.reason}")
    elif decision.behavior == "modify":
        lines.append(f"modify wins: the input rewritten by {decision.modified_by!r}")
    elif decision.behavior == "context":
        lines.append("context: no hook denied or rewrote; their context is passed on")
    else:
        lines.append("allow: no hook denied, rewrote or added context")
    for trace in traces:
        if trace.note:
            lines.append(f"{trace.hook_id!r}: {trace.note}")
        elif trace.outcome.error is not None:
            lines.append(f"{trace.hook_id!r} failed open: {trace.outcome.error}")
    contributors = [trace.hook_id for trace in traces if trace.outcome.context and not trace.note]
    if contributors and decision.context:
        lines.append(f"context from {_ids(contributors)}")
    if decision.permission:
        lines.append(f"permission: {decision.permission}")
    if decision.continue_with:
        lines.append("continue_with: the agent goes on")
    if decision.halt:
        lines.append("halt: the turn ends")
    return tuple(lines)


def _ids(hook_ids: Sequence[str]) -> str:
    return ", ".join(repr(hook_id) for hook_id in hook_ids)


def explain(snapshot: Snapshot, event: str, envelope: Mapping[str, Any], dry_run: bool, fire: Fire) -> Explanation:
    """The Explanation of ``envelope`` on ``event``: the verdicts from ``snapshot``; unless
    ``dry_run``, the hooks that match run through ``fire`` and their answers are kept."""
    from hookbus.decision import ALLOW

    if event not in EVENTS:
        from hookbus.errors import UnknownEventError
        from hookbus.eventnames import unknown_event_message

        raise UnknownEventError(unknown_event_message(event))
    verdicts, guard = match_verdicts(snapshot, event, envelope)
    field = EVENTS[event].matcher_field
    value = _field_value(envelope, field)
    if dry_run:
        return Explanation(event, field, value, verdicts, True, None, guard=guard)
    every_hook = snapshot.every_hook
    hooks = [every_hook[verdict.hook_id] for verdict in verdicts if verdict.runs]
    merged: list[Merged] = []
    decision = fire(hooks, merged) if hooks else ALLOW
    traces = [
        RunTrace(hook.id, outcome, duration, batch.notes.get(hook.id))
        for batch in merged
        for hook, outcome, _, duration in batch.runs
    ]
    by_id = {trace.hook_id: trace for trace in traces}
    verdicts = tuple(attrs.evolve(verdict, run=by_id.get(verdict.hook_id)) for verdict in verdicts)
    return Explanation(event, field, value, verdicts, False, decision, merge_lines(decision, traces), guard)
