"""What a policy hook costs an emit, in-process: ratios against baselines measured in the same run.

    .venv/bin/python bench/policy_bench.py [--rounds 9] [--quick]

One ``HookBus`` per home, all open at once in this process, on temp homes with the built-in
home guard off (as bench.py's figures: the machinery on the hooks loaded is what is measured).
Every emit is the same PreToolUse envelope of a bash call ``rm -rf build/``; each home holds
one sync blocking hook on PreToolUse matcher ``bash``, or none:

- ``command``: ``"command": "exit 0"`` (a real bash a call, allow): the baseline;
- ``cel``: ``"cel": "tool_input.command.contains('rm -rf') ? {...deny...} : null"``
  (hookbus-cel), which denies;
- ``rego``: ``"rego": {"file": "policy.rego", "query": "data.hooks.decision"}`` with the
  policy beside hook.json (hookbus-rego), which denies; skipped, saying so, when
  ``hookbus_rego`` is not installed or its hook does not load;
- ``none``: no hook at all, the bus's own floor (a no-match emit: two dict lookups).

Every side is checked first (the deny hooks must deny, by their own id). Then each side is
timed in slices of back-to-back emits, the sides taking turns, the order rotated every
slice, so that a noisy neighbour hits them alike; each slice's size is set by a warm-up so
that it lasts about ``--slice-seconds``. A figure is the median over rounds of the ratio of
the two sides' per-emit times in that round; the range of those ratios is printed beside it,
and the absolute microseconds (medians) as secondary information: this machine is shared,
read the ratios.

Targets: cel <= 0.05x the command hook, rego <= 0.5x the command hook. cel against no hook is
informative (no target): what a policy costs over the bus's floor.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from hookbus import HookBus

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_bench import interleaved, per_call  # noqa: E402

#: The call every emit makes: a bash call the policies deny.
ENVELOPE: dict[str, Any] = {"tool_name": "bash", "tool_input": {"command": "rm -rf build/"}, "cwd": "/tmp"}
TRIGGER = {"event": "PreToolUse", "matcher": "bash"}
CEL = "tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': 'no rm -rf'} : null"
REGO = """package hooks

import rego.v1

decision := {"behavior": "deny", "reason": "no rm -rf"} if contains(input.tool_input.command, "rm -rf")
"""
INSTALL_REGO = "pip install -e contrib/hookbus-rego"

#: (name, target vs the command hook): the figures with a target.
TARGETS = {"cel": 0.05, "rego": 0.5}

RESULTS: list[tuple[str, bool]] = []


def report(name: str, value: float, target: float, unit: str, detail: str) -> None:
    """bench.py's report()."""
    met = value <= target
    RESULTS.append((name, met))
    shown = f"{value:.3f}{unit}"
    print(f"{name:<16} {shown:>9}  target <= {target:g}{unit:<3} {'met ' if met else 'MISS'}  {detail}", flush=True)


def note(name: str, value: float, unit: str, detail: str) -> None:
    """An informative figure: printed as report() prints one, with no target and not counted."""
    shown = f"{value:.1f}{unit}" if value >= 10 else f"{value:.3f}{unit}"
    print(f"{name:<16} {shown:>9}  {'(informative, no target)':<24}  {detail}", flush=True)


def skipped(name: str, why: str) -> None:
    print(f"{name:<16} {'skipped':>9}  {why}", flush=True)


# -- the homes ------------------------------------------------------------------------------


def write_home(root: Path, spec: dict[str, Any] | None, files: dict[str, str] | None = None) -> Path:
    root.mkdir(parents=True)
    (root / "settings.json").write_text(json.dumps({"protect_home": False}))
    (root / "hooks").mkdir()
    if spec is not None:
        directory = root / "hooks" / root.name
        directory.mkdir()
        (directory / "hook.json").write_text(json.dumps({"trigger": TRIGGER, "mode": "sync", "blocking": True, **spec}))
        for name, text in (files or {}).items():
            (directory / name).write_text(text)
    return root


def homes(work: Path, with_rego: bool) -> dict[str, Path]:
    made = {
        "command": write_home(work / "command", {"command": "exit 0"}),
        "cel": write_home(work / "cel", {"cel": CEL}),
        "none": write_home(work / "none", None),
    }
    if with_rego:
        made["rego"] = write_home(
            work / "rego", {"rego": {"file": "policy.rego", "query": "data.hooks.decision"}}, {"policy.rego": REGO}
        )
    return made


def check(name: str, bus: HookBus) -> str | None:
    """Why side ``name`` cannot be measured (its hook did not load, or decided otherwise), or None."""
    problems = "; ".join(str(problem) for problem in bus.problems)
    decision = bus.emit("PreToolUse", ENVELOPE)
    if name == "command" or name == "none":
        if decision.behavior != "allow" or decision.failed or problems:
            return f"expected an allow, got {decision!r}; problems: {problems or 'none'}"
        if name == "command" and not bus.read_runs(name):
            return "the exit 0 hook did not fire"
        return None
    if decision.behavior != "deny" or decision.denied_by != (name,) or decision.failed:
        return f"expected a deny by {name!r}, got {decision.behavior} ({decision.reason}); problems: {problems or 'none'}"
    return None


# -- measuring ------------------------------------------------------------------------------


def sized(emit: Callable[[], Any], seconds: float) -> int:
    """How many back-to-back emits last about ``seconds`` (from a short warm-up)."""
    calls = 1
    while True:
        took = per_call(emit, calls) * calls
        if took >= 0.05 or calls >= 1 << 22:
            return max(1, round(calls * seconds / took))
        calls *= 4


def side(emit: Callable[[], Any], calls: int) -> Callable[[], tuple[float, float]]:
    return lambda: (per_call(emit, calls), 0.0)


def ratios(ours: list[float], theirs: list[float]) -> list[float]:
    return [a / b for a, b in zip(ours, theirs)]


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}" if max(values) < 10 else f"{min(values):.0f}-{max(values):.0f}"


def us(values: list[float]) -> float:
    return statistics.median(values) * 1e6


def run(work: Path, rounds: int, slices: int, seconds: float) -> None:
    rego_missing = importlib.util.find_spec("hookbus_rego") is None
    paths = homes(work, with_rego=not rego_missing)
    buses: dict[str, HookBus] = {}
    rego_why = f"hookbus_rego is not installed ({INSTALL_REGO}): no rego figure" if rego_missing else None
    try:
        for name, path in paths.items():
            buses[name] = HookBus(path)
            why = check(name, buses[name])
            if why is None:
                continue
            if name == "rego":
                rego_why = f"the rego hook cannot be measured: {why}"
                buses.pop(name).close()
            else:
                raise SystemExit(f"{name}: {why}")
        names = list(buses)
        emits = {name: (lambda bus=bus: bus.emit("PreToolUse", ENVELOPE)) for name, bus in buses.items()}
        calls = {name: sized(emits[name], seconds) for name in names}
        sides = [side(emits[name], calls[name]) for name in names]
        interleaved(1, sides, 1)  # warm-up, every side
        measured = interleaved(rounds, sides, slices)
    finally:
        for bus in buses.values():
            bus.close()
    times = {name: [wall for wall, _ in measured[index]] for index, name in enumerate(names)}
    command = times["command"]
    sizes = ", ".join(f"{name} {calls[name]:,}" for name in names)
    print(f"emits a slice: {sizes}; {rounds} rounds of {slices} slice(s) a side, taking turns\n")

    table: list[tuple[str, float, str, str, str]] = []
    for name in ("cel", "rego"):
        if name not in times:
            skipped(name, rego_why or "")
            continue
        each = ratios(times[name], command)
        value = statistics.median(each)
        report(
            f"{name} deny", value, TARGETS[name], "x",
            f"emit through one sync `{name}` deny hook {us(times[name]):.1f} us vs through one sync `exit 0` "
            f"command hook {us(command):.1f} us (per-round ratios {spread(each)})",
        )
        table.append((name, us(times[name]), f"{value:.3f}x ({spread(each)})", f"<= {TARGETS[name]:g}x", "met" if value <= TARGETS[name] else "MISS"))
    floor = ratios(times["cel"], times["none"])
    note(
        "cel vs no hook", statistics.median(floor), "x",
        f"the cel deny emit {us(times['cel']):.1f} us vs an emit no hook matches (empty home) "
        f"{us(times['none']):.2f} us (per-round ratios {spread(floor)})",
    )
    if "rego" in times:
        between = ratios(times["rego"], times["cel"])
        note("rego vs cel", statistics.median(between), "x",
             f"the rego deny emit vs the cel deny emit (per-round ratios {spread(between)})")
    command_ratio = ratios(command, command)
    table.insert(0, ("command (exit 0)", us(command), f"{statistics.median(command_ratio):.3f}x", "baseline", ""))
    table.append(("no hook", us(times["none"]), f"{statistics.median(ratios(times['none'], command)):.5f}x", "floor", ""))
    print()
    print("| hook | us an emit (median) | vs command hook (median, range) | target | |")
    print("|---|---|---|---|---|")
    for name, micro, ratio, target, met in table:
        print(f"| {name} | {micro:.2f} | {ratio} | {target} | {met} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9, help="rounds, medians over them (default 9)")
    parser.add_argument("--slices", type=int, default=2, help="slices a side a round (default 2)")
    parser.add_argument("--slice-seconds", type=float, default=0.25, help="about how long one slice lasts (default 0.25)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 rounds of short slices, not figures")
    args = parser.parse_args(argv)
    rounds, slices, seconds = (3, 1, 0.05) if args.quick else (args.rounds, args.slices, args.slice_seconds)
    print(
        f"hookbus policy bench on {os.cpu_count()} cores, Python {sys.version.split()[0]}, {rounds} rounds, medians"
        + (" (--quick: a smoke run, not figures)" if args.quick else "")
    )
    # SIGTERM unwinds like Ctrl-C: the buses are closed and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="hookbus-policy-bench-") as temp:
        run(Path(temp), rounds, slices, seconds)
    missed = [name for name, met in RESULTS if not met]
    print(f"\n{len(RESULTS) - len(missed)} of {len(RESULTS)} targets met" + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
