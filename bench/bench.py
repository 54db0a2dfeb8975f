"""hookbus benchmarks: every figure is a ratio against a baseline measured in the same run.

    make bench                      # or: .venv/bin/python bench/bench.py [--only NAME ...]

Each figure runs several rounds and reports the median; each line prints the name, the
measured ratio, the target, whether it is met, and the absolute numbers behind it. These
machines are shared and noisy: run it twice before believing a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pluggy

from hookbus import HookBus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reload_latency import hookbus_latency, p95, watchfiles_latency  # noqa: E402

import http_bench  # noqa: E402
import serve_bench  # noqa: E402

ROUNDS = 5
RESULTS: list[tuple[str, bool]] = []


def report(name: str, value: float, target: float, unit: str, detail: str) -> None:
    met = value <= target
    RESULTS.append((name, met))
    shown = f"{value:.2f}{unit}"
    print(f"{name:<16} {shown:>9}  target <= {target:g}{unit:<3} {'met ' if met else 'MISS'}  {detail}", flush=True)


def report_at_least(name: str, value: float, target: float, unit: str, detail: str) -> None:
    """``report`` for a figure where higher is better (a throughput ratio)."""
    met = value >= target
    RESULTS.append((name, met))
    shown = f"{value:.2f}{unit}"
    print(f"{name:<16} {shown:>9}  target >= {target:g}{unit:<3} {'met ' if met else 'MISS'}  {detail}", flush=True)


def per_call(function: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls


#: The figures measure hookbus's machinery on the hooks they load, so their homes turn the
#: built-in home guard off (it would run on their write_file and bash calls); the home-guard
#: figure measures what it costs.
GUARD_OFF = {"protect_home": False}


def bash_spawn(envelope: dict[str, Any]) -> Callable[[], Any]:
    """The cheapest hook there is, as the baseline of the figures that run one: `bash -c
    'exit 0'` given the PreToolUse envelope on stdin, its output captured."""
    payload = json.dumps({**envelope, "hook_event_name": "PreToolUse"}).encode()
    return lambda: subprocess.run(["bash", "-c", "exit 0"], input=payload, capture_output=True)


def write_hooks(root: Path, specs: dict[str, dict[str, Any]], settings: dict[str, Any] = GUARD_OFF) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "settings.json").write_text(json.dumps(settings))
    for hook_id, spec in specs.items():
        directory = root / "hooks" / hook_id
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hook.json").write_text(json.dumps({"trigger": spec.pop("trigger"), **spec}))


def mixed_home(root: Path, count: int, on_pre_tool_use: int) -> None:
    """``count`` hooks, ``on_pre_tool_use`` of them on PreToolUse (half literal matchers,
    half regexes), the rest spread over other events."""
    others = ["PostToolUse", "Stop", "ThreadStart", "SubagentStop", "UserPromptSubmit"]
    specs = {}
    for index in range(count):
        if index < on_pre_tool_use:
            matcher = f"tool{index}" if index % 2 else f"tool{index}_.*"
            trigger = {"event": "PreToolUse", "matcher": matcher}
        else:
            event = others[index % len(others)]
            trigger = {"event": event} if event in ("Stop", "UserPromptSubmit") else {"event": event, "matcher": f"t{index}"}
        specs[f"h{index:05d}"] = {"trigger": trigger, "mode": "sync", "command": "exit 0"}
    write_hooks(root, specs)


def bare_pluggy_call() -> Callable[[], Any]:
    hookspec = pluggy.HookspecMarker("bench")

    class Spec:
        @hookspec
        def bench_event(self, event: str, envelope: dict[str, Any]) -> None:
            """A hook nobody implements."""

    manager = pluggy.PluginManager("bench")
    manager.add_hookspecs(Spec)
    caller = manager.hook.bench_event
    envelope = {"tool_name": "write_file"}
    return lambda: caller(event="PreToolUse", envelope=envelope)


ENVELOPE = {"tool_name": "write_file", "tool_input": {"path": "src/app.py", "content": "x" * 200}, "cwd": "/"}


def no_match(work: Path) -> None:
    root = work / "no-match"
    mixed_home(root, 1000, 200)
    baseline = bare_pluggy_call()
    with HookBus(root) as bus:
        emit = lambda: bus.emit("PreToolUse", ENVELOPE)  # noqa: E731
        ratios, ours, theirs = [], [], []
        for _ in range(ROUNDS):
            a, b = per_call(emit, 50_000), per_call(baseline, 50_000)
            ours.append(a)
            theirs.append(b)
            ratios.append(a / b)
    report(
        "no-match emit", statistics.median(ratios), 3, "x",
        f"emit {statistics.median(ours) * 1e6:.2f} us vs bare pluggy call "
        f"{statistics.median(theirs) * 1e6:.2f} us (1,000 hooks, 200 on PreToolUse)",
    )


def one_sync_hook(work: Path) -> None:
    root = work / "one-sync"
    write_hooks(root, {"one": {"trigger": {"event": "PreToolUse"}, "mode": "sync", "command": "exit 0"}})
    spawn = bash_spawn(ENVELOPE)

    ratios, ours, theirs = [], [], []
    with HookBus(root) as bus:
        emit = lambda: bus.emit("PreToolUse", ENVELOPE)  # noqa: E731
        per_call(emit, 30)
        per_call(spawn, 30)
        for _ in range(ROUNDS):
            # Interleaved, so that a noisy neighbour hits both sides alike.
            a, b = per_call(emit, 150), per_call(spawn, 150)
            ours.append(a)
            theirs.append(b)
            ratios.append(a / b)
    report(
        "one sync hook", statistics.median(ratios), 1.15, "x",
        f"emit {statistics.median(ours) * 1e3:.3f} ms vs subprocess.run "
        f"{statistics.median(theirs) * 1e3:.3f} ms (bash -c 'exit 0', envelope on stdin)",
    )


def parallel_hooks(work: Path) -> None:
    eight, one = work / "parallel-8", work / "parallel-1"
    sleepy = {"trigger": {"event": "Stop"}, "mode": "sync", "command": "sleep 0.2"}
    write_hooks(eight, {f"s{index}": dict(sleepy) for index in range(8)})
    write_hooks(one, {"s0": dict(sleepy)})
    ratios, many, single = [], [], []
    with HookBus(eight) as bus8, HookBus(one) as bus1:
        bus8.emit("Stop", {})
        for _ in range(ROUNDS):
            a = per_call(lambda: bus8.emit("Stop", {}), 1)
            b = per_call(lambda: bus1.emit("Stop", {}), 1)
            many.append(a)
            single.append(b)
            ratios.append(a / b)
    report(
        "parallel hooks", statistics.median(ratios), 1.25, "x",
        f"8 sync 'sleep 0.2' hooks {statistics.median(many) * 1e3:.0f} ms vs 1: "
        f"{statistics.median(single) * 1e3:.0f} ms",
    )


def hot_reload(work: Path) -> None:
    baseline = watchfiles_latency(work / "reload-raw", 20)
    measured = hookbus_latency(work / "reload", 20)
    report(
        "hot reload", p95(measured) * 1e3, 50, "ms",
        f"p95 of 20 atomic writes until an emit fires the new version; median "
        f"{statistics.median(measured) * 1e3:.1f} ms; watchfiles alone (same tuning): p95 "
        f"{p95(baseline) * 1e3:.1f} ms, median {statistics.median(baseline) * 1e3:.1f} ms",
    )


def async_fire(work: Path) -> None:
    """What the agent loop pays for an async hook, with the pool as a busy loop keeps it:
    every worker running a hook (``sleep 0.2``) and fires queueing behind them."""
    root = work / "async"
    write_hooks(root, {"later": {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "command": "sleep 0.2"}})
    fire = {"tool_name": "bash", "tool_input": {"command": "ls"}}
    miss = {"tool_name": "read_file", "tool_input": {"path": "x"}}
    before = threading.active_count()
    peak = before
    ratios, ours, theirs = [], [], []
    bus = HookBus(root, async_workers=8)
    fires = 0
    try:
        for _ in range(ROUNDS):
            a = per_call(lambda: bus.emit("PreToolUse", fire), 2_000)
            fires += 2_000
            b = per_call(lambda: bus.emit("PreToolUse", miss), 2_000)
            peak = max(peak, threading.active_count())
            ours.append(a)
            theirs.append(b)
            ratios.append(a / b)
    finally:
        bus.close(timeout=0)  # what is still queued is recorded as cancelled, not run
    peak = max(peak, threading.active_count())
    threads = peak - before
    report(
        "async fire", statistics.median(ratios), 10, "x",
        f"emit submitting 1 async hook (all 8 workers busy, the rest queued) "
        f"{statistics.median(ours) * 1e6:.2f} us vs no-match {statistics.median(theirs) * 1e6:.2f} us; "
        f"{fires:,} fires used at most {threads} threads beyond the caller's (pool 8 + 2 allowed)",
    )
    RESULTS.append(("async threads", threads <= 8 + 2))


def async_fire_paced(work: Path) -> None:
    """What the agent loop pays for an async hook as it really fires: emits paced 2-100 ms
    apart (the time a model takes between tool calls), a real command hook, and a no-match
    emit paced the same way, the two taking turns. After a pause every emit runs on cold
    caches; a no-match emit measured back to back (0.2 us) would hide that, and an async
    fire measured back to back would hide the wake-up of an idle worker."""
    import random

    root = work / "async-paced"
    write_hooks(root, {"later": {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "command": "exit 0"}})
    fire = {"tool_name": "bash", "tool_input": {"command": "ls"}}
    miss = {"tool_name": "read_file", "tool_input": {"path": "x"}}
    pause = random.Random(2026)
    ours: list[float] = []
    theirs: list[float] = []
    with HookBus(root, async_workers=8) as bus:
        for _ in range(20):  # the pool's threads started, the hook's bash cached
            bus.emit("PreToolUse", fire)
            time.sleep(0.01)
        for index in range(2 * PACED_EMITS):
            time.sleep(pause.uniform(0.002, 0.1))
            envelope, times = (fire, ours) if index % 2 == 0 else (miss, theirs)
            started = time.perf_counter()
            bus.emit("PreToolUse", envelope)
            times.append(time.perf_counter() - started)
    ratio = statistics.median(ours) / statistics.median(theirs)
    report(
        "async fire paced", ratio, 10, "x",
        f"emit submitting 1 async `exit 0` hook, emits 2-100 ms apart, {statistics.median(ours) * 1e6:.1f} us "
        f"(p90 {sorted(ours)[int(len(ours) * 0.9)] * 1e6:.1f}) vs a no-match emit paced the same "
        f"{statistics.median(theirs) * 1e6:.1f} us; {PACED_EMITS} of each, taking turns",
    )


#: Emits of each kind in the paced async figure (about 8 s in all).
PACED_EMITS = 75


def cold_load(work: Path) -> None:
    root = work / "cold"
    mixed_home(root, 1000, 200)
    hooks_dir = str(root / "hooks")

    def read_all() -> None:
        """The least any loader does: list the directory, read and parse each hook.json."""
        for name in sorted(os.listdir(hooks_dir)):
            with open(os.path.join(hooks_dir, name, "hook.json"), "rb") as handle:
                json.loads(handle.read())

    def load() -> None:
        HookBus(root).close()

    load()
    ratios, ours, theirs = [], [], []
    for _ in range(ROUNDS):
        a, b = per_call(load, 1), per_call(read_all, 1)
        ours.append(a)
        theirs.append(b)
        ratios.append(a / b)
    report(
        "cold load", statistics.median(ratios), 4, "x",
        f"HookBus(home) with 1,000 hooks {statistics.median(ours) * 1e3:.1f} ms vs listing the "
        f"directory and json.loads of each hook.json {statistics.median(theirs) * 1e3:.1f} ms",
    )


def cli_emit(work: Path) -> None:
    root = work / "cli"
    events = ["PreToolUse", "PostToolUse", "Stop", "ThreadStart", "SubagentStop"]
    write_hooks(
        root,
        {f"c{index}": {"trigger": {"event": events[index % 5]}, "mode": "sync", "command": "exit 0"} for index in range(10)},
    )
    python = sys.executable
    # As an installed wheel runs: bytecode cached (an editable install has none until first run).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    stock = {**env, "HOOKBUS_LOAD_PLUGINS": "workflow,prompt"}  # what `pip install hookbus` ships
    ours = [python, "-m", "hookbus", "emit", "Stop", "--home", str(root), "--input", os.devnull]
    theirs = [python, "-c", "import pluggy, attrs, cattrs"]

    def run(argv: list[str], environ: dict[str, str]) -> Callable[[], Any]:
        return lambda: subprocess.run(argv, env=environ, check=True, stdout=subprocess.DEVNULL)

    for argv, environ in ((ours, stock), (ours, env), (theirs, env)):
        per_call(run(argv, environ), 3)
    ratios, all_ratios, a_s, b_s, c_s = [], [], [], [], []
    for _ in range(ROUNDS):
        a, c, b = per_call(run(ours, stock), 10), per_call(run(ours, env), 10), per_call(run(theirs, env), 10)
        a_s.append(a)
        b_s.append(b)
        c_s.append(c)
        ratios.append(a / b)
        all_ratios.append(c / b)
    report(
        "CLI emit", statistics.median(ratios), 1.3, "x",
        f"`hookbus emit Stop` (10 hooks, 2 fire) {statistics.median(a_s) * 1e3:.0f} ms vs "
        f"`python -c 'import pluggy, attrs, cattrs'` {statistics.median(b_s) * 1e3:.0f} ms; with the "
        f"3 contrib plugins installed too: {statistics.median(c_s) * 1e3:.0f} ms "
        f"({statistics.median(all_ratios):.2f}x)",
    )


def scaling(work: Path) -> None:
    costs = {}
    for count in (10, 100, 1_000, 10_000):
        root = work / f"scale-{count}"
        mixed_home(root, count, count // 5)
        with HookBus(root) as bus:
            emit = lambda: bus.emit("PreToolUse", ENVELOPE)  # noqa: E731
            costs[count] = statistics.median(per_call(emit, 50_000) for _ in range(ROUNDS))
    shown = ", ".join(f"{count:,}: {cost * 1e6:.2f} us" for count, cost in costs.items())
    report("scaling", costs[10_000] / costs[10], 1.5, "x", f"no-match emit cost at 10,000 hooks / at 10 ({shown})")


#: Emits recorded, then replayed, by the replay figure (``--replay-emits``).
REPLAY_EMITS = 10_000
#: Sync hooks of its home.
REPLAY_HOOKS = 20


def replay(work: Path) -> None:
    """``hookbus replay``'s engine: REPLAY_EMITS emits recorded live (``record_envelopes``)
    through a home of REPLAY_HOOKS sync hooks, then read back and replayed through the same
    hooks; emits a second each way, in slices taking turns."""
    root = work / "replay"
    write_hooks(root, {f"h{n:02d}": {"trigger": {"event": "PreToolUse"}, "mode": "sync", "command": "exit 0"} for n in range(REPLAY_HOOKS)})
    (root / "settings.json").write_text('{"record_envelopes": true}')
    (root / "settings.json").chmod(0o600)
    envelopes = [{**ENVELOPE, "tool_input": {"command": f"ls {n}"}} for n in range(REPLAY_EMITS)]
    slices = 5
    size = max(1, REPLAY_EMITS // slices)
    live_seconds = replay_seconds = 0.0
    with HookBus(root) as bus:
        for part in range(slices):  # live, in slices; each slice then replayed: taking turns
            chunk = envelopes[part * size:(part + 1) * size]
            started = time.perf_counter()
            for envelope in chunk:
                bus.emit("PreToolUse", envelope)
            live_seconds += time.perf_counter() - started
            started = time.perf_counter()
            recorded = bus.read_emits()[-len(chunk):]
            for record in recorded:
                bus.replay(record.event, record.envelope)
            replay_seconds += time.perf_counter() - started
    emits = size * slices
    live, replayed = emits / live_seconds, emits / replay_seconds
    report_at_least(
        "replay", replayed / live, 0.8, "x",
        f"{emits:,} emits through {REPLAY_HOOKS} sync `exit 0` hooks: replayed (read back, then re-run) "
        f"{replayed:,.0f} emits/s vs live {live:,.0f} emits/s (recording them), in {slices} slices taking turns",
    )


def home_guard(work: Path) -> None:
    """What the built-in home guard (on by default) costs a guarded tool call that no hook
    matches: emits of write_file and bash calls that stay out of the home, vs the cheapest
    hook a user could write to do the same (one `bash -c 'exit 0'` spawned per call)."""
    root = work / "home-guard"
    write_hooks(root, {}, settings={})
    calls = [
        {"tool_name": "write_file", "tool_input": {"path": "src/app.py", "content": "x" * 200}, "cwd": "/tmp"},
        {"tool_name": "bash", "tool_input": {"command": "git status && ls -la src/ && cat /etc/hostname"}, "cwd": "/tmp"},
    ]
    spawn = bash_spawn(calls[1])

    ratios, ours, theirs = [], [], []
    with HookBus(root) as bus:
        assert bus.emit("PreToolUse", calls[0]).behavior == "allow"
        emit = lambda: [bus.emit("PreToolUse", call) for call in calls]  # noqa: E731
        for _ in range(ROUNDS):
            a, b = per_call(emit, 2_000) / len(calls), per_call(spawn, 50)
            ours.append(a)
            theirs.append(b)
            ratios.append(a / b)
    report(
        "home guard", statistics.median(ratios), 0.05, "x",
        f"a guarded write_file or bash call {statistics.median(ours) * 1e6:.1f} us vs spawning "
        f"`bash -c 'exit 0'` {statistics.median(theirs) * 1e6:.0f} us (the cheapest hook that could check it)",
    )


FIGURES: dict[str, Callable[[Path], None]] = {
    "no-match": no_match,
    "home-guard": home_guard,
    "one-sync": one_sync_hook,
    "parallel": parallel_hooks,
    "hot-reload": hot_reload,
    "async": async_fire,
    "async-paced": async_fire_paced,
    "cold-load": cold_load,
    "cli": cli_emit,
    "scaling": scaling,
    # `hookbus serve`: a real server process, clients in other processes (serve_bench.py).
    "serve-rtt": lambda work: serve_bench.serve_rtt(work, report, ROUNDS),
    "serve-one-sync": lambda work: serve_bench.serve_one_sync(work, report, ROUNDS),
    "serve-cli": lambda work: serve_bench.serve_cli(work, report, ROUNDS),
    "serve-throughput": lambda work: serve_bench.serve_throughput(work, report_at_least, ROUNDS),
    # `hookbus serve --http`: POST /claude-code from a raw keep-alive client (http_bench.py).
    "http-rtt": lambda work: http_bench.http_rtt(work, report, ROUNDS),
    "http-one-sync": lambda work: http_bench.http_one_sync(work, report, ROUNDS),
    "replay": replay,
}


def main() -> int:
    global REPLAY_EMITS
    parser = argparse.ArgumentParser(description="hookbus benchmarks (ratios against same-run baselines)")
    parser.add_argument("--only", nargs="*", choices=list(FIGURES), help="run only these figures")
    parser.add_argument("--replay-emits", type=int, metavar="N", help=f"emits the replay figure records and replays (default {REPLAY_EMITS:,})")
    args = parser.parse_args()
    if args.replay_emits:
        REPLAY_EMITS = args.replay_emits
    print(f"hookbus bench on {os.cpu_count()} cores, Python {sys.version.split()[0]}, {ROUNDS} rounds, medians")
    with tempfile.TemporaryDirectory(prefix="hookbus-bench-") as temp:
        for name, figure in FIGURES.items():
            if args.only and name not in args.only:
                continue
            figure(Path(temp))
    missed = [name for name, met in RESULTS if not met]
    print(f"\n{len(RESULTS) - len(missed)} of {len(RESULTS)} targets met" + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
