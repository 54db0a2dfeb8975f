"""``hooks/<id>/state.json``: read-modify-write under a lock, replaced atomically."""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator

from hookbus.records import RunRecord
from hookbus_recorder.encoding import encode_json

STATE_NAME = "state.json"
RECENT_RUNS = 10
_temp_counter = itertools.count()


def read_state(hook_dir: Path) -> dict[str, Any]:
    """The current state of a hook; empty when there is none or it is unreadable."""
    try:
        with open(hook_dir / STATE_NAME, "rb") as handle:
            state = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def write_atomically(directory: Path, name: str, document: dict[str, Any]) -> None:
    """Temp file in the same directory, fsync, rename: readers see old or new, never torn.

    The temp name starts with a dot so the hooks-directory watcher ignores it.
    """
    temp = directory / f".{name}.{os.getpid()}.{next(_temp_counter)}.tmp"
    data = encode_json(document, indent=2)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, directory / name)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


class _DirectoryLock:
    """An exclusive flock on the hook directory itself: serialises writers across processes
    without adding a lock file."""

    def __init__(self, directory: Path) -> None:
        self.fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor releases the lock


def append_runs(hook_dir: Path, runs: Iterable[RunRecord]) -> None:
    """Add fires to a hook's state.json, keeping the last ten in ``recent_runs``.

    Keys other writers own (a load error, say) are kept as they are.
    """
    runs = list(runs)
    if not runs or not _is_real_directory(hook_dir):
        return  # a deleted hook has no state to keep; the log still has the fire
    with _vanishing_ok(hook_dir), _DirectoryLock(hook_dir):
        state = read_state(hook_dir)
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
        write_atomically(hook_dir, STATE_NAME, state)


def set_load_error(hook_dir: Path, error: str | None) -> None:
    """Show why a hook's spec does not load (``load_error``, and ``last_error``), or clear it
    once it loads again. Writes nothing when nothing changes."""
    if error is None and not os.path.lexists(hook_dir / STATE_NAME):
        return  # nothing to clear: the common case at start-up, one system call
    if not _is_real_directory(hook_dir):
        return  # never write through a symlinked (refused) hook directory
    with _vanishing_ok(hook_dir), _DirectoryLock(hook_dir):
        state = read_state(hook_dir)
        previous = state.get("load_error")
        if error is None:
            if previous is None:
                return
            if "recent_runs" not in state:  # it never fired: the error was all there was
                os.unlink(hook_dir / STATE_NAME)
                return
            del state["load_error"]
            if state.get("last_error") == previous:
                state["last_error"] = None
        else:
            if previous == error and state.get("last_error") == error:
                return
            state["load_error"] = error
            state["last_error"] = error
        write_atomically(hook_dir, STATE_NAME, state)


@contextlib.contextmanager
def _vanishing_ok(hook_dir: Path) -> Iterator[None]:
    """A hook directory deleted or renamed while its state is written: nothing to keep, and
    nothing to report (the log has the fire)."""
    try:
        yield
    except FileNotFoundError:
        if os.path.lexists(hook_dir):
            raise


def _is_real_directory(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
