"""One background thread that writes the records of every open bus in this process.

Each fire's audit line is written at once, by the thread that recorded it (one ``write`` of
one whole line on an O_APPEND descriptor). state.json is the slow part (a temp file, fsync,
rename), so it waits in a queue: the thread rewrites a hook's state.json once for all its
runs of the last 50 ms. ``flush`` writes everything submitted before it; the thread ends when
the last bus releases it.

A record the log cannot take (a refused path, a full disk) never reaches ``emit``: it is
counted in ``lost_records`` and reported once per failure, with the count so far, and once
when the log recovers, with how many were lost meanwhile.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Mapping

import attrs

from hookbus.home import Home
from hookbus.records import RunRecord
from hookbus.reporting import ReportOnce

from hookbus_recorder.logfile import LogAppender
from hookbus_recorder.state import append_runs, set_load_error


@attrs.frozen
class LoadErrors:
    """Queued beside records, so state.json sees load errors and fires in order."""

    errors: Mapping[str, str | None]


#: A busy hook's state.json is rewritten at most this often.
STATE_DELAY_SECONDS = 0.05
#: Queued state updates are gathered over this long: one wake-up of the writer per batch,
#: not per fire, keeps it off the emitting thread's back. (flush and close do not wait.)
BATCH_DELAY_SECONDS = 0.02


class RecordWriter:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[tuple[Home, RunRecord | LoadErrors]] = deque()
        self._submitted = 0
        #: Items fully on disk: a record once its log line and its state.json are written.
        self._done = 0
        #: ``flush`` wants everything up to this many items on disk now, not after a delay.
        self._flush_target = 0
        #: Runs already in the log whose state.json update is waiting to be coalesced.
        self._pending: dict[Path, list[RunRecord]] = {}
        self._pending_since: dict[Path, float] = {}
        self._users = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._appender = LogAppender()
        self._report = ReportOnce()

    def lost_in(self, home: Home) -> int:
        """Records the log of ``home`` could not take since this process started."""
        return self._report.lost_by_key.get(_log_key(home), 0)

    @property
    def lost_records(self) -> int:
        """Records the log could not take since this process started (all homes)."""
        return sum(self._report.lost_by_key.values())

    def acquire(self) -> None:
        with self._condition:
            self._users += 1  # the thread starts with the first record, not before

    def release(self, timeout: float | None = None) -> None:
        """Flush, and stop the thread when no bus uses it any more."""
        self.flush(timeout)
        with self._condition:
            self._users = max(0, self._users - 1)
            thread = self._thread
            if self._users or thread is None:
                return
            self._stopping = True
            self._condition.notify_all()
        thread.join(timeout)
        with self._condition:
            if self._thread is thread and not thread.is_alive():
                self._thread = None
                self._stopping = False
                self._appender.close()

    def submit(self, home: Home, record: RunRecord | LoadErrors) -> None:
        if isinstance(record, RunRecord):
            # The audit line is written now, on the caller's thread (one write of one whole
            # line): a crash loses at most the line being written. Only state.json waits.
            try:
                self._appender.append(home.logs_dir, record.at, record.log_entry())
            except Exception as exc:  # a full disk or a refused path must not reach emit
                what = _log_key(home)
                self._report.failed(what, f"hookbus recorder: {what} failed: {exc}", lost=1)
            else:
                if self._report.any_failing:  # the common case builds no message key
                    self._report.succeeded(_log_key(home))
        with self._condition:
            self._queue.append((home, record))
            self._submitted += 1
            self._ensure_thread()
            if len(self._queue) == 1:  # the writer is (or will be) gathering: no need to wake it
                self._condition.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Write everything submitted so far, state.json included; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            target = self._submitted
            self._flush_target = max(self._flush_target, target)
            self._condition.notify_all()
            while self._done < target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._stopping = False
            self._thread = threading.Thread(
                target=self._run, name="hookbus-recorder", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._condition:
                while True:
                    urgent = self._stopping or self._flush_target > self._done
                    if self._queue or (urgent and self._pending):
                        break
                    if self._stopping:
                        return
                    due = min(self._pending_since.values(), default=None)
                    if due is not None and time.monotonic() >= due + STATE_DELAY_SECONDS:
                        break
                    wait = None if due is None else due + STATE_DELAY_SECONDS - time.monotonic()
                    self._condition.wait(wait)
                if self._queue and not urgent:
                    self._condition.wait(BATCH_DELAY_SECONDS)  # let a batch gather
                batch = list(self._queue)
                self._queue.clear()
                urgent = self._stopping or self._flush_target > self._done
            done = self._write(batch)
            done += self._write_states(force=urgent)
            with self._condition:
                self._done += done
                self._condition.notify_all()

    def _write(self, batch: list[tuple[Home, RunRecord | LoadErrors]]) -> int:
        """Load errors now; state.json runs pending. Returns the items done already."""
        done = 0
        now = time.monotonic()
        for home, record in batch:
            if isinstance(record, LoadErrors):
                done += self._write_states(force=True)  # keep runs and load errors in order
                hooks_root = str(home.hooks_dir)
                for hook_id, error in record.errors.items():
                    if error is None and not os.path.lexists(os.path.join(hooks_root, hook_id, "state.json")):
                        continue  # nothing to clear (most hooks at start-up): no Path, no lock
                    hook_dir = home.hook_dir(hook_id)
                    self._guard(
                        f"writing {hook_dir / 'state.json'}",
                        lambda: set_load_error(hook_dir, error),
                    )
                done += 1
                continue
            hook_dir = home.hook_dir(record.hook_id)
            self._pending.setdefault(hook_dir, []).append(record)
            self._pending_since.setdefault(hook_dir, now)
        return done

    def _write_states(self, force: bool) -> int:
        """Update the state.json of hooks whose runs have waited long enough (all if
        ``force``); returns how many runs that covered."""
        now = time.monotonic()
        due = [
            hook_dir
            for hook_dir, since in self._pending_since.items()
            if force or now >= since + STATE_DELAY_SECONDS
        ]
        done = 0
        for hook_dir in due:
            runs = self._pending.pop(hook_dir)
            del self._pending_since[hook_dir]
            self._guard(f"writing {hook_dir / 'state.json'}", lambda: append_runs(hook_dir, runs))
            done += len(runs)
        return done

    def _guard(self, what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # a full disk must not kill the writer
            self._report.failed(what, f"hookbus recorder: {what} failed: {exc}")
        else:
            self._report.succeeded(what)


def _log_key(home: Home) -> str:
    """How a failure of a home's log is reported, and counted."""
    return f"writing the hook log in {home.logs_dir}"
