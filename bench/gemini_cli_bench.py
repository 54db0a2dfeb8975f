"""What a trivial hook costs a real Gemini CLI, per hook call and per run, by transport.

A real Gemini CLI (``$GEMINI_BIN``) runs ``gemini -p PROMPT --output-format json
--approval-mode yolo --debug`` offline: its model is ``bench/stub_gemini_model.py`` on
127.0.0.1 (``GOOGLE_GEMINI_BASE_URL``; one ``run_shell_command`` call ``echo hi``, then a
final text), its HOME (holding ``.gemini/settings.json``) and working directory are
throw-away directories (one pair per config), and every variable named ANTHROPIC*, CLAUDE*,
GEMINI*, GOOGLE*, HOOKBUS* or VIX_HOME of the caller is left out of its environment, as are
GITHUB_SHA and SURFACE (they switch Gemini CLI to its strict environment sanitizing). One
gemini runs at a time. Configs, each with ONE hook on every event the command bridge goes
on (SessionStart, BeforeAgent, PreCompress, BeforeTool, AfterTool, AfterAgent):

- ``none``: no hooks (the baseline);
- ``native``: a bash script ``#!/bin/bash`` / ``exit 0`` as a Gemini CLI command hook;
- ``bridge``: the hookbus command bridge (``hookbus gemini-cli-hook --home HOME``, written by
  ``hookbus import gemini-cli FILE --install-bridge``) with ``hookbus serve`` running;
- ``gate``: the gate (``hookbus/hosts/gate.sh``: a bash command hook posting the host's stdin
  to the server with bash builtins) in front of the same bridge, with ``hookbus serve --http
  127.0.0.1:0`` running, as ``--install-bridge --http URL`` writes it;
- ``guard-only``: the same, in a home with no hook but the built-in guard: hookbus's own
  no-op, which starts no process on the server's side.

``bridge`` and ``gate`` each have a hookbus home and server of their own, holding one
trivial sync hook (``exit 0``) per event (hookbus's names: ThreadStart, UserPromptSubmit,
PreCompact, PreToolUse, PostToolUse, Stop), with the home guard ON (hookbus's default;
``protect_home`` is not written).

Runs are interleaved: after one warm-up run per config, round i runs every config once, the
order rotated by i, so that a noisy neighbour hits all configs alike.

Measures, from Gemini CLI's own ``--debug`` stderr: the line ``Hook execution for EVENT: 1
hooks executed successfully, total duration: Xms`` (or ``... N succeeded, M failed (...)
...``), one per event fired; with one hook an event, X is the one call's time, from before
Gemini spawns its shell until the hook's process closes (integer ms, Date.now()).
Gemini CLI 0.61.0 fires PreCompress twice in such a run (before each model turn), the others
once: 7 calls a run; a run with other calls, a failed call, a wrong answer or a non-zero exit
is reported and left out of the figures.

Reported per config: per-event medians of the per-call times, the median per call over all
events, the hook time a run (the sum of its calls), the wall time of the whole ``gemini -p``
process, the differences to ``none``, and each hookbus config's ratios to ``native``. A
markdown table goes to stdout, the full figures (every run's numbers too) to ``--out`` as
JSON. After the runs, each hookbus config's BeforeTool command is run once by the bench
itself on a Gemini-shaped stdin (the ``probe``), to show what it prints on stdout and on
stderr (Gemini CLI keeps a hook's stderr to itself), and ``hookbus status`` tells how many
gate requests each server answered or sent to the bridge.

Run it (Gemini CLI is not a dependency of hookbus; install it anywhere)::

    npm install --prefix DIR @google/gemini-cli@0.61.0
    GEMINI_BIN=DIR/node_modules/.bin/gemini .venv/bin/python bench/gemini_cli_bench.py \\
        [--runs 8] [--out result.json] [--configs none,native,bridge,gate] [--keep]

``HOOKBUS_BIN`` names the hookbus executable (default: ``hookbus`` next to sys.executable).
Every server and stub is stopped by its PID on exit; a gemini run is killed after 120 s.
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
from pathlib import Path
from typing import Any, Sequence

from hookbus.dialects.gemini_names import VIX_EVENT
from hookbus.hosts.gate import is_gate_command
from hookbus.hosts.install import GEMINI_CLI

HERE = Path(__file__).resolve().parent
#: Gemini CLI's events the hooks go on (those the bridge covers), in the order they first fire.
EVENTS = ("SessionStart", "BeforeAgent", "PreCompress", "BeforeTool", "AfterTool", "AfterAgent")
#: How many times each fires in one run (Gemini CLI 0.61.0, one prompt, one shell call).
EXPECTED_CALLS = {"SessionStart": 1, "BeforeAgent": 1, "PreCompress": 2, "BeforeTool": 1, "AfterTool": 1, "AfterAgent": 1}
PROMPT = "Run the command: echo hi"
EXPECTED_RESPONSE = "done: result=hi"
GEMINI_TIMEOUT = 120.0
SERVER_START_TIMEOUT = 30.0
DROPPED_PREFIXES = ("ANTHROPIC", "CLAUDE", "GEMINI", "GOOGLE", "HOOKBUS")
DROPPED_NAMES = ("VIX_HOME", "GITHUB_SHA", "SURFACE")
#: Gemini CLI's settings besides the hooks: nothing that phones home, API-key auth, no
#: folder-trust prompt.
BASE_SETTINGS: dict[str, Any] = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
}
INSTALL_HINT = (
    "set GEMINI_BIN to a Gemini CLI, for example:\n"
    "    npm install --prefix DIR @google/gemini-cli@0.61.0\n"
    "    export GEMINI_BIN=DIR/node_modules/.bin/gemini"
)

HOOK_LINE = re.compile(
    r"Hook execution for ([A-Za-z]+): (?:(\d+) hooks executed successfully|(\d+) succeeded, (\d+) failed \((.*)\)),"
    r" total duration: (\d+(?:\.\d+)?)ms"
)
HOOK_ERROR = "Hook execution error"
MEASURE = "Gemini's --debug 'Hook execution for EVENT: ... total duration: Xms' (integer ms)"


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
    """This environment without what would point a child at another Gemini CLI, Claude Code
    or hookbus, or switch Gemini CLI's environment sanitizing to strict."""
    env = {
        name: value for name, value in os.environ.items()
        if not name.startswith(DROPPED_PREFIXES) and name not in DROPPED_NAMES
    }
    env.update(extra)
    return env


# ----------------------------------------------------------------------------- configs
@dataclass
class Config:
    key: str
    describe: str
    home: Path
    cwd: Path
    #: per event: "command" (a plain command hook), "bridge", "gate" or None (no hook)
    transport: dict[str, str | None]
    settings_by: str = "the bench"
    server: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def settings_file(self) -> Path:
        return self.home / ".gemini" / "settings.json"


@dataclass
class HookbusServer:
    label: str
    executable: str
    home: Path
    url: str | None
    process: subprocess.Popen[bytes]


def write_hookbus_home(home: Path, hooks: bool = True) -> None:
    """One trivial sync command hook per event (none without ``hooks``); the home guard
    left on (hookbus's default)."""
    (home / "hooks").mkdir(parents=True, exist_ok=True)
    for event in EVENTS if hooks else ():
        vix = VIX_EVENT[event]
        hook_id = f"trivial-{vix.lower()}"
        folder = home / "hooks" / hook_id
        folder.mkdir(parents=True)
        spec = {"id": hook_id, "trigger": {"event": vix}, "mode": "sync", "command": "exit 0"}
        (folder / "hook.json").write_text(json.dumps(spec, indent=2) + "\n")


def start_hookbus(
    label: str, executable: str, root: Path, processes: Processes, http: bool, hooks: bool = True
) -> HookbusServer:
    home = root / f"hookbus-home-{label}"
    write_hookbus_home(home, hooks)
    log = root / f"serve-{label}.log"
    argv = [executable, "serve", "--home", str(home)] + (["--http", "127.0.0.1:0"] if http else [])
    process = processes.start(argv, stdout=log, env=clean_env())
    pattern = r"listening on (http://127\.0\.0\.1:\d+)" if http else r"listening on (/\S+)"
    found = wait_for(log, pattern, process, f"hookbus serve ({executable})")
    return HookbusServer(label, executable, home, found.group(1) if http else None, process)


def hookbus_status(server: HookbusServer) -> dict[str, Any]:
    done = subprocess.run([server.executable, "status", "--home", str(server.home), "--json"], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    try:
        status = json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stdout + done.stderr)[-1000:]}
    return status if isinstance(status, dict) else {"error": repr(status)}


def commands(settings: dict[str, Any]) -> dict[str, list[str]]:
    """The command of every command hook in ``settings``, by event."""
    hooks = settings.get("hooks") or {}
    return {
        event: [str(hook.get("command")) for group in hooks.get(event) or [] for hook in group.get("hooks") or []
                if hook.get("type") == "command"]
        for event in EVENTS
    }


def transports(settings: dict[str, Any]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for event, words in commands(settings).items():
        kinds = {"gate" if is_gate_command(command) else "bridge" if GEMINI_CLI.verb in command else "command"
                 for command in words}
        found[event] = "/".join(sorted(kinds)) or None
    return found


def new_config(key: str, root: Path, hooks: dict[str, Any], describe: str, **more: Any) -> Config:
    """A config: its throw-away HOME (with ``.gemini/settings.json``) and working directory."""
    home, cwd = root / f"gemini-home-{key}", root / f"cwd-{key}"
    (home / ".gemini").mkdir(parents=True)
    cwd.mkdir()
    settings = dict(BASE_SETTINGS, hooks=hooks)
    config = Config(key, describe, home, cwd, transports(settings), **more)
    config.settings_file.write_text(json.dumps(settings, indent=2) + "\n")
    return config


def plain_config(key: str, root: Path, command: str | None, describe: str) -> Config:
    hooks = {} if command is None else {event: [{"hooks": [{"type": "command", "command": command}]}] for event in EVENTS}
    return new_config(key, root, hooks, describe)


def install(server: HookbusServer, path: Path, http: bool) -> subprocess.CompletedProcess[str]:
    argv = [server.executable, "import", "gemini-cli", str(path), "--install-bridge", "--home", str(server.home)]
    if http and server.url:
        argv += ["--http", server.url]
    return subprocess.run(argv, env=clean_env(), capture_output=True, text=True, timeout=60)


def hookbus_config(key: str, root: Path, server: HookbusServer) -> Config:
    """``bridge``: what ``--install-bridge`` writes; ``gate`` and ``guard-only``: what
    ``--install-bridge --http URL`` writes. The hooks are written into a file of their own,
    then moved into the config's settings."""
    path = root / f"installed-{key}.json"
    gated = key != "bridge"
    done = install(server, path, http=gated)
    settings_by = f"hookbus import gemini-cli --install-bridge{' --http URL' if gated else ''}"
    describe = {
        "bridge": f"hookbus command bridge ({server.executable})",
        "gate": f"hookbus gate in front of the bridge ({server.executable})",
        "guard-only": f"the gate, in a home with no hook but the guard: hookbus's own no-op ({server.executable})",
    }[key]
    if done.returncode != 0:
        raise SystemExit(f"hookbus import gemini-cli {path} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    installed = json.loads(path.read_text())
    hooks = installed.get("hooks") or {}
    config = new_config(key, root, hooks, describe, settings_by=settings_by, server=server.label)
    missing = [event for event, kind in config.transport.items() if kind is None]
    if missing:
        raise SystemExit(f"{key}: no hook on {missing}: {json.dumps(hooks)[:1000]}")
    return config


# ----------------------------------------------------------------------------- one run
def hook_calls(text: str) -> tuple[list[tuple[str, float]], list[str]]:
    """Gemini CLI's hook calls in one --debug stderr, each (event, ms), and the problems seen
    (a failed call, a hook error line, an event run with other than one hook)."""
    calls: list[tuple[str, float]] = []
    problems: list[str] = []
    for line in text.splitlines():
        found = HOOK_LINE.search(line)
        if found:
            event, ok, succeeded, failed, names, ms = found.groups()
            calls.append((event, float(ms)))
            hooks = int(ok) if ok is not None else int(succeeded) + int(failed)
            if failed is not None and int(failed):
                problems.append(f"{event}: {failed} hook(s) failed ({names})")
            if hooks != 1:
                problems.append(f"{event}: {hooks} hooks ran, not 1")
        elif HOOK_ERROR in line:
            problems.append(line.strip()[:300])
    return calls, problems


@dataclass
class Run:
    config: str
    wall_ms: float
    calls: list[tuple[str, float]]
    problems: list[str]
    ok: bool


def run_gemini(gemini: str, config: Config, debug_log: Path, model_url: str) -> Run:
    argv = [gemini, "-p", PROMPT, "--output-format", "json", "--approval-mode", "yolo", "--debug"]
    env = clean_env(
        HOME=str(config.home), GEMINI_API_KEY="dummy", GOOGLE_GEMINI_BASE_URL=model_url,
        GEMINI_TELEMETRY_ENABLED="0", GEMINI_CLI_NO_RELAUNCH="true", **config.env,
    )
    started = time.perf_counter()
    with open(debug_log, "wb") as stderr:
        process = subprocess.Popen(argv, cwd=config.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=stderr, start_new_session=True)
        try:
            out, _ = process.communicate(timeout=GEMINI_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # its own session: gemini and what it started
            process.communicate()
            return Run(config.key, GEMINI_TIMEOUT * 1000, [], [f"timed out after {GEMINI_TIMEOUT:.0f} s"], False)
    wall_ms = (time.perf_counter() - started) * 1000
    text = debug_log.read_text(errors="replace")
    problems: list[str] = []
    try:
        response = json.loads(out).get("response")
    except (ValueError, AttributeError):
        response = None
    if process.returncode != 0 or response != EXPECTED_RESPONSE:
        problems.append(f"rc {process.returncode}, response {response!r}, stdout {out.decode(errors='replace')[-300:]!r}, "
                        f"stderr {text[-300:]!r}")
    calls, hook_problems = hook_calls(text)
    problems += hook_problems
    counts = {event: sum(1 for called, _ in calls if called == event) for event in EVENTS}
    expected = {event: EXPECTED_CALLS[event] if kind else 0 for event, kind in config.transport.items()}
    if counts != expected or len(calls) != sum(counts.values()):
        problems.append(f"hook calls {[event for event, _ in calls]}, expected per event {expected}")
    return Run(config.key, wall_ms, calls, problems, not problems)


def probe(config: Config, event: str = "BeforeTool") -> dict[str, Any]:
    """Run the config's ``event`` command once, as Gemini CLI would (``bash -c``, the hook's
    variables, a Gemini-shaped stdin), outside Gemini: what it prints and how long it takes."""
    settings = json.loads(config.settings_file.read_text())
    command = commands(settings)[event][0]
    envelope = {
        "session_id": "gemini-cli-bench-probe", "transcript_path": "", "cwd": str(config.cwd),
        "hook_event_name": event, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "tool_name": "run_shell_command", "tool_input": {"command": "echo hi", "description": "probe"},
    }
    env = clean_env(GEMINI_PROJECT_DIR=str(config.cwd), GEMINI_CWD=str(config.cwd), CLAUDE_PROJECT_DIR=str(config.cwd),
                    GEMINI_SESSION_ID="gemini-cli-bench-probe", HOME=str(config.home))
    started = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], input=json.dumps(envelope).encode(), capture_output=True, env=env,
                          cwd=config.cwd, timeout=60)
    return {
        "event": event, "exit": done.returncode, "stdout": done.stdout.decode(errors="replace"),
        "stderr": done.stderr.decode(errors="replace"), "ms": round((time.perf_counter() - started) * 1000, 1),
    }


# ----------------------------------------------------------------------------- report
def median(values: Sequence[float]) -> float | None:
    return round(float(statistics.median(values)), 1) if values else None


def summarize(config: Config, runs: list[Run], base: dict[str, Any] | None) -> dict[str, Any]:
    good = [run for run in runs if run.ok]
    per_event: dict[str, list[float]] = {}
    for run in good:
        for event, ms in run.calls:
            per_event.setdefault(event, []).append(ms)
    summary: dict[str, Any] = {
        "describe": config.describe,
        "transport": config.transport,
        "settings_by": config.settings_by,
        "runs": len(good),
        "failed_runs": len(runs) - len(good),
        "measure": MEASURE,
        "per_call_ms_median_by_event": {event: median(per_event[event]) for event in EVENTS if event in per_event},
        "per_call_ms_median_all": median([ms for values in per_event.values() for ms in values]),
        "per_call_ms_median_without_session_start": median(
            [ms for event, values in per_event.items() if event != "SessionStart" for ms in values]
        ),
        "hook_ms_per_run_median": median([sum(ms for _, ms in run.calls) for run in good]),
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
        "calls": [[[event, ms] for event, ms in run.calls] for run in good],
        "problems": [run.problems for run in runs if not run.ok],
    }
    return summary


def ratio(value: object, base: object) -> float | None:
    if isinstance(value, (int, float)) and isinstance(base, (int, float)) and base > 0:
        return round(value / base, 2)
    return None


def ratios_to_native(summary: dict[str, Any], native: dict[str, Any]) -> dict[str, Any]:
    """A config's per-call medians and hook time a run, each divided by native's."""
    by_event = summary["per_call_ms_median_by_event"]
    native_by_event = native["per_call_ms_median_by_event"]
    return {
        "per_call_by_event": {event: ratio(by_event.get(event), native_by_event.get(event)) for event in EVENTS},
        "per_call_all": ratio(summary["per_call_ms_median_all"], native["per_call_ms_median_all"]),
        "per_call_without_session_start": ratio(summary["per_call_ms_median_without_session_start"],
                                                native["per_call_ms_median_without_session_start"]),
        "hook_ms_per_run": ratio(summary["hook_ms_per_run_median"], native["hook_ms_per_run_median"]),
    }


def cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def times(value: object) -> str:
    return "–" if value is None else f"{value:.2f}×"


def table(summaries: dict[str, dict[str, Any]]) -> str:
    head = ["config", "hook", *EVENTS, "per call (all)", "per call (no SessionStart)",
            "hook ms/run", "calls/run", "wall", "wall − none", "wall min", "runs"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, summary in summaries.items():
        kinds = "+".join(sorted({kind for kind in summary["transport"].values() if kind})) or "–"
        by_event = summary["per_call_ms_median_by_event"]
        row = [
            key, kinds, *(cell(by_event.get(event)) for event in EVENTS),
            cell(summary["per_call_ms_median_all"]), cell(summary["per_call_ms_median_without_session_start"]),
            cell(summary["hook_ms_per_run_median"]),
            ",".join(str(n) for n in summary["hook_calls_per_run"]) or "–", cell(summary["wall_ms_median"]),
            cell(summary.get("wall_ms_median_minus_none")), cell(summary["wall_ms_min"]), f"{summary['runs']}"
            + (f" ({summary['failed_runs']} failed)" if summary["failed_runs"] else ""),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def ratio_table(ratios: dict[str, dict[str, Any]]) -> str:
    head = ["config ÷ native", *EVENTS, "per call (all)", "per call (no SessionStart)", "hook ms/run"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, found in ratios.items():
        row = [key, *(times(found["per_call_by_event"].get(event)) for event in EVENTS),
               times(found["per_call_all"]), times(found["per_call_without_session_start"]),
               times(found["hook_ms_per_run"])]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main
def find_gemini() -> str:
    named = os.environ.get("GEMINI_BIN")
    if not named:
        raise SystemExit(f"GEMINI_BIN is not set: {INSTALL_HINT}")
    found = shutil.which(named)
    if found is None:
        raise SystemExit(f"GEMINI_BIN={named} is not an executable: {INSTALL_HINT}")
    return found


def find_hookbus(named: str) -> str:
    found = shutil.which(named)
    if found is None:
        raise SystemExit(f"no hookbus executable at {named}: set HOOKBUS_BIN")
    return os.path.abspath(found)


CONFIGS = ("none", "native", "bridge", "gate", "guard-only")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8, help="measured runs a config (default 8)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs a config first (default 1)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"which of {','.join(CONFIGS)}")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (debug output, settings)")
    args = parser.parse_args(argv)
    gemini = find_gemini()
    hookbus = find_hookbus(os.environ.get("HOOKBUS_BIN") or str(Path(sys.executable).parent / "hookbus"))
    wanted = [name.strip() for name in args.configs.split(",") if name.strip()]
    if set(wanted) - set(CONFIGS) or "none" not in wanted:
        raise SystemExit(f"--configs: expected some of {','.join(CONFIGS)}, with none (the baseline); got {args.configs}")
    if set(EVENTS) != set(GEMINI_CLI.events):
        print(f"[bench] warning: the bridge goes on {GEMINI_CLI.events}, the bench measures {EVENTS}", file=sys.stderr)

    root = Path(tempfile.mkdtemp(prefix="gemini-cli-bench-"))
    processes = Processes()

    def on_signal(signum: int, frame: object) -> None:
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    atexit.register(processes.stop_all)
    keep = args.keep
    try:
        version = subprocess.run([gemini, "--version"], capture_output=True, text=True, timeout=60,
                                 env=clean_env(HOME=str(root), GEMINI_CLI_NO_RELAUNCH="true")).stdout.strip()
        stub_log = root / "stub-gemini-model.out"
        stub = processes.start([sys.executable, str(HERE / "stub_gemini_model.py"), "--port", "0",
                                "--log", str(root / "stub-gemini-model.jsonl")], stdout=stub_log)
        port = wait_for(stub_log, r"listening on (\d+)", stub, "stub Gemini model").group(1)
        model_url = f"http://127.0.0.1:{port}"

        configs: dict[str, Config] = {}
        noop = root / "noop.sh"
        noop.write_text("#!/bin/bash\nexit 0\n")
        noop.chmod(0o755)
        configs["none"] = plain_config("none", root, None, "no hooks")
        if "native" in wanted:
            configs["native"] = plain_config("native", root, str(noop), "bash script `exit 0` as a command hook")
        servers: dict[str, HookbusServer] = {}
        for key in ("bridge", "gate", "guard-only"):
            if key in wanted:
                servers[key] = start_hookbus(
                    key, hookbus, root, processes, http=key != "bridge", hooks=key != "guard-only"
                )
                configs[key] = hookbus_config(key, root, servers[key])
        for config in configs.values():
            print(f"[bench] {config.key}: {config.describe}; hooks {config.transport}; settings by {config.settings_by}",
                  file=sys.stderr)

        keys = list(configs)
        runs: dict[str, list[Run]] = {key: [] for key in keys}
        for round_index in range(args.warmup):
            for key in keys:
                warm = run_gemini(gemini, configs[key], root / f"debug-{key}-warmup{round_index}.log", model_url)
                if not warm.ok:
                    keep = True
                    raise SystemExit(f"warm-up run of {key} failed: {warm.problems}; logs in {root}")
        for round_index in range(args.runs):
            shift = round_index % len(keys)
            for key in keys[shift:] + keys[:shift]:
                log = root / f"debug-{key}-{round_index:02d}.log"
                run = run_gemini(gemini, configs[key], log, model_url)
                runs[key].append(run)
                if not run.ok:
                    keep = True
                    print(f"[bench] {key} run {round_index}: {run.problems} (log {log})", file=sys.stderr)
                    if sum(not r.ok for r in runs[key]) > max(2, args.runs // 3):
                        raise SystemExit(f"too many failed runs of {key}; logs in {root}")
            print(f"[bench] round {round_index + 1}/{args.runs}: "
                  + ", ".join(f"{key} {runs[key][-1].wall_ms:.0f} ms" for key in keys), file=sys.stderr, flush=True)

        statuses = {label: hookbus_status(server) for label, server in servers.items()}
        probes = {key: probe(configs[key]) for key in servers}
        summaries: dict[str, dict[str, Any]] = {}
        base = summarize(configs["none"], runs["none"], None)
        for key in keys:
            summaries[key] = base if key == "none" else summarize(configs[key], runs[key], base)
        ratios = {key: ratios_to_native(summaries[key], summaries["native"]) for key in servers if "native" in summaries}
        print(f"Gemini CLI {version}; {args.runs} runs a config, interleaved (rotated order), "
              f"{args.warmup} warm-up; times in ms, medians.")
        print(f"Measure: {MEASURE}, one line per event fired (one hook an event).")
        print()
        print(table(summaries))
        if ratios:
            print()
            print(ratio_table(ratios))
        print()
        for key, config in configs.items():
            print(f"- {key}: {config.describe}; settings by {config.settings_by}")
        for label, status in statuses.items():
            http = status.get("http") or {}
            gate = http.get("gate") if isinstance(http, dict) else None
            fired = {hook.get("id"): (hook.get("last_fire") or {}).get("status") for hook in status.get("hooks") or []}
            print(f"hookbus serve for {label}: "
                  + (f"gate {({k: gate.get(k) for k in ('answered', 'sent_to_bridge')})}; " if isinstance(gate, dict) else "")
                  + f"last fire of each hook {fired}" + (f"; problems {status['problems']}" if status.get("problems") else ""))
        for key, found in probes.items():
            print(f"probe of {key} ({found['event']}, run once outside Gemini): exit {found['exit']}, "
                  f"stdout {found['stdout']!r}, stderr {found['stderr']!r}, {found['ms']} ms")
        if args.out:
            result = {
                "gemini_version": version,
                "gemini_bin": gemini,
                "hookbus": hookbus,
                "runs": args.runs,
                "warmup": args.warmup,
                "prompt": PROMPT,
                "events": list(EVENTS),
                "expected_calls": EXPECTED_CALLS,
                "measure": MEASURE,
                "settings": {key: json.loads(config.settings_file.read_text()) for key, config in configs.items()},
                "settings_by": {key: config.settings_by for key, config in configs.items()},
                "hookbus_status": {
                    label: {"http": status.get("http"), "hooks": status.get("hooks"), "problems": status.get("problems")}
                    for label, status in statuses.items()
                },
                "probes": probes,
                "ratios_to_native": ratios,
                "summary": summaries,
            }
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
