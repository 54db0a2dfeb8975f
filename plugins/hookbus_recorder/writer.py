"""How the built-in recorder writes: each fire's audit line now, state.json in the background.

Each fire's audit line is written at once, by the thread that recorded it (one ``write`` of
one whole line on an O_APPEND descriptor), so a crash loses at most the line being written.
state.json is the slow part (a temp file, fsync, rename), so it goes through a
``BackgroundWriter``: one thread, shared by every open bus of the process, rewrites a hook's
state.json once for all its runs of the last 50 ms. ``flush`` writes everything submitted
before it; the thread ends when the last bus releases it.

Hook directories another process holds locked are written last, all at once (each waits
at most LOCK_WAIT_SECONDS for its lock, together rather than one after another): the other
hooks' state.json never waits behind them, and a bus's close, which waits for this writer
for at most RECORDER_FLUSH_SECONDS, is not held past that by a dozen held locks.

What waits for state.json is bounded in bytes as well as in items (the BackgroundWriter's
``max_bytes``), and holds only what state.json shows: the record without its decision and
note, which the log line has already taken (a rewritten input or a reason can be a megabyte,
and a stuck disk must not keep thousands of them).

A record the log cannot take (a refused path, a full disk) never reaches ``emit``: it is
counted in ``lost_records`` and reported once per failure, with the count so far, and once
when the log recovers, with how many were lost meanwhile. A state.json that cannot be
written is reported the same way, per file, but loses no record: the log has it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Mapping, Union

import attrs

from hookbus.home import Home
from hookbus.records import RunRecord
from hookbus.recording import BackgroundWriter, approximate_bytes
from hookbus.reporting import ReportOnce

from hookbus_recorder.logfile import LogAppender
from hookbus_recorder.state import RECENT_RUNS, append_runs, make_state_directory, set_load_error


@attrs.frozen
class LoadErrors:
    """Queued beside records, so state.json sees load errors and fires in order."""

    errors: Mapping[str, str | None]


#: Hook directories held locked elsewhere that one batch waits on at once, at most (threads).
MAX_LOCK_WAITERS = 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: A busy hook's state.json is rewritten at most about this often: the runs of a batch,
#: gathered over this long, are written with one rewrite per hook.
STATE_DELAY_SECONDS = 0.05

_StateUpdate = tuple[Home, Union[RunRecord, LoadErrors]]

#: What a queued state update costs beyond its strings: its tuple, the slimmed RunRecord and
#: its float, the deque's slot. (The Home is the bus's own, shared by all its updates.)
UPDATE_OVERHEAD_BYTES = 400


#: What ``_for_state`` keeps of a record: every field but its decision and note.
_STATE_FIELDS = tuple(field.name for field in attrs.fields(RunRecord) if field.name not in ("decision", "note"))


def _for_state(record: RunRecord) -> RunRecord:
    """``record`` with only what state.json shows (``state_run``, ``last_status``,
    ``last_error``): no decision, no note. The log has those."""
    if record.decision is None and record.note is None:
        return record
    # Not attrs.evolve, which reads the class's fields afresh on every call: this is on the
    # emitting thread, once a fire.
    return RunRecord(**{name: getattr(record, name) for name in _STATE_FIELDS})


def _weigh(update: _StateUpdate) -> int:
    """What a queued state update holds, in bytes: a record's strings (its error may be
    long) read off in constant time, or a load-errors mapping walked."""
    _, item = update
    if isinstance(item, RunRecord):
        strings = (item.at, item.hook_id, item.event, item.mode, item.status, item.error, item.thread_id)
        return UPDATE_OVERHEAD_BYTES + sum(sys.getsizeof(text) for text in strings if text is not None)
    return UPDATE_OVERHEAD_BYTES + approximate_bytes(item.errors)


class RecordWriter:
    def __init__(self) -> None:
        self._appender = LogAppender()
        self._report = ReportOnce()
        # No max_batch: the bigger the batch, the fewer rewrites of each state.json.
        # The log's descriptors close with the thread (no bus is open then).
        self._states: BackgroundWriter[_StateUpdate] = BackgroundWriter(
            self._write_states,
            name="hookbus-recorder",
            batch_delay=STATE_DELAY_SECONDS,
            max_batch=None,
            on_stop=self._appender.close,
            weigh=_weigh,
        )

    def lost_in(self, home: Home) -> int:
        """Records the log of ``home`` could not take since this process started."""
        return self._report.lost_by_key.get(_log_key(home), 0)

    @property
    def lost_records(self) -> int:
        """Records the log could not take since this process started (all homes)."""
        return sum(self._report.lost_by_key.values())

    def acquire(self) -> None:
        self._states.acquire()  # the thread starts with the first record, not before

    def release(self, timeout: float | None = None) -> bool:
        """Flush, and stop the thread when no bus uses it any more."""
        return self._states.release(timeout)

    def flush(self, timeout: float | None = None) -> bool:
        """Write everything submitted so far, state.json included; False on timeout."""
        return self._states.flush(timeout)

    def submit(self, home: Home, record: RunRecord | LoadErrors) -> None:
        if isinstance(record, RunRecord):
            # The audit line is written now, on the caller's thread (one write of one whole
            # line): a crash loses at most the line being written. Only state.json waits.
            try:
                self._appender.append(home.logs_dir, record.at, record.log_entry())
            except Exception as exc:  # a full disk or a refused path must not reach emit
                what = _log_key(home)
                self._report.failed(what, f"hookbus recorder: {what} failed: {exc}", lost=1)
            else:
                if self._report.any_failing:  # the common case builds no message key
                    self._report.succeeded(_log_key(home))
            if record.tier == "builtin":
                return  # the home guard keeps no state.json: the log has its denies
            record = _for_state(record)
        # A state update the queue cannot take is reported by the BackgroundWriter; the
        # record itself is in the log, so it is not counted as lost.
        self._states.submit((home, record))

    def _write_states(self, batch: list[_StateUpdate]) -> None:
        """One rewrite of each hook's state.json for all its runs in the batch; load errors
        in their place among them."""
        # Gathered by (home, hook, tier), which costs a tuple of what the record holds: a
        # Path built and hashed for each of a busy hook's hundreds of runs held the GIL
        # (and so the emitting threads) for milliseconds a batch.
        gathered: dict[tuple[int, str, str], tuple[Home, list[tuple[int, RunRecord]]]] = {}
        for index, (home, item) in enumerate(batch):
            if isinstance(item, LoadErrors):
                self._append_runs(gathered)  # the runs before it first: they happened first
                gathered = {}
                self._set_load_errors(home, item)
            else:
                key = (id(home), item.hook_id, item.tier)
                entry = gathered.get(key)
                if entry is None:
                    gathered[key] = (home, [(index, item)])
                else:
                    entry[1].append((index, item))
        self._append_runs(gathered)

    def _made(self, home: Home, directory: Path) -> bool:
        """Make a managed hook's state directory in the home when it is missing: the
        managed directory itself is root's, and read-only to the user."""
        try:
            make_state_directory(home, directory)
        except OSError as exc:
            self._report.failed(f"writing {directory}", f"hookbus recorder: cannot make {directory} for a managed hook's state.json: {exc}")
            return False
        return True

    def _append_runs(self, gathered: Mapping[tuple[int, str, str], tuple[Home, list[tuple[int, RunRecord]]]]) -> None:
        ordered: dict[Path, list[tuple[int, RunRecord]]] = {}
        for (_, hook_id, tier), (home, indexed) in gathered.items():
            directory = home.state_dir(hook_id, tier)
            if directory is not None and (tier == "user" or self._made(home, directory)):
                # Only the last RECENT_RUNS of a batch reach state.json (with the last one's
                # status): the rest need no entry built. Two buses of one home write the
                # same directory: their runs are put back in the order they came.
                ordered.setdefault(directory, []).extend(indexed[-RECENT_RUNS:])
        runs = {directory: [run for _, run in sorted(entries, key=lambda entry: entry[0])] for directory, entries in ordered.items()}
        held: list[tuple[Path, list[RunRecord]]] = []
        for hook_dir, hook_runs in runs.items():
            if _locked_elsewhere(hook_dir):
                held.append((hook_dir, hook_runs))  # after the free ones, which must not wait
            else:
                self._append(hook_dir, hook_runs)
        # Waited on together, so that n held locks cost one wait (LOCK_WAIT_SECONDS), not n:
        # the bus's close waits for this writer for a bounded time only.
        for start in range(0, len(held), MAX_LOCK_WAITERS):
            group = held[start : start + MAX_LOCK_WAITERS]
            if len(group) == 1:
                self._append(*group[0])
                continue
            waiters = [
                threading.Thread(target=self._append, args=entry, name="hookbus-recorder-lock", daemon=True)
                for entry in group
            ]
            started = []
            for waiter, entry in zip(waiters, group):
                try:
                    waiter.start()
                    started.append(waiter)
                except RuntimeError:  # no thread to be had: wait for it here
                    self._append(*entry)
            for waiter in started:
                waiter.join()

    def _append(self, hook_dir: Path, hook_runs: list[RunRecord]) -> None:
        self._guard(f"writing {hook_dir / 'state.json'}", lambda: append_runs(hook_dir, hook_runs))

    def _set_load_errors(self, home: Home, update: LoadErrors) -> None:
        hooks_root = str(home.hooks_dir)
        for hook_id, error in update.errors.items():
            if error is None and not os.path.lexists(os.path.join(hooks_root, hook_id, "state.json")):
                continue  # nothing to clear (most hooks at start-up): no Path, no lock
            hook_dir = home.hook_dir(hook_id)
            self._guard(f"writing {hook_dir / 'state.json'}", lambda: set_load_error(hook_dir, error))

    def _guard(self, what: str, action: Callable[[], None]) -> None:
        """One hook's state.json failing (a full disk, a FIFO) must not cost the others
        theirs, so each is guarded here rather than failing the whole batch."""
        try:
            action()
        except Exception as exc:
            self._report.failed(what, f"hookbus recorder: {what} failed: {exc}")
        else:
            self._report.succeeded(what)


def _locked_elsewhere(hook_dir: Path) -> bool:
    """Whether another open file description holds the hook directory's flock now: a probe
    that takes the lock and lets it go at once (or finds it taken), never waiting. Anything
    odd (gone, a link) is not "locked": append_runs says what it is."""
    try:
        fd = os.open(hook_dir, _DIR_FLAGS)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)  # closing it lets go of the lock it may have taken
    return False


def _log_key(home: Home) -> str:
    """How a failure of a home's log is reported, and counted."""
    return f"writing the hook log in {home.logs_dir}"
