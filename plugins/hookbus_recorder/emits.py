"""The built-in recorder's emit records (settings.json ``"record_envelopes": true``):
``logs/emits/<YYYY-MM-DD>.jsonl``, one JSON line per emit that ran sync hooks, written and
read by the rules of the hook log (no link followed, nothing of another user's written into
or read, one write per line)."""

from __future__ import annotations

import os
from pathlib import Path

from hookbus.records import EmitRecord

from hookbus_recorder.logfile import LogAppender, _open_for_reading_at, _open_logs_dir_for_reading, _records

appender = LogAppender()


def emits_dir(logs_dir: Path) -> Path:
    """``<home>/logs/emits``, beside ``<home>/logs/hooks``."""
    return logs_dir.parent / "emits"


def append_emit(logs_dir: Path, record: EmitRecord) -> None:
    appender.append(emits_dir(logs_dir), record.at, record.log_entry())


def read_emits(logs_dir: Path, since: str | None, until: str | None) -> list[EmitRecord]:
    """The emit records with ``since <= at < until``, oldest first."""
    directory = emits_dir(logs_dir)
    dir_fd = _open_logs_dir_for_reading(directory)
    if dir_fd is None:
        return []
    try:
        try:
            names = sorted(name for name in os.listdir(dir_fd) if name.endswith(".jsonl") and not name.startswith("."))
        except OSError:
            return []
        found: list[EmitRecord] = []
        for name in names:
            day = name[: -len(".jsonl")]
            if (since is not None and day < since[:10]) or (until is not None and day > until[:10]):
                continue
            handle = _open_for_reading_at(dir_fd, name, directory / name)
            if handle is None:
                continue
            for record in _records(handle, directory / name, EmitRecord.from_log_entry):
                if (since is None or record.at >= since) and (until is None or record.at < until):
                    found.append(record)
        found.sort(key=lambda record: record.at)
        return found
    finally:
        os.close(dir_fd)
