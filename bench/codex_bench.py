"""What a trivial hook costs a real Codex CLI per call: hookbus's gate against Codex's own
no-op command hook, side by side in the same run.

A real Codex CLI (``$CODEX_BIN``; 0.169.0 was the one measured) runs as ``codex app-server``
(JSON-RPC over stdio), offline: its model is the Responses API stub of
``tests/codexkit.py`` on 127.0.0.1, which has the shell tool run ``echo hi`` CALLS times
(``--calls``, default 5), then answers. Each run is a fresh app server, one thread, one
turn, in a throw-away CODEX_HOME, working directory and HOME per config. Codex's own hooks
are on every event Codex has (14, no matcher), hookbus's on the ten it installs the bridge
on (not PreModelRequest, PostModelRequest, Interrupt and SessionEnd, which the bridge would
answer with nothing), each trusted in config.toml. Configs:

- ``native``: Codex's own no-op command hook, ``exit 0`` (one bash, a builtin);
- ``native-cat``: ``cat >/dev/null`` (reads its stdin: a second process);
- ``gate``: what ``hookbus import codex HOOKS --install-bridge --http URL`` writes (the
  gate, ``hookbus/hosts/gate.sh``, a bash command hook posting to ``hookbus serve --http``),
  a home with one sync ``exit 0`` command hook on each of vixd's events, the home guard on;
- ``gate-guard-only``: the same install, a home with no hook but the built-in home guard
  (hookbus's own no-op: the server starts no process);
- ``bridge``: ``--install-bridge`` without ``--http``: the Python command bridge
  (``hookbus codex-hook``) with ``hookbus serve`` running, the same hooks as ``gate``.

Each hookbus config has a home and a server of its own. Runs are interleaved: one warm-up
run per config, then in round i every config runs once, the order rotated by i.

The measure is Codex's own: the ``durationMs`` of each ``hook/completed`` notification of
the app server (whole milliseconds), per event. Printed: per-event medians, the median and
mean per call, the hook time a run (the sum of its calls) and the turn's wall time; then,
for each hookbus config, its PreToolUse per call against ``native``'s and ``native-cat``'s:
the ratio of the medians (and of the means: the times are whole ms), and the ratios paired
round by round with their median and range, each against the target (<= 1.3x), met or
MISS. No test asserts these figures.

With ``--outside N`` (default 200; 0 skips it), the same PreToolUse hook commands are
also timed outside Codex, as Codex starts them: ``/bin/bash -c COMMAND`` with Codex's
envelope of an ``echo hi`` call on stdin, N calls each, taking turns, from this process:
how much of a call is the command itself and how much Codex's own handling.

    npm install --prefix DIR @openai/codex@0.169.0
    CODEX_BIN=DIR/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex \\
        .venv/bin/python bench/codex_bench.py [--runs 8] [--calls 5] [--configs native,native-cat,gate,...] [--out result.json]

``HOOKBUS_BIN`` names the hookbus executable (default: ``hookbus`` next to sys.executable).
Every server is stopped, and every Codex killed with its process group, by PID.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # codexkit: the model stub and Codex drivers the real-Codex tests use

from codexkit import (  # noqa: E402
    CODEX_BIN_VARIABLE,
    AppServer,
    CodexLab,
    HookbusServer,
    Install,
    ModelStub,
    every_event,
    hookbus_env,
    install_hookbus,
    write_hookbus_hook,
)

TARGET = 1.3
TARGET_EVENT = "PreToolUse"
#: Codex's events, as its app server names them in hook/completed (camelCase) -> hooks.json's.
REPORTED = ("SessionStart", "UserPromptSubmit", "PreModelRequest", "PostModelRequest", "PreToolUse", "PostToolUse", "Stop")
#: vixd's events the hookbus homes put one ``exit 0`` hook on.
VIX_EVENTS = ("ThreadStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
NATIVE = {"native": "exit 0", "native-cat": "cat >/dev/null"}
HOOKBUS_KINDS = {
    "gate": "hookbus gate (--install-bridge --http), one sync `exit 0` hook per vixd event, guard on",
    "gate-guard-only": "hookbus gate (--install-bridge --http), no hook but the home guard",
    "bridge": "hookbus command bridge (--install-bridge), server running, one sync `exit 0` hook per vixd event",
}
DEFAULT_CONFIGS = "native,native-cat,gate,gate-guard-only,bridge"
TURN_TIMEOUT = 120.0


@dataclass
class Config:
    key: str
    describe: str
    lab: CodexLab
    install: Install | None = None
    server: HookbusServer | None = None


@dataclass
class Run:
    config: str
    ok: bool
    wall_ms: float
    #: (event, durationMs) of every hook/completed
    calls: list[tuple[str, float]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def event_name(reported: object) -> str:
    text = str(reported)
    return text[:1].upper() + text[1:]


def run_once(codex: str, config: Config, stub: ModelStub, calls: int) -> Run:
    prompt = f"RUN<<echo hi>> CALLS<<{calls}>>"
    stub.clear()
    app = AppServer(codex, config.lab)
    try:
        app.start()
        started = time.perf_counter()
        app.turn(prompt, timeout=TURN_TIMEOUT)
        wall_ms = (time.perf_counter() - started) * 1000
    except AssertionError as error:
        return Run(config.key, False, 0.0, problems=[str(error)[:500]])
    finally:
        app.close()
    found = [(event_name(run.get("eventName")), float(run.get("durationMs") or 0.0)) for run in app.completed()]
    problems = app.problems(("completed",))
    pre = sum(1 for event, _ in found if event == TARGET_EVENT)
    if pre != calls:
        problems.append(f"{pre} PreToolUse hook runs, expected {calls}")
    outputs = sum(1 for body in stub.requests for item in body.get("input") or [] if item.get("type") == "function_call_output")
    if not outputs:
        problems.append("the tool never ran")
    return Run(config.key, not problems, wall_ms, found, problems)


# ----------------------------------------------------------------------------- figures
def median(values: Sequence[float]) -> float | None:
    return round(float(statistics.median(values)), 2) if values else None


def mean(values: Sequence[float]) -> float | None:
    return round(float(statistics.fmean(values)), 2) if values else None


def of_event(run: Run, event: str) -> list[float]:
    return [ms for name, ms in run.calls if name == event]


def summarize(runs: list[Run]) -> dict[str, Any]:
    good = [run for run in runs if run.ok]
    by_event: dict[str, list[float]] = {}
    for run in good:
        for event, ms in run.calls:
            by_event.setdefault(event, []).append(ms)
    every = [ms for values in by_event.values() for ms in values]
    return {
        "runs": len(good),
        "failed_runs": len(runs) - len(good),
        "per_call_ms_median_by_event": {event: median(values) for event, values in sorted(by_event.items())},
        "per_call_ms_mean_by_event": {event: mean(values) for event, values in sorted(by_event.items())},
        "per_call_ms_median_all": median(every),
        "per_call_ms_mean_all": mean(every),
        "hook_ms_per_run_median": median([sum(ms for _, ms in run.calls) for run in good]),
        "hook_calls_per_run": sorted({len(run.calls) for run in good}),
        "wall_ms_median": median([run.wall_ms for run in good]),
        "raw": {"calls": [[[event, ms] for event, ms in run.calls] for run in good],
                "wall_ms": [round(run.wall_ms, 1) for run in good],
                "problems": [run.problems for run in runs if not run.ok]},
    }


def compare(ours: list[Run], theirs: list[Run], event: str = TARGET_EVENT) -> dict[str, Any]:
    """``event`` per call in ``ours`` against ``theirs``: ratio of the medians and of the
    means over all good runs, and the ratios of each round's pair of run medians."""
    mine = [ms for run in ours if run.ok for ms in of_event(run, event)]
    base = [ms for run in theirs if run.ok for ms in of_event(run, event)]
    if not mine or not base or statistics.median(base) <= 0 or statistics.fmean(base) <= 0:
        return {"event": event, "error": "no calls to compare"}
    paired = [
        statistics.fmean(of_event(a, event)) / statistics.fmean(of_event(b, event))
        for a, b in zip(ours, theirs)
        if a.ok and b.ok and of_event(a, event) and of_event(b, event) and statistics.fmean(of_event(b, event)) > 0
    ]
    return {
        "event": event,
        "ms_median": median(mine), "baseline_ms_median": median(base),
        "ms_mean": mean(mine), "baseline_ms_mean": mean(base),
        "ratio_of_medians": round(statistics.median(mine) / statistics.median(base), 3),
        "ratio_of_means": round(statistics.fmean(mine) / statistics.fmean(base), 3),
        "paired_ratio_median": round(statistics.median(paired), 3) if paired else None,
        "paired_ratio_min": round(min(paired), 3) if paired else None,
        "paired_ratio_max": round(max(paired), 3) if paired else None,
        "pairs": len(paired),
        "calls": len(mine), "baseline_calls": len(base),
    }


def verdict(ratio: float) -> str:
    return "met" if ratio <= TARGET else "MISS"


def comparison_line(ours: str, theirs: str, found: dict[str, Any]) -> str:
    if "error" in found:
        return f"{ours} vs {theirs}, {found['event']} per call: {found['error']}"
    paired = (f"paired round by round (means of each run) {found['paired_ratio_median']:.2f}x, range "
              f"{found['paired_ratio_min']:.2f}-{found['paired_ratio_max']:.2f}x over {found['pairs']} rounds"
              if found["pairs"] else "no pairs")
    return (f"{ours} vs {theirs}, {found['event']} per call: {found['ratio_of_medians']:.2f}x of medians, target <= "
            f"{TARGET:g}x {verdict(found['ratio_of_medians'])} ({found['ms_median']:.1f} ms vs "
            f"{found['baseline_ms_median']:.1f} ms); {found['ratio_of_means']:.2f}x of means "
            f"{verdict(found['ratio_of_means'])} ({found['ms_mean']:.2f} vs {found['baseline_ms_mean']:.2f} ms); {paired}; "
            f"{found['calls']} and {found['baseline_calls']} calls")


def cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def table(summaries: dict[str, dict[str, Any]]) -> str:
    short = {"SessionStart": "SessStart", "UserPromptSubmit": "UserPrompt", "PreModelRequest": "PreModel",
             "PostModelRequest": "PostModel", "PreToolUse": "PreTool", "PostToolUse": "PostTool"}
    head = ["config", *(short.get(event, event) for event in REPORTED), "per call (median)", "per call (mean)",
            "hook ms/run", "calls/run", "turn wall", "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, summary in summaries.items():
        by_event = summary["per_call_ms_median_by_event"]
        row = [key, *(cell(by_event.get(event)) for event in REPORTED), cell(summary["per_call_ms_median_all"]),
               cell(summary["per_call_ms_mean_all"]), cell(summary["hook_ms_per_run_median"]),
               ",".join(str(n) for n in summary["hook_calls_per_run"]) or "–", cell(summary["wall_ms_median"]),
               f"{summary['runs']}" + (f" ({summary['failed_runs']} failed)" if summary["failed_runs"] else "")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def outside(commands: dict[str, str], lab: CodexLab, calls: int) -> dict[str, dict[str, Any]]:
    """Each of ``commands`` run as Codex runs a hook (``/bin/bash -c``, its envelope on
    stdin, in its cwd and environment), ``calls`` times, taking turns: ms per call."""
    envelope = json.dumps({
        "session_id": "01a24227-fefc-7be0-976c-88dad370b23a", "turn_id": "01a24227-ff1c-7701-90fd-5f9b60436a89",
        "transcript_path": str(lab.home / "sessions" / "rollout.jsonl"), "cwd": str(lab.cwd),
        "hook_event_name": "PreToolUse", "model": "gpt-5.1-codex", "permission_mode": "bypassPermissions",
        "tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_use_id": "call_0123456789abcdef0123",
    }).encode()
    env = lab.env()
    times: dict[str, list[float]] = {key: [] for key in commands}
    keys = list(commands)
    for index in range(calls):
        shift = index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            started = time.perf_counter()
            done = subprocess.run(["/bin/bash", "-c", commands[key]], input=envelope, capture_output=True, cwd=lab.cwd,
                                  env=env, timeout=60)
            times[key].append((time.perf_counter() - started) * 1000)
            if done.returncode != 0:
                raise SystemExit(f"outside Codex, {key} exited {done.returncode}: {done.stderr[-500:]!r}")
    return {key: {"ms_median": median(values), "ms_mean": mean(values), "calls": len(values)} for key, values in times.items()}


# ----------------------------------------------------------------------------- setup
def hookbus_home(home: Path, hooks: bool) -> None:
    (home / "hooks").mkdir(parents=True)
    for event in VIX_EVENTS if hooks else ():
        write_hookbus_hook(home, f"trivial-{event.lower()}", event, "exit 0", mode="sync")


def status(hookbus: str, home: Path) -> dict[str, Any]:
    done = subprocess.run([hookbus, "status", "--home", str(home), "--json"], capture_output=True, text=True,
                          timeout=60, env=hookbus_env())
    try:
        found = json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stdout + done.stderr)[-500:]}
    return found if isinstance(found, dict) else {"error": repr(found)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8, help="measured runs a config (default 8)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs a config first (default 1)")
    parser.add_argument("--calls", type=int, default=5, help="tool calls a run (default 5)")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help=f"some of {DEFAULT_CONFIGS} (default all), with native")
    parser.add_argument("--outside", type=int, default=200,
                        help="PreToolUse commands timed outside Codex, calls each (default 200; 0: not)")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    codex = shutil.which(str(os.environ.get(CODEX_BIN_VARIABLE) or ""))
    if not codex:
        raise SystemExit(f"set {CODEX_BIN_VARIABLE} to a Codex CLI executable (npm install @openai/codex@0.169.0)")
    hookbus = shutil.which(os.environ.get("HOOKBUS_BIN") or str(Path(sys.executable).parent / "hookbus"))
    if not hookbus:
        raise SystemExit("no hookbus executable: set HOOKBUS_BIN")
    wanted = [name.strip() for name in args.configs.split(",") if name.strip()]
    unknown = set(wanted) - {*NATIVE, *HOOKBUS_KINDS}
    if unknown or "native" not in wanted:
        raise SystemExit(f"--configs: some of {DEFAULT_CONFIGS}, with native; got {args.configs}")
    command_line = " ".join([f"{CODEX_BIN_VARIABLE}={shlex.quote(codex)}", shlex.quote(sys.executable),
                             *(shlex.quote(word) for word in [str(Path(__file__).resolve()), *(sys.argv[1:] if argv is None else argv)])])

    def on_signal(signum: int, frame: object) -> None:
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    root = Path(tempfile.mkdtemp(prefix="codex-bench-"))
    keep = args.keep
    configs: dict[str, Config] = {}
    stub = ModelStub()
    try:
        version = subprocess.run([codex, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
        importer = "hookbus import codex"
        for key in wanted:
            lab = CodexLab(root / key, stub.url)
            if key in NATIVE:
                lab.write_hooks(every_event(NATIVE[key], timeout=600))
                configs[key] = Config(key, f"Codex's own command hook `{NATIVE[key]}`", lab)
                continue
            home = root / f"vix-{key}"
            hookbus_home(home, hooks=key != "gate-guard-only")
            server = HookbusServer(hookbus, home, root / f"serve-{key}.log")
            config = configs[key] = Config(key, HOOKBUS_KINDS[key], lab, server=server)
            config.install = install_hookbus(hookbus, lab, home, server.url if key.startswith("gate") else None)
            pre_tool = json.loads(lab.hooks_file.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            if key.startswith("gate") and "gate.sh" not in pre_tool:
                raise SystemExit(f"{key}: no gate on PreToolUse: {pre_tool}")
            print(f"[bench] {key}: PreToolUse runs {pre_tool}", file=sys.stderr)
        keys = list(configs)
        for _ in range(args.warmup):
            for key in keys:
                warm = run_once(codex, configs[key], stub, args.calls)
                if not warm.ok:
                    keep = True
                    raise SystemExit(f"warm-up run of {key} failed: {warm.problems}; scratch in {root}")
        runs: dict[str, list[Run]] = {key: [] for key in keys}
        for index in range(args.runs):
            shift = index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                run = run_once(codex, configs[key], stub, args.calls)
                runs[key].append(run)
                if not run.ok:
                    print(f"[bench] {key} run {index}: {run.problems}", file=sys.stderr)
                    if sum(not r.ok for r in runs[key]) > max(2, args.runs // 3):
                        keep = True
                        raise SystemExit(f"too many failed runs of {key}; scratch in {root}")
            print(f"[bench] round {index + 1}/{args.runs}: " + ", ".join(
                f"{key} {statistics.fmean(of_event(runs[key][-1], TARGET_EVENT) or [0]):.1f} ms" for key in keys),
                file=sys.stderr, flush=True)
        summaries = {key: summarize(runs[key]) for key in keys}
        print(f"Codex CLI {version} (app server); {args.runs} runs a config, {args.calls} tool calls a run, interleaved "
              f"(rotated order), {args.warmup} warm-up; hooks installed by {importer}.")
        print("Per hook call, ms: Codex's own hook/completed durationMs (whole ms), medians.")
        print()
        print(table(summaries))
        print()
        comparisons: dict[str, dict[str, Any]] = {}
        for key in keys:
            if key in NATIVE:
                continue
            for base in (name for name in NATIVE if name in runs):
                found = comparisons[f"{key} vs {base}"] = compare(runs[key], runs[base])
                print(comparison_line(key, base, found))
        measured_outside: dict[str, dict[str, Any]] = {}
        if args.outside > 0:
            commands = {key: json.loads(config.lab.hooks_file.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
                        for key, config in configs.items() if key != "bridge"}
            measured_outside = outside(commands, configs["native"].lab, args.outside)
            base_ms = measured_outside["native"]["ms_median"] or 1.0
            print()
            print(f"Outside Codex: `/bin/bash -c COMMAND` with Codex's PreToolUse envelope on stdin, {args.outside} calls "
                  f"each, taking turns, ms a call (median; mean): "
                  + "; ".join(f"{key} {found['ms_median']:.2f} ({found['ms_mean']:.2f}), {found['ms_median'] / base_ms:.2f}x native"
                              for key, found in measured_outside.items()))
        print()
        for key, config in configs.items():
            print(f"- {key}: {config.describe}")
        statuses: dict[str, Any] = {}
        for key, config in configs.items():
            if config.server is not None:
                found_status = statuses[key] = status(hookbus, config.server.home)
                print(f"- {key}: hookbus serve http {found_status.get('http') or found_status.get('error')}")
        print()
        print(f"reproduce: {command_line}")
        if args.out:
            Path(args.out).write_text(json.dumps({
                "codex_version": version, "codex_bin": codex, "hookbus": hookbus, "installed_by": importer,
                "runs": args.runs, "warmup": args.warmup, "calls": args.calls, "target": TARGET,
                "command_line": command_line,
                "hooks": {key: json.loads(config.lab.hooks_file.read_text()) for key, config in configs.items()},
                "summary": summaries, "comparisons": comparisons, "outside_codex": measured_outside,
                "hookbus_status": {key: {"http": value.get("http"), "problems": value.get("problems")} for key, value in statuses.items()},
            }, indent=1) + "\n")
            print(f"written: {args.out}", file=sys.stderr)
    finally:
        for config in configs.values():
            if config.server is not None:
                config.server.stop()
        stub.close()
        if keep:
            print(f"[bench] kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
