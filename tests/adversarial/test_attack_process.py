"""Attacks on process supervision (hookbus.process) and on what a workflow hands a bash step.

- Promise 6, "no process that a hook did not start is ever signalled": a hook escapes its
  process group with setsid and keeps our pipes open, while another thread of this process
  forks a stranger that has not exec'd yet (a sibling hook's bash, the embedder's own
  subprocess). Between fork and exec the stranger holds a copy of every descriptor we have,
  our pipes included, so anything that looks for "who holds our pipe" finds it too. It
  must survive and its program must run.
- Promise 1, "a blocking hook's deny is never lost to a hostile hook or to load": the same
  escape must not kill the subprocess a blocking prompt hook's provider runs, nor, under
  concurrent emits, a deny hook's bash; an embedder with over 1,024 descriptors open must
  not lose a deny to select(2); and a workflow whose first step prints 140,000 bytes (70,000
  characters), or whose environment is crowded under a small ARG_MAX, must still run its
  second step, which denies.
- Promise 3, the deadline holds: a hook's child that moves itself out of its process group
  is still stopped at the timeout and at close(); and a hook's timeout may be as large as
  Go's maximum duration (about 292 years) without any poll, select or wait overflowing.
"""

from __future__ import annotations

import os
import signal
from json import loads as json_loads
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import FIGURES, attack, scale
from conftest import HookWriter, is_alive, processes_with, read_log, read_state
from hookbus import HookBus, hookimpl
from hookbus.decision import Decision
from hookbus.process import run_bash, run_process
from hookbus.prompts import PromptError, PromptRequest, PromptResult

Maker = Callable[..., HookBus]

#: Every process a test's hooks start carries this in its environment (hooks inherit the
#: bus's environment), so the test can find and end its own escapees, and nothing else.
MARKER = "HOOKBUS_ATTACK_PROCESS"

#: A generous "did not hang" bound: the escapee sleeps far longer than this.
PROMPT_SECONDS = 10.0
ESCAPEE_SLEEP = "60"


def end_processes_with(marker: str, value: str, within: float = 10.0) -> None:
    """SIGKILL this test's own escapees (found by the marker only they carry), and wait
    until they are gone: an escapee is the test's to clean up, never the library's."""
    deadline = time.monotonic() + within
    while True:
        left = processes_with(marker, value)
        if not left:
            return
        assert time.monotonic() < deadline, f"escapees would not die: {left}"
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Mark every process started from here on; end the marked ones at teardown."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, value)
    yield value
    end_processes_with(MARKER, value)


def pipe_inodes(pid: int | str) -> set[str]:
    """The pipes a process holds, as /proc names them (``pipe:[1234]``)."""
    directory = f"/proc/{pid}/fd"
    found = set()
    for descriptor in os.listdir(directory):
        try:
            target = os.readlink(f"{directory}/{descriptor}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            found.add(target)
    return found


def wait_for_file(path: Path, within: float = PROMPT_SECONDS) -> str:
    deadline = time.monotonic() + within
    while True:
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = ""
        if text.endswith("\n"):
            return text.strip()
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.005)


def wait_for_file_text(path: Path, within: float = PROMPT_SECONDS) -> str:
    deadline = time.monotonic() + within
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} was never written"
        time.sleep(0.01)
    return path.read_text()


def escaping_command(pidfile: Path, then: str) -> str:
    """A hook that starts a process in a new session that keeps stdout and stderr (no
    redirect), waits until that process really is out of the hook's group (it writes its
    pid after setsid), and then does ``then``."""
    return (
        f"setsid bash -c 'echo $$ > {pidfile}.tmp && mv {pidfile}.tmp {pidfile}; exec sleep {ESCAPEE_SLEEP}' & "
        f"until [ -s {pidfile} ]; do sleep 0.01; done; {then}"
    )


def run_held(argv: list[str], pidfile: Path, hold: float) -> tuple[int, bytes]:
    """What an embedder may do on any thread: start a program with a ``preexec_fn`` (one that
    sets rlimits or drops privileges, say). Here it writes the child's pid to ``pidfile`` and
    holds the child ``hold`` seconds between fork and exec, where it has a copy of every
    descriptor of this process (close_fds only happens after preexec_fn). Returns the exit
    status and stdout of the program."""

    def before_exec() -> None:  # runs in the forked child: plain system calls only
        fd = os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)
        time.sleep(hold)

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, close_fds=True, preexec_fn=before_exec)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


class Stranger:
    """``run_held(["/bin/echo", "survived"], ...)`` on a thread of its own: the embedder's
    subprocess, started while a hook runs."""

    def __init__(self, pidfile: Path, hold: float) -> None:
        self.pidfile = pidfile
        self.hold = hold
        self.result: tuple[int, bytes] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="stranger")

    def _run(self) -> None:
        try:
            self.result = run_held(["/bin/echo", "survived"], self.pidfile, self.hold)
        except BaseException as exc:  # reported by the test's thread
            self.error = exc

    def start(self) -> int:
        """Fork it; return its pid once it is inside its fork-to-exec window."""
        self.thread.start()
        return int(wait_for_file(self.pidfile))

    def finish(self) -> tuple[int, bytes]:
        self.thread.join(60)
        assert not self.thread.is_alive(), "the stranger never finished"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


# -- promise 6: strangers are never signalled -----------------------------------------------


@pytest.mark.timeout(60)
def test_a_stranger_forked_while_a_hook_escapes_is_never_signalled(tmp_path: Path, marker: str) -> None:
    """run_bash of a hook whose setsid'd grandchild keeps the pipes, while another thread's
    fresh fork (not yet exec'd) holds copies of all our descriptors. The run ends
    promptly, the stranger survives and runs its program, the escapee is left alone."""
    with attack(6, "a stranger in its fork-to-exec window is not killed as a pipe holder"):
        escapee_file, go = tmp_path / "escapee", tmp_path / "go"
        command = escaping_command(escapee_file, f"until [ -e {go} ]; do sleep 0.01; done; echo done")
        outcome: dict[str, Any] = {}

        def hook() -> None:
            started = time.monotonic()
            outcome["result"] = run_bash(
                command, input=b"", cwd=tmp_path, env=dict(os.environ), deadline=started + 30
            )
            outcome["elapsed"] = time.monotonic() - started

        runner = threading.Thread(target=hook, name="hook")
        runner.start()
        try:
            escapee = int(wait_for_file(escapee_file))
            ours = pipe_inodes("self")  # the hook's pipes are among them
            stranger = Stranger(tmp_path / "stranger", hold=1.5)
            stranger_pid = stranger.start()
            # The window is real: the stranger holds every pipe we held when it forked.
            held = pipe_inodes(stranger_pid)
            assert ours <= held, f"the stranger does not hold our pipes: {sorted(ours - held)}"
            go.touch()  # the hook exits now, with the stranger still before its exec
            runner.join(PROMPT_SECONDS + 5)
            assert not runner.is_alive(), "the run waited for the escapee"
            returncode, output = stranger.finish()
        finally:
            go.touch()
            runner.join(30)

        result = outcome["result"]
        assert (result.returncode, result.stdout) == (0, b"done\n")
        assert outcome["elapsed"] < PROMPT_SECONDS, "the run waited for the escapee"
        assert (returncode, output) == (0, b"survived\n"), (
            f"a process the hook did not start was signalled: it ended with {returncode}"
        )
        # Not provably the hook's own any more, so left alone: the test ends it (fixture).
        assert is_alive(escapee), "the escapee outside the hook's group was signalled"


@pytest.mark.timeout(60)
def test_the_embedders_subprocess_survives_an_emit_whose_hook_escapes(
    tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Maker, marker: str
) -> None:
    """The same through a bus: the daemon starts a subprocess of its own while a sync hook
    that escapes with setsid is being decided."""
    with attack(6, "the embedder's own subprocess survives a hook's escapee"):
        escapee_file, go = tmp_path / "escapee", tmp_path / "go"
        write_hook(
            "escapes",
            mode="sync",
            blocking=True,
            timeout="30s",
            command=escaping_command(escapee_file, f"until [ -e {go} ]; do sleep 0.01; done; exit 2"),
        )
        bus = make_bus()
        outcome: dict[str, Decision] = {}
        emitter = threading.Thread(
            target=lambda: outcome.setdefault("decision", bus.emit("PreToolUse", {"tool_name": "bash"}))
        )
        emitter.start()
        try:
            escapee = int(wait_for_file(escapee_file))
            stranger = Stranger(tmp_path / "stranger", hold=1.5)
            stranger.start()
            go.touch()
            emitter.join(PROMPT_SECONDS + 5)
            assert not emitter.is_alive(), "the emit waited for the escapee"
            returncode, output = stranger.finish()
        finally:
            go.touch()
            emitter.join(30)
        bus.close()  # state.json is written in the background
        assert outcome["decision"].behavior == "deny"
        assert (returncode, output) == (0, b"survived\n"), (
            f"the embedder's subprocess was signalled by hookbus: it ended with {returncode}"
        )
        assert is_alive(escapee)
        assert read_state(home, "escapes")["last_error"] is None


# -- promise 1: a deny is never lost to a sibling's escapee, nor to many descriptors ------


class SubprocessJudge:
    """The embedder's prompt provider: it answers a prompt by running a program of its own
    (with a ``preexec_fn``, as above), once the escaping hook of the same emit is running."""

    def __init__(self, escapee_file: Path, forked_file: Path) -> None:
        self.escapee_file = escapee_file
        self.forked_file = forked_file
        self.statuses: list[int] = []

    @hookimpl
    def hookbus_run_prompt(self, request: PromptRequest) -> PromptResult:
        wait_for_file(self.escapee_file)  # the sibling hook's pipes exist now
        status, out = run_held(["/bin/echo", "BLOCK: the judge says no"], self.forked_file, hold=1.5)
        self.statuses.append(status)
        if status != 0:
            raise PromptError(f"the judge's program ended with status {status}")
        return PromptResult(out.decode())


@pytest.mark.timeout(60)
def test_a_prompt_hooks_deny_survives_a_sibling_hook_that_escapes(
    tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Maker, marker: str
) -> None:
    """One emit, two sync hooks: a blocking prompt hook whose provider (the embedder's)
    answers BLOCK through a subprocess, and a hook that escapes with setsid and exits while
    that subprocess is between fork and exec. The deny must stand."""
    with attack(1, "a sibling's setsid escapee does not kill the judge of a blocking prompt hook"):
        escapee_file, forked_file = tmp_path / "escapee", tmp_path / "forked"
        judge = SubprocessJudge(escapee_file, forked_file)
        write_hook("judge", mode="sync", blocking=True, timeout="30s", prompt="Is this safe?")
        write_hook("escapes", mode="sync", timeout="30s",
                   command=escaping_command(escapee_file, f"until [ -e {forked_file} ]; do sleep 0.01; done; echo escaped"))
        bus = make_bus(plugins=[judge])
        started = time.monotonic()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        elapsed = time.monotonic() - started
        bus.close()
        assert decision.behavior == "deny", (decision, read_state(home, "judge")["last_error"])
        assert judge.statuses == [0], f"the judge's program was killed: statuses {judge.statuses}"
        assert decision.reason == "hook 'judge' denied: the judge says no"
        assert decision.context == "escaped"
        assert elapsed < PROMPT_SECONDS
        assert is_alive(int(wait_for_file(escapee_file)))


DENY_REASON = "denied under load"


@pytest.mark.timeout(180)
def test_concurrent_denies_survive_hooks_that_escape(
    home: Path, write_hook: HookWriter, make_bus: Maker, marker: str
) -> None:
    """Threads emit PreToolUse for ``rm``, which a sync blocking hook denies (``exit 2``),
    while other threads emit PreToolUse for ``esc``, whose sync hook leaves a setsid'd
    grandchild holding stdout. Every ``rm`` must come back denied, with the hook's reason.

    Each deny hook's bash is, for a moment after its fork, a holder of every pipe this
    process has open, the escaping hook's included: anything that kills "whoever holds our
    pipe" kills it now and then, and that deny fails open as "killed by SIGKILL". Before the
    fix this lost 1 to 16 denies in every 4-second run here (2 cores)."""
    with attack(1, "setsid escapees beside concurrent emits do not lose denies"):
        write_hook("deny", matcher="rm", mode="sync", blocking=True, timeout="30s",
                   command=f"echo '{DENY_REASON}' >&2; exit 2")
        escapes = (
            "setsid sleep 2 & "
            'while read -r _ _ _ _ _ sid _ < /proc/$!/stat && [ "$sid" != "$!" ]; do :; done; echo escaped'
        )
        write_hook("escapes", matcher="esc", mode="sync", timeout="30s", command=escapes)
        bus = make_bus()
        seconds = scale(4, 40)
        lost: list[Decision] = []
        odd_escapes: list[Decision] = []
        counts = {"denies": 0, "escapes": 0}
        lock = threading.Lock()
        stop_at = time.monotonic() + seconds

        def deny_until_done() -> None:
            while time.monotonic() < stop_at:
                decision = bus.emit("PreToolUse", {"tool_name": "rm", "tool_input": {}})
                with lock:
                    counts["denies"] += 1
                    if (decision.behavior, decision.reason) != ("deny", f"hook 'deny' denied: {DENY_REASON}"):
                        lost.append(decision)

        def escape_until_done() -> None:
            while time.monotonic() < stop_at:
                decision = bus.emit("PreToolUse", {"tool_name": "esc", "tool_input": {}})
                with lock:
                    counts["escapes"] += 1
                    if decision.context != "escaped":
                        odd_escapes.append(decision)

        workers = [threading.Thread(target=deny_until_done) for _ in range(4)]
        workers += [threading.Thread(target=escape_until_done) for _ in range(12)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(seconds + 60)
        assert not any(worker.is_alive() for worker in workers), "an emit hung"
        bus.close()
        FIGURES["promise 1: denies beside setsid escapees"] += counts["denies"]
        FIGURES["promise 1: denies beside setsid escapees, lost"] += len(lost)
        errors = sorted({entry["error"] for entry in read_log(home) if entry["hook_id"] == "deny" and entry["error"]})
        assert counts["denies"] > 0 and counts["escapes"] > 0, counts
        assert not lost, f"{len(lost)} of {counts['denies']} denies lost; the deny hook's errors: {errors}"
        assert not odd_escapes, odd_escapes[:3]


#: A hook's program that leaves its whole decision in the pipe when it exits: it grows its
#: stdout pipe to 1 MiB and writes a deny padded past several reads in one go.
BIG_DENY = """
import fcntl, json, os
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
data = memoryview(json.dumps({"behavior": "deny", "reason": "many fds", "pad": "x" * 600_000}).encode())
while data:
    data = data[os.write(1, data):]
os._exit(0)
"""


@pytest.mark.timeout(60)
def test_denies_hold_in_a_daemon_with_over_a_thousand_descriptors(
    home: Path, write_hook: HookWriter, make_bus: Maker
) -> None:
    """An embedder with over 1,024 descriptors open (connections, files): a hook's pipes
    get numbers select(2) cannot take. A JSON deny left in the pipe at exit must be read
    whole, and a grandchild holding the pipe must not turn the run into an error."""
    with attack(1, "pipes numbered past 1024 lose no deny"):
        write_hook("big", mode="sync", blocking=True, timeout="30s",
                   command=f"(sleep 30 &); exec {sys.executable} -c '{BIG_DENY}'")
        bus = make_bus()
        fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
        try:
            assert max(fillers) > 1024
            decisions = [bus.emit("PreToolUse", {"tool_name": "bash"}) for _ in range(3)]
        finally:
            for fd in fillers:
                os.close(fd)
        bus.close()
        errors = [entry["error"] for entry in read_log(home)]
        assert [d.reason for d in decisions] == ["hook 'big' denied: many fds"] * 3, (decisions, errors)


# -- promise 1: a workflow's next step always starts ----------------------------------------


def block_after_wide_output(character: str, count: int) -> dict[str, Any]:
    """Step 1 prints ``count`` times ``character``; step 2, which must start, denies."""
    return {
        "steps": [
            {"name": "wide", "bash": f"printf '%*s' {count} '' | sed 's/ /{character}/g'"},
            {"name": "veto", "bash": "echo 'BLOCK: second step ran'"},
        ]
    }


@pytest.mark.timeout(60)
def test_a_workflow_deny_survives_a_first_step_of_wide_characters(
    home: Path, write_hook: HookWriter, make_bus: Maker
) -> None:
    """70,000 × "ж" is 140,000 bytes of UTF-8: past the kernel's 128 KiB for one
    environment string. Cut by characters, HOOKBUS_PREVIOUS_OUTPUT kept the second step from
    starting (E2BIG), and the workflow failed open: its BLOCK was lost."""
    with attack(1, "a first step's 140,000 bytes of 2-byte characters do not stop the veto step"):
        write_hook("wf", mode="sync", blocking=True, timeout="30s", workflow=block_after_wide_output("ж", 70_000))
        bus = make_bus()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        bus.close()  # state.json is written in the background
        state = read_state(home, "wf")
        assert (decision.behavior, decision.reason) == ("deny", "hook 'wf' denied: second step ran"), state["last_error"]
        assert state["last_error"] is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("character", ["😀", "ж", "€"])
def test_the_previous_output_is_cut_by_bytes_on_a_character_boundary(
    character: str, tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Maker
) -> None:
    """Emoji (4 bytes), "ж" (2) and "€" (3) straddling the cut at every offset: the next
    step gets valid UTF-8, a prefix of the output, within the byte cap, short of it by less
    than one character; and it runs."""
    from hookbus_workflow import MAX_PREVIOUS_OUTPUT_BYTES

    with attack(1, f"a {len(character.encode())}-byte character at the cut of HOOKBUS_PREVIOUS_OUTPUT"):
        width = len(character.encode())
        for offset in range(width + 1):
            seen = tmp_path / f"seen-{offset}"
            padding = MAX_PREVIOUS_OUTPUT_BYTES - width - offset + 1
            output = "a" * padding + character * 40
            hook_id = f"cut-{offset}"
            write_hook(hook_id, mode="sync", blocking=True, timeout="30s", workflow={"steps": [
                {"bash": f"printf '%*s' {padding} '' | tr ' ' a; printf '%s' '{character * 40}'"},
                {"bash": f'printf "%s" "$HOOKBUS_PREVIOUS_OUTPUT" > {seen}; echo "BLOCK: ran"'},
            ]})
        bus = make_bus()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        assert decision.behavior == "deny", decision
        assert decision.denied_by == tuple(f"cut-{offset}" for offset in range(width + 1))
        for offset in range(width + 1):
            raw = (tmp_path / f"seen-{offset}").read_bytes()
            text = raw.decode("utf-8")  # strict: a split character raises here
            output = "a" * (MAX_PREVIOUS_OUTPUT_BYTES - width - offset + 1) + character * 40
            assert output.startswith(text)
            assert len(raw) <= MAX_PREVIOUS_OUTPUT_BYTES
            assert len(raw) > MAX_PREVIOUS_OUTPUT_BYTES - width, (offset, len(raw))


#: Run by a child Python whose stack limit is 256 KiB, which makes the kernel's cap on all
#: of exec's strings (ARG_MAX) its floor of 128 KiB, with 60 KB of the environment taken.
SMALL_ARG_MAX = """
import json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_STACK, (256 * 1024, resource.getrlimit(resource.RLIMIT_STACK)[1]))
from hookbus import HookBus
with HookBus(Path(sys.argv[1])) as bus:
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
state = json.loads((Path(sys.argv[1]) / "hooks" / "wf" / "state.json").read_text())
print(json.dumps({"behavior": decision.behavior, "reason": decision.reason, "error": state["last_error"]}))
"""


@pytest.mark.timeout(60)
def test_a_workflow_deny_survives_a_small_arg_max(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    """Under a small stack limit the environment and argv together get 128 KiB: the
    previous output gets what is left, so the next step still starts."""
    import json

    with attack(1, "a crowded environment under a small ARG_MAX does not stop the veto step"):
        write_hook("wf", mode="sync", blocking=True, timeout="30s", workflow=block_after_wide_output("x", 100_000))
        env = {**os.environ, **{f"FILLER_{index}": "f" * 20_000 for index in range(3)}}
        done = subprocess.run(
            [sys.executable, "-c", SMALL_ARG_MAX, str(home)],
            env=env, capture_output=True, text=True, timeout=50,
        )
        assert done.returncode == 0, done.stderr
        said = json_loads(done.stdout)
        assert said == {"behavior": "deny", "reason": "hook 'wf' denied: second step ran", "error": None}, said


# -- promise 3: a child that leaves its group ---------------------------------------------


def leave_group_command(flag: Path) -> str:
    """A hook whose child (bash exec'd into Python) moves itself into this process's own
    process group, where a kill of the hook's group cannot reach it, and sleeps."""
    program = (
        "import os, time; "
        f"os.setpgid(0, {os.getpgid(0)}); open({str(flag)!r}, 'w').write('moved'); time.sleep(60)"
    )
    return f"exec {sys.executable} -c {program!r}"


@pytest.mark.timeout(60)
def test_a_child_that_leaves_its_group_still_times_out(
    tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Maker, marker: str
) -> None:
    with attack(3, "a hook's child moved into the daemon's process group times out"):
        flag = tmp_path / "moved"
        write_hook("h", mode="sync", blocking=True, timeout="1s", command=leave_group_command(flag))
        bus = make_bus()
        started = time.monotonic()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        elapsed = time.monotonic() - started
        bus.close()
        assert flag.read_text() == "moved"
        assert decision == Decision("allow")
        assert elapsed < 1.0 + 1.0, f"the emit took {elapsed:.1f}s"
        assert read_state(home, "h")["last_error"] == "timed out after 1s"
        assert processes_with(MARKER, marker) == [], "the child outlived its timeout"


@pytest.mark.timeout(60)
def test_a_child_that_leaves_its_group_is_cancelled_at_close(
    tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Maker, marker: str
) -> None:
    """close() cancels a running async hook; a kill of its group alone would miss the child
    and leave it running for its whole 10 minutes."""
    with attack(3, "a hook's child moved into the daemon's process group is cancelled at close"):
        flag = tmp_path / "moved"
        write_hook("h", event="Stop", command=leave_group_command(flag))
        bus = make_bus()
        bus.emit("Stop", {})
        wait_for_file_text(flag)
        started = time.monotonic()
        bus.close(timeout=0.2)
        assert time.monotonic() - started < PROMPT_SECONDS
        assert read_state(home, "h")["last_error"] == "cancelled at shutdown"
        deadline = time.monotonic() + PROMPT_SECONDS
        while processes_with(MARKER, marker):
            assert time.monotonic() < deadline, "the child outlived close()"
            time.sleep(0.02)


# -- promise 3: a deadline ~292 years away --------------------------------------------------


FAR = threading.TIMEOUT_MAX  # Go's maximum duration, the largest timeout a hook may have


@pytest.mark.timeout(60)
@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "no-pidfd"])
@pytest.mark.parametrize("deadline", ["timeout-max", "infinite"])
def test_a_deadline_centuries_away_never_overflows(
    deadline: str, pidfd: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str
) -> None:
    """Every wait of a run (poll for output, the exit, the group's grace, pipes held by a
    grandchild or an escapee, a cancel) under a deadline of TIMEOUT_MAX from now, or none
    at all (infinity, which a third-party runner may pass)."""
    from hookbus import process
    from hookbus.runners import CancelToken

    if not pidfd:  # kernels before 5.3: the exit is polled
        monkeypatch.setattr(process, "_open_pidfd", lambda pid: None)
    with attack(3, f"a {deadline} deadline ({'with' if pidfd else 'without'} pidfd)"):
        far = time.monotonic() + FAR if deadline == "timeout-max" else float("inf")

        def run(command: str, cancel: CancelToken | None = None) -> Any:
            return run_bash(command, input=b"x" * 200_000, cwd=tmp_path, env=dict(os.environ),
                            deadline=far, cancel=cancel)

        assert (run("cat >/dev/null; echo ok").stdout) == b"ok\n"
        assert run("(sleep 30 &); echo left").stdout == b"left\n"
        assert run(escaping_command(tmp_path / f"escapee-{deadline}-{pidfd}", "echo escaped")).stdout == b"escaped\n"
        token = CancelToken()
        timer = threading.Timer(0.2, token.cancel, args=("stop",))
        timer.start()
        try:
            assert run("sleep 30", cancel=token).cancelled
        finally:
            timer.join(10)
        result = run_process(["/bin/sh", "-c", "exit 2"], input=b"", cwd=tmp_path, env=dict(os.environ), deadline=far)
        assert result.returncode == 2


@pytest.mark.timeout(60)
def test_hooks_with_the_largest_timeout_decide(home: Path, write_hook: HookWriter, make_bus: Maker) -> None:
    """A command hook and a workflow hook with Go's largest duration as their timeout."""
    with attack(3, "hooks whose timeout is 2562047h47m16s"):
        largest = "2562047h47m16s"
        write_hook("cmd", mode="sync", blocking=True, timeout=largest, command="echo 'no' >&2; exit 2")
        bus = make_bus()
        assert bus.emit("PreToolUse", {"tool_name": "bash"}).reason == "hook 'cmd' denied: no"
        write_hook("cmd", mode="sync", blocking=True, timeout=largest,
                   workflow={"steps": [{"bash": "echo one"}, {"bash": "echo 'BLOCK: wf'"}]})
        bus = make_bus()
        assert bus.emit("PreToolUse", {"tool_name": "bash"}).reason == "hook 'cmd' denied: wf"
