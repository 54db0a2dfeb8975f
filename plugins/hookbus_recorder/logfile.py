"""The audit log: ``logs/hooks/<YYYY-MM-DD>.jsonl``, one whole line per ``os.write``.

hookbus often runs as root, so the log is written only where no other user can redirect it:
the home is opened by path (it may be a link) and must be owned by us or root and not
writable by group or others; ``logs``, ``logs/hooks`` and the day's file are then opened one
at a time relative to the directory before, never through a symbolic link, and each is
checked the same way on ``fstat`` of what was opened. The day's file must be a regular file,
so a FIFO or a device in its place is refused instead of blocking or feeding the writer.
That walk happens once per day per home; every record after it is one ``write`` on the
cached descriptor.

The log is its owner's to read alone (a record may hold what a tool was given): ``logs``
and the directory below it are mode 0700 and the day's file 0600, whatever the umask, and
one left looser (by an older hookbus, or a umask of 0) is tightened when it is next opened.

Reading never follows a link either, never blocks on a FIFO, and caps each line.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
import threading
from collections import deque
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from hookbus.deepjson import TooDeep
from hookbus.files import kind_of
from hookbus.permissions import loose_refusal, owner_refusal
from hookbus.jsontext import strict_json
from hookbus.records import RunRecord

logger = logging.getLogger("hookbus")

#: The longest log line read back, and written: a record whose line would be longer is
#: written with its decision replaced by a marker (a third-party runner's decision is not
#: bounded by the core). Readers skip a longer line with a warning rather than hold it.
MAX_LINE_BYTES = 16 * 1024 * 1024

_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_RDWR, not O_WRONLY: a fragment left by a failed write is found with pread. O_NONBLOCK
# is a no-op on the regular file this must be, and keeps anything else from blocking open.
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: The modes of the log's directories and files: their owner's alone.
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


class LogRefused(Exception):
    """The log cannot be written at a path; the message names the path and the fix."""


def log_path(logs_dir: Path, at: str) -> Path:
    """The file of the UTC day of ``at`` (an RFC 3339 UTC timestamp)."""
    return logs_dir / f"{at[:10]}.jsonl"


def encode_line(entry: dict[str, Any]) -> bytes:
    """The log line of ``entry``, newline included.

    A decision that cannot be encoded (nested so deep that ``json.dumps`` raises
    RecursionError) or that would make the line longer than MAX_LINE_BYTES is replaced by a
    short marker: the fire is still recorded, with everything but that decision.
    """
    try:
        line = strict_json(entry)
    except (RecursionError, ValueError, TypeError) as exc:
        why = (
            "the decision is nested too deeply to encode as JSON"
            if isinstance(exc, (RecursionError, TooDeep))
            else f"the decision cannot be encoded as JSON ({type(exc).__name__})"
        )
        line = strict_json(_without_decision(entry, why))
    if len(line) >= MAX_LINE_BYTES:
        why = f"the record is {len(line)} bytes, over the {MAX_LINE_BYTES >> 20} MiB a log line may hold"
        line = strict_json(_without_decision(entry, why))
        if len(line) >= MAX_LINE_BYTES:
            raise LogRefused(f"a record of hook {entry.get('hook_id')!r} is too large to log ({len(line)} bytes)")
    return line + b"\n"


def _without_decision(entry: dict[str, Any], why: str) -> dict[str, Any]:
    decision = entry.get("decision")
    marker: dict[str, Any] = {}
    if isinstance(decision, dict) and isinstance(decision.get("behavior"), str):
        marker["behavior"] = decision["behavior"][:100]
    marker["not_recorded"] = why
    return {**entry, "decision": marker}


class LogAppender:
    """Keeps one O_APPEND descriptor per home and day; a line is written with one call, so
    lines from several processes never interleave."""

    def __init__(self) -> None:
        #: (logs dir, UTC date) -> descriptor: no Path built per line.
        self._by_day: dict[tuple[str, str], int] = {}
        #: descriptor -> its path, for messages.
        self._paths: dict[int, Path] = {}
        #: Descriptors whose last write failed or was short: the file may end in a fragment,
        #: which the next append ends first (so it is never glued onto the next record).
        self._torn: set[int] = set()
        # Held across the write too: a new day closes yesterday's descriptor, which another
        # thread must not be writing to (its number could be reused at once).
        self._lock = threading.Lock()

    def append(self, logs_dir: Path, at: str, entry: dict[str, Any]) -> None:
        """Append one record to the log of the UTC day of ``at`` under ``logs_dir`` (which is
        ``<home>/logs/hooks``); raises when the record could not be written whole."""
        line = encode_line(entry)
        key = (str(logs_dir), at[:10])
        with self._lock:
            fd = self._by_day.get(key)
            if fd is None:
                fd = self._open(logs_dir, at[:10])
            if self._torn:
                self._end_fragment(fd)
            try:
                written = os.write(fd, line)
            except OSError as exc:
                self._torn.add(fd)
                raise LogRefused(f"{self._paths[fd]}: {exc.strerror or exc}") from None
            if written != len(line):
                self._torn.add(fd)
                raise LogRefused(
                    f"{self._paths[fd]}: short write, {written} of {len(line)} bytes (is the disk full?)"
                )

    def _end_fragment(self, fd: int) -> None:
        if fd in self._torn:
            try:
                _end_torn_line(fd)
            except OSError as exc:
                raise LogRefused(f"{self._paths[fd]}: {exc.strerror or exc}") from None
            self._torn.discard(fd)

    def _open(self, logs_dir: Path, day: str) -> int:
        if not _DAY.fullmatch(day):  # never a path: the date is part of a file name
            raise LogRefused(f"a record's time {day!r} is not a UTC date; it names no log file")
        dir_fd = _open_logs_dir_for_writing(logs_dir)
        try:
            path = logs_dir / f"{day}.jsonl"
            fd = _open_day_file(dir_fd, path.name, path)
        finally:
            os.close(dir_fd)
        # A new day: yesterday's file of this home is done with.
        logs = str(logs_dir)
        for old_key in [k for k in self._by_day if k[0] == logs]:
            self._close(self._by_day.pop(old_key))
        self._by_day[(logs, day)] = fd
        self._paths[fd] = path
        return fd

    def _close(self, fd: int) -> None:
        self._paths.pop(fd, None)
        self._torn.discard(fd)
        os.close(fd)

    def close(self) -> None:
        with self._lock:
            for fd in self._by_day.values():
                self._close(fd)
            self._by_day.clear()


def _end_torn_line(fd: int) -> None:
    """A crash or a full disk mid-write leaves a line without its newline: end it, so the
    next record is not glued onto it (the torn line itself is skipped by readers)."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        if os.write(fd, b"\n") != 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


# -- opening for writing: no link followed, nothing others can write ----------------------


def _open_logs_dir_for_writing(logs_dir: Path) -> int:
    """``<home>/logs/hooks`` open, created (mode 0755) where missing, each component opened
    relative to its parent with O_NOFOLLOW and checked on fstat; LogRefused otherwise."""
    home = logs_dir.parent.parent
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the home may be a link
    except OSError as exc:
        raise LogRefused(f"cannot open the home directory {home}: {exc.strerror or exc}") from None
    path = home
    try:
        _check_ours(os.fstat(fd), path, "the hook log")
        for name in _below_home(logs_dir):
            path = path / name
            child = _open_directory_at(fd, name, path)
            os.close(fd)
            fd = child
            info = os.fstat(fd)
            _check_ours(info, path, "the hook log")
            tighten(fd, info, DIRECTORY_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _below_home(logs_dir: Path) -> list[str]:
    """The components opened without following links: ``logs`` and ``hooks`` of
    ``<home>/logs/hooks`` (fewer for a path too short to have them)."""
    return [name for name in (logs_dir.parent.name, logs_dir.name) if name]


def _open_directory_at(parent_fd: int, name: str, path: Path) -> int:
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            try:
                os.mkdir(name, DIRECTORY_MODE, dir_fd=parent_fd)
            except FileExistsError:
                pass  # made meanwhile by another process: open what is there, checked as ever
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise LogRefused(_not_a_directory(parent_fd, name, path)) from None
        raise LogRefused(f"cannot open or create {path}: {exc.strerror or exc}") from None


def _not_a_directory(parent_fd: int, name: str, path: Path) -> str:
    kind = _kind_at(parent_fd, name)
    if kind == "symbolic link":
        return (
            f"{path} is a symbolic link, and the hook log is never written through one (another "
            f"user could point it at a file of theirs or a system file): remove the link "
            f"(rm {path}); hookbus creates the directory (to keep the log on another disk, "
            "mount it there instead)"
        )
    return (
        f"{path} is not a directory but a {kind}: move it away (mv {path} {path}.old); "
        "hookbus creates the directory"
    )


def _kind_at(parent_fd: int, name: str) -> str:
    """What ``name`` in the open directory is, for a message ("file" if it cannot be told)."""
    try:
        return kind_of(os.stat(name, dir_fd=parent_fd, follow_symlinks=False).st_mode)
    except OSError:
        return "file"


def _open_day_file(dir_fd: int, name: str, path: Path) -> int:
    # Looked at before it is opened: a FIFO or device is refused without being opened.
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    except OSError as exc:
        raise LogRefused(f"cannot open {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise LogRefused(_not_a_regular_file(path, mode))
    try:
        fd = os.open(name, _APPEND_FLAGS, FILE_MODE, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since the look
            raise LogRefused(_not_a_regular_file(path, stat.S_IFLNK)) from None
        raise LogRefused(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LogRefused(_not_a_regular_file(path, info.st_mode))
        _check_ours(info, path, "the hook log")
        tighten(fd, info, FILE_MODE)
        _end_torn_line(fd)
    except OSError as exc:
        os.close(fd)
        raise LogRefused(f"{path}: {exc.strerror or exc}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_a_regular_file(path: Path, mode: int) -> str:
    if stat.S_ISLNK(mode):
        return (
            f"{path} is a symbolic link, and the hook log is never written through one (another "
            f"user could point it at a file of theirs or a system file): remove it (rm {path}); "
            "hookbus creates the file"
        )
    return f"{path} is a {kind_of(mode)}, not a regular file: remove it (rm {path}); hookbus creates the file"


def tighten(fd: int, info: os.stat_result, mode: int) -> None:
    """Give what ``fd`` opened exactly ``mode`` (its owner's alone), whatever the umask made
    it or an older hookbus left it. One that is not ours to change (root's, seen by
    another user) is left as it is: its owner decides who reads it."""
    if stat.S_IMODE(info.st_mode) == mode:
        return
    try:
        os.fchmod(fd, mode)
    except PermissionError:
        pass


def _check_ours(info: os.stat_result, path: Path, what: str) -> None:
    """Refuse what another user could change: owned by someone but us or root, or
    writable by group or others."""
    refusal = trust_refusal(info, path, f"redirect or rewrite {what}")
    if refusal is not None:
        raise LogRefused(refusal)


def trust_refusal(info: os.stat_result, path: Path, could: str) -> str | None:
    """Why ``path`` (whose ``fstat`` or ``lstat`` is ``info``) may have been changed by
    another user, who could then ``could``, and the fix; None when only we or root could:
    owned by someone but us or root, or writable by group or others."""
    foreign = owner_refusal(info)
    if foreign is not None:
        return f"{path} {foreign}, who could then {could}: run chown {os.geteuid()} {path}"
    loose = loose_refusal(info)
    if loose is not None:
        return f"{path} {loose}, who could then {could}: run chmod go-w {path}"
    return None


# -- reading: no link followed, no FIFO opened, lines capped ------------------------------

#: Paths warned about, so a poll (``log --follow``) warns once, not every 200 ms; a path is
#: forgotten once it reads cleanly again.
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(path: Path, message: str) -> None:
    with _warned_lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    logger.warning("%s", message)


def _read_cleanly(path: Path) -> None:
    if _warned:  # the common case costs nothing
        with _warned_lock:
            _warned.discard(str(path))


def open_log_for_reading(path: Path) -> BinaryIO | None:
    """The log file ``path`` (``<home>/logs/hooks/<day>.jsonl``) open for reading, or None.

    The home is opened by path; ``logs``, ``hooks`` and the file each relative to the one
    before with O_NOFOLLOW, and the file with O_NONBLOCK. None, with a warning (once per
    path until it reads cleanly again), when one of them is a symbolic link or the file is
    not a regular file (a FIFO would block the reader); None quietly when it does not exist
    (yet). The caller closes the handle, and should cap what it reads at once.
    """
    dir_fd = _open_logs_dir_for_reading(path.parent)
    if dir_fd is None:
        return None
    try:
        return _open_for_reading_at(dir_fd, path.name, path)
    finally:
        os.close(dir_fd)


def _open_logs_dir_for_reading(logs_dir: Path) -> int | None:
    home = logs_dir.parent.parent
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _warn_once(home, f"cannot read the hook log: cannot open {home}: {exc.strerror or exc}")
        return None
    path = home
    for name in _below_home(logs_dir):
        path = path / name
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                kind = _kind_at(fd, name)
                if kind == "symbolic link":
                    _warn_once(path, f"{path} is a symbolic link: the hook log is not read through links")
                else:
                    _warn_once(path, f"{path} is a {kind}, not a directory: the hook log cannot be read")
            else:
                _warn_once(path, f"cannot read the hook log: cannot open {path}: {exc.strerror or exc}")
            os.close(fd)
            return None
        os.close(fd)
        fd = child
    _read_cleanly(logs_dir)
    return fd


def _open_for_reading_at(dir_fd: int, name: str, path: Path) -> BinaryIO | None:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _warn_once(path, f"{path} is a symbolic link: skipped (the hook log is not read through links)")
        else:
            _warn_once(path, f"cannot read {path}: {exc.strerror or exc}")
        return None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        _warn_once(path, f"cannot read {path}: {exc.strerror or exc}")
        return None
    if not stat.S_ISREG(mode):
        os.close(fd)
        _warn_once(path, f"{path} is a {kind_of(mode)}, not a regular file: skipped")
        return None
    _read_cleanly(path)
    return open(fd, "rb")


def iter_records(path: Path) -> Iterator[RunRecord]:
    """The records of one log file; a torn, foreign or overlong line is skipped with a
    warning, and so is a file that is a link or not a regular file."""
    handle = open_log_for_reading(path)
    if handle is not None:
        yield from _records(handle, path)


def _records(handle: BinaryIO, path: Path, parse: Callable[[object], Any] = RunRecord.from_log_entry) -> Iterator[Any]:
    """The records of an open log file, each line read by ``parse`` (RunRecord's by default,
    EmitRecord's for the emit log)."""
    with handle:
        number = 0
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # the rest of the line, a bounded piece at a time
                    raw = handle.readline(1 << 20)
                logger.warning(
                    "%s:%d: skipped a line longer than %d MiB", path, number, MAX_LINE_BYTES >> 20
                )
                continue
            try:
                record = parse(json.loads(raw))
            except (ValueError, RecursionError) as exc:
                logger.warning("%s:%d: skipped a line that is not a record (%s)", path, number, exc)
                continue
            yield record


def read_records(
    logs_dir: Path, hook_id: str | None, limit: int | None, first_day: str | None = None
) -> list[RunRecord]:
    """Records of ``hook_id`` (all hooks when None), oldest first, the last ``limit`` of them;
    from the log files of ``first_day`` (``YYYY-MM-DD``) on, when it is given."""
    dir_fd = _open_logs_dir_for_reading(logs_dir)
    if dir_fd is None:
        return []
    try:
        try:
            names = sorted(
                (n for n in os.listdir(dir_fd) if n.endswith(".jsonl") and not n.startswith(".")),
                reverse=True,
            )
        except OSError:
            return []
        if first_day is not None:
            names = [name for name in names if name[: -len(".jsonl")] >= first_day]
        collected: list[RunRecord] = []
        for name in names:  # newest day first, so a limit stops early
            path = logs_dir / name
            handle = _open_for_reading_at(dir_fd, name, path)
            if handle is None:
                continue
            found: deque[RunRecord] = deque(maxlen=limit)
            for record in _records(handle, path):
                if hook_id is None or record.hook_id == hook_id:
                    found.append(record)
            collected = [*found, *collected]
            if limit is not None and len(collected) >= limit:
                return collected[-limit:]
        return collected
    finally:
        os.close(dir_fd)


# -- what `hookbus validate` says about the log's paths -------------------------------------


def log_problems(logs_dir: Path) -> list[tuple[Path, str]]:
    """Why records would be refused at ``<home>/logs/hooks`` as it is now, as (path, message)
    pairs: a link, something other than a directory or regular file, or what another user
    could change. Looked at without following links or opening anything; nothing missing
    is a problem (the writer creates it)."""
    found: list[tuple[Path, str]] = []
    path = logs_dir.parent.parent
    for name in _below_home(logs_dir):
        path = path / name
        try:
            info = os.lstat(path)
        except OSError:
            return found
        if not stat.S_ISDIR(info.st_mode):
            parent_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                found.append((path, _not_a_directory(parent_fd, name, path)))
            finally:
                os.close(parent_fd)
            return found
        try:
            _check_ours(info, path, "the hook log")
        except LogRefused as exc:
            found.append((path, str(exc)))
            return found
    try:
        names = sorted(os.listdir(logs_dir))
    except OSError:
        return found
    for name in names:
        if not name.endswith(".jsonl"):
            continue
        day = logs_dir / name
        try:
            info = os.lstat(day)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode):
            found.append((day, _not_a_regular_file(day, info.st_mode)))
            continue
        try:
            _check_ours(info, day, "the hook log")
        except LogRefused as exc:
            found.append((day, str(exc)))
    return found
