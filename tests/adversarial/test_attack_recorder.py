"""Attacks on the built-in recorder: a hostile filesystem must not stall, redirect or
corrupt it.

- promise 3 (emit never wedges): a state.json that is a FIFO or a link to /dev/zero, a
  day's log that is a FIFO, a hook directory another process holds locked, a state.json too
  big or too deep to parse. Every emit returns, the other hooks' state is still written,
  ``close()`` and ``hookbus list``/``log`` return within generous bounds.
- promise 2 (nothing another user can write is obeyed): ``logs/``, ``logs/hooks`` or the
  day's file replaced by a symlink, or made writable by others. Writing through such a path
  would let another user point root's audit log at a file of theirs or a system file: the
  record is refused, the target untouched, the refusal reported once naming the path and
  the fix; reading does not follow the link either.
- promise 4 (no record is lost except those the disk refused; those are counted and
  reported; fragments never corrupt the next record): a real tmpfs filled up mid-line, a
  faked short write, a decision nested too deeply to encode.

Tests run as root here, which is the point: root writing through a planted link is how
another user gets a system file overwritten.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import resource
import stat
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import pytest

import hookbus_recorder
import hookbus_recorder.logfile
from attackkit import FIGURES, FOREIGN_UID, attack, needs_root, scale
from conftest import read_log, read_state
from hookbus import HookBus, Outcome, hookimpl
from hookbus.records import RunRecord, utc_timestamp

Maker = Callable[..., HookBus]
HookWriter = Callable[..., Path]

#: Generous bounds for "did not hang": an unfixed recorder takes 60 s or forever.
CLOSE_BOUND_SECONDS = 20.0
CLI_TIMEOUT_SECONDS = 60.0


def hookbus_cli() -> list[str]:
    script = Path(sys.executable).with_name("hookbus")
    return [str(script)] if script.exists() else [sys.executable, "-m", "hookbus"]


def run_cli(home: Path, *args: str, memory_cap: int | None = None) -> subprocess.CompletedProcess[str]:
    """``hookbus --home HOME ARGS`` in a real process, killed if it outlives the bound; with
    ``memory_cap`` its address space is capped, so a read without a cap fails fast with
    MemoryError rather than eating the machine's memory."""

    def cap_memory() -> None:
        if memory_cap is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))

    try:
        return subprocess.run(
            [*hookbus_cli(), "--home", str(home), *args],
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_SECONDS,
            preexec_fn=cap_memory if memory_cap is not None else None,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hookbus {' '.join(args)} did not return within {CLI_TIMEOUT_SECONDS:.0f} s")


def utc_days() -> list[str]:
    """Today and tomorrow (UTC): a run that straddles midnight writes to both."""
    now = datetime.now(timezone.utc)
    return [f"{now:%Y-%m-%d}", f"{now + timedelta(days=1):%Y-%m-%d}"]


def lost_records() -> int:
    return int(getattr(hookbus_recorder, "lost_records")())


def hookbus_messages(caplog: pytest.LogCaptureFixture, text: str, level: int = logging.WARNING) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("hookbus") and r.levelno >= level and text in r.getMessage()
    ]


class InstantRunner:
    """A runner in process: ``"instant": {}`` answers at once with ``outcome``. Keeps a
    500-emit attack fast, and plays a third-party runner whose decision is odd."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome

    def parse(self, key: str, value: object, context: object) -> object:
        return value

    def run(self, call: object) -> Outcome:
        return self.outcome


class InstantPlugin:
    def __init__(self, outcome: Outcome | None = None) -> None:
        self.runner = InstantRunner(outcome or Outcome("allow"))

    @hookimpl
    def hookbus_register_runners(self, register: Any) -> None:
        register.add("instant", self.runner)


def emit(bus: HookBus) -> str:
    return bus.emit("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"}}).behavior


def emit_in_thread(bus: HookBus, count: int, unblock: list[Path], bound: float = 60.0) -> list[str]:
    """``count`` emits on a thread of their own; fails (after freeing the thread, by reading
    the FIFOs in ``unblock``) when they do not all return within ``bound`` seconds."""
    decisions: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for _ in range(count):
                decisions.append(emit(bus))
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound)
    wedged = thread.is_alive()
    if wedged:
        # Read the pipes until the wedged writer gets through, so the suite can go on.
        readers = [os.open(path, os.O_RDONLY | os.O_NONBLOCK) for path in unblock if path.exists()]
        try:
            deadline = time.monotonic() + 60
            while thread.is_alive() and time.monotonic() < deadline:
                for fd in readers:
                    try:
                        os.read(fd, 1 << 16)
                    except BlockingIOError:
                        pass
                thread.join(0.01)
        finally:
            for fd in readers:
                os.close(fd)
    assert not wedged, f"emit wedged: {len(decisions)} of {count} emits returned within {bound:.0f} s"
    assert errors == []
    return decisions


# -- promise 3: FIFOs, devices, locks ------------------------------------------------------


@pytest.mark.timeout(240)
def test_state_json_that_is_a_fifo_stalls_nothing(
    home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(3, "state.json is a FIFO: the recorder, close() and the other hooks go on"):
        write_hook("trap", mode="sync", command="exit 0")
        write_hook("other", mode="sync", command="exit 0")
        fifo = home / "hooks" / "trap" / "state.json"
        os.mkfifo(fifo)
        bus = make_bus()
        assert [emit(bus) for _ in range(3)] == ["allow"] * 3
        started = time.monotonic()
        bus.close()
        elapsed = time.monotonic() - started
        assert elapsed < CLOSE_BOUND_SECONDS, f"close() took {elapsed:.1f} s"
        assert len(read_state(home, "other")["recent_runs"]) == 3
        # Treated as absent, then replaced by the rename (a new directory entry): the FIFO
        # is gone, never written to, and the hook's state is whole.
        assert stat.S_ISREG(os.lstat(fifo).st_mode)
        assert len(read_state(home, "trap")["recent_runs"]) == 3
        reports = hookbus_messages(caplog, str(fifo))
        assert len(reports) == 1, reports
        assert "FIFO" in reports[0] and "not a regular file" in reports[0]
        assert len(read_log(home)) == 6

    with attack(3, "hookbus list with a FIFO state.json returns"):
        write_hook("never", mode="sync", command="exit 0")
        os.mkfifo(home / "hooks" / "never" / "state.json")
        result = run_cli(home, "list")
        assert result.returncode == 0, result.stderr
        assert "never" in result.stdout and "Traceback" not in result.stderr
        assert stat.S_ISFIFO(os.lstat(home / "hooks" / "never" / "state.json").st_mode)


#: Reads a state.json both ways the recorder does (by path, as `hookbus list` does, and
#: relative to the open hook directory, as the writer does) and prints the peak allocation.
READ_STATE_PEAK = """
import os, sys, tracemalloc
from pathlib import Path
from hookbus_recorder.state import read_state
hook_dir = Path(sys.argv[1])
tracemalloc.start()
by_path = read_state(hook_dir)
fd = os.open(hook_dir, os.O_RDONLY | os.O_DIRECTORY)
by_fd = read_state(hook_dir, fd)
os.close(fd)
print(by_path == by_fd == {}, tracemalloc.get_traced_memory()[1])
"""


@pytest.mark.timeout(240)
def test_state_json_linked_to_dev_zero_is_not_read(
    home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(3, "state.json -> /dev/zero: memory does not grow, list returns"):
        write_hook("zero", mode="sync", command="exit 0")
        state = home / "hooks" / "zero" / "state.json"
        state.symlink_to("/dev/zero")
        # Each in a process whose address space is capped (2 GiB): a read that follows the
        # link dies of MemoryError there instead of eating this machine's memory.
        result = run_cli(home, "list", memory_cap=2 << 30)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "zero" in result.stdout
        assert "Traceback" not in result.stderr and "MemoryError" not in result.stderr, result.stderr[-2000:]
        try:
            reader = subprocess.run(
                [sys.executable, "-c", READ_STATE_PEAK, str(state.parent)],
                capture_output=True, text=True, timeout=CLI_TIMEOUT_SECONDS,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)),
            )
        except subprocess.TimeoutExpired:
            pytest.fail("reading a state.json linked to /dev/zero did not return")
        assert reader.returncode == 0, reader.stderr[-2000:]
        empty, peak = reader.stdout.split()
        assert empty == "True"
        assert int(peak) < 2 << 20, f"reading a state.json linked to /dev/zero allocated {peak} bytes"

        bus = make_bus()
        assert emit(bus) == "allow"
        bus.close()
        # The link was replaced (rename replaces the entry), never written through.
        assert not state.is_symlink()
        assert len(read_state(home, "zero")["recent_runs"]) == 1
        assert stat.S_ISCHR(os.stat("/dev/zero").st_mode)
        reports = hookbus_messages(caplog, f"{state} is a symbolic link")
        assert len(reports) == 1, reports


@pytest.mark.timeout(120)
@pytest.mark.parametrize("content", ["oversized", "nested"])
def test_state_json_too_big_or_too_deep_is_replaced(
    content: str, home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    import hookbus_recorder.state

    cap = getattr(hookbus_recorder.state, "MAX_STATE_BYTES", 1 << 20)
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(3, f"state.json {content}: read capped, the hook's state still written"):
        write_hook("big", mode="sync", command="exit 0")
        state = home / "hooks" / "big" / "state.json"
        if content == "oversized":
            state.write_bytes(b'{"pad": "' + b" " * cap + b'"}\n')
        else:  # json.loads raises RecursionError, which is not a ValueError
            state.write_bytes(b"[" * 200_000 + b"]" * 200_000)
        bus = make_bus()
        assert emit(bus) == "allow"
        bus.close()
        assert len(read_state(home, "big")["recent_runs"]) == 1
        why = "over the 1 MiB limit" if content == "oversized" else "nested too deeply"
        reports = hookbus_messages(caplog, f"{state} is ")
        assert len(reports) == 1 and why in reports[0], reports
        assert not hookbus_messages(caplog, "failed", logging.ERROR)


@pytest.mark.timeout(240)
def test_hook_directories_held_locked_by_another_process_stall_nothing(
    home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    """flock needs only read access to the directory (mode 0755 grants it to everyone):
    another user holding the locks forever must not stop the recorder, and holding ten of
    them must not cost ten full waits."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(3, "hook directories held locked by another process"):
        held = [home / "hooks" / f"held{index}" for index in range(10)]
        for directory in held:
            write_hook(directory.name, mode="sync", command="exit 0")
        write_hook("other", mode="sync", command="exit 0")
        # Open file descriptions of their own: their flocks conflict with the recorder's, as
        # another process's would.
        locks = [os.open(directory, os.O_RDONLY | os.O_DIRECTORY) for directory in held]
        try:
            for fd in locks:
                fcntl.flock(fd, fcntl.LOCK_EX)
            bus = make_bus()
            assert [emit(bus) for _ in range(3)] == ["allow"] * 3
            started = time.monotonic()
            bus.close()
            elapsed = time.monotonic() - started
        finally:
            for fd in locks:
                os.close(fd)
        # One wait of LOCK_WAIT_SECONDS, then short ones: well under ten full waits.
        assert elapsed < 10, f"close() took {elapsed:.1f} s"
        assert len(read_state(home, "other")["recent_runs"]) == 3
        assert len(read_log(home)) == 33  # the log still has every fire
        for directory in held:
            reports = hookbus_messages(caplog, f"{directory}/state.json", logging.ERROR)
            assert len(reports) == 1, reports
            assert "locked by another process" in reports[0]

        # Released: the next fires are kept again.
        bus = make_bus()
        assert emit(bus) == "allow"
        bus.close()
        assert [len(read_state(home, d.name)["recent_runs"]) for d in held] == [1] * len(held)


@pytest.mark.timeout(240)
def test_days_log_that_is_a_fifo_never_blocks_emit(
    home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    count = scale(600, 2000)  # a pipe holds ~320 records: beyond it, an unfixed emit blocks
    with attack(3, "the day's log is a FIFO: emits never block, records counted lost"):
        write_hook("h", mode="sync", instant={})
        logs = home / "logs" / "hooks"
        logs.mkdir(parents=True)
        fifos = [logs / f"{day}.jsonl" for day in utc_days()]
        for fifo in fifos:
            os.mkfifo(fifo)
        bus = make_bus(plugins=[InstantPlugin()])
        lost_before = lost_records() if hasattr(hookbus_recorder, "lost_records") else 0
        assert emit_in_thread(bus, count, fifos) == ["allow"] * count
        assert lost_records() - lost_before == count
        reports = hookbus_messages(caplog, "writing the hook log in", logging.ERROR)
        assert len(reports) == 1, reports
        assert str(logs) in reports[0] and "FIFO" in reports[0] and "rm " in reports[0]

        # Removed: the next record is written, and the recovery says what was lost.
        for fifo in fifos:
            fifo.unlink()
        assert emit(bus) == "allow"
        bus.close()
        assert len(read_log(home)) == 1
        recoveries = hookbus_messages(caplog, "recovered")
        assert recoveries == [f"writing the hook log in {logs}: recovered; {count} records were lost meanwhile"]
        FIGURES["records refused by a FIFO log, counted"] += count


@pytest.mark.timeout(120)
def test_reading_a_fifo_log_does_not_block(home: Path, write_hook: HookWriter, make_bus: Maker) -> None:
    with attack(3, "hookbus log with a FIFO among the day files returns"):
        write_hook("h", mode="sync", command="exit 0")
        bus = make_bus()
        assert emit(bus) == "allow"
        bus.close()
        os.mkfifo(home / "logs" / "hooks" / "2000-01-01.jsonl")
        result = run_cli(home, "log")
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert "2000-01-01.jsonl" in result.stderr and "not a regular file" in result.stderr
        assert len([line for line in result.stdout.splitlines() if " h " in f" {line} "]) == 1


def test_open_log_for_reading_refuses_links_and_fifos(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    from hookbus_recorder.logfile import open_log_for_reading

    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(3, "open_log_for_reading (log --follow): no link, no FIFO, no block"):
        logs = home / "logs" / "hooks"
        logs.mkdir(parents=True)
        (logs / "a.jsonl").write_text("{}\n")
        (logs / "b.jsonl").symlink_to(logs / "a.jsonl")
        os.mkfifo(logs / "c.jsonl")
        handle = open_log_for_reading(logs / "a.jsonl")
        assert handle is not None
        with handle:
            assert handle.read() == b"{}\n"
        assert open_log_for_reading(logs / "b.jsonl") is None
        assert open_log_for_reading(logs / "c.jsonl") is None
        assert open_log_for_reading(logs / "missing.jsonl") is None  # not yet written: quiet
        assert len(hookbus_messages(caplog, str(logs / "b.jsonl"))) == 1
        assert len(hookbus_messages(caplog, str(logs / "c.jsonl"))) == 1
        assert open_log_for_reading(logs / "c.jsonl") is None
        assert len(hookbus_messages(caplog, str(logs / "c.jsonl"))) == 1  # once, not per poll


# -- promise 2: the log is never written through a link or in others' directories ----------

LINKS = ["logs", "logs/hooks", "day file"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("link", LINKS)
def test_symlinked_log_path_is_not_written_through(
    link: str,
    home: Path,
    tmp_path: Path,
    write_hook: HookWriter,
    make_bus: Maker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(2, f"symlinked {link}: the target is not written, nor read"):
        victim = tmp_path / "victim"
        (victim / "hooks").mkdir(parents=True)
        forged = json.dumps({"at": "2000-01-01T00:00:00.000Z", "hook_id": "h", "event": "Stop",
                             "mode": "sync", "status": "allow", "error": None}) + "\n"
        (victim / "hooks" / "2000-01-01.jsonl").write_text(forged)
        (victim / "passwd").write_text(forged)
        logs = home / "logs"
        if link == "logs":
            logs.symlink_to(victim, target_is_directory=True)
            refused = logs
        elif link == "logs/hooks":
            logs.mkdir()
            (logs / "hooks").symlink_to(victim / "hooks", target_is_directory=True)
            refused = logs / "hooks"
        else:
            (logs / "hooks").mkdir(parents=True)
            for day in utc_days():
                (logs / "hooks" / f"{day}.jsonl").symlink_to(victim / "passwd")
            (logs / "hooks" / "2000-01-01.jsonl").symlink_to(victim / "passwd")
            refused = logs / "hooks" / "{day}.jsonl"
        before = {path: path.read_bytes() for path in victim.rglob("*") if path.is_file()}

        write_hook("h", mode="sync", blocking=True, command="echo no >&2; exit 2")
        bus = make_bus()
        lost_before = lost_records() if hasattr(hookbus_recorder, "lost_records") else 0
        assert [emit(bus) for _ in range(5)] == ["deny"] * 5
        assert bus.read_runs() == []  # the forged record behind the link is not read
        bus.close()

        after = {path: path.read_bytes() for path in victim.rglob("*") if path.is_file()}
        assert after == before, "the recorder wrote through a symbolic link"
        assert lost_records() - lost_before == 5
        reports = hookbus_messages(caplog, "writing the hook log in", logging.ERROR)
        assert len(reports) == 1, reports
        assert "symbolic link" in reports[0]
        assert any(str(refused).format(day=day) in reports[0] for day in utc_days()), reports[0]
        assert len(read_state(home, "h")["recent_runs"]) == 5  # state.json still kept

        result = run_cli(home, "log")
        assert result.returncode == 0 and "Traceback" not in result.stderr
        assert "2000-01-01" not in result.stdout


LOOSE = [
    "group-writable logs/hooks",
    "other-writable logs",
    "group-writable home",
    pytest.param("foreign-owned logs/hooks", marks=needs_root),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("loose", LOOSE)
def test_log_directory_others_can_write_is_refused(
    loose: str, home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(2, f"{loose}: the log is not written there"):
        logs = home / "logs" / "hooks"
        logs.mkdir(parents=True)
        if loose == "group-writable logs/hooks":
            logs.chmod(0o775)
            refused, fix = logs, f"chmod go-w {logs}"
        elif loose == "other-writable logs":
            logs.parent.chmod(0o757)
            refused, fix = logs.parent, f"chmod go-w {logs.parent}"
        elif loose == "group-writable home":
            home.chmod(0o775)
            refused, fix = home, f"chmod go-w {home}"
        else:
            os.chown(logs, FOREIGN_UID, -1)
            refused, fix = logs, f"chown {os.geteuid()} {logs}"
        write_hook("h", mode="sync", command="exit 0")
        bus = make_bus()
        lost_before = lost_records() if hasattr(hookbus_recorder, "lost_records") else 0
        if loose == "group-writable home":
            # The core loads no hook from such a home (trust.py), so nothing fires: hand the
            # recorder its records directly, as a bus would.
            for _ in range(4):
                hookbus_recorder.hookbus_record(bus, RunRecord(
                    at=utc_timestamp(), hook_id="h", event="Stop", mode="sync", status="allow", duration=0.0
                ))
        else:
            assert [emit(bus) for _ in range(4)] == ["allow"] * 4
        bus.close()
        assert list(logs.iterdir()) == [], "the log was written in a directory others can change"
        assert lost_records() - lost_before == 4
        reports = hookbus_messages(caplog, "writing the hook log in", logging.ERROR)
        assert len(reports) == 1, reports
        assert str(refused) in reports[0] and fix in reports[0]
        assert "1 record lost so far" in reports[0]  # reported at the first, with its count


# -- promise 4: a full disk tears no record ---------------------------------------------


@pytest.fixture
def tiny_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, mounted for the test; skipped where mounting is not permitted."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0755", "tmpfs", str(mount_point)],
            capture_output=True, text=True, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        # Lazy: a bus another fixture still holds open must not fail the unmount.
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def fill_disk(path: Path) -> None:
    """Write ``path`` until the filesystem is full to the last byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        for chunk in (b"\0" * 4096, b"\0"):
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)


@pytest.mark.timeout(120)
def test_full_disk_fragment_never_corrupts_the_next_record(
    tiny_tmpfs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(4, "ENOSPC mid-line on a real tmpfs: the next record parses"):
        root = tiny_tmpfs / "home"
        (root / "hooks" / "h").mkdir(parents=True)
        (root / "hooks" / "h" / "hook.json").write_text(
            json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "instant": {}})
        )
        counted = hasattr(hookbus_recorder, "lost_records")
        lost_before = lost_records() if counted else 0
        bus = HookBus(root, plugins=[InstantPlugin()])
        try:
            assert emit(bus) == "allow"
            assert len(bus.read_runs()) == 1  # flushes state.json too, before the disk fills
            fill_disk(tiny_tmpfs / "filler")
            full = 40  # ~200-byte records: well past the log's last free page
            assert [emit(bus) for _ in range(full)] == ["allow"] * full
            lost_on_full = lost_records() - lost_before if counted else 0
            (tiny_tmpfs / "filler").unlink()
            after = 5
            assert [emit(bus) for _ in range(after)] == ["allow"] * after
        finally:
            bus.close()
        [log_file] = (root / "logs" / "hooks").glob("*.jsonl")
        lines = log_file.read_bytes().split(b"\n")
        assert lines[-1] == b""
        parsed, torn = [], []
        for line in lines[:-1]:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                torn.append(line)
        # The line the disk cut is a fragment on a line of its own, never glued to the next.
        cut = hookbus_messages(caplog, "short write", logging.ERROR)
        assert len(torn) == len(cut) <= 1, torn
        assert all(line.count(b'{"at"') == 1 for line in torn), f"a record glued onto a fragment: {torn}"
        assert [entry["hook_id"] for entry in parsed[-after:]] == ["h"] * after
        # The disk refused some: those are counted and reported; every other record is whole.
        assert counted, "lost_records() is missing"
        assert 0 < lost_on_full < full
        assert len(parsed) == 1 + full + after - lost_on_full
        recoveries = hookbus_messages(caplog, "writing the hook log in")
        assert any(f"recovered; {lost_on_full} records were lost meanwhile" in r for r in recoveries), recoveries
        FIGURES["records refused by a full tmpfs, counted"] += lost_on_full


class _ShortWriteOS(ModuleType):
    """``os`` for logfile.py whose writes follow a script: "ok", "short" (half the bytes
    written, the count returned), "enospc" (nothing written, ENOSPC raised)."""

    def __init__(self, script: list[str]) -> None:
        super().__init__("os")
        self.script = list(script)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def write(self, fd: int, data: bytes) -> int:
        step = self.script.pop(0) if self.script else "ok"
        if step == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if step == "short":
            return os.write(fd, bytes(data[: len(data) // 2]))
        return os.write(fd, data)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("script", "lost"),
    [
        (["ok", "short"], 1),  # a short write, then room again
        # Cut mid-line, then the disk stays full for two more records (each fails on the
        # newline that must end the fragment first).
        (["ok", "short", "enospc", "enospc"], 3),
    ],
    ids=["short-then-room", "short-then-full"],
)
def test_short_write_fragment_is_ended_before_the_next_record(
    script: list[str],
    lost: int,
    home: Path,
    write_hook: HookWriter,
    make_bus: Maker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(4, f"a short write ({'/'.join(script)}): the fragment is ended, not glued"):
        write_hook("h", mode="sync", instant={})
        bus = make_bus(plugins=[InstantPlugin()])
        assert emit(bus) == "allow"  # the day's file is open before the fault starts
        fake = _ShortWriteOS(script[1:])
        monkeypatch.setattr(hookbus_recorder.logfile, "os", fake)
        lost_before = lost_records() if hasattr(hookbus_recorder, "lost_records") else 0
        total = 6
        assert [emit(bus) for _ in range(total)] == ["allow"] * total
        bus.close()
        [log_file] = (home / "logs" / "hooks").glob("*.jsonl")
        lines = log_file.read_bytes().split(b"\n")
        assert lines[-1] == b""
        parsed = []
        torn = []
        for line in lines[:-1]:
            try:
                parsed.append(json.loads(line))
            except ValueError:
                torn.append(line)
        assert len(torn) == 1 and not torn[0].endswith(b"}"), torn
        assert len(parsed) == 1 + total - lost
        assert lost_records() - lost_before == lost
        recoveries = hookbus_messages(caplog, "recovered")
        assert recoveries == [
            f"writing the hook log in {home / 'logs' / 'hooks'}: recovered; {lost} "
            f"record{'s' if lost > 1 else ''} {'were' if lost > 1 else 'was'} lost meanwhile"
        ]


@pytest.mark.timeout(60)
def test_decision_too_deep_to_encode_is_recorded_with_a_marker(
    home: Path, write_hook: HookWriter, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    with attack(4, "a decision nested 20,000 deep (past what JSON is written at) is recorded"):
        deep: dict[str, Any] = {}
        for _ in range(20_000):
            deep = {"a": deep}
        write_hook("deep", mode="sync", instant={})  # non-blocking: recorded, not applied
        write_hook("plain", mode="sync", command="exit 0")
        bus = make_bus(plugins=[InstantPlugin(Outcome("modify", input=deep))])
        lost_before = lost_records() if hasattr(hookbus_recorder, "lost_records") else 0
        assert emit(bus) == "allow"
        bus.close()
        entries = {entry["hook_id"]: entry for entry in read_log(home)}
        assert set(entries) == {"deep", "plain"}
        marker = entries["deep"]["decision"]
        assert marker["behavior"] == "modify"
        assert "nested too deeply" in marker["not_recorded"]
        assert len(json.dumps(entries["deep"])) < 1000
        assert entries["deep"]["status"] == "modify"
        assert lost_records() == lost_before
        assert not hookbus_messages(caplog, "writing the hook log", logging.ERROR)
