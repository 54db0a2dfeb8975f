"""hookbus-sqlite, driven through real HookBus instances running real command hooks, the
real `hookbus` command line, several threads and several processes.

Records are written by a background thread: a test closes the bus (or flushes) before it
reads the database.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import hookbus_sqlite
from hookbus import HookBus, RunRecord, hookimpl
from hookbus.merge import NOT_BLOCKING_NOTE
from hookbus.prompts import PromptRequest, PromptResult
from hookbus.testing import CaptureRecorder, TestHome
from hookbus_sqlite import SCHEMA, SCHEMA_VERSION, database_path, insert, load_errors, query

CLI = [sys.executable, "-m", "hookbus"]
COLUMNS = ["id", "at", "hook_id", "event", "mode", "status", "duration", "error",
           "thread_id", "decision", "note", "manual", "tool_name", "shadow", "enforced", "tier"]

# Decides by tool_input.n (the envelope is compact JSON on stdin): every sync status.
DECIDE_BY_N = r"""#!/usr/bin/env bash
n=$(sed -n 's/.*"n":\([0-9]*\).*/\1/p')
case $((n % 6)) in
  0) exit 0 ;;
  1) echo "no $n" >&2; exit 2 ;;
  2) echo "note $n" ;;
  3) printf '{"behavior": "modify", "input": {"n": %s, "safe": true}}\n' "$n" ;;
  4) echo '{"behavior": "allow"}' ;;
  5) echo "broke $n" >&2; exit 3 ;;
esac
"""
# Says "<who>:<n>" as context, so every fire of a stress test is told apart.
ECHO_WHO_N = r"""sed -n 's/.*"n":\([0-9]*\),"who":"\([^"]*\)".*/\2:\1/p'"""


# -- helpers --------------------------------------------------------------------------


@pytest.fixture
def home(hookbus_home: TestHome) -> TestHome:
    """A home whose settings select the sqlite recorder alone."""
    hookbus_home.write_settings({"recorder": "sqlite"})
    return hookbus_home


@pytest.fixture
def make_bus(hookbus_home: TestHome) -> Iterator[Callable[..., HookBus]]:
    """``make_bus(*plugins, root=None)``: a HookBus, closed at teardown."""
    buses: list[HookBus] = []

    def make(*plugins: object, root: Path | None = None) -> HookBus:
        bus = HookBus(root or hookbus_home.root, plugins=list(plugins))
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


def db_of(home: TestHome) -> Path:
    return home.root / "logs" / "hooks.sqlite3"


def env_for(tmp_path: Path) -> dict[str, str]:
    """The environment of a child: no other home, every plugin allowed, HOME of its own."""
    env = {
        key: value for key, value in os.environ.items()
        if key not in ("VIX_HOME", "VIX_DISABLE_HOOKS", "HOOKBUS_DISABLE_PLUGINS", "HOOKBUS_LOAD_PLUGINS")
    }
    user_home = tmp_path / "user-home"
    user_home.mkdir(exist_ok=True)
    env["HOME"] = str(user_home)
    return env


def run_cli(tmp_path: Path, home: TestHome, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--home", str(home.root)],
        input=stdin, capture_output=True, text=True, env=env_for(tmp_path), timeout=60,
    )


def write_decider(home: TestHome, hook_id: str = "decider") -> None:
    home.write_hook(
        hook_id, mode="sync", blocking=True, matcher="write_file",
        command='"$HOOKBUS_HOOK_DIR/decide.sh"', files={"decide.sh": DECIDE_BY_N},
    )


def builtin_files(home: TestHome) -> list[Path]:
    """What the built-in recorder writes: the JSONL log and each hook's state.json."""
    return sorted(home.root.glob("logs/hooks/*.jsonl")) + sorted(home.root.glob("hooks/*/state.json"))


def open_descriptors(path: Path) -> list[str]:
    """The descriptors of this process open on ``path`` or its -wal/-shm files."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def row_count(path: Path) -> int:
    with closing(sqlite3.connect(path)) as connection:
        count: int = connection.execute("SELECT count(*) FROM runs").fetchone()[0]
        return count


def by_content(records: list[RunRecord]) -> list[RunRecord]:
    return sorted(records, key=repr)


def sqlite_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records
        if r.name == "hookbus" and r.levelno >= logging.ERROR and "sqlite" in r.getMessage()
    ]


class Embedder:
    """The daemon's prompt runner: answers in a thread of its own, whose id is recorded."""

    @hookimpl
    def hookbus_run_prompt(self, request: PromptRequest) -> PromptResult:
        return PromptResult("", thread_id=f"thread-of-{request.hook_id}")


def record(at: str, hook_id: str, status: str, event: str = "PreToolUse", **fields: Any) -> RunRecord:
    mode = "async" if status in ("done", "error") else "sync"
    return RunRecord(at=at, hook_id=hook_id, event=event, mode=mode, status=status,  # type: ignore[arg-type]
                     duration=0.25, **fields)


# -- recording through a real bus -----------------------------------------------------


@pytest.mark.timeout(60)
def test_real_hooks_land_in_the_database_with_every_field(
    home: TestHome, make_bus: Callable[..., HookBus], hookbus_capture: CaptureRecorder
) -> None:
    write_decider(home)
    home.write_hook("advisor", mode="sync", matcher="write_file",
                    command='echo \'{"behavior": "deny", "reason": "careful"}\'')
    home.write_hook("notifier", event="PostToolUse", command="exit 0")
    home.write_hook("failing", event="PostToolUse", command="echo down >&2; exit 1")
    home.write_hook("thinker", event="Stop", mode="async", prompt="Summarise the turn.")
    bus = make_bus(hookbus_capture, Embedder())
    assert bus.active_recorders[0] == "sqlite" and "recorder" not in bus.active_recorders

    for n in range(6):
        bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": n}})
    bus.emit("PostToolUse", {"tool_name": "write_file"})
    bus.emit("Stop", {})
    manual = bus.trigger("notifier", {"why": "by hand"})
    hookbus_capture.wait_for(6 * 2 + 2 + 1 + 1)
    bus.close()

    db = db_of(home)
    stored = query(db)
    # The same records the bus handed to every recorder, every field, exactly.
    assert by_content(stored) == by_content(hookbus_capture.records)
    assert len(stored) == 16
    assert [r.at for r in stored] == sorted(r.at for r in stored)

    decider = {r.decision.get("reason") or r.decision.get("context") or r.error or json.dumps(r.decision): r
               for r in query(db, hook_id="decider") if r.decision is not None}
    assert decider["no 1"].status == "deny"
    assert decider["note 2"].status == "context"
    assert query(db, hook_id="decider", status="modify")[0].decision == {
        "behavior": "modify", "input": {"n": 3, "safe": True}}
    assert decider["exited with status 3: broke 5"].status == "allow"
    advisor = query(db, hook_id="advisor")
    assert len(advisor) == 6 and {r.note for r in advisor} == {NOT_BLOCKING_NOTE}
    assert {r.status for r in query(db, event="PostToolUse")} == {"done", "error"}
    failing = query(db, hook_id="failing", status="error")
    assert failing[0].error is not None and "down" in failing[0].error and failing[0].mode == "async"
    thinker = query(db, hook_id="thinker")
    assert [(r.thread_id, r.status, r.mode) for r in thinker] == [("thread-of-thinker", "done", "async")]
    manuals = [r for r in stored if r.manual]
    assert manuals == [manual]
    assert all(r.duration > 0 for r in stored)
    assert {r.tier for r in stored} == {"user"}  # every hook here is the home's

    with closing(sqlite3.connect(db)) as connection:
        assert [row[1] for row in connection.execute("PRAGMA table_info(runs)")] == COLUMNS
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        raw = connection.execute(
            "SELECT decision, manual, typeof(duration) FROM runs WHERE manual = 1"
        ).fetchall()
        assert raw == [(json.dumps(manual.decision, separators=(",", ":")), 1, "real")]
        assert connection.execute(
            "SELECT count(*) FROM runs WHERE json_extract(decision, '$.behavior') = 'deny'"
        ).fetchone()[0] == 7  # the decider once, the advisor six times
        assert connection.execute("SELECT DISTINCT tier FROM runs").fetchall() == [("user",)]
    # The built-in recorder was swapped out: no state.json, no JSONL log.
    assert builtin_files(home) == []
    # Every connection of the recorder is closed: the WAL was checkpointed away.
    assert open_descriptors(db) == []
    assert not Path(f"{db}-wal").exists()


@pytest.mark.timeout(60)
def test_read_runs_answers_from_the_database(home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    write_decider(home)
    home.write_hook("other", mode="sync", command="echo hi")
    bus = make_bus()
    assert bus.read_runs() == []
    assert not db_of(home).exists()  # reading never creates the database
    for n in range(8):
        bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": n}})
    runs = bus.read_runs("decider", 3)  # flushes the writer first
    assert [r.decision for r in runs] == [
        {"behavior": "allow"},  # n=5: broke, fails open
        {"behavior": "allow"},  # n=6
        {"behavior": "deny", "reason": "no 7"},
    ]
    assert len(bus.read_runs("decider")) == 8
    assert len(bus.read_runs()) == 16
    assert {r.hook_id for r in bus.read_runs("other")} == {"other"}
    assert bus.read_runs("decider", 0) == []
    assert builtin_files(home) == []


@pytest.mark.timeout(60)
def test_both_recorders_when_settings_list_them(
    hookbus_home: TestHome, make_bus: Callable[..., HookBus]
) -> None:
    hookbus_home.write_settings({"recorder": ["recorder", "sqlite"]})
    write_decider(hookbus_home)
    bus = make_bus()
    assert bus.active_recorders == ("recorder", "sqlite")
    for n in range(4):
        bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": n}})
    bus.close()

    logged = [json.loads(line) for path in sorted((hookbus_home.root / "logs" / "hooks").glob("*.jsonl"))
              for line in path.read_text().splitlines()]
    assert logged == [r.log_entry() for r in query(db_of(hookbus_home))]
    assert len(logged) == 4
    state = json.loads((hookbus_home.root / "hooks" / "decider" / "state.json").read_text())
    assert len(state["recent_runs"]) == 4


@pytest.mark.timeout(60)
def test_sqlite_first_answers_read_runs_and_the_builtin_is_not_selected_by_default(
    hookbus_home: TestHome, make_bus: Callable[..., HookBus]
) -> None:
    write_decider(hookbus_home)
    default = make_bus()
    assert "sqlite" not in default.active_recorders
    default.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 1}})
    default.close()
    assert not db_of(hookbus_home).exists()  # installed but not selected: it writes nothing

    hookbus_home.write_settings({"recorder": ["sqlite", "recorder"]})
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 2}})
    bus.close()
    for path in (hookbus_home.root / "logs" / "hooks").glob("*.jsonl"):
        path.unlink()
    reader = make_bus()
    assert [r.decision for r in reader.read_runs("decider")] == [{"behavior": "context", "context": "note 2"}]


@pytest.mark.timeout(60)
def test_load_errors_are_kept_in_the_database_not_state_json(
    home: TestHome, make_bus: Callable[..., HookBus]
) -> None:
    home.write_hook("good", command="exit 0")
    home.write_hook("typo", command="exit 0", blockng=True)
    bus = make_bus()
    bus.close()
    db = db_of(home)
    assert list(load_errors(db)) == ["typo"]
    assert "blockng" in load_errors(db)["typo"]

    home.write_hook("typo", command="exit 0")
    bus = make_bus()
    bus.close()
    assert load_errors(db) == {}
    assert builtin_files(home) == []


@pytest.mark.timeout(60)
def test_a_fresh_home_without_errors_creates_no_database(home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    home.write_hook("good", command="exit 0")
    make_bus().close()
    assert not db_of(home).exists()


# -- the settings -----------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_the_path_setting_moves_the_database(hookbus_home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    hookbus_home.write_settings({"recorder": "sqlite", "sqlite_recorder": {"path": "audit/runs.db"}})
    write_decider(hookbus_home)
    bus = make_bus()
    assert bus.problems == ()
    bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 1}})
    bus.close()
    moved = hookbus_home.root / "audit" / "runs.db"
    assert [r.status for r in query(moved)] == ["deny"]
    assert not db_of(hookbus_home).exists()
    assert database_path(hookbus_home.root, {"sqlite_recorder": {"path": "/abs/x.db"}}) == Path("/abs/x.db")


@pytest.mark.timeout(60)
def test_a_bad_setting_is_a_problem_and_the_default_path_is_used(
    hookbus_home: TestHome, make_bus: Callable[..., HookBus], tmp_path: Path
) -> None:
    hookbus_home.write_settings({"recorder": "sqlite", "sqlite_recorder": {"pth": "x.db", "path": 7}})
    write_decider(hookbus_home)
    bus = make_bus()
    assert [str(p) for p in bus.problems] == [
        "settings.json: unknown key 'pth' (did you mean 'path'?) @ $.sqlite_recorder",
        "settings.json: expected a file path (relative to the home); recording in "
        "logs/hooks.sqlite3 @ $.sqlite_recorder.path",
    ]
    bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 1}})
    bus.close()
    assert row_count(db_of(hookbus_home)) == 1
    validate = run_cli(tmp_path, hookbus_home, "validate")
    assert validate.returncode == 1
    assert "unknown key 'pth'" in validate.stdout


# -- query ------------------------------------------------------------------------------

R1 = record("2026-01-01T00:00:00.000Z", "a", "deny", decision={"behavior": "deny", "reason": "no"})
R2 = record("2026-01-01T12:00:00.500Z", "b", "done", event="PostToolUse", thread_id="t-9", manual=True)
R3 = record("2026-01-02T00:00:00.000Z", "a", "allow", decision={"behavior": "allow"})
R4 = record("2026-01-02T00:00:00.000Z", "a", "context", note="superseded",
            decision={"behavior": "context", "context": "ünïcode ✓"})
R5 = record("2026-01-03T08:30:00.123Z", "c", "error", event="Stop", error="timed out after 5s")


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    db = tmp_path / "deep" / "runs.sqlite3"
    assert insert(db, [R5, R1, R3, R4, R2]) == 5  # out of order: query sorts by at
    return db


def test_a_record_with_nan_or_a_lone_surrogate_is_stored_with_its_batch(tmp_path: Path) -> None:
    """A third-party runner's decision may hold NaN, an error a file name with undecodable
    bytes: each is stored as strict JSON / UTF-8 text, and the rest of the batch with it."""
    db = tmp_path / "runs.sqlite3"
    odd = record("2026-01-01T00:00:00.000Z", "odd", "allow", error="cannot run in /w/caf\udce9",
                 decision={"behavior": "modify", "input": {"score": float("nan")}})
    assert insert(db, [odd, R1]) == 2
    stored, plain = query(db)
    assert plain == R1
    assert stored.error == "cannot run in /w/caf\\udce9"
    assert stored.decision == {"behavior": "modify", "input": {"score": "nan"}}
    with closing(sqlite3.connect(db)) as connection:
        [(score,)] = connection.execute("SELECT json_extract(decision, '$.input.score') FROM runs WHERE hook_id = 'odd'")
    assert score == "nan"


def test_query_orders_by_time_then_by_write_order(filled: Path) -> None:
    assert query(filled) == [R1, R2, R3, R4, R5]
    assert open_descriptors(filled) == []


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"hook_id": "a"}, [R1, R3, R4]),
        ({"hook_id": ["b", "c"]}, [R2, R5]),
        ({"hook_id": "nobody"}, []),
        ({"status": "deny"}, [R1]),
        ({"status": ("deny", "error")}, [R1, R5]),
        ({"status": []}, []),
        ({"event": "Stop"}, [R5]),
        ({"event": "PreToolUse", "status": "allow"}, [R3]),
        ({"since": "2026-01-02"}, [R3, R4, R5]),  # inclusive, midnight UTC
        ({"until": "2026-01-02"}, [R1, R2]),  # exclusive
        ({"since": "2026-01-01T12:00:00Z"}, [R2, R3, R4, R5]),  # .500 is after :00
        ({"since": "2026-01-01T12:00:00.501Z"}, [R3, R4, R5]),
        ({"since": "2026-01-01T13:00:00.5+01:00"}, [R2, R3, R4, R5]),  # the offset counts
        ({"since": "2026-01-01T12:00:00.5-00:30"}, [R3, R4, R5]),
        ({"since": "2026-01-01 12:00:00.500000"}, [R2, R3, R4, R5]),  # no offset: UTC
        ({"until": "2026-01-03T08:30:00.123Z"}, [R1, R2, R3, R4]),
        ({"since": datetime(2026, 1, 2, tzinfo=timezone.utc),
          "until": datetime(2026, 1, 3, 9, 31, tzinfo=timezone(timedelta(hours=1)))}, [R3, R4, R5]),
        ({"hook_id": "a", "since": "2026-01-01T00:00:00.001Z", "until": "2026-01-03"}, [R3, R4]),
        ({"limit": 2}, [R4, R5]),  # the most recent two, oldest first
        ({"hook_id": "a", "limit": 1}, [R4]),
        ({"status": "deny", "limit": 5}, [R1]),
        ({"limit": 0}, []),
    ],
)
def test_query_filters(filled: Path, filters: dict[str, Any], expected: list[RunRecord]) -> None:
    assert query(filled, **filters) == expected


@pytest.mark.parametrize(
    "filters",
    [{"since": "yesterday"}, {"until": "2026-13-01"}, {"since": "2026-01-01T25:00Z"},
     {"limit": -1}, {"status": [1]}],
)
def test_query_refuses_bad_arguments(filled: Path, filters: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        query(filled, **filters)


def test_query_of_a_missing_database_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        query(tmp_path / "nothing.sqlite3")
    assert list(tmp_path.iterdir()) == []


def test_the_filters_use_the_indexes(filled: Path) -> None:
    with closing(sqlite3.connect(filled)) as connection:
        def plan(where: str) -> str:
            rows = connection.execute(f"EXPLAIN QUERY PLAN SELECT * FROM runs WHERE {where} ORDER BY at")
            return " ".join(str(row[-1]) for row in rows)

        assert "runs_hook_at" in plan("hook_id = 'a'")
        assert "runs_status_at" in plan("status = 'deny'")
        assert "runs_event_at" in plan("event = 'Stop'")
        assert "runs_at" in plan("at >= '2026-01-02'")


# -- the command line -------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_hookbus_log_and_list_show_the_records_from_sqlite(home: TestHome, tmp_path: Path) -> None:
    home.write_hook("guard", mode="sync", blocking=True, matcher="write_file",
                    command="echo 'protected path' >&2; exit 2")
    home.write_hook("quiet", mode="sync", command="exit 0")
    home.write_hook("unused", event="Stop", command="exit 0")
    for _ in range(3):
        emitted = run_cli(tmp_path, home, "emit", "PreToolUse",
                          stdin='{"tool_name": "write_file", "tool_input": {"path": ".env"}}')
        assert emitted.returncode == 2, emitted.stderr
    assert builtin_files(home) == []
    stored = query(db_of(home), hook_id="guard")
    assert len(stored) == 3

    log = run_cli(tmp_path, home, "log", "--hook", "guard")
    assert log.returncode == 0, log.stderr
    header, *lines = log.stdout.splitlines()
    assert header.split()[:3] == ["AT", "EVENT", "HOOK"]
    assert len(lines) == 3
    for line, run in zip(lines, stored):
        assert line.startswith(f"{run.at}  PreToolUse")
        assert "guard" in line and "deny" in line and "protected path" in line
    assert "quiet" not in log.stdout

    as_json = run_cli(tmp_path, home, "log", "--hook", "guard", "--limit", "2", "--json")
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [r.log_entry() for r in stored[-2:]]
    everything = run_cli(tmp_path, home, "log")
    assert len(everything.stdout.splitlines()) == 1 + 6  # the header, then each fire

    listing = run_cli(tmp_path, home, "list")
    assert listing.returncode == 0, listing.stderr
    rows = {line.split()[0]: line for line in listing.stdout.splitlines()[1:] if line.strip()}
    assert rows["guard"].endswith(f"deny {stored[-1].at}")
    last_quiet = query(db_of(home), hook_id="quiet", limit=1)[0]
    assert rows["quiet"].endswith(f"allow {last_quiet.at}")
    assert rows["unused"].endswith("never")
    assert builtin_files(home) == []


# `hookbus log --follow` stops on Ctrl-C. A shell running the tests in the background
# starts them with SIGINT ignored, which children inherit: give the CLI Ctrl-C back.
FOLLOW = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from hookbus.cli.verbs import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.timeout(60)
def test_hookbus_log_follow_prints_new_fires_from_sqlite(
    home: TestHome, make_bus: Callable[..., HookBus], tmp_path: Path
) -> None:
    home.write_hook("guard", mode="sync", blocking=True, command="echo nope >&2; exit 2")
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "x"})
    bus.read_runs()  # flushed: the history the follower prints first
    follower = subprocess.Popen(
        [sys.executable, "-c", FOLLOW, "log", "--follow", "--json", "--home", str(home.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(tmp_path),
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in follower.stdout or ():
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        first = json.loads(lines.get(timeout=20))
        bus.emit("PreToolUse", {"tool_name": "x"})
        second = json.loads(lines.get(timeout=20))
        follower.send_signal(signal.SIGINT)
        _, stderr = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate()
        reader.join(20)
    assert follower.returncode == 0, stderr
    assert [first, second] == [r.log_entry() for r in bus.read_runs("guard")]
    assert builtin_files(home) == []


@pytest.mark.timeout(60)
def test_hookbus_plugins_lists_sqlite(hookbus_home: TestHome, tmp_path: Path) -> None:
    def sqlite_row(output: str) -> list[str]:
        rows = [line for line in output.splitlines() if line.startswith("sqlite ")]
        assert len(rows) == 1, output
        return [cell.strip() for cell in rows[0].split("  ") if cell.strip()]

    listed = run_cli(tmp_path, hookbus_home, "plugins")
    assert listed.returncode == 0, listed.stderr
    name, distribution, version, status, provides = sqlite_row(listed.stdout)
    assert (name, distribution, version) == ("sqlite", "hookbus-sqlite", "0.1.0")
    assert status.startswith("loaded (recorder not selected")
    assert provides.startswith("recorder, run reader")

    hookbus_home.write_settings({"recorder": "sqlite"})
    selected = run_cli(tmp_path, hookbus_home, "plugins")
    assert sqlite_row(selected.stdout)[3] == "loaded"
    assert "recording with: sqlite" in selected.stdout


# -- concurrency ------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_eight_threads_emitting_200_times_each_give_1600_rows(
    home: TestHome, make_bus: Callable[..., HookBus], caplog: pytest.LogCaptureFixture
) -> None:
    home.write_hook("echo", mode="sync", command=ECHO_WHO_N)
    bus = make_bus()
    failures: list[BaseException] = []
    start = threading.Barrier(8)

    def emitter(who: int) -> None:
        try:
            start.wait()
            for n in range(200):
                decision = bus.emit("PreToolUse", {"tool_name": "x", "tool_input": {"n": n, "who": f"t{who}"}})
                assert decision.context == f"t{who}:{n}"
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=emitter, args=(who,)) for who in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    bus.close()

    db = db_of(home)
    assert row_count(db) == 1600
    contexts = [r.decision["context"] for r in query(db) if r.decision]
    assert sorted(contexts) == sorted(f"t{who}:{n}" for who in range(8) for n in range(200))
    assert sqlite_errors(caplog) == []
    assert open_descriptors(db) == []


CHILD = r"""
import logging, os, sys, time
logging.basicConfig(level=logging.WARNING, format="child: %(message)s")
from hookbus import HookBus
home, ready, go, who = sys.argv[1:5]
with HookBus(home) as bus:
    open(ready, "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit("never told to go")
        time.sleep(0.002)
    for n in range(100):
        decision = bus.emit("PreToolUse", {"tool_name": "x", "tool_input": {"n": n, "who": who}})
        assert decision.context == f"{who}:{n}", decision
"""


def run_together(tmp_path: Path, script: str, args: Callable[[int, Path, Path], list[str]], count: int = 4) -> list[subprocess.CompletedProcess[str]]:
    """Start ``count`` ``python -c script`` processes, let them all get ready, then let
    them go at once; their results."""
    go = tmp_path / "go"
    readies = [tmp_path / f"ready-{who}" for who in range(count)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, *args(who, readies[who], go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(tmp_path),
        )
        for who in range(count)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all(path.exists() for path in readies) and time.monotonic() < deadline:
            if any(child.poll() is not None for child in children):
                break
            time.sleep(0.01)
        go.touch()
        results = []
        for child in children:
            stdout, stderr = child.communicate(timeout=120)
            results.append(subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr))
        return results
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()


@pytest.mark.timeout(300)
def test_four_processes_emitting_at_once_give_400_rows(home: TestHome, tmp_path: Path) -> None:
    home.write_hook("echo", mode="sync", command=ECHO_WHO_N)
    db = db_of(home)
    assert not db.exists()  # they race to create it, too
    results = run_together(
        tmp_path, CHILD, lambda who, ready, go: [str(home.root), str(ready), str(go), f"p{who}"]
    )
    for result in results:
        assert result.returncode == 0, result.stderr
        assert "locked" not in result.stderr
        assert result.stderr == ""
    assert row_count(db) == 400
    contexts = [r.decision["context"] for r in query(db) if r.decision]
    assert sorted(contexts) == sorted(f"p{who}:{n}" for who in range(4) for n in range(100))
    assert builtin_files(home) == []


INSERTER = r"""
import os, sys, time
from hookbus import RunRecord
from hookbus_sqlite import insert
db, ready, go, who = sys.argv[1:5]
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
for n in range(150):  # one transaction each: the harshest way to share the file
    insert(db, [RunRecord(at="2026-01-01T00:00:00.000Z", hook_id=who, event="Stop",
                          mode="async", status="done", duration=n / 1000)])
"""


@pytest.mark.timeout(300)
def test_many_small_transactions_from_four_processes_on_a_new_database(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "runs.sqlite3"
    results = run_together(tmp_path, INSERTER, lambda who, ready, go: [str(db), str(ready), str(go), f"p{who}"])
    for result in results:
        assert result.returncode == 0, result.stderr
    assert row_count(db) == 600
    for who in range(4):
        assert len(query(db, hook_id=f"p{who}")) == 150


@pytest.mark.timeout(60)
def test_emit_does_not_wait_for_a_locked_database(
    home: TestHome, make_bus: Callable[..., HookBus], caplog: pytest.LogCaptureFixture
) -> None:
    home.write_hook("quiet", mode="sync", command="exit 0")
    db = db_of(home)
    insert(db, [])
    hold = 3.0
    with closing(sqlite3.connect(db, isolation_level=None)) as locker:
        locker.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        locked_at = time.monotonic()
        bus = make_bus()
        for _ in range(5):
            bus.emit("PreToolUse", {"tool_name": "x"})
        emitting = time.monotonic() - locked_at
        assert emitting < hold / 2, f"5 emits took {emitting:.2f}s behind a locked database"
        assert query(db) == []  # the writer is still waiting for the lock
        time.sleep(max(0.0, hold - (time.monotonic() - locked_at)))
        locker.execute("COMMIT")
    bus.close()
    assert row_count(db) == 5
    assert sqlite_errors(caplog) == []


@pytest.mark.timeout(60)
def test_a_closed_bus_closes_its_connection_while_another_bus_records(
    home: TestHome, make_bus: Callable[..., HookBus], tmp_path: Path
) -> None:
    home.write_hook("quiet", mode="sync", command="exit 0")
    other = TestHome(tmp_path / "other-home")
    other.write_settings({"recorder": "sqlite"})
    other.write_hook("quiet", mode="sync", command="exit 0")
    first, second = make_bus(), make_bus(root=other.root)
    first.emit("PreToolUse", {"tool_name": "x"})
    second.emit("PreToolUse", {"tool_name": "x"})
    first.close()
    assert open_descriptors(db_of(home)) == []
    second.emit("PreToolUse", {"tool_name": "x"})
    second.close()
    assert open_descriptors(db_of(other)) == []
    assert (row_count(db_of(home)), row_count(db_of(other))) == (1, 2)


# -- failures ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("broken", ["garbage", "under-a-file"])
def test_a_database_error_never_reaches_emit_and_is_logged_once(
    hookbus_home: TestHome, make_bus: Callable[..., HookBus], caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    if broken == "garbage":
        target = hookbus_home.root / "broken.sqlite3"
        target.write_bytes(b"this is not a database\n" * 200)
    else:
        (hookbus_home.root / "a-file").write_text("")
        target = hookbus_home.root / "a-file" / "runs.sqlite3"
    hookbus_home.write_settings({"recorder": "sqlite", "sqlite_recorder": {"path": str(target.relative_to(hookbus_home.root))}})
    hookbus_home.write_hook("guard", mode="sync", blocking=True, command="echo no >&2; exit 2")
    bus = make_bus()
    for _ in range(3):
        assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "deny"
        assert hookbus_sqlite.writer.flush(10)
    errors = sqlite_errors(caplog)
    assert len(errors) == 1, errors
    assert f"writing {target} failed" in errors[0]
    assert ("not a database" if broken == "garbage" else "FileExistsError") in errors[0]
    assert bus.read_runs("guard") == []  # a garbage file fails the read too: logged once
    assert len(sqlite_errors(caplog)) == (2 if broken == "garbage" else 1)

    if broken == "garbage":
        target.unlink()
    else:
        (hookbus_home.root / "a-file").unlink()
    caplog.clear()
    bus.emit("PreToolUse", {"tool_name": "x"})
    assert [r.status for r in bus.read_runs("guard")] == ["deny"]
    assert any("recovered" in r.getMessage() for r in caplog.records)
    bus.close()
    assert sqlite_errors(caplog) == []


NEVER_CLOSED = r"""
import sys
from hookbus import HookBus
bus = HookBus(sys.argv[1])
for n in range(20):
    bus.emit("PreToolUse", {"tool_name": "x"})
print("emitted", flush=True)
"""  # and exits without closing the bus


@pytest.mark.timeout(60)
def test_records_of_a_bus_never_closed_are_flushed_at_exit(home: TestHome, tmp_path: Path) -> None:
    home.write_hook("quiet", mode="sync", command="exit 0")
    db = db_of(home)
    insert(db, [])
    with closing(sqlite3.connect(db, isolation_level=None)) as locker:
        locker.execute("BEGIN IMMEDIATE")  # the child's writer waits for this lock
        child = subprocess.Popen(
            [sys.executable, "-c", NEVER_CLOSED, str(home.root)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_for(tmp_path),
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "emitted\n"
            time.sleep(0.3)  # the child is exiting now, with 20 records still queued
            locker.execute("COMMIT")
            _, stderr = child.communicate(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
                child.communicate()
    assert child.returncode == 0, stderr
    assert row_count(db) == 20


# -- hookbus itself -----------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_recorder_selected_by_a_reload_hears_of_hooks_already_broken(
    hookbus_home: TestHome, make_bus: Callable[..., HookBus]
) -> None:
    hookbus_home.write_hook("typo", command="exit 0", blockng=True)
    bus = make_bus()
    assert "sqlite" not in bus.active_recorders
    hookbus_home.write_settings({"recorder": "sqlite"})
    bus.reload()
    assert bus.active_recorders == ("sqlite",)
    bus.close()
    db = db_of(hookbus_home)
    assert db.exists() and "typo" in load_errors(db)


@pytest.mark.timeout(60)
def test_a_database_of_schema_1_is_read_and_then_given_tool_name(tmp_path: Path) -> None:
    """Version 2 added ``runs.tool_name``: a version 1 database is read as it is (no tool
    names), and the first writer adds the column."""
    db = tmp_path / "old.sqlite3"
    old_schema = SCHEMA.replace(
        "manual    INTEGER NOT NULL DEFAULT 0,  -- 1 for bus.trigger / hookbus trigger\n"
        "    tool_name TEXT,              -- the envelope's tool_name, when it had one\n"
        "    shadow    INTEGER NOT NULL DEFAULT 0,  -- 1 for a shadow hook's fire (not in the merge)\n"
        "    enforced  TEXT,              -- a shadow fire: the behavior the enforcing hooks decided\n"
        "    tier      TEXT    NOT NULL DEFAULT 'user'  -- whose hook: 'user' | 'managed' | 'builtin'\n",
        "manual    INTEGER NOT NULL DEFAULT 0\n",
    )
    assert "tool_name" not in old_schema and "tier" not in old_schema
    with closing(sqlite3.connect(db)) as connection:
        connection.executescript(old_schema)
        connection.execute(
            "INSERT INTO runs (at, hook_id, event, mode, status, duration) VALUES "
            "('2026-11-29T18:00:00.000Z', 'old', 'Stop', 'sync', 'allow', 0.5)"
        )
        connection.execute("PRAGMA user_version = 1")
        connection.commit()

    [old] = query(db)
    assert (old.hook_id, old.tool_name, old.tier) == ("old", None, "user")
    new = RunRecord(at="2026-11-30T18:00:00.000Z", hook_id="new", event="PreToolUse", mode="sync",
                    status="deny", duration=0.1, tool_name="bash")
    insert(db, [new])
    assert [(r.hook_id, r.tool_name, r.tier) for r in query(db)] == [("old", None, "user"), ("new", "bash", "user")]
    with closing(sqlite3.connect(db)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        assert [row[1] for row in connection.execute("PRAGMA table_info(runs)")] == COLUMNS


# -- tiers (schema 4) -----------------------------------------------------------------------

#: The runs table as version 3 made it: the current schema without its tier column.
V3_SCHEMA = SCHEMA.replace(
    "    enforced  TEXT,              -- a shadow fire: the behavior the enforcing hooks decided\n"
    "    tier      TEXT    NOT NULL DEFAULT 'user'  -- whose hook: 'user' | 'managed' | 'builtin'\n",
    "    enforced  TEXT               -- a shadow fire: the behavior the enforcing hooks decided\n",
)
GUARDED_WRITE = "hookbus:protect_home"


def test_each_tier_round_trips_and_the_jsonl_form_agrees(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite3"
    managed = record("2026-01-01T00:00:00.000Z", "org-guard", "deny", tier="managed",
                     decision={"behavior": "deny", "reason": "the organization says no"})
    builtin = record("2026-01-01T00:00:01.000Z", GUARDED_WRITE, "deny", tier="builtin", tool_name="write_file",
                     decision={"behavior": "deny", "reason": "write_file targets the home"})
    user = record("2026-01-01T00:00:02.000Z", "mine", "allow", decision={"behavior": "allow"})
    assert insert(db, [managed, builtin, user]) == 3
    stored = query(db)
    assert stored == [managed, builtin, user]
    assert [r.tier for r in stored] == ["managed", "builtin", "user"]
    with closing(sqlite3.connect(db)) as connection:
        raw = connection.execute("SELECT hook_id, tier FROM runs ORDER BY id").fetchall()
    assert raw == [("org-guard", "managed"), (GUARDED_WRITE, "builtin"), ("mine", "user")]
    # `hookbus log --json` prints these: the built-in log's lines, "tier" only when not the user's.
    entries = [r.log_entry() for r in stored]
    assert [e.get("tier") for e in entries] == ["managed", "builtin", None]
    assert [RunRecord.from_log_entry(e) for e in entries] == stored


def test_a_database_of_schema_3_is_read_and_then_given_tier(tmp_path: Path) -> None:
    """Version 4 added ``runs.tier``: a version 3 database is read as it is (every row the
    user's), and the first writer adds the column, which its old rows take as 'user'."""
    assert "tier" not in V3_SCHEMA and "enforced  TEXT               --" in V3_SCHEMA
    db = tmp_path / "v3.sqlite3"
    with closing(sqlite3.connect(db)) as connection:
        connection.executescript(V3_SCHEMA)
        connection.execute(
            "INSERT INTO runs (at, hook_id, event, mode, status, duration, tool_name, shadow, enforced) VALUES "
            "('2026-11-29T18:00:00.000Z', 'old', 'PreToolUse', 'sync', 'deny', 0.5, 'bash', 1, 'allow')"
        )
        connection.execute("PRAGMA user_version = 3")
        connection.commit()

    [old] = query(db)
    assert (old.hook_id, old.tool_name, old.shadow, old.enforced, old.tier) == ("old", "bash", True, "allow", "user")
    with closing(sqlite3.connect(db)) as connection:  # reading changed nothing
        assert "tier" not in [row[1] for row in connection.execute("PRAGMA table_info(runs)")]
        assert connection.execute("PRAGMA user_version").fetchone()[0] == 3

    new = record("2026-11-30T18:00:00.000Z", "org-guard", "deny", tier="managed")
    insert(db, [new])
    assert [(r.hook_id, r.shadow, r.tier) for r in query(db)] == [("old", True, "user"), ("org-guard", False, "managed")]
    assert query(db)[1] == new
    with closing(sqlite3.connect(db)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 4
        assert [row[1] for row in connection.execute("PRAGMA table_info(runs)")] == COLUMNS
        assert connection.execute("SELECT hook_id, tier FROM runs ORDER BY id").fetchall() == [
            ("old", "user"), ("org-guard", "managed"),
        ]
        # A row written without a tier (by a writer of version 3 still running) is the user's.
        connection.execute(
            "INSERT INTO runs (at, hook_id, event, mode, status, duration) VALUES "
            "('2026-12-01T18:00:00.000Z', 'late', 'Stop', 'async', 'done', 0.1)"
        )
        connection.commit()
    assert query(db, hook_id="late")[0].tier == "user"


def test_a_row_of_no_known_tier_is_read_as_the_users_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "runs.sqlite3"
    insert(db, [R1, R3])
    with closing(sqlite3.connect(db)) as connection:
        connection.execute("UPDATE runs SET tier = 'org' WHERE hook_id = 'a' AND status = 'deny'")
        connection.commit()
    with caplog.at_level(logging.WARNING, logger="hookbus"):
        assert query(db) == [R1, R3]  # the rest of the history still reads
    said = [r.getMessage() for r in caplog.records if "tier" in r.getMessage()]
    assert len(said) == 1 and "'org'" in said[0] and "read as 'user'" in said[0]


@pytest.mark.timeout(60)
def test_the_home_guards_denies_are_recorded_as_builtin(home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    home.write_hook("mine", mode="sync", matcher="write_file", command="exit 0")
    bus = make_bus()
    planted = str(home.root / "hooks" / "planted" / "hook.json")
    assert bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": planted}, "cwd": "/"}).behavior == "deny"
    assert bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "/srv/x"}, "cwd": "/"}).behavior == "allow"
    bus.close()
    stored = query(db_of(home))
    # The guard's allow is not recorded (it runs on every guarded call); its deny is.
    assert [(r.hook_id, r.status, r.tier) for r in stored if r.hook_id == GUARDED_WRITE] == [(GUARDED_WRITE, "deny", "builtin")]
    assert [r.tier for r in stored if r.hook_id == "mine"] == ["user", "user"]
    assert [r.log_entry() for r in make_bus().read_runs(GUARDED_WRITE)][0]["tier"] == "builtin"


@pytest.mark.timeout(60)
@pytest.mark.skipif(os.geteuid() != 0, reason="a managed directory must be root's: this test makes one")
def test_a_managed_hooks_fires_are_recorded_as_managed(
    home: TestHome, make_bus: Callable[..., HookBus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed = tmp_path / "managed"
    hook = managed / "hooks" / "org-guard" / "hook.json"
    hook.parent.mkdir(parents=True)
    for directory in (managed, managed / "hooks", hook.parent):
        directory.chmod(0o755)  # the managed tier refuses what others can write
    hook.write_text(json.dumps({"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync",
                                "blocking": True, "command": "echo 'managed says no' >&2; exit 2"}))
    hook.chmod(0o644)
    # Where a managed directory exists, only the third-party plugins it names load.
    (managed / "settings.json").write_text(json.dumps({"plugins": ["sqlite"]}))
    (managed / "settings.json").chmod(0o644)
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(managed))
    home.write_hook("mine", mode="sync", matcher="bash", command="exit 0")
    bus = make_bus()
    assert bus.snapshot.hooks["org-guard"].tier == "managed", bus.problems
    assert bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"}).behavior == "deny"
    bus.close()
    stored = {r.hook_id: r for r in query(db_of(home))}
    assert {hook_id: r.tier for hook_id, r in stored.items()} == {"org-guard": "managed", "mine": "user"}
    assert stored["org-guard"].status == "deny"
    with closing(sqlite3.connect(db_of(home))) as connection:
        assert connection.execute("SELECT tier FROM runs WHERE hook_id = 'org-guard'").fetchall() == [("managed",)]


# -- who may read the database, and whether replay may trust it ----------------------------


def mode_of(path: Path) -> int:
    return os.lstat(path).st_mode & 0o7777


@pytest.mark.timeout(60)
def test_the_database_and_its_wal_are_their_owners_alone_whatever_the_umask(home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    write_decider(home)
    bus = make_bus()
    old = os.umask(0)
    try:
        bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 1}})
        hookbus_sqlite.writer.flush(30)  # written, and the bus still open: the WAL is there
        database = db_of(home)
        modes = {path.name: mode_of(path) for path in database.parent.glob("hooks.sqlite3*")}
        assert {"hooks.sqlite3", "hooks.sqlite3-wal"} <= set(modes), modes
        assert set(modes.values()) == {0o600}, modes
        assert mode_of(database.parent) == 0o700
    finally:
        os.umask(old)


@pytest.mark.timeout(60)
def test_a_loose_database_is_tightened_when_a_writer_opens_it(home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    write_decider(home)
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 1}})
    bus.close()
    database = db_of(home)
    database.chmod(0o644)
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": 2}})
    bus.close()
    assert mode_of(database) == 0o600
    assert row_count(database) == 2


def test_emits_refusals_name_what_another_user_could_have_written(tmp_path: Path) -> None:
    from hookbus_sqlite.database import emits_refusals

    directory = tmp_path / "logs"
    directory.mkdir(mode=0o700)
    database = directory / "hooks.sqlite3"
    assert emits_refusals(database) == []  # none yet: nothing to refuse
    insert(database, [])
    assert emits_refusals(database) == []
    Path(f"{database}-wal").write_text("")
    Path(f"{database}-wal").chmod(0o622)
    [said] = emits_refusals(database)
    assert said.startswith(f"{database}-wal is writable by group and others (mode 0622)") and f"chmod go-w {database}-wal" in said
    Path(f"{database}-wal").unlink()
    directory.chmod(0o777)
    [said] = emits_refusals(database)
    assert said.startswith(f"{directory} is writable by group and others") and f"chmod go-w {directory}" in said
    directory.chmod(0o700)
    database.rename(directory / "real.sqlite3")
    database.symlink_to(directory / "real.sqlite3")
    [said] = emits_refusals(database)
    assert said.startswith(f"{database} is a symbolic link")


@pytest.mark.timeout(60)
def test_what_reaches_the_database_is_masked_with_nothing_registered(home: TestHome, make_bus: Callable[..., HookBus]) -> None:
    """The records come to the database masked: a token a hook says, a password in the
    envelope, the value of a JSON key named like a secret."""
    home.write_settings({"recorder": "sqlite", "record_envelopes": True})
    home.write_hook("leaky", mode="sync", blocking=True, command="echo 'token=Qt0kenV4lue99 ghp_Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2' >&2; exit 2")
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "psql postgres://app:Pg5ecret@db/x", "password": "Js0nKeyed"}})
    bus.close()
    raw = b"".join(path.read_bytes() for path in db_of(home).parent.glob("hooks.sqlite3*"))
    for secret in (b"Qt0kenV4lue99", b"Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2", b"Pg5ecret", b"Js0nKeyed"):
        assert secret not in raw
    assert b"ghp_[redacted]" in raw and b"postgres://app:[redacted]@db/x" in raw
