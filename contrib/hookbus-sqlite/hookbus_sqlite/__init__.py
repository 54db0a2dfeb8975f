"""hookbus-sqlite: a recorder that keeps every fire in one SQLite database.

Select it in settings.json with ``{"recorder": "sqlite"}`` (or ``["recorder", "sqlite"]``
to keep state.json and the JSONL log too). The database is ``<home>/logs/hooks.sqlite3``
unless ``{"sqlite_recorder": {"path": "..."}}`` says otherwise (relative to the home).

Records are written by a background thread (a ``hookbus.recording.BackgroundWriter``, see
``writer``); ``hookbus_shutdown`` drains it, and ``lost_records(home)`` counts those that
never reached the database. ``query`` reads the database from anywhere::

    from hookbus_sqlite import query
    denied = query("~/.vix/logs/hooks.sqlite3", status="deny", since="2026-11-29")
"""

from __future__ import annotations

import atexit
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from hookbus import hookimpl
from hookbus.errors import Problem, did_you_mean
from hookbus.home import Home
from hookbus.records import EmitRecord, RunRecord
from hookbus.reporting import ReportOnce
from hookbus.settings import Settings

from hookbus_sqlite.database import (
    BUSY_TIMEOUT_SECONDS,
    SCHEMA,
    SCHEMA_VERSION,
    LoadErrorsUpdate,
    connect,
    insert,
    load_errors,
    query,
    timestamp,
)
from hookbus_sqlite.writer import SQLiteWriter

if TYPE_CHECKING:
    from hookbus.bus import HookBus

__version__ = "0.1.0"
__all__ = [
    "BUSY_TIMEOUT_SECONDS",
    "DEFAULT_PATH",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SETTING",
    "config_problems",
    "connect",
    "database_path",
    "insert",
    "load_errors",
    "lost_records",
    "query",
    "timestamp",
]

logger = logging.getLogger("hookbus")

#: The database, relative to the home, when settings.json does not name one.
DEFAULT_PATH = "logs/hooks.sqlite3"
#: The settings.json key this plugin owns: ``{"sqlite_recorder": {"path": "..."}}``.
SETTING = "sqlite_recorder"
_KEYS = ("path",)
#: How long closing a bus (or reading the runs) waits for its records to reach the disk.
FLUSH_TIMEOUT_SECONDS = 30.0
#: How long the end of the process waits for records of buses never closed.
EXIT_FLUSH_SECONDS = 5.0

writer = SQLiteWriter()
_report = ReportOnce()
os.register_at_fork(after_in_child=writer.after_fork_in_child)
atexit.register(writer.flush, EXIT_FLUSH_SECONDS)


def database_path(home: Home | str | os.PathLike[str], settings: Mapping[str, Any] | None = None) -> Path:
    """The database of ``home`` as settings.json (the document, ``settings``) names it:
    ``sqlite_recorder.path``, ``~`` expanded, relative to the home; else ``logs/hooks.sqlite3``.
    A setting that is not a non-empty string is ignored (``config_problems`` says why)."""
    root = home.root if isinstance(home, Home) else Home.resolve(home).root
    configured = (settings or {}).get(SETTING)
    chosen = configured.get("path") if isinstance(configured, Mapping) else None
    if not isinstance(chosen, str) or not chosen.strip():
        chosen = DEFAULT_PATH
    path = Path(chosen)
    try:
        path = path.expanduser()
    except RuntimeError:  # ~user of no such user: taken literally
        pass
    return root / path


def config_problems(raw_settings: Mapping[str, Any]) -> list[Problem]:
    """What is wrong with settings.json's ``sqlite_recorder``, path-qualified."""
    if SETTING not in raw_settings:
        return []
    value = raw_settings[SETTING]
    where = f"$.{SETTING}"
    if not isinstance(value, Mapping):
        return [Problem("settings.json", 'expected an object like {"path": "logs/hooks.sqlite3"}', where)]
    problems = []
    for key in value:
        if key not in _KEYS:
            hint = did_you_mean(str(key), _KEYS) or f" (known: {', '.join(_KEYS)})"
            problems.append(Problem("settings.json", f"unknown key {key!r}{hint}", where))
    path = value.get("path")
    if path is not None and (not isinstance(path, str) or not path.strip()):
        problems.append(
            Problem(
                "settings.json",
                f"expected a file path (relative to the home); recording in {DEFAULT_PATH}",
                f"{where}.path",
            )
        )
    return problems


#: (home root, settings document, its database path): worked out once per settings, not
#: per record. Settings documents are immutable, one per reload.
_last_path: tuple[Path, object, Path] | None = None


def _path_of(bus: HookBus) -> Path:
    global _last_path
    raw = bus.snapshot.settings.raw
    last = _last_path
    if last is not None and last[0] == bus.home.root and last[1] is raw:
        return last[2]
    path = database_path(bus.home, raw)
    _last_path = (bus.home.root, raw, path)
    return path


def lost_records(home: Home | None = None) -> int:
    """How many records of ``home`` (of every home, when None) this process could not
    write to the database: refused by it after WRITE_ATTEMPTS tries (a full disk, a file
    that is not a database, a lock held too long) or dropped because the queue was full.
    Each failure is also reported on the ``hookbus`` logger, once, and once on recovery.
    ``bus.lost_records`` asks this of the bus's home."""
    return writer.lost_records if home is None else writer.lost_in(home)


@hookimpl
def hookbus_startup(bus: HookBus) -> None:
    writer.acquire(id(bus))


@hookimpl
def hookbus_shutdown(bus: HookBus) -> None:
    writer.release(id(bus), FLUSH_TIMEOUT_SECONDS)


@hookimpl
def hookbus_record(bus: HookBus, record: RunRecord) -> None:
    writer.submit(_path_of(bus), record, id(bus), bus.home)


@hookimpl
def hookbus_record_emit(bus: HookBus, record: EmitRecord) -> None:
    writer.submit(_path_of(bus), record, id(bus), bus.home)


@hookimpl
def hookbus_read_emits(bus: HookBus, since: str | None, until: str | None) -> list[EmitRecord] | None:
    """From the database's ``emits`` table; None (the next recorder answers) when it
    cannot be read. ``hookbus replay`` runs the user's hooks on these envelopes, so a
    database another user could have written is refused (``RefusedRecords``), not read:
    see ``database.emits_refusals``."""
    from hookbus.records import RefusedRecords

    from hookbus_sqlite.database import emits_refusals, query_emits

    path = _path_of(bus)
    writer.flush(FLUSH_TIMEOUT_SECONDS)
    refusals = emits_refusals(path)
    if refusals:
        raise RefusedRecords([], refusals)
    try:
        return query_emits(path, since, until)
    except FileNotFoundError:
        return []
    except (sqlite3.Error, OSError) as exc:
        _report.failed(f"reading {path}", f"hookbus sqlite recorder: reading the emits of {path} failed ({type(exc).__name__}: {exc})")
        return None


@hookimpl
def hookbus_record_load_errors(bus: HookBus, errors: Mapping[str, str | None]) -> None:
    writer.submit(_path_of(bus), LoadErrorsUpdate(errors), id(bus), bus.home)


@hookimpl
def hookbus_read_runs(bus: HookBus, hook_id: str | None, limit: int | None) -> list[RunRecord] | None:
    """From the database; None (the next recorder answers) when it cannot be read."""
    path = _path_of(bus)
    writer.flush(FLUSH_TIMEOUT_SECONDS)
    key = f"reading {path}"
    try:
        runs = query(path, hook_id=hook_id, limit=None if limit is None else max(0, limit))
    except FileNotFoundError:
        return []  # nothing recorded yet
    except (sqlite3.Error, OSError) as exc:
        _report.failed(key, f"hookbus sqlite recorder: reading {path} failed ({type(exc).__name__}: {exc})")
        return None
    _report.succeeded(key)
    return runs


@hookimpl
def hookbus_config_problems(home: Home, settings: Settings) -> list[Problem]:
    return config_problems(settings.raw)
