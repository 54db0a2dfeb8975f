"""One background thread that writes the records of every open bus in this process.

Emit only appends to a queue. The thread takes what has queued up, writes each log line,
then updates each hook's state.json once for all of its new runs. ``flush`` waits until
everything submitted before it is on disk; the thread ends when the last bus releases it.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from pathlib import Path
from typing import Callable, Mapping

import attrs

from hookbus.home import Home
from hookbus.records import RunRecord
from hookbus.reporting import ReportOnce

from hookbus_recorder.logfile import LogAppender, log_path
from hookbus_recorder.state import append_runs, set_load_error


@attrs.frozen
class LoadErrors:
    """Queued beside records, so state.json sees load errors and fires in order."""

    errors: Mapping[str, str | None]


class RecordWriter:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[tuple[Home, RunRecord | LoadErrors]] = deque()
        self._submitted = 0
        self._written = 0
        self._users = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._appender = LogAppender()
        self._report = ReportOnce()

    def acquire(self) -> None:
        with self._condition:
            self._users += 1
            self._ensure_thread()

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
        with self._condition:
            self._queue.append((home, record))
            self._submitted += 1
            self._ensure_thread()
            self._condition.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record submitted so far is written; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            target = self._submitted
            while self._written < target:
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
                while not self._queue and not self._stopping:
                    self._condition.wait()
                if not self._queue and self._stopping:
                    return
                batch = list(self._queue)
                self._queue.clear()
            self._write(batch)
            with self._condition:
                self._written += len(batch)
                self._condition.notify_all()

    def _write(self, batch: list[tuple[Home, RunRecord | LoadErrors]]) -> None:
        by_hook: dict[Path, list[RunRecord]] = defaultdict(list)
        for home, record in batch:
            if isinstance(record, LoadErrors):
                self._write_runs(by_hook)  # keep the order of runs and load errors
                for hook_id, error in record.errors.items():
                    hook_dir = home.hook_dir(hook_id)
                    self._guard(
                        f"writing {hook_dir / 'state.json'}",
                        lambda: set_load_error(hook_dir, error),
                    )
                continue
            self._guard(
                f"writing the hook log in {home.logs_dir}",
                lambda: self._appender.append(
                    log_path(home.logs_dir, record.at), record.log_entry()
                ),
            )
            by_hook[home.hook_dir(record.hook_id)].append(record)
        self._write_runs(by_hook)

    def _write_runs(self, by_hook: dict[Path, list[RunRecord]]) -> None:
        for hook_dir, runs in by_hook.items():
            self._guard(
                f"writing {hook_dir / 'state.json'}", lambda: append_runs(hook_dir, runs)
            )
        by_hook.clear()

    def _guard(self, what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # a full disk must not kill the writer
            self._report.failed(what, f"hookbus recorder: {what} failed: {exc}")
        else:
            self._report.succeeded(what)
