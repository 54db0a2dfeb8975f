"""The dispatcher: runs the hooks an emit matched, under their deadlines, and stops them.

- Sync hooks: a lone one on the caller's thread (no thread hop on the hot path); several in
  parallel, each on a thread of its own that starts at once (``ElasticThreads``: nothing
  queues behind another emit's hooks), each waited for up to its own timeout plus
  ``RUNNER_GRACE_SECONDS``, counted from when it started.
- Async hooks: a bounded pool of workers (``AsyncWorkers``); each fire is recorded when it
  ends, or as cancelled if close() ends it first.
- Shadow hooks: each on a thread of its own, never waited for by an emit, and at most
  ``MAX_RUNNING_SHADOWS`` at once; each is settled (recorded) once, when it ends, or when
  ``close`` or ``interrupt`` ends it first.
- Cancellation: every emit with sync hooks running holds a token; ``interrupt`` cancels
  them all, ``close`` waits for them, then cancels what is left, shadow hooks included
  (a one-shot command's close waits for none of them: see ``close``).

A run never raises: a runner's bug, a timeout, a refused rewrite or no thread to run on is
the hook's failure, open or (``"on_error": "deny"``) closed.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import attrs

from hookbus.cancel import CancelToken
from hookbus.decision import Outcome
from hookbus.envelope import encode_envelope
from hookbus.events import check_modify_input
from hookbus.records import CANCELLED_AT_SHUTDOWN, RunRecord, envelope_tool_name, utc_timestamp
from hookbus.reporting import ReportOnce
from hookbus.runners import HookCall
from hookbus.workers import clamp_wait, finished

if TYPE_CHECKING:
    from concurrent.futures import Future

    from hookbus.decision import Decision
    from hookbus.home import Home
    from hookbus.merge import Run
    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.settings import Settings
    from hookbus.runners import Hook
    from hookbus.dialects.stopguard import StopMemory
    from hookbus.workers import AsyncWorkers, ElasticThreads, StartedJob

logger = logging.getLogger("hookbus")

#: How long close() waits for killed and cancelled async hooks to be recorded.
CANCEL_GRACE_SECONDS = 5.0
#: How long past its own timeout a runner may take before the bus stops waiting for it.
RUNNER_GRACE_SECONDS = 1.0
#: How long a thread that ran sync hooks waits idle for more before it ends.
SYNC_THREAD_IDLE_SECONDS = 30.0
#: Shadow hooks one bus runs at once, at most. Nothing waits for them, so without a bound a
#: host that emits faster than they finish would pile up their processes and threads until
#: an enforcing hook could start none (and failed open). Past it a shadow hook is not run,
#: and is recorded so. Read at each fire.
MAX_RUNNING_SHADOWS = 64
#: How long a one-shot command's close() lets a killed shadow hook take to be recorded: a
#: killed group lets go at once, and only a runner that ignores its cancel takes longer, which
#: the command's caller must not wait for (close() records that one itself).
EXIT_SHADOW_GRACE_SECONDS = 1.0
#: The error of a shadow hook that close() found still running when its timeout ran out.
SHADOW_CUT_AT_CLOSE = "cut short: still running when the bus closed and its shutdown timeout ran out"

#: How the bound on running shadow hooks is reported (once until there is room again).
_SHADOWS_FULL = "hookbus: the shadow hooks' bound"
#: Hands a shadow hook's run over to be recorded: the run; whether it was heard out (False:
#: hookbus cut it short, or never ran it, and its error says why); and whether recording it
#: may wait for the emit's decision (not on close()'s own thread, which must not wait).
ShadowSettle = Callable[["Run", bool, bool], None]

#: An async fire waiting for a worker: the hook, the event, the envelope as hooks get it and
#: as JSON, manual, and the settings in effect when it was fired (a reload meanwhile does
#: not change them).
AsyncJob = tuple["Hook", str, Mapping[str, Any], bytes, bool, "Settings"]


class Dispatcher:
    """Runs hooks for one bus; ``record`` takes each async fire's record and returns it as
    recorded."""

    def __init__(
        self,
        home: Home,
        async_workers: int,
        record: Callable[[RunRecord], RunRecord],
        send_prompt: Callable[[PromptRequest], PromptResult],
        stops: StopMemory,
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self._home = home
        #: Variables every hook run by this dispatcher gets on top of its own (a test
        #: fire's ``HOOKBUS_TEST=1``).
        self._extra_env = dict(extra_env or {})
        self._async_size = async_workers
        self._record = record
        self._send_prompt = send_prompt
        self._stops = stops
        self._lock = threading.Condition()
        self._sync_emits = 0
        self._async: AsyncWorkers[AsyncJob] | None = None  # made on the first async fire
        self._threads: ElasticThreads | None = None  # made on the first parallel sync fire
        #: One token per emit whose sync hooks are running: ``interrupt`` cancels them.
        self._running: set[CancelToken] = set()
        #: Why ``interrupt`` was called, once it was: what close() cancels with.
        self._interrupted: str | None = None
        #: The shadow hooks started and not yet ended (``start_shadows``).
        self._shadows: set[_Shadow] = set()
        #: Why close() cut the shadow hooks short, once it did: a late one is cut at once.
        self._shadows_cut: str | None = None
        #: Says once (until there is room again) that shadow hooks are past their bound.
        self._shadow_report = ReportOnce(logger)

    def submit_async(self, hook: Hook, event: str, full: Mapping[str, Any], payload: bytes, settings: Settings) -> None:
        (self._async or self._start_async_workers()).submit((hook, event, full, payload, False, settings))

    def submit_emit(
        self, hooks: Sequence[Hook], fire: Callable[[], Decision], undecided: Callable[[str], Decision],
        on_start: Callable[[float], None] | None,
    ) -> Future[Decision]:
        """``HookBus.submit``: ``fire`` on a thread of its own (never queued behind other
        emits), or at once when none of ``hooks`` is waited for (only async ones are
        submitted, shadow ones started). ``on_start(seconds)`` is called first with how long
        the emit may take; with no thread to be had, the emit is ``undecided(why)``."""
        # A shadow hook is never waited for: its timeout is no part of how long this takes.
        # Nor is the home guard's (the built-in tier): it runs inline, in microseconds
        # (``Firing.fire``), so a call only it guards is decided here, with no thread.
        sync_timeouts = [hook.timeout for hook in hooks if hook.is_sync and not hook.spec.shadow and hook.tier != "builtin"]
        if not sync_timeouts:
            return finished(fire())
        if on_start is not None:
            # The bus stops waiting for any runner this long past its timeout (a built-in
            # one is done 0.35 s past it: a kill's grace and the pipes let go).
            on_start(max(sync_timeouts) + RUNNER_GRACE_SECONDS)
        try:
            return self.threads().submit(fire).future
        except RuntimeError as exc:  # no thread left (another process of the user holds them)
            return finished(undecided(f"no thread could be started to run the hooks ({exc})"))

    def emitting(self) -> _Emitting:
        """``with dispatcher.emitting() as cancel:`` around all an emit with sync hooks does
        (running, merging, recording): close() waits for it to end before the recorders
        shut down, and ``interrupt`` cancels ``cancel``."""
        return _Emitting(self)

    def run_sync(
        self, hooks: Sequence[Hook], event: str, full: Mapping[str, Any], payload: bytes, settings: Settings, cancel: CancelToken
    ) -> list[Run]:
        """The runs of ``hooks`` (in their order), each within its own deadline."""
        if len(hooks) == 1:
            return [self.run(hooks[0], event, full, payload, settings, cancel)]
        threads = self.threads()
        submitted = time.time(), time.monotonic()
        jobs: list[tuple[Hook, StartedJob | Run]] = []
        for hook in hooks:
            try:
                jobs.append((hook, threads.submit(functools.partial(self.run, hook, event, full, payload, settings, cancel))))
            except (RuntimeError, MemoryError) as exc:
                # No thread to be had (the user's processes or memory ran out): that hook's
                # failure, decided by its on_error; an exception here would leave the hooks
                # already started unwaited for and the host without a decision.
                error = f"could not start a thread for it: {type(exc).__name__}: {exc}"
                jobs.append((hook, (hook, Outcome.fail_open(error, failure="crash"), utc_timestamp(submitted[0]), 0.0)))
        return [job if isinstance(job, tuple) else _wait_for(hook, job, submitted) for hook, job in jobs]

    def start_shadows(
        self, hooks: Sequence[Hook], event: str, full: Mapping[str, Any], payload: bytes, settings: Settings,
        settle: ShadowSettle,
    ) -> list[tuple[Run, bool]]:
        """Run each shadow hook on a thread of its own and hand its run to ``settle`` (which
        waits for the enforced decision and records it); the caller never waits for them.
        close() lets them run up to its timeout (a one-shot command's, only while it waits
        for the rest), then kills them; interrupt() kills them at once. Returned: the runs of hooks that did not start (no thread to be had, or
        ``MAX_RUNNING_SHADOWS`` running already), for the caller to settle once the
        decision is known (settling them here would wait for it)."""
        unstarted: list[tuple[Run, bool]] = []
        for hook in hooks:
            shadow = self._shadow_started(hook, settle)
            if isinstance(shadow, str):
                unstarted.append(((hook, Outcome.fail_open(shadow, failure="hookbus"), utc_timestamp(), 0.0), False))
                continue

            def job(shadow: _Shadow = shadow) -> None:
                try:
                    run = self.run(shadow.hook, event, full, payload, settings, shadow.cancel)
                    # Cancelled and failed: hookbus stopped it, so it said nothing of its own.
                    shadow.settle(run, heard=not (shadow.cancel.cancelled and run[1].error is not None))
                finally:
                    self._shadow_ended(shadow)

            try:
                self.threads().submit(job)
            except (RuntimeError, MemoryError) as exc:
                self._shadow_ended(shadow)
                error = f"could not start a thread for it: {type(exc).__name__}: {exc}"
                unstarted.append(((hook, Outcome.fail_open(error, failure="crash"), utc_timestamp(), 0.0), True))
        return unstarted

    def _shadow_started(self, hook: Hook, settle: ShadowSettle) -> _Shadow | str:
        """A shadow hook counted as running, its token already cancelled when close() or
        interrupt() came first; or why it may not run."""
        shadow = _Shadow(hook, settle)
        with self._lock:
            running = len(self._shadows)
            full = running >= MAX_RUNNING_SHADOWS
            if not full:
                self._shadows.add(shadow)
            cut = self._interrupted or self._shadows_cut
        if full:
            self._shadow_report.failed(
                _SHADOWS_FULL,
                f"hookbus: {running} shadow hooks are running, the most one bus runs at once: shadow hooks are "
                "fired faster than they end, so further fires of them are recorded as not run until some end; make "
                "the shadow hooks faster (or their timeouts shorter), or raise hookbus.dispatch.MAX_RUNNING_SHADOWS",
            )
            return (
                f"not run: {running} shadow hook{' was' if running == 1 else 's were'} running already, the most "
                "one bus runs at once (hookbus.dispatch.MAX_RUNNING_SHADOWS), so that shadow hooks never take "
                "the processes and threads that enforcing hooks need"
            )
        self._shadow_report.succeeded(_SHADOWS_FULL)
        if cut is not None:
            shadow.cancel.cancel(cut)
        return shadow

    def _shadow_ended(self, shadow: _Shadow) -> None:
        with self._lock:
            self._shadows.discard(shadow)
            self._lock.notify_all()

    def _cut_shadows(self, reason: str) -> None:
        """Kill every shadow hook still running; one that starts from now on is cut at once."""
        with self._lock:
            if self._shadows_cut is None:
                self._shadows_cut = reason
            shadows = list(self._shadows)
        for shadow in shadows:
            shadow.cancel.cancel(reason)

    def _wait_for_shadows(self, grace: float) -> None:
        """Wait ``grace`` seconds for every shadow hook to be recorded; one whose runner did
        not stop when told to is recorded here, as cut short (and not again when it ends)."""
        deadline = time.monotonic() + grace
        with self._lock:
            while self._shadows and time.monotonic() < deadline:
                self._lock.wait(clamp_wait(deadline - time.monotonic()))
            stubborn = list(self._shadows)
        for shadow in stubborn:
            why = shadow.cancel.reason or SHADOW_CUT_AT_CLOSE
            error = f"{why}; its runner did not stop within {grace:g}s of being told to"
            run = (shadow.hook, Outcome.fail_open(error, failure="killed"), shadow.at, time.monotonic() - shadow.started)
            shadow.settle(run, heard=False, wait=False)

    def run_manual(self, hook: Hook, settings: Settings, envelope: Mapping[str, Any]) -> RunRecord:
        """Fire one hook now, on this thread, as an async fire marked manual."""
        full, payload = encode_envelope(hook.event, envelope)
        cancel = self._started(counted=False)
        try:
            return self._run_async((hook, hook.event, full, payload, True, settings), cancel)
        finally:
            self._ended(cancel, counted=False)

    def _started(self, counted: bool = True) -> CancelToken:
        cancel = CancelToken()
        with self._lock:
            if counted:
                self._sync_emits += 1
            self._running.add(cancel)
            if self._interrupted is not None:
                cancel.cancel(self._interrupted)
        return cancel

    def _ended(self, cancel: CancelToken, counted: bool) -> None:
        with self._lock:
            if counted:
                self._sync_emits -= 1
            self._running.discard(cancel)
            self._lock.notify_all()

    def threads(self) -> ElasticThreads:
        """The threads sync hooks run on when they do not run on the caller's."""
        threads = self._threads
        if threads is not None:
            return threads
        from hookbus.workers import ElasticThreads  # only for parallel sync hooks and aemit

        with self._lock:
            if self._threads is None:
                self._threads = ElasticThreads("hookbus-sync", SYNC_THREAD_IDLE_SECONDS)
            return self._threads

    def _start_async_workers(self) -> AsyncWorkers[AsyncJob]:
        from hookbus.workers import AsyncWorkers  # a bus with no async hook never needs it

        with self._lock:
            if self._async is None:
                self._async = AsyncWorkers(self._async_size, self._run_async, self._record_cancelled)
            return self._async

    def run(
        self,
        hook: Hook,
        event: str,
        envelope: Mapping[str, Any],
        payload: bytes,
        settings: Settings,
        cancel: CancelToken | None = None,
    ) -> Run:
        """Run one hook; never raises. Returns the hook, its outcome, when, and how long."""
        at = utc_timestamp()
        started = time.monotonic()
        spec = hook.spec
        hook_env: Mapping[str, str] = spec.env
        if spec.dialect is not None:
            from hookbus.dialects.claude_hooks import in_dialect

            envelope, payload, hook_env = in_dialect(hook, event, envelope, settings, str(self._home.root), self._stops)
        if self._extra_env:
            hook_env = {**hook_env, **self._extra_env}
        call = HookCall(
            hook=hook,
            event=event,
            envelope=envelope,
            payload=payload,
            deadline=started + hook.timeout,
            home=self._home,
            cancel=cancel or CancelToken(),
            settings=settings,
            prompt_sender=self._send_prompt,
            hook_env=hook_env,
        )
        try:
            outcome = hook.runner.run(call)
            if not isinstance(outcome, Outcome):
                raise TypeError(f"run() returned {type(outcome).__name__}, not an Outcome")
            if spec.dialect is not None and outcome.input is not None and "tool_name" in envelope:
                from hookbus.dialects.claude_hooks import input_from_dialect

                outcome = input_from_dialect(envelope, outcome, settings, spec.dialect)
        except (Exception, SystemExit) as exc:  # a plugin's bug never reaches the embedder
            logger.error("runner of plugin %r failed on hook %r", hook.runner_plugin, hook.id, exc_info=exc)
            outcome = Outcome.fail_open(f"runner {hook.runner_plugin!r} raised {type(exc).__name__}: {exc}", failure="crash")
        if outcome.behavior == "modify":
            problem = check_modify_input(event, outcome.input)
            if problem is not None:
                outcome = Outcome.fail_open(problem, outcome.thread_id, failure="unparseable")
        if call.notes:
            # What the run did that its spec did not say (where it ran): for its record.
            said = [*call.notes, outcome.note] if outcome.note else call.notes
            outcome = attrs.evolve(outcome, note="; ".join(said))
        return hook, outcome, at, time.monotonic() - started

    def _run_async(self, job: AsyncJob, cancel: CancelToken) -> RunRecord:
        hook, event, full, payload, manual, settings = job
        _, outcome, at, duration = self.run(hook, event, full, payload, settings, cancel)
        # What trigger() returns is the record as recorded: secrets masked there too.
        return self._record(_async_record(hook, event, outcome, at, duration, manual, envelope_tool_name(full)))

    def _record_cancelled(self, job: AsyncJob, reason: str) -> None:
        """A queued async job that close() ended before it started: recorded, not lost."""
        hook, event, full, _, manual, _ = job
        self._record(_async_record(hook, event, Outcome.fail_open(reason), utc_timestamp(), 0.0, manual, envelope_tool_name(full)))

    def interrupt(self, reason: str) -> None:
        """Cancel every hook running now, sync and async, and every one not started yet."""
        with self._lock:
            if self._interrupted is None:
                self._interrupted = reason
            running = [*self._running, *(shadow.cancel for shadow in self._shadows)]
            workers = self._async
        for token in running:
            token.cancel(reason)
        if workers is not None:
            workers.cancel_all(reason)

    def close(self, deadline: float, exiting: str | None = None) -> None:
        """Let running hooks finish until ``deadline`` (time.monotonic()), then kill and
        record what is left, within CANCEL_GRACE_SECONDS more. ``exiting``: the one-shot
        command (``"hookbus emit"``) whose process exits once this returns, and whose
        caller waits for that, so no shadow hook is waited for on its own account: they
        run on while close() waits for the rest, then are killed, and recorded as cut short
        when that command exited."""
        if exiting is not None:
            exiting = (
                f"cut short when {exiting} exited: a shadow hook never holds the agent, and {exiting} exits "
                "as soon as it has answered (under `hookbus serve`, shadow hooks run to their end)"
            )
        workers = self._async
        if workers is not None:
            workers.drain(deadline)
        with self._lock:
            while (self._sync_emits or (self._shadows and exiting is None)) and time.monotonic() < deadline:
                self._lock.wait(clamp_wait(deadline - time.monotonic()))
        grace = time.monotonic() + CANCEL_GRACE_SECONDS
        self._cut_shadows(self._interrupted or exiting or SHADOW_CUT_AT_CLOSE)
        if workers is not None:
            # What is left is killed (running) or never started (queued): each is recorded.
            workers.cancel_all(self._interrupted or CANCELLED_AT_SHUTDOWN)
        self._wait_for_shadows(min(CANCEL_GRACE_SECONDS, EXIT_SHADOW_GRACE_SECONDS) if exiting else CANCEL_GRACE_SECONDS)
        if workers is not None:
            workers.drain(grace)
            workers.stop(CANCEL_GRACE_SECONDS)
        if self._threads is not None:
            self._threads.shutdown()


class _Shadow:
    """A shadow hook started by ``start_shadows``: its token, and its run settled once,
    by whoever ends it first (its own thread, or close() when its runner will not stop)."""

    __slots__ = ("hook", "cancel", "at", "started", "_settle", "_settled", "_lock")

    def __init__(self, hook: Hook, settle: ShadowSettle) -> None:
        self.hook = hook
        self.cancel = CancelToken()
        self.at = utc_timestamp()
        self.started = time.monotonic()
        self._settle = settle
        self._settled = False
        self._lock = threading.Lock()

    def settle(self, run: Run, heard: bool, wait: bool = True) -> None:
        with self._lock:
            if self._settled:
                return
            self._settled = True
        self._settle(run, heard, wait)


class _Emitting:
    """One emit with sync hooks, counted while it runs (see ``Dispatcher.emitting``)."""

    __slots__ = ("_dispatcher", "_cancel")

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._cancel: CancelToken | None = None

    def __enter__(self) -> CancelToken:
        self._cancel = self._dispatcher._started(counted=True)
        return self._cancel

    def __exit__(self, *exc_info: object) -> None:
        assert self._cancel is not None
        self._dispatcher._ended(self._cancel, counted=True)


def _wait_for(hook: Hook, job: StartedJob, submitted: tuple[float, float]) -> Run:
    """The run of ``hook``, or a fail-open outcome once it is ``RUNNER_GRACE_SECONDS`` past
    its own timeout, counted from when it started (not from when it was handed over:
    nothing it waited for may eat into its time)."""
    from concurrent.futures import TimeoutError as FutureTimeout

    wall, monotonic = submitted
    while True:
        started = job.started if job.started is not None else monotonic
        remaining = started + hook.timeout + RUNNER_GRACE_SECONDS - time.monotonic()
        try:
            run: Run = job.future.result(timeout=clamp_wait(remaining))
            return run
        except FutureTimeout:
            if job.started is not None and job.started != started:
                continue  # it started later than assumed: its deadline is later too
            if remaining > 0:
                continue  # a wait is capped at threading's maximum: keep waiting
            error = f"runner {hook.runner_plugin!r} did not return within its timeout"
            return hook, Outcome.fail_open(error, failure="timeout"), utc_timestamp(wall), time.monotonic() - monotonic
        except BaseException as exc:  # run() never raises; this is the thread machinery
            error = f"hookbus could not run it: {type(exc).__name__}: {exc}"
            return hook, Outcome.fail_open(error, failure="crash"), utc_timestamp(wall), time.monotonic() - monotonic


def _async_record(
    hook: Hook, event: str, outcome: Outcome, at: str, duration: float, manual: bool, tool_name: str | None
) -> RunRecord:
    return RunRecord(
        at=at,
        hook_id=hook.id,
        event=event,
        mode="async",
        status="error" if outcome.error else "done",
        duration=duration,
        error=outcome.error,
        thread_id=outcome.thread_id,
        decision=outcome.as_dict(),
        note=outcome.note,
        manual=manual,
        tool_name=tool_name,
        tier=hook.tier,
    )
