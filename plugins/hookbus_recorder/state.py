"""``hooks/<id>/state.json``: read-modify-write under a lock, replaced atomically."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator

from hookbus.jsontext import strict_json
from hookbus.records import RunRecord

STATE_NAME = "state.json"
RECENT_RUNS = 10
_temp_counter = itertools.count()


def read_state(hook_dir: Path, dir_fd: int | None = None) -> dict[str, Any]:
    """The current state of a hook; empty when there is none or it is unreadable.

    With ``dir_fd`` (the hook directory, open), the file is opened relative to it and
    ``hook_dir`` is not used.
    """
    try:
        if dir_fd is None:
            fd = os.open(hook_dir / STATE_NAME, os.O_RDONLY | os.O_CLOEXEC)
        else:
            fd = os.open(STATE_NAME, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
        with open(fd, "rb") as handle:
            state = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write_atomically(
    directory: Path, name: str, document: dict[str, Any], dir_fd: int | None = None
) -> None:
    """Temp file in the same directory, fsync, rename: readers see old or new, never torn.

    The temp name starts with a dot so the hooks-directory watcher ignores it. With
    ``dir_fd`` every step is relative to that open directory, so a directory renamed
    meanwhile still gets its own file, and the rename never looks for the temp file elsewhere.
    """
    temp = f".{name}.{os.getpid()}.{next(_temp_counter)}.tmp"
    data = strict_json(document, indent=2) + b"\n"
    at = str(directory) + os.sep if dir_fd is None else ""
    fd = os.open(at + temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        try:
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
        self.fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def __enter__(self) -> _LockedDirectory:
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
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
