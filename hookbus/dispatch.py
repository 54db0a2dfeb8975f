"""The dispatcher: runs the hooks an emit matched, under their deadlines, and stops them.

- Sync hooks: a lone one on the caller's thread (no thread hop on the hot path); several in
  parallel, each on a thread of its own that starts at once (``ElasticThreads``: nothing
  queues behind another emit's hooks), each waited for up to its own timeout plus
  ``RUNNER_GRACE_SECONDS``, counted from when it started.
- Async hooks: a bounded pool of workers (``AsyncWorkers``); each fire is recorded when it
  ends, or as cancelled if close() ends it first.
- Cancellation: every emit with sync hooks running holds a token; ``interrupt`` cancels
  them all, ``close`` waits for them, then cancels what is left.

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
from hookbus.events import check_modify_input
from hookbus.records import CANCELLED_AT_SHUTDOWN, RunRecord, envelope_tool_name, utc_timestamp
from hookbus.runners import HookCall
from hookbus.workers import clamp_wait

if TYPE_CHECKING:
    from hookbus.home import Home
    from hookbus.merge import Run
    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.settings import Settings
    from hookbus.spec import Hook
    from hookbus.stopguard import StopMemory
    from hookbus.workers import AsyncWorkers, ElasticThreads, StartedJob

logger = logging.getLogger("hookbus")

#: How long close() waits for killed and cancelled async hooks to be recorded.
CANCEL_GRACE_SECONDS = 5.0
#: How long past its own timeout a runner may take before the bus stops waiting for it.
RUNNER_GRACE_SECONDS = 1.0
#: How long a thread that ran sync hooks waits idle for more before it ends.
SYNC_THREAD_IDLE_SECONDS = 30.0

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

    def submit_async(self, hook: Hook, event: str, full: Mapping[str, Any], payload: bytes, settings: Settings) -> None:
        (self._async or self._start_async_workers()).submit((hook, event, full, payload, False, settings))

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
        settle: Callable[[Run], None],
    ) -> list[Run]:
        """Run each shadow hook on a thread of its own and hand its run to ``settle`` (which
        waits for the enforced decision and records it); the caller never waits for them.
        Each counts as an emit running until it is settled, so close() waits for it and
        interrupt() cancels it. Returned: the runs of hooks that could not get a thread, as
        that failure, for the caller to settle once the decision is known (settling them
        here would wait for it)."""
        unstarted: list[Run] = []
        for hook in hooks:
            cancel = self._started(counted=True)

            def job(hook: Hook = hook, cancel: CancelToken = cancel) -> None:
                try:
                    settle(self.run(hook, event, full, payload, settings, cancel))
                finally:
                    self._ended(cancel, counted=True)

            try:
                self.threads().submit(job)
            except (RuntimeError, MemoryError) as exc:
                self._ended(cancel, counted=True)
                error = f"could not start a thread for it: {type(exc).__name__}: {exc}"
                unstarted.append((hook, Outcome.fail_open(error, failure="crash"), utc_timestamp(), 0.0))
        return unstarted

    def run_manual(self, hook: Hook, full: Mapping[str, Any], payload: bytes, settings: Settings) -> RunRecord:
        """Fire one hook now, on this thread, as an async fire marked manual."""
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
            from hookbus.dialect import in_dialect

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
                from hookbus.dialect import input_from_dialect

                outcome = input_from_dialect(envelope, outcome, settings)
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
            running = list(self._running)
            workers = self._async
        for token in running:
            token.cancel(reason)
        if workers is not None:
            workers.cancel_all(reason)

    def close(self, deadline: float) -> None:
        """Let running hooks finish until ``deadline`` (time.monotonic()), then kill and
        record what is left, within CANCEL_GRACE_SECONDS more."""
        workers = self._async
        if workers is not None:
            workers.drain(deadline)
        with self._lock:
            while self._sync_emits and time.monotonic() < deadline:
                self._lock.wait(clamp_wait(deadline - time.monotonic()))
        if workers is not None:
            # What is left is killed (running) or never started (queued): each is recorded.
            workers.cancel_all(self._interrupted or CANCELLED_AT_SHUTDOWN)
            workers.drain(time.monotonic() + CANCEL_GRACE_SECONDS)
            workers.stop(CANCEL_GRACE_SECONDS)
        if self._threads is not None:
            self._threads.shutdown()


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
