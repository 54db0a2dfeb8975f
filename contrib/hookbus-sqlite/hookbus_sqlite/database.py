"""The database: its schema, opening it safely for several writers, writing and querying.

One row per fire in ``runs``; the hooks whose spec does not load in ``load_errors``.
Every connection is opened in autocommit mode with a busy timeout, and every write is one
short ``BEGIN IMMEDIATE`` transaction, so writers in several threads and processes queue
up on SQLite's lock instead of failing with "database is locked".

The database is its owner's to read alone, as the built-in log is: a writer makes it (and
the directories it makes for it) with mode 0600 (0700), whatever the umask, and tightens
one left looser, its ``-wal`` and ``-shm`` files too (SQLite gives those the database's
mode when it makes them).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import stat
import time
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, Union, cast

from hookbus.jsontext import strict_json
from hookbus.records import TIERS, EmitRecord, RunRecord, Status, Tier, utc_timestamp

logger = logging.getLogger("hookbus")

#: 2 added ``runs.tool_name``, 3 ``runs.shadow``, ``runs.enforced`` and the ``emits``
#: table, 4 ``runs.tier``; an older database gets them when a writer opens it.
SCHEMA_VERSION = 4
#: How long a writer waits for another one's transaction before SQLite says "locked".
BUSY_TIMEOUT_SECONDS = 10.0
#: Rows per transaction: a long backlog is written in several short transactions, so
#: writers in other processes get their turn.
ROWS_PER_TRANSACTION = 500
#: The modes of the database (and its -wal and -shm files) and of the directories made for it.
FILE_MODE = 0o600
DIRECTORY_MODE = 0o700
#: The files SQLite keeps beside the database, in WAL mode.
COMPANIONS = ("-wal", "-shm")

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,  -- the order rows were written in
    at        TEXT    NOT NULL,  -- when the run started: RFC 3339 UTC, milliseconds, 'Z'
    hook_id   TEXT    NOT NULL,
    event     TEXT    NOT NULL,
    mode      TEXT    NOT NULL,  -- 'sync' | 'async' (a manual trigger is 'async')
    status    TEXT    NOT NULL,  -- allow | deny | modify | context | done | error
    duration  REAL    NOT NULL,  -- seconds
    error     TEXT,
    thread_id TEXT,
    decision  TEXT,              -- the hook's own decision, JSON
    note      TEXT,              -- why that decision did not take effect, when it did not
    manual    INTEGER NOT NULL DEFAULT 0,  -- 1 for bus.trigger / hookbus trigger
    tool_name TEXT,              -- the envelope's tool_name, when it had one
    shadow    INTEGER NOT NULL DEFAULT 0,  -- 1 for a shadow hook's fire (not in the merge)
    enforced  TEXT,              -- a shadow fire: the behavior the enforcing hooks decided
    tier      TEXT    NOT NULL DEFAULT 'user'  -- whose hook: 'user' | 'managed' | 'builtin'
);
CREATE INDEX IF NOT EXISTS runs_at ON runs (at);
CREATE INDEX IF NOT EXISTS runs_hook_at ON runs (hook_id, at);
CREATE INDEX IF NOT EXISTS runs_status_at ON runs (status, at);
CREATE INDEX IF NOT EXISTS runs_event_at ON runs (event, at);
CREATE TABLE IF NOT EXISTS emits (  -- settings.json "record_envelopes": true, for hookbus replay
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        TEXT    NOT NULL,
    event     TEXT    NOT NULL,
    envelope  TEXT    NOT NULL,  -- JSON, redacted, and cut to its top-level fields past 64 KiB
    decision  TEXT    NOT NULL,  -- the merged decision, JSON
    hooks     TEXT    NOT NULL,  -- the ids of the sync hooks that ran, a JSON array
    cut       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS emits_at ON emits (at);
CREATE TABLE IF NOT EXISTS load_errors (
    hook_id TEXT PRIMARY KEY,
    error   TEXT NOT NULL,
    at      TEXT NOT NULL  -- when this error was first recorded
);
"""

COLUMNS = ("at", "hook_id", "event", "mode", "status", "duration", "error", "thread_id",
           "decision", "note", "manual", "tool_name", "shadow", "enforced", "tier")
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6  # the primary result codes (sqlite3 names them from 3.11)
_INSERT = f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM runs"
#: The same, from a database of version 1, 2 or 3, which no writer has opened since (no
#: tool_name, no shadow and enforced, or no tier). Every hook of those versions' days was
#: the user's: there was no other tier to record.
_SELECT_V1 = f"SELECT {', '.join(COLUMNS[:-4])}, NULL, 0, NULL, 'user' FROM runs"
_SELECT_V2 = f"SELECT {', '.join(COLUMNS[:-3])}, 0, NULL, 'user' FROM runs"
_SELECT_V3 = f"SELECT {', '.join(COLUMNS[:-1])}, 'user' FROM runs"

#: A value ``query`` filters a column by: one value, or any of several.
Match = Union[str, Iterable[str], None]
#: A bound of ``query``'s time window.
Moment = Union[str, datetime, None]


def connect(path: str | os.PathLike[str], *, create: bool) -> sqlite3.Connection:
    """A connection to the database at ``path``, set up for concurrent use.

    ``create``: make the file, its directory and the schema when missing (a writer);
    otherwise a missing file is FileNotFoundError, and nothing is created (a reader).
    The caller closes it.
    """
    path = Path(path)
    if create:
        _make_private(path)
        target = str(path)
        uri = False
    else:
        if not path.exists():
            raise FileNotFoundError(f"no hookbus-sqlite database at {path}")
        target = path.absolute().as_uri() + "?mode=rw"  # never create one by reading
        uri = True
    connection = sqlite3.connect(
        target, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, uri=uri
    )
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        if create:
            _prepare(connection)
    except BaseException:
        connection.close()
        raise
    return connection


def _make_private(path: Path) -> None:
    """The database at ``path`` made (with the directories missing on the way) or found,
    and it and its companions given modes their owner's alone. What is not a regular file
    is left for SQLite to refuse; a file not ours to change is left as it is."""
    missing = []
    directory = path.parent
    while not os.path.lexists(directory) and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    for made in reversed(missing):
        try:
            os.mkdir(made, DIRECTORY_MODE)
        except FileExistsError:
            continue  # made meanwhile by another writer
        os.chmod(made, DIRECTORY_MODE)  # whatever the umask took
    path.parent.mkdir(parents=True, exist_ok=True)  # FileExistsError when a file is in the way
    for name, create in ((str(path), True), *((f"{path}{suffix}", False) for suffix in COMPANIONS)):
        flags = os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            fd = os.open(name, flags, FILE_MODE)
        except FileNotFoundError:
            continue
        except OSError:
            continue  # a FIFO, a directory, no permission: SQLite says what is wrong
        try:
            info = os.fstat(fd)
            if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != FILE_MODE:
                os.fchmod(fd, FILE_MODE)
        except PermissionError:
            pass
        finally:
            os.close(fd)


def _prepare(connection: sqlite3.Connection) -> None:
    """WAL mode and the schema; safe when several processes do it at once."""
    for attempt in range(5):
        try:
            mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            break
        except sqlite3.OperationalError as exc:  # another process is converting it
            if not is_busy(exc) or attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
    if str(mode).lower() != "wal":
        logger.warning("hookbus sqlite recorder: the database is in %s mode, not WAL", mode)
    # WAL is durable across a crash of the process with NORMAL; only power loss can undo
    # the last transactions.
    connection.execute("PRAGMA synchronous = NORMAL")
    if connection.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        if connection.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            columns = _columns(connection)
            if "tool_name" not in columns:  # made by version 1
                connection.execute("ALTER TABLE runs ADD COLUMN tool_name TEXT")
            if "shadow" not in columns:  # made by version 1 or 2
                connection.execute("ALTER TABLE runs ADD COLUMN shadow INTEGER NOT NULL DEFAULT 0")
                connection.execute("ALTER TABLE runs ADD COLUMN enforced TEXT")
            if "tier" not in columns:  # made by version 1, 2 or 3: its rows were the user's hooks
                connection.execute("ALTER TABLE runs ADD COLUMN tier TEXT NOT NULL DEFAULT 'user'")
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        connection.execute("COMMIT")
    except BaseException:
        _rollback(connection)
        raise


def _columns(connection: sqlite3.Connection) -> set[str]:
    return {str(row[1]) for row in connection.execute("PRAGMA table_info(runs)")}


def _select(connection: sqlite3.Connection) -> str:
    """The SELECT of every column, for the version of the database at hand."""
    columns = _columns(connection)
    if "tier" in columns:
        return _SELECT
    return _SELECT_V3 if "shadow" in columns else _SELECT_V2 if "tool_name" in columns else _SELECT_V1


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds the lock."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _rollback(connection: sqlite3.Connection) -> None:
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.Error:
            pass


def row_of(record: RunRecord) -> tuple[Any, ...]:
    decision = None
    if record.decision is not None:
        # Strict JSON, so that json_extract() reads it even when a runner put NaN in it.
        decision = strict_json(record.decision, separators=(",", ":")).decode()
    return (
        record.at, record.hook_id, record.event, record.mode, record.status,
        float(record.duration), _text(record.error), record.thread_id, decision,
        _text(record.note), 1 if record.manual else 0, _text(record.tool_name),
        1 if record.shadow else 0, _text(record.enforced), record.tier,
    )


def _text(value: str | None) -> str | None:
    """``value`` as SQLite can store it: a lone surrogate (from an undecodable file name in
    an error, say) would fail the whole batch's insert."""
    if value is None:
        return None
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def record_of(row: Sequence[Any]) -> RunRecord:
    at, hook_id, event, mode, status, duration, error, thread_id, decision, note, manual, tool_name, shadow, enforced, tier = row
    parsed = None
    if decision is not None:
        try:
            parsed = json.loads(decision)
        except ValueError:
            logger.warning("hookbus sqlite recorder: a run of %r at %s has a decision that is "
                           "not JSON; read as none", hook_id, at)
        if not isinstance(parsed, dict):
            parsed = None
    return RunRecord(
        at=str(at),
        hook_id=str(hook_id),
        event=str(event),
        mode=str(mode),
        status=cast(Status, str(status)),
        duration=float(duration),
        error=None if error is None else str(error),
        thread_id=None if thread_id is None else str(thread_id),
        decision=parsed,
        note=None if note is None else str(note),
        manual=bool(manual),
        tool_name=None if tool_name is None else str(tool_name),
        shadow=bool(shadow),
        enforced=None if enforced is None else str(enforced),
        tier=_tier_of(tier, hook_id, at),
    )


def _tier_of(value: object, hook_id: object, at: object) -> Tier:
    """The tier of a row. A value of no known tier (written by hand, or by a later version
    with a tier this one does not know) is read as "user", and said: reading the rest of
    the history matters more than that one field, and "user" claims no authority."""
    if value in TIERS:
        return cast(Tier, value)
    logger.warning("hookbus sqlite recorder: a run of %r at %s has the tier %r, none of %s; "
                   "read as 'user'", hook_id, at, value, ", ".join(TIERS))
    return "user"


class LoadErrorsUpdate:
    """Hooks whose spec stopped loading (id -> error) or loads again (id -> None)."""

    __slots__ = ("errors",)

    def __init__(self, errors: Mapping[str, str | None]) -> None:
        self.errors = dict(errors)


Item = Union[RunRecord, LoadErrorsUpdate, EmitRecord]
_INSERT_EMIT = "INSERT INTO emits (at, event, envelope, decision, hooks, cut) VALUES (?, ?, ?, ?, ?, ?)"


def write(connection: sqlite3.Connection, items: Sequence[Item]) -> None:
    """Write ``items`` in order, in transactions of at most ROWS_PER_TRANSACTION rows."""
    for start in range(0, len(items), ROWS_PER_TRANSACTION):
        chunk = items[start:start + ROWS_PER_TRANSACTION]
        connection.execute("BEGIN IMMEDIATE")
        try:
            for item in chunk:
                if isinstance(item, RunRecord):
                    connection.execute(_INSERT, row_of(item))
                elif isinstance(item, EmitRecord):
                    connection.execute(_INSERT_EMIT, _emit_row(item))
                else:
                    _write_load_errors(connection, item.errors)
            connection.execute("COMMIT")
        except BaseException:
            _rollback(connection)
            raise


def _emit_row(record: EmitRecord) -> tuple[Any, ...]:
    def text(value: Any) -> str:
        return _text(strict_json(value, separators=(",", ":")).decode()) or ""

    return (record.at, record.event, text(record.envelope), text(record.decision), text(list(record.hooks)), 1 if record.cut else 0)


def _time_range(since: Moment, until: Moment, clauses: list[str], parameters: list[Any]) -> None:
    """Add ``since <= at < until`` (either bound None: none) to a query's clauses."""
    if since is not None:
        clauses.append("at >= ?")
        parameters.append(timestamp(since))
    if until is not None:
        clauses.append("at < ?")
        parameters.append(timestamp(until))


def emits_refusals(path: str | os.PathLike[str]) -> list[str]:
    """Why the database at ``path`` may hold envelopes another user wrote, one message
    each with its fix: it, its ``-wal`` or ``-shm`` file, or a directory on the way to
    them is owned by another user than you or root, or writable by group or others; or
    one of the files is a link or not a regular file. Empty when only you or root could
    have written them (or there is no database)."""
    from hookbus.permissions import loose_refusal, owner_refusal
    from hookbus.trust import path_refusal

    path = Path(path) if Path(path).is_absolute() else Path(os.getcwd(), path)
    could = "choose the envelopes hookbus replay runs your hooks on"
    unsafe = path_refusal(path.parent)
    if unsafe is not None:
        return [f"{unsafe[0]} {unsafe[1]}"]
    refusals = []
    for name in (path, *(Path(f"{path}{suffix}") for suffix in COMPANIONS)):
        try:
            info = os.lstat(name)
        except FileNotFoundError:
            continue
        except OSError as exc:
            refusals.append(f"{name} cannot be checked: {exc.strerror or exc}")
            continue
        if stat.S_ISLNK(info.st_mode):
            refusals.append(f"{name} is a symbolic link, and emit records are never read through one (another user could point it at a database of theirs): remove the link (rm {name})")
        elif not stat.S_ISREG(info.st_mode):
            refusals.append(f"{name} is not a regular file: move it away (mv {name} {name}.old)")
        elif owner_refusal(info) is not None:
            refusals.append(f"{name} {owner_refusal(info)}, who could then {could}: run chown {os.geteuid()} {name}")
        elif loose_refusal(info) is not None:
            refusals.append(f"{name} {loose_refusal(info)}, who could then {could}: run chmod go-w {name}")
    return refusals


def query_emits(path: str | os.PathLike[str], since: Moment = None, until: Moment = None) -> list[EmitRecord]:
    """The emit records in the database at ``path`` with ``since <= at < until``, oldest
    first; a row that cannot be read back is skipped, said on the ``hookbus`` logger."""
    clauses: list[str] = []
    parameters: list[Any] = []
    _time_range(since, until, clauses, parameters)
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    with closing(connect(path, create=False)) as connection:
        if "emits" not in {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
            return []  # a database no writer of version 3 has opened yet
        rows = connection.execute(f"SELECT at, event, envelope, decision, hooks, cut FROM emits{where} ORDER BY at, id", parameters).fetchall()
    found = []
    for at, event, envelope, decision, hooks, cut in rows:
        try:
            found.append(EmitRecord.from_log_entry({
                "at": at, "event": event, "envelope": json.loads(envelope), "decision": json.loads(decision),
                "hooks": json.loads(hooks), "cut": bool(cut),
            }))
        except ValueError as exc:
            logger.warning("hookbus sqlite recorder: an emit record at %s cannot be read (%s); skipped", at, exc)
    return found


def _write_load_errors(connection: sqlite3.Connection, errors: Mapping[str, str | None]) -> None:
    now = utc_timestamp()
    for hook_id, error in errors.items():
        if error is None:
            connection.execute("DELETE FROM load_errors WHERE hook_id = ?", (hook_id,))
        else:
            connection.execute(
                "INSERT INTO load_errors (hook_id, error, at) VALUES (?, ?, ?) "
                "ON CONFLICT (hook_id) DO UPDATE SET error = excluded.error, "
                "at = CASE WHEN error = excluded.error THEN at ELSE excluded.at END",
                (hook_id, error, now),
            )


def insert(path: str | os.PathLike[str], records: Iterable[RunRecord]) -> int:
    """Write ``records`` into the database at ``path`` now (creating it), and return how
    many. For importing history (the built-in recorder's JSONL log, say); a running bus
    records through its background writer instead."""
    items: list[Item] = list(records)
    with closing(connect(path, create=True)) as connection:
        write(connection, items)
    return len(items)


def query(
    path: str | os.PathLike[str],
    *,
    hook_id: Match = None,
    status: Match = None,
    event: Match = None,
    since: Moment = None,
    until: Moment = None,
    limit: int | None = None,
) -> list[RunRecord]:
    """The recorded fires in the database at ``path`` that match every filter given,
    oldest first (by ``at``, then by the order they were written).

    ``hook_id``, ``status``, ``event``: one value, or a list of values any of which
    matches. ``since`` (inclusive) and ``until`` (exclusive) are RFC 3339 timestamps
    (``2026-11-29T18:00:00Z``, ``2026-11-29T19:00:00+01:00``, or a date, ``2026-11-29``,
    meaning its midnight UTC) or aware datetimes; a timestamp without an offset is UTC.
    They are compared with ``at`` to the millisecond. ``limit`` keeps the most recent
    ``limit`` matches. A missing database is FileNotFoundError; a bad argument ValueError.
    """
    clauses: list[str] = []
    parameters: list[Any] = []
    for column, value in (("hook_id", hook_id), ("status", status), ("event", event)):
        values = _values(column, value)
        if values is None:
            continue
        if not values:
            return []
        clauses.append(
            f"{column} = ?" if len(values) == 1 else f"{column} IN ({', '.join('?' * len(values))})"
        )
        parameters += values
    _time_range(since, until, clauses, parameters)
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a whole number >= 0, not {limit!r}")
        if limit == 0:
            return []
    where = " WHERE " + " AND ".join(clauses) if clauses else ""
    with closing(connect(path, create=False)) as connection:
        sql = _select(connection) + where
        if limit is None:
            rows = connection.execute(sql + " ORDER BY at, id", parameters).fetchall()
        else:
            rows = connection.execute(
                sql + " ORDER BY at DESC, id DESC LIMIT ?", [*parameters, limit]
            ).fetchall()
            rows.reverse()
    return [record_of(row) for row in rows]


def load_errors(path: str | os.PathLike[str]) -> dict[str, str]:
    """The hooks whose spec does not load now, by id, with the error (a missing database
    is FileNotFoundError)."""
    with closing(connect(path, create=False)) as connection:
        rows = connection.execute("SELECT hook_id, error FROM load_errors ORDER BY hook_id")
        return {str(hook_id): str(error) for hook_id, error in rows}


def _values(column: str, value: Match) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    values = list(value)
    for item in values:
        if not isinstance(item, str):
            raise ValueError(f"{column} must be a string or strings, not {item!r}")
    return values


_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)"
    r"(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d+))?)?\s*([Zz]|[+-]\d\d:?\d\d)?)?"
)


def timestamp(moment: str | datetime) -> str:
    """``moment`` as ``at`` is stored (``2026-11-29T18:14:06.123Z``), so that comparing
    the strings compares the times; ValueError when it is not an RFC 3339 timestamp."""
    if isinstance(moment, datetime):
        value = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    elif isinstance(moment, str):
        value = _parse(moment)
    else:
        raise ValueError(f"expected an RFC 3339 timestamp, not {moment!r}")
    value = value.astimezone(timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def _parse(text: str) -> datetime:
    match = _RFC3339.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r} (like 2026-11-29T18:00:00Z)")
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    zone = timezone.utc
    if offset and offset not in ("Z", "z"):
        digits = offset[1:].replace(":", "")
        delta = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        zone = timezone(delta if offset[0] == "+" else -delta)
    try:
        return datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0),
            int(second or 0), int((fraction or "0")[:6].ljust(6, "0")), tzinfo=zone,
        )
    except ValueError as exc:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r} ({exc})") from None
