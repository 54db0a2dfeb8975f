"""Firing the hooks an emit matched: the dispatcher runs them, the decider merges what
they said, the recorders record every run (``Firing``).

- The home guard (a built-in hook) runs inline, on the emitting thread; async hooks are
  submitted; sync hooks run under their deadlines; a Stop's answer is remembered.
- Shadow hooks (``ShadowBook``) run beside the enforcing ones and never count: what each
  would have said is recorded with the behavior the enforcing hooks reached, once both are
  known. One hookbus cut short, or never started, said nothing, and is recorded as an
  error with no decision, so that it is never taken for what the hook would have said.
- An emit hookbus cannot decide (``undecided``) runs nothing: each hook fails under its
  own on_error (``Decider.undecided``), and is recorded so.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from hookbus.decision import ALLOW
from hookbus.dialects.stopguard import StopMemory
from hookbus.dispatch import Dispatcher
from hookbus.envelope import encode_envelope
from hookbus.errors import EnvelopeTooDeep
from hookbus.events import CONTINUE_EVENTS
from hookbus.merge import Merged, joined_note
from hookbus.policy.guardhook import run_inline
from hookbus.records import RunRecord, emit_record, envelope_tool_name

if TYPE_CHECKING:
    from hookbus.decision import Decision
    from hookbus.home import Home
    from hookbus.merge import Decider, Run
    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.recorders import Recorders
    from hookbus.runners import Hook
    from hookbus.settings import Settings

#: The note on the record of a shadow hook that hookbus stopped, or did not start: it said
#: nothing, so there is nothing to compare with the decision enforced.
SHADOW_UNHEARD_NOTE = "shadow: it gave no answer (see its error), so there is nothing to compare"
#: The same for an emit hookbus could not decide (``HookBus.undecided``): a shadow hook
#: never enforces, not even its on_error.
UNDECIDED_SHADOW_NOTE = "not run: hookbus could not decide; a shadow hook never enforces, not even its on_error"


class Firing:
    """One bus's way from the hooks an emit matched to its Decision, every run recorded."""

    def __init__(
        self, home: Home, async_workers: int, decider: Decider, recorders: Recorders, send_prompt: Callable[[PromptRequest], PromptResult]
    ) -> None:
        self._decider = decider
        self._recorders = recorders
        #: How the bus answers prompts (the plugins' ``hookbus_run_prompt``).
        self.send_prompt = send_prompt
        #: How each Stop was answered, for hosts that do not say (``stop_hook_active``).
        self._stops = StopMemory()
        self.dispatcher = self._dispatcher = Dispatcher(home, async_workers, recorders.record, send_prompt, self._stops)
        self._shadows = ShadowBook(self._dispatcher, decider.decide, recorders.record)

    def fire(
        self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], settings: Settings, merged: list[Merged] | None = None
    ) -> Decision:
        """Run ``hooks`` on ``envelope`` and merge one Decision. ``merged``: ``explain``'s
        list, which gets how the hooks merged (and what each shadow hook would have said)."""
        # Encoded once, here, for every hook it fires: an envelope that cannot be JSON is
        # the caller's error to hear about, not something a worker thread dies of later.
        try:
            full, payload = encode_envelope(event, envelope)
        except EnvelopeTooDeep as exc:
            return self.undecided(event, envelope, hooks, str(exc), merged)
        sync_hooks = []
        shadows = None
        guarded: Run | None = None
        for hook in hooks:  # one pass, no comprehension: an async fire is on the agent's clock
            if hook.is_sync:
                if hook.spec.shadow:
                    shadows = [*(shadows or ()), hook]
                elif hook.tier == "builtin":
                    guarded = run_inline(hook, envelope)
                else:
                    sync_hooks.append(hook)
            else:
                self._dispatcher.submit_async(hook, event, full, payload, settings)
        # Started beside the enforcing hooks, never waited for: each is recorded once it is
        # done and the enforced decision is known.
        shadow_fire = None if shadows is None or merged is not None else self._shadows.start(shadows, event, envelope, full, payload, settings)
        decision = ALLOW
        try:
            if not sync_hooks and (guarded is None or (guarded[1].behavior == "allow" and merged is None)):
                if event in CONTINUE_EVENTS:
                    self._stops.answered(event, envelope, ALLOW)
            else:
                with self._dispatcher.emitting() as cancel:
                    runs = self._dispatcher.run_sync(sync_hooks, event, full, payload, settings, cancel) if sync_hooks else []
                    if guarded is not None:
                        runs = [guarded, *runs]
                    decision = self._settle(event, envelope, self._decider.decide(event, envelope, runs), merged)
                    if settings.record_envelopes and merged is None:
                        self._recorders.record_emit(emit_record(event, envelope, decision.as_dict(), [hook.id for hook in sync_hooks]))
        finally:
            if shadow_fire is not None:
                shadow_fire.enforced(decision)
        if shadows is not None and merged is not None:  # explain: what each would have said
            merged.append(self._shadows.explain(shadows, event, envelope, full, payload, settings, decision))
        return decision

    def undecided(
        self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], why: str, merged: list[Merged] | None = None
    ) -> Decision:
        """Run none of ``hooks``: each fails, ``why``, under its own on_error, and is recorded."""
        decision: Decision | None = None
        with self._dispatcher.emitting():
            undecided = self._decider.undecided(event, envelope, hooks, why)
            try:
                for record in undecided.unrun:
                    self._recorders.record(record)
                decision = ALLOW if undecided.merged is None else self._settle(event, envelope, undecided.merged, merged)
            finally:
                for shadow in undecided.shadows:  # never enforcing, not even their on_error
                    self._shadows.unheard(event, envelope, shadow, None if decision is None else decision.behavior, UNDECIDED_SHADOW_NOTE)
        return decision

    def _settle(self, event: str, envelope: Mapping[str, Any], outcome: Merged, merged: list[Merged] | None) -> Decision:
        """Record every run of an emit, tell ``explain`` how it merged, remember how a stop
        was answered: then the decision is the caller's."""
        for record in outcome.records(event, envelope_tool_name(envelope)):
            self._recorders.record(record)
        if merged is not None:
            merged.append(outcome)
        self._stops.answered(event, envelope, outcome.decision)
        return outcome.decision


class ShadowBook:
    """Starts the shadow hooks of an emit beside the enforcing ones, and records each once
    its run and the decision enforced are both known."""

    def __init__(
        self, dispatcher: Dispatcher, decide: Callable[[str, Mapping[str, Any], Sequence[Run]], Merged], record: Callable[[RunRecord], RunRecord]
    ) -> None:
        self._dispatcher = dispatcher
        self._decide = decide
        self._record = record

    def start(
        self, hooks: Sequence[Hook], event: str, envelope: Mapping[str, Any], full: Mapping[str, Any], payload: bytes, settings: Settings
    ) -> ShadowFire:
        """Start ``hooks`` now, never waited for; ``ShadowFire.enforced`` records them."""
        fire = ShadowFire(self, event, envelope)
        fire.unstarted = self._dispatcher.start_shadows(hooks, event, full, payload, settings, fire.settle)
        return fire

    def explain(
        self, hooks: Sequence[Hook], event: str, envelope: Mapping[str, Any], full: Mapping[str, Any], payload: bytes,
        settings: Settings, decision: Decision,
    ) -> Merged:
        """For ``explain``: run ``hooks`` and wait for them, record each, and say what each
        would have said beside ``decision``."""
        with self._dispatcher.emitting() as cancel:
            runs = self._dispatcher.run_sync(hooks, event, full, payload, settings, cancel)
        # Killed by interrupt(): what it would have said is not known.
        settled = [self.record(event, envelope, run, decision.behavior, not (cancel.cancelled and run[1].error)) for run in runs]
        return Merged(decision, tuple(run for run, _ in settled), {run[0].id: note for run, note in settled})

    def record(self, event: str, envelope: Mapping[str, Any], run: Run, enforced: str | None, heard: bool = True) -> tuple[Run, str]:
        """A shadow hook's run as it would have counted (a fail-closed failure as its deny),
        recorded with the enforced behavior; and the note that says so. Not ``heard``: it
        said nothing (``unheard``)."""
        if not heard:
            return self.unheard(event, envelope, run, enforced)
        counted = self._decide(event, envelope, [run])
        as_counted = counted.runs[0]
        hook, outcome, at, duration = as_counted
        note = f"shadow: would have said {outcome.behavior}" + (f" ({outcome.reason})" if outcome.reason else "") + f"; not in the merge (enforced: {enforced or 'unknown'})"
        self._record(
            RunRecord(
                at=at, hook_id=hook.id, event=event, mode="sync", status=outcome.behavior, duration=duration,
                error=outcome.error, decision=outcome.as_dict(), note=joined_note(outcome.note, counted.notes.get(hook.id)),
                tool_name=envelope_tool_name(envelope), shadow=True, enforced=enforced, tier=hook.tier,
            )
        )
        return as_counted, note

    def unheard(
        self, event: str, envelope: Mapping[str, Any], run: Run, enforced: str | None, why: str = SHADOW_UNHEARD_NOTE
    ) -> tuple[Run, str]:
        """Record a shadow hook that said nothing (``why``) with the behavior enforced."""
        hook, outcome, at, duration = run
        note = f"{why}; not in the merge (enforced: {enforced or 'unknown'})"
        self._record(
            RunRecord(
                at=at, hook_id=hook.id, event=event, mode="sync", status="error", duration=duration,
                error=outcome.error, note=joined_note(outcome.note, note),
                tool_name=envelope_tool_name(envelope), shadow=True, enforced=enforced, tier=hook.tier,
            )
        )
        return run, note


class ShadowFire:
    """The shadow hooks of one emit: each waits (on its own thread) for the decision the
    enforcing hooks reach, set once in ``enforced``."""

    __slots__ = ("_book", "_event", "_envelope", "_known", "_decision", "unstarted")

    #: How long a shadow hook's record waits for the decision at most (it is set in a finally).
    WAIT_SECONDS = 3600.0

    def __init__(self, book: ShadowBook, event: str, envelope: Mapping[str, Any]) -> None:
        self._book = book
        self._event = event
        self._envelope = envelope
        self._known = threading.Event()
        self._decision: Decision | None = None
        #: Runs of shadow hooks that did not start, and whether they were heard: recorded
        #: once the decision is known (recording them at start would wait for it).
        self.unstarted: list[tuple[Run, bool]] = []

    def enforced(self, decision: Decision) -> None:
        """The decision is known: every shadow hook may be recorded."""
        self._decision = decision
        self._known.set()
        for run, heard in self.unstarted:  # shadow hooks that did not start: recorded, and why
            self._book.record(self._event, self._envelope, run, decision.behavior, heard)

    def settle(self, run: Run, heard: bool, wait: bool) -> None:
        """A started shadow hook ended (``Dispatcher.start_shadows``'s ``settle``)."""
        self._known.wait(self.WAIT_SECONDS if wait else 0.0)
        decision = self._decision
        self._book.record(self._event, self._envelope, run, decision.behavior if decision is not None else None, heard)
