"""``BackgroundWriter``: what every recorder needs so that emit never waits on its storage.

A recorder's ``hookbus_record`` runs on the emitting thread. Writing there makes every tool
call wait on a disk or a database, so a recorder hands the record to a queue and a thread
of its own writes it. That machinery is the same for every recorder: a queue bounded in
items and in bytes that never blocks, one thread writing in batches, ``flush`` for readers
and for closing, the buses of a process sharing it, and lost records counted and reported
once, not per record.
``BackgroundWriter`` is that machinery; a recorder supplies only ``write_batch``, its
storage code::

    writer: BackgroundWriter[RunRecord] = BackgroundWriter(store_records, name="hookbus-mydb")

    @hookimpl
    def hookbus_startup(bus: HookBus) -> None:
        writer.acquire()

    @hookimpl
    def hookbus_record(bus: HookBus, record: RunRecord) -> None:
        writer.submit(record)

    @hookimpl
    def hookbus_shutdown(bus: HookBus) -> None:
        writer.release(30.0)

    def lost_records(home: Home | None = None) -> int:  # read by bus.lost_records
        return writer.lost

contrib/examples/jsonl_recorder.py is a whole recorder built on it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from typing import Any, Callable, Generic, TypeVar

from hookbus.reporting import ReportOnce, logger

T = TypeVar("T")

#: Items that may wait to be written before new ones are dropped (``max_queue``).
MAX_QUEUE = 100_000
#: What the items waiting, and the batch being written, may hold in bytes before new ones
#: are dropped (``max_bytes``), as ``weigh`` estimates it (by default ``approximate_bytes``):
#: a record may carry a megabyte of reason or rewritten input, and a hundred thousand of
#: those behind a stuck disk would be a hundred gigabytes. One item larger than this is
#: still taken when nothing else waits.
MAX_QUEUE_BYTES = 64 << 20
_MiB = 1 << 20
#: How long the first item of a batch waits for others (``batch_delay``): one write per
#: burst of emits, not per emit.
BATCH_DELAY_SECONDS = 0.02
#: Items handed to one ``write_batch`` call (``max_batch``): what one failing call loses.
MAX_BATCH = 1_000


class BackgroundWriter(Generic[T]):
    """A queue and one daemon thread that hands what has queued up to ``write_batch``.

    ``write_batch(items)`` is the recorder's storage code. It is called on the writer's
    thread only, one call at a time, with at most ``max_batch`` items (None: all that
    wait) in the order they were submitted. The first item of a batch waits up to
    ``batch_delay`` seconds for others to join it; ``flush``, ``close`` and the last
    ``release`` do not wait. If it raises, its items are lost: counted in ``failed``,
    reported once on the ``hookbus`` logger (with the count so far) and once when a later
    batch succeeds; the thread goes on with the next batch.

    ``submit`` never waits for the writing and never raises: an item it cannot take (the
    queue already holds ``max_queue`` items, or its items and the batch being written hold
    ``max_bytes`` bytes as ``weigh(item)`` estimates them: the newest are dropped; or the
    writer is closed) is counted in ``dropped`` and reported the same way. ``lost`` is
    both, the number a recorder's module-level ``lost_records(home)`` reports to
    ``bus.lost_records``.

    Several buses may share one writer: each calls ``acquire`` at start-up and
    ``release`` at shutdown. The thread starts with the first ``submit``, is named
    ``name`` (which also begins every message), and ends when the last user releases the
    writer, or at ``close``, after writing everything queued; a later ``submit`` starts a
    new one, which ends once it has written what it was given unless a user acquires the
    writer again. Every method is safe to call from any thread.
    ``on_stop``, if given, is called on the thread when it has written everything and is
    about to end: the place to close what ``write_batch`` opened that belongs to that
    thread (a ``sqlite3`` connection). If more arrives meanwhile the thread goes on, so
    ``write_batch`` must reopen lazily what ``on_stop`` closed.

    Counts are of this process: a forked child starts with an empty queue (what was
    queued at the fork is the parent's to write), no thread and counts at zero.
    """

    def __init__(
        self,
        write_batch: Callable[[list[T]], None],
        *,
        name: str,
        max_queue: int = MAX_QUEUE,
        batch_delay: float = BATCH_DELAY_SECONDS,
        max_batch: int | None = MAX_BATCH,
        on_stop: Callable[[], None] | None = None,
        log: logging.Logger = logger,
        max_bytes: int = MAX_QUEUE_BYTES,
        weigh: Callable[[T], int] | None = None,
    ) -> None:
        where = f"BackgroundWriter(name={name!r})"
        if max_queue < 1:
            raise ValueError(f"{where}: max_queue must be at least 1, not {max_queue}")
        if max_bytes < 1:
            raise ValueError(f"{where}: max_bytes must be at least 1, not {max_bytes}")
        if batch_delay < 0:
            raise ValueError(f"{where}: batch_delay is seconds, 0 or more, not {batch_delay}")
        if max_batch is not None and max_batch < 1:
            raise ValueError(f"{where}: max_batch must be at least 1 (or None: no limit), not {max_batch}")
        self.name = name
        self._write_batch = write_batch
        self._max_queue = max_queue
        self._max_bytes = max_bytes
        self._weigh: Callable[[T], int] = weigh or approximate_bytes
        self._delay = batch_delay
        self._max_batch = max_batch
        self._on_stop = on_stop
        self._log = log
        self._users = 0
        #: Set by the last release and by close: the thread writes what is queued, then ends.
        self._stopping = False
        self._closed = False
        self._full_key = f"{name}: queue full"
        self._closed_key = f"{name}: closed"
        self._write_key = f"{name}: write_batch"
        self._start_key = f"{name}: thread"
        self._start_fresh()
        _WRITERS.add(self)

    def _start_fresh(self) -> None:
        """Nothing queued, no thread, nothing counted: a new writer's state, and a forked
        child's (whose copies of the parent's lock may be held by a thread it does not have)."""
        self._lock = threading.Lock()
        #: The thread waits on this for work; flush, release and close on ``_progress``.
        self._work = threading.Condition(self._lock)
        self._progress = threading.Condition(self._lock)
        self._queue: deque[T] = deque()
        #: What each item waiting weighs, in the queue's order.
        self._weights: deque[int] = deque()
        #: What the items waiting and the batch being written weigh: what ``max_bytes`` bounds.
        self._held_bytes = 0
        #: When the oldest item waiting arrived: its batch is written ``batch_delay`` after.
        self._first_at = 0.0
        self._submitted = 0
        #: Items handed to ``write_batch`` whose call returned (or raised).
        self._done = 0
        #: ``flush`` wants everything up to this many items done now, not after the delay.
        self._flush_target = 0
        self._thread: threading.Thread | None = None
        self._dropped = 0
        self._failed = 0
        self._report = ReportOnce(self._log)

    # -- counts ---------------------------------------------------------------------------

    @property
    def dropped(self) -> int:
        """Items ``submit`` refused: the queue was full, or the writer closed."""
        return self._dropped

    @property
    def failed(self) -> int:
        """Items of the batches ``write_batch`` raised on."""
        return self._failed

    @property
    def lost(self) -> int:
        """``dropped`` + ``failed``: submitted and never written, in this process."""
        return self._dropped + self._failed

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def held_bytes(self) -> int:
        """What the items waiting and the batch being written weigh now, by estimate."""
        return self._held_bytes

    # -- the emitting side ----------------------------------------------------------------

    def submit(self, item: T) -> bool:
        """Queue ``item`` to be written; False if it was dropped (the queue holds
        ``max_queue`` items or ``max_bytes`` bytes already, or the writer is closed). Never
        blocks on the writing, never raises."""
        try:
            weight = max(0, int(self._weigh(item)))  # outside the lock: it may walk the item
        except Exception:  # a weigh that fails must not lose the record: count it as large
            weight = self._max_bytes
        with self._lock:
            queue = self._queue
            closed = self._closed
            held = self._held_bytes
            # One item, however large, is taken when nothing else is held: the bound is on
            # what piles up behind a slow storage, not on what a single record may be.
            room = len(queue) < self._max_queue and (not held or held + weight <= self._max_bytes)
            accepted = not closed and room
            if accepted:
                queue.append(item)
                self._weights.append(weight)
                self._held_bytes = held + weight
                self._submitted += 1
                if len(queue) == 1:
                    self._first_at = time.monotonic()
                    self._work.notify()  # the thread may be idle, waiting for work
                elif len(queue) == self._max_batch:
                    self._work.notify()  # a whole batch: no need to wait out the delay
                if self._thread is None:
                    self._start_thread()
            else:
                self._dropped += 1
        # Reported outside the lock: a slow logging handler must not hold up the writer.
        if accepted:
            if self._report.any_failing:  # the common case builds no message and takes no lock
                self._report.succeeded(self._full_key)
        elif closed:
            self._report.failed(
                self._closed_key,
                f"{self.name}: a record was submitted after close() and is dropped (close the "
                "writer only after the last bus recording through it has closed)",
                lost=1,
            )
        else:
            self._report.failed(
                self._full_key,
                f"{self.name}: the queue is full ({len(queue):,} records wait to be written, "
                f"{held / _MiB:.1f} MiB with the batch being written; at most "
                f"{self._max_queue:,} and {self._max_bytes / _MiB:.1f} MiB), so new records are "
                "dropped until the writer catches up; its storage is slow or stuck (a larger "
                "max_queue or max_bytes absorbs longer bursts)",
                lost=1,
            )
        return accepted

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every item submitted before this call has been handed to
        ``write_batch`` and the call returned (written, or counted in ``failed``); the batch
        delay is not waited out. False if ``timeout`` seconds passed first."""
        if threading.current_thread() is self._thread:
            raise RuntimeError(
                f"{self.name}: flush() called from write_batch or on_stop would wait for "
                "itself; only other threads may flush"
            )
        deadline = _deadline(timeout)
        with self._lock:
            target = self._submitted
            if self._done >= target:
                return True
            if target > self._flush_target:
                self._flush_target = target
                self._work.notify()
            if self._thread is None:
                self._start_thread()  # it could not start at submit: try again
            return self._progress.wait_for(lambda: self._done >= target, _remaining(deadline))

    # -- users ----------------------------------------------------------------------------

    def acquire(self) -> None:
        """One more user (a bus, from ``hookbus_startup``): the thread runs until the last
        one releases it. No effect once closed."""
        with self._lock:
            if self._closed:
                return
            self._users += 1
            self._stopping = False  # a thread ending for the last release goes on instead
            self._progress.notify_all()  # that release stops waiting for it to end

    def release(self, timeout: float | None = None) -> bool:
        """One user fewer (from ``hookbus_shutdown``): flush, and for the last user end the
        thread. False if that took more than ``timeout`` seconds (the thread still ends
        once it has written everything)."""
        deadline = _deadline(timeout)
        flushed = self.flush(timeout)
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users:
                return flushed
            self._stopping = True
        return self._end_thread(deadline, revivable=True) and flushed

    def close(self, timeout: float | None = None) -> bool:
        """Write everything queued, end the thread, and refuse (drop) what is submitted
        from then on, whoever still uses the writer. Idempotent; False if the thread had
        not ended within ``timeout`` seconds."""
        deadline = _deadline(timeout)
        with self._lock:
            self._closed = True
            self._stopping = True
        return self._end_thread(deadline, revivable=False)

    def _end_thread(self, deadline: float | None, revivable: bool) -> bool:
        """With ``_stopping`` set: wait until the thread has written everything and ended,
        or (``revivable``) a new user keeps it. False on timeout."""
        with self._lock:
            thread = self._thread
            if thread is None:
                if not self._queue:
                    return True
                self._start_thread()  # it could not start at submit: try again
                thread = self._thread
                if thread is None:
                    return False
            self._work.notify()  # no more gathering: write what is queued now

            def ended_or_kept() -> bool:
                return self._thread is not thread or (revivable and self._users > 0)

            if not self._progress.wait_for(ended_or_kept, _remaining(deadline)):
                return False
            if self._thread is thread:
                return True  # a bus opened meanwhile: the thread goes on for it
        thread.join(_remaining(deadline))  # it only has to return: it did its last write
        return not thread.is_alive()

    # -- the writer's thread --------------------------------------------------------------

    def _start_thread(self) -> None:
        """(Holding the lock.) A failure to start (no threads left, or the interpreter is
        exiting) must not reach submit: the items wait, and the next submit tries again."""
        thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        try:
            thread.start()
        except RuntimeError as exc:
            self._report.failed(
                self._start_key,
                f"{self.name}: cannot start its writer thread ({exc}); records wait in the "
                "queue until it can",
            )
            return
        self._thread = thread
        if self._report.any_failing:
            self._report.succeeded(self._start_key)

    def _run(self) -> None:
        try:
            while True:
                batch = self._next_batch()
                if batch is not None:
                    self._write(*batch)
                    # Let go of it now, not when the next batch comes: what ``held_bytes``
                    # no longer counts must not stay in memory while the thread waits.
                    batch = None
                elif self._stopped():
                    return
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    # Ended by a BaseException out of write_batch: start over, so the
                    # queue is still written and flush still returns.
                    self._thread = None
                    if self._queue:
                        self._start_thread()
                self._progress.notify_all()

    def _urgent(self) -> bool:
        return self._stopping or self._flush_target > self._done

    def _next_batch(self) -> tuple[list[T], int] | None:
        """The next batch and its weight, once it has gathered; None when stopping with
        nothing queued."""
        with self._lock:
            queue = self._queue
            while not queue:
                if self._stopping:
                    return None
                self._work.wait()
            # One timed wait (woken early only by flush, close or a full batch), not a poll.
            while not self._urgent() and (self._max_batch is None or len(queue) < self._max_batch):
                remaining = self._first_at + self._delay - time.monotonic()
                if remaining <= 0:
                    break
                self._work.wait(remaining)
            weights = self._weights
            if self._max_batch is None or len(queue) <= self._max_batch:
                batch = list(queue)
                weight = sum(weights)
                queue.clear()
                weights.clear()
            else:
                batch = [queue.popleft() for _ in range(self._max_batch)]
                weight = sum(weights.popleft() for _ in range(self._max_batch))
            return batch, weight

    def _write(self, batch: list[T], weight: int) -> None:
        written = False
        try:
            self._write_batch(batch)
            written = True
        except Exception as exc:  # the storage's failure must not end the thread
            self._report.failed(
                self._write_key,
                f"{self.name}: writing a batch failed, {type(exc).__name__}: {exc}"
                f"{_raised_at(exc)}; the writer goes on with the next batch",
                lost=len(batch),
            )
        else:
            if self._report.any_failing:  # the common case takes no lock
                self._report.succeeded(self._write_key)
        finally:
            # After the report (a flush that returns finds it logged), and even for a
            # BaseException: the batch is done with, so flush can return.
            with self._lock:
                self._done += len(batch)
                if not written:
                    self._failed += len(batch)
                self._held_bytes -= weight
                self._progress.notify_all()

    def _stopped(self) -> bool:
        """Everything is written and the thread is stopping: run on_stop, then end, unless
        work came in (or a user acquired the writer) meanwhile."""
        if self._on_stop is not None:
            try:
                self._on_stop()
            except Exception as exc:  # a failure to close must not keep the thread alive
                self._report.failed(
                    f"{self.name}: on_stop",
                    f"{self.name}: on_stop failed, {type(exc).__name__}: {exc}{_raised_at(exc)}",
                )
        with self._lock:
            if self._queue or not self._stopping:
                return False
            self._thread = None
            self._progress.notify_all()
            return True


def approximate_bytes(value: object) -> int:
    """What ``value`` holds in memory, by estimate: ``sys.getsizeof`` of it and of what it
    holds (dict keys and values, list, tuple and set items, the fields of attrs classes such
    as RunRecord, the attributes of plain objects), each container once. Iterative, so an
    item nested 100,000 deep costs no recursion; a container that holds itself is counted
    once. The default ``weigh`` of a BackgroundWriter."""
    total = 0
    seen: set[int] = set()
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is bytes or kind is int or kind is float or kind is bool or item is None:
            total += sys.getsizeof(item)
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset, deque)):
            stack.extend(item)
        else:
            fields = getattr(kind, "__attrs_attrs__", None)
            if fields is not None:
                stack.extend(getattr(item, field.name, None) for field in fields)
            elif hasattr(item, "__dict__"):
                stack.append(vars(item))
    return total


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _raised_at(exc: BaseException) -> str:
    """Where the storage code raised, so its author knows where to look."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" (raised at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


#: Every writer of the process, for the reset in a forked child.
_WRITERS: weakref.WeakSet[BackgroundWriter[Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writer in list(_WRITERS):
        writer._start_fresh()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
