"""Attacks on promise 8, "hookbus's own failure is never a host's allow": a hook that
cannot be started, or that is started somewhere it did not ask for, fails under its own
``on_error`` with a message that says what went wrong, or runs where a user expects and says
so. Never an exception out of emit, never an allow for a fail-closed hook.

- An envelope ``cwd`` the hooks' user may not enter (``chmod 000``, another user's home):
  a hook with no cwd of its own runs in its directory, the record says why, and a
  fail-closed guard decides by what its command said. A hook whose own ``cwd`` cannot be
  entered fails, saying so.
- A ``claude-code`` hook whose CLAUDE_PROJECT_DIR (the envelope's project_dir or cwd) is
  past what exec takes: the failure names the variable and its size.
- A client of the same user that used up its processes (EAGAIN from fork), descriptors
  (EMFILE from pipe) or threads (``can't start new thread``): each is the hook's failure.

Root enters any directory and ignores RLIMIT_NPROC, and the tests run as root: those
attacks run a bus as ``nobody`` (uid 65534) in a child of the system's Python, which is the
venv's minor version (the venv's own interpreter lives under /root, mode 0700), on this
checkout, or on a copy nobody can reach when the checkout is under a directory nobody may
not enter (``otheruser``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import attack
from conftest import HookWriter, read_log
from otheruser import python_path
from hookbus import HookBus

Maker = Callable[..., HookBus]

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
REPOSITORY = Path(__file__).resolve().parents[2]
#: Every child here answers well within this; it only bounds a hang.
CHILD_SECONDS = 60


def _system_python_minor() -> tuple[int, int] | None:
    try:
        done = subprocess.run(
            [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True, text=True, timeout=30,
        )
    except OSError:
        return None
    major, minor = done.stdout.split()
    return int(major), int(minor)


needs_nobody = pytest.mark.skipif(
    os.geteuid() != 0 or _system_python_minor() != sys.version_info[:2],
    reason="needs root (to run a bus as nobody) and a /usr/bin/python3 of the venv's minor version",
)

#: Run by the child: a bus on the home in the plan, its emits, and what came of them, as
#: JSON on stdout. ``limit`` is applied after the warm-up emits and lifted before the
#: records are read: "nproc" leaves no process or thread to start (for a user other than
#: root), "nofile" no descriptor to open.
RUN_BUS = r"""
import errno, json, os, resource, sys
from hookbus import HookBus

plan = json.loads(sys.argv[1])
said = {"decisions": []}
bus = HookBus(plan["home"])
said["problems"] = [str(problem) for problem in bus.problems]
for event, envelope in plan.get("warm_up", []):
    bus.emit(event, envelope)
limit = plan.get("limit")
taken = []
if limit == "nproc":
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    resource.setrlimit(resource.RLIMIT_NPROC, (1, hard))  # this process is one already
elif limit == "nofile":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_before = len(os.listdir("/proc/self/fd"))
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 16, hard))
    try:
        while True:
            taken.append(os.dup(0))
    except OSError as exc:
        assert exc.errno == errno.EMFILE, exc
    for _ in range(plan.get("free", 0)):  # enough for a pipe or two, not for all three
        os.close(taken.pop())
for event, envelope in plan["emits"]:
    try:
        decision = bus.emit(event, envelope)
    except BaseException as exc:
        said["decisions"].append({"raised": f"{type(exc).__name__}: {exc}"})
    else:
        said["decisions"].append({**decision.as_dict(), "failed": [f.as_dict() for f in decision.failed]})
if limit == "nproc":
    resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
elif limit == "nofile":
    for descriptor in taken:
        os.close(descriptor)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    said["leaked_descriptors"] = len(os.listdir("/proc/self/fd")) - open_before
said["records"] = [record.log_entry() for record in bus.read_runs()]
bus.close()
print(json.dumps(said))
"""


def _own_paths() -> list[str]:
    return [str(REPOSITORY), str(REPOSITORY / "plugins"), sysconfig.get_paths()["purelib"]]


def run_child(plan: dict[str, Any], *, as_nobody: bool, system_python: bool | None = None) -> dict[str, Any]:
    """``RUN_BUS`` with ``plan``: under the system's Python (with this checkout and the
    venv's packages on its path), as nobody or as us; or as us under the venv's."""
    if system_python is None:
        system_python = as_nobody
    if system_python:
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": plan["scratch"],
            # This checkout and the venv's packages, or a copy nobody can reach (otheruser).
            "PYTHONPATH": os.pathsep.join(python_path(NOBODY) if as_nobody else _own_paths()),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        who: dict[str, Any] = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if as_nobody else {}
        done = subprocess.run(
            [SYSTEM_PYTHON, "-c", RUN_BUS, json.dumps(plan)],
            env=env, cwd=plan["scratch"], capture_output=True, text=True, timeout=CHILD_SECONDS, **who,
        )
    else:
        done = subprocess.run(
            [sys.executable, "-c", RUN_BUS, json.dumps(plan)],
            cwd=plan["scratch"], capture_output=True, text=True, timeout=CHILD_SECONDS,
        )
    assert done.returncode == 0, done.stderr
    said: dict[str, Any] = json.loads(done.stdout)
    assert said["problems"] == [], said["problems"]
    return said


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A fresh directory under /tmp, root's and mode 0755: nobody can reach it and what is
    in it (pytest's tmp_path sits in a 0700 directory), and hookbus, run as nobody, trusts
    what root owns there."""
    path = Path(tempfile.mkdtemp(prefix="hookbus-hook-runs-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for directory, _, _ in os.walk(path):
            os.chmod(directory, 0o755)  # the locked ones too, so they can be removed
        shutil.rmtree(path)


def make_home(scratch: Path, owner: int = NOBODY) -> Path:
    """A home whose hook files are root's and whose logs are ``owner``'s (so a bus run as
    nobody records, and reads its records back)."""
    home = scratch / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "logs").mkdir()
    for path in (home, home / "hooks", home / "logs"):
        path.chmod(0o755)
    os.chown(home / "logs", owner, owner)
    return home


def add_hook(home: Path, hook_id: str, files: dict[str, str] | None = None, **spec: Any) -> Path:
    """A hook of root's files in a directory of the logs' owner (its state.json is theirs
    to write), none of it writable by others."""
    directory = home / "hooks" / hook_id
    directory.mkdir(mode=0o755)
    owner = (home / "logs").stat().st_uid
    os.chown(directory, owner, owner)
    (directory / "hook.json").write_text(json.dumps({"id": hook_id, **spec}))
    (directory / "hook.json").chmod(0o644)
    for name, text in (files or {}).items():
        (directory / name).write_text(text)
        (directory / name).chmod(0o755)
    return directory


def locked_directory(scratch: Path) -> Path:
    """A directory that exists and that nobody may enter (root still may)."""
    locked = scratch / "locked"
    locked.mkdir()
    locked.chmod(0o000)
    return locked


def records_of(said: dict[str, Any], hook_id: str) -> list[dict[str, Any]]:
    return [record for record in said["records"] if record["hook_id"] == hook_id]


GUARD = r"""#!/bin/bash
if grep -q 'rm -rf'; then echo "no rm -rf here" >&2; exit 2; fi
echo "ran in $(pwd -P)"
"""


def bash_call(command: str, cwd: str) -> dict[str, Any]:
    return {"tool_name": "bash", "tool_input": {"command": command}, "cwd": cwd}


# -- an envelope cwd the bus's user may not enter --------------------------------------------


@needs_nobody
@pytest.mark.timeout(120)
def test_a_guard_runs_in_its_directory_when_the_envelope_cwd_cannot_be_entered(scratch: Path) -> None:
    """The agent ran ``chmod 000`` on its working directory. Every command hook without a
    cwd of its own failed to start ("could not start bash: Permission denied"), and a
    fail-open guard let ``rm -rf`` through: it now runs in its own directory, as it would
    for a cwd that does not exist, decides, and its record says where it ran and why."""
    with attack(8, "an envelope cwd the hooks' user cannot enter does not stop the guard"):
        home = make_home(scratch)
        locked = locked_directory(scratch)
        guard_dir = add_hook(
            home, "guard", files={"guard.sh": GUARD}, trigger={"event": "PreToolUse", "matcher": "bash"},
            mode="sync", blocking=True, command='"$HOOKBUS_HOOK_DIR/guard.sh"',
        )
        flow_dir = add_hook(
            home, "flow", trigger={"event": "PreToolUse", "matcher": "read_file"}, mode="sync",
            blocking=True, on_error="deny", workflow={"steps": [{"bash": "pwd -P"}]},
        )
        said = run_child({"scratch": str(scratch), "home": str(home), "emits": [
            ["PreToolUse", bash_call("rm -rf /", str(locked))],
            ["PreToolUse", bash_call("ls", str(locked))],
            ["PreToolUse", {"tool_name": "read_file", "cwd": str(locked)}],
        ]}, as_nobody=True)
        denied, ran, flowed = said["decisions"]
        assert denied == {"behavior": "deny", "reason": "hook 'guard' denied: no rm -rf here", "failed": []}
        assert ran == {"behavior": "context", "context": f"ran in {guard_dir}", "failed": []}
        assert flowed == {"behavior": "context", "context": str(flow_dir), "failed": []}
        note = f"ran in the hook's directory: the envelope's cwd {locked} cannot be entered (Permission denied)"
        assert [record.get("note") for record in records_of(said, "guard")] == [note, note]
        assert [record.get("note") for record in records_of(said, "flow")] == [note]
        assert all(record["error"] is None for record in said["records"])


@needs_nobody
@pytest.mark.timeout(120)
def test_a_hook_whose_own_cwd_cannot_be_entered_fails_saying_so(scratch: Path) -> None:
    """A hook's own ``cwd`` is what its author asked for: it is not swapped for another
    directory. It fails under its on_error, and the message says that the directory cannot
    be entered, not that bash could not start."""
    with attack(8, "a hook's own cwd that cannot be entered fails closed, saying why"):
        home = make_home(scratch)
        locked = locked_directory(scratch)
        for hook_id, matcher, on_error in (("pinned", "bash", "deny"), ("pinned-open", "write_file", "allow")):
            add_hook(
                home, hook_id, trigger={"event": "PreToolUse", "matcher": matcher}, mode="sync",
                blocking=True, on_error=on_error, cwd=str(locked), command="echo should not run",
            )
        said = run_child({"scratch": str(scratch), "home": str(home), "emits": [
            ["PreToolUse", bash_call("ls", "/")],
            ["PreToolUse", {"tool_name": "write_file", "cwd": "/"}],
        ]}, as_nobody=True)
        error = f"could not start: working directory {locked} cannot be entered: Permission denied"
        closed, opened = said["decisions"]
        assert closed == {
            "behavior": "deny",
            "reason": f"hook 'pinned' denied: failed closed: the hook crashed ({error})",
            "failed": [{"hook_id": "pinned", "failure": "crash", "error": error, "closed": True}],
        }
        assert opened == {
            "behavior": "allow",
            "failed": [{"hook_id": "pinned-open", "failure": "crash", "error": error, "closed": False}],
        }


# -- a dialect hook's CLAUDE_PROJECT_DIR past what exec takes ---------------------------------


@pytest.mark.timeout(60)
def test_a_project_dir_past_exec_limits_is_named_in_the_failure(
    home: Path, write_hook: HookWriter, make_bus: Maker
) -> None:
    """CLAUDE_PROJECT_DIR comes from the envelope's project_dir or cwd. One of 200,000
    bytes is no path (PATH_MAX is 4,096) and is past the kernel's 128 KiB for one
    environment string: the hook cannot start. The failure names the variable and its size
    (it said "Argument list too long"), and a fail-closed hook denies."""
    with attack(8, "a 200,000-byte CLAUDE_PROJECT_DIR fails the dialect hook closed, named"):
        for hook_id, matcher, on_error in (("cc", "Bash", "deny"), ("cc-open", "Write", "allow")):
            write_hook(
                hook_id, matcher=matcher, mode="sync", blocking=True, on_error=on_error,
                dialect="claude-code", command='echo "length ${#CLAUDE_PROJECT_DIR}" >&2; exit 2',
            )
        bus = make_bus()
        project = "/" + "p" * 199_999
        assert bus.emit("PreToolUse", {"tool_name": "bash", "project_dir": "/srv"}).reason == "hook 'cc' denied: length 4"
        closed = bus.emit("PreToolUse", {"tool_name": "bash", "project_dir": project})
        opened = bus.emit("PreToolUse", {"tool_name": "write_file", "cwd": project})
        bus.close()
        assert closed.behavior == "deny"
        assert [(f.hook_id, f.failure, f.closed) for f in closed.failed] == [("cc", "crash", True)]
        assert [(f.hook_id, f.failure, f.closed) for f in opened.failed] == [("cc-open", "crash", False)]
        assert opened.behavior == "allow"
        for failure in (closed.failed[0], opened.failed[0]):
            assert failure.error.startswith("could not start: the environment variable CLAUDE_PROJECT_DIR holds 200,000 bytes"), failure.error
            assert "131,072" in failure.error and "Argument list too long" not in failure.error
        assert closed.reason == f"hook 'cc' denied: failed closed: the hook crashed ({closed.failed[0].error})"
        logged = [entry["error"] for entry in read_log(home) if entry["error"]]
        assert logged == [closed.failed[0].error, opened.failed[0].error]


# -- a client of the same user used up processes, descriptors or threads --------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("free", [0, 2, 4])
def test_out_of_descriptors_is_the_hooks_failure(free: int, scratch: Path) -> None:
    """Every descriptor the process may have is taken (a serve's clients, say), or all but
    enough for one or two of a hook's three pipes: the hook cannot start. That is its
    failure, saying what ran out, and it leaks nothing that would keep the process out of
    descriptors once they are back (Popen left its first pipes open when a later one
    failed, before Python 3.11.4: the system's Python here, when it is of the venv's minor
    version, shows it)."""
    with attack(8, f"EMFILE at a hook's spawn ({free} descriptors free) fails it closed, saying what ran out"):
        home = make_home(scratch, owner=os.geteuid())
        for hook_id, matcher, on_error in (("warm", "glob", "allow"), ("fd-guard", "bash", "deny"), ("fd-open", "write_file", "allow")):
            add_hook(home, hook_id, trigger={"event": "PreToolUse", "matcher": matcher}, mode="sync",
                     blocking=True, on_error=on_error, command="exit 0")
        said = run_child({
            "scratch": str(scratch), "home": str(home), "limit": "nofile", "free": free,
            "warm_up": [["PreToolUse", {"tool_name": "glob"}]],
            "emits": [["PreToolUse", {"tool_name": "bash"}], ["PreToolUse", {"tool_name": "write_file"}]],
        }, as_nobody=False, system_python=_system_python_minor() == sys.version_info[:2])
        closed, opened = said["decisions"]
        assert closed["behavior"] == "deny", closed
        assert [(f["hook_id"], f["failure"], f["closed"]) for f in closed["failed"]] == [("fd-guard", "crash", True)]
        assert opened["behavior"] == "allow", opened
        assert [(f["hook_id"], f["failure"], f["closed"]) for f in opened["failed"]] == [("fd-open", "crash", False)]
        for failure in closed["failed"] + opened["failed"]:
            assert failure["error"].startswith("could not start: out of file descriptors (EMFILE)"), failure
        # Fewer after than before is no leak: a thread of the bus closed one meanwhile.
        assert said["leaked_descriptors"] <= 0


@needs_nobody
@pytest.mark.timeout(120)
def test_out_of_processes_and_threads_is_the_hooks_failure(scratch: Path) -> None:
    """The bus's user has used up its processes (RLIMIT_NPROC; root ignores it, so the bus
    runs as nobody). A lone hook's fork fails with EAGAIN; two hooks of one emit find no
    thread to run on, and ``can't start new thread`` was raised out of emit. Each is now the
    hook's failure: the fail-closed one denies, the fail-open one allows with the error."""
    with attack(8, "EAGAIN at fork and no thread for a sync hook fail it closed, never raise"):
        home = make_home(scratch)
        hooks = (("lone-guard", "bash", "deny"), ("lone-open", "write_file", "allow"),
                 ("pair-guard", "read_file", "deny"), ("pair-open", "read_file", "allow"))
        for hook_id, matcher, on_error in hooks:
            add_hook(home, hook_id, trigger={"event": "PreToolUse", "matcher": matcher}, mode="sync",
                     blocking=True, on_error=on_error, command="exit 0")
        said = run_child({
            "scratch": str(scratch), "home": str(home), "limit": "nproc",
            "emits": [["PreToolUse", {"tool_name": name}] for name in ("bash", "write_file", "read_file")],
        }, as_nobody=True)
        lone_closed, lone_opened, pair = said["decisions"]
        assert lone_closed["behavior"] == "deny", lone_closed
        assert lone_opened["behavior"] == "allow", lone_opened
        for decision, hook_id, closed in ((lone_closed, "lone-guard", True), (lone_opened, "lone-open", False)):
            [failure] = decision["failed"]
            assert (failure["hook_id"], failure["failure"], failure["closed"]) == (hook_id, "crash", closed)
            assert failure["error"].startswith("could not start: out of processes (EAGAIN)"), failure
        assert pair.get("behavior") == "deny", pair
        assert [(f["hook_id"], f["failure"], f["closed"]) for f in pair["failed"]] == [
            ("pair-guard", "crash", True), ("pair-open", "crash", False),
        ]
        for failure in pair["failed"]:
            assert failure["error"].startswith("could not start a thread for it: "), failure
        # Recorded as any failure is, once the processes were back.
        assert [record["error"] is not None for record in said["records"]] == [True] * 4
