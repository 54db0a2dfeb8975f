"""HookBus: what the embedding daemon holds. ``emit`` per event, ``close`` at the end.

A facade over four parts, and data goes one way through them: the snapshot publisher
(``publisher``: loading, watching, generations) gives the hooks of an event; the dispatcher
(``dispatch``: sync and async runs, deadlines, cancellation) runs them; the decider
(``merge``: the resolver and the input check) makes one Decision of what they said; the
recorders (``recorders``) get every fire.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from os import PathLike
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from hookbus.decision import ALLOW, Decision, Outcome
from hookbus.dispatch import RUNNER_GRACE_SECONDS, Dispatcher
from hookbus.envelope import check_envelope, encode_envelope
from hookbus.errors import BusClosedError, EnvelopeTooDeep, PluginError, Problem, ReadOnlyBusError
from hookbus.events import CONTINUE_EVENTS
from hookbus.home import Home
from hookbus.merge import Decider, Merged, Run, joined_note
from hookbus.plugins import PluginSet, call_each, config_problems
from hookbus.prompts import prompt_sender
from hookbus.policy.guardhook import HomeGuardRunner
from hookbus.policy.tiers import ManagedTier
from hookbus.publisher import SnapshotPublisher
from hookbus.recorders import Recorders
from hookbus.records import EmitRecord, RunRecord, emit_record, envelope_tool_name, utc_timestamp
from hookbus.redaction import install_log_redaction
from hookbus.runners import RunnerTable
from hookbus.dialects.stopguard import StopMemory
from hookbus.workers import finished as _done

if TYPE_CHECKING:
    from concurrent.futures import Future

    from hookbus.explain import Explanation
    from hookbus.plugins import PluginInfo, PluginPolicy
    from hookbus.registry import Snapshot
    from hookbus.settings import Settings
    from hookbus.runners import Hook

logger = logging.getLogger("hookbus")

#: The note on the record of a hook that hookbus could not run or hear (``undecided``).
UNDECIDED_NOTE = "not run: hookbus could not decide, so it failed as its on_error says"
#: The same for a shadow hook, which never enforces, not even its on_error.
UNDECIDED_SHADOW_NOTE = "not run: hookbus could not decide; a shadow hook never enforces, not even its on_error"
#: The note on the record of a shadow hook that hookbus stopped, or did not start: it said
#: nothing, so there is nothing to compare with the decision enforced.
SHADOW_UNHEARD_NOTE = "shadow: it gave no answer (see its error), so there is nothing to compare"
#: Default bound on how long ``close()`` lets async hooks finish before killing them.
SHUTDOWN_TIMEOUT_SECONDS = 10.0
class HookBus:
    """Finds the hooks of an event, runs them, merges one Decision, records every fire.

    ``with HookBus(home) as bus: bus.emit("PreToolUse", {...})``. Thread-safe: emit from
    as many threads as you like; ``close()`` once at the end.
    """

    def __init__(
        self,
        home: str | PathLike[str] | None = None,
        *,
        watch: bool = False,
        plugins: Sequence[object] = (),
        async_workers: int = 8,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT_SECONDS,
        read_only: bool = False,
    ) -> None:
        install_log_redaction()
        self.home = Home.resolve(home)
        self.async_workers = async_workers
        self.shutdown_timeout = shutdown_timeout
        self.runners = RunnerTable()
        managed = ManagedTier.from_environment(self.runners)
        # The managed tier, where one exists, says which plugins load (and the publisher
        # re-plugs when that changes while the bus runs).
        self._plugin_set = PluginSet(plugins, self.runners)
        self._plugin_set.adopt(managed.plugin_policy(read=True))
        self._plugins = self._plugin_set.manager
        # Without a resolver the bus still starts: list, log, plugins and validate need
        # none, and emit fails open (the spec's rule), saying why.
        self._decider = Decider(self._plugins, self.plugin_infos)
        self._recorders = Recorders(self._plugins, self.home, owner=self)
        self._stops = StopMemory()
        self._dispatcher = Dispatcher(self.home, async_workers, self._recorders.record, prompt_sender(self._plugins), self._stops)
        #: Run test and replay fires, by the variable their hooks get: made on the first.
        self._quiet_dispatchers: dict[str, Dispatcher] = {}
        #: Loads and reads, never writes: what a file's load error is goes to no
        #: state.json (where it would erase a running bus's last-good mark), and nothing
        #: fires (emit, trigger and explain refuse, unless explain is a dry run).
        self.read_only = read_only
        self._publisher = SnapshotPublisher(
            self.home, self.runners, self._check_config, _ignore_load_errors if read_only else self._recorders.load_errors,
            managed, self._replug,
        )
        self._closing = threading.Lock()
        self._closed = False
        call_each(self._plugins, "hookbus_startup", "start", bus=self)
        self._publisher.reload()
        if watch:
            self._publisher.watch()

    @property
    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin as ``hookbus plugins`` shows it: loaded, blocked or broken."""
        return list(self._plugin_set.infos)

    def _replug(self, policy: PluginPolicy) -> bool:
        """Load the plugins ``policy`` allows in place of those loaded (a managed directory
        appeared, moved or changed its ``"plugins"``); False when nothing changed."""
        try:
            changed = self._plugin_set.adopt(policy)
        except PluginError as exc:
            logger.error("the plugins could not be changed to what the managed directory allows: %s", exc)
            return True
        if changed:
            self._decider.refresh(self.plugin_infos)
        return changed

    def _check_config(self, settings: Settings, home_is_unsafe: bool) -> list[Problem]:
        # Nothing is read from an unsafe home (its own problem says why); recorders are
        # chosen all the same, so that what happens meanwhile is recorded.
        checked = [] if home_is_unsafe else config_problems(self._plugins, self.home, settings)
        return checked + self._recorders.select(settings, self.plugin_infos)

    # -- what is loaded ------------------------------------------------------------------

    def reload(self) -> Snapshot:
        """Re-read settings and every hook now, and swap the new snapshot in whole."""
        return self._publisher.reload()

    def wait_for_reload(self, since: int | None = None, timeout: float = 5.0) -> bool:
        """Wait until a reload newer than generation ``since`` is in effect (default: the
        generation now). Take ``since = bus.generation`` before changing files, then wait:
        False means nothing reloaded within ``timeout`` seconds."""
        return self._publisher.wait_for_reload(since, timeout)

    @property
    def snapshot(self) -> Snapshot:
        """The registry in effect now; immutable."""
        return self._publisher.snapshot

    @property
    def generation(self) -> int:
        """Incremented by every load; wait on it (``wait_for_reload``) instead of sleeping."""
        return self._publisher.snapshot.generation

    @property
    def problems(self) -> tuple[Problem, ...]:
        return self._publisher.snapshot.problems

    @property
    def watching(self) -> bool:
        return self._publisher.watching

    @property
    def active_recorders(self) -> tuple[str, ...]:
        """The recorder plugins that record and answer ``read_runs`` (settings "recorder")."""
        return self._recorders.active

    @property
    def managed_tier(self) -> str:
        """The managed directory this bus loads, as it was last read; ``""`` for none."""
        return self._publisher.managed.loaded_identity

    @property
    def plugin_manager(self) -> Any:
        return self._plugins

    @property
    def closed(self) -> bool:
        return self._closed

    # -- emitting ---------------------------------------------------------------------

    def emit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Decision:
        """Run the hooks of ``event`` and return the merged Decision.

        Async hooks are submitted and not waited for; sync hooks run in parallel, each
        under its own timeout, failing open. No hook matched: nothing is done at all.
        EnvelopeError (a HookBusError) when ``envelope`` is not a mapping, or a matched
        hook would need it as JSON and it cannot be encoded.
        """
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        if envelope.__class__ is not dict:
            envelope = check_envelope(envelope)
        assert envelope is not None
        found = self._publisher.matching(event, envelope)
        return ALLOW if found is None else self._fire(event, envelope, *found)

    def submit(
        self, event: str, envelope: Mapping[str, Any] | None = None, *, on_start: Callable[[float], None] | None = None
    ) -> Future[Decision]:
        """``emit`` without waiting: a Future of the Decision. It is done already when no
        sync hook matched (async ones are submitted, as by emit); otherwise the sync hooks
        run on a thread of their own, never queued behind other emits. What emit raises at
        once (UnknownEventError, EnvelopeError, BusClosedError), submit raises too.

        ``on_start(seconds)`` is called, on this thread, just before sync hooks start, with
        how long the emit may take (the longest timeout among them, and the grace the bus
        gives a runner past it); what it raises is raised, and nothing starts."""
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        checked = check_envelope(envelope)
        found = self._publisher.matching(event, checked)
        if found is None:
            return _allowed()
        hooks, settings = found
        # A shadow hook is never waited for: its timeout is no part of how long this takes.
        sync_timeouts = [hook.timeout for hook in hooks if hook.is_sync and not hook.spec.shadow]
        if not sync_timeouts:
            return _done(self._fire(event, checked, hooks, settings))  # only submits and starts
        if on_start is not None:
            # The bus stops waiting for any runner this long past its timeout (a built-in
            # one is done 0.35 s past it: a kill's grace and the pipes let go).
            on_start(max(sync_timeouts) + RUNNER_GRACE_SECONDS)
        try:
            return self._dispatcher.threads().submit(lambda: self._fire(event, checked, hooks, settings)).future
        except RuntimeError as exc:  # no thread left (another process of the user holds them)
            return _done(self._undecided(event, checked, hooks, f"no thread could be started to run the hooks ({exc})"))

    async def aemit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Decision:
        """``emit`` for asyncio: sync hooks run in a thread of their own, never on the loop
        (and never queued behind other emits, as the loop's default executor would)."""
        future = self.submit(event, envelope)
        if future.done():
            return future.result()
        import asyncio  # only asyncio embedders pay for importing it

        decision: Decision = await asyncio.wrap_future(future)
        return decision

    def explain(
        self, event: str, envelope: Mapping[str, Any] | None = None, *, dry_run: bool = False, undecided: str | None = None
    ) -> Explanation:
        """Why each hook of the home does or does not fire for ``envelope``, what each that
        ran said, and how they merged: an emit that reports itself (its fires are real and
        recorded), or with ``dry_run`` only the matching, running nothing. ``undecided``:
        as ``undecided(event, envelope, why)`` would, no hook runs and each that matches
        counts as failed for that reason."""
        from hookbus.explain import explain

        if self._closed:
            raise BusClosedError("explain on a closed HookBus")
        checked, snapshot = check_envelope(envelope), self._publisher.snapshot
        if undecided is not None:
            why = undecided
            return explain(snapshot, event, checked, dry_run, lambda hooks, merged: self._undecided(event, checked, hooks, why, merged))
        return explain(snapshot, event, checked, dry_run, lambda hooks, merged: self._fire(event, checked, hooks, snapshot.settings, merged))

    def _fire(
        self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], settings: Settings, merged: list[Merged] | None = None
    ) -> Decision:
        watcher = self._publisher.watcher
        if watcher is not None:
            watcher.ensure_running()
        if self._closed:  # close() may have begun since emit looked
            raise BusClosedError("emit on a closed HookBus")
        if self.read_only:
            raise ReadOnlyBusError("a read-only HookBus fires no hook: it would write their records")
        # Encoded once, here, for every hook it fires: an envelope that cannot be JSON is
        # the caller's error to hear about, not something a worker thread dies of later.
        try:
            full, payload = encode_envelope(event, envelope)
        except EnvelopeTooDeep as exc:
            return self._undecided(event, envelope, hooks, str(exc), merged)
        sync_hooks = []
        shadows = None
        guarded: Run | None = None
        for hook in hooks:  # one pass, no comprehension: an async fire is on the agent's clock
            if hook.is_sync:
                if hook.spec.shadow:
                    shadows = [*(shadows or ()), hook]
                elif hook.tier == "builtin":
                    guarded = _run_inline(hook, envelope)
                else:
                    sync_hooks.append(hook)
            else:
                self._dispatcher.submit_async(hook, event, full, payload, settings)
        enforced = _Enforced() if shadows is not None and merged is None else None
        unstarted: list[tuple[Run, bool]] = []
        if shadows is not None and enforced is not None:
            # Started beside the enforcing hooks, never waited for: each is recorded once
            # it is done and the enforced decision is known.
            unstarted = self._dispatcher.start_shadows(
                shadows, event, full, payload, settings, functools.partial(self._settle_shadow, event, envelope, enforced)
            )
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
                    outcome = self._decider.decide(event, envelope, runs)
                    decision = self._settle(event, envelope, outcome, merged)
                    if settings.record_envelopes and merged is None:
                        self._recorders.record_emit(emit_record(event, envelope, decision.as_dict(), [hook.id for hook in sync_hooks]))
        finally:
            if enforced is not None:
                enforced.set(decision)
                for run, heard in unstarted:  # shadow hooks that did not start: recorded, and why
                    self._shadow_run(event, envelope, run, decision.behavior, heard)
        if shadows is not None and merged is not None:
            # explain: what each shadow hook would have said, beside the decision.
            with self._dispatcher.emitting() as cancel:
                runs = self._dispatcher.run_sync(shadows, event, full, payload, settings, cancel)
            # Killed by interrupt(): what it would have said is not known.
            interrupted = cancel.cancelled
            settled = [self._shadow_run(event, envelope, run, decision.behavior, not (interrupted and run[1].error)) for run in runs]
            merged.append(Merged(decision, tuple(run for run, _ in settled), {run[0].id: note for run, note in settled}))
        return decision

    def _shadow_run(
        self, event: str, envelope: Mapping[str, Any], run: Run, enforced: str | None, heard: bool = True
    ) -> tuple[Run, str]:
        """A shadow hook's run as it would have counted (a fail-closed failure as its deny),
        recorded with the enforced behavior; and the note that says so. Not ``heard`` (hookbus
        cut it short, or did not run it): it said nothing, which is recorded as an error
        and no decision, so that it is never taken for what the hook would have said."""
        if not heard:
            return self._unheard_shadow(event, envelope, run, enforced)
        counted = self._decider.decide(event, envelope, [run])
        as_counted = counted.runs[0]
        hook, outcome, at, duration = as_counted
        note = f"shadow: would have said {outcome.behavior}" + (f" ({outcome.reason})" if outcome.reason else "") + f"; not in the merge (enforced: {enforced or 'unknown'})"
        self._recorders.record(
            RunRecord(
                at=at, hook_id=hook.id, event=event, mode="sync", status=outcome.behavior, duration=duration,
                error=outcome.error, decision=outcome.as_dict(), note=joined_note(outcome.note, counted.notes.get(hook.id)),
                tool_name=envelope_tool_name(envelope), shadow=True, enforced=enforced, tier=hook.tier,
            )
        )
        return as_counted, note

    def _unheard_shadow(
        self, event: str, envelope: Mapping[str, Any], run: Run, enforced: str | None, why: str = SHADOW_UNHEARD_NOTE
    ) -> tuple[Run, str]:
        """Record a shadow hook that said nothing (``why``) with the behavior enforced."""
        hook, outcome, at, duration = run
        note = f"{why}; not in the merge (enforced: {enforced or 'unknown'})"
        self._recorders.record(
            RunRecord(
                at=at, hook_id=hook.id, event=event, mode="sync", status="error", duration=duration,
                error=outcome.error, note=joined_note(outcome.note, note),
                tool_name=envelope_tool_name(envelope), shadow=True, enforced=enforced, tier=hook.tier,
            )
        )
        return run, note

    def _settle_shadow(self, event: str, envelope: Mapping[str, Any], enforced: _Enforced, run: Run, heard: bool, wait: bool) -> None:
        decision = enforced.wait(_Enforced.WAIT_SECONDS if wait else 0.0)
        self._shadow_run(event, envelope, run, decision.behavior if decision is not None else None, heard)

    def _settle(self, event: str, envelope: Mapping[str, Any], outcome: Merged, merged: list[Merged] | None) -> Decision:
        """Record every run of an emit, tell ``explain`` how it merged, remember how a stop
        was answered: then the decision is the caller's."""
        for record in outcome.records(event, envelope_tool_name(envelope)):
            self._recorders.record(record)
        if merged is not None:
            merged.append(outcome)
        self._stops.answered(event, envelope, outcome.decision)
        return outcome.decision

    def test_fire(self, event: str, envelope: Mapping[str, Any] | None = None, *, hook_id: str | None = None) -> Decision:
        """The decision the home's sync hooks (only ``hook_id``, when given) reach on
        ``envelope``, as a test sees it: the hooks run for real, with ``HOOKBUS_TEST=1`` in
        their environment, but nothing is recorded, no state.json changes, the Stop memory
        is neither read nor changed, and async hooks do not run. A hook that does not match
        the envelope does not run: its fixture's decision is then allow. Shadow hooks stay
        out of a merged run, as from an emit."""
        return self._unrecorded_fire(event, envelope, hook_id, "HOOKBUS_TEST")[0]

    def replay(self, event: str, envelope: Mapping[str, Any] | None = None) -> tuple[Decision, tuple[str, ...]]:
        """The decision the home's sync hooks reach now on a recorded envelope, and the ids
        of those that ran: as ``test_fire`` (nothing recorded, no Stop memory, no async
        hook), with ``HOOKBUS_REPLAY=1`` in the hooks' environment."""
        return self._unrecorded_fire(event, envelope, None, "HOOKBUS_REPLAY")

    def read_emits(self, since: str | None = None, until: str | None = None) -> list[EmitRecord]:
        """The emit records (settings.json ``"record_envelopes": true``) with ``since <= at <
        until``, oldest first, from the first active recorder that keeps them."""
        return self._recorders.read_emits(since, until)

    @property
    def keeps_emits(self) -> bool:
        """Whether an active recorder keeps emit records at all."""
        return self._recorders.keeps_emits()

    def _unrecorded_fire(
        self, event: str, envelope: Mapping[str, Any] | None, hook_id: str | None, variable: str
    ) -> tuple[Decision, tuple[str, ...]]:
        if self._closed:
            raise BusClosedError("a fire on a closed HookBus")
        checked = check_envelope(envelope)
        found = self._publisher.matching(event, checked)
        if found is None:
            return ALLOW, ()
        hooks, settings = found
        # Alone, a shadow hook's own decision is what its fixture checks; merged, it stays
        # out as it does from a real emit.
        chosen = [hook for hook in hooks if hook.is_sync and (hook.id == hook_id if hook_id is not None else not hook.spec.shadow)]
        if not chosen:
            return ALLOW, ()
        full, payload = encode_envelope(event, checked)
        dispatcher = self._quiet_dispatchers.get(variable)
        if dispatcher is None:
            dispatcher = self._quiet_dispatchers[variable] = Dispatcher(
                self.home, 1, _unrecorded, prompt_sender(self._plugins), StopMemory(), {variable: "1"}
            )
        from hookbus.cancel import CancelToken

        runs = dispatcher.run_sync(chosen, event, full, payload, settings, CancelToken())
        # The home guard runs on every guarded call: it is named only when it denied.
        ran = tuple(hook.id for hook, outcome, _, _ in runs if hook.tier != "builtin" or outcome.behavior != "allow")
        return self._decider.decide(event, checked, runs).decision, ran

    def undecided(self, event: str, envelope: Mapping[str, Any] | None, why: str) -> Decision:
        """The decision for an event whose hooks hookbus cannot run: it could not read the
        whole envelope (nested too deeply, cut short, not UTF-8), or a server it asked
        stopped answering while they ran. ``envelope`` holds what could be read of it: its
        top-level fields are all a matcher looks at. Nothing runs. Each hook that matches
        counts as failed, ``hookbus could not decide: WHY``, under its own ``on_error``:
        a fail-closed one denies, the others fail open; every one is recorded, and listed
        in the decision's ``failed``."""
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        checked = check_envelope(envelope)
        found = self._publisher.matching(event, checked)
        if found is None:
            return ALLOW
        return self._undecided(event, checked, found[0], why)

    def _undecided(
        self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], why: str, merged: list[Merged] | None = None
    ) -> Decision:
        if self.read_only:
            raise ReadOnlyBusError("a read-only HookBus decides nothing: it would write the records")
        error = why
        at = utc_timestamp()
        runs: list[Run] = []
        shadows: list[Run] = []
        for hook in hooks:
            if hook.is_sync and not hook.spec.shadow:
                runs.append((hook, Outcome.fail_open(error, failure="hookbus"), at, 0.0))
            elif hook.is_sync:
                # A shadow hook never enforces, not even its on_error: it is recorded beside
                # the decision, once that is known.
                shadows.append((hook, Outcome.fail_open(error, failure="hookbus"), at, 0.0))
            else:
                self._recorders.record(
                    RunRecord(
                        at=at, hook_id=hook.id, event=event, mode="async", status="error", duration=0.0,
                        error=error, decision={"behavior": "allow"}, note=UNDECIDED_NOTE,
                        tool_name=envelope_tool_name(envelope), tier=hook.tier,
                    )
                )
        decision: Decision | None = None if runs else ALLOW
        try:
            if runs:
                with self._dispatcher.emitting():
                    outcome = self._decider.decide(event, envelope, runs)
                    notes = outcome.notes
                    assert isinstance(notes, dict)
                    for hook, _, _, _ in runs:
                        notes.setdefault(hook.id, UNDECIDED_NOTE)
                    decision = self._settle(event, envelope, outcome, merged)
        finally:
            enforced = None if decision is None else decision.behavior
            for shadow in shadows:
                self._unheard_shadow(event, envelope, shadow, enforced, UNDECIDED_SHADOW_NOTE)
        assert decision is not None
        return decision

    def trigger(self, hook_id: str, envelope: Mapping[str, Any] | None = None) -> RunRecord:
        """Fire one hook by id now, on this thread, whatever its trigger; recorded as async."""
        if self._closed:
            raise BusClosedError("trigger on a closed HookBus")
        if self.read_only:
            raise ReadOnlyBusError("a read-only HookBus fires no hook: it would write its record")
        hook, settings = self._publisher.hook(hook_id)
        full, payload = encode_envelope(hook.event, check_envelope(envelope))
        return self._dispatcher.run_manual(hook, full, payload, settings)

    # -- what is recorded ----------------------------------------------------------------

    def read_runs(self, hook_id: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Recorded fires, oldest first, from the first active recorder that can read them."""
        return self._recorders.read_runs(hook_id, limit)

    @property
    def lost_records(self) -> int:
        """Fires that no active recorder took: those a recorder raised on, and those one
        counted lost itself (``lost_records(home)`` of its plugin; the built-in one counts
        what the disk refused). Each loss is also reported on the ``hookbus`` logger."""
        return self._recorders.lost

    # -- shutting down ------------------------------------------------------------------

    def interrupt(self, reason: str = "interrupted") -> None:
        """Kill every hook running now, sync, async and shadow, recording ``reason`` as its error;
        emits in progress return at once, and no hook starts any more. Then ``close()``.
        From a signal handler, call it on a new thread (it takes the bus's locks)."""
        self._dispatcher.interrupt(reason)

    def close(self, timeout: float | None = None, *, exiting: str | None = None) -> None:
        """Stop taking emits, let running hooks finish for up to ``timeout`` seconds
        (default ``shutdown_timeout``), kill and record what is left as "cancelled at
        shutdown" (a shadow hook as cut short), let recorders flush. Idempotent; it returns
        within ``timeout`` plus CANCEL_GRACE_SECONDS (5 s) plus RECORDER_FLUSH_SECONDS
        (3 s), whatever a recorder does: the plugins' ``hookbus_shutdown`` run at once, each
        on a thread of its own, and one not done in time is reported and left to finish in
        the background.

        ``exiting``: the one-shot command (``"hookbus emit"``, a bridge) whose process exits
        once this returns, and whose caller waits for that exit: no shadow hook is waited
        for. They run on while the async hooks finish, then each is killed and recorded as
        cut short when that command exited."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
        self._publisher.stop()
        deadline = time.monotonic() + (self.shutdown_timeout if timeout is None else timeout)
        cut_short = None if exiting is None else (
            f"cut short when {exiting} exited: a shadow hook never holds the agent, and {exiting} exits "
            "as soon as it has answered (under `hookbus serve`, shadow hooks run to their end)"
        )
        self._dispatcher.close(deadline, cut_short)
        for quiet in self._quiet_dispatchers.values():  # test and replay fires: their threads
            quiet.close(deadline)
        self._recorders.shut_down()
        self._recorders.report_losses()

    async def aclose(self, timeout: float | None = None) -> None:
        """``close()`` for asyncio: it waits for the hooks and the recorders on a thread of
        its own, so the event loop goes on running meanwhile (and no executor's queue can
        hold it up). Cancelling the await does not stop the close."""
        from hookbus.workers import run_on_a_thread

        await run_on_a_thread(lambda: self.close(timeout), "hookbus-aclose")

    def __enter__(self) -> HookBus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> HookBus:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _Enforced:
    """The decision the enforcing hooks of an emit reached, for its shadow hooks' records."""

    __slots__ = ("_event", "_decision")

    #: How long a shadow hook's record waits for it at most (it is set in a finally).
    WAIT_SECONDS = 3600.0

    def __init__(self) -> None:
        self._event = threading.Event()
        self._decision: Decision | None = None

    def set(self, decision: Decision) -> None:
        self._decision = decision
        self._event.set()

    def wait(self, timeout: float) -> Decision | None:
        self._event.wait(timeout)
        return self._decision


def _run_inline(hook: Hook, envelope: Mapping[str, Any]) -> Run:
    """A built-in hook's run (the home guard), on the emitting thread: microseconds, where a
    thread of its own would cost more than the check. Its start is written out only for a
    deny: an allow is never recorded (``Merged.records``), and the guard runs on every
    guarded call."""
    wall, started = time.time(), time.perf_counter()
    runner = hook.runner
    assert isinstance(runner, HomeGuardRunner)
    outcome = runner.decide(envelope)
    duration = time.perf_counter() - started
    return hook, outcome, utc_timestamp(wall) if outcome.behavior != "allow" else "", duration


def _unrecorded(record: RunRecord) -> RunRecord:
    """A test fire's records: kept nowhere."""
    return record


def _ignore_load_errors(errors: Mapping[str, str | None]) -> None:
    """A read-only bus keeps what it found to itself (``bus.problems``)."""


@functools.lru_cache(maxsize=None)
def _allowed() -> Future[Decision]:
    """What ``submit`` returns when nothing matched: one finished Future, shared (a Future
    costs a lock and a condition to make)."""
    return _done(ALLOW)
