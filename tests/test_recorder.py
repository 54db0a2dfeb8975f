"""The built-in recorder (hooks/<id>/state.json and logs/hooks/<date>.jsonl), driven
through a real HookBus running real command hooks.

A fire's log line is written before emit returns; state.json by a background thread, so
every test closes the bus (or calls read_runs, which flushes) before it reads state.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from conftest import read_log, read_state
from hookbus import HookBus, RunRecord, hookimpl
from hookbus.durations import parse_duration
from hookbus_recorder.state import append_runs

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
STATE_RUN_KEYS = {"at", "status", "async", "event", "error", "thread_id", "duration"}
#: ... and the envelope's tool_name, when it had one.
STATE_RUN_KEYS_WITH_TOOL = STATE_RUN_KEYS | {"tool_name"}
LOG_KEYS = {"at", "hook_id", "event", "mode", "status", "error", "duration", "decision"}

# Decides by tool_input.n (the envelope arrives on stdin as compact JSON), so a test
# can play a known sequence of outcomes through one hook.
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


def expected_outcome(n: int) -> tuple[str, str | None, dict[str, Any]]:
    """(status, error, the hook's own decision) that DECIDE_BY_N records for ``n``."""
    return [
        ("allow", None, {"behavior": "allow"}),
        ("deny", None, {"behavior": "deny", "reason": f"no {n}"}),
        ("context", None, {"behavior": "context", "context": f"note {n}"}),
        ("modify", None, {"behavior": "modify", "input": {"n": n, "safe": True}}),
        ("allow", None, {"behavior": "allow"}),
        ("allow", f"exited with status 3: broke {n}", {"behavior": "allow"}),
    ][n % 6]


def write_decider(write_hook: Any, hook_id: str = "decider") -> None:
    write_hook(
        hook_id,
        mode="sync",
        blocking=True,
        command='"$HOOKBUS_HOOK_DIR/decide.sh"',
        files={"decide.sh": DECIDE_BY_N},
    )


def emit_n(bus: HookBus, n: int) -> Any:
    return bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"n": n}})


def log_lines(home: Path) -> list[str]:
    lines: list[str] = []
    for path in sorted((home / "logs" / "hooks").glob("*.jsonl")):
        lines += path.read_text().splitlines()
    return lines


def utc_day() -> str:
    return f"{datetime.now(timezone.utc):%Y-%m-%d}"


# -- state.json ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_state_keeps_the_last_ten_runs_in_order(home, write_hook, make_bus):
    """state.json is what `hookbus list` and the agent read back: exactly the last ten
    fires, oldest first, and last_* describing the very last one."""
    write_decider(write_hook)
    bus = make_bus()
    for n in range(12):
        emit_n(bus, n)
    bus.close()

    state = read_state(home, "decider")
    runs = state["recent_runs"]
    assert len(runs) == 10
    for run in runs:
        assert set(run) == STATE_RUN_KEYS_WITH_TOOL
        assert run["tool_name"] == "write_file"
    expected = [expected_outcome(n) for n in range(2, 12)]
    assert [(run["status"], run["error"]) for run in runs] == [(s, e) for s, e, _ in expected]
    assert all(run["async"] is False for run in runs)
    assert all(run["event"] == "PreToolUse" for run in runs)
    assert all(run["thread_id"] is None for run in runs)
    for run in runs:
        assert TIMESTAMP.fullmatch(run["at"])
        parse_duration(run["duration"], allow_zero=True)  # a Go duration, or this raises

    # The state's runs are the log's last ten, in the log's order.
    log = read_log(home)
    assert len(log) == 12
    assert [run["at"] for run in runs] == [entry["at"] for entry in log[2:]]

    assert state["last_fired_at"] == runs[-1]["at"] == log[-1]["at"]
    assert state["last_status"] == "allow"
    assert state["last_error"] == "exited with status 3: broke 11"


def test_two_buses_of_one_home_keep_their_runs_in_order(home, write_hook, make_bus):
    """Two buses on the same home in one process share the writer: state.json's runs are
    the last ten in the order they were fired, whichever bus fired them."""
    write_decider(write_hook)
    first, second = make_bus(), make_bus()
    for n in range(14):
        emit_n(first if n % 2 else second, n)
    first.close()
    second.close()
    runs = read_state(home, "decider")["recent_runs"]
    log = read_log(home)
    assert [run["at"] for run in runs] == [entry["at"] for entry in log[-10:]]
    assert [run["error"] for run in runs] == [error for _, error, _ in (expected_outcome(n) for n in range(4, 14))]


@pytest.mark.timeout(60)
def test_sync_status_is_what_the_hook_said(home, write_hook, make_bus):
    """Each sync behaviour is recorded as itself; a broken hook fails open, so it is
    recorded as allow and carries the error that explains why."""
    write_decider(write_hook)
    bus = make_bus()
    decisions = [emit_n(bus, n) for n in (0, 1, 2, 3, 5)]
    bus.close()

    assert [d.behavior for d in decisions] == ["allow", "deny", "context", "modify", "allow"]
    assert decisions[1].reason == "hook 'decider' denied: no 1"
    assert decisions[3].input == {"n": 3, "safe": True}
    runs = read_state(home, "decider")["recent_runs"]
    assert [(run["status"], run["error"]) for run in runs] == [
        ("allow", None),
        ("deny", None),
        ("context", None),
        ("modify", None),
        ("allow", "exited with status 3: broke 5"),
    ]


@pytest.mark.timeout(60)
def test_async_status_is_done_or_error(home, write_hook, make_bus):
    """Async hooks cannot decide, so they are recorded by whether they worked."""
    write_hook("async-ok", event="Stop", command="exit 0")
    write_hook("async-bad", event="Stop", command="echo bad >&2; exit 1")
    bus = make_bus()
    assert bus.emit("Stop", {}).behavior == "allow"
    bus.close()

    ok = read_state(home, "async-ok")
    bad = read_state(home, "async-bad")
    assert [(r["status"], r["async"], r["error"]) for r in ok["recent_runs"]] == [("done", True, None)]
    assert [(r["status"], r["async"], r["error"]) for r in bad["recent_runs"]] == [
        ("error", True, "exited with status 1: bad")
    ]
    assert (ok["last_status"], ok["last_error"]) == ("done", None)
    assert (bad["last_status"], bad["last_error"]) == ("error", "exited with status 1: bad")
    by_hook = {entry["hook_id"]: entry for entry in read_log(home)}
    assert by_hook["async-ok"]["mode"] == by_hook["async-bad"]["mode"] == "async"
    assert "manual" not in by_hook["async-ok"]


@pytest.mark.timeout(60)
def test_manual_trigger_is_recorded_as_an_async_fire(home, write_hook, make_bus):
    """The spec: a manual `vix hook trigger <id>` is recorded as an async fire, even for
    a sync hook, and the log tells it apart from a real event."""
    write_hook("guard", mode="sync", blocking=True, command="echo nope >&2; exit 2")
    bus = make_bus()
    record = bus.trigger("guard")
    bus.close()

    assert record.manual is True
    assert (record.mode, record.status, record.error) == ("async", "done", None)
    state = read_state(home, "guard")
    assert [(r["status"], r["async"], r["event"]) for r in state["recent_runs"]] == [
        ("done", True, "PreToolUse")
    ]
    [entry] = read_log(home)
    assert entry["manual"] is True
    assert (entry["mode"], entry["status"]) == ("async", "done")
    assert entry["decision"] == {"behavior": "deny", "reason": "nope"}


# -- the log ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_log_file_is_the_utc_day_with_one_line_per_fire(home, write_hook, make_bus):
    """The audit trail: logs/hooks/<UTC date>.jsonl, one JSON line per fire carrying
    what happened and what the hook itself decided."""
    write_decider(write_hook)
    write_hook("async-ok", matcher="write_file", command="exit 0")
    before = utc_day()
    bus = make_bus()
    for n in range(4):
        emit_n(bus, n)
    bus.close()
    after = utc_day()

    files = sorted((home / "logs" / "hooks").iterdir())
    assert len(files) in (1, 2)  # two only if the run straddled UTC midnight
    assert {f.name for f in files} <= {f"{before}.jsonl", f"{after}.jsonl"}
    entries = read_log(home)
    assert len(log_lines(home)) == len(entries) == 8
    for path in files:
        for line in path.read_text().splitlines():
            assert path.name == f"{json.loads(line)['at'][:10]}.jsonl"

    for entry in entries:
        assert LOG_KEYS <= set(entry)
        assert TIMESTAMP.fullmatch(entry["at"])
        assert entry["event"] == "PreToolUse"
        # The readable duration says what duration_ms says, to its three digits.
        assert parse_duration(entry["duration"], allow_zero=True) == pytest.approx(
            entry["duration_ms"] / 1000, rel=0.01, abs=1e-6
        )
    sync = [e for e in entries if e["hook_id"] == "decider"]
    assert [(e["mode"], e["status"], e["error"], e["decision"]) for e in sync] == [
        ("sync", *expected_outcome(n)) for n in range(4)
    ]
    asynchronous = [e for e in entries if e["hook_id"] == "async-ok"]
    assert [(e["mode"], e["status"], e["error"]) for e in asynchronous] == [("async", "done", None)] * 4


@pytest.mark.timeout(120)
def test_concurrent_emits_lose_and_tear_no_line(home, write_hook, make_bus):
    """8 threads emitting at once: every fire is one whole line, none lost or torn,
    and state.json is still a valid document."""
    write_hook("cheap-sync", mode="sync", command="exit 0")
    write_hook("cheap-async", command="echo hi")
    bus = make_bus(shutdown_timeout=100)
    threads_n, per_thread = 8, 200
    decisions: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        try:
            for i in range(per_thread):
                d = bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"t": t, "i": i}})
                with lock:
                    decisions.append(d.behavior)
        except BaseException as exc:  # surfaced below, not lost in the thread
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bus.close()

    assert failures == []
    assert decisions == ["allow"] * (threads_n * per_thread)
    lines = log_lines(home)
    fires = threads_n * per_thread * 2
    assert len(lines) == fires
    entries = [json.loads(line) for line in lines]
    statuses = {(e["hook_id"], e["status"]) for e in entries}
    assert statuses == {("cheap-sync", "allow"), ("cheap-async", "done")}
    assert sum(e["hook_id"] == "cheap-sync" for e in entries) == threads_n * per_thread
    for hook_id in ("cheap-sync", "cheap-async"):
        state = read_state(home, hook_id)
        assert len(state["recent_runs"]) == 10


# -- notes: decisions that did not take effect -------------------------------------------


@pytest.mark.timeout(60)
def test_superseded_modifies_carry_a_note_naming_the_winner(home, write_hook, make_bus):
    """Several hooks rewrite one input: one wins (first by id), and the log must say why
    the others' rewrites were not applied."""
    for hook_id in ("mod-a", "mod-b", "mod-c"):
        write_hook(
            hook_id,
            mode="sync",
            blocking=True,
            command=f'echo \'{{"behavior": "modify", "input": {{"by": "{hook_id}"}}}}\'',
        )
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {}})
    bus.close()

    assert (decision.behavior, decision.input) == ("modify", {"by": "mod-a"})
    entries = {e["hook_id"]: e for e in read_log(home)}
    assert set(entries) == {"mod-a", "mod-b", "mod-c"}
    assert "note" not in entries["mod-a"]
    for loser in ("mod-b", "mod-c"):
        assert entries[loser]["status"] == "modify"
        assert entries[loser]["decision"] == {"behavior": "modify", "input": {"by": loser}}
        assert entries[loser]["note"] == "superseded by the modify of hook 'mod-a'"


@pytest.mark.timeout(60)
def test_modify_superseded_by_a_deny_says_so(home, write_hook, make_bus):
    """A deny beats every modify; the modify's log line says it was superseded."""
    write_hook("a-deny", mode="sync", blocking=True, command="echo no >&2; exit 2")
    write_hook(
        "b-mod",
        mode="sync",
        blocking=True,
        command='echo \'{"behavior": "modify", "input": {"path": "x"}}\'',
    )
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {}})
    bus.close()

    assert (decision.behavior, decision.reason) == ("deny", "hook 'a-deny' denied: no")
    entries = {e["hook_id"]: e for e in read_log(home)}
    assert entries["b-mod"]["note"] == "superseded by deny"
    assert "note" not in entries["a-deny"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("event", "command", "status", "hook_decision"),
    [
        ("PostToolUse", "echo stop >&2; exit 2", "deny", {"behavior": "deny", "reason": "stop"}),
        (
            "PreToolUse",
            'echo \'{"behavior": "modify", "input": {"path": "y"}}\'',
            "modify",
            {"behavior": "modify", "input": {"path": "y"}},
        ),
    ],
    ids=["deny", "modify"],
)
def test_non_blocking_veto_is_recorded_but_not_applied(
    home, write_hook, make_bus, event, command, status, hook_decision
):
    """A non-blocking sync hook cannot veto: the log keeps what it said, with a note that
    it was not applied, and the decision stays allow."""
    write_hook("soft", event=event, mode="sync", command=command)
    bus = make_bus()
    decision = bus.emit(event, {"tool_name": "write_file", "tool_input": {}})
    bus.close()

    assert decision.as_dict() == {"behavior": "allow"}
    [entry] = read_log(home)
    assert entry["status"] == status
    assert entry["decision"] == hook_decision
    assert entry["note"].startswith("not applied")
    # A blocking event says how to make it apply; one that cannot block says so.
    expected = "not blocking" if event in ("PreToolUse", "UserPromptSubmit", "PermissionRequest") else "cannot block"
    assert entry["note"].startswith("not applied") and expected in entry["note"]
    assert read_state(home, "soft")["last_status"] == status


# -- failures of recorders never reach the agent ----------------------------------------


class RaisingRecorder:
    """A third-party recorder whose backend is down."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def hookbus_record(self, bus: HookBus, record: RunRecord) -> None:
        self.calls += 1
        raise RuntimeError("backend down")


def hookbus_errors(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "hookbus" and text in r.getMessage()
    ]


@pytest.mark.timeout(60)
def test_raising_recorder_changes_nothing_and_is_reported_once(
    home, write_hook, make_bus, caplog
):
    """One broken recorder must not change a decision, raise into the agent loop, stop
    the built-in recorder, or flood the log with one error per emit."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    write_hook("guard", mode="sync", blocking=True, command="echo nope >&2; exit 2")
    write_hook("watcher", command="exit 0")
    broken = RaisingRecorder()
    bus = make_bus(plugins=[broken])
    decisions = [
        bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {}}).behavior for _ in range(20)
    ]
    bus.close()

    assert decisions == ["deny"] * 20
    assert broken.calls == 40  # it really was asked, and failed, every time
    entries = read_log(home)
    assert len(entries) == 40
    assert sum(e["hook_id"] == "guard" and e["status"] == "deny" for e in entries) == 20
    assert sum(e["hook_id"] == "watcher" and e["status"] == "done" for e in entries) == 20
    assert len(read_state(home, "guard")["recent_runs"]) == 10
    reports = hookbus_errors(caplog, "raised RuntimeError: backend down")
    assert len(reports) == 1
    assert reports[0].levelno == logging.ERROR
    assert hookbus_errors(caplog, "recovered") == []


class RecordOnlyRecorder:
    """Takes only ``record``: pluggy lets an implementation accept a subset of the
    hookspec's arguments, and registration accepts it."""

    def __init__(self) -> None:
        self.hook_ids: list[str] = []

    @hookimpl
    def hookbus_record(self, record: RunRecord) -> None:
        self.hook_ids.append(record.hook_id)


@pytest.mark.timeout(60)
def test_recorder_taking_a_subset_of_arguments_gets_records(home, write_hook, make_bus, caplog):
    """A recorder written the pluggy way (only the arguments it needs) must work."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    write_hook("guard", mode="sync", blocking=True, command="exit 2")
    recorder = RecordOnlyRecorder()
    bus = make_bus(plugins=[recorder])
    bus.emit("PreToolUse", {"tool_name": "bash"})
    bus.close()

    assert hookbus_errors(caplog, "TypeError") == []
    assert recorder.hook_ids == ["guard"]


@pytest.mark.timeout(60)
def test_impossible_log_path_changes_nothing_and_is_reported_once(
    home, write_hook, make_bus, caplog
):
    """A full disk or a broken logs directory must never wedge or alter the agent loop;
    the user hears about it once, and state.json is still kept."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    (home / "logs").mkdir()
    (home / "logs" / "hooks").write_text("not a directory\n")
    write_hook("guard", mode="sync", blocking=True, command="echo nope >&2; exit 2")
    write_hook("watcher", command="exit 0")
    bus = make_bus()
    decisions = [
        bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {}}).as_dict() for _ in range(15)
    ]
    assert isinstance(bus.read_runs(), list)  # reading must not raise either
    bus.close()

    assert decisions == [{"behavior": "deny", "reason": "hook 'guard' denied: nope"}] * 15
    assert (home / "logs" / "hooks").read_text() == "not a directory\n"
    reports = hookbus_errors(caplog, "writing the hook log in")
    assert len(reports) == 1
    assert reports[0].levelno == logging.ERROR
    assert str(home / "logs" / "hooks") in reports[0].getMessage()
    assert read_state(home, "guard")["last_status"] == "deny"
    assert len(read_state(home, "watcher")["recent_runs"]) == 10


# -- reading back -------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_read_runs_is_oldest_first_and_limited(home, write_hook, make_bus):
    """`hookbus log` and `list` rely on read_runs: the newest `limit` fires of one hook
    (or of all), in the order they happened; read_runs flushes the writer itself."""
    write_decider(write_hook, "decider")
    write_hook("other", event="Stop", mode="sync", command="echo other")
    bus = make_bus()
    for n in range(12):
        emit_n(bus, n)
        bus.emit("Stop", {})

    want = [expected_outcome(n)[0] for n in range(12)]
    everything = bus.read_runs()
    assert len(everything) == 24
    assert [r.hook_id for r in everything] == ["decider", "other"] * 12
    assert [r.status for r in bus.read_runs("decider")] == want
    assert [r.status for r in bus.read_runs("decider", 3)] == want[-3:]  # from state.json
    assert [r.status for r in bus.read_runs("decider", 11)] == want[-11:]  # from the log
    assert [r.status for r in bus.read_runs("other", 2)] == ["context", "context"]
    assert [(r.hook_id, r.status) for r in bus.read_runs(None, 3)] == [
        ("other", "context"),
        ("decider", want[11]),
        ("other", "context"),
    ]
    limited = bus.read_runs("decider", 4)
    assert all(isinstance(r, RunRecord) for r in limited)
    assert [r.error for r in limited] == [expected_outcome(n)[1] for n in range(8, 12)]
    assert [r.at for r in limited] == sorted(r.at for r in limited)


@pytest.mark.timeout(60)
def test_torn_last_line_is_skipped_with_a_warning(home, write_hook, make_bus, caplog):
    """A crash mid-write leaves half a line: reading must skip it with a warning rather
    than fail, so `hookbus log` still works."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    write_decider(write_hook)
    bus = make_bus()
    for n in range(3):
        emit_n(bus, n)
    bus.close()
    [log_file] = (home / "logs" / "hooks").glob("*.jsonl")
    with open(log_file, "a") as handle:
        handle.write('{"at": "2026-01-01T00:00:00.000Z", "hook_id": "decider", "ev')

    reader = make_bus()
    runs = reader.read_runs()
    assert [r.status for r in runs] == ["allow", "deny", "context"]
    assert [r.status for r in reader.read_runs("decider")] == ["allow", "deny", "context"]
    warnings = hookbus_errors(caplog, "skipped a line that is not a record")
    assert warnings
    assert all(w.levelno == logging.WARNING for w in warnings)
    assert f"{log_file}:4:" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.timeout(60)
def test_fire_after_a_torn_line_is_not_lost(home, write_hook, make_bus, caplog):
    """A crash that tore the last line must cost that line only: the next fire (from
    the restarted daemon) must still be in the audit trail."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    write_decider(write_hook)
    bus = make_bus()
    emit_n(bus, 1)
    bus.close()
    [log_file] = (home / "logs" / "hooks").glob("*.jsonl")
    with open(log_file, "a") as handle:
        handle.write('{"at": "2026-01-01T00:00:00.000Z", "hook_id": "decider", "ev')

    restarted = make_bus()
    emit_n(restarted, 2)
    runs = restarted.read_runs("decider")

    assert [r.status for r in runs] == ["deny", "context"]


@pytest.mark.timeout(120)
def test_state_json_is_replaced_atomically(home, write_hook, make_bus):
    """Readers (the agent, `hookbus list`) must only ever see a whole state.json, and
    the temp files used to replace it must not pile up in the hook's directory."""
    write_hook("busy", mode="sync", command="exit 0")
    write_hook("busy-async", command="exit 0")
    bus = make_bus(shutdown_timeout=100)
    state_path = home / "hooks" / "busy" / "state.json"
    stop = threading.Event()
    torn: list[str] = []
    reads = [0]

    def reader() -> None:
        while not stop.is_set():
            try:
                text = state_path.read_text()
            except FileNotFoundError:
                continue
            reads[0] += 1
            try:
                json.loads(text)
            except ValueError:
                torn.append(text)

    def emitter() -> None:
        for _ in range(100):
            bus.emit("PreToolUse", {"tool_name": "bash"})

    watcher = threading.Thread(target=reader)
    watcher.start()
    emitters = [threading.Thread(target=emitter) for _ in range(4)]
    try:
        for thread in emitters:
            thread.start()
        for thread in emitters:
            thread.join()
        bus.close()
    finally:
        stop.set()
        watcher.join()

    assert torn == []
    assert reads[0] > 0
    for hook_id in ("busy", "busy-async"):
        directory = home / "hooks" / hook_id
        assert sorted(p.name for p in directory.iterdir()) == ["hook.json", "state.json"]
        assert list(directory.glob(".state.json.*.tmp")) == []
        assert len(read_state(home, hook_id)["recent_runs"]) == 10


@pytest.mark.parametrize(
    "seconds",
    [
        0.0,
        0.0004,
        0.0017346,
        0.5,
        0.9996,
        1.5,
        59.99,
        125.0,
    ],
)
def test_recorded_durations_read_back(home, seconds):
    """state.json's "duration" must be a Go duration that parses back: a run that took
    just under a second was once written "1e+03ms".
    (A real hook cannot be made to take an exact time, so the state is written by the
    recorder's own append_runs from a record of a chosen duration.)"""
    record = RunRecord(
        at="2026-01-02T03:04:05.678Z",
        hook_id="h",
        event="Stop",
        mode="async",
        status="done",
        duration=seconds,
    )
    hook_dir = home / "hooks" / "h"
    hook_dir.mkdir()
    append_runs(hook_dir, [record])
    [run] = read_state(home, "h")["recent_runs"]

    assert parse_duration(run["duration"], allow_zero=True) == pytest.approx(seconds, abs=0.001)


def test_the_last_runs_of_a_hook_are_whole_records(home, write_hook, make_bus):
    """``read_runs(hook, limit)`` (``hookbus log --hook h --limit 1``, ``hookbus list``)
    uses state.json only to skip old log files: the records still carry the decision,
    the note and whether the fire was manual, as the full log does."""
    write_hook("m", event="PreToolUse", mode="sync", blocking=True,
               command='echo \'{"behavior": "modify", "input": {"command": "ls"}}\'')
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "rm"}})
    bus.trigger("m", {"tool_name": "Bash", "tool_input": {}})
    last_two = bus.read_runs("m", 2)
    assert last_two == bus.read_runs("m")[-2:]
    assert [(r.decision, r.manual) for r in last_two] == [
        ({"behavior": "modify", "input": {"command": "ls"}}, False),
        ({"behavior": "modify", "input": {"command": "ls"}}, True),
    ]


def _record(hook_id: str = "h") -> RunRecord:
    return RunRecord(
        at="2026-01-02T03:04:05.678Z", hook_id=hook_id, event="Stop", mode="async", status="done", duration=0.01
    )


def test_state_follows_a_hook_directory_renamed_while_it_is_written(home):
    """The state is read and replaced relative to the locked directory: renamed meanwhile
    (and another directory put in its place, as hot reload churn does), the run lands in
    the directory that was locked, and the rename never looks for its temp file elsewhere."""
    from hookbus_recorder.state import _LockedDirectory, write_atomically

    old = home / "hooks" / "h"
    old.mkdir()
    with _LockedDirectory(old) as locked:
        old.rename(home / "hooks" / "moved")
        old.mkdir()
        write_atomically(old, "state.json", {"n": 1}, locked.fd)
    assert json.loads((home / "hooks" / "moved" / "state.json").read_text()) == {"n": 1}
    assert list(old.iterdir()) == []


def test_a_hook_directory_deleted_while_its_state_is_written_is_not_an_error(home):
    import shutil

    from hookbus_recorder.state import _LockedDirectory, write_atomically

    hook_dir = home / "hooks" / "h"
    hook_dir.mkdir()
    with _LockedDirectory(hook_dir) as locked:
        shutil.rmtree(hook_dir)
        hook_dir.mkdir()  # a new hook of the same name: not the directory that was locked
        write_atomically(hook_dir, "state.json", {"n": 1}, locked.fd)  # raises, swallowed
    assert list(hook_dir.iterdir()) == []
    append_runs(home / "hooks" / "gone", [_record("gone")])  # never existed: nothing written
    assert not (home / "hooks" / "gone").exists()


def test_temp_files_of_a_writer_killed_mid_write_are_removed_by_the_next_writer(home):
    hook_dir = home / "hooks" / "h"
    hook_dir.mkdir()
    stale = hook_dir / ".state.json.4242.7.tmp"
    stale.write_text('{"half": ')
    unrelated = hook_dir / ".notes.tmp"
    unrelated.write_text("mine")
    append_runs(hook_dir, [_record()])
    assert not stale.exists() and unrelated.exists()
    assert read_state(home, "h")["last_status"] == "done"


def test_last_error_clears_when_the_hook_works_again(home, write_hook, make_bus):
    """state.json's last_error is the last fire's: a hook that recovers shows none."""
    write_hook("flaky", event="Stop", mode="sync",
               command='test -f "$HOOKBUS_HOOK_DIR/ok" || { echo broke >&2; exit 3; }')
    bus = make_bus()
    bus.emit("Stop", {})
    bus.read_runs("flaky", 1)  # flushes
    assert read_state(home, "flaky")["last_error"] == "exited with status 3: broke"
    (home / "hooks" / "flaky" / "ok").write_text("")
    bus.emit("Stop", {})
    bus.read_runs("flaky", 1)
    state = read_state(home, "flaky")
    assert (state["last_status"], state["last_error"]) == ("allow", None)
    assert [run["error"] for run in state["recent_runs"]] == ["exited with status 3: broke", None]


# -- who may read what is recorded --------------------------------------------------------


def mode_of(path: Path) -> int:
    import os
    import stat

    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.timeout(60)
def test_the_logs_and_state_are_their_owners_alone_whatever_the_umask(home, write_hook, make_bus):
    import os

    (home / "settings.json").write_text(json.dumps({"record_envelopes": True}))
    (home / "settings.json").chmod(0o600)
    write_decider(write_hook)
    bus = make_bus()
    old = os.umask(0)  # everything made now would be readable, and writable, by everyone
    try:
        emit_n(bus, 1)
        bus.close()
    finally:
        os.umask(old)
    logs = home / "logs"
    assert {path: mode_of(logs / path) for path in ("", "hooks", "emits", f"hooks/{utc_day()}.jsonl", f"emits/{utc_day()}.jsonl")} == {
        "": 0o700, "hooks": 0o700, "emits": 0o700, f"hooks/{utc_day()}.jsonl": 0o600, f"emits/{utc_day()}.jsonl": 0o600,
    }
    assert mode_of(home / "hooks" / "decider" / "state.json") == 0o600


@pytest.mark.timeout(60)
def test_logs_left_readable_by_others_are_tightened_when_next_opened(home, write_hook, make_bus):
    write_decider(write_hook)
    day = home / "logs" / "hooks" / f"{utc_day()}.jsonl"
    day.parent.mkdir(parents=True)
    day.write_text("")
    day.chmod(0o644)
    day.parent.chmod(0o755)
    day.parent.parent.chmod(0o755)
    bus = make_bus()
    emit_n(bus, 1)
    bus.close()
    assert (mode_of(day.parent.parent), mode_of(day.parent), mode_of(day)) == (0o700, 0o700, 0o600)
    assert len(read_log(home)) == 1


def test_state_json_is_written_private_over_a_loose_one(home):
    hook_dir = home / "hooks" / "h"
    hook_dir.mkdir()
    (hook_dir / "state.json").write_text("{}")
    (hook_dir / "state.json").chmod(0o644)
    append_runs(hook_dir, [RunRecord(at="2026-01-01T00:00:00.000Z", hook_id="h", event="Stop", mode="sync", status="allow", duration=0.0)])
    assert mode_of(hook_dir / "state.json") == 0o600


@pytest.mark.timeout(60)
def test_what_a_hook_says_is_recorded_masked_with_nothing_registered(home, write_hook, make_bus):
    """A token in a hook's answer is masked by its shape in the log and in state.json, and
    given back as it is to the caller, whose decision it is."""
    token = "ghp_Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2"
    write_hook("leaky", mode="sync", blocking=True, command=f"echo 'curl -u bob:hunter2hunter2 {token}' >&2; exit 2")
    write_hook("broken", mode="sync", command=f"echo 'PGPASSWORD=hunter2hunter2 {token}' >&2; exit 1")
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}})
    assert token in (decision.reason or "")
    bus.close()
    recorded = json.dumps(read_log(home)) + json.dumps(read_state(home, "broken")) + json.dumps(read_state(home, "leaky"))
    assert "hunter2hunter2" not in recorded and token[4:] not in recorded
    assert "ghp_[redacted]" in recorded and "bob:[redacted]" in recorded and "PGPASSWORD=[redacted]" in recorded
