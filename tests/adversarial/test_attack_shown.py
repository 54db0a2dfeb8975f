"""Promise 10: what hookbus shows is what is enforced, and looking changes nothing.

With a server running and a hook broken on disk (kept at its last good version there),
``list`` and ``explain`` say what the server enforces, by asking it, and say so. The
read-only verbs (``list``, ``explain --dry-run``, ``log``, ``validate``, ``plugins``) never
write: not a state.json (where a load error would erase the running bus's last-good mark),
not a log line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from attackkit import attack
from servekit import Served, wait_for

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
SHOWN = 10
BASH = '{"tool_name":"bash","tool_input":{"command":"rm -rf /"}}'
READ_ONLY = (("list",), ("explain", "PreToolUse", "--dry-run"), ("log",), ("validate",), ("plugins",))


def run(home: Path, *arguments: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOOKBUS, *arguments, "--home", str(home)], input=stdin, capture_output=True, text=True, timeout=60)


def snapshot_of(home: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the home but the server's run directory, with its bytes and mtime."""
    files = {}
    for path in sorted(home.rglob("*")):
        if path.is_file() and "run" not in path.relative_to(home).parts:
            files[str(path.relative_to(home))] = (path.read_bytes(), path.stat().st_mtime_ns)
    return files


def broken_guard(home: Path, write_hook: Writer) -> Path:
    spec = write_hook("guard", matcher="bash", mode="sync", blocking=True, on_error="deny", command="cat >/dev/null; echo no >&2; exit 2")
    return spec


def break_it(spec: Path) -> None:
    temporary = spec.with_name(".hook.json.tmp")
    temporary.write_text('{"trigger": ')
    os.replace(temporary, spec)


def test_list_and_explain_say_what_a_running_server_enforces(home: Path, write_hook: Writer) -> None:
    with attack(SHOWN, "list and explain with a server keeping a broken hook's last good version"):
        spec = broken_guard(home, write_hook)
        with Served(home) as served:
            served.wait_ready()
            assert run(home, "emit", "PreToolUse", stdin=BASH).returncode == 2
            break_it(spec)
            wait_for(lambda: "last good version stays in effect" in (home / "hooks" / "guard" / "state.json").read_text()
                     if (home / "hooks" / "guard" / "state.json").exists() else False, message="the server to keep the last good version")
            listed = run(home, "list")
            assert "enabled (last good version)" in listed.stdout and "as enforced by the hookbus serve" in listed.stdout
            explained = run(home, "explain", "PreToolUse", "--json", stdin=BASH)
            document = json.loads(explained.stdout)
            assert document["decision"]["behavior"] == "deny" and "as decided by the hookbus serve" in document["source"]
            # And an emit through it agrees with what was shown.
            assert run(home, "emit", "PreToolUse", stdin=BASH).returncode == 2


def test_read_only_verbs_never_write(home: Path, write_hook: Writer) -> None:
    spec = broken_guard(home, write_hook)
    write_hook("other", event="Stop", command="true")
    state = home / "hooks" / "guard" / "state.json"

    def nothing_written() -> None:
        before = snapshot_of(home)
        for verb in READ_ONLY:
            result = run(home, *verb, stdin=BASH)
            assert "Traceback" not in result.stderr, (verb, result.stderr)
        after = snapshot_of(home)
        assert after == before, [name for name in set(before) | set(after) if before.get(name) != after.get(name)]

    with Served(home):
        break_it(spec)
        wait_for(lambda: state.exists() and "last good" in state.read_text(), message="the server's last-good mark")
        with attack(SHOWN, "read-only verbs with a server keeping a hook's last good version"):
            nothing_written()
    with attack(SHOWN, "read-only verbs without a server, a hook's last-good mark in its state.json"):
        nothing_written()
        # The mark the server left still says that a last good version lives on.
        assert "broken (last good version)" in run(home, "list").stdout


def test_an_in_process_emit_says_which_hook_a_server_still_enforces(home: Path, write_hook: Writer) -> None:
    """The one way an in-process decision differs from a server's: a broken hook kept at
    its last good version there, and not loadable here. Said on stderr, never silently."""
    with attack(SHOWN, "emit --no-server beside a server that keeps a broken guard's last good version"):
        spec = broken_guard(home, write_hook)
        state = home / "hooks" / "guard" / "state.json"
        with Served(home):
            break_it(spec)
            wait_for(lambda: state.exists() and "last good" in state.read_text(), message="the server's last-good mark")
            served = run(home, "emit", "PreToolUse", stdin=BASH)
            local = run(home, "emit", "PreToolUse", "--no-server", stdin=BASH)
        assert served.returncode == 2
        assert local.returncode == 0
        assert "still enforces its last good version, which this process cannot load" in local.stderr
