"""``hooks/<id>/state.json``: read-modify-write under a lock, replaced atomically, readable by
its owner alone (mode 0600, whatever the umask: it keeps the hook's last errors)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import logging
import os
import re
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from hookbus.errors import SpecError
from hookbus.files import read_regular
from hookbus.jsontext import strict_json
from hookbus.records import RunRecord

if TYPE_CHECKING:
    from hookbus.home import Home

STATE_NAME = "state.json"
#: state.json's mode: its owner's alone.
STATE_MODE = 0o600
RECENT_RUNS = 10
_temp_counter = itertools.count()


#: A state.json bigger than this is not read (it holds ten runs, about 2 KiB): one that is
#: bigger was not written by hookbus, and is treated as unreadable, then replaced.
MAX_STATE_BYTES = 1024 * 1024
#: How long a writer waits for another to release a hook directory's lock. Any user who can
#: read the directory can flock it, so the wait is bounded: past it the state update is
#: dropped (the log has the fire) and reported.
LOCK_WAIT_SECONDS = 2.0
#: ... and while some directory is held past that, how long it waits on any other one: an
#: attacker holding every hook's lock costs the writer thread one long wait, not one each.
LOCK_WAIT_UNDER_ATTACK_SECONDS = 0.2

logger = logging.getLogger("hookbus")

# O_NONBLOCK: a FIFO put in place of state.json must not block the open (nor the writer
# thread, close(), or `hookbus list` behind it); fstat then refuses all but a regular file.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Unreadable(Exception):
    """Why a state.json was not read; it is then treated as absent (and replaced, unless
    it is a directory, which a rename cannot replace)."""

    def __init__(self, why: str, replaceable: bool = True) -> None:
        super().__init__(why)
        self.replaceable = replaceable


def read_state(hook_dir: Path, dir_fd: int | None = None) -> dict[str, Any]:
    """The current state of a hook; empty when there is none or it is unreadable.

    With ``dir_fd`` (the hook directory, open), the file is opened relative to it and
    ``hook_dir`` is not used for opening. A state.json that is a link, a FIFO, a device,
    bigger than MAX_STATE_BYTES or not JSON is treated as absent and reported once (the next
    write replaces it: rename swaps the directory entry, it never writes through it).
    """
    try:
        try:
            if dir_fd is None:
                own = os.open(hook_dir, _DIR_FLAGS)
                try:
                    fd = os.open(STATE_NAME, _READ_FLAGS, dir_fd=own)
                finally:
                    os.close(own)
            else:
                fd = os.open(STATE_NAME, _READ_FLAGS, dir_fd=dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return {}  # no state yet, or no hook directory (a link to one is not followed)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Unreadable("is a symbolic link, which is never followed") from None
            raise _Unreadable(f"cannot be read: {exc.strerror or exc}") from None
        try:
            data = _read_capped(fd)
        finally:
            os.close(fd)
        try:
            state = json.loads(data)
        except ValueError as exc:
            raise _Unreadable(f"is not JSON ({exc})") from None
        except RecursionError:
            raise _Unreadable("is nested too deeply to parse") from None
    except _Unreadable as exc:
        _report_unreadable(hook_dir / STATE_NAME, str(exc), exc.replaceable)
        return {}
    if _reported:
        _recovered(hook_dir / STATE_NAME)
    return state if isinstance(state, dict) else {}


def _read_capped(fd: int) -> bytes:
    """The whole of a regular file of at most MAX_STATE_BYTES, read from ``fd``."""
    try:
        return read_regular(fd, MAX_STATE_BYTES)[0]
    except SpecError as exc:
        # A directory in its place cannot be replaced by a rename; anything else can.
        replaceable = not exc.message.startswith("is a directory")
        raise _Unreadable(exc.message, replaceable) from None


#: state.json paths reported unreadable: once each, until one reads cleanly again.
_reported: set[str] = set()
_reported_lock = threading.Lock()


def _report_unreadable(path: Path, why: str, replaceable: bool) -> None:
    with _reported_lock:
        if str(path) in _reported:
            return
        _reported.add(str(path))
    if replaceable:
        fix = f"it is treated as empty, and the hook's next state replaces it (to remove it now: rm {path})"
    else:
        fix = f"the hook's state cannot be kept until it is removed: rm -r {path}"
    logger.warning("hookbus recorder: %s %s: %s", path, why, fix)


def _recovered(path: Path) -> None:
    with _reported_lock:
        _reported.discard(str(path))


def write_atomically(
    directory: Path, name: str, document: dict[str, Any], dir_fd: int | None = None
) -> None:
    """Temp file in the same directory, fsync, rename: readers see old or new, never torn.

    The temp name starts with a dot so the hooks-directory watcher ignores it. With
    ``dir_fd`` every step is relative to that open directory, so a directory renamed
    meanwhile still gets its own file, and the rename never looks for the temp file elsewhere.
    The file is its owner's alone (0600), whatever the umask; so is the one it replaces,
    once replaced.
    """
    temp = f".{name}.{os.getpid()}.{next(_temp_counter)}.tmp"
    data = strict_json(document, indent=2) + b"\n"
    at = str(directory) + os.sep if dir_fd is None else ""
    # O_EXCL: a name planted in the way (a link, a FIFO) fails the write, never redirects it.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(at + temp, flags, STATE_MODE, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, STATE_MODE)  # the umask may have taken the owner's bits too
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(at + temp, at + name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(at + temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


class _LockedDirectory:
    """A hook directory, open, under an exclusive flock on the directory itself: serialises
    writers across processes without a lock file, and pins the directory that state.json
    is read from and written to, wherever it is renamed meanwhile."""

    def __init__(self, directory: Path) -> None:
        self.directory = str(directory)
        # O_NOFOLLOW: a hook directory swapped for a link since the core checked it is not
        # followed (the core refuses linked hook directories).
        self.fd = os.open(directory, _DIR_FLAGS)

    def __enter__(self) -> _LockedDirectory:
        try:
            _lock(self.fd, self.directory)
            if self.directory not in _swept:
                _sweep_temp_files(self.fd)
                _swept.add(self.directory)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> bool:
        try:
            # Deleted while we held it (rm -rf of the hook): nothing to keep, nothing to
            # report; the log still has the fire.
            return isinstance(error, FileNotFoundError) and os.fstat(self.fd).st_nlink == 0
        finally:
            os.close(self.fd)  # closing the descriptor releases the lock


class HookDirectoryLocked(Exception):
    """Another process held a hook directory's lock for longer than LOCK_WAIT_SECONDS."""


#: Hook directories whose lock was not free within the wait: tried without waiting until
#: they are free again, so one held lock costs the writer thread one wait, not one per batch.
_held: set[str] = set()


def _lock(fd: int, directory: str) -> None:
    """An exclusive flock on ``fd``, waiting at most LOCK_WAIT_SECONDS (never for a lock
    held forever: whoever can read the directory can take it)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _held:
            _held.discard(directory)
        return
    except BlockingIOError:
        pass
    if directory in _held:
        wait = 0.0
    else:
        wait = LOCK_WAIT_UNDER_ATTACK_SECONDS if _held else LOCK_WAIT_SECONDS
    deadline = time.monotonic() + wait
    delay = 0.001
    while time.monotonic() < deadline:
        time.sleep(delay)  # another writer holds it for a rename: milliseconds, as a rule
        delay = min(delay * 2, 0.05)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _held.discard(directory)
            return
        except BlockingIOError:
            continue
    _held.add(directory)
    raise HookDirectoryLocked(
        f"{directory} is locked by another process (flock) for over {wait or LOCK_WAIT_SECONDS:g} s, so "
        f"its state.json is not updated meanwhile (the log has every fire): a stuck hookbus "
        f"process, or another user holding the lock; `fuser -v {directory}` shows who"
    )


#: Hook directories this process has swept of stale temp files (once each is enough).
_swept: set[str] = set()
_TEMP_FILE = re.compile(rf"\.{re.escape(STATE_NAME)}\.[0-9]+\.[0-9]+\.tmp")


def _sweep_temp_files(dir_fd: int) -> None:
    """Remove the temp files of writers killed mid-write (SIGKILL, power loss). Every writer
    makes its temp file under the directory's lock, which we hold: any found is stale."""
    for name in os.listdir(dir_fd):
        if _TEMP_FILE.fullmatch(name):
            try:
                os.unlink(name, dir_fd=dir_fd)
            except FileNotFoundError:
                pass


def append_runs(hook_dir: Path, runs: Iterable[RunRecord]) -> None:
    """Add fires to a hook's state.json, keeping the last ten in ``recent_runs``.

    Keys other writers own (a load error, say) are kept as they are.
    """
    runs = list(runs)
    if not runs or not _is_real_directory(hook_dir):
        return  # a deleted hook has no state to keep; the log still has the fire
    with _vanished_ok(), _LockedDirectory(hook_dir) as locked:
        state = read_state(hook_dir, locked.fd)
        recent = state.get("recent_runs")
        recent = recent if isinstance(recent, list) else []
        recent = [*recent, *(run.state_run() for run in runs)][-RECENT_RUNS:]
        last = runs[-1]
        state.update(
            last_fired_at=last.at,
            last_status=last.status,
            # While the spec file is broken, its last good version fires: say so still.
            last_error=last.error or state.get("load_error"),
            recent_runs=recent,
        )
        write_atomically(hook_dir, STATE_NAME, state, locked.fd)


def set_load_error(hook_dir: Path, error: str | None) -> None:
    """Show why a hook's spec does not load (``load_error``, and ``last_error``), or clear it
    once it loads again. Writes nothing when nothing changes."""
    if error is None and not os.path.lexists(hook_dir / STATE_NAME):
        return  # nothing to clear: the common case at start-up, one system call
    if not _is_real_directory(hook_dir):
        return  # never write through a symlinked (refused) hook directory
    with _vanished_ok(), _LockedDirectory(hook_dir) as locked:
        state = read_state(hook_dir, locked.fd)
        previous = state.get("load_error")
        if error is None:
            if previous is None:
                return
            if "recent_runs" not in state:  # it never fired: the error was all there was
                os.unlink(STATE_NAME, dir_fd=locked.fd)
                return
            del state["load_error"]
            if state.get("last_error") == previous:
                state["last_error"] = None
        else:
            if previous == error and state.get("last_error") == error:
                return
            state["load_error"] = error
            state["last_error"] = error
        write_atomically(hook_dir, STATE_NAME, state, locked.fd)


@contextlib.contextmanager
def _vanished_ok() -> Iterator[None]:
    """A hook directory deleted or renamed away before we could open it: nothing to keep."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError):
        pass


def _is_real_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def make_state_directory(home: Home, directory: Path) -> None:
    """Make ``directory`` (``HOME/managed/<id>``, a managed hook's state directory) and its
    parent, private, when missing; a link in place of either is never followed (the open
    with O_NOFOLLOW refuses it, and the state write after it too)."""
    if _is_real_directory(directory):
        return
    root_fd = os.open(home.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parent = directory.parent.name
        with contextlib.suppress(FileExistsError):
            os.mkdir(parent, 0o700, dir_fd=root_fd)
        parent_fd = os.open(parent, _DIR_FLAGS, dir_fd=root_fd)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory.name, 0o700, dir_fd=parent_fd)
        finally:
            os.close(parent_fd)
    finally:
        os.close(root_fd)
