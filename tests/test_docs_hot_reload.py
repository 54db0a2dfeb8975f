"""docs/hot-reload.md's examples run: the wait-for-reload example fires the hook it writes,
and `hookbus watch` prints the lines the page shows when a hook loads and when its file
breaks (the last good version kept)."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from docskit import DOCS, private_dir, run_python, section_blocks, user_environment

DOC = DOCS / "hot-reload.md"

pytestmark = pytest.mark.timeout(120)


def test_waiting_on_a_reload(tmp_path: Path) -> None:
    user = private_dir(tmp_path / "ana")
    private_dir(private_dir(user / ".vix") / "hooks")
    [code] = section_blocks(DOC, "Waiting on a reload", "python")
    done = run_python(code, env=user_environment(user))
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr


def pattern(shown: str) -> re.Pattern[str]:
    """A line the page shows, as a pattern: its time any time, its `...` anything."""
    time_part, rest = shown.split(" ", 1)
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", time_part)
    return re.compile(r"\d\d:\d\d:\d\d\.\d{3} " + ".*".join(re.escape(part) for part in rest.split("...")))


def test_hookbus_watch_prints_the_lines_shown(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    hook = private_dir(private_dir(home / "hooks") / "x")
    [shown] = section_blocks(DOC, "`hookbus watch`", "text")
    loaded, kept = (pattern(line) for line in shown.splitlines())
    watch = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "watch", "--home", str(home)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=user_environment(tmp_path),
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.put(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for(wanted: re.Pattern[str]) -> str:
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            seen.append(line)
            if wanted.fullmatch(line):
                return line
        raise AssertionError(f"hookbus watch never printed {wanted.pattern!r}; it printed {seen}")

    try:
        wait_for(re.compile(r"watching .*"))
        temp = hook / ".hook.json.tmp"
        temp.write_text(json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "command": "exit 0"}))
        temp.replace(hook / "hook.json")
        wait_for(loaded)
        temp.write_text("{x")  # invalid at line 1, column 2
        temp.replace(hook / "hook.json")
        wait_for(kept)
    finally:
        watch.terminate()
        watch.wait(timeout=30)
        reader.join(timeout=30)
        assert watch.stdout is not None
        watch.stdout.close()
    assert watch.returncode == 0
