"""Promise 9: every bound holds in bytes, the same on every path.

A host (or a client of ``hookbus serve``) sends what it likes: envelopes of a quarter of a
megabyte faster than the async hooks they fire can finish, thread ids of a megabyte on every
Stop; hooks and runners answer with a megabyte of reason. Every queue and table that grows
with what is sent is bounded in bytes, not only in entries, and what does not fit is
recorded or counted, never silently dropped, and never makes an emit wait for room.

- The async queue (``hookbus.workers.MAX_ASYNC_BYTES``, 64 MiB by estimate, and
  ``MAX_ASYNC_JOBS``), in process and through a real ``hookbus serve``: RSS grows by less
  than the bound plus ``SLACK_MIB``, where unbounded it grew by some 200 MiB; a fire past it
  is recorded as not run.
- The Stop memory (``hookbus.dialects.stopguard``): a fixed-size digest per remembered thread, so
  megabyte ids leave nothing behind, and 10,000 of them hold at most ``MAX_BYTES``.
- The recorders' BackgroundWriter (``hookbus.recording.MAX_QUEUE_BYTES``) behind a storage
  that is stuck, and the built-in recorder's state.json queue, which keeps no decision.

Memory is measured as the kernel sees it (``VmRSS`` of a child process doing the work) or
with tracemalloc, never with wall-clock figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import pytest

from attackkit import FIGURES, attack
from conftest import read_log
from hookbus import HookBus
from hookbus.serve.client import Client
from hookbus.decision import Decision
from hookbus.recording import BackgroundWriter
from hookbus.records import RunRecord, utc_timestamp
from servekit import Served, environment

pytestmark = pytest.mark.timeout(180)

Writer = Callable[..., Path]
MiB = 1 << 20
#: What the interpreter and malloc keep around beyond what a bound holds (buffers of the
#: requests being parsed, arenas not handed back): added to each bound before comparing.
SLACK_MIB = 32
#: The async queue's bound, as the README states it (hookbus.workers.MAX_ASYNC_BYTES).
ASYNC_BOUND_MIB = 64
#: A BackgroundWriter's, as the README states it (hookbus.recording.MAX_QUEUE_BYTES).
WRITER_BOUND_MIB = 64
QUARTER_MIB = 256 * 1024
FIRES = 400
#: An async hook that outlives the test's emits by far: nothing drains while they come.
SLOW = {"mode": "async", "command": "exec sleep 60", "timeout": "2m"}


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def run_child(script: str, *args: str, timeout: float = 150) -> dict[str, Any]:
    """``script`` in a fresh interpreter (its memory is its own), answering one JSON line."""
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    answer: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    answer["stderr"] = result.stderr
    return answer


def check_every_fire_recorded(home: Path, fires: int) -> int:
    """Every fire of ``slow`` (and the warm-up's) is in the log: run, cancelled at close, or
    turned away with the overload error. Returns how many were turned away."""
    slow = [entry for entry in read_log(home) if entry["hook_id"] == "slow"]
    assert len(slow) == fires + 1, f"{len(slow)} of {fires} fires and the warm-up's recorded"
    refused = [entry for entry in slow if (entry["error"] or "").startswith("not run: the async queue is full (")]
    for entry in refused:
        assert entry["status"] == "error" and entry["mode"] == "async", entry
        assert entry["error"].endswith("waiting or running); the bus is overloaded"), entry["error"]
    return len(refused)


# -- the async queue --------------------------------------------------------------------------

IN_PROCESS = """
    import gc, json, sys, time
    from pathlib import Path
    from hookbus import HookBus

    def rss_kib():
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

    home, shape, fires = sys.argv[1], sys.argv[2], int(sys.argv[3])
    bus = HookBus(home, async_workers=2)

    def envelope(index):
        # A quarter of a megabyte of JSON either way: text, or objects ("[{},{},...]"), whose
        # mapping is some 25 times its JSON.
        if shape == "text":
            return {"tool_name": "write_file", "tool_input": {"content": f"{index:06d}" + "a" * 262144}}
        return {"tool_name": "write_file", "tool_input": {"items": [{} for _ in range(87381)]}}

    bus.emit("PostToolUse", {"tool_name": "warm-up"})  # the pool and the log exist
    gc.collect()
    before = rss_kib()
    started = time.monotonic()
    for index in range(fires):
        bus.emit("PostToolUse", envelope(index))
    emitting = time.monotonic() - started
    gc.collect()
    after = rss_kib()
    bus.interrupt("the test is over")
    bus.close(timeout=0)
    print(json.dumps({"before": before, "after": after, "emitting": emitting}))
"""


@pytest.mark.parametrize(("shape", "fires"), [("text", FIRES), ("objects", 40)])
def test_async_fires_faster_than_their_hooks_stay_within_the_bound_in_process(
    shape: str, fires: int, home: Path, write_hook: Writer
) -> None:
    with attack(9, f"{fires} emits of a 256 KiB envelope ({shape}) for a slow async hook, in process"):
        write_hook("slow", event="PostToolUse", **SLOW)
        answer = run_child(IN_PROCESS, str(home), shape, str(fires))
        grown_mib = (answer["after"] - answer["before"]) / 1024
        FIGURES[f"async queue, {fires} x 256 KiB ({shape}) in process: RSS growth (MiB)"] = round(grown_mib)
        # Unbounded, each fire kept its envelope: +200 MiB of text, +250 MiB of objects.
        assert grown_mib < ASYNC_BOUND_MIB + SLACK_MIB, f"RSS grew by {grown_mib:.0f} MiB"
        # Not one emit waited for room: a wait would have been the hook's 60 s.
        assert answer["emitting"] < 30, f"{fires} emits took {answer['emitting']:.1f} s"
        # Every fire recorded, none silently dropped: the overflow as not run, with why.
        assert check_every_fire_recorded(home, fires) >= 1
        assert "the async queue is full" in answer["stderr"]  # and said on the hookbus logger


def test_async_fires_through_hookbus_serve_stay_within_the_bound(home: Path, write_hook: Writer) -> None:
    with attack(9, f"{FIRES} emits of a 256 KiB envelope through hookbus serve, slow async hook"):
        write_hook("slow", event="PostToolUse", **SLOW)
        env = environment(HOOKBUS_SOCKET=None, VIX_HOME=None)
        with Served(home, env=env) as served:
            path = served.wait_ready()
            with Client(path) as client:
                client.emit("PostToolUse", {"tool_name": "warm-up"})
                before = rss_kib(served.process.pid)
                for index in range(FIRES):
                    content = f"{index:06d}" + "a" * QUARTER_MIB
                    answer = client.emit("PostToolUse", {"tool_name": "write_file", "tool_input": {"content": content}})
                    assert answer == {"behavior": "allow"}  # answered at once, never held
                after = rss_kib(served.process.pid)
            grown_mib = (after - before) / 1024
            FIGURES[f"async queue, {FIRES} x 256 KiB through serve: RSS growth (MiB)"] = round(grown_mib)
            served.stop()  # SIGTERM: running hooks get 10 s, then are killed; all recorded
        assert grown_mib < ASYNC_BOUND_MIB + SLACK_MIB, f"the server's RSS grew by {grown_mib:.0f} MiB"
        assert check_every_fire_recorded(home, FIRES) >= 1


# -- the Stop memory --------------------------------------------------------------------------


def test_megabyte_thread_ids_leave_nothing_behind_in_the_stop_memory(home: Path, write_hook: Writer) -> None:
    with attack(9, "32 Stops with distinct 1 MiB thread ids, each answered continue_with"):
        write_hook(
            "gate", event="Stop", mode="sync",
            command="cat >/dev/null; echo '{\"decision\": \"block\", \"reason\": \"run the tests\"}'",
        )
        with HookBus(home) as bus:
            assert bus.emit("Stop", {"thread_id": "warm-up"}).continue_with == "run the tests"
            bus.read_runs("gate", 1)  # the recorder's queue written: it holds nothing now
            tracemalloc.start()
            try:
                baseline = tracemalloc.get_traced_memory()[0]
                for index in range(32):
                    decision = bus.emit("Stop", {"thread_id": f"{index:04d}" + "t" * MiB})
                    assert decision.continue_with == "run the tests"
                bus.read_runs("gate", 1)
                kept = tracemalloc.get_traced_memory()[0] - baseline
            finally:
                tracemalloc.stop()
        FIGURES["Stop memory after 32 x 1 MiB thread ids (KiB)"] = kept // 1024
        # Unbounded, the memory kept each id: 32 MiB. Now 32 digests, some 160 bytes each.
        assert kept < MiB, f"{kept:,} bytes kept after the emits"


def test_the_stop_memory_holds_a_fixed_size_per_thread_however_long_the_ids() -> None:
    from hookbus.dialects.stopguard import MAX_REMEMBERED, StopMemory

    with attack(9, f"{MAX_REMEMBERED + 500:,} Stops of 4 KiB thread ids against the Stop memory"):
        go_on = Decision(continue_with="keep going")
        tracemalloc.start()
        try:
            memory = StopMemory()
            for index in range(MAX_REMEMBERED + 500):
                memory.answered("Stop", {"thread_id": f"{index:08d}" + "x" * 4096, "agent_id": index}, go_on)
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        last = MAX_REMEMBERED + 499
        assert memory.active("Stop", {"thread_id": f"{last:08d}" + "x" * 4096, "agent_id": last})
        assert not memory.active("Stop", {"thread_id": f"{0:08d}" + "x" * 4096, "agent_id": 0})  # the oldest, forgotten
        # The README's figure: 10,000 entries of some 160 bytes (a 16-byte digest and its slot).
        assert held < MAX_REMEMBERED * 160, f"{held:,} bytes for {MAX_REMEMBERED:,} threads"


# -- the recorders' queues --------------------------------------------------------------------


def test_a_stuck_storage_holds_at_most_max_queue_bytes_of_records() -> None:
    import hookbus.recording

    with attack(9, "100 records of 1 MiB of reason each behind a BackgroundWriter that is stuck"):
        gate = threading.Event()
        entered = threading.Event()

        def stuck(batch: list[RunRecord]) -> None:
            entered.set()
            assert gate.wait(60), "the test never let the storage go"

        writer: BackgroundWriter[RunRecord] = BackgroundWriter(stuck, name="hookbus-stuck", batch_delay=0)
        try:
            tracemalloc.start()
            baseline = tracemalloc.get_traced_memory()[0]
            accepted = 0
            for index in range(100):
                record = RunRecord(
                    at=utc_timestamp(), hook_id="big", event="PreToolUse", mode="sync", status="deny",
                    duration=0.001, decision={"behavior": "deny", "reason": f"{index:04d}" + "r" * MiB},
                )
                accepted += writer.submit(record)
                del record
                if index == 0:
                    assert entered.wait(10)  # the first is in the storage's hands, stuck
            held = tracemalloc.get_traced_memory()[0] - baseline
            tracemalloc.stop()
            FIGURES["BackgroundWriter, 100 x 1 MiB records, stuck storage: held (MiB)"] = held // MiB
            # Unbounded, all 100 megabytes waited in the queue.
            assert held < WRITER_BOUND_MIB * MiB + 8 * MiB, f"{held / MiB:.0f} MiB held"
            assert accepted < 100 and writer.dropped == 100 - accepted == writer.lost
            assert getattr(hookbus.recording, "MAX_QUEUE_BYTES", None) == WRITER_BOUND_MIB * MiB
        finally:
            if tracemalloc.is_tracing():
                tracemalloc.stop()
            gate.set()
            assert writer.close(30)


STATE_QUEUE = """
    import fcntl, json, os, sys, tracemalloc
    import hookbus_recorder.state
    from hookbus import HookBus, Outcome, hookimpl

    # The writer waits for a held lock this long, so that it is stuck while the fires come.
    hookbus_recorder.state.LOCK_WAIT_SECONDS = 120.0

    class Verbose:
        def parse(self, key, value, context):
            return value

        def run(self, call):
            return Outcome("deny", reason=f"{call.envelope['n']:04d}" + "r" * (1 << 20))

    class Plugin:
        @hookimpl
        def hookbus_register_runners(self, register):
            register.add("verbose", Verbose())

    home = sys.argv[1]
    held = os.open(os.path.join(home, "hooks", "big"), os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)  # another process's lock, as the writer sees it
    bus = HookBus(home, plugins=[Plugin()])
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    for n in range(40):
        bus.emit("PreToolUse", {"tool_name": "bash", "n": n})
    held_bytes = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()
    os.close(held)  # let go: the writer finds the lock free on its next try
    bus.close()
    print(json.dumps({"held": held_bytes}))
"""


def test_the_built_in_recorder_keeps_no_decision_waiting_for_state_json(home: Path) -> None:
    with attack(9, "40 fires with 1 MiB of reason while state.json's directory is locked"):
        (home / "hooks" / "big").mkdir()
        (home / "hooks" / "big" / "hook.json").write_text(
            json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "verbose": {}})
        )
        answer = run_child(STATE_QUEUE, str(home))
        FIGURES["state.json queue, 40 x 1 MiB reasons, locked directory: held (MiB)"] = answer["held"] // MiB
        # Unbounded, each record waited with its decision: 40 MiB. The log has the reasons.
        assert answer["held"] < 4 * MiB, f"{answer['held'] / MiB:.0f} MiB held"
        reasons = [entry["decision"]["reason"] for entry in read_log(home)]
        assert len(reasons) == 40 and all(len(reason) == 4 + MiB for reason in reasons)
