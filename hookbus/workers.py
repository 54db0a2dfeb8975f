"""The bounded pool that runs async hooks: submitting one costs emit about a microsecond.

A ThreadPoolExecutor builds a Future and a work item and may start a thread on every
submit; an async fire needs none of that. Jobs go on a SimpleQueue; up to ``size`` daemon
threads (started on demand) run them. The pool counts what it was given and what it
finished, so ``drain`` can wait for all of it, and ``cancel_all`` ends the running jobs
(through their CancelToken) and turns the queued ones into "cancelled" without running them.

What the pool holds is bounded in entries and in bytes (``MAX_ASYNC_JOBS``,
``MAX_ASYNC_BYTES``): an emit that matches only async hooks returns at once, so without a
bound a host that emits faster than its async hooks finish would queue envelopes until
memory runs out. A fire past either bound is not queued: it is handed to ``cancelled`` with
the reason, on the emitting thread (the bus records it as not run), and never waits for room.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Generic, TypeVar

from hookbus.cancel import CancelToken
from hookbus.reporting import ReportOnce

logger = logging.getLogger("hookbus")
#: How the full pool is reported (once until there is room again).
_FULL = "hookbus: the async queue"
Job = TypeVar("Job")
Result = TypeVar("Result")

if TYPE_CHECKING:
    from concurrent.futures import Future
_STOP = object()

#: Async fires the pool holds at most, waiting for a worker or running. Read when a bus makes
#: its pool (at its first async fire): set it before that to change it.
MAX_ASYNC_JOBS = 10_000
#: What those fires may hold at most, in bytes, by ``envelope_bytes``'s estimate (their envelopes
#: as JSON and as the mapping hooks get; the fires of one emit share one). A fire whose
#: envelope alone is larger still runs when the pool holds nothing else. Read as above.
MAX_ASYNC_BYTES = 64 << 20
#: What a held fire costs beyond its envelope: its job tuple, its queue slot, the pool's
#: bookkeeping of it.
JOB_OVERHEAD_BYTES = 512

# What one byte or token of an envelope's JSON can cost once it is a Python mapping, at most
# (measured with tracemalloc on json.loads of the worst shapes: empty objects, nested arrays,
# unique keys, one astral character that makes a whole string 4 bytes a character).
_PER_BYTE = 5  # the JSON itself (1), and its text as str: up to 4 bytes a character
_PER_OBJECT = 200  # "{": a dict, 64 bytes empty and 184 with up to five keys, and its slot
_PER_ARRAY = 96  # "[": a list, 56 bytes and its first four slots, and its slot
_PER_ITEM = 96  # ",": one more element: its slot and its object, or a dict entry and its key
#: An envelope this small is charged the most any JSON of its size can cost (nested arrays,
#: 44 bytes a byte), without counting anything: counting costs more than the rest of an async
#: fire's submit, and for such envelopes the bound in fires (MAX_ASYNC_JOBS) is what counts.
_SMALL_ENVELOPE = 256
_WORST_PER_BYTE = 48
_MiB = 1 << 20


def envelope_bytes(payload: bytes) -> int:
    """What an async fire's envelope holds, by estimate: ``payload`` (its JSON) and the
    mapping it encodes, which for ``[{},{},...]`` is some 25 times the JSON. Made to be
    no less than the real figure (checked with tracemalloc against the worst shapes above);
    often more: it counts braces and commas inside strings too, and a small envelope is
    charged the worst case of its size, up to 12 KiB."""
    size = len(payload)
    if size <= _SMALL_ENVELOPE:
        return _WORST_PER_BYTE * size
    return (
        _PER_BYTE * size
        + _PER_OBJECT * payload.count(b"{")
        + _PER_ARRAY * payload.count(b"[")
        + _PER_ITEM * payload.count(b",")
    )


def _payload_of(job: object) -> bytes | None:
    """The envelope's JSON an async job carries (the dispatcher's jobs are tuples holding it
    beside the mapping it encodes, fourth), or None for a job that carries none."""
    if type(job) is tuple:
        if len(job) > 3 and type(job[3]) is bytes:
            return job[3]  # the dispatcher's AsyncJob: no search on its hot path
        for part in job:
            if isinstance(part, bytes):
                return part
    return None


def _mib(size: int) -> str:
    return f"{size / _MiB:.1f} MiB"


class AsyncWorkers(Generic[Job]):
    """``run(job, token)`` for each submitted job, on at most ``size`` threads.

    At most ``max_jobs`` jobs and ``max_bytes`` bytes of envelopes (``envelope_bytes``) are
    held, queued or running (defaults: ``MAX_ASYNC_JOBS``, ``MAX_ASYNC_BYTES``); a job past
    either is handed to ``cancelled`` with the reason instead, on the submitting thread.
    """

    def __init__(
        self,
        size: int,
        run: Callable[[Job, CancelToken], object],
        cancelled: Callable[[Job, str], None],
        *,
        max_jobs: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.size = max(1, size)
        self.max_jobs = MAX_ASYNC_JOBS if max_jobs is None else max_jobs
        self.max_bytes = MAX_ASYNC_BYTES if max_bytes is None else max_bytes
        if self.max_jobs < 1 or self.max_bytes < 1:
            raise ValueError(
                f"AsyncWorkers: max_jobs and max_bytes must be at least 1, not {self.max_jobs} and "
                f"{self.max_bytes} (check hookbus.workers.MAX_ASYNC_JOBS and MAX_ASYNC_BYTES)"
            )
        self._run = run
        self._cancelled = cancelled
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._submitted = 0
        self._finished = 0
        self._count_lock = threading.Lock()  # a plain Lock: the cheapest on the emitting thread
        #: What the held jobs hold: jobs, bytes, and per envelope (by the id of its JSON,
        #: alive while a job holds it) how many jobs share it and what it weighs.
        self.held_jobs = 0
        self.held_bytes = 0
        self._envelopes: dict[int, list[int]] = {}
        #: Jobs turned away for want of room (each handed to ``cancelled``).
        self.refused = 0
        self._report = ReportOnce(logger)
        self._full = False
        self._threads: list[threading.Thread] = []
        self._running: set[CancelToken] = set()
        self._cancel_reason: str | None = None
        self._lock = threading.Condition()

    def submit(self, job: Job) -> bool:
        """Queue ``job``; False when the pool holds ``max_jobs`` jobs or ``max_bytes``
        bytes already: the job then goes to ``cancelled`` with the reason, on this thread,
        and never runs. Never blocks waiting for room, never raises."""
        # This is on the emitting thread, for every async fire: no more than a multiplication
        # (a small envelope; a large one is counted once per emit) and the lock beyond what
        # the queue costs.
        payload = _payload_of(job)
        envelopes = self._envelopes
        key = 0  # a large envelope's id, by which the fires of one emit share it; 0: none
        weight = -1  # what it weighs; -1: another fire holds it, as a hint said
        cost = JOB_OVERHEAD_BYTES
        if payload is not None:
            if len(payload) <= _SMALL_ENVELOPE:
                # Charged per fire, not shared: at most 12 KiB, and no bookkeeping to pay for.
                cost += _WORST_PER_BYTE * len(payload)
            else:
                key = id(payload)
                if key not in envelopes:  # a hint read without the lock
                    weight = envelope_bytes(payload)  # O(len): out of the lock
        shared: list[int] | None = None
        with self._count_lock:
            if key and payload is not None:
                shared = envelopes.get(key)
                if shared is not None:
                    weight = 0  # another fire of the same emit holds it already
                elif weight < 0:
                    weight = envelope_bytes(payload)  # the hint was stale: it left meanwhile
                cost += weight
            jobs, held = self.held_jobs, self.held_bytes
            # A lone fire runs whatever its size: the bound is what may wait behind others.
            admitted = not jobs or (jobs < self.max_jobs and held + cost <= self.max_bytes)
            if admitted:
                self.held_jobs = jobs + 1
                self.held_bytes = held + cost
                if key:
                    if shared is None:
                        envelopes[key] = [1, weight]
                    else:
                        shared[0] += 1
                self._submitted += 1
            else:
                self.refused += 1
        if not admitted:
            self._refuse(job, jobs, held)
            return False
        self._queue.put(job)
        if len(self._threads) < self.size:
            failure = self._start_thread()
            if failure is not None and not self._threads:
                self._not_started(f"not run: no thread could be started for it ({failure})")
        if self._full:  # said full: there is room again
            self._full = False
            self._report.succeeded(_FULL)
        return True

    def _refuse(self, job: Job, jobs: int, held: int) -> None:
        """Record ``job`` as not run, and say once (until there is room again) that the pool
        is full: the bus is overloaded, not broken."""
        fires = f"{jobs:,} fire{'' if jobs == 1 else 's'}"
        reason = (
            f"not run: the async queue is full ({fires}, {_mib(held)} waiting or running); "
            "the bus is overloaded"
        )
        self._full = True
        self._report.failed(
            _FULL,
            f"hookbus: the async queue is full ({fires}, {_mib(held)} waiting or running, of "
            f"at most {self.max_jobs:,} fires and {_mib(self.max_bytes)}): async hooks are fired "
            "faster than they finish, so new fires are recorded as not run (status error) until "
            "it drains; make the async hooks faster, give the bus more async_workers, or raise "
            "hookbus.workers.MAX_ASYNC_JOBS and MAX_ASYNC_BYTES",
        )
        try:
            self._cancelled(job, reason)
        except Exception:  # recording it must not break the emit that fired it
            logger.exception("hookbus: an async fire turned away could not be recorded")

    def _release(self, job: object) -> None:
        """A held job ended: what it held is free (its envelope, once no job shares it). The
        job is still alive, so the id that keys its envelope is still its envelope's."""
        payload = _payload_of(job)
        size = -1 if payload is None else len(payload)
        key = id(payload)
        with self._count_lock:
            self.held_jobs -= 1
            self.held_bytes -= JOB_OVERHEAD_BYTES
            if 0 <= size <= _SMALL_ENVELOPE:
                self.held_bytes -= _WORST_PER_BYTE * size
            elif size > _SMALL_ENVELOPE:
                shared = self._envelopes[key]
                shared[0] -= 1
                if not shared[0]:
                    del self._envelopes[key]
                    self.held_bytes -= shared[1]

    def _start_thread(self) -> str | None:
        """Start one more worker; why it could not be started (no threads left: a client of
        the same user may hold them all), or None."""
        with self._lock:
            if len(self._threads) >= self.size:
                return None
            thread = threading.Thread(target=self._work, name=f"hookbus-async-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
        try:
            thread.start()
        except RuntimeError as exc:
            with self._lock:
                self._threads.remove(thread)
            return f"{type(exc).__name__}: {exc}"
        return None

    def _not_started(self, reason: str) -> None:
        """No worker runs, and none could be started: what waits would wait for ever, so it
        is recorded as not run now (and is no longer counted against the bounds)."""
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is _STOP:
                self._queue.put(job)
                return
            try:
                self._cancelled(job, reason)  # type: ignore[arg-type]
            except Exception:  # recording it must not break the emit that fired it
                pass
            finally:
                self._release(job)

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
                # Released while the job still holds its envelope, so the id that keys it
                # cannot be another envelope's yet; then the job is let go of at once, not
                # kept until this thread's next job.
                self._release(job)
                job = None
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


async def awaited(future: Future[Result]) -> Result:
    """``future``'s result, awaited from asyncio without a thread of the loop's executor;
    at once (no asyncio import) when it is done already."""
    if future.done():
        return future.result()
    import asyncio  # only asyncio embedders pay for importing it

    result: Result = await asyncio.wrap_future(future)
    return result


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
