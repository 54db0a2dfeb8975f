"""How the SQLite recorder writes: through one ``hookbus.recording.BackgroundWriter``.

``hookbus_record`` only hands the record to the writer's queue, so emit never waits on the
disk. Its thread takes what has queued up and writes it, per database, in short
transactions; it ends, closing its connections, when the last bus releases it. A bus that
closes while others go on recording has the connections only it used closed.

Records that never reach the database are counted per home (``lost_in``): those of a
batch the database refused after WRITE_ATTEMPTS tries, and those the queue was too full
to take. Each failure is reported once on the ``hookbus`` logger, and once on recovery.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Union

from hookbus.home import Home
from hookbus.records import RunRecord
from hookbus.recording import BackgroundWriter
from hookbus.reporting import ReportOnce

from hookbus_sqlite.database import ROWS_PER_TRANSACTION, Item, LoadErrorsUpdate, connect, is_busy, write

#: Attempts at one batch when the database stays locked past the busy timeout.
WRITE_ATTEMPTS = 3


class _Prune:
    """Queued when a bus closes: close the connections no open bus writes to any more."""

    __slots__ = ("keep",)

    def __init__(self, keep: frozenset[Path]) -> None:
        self.keep = keep


#: (database, what to write or a prune, the root of the home it is recorded for).
_Entry = tuple[Union[Path, None], Union[Item, _Prune], Union[Path, None]]


class SQLiteWriter:
    def __init__(self) -> None:
        # At most one transaction's rows per batch: a batch retried after "locked" is
        # never partly committed already, and a refused one loses exactly its records.
        self._background: BackgroundWriter[_Entry] = BackgroundWriter(
            self._write,
            name="hookbus-sqlite-writer",
            batch_delay=0.0,  # write as soon as woken: batches form while a write runs
            max_batch=ROWS_PER_TRANSACTION,
            on_stop=self._close_connections,
        )
        self._lock = threading.Lock()
        self._start_fresh()

    def _start_fresh(self) -> None:
        #: Open on the writer's thread only (sqlite3 connections belong to their thread).
        self._connections: dict[Path, sqlite3.Connection] = {}
        self._report = ReportOnce()
        #: Records lost, by the root of the home they were recorded for.
        self._lost: Counter[Path] = Counter()
        #: The database each open bus (by ``id(bus)``) last wrote to, for pruning.
        self._paths: dict[int, Path | None] = {}

    def after_fork_in_child(self) -> None:
        """A forked child has none of the parent's threads and must not use (or close) its
        connections: start over empty, with the parent's buses still counted as open (the
        parent writes what it had queued; the BackgroundWriter resets itself)."""
        _inherited.extend(self._connections.values())  # kept, never closed, in the child
        owners = list(self._paths)
        self._lock = threading.Lock()
        self._start_fresh()
        self._paths = dict.fromkeys(owners)

    def lost_in(self, home: Home) -> int:
        """Records of ``home`` that did not reach its database, in this process."""
        return self._lost[home.root]

    @property
    def lost_records(self) -> int:
        """Records of every home that did not reach a database, in this process (and any
        of a batch the writer itself failed on, which belong to no one home)."""
        return sum(self._lost.values()) + self._background.failed

    # -- the buses' side --------------------------------------------------------------

    def acquire(self, owner: int) -> None:
        with self._lock:
            self._paths.setdefault(owner, None)
        self._background.acquire()

    def release(self, owner: int, timeout: float | None = None) -> bool:
        """Flush; then stop the thread (closing its connections) when no bus uses it any
        more, or else close the connections only the releasing bus used."""
        with self._lock:
            self._paths.pop(owner, None)
            others = [path for path in self._paths.values() if path is not None]
            pruning = bool(self._paths)
        if pruning:  # written before release returns: it flushes
            self._background.submit((None, _Prune(frozenset(others)), None))
        return self._background.release(timeout)

    def submit(self, path: Path, item: Item, owner: int, home: Home) -> None:
        if self._paths.get(owner) is not path:  # the path is cached: one check per record
            with self._lock:
                self._paths[owner] = path
        if not self._background.submit((path, item, home.root)) and isinstance(item, RunRecord):
            self._count_lost(home.root, 1)  # reported by the BackgroundWriter

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far is written; False on timeout."""
        return self._background.flush(timeout)

    def _count_lost(self, root: Path, records: int) -> None:
        with self._lock:
            self._lost[root] += records

    # -- the thread's side ------------------------------------------------------------

    def _write(self, batch: list[_Entry]) -> None:
        """Each database's entries of the batch together; a prune in its place (after the
        records of the bus that closed, which may be in this batch too)."""
        by_path: dict[Path, list[_Entry]] = {}
        for entry in batch:
            path, item, _ = entry
            if isinstance(item, _Prune):
                self._write_each(by_path)
                by_path = {}
                for stale in [p for p in self._connections if p not in item.keep]:
                    self._connections.pop(stale).close()
            elif path is not None:
                by_path.setdefault(path, []).append(entry)
        self._write_each(by_path)

    def _write_each(self, by_path: dict[Path, list[_Entry]]) -> None:
        for path, entries in by_path.items():
            self._write_to(path, entries)

    def _write_to(self, path: Path, entries: list[_Entry]) -> None:
        items = [item for _, item, _ in entries if not isinstance(item, _Prune)]
        key = f"writing {path}"
        if path not in self._connections and not os.path.exists(path) and all(
            isinstance(item, LoadErrorsUpdate) and not any(item.errors.values())
            for item in items
        ):
            return  # hooks that load fine: nothing to clear in a database not made yet
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                connection = self._connections.get(path)
                if connection is None:
                    connection = self._connections[path] = connect(path, create=True)
                write(connection, items)
            except Exception as exc:  # a full disk or a broken file must not kill the writer
                stale = self._connections.pop(path, None)
                if stale is not None:
                    stale.close()  # start afresh: the file may have been replaced
                if isinstance(exc, sqlite3.Error) and is_busy(exc) and attempt < WRITE_ATTEMPTS:
                    continue
                lost = Counter(root for _, item, root in entries if isinstance(item, RunRecord) and root)
                for root, records in lost.items():
                    self._count_lost(root, records)
                self._report.failed(
                    key,
                    f"hookbus sqlite recorder: writing {path} failed ({type(exc).__name__}: {exc})",
                    lost=sum(lost.values()),
                )
                return
            else:
                self._report.succeeded(key)
                return

    def _close_connections(self) -> None:
        """The thread is ending: its connections end with it (a WAL is checkpointed away
        when the last connection to it closes)."""
        while self._connections:
            self._connections.popitem()[1].close()


#: Connections a forked child inherited: never used, and never closed, in the child.
_inherited: list[sqlite3.Connection] = []
