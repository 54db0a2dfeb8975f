"""The bounded pool that runs async hooks: submitting one costs emit about a microsecond.

A ThreadPoolExecutor builds a Future and a work item and may start a thread on every
submit; an async fire needs none of that. Jobs go on a SimpleQueue; up to ``size`` daemon
threads (started on demand) run them. The pool counts what it was given and what it
finished, so ``drain`` can wait for all of it, and ``cancel_all`` ends the running jobs
(through their CancelToken) and turns the queued ones into "cancelled" without running them.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Generic, TypeVar

from hookbus.runners import CancelToken

Job = TypeVar("Job")
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
                self._lock.wait(remaining)
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
