"""The built-in recorder: ``hooks/<id>/state.json`` and ``logs/hooks/<date>.jsonl`` (and,
with ``record_envelopes``, ``logs/emits/<date>.jsonl``).

Each fire's log line is written before emit returns; state.json by a background thread
(``hookbus.recording.BackgroundWriter``, see ``writer``), which ``hookbus_shutdown`` drains.
``lost_records()`` says how many records the log could not take (each is also reported).
What it is handed is masked already (``hookbus.recorders``); what it writes is its owner's
alone to read (directories 0700, files 0600).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from hookbus import hookimpl
from hookbus.errors import Problem
from hookbus.records import EmitRecord, RunRecord

from hookbus_recorder.logfile import log_problems, read_records
from hookbus_recorder.state import RECENT_RUNS, read_state
from hookbus_recorder.writer import LoadErrors, RecordWriter

if TYPE_CHECKING:
    from hookbus.bus import HookBus
    from hookbus.home import Home
    from hookbus.settings import Settings

#: How long closing a bus waits for its records to reach the disk.
FLUSH_TIMEOUT_SECONDS = 30.0

writer = RecordWriter()


def lost_records(home: Home | None = None) -> int:
    """How many records this process could not write to the hook log of ``home`` (of every
    home, when None): refused (a symlinked or foreign logs path, a FIFO in place of the
    day's file) or refused by the disk (ENOSPC, a short write). Each failure is also
    reported on the ``hookbus`` logger, once, with its count, and once when it recovers.
    ``bus.lost_records`` asks this of the bus's home."""
    return writer.lost_records if home is None else writer.lost_in(home)


@hookimpl
def hookbus_startup(bus: HookBus) -> None:
    writer.acquire()


@hookimpl
def hookbus_shutdown(bus: HookBus) -> None:
    writer.release(FLUSH_TIMEOUT_SECONDS)


@hookimpl
def hookbus_record(bus: HookBus, record: RunRecord) -> None:
    writer.submit(bus.home, record)


@hookimpl
def hookbus_record_emit(bus: HookBus, record: EmitRecord) -> None:
    from hookbus_recorder.emits import append_emit

    append_emit(bus.home.logs_dir, record)


@hookimpl
def hookbus_read_emits(bus: HookBus, since: str | None, until: str | None) -> list[EmitRecord]:
    """``RefusedRecords`` when an emit log another user could have written was refused
    (``hookbus replay`` would run your hooks on its envelopes)."""
    from hookbus_recorder.emits import read_emits

    return read_emits(bus.home.logs_dir, since, until)


@hookimpl
def hookbus_record_load_errors(bus: HookBus, errors: Mapping[str, str | None]) -> None:
    writer.submit(bus.home, LoadErrors(dict(errors)))


@hookimpl
def hookbus_config_problems(home: Home, settings: Settings) -> list[Problem]:
    """What would make the log refuse records, so that `hookbus validate` and `list` say it
    before a fire is lost to it."""
    problems = []
    for path, message in log_problems(home.logs_dir):
        shown = home.relative(path)
        problems.append(Problem(shown, message.removeprefix(f"{path} ")))
    return problems


@hookimpl
def hookbus_read_runs(bus: HookBus, hook_id: str | None, limit: int | None) -> list[RunRecord]:
    writer.flush(FLUSH_TIMEOUT_SECONDS)
    first_day = None
    if hook_id is not None and limit is not None and limit <= RECENT_RUNS:
        first_day = _first_day_of_recent_runs(bus, hook_id, limit)
    return read_records(bus.home.logs_dir, hook_id, limit, first_day)


def _first_day_of_recent_runs(bus: HookBus, hook_id: str, limit: int) -> str | None:
    """The UTC day of the oldest of the hook's last ``limit`` runs, from state.json: the
    log files before it need not be read (``hookbus list`` asks this of every hook)."""
    runs = read_state(bus.home.hook_dir(hook_id)).get("recent_runs")
    if not isinstance(runs, list) or not runs:
        runs = read_state(bus.home.managed_state_dir / hook_id).get("recent_runs")  # a managed hook's
    if not isinstance(runs, list) or not runs:
        return None
    at = runs[-limit:][0].get("at") if isinstance(runs[-limit:][0], dict) else None
    return at[:10] if isinstance(at, str) and len(at) >= 10 else None
