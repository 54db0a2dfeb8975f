"""Process supervision: own group, deadline that holds, capped output, no leaks.

``hookbus.process`` is what keeps a bad hook from wedging the agent loop, so each guarantee
of its docstring is tested directly (``run_bash`` / ``run_process``) and, where a user
would meet it, through a real HookBus as well. Time bounds asserted here are contract
bounds (timeout + 1 s; a grandchild's 20 s never holds an emit), not performance claims.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from conftest import HookWriter, is_alive, live_processes_in_group, read_log, read_state
from hookbus import HookBus
from hookbus.envelope import encode_envelope
from hookbus.decision import Decision
from hookbus.process import (
    KILL_GRACE_SECONDS,
    MAX_OUTPUT_BYTES,
    ProcessResult,
    run_bash,
    run_process,
)
from hookbus.runners import CancelToken

#: The contract bound on a run that hits its timeout: timeout + 1 s.
SLACK = 1.0
TWO_MB = 2_000_000


def env() -> dict[str, str]:
    return dict(os.environ)


def bash(
    command: str,
    cwd: Path,
    *,
    timeout: float = 20.0,
    input: bytes = b"",
    **options: Any,
) -> tuple[ProcessResult, float]:
    """``run_bash`` with a deadline ``timeout`` from now; returns the result and elapsed time."""
    started = time.monotonic()
    result = run_bash(
        command, input=input, cwd=cwd, env=env(), deadline=started + timeout, **options
    )
    return result, time.monotonic() - started


def read_pid(path: Path) -> int:
    """The pid a hook wrote with ``echo $$``: bash leads its own group, so it is the pgid."""
    return int(path.read_text().strip())


def wait_group_gone(pgid: int, within: float = 3.0) -> list[int]:
    """Live members of the group, polled briefly: SIGKILL is sent, death takes a moment."""
    end = time.monotonic() + within
    while True:
        alive = live_processes_in_group(pgid)
        if not alive or time.monotonic() > end:
            return alive
        time.sleep(0.02)


# -- run_bash / run_process directly ------------------------------------------------------


def test_plain_run_collects_both_streams_and_the_status(tmp_path: Path) -> None:
    result, _ = bash("cat; echo oops >&2; exit 3", tmp_path, input=b"hello stdin")
    assert result == ProcessResult(3, b"hello stdin", b"oops\n")


def test_cwd_and_env_are_exactly_what_was_given(tmp_path: Path) -> None:
    """The env is not merged with ours: the runner decides what a hook sees."""
    result = run_bash(
        'pwd -P; echo "${ONLY_THIS-missing}|${HOME-unset}"',
        input=b"",
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "ONLY_THIS": "yes"},
        deadline=time.monotonic() + 20,
    )
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [str(tmp_path.resolve()), "yes|unset"]


def test_child_leads_its_own_process_group(tmp_path: Path) -> None:
    """The group is what a timeout kills, so the hook must not share ours."""
    result, _ = bash("read -r _ _ _ _ pgrp _ < /proc/$$/stat; echo $$ $pgrp", tmp_path)
    pid, pgid = result.stdout.decode().split()
    assert pid == pgid
    assert int(pgid) != os.getpgid(0)


@pytest.mark.timeout(30)
def test_timeout_terms_the_group_and_reports_it(tmp_path: Path) -> None:
    """SIGTERM first: a plain command dies of it, before any SIGKILL."""
    pidfile = tmp_path / "pid"
    result, elapsed = bash(f"echo $$ > {pidfile}; sleep 30; echo never", tmp_path, timeout=1.0)
    assert result.timed_out
    assert result.returncode == -signal.SIGTERM
    assert result.stdout == b""
    assert elapsed < 1.0 + SLACK
    assert wait_group_gone(read_pid(pidfile)) == []


@pytest.mark.timeout(30)
def test_timeout_kills_a_hook_that_ignores_sigterm(tmp_path: Path) -> None:
    """A trap that swallows SIGTERM only buys the grace; SIGKILL follows."""
    pidfile, got_term = tmp_path / "pid", tmp_path / "got-term"
    command = (
        f"trap 'echo term >> {got_term}' TERM; echo $$ > {pidfile}; "
        "while :; do sleep 30 & wait; done"
    )
    result, elapsed = bash(command, tmp_path, timeout=1.0)
    assert result.timed_out
    assert result.returncode == -signal.SIGKILL
    assert got_term.read_text().strip() == "term", "SIGTERM must come before SIGKILL"
    assert elapsed < 1.0 + SLACK
    assert wait_group_gone(read_pid(pidfile)) == []


@pytest.mark.timeout(30)
def test_timeout_kills_a_whole_group_that_ignores_sigterm(tmp_path: Path) -> None:
    """``trap '' TERM`` is inherited: the sleep ignores TERM too, and still dies."""
    pidfile = tmp_path / "pid"
    result, elapsed = bash(f"trap '' TERM; echo $$ > {pidfile}; sleep 30; sleep 30", tmp_path, timeout=1.0)
    assert result.timed_out
    assert result.returncode == -signal.SIGKILL
    assert elapsed < 1.0 + SLACK
    assert wait_group_gone(read_pid(pidfile)) == []


@pytest.mark.timeout(30)
def test_deadline_already_passed_still_kills_and_reaps(tmp_path: Path) -> None:
    result, elapsed = bash("sleep 30", tmp_path, timeout=-1.0)
    assert result.timed_out
    assert result.returncode is not None and result.returncode < 0
    assert elapsed < KILL_GRACE_SECONDS + SLACK


@pytest.mark.timeout(30)
def test_grandchild_holding_stdout_does_not_hold_the_run(tmp_path: Path) -> None:
    """The run ends when the child exits; the background sleep is killed with the group."""
    pidfile = tmp_path / "pid"
    result, elapsed = bash(f"echo $$ > {pidfile}; (sleep 20 &); echo ok", tmp_path, timeout=15.0)
    assert result == ProcessResult(0, b"ok\n", b"")
    assert elapsed < 10.0, "the grandchild's 20 s sleep held the run"
    assert wait_group_gone(read_pid(pidfile)) == []


@pytest.mark.timeout(30)
def test_grandchild_holding_stderr_does_not_hold_the_run(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    result, elapsed = bash(
        f"echo $$ > {pidfile}; (sleep 20 >/dev/null &); echo err >&2; echo ok", tmp_path, timeout=15.0
    )
    assert result == ProcessResult(0, b"ok\n", b"err\n")
    assert elapsed < 10.0
    assert wait_group_gone(read_pid(pidfile)) == []


def wait_for_pid_file(path: Path, within: float = 10.0) -> int:
    end = time.monotonic() + within
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.monotonic() < end, f"{path} was never written"
        time.sleep(0.01)
    return read_pid(path)


def escape(pidfile: Path, then: str) -> str:
    """Start a process in a new session (setsid) that keeps stdout and stderr, wait until it
    is out of the hook's group (it writes its pid after setsid), then run ``then`` there."""
    return (
        f"setsid bash -c 'echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; {then}' & "
        f"until [ -s {pidfile} ]; do sleep 0.01; done"
    )


@pytest.mark.timeout(30)
def test_an_escaped_holder_is_left_alone_and_does_not_hold_the_run(tmp_path: Path) -> None:
    """A process that left the group keeps the pipes: the run returns once the child exits
    (plus ESCAPE_GRACE_SECONDS), never signals it, and closes its ends of the pipes, so the
    escapee's next write fails with EPIPE (it ignores SIGPIPE here, to tell)."""
    pidfile, status, release = tmp_path / "escapee", tmp_path / "status", tmp_path / "release"
    then = (
        f"trap \"\" PIPE; until [ -e {release} ]; do sleep 0.01; done; "
        f"echo late; echo $? > {status}.tmp; echo late >&2; echo $? >> {status}.tmp; "
        f"mv {status}.tmp {status}; exec sleep 30"
    )
    try:
        result, elapsed = bash(f"{escape(pidfile, then)}; echo ok", tmp_path, timeout=15.0)
        assert result == ProcessResult(0, b"ok\n", b"")
        assert elapsed < 10.0, "the escapee held the run"
        escapee = read_pid(pidfile)
        assert is_alive(escapee), "a process outside the hook's group was signalled"
        release.touch()
        end = time.monotonic() + 10
        while not status.exists():
            assert time.monotonic() < end, "the escapee never wrote"
            time.sleep(0.01)
        assert status.read_text().split() == ["1", "1"], "its writes should fail: our ends are closed"
        assert is_alive(escapee)
    finally:
        release.touch()
        if pidfile.exists():
            os.kill(read_pid(pidfile), signal.SIGKILL)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("ending", ["timeout", "cancel"])
def test_a_child_that_leaves_its_group_is_still_stopped(tmp_path: Path, ending: str) -> None:
    """The child moves itself into our own process group (setpgid), out of reach of a
    killpg of its group. It is our unreaped child, so it is signalled by its pid as well: the
    deadline holds and a cancel works. (Our group survives: only the child is signalled.)"""
    moved = tmp_path / "moved"
    program = (
        "import os, sys, time; "
        f"os.setpgid(0, {os.getpgid(0)}); open({str(moved)!r}, 'w').write('x'); time.sleep(30)"
    )
    token = CancelToken()
    timer = threading.Timer(0.3, token.cancel, args=("stop",))
    if ending == "cancel":
        timer.start()
    try:
        result, elapsed = bash(
            f"exec {sys.executable} -c {program!r}", tmp_path, timeout=1.0 if ending == "timeout" else 20.0, cancel=token
        )
    finally:
        timer.cancel()
        if timer.is_alive():
            timer.join(5)
    assert moved.exists(), "the child did not get to leave its group"
    if ending == "timeout":  # SIGTERM reaches it too, by its pid: it dies of that
        assert result.timed_out
        assert result.returncode == -signal.SIGTERM
    else:
        assert result.cancelled
        assert result.returncode == -signal.SIGKILL
    assert elapsed < 1.0 + SLACK + 1.0, "the child outside its group held the run"


@pytest.mark.timeout(60)
def test_descriptors_numbered_past_1024_work(tmp_path: Path) -> None:
    """An embedder with over a thousand descriptors open: our pipes get numbers select(2)
    cannot take. Output left in the pipe at exit is still drained whole, and a grandchild
    holding the pipe still ends the run at the grace, without an error."""
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert min(fillers) < 1024 < max(fillers)
        for _ in range(5):
            result = run_process(
                [sys.executable, "-c", FILL_BIG_PIPE], input=b"", cwd=tmp_path, env=env(),
                deadline=time.monotonic() + 20,
            )
            assert (result.returncode, len(result.stdout), result.stderr) == (0, 900_000, b"END")
        pidfile = tmp_path / "pid"
        result, elapsed = bash(f"echo $$ > {pidfile}; (sleep 20 &); echo ok", tmp_path, timeout=15.0)
        assert result == ProcessResult(0, b"ok\n", b"")
        assert elapsed < 10.0
        assert wait_group_gone(read_pid(pidfile)) == []
    finally:
        for fd in fillers:
            os.close(fd)


@pytest.mark.parametrize("deadline", [float("nan"), float("-inf")])
def test_a_deadline_that_is_no_time_counts_as_passed(tmp_path: Path, deadline: float) -> None:
    result = run_bash("sleep 30", input=b"", cwd=tmp_path, env=env(), deadline=deadline)
    assert result.timed_out
    assert result.returncode is not None and result.returncode < 0


#: A child that grows its stdout pipe to 1 MiB, fills most of it in one write and exits at
#: once: at exit much of the output can still be in the pipe, more than one read takes.
FILL_BIG_PIPE = """
import fcntl, os
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
os.write(2, b"END")
data = memoryview(b"\\0" * 900_000)
while data:
    data = data[os.write(1, data):]
os._exit(0)
"""


@pytest.mark.timeout(60)
def test_output_left_in_the_pipe_at_exit_is_kept(tmp_path: Path) -> None:
    """Exit is noticed at once; what the child left in the pipe is drained, not lost.

    Whether output is still queued at exit is a race, so it is run a number of times.
    """
    for _ in range(20):
        result = run_process(
            [sys.executable, "-c", FILL_BIG_PIPE],
            input=b"",
            cwd=tmp_path,
            env=env(),
            deadline=time.monotonic() + 20,
        )
        assert result.returncode == 0, result.stderr
        assert len(result.stdout) == 900_000
        assert result.stdout == b"\0" * 900_000
        assert result.stderr == b"END"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_over_the_cap_kills_the_process(tmp_path: Path, stream: str) -> None:
    pidfile = tmp_path / "pid"
    redirect = ">&2" if stream == "stderr" else ""
    result, elapsed = bash(f"echo $$ > {pidfile}; yes {redirect}", tmp_path, timeout=20.0)
    assert result.overflow == stream
    assert not result.timed_out
    assert len(getattr(result, stream)) <= MAX_OUTPUT_BYTES
    assert result.returncode is not None and result.returncode < 0
    assert elapsed < 10.0, "an endless writer must be stopped by the cap, not the deadline"
    assert wait_group_gone(read_pid(pidfile)) == []


@pytest.mark.parametrize(("cap", "overflow"), [(4, None), (3, "stdout")])
def test_output_cap_is_exact(tmp_path: Path, cap: int, overflow: str | None) -> None:
    """Up to the cap is fine; one byte more is an overflow, even after a clean exit."""
    result, _ = bash("printf abcd", tmp_path, output_cap=cap)
    assert result.overflow == overflow
    if overflow is None:
        assert result.stdout == b"abcd"


@pytest.mark.timeout(30)
def test_large_stdin_is_delivered_whole(tmp_path: Path) -> None:
    """Stdin is written while output is read: neither side can fill up and deadlock."""
    data = bytes(range(256)) * (TWO_MB // 256)
    result, _ = bash("wc -c; cat >/dev/null", tmp_path, input=data)
    assert result.returncode == 0
    assert int(result.stdout) == len(data)


@pytest.mark.timeout(30)
def test_large_stdin_echoed_back_is_not_a_deadlock(tmp_path: Path) -> None:
    data = b"x" * (MAX_OUTPUT_BYTES - 1)
    result, _ = bash("cat", tmp_path, input=data)
    assert result == ProcessResult(0, data, b"")


@pytest.mark.timeout(30)
def test_hook_that_never_reads_stdin_finishes_normally(tmp_path: Path) -> None:
    result, elapsed = bash("echo done", tmp_path, input=b"y" * TWO_MB, timeout=15.0)
    assert result == ProcessResult(0, b"done\n", b"")
    assert elapsed < 10.0


def test_spawn_failure_missing_cwd(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    result, _ = bash("echo hi", missing)
    assert result.returncode is None
    assert result.spawn_error == f"could not start: working directory {missing} does not exist"


def test_spawn_failure_missing_program(tmp_path: Path) -> None:
    program = str(tmp_path / "no-such-program")
    result = run_process(
        [program], input=b"", cwd=tmp_path, env=env(), deadline=time.monotonic() + 10
    )
    assert result.returncode is None
    assert result.spawn_error is not None
    assert result.spawn_error.startswith(f"could not start {program}")
    assert "No such file" in result.spawn_error


def test_spawn_failure_program_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/bash\necho hi\n")
    script.chmod(0o644)
    result = run_process(
        [str(script)], input=b"", cwd=tmp_path, env=env(), deadline=time.monotonic() + 10
    )
    assert result.returncode is None
    assert result.spawn_error is not None and "Permission denied" in result.spawn_error


def test_spawn_failure_past_exec_limits_names_the_variable(tmp_path: Path) -> None:
    """One environment string over the kernel's 128 KiB: the OS says only "Argument list
    too long", which names neither what is too long nor the limit."""
    result = run_bash(
        "true", input=b"", cwd=tmp_path, env={**env(), "HUGE_ONE": "h" * 200_000},
        deadline=time.monotonic() + 20,
    )
    assert result.returncode is None
    assert result.spawn_error == (
        "could not start: the environment variable HUGE_ONE holds 200,000 bytes, past the "
        "kernel's limit of 131,072 for one variable, its name included (E2BIG)"
    )


def test_spawn_failure_past_exec_limits_names_the_total_and_the_largest(tmp_path: Path) -> None:
    """Every string under 128 KiB, but all of them past a quarter of the stack limit: the
    failure says so, with the variables that take the most."""
    import resource

    # fs/exec.c: a quarter of the stack limit, between 128 KiB and 6 MiB.
    stack = resource.getrlimit(resource.RLIMIT_STACK)[0]
    limit = 6 << 20 if stack == resource.RLIM_INFINITY else max(128 << 10, min(6 << 20, stack // 4))
    fillers = {f"FILLER_{index:02}": "f" * (100_000 + index) for index in range(limit // 100_000 + 2)}
    result = run_bash("true", input=b"", cwd=tmp_path, env={**env(), **fillers}, deadline=time.monotonic() + 20)
    assert result.returncode is None and result.spawn_error is not None
    largest = sorted(fillers)[-3:][::-1]
    assert result.spawn_error.startswith("could not start: the arguments and the environment take "), result.spawn_error
    assert f"past the kernel's limit of {limit:,} for all of them" in result.spawn_error
    assert result.spawn_error.endswith(
        "the largest variables: " + ", ".join(f"{name} ({len(name) + 1 + len(fillers[name]):,} bytes)" for name in largest)
    )


def test_child_inherits_no_descriptor_of_ours(tmp_path: Path) -> None:
    """Only stdin, stdout and stderr: an inherited pipe end would keep streams open."""
    read_end, write_end = os.pipe()
    os.set_inheritable(read_end, True)
    os.set_inheritable(write_end, True)
    try:
        result, _ = bash("ls /proc/$$/fd; true", tmp_path)  # `; true`: bash forks ls, no exec
    finally:
        os.close(read_end)
        os.close(write_end)
    assert result.stdout.split() == [b"0", b"1", b"2"]


def test_run_process_runs_argv_without_a_shell(tmp_path: Path) -> None:
    """argv goes to exec as is: shell syntax in an argument is just text."""
    marker = tmp_path / "pwned"
    result = run_process(
        ["/bin/echo", f"$(touch {marker})"],
        input=b"",
        cwd=tmp_path,
        env=env(),
        deadline=time.monotonic() + 10,
    )
    assert result == ProcessResult(0, f"$(touch {marker})\n".encode(), b"")
    assert not marker.exists()


@pytest.mark.timeout(30)
def test_cancel_from_another_thread_kills_promptly(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    token = CancelToken()

    def cancel_when_started() -> None:
        end = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < end:
            time.sleep(0.01)
        token.cancel("stop now")

    canceller = threading.Thread(target=cancel_when_started)
    canceller.start()
    try:
        result, elapsed = bash(f"echo $$ > {pidfile}; sleep 30", tmp_path, timeout=25.0, cancel=token)
    finally:
        canceller.join(15)
    assert result.cancelled
    assert not result.timed_out
    assert result.returncode == -signal.SIGKILL
    assert elapsed < 12.0, "cancel must not wait for the sleep or the deadline"
    assert wait_group_gone(read_pid(pidfile)) == []


def test_cancelled_before_start_spawns_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    token = CancelToken()
    token.cancel("closing")
    result, _ = bash(f"touch {marker}", tmp_path, cancel=token)
    assert result == ProcessResult(None, cancelled=True)
    assert not marker.exists()


def test_finished_run_is_not_cancelled(tmp_path: Path) -> None:
    """A token cancelled after the run ended must not change that run's result."""
    token = CancelToken()
    result, _ = bash("echo fine", tmp_path, cancel=token)
    token.cancel("later")
    assert result == ProcessResult(0, b"fine\n", b"")


@pytest.mark.timeout(60)
def test_no_file_descriptor_leaks(tmp_path: Path) -> None:
    """50 runs over every ending (exit, deny, overflow, timeout, spawn error, cancel)."""

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    bash("true", tmp_path)  # warm up lazily opened descriptors
    before = fds()
    endings: list[Callable[[], ProcessResult]] = [
        lambda: bash("echo hi", tmp_path)[0],
        lambda: bash("cat >/dev/null; echo no >&2; exit 2", tmp_path, input=b"z" * 100_000)[0],
        lambda: bash("echo ignored stdin", tmp_path, input=b"z" * 300_000)[0],
        lambda: bash("printf abcdef", tmp_path, output_cap=3)[0],
        lambda: bash("sleep 5", tmp_path, timeout=0.05)[0],
        lambda: bash("true", tmp_path / "missing")[0],
        lambda: bash("(sleep 5 &); echo ok", tmp_path)[0],
    ]
    outcomes = [endings[i % len(endings)]() for i in range(50)]
    assert fds() == before
    # The mix really covered the endings it claims to.
    assert any(r.overflow for r in outcomes)
    assert any(r.timed_out for r in outcomes)
    assert any(r.spawn_error for r in outcomes)


@pytest.mark.timeout(30)
def test_no_file_descriptor_leak_on_cancel(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        token = CancelToken()
        timer = threading.Timer(0.05, token.cancel, args=("stop",))
        timer.start()
        result, _ = bash("sleep 10", tmp_path, cancel=token)
        timer.join(5)
        assert result.cancelled
    assert len(os.listdir("/proc/self/fd")) == before


# -- through the bus ----------------------------------------------------------------------


Emit = Callable[..., tuple[Decision, float, dict[str, Any]]]


@pytest.fixture
def emit_one(home: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]) -> Emit:
    """One sync blocking PreToolUse hook; emit once, time the emit, return state.json."""

    def run(command: str, envelope: Mapping[str, Any] | None = None, **fields: Any) -> tuple[Decision, float, dict[str, Any]]:
        write_hook("h", command=command, mode="sync", blocking=True, **fields)
        bus = make_bus()
        assert not bus.problems, bus.problems
        started = time.monotonic()
        decision = bus.emit("PreToolUse", envelope or {"tool_name": "bash", "tool_input": {}})
        elapsed = time.monotonic() - started
        bus.close()
        return decision, elapsed, read_state(home, "h")

    return run


def hook_file(home: Path, name: str) -> Path:
    return home / "hooks" / "h" / name


@pytest.mark.timeout(30)
def test_bus_timeout_fails_open_and_kills_the_group(emit_one: Emit, home: Path) -> None:
    decision, elapsed, state = emit_one(
        'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; sleep 30; echo \'{"behavior": "deny"}\'', timeout="1s"
    )
    assert decision == Decision("allow")
    assert state["last_status"] == "allow"
    assert state["last_error"] == "timed out after 1s"
    assert elapsed < 1.0 + SLACK
    assert wait_group_gone(read_pid(hook_file(home, "pid"))) == []
    (entry,) = read_log(home)
    assert entry["error"] == "timed out after 1s"


@pytest.mark.timeout(30)
def test_bus_timeout_kills_a_hook_that_ignores_sigterm(emit_one: Emit, home: Path) -> None:
    decision, elapsed, state = emit_one(
        "trap '' TERM; echo $$ > \"$HOOKBUS_HOOK_DIR/pid\"; sleep 30; exit 2", timeout="1s"
    )
    assert decision == Decision("allow")
    assert state["last_error"] == "timed out after 1s"
    assert elapsed < 1.0 + SLACK
    assert wait_group_gone(read_pid(hook_file(home, "pid"))) == []


@pytest.mark.timeout(40)
def test_bus_grandchild_holding_stdout_does_not_hold_emit(emit_one: Emit, home: Path) -> None:
    decision, elapsed, state = emit_one(
        'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; (sleep 20 &); echo ok', timeout="10s"
    )
    assert decision == Decision("context", context="ok")
    assert state["last_error"] is None
    assert elapsed < 5.0, "emit waited for the grandchild (it sleeps 20 s, the timeout is 10 s)"
    assert wait_group_gone(read_pid(hook_file(home, "pid"))) == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_bus_output_over_one_mib_fails_open(emit_one: Emit, stream: str) -> None:
    redirect = " >&2" if stream == "stderr" else ""
    decision, elapsed, state = emit_one(f"head -c 2000000 /dev/zero{redirect}; exit 2", timeout="10s")
    assert decision == Decision("allow")
    assert state["last_error"] == f"{stream} went over 1 MiB; the process was killed"
    assert elapsed < 10.0 + SLACK


@pytest.mark.timeout(30)
def test_bus_large_envelope_is_delivered_whole(emit_one: Emit) -> None:
    envelope = {"tool_name": "write_file", "tool_input": {"content": "é" * (TWO_MB // 2)}}
    _, payload = encode_envelope("PreToolUse", envelope)
    assert len(payload) > TWO_MB
    decision, _, state = emit_one("wc -c", envelope=envelope)
    assert state["last_error"] is None
    assert decision == Decision("context", context=str(len(payload)))


@pytest.mark.timeout(30)
def test_bus_hook_that_ignores_a_large_envelope_finishes(emit_one: Emit) -> None:
    envelope = {"tool_name": "write_file", "tool_input": {"content": "x" * TWO_MB}}
    decision, elapsed, state = emit_one("echo done", envelope=envelope, timeout="10s")
    assert state["last_error"] is None
    assert decision == Decision("context", context="done")
    assert elapsed < 5.0


def test_bus_spawn_failure_is_recorded(emit_one: Emit, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    decision, _, state = emit_one("echo hi", cwd=str(missing))
    assert decision == Decision("allow")
    assert state["last_error"] == f"could not start: working directory {missing} does not exist"


@pytest.mark.parametrize("unusable", ["missing", "file"])
def test_bus_records_that_a_hook_ran_in_its_directory_and_why(
    unusable: str, home: Path, tmp_path: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]
) -> None:
    """A hook with no cwd of its own whose envelope's cwd cannot be used runs in its own
    directory, as the README says, and its record says so and why (it said nothing)."""
    cwd = tmp_path / "elsewhere"
    if unusable == "file":
        cwd.write_text("not a directory")
    write_hook("h", command="pwd -P", event="Stop")
    bus = make_bus()
    record = bus.trigger("h", {"cwd": str(cwd)})
    problem = "is not a directory" if unusable == "file" else "does not exist"
    assert (record.status, record.error) == ("done", None)
    assert record.note == f"ran in the hook's directory: the envelope's cwd {cwd} {problem}"
    assert bus.trigger("h", {"cwd": str(tmp_path)}).note is None


@pytest.mark.timeout(60)
def test_bus_close_cancels_a_running_async_hook(home: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]) -> None:
    """close() must not wait out a hook's 10 minutes: it kills the group and records why."""
    write_hook("slow", command='echo $$ > "$HOOKBUS_HOOK_DIR/pid"; sleep 30', event="Stop")
    bus = make_bus()
    pidfile = home / "hooks" / "slow" / "pid"
    assert bus.emit("Stop", {}) == Decision("allow")
    end = time.monotonic() + 10
    while not pidfile.exists() and time.monotonic() < end:
        time.sleep(0.01)
    started = time.monotonic()
    bus.close(timeout=0.2)
    assert time.monotonic() - started < 10.0
    state = read_state(home, "slow")
    assert state["last_status"] == "error"
    assert state["last_error"] == "cancelled at shutdown"
    assert wait_group_gone(read_pid(pidfile)) == []
