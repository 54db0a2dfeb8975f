"""The bounded pool that runs async hooks: submitting one costs emit about a microsecond.

A ThreadPoolExecutor builds a Future and a work item and may start a thread on every
submit; an async fire needs none of that. Jobs go on a SimpleQueue; up to ``size`` daemon
threads (started on demand) run them. The pool counts what it was given and what it
finished, so ``drain`` can wait for all of it, and ``cancel_all`` ends the running jobs
(through their CancelToken) and turns the queued ones into "cancelled" without running them.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from hookbus.cancel import CancelToken

logger = logging.getLogger("hookbus")
Job = TypeVar("Job")
Result = TypeVar("Result")

if TYPE_CHECKING:
    from concurrent.futures import Future
_STOP = object()


class AsyncWorkers(Generic[Job]):
    """``run(job, token)`` for each submitted job, on at most ``size`` threads."""

    def __init__(
        self,
        size: int,
        run: Callable[[Job, CancelToken], object],
        cancelled: Callable[[Job, str], None],
    ) -> None:
        self.size = max(1, size)
        self._run = run
        self._cancelled = cancelled
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._submitted = 0
        self._finished = 0
        self._count_lock = threading.Lock()  # a plain Lock: the cheapest on the emitting thread
        self._threads: list[threading.Thread] = []
        self._running: set[CancelToken] = set()
        self._cancel_reason: str | None = None
        self._lock = threading.Condition()

    def submit(self, job: Job) -> None:
        with self._count_lock:
            self._submitted += 1
        self._queue.put(job)
        if len(self._threads) < self.size:
            self._start_thread()

    def _start_thread(self) -> None:
        with self._lock:
            if len(self._threads) >= self.size:
                return
            thread = threading.Thread(target=self._work, name=f"hookbus-async-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            token = CancelToken()
            with self._lock:
                reason = self._cancel_reason
                if reason is None:
                    self._running.add(token)
            try:
                if reason is not None:
                    self._cancelled(job, reason)  # type: ignore[arg-type]
                else:
                    self._run(job, token)  # type: ignore[arg-type]
            except BaseException as exc:
                # A worker never dies of its job (SystemExit from a plugin, say): a dead one
                # would leave async hooks unrun for good and close() waiting its full bound.
                logger.error("hookbus: an async job failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
                try:
                    self._cancelled(job, f"hookbus could not run it: {type(exc).__name__}: {exc}")  # type: ignore[arg-type]
                except BaseException:
                    logger.exception("hookbus: an async job could not be recorded")
            finally:
                with self._lock:
                    self._running.discard(token)
                    self._finished += 1
                    self._lock.notify_all()

    def drain(self, deadline: float) -> bool:
        """Wait until every job submitted so far has finished, or ``deadline`` passes."""
        with self._lock:
            while self._finished < self._submitted:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(clamp_wait(remaining))
        return True

    def cancel_all(self, reason: str) -> None:
        """Cancel what runs now; what is still queued will be recorded as cancelled."""
        with self._lock:
            self._cancel_reason = reason
            running = list(self._running)
        for token in running:
            token.cancel(reason)

    def stop(self, timeout: float) -> None:
        """End the threads (after the queued jobs), waiting up to ``timeout`` for them."""
        with self._lock:
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(_STOP)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def clamp_wait(seconds: float) -> float:
    """A wait threading accepts: never negative, never past ``threading.TIMEOUT_MAX`` (a
    hook's timeout may be as long as Go's maximum duration, 292 years; a longer wait raises
    OverflowError)."""
    return min(max(0.0, seconds), threading.TIMEOUT_MAX)


class StartedJob:
    """A job handed to ``ElasticThreads``: its Future, and when it really started."""

    __slots__ = ("future", "started")

    def __init__(self) -> None:
        from concurrent.futures import Future

        self.future: Future[Any] = Future()
        #: ``time.monotonic()`` when a thread began running it; None until then.
        self.started: float | None = None


class _Idle:
    """A thread waiting for its next job, in a slot of its own."""

    __slots__ = ("wake", "job")

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.job: tuple[StartedJob, Callable[[], Any]] | None = None


class ElasticThreads:
    """Runs every job at once, on an idle thread if there is one, else on a new thread.

    Nothing ever waits in a queue behind another job: the sync hooks of one emit must not
    queue behind another emit's, nor behind slow hooks of their own emit, or a blocking deny
    would time out before it started. A thread idle for ``idle_seconds`` ends, so a burst
    leaves nothing behind for long. There is no cap: each job is a hook that runs now, and
    what bounds them is how many the embedder emits at once.
    """

    def __init__(self, name: str, idle_seconds: float = 30.0) -> None:
        self.name = name
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._idle: list[_Idle] = []
        self._count = 0
        self._closed = False

    def submit(self, function: Callable[[], Any]) -> StartedJob:
        job = StartedJob()
        with self._lock:
            if self._closed:
                raise RuntimeError("ElasticThreads is shut down")
            slot = self._idle.pop() if self._idle else None
            if slot is None:
                self._count += 1
                number = self._count
        if slot is not None:
            slot.job = (job, function)
            slot.wake.set()
            return job
        thread = threading.Thread(
            target=self._work, args=((job, function),), name=f"{self.name}-{number}", daemon=True
        )
        thread.start()
        return job

    def _work(self, first: tuple[StartedJob, Callable[[], Any]]) -> None:
        work: tuple[StartedJob, Callable[[], Any]] | None = first
        slot = _Idle()
        while work is not None:
            job, function = work
            job.started = time.monotonic()
            try:
                job.future.set_result(function())
            except BaseException as exc:  # a worker never dies of its job
                job.future.set_exception(exc)
            work = self._next(slot)

    def _next(self, slot: _Idle) -> tuple[StartedJob, Callable[[], Any]] | None:
        """Wait idle for another job; None when none came in time (the thread ends)."""
        slot.wake.clear()
        slot.job = None
        with self._lock:
            if self._closed:
                return None
            self._idle.append(slot)
        if not slot.wake.wait(self.idle_seconds):
            with self._lock:
                if slot in self._idle:
                    self._idle.remove(slot)
                    return None
            slot.wake.wait()  # submit() took this slot just as it timed out: its job is coming
        return slot.job

    def shutdown(self) -> None:
        """Idle threads end now; busy ones end when their job does."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for slot in idle:
            slot.wake.set()  # job None: the thread ends


async def run_on_a_thread(function: Callable[[], Any], name: str) -> None:
    """Await ``function()`` run on a new thread of its own (not an executor's, whose queue
    could hold it up), its exception raised here. Cancelling the await does not stop it."""
    import asyncio

    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if finished.done():
            return
        if error is None:
            finished.set_result(None)
        else:
            finished.set_exception(error)

    def run() -> None:
        error: BaseException | None = None
        try:
            function()
        except BaseException as exc:  # handed to the awaiting task, not lost on this thread
            error = exc
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:
            pass  # the loop closed meanwhile: nobody is waiting

    threading.Thread(target=run, name=name, daemon=True).start()
    await finished


def finished(value: Result) -> Future[Result]:
    """A Future that is done already, with ``value``."""
    from concurrent.futures import Future  # only submit and aemit need it

    future: Future[Result] = Future()
    future.set_result(value)
    return future
