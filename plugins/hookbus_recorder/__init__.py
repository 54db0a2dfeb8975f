"""The built-in recorder: ``hooks/<id>/state.json`` and ``logs/hooks/<date>.jsonl``.

Records are written by a background thread (see ``writer``); ``hookbus_shutdown`` drains it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from hookbus import hookimpl
from hookbus.durations import parse_duration
from hookbus.records import RunRecord

from hookbus_recorder.logfile import read_records
from hookbus_recorder.state import RECENT_RUNS, read_state
from hookbus_recorder.writer import LoadErrors, RecordWriter

if TYPE_CHECKING:
    from hookbus.bus import HookBus

#: How long closing a bus waits for its records to reach the disk.
FLUSH_TIMEOUT_SECONDS = 30.0

writer = RecordWriter()


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
def hookbus_record_load_errors(bus: HookBus, errors: Mapping[str, str | None]) -> None:
    writer.submit(bus.home, LoadErrors(dict(errors)))


@hookimpl
def hookbus_read_runs(bus: HookBus, hook_id: str | None, limit: int | None) -> list[RunRecord]:
    writer.flush(FLUSH_TIMEOUT_SECONDS)
    if hook_id is not None and limit is not None and limit <= RECENT_RUNS:
        recent = _from_state(bus, hook_id)
        if recent:
            return recent[-limit:]
    return read_records(bus.home.logs_dir, hook_id, limit)


def _from_state(bus: HookBus, hook_id: str) -> list[RunRecord]:
    """The recent runs state.json keeps: cheaper than scanning the log for ``hookbus list``."""
    runs = read_state(bus.home.hook_dir(hook_id)).get("recent_runs")
    if not isinstance(runs, list):
        return []
    records = []
    for run in runs:
        try:
            records.append(
                RunRecord(
                    at=run["at"],
                    hook_id=hook_id,
                    event=run["event"],
                    mode="async" if run["async"] else "sync",
                    status=run["status"],
                    duration=parse_duration(run["duration"], allow_zero=True),
                    error=run.get("error"),
                    thread_id=run.get("thread_id"),
                )
            )
        except (KeyError, TypeError, ValueError):
            return []
    return records
