"""Fault injection, admission-webhook style: every way a hook can fail, in every mode, per runner.

One row = one fault x one mode x one runner, fired once through a real HookBus (real bash, a
real HTTP server on 127.0.0.1, no mocks). Each row asserts three things:

1. the decision: sync blocking says deny only for a deny (exit 2, a JSON deny, BLOCK:) and
   fails open otherwise (allow, or the text as context); sync non-blocking never denies but
   keeps context; async allows at once;
2. the bound: emit returned within the hook's timeout + 1 s (async: well under it);
3. the record: state.json and the log line carry the status (sync: allow/deny/context;
   async: done/error) and an error a user can act on ("timed out after 1s", "exited with
   status 127 (command not found)", "step 1 of 1 failed: ...").

Which contract decides depends on the runner: a command hook's exit 2 denies, but a workflow
decides by its final text, so a bash step that exits 2 (or 1, or dies) is a failed step and
the workflow fails open with ``step N of M failed: ...`` recorded (README, "Workflow hooks").

A fault is only survived when nothing of it is left, so each row also checks that no
process its hook started is still alive, with one exception that is a promise of its own: a
process that left the hook's group with setsid cannot be proven to be the hook's, so it is
never signalled. Its row checks that it is still alive after the emit (which returned
without waiting for it), and then ends it itself, by the marker in its environment. After
the table, the module checks that no hook process of the session is alive and that this
process has no more descriptors or threads than it started with.

``make test`` runs a representative subset (every fault, mode and runner at least once);
``make stress`` (HOOKBUS_STRESS=1) runs the whole cross product.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

import pytest

import stresskit
from conftest import processes_with, read_log, read_state
from hookbus import HookBus
from hookbus.merge import NOT_BLOCKING_NOTE
from hookbus.chat_stub import StubChatServer, StubReply
from hookbus.process import BASH
from hookbus.prompts import NO_PROVIDER

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]
Behavior = Literal["allow", "deny", "context"]

HOOK_ID = "faulty"
ENVELOPE = {"tool_name": "bash", "tool_input": {"command": "ls"}, "session": "faults"}
#: Every process a row's hook starts carries this in its environment, with the row's value,
#: so the row can tell its own leftovers from anyone else's.
ROW_MARKER = "HOOKBUS_FAULT_ROW"
#: The hook's timeout for faults that do not hang (the bound is still timeout + 1 s).
QUICK_TIMEOUT = "3s"
#: Faults that hang run under this one, as the brief says.
HANG_TIMEOUT = "1s"
#: The contract's slack on a sync emit: the hook's timeout plus one second.
SLACK_SECONDS = 1.0
#: An async emit only queues the fire: "at once" is this, far under any hook's timeout.
ASYNC_EMIT_SECONDS = 0.5
#: Bounded waits for killed processes to die and finished threads to end.
DIE_WITHIN_SECONDS = 3.0
THREADS_END_WITHIN_SECONDS = 5.0
SCRIPT = '"$HOOKBUS_HOOK_DIR/script.sh"'


# -- what a hook says ------------------------------------------------------------------------


@dataclass(frozen=True)
class Says:
    """What the hook itself decides: its behavior, the reason or context it gives, and the
    parts its recorded error must contain (none: it must record no error)."""

    behavior: Behavior
    text: str | None = None
    error: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        return bool(self.error)


ALLOW = Says("allow")


def fails_open(*error: str) -> Says:
    return Says("allow", error=error)


# -- the faults ------------------------------------------------------------------------------


@dataclass(frozen=True)
class BashFault:
    """A fault of a bash process: the command runner's command, or a workflow's bash step."""

    id: str
    command: str
    #: What the command runner says (the command contract).
    says: Says
    #: What a workflow says when a bash step does this, when that differs (the final-text
    #: contract: a failing step fails open). Its error gets the step's label in front.
    in_a_step: Says | None = None
    files: dict[str, str] = field(default_factory=dict)
    #: Mode bits of the files (0o644: no run bit).
    file_mode: int = 0o755
    timeout: str = QUICK_TIMEOUT
    #: It leaves a process outside the hook's group (setsid), which must be left alone.
    escapes: bool = False


@dataclass(frozen=True)
class PromptFault:
    """A fault at the HTTP level of a prompt hook's provider."""

    id: str
    #: "stub": the chat server answers with ``reply``; "none": no provider configured;
    #: "down": a provider URL where nothing listens.
    provider: Literal["stub", "none", "down"]
    says: Says
    reply: str | StubReply | None = None
    timeout: str = QUICK_TIMEOUT


Fault = BashFault | PromptFault

BASH_FAULTS: list[BashFault] = [
    BashFault("exit-0-text", "echo 'remember to run the tests'; exit 0",
              Says("context", "remember to run the tests")),
    BashFault("exit-0-json-deny", """echo '{"behavior": "deny", "reason": "no ls today"}'; exit 0""",
              Says("deny", "no ls today")),
    BashFault("exit-1", "echo 'cannot reach the linter' >&2; exit 1",
              fails_open("exited with status 1", "cannot reach the linter")),
    BashFault("exit-2", "echo 'protected path' >&2; exit 2",
              Says("deny", "protected path"),
              in_a_step=fails_open("exited with status 2", "protected path")),
    BashFault("exit-127", "no-such-command-3f9a",
              fails_open("exited with status 127 (command not found)", "no-such-command-3f9a")),
    BashFault("kill-9", "kill -9 $$", fails_open("killed by SIGKILL")),
    BashFault("kill-segv", "kill -SEGV $$", fails_open("killed by SIGSEGV")),
    BashFault("timeout", "sleep 30", fails_open(f"timed out after {HANG_TIMEOUT}"), timeout=HANG_TIMEOUT),
    BashFault("stdout-not-json", "echo '{\"behavior\": deny, oops'",
              Says("context", '{"behavior": deny, oops')),
    BashFault("stdout-100MB", "head -c 100000000 /dev/zero",
              fails_open("stdout went over 1 MiB; the process was killed"),
              in_a_step=fails_open("stdout went over 1 MiB; the process was killed")),
    BashFault("stderr-only-exit-1", "echo oops >&2; exit 1", fails_open("exited with status 1: oops")),
    BashFault("stderr-only-exit-0", "echo oops >&2; exit 0", ALLOW),
    BashFault("bad-interpreter", SCRIPT,
              fails_open("bad interpreter"),
              files={"script.sh": "#!/nonexistent/interp\necho never\n"}),
    BashFault("env-no-such-prog", SCRIPT,
              fails_open("exited with status 127 (bad interpreter", "no-such-prog"),
              files={"script.sh": "#!/usr/bin/env no-such-prog\necho never\n"}),
    BashFault("no-run-bit", SCRIPT,
              fails_open("exited with status 126", "not executable", "chmod +x"),
              files={"script.sh": "#!/bin/bash\necho never\n"}, file_mode=0o644),
    BashFault("grandchild-holds-pipe", "(sleep 30 &); echo ok", Says("context", "ok")),
    # It waits until the sleep really is in its own session, so that it is never caught by the
    # kill of the hook's group; then it is left alone, stdout and all.
    BashFault("setsid-grandchild-holds-pipe",
              'setsid sleep 30 & while read -r _ _ _ _ _ sid _ < /proc/$!/stat && [ "$sid" != "$!" ]; do :; done; echo ok',
              Says("context", "ok"), escapes=True),
    BashFault("ignores-sigterm", "trap '' TERM; sleep 30",
              fails_open(f"timed out after {HANG_TIMEOUT}"), timeout=HANG_TIMEOUT),
]

PROMPT_FAULTS: list[PromptFault] = [
    PromptFault("reply-text", "stub", Says("context", "looks fine to me"), reply="looks fine to me"),
    PromptFault("reply-json-deny", "stub", Says("deny", "model says no"),
                reply='{"behavior": "deny", "reason": "model says no"}'),
    PromptFault("reply-block-line", "stub", Says("deny", "rm -rf is not allowed"),
                reply="Thinking about it.\nBLOCK: rm -rf is not allowed"),
    PromptFault("http-500", "stub", fails_open("answered HTTP 500", "model unavailable"),
                reply=StubReply(status=500, text="model unavailable")),
    PromptFault("hang", "stub", fails_open(f"timed out after {HANG_TIMEOUT}"),
                reply=StubReply(hang=True), timeout=HANG_TIMEOUT),
    PromptFault("malformed-reply", "stub", fails_open("malformed reply", "no choices[0].message.content"),
                reply=StubReply(raw_body=b"<html>502 Bad Gateway</html>")),
    PromptFault("reply-over-4MiB", "stub", fails_open("the reply is over 4 MiB"),
                reply=StubReply(raw_body=b'{"choices": "' + b"x" * (5 * 1024 * 1024) + b'"}')),
    PromptFault("no-provider", "none", fails_open(NO_PROVIDER)),
    PromptFault("provider-down", "down", fails_open("cannot reach", "refused")),
]

MODES = ("sync-blocking", "sync-nonblocking", "async")
BASH_RUNNERS = ("command", "workflow", "workflow-2-steps")
RUNNERS = (*BASH_RUNNERS, "prompt")


# -- rows ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    fault: Fault
    mode: str
    runner: str

    @property
    def id(self) -> str:
        return f"{self.runner}/{self.mode}/{self.fault.id}"

    @property
    def timeout_seconds(self) -> float:
        return float(self.fault.timeout.rstrip("s"))

    @property
    def step_label(self) -> str | None:
        """How a workflow names the step that runs the fault."""
        return {"workflow": "step 1 of 1", "workflow-2-steps": "step 2 of 2"}.get(self.runner)

    @property
    def says(self) -> Says:
        """What the hook says: the fault's own verdict for its runner."""
        if isinstance(self.fault, BashFault) and self.step_label is not None:
            return self.fault.in_a_step or self.fault.says
        return self.fault.says

    def spec(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"timeout": self.fault.timeout}
        if self.mode == "async":
            fields["mode"] = "async"
        else:
            fields.update(mode="sync", blocking=self.mode == "sync-blocking")
        if isinstance(self.fault, PromptFault):
            fields["prompt"] = "Is this tool call safe? Answer BLOCK: <reason> if not."
        elif self.runner == "command":
            fields["command"] = self.fault.command
        elif self.runner == "workflow":
            fields["workflow"] = {"steps": [{"bash": self.fault.command}]}
        else:
            fields["workflow"] = {"steps": [{"bash": "echo first-step-ok"}, {"bash": self.fault.command}]}
        return fields

    # What the bus must answer and record, derived from what the hook says and the mode.

    def decision(self) -> tuple[Behavior, str | None]:
        says = self.says
        if self.mode == "async":
            return "allow", None
        if self.mode == "sync-nonblocking" and says.behavior == "deny":
            return "allow", None  # a deny gives no context: nothing of it is applied
        return says.behavior, says.text

    def status(self) -> str:
        if self.mode == "async":
            return "error" if self.says.failed else "done"
        return self.says.behavior  # sync: what the hook said, applied or not

    def note(self) -> str | None:
        if self.mode == "sync-nonblocking" and self.says.behavior == "deny":
            return NOT_BLOCKING_NOTE
        return None


def every_row() -> list[Row]:
    rows = [Row(fault, mode, runner) for fault in BASH_FAULTS for mode in MODES for runner in BASH_RUNNERS]
    rows += [Row(fault, mode, "prompt") for fault in PROMPT_FAULTS for mode in MODES]
    return rows


def fast_rows() -> list[Row]:
    """Every fault at least once, every mode and runner at least once, and each fault in two
    modes: the command runner and the one-step workflow take turns through the modes; the
    two-step workflow gets every third fault."""
    rows: list[Row] = []
    for index, fault in enumerate(BASH_FAULTS):
        rows.append(Row(fault, MODES[index % 3], "command"))
        rows.append(Row(fault, MODES[(index + 1) % 3], "workflow"))
        if index % 3 == 1:
            rows.append(Row(fault, MODES[(index + 2) % 3], "workflow-2-steps"))
    for index, prompt_fault in enumerate(PROMPT_FAULTS):
        rows.append(Row(prompt_fault, MODES[index % 3], "prompt"))
    # The two denies matter most where they can take effect: blocking, for both contracts.
    for fault_id, runner in (("exit-0-json-deny", "command"), ("exit-0-json-deny", "workflow"),
                             ("exit-2", "command"), ("exit-2", "workflow")):
        row = Row(next(f for f in BASH_FAULTS if f.id == fault_id), "sync-blocking", runner)
        if row not in rows:
            rows.append(row)
    return rows


ROWS = every_row() if stresskit.FULL else fast_rows()

assert {row.fault.id for row in ROWS} == {f.id for f in BASH_FAULTS} | {f.id for f in PROMPT_FAULTS}
assert {row.mode for row in ROWS} == set(MODES)
assert {row.runner for row in ROWS} == set(RUNNERS)
assert len({row.id for row in ROWS}) == len(ROWS)

#: The table and the check after it run in one process, one after the other: the baseline
#: is taken before the first row, and what is left is counted after the last (under
#: pytest-xdist, `make test`'s --dist loadgroup keeps the module on one worker, in order).
pytestmark = pytest.mark.xdist_group("test_faults")

#: Where the library does not hold the contract: fault id -> what is wrong (in every mode
#: and runner). Each such row is an xfail(strict=True): a fix makes it fail until the entry
#: is removed from here. Empty: every row holds.
KNOWN_BUGS: dict[str, str] = {}


def params() -> list[Any]:
    params = []
    for row in ROWS:
        marks = []
        if row.fault.id in KNOWN_BUGS:
            marks.append(pytest.mark.xfail(strict=True, reason=f"BUG: {KNOWN_BUGS[row.fault.id]}"))
        params.append(pytest.param(row, id=row.id, marks=marks))
    return params


# -- what a run leaves behind ----------------------------------------------------------------


def end_processes(pids: list[int]) -> None:
    """SIGKILL what a row's hook left outside its group: the test's to clean up."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    """Poll ``predicate`` until it holds or ``seconds`` pass; whether it held."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass
class Baseline:
    descriptors: int
    threads: int


@pytest.fixture(scope="module", autouse=True)
def baseline() -> Iterator[Baseline]:
    """What this process had before the table ran."""
    yield Baseline(stresskit.open_descriptors(), stresskit.thread_count())


# -- the table -------------------------------------------------------------------------------


def unlistened_port() -> socket.socket:
    """A bound socket nobody listens on: connecting to it is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def set_up_prompt(fault: PromptFault, home: Path, stack: ExitStack) -> None:
    if fault.provider == "none":
        return
    if fault.provider == "stub":
        reply = fault.reply
        assert reply is not None
        server = stack.enter_context(StubChatServer(lambda request: reply))
        base_url = server.base_url
    else:
        sock = stack.enter_context(unlistened_port())
        base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    settings = {"prompt_provider": {"base_url": base_url, "model": "stub"}}
    (home / "settings.json").write_text(json.dumps(settings))


def check_error(row: Row, error: str | None) -> None:
    says = row.says
    if not says.failed:
        assert error is None, f"{row.id}: no error expected, got {error!r}"
        return
    assert error, f"{row.id}: an error was expected, none was recorded"
    if row.step_label is not None:
        assert error.startswith(f"{row.step_label} failed: "), f"{row.id}: no step label in {error!r}"
    for part in says.error:
        assert part in error, f"{row.id}: {part!r} is not in the recorded error {error!r}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("row", params())
def test_fault(row: Row, home: Path, write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch) -> None:
    stresskit.FIGURES["faults injected"] += 1
    row_value = f"{row.id}:{uuid.uuid4().hex}"
    monkeypatch.setenv(ROW_MARKER, row_value)
    fault = row.fault

    with ExitStack() as stack:
        if isinstance(fault, PromptFault):
            set_up_prompt(fault, home, stack)
        files = fault.files if isinstance(fault, BashFault) else {}
        write_hook(HOOK_ID, files=files, **row.spec())
        if isinstance(fault, BashFault):
            for name in files:
                (home / "hooks" / HOOK_ID / name).chmod(fault.file_mode)
        bus = make_bus()
        assert HOOK_ID in bus.snapshot.hooks, f"the hook did not load: {bus.problems}"

        started = time.monotonic()
        decision = bus.emit("PreToolUse", ENVELOPE)
        elapsed = time.monotonic() - started
        bus.close()  # async fires finish (or are cut) and every record reaches the disk

    # (1) the decision
    behavior, text = row.decision()
    assert decision.behavior == behavior, f"{row.id}: {decision}"
    if behavior == "deny":
        assert decision.reason == f"hook {HOOK_ID!r} denied: {text}"
        assert decision.context is None
    elif behavior == "context":
        assert decision.context == text
        assert decision.reason is None
    else:
        assert decision.context is None and decision.reason is None, f"{row.id}: {decision}"

    # (2) the bound
    if row.mode == "async":
        assert elapsed < ASYNC_EMIT_SECONDS, f"{row.id}: an async emit took {elapsed:.2f}s"
    else:
        bound = row.timeout_seconds + SLACK_SECONDS
        assert elapsed <= bound, f"{row.id}: emit took {elapsed:.2f}s, over {bound:.0f}s"

    # (3) the record, in the log and in state.json
    entries = [entry for entry in read_log(home) if entry["hook_id"] == HOOK_ID]
    assert len(entries) == 1, entries
    entry = entries[0]
    assert entry["mode"] == ("async" if row.mode == "async" else "sync")
    assert entry["status"] == row.status(), f"{row.id}: {entry}"
    assert entry["decision"]["behavior"] == row.says.behavior, f"{row.id}: {entry}"
    assert entry.get("note") == row.note(), f"{row.id}: {entry}"
    check_error(row, entry["error"])
    state = read_state(home, HOOK_ID)
    last = state["recent_runs"][-1]
    assert len(state["recent_runs"]) == 1
    assert state["last_status"] == last["status"] == row.status()
    assert last["async"] is (row.mode == "async")
    assert last["event"] == "PreToolUse"
    assert state["last_error"] == last["error"] == entry["error"]

    # ... and nothing the hook started outlives the row, but what escaped its group, which
    # must be left alone (the row ends it itself).
    if isinstance(fault, BashFault) and fault.escapes:
        escaped = processes_with(ROW_MARKER, row_value)
        assert len(escaped) == 1, f"{row.id}: the escaped process was signalled: {escaped}"
        end_processes(escaped)
    assert wait_for(lambda: not processes_with(ROW_MARKER, row_value), DIE_WITHIN_SECONDS), (
        f"{row.id}: processes left alive: {processes_with(ROW_MARKER, row_value)}"
    )
    stresskit.FIGURES["faults survived"] += 1


# -- after the table -------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_nothing_is_left_behind(baseline: Baseline) -> None:
    """No hook process of the session is alive; no descriptor or thread more than at start."""
    wait_for(lambda: not stresskit.live_hook_processes(), DIE_WITHIN_SECONDS)
    leftovers = stresskit.live_hook_processes()
    wait_for(lambda: stresskit.thread_count() <= baseline.threads, THREADS_END_WITHIN_SECONDS)
    wait_for(lambda: stresskit.open_descriptors() <= baseline.descriptors, THREADS_END_WITHIN_SECONDS)
    extra_threads = max(0, stresskit.thread_count() - baseline.threads)
    extra_descriptors = max(0, stresskit.open_descriptors() - baseline.descriptors)
    stresskit.FIGURES["processes left over"] += len(leftovers)
    stresskit.FIGURES["fds left over"] += extra_descriptors
    stresskit.FIGURES["threads left over"] += extra_threads
    assert leftovers == [], f"hook processes still alive: {leftovers}"
    assert extra_descriptors == 0, f"{extra_descriptors} descriptors more than at the start: {sorted(os.listdir('/proc/self/fd'))}"
    assert extra_threads == 0, f"{extra_threads} threads more than at the start"
