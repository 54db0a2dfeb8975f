"""What a trivial hook costs a real Claude Code, per hook call and per run, by transport.

A real Claude Code CLI (``$CLAUDE_BIN``) runs ``claude -p PROMPT --output-format json
--settings FILE --allowedTools Bash --debug --debug-file LOG`` offline: its model is
``bench/stub_model.py`` on 127.0.0.1 (one Bash call ``echo hi``, then a final text), its HOME
and working directory are throw-away directories (one pair per config), and every variable
named ANTHROPIC*, CLAUDE*, HOOKBUS* or VIX_HOME of the caller is left out of its environment.
One claude runs at a time. Configs, each with ONE trivial hook on SessionStart,
UserPromptSubmit, PreToolUse, PostToolUse and Stop (matcher ``*`` on the tool events):

- ``none``: no hooks (the baseline);
- ``native``: a bash script ``#!/bin/bash`` / ``exit 0`` as a Claude Code command hook;
- ``bridge``: the hookbus command bridge (``hookbus claude-code-hook --home HOME``, written by
  ``hookbus import claude-code FILE --install-bridge``) with ``hookbus serve`` running; the
  home holds one sync ``exit 0`` command hook per event (ThreadStart for SessionStart);
- ``http``: Claude Code's http hooks posting to ``hookbus serve --http 127.0.0.1:0``
  (``--install-bridge --http URL --http-decisions``; SessionStart takes the gate, Claude
  Code runs no http hook there), same home and hooks. The token reaches Claude Code through the
  settings file's own ``env`` block, which the installer writes into a new (0600) file, and
  which Claude Code uses to fill ``$HOOKBUS_HTTP_TOKEN`` in the hook's header; when that
  block is missing the token is put in claude's environment instead.
- ``default``: what ``--install-bridge --http URL`` writes by default, with the home guard
  ON (``protect_home`` left as it is): the gate (``hookbus/hosts/gate.sh``, a bash command
  hook posting to the server) on SessionStart and on the events whose answer approves or
  rewrites (PreToolUse, UserPromptSubmit, PostToolUse), http hooks on Stop; the same
  trivial hooks, in a home of its own with its own server.
- ``guard-only``: as ``default``, in a home with no hook but the built-in guard: hookbus's
  own no-op, which runs no process on the server's side.
- ``cel-http`` (not in the default ``--configs``; needs hookbus-cel in that hookbus's
  environment): the ``http`` layout (``--install-bridge --http URL --http-decisions``, the
  guard off: with it on, the installer puts PreToolUse on the gate, a command hook), with
  its own server whose home's ONLY hook is one sync blocking ``cel`` deny on PreToolUse
  (matcher ``bash``): ``tool_input.command.contains('rm -rf') ? {deny} : null``. Its
  prompt has the stub model call ``rm -rf scratch`` (in the throw-away working directory),
  so that the hook really denies: the run checks that the tool result is an error naming
  the hook's reason, and expects no PostToolUse call (Claude Code runs none for a denied
  tool). The other events still post to the server, which no hook matches. Printed after
  the table: its PreToolUse per call against ``native``'s (Claude Code's own no-op bash
  hook), the ratio paired run by run (the same round), target <= 0.7x.
- ``default-cel`` (not in the default ``--configs``; needs hookbus-cel too): exactly the
  ``default`` install (``--install-bridge --http URL``, the guard on, so PreToolUse goes
  through the gate), with its own server whose home's ONLY hook is the same ``cel`` rule on
  PreToolUse (matcher ``bash``), sync, blocking and fail-closed (``"on_error": "deny"``). It
  runs the normal prompt (``echo hi``), which the rule allows, so its result is the normal
  one: a fail-closed policy hook at the host's own cost (one process a call, the gate's
  bash; the decision in-process on the server). Printed after the table, for it and for
  ``guard-only``: PreToolUse per call and the hook time a run, each against ``native``'s
  (medians, and paired round by round), target <= 1.3x.

``bridge`` and ``http`` share one ``hookbus serve --http`` per hookbus executable.
``--also-hookbus LABEL=PATH`` adds ``bridge@LABEL`` and ``http@LABEL`` for another hookbus
(say a wheel install next to the editable one), with its own home and server.

Runs are interleaved: after one warm-up run per config, round i runs every config once, the
order rotated by i, so that a noisy neighbour hits all configs alike.

Measures, from Claude Code's own ``--debug`` log:

- command hooks: Claude Code's line ``Hooks: EVENT [COMMAND] finished with status N (Xms)``;
- http hooks: Claude Code logs no duration, so the time is taken between the log's
  timestamps (millisecond resolution) of ``Hooks: HTTP hook POST to URL`` and the next
  ``Hooks: HTTP hook response status ...`` (or ``HTTP hook error``) line. Each call is given
  to its event by where it falls: before the first model request UserPromptSubmit, before
  the tool starts PreToolUse, before the second model request PostToolUse, after it Stop.

Reported per config: the measure of each event, per-event medians of the per-call times, the
median per call over all events, the hook time a run (the sum of its calls), the wall time of
the whole ``claude -p`` process, and the differences to ``none``. A markdown table goes to
stdout, the full figures (every run's numbers too) to ``--out`` as JSON.

Run it (Claude Code is not a dependency of hookbus; install it anywhere)::

    npm install --prefix DIR @anthropic-ai/claude-code@2.1.332
    CLAUDE_BIN=DIR/node_modules/.bin/claude .venv/bin/python bench/claude_code_bench.py \\
        [--runs 8] [--out result.json] [--configs none,native,bridge,http] \\
        [--also-hookbus wheel=/path/to/venv/bin/hookbus] [--keep]

    # a cel deny over http against Claude Code's own no-op bash hook (hookbus-cel installed)
    CLAUDE_BIN=... .venv/bin/python bench/claude_code_bench.py --configs none,native,http,cel-http

    # a fail-closed cel rule behind the default install's gate, against native (hookbus-cel installed)
    CLAUDE_BIN=... .venv/bin/python bench/claude_code_bench.py --configs none,native,guard-only,default-cel

``HOOKBUS_BIN`` names the hookbus executable (default: ``hookbus`` next to sys.executable).
Every server and stub is stopped by its PID on exit; a claude run is killed after 120 s.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

HERE = Path(__file__).resolve().parent
#: Claude Code's events the hooks go on, in the order they fire in a run.
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
#: hookbus's name of each.
VIX_EVENTS = {
    "SessionStart": "ThreadStart", "UserPromptSubmit": "UserPromptSubmit", "PreToolUse": "PreToolUse",
    "PostToolUse": "PostToolUse", "Stop": "Stop",
}
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
PROMPT = "Run the command: echo hi"
EXPECTED_RESULT = "done: is_error=False result=hi"
#: The cel-http config: the home's only hook, the Bash call it denies, what the model then sees.
CEL_HOOK_ID = "cel-deny-rm-rf"
CEL_REASON = "no rm -rf"
CEL_EXPRESSION = f"tool_input.command.contains('rm -rf') ? {{'behavior': 'deny', 'reason': '{CEL_REASON}'}} : null"
CEL_PROMPT = "Run the command: RUN<<rm -rf scratch>>"
CEL_EXPECTED_RESULT = "done: is_error=True result="
#: Its target: a PreToolUse call against Claude Code's own no-op bash hook's.
CEL_TARGET = 0.7
#: default-cel's and guard-only's targets against native: PreToolUse per call, hook time a run.
GATE_TARGET = 1.3
CLAUDE_TIMEOUT = 120.0
SERVER_START_TIMEOUT = 30.0
TOKEN_VARIABLE = "HOOKBUS_HTTP_TOKEN"
INSTALL_HINT = (
    "set CLAUDE_BIN to a Claude Code CLI, for example:\n"
    "    npm install --prefix DIR @anthropic-ai/claude-code@2.1.332\n"
    "    export CLAUDE_BIN=DIR/node_modules/.bin/claude"
)

COMMAND_LINE = re.compile(r"Hooks: ([A-Za-z]+)(?::\S*)? \[.*\] finished with status (-?\d+) \((\d+(?:\.\d+)?)ms\)")
HTTP_START = "Hooks: HTTP hook POST to "
HTTP_END = ("Hooks: HTTP hook response status", "HTTP hook error")
MEASURE_COMMAND = "command: Claude's 'finished (Xms)'"
MEASURE_HTTP = "http: debug-log POST -> response lines"


# ----------------------------------------------------------------------------- processes
class Processes:
    """The helper processes (stub, servers): each stopped by its PID at exit."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self, argv: Sequence[str], *, stdout: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(stdout, "wb") as out:
            process = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        self.running.append(process)
        return process

    def stop_all(self) -> None:
        while self.running:
            process = self.running.pop()
            if process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def wait_for(path: Path, pattern: str, process: subprocess.Popen[bytes], what: str) -> re.Match[str]:
    """The first match of ``pattern`` in the output file ``path`` of a starting ``process``."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        found = re.search(pattern, text)
        if found:
            return found
        if process.poll() is not None:
            raise SystemExit(f"{what} exited ({process.returncode}) before it was ready:\n{text[-2000:]}")
        time.sleep(0.05)
    raise SystemExit(f"{what} was not ready after {SERVER_START_TIMEOUT:.0f} s; its output: {path}")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without what would point a child at another Claude Code or hookbus."""
    env = {
        name: value for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC", "CLAUDE", "HOOKBUS")) and name != "VIX_HOME"
    }
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- configs
@dataclass
class Config:
    key: str
    describe: str
    settings: Path
    home: Path
    cwd: Path
    #: per event: "command", "http" or None (no hook)
    transport: dict[str, str | None]
    env: dict[str, str] = field(default_factory=dict)
    token_via: str | None = None
    server: str | None = None
    prompt: str = PROMPT
    #: the run's result starts with ``expect`` and holds ``expect_text``
    expect: str = EXPECTED_RESULT
    expect_text: str = ""
    #: events with a hook that Claude Code does not call in this run (after a denied tool)
    not_called: tuple[str, ...] = ()


@dataclass
class HookbusServer:
    label: str
    executable: str
    home: Path
    url: str
    process: subprocess.Popen[bytes]


def write_hookbus_home(
    home: Path, guard: bool = False, hooks: bool = True, cel: bool = False, on_error: str | None = None,
) -> None:
    """One trivial sync command hook per event (none without ``hooks``), or with ``cel``
    only the cel deny hook (with ``on_error`` when given: ``deny`` for default-cel's
    fail-closed one). The built-in home guard is off unless ``guard``: it keeps PreToolUse
    off Claude Code's http hooks, and what ``bridge`` and ``http`` compare is each
    transport's cost."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "hooks").mkdir(exist_ok=True)
    if not guard:
        (home / "settings.json").write_text(json.dumps({"protect_home": False}) + "\n")
    if cel:
        folder = home / "hooks" / CEL_HOOK_ID
        folder.mkdir(parents=True)
        spec: dict[str, Any] = {"id": CEL_HOOK_ID, "trigger": {"event": "PreToolUse", "matcher": "bash"},
                                "mode": "sync", "blocking": True, "cel": CEL_EXPRESSION}
        if on_error is not None:
            spec["on_error"] = on_error
        (folder / "hook.json").write_text(json.dumps(spec, indent=2) + "\n")
        return
    for event in EVENTS if hooks else ():
        vix = VIX_EVENTS[event]
        hook_id = f"trivial-{vix.lower()}"
        folder = home / "hooks" / hook_id
        folder.mkdir(parents=True)
        spec = {"id": hook_id, "trigger": {"event": vix}, "mode": "sync", "command": "exit 0"}
        (folder / "hook.json").write_text(json.dumps(spec, indent=2) + "\n")


def start_hookbus(
    label: str, executable: str, root: Path, processes: Processes, guard: bool = False, hooks: bool = True,
    cel: bool = False, on_error: str | None = None,
) -> HookbusServer:
    home = root / f"hookbus-home-{label}"
    write_hookbus_home(home, guard, hooks, cel, on_error)
    log = root / f"serve-{label}.log"
    process = processes.start([executable, "serve", "--home", str(home), "--http", "127.0.0.1:0"], stdout=log,
                              env=clean_env())
    found = wait_for(log, r"listening on (http://127\.0\.0\.1:\d+)", process, f"hookbus serve ({executable})")
    return HookbusServer(label, executable, home, found.group(1), process)


def hookbus_status(server: HookbusServer) -> dict[str, Any]:
    done = subprocess.run([server.executable, "status", "--home", str(server.home), "--json"], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    try:
        status = json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stdout + done.stderr)[-1000:]}
    return status if isinstance(status, dict) else {"error": repr(status)}


def transports(settings: dict[str, Any]) -> dict[str, str | None]:
    hooks = settings.get("hooks") or {}
    found: dict[str, str | None] = {}
    for event in EVENTS:
        kinds = {hook.get("type") for group in hooks.get(event) or [] for hook in group.get("hooks") or []}
        found[event] = "/".join(sorted(str(kind) for kind in kinds)) or None
    return found


def plain_config(key: str, root: Path, hook: dict[str, Any] | None, describe: str) -> Config:
    home, cwd = root / f"claude-home-{key}", root / f"cwd-{key}"
    home.mkdir()
    cwd.mkdir()
    settings: dict[str, Any] = {"hooks": {}}
    if hook is not None:
        for event in EVENTS:
            group: dict[str, Any] = {"hooks": [dict(hook)]}
            if event in TOOL_EVENTS:
                group["matcher"] = "*"
            settings["hooks"][event] = [group]
    path = root / f"settings-{key}.json"
    path.write_text(json.dumps(settings, indent=2) + "\n")
    return Config(key, describe, path, home, cwd, transports(settings))


#: What each hookbus config is, by its kind.
HOOKBUS_KINDS = {
    "bridge": "hookbus command bridge",
    "http": "hookbus http hooks (--http-decisions)",
    "default": "hookbus --install-bridge --http, guard on: the gate and http hooks",
    "guard-only": "as default, in a home with no hook but the guard (hookbus's own no-op)",
    "cel-http": "hookbus http hooks (--http-decisions), the home's only hook one `cel` deny on PreToolUse",
    "default-cel": "as default, the home's only hook one fail-closed `cel` rule on PreToolUse (allows echo hi)",
}
#: Run when --configs is not given (cel-http and default-cel need the hookbus-cel plugin:
#: asked for by name).
DEFAULT_CONFIGS = "none,native,bridge,http,default,guard-only"


def hookbus_config(key: str, root: Path, server: HookbusServer, kind: str) -> Config:
    home, cwd = root / f"claude-home-{key}", root / f"cwd-{key}"
    home.mkdir()
    cwd.mkdir()
    path = root / f"settings-{key.replace('@', '-')}.json"
    argv = [server.executable, "import", "claude-code", str(path), "--install-bridge", "--home", str(server.home)]
    http = kind != "bridge"
    if kind in ("http", "cel-http"):
        # Every event that can go over http does, as the figures always measured (the
        # default puts the decision events on the gate, against port squatters).
        argv += ["--http", server.url, "--http-decisions"]
    elif kind in ("default", "guard-only", "default-cel"):
        argv += ["--http", server.url]
    done = subprocess.run(argv, env=clean_env(), capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    settings = json.loads(path.read_text())
    config = Config(key, f"{HOOKBUS_KINDS[kind]} ({server.executable})", path, home, cwd, transports(settings), server=server.label)
    if http and "http" in config.transport.values():
        if (settings.get("env") or {}).get(TOKEN_VARIABLE):
            config.token_via = "the settings file's env block"
        else:
            token = (server.home / "run" / "http.token").read_text().strip()
            config.env[TOKEN_VARIABLE] = token
            config.token_via = "claude's environment"
    return config


# ----------------------------------------------------------------------------- one run
def parse_time(line: str) -> float | None:
    """The ms timestamp a debug-log line starts with (2026-12-02T04:05:24.437Z)."""
    try:
        stamp = datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc)
    except ValueError:
        return None
    return stamp.timestamp() * 1000.0


def hook_calls(text: str) -> tuple[list[tuple[str, str, float]], list[str]]:
    """Claude Code's hook calls in one --debug log, each (event, "command"|"http", ms), and
    the problems seen (a failed hook call, an http call without an answer)."""
    calls: list[tuple[str, str, float]] = []
    problems: list[str] = []
    requests = 0  # agent-loop model requests so far
    tool_started = False
    http_start: tuple[float, str] | None = None
    for line in text.splitlines():
        if "[API REQUEST]" in line:
            requests += 1
        elif "tool_dispatch_start" in line:
            tool_started = True
        found = COMMAND_LINE.search(line)
        if found:
            event, status, ms = found.group(1), int(found.group(2)), float(found.group(3))
            calls.append((event, "command", ms))
            if status != 0:
                problems.append(f"{event} command hook exited {status}")
            continue
        stamp = parse_time(line)
        if HTTP_START in line and stamp is not None:
            if requests == 0:
                event = "UserPromptSubmit"
            elif requests == 1 and not tool_started:
                event = "PreToolUse"
            elif requests == 1:
                event = "PostToolUse"
            else:
                event = "Stop"
            http_start = (stamp, event)
        elif http_start is not None and stamp is not None and any(mark in line for mark in HTTP_END):
            calls.append((http_start[1], "http", stamp - http_start[0]))
            if "response status 2" not in line:
                problems.append(f"{http_start[1]} http hook: {line[24:200]}")
            http_start = None
    if http_start is not None:
        problems.append(f"{http_start[1]} http hook: no response line")
    return calls, problems


@dataclass
class Run:
    config: str
    wall_ms: float
    calls: list[tuple[str, str, float]]
    problems: list[str]
    ok: bool


def run_claude(claude: str, config: Config, debug_log: Path, model_url: str) -> Run:
    debug_log.unlink(missing_ok=True)
    argv = [
        claude, "-p", config.prompt, "--output-format", "json", "--settings", str(config.settings),
        "--allowedTools", "Bash", "--debug", "--debug-file", str(debug_log),
    ]
    env = clean_env(
        HOME=str(config.home), ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY="dummy",
        DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", **config.env,
    )
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=config.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=CLAUDE_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # its own session: claude and what it started
        process.communicate()
        return Run(config.key, CLAUDE_TIMEOUT * 1000, [], [f"timed out after {CLAUDE_TIMEOUT:.0f} s"], False)
    wall_ms = (time.perf_counter() - started) * 1000
    problems: list[str] = []
    try:
        result = json.loads(out).get("result")
    except (ValueError, AttributeError):
        result = None
    if (process.returncode != 0 or result is None or not str(result).startswith(config.expect)
            or config.expect_text not in str(result)):
        problems.append(f"rc {process.returncode}, result {result!r}, stderr {err.decode(errors='replace')[-500:]!r}")
    text = debug_log.read_text(errors="replace") if debug_log.exists() else ""
    if not text:
        problems.append("no debug log")
    calls, hook_problems = hook_calls(text)
    problems += hook_problems
    expected = sum(1 for event, kind in config.transport.items() if kind and event not in config.not_called)
    if len(calls) != expected:
        problems.append(f"{len(calls)} hook calls, expected {expected}: {[event for event, _, _ in calls]}")
    return Run(config.key, wall_ms, calls, problems, not problems)


# ----------------------------------------------------------------------------- report
def median(values: Sequence[float]) -> float | None:
    return round(float(statistics.median(values)), 1) if values else None


def summarize(config: Config, runs: list[Run], base: dict[str, Any] | None) -> dict[str, Any]:
    good = [run for run in runs if run.ok]
    per_event: dict[str, list[float]] = {}
    measure: dict[str, str] = {}
    for run in good:
        for event, kind, ms in run.calls:
            per_event.setdefault(event, []).append(ms)
            measure[event] = MEASURE_COMMAND if kind == "command" else MEASURE_HTTP
    summary: dict[str, Any] = {
        "describe": config.describe,
        "transport": config.transport,
        "token_via": config.token_via,
        "runs": len(good),
        "failed_runs": len(runs) - len(good),
        "measure_by_event": measure,
        "per_call_ms_median_by_event": {event: median(per_event[event]) for event in EVENTS if event in per_event},
        "per_call_ms_median_all": median([ms for values in per_event.values() for ms in values]),
        "per_call_ms_median_without_session_start": median(
            [ms for event, values in per_event.items() if event != "SessionStart" for ms in values]
        ),
        "hook_ms_per_run_median": median([sum(ms for _, _, ms in run.calls) for run in good]),
        "hook_calls_per_run": sorted({len(run.calls) for run in good}),
        "wall_ms_median": median([run.wall_ms for run in good]),
        "wall_ms_min": round(min(run.wall_ms for run in good), 1) if good else None,
    }
    if base is not None:
        for name in ("wall_ms_median", "hook_ms_per_run_median"):
            if summary[name] is not None and base[name] is not None:
                summary[name + "_minus_none"] = round(summary[name] - base[name], 1)
    summary["raw"] = {
        "wall_ms": [round(run.wall_ms, 1) for run in good],
        "calls": [[[event, kind, round(ms, 1)] for event, kind, ms in run.calls] for run in good],
        "problems": [run.problems for run in runs if not run.ok],
    }
    return summary


def cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def table(summaries: dict[str, dict[str, Any]]) -> str:
    short = {"UserPromptSubmit": "UserPrompt", "PreToolUse": "PreTool", "PostToolUse": "PostTool"}
    head = ["config", "measure", *(short.get(event, event) for event in EVENTS), "per call (all)", "per call (no SessionStart)",
            "hook ms/run", "calls/run", "wall", "wall − none", "wall min", "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, summary in summaries.items():
        kinds = sorted({kind for kind in summary["transport"].values() if kind})
        measure = "+".join("cmd" if kind == "command" else kind for kind in kinds) or "–"
        if len(kinds) > 1:
            http_events = [e for e, kind in summary["transport"].items() if kind == "http"]
            command_events = [e for e, kind in summary["transport"].items() if kind == "command"]
            measure = f"http ({len(http_events)} events), cmd ({', '.join(command_events)})"
        by_event = summary["per_call_ms_median_by_event"]
        row = [
            key, measure, *(cell(by_event.get(event)) for event in EVENTS),
            cell(summary["per_call_ms_median_all"]), cell(summary["per_call_ms_median_without_session_start"]),
            cell(summary["hook_ms_per_run_median"]),
            ",".join(str(n) for n in summary["hook_calls_per_run"]) or "–", cell(summary["wall_ms_median"]),
            cell(summary.get("wall_ms_median_minus_none")), cell(summary["wall_ms_min"]), f"{summary['runs']}"
            + (f" ({summary['failed_runs']} failed)" if summary["failed_runs"] else ""),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def event_ms(run: Run, event: str) -> list[float]:
    return [ms for name, _, ms in run.calls if name == event]


def compare_per_call(ours: list[Run], theirs: list[Run], event: str) -> dict[str, Any]:
    """``event``'s per-call time in ``ours`` against ``theirs``: the ratio of the medians over
    all good runs, and the ratios paired round by round (run i of each is round i, so that
    the two runs of a pair were made one near the other), with their median and range;
    beside it, against ``theirs``' median per call over all its events."""
    mine = [ms for run in ours if run.ok for ms in event_ms(run, event)]
    baseline = [ms for run in theirs if run.ok for ms in event_ms(run, event)]
    baseline_all = [ms for run in theirs if run.ok for _, _, ms in run.calls]
    paired = [
        statistics.median(event_ms(a, event)) / statistics.median(event_ms(b, event))
        for a, b in zip(ours, theirs)
        if a.ok and b.ok and event_ms(a, event) and event_ms(b, event) and statistics.median(event_ms(b, event)) > 0
    ]
    if not mine or not baseline:
        return {"event": event, "error": "no calls to compare"}
    return {
        "event": event,
        "ms_median": median(mine),
        "baseline_ms_median": median(baseline),
        "ratio_of_medians": round(statistics.median(mine) / statistics.median(baseline), 3),
        "paired_ratio_median": round(statistics.median(paired), 3) if paired else None,
        "paired_ratio_min": round(min(paired), 3) if paired else None,
        "paired_ratio_max": round(max(paired), 3) if paired else None,
        "pairs": len(paired),
        "baseline_all_events_ms_median": median(baseline_all),
        "ratio_to_baseline_all_events": round(statistics.median(mine) / statistics.median(baseline_all), 3),
    }


def paired_text(found: dict[str, Any]) -> str:
    """How the ratios paired round by round came out, for a comparison's line."""
    if not found["pairs"]:
        return "no pairs"
    return (f"paired run by run {found['paired_ratio_median']:.2f}x (range {found['paired_ratio_min']:.2f}-"
            f"{found['paired_ratio_max']:.2f}x over {found['pairs']} rounds)")


def print_comparison(ours: str, theirs: str, found: dict[str, Any], target: float) -> None:
    event = found["event"]
    if "error" in found:
        print(f"{ours} vs {theirs}, {event} per call: {found['error']}")
        return
    ratio = found["ratio_of_medians"]
    paired = paired_text(found)
    print(f"{ours} vs {theirs}, {event} per call: {ratio:.2f}x, target <= {target:g}x "
          f"{'met' if ratio <= target else 'MISS'} ({found['ms_median']:.1f} ms vs {found['baseline_ms_median']:.1f} ms, "
          f"medians); {paired}; against {theirs}'s median per call over all its events "
          f"({found['baseline_all_events_ms_median']:.1f} ms): {found['ratio_to_baseline_all_events']:.2f}x. "
          f"http times have the debug log's 1 ms resolution.")


def compare_hook_time(ours: list[Run], theirs: list[Run]) -> dict[str, Any]:
    """The hook time a run (the sum of its calls) in ``ours`` against ``theirs``: the ratio of
    the medians over all good runs, and the ratios paired round by round."""
    mine = [sum(ms for _, _, ms in run.calls) for run in ours if run.ok]
    baseline = [sum(ms for _, _, ms in run.calls) for run in theirs if run.ok]
    paired = [
        sum(ms for _, _, ms in a.calls) / sum(ms for _, _, ms in b.calls)
        for a, b in zip(ours, theirs) if a.ok and b.ok and sum(ms for _, _, ms in b.calls) > 0
    ]
    if not mine or not baseline or statistics.median(baseline) <= 0:
        return {"error": "no runs to compare"}
    return {
        "ms_median": median(mine),
        "baseline_ms_median": median(baseline),
        "ratio_of_medians": round(statistics.median(mine) / statistics.median(baseline), 3),
        "paired_ratio_median": round(statistics.median(paired), 3) if paired else None,
        "paired_ratio_min": round(min(paired), 3) if paired else None,
        "paired_ratio_max": round(max(paired), 3) if paired else None,
        "pairs": len(paired),
    }


def print_hook_time_comparison(ours: str, theirs: str, found: dict[str, Any], target: float) -> None:
    if "error" in found:
        print(f"{ours} vs {theirs}, hook time a run: {found['error']}")
        return
    ratio = found["ratio_of_medians"]
    paired = paired_text(found)
    print(f"{ours} vs {theirs}, hook time a run: {ratio:.2f}x, target <= {target:g}x "
          f"{'met' if ratio <= target else 'MISS'} ({found['ms_median']:.1f} ms vs {found['baseline_ms_median']:.1f} ms, "
          f"medians); {paired}.")


def check_cel_loaded(server: HookbusServer, key: str = "cel-http", on_error: str | None = None) -> None:
    """Refuse to measure a cel config unless its server loaded the cel hook (with that
    ``on_error``, when given and when the status shows it)."""
    status = hookbus_status(server)
    hooks = {hook.get("id"): hook for hook in status.get("hooks") or []}
    hook = hooks.get(CEL_HOOK_ID) or {}
    wrong_on_error = on_error is not None and "on_error" in hook and hook.get("on_error") != on_error
    if hook.get("action") != "cel" or hook.get("state") != "enabled" or wrong_on_error:
        raise SystemExit(
            f"{key}: hookbus serve ({server.executable}) did not load the cel hook (is hookbus-cel installed "
            f"in its environment? pip install -e contrib/hookbus-cel): hook {hook or 'missing'}; problems "
            f"{status.get('problems') or status.get('error')}"
        )


# ----------------------------------------------------------------------------- main
def find_claude() -> str:
    named = os.environ.get("CLAUDE_BIN")
    if not named:
        raise SystemExit(f"CLAUDE_BIN is not set: {INSTALL_HINT}")
    found = shutil.which(named)
    if found is None:
        raise SystemExit(f"CLAUDE_BIN={named} is not an executable: {INSTALL_HINT}")
    return found


def find_hookbus(named: str) -> str:
    found = shutil.which(named)
    if found is None:
        raise SystemExit(f"no hookbus executable at {named}: set HOOKBUS_BIN")
    return os.path.abspath(found)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8, help="measured runs a config (default 8)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs a config first (default 1)")
    parser.add_argument(
        "--configs", default=DEFAULT_CONFIGS,
        help=f"which of none,native,{','.join(HOOKBUS_KINDS)} (default {DEFAULT_CONFIGS})",
    )
    parser.add_argument("--also-hookbus", action="append", default=[], metavar="LABEL=PATH",
                        help="add bridge@LABEL and http@LABEL for this hookbus executable")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (debug logs, settings)")
    args = parser.parse_args(argv)
    claude = find_claude()
    hookbus = find_hookbus(os.environ.get("HOOKBUS_BIN") or str(Path(sys.executable).parent / "hookbus"))
    wanted = [name.strip() for name in args.configs.split(",") if name.strip()]
    unknown = set(wanted) - {"none", "native", *HOOKBUS_KINDS}
    if unknown or "none" not in wanted:
        raise SystemExit(f"--configs: expected some of none,native,{','.join(HOOKBUS_KINDS)}, with none (the baseline); got {args.configs}")
    extra = [tuple(item.split("=", 1)) for item in args.also_hookbus]
    if any(len(item) != 2 or not item[0] for item in extra):
        raise SystemExit("--also-hookbus: expected LABEL=PATH")

    root = Path(tempfile.mkdtemp(prefix="claude-code-bench-"))
    processes = Processes()

    def on_signal(signum: int, frame: object) -> None:
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    atexit.register(processes.stop_all)
    keep = args.keep
    try:
        version = subprocess.run([claude, "--version"], capture_output=True, text=True, timeout=60,
                                 env=clean_env(HOME=str(root))).stdout.strip()
        stub_log = root / "stub-model.out"
        stub = processes.start([sys.executable, str(HERE / "stub_model.py"), "--port", "0",
                                "--log", str(root / "stub-model.jsonl")], stdout=stub_log)
        port = wait_for(stub_log, r"listening on (\d+)", stub, "stub model").group(1)
        model_url = f"http://127.0.0.1:{port}"

        configs: dict[str, Config] = {}
        noop = root / "noop.sh"
        noop.write_text("#!/bin/bash\nexit 0\n")
        noop.chmod(0o755)
        if "none" in wanted:
            configs["none"] = plain_config("none", root, None, "no hooks")
        if "native" in wanted:
            configs["native"] = plain_config("native", root, {"type": "command", "command": str(noop)},
                                             "bash script `exit 0` as a command hook")
        servers: dict[str, HookbusServer] = {}
        hookbuses = ([("", hookbus)] if {"bridge", "http"} & set(wanted) else []) + [
            (label, find_hookbus(path)) for label, path in extra
        ]
        for label, executable in hookbuses:
            server = start_hookbus(label or "main", executable, root, processes)
            servers[label or "main"] = server
            suffix = f"@{label}" if label else ""
            for kind in ("bridge", "http"):
                if kind in wanted or label:
                    configs[kind + suffix] = hookbus_config(kind + suffix, root, server, kind)
        if "default" in wanted:
            # A home of its own: the guard on, as a user's is.
            guarded = servers["guarded"] = start_hookbus("guarded", hookbus, root, processes, guard=True)
            configs["default"] = hookbus_config("default", root, guarded, "default")
        if "guard-only" in wanted:
            bare = servers["bare"] = start_hookbus("bare", hookbus, root, processes, guard=True, hooks=False)
            configs["guard-only"] = hookbus_config("guard-only", root, bare, "guard-only")
        if "cel-http" in wanted:
            # A home of its own whose only hook is the cel deny, its plugin checked loaded.
            cel = servers["cel"] = start_hookbus("cel", hookbus, root, processes, cel=True)
            check_cel_loaded(cel)
            config = configs["cel-http"] = hookbus_config("cel-http", root, cel, "cel-http")
            config.prompt, config.expect, config.expect_text = CEL_PROMPT, CEL_EXPECTED_RESULT, CEL_REASON
            config.not_called = ("PostToolUse",)
        if "default-cel" in wanted:
            # The default install (guard on, PreToolUse on the gate), a home of its own whose
            # only hook is the fail-closed cel rule; the normal prompt, which it allows.
            gated = servers["default-cel"] = start_hookbus("default-cel", hookbus, root, processes, guard=True,
                                                           cel=True, on_error="deny")
            check_cel_loaded(gated, "default-cel", "deny")
            configs["default-cel"] = hookbus_config("default-cel", root, gated, "default-cel")
        for config in configs.values():
            print(f"[bench] {config.key}: {config.describe}; hooks {config.transport}"
                  + (f"; token via {config.token_via}" if config.token_via else ""), file=sys.stderr)

        keys = list(configs)
        runs: dict[str, list[Run]] = {key: [] for key in keys}
        for round_index in range(args.warmup):
            for key in keys:
                warm = run_claude(claude, configs[key], root / f"debug-{key}-warmup.log", model_url)
                if not warm.ok:
                    keep = True
                    raise SystemExit(f"warm-up run of {key} failed: {warm.problems}; logs in {root}")
        for round_index in range(args.runs):
            shift = round_index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                log = root / f"debug-{key.replace('@', '-')}-{round_index:02d}.log"
                run = run_claude(claude, configs[key], log, model_url)
                runs[key].append(run)
                if not run.ok:
                    keep = True
                    print(f"[bench] {key} run {round_index}: {run.problems} (log {log})", file=sys.stderr)
                    if sum(not r.ok for r in runs[key]) > max(2, args.runs // 3):
                        raise SystemExit(f"too many failed runs of {key}; logs in {root}")
            print(f"[bench] round {round_index + 1}/{args.runs}: "
                  + ", ".join(f"{key} {runs[key][-1].wall_ms:.0f} ms" for key in keys), file=sys.stderr, flush=True)

        statuses = {label: hookbus_status(server) for label, server in servers.items()}
        summaries: dict[str, dict[str, Any]] = {}
        base = summarize(configs["none"], runs["none"], None)
        for key in keys:
            summaries[key] = base if key == "none" else summarize(configs[key], runs[key], base)
        print(f"Claude Code {version}; {args.runs} runs a config, interleaved (rotated order), "
              f"{args.warmup} warm-up; times in ms, medians.")
        print(f"Measures: {MEASURE_COMMAND} for command hooks; {MEASURE_HTTP} for http hooks (ms resolution).")
        print()
        print(table(summaries))
        print()
        cel_vs_native = None
        if "cel-http" in runs and "native" in runs:
            cel_vs_native = compare_per_call(runs["cel-http"], runs["native"], "PreToolUse")
            print_comparison("cel-http", "native", cel_vs_native, CEL_TARGET)
            print()
        gate_vs_native: dict[str, dict[str, Any]] = {}
        for key in ("default-cel", "guard-only"):
            if key in runs and "native" in runs:
                per_call = compare_per_call(runs[key], runs["native"], "PreToolUse")
                per_run = compare_hook_time(runs[key], runs["native"])
                gate_vs_native[key] = {"PreToolUse_per_call": per_call, "hook_ms_per_run": per_run,
                                       "target": GATE_TARGET}
                print_comparison(key, "native", per_call, GATE_TARGET)
                print_hook_time_comparison(key, "native", per_run, GATE_TARGET)
                print()
        for key, config in configs.items():
            print(f"- {key}: {config.describe}" + (f"; token via {config.token_via}" if config.token_via else ""))
        for label, status in statuses.items():
            http = status.get("http") or {}
            fired = {hook.get("id"): (hook.get("last_fire") or {}).get("status") for hook in status.get("hooks") or []}
            print(f"hookbus serve ({servers[label].executable}): http {http}; last fire of each hook {fired}")
        if args.out:
            result = {
                "claude_version": version,
                "claude_bin": claude,
                "hookbus": {label: server.executable for label, server in servers.items()},
                "runs": args.runs,
                "warmup": args.warmup,
                "prompt": PROMPT,
                "prompts": {key: config.prompt for key, config in configs.items() if config.prompt != PROMPT},
                "events": list(EVENTS),
                "measures": {"command": MEASURE_COMMAND, "http": MEASURE_HTTP},
                "settings": {key: json.loads(config.settings.read_text()) for key, config in configs.items()},
                "hookbus_status": {
                    label: {"http": status.get("http"), "hooks": status.get("hooks"), "problems": status.get("problems")}
                    for label, status in statuses.items()
                },
                "summary": summaries,
            }
            if cel_vs_native is not None:
                result["cel_http_vs_native"] = {**cel_vs_native, "target": CEL_TARGET}
            if gate_vs_native:
                result["vs_native"] = gate_vs_native
            for settings in result["settings"].values():
                if TOKEN_VARIABLE in (settings.get("env") or {}):
                    settings["env"][TOKEN_VARIABLE] = "<token>"
            Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
            print(f"written: {args.out}", file=sys.stderr)
    finally:
        processes.stop_all()
        if keep:
            print(f"[bench] kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
