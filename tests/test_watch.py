"""Hot reload with the real watcher: every change takes effect, nothing half-written loads."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import atomic_write, read_state, wait_until
from hookbus import HookBus

Maker = Callable[..., HookBus]
pytestmark = pytest.mark.timeout(60)


def spec(text: str, event: str = "Stop", **fields: Any) -> str:
    return json.dumps({"trigger": {"event": event}, "mode": "sync", "command": f"echo {text}", **fields})


def context_of(bus: HookBus, event: str = "Stop") -> str | None:
    return bus.emit(event, {}).context


@pytest.fixture
def watching(make_bus: Maker) -> HookBus:
    return make_bus(watch=True)


def remove_tree(directory: Path) -> None:
    """rm -r, as a user would retry it: the recorder may be writing state.json in there."""
    for _ in range(50):
        try:
            shutil.rmtree(directory)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
    shutil.rmtree(directory)


def hook_file(home: Path, hook_id: str) -> Path:
    directory = home / "hooks" / hook_id
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "hook.json"


def test_create_edit_toggle_delete_recreate(home: Path, watching: HookBus) -> None:
    bus = watching
    path = hook_file(home, "h")
    atomic_write(path, spec("one"))
    wait_until(bus, lambda: context_of(bus) == "one")
    atomic_write(path, spec("two"))
    wait_until(bus, lambda: context_of(bus) == "two")
    atomic_write(path, spec("two", enabled=False))
    wait_until(bus, lambda: not bus.snapshot.hooks["h"].spec.enabled)
    assert context_of(bus) is None
    atomic_write(path, spec("three"))
    wait_until(bus, lambda: context_of(bus) == "three")
    remove_tree(path.parent)
    wait_until(bus, lambda: "h" not in bus.snapshot.hooks)
    assert context_of(bus) is None
    assert bus.problems == ()
    atomic_write(hook_file(home, "h"), spec("again"))
    wait_until(bus, lambda: context_of(bus) == "again")


def test_plain_writes_and_deleting_only_the_spec(home: Path, watching: HookBus) -> None:
    """write_file-style writes (truncate + write in place) work too."""
    bus = watching
    path = hook_file(home, "p")
    path.write_text(spec("plain"))
    wait_until(bus, lambda: context_of(bus) == "plain")
    path.unlink()
    wait_until(bus, lambda: "p" not in bus.snapshot.hooks)


def test_editor_pattern_keeps_the_last_good_version(home: Path, watching: HookBus) -> None:
    """Truncate, write half, pause 300 ms, write the rest: the half never loads."""
    bus = watching
    path = hook_file(home, "e")
    atomic_write(path, spec("old"))
    wait_until(bus, lambda: context_of(bus) == "old")
    new = spec("new").encode()
    generation = bus.generation
    with open(path, "r+b") as handle:
        handle.truncate(0)
        handle.flush()
        handle.write(new[: len(new) // 2])
        handle.flush()
        os.fsync(handle.fileno())
        assert bus.wait_for_reload(generation, 5)
        wait_until(bus, lambda: any(p.hook_id == "e" for p in bus.problems))
        deadline = time.monotonic() + 0.3
        while time.monotonic() < deadline:  # the pause: the old version keeps firing
            assert context_of(bus) == "old"
        problem = next(p for p in bus.problems if p.hook_id == "e")
        assert problem.kept_last_good
        assert "invalid JSON" in problem.message
        handle.write(new[len(new) // 2 :])
    wait_until(bus, lambda: context_of(bus) == "new" and not bus.problems)


def test_a_broken_file_is_reported_everywhere_while_the_old_version_runs(
    home: Path, watching: HookBus
) -> None:
    bus = watching
    path = hook_file(home, "b")
    atomic_write(path, spec("good"))
    wait_until(bus, lambda: "b" in bus.snapshot.hooks)
    atomic_write(path, json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "comand": "x"}))
    wait_until(bus, lambda: bool(bus.problems))
    assert context_of(bus) == "good"
    messages = [str(p) for p in bus.problems]
    assert any("unknown field 'comand' (did you mean 'command'?)" in m for m in messages)
    bus.read_runs("b")  # flushes the recorder
    state = read_state(home, "b")
    assert "unknown field 'comand'" in state["load_error"]
    assert state["last_error"] == state["load_error"]
    atomic_write(path, spec("fixed"))
    wait_until(bus, lambda: context_of(bus) == "fixed")
    bus.read_runs("b")
    state = read_state(home, "b")
    assert "load_error" not in state
    assert state["last_error"] is None


def test_tmp_and_rename_and_ignored_names(home: Path, watching: HookBus) -> None:
    bus = watching
    generation = bus.generation
    directory = hook_file(home, "t").parent
    hidden = home / "hooks" / ".hidden"
    hidden.mkdir()
    assert bus.wait_for_reload(generation, 5)  # the new directory "t" is looked at
    generation = bus.generation
    for name in (".hook.json.swp", "hook.json~", "#hook.json#", "hook.json.tmp"):
        (directory / name).write_text(spec("ignored"))
    (hidden / "hook.json").write_text(spec("hidden"))
    assert not bus.wait_for_reload(generation, 0.5)  # none of those is a hook or its spec
    # Any other file in a hook's directory may be what its command runs: a change to one
    # (a chmod that lets others write it, say) reloads that hook.
    (directory / "script.sh").write_text("exit 0\n")
    assert bus.wait_for_reload(generation, 5)
    generation = bus.generation
    temp = directory / "hook.json.tmp"
    temp.write_text(spec("renamed"))
    os.rename(temp, directory / "hook.json")
    wait_until(bus, lambda: context_of(bus) == "renamed")
    assert set(bus.snapshot.hooks) == {"t"}


def test_a_burst_of_50_hooks(home: Path, watching: HookBus) -> None:
    bus = watching
    started = time.monotonic()
    for index in range(50):
        atomic_write(hook_file(home, f"burst{index:02d}"), spec(f"b{index}", event="PreToolUse"))
    assert time.monotonic() - started < 5
    wait_until(bus, lambda: len(bus.snapshot.hooks) == 50)
    decision = bus.emit("PreToolUse", {"tool_name": "x"})
    assert decision.context == "\n\n".join(f"b{index}" for index in range(50))


def test_renaming_a_hook_directory(home: Path, watching: HookBus) -> None:
    bus = watching
    atomic_write(hook_file(home, "before"), spec("moved"))
    wait_until(bus, lambda: "before" in bus.snapshot.hooks)
    os.rename(home / "hooks" / "before", home / "hooks" / "after")
    wait_until(bus, lambda: set(bus.snapshot.hooks) == {"after"})
    assert context_of(bus) == "moved"


def test_a_renamed_directory_with_an_explicit_id_is_reported(home: Path, watching: HookBus) -> None:
    bus = watching
    atomic_write(hook_file(home, "old"), spec("x", id="old"))
    wait_until(bus, lambda: "old" in bus.snapshot.hooks)
    os.rename(home / "hooks" / "old", home / "hooks" / "new")
    wait_until(bus, lambda: bool(bus.problems))
    assert set(bus.snapshot.hooks) == set()
    assert "id 'old' differs from its directory name 'new'" in str(bus.problems[0])


def test_only_changed_hooks_are_reparsed(home: Path, watching: HookBus) -> None:
    bus = watching
    for hook_id in ("a", "b", "c"):
        atomic_write(hook_file(home, hook_id), spec(hook_id))
    wait_until(bus, lambda: len(bus.snapshot.hooks) == 3)
    before = dict(bus.snapshot.hooks)
    atomic_write(hook_file(home, "b"), spec("b2"))
    wait_until(bus, lambda: bus.snapshot.hooks["b"] is not before["b"])
    after = bus.snapshot.hooks
    assert after["a"] is before["a"] and after["c"] is before["c"]


def test_an_emit_in_flight_keeps_its_snapshot(home: Path, watching: HookBus) -> None:
    bus = watching
    path = hook_file(home, "slow")
    path.parent.joinpath("go").write_text("")
    atomic_write(
        path,
        json.dumps(
            {
                "trigger": {"event": "Stop"},
                "mode": "sync",
                "command": 'while [ -e "$HOOKBUS_HOOK_DIR/go" ]; do sleep 0.01; done; echo v1',
            }
        ),
    )
    wait_until(bus, lambda: "slow" in bus.snapshot.hooks)
    old_snapshot = bus.snapshot
    result: list[str | None] = []
    emitter = threading.Thread(target=lambda: result.append(context_of(bus)))
    emitter.start()
    atomic_write(path, spec("v2"))
    wait_until(bus, lambda: bus.snapshot.hooks["slow"].options == "echo v2")
    (path.parent / "go").unlink()
    emitter.join(10)
    assert result == ["v1"]
    assert old_snapshot.hooks["slow"].options != "echo v2"  # snapshots never change
    assert context_of(bus) == "v2"


def test_settings_kill_switch_live(home: Path, watching: HookBus) -> None:
    bus = watching
    atomic_write(hook_file(home, "k"), spec("on"))
    wait_until(bus, lambda: context_of(bus) == "on")
    atomic_write(home / "settings.json", json.dumps({"features": {"hooks": False}}))
    wait_until(bus, lambda: not bus.snapshot.settings.hooks_enabled)
    assert context_of(bus) is None
    atomic_write(home / "settings.json", json.dumps({"features": {"hooks": True}}))
    wait_until(bus, lambda: context_of(bus) == "on")


@pytest.mark.parametrize("name", ["workflow.json", "workflow.yaml", "a-plugins-own.json"])
def test_a_change_in_config_reloads(home: Path, watching: HookBus, name: str) -> None:
    """config/ holds plugins' configuration (the workflow plugin's, a third party's): the
    watcher reloads on any file there, so each plugin's config_problems see the change."""
    bus = watching
    generation = bus.generation
    (home / "config").mkdir()
    atomic_write(home / "config" / name, "{}\n")
    assert bus.wait_for_reload(generation, 5)
    generation = bus.generation
    atomic_write(home / "config" / f".{name}.swp", "editor scratch")
    assert not bus.wait_for_reload(generation, 0.5)  # editor temporaries are not config
    (home / "config" / name).unlink()
    assert bus.wait_for_reload(generation, 5)  # a file that went away is a change too


def test_the_watcher_comes_back_after_dying(
    home: Path, watching: HookBus, caplog: pytest.LogCaptureFixture
) -> None:
    bus = watching
    watcher = bus._publisher.watcher
    assert watcher is not None and bus.watching
    watcher._stop.set()  # the thread ends as if it had died, without close() knowing
    assert watcher._thread is not None
    watcher._thread.join(5)
    assert not bus.watching
    atomic_write(hook_file(home, "late"), spec("still reloading"))
    with caplog.at_level(logging.ERROR, logger="hookbus"):
        wait_until(bus, lambda: context_of(bus) == "still reloading")
    assert watcher.restarts == 1
    assert "watcher thread died; restarting it" in caplog.text


def test_a_watcher_error_rescans_and_keeps_watching(
    home: Path, watching: HookBus, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import hookbus.watch

    bus = watching
    real = hookbus.watch.classify
    failures = [RuntimeError("injected")]

    def flaky(*args: Any) -> tuple[set[str], bool]:
        if failures:
            raise failures.pop()
        return real(*args)

    monkeypatch.setattr(hookbus.watch, "classify", flaky)
    with caplog.at_level(logging.ERROR, logger="hookbus"):
        atomic_write(hook_file(home, "first"), spec("seen by the rescan"))
        wait_until(bus, lambda: "first" in bus.snapshot.hooks)
        atomic_write(hook_file(home, "second"), spec("seen by the new watch"))
        wait_until(bus, lambda: "second" in bus.snapshot.hooks)
    assert "hookbus watcher error (injected); rescanning" in caplog.text


@pytest.mark.timeout(120)
def test_churn_while_emitting(home: Path, make_bus: Maker) -> None:
    """500 random rewrites, renames and deletes while 4 threads emit: no exception, every
    snapshot an emit could see is whole, and in the end the bus matches the disk."""
    bus = make_bus(watch=True)
    rng = random.Random(7)
    ids = [f"c{index}" for index in range(12)]
    stop = threading.Event()
    errors: list[str] = []
    emits = [0]

    def emitter() -> None:
        while not stop.is_set():
            snapshot = bus.snapshot
            indexed = {hook.id for index in snapshot.index.values() for hook in index.match_all}
            enabled = {i for i, hook in snapshot.hooks.items() if hook.spec.enabled}
            if indexed != enabled:
                errors.append(f"generation {snapshot.generation}: index {indexed} != hooks {enabled}")
            try:
                bus.emit("Stop", {})
                emits[0] += 1
            except Exception as exc:  # pragma: no cover - the assertion below reports it
                errors.append(repr(exc))

    threads = [threading.Thread(target=emitter) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for step in range(500):
            hook_id = rng.choice(ids)
            directory = home / "hooks" / hook_id
            action = rng.random()
            if action < 0.5 or not directory.exists():
                directory.mkdir(exist_ok=True)
                text = spec(f"{hook_id}-{step}", enabled=rng.random() > 0.2)
                if rng.random() < 0.5:
                    atomic_write(directory / "hook.json", text)
                else:
                    (directory / "hook.json").write_text(text)
            elif action < 0.75:
                target = home / "hooks" / rng.choice(ids)
                if not target.exists():
                    os.rename(directory, target)
            else:
                remove_tree(directory)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert emits[0] > 0

    def disk_state() -> dict[str, str]:
        with HookBus(home) as fresh:
            return {i: h.options for i, h in fresh.snapshot.hooks.items()}

    expected = disk_state()
    wait_until(bus, lambda: {i: h.options for i, h in bus.snapshot.hooks.items()} == expected, 20)
    assert bus.problems == ()


def test_hookbus_watch_prints_each_load_skip_and_error(home: Path) -> None:
    """The foreground debugging view: one line per load, reload, skip and error."""
    import queue
    import signal
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "watch", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None and process.stderr is not None
    reader = threading.Thread(target=lambda: [lines.put(line) for line in process.stdout])  # type: ignore[union-attr]
    reader.start()

    def next_line_with(text: str) -> str:
        deadline = time.monotonic() + 15
        while True:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if text in line:
                return line

    try:
        assert f"watching {home} (" in next_line_with("Ctrl-C to stop")
        atomic_write(hook_file(home, "w"), spec("hi"))
        assert "loaded hooks/w: Stop sync, command" in next_line_with("hooks/w")
        atomic_write(hook_file(home, "w"), "{oops")
        assert "(its last good version stays in effect)" in next_line_with("kept hooks/w/hook.json")
        atomic_write(hook_file(home, "w"), spec("again"))
        next_line_with("loaded hooks/w")
        atomic_write(hook_file(home, "bad"), json.dumps({"trigger": {"event": "Nope"}, "command": "x"}))
        assert "unknown event 'Nope'" in next_line_with("skipped hooks/bad/hook.json")
        remove_tree(home / "hooks" / "w")
        next_line_with("removed hooks/w")
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        reader.join(5)
        process.stdout.close()
        stderr = process.stderr.read()
        process.stderr.close()
    assert "Traceback" not in stderr


def test_a_file_made_in_the_home_reloads_nothing(home: Path, watching: HookBus) -> None:
    """The home's owner and mode are watched (who may write it decides what is obeyed), not
    its times: a hook appending to ~/.vix/subagents.log, as the spec's example does, or a
    log directory being made, is no reason to reload every hook."""
    bus = watching
    generation = bus.generation
    (home / "subagents.log").write_text("reviewer finished\n")
    (home / "notes").mkdir()
    assert not bus.wait_for_reload(generation, 0.6)
    home.chmod(0o775)  # but this is: nothing in the home may be obeyed now
    assert bus.wait_for_reload(generation, 5)
    assert any(str(home) in str(problem) for problem in bus.problems)
