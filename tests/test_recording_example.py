"""contrib/examples/jsonl_recorder.py, the README's recorder built on BackgroundWriter,
registered in process with ``HookBus(home, plugins=[module])`` and driven by real hooks."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import pytest

from hookbus import HookBus

EXAMPLE = Path(__file__).resolve().parents[1] / "contrib" / "examples" / "jsonl_recorder.py"


@pytest.fixture(scope="module")
def jsonl_recorder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("jsonl_recorder", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def writer_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "hookbus-jsonl"]


@pytest.mark.timeout(60)
def test_every_fire_is_a_line_of_the_file_settings_name(
    home: Path, write_hook: Callable[..., Path], jsonl_recorder: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HOOKBUS_JSONL_PATH", raising=False)
    (home / "settings.json").write_text(json.dumps({"jsonl_recorder": {"path": "audit/fires.jsonl"}}))
    write_hook("guard", mode="sync", blocking=True, command="echo no >&2; exit 2")
    write_hook("watcher", command="exit 0")
    bus = HookBus(home, plugins=[jsonl_recorder])
    decisions = [bus.emit("PreToolUse", {"tool_name": "Bash", "tool_input": {"n": n}}).behavior for n in range(5)]
    bus.close()

    assert decisions == ["deny"] * 5
    entries = lines_of(home / "audit" / "fires.jsonl")
    assert len(entries) == 10
    assert sorted((e["hook_id"], e["status"]) for e in entries) == sorted(
        [("guard", "deny")] * 5 + [("watcher", "done")] * 5
    )
    # The same entries as the built-in recorder's log, which records beside it.
    builtin = [json.loads(line) for log in (home / "logs" / "hooks").glob("*.jsonl")
               for line in log.read_text().splitlines()]
    assert sorted(map(json.dumps, entries)) == sorted(map(json.dumps, builtin))
    assert bus.lost_records == 0
    assert writer_threads() == []  # the last bus closed: the thread ended


@pytest.mark.timeout(60)
def test_the_environment_names_the_file_when_settings_do_not(
    home: Path, tmp_path: Path, write_hook: Callable[..., Path], jsonl_recorder: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = tmp_path / "elsewhere" / "fires.jsonl"
    monkeypatch.setenv("HOOKBUS_JSONL_PATH", str(target))  # absolute: the home is not used
    write_hook("guard", mode="sync", command="exit 0")
    with HookBus(home, plugins=[jsonl_recorder]) as bus:
        bus.emit("PreToolUse", {"tool_name": "Bash"})
        bus.emit("PreToolUse", {"tool_name": "Bash"})
    assert [(e["hook_id"], e["status"]) for e in lines_of(target)] == [("guard", "allow")] * 2
    assert writer_threads() == []


@pytest.mark.timeout(60)
def test_records_it_could_not_write_are_counted_by_the_bus(
    home: Path, write_hook: Callable[..., Path], jsonl_recorder: ModuleType,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("HOOKBUS_JSONL_PATH", raising=False)
    (home / "logs").mkdir()
    (home / "logs" / "fires.jsonl").mkdir()  # a directory where the file should be
    write_hook("guard", mode="sync", command="exit 0")
    lost_before = jsonl_recorder.lost_records()
    bus = HookBus(home, plugins=[jsonl_recorder])
    assert bus.emit("PreToolUse", {"tool_name": "Bash"}).behavior == "allow"
    bus.close()
    assert jsonl_recorder.lost_records() - lost_before == 1
    assert bus.lost_records == jsonl_recorder.lost_records()
    [report] = [r for r in caplog.records if "hookbus-jsonl: writing a batch failed" in r.getMessage()]
    assert "IsADirectoryError" in report.getMessage() and str(home / "logs" / "fires.jsonl") in report.getMessage()
