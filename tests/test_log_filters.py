"""``hookbus log --event E --status S --since WHEN``, and the tool each fire decided on.

The filters read the real log (hand-written lines over several days, and fires made by
the real CLI); ``--since`` takes an ISO 8601 date or date-time, or a duration back from now.
Records carry the envelope's ``tool_name`` (the log line, state.json's recent runs, the
TOOL column), so ``hookbus log`` says which call was denied.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import read_log, read_state
from hookbus import RunRecord
from hookbus.records import utc_timestamp
from test_cli import Background, run_cli

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]


def record(at: str, hook_id: str, event: str, status: str, *, error: str | None = None, tool: str | None = None) -> dict[str, Any]:
    mode = "async" if status in ("done", "error") else "sync"
    return RunRecord(
        at=at, hook_id=hook_id, event=event, mode=mode, status=status,
        duration=0.01, error=error, decision={"behavior": "allow"}, tool_name=tool,
    ).log_entry()


def write_log(home: Path, entries: list[dict[str, Any]]) -> None:
    """Each entry in the log file of its UTC day, as the recorder files them."""
    logs = home / "logs" / "hooks"
    logs.mkdir(parents=True, exist_ok=True)
    for entry in entries:
        with open(logs / f"{entry['at'][:10]}.jsonl", "a") as handle:
            handle.write(json.dumps(entry) + "\n")


@pytest.fixture
def days(home: Path) -> list[dict[str, Any]]:
    entries = [
        record("2026-11-29T23:59:59.999Z", "guard", "PreToolUse", "deny", tool="bash"),
        record("2026-11-30T08:00:00.000Z", "guard", "PreToolUse", "allow", tool="write_file"),
        record("2026-11-30T09:00:00.000Z", "lint", "PostToolUse", "allow", error="timed out after 5s", tool="edit_file"),
        record("2026-12-01T07:30:00.000Z", "notify", "Stop", "done"),
        record("2026-12-01T07:30:00.001Z", "notify", "Stop", "error", error="exited with status 1"),
        record("2026-12-01T10:00:00.000Z", "guard", "PreToolUse", "deny", tool="bash"),
    ]
    write_log(home, entries)
    return entries


def logged(tmp_path: Path, home: Path, *args: str) -> list[dict[str, Any]]:
    result = run_cli(tmp_path, "log", "--json", *args, home=home)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], [0, 1, 2, 3, 4, 5]),
        (["--event", "PreToolUse"], [0, 1, 5]),
        (["--status", "deny"], [0, 5]),
        (["--status", "failed"], [2, 4]),  # an error, sync (failed open: allow) or async
        (["--status", "error"], [4]),
        (["--since", "2026-11-30"], [1, 2, 3, 4, 5]),
        (["--since", "2026-12-01T07:30"], [3, 4, 5]),
        (["--since", "2026-12-01T07:30:00.001Z"], [4, 5]),
        (["--since", "2026-12-01T09:30:00+02:00"], [3, 4, 5]),  # 07:30 UTC
        (["--since", "2026-12-02"], []),
        (["--event", "PreToolUse", "--status", "deny", "--since", "2026-11-30"], [5]),
        (["--hook", "notify", "--status", "done"], [3]),
        (["--event", "PreToolUse", "--limit", "2"], [1, 5]),  # the last two that match, not of all
        (["--event", "PreToolUse", "--limit", "0"], []),
    ],
)
def test_filters_keep_what_they_say(tmp_path: Path, home: Path, days: list[dict[str, Any]], args: list[str], expected: list[int]) -> None:
    assert logged(tmp_path, home, *args) == [days[index] for index in expected]


def test_since_a_duration_counts_back_from_now(tmp_path: Path, home: Path) -> None:
    now = time.time()
    entries = [
        record(utc_timestamp(now - 3 * 86400), "h", "Stop", "done"),
        record(utc_timestamp(now - 2 * 3600), "h", "Stop", "done"),
        record(utc_timestamp(now - 30 * 60), "h", "Stop", "done"),
    ]
    write_log(home, entries)

    assert logged(tmp_path, home, "--since", "24h") == entries[1:]
    assert logged(tmp_path, home, "--since", "90m") == entries[2:]
    assert logged(tmp_path, home, "--since", "1h30m") == entries[2:]
    assert logged(tmp_path, home, "--since", "100h") == entries


def test_the_table_says_which_filters_found_nothing(tmp_path: Path, home: Path, days: list[dict[str, Any]]) -> None:
    result = run_cli(tmp_path, "log", "--event", "Stop", "--status", "deny", home=home)

    assert result.returncode == 0
    assert result.stdout == f"no fires (event Stop, status deny) recorded in {home}\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--event", "stop"], "hookbus log: --event: unknown event 'stop'; events are PreToolUse, "),
        (["--event", "stop"], "(did you mean 'Stop'?)"),
        (["--status", "denied"], "hookbus log: --status: unknown status 'denied' (did you mean 'deny'?); statuses are allow, deny, modify, context, done, error, and failed"),
        (["--since", "yesterday"], "hookbus log: --since 'yesterday': give a date (2026-12-01), a date and time (2026-12-01T09:30"),
        (["--since", "7d"], "hookbus log: --since '7d': durations go up to hours, as Go writes them: 168h, or give a date"),
        (["--since", "5"], "hookbus log: --since: invalid duration '5': use a number and a unit"),
        (["--since", "2026-02-30"], "hookbus log: --since '2026-02-30': give a date"),
        (["--limit", "-1"], "hookbus log: --limit -1: give a number of fires, 0 or more"),
    ],
)
def test_bad_filters_are_usage_errors(tmp_path: Path, home: Path, args: list[str], message: str) -> None:
    result = run_cli(tmp_path, "log", *args, home=home)

    assert result.returncode == 1
    assert message in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


# -- tool_name in records ---------------------------------------------------------------------


def test_records_carry_the_envelopes_tool_name(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    """The log line, state.json's recent runs and `hookbus log` say which call a hook
    decided on; a fire of an event with no tool has none."""
    write_hook("guard", matcher="bash|write_file", mode="sync", blocking=True, command="grep -q rm && { echo no >&2; exit 2; }; exit 0")
    write_hook("after", event="PostToolUse", command="true")  # async
    write_hook("noter", event="Stop", mode="sync", command="echo noted")
    for event, stdin in (
        ("PreToolUse", '{"tool_name":"bash","tool_input":{"command":"rm -rf /"}}'),
        ("PreToolUse", '{"tool_name":"write_file","tool_input":{"path":"a"}}'),
        ("PostToolUse", '{"tool_name":"write_file"}'),
        ("Stop", "{}"),
    ):
        run_cli(tmp_path, "emit", event, home=home, stdin=stdin)

    entries = read_log(home)
    assert sorted((entry["hook_id"], entry["status"], entry.get("tool_name")) for entry in entries) == [
        ("after", "done", "write_file"), ("guard", "allow", "write_file"), ("guard", "deny", "bash"), ("noter", "context", None),
    ]
    assert [run.get("tool_name") for run in read_state(home, "guard")["recent_runs"]] == ["bash", "write_file"]
    assert "tool_name" not in read_state(home, "noter")["recent_runs"][0]

    table = run_cli(tmp_path, "log", "--status", "deny", home=home)
    header, line = table.stdout.splitlines()
    assert header.split()[:3] == ["AT", "EVENT", "HOOK"]
    assert line.split()[1:5] == ["PreToolUse(bash)", "guard", "sync", "deny"]  # the tool beside the event
    assert line.endswith("  no")
    others = run_cli(tmp_path, "log", "--event", "Stop", home=home).stdout.splitlines()[1]
    assert others.split()[1:3] == ["Stop", "noter"]
    assert logged(tmp_path, home, "--hook", "guard", "--status", "deny")[0]["tool_name"] == "bash"


def test_a_tool_name_that_is_no_string_is_not_recorded_and_a_long_one_is_cut(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    write_hook("all", mode="sync", command="exit 0")
    run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name": ["bash"]}')
    run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin=json.dumps({"tool_name": "t" * 500}))

    first, second = read_log(home)
    assert "tool_name" not in first
    assert second["tool_name"] == "t" * 199 + "…"


def test_follow_applies_the_filters_to_new_fires(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    write_hook("noter", event="Stop", mode="sync", command="echo noted")
    write_hook("guard", mode="sync", blocking=True, command="echo no >&2; exit 2")
    with Background(tmp_path, "log", "--follow", "--json", "--event", "Stop", "--home", str(home)) as follow:
        line = None
        for _ in range(15):
            run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name":"bash"}')
            run_cli(tmp_path, "emit", "Stop", home=home)
            line = follow.line(timeout=1)
            if line is not None:
                break
        assert line is not None, "no fire was followed"
        follow.terminate()
        rest = []
        while (more := follow.line(timeout=0.5)) is not None:
            rest.append(more)
    assert {json.loads(text)["event"] for text in [line, *rest]} == {"Stop"}
