"""Tables fit the terminal: when stdout is one, its width (``$COLUMNS`` when set, else the
terminal's own). The widest columns shrink first (cut at a word, with ``…``), never below a
floor, and ids are never cut. Piped output is never fitted, ``$COLUMNS`` or not: whole
cells, within each column's own cap, as before.

The verbs run on a real pseudo-terminal of a set size, as a user's would.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Callable

import pytest

from hookbus.cli.tables import Style, cut, fit, table
from test_cli import cli_env, run_cli

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]
LONG = "the script exited with status 3 because the configuration file it reads could not be parsed at line 12"


# -- fit and table --------------------------------------------------------------------------


def test_fit_shrinks_the_widest_columns_to_one_cap() -> None:
    # 10 + 40 + 30 and two gaps of 2 = 84: to fit 60, the two wide ones share what is left.
    assert fit([10, 40, 30], 60, [8, 8, 8]) == [10, 23, 23]
    assert fit([10, 40, 30], 84, [8, 8, 8]) == [10, 40, 30]  # it fits: unchanged
    assert fit([10, 40, 30], None, [8, 8, 8]) == [10, 40, 30]  # no width: unchanged
    assert fit([10, 40, 5], 40, [8, 8, 8]) == [10, 21, 5]  # a short column is never cut for a long one


def test_fit_never_goes_below_the_floors() -> None:
    assert fit([24, 40, 40], 30, [24, 8, 8]) == [24, 8, 8]  # too narrow for any: as narrow as it can be
    assert fit([5, 40], 20, [8, 8]) == [5, 13]  # a floor above the size is the size


def test_table_fits_the_width_and_cuts_at_a_word() -> None:
    rows = [("guard", "deny", LONG), ("lint", "allow", "")]

    lines = table(rows, ("HOOK", "STATUS", "ERROR"), Style(False, width=60))

    assert all(len(line) <= 60 for line in lines)
    assert lines[1].startswith("guard  deny    the script exited with status 3 because")
    assert lines[1].endswith("…")
    assert lines[1][-2] != " "  # cut at a word: no space before the ellipsis


def test_table_keeps_the_columns_it_is_told_to_keep() -> None:
    rows = [("a-rather-long-hook-identifier", LONG)]

    kept = table(rows, ("ID", "ERROR"), Style(False, width=40), keep=(0,))
    cut_too = table(rows, ("ID", "ERROR"), Style(False, width=40))

    assert kept[1].startswith("a-rather-long-hook-identifier  ")
    assert not cut_too[1].startswith("a-rather-long-hook-identifier")


def test_table_without_a_width_is_as_before() -> None:
    rows = [("guard", LONG)]

    lines = table(rows, ("HOOK", "ERROR"), Style(False), widths=(None, 60))

    assert lines == ["HOOK   ERROR", "guard  " + cut(LONG, 60)]
    assert len(lines[1]) <= 7 + 60


# -- the verbs ----------------------------------------------------------------------------------


def on_a_terminal(tmp_path: Path, columns: int, *arguments: str, stdin: str = "", **env: str) -> list[str]:
    """The lines ``hookbus ARGUMENTS`` prints on a terminal ``columns`` wide (a pty; no
    colour), its exit checked."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    stdin_path = tmp_path / "stdin.json"
    stdin_path.write_text(stdin)
    output = b""
    try:
        with open(stdin_path, "rb") as source:
            process = subprocess.Popen(
                [sys.executable, "-m", "hookbus", *arguments], stdin=source, stdout=follower, stderr=subprocess.DEVNULL,
                env=cli_env(tmp_path, NO_COLOR="1", **env),
            )
        os.close(follower)
        follower = -1
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the terminal's other end closed
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        assert process.wait(timeout=60) == 0
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return output.decode().replace("\r\n", "\n").splitlines()


def table_of(lines: list[str]) -> list[str]:
    """The table among ``lines``: its header to the first blank line."""
    start = next(index for index, line in enumerate(lines) if line.startswith(("ID ", "AT ", "NAME ", "HOOK ")))
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return lines[start:end]


@pytest.fixture
def noisy_home(home: Path, write_hook: Writer, tmp_path: Path) -> Path:
    """A hook whose last fire failed with a long error, and one that denied with a long
    reason: wide tables."""
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command=f"echo '{LONG}' >&2; exit 2")
    write_hook("lint", event="Stop", mode="sync", command=f"echo '{LONG}' >&2; exit 3")
    run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name":"bash"}')
    run_cli(tmp_path, "emit", "Stop", home=home)
    return home


@pytest.mark.parametrize("verb", [["list"], ["log"], ["plugins"], ["explain", "PreToolUse", "--dry-run"]])
@pytest.mark.parametrize("columns", [100, 140])
def test_every_line_fits_the_terminal(tmp_path: Path, noisy_home: Path, verb: list[str], columns: int) -> None:
    lines = table_of(on_a_terminal(tmp_path, columns, *verb, "--home", str(noisy_home), stdin='{"tool_name":"bash"}'))

    assert len(lines) >= 3
    too_long = [line for line in lines if len(line) > columns]
    assert not too_long, "\n".join(too_long)


def test_columns_says_how_wide_the_terminal_is(tmp_path: Path, noisy_home: Path) -> None:
    """$COLUMNS wins over the terminal's own size (as shutil and ls read it)."""
    lines = table_of(on_a_terminal(tmp_path, 200, "list", "--home", str(noisy_home), COLUMNS="90"))

    assert all(len(line) <= 90 for line in lines), lines
    assert any(line.endswith("…") for line in lines)


def test_ids_stay_whole_on_a_narrow_terminal(tmp_path: Path, noisy_home: Path) -> None:
    lines = table_of(on_a_terminal(tmp_path, 50, "list", "--home", str(noisy_home)))

    assert [row.split()[0] for row in lines[1:]] == ["hookbus:protect_home", "guard", "lint"]
    assert any("…" in line for line in lines)


def test_the_log_shows_the_tool_beside_the_event_and_the_error_fills_the_line(tmp_path: Path, noisy_home: Path) -> None:
    lines = table_of(on_a_terminal(tmp_path, 120, "log", "--home", str(noisy_home)))

    header, guard, lint = lines
    assert header.split() == ["AT", "EVENT", "HOOK", "MODE", "STATUS", "TOOK", "SAID", "ERROR"]
    assert guard.split()[1:5] == ["PreToolUse(bash)", "guard", "sync", "deny"]
    assert guard.endswith("…")  # the reason, cut at a word
    assert lint.split()[1:5] == ["Stop", "lint", "sync", "allow"]
    assert 110 <= len(lint) <= 120 and lint.endswith("…")  # the last column takes the room left


def test_piped_output_is_not_fitted_whatever_columns_says(tmp_path: Path, noisy_home: Path) -> None:
    """Not a terminal: whole cells within their caps, however long the line, even with a
    $COLUMNS inherited from somewhere (readline exports one into the processes Python starts)."""
    piped = run_cli(tmp_path, "list", home=noisy_home)
    with_columns = run_cli(tmp_path, "list", home=noisy_home, env=cli_env(tmp_path, COLUMNS="50"))

    assert piped.stdout == with_columns.stdout
    [lint] = [line for line in piped.stdout.splitlines() if line.startswith("lint ")]
    assert len(lint) > 100
    assert lint.endswith(cut(f"exited with status 3: {LONG}", 60))
