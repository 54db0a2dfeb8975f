"""A recorder that appends every fire to a JSON-lines file, through a BackgroundWriter.

The file: settings.json's {"jsonl_recorder": {"path": "..."}} (relative to the home), else
$HOOKBUS_JSONL_PATH, else <home>/logs/fires.jsonl.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

from hookbus import BackgroundWriter, Home, HookBus, RunRecord, hookimpl


def write_lines(batch: list[tuple[Path, RunRecord]]) -> None:  # on the writer's thread
    lines: dict[Path, list[str]] = {}
    for path, record in batch:
        lines.setdefault(path, []).append(json.dumps(record.log_entry()) + "\n")
    for path, text in lines.items():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the user's alone, as hookbus's logs
        with open(path, "a", encoding="utf-8", opener=private) as file:  # one write per batch, not per fire
            file.write("".join(text))


def private(name: str, flags: int) -> int:
    return os.open(name, flags, 0o600)


writer: BackgroundWriter[tuple[Path, RunRecord]] = BackgroundWriter(write_lines, name="hookbus-jsonl")


def lost_records(home: Home | None = None) -> int:  # bus.lost_records adds these
    return writer.lost


def path_of(bus: HookBus) -> Path:
    setting = bus.snapshot.settings.raw.get("jsonl_recorder")
    chosen = setting.get("path") if isinstance(setting, Mapping) else None
    if not isinstance(chosen, str):
        chosen = os.environ.get("HOOKBUS_JSONL_PATH") or "logs/fires.jsonl"
    return bus.home.root / chosen


@hookimpl
def hookbus_startup(bus: HookBus) -> None:
    writer.acquire()


@hookimpl
def hookbus_record(bus: HookBus, record: RunRecord) -> None:
    writer.submit((path_of(bus), record))  # never blocks, never raises


@hookimpl
def hookbus_shutdown(bus: HookBus) -> None:
    writer.release(timeout=30.0)  # writes what is queued; the last bus ends the thread
