"""Shared fixtures: a real home on disk, hook writers, buses that are always closed."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hookbus import HookBus

#: Descriptors a worker of the suite may hold. Its servers, floods and processes take
#: more than the 1,024 an ordinary user's soft limit often is (root's is higher): the soft
#: limit is raised to this, within the hard one, for the workers and what they start.
WANTED_DESCRIPTORS = 16_384


def _enough_descriptors() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = WANTED_DESCRIPTORS if hard == resource.RLIM_INFINITY else min(WANTED_DESCRIPTORS, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


_enough_descriptors()


@pytest.fixture(autouse=True, scope="session")
def private_state_directories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What hookbus keeps outside a home (the Gemini bridge's Stop memory, in
    ``$XDG_RUNTIME_DIR`` or ``$XDG_STATE_HOME``) goes to directories of this session, never
    to the real ones of whoever runs the suite; processes the tests start inherit them."""
    saved = {name: os.environ.get(name) for name in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME")}
    for name in saved:
        directory = tmp_path_factory.mktemp(name.lower())
        directory.chmod(0o700)
        os.environ[name] = str(directory)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def hookbus_loggers_restored() -> Iterator[None]:
    """A verb run in-process (``hookbus.cli.verbs.main``) sets hookbus's loggers for its
    process (a read-only verb quiets ``hookbus.load``): each test gets them back as they were."""
    loggers = [logging.getLogger(name) for name in ("hookbus", "hookbus.load")]
    saved = [(logger.level, list(logger.handlers), logger.propagate) for logger in loggers]
    yield
    for logger, (level, handlers, propagate) in zip(loggers, saved):
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.propagate = propagate


@pytest.fixture
def home(tmp_path: Path) -> Path:
    root = tmp_path / "home"
    (root / "hooks").mkdir(parents=True)
    return root


HookWriter = Callable[..., Path]


@pytest.fixture
def write_hook(home: Path) -> HookWriter:
    """``write_hook("id", command="...", event="PreToolUse", mode="sync", ...)``.

    Keyword arguments become hook.json fields; ``event`` and ``matcher`` make the trigger;
    ``raw=`` writes that text verbatim; ``files={"script.sh": "..."}`` adds files.
    """

    def write(
        hook_id: str,
        *,
        raw: str | bytes | None = None,
        event: str = "PreToolUse",
        matcher: str | None = None,
        name: str = "hook.json",
        files: dict[str, str] | None = None,
        **fields: Any,
    ) -> Path:
        directory = home / "hooks" / hook_id
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        if raw is None:
            trigger: dict[str, Any] = {"event": event}
            if matcher is not None:
                trigger["matcher"] = matcher
            spec: dict[str, Any] = {"id": hook_id, "trigger": trigger, **fields}
            raw = json.dumps(spec)
        if isinstance(raw, str):
            raw = raw.encode()
        temp = path.with_name(f".{path.name}.tmp")
        temp.write_bytes(raw)
        os.replace(temp, path)
        for file_name, content in (files or {}).items():
            target = directory / file_name
            target.write_text(content)
            target.chmod(0o755)
        return path

    return write


@pytest.fixture
def make_bus(home: Path) -> Iterator[Callable[..., HookBus]]:
    """Build buses on ``home`` (or another root); every one is closed at teardown."""
    buses: list[HookBus] = []

    def make(root: Path | None = None, **options: Any) -> HookBus:
        bus = HookBus(root or home, **options)
        buses.append(bus)
        return bus

    yield make
    for bus in buses:
        bus.close()


def read_log(home: Path) -> list[dict[str, Any]]:
    """Every line of every log file of ``home``, parsed."""
    entries: list[dict[str, Any]] = []
    for path in sorted((home / "logs" / "hooks").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            entries.append(json.loads(line))
    return entries


def read_state(home: Path, hook_id: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((home / "hooks" / hook_id / "state.json").read_text())
    return result


def live_processes_in_group(pgid: int) -> list[int]:
    """Pids of processes in group ``pgid`` that are alive (zombies are dead: nobody here
    reaps orphans, so they linger)."""
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp ...
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry))
    return alive


def processes_with(marker: str, value: str) -> list[int]:
    """Living (not zombie) processes whose environment holds ``marker=value``: how a test
    finds what its hooks left running (hooks inherit the environment), escapees included."""
    needle = f"{marker}={value}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if needle not in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                continue
        except OSError:
            continue
        if is_alive(int(name)):
            found.append(int(name))
    return found


def hook_processes(home: Path, program: str) -> list[int]:
    """Living processes running ``program`` (its name, as in /proc/PID/comm) that a hook of
    ``home`` started: hooks have ``HOOKBUS_HOME`` in their environment, so processes of
    other tests, or of anything else on the machine, are not counted."""
    wanted = {f"HOOKBUS_HOME={home}".encode(), f"HOOKBUS_HOME={home.resolve()}".encode()}
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if Path(f"/proc/{name}/comm").read_text().strip() != program:
                continue
            if wanted.isdisjoint(Path(f"/proc/{name}/environ").read_bytes().split(b"\0")):
                continue
        except OSError:
            continue
        if is_alive(int(name)):
            found.append(int(name))
    return found


@pytest.fixture
def safe_modes(home: Path) -> Iterator[None]:
    """Whatever the umask, everything a test creates starts out as its owner alone can
    write it (0644 / 0755), so that only what the test loosens is loose."""
    old = os.umask(0o022)
    home.chmod(0o755)
    (home / "hooks").chmod(0o755)
    try:
        yield
    finally:
        os.umask(old)


def is_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_until(bus: HookBus, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait on the bus's reload generation until ``predicate`` holds; fail after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        generation = bus.generation
        if predicate():
            return
        remaining = deadline - time.monotonic()
        assert remaining > 0, "timed out waiting for a reload that makes the condition true"
        bus.wait_for_reload(generation, remaining)


def atomic_write(path: Path, text: str) -> None:
    """Write the way careful tools do: a temp file in the same directory, then rename."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def _by_number(item: tuple[str, int]) -> tuple[str, int, str]:
    """Rows in their promise's order: "promise 9" before "promise 10"."""
    name = item[0]
    head, _, rest = name.partition(":")
    word, _, number = head.rpartition(" ")
    return (word, int(number), rest) if number.isdigit() else (name, 0, "")


#: The kits whose figures are printed after the run, and the title of each.
_KITS = (("stresskit", "reliability figures"), ("attackkit", "attack figures"))

#: Figures that are a worst case or a measure, not a count: under pytest-xdist each worker
#: has its own, and the run's is the largest of them (counts are added up).
_LARGEST = re.compile(r"worst|slowest|at once|beside one emit|exit later than|\((?:ms|KiB|MiB)\)|, (?:ms|us)$")

#: The figures the pytest-xdist workers sent back: kit -> name -> value.
_FROM_WORKERS: dict[str, dict[str, int]] = {}


def _figures_here() -> dict[str, dict[str, int]]:
    import sys

    found = {}
    for kit, _ in _KITS:
        module = sys.modules.get(kit)
        if module is not None and module.FIGURES:
            found[kit] = dict(module.FIGURES)
    return found


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker sends its figures to the controller, which prints them."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["hookbus_figures"] = json.dumps(_figures_here())


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    sent = getattr(node, "workeroutput", {}).get("hookbus_figures")
    for kit, figures in json.loads(sent or "{}").items():
        merged = _FROM_WORKERS.setdefault(kit, {})
        for name, value in figures.items():
            if name in merged and _LARGEST.search(name):
                merged[name] = max(merged[name], value)
            else:
                merged[name] = merged.get(name, 0) + value


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The figures of the reliability suite (tests/stress) and of the attack suite
    (tests/adversarial), for those that ran (in this process, or in pytest-xdist's workers)."""
    full = os.environ.get("HOOKBUS_STRESS") == "1"
    figures = _FROM_WORKERS or _figures_here()
    for kit, title in _KITS:
        if not figures.get(kit):
            continue
        terminalreporter.section(f"{title} ({'make stress' if full else 'fast sizes'})")
        for name, value in sorted(figures[kit].items(), key=_by_number):
            terminalreporter.write_line(f"{name:<48} {value:>12,}")


def turn_off_home_guard(home: Path) -> None:
    """Merge ``"protect_home": false`` into the home's settings.json. For tests of what a
    user's hooks decide when hookbus cannot decide (an undecided tool call): the built-in
    home guard is fail-closed, so it would deny every such call first
    (tests/test_home_guard.py tests that)."""
    path = home / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**settings, "protect_home": False}))
