"""``hookbus serve`` benchmarks, each a ratio against a baseline measured in the same run.

Registered in bench.py (``--only serve-rtt serve-one-sync serve-cli serve-throughput``).
Every figure runs a real ``hookbus serve`` process (``python -m hookbus serve``, stock
plugins) on a temp home, and every client is a process other than the server, as in
production. Both sides are warmed up first and measured taking turns (the order rotated),
so that a noisy neighbour hits both alike.

- serve rtt: a no-match emit's round trip, from a plain blocking socket client in the bench
  process, through serve vs through a bare asyncio JSON-lines server (``EchoProtocol``, a
  process too) that json.loads each line and answers what serve answers; same client code,
  same request bytes. The servers' CPU time a request is shown beside it.
- serve one sync: one sync ``exit 0`` command hook emitted through serve (hookbus.serve.client)
  vs ``subprocess.run(["bash", "-c", "exit 0"])`` in the bench process.
- serve CLI emit: the ``hookbus`` console script (what an installed user runs) with a live
  server vs ``python -c pass``, fresh processes, same environment, bytecode cached, in a
  venv as a wheel install leaves it; this venv's pair, the in-process ``--no-server`` figure
  and what the server path imports (-X importtime) beside it.
- serve bridge: ``hookbus claude-code-hook`` on Claude Code's envelope of a Bash call (one
  sync hook fires) through a live server vs ``python -c pass``, in the same wheel-like venv.
- serve throughput (higher is better): 8 client processes (not threads: they would share a
  GIL), one connection each, no-match emits back to back for fixed windows: requests a
  second through serve vs through the bare server.

This file is also its own helper processes (standard library only at import time)::

    python bench/serve_bench.py echo SOCKET     # the baseline server
    python bench/serve_bench.py load SOCKET     # one throughput client
    python bench/serve_bench.py profile DIR rtt|sync|load   # where serve's time goes: cProfile
                                                            # on every thread of the server
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence

#: report(name, value, target, unit, detail), as bench.py defines it.
Reporter = Callable[[str, float, float, str, str], None]

READY = "hookbus serve: listening on "
ECHO_READY = "ready"
#: How long a server may take to start before the figure fails.
START_TIMEOUT_SECONDS = 30.0
#: How long a server gets to drain and exit after SIGTERM before it is killed.
STOP_TIMEOUT_SECONDS = 30.0

ENVELOPE: dict[str, Any] = {
    "tool_name": "write_file",
    "tool_input": {"path": "src/app.py", "content": "x" * 200},
    "cwd": "/",
}
#: One no-match emit, encoded once: the client does as little as a client can, so the
#: ratio is the servers' own cost and not diluted by the client's.
EMIT_LINE = (
    json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "PreToolUse", "envelope": ENVELOPE}},
        separators=(",", ":"),
    ).encode("ascii")
    + b"\n"
)
#: Claude Code's envelope of a Bash call, as it sends it on stdin.
CLAUDE_BASH = json.dumps(
    {"session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": "/", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}
).encode()
#: Variables that send ``hookbus emit`` in-process, or elsewhere: kept out of the clients'.
CLIENT_UNSET = ("VIX_DISABLE_HOOKS", "HOOKBUS_DISABLE_PLUGINS", "HOOKBUS_LOAD_PLUGINS", "HOOKBUS_SOCKET", "PYTHONDONTWRITEBYTECODE")
#: The plugins ``pip install hookbus`` ships (the contrib ones are installed in the venv too).
STOCK_PLUGINS = "workflow,prompt"
#: Non-stdlib modules that ``hookbus emit`` must not import on its way to a server.
HEAVY = ("pluggy", "attrs", "cattrs", "watchfiles", "yaml", "re2")


# -- the home -------------------------------------------------------------------------------


def write_hooks(root: Path, specs: dict[str, dict[str, Any]]) -> None:
    # The machinery is measured: the built-in home guard (bench.py's home-guard figure) is off.
    root.mkdir(parents=True, exist_ok=True)
    (root / "settings.json").write_text(json.dumps({"protect_home": False}))
    for hook_id, spec in specs.items():
        directory = root / "hooks" / hook_id
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hook.json").write_text(json.dumps(spec))


def no_match_home(root: Path, count: int = 1000, on_pre_tool_use: int = 200) -> None:
    """As bench.py's no-match figure: ``count`` sync hooks, ``on_pre_tool_use`` of them on
    PreToolUse with matchers (half literal, half regex) that ``write_file`` does not match."""
    others = ["PostToolUse", "Stop", "ThreadStart", "SubagentStop", "UserPromptSubmit"]
    specs: dict[str, dict[str, Any]] = {}
    for index in range(count):
        if index < on_pre_tool_use:
            matcher = f"tool{index}" if index % 2 else f"tool{index}_.*"
            trigger: dict[str, Any] = {"event": "PreToolUse", "matcher": matcher}
        else:
            event = others[index % len(others)]
            trigger = {"event": event} if event in ("Stop", "UserPromptSubmit") else {"event": event, "matcher": f"t{index}"}
        specs[f"h{index:05d}"] = {"trigger": trigger, "mode": "sync", "command": "exit 0"}
    write_hooks(root, specs)


def environments() -> tuple[dict[str, str], dict[str, str]]:
    """(clients', server's): the same, minus what would send an emit in-process; bytecode
    caching kept, as an installed wheel has it; the server loads the stock plugins."""
    client = {name: value for name, value in os.environ.items() if name not in CLIENT_UNSET}
    return client, {**client, "HOOKBUS_LOAD_PLUGINS": STOCK_PLUGINS}


# -- processes ------------------------------------------------------------------------------


class Running:
    """A server process: its socket's path, and the CPU time it has used."""

    def __init__(self, path: str, pid: int) -> None:
        self.path = path
        self.pid = pid

    def cpu_seconds(self) -> float:
        """CPU time of every thread of the process so far (schedstat: nanoseconds)."""
        total = 0
        tasks = f"/proc/{self.pid}/task"
        for task in os.listdir(tasks):
            with contextlib.suppress(OSError), open(f"{tasks}/{task}/schedstat") as handle:
                total += int(handle.read().split()[0])
        return total / 1e9


def stop_process(process: subprocess.Popen[Any]) -> int:
    """SIGTERM, then wait; SIGKILL if it does not exit in time. Its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(STOP_TIMEOUT_SECONDS)


def _wait_for_line(log: Path, prefix: str, process: subprocess.Popen[Any]) -> str:
    """The rest of the first line of ``log`` that starts with ``prefix``."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        text = log.read_text(errors="replace")
        for line in text.splitlines():
            if line.startswith(prefix):
                return line[len(prefix):]
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{process.args!r} did not get ready (exit {process.poll()}): {text[-2000:]}")
        time.sleep(0.01)


@contextlib.contextmanager
def hookbus_serve(home: Path, env: dict[str, str], wrapper: Sequence[str] = ()) -> Iterator[Running]:
    """A real ``python -m hookbus serve --home HOME`` (under ``wrapper``, e.g. cProfile)
    while the block runs; stopped with SIGTERM however the block ends. Its stderr
    goes to a file beside the home, so its logging never blocks on a full pipe."""
    log = home.parent / f"{home.name}.serve.log"
    argv = [sys.executable, *(wrapper or ["-m", "hookbus"]), "serve", "--home", str(home)]
    with open(log, "w") as stderr:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        yield Running(_wait_for_line(log, READY, process), process.pid)
    finally:
        code = stop_process(process)
        if code != 0:
            print(f"  (hookbus serve exited {code}: {log.read_text(errors='replace')[-500:]})", file=sys.stderr)


@contextlib.contextmanager
def echo_server(path: Path, env: dict[str, str]) -> Iterator[Running]:
    """The baseline: ``python serve_bench.py echo PATH``, stopped with SIGTERM however the
    block ends."""
    log = path.with_suffix(".log")
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, __file__, "echo", str(path)],
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env,
        )
    try:
        _wait_for_line(log, ECHO_READY, process)
        yield Running(str(path), process.pid)
    finally:
        stop_process(process)


# -- the baseline server --------------------------------------------------------------------


class EchoProtocol(asyncio.Protocol):
    """Cuts bytes into lines; each is json.loads'ed and answered with a JSON-RPC result
    line, the one serve sends for a no-match emit."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            line = bytes(buffer[start:end])
            start = end + 1
            if not line.strip():
                continue
            request = json.loads(line)
            answer = {"jsonrpc": "2.0", "id": request.get("id"), "result": {"behavior": "allow"}}
            assert self._transport is not None
            self._transport.write(json.dumps(answer, separators=(",", ":")).encode("ascii") + b"\n")
        del buffer[:start]


def echo_main(path: str) -> int:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_unix_server(EchoProtocol, path, backlog=1024)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        print(ECHO_READY, flush=True)
        await stop.wait()
        server.close()

    asyncio.run(run())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return 0


# -- the client -----------------------------------------------------------------------------


class LineClient:
    """A plain blocking client: one request line out, one response line back."""

    def __init__(self, path: str) -> None:
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.socket.connect(path)
        self._buffer = bytearray()

    def call(self, line: bytes) -> bytes:
        self.socket.sendall(line)
        buffer = self._buffer
        while True:
            end = buffer.find(b"\n")
            if end >= 0:
                answer = bytes(buffer[:end])
                del buffer[: end + 1]
                return answer
            chunk = self.socket.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the server closed the connection before answering")
            buffer += chunk

    def close(self) -> None:
        self.socket.close()


def checked(client: LineClient, line: bytes = EMIT_LINE) -> None:
    """One call, its answer checked: a no-match emit is allowed, not an error."""
    answer = json.loads(client.call(line))
    if answer.get("result") != {"behavior": "allow"}:
        raise RuntimeError(f"unexpected answer to a no-match emit: {answer!r}")


def per_call(function: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls


def alternated(rounds: int, sides: Sequence[Callable[[], float]]) -> list[list[float]]:
    """Each side measured once per round, the order rotated every round; per side, its
    measurements."""

    def timed(side: Callable[[], float]) -> Callable[[], tuple[float, float]]:
        return lambda: (side(), 0.0)

    return [[wall for wall, _ in side] for side in interleaved(rounds, [timed(side) for side in sides], 1)]


def interleaved(
    rounds: int, sides: Sequence[Callable[[], tuple[float, float]]], slices: int
) -> list[list[tuple[float, float]]]:
    """Per round, each side measured ``slices`` times, the sides taking turns (the order
    rotated every slice), so that noise lands on all of them alike; per side and round,
    the mean of its slices' (wall time, server CPU time)."""
    measured: list[list[tuple[float, float]]] = [[] for _ in sides]
    turn = 0
    for _ in range(rounds):
        sums = [[0.0, 0.0] for _ in sides]
        for _ in range(slices):
            order = list(range(len(sides)))
            shift = turn % len(sides)
            turn += 1
            for index in order[shift:] + order[:shift]:
                wall, cpu = sides[index]()
                sums[index][0] += wall
                sums[index][1] += cpu
        for index, (wall, cpu) in enumerate(sums):
            measured[index].append((wall / slices, cpu / slices))
    return measured


def median_ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(ours, theirs))


# -- 1. round trip --------------------------------------------------------------------------


def round_trips(server: Running, client: LineClient, calls: int) -> Callable[[], tuple[float, float]]:
    """Per call: the wall time of ``calls`` round trips, and the server's CPU time."""

    def measure() -> tuple[float, float]:
        cpu = server.cpu_seconds()
        wall = per_call(lambda: client.call(EMIT_LINE), calls)
        return wall, (server.cpu_seconds() - cpu) / calls

    return measure


def serve_rtt(work: Path, report: Reporter, rounds: int) -> None:
    home = work / "serve-rtt"
    no_match_home(home)
    client_env, server_env = environments()
    calls, slices = 500, 6
    with hookbus_serve(home, server_env) as serve, echo_server(work / "echo-rtt.sock", client_env) as echo:
        ours, theirs = LineClient(serve.path), LineClient(echo.path)
        try:
            checked(ours)
            checked(theirs)
            sides = [round_trips(serve, ours, calls), round_trips(echo, theirs, calls)]
            interleaved(1, sides, 4)  # warm-up
            measured = interleaved(rounds, sides, slices)
        finally:
            ours.close()
            theirs.close()
    (serve_wall, serve_cpu), (echo_wall, echo_cpu) = ([[m[i] for m in side] for i in (0, 1)] for side in measured)
    report(
        "serve rtt", median_ratio(serve_wall, echo_wall), 1.5, "x",
        f"no-match emit through `hookbus serve` {statistics.median(serve_wall) * 1e6:.1f} us vs bare asyncio "
        f"JSON-lines server {statistics.median(echo_wall) * 1e6:.1f} us a round trip; server CPU a request "
        f"{statistics.median(serve_cpu) * 1e6:.1f} vs {statistics.median(echo_cpu) * 1e6:.1f} us "
        f"({median_ratio(serve_cpu, echo_cpu):.2f}x). One blocking client in the bench process, the same "
        f"{len(EMIT_LINE)}-byte request, {slices} x {calls} calls a side a round, taking turns; 1,000 hooks, "
        f"200 on PreToolUse",
    )


# -- 2. one sync hook -------------------------------------------------------------------------


def serve_one_sync(work: Path, report: Reporter, rounds: int) -> None:
    from hookbus.serve.client import Client

    home = work / "serve-one-sync"
    write_hooks(home, {"one": {"trigger": {"event": "PreToolUse"}, "mode": "sync", "command": "exit 0"}})
    payload = json.dumps({**ENVELOPE, "hook_event_name": "PreToolUse"}).encode()
    client_env, server_env = environments()

    def spawn() -> None:
        subprocess.run(["bash", "-c", "exit 0"], input=payload, capture_output=True)

    calls = 150
    with hookbus_serve(home, server_env) as serve, Client(serve.path) as client:

        def emit() -> dict[str, Any]:
            return client.emit("PreToolUse", ENVELOPE)

        if emit() != {"behavior": "allow"}:
            raise RuntimeError("the one sync hook did not allow")
        per_call(emit, 30)
        per_call(spawn, 30)
        emits, spawned = alternated(rounds, [lambda: per_call(emit, calls), lambda: per_call(spawn, calls)])
    report(
        "serve one sync", median_ratio(emits, spawned), 1.25, "x",
        f"emit through `hookbus serve` (hookbus.serve.client.Client) {statistics.median(emits) * 1e3:.3f} ms vs "
        f"subprocess.run in the bench process {statistics.median(spawned) * 1e3:.3f} ms (bash -c 'exit 0', "
        f"envelope on stdin; {calls} calls a batch)",
    )


# -- 3. the command line ------------------------------------------------------------------


def hookbus_command() -> tuple[list[str], str]:
    """What an installed user runs: the venv's ``hookbus`` console script, else ``python -m
    hookbus``; and how to say which."""
    script = Path(sys.executable).parent / "hookbus"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)], "the `hookbus` console script"
    return [sys.executable, "-m", "hookbus"], "`python -m hookbus`"


def package_root() -> Path:
    """The directory that holds the ``hookbus`` package."""
    import importlib.util

    spec = importlib.util.find_spec("hookbus")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent.parent


def console_script() -> str:
    """What pip writes as the ``hookbus`` console script, after its ``#!`` line: this venv's
    own, which pip wrote from the project's entry point."""
    script = Path(sys.executable).parent / "hookbus"
    return script.read_text().split("\n", 1)[1]


def wheel_like_venv(venv: Path) -> tuple[Path, Path]:
    """A venv as ``pip install hookbus`` from a wheel leaves it, for the server path (which
    imports nothing but hookbus and the standard library): the package on a plain path
    line in site-packages (no finder to import) and the console script pip writes. Its
    python and its ``hookbus``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    (Path(purelib) / "hookbus.pth").write_text(f"{package_root()}\n")
    script = venv / "bin" / "hookbus"
    script.write_text(f"#!{python}\n{console_script()}")
    script.chmod(0o755)
    return python, script


def imported(argv: list[str], env: dict[str, str]) -> dict[str, int]:
    """Module name: its own import time in us (``self``, nested imports excluded), in one
    run of ``argv`` under -X importtime."""
    result = subprocess.run(
        argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True
    )
    modules: dict[str, int] = {}
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        own, _, name = line[len("import time:"):].split("|")
        if own.strip().isdigit():
            modules[name.strip()] = int(own)
    return modules


def serve_cli(work: Path, report: Reporter, rounds: int) -> None:
    """Two figures, each taken in a venv as a wheel install leaves it (this venv's editable
    installs put finders in site, which every Python start pays, ``python -c pass`` too):

    - serve CLI emit: ``hookbus emit Stop`` (10 hooks, 2 fire) through a live server vs
      ``python -c pass``; this venv's pair, in-process, and what the server path imports
      (-X importtime) beside it;
    - serve bridge: ``hookbus claude-code-hook`` with Claude Code's envelope of a Bash call
      (one sync hook fires) through a live server vs ``python -c pass``, the figure to set
      beside Claude Code's own hook runner (15-25 ms a call for one trivial hook)."""
    home = work / "serve-cli"
    events = ["PreToolUse", "PostToolUse", "Stop", "ThreadStart", "SubagentStop"]
    write_hooks(
        home,
        {f"c{index}": {"trigger": {"event": events[index % 5]}, "mode": "sync", "command": "exit 0"} for index in range(10)},
    )
    client_env, server_env = environments()
    command, which = hookbus_command()
    ours = [*command, "emit", "Stop", "--home", str(home), "--input", os.devnull]
    in_process = [*ours, "--no-server"]
    theirs = [sys.executable, "-c", "pass"]
    wheel_python, wheel_script = wheel_like_venv(work / "wheel-venv")
    ours_wheel = [str(wheel_script), "emit", "Stop", "--home", str(home), "--input", os.devnull]
    bridge_wheel = [str(wheel_script), "claude-code-hook", "--home", str(home)]
    theirs_wheel = [str(wheel_python), "-c", "pass"]

    def run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> Callable[[], float]:
        return lambda: per_call(lambda: subprocess.run(argv, env=env, check=True, input=stdin, stdout=subprocess.DEVNULL), 10)

    with hookbus_serve(home, server_env):
        answer = subprocess.run(ours, env=client_env, check=True, capture_output=True, text=True)
        if json.loads(answer.stdout) != {"behavior": "allow"}:
            raise RuntimeError(f"unexpected answer from hookbus emit: {answer.stdout!r} {answer.stderr!r}")
        bridged = subprocess.run(bridge_wheel, env=client_env, input=CLAUDE_BASH, check=True, capture_output=True)
        if bridged.stdout or bridged.stderr:
            raise RuntimeError(f"unexpected answer from hookbus claude-code-hook: {bridged.stdout!r} {bridged.stderr!r}")
        # Here, where pluggy & co. are installed, importing one would succeed: the check
        # that none is imported means something. The cost of what is imported is counted in
        # the wheel-like venv, where site has imported nothing beforehand.
        modules = imported(ours, client_env)
        bare = imported(theirs, client_env)
        wheel_modules = imported(ours_wheel, client_env)
        wheel_bare = imported(theirs_wheel, client_env)
        sides = [
            run(ours, client_env), run(theirs, client_env), run(in_process, server_env),
            run(ours_wheel, client_env), run(theirs_wheel, client_env), run(bridge_wheel, client_env, CLAUDE_BASH),
        ]
        for side in sides:
            side()  # warm up: bytecode written, page cache filled
        served, python, local, served_wheel, python_wheel, bridge = alternated(rounds, sides)
    if "hookbus.serve.quickpath" not in modules or {"hookbus.cli", "hookbus.bus"} & set(modules):
        raise RuntimeError("hookbus emit did not take the quick path to the server (hookbus.cli or hookbus.bus imported)")
    stdlib = set(sys.stdlib_module_names)
    extra = sorted({name for name in modules if name.split(".")[0] not in stdlib} - set(bare))
    ours_modules = [name for name in extra if name.split(".")[0] == "hookbus"]
    foreign = [name for name in extra if name.split(".")[0] != "hookbus"]
    heavy = [name for name in extra if name.split(".")[0] in HEAVY]
    hookbus_us = sum(wheel_modules.get(name, 0) for name in ours_modules)
    added = {name: us for name, us in wheel_modules.items() if name not in wheel_bare}
    costliest = sorted(added, key=lambda name: -added[name])[:6]
    report(
        "serve CLI emit", median_ratio(served_wheel, python_wheel), 2, "x",
        f"the `hookbus` console script's `emit Stop` (10 hooks, 2 fire) with a live server "
        f"{statistics.median(served_wheel) * 1e3:.1f} ms vs `python -c pass` {statistics.median(python_wheel) * 1e3:.1f} ms, "
        f"in a venv as a wheel install leaves it. In this venv (editable-install finders in site): "
        f"{statistics.median(served) * 1e3:.1f} vs {statistics.median(python) * 1e3:.1f} ms ({median_ratio(served, python):.2f}x), "
        f"{which}; in-process (--no-server, stock plugins) {statistics.median(local) * 1e3:.1f} ms "
        f"({median_ratio(local, python):.2f}x). The server path imports {len(added)} modules beyond `python -c pass`'s "
        f"(-X importtime, self total {sum(added.values()) / 1e3:.1f} ms; costliest "
        f"{', '.join(f'{name} {added[name] / 1e3:.1f}' for name in costliest)}), {len(ours_modules)} of them hookbus's "
        f"({hookbus_us / 1e3:.1f} ms: {', '.join(ours_modules)}); non-stdlib besides hookbus: {', '.join(foreign) or 'none'}; "
        f"of {'/'.join(HEAVY)}: {', '.join(heavy) or 'none'}",
    )
    report(
        "serve bridge", median_ratio(bridge, python_wheel), 2, "x",
        f"`hookbus claude-code-hook` on Claude Code's envelope of a Bash call (one sync `exit 0` hook fires) with a live "
        f"server {statistics.median(bridge) * 1e3:.1f} ms a call vs `python -c pass` {statistics.median(python_wheel) * 1e3:.1f} ms, "
        "wheel-like venv (Claude Code's own hook runner: 15-25 ms a call for one trivial hook)",
    )


# -- 4. throughput --------------------------------------------------------------------------


def load_main(path: str) -> int:
    """One throughput client: connects, warms up, says ready; then for each line on stdin
    (a duration in seconds) sends no-match emits back to back for that long and prints
    ``COUNT START END`` (time.monotonic, the same clock in every process)."""
    client = LineClient(path)
    checked(client)
    for _ in range(300):
        client.call(EMIT_LINE)
    print(ECHO_READY, flush=True)
    call = client.call
    for line in sys.stdin:
        duration = float(line)
        count = 0
        started = time.monotonic()
        deadline = started + duration
        now = started
        while now < deadline:
            for _ in range(16):
                call(EMIT_LINE)
            count += 16
            now = time.monotonic()
        print(f"{count} {started} {now}", flush=True)
    client.close()
    return 0


class Load:
    """``clients`` processes, each with its own connection to ``path``."""

    def __init__(self, path: str, clients: int, env: dict[str, str]) -> None:
        self.processes: list[subprocess.Popen[str]] = []
        try:
            for _ in range(clients):
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, __file__, "load", path],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                    )
                )
            for process in self.processes:
                if self._line(process) != ECHO_READY:
                    raise RuntimeError(f"a load client of {path} did not get ready")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _line(process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        return process.stdout.readline().strip()

    def run(self, duration: float) -> tuple[float, int]:
        """Requests a second, all clients together (every request over the span from the
        first client's start to the last one's end), and how many requests."""
        for process in self.processes:
            stdin: IO[str] | None = process.stdin
            assert stdin is not None
            stdin.write(f"{duration}\n")
            stdin.flush()
        counts, starts, ends = 0, [], []
        for process in self.processes:
            count, started, ended = self._line(process).split()
            counts += int(count)
            starts.append(float(started))
            ends.append(float(ended))
        return counts / (max(ends) - min(starts)), counts

    def close(self) -> None:
        for process in self.processes:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
        for process in self.processes:
            try:
                process.wait(STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                stop_process(process)
            if process.stdout is not None:
                process.stdout.close()


def serve_throughput(work: Path, report: Reporter, rounds: int) -> None:
    home = work / "serve-throughput"
    no_match_home(home)
    client_env, server_env = environments()
    clients, duration = 8, 1.0

    def measure(server: Running, load: Load) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            cpu = server.cpu_seconds()
            rate, requests = load.run(duration)
            return rate, (server.cpu_seconds() - cpu) / requests

        return run

    with hookbus_serve(home, server_env) as serve, echo_server(work / "echo-load.sock", client_env) as echo:
        ours = Load(serve.path, clients, client_env)
        try:
            theirs = Load(echo.path, clients, client_env)
            try:
                ours.run(0.3)
                theirs.run(0.3)
                measured = interleaved(rounds, [measure(serve, ours), measure(echo, theirs)], 1)
            finally:
                theirs.close()
        finally:
            ours.close()
    (serve_rate, serve_cpu), (echo_rate, echo_cpu) = ([[m[i] for m in side] for i in (0, 1)] for side in measured)
    report(
        "serve throughput", median_ratio(serve_rate, echo_rate), 0.5, "x",
        f"higher is better: {statistics.median(serve_rate):,.0f} req/s through `hookbus serve` vs "
        f"{statistics.median(echo_rate):,.0f} req/s through the bare asyncio server; server CPU a request "
        f"{statistics.median(serve_cpu) * 1e6:.1f} vs {statistics.median(echo_cpu) * 1e6:.1f} us. {clients} client "
        f"processes (not threads: no shared GIL), one connection each, no-match emits back to back, "
        f"{duration:g} s windows taking turns; 1,000 hooks",
    )


# -- profiling ------------------------------------------------------------------------------


def profiled_serve_main(output: str, arguments: list[str]) -> int:
    """``hookbus ARGUMENTS`` (serve) under cProfile on every thread: the loop's and each
    thread started after it (the sync-hook threads, the recorder's); the merged stats are
    written to ``output`` when it exits. ``python -m cProfile`` would see the loop only."""
    import cProfile
    import threading

    profiles: list[cProfile.Profile] = []

    def start(frame: Any, event: str, arg: Any) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        sys.setprofile(None)
        profile.enable()

    threading.setprofile(start)
    from hookbus.cli import main as hookbus_main

    profile = cProfile.Profile()
    profiles.append(profile)
    profile.enable()
    try:
        return hookbus_main(arguments)
    finally:
        profile.disable()
        import pstats

        pstats.Stats(*profiles).dump_stats(output)


def profile_main(work: str, load: str) -> int:
    """Serve a home under cProfile (every thread) while ``load`` runs against it: "rtt" (one
    blocking client, no-match emits), "sync" (hookbus.serve.client, the one sync hook) or "load"
    (8 client processes for 3 s); print where the server's time goes."""
    import pstats

    root = Path(work)
    home = root / f"profiled-{load}"
    if load == "sync":
        write_hooks(home, {"one": {"trigger": {"event": "PreToolUse"}, "mode": "sync", "command": "exit 0"}})
    else:
        no_match_home(home)
    output = root / f"serve-{load}.prof"
    client_env, server_env = environments()
    with hookbus_serve(home, server_env, [__file__, "profiled-serve", str(output)]) as server:
        path = server.path
        if load == "load":
            clients = Load(path, 8, client_env)
            try:
                print(f"{clients.run(3.0)[0]:,.0f} req/s with 8 client processes, under cProfile")
            finally:
                clients.close()
        elif load == "sync":
            from hookbus.serve.client import Client

            with Client(path) as client:
                calls = 1000
                elapsed = per_call(lambda: client.emit("PreToolUse", ENVELOPE), calls)
            print(f"{elapsed * 1e3:.3f} ms an emit running one sync hook ({calls} calls), under cProfile")
        else:
            line_client = LineClient(path)
            try:
                checked(line_client)
                calls = 30_000
                elapsed = per_call(lambda: line_client.call(EMIT_LINE), calls)
            finally:
                line_client.close()
            print(f"{elapsed * 1e6:.1f} us a no-match round trip ({calls} calls), under cProfile")
    stats = pstats.Stats(str(output))
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(50)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "echo":
        return echo_main(argv[1])
    if len(argv) == 2 and argv[0] == "load":
        return load_main(argv[1])
    if len(argv) == 3 and argv[0] == "profile" and argv[2] in ("rtt", "sync", "load"):
        return profile_main(argv[1], argv[2])
    if len(argv) >= 3 and argv[0] == "profiled-serve":
        return profiled_serve_main(argv[1], argv[2:])
    print(__doc__, file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
