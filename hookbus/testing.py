"""Testing helpers for plugin authors and embedders: a pytest plugin, loaded automatically
when hookbus is installed (entry point ``pytest11``).

    def test_my_runner(hookbus_home, hookbus_fire):
        hookbus_home.write_hook("h", event="Stop", mode="sync", echo={"text": "hi"})
        fired = hookbus_fire("Stop")
        assert fired.decision.context == "hi"
        assert fired.records[0].status == "context"

Fixtures:
- ``hookbus_home``: a fresh home in a temp directory (a ``TestHome``), to write hooks,
  settings and workflows into.
- ``hookbus_plugins``: plugin objects to register in process; override it in your conftest
  (``return [MyPlugin()]``). Installed plugins are found through entry points as usual.
- ``hookbus_bus``: a HookBus on that home with those plugins and a ``CaptureRecorder``;
  closed at teardown.
- ``hookbus_capture``: the CaptureRecorder: every RunRecord of the bus, in memory.
- ``hookbus_fire``: reload, emit, and return what happened (a ``Fired``).

A home's own fixtures (``hooks/<id>/tests/*.json``, what ``hookbus test`` runs) from pytest::

    from hookbus.testing import assert_fixtures_pass

    def test_my_policy():
        assert_fixtures_pass("~/.vix")          # or a checkout's home, and hook ids
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import attrs
import pytest

from hookbus.bus import HookBus
from hookbus.decision import Decision
from hookbus.home import Home
from hookbus.hookspecs import hookimpl
from hookbus.records import RunRecord


def run_fixtures(home: str | os.PathLike[str], hook_ids: list[str] | None = None, *, plugins: list[object] | None = None) -> list[Any]:
    """The results (``hookbus.policy.fixtures.FixtureResult``) of the fixtures of a home's
    hooks (of ``hook_ids`` only, when given), as ``hookbus test`` runs them: nothing is
    recorded, no state.json changes."""
    from hookbus.policy.fixtures import run_fixtures as run

    bus = HookBus(os.path.expanduser(os.fspath(home)), plugins=plugins or (), read_only=True)
    try:
        return run(bus, hook_ids)
    finally:
        bus.close()


def assert_fixtures_pass(home: str | os.PathLike[str], hook_ids: list[str] | None = None, *, plugins: list[object] | None = None) -> None:
    """AssertionError naming every fixture that fails (and what differs), or when there is
    none at all."""
    results = run_fixtures(home, hook_ids, plugins=plugins)
    assert results, f"no fixtures in {home}: write hooks/ID/tests/NAME.json"
    failed = [result for result in results if not result.ok]
    assert not failed, "fixtures failed:\n" + "\n".join(f"{result.path}: {'; '.join(result.problems)}" for result in failed)


class TestHome:
    """A home directory to write hooks, settings and workflow config into."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    def __init__(self, root: Path) -> None:
        self.root = root
        #: The layout the bus reads, so that the two never disagree.
        self.home = Home(root)
        self.home.hooks_dir.mkdir(parents=True, exist_ok=True)

    def write_hook(
        self,
        hook_id: str,
        *,
        event: str = "PreToolUse",
        matcher: str | None = None,
        files: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> Path:
        """Write ``hooks/<hook_id>/hook.json`` atomically; ``fields`` are its other keys,
        ``files`` executable helper files beside it. Returns the hook.json path."""
        trigger: dict[str, Any] = {"event": event}
        if matcher is not None:
            trigger["matcher"] = matcher
        directory = self.home.hook_dir(hook_id)
        directory.mkdir(parents=True, exist_ok=True)
        for name, content in (files or {}).items():
            (directory / name).write_text(content)
            (directory / name).chmod(0o755)
        path = directory / "hook.json"
        _write_json(path, {"id": hook_id, "trigger": trigger, **fields})
        return path

    def write_settings(self, settings: Mapping[str, Any]) -> Path:
        path = self.home.settings_path
        _write_json(path, dict(settings))
        return path

    def write_workflows(self, workflows: Mapping[str, Any]) -> Path:
        path = self.home.config_dir / "workflow.json"
        path.parent.mkdir(exist_ok=True)
        _write_json(path, dict(workflows))
        return path


def _write_json(path: Path, document: dict[str, Any]) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(json.dumps(document, indent=2))
    os.replace(temp, path)


class CaptureRecorder:
    """A recorder plugin that keeps every RunRecord in memory (it records beside the others)."""

    __test__ = False

    def __init__(self) -> None:
        self.records: list[RunRecord] = []
        self._changed = threading.Condition()

    @hookimpl
    def hookbus_record(self, record: RunRecord) -> None:
        with self._changed:
            self.records.append(record)
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[RunRecord]:
        """Wait until ``count`` records are in (async hooks record when they finish)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.records) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"expected {count} records within {timeout}s, got {len(self.records)}"
                    )
                self._changed.wait(remaining)
            return list(self.records)


@attrs.frozen
class Fired:
    """What one emit did: the decision, and the records of the sync hooks it ran."""

    decision: Decision
    records: tuple[RunRecord, ...]

    def record_of(self, hook_id: str) -> RunRecord:
        for record in self.records:
            if record.hook_id == hook_id:
                return record
        raise AssertionError(f"hook {hook_id!r} did not fire; fired: {[r.hook_id for r in self.records]}")


@pytest.fixture
def hookbus_home(tmp_path: Path) -> TestHome:
    return TestHome(tmp_path / "hookbus-home")


@pytest.fixture
def hookbus_plugins() -> list[object]:
    """Override to register plugin objects in process: ``return [MyPlugin()]``."""
    return []


@pytest.fixture
def hookbus_capture() -> CaptureRecorder:
    return CaptureRecorder()


@pytest.fixture
def hookbus_bus(
    hookbus_home: TestHome, hookbus_plugins: list[object], hookbus_capture: CaptureRecorder
) -> Iterator[HookBus]:
    bus = HookBus(hookbus_home.root, plugins=[*hookbus_plugins, hookbus_capture])
    yield bus
    bus.close()


@pytest.fixture
def hookbus_fire(
    hookbus_bus: HookBus, hookbus_capture: CaptureRecorder
) -> Callable[..., Fired]:
    """``hookbus_fire(event, envelope=None)``: reload the home (so hooks written since are
    in), emit, and return the decision with the records of that emit's sync hooks."""

    def fire(event: str, envelope: Mapping[str, Any] | None = None) -> Fired:
        hookbus_bus.reload()
        before = len(hookbus_capture.records)
        decision = hookbus_bus.emit(event, envelope or {})
        records = tuple(r for r in hookbus_capture.records[before:] if r.mode == "sync")
        return Fired(decision, records)

    return fire
