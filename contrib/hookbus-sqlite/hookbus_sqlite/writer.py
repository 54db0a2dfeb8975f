"""One background thread that writes the records of every open bus of this process.

``hookbus_record`` only appends to a queue, so emit never waits on the disk. The thread
takes what has queued up and writes it, per database, in short transactions. ``flush``
waits until everything submitted before it is written; the thread ends, closing its
connections, when the last bus releases it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import deque
from pathlib import Path
from typing import Union

from hookbus.reporting import ReportOnce

from hookbus_sqlite.database import Item, LoadErrorsUpdate, connect, is_busy, write

#: Attempts at one batch when the database stays locked past the busy timeout.
WRITE_ATTEMPTS = 3


class _Prune:
    """Queued when a bus closes: close the connections no open bus writes to any more."""

    __slots__ = ("keep",)

    def __init__(self, keep: frozenset[Path]) -> None:
        self.keep = keep


_Entry = tuple[Union[Path, None], Union[Item, _Prune]]


class SQLiteWriter:
    def __init__(self) -> None:
        self._reset()
        self._report = ReportOnce()

    def _reset(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[_Entry] = deque()
        self._submitted = 0
        self._written = 0
        self._users = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: The database each open bus last wrote to (by ``id(bus)``), for pruning.
        self._paths: dict[int, Path] = {}

    def after_fork_in_child(self) -> None:
        """A forked child has none of the parent's threads and must not use its locks or
        connections: start over empty (the parent writes what it had queued)."""
        users = self._users
        self._reset()
        self._report = ReportOnce()
        self._users = users

    # -- the buses' side --------------------------------------------------------------

    def acquire(self) -> None:
        with self._condition:
            self._users += 1
            self._stopping = False  # a bus opening while the last one closes keeps the thread

    def release(self, owner: int, timeout: float | None = None) -> None:
        """Flush; then stop the thread (closing its connections) when no bus uses it any
        more, or else close the connections only the releasing bus used."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def remaining() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        self.flush(timeout)
        with self._condition:
            self._users = max(0, self._users - 1)
            self._paths.pop(owner, None)
            thread = self._thread
            if thread is None:
                return
            pruning = bool(self._users)
            if pruning:
                self._enqueue(None, _Prune(frozenset(self._paths.values())))
            else:
                self._stopping = True
                self._condition.notify_all()
                # Until it exits, or a bus opening meanwhile keeps it (acquire).
                self._condition.wait_for(
                    lambda: self._thread is not thread or bool(self._users), remaining()
                )
                if self._thread is thread:
                    return
        if pruning:
            self.flush(remaining())  # the prune is done when this returns
        else:
            thread.join(remaining())  # it closes its connections on its way out

    def submit(self, path: Path, item: Item, owner: int) -> None:
        with self._condition:
            self._paths[owner] = path
            self._enqueue(path, item)

    def _enqueue(self, path: Path | None, item: Item | _Prune) -> None:
        self._queue.append((path, item))
        self._submitted += 1
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(
                target=self._run, name="hookbus-sqlite-writer", daemon=True
            )
            self._thread.start()
        self._condition.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            target = self._submitted
            while self._written < target:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    # -- the thread's side ------------------------------------------------------------

    def _run(self) -> None:
        me = threading.current_thread()
        connections: dict[Path, sqlite3.Connection] = {}
        try:
            while True:
                with self._condition:
                    while not self._queue and not self._stopping:
                        self._condition.wait()
                    if not self._queue:
                        if self._thread is me:
                            self._thread = None
                        self._condition.notify_all()
                        return
                    batch = list(self._queue)
                    self._queue.clear()
                try:
                    self._write(batch, connections)
                finally:
                    with self._condition:
                        self._written += len(batch)
                        self._condition.notify_all()
        finally:
            for connection in connections.values():
                connection.close()
            connections.clear()

    def _write(self, batch: list[_Entry], connections: dict[Path, sqlite3.Connection]) -> None:
        by_path: dict[Path, list[Item]] = {}
        for path, item in batch:
            if isinstance(item, _Prune):
                for stale in [p for p in connections if p not in item.keep and p not in by_path]:
                    connections.pop(stale).close()
            elif path is not None:
                by_path.setdefault(path, []).append(item)
        for path, items in by_path.items():
            self._write_to(path, items, connections)

    def _write_to(
        self, path: Path, items: list[Item], connections: dict[Path, sqlite3.Connection]
    ) -> None:
        key = f"writing {path}"
        if path not in connections and not os.path.exists(path) and all(
            isinstance(item, LoadErrorsUpdate) and not any(item.errors.values())
            for item in items
        ):
            return  # hooks that load fine: nothing to clear in a database not made yet
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                connection = connections.get(path)
                if connection is None:
                    connection = connections[path] = connect(path, create=True)
                write(connection, items)
            except Exception as exc:  # a full disk or a broken file must not kill the writer
                stale = connections.pop(path, None)
                if stale is not None:
                    stale.close()  # start afresh: the file may have been replaced
                if isinstance(exc, sqlite3.Error) and is_busy(exc) and attempt < WRITE_ATTEMPTS:
                    continue
                lost = sum(1 for item in items if not isinstance(item, LoadErrorsUpdate))
                self._report.failed(
                    key,
                    f"hookbus sqlite recorder: writing {path} failed ({type(exc).__name__}: {exc})"
                    + (f"; {lost} record(s) lost" if lost else ""),
                )
                return
            else:
                self._report.succeeded(key)
                return
