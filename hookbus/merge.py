"""From what the sync hooks of an emit said to the one Decision, and each hook's note.

In order: a failed hook fails open, or with ``"on_error": "deny"`` closed; a hook that is
not blocking (or an event that cannot block) has its deny or rewrite demoted to its
context; extras an event has no use for are dropped; the resolver plugin merges; the
embedder's input check may deny a rewritten input; a modify that lost says to what. The
notes say each of these in the hook's record. Last, what leaves hookbus is masked: a
registered secret a hook said (a fail-closed deny's reason is its stderr) reaches no host,
model, terminal or client.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from hookbus.decision import ALLOW, FAILURES, Decision, HookFailure, HookResult, Outcome, deny_line
from hookbus.errors import PluginError
from hookbus.events import CONTINUE_EVENTS, EVENTS, PERMISSION_EVENTS
from hookbus.records import RunRecord, envelope_tool_name, utc_timestamp
from hookbus.redaction import has_secrets, redact, redact_decision, redact_outcome
from hookbus.reporting import ReportOnce

if TYPE_CHECKING:
    import pluggy

    from hookbus.plugins import PluginInfo
    from hookbus.runners import Hook

logger = logging.getLogger("hookbus")

#: One hook's run: the hook, what it said, when it started (RFC 3339), how long it took (s).
Run = tuple["Hook", Outcome, str, float]

FAILED_CLOSED_NOTE = 'failed closed ("on_error": "deny")'
NOT_BLOCKING_NOTE = 'not applied: the hook is not blocking (set "mode": "sync", "blocking": true)'
CANNOT_BLOCK_NOTE = "not applied: {event} cannot block or rewrite; only context from it is used"
#: The note on the record of a hook that hookbus could not run or hear (``undecided``).
UNDECIDED_NOTE = "not run: hookbus could not decide, so it failed as its on_error says"


@attrs.frozen
class Merged:
    """The decision of an emit and how each run took part."""

    decision: Decision
    #: The runs as they counted (a failed closed one as its deny), in hook-id order.
    runs: tuple[Run, ...]
    #: What became of each hook's answer, by hook id, when it was not simply taken.
    notes: Mapping[str, str]

    def records(self, event: str, tool_name: str | None = None) -> list[RunRecord]:
        """One record per run, what the hook said and the note on it, and the call
        (``tool_name``) it said it of. The home guard's allows are not recorded: it runs on
        every guarded tool call, and an allow there says nothing."""
        return [
            RunRecord(
                at=at, hook_id=hook.id, event=event, mode="sync", status=outcome.behavior, duration=duration,
                error=outcome.error, decision=outcome.as_dict(), note=joined_note(outcome.note, self.notes.get(hook.id)),
                tool_name=tool_name, tier=hook.tier,
            )
            for hook, outcome, at, duration in self.runs
            if hook.tier != "builtin" or outcome.behavior != "allow"
        ]


@attrs.frozen
class Undecided:
    """What ``Decider.undecided`` makes of an emit hookbus could not decide."""

    #: The enforcing sync hooks' failures merged; None when there were none (allow).
    merged: Merged | None
    #: The shadow hooks' runs, each failed, to be recorded beside the decision.
    shadows: tuple[Run, ...]
    #: The async hooks' records.
    unrun: tuple[RunRecord, ...]


def joined_note(run_note: str | None, merge_note: str | None) -> str | None:
    """A record's note: what the run said of itself (where it ran), then what became of
    its answer in the merge."""
    if run_note is None or merge_note is None:
        return run_note or merge_note
    return f"{run_note}; {merge_note}"


class Decider:
    """Merges runs into a Decision through the resolver plugin and the input check."""

    def __init__(self, plugins: pluggy.PluginManager, plugin_infos: Sequence[PluginInfo]) -> None:
        self._plugins = plugins
        self._resolver = _make_resolver(plugins, plugin_infos)
        self._report = ReportOnce()

    def refresh(self, plugin_infos: Sequence[PluginInfo]) -> None:
        """Find the resolver again: the plugins changed."""
        self._resolver = _make_resolver(self._plugins, plugin_infos)

    def decide(self, event: str, envelope: Mapping[str, Any], runs: Sequence[Run]) -> Merged:
        # ``runs`` are in hook-id order already: EventIndex.match returns them so.
        notes: dict[str, str] = {}
        counted = tuple(_fail_closed(run, notes) if run[1].error is not None else run for run in runs)
        results = []
        for hook, outcome, _, _ in counted:
            if not hook.spec.blocking and outcome.behavior in ("deny", "modify"):
                can_block = EVENTS[event].can_block
                notes[hook.id] = NOT_BLOCKING_NOTE if can_block else CANNOT_BLOCK_NOTE.format(event=event)
                outcome = attrs.evolve(outcome, behavior="context" if outcome.context else "allow", reason=None, input=None)
            if outcome.permission is not None or outcome.continue_with is not None:
                outcome = _usable_extras(event, hook, outcome, notes)
            results.append(HookResult(hook.id, outcome))
        decision = self._resolve(event, results)
        if any(hook.tier != "user" for hook, _, _, _ in counted):
            decision = _managed_floor(decision, counted, results)
        if decision.behavior == "modify" and decision.input is not None and EVENTS[event].rewrites_tool_input:
            decision = self._check_input(event, envelope, decision, notes)
        for hook, outcome, _, _ in counted:
            if outcome.behavior == "modify" and hook.id not in notes and hook.id != decision.modified_by:
                winner = decision.modified_by
                notes[hook.id] = f"superseded by the modify of hook {winner!r}" if winner else f"superseded by {decision.behavior}"
        failed = tuple(
            HookFailure(hook.id, outcome.error, outcome.failure or "error", closed=outcome.behavior == "deny")
            for hook, outcome, _, _ in counted
            if outcome.error is not None
        )
        if failed:
            decision = attrs.evolve(decision, failed=failed)
        merged = Merged(decision, counted, notes)
        return _masked(merged) if has_secrets() else merged

    def undecided(self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], why: str) -> Undecided:
        """An emit whose hooks hookbus cannot run (``HookBus.undecided``): none runs, and
        each counts as failed, ``why``, under its own on_error. The enforcing ones are
        merged (None when there are none); a shadow hook's failure never enforces, and an
        async hook's is only recorded."""
        at = utc_timestamp()
        runs: list[Run] = []
        shadows: list[Run] = []
        unrun: list[RunRecord] = []
        for hook in hooks:
            if hook.is_sync:
                (shadows if hook.spec.shadow else runs).append((hook, Outcome.fail_open(why, failure="hookbus"), at, 0.0))
            else:
                unrun.append(
                    RunRecord(
                        at=at, hook_id=hook.id, event=event, mode="async", status="error", duration=0.0, error=why,
                        decision={"behavior": "allow"}, note=UNDECIDED_NOTE, tool_name=envelope_tool_name(envelope), tier=hook.tier,
                    )
                )
        merged = None
        if runs:
            merged = self.decide(event, envelope, runs)
            merged = attrs.evolve(merged, notes={**{hook.id: UNDECIDED_NOTE for hook, _, _, _ in runs}, **merged.notes})
        return Undecided(merged, tuple(shadows), tuple(unrun))

    def _resolve(self, event: str, results: list[HookResult]) -> Decision:
        try:
            decision = self._resolver(event, results)
        except Exception as exc:
            self._report.failed("resolver", f"the resolver raised {type(exc).__name__}: {exc}; failing open")
            return ALLOW
        if not isinstance(decision, Decision):
            self._report.failed("resolver", f"the resolver returned {decision!r}; failing open")
            return ALLOW
        self._report.succeeded("resolver")
        return decision

    def _check_input(self, event: str, envelope: Mapping[str, Any], decision: Decision, notes: dict[str, str]) -> Decision:
        assert decision.input is not None
        try:
            reason = self._plugins.hook.hookbus_check_input(event=event, envelope=envelope, new_input=decision.input)
        except Exception as exc:
            logger.exception("hookbus_check_input raised")
            reason = f"the input check failed ({type(exc).__name__}: {exc})"
        if not reason:
            return decision
        modifier = decision.modified_by or "?"
        notes[modifier] = f"rewritten input denied by the input check: {reason}"
        return Decision(
            "deny", reason=f"input rewritten by hook {modifier!r} was denied: {reason}", context=decision.context, denied_by=(modifier,)
        )


def _managed_floor(decision: Decision, counted: Sequence[Run], results: Sequence[HookResult]) -> Decision:
    """``decision`` with what the user cannot weaken put back, from what the managed hooks
    (and the home guard) said themselves, whatever resolver plugin merged and whatever it
    claims: each of their denies stands, with its own reason; a managed modify wins over
    the user's, with the managed hook's own input; their context, an ``ask``, a ``halt``
    and a ``continue_with`` are kept. The user's hooks may still make it stricter: a deny
    of theirs wins over a managed modify."""
    protected = [result.outcome for (hook, _, _, _), result in zip(counted, results) if hook.tier != "user"]
    if all(outcome == _SAID_NOTHING for outcome in protected):
        return decision  # the home guard's allow, on every guarded call: nothing to put back
    ids = [result.hook_id for (hook, _, _, _), result in zip(counted, results) if hook.tier != "user"]
    denied = [HookResult(hook_id, outcome) for hook_id, outcome in zip(ids, protected) if outcome.behavior == "deny"]
    if denied:
        said = [deny_line(result) for result in denied]
        reason = decision.reason if decision.behavior == "deny" else None
        if not reason or not all(line in reason for line in said):
            reason = "\n".join([*said, *([reason] if reason and reason not in said else [])])
        others = tuple(hook_id for hook_id in decision.denied_by if hook_id not in {result.hook_id for result in denied})
        decision = Decision(
            "deny", reason=reason, context=decision.context, denied_by=(*(result.hook_id for result in denied), *others)
        )
    elif decision.behavior != "deny":
        modified = sorted((hook_id, outcome) for hook_id, outcome in zip(ids, protected) if outcome.behavior == "modify")
        if modified:
            winner, outcome = modified[0]
            decision = attrs.evolve(decision, behavior="modify", input=outcome.input, modified_by=winner, reason=None)
    return _with_said(decision, protected)


#: What a protected hook that had nothing to say said (the home guard's usual allow).
_SAID_NOTHING = Outcome()


def _with_said(decision: Decision, outcomes: Sequence[Outcome]) -> Decision:
    """``decision`` with the protected hooks' context, ask, halt and continue_with, where
    the resolver left them out."""
    changes: dict[str, Any] = {
        name: _joined(getattr(decision, name), [getattr(outcome, name) for outcome in outcomes])
        for name in ("context", "halt", "continue_with")
    }
    if decision.behavior != "deny" and decision.permission != "ask" and any(outcome.permission == "ask" for outcome in outcomes):
        changes["permission"] = "ask"
        asked = [outcome.reason for outcome in outcomes if outcome.permission == "ask" and outcome.reason]
        if asked:
            changes["reason"] = "\n".join(asked)
    if changes["halt"] is not None:
        changes["continue_with"] = None  # the turn ends: there is nothing to go on with
    changed = {name: value for name, value in changes.items() if value != getattr(decision, name)}
    return attrs.evolve(decision, **changed) if changed else decision


def _joined(current: str | None, said: Sequence[str | None]) -> str | None:
    """``current`` with each text of ``said`` that it does not hold yet, as the resolver
    joins them (a blank line between)."""
    for text in said:
        if text and (current is None or text not in current):
            current = text if current is None else f"{current}\n\n{text}"
    return current


def _masked(merged: Merged) -> Merged:
    """``merged`` with every registered secret masked where it leaves hookbus: the decision
    (the host, the model, ``hookbus emit``, a server's answer) and the runs and notes
    (``hookbus explain``, the records). Only called when a secret is registered."""
    runs = tuple((hook, redact_outcome(outcome), at, duration) for hook, outcome, at, duration in merged.runs)
    notes = {hook_id: redact(note) for hook_id, note in merged.notes.items()}
    return Merged(redact_decision(merged.decision), runs, notes)


def _usable_extras(event: str, hook: Hook, outcome: Outcome, notes: dict[str, str]) -> Outcome:
    """``outcome`` without the extras ``event`` has no use for, and a note saying so:
    approve and ask need a blocking hook of PreToolUse or PermissionRequest, as a deny
    does; continue_with needs Stop or SubagentStop."""
    dropped: list[str] = []
    if outcome.permission is not None and (event not in PERMISSION_EVENTS or not hook.spec.blocking):
        dropped.append(f"{outcome.permission} (it needs a blocking hook of {' or '.join(PERMISSION_EVENTS)})")
        outcome = attrs.evolve(outcome, permission=None, reason=None if outcome.behavior != "deny" else outcome.reason)
    if outcome.continue_with is not None and event not in CONTINUE_EVENTS:
        dropped.append(f"continue_with (only {' and '.join(CONTINUE_EVENTS)} can go on)")
        outcome = attrs.evolve(outcome, continue_with=None)
    if dropped:
        note = "not applied: " + "; ".join(dropped)
        notes[hook.id] = f"{notes[hook.id]}; {note}" if hook.id in notes else note
    return outcome


def _fail_closed(run: Run, notes: dict[str, str]) -> Run:
    """A failed hook with ``"on_error": "deny"``: its fire is a deny that says how it
    failed. Any other failed hook fails open, as the spec says."""
    hook, outcome, at, duration = run
    if hook.spec.on_error != "deny" or outcome.behavior != "allow":
        return run
    how = FAILURES.get(outcome.failure or "error", FAILURES["error"])
    closed = attrs.evolve(outcome, behavior="deny", reason=f"failed closed: the hook {how} ({outcome.error})")
    notes[hook.id] = FAILED_CLOSED_NOTE
    return hook, closed, at, duration


def _make_resolver(plugins: pluggy.PluginManager, plugin_infos: Sequence[PluginInfo]) -> Callable[[str, list[HookResult]], Any]:
    """The resolver to call per emit: a lone plain implementation directly (pluggy's call
    machinery costs more than the merge itself), else through pluggy.

    With none (the built-in blocked, say), one that raises: each emit with sync hooks then
    fails open through ``_resolve``, reported once, as when a resolver breaks."""
    implementations = plugins.hook.hookbus_resolve.get_hookimpls()
    if not implementations:
        info = next((info for info in plugin_infos if info.name == "resolver"), None)
        if info is not None and info.blocked:
            why, fix = f"is {info.blocked}", "take 'resolver' out of HOOKBUS_DISABLE_PLUGINS"
        elif info is not None and info.error:
            why, fix = f"failed to load ({info.error})", "fix or reinstall hookbus"
        else:
            why, fix = "is not installed", "reinstall hookbus"
        message = (
            f"no resolver plugin: the built-in 'resolver' {why}, so every emit allows, "
            f"whatever its sync hooks decide; {fix}, or install a plugin that implements "
            "hookbus_resolve (`hookbus plugins` lists them)"
        )
        logger.warning("%s", message)

        def unresolved(event: str, results: list[HookResult]) -> Decision:
            raise PluginError(message)

        return unresolved
    if len(implementations) == 1 and not (implementations[0].hookwrapper or implementations[0].wrapper):
        function, names = implementations[0].function, set(implementations[0].argnames)
        if names == {"event", "results"}:
            return lambda event, results: function(event=event, results=results)
        if names == {"results"}:
            return lambda event, results: function(results=results)
    hook = plugins.hook.hookbus_resolve
    return lambda event, results: hook(event=event, results=results)
