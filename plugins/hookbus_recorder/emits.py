"""The built-in recorder's emit records (settings.json ``"record_envelopes": true``):
``logs/emits/<YYYY-MM-DD>.jsonl``, one JSON line per emit that ran sync hooks, written and
read by the rules of the hook log (no link followed, nothing of another user's written into
or read, one write per line; its owner's alone to read).

``hookbus replay`` runs the user's hooks on what it reads here, so what another user could
have written is refused, not read: the home and every directory above it, ``logs``,
``logs/emits`` and each day's file must be owned by the user or root and not writable by
group or others, and none may be a link; a day's file must be a regular file (a FIFO is
refused without blocking). ``read_emits`` raises ``RefusedRecords`` naming each refused
file and its fix, with the records of the others.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from hookbus.files import kind_of
from hookbus.records import EmitRecord, RefusedRecords
from hookbus.trust import path_refusal

from hookbus_recorder.logfile import _DIR_FLAGS, _READ_FLAGS, LogAppender, _kind_at, _records, trust_refusal

appender = LogAppender()
#: What another user who could write an emit log could do.
_COULD = "choose the envelopes hookbus replay runs your hooks on"


def emits_dir(logs_dir: Path) -> Path:
    """``<home>/logs/emits``, beside ``<home>/logs/hooks``."""
    return logs_dir.parent / "emits"


def append_emit(logs_dir: Path, record: EmitRecord) -> None:
    appender.append(emits_dir(logs_dir), record.at, record.log_entry())


def read_emits(logs_dir: Path, since: str | None, until: str | None) -> list[EmitRecord]:
    """The emit records with ``since <= at < until``, oldest first. RefusedRecords when a
    file on the way, or a day's file, could have been written by another user."""
    directory = emits_dir(logs_dir)
    refusals: list[str] = []
    dir_fd = _open_trusted_directory(directory, refusals)
    if dir_fd is None:
        if refusals:
            raise RefusedRecords([], refusals)
        return []
    found: list[EmitRecord] = []
    try:
        try:
            names = sorted(name for name in os.listdir(dir_fd) if name.endswith(".jsonl") and not name.startswith("."))
        except OSError as exc:
            raise RefusedRecords([], [f"{directory} cannot be read: {exc.strerror or exc}"]) from None
        for name in names:
            day = name[: -len(".jsonl")]
            if (since is not None and day < since[:10]) or (until is not None and day > until[:10]):
                continue
            path = directory / name
            handle = _open_trusted_day(dir_fd, name, path, refusals)
            if handle is None:
                continue
            for record in _records(handle, path, EmitRecord.from_log_entry):
                if (since is None or record.at >= since) and (until is None or record.at < until):
                    found.append(record)
    finally:
        os.close(dir_fd)
    found.sort(key=lambda record: record.at)
    if refusals:
        raise RefusedRecords(found, refusals)
    return found


def _open_trusted_directory(directory: Path, refusals: list[str]) -> int | None:
    """``<home>/logs/emits`` open, each component checked on what was opened; None when it
    is missing (nothing recorded) or refused (the refusal added to ``refusals``)."""
    home = directory.parent.parent
    unsafe = path_refusal(home)
    if unsafe is not None:
        where, why = unsafe
        refusals.append(f"{where} {why}")
        return None
    try:
        fd = os.open(home, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        refusals.append(f"{home} cannot be read: {exc.strerror or exc}")
        return None
    path = home
    for name in (directory.parent.name, directory.name):
        path = path / name
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError as exc:
            refusals.append(_unopenable(fd, name, path, exc, "directory"))
            os.close(fd)
            return None
        os.close(fd)
        fd = child
        refusal = trust_refusal(os.fstat(fd), path, _COULD)
        if refusal is not None:
            refusals.append(refusal)
            os.close(fd)
            return None
    return fd


def _open_trusted_day(dir_fd: int, name: str, path: Path, refusals: list[str]) -> BinaryIO | None:
    """A day's file open for reading, checked on what was opened; None when it vanished or
    was refused (the refusal added to ``refusals``)."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        refusals.append(_unopenable(dir_fd, name, path, exc, "regular file"))
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            refusals.append(f"{path} is a {kind_of(info.st_mode)}, not a regular file: remove it (rm {path})")
            os.close(fd)
            return None
        refusal = trust_refusal(info, path, _COULD)
    except OSError as exc:
        os.close(fd)
        refusals.append(f"{path} cannot be read: {exc.strerror or exc}")
        return None
    if refusal is not None:
        os.close(fd)
        refusals.append(refusal)
        return None
    return open(fd, "rb")


def _unopenable(parent_fd: int, name: str, path: Path, exc: OSError, wanted: str) -> str:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        kind = _kind_at(parent_fd, name)
        if kind == "symbolic link":
            return (
                f"{path} is a symbolic link, and emit records are never read through one (another user "
                f"could point it at envelopes of theirs): remove the link (rm {path})"
            )
        return f"{path} is a {kind}, not a {wanted}: move it away (mv {path} {path}.old)"
    return f"{path} cannot be read: {exc.strerror or exc}"
