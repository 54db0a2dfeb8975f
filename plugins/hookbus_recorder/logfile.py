"""The audit log: ``logs/hooks/<YYYY-MM-DD>.jsonl``, one whole line per ``os.write``."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import deque
from pathlib import Path
from typing import Iterator

from hookbus.jsontext import strict_json
from hookbus.records import RunRecord

logger = logging.getLogger("hookbus")


def log_path(logs_dir: Path, at: str) -> Path:
    """The file of the UTC day of ``at`` (an RFC 3339 UTC timestamp)."""
    return logs_dir / f"{at[:10]}.jsonl"


class LogAppender:
    """Keeps one O_APPEND descriptor per log file; a line is written with one call, so lines
    from several processes never interleave."""

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}
        #: (logs dir, UTC date) -> descriptor: no Path built per line.
        self._by_day: dict[tuple[str, str], int] = {}
        # Held across the write too: a new day closes yesterday's descriptor, which another
        # thread must not be writing to (its number could be reused at once).
        self._lock = threading.Lock()

    def append(self, logs_dir: Path, at: str, entry: dict[str, object]) -> None:
        """Append one record to the log of the UTC day of ``at`` under ``logs_dir``."""
        line = strict_json(entry) + b"\n"
        key = (str(logs_dir), at[:10])
        with self._lock:
            fd = self._by_day.get(key)
            if fd is None:
                fd = self._open(log_path(logs_dir, at))
                self._by_day[key] = fd
            written = os.write(fd, line)
        if written != len(line):
            raise OSError(f"short write to {log_path(logs_dir, at)}: {written} of {len(line)} bytes")

    def _open(self, path: Path) -> int:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A new day: yesterday's file is done with.
        for old in [p for p in self._fds if p.parent == path.parent]:
            os.close(self._fds.pop(old))
        self._by_day = {k: v for k, v in self._by_day.items() if k[0] != str(path.parent)}
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._fds[path] = fd
        _end_torn_line(fd)
        return fd

    def close(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            self._by_day.clear()


def _end_torn_line(fd: int) -> None:
    """A crash mid-write leaves a line without its newline: end it, so the next record is
    not glued onto it (the torn line itself is skipped by readers)."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")


def iter_records(path: Path) -> Iterator[RunRecord]:
    """The records of one log file; a torn or foreign line is skipped with a warning."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        logger.warning("cannot read %s: %s", path, exc.strerror)
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                record = RunRecord.from_log_entry(json.loads(raw))
            except ValueError as exc:
                logger.warning("%s:%d: skipped a line that is not a record (%s)", path, number, exc)
                continue
            yield record


def read_records(
    logs_dir: Path, hook_id: str | None, limit: int | None, first_day: str | None = None
) -> list[RunRecord]:
    """Records of ``hook_id`` (all hooks when None), oldest first, the last ``limit`` of them;
    from the log files of ``first_day`` (``YYYY-MM-DD``) on, when it is given."""
    try:
        files = sorted(logs_dir.glob("*.jsonl"), reverse=True)
    except OSError:
        return []
    if first_day is not None:
        files = [path for path in files if path.stem >= first_day]
    collected: list[RunRecord] = []
    for path in files:  # newest day first, so a limit stops early
        found: deque[RunRecord] = deque(maxlen=limit)
        for record in iter_records(path):
            if hook_id is None or record.hook_id == hook_id:
                found.append(record)
        collected = [*found, *collected]
        if limit is not None and len(collected) >= limit:
            return collected[-limit:]
    return collected
