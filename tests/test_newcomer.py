"""What a new user hits first: hooks that fail where the user looks, ``list`` and
``validate`` that show what is broken, homes that are empty or missing, tables, colour,
``--version``, and the asyncio side of the bus. Each papercut found by trying hookbus as a
newcomer has a test here (the spec and plugin ones are in test_spec, test_workflow,
test_prompt and test_plugins).
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from conftest import atomic_write, read_log, wait_until
from hookbus import HookBus
from hookbus.cli.tables import ELLIPSIS, cut
from servekit import Served, environment

pytestmark = pytest.mark.timeout(90)

Writer = Callable[..., Path]
WRITE = json.dumps({"tool_name": "write_file", "tool_input": {"path": "a.txt"}})


def hookbus(*arguments: str, input: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments], input=input, capture_output=True, text=True, timeout=60,
        env=env or environment(NO_COLOR="1"),
    )


# -- failures are visible where the user looks --------------------------------------------------

FAILING = {
    "timeout": ({"timeout": "200ms", "command": "sleep 5"}, "hook 'h' failed open (timed out): timed out after 200ms"),
    "exit status": ({"command": "cat >/dev/null; echo oops >&2; exit 3"}, "hook 'h' failed open (crashed): exited with status 3: oops"),
    "unparseable": ({"command": """cat >/dev/null; echo '{"behavior": "maybe"}'"""}, "hook 'h' failed open (answered with something unparseable)"),
    "spawn error": ({"command": "exit 0", "cwd": "/nonexistent/dir"}, "hook 'h' failed open (crashed): could not start: working directory"),
}


@pytest.mark.parametrize("kind", list(FAILING))
def test_emit_says_on_stderr_which_hook_failed_and_keeps_stdout_and_exit(write_hook: Writer, home: Path, kind: str) -> None:
    fields, line = FAILING[kind]
    write_hook("h", mode="sync", blocking=True, **fields)
    alone = hookbus("emit", "PreToolUse", "--home", str(home), input=WRITE)
    assert (alone.returncode, alone.stdout) == (0, '{"behavior": "allow"}\n')
    assert f"hookbus emit: {line}" in alone.stderr, alone.stderr
    assert alone.stderr.count("\n") == 1
    with Served(home):
        served = hookbus("emit", "PreToolUse", "--home", str(home), input=WRITE)
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)


def test_a_hook_that_fails_closed_says_so_and_denies(write_hook: Writer, home: Path) -> None:
    write_hook("h", mode="sync", blocking=True, on_error="deny", timeout="200ms", command="sleep 5")
    result = hookbus("emit", "PreToolUse", "--home", str(home), input=WRITE)
    assert result.returncode == 2
    assert "hookbus emit: hook 'h' failed closed (timed out): timed out after 200ms" in result.stderr


def test_the_homes_load_problems_are_said_through_a_server_too(write_hook: Writer, home: Path) -> None:
    write_hook("ok", mode="sync", command="cat >/dev/null; exit 0")
    write_hook("typo", command="exit 0", blockng=True)
    alone = hookbus("emit", "PreToolUse", "--home", str(home), input=WRITE)
    assert "hookbus: skipped hooks/typo/hook.json: unknown field 'blockng'" in alone.stderr
    with Served(home):
        served = hookbus("emit", "PreToolUse", "--home", str(home), input=WRITE)
    assert (served.stdout, served.stderr) == (alone.stdout, alone.stderr)


def test_a_home_that_does_not_exist_is_warned_about(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = hookbus("emit", "Stop", "--home", str(missing), input="{}")
    assert result.stdout == '{"behavior": "allow"}\n'
    assert result.stderr == (
        f"hookbus emit: the home {missing} does not exist, so no hook of yours can fire: make one with "
        "`hookbus new ID --event EVENT`, or name the right one with --home or $VIX_HOME\n"
    )


def test_an_empty_home_option_means_what_an_empty_vix_home_means(tmp_path: Path, write_hook: Writer, home: Path) -> None:
    write_hook("guard", event="Stop", mode="sync", command="cat >/dev/null; echo here")
    env = environment(VIX_HOME=str(home), NO_COLOR="1")
    by_option = hookbus("emit", "Stop", "--home", "", input="{}", env=env)
    assert json.loads(by_option.stdout) == {"behavior": "context", "context": "here"}
    default_home = tmp_path / "user"
    (default_home / ".vix" / "hooks").mkdir(parents=True)
    both_empty = environment(VIX_HOME="", HOME=str(default_home), NO_COLOR="1")
    for arguments in (("emit", "Stop", "--home", ""), ("emit", "Stop")):
        result = hookbus(*arguments, input="{}", env=both_empty)
        assert result.stdout == '{"behavior": "allow"}\n' and "does not exist" not in result.stderr
        assert "writable by group and others" not in result.stderr  # not the working directory


# -- list and validate show what is broken ------------------------------------------------------


def test_list_shows_a_broken_hook_and_its_error(write_hook: Writer, home: Path) -> None:
    write_hook("good", command="exit 0")
    broken = write_hook("broken", command="exit 0")
    broken.write_text('{"trigger": {"event": "PreToolUse"}, "command": "exit 0", "blockng": true}')
    result = hookbus("list", "--home", str(home))
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "EVENT", "MATCHER", "MODE", "ACTION", "STATE", "LAST", "FIRE", "ERROR"]
    row = next(line for line in lines if line.startswith("broken"))
    assert "broken (not loaded)" in row and "unknown field 'blockng'" in row
    assert any(line.startswith("good") and "enabled" in line for line in lines)
    assert "1 problem (skipped files" in result.stdout


def test_list_marks_a_hook_a_running_bus_keeps_at_its_last_good_version(write_hook: Writer, home: Path, make_bus: Callable[..., HookBus]) -> None:
    path = write_hook("guard", command="exit 0")
    bus = make_bus(watch=True)
    generation = bus.generation
    atomic_write(path, '{"trigger": ')
    wait_until(bus, lambda: bus.generation > generation and any(p.kept_last_good for p in bus.problems))
    bus.close()  # flushes state.json's load_error
    row = next(line for line in hookbus("list", "--home", str(home)).stdout.splitlines() if line.startswith("guard"))
    assert "broken (last good version)" in row and "invalid JSON" in row


def test_list_cuts_long_errors_at_a_word_and_keeps_them_apart_from_the_state(write_hook: Writer, home: Path) -> None:
    write_hook("noisy", event="Stop", mode="sync", command="cat >/dev/null; echo " + " ".join(["word"] * 60) + " >&2; exit 4")
    hookbus("emit", "Stop", "--home", str(home), input="{}")
    row = next(line for line in hookbus("list", "--home", str(home)).stdout.splitlines() if line.startswith("noisy"))
    error = row.split("allow ", 1)[1].split("  ", 1)[1].strip()
    assert error.startswith("exited with status 4: word word") and error.endswith(ELLIPSIS) and len(error) <= 60
    assert not error[:-1].endswith("wor")


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ({"empty/notes.txt": "x"}, "hooks/empty: no hook.json or hook.yaml, so it is no hook"),
        ({"yml/hook.yml": "x"}, "hooks/yml: no hook.json or hook.yaml, so it is no hook; found hook.yml: rename it to hook.yaml"),
        ({"caps/Hook.json": "{}"}, "found Hook.json: rename it to hook.json"),
        ({"bak/hook.json.bak": "{}"}, "found hook.json.bak: rename it to hook.json"),
        ({"hook.json": "{}"}, "hooks/hook.json: a spec file directly in hooks/: a hook is a directory; move it to hooks/<id>/hook.json"),
    ],
)
def test_validate_reports_what_looks_like_a_hook_and_is_none(home: Path, layout: dict[str, str], said: str) -> None:
    for name, text in layout.items():
        path = home / "hooks" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = hookbus("validate", "--home", str(home))
    assert result.returncode == 1
    assert said in result.stdout


def test_validate_on_an_empty_home_says_so(home: Path) -> None:
    result = hookbus("validate", "--home", str(home))
    assert (result.returncode, result.stdout) == (0, f"no hooks in {home / 'hooks'}: nothing to validate\n")


def test_counts_are_plural_and_name_the_home(write_hook: Writer, home: Path) -> None:
    write_hook("one", command="exit 0")
    result = hookbus("validate", "--home", str(home))
    assert result.stdout.splitlines()[-1] == f"1 valid hook, no problems in {home / 'hooks'}"
    assert hookbus("log", "--home", str(home)).stdout == f"no fires recorded in {home}\n"
    watch = subprocess.Popen(
        [sys.executable, "-m", "hookbus", "watch", "--home", str(home)], stdout=subprocess.PIPE, text=True, env=environment(NO_COLOR="1"),
    )
    try:
        assert watch.stdout is not None
        first = ""
        while "watching" not in first:
            first = watch.stdout.readline()
        assert f"watching {home} (1 hook loaded, no problems)" in first
    finally:
        watch.terminate()
        watch.communicate(timeout=30)


# -- tables and colour -------------------------------------------------------------------------


def test_the_log_has_columns_with_a_header_and_errors_apart_from_reasons(write_hook: Writer, home: Path) -> None:
    write_hook("deny", event="Stop", mode="sync", command="cat >/dev/null; echo '{\"behavior\": \"context\", \"context\": \"a reason\"}'")
    write_hook("fail", event="Stop", mode="sync", command="cat >/dev/null; echo broken >&2; exit 5")
    hookbus("emit", "Stop", "--home", str(home), input="{}")
    lines = hookbus("log", "--home", str(home)).stdout.splitlines()
    assert lines[0].split() == ["AT", "EVENT", "HOOK", "MODE", "STATUS", "TOOK", "SAID", "ERROR"]
    said_at, error_at = lines[0].index("SAID"), lines[0].index("ERROR")
    context = next(line for line in lines if " deny " in line)
    failed = next(line for line in lines if " fail " in line)
    assert context[said_at:].startswith("a reason") and context[error_at:].strip() == ""
    assert failed[said_at:error_at].strip() == "" and failed[error_at:].startswith("exited with status 5: broken")


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [("short", 10, "short"), ("one two three four", 12, f"one two{ELLIPSIS}"), ("abcdefghijklmnop", 8, f"abcdefg{ELLIPSIS}"), ("a,  b\n c", 20, "a, b c")],
)
def test_cut_at_a_word_boundary(text: str, width: int, expected: str) -> None:
    assert cut(text, width) == expected
    assert len(cut(text, width)) <= width


def _on_a_terminal(arguments: list[str], env: dict[str, str]) -> str:
    """What ``arguments`` print when stdout is a terminal (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(arguments, stdout=follower, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env)
        os.close(follower)
        follower = -1
        output = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        process.wait(timeout=30)
        return output.decode()
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)


def test_colour_on_a_terminal_and_never_when_piped_or_no_color(write_hook: Writer, home: Path) -> None:
    write_hook("guard", event="Stop", mode="sync", command="cat >/dev/null; exit 2")
    hookbus("emit", "Stop", "--home", str(home), input="{}")
    command = [sys.executable, "-m", "hookbus", "log", "--home", str(home)]
    assert "\x1b[31mdeny" in _on_a_terminal(command, environment(NO_COLOR=None, TERM="xterm"))
    assert "\x1b" not in _on_a_terminal(command, environment(NO_COLOR="1", TERM="xterm"))
    assert "\x1b" not in _on_a_terminal(command, environment(NO_COLOR=None, TERM="dumb"))
    assert "\x1b" not in hookbus("log", "--home", str(home), env=environment(NO_COLOR=None, TERM="xterm")).stdout


# -- --version and --help ------------------------------------------------------------------------


def test_version_and_a_line_for_every_verb() -> None:
    from hookbus import __version__
    from hookbus.cli.verbs import VERBS

    assert hookbus("--version").stdout == f"hookbus {__version__}\n"
    usage = hookbus("--help").stdout
    for verb, (help_text, _, _) in VERBS.items():
        assert help_text and "\n" not in help_text
        assert verb in usage


# -- the bus from asyncio, and trigger's record ---------------------------------------------------


def test_async_with_closes_without_blocking_the_loop(write_hook: Writer, home: Path) -> None:
    write_hook("slow", event="Stop", command="sleep 0.6")

    async def main() -> tuple[int, float]:
        ticks = 0
        stop = asyncio.Event()

        async def tick() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        async with HookBus(home) as bus:
            await bus.aemit("Stop", {})
        waited = time.monotonic() - started
        stop.set()
        await ticker
        return ticks, waited

    ticks, waited = asyncio.run(main())
    assert waited >= 0.5  # the async hook was drained
    assert ticks >= 10  # and the loop ran meanwhile
    assert [record["status"] for record in read_log(home)] == ["done"]


def test_aclose_hands_back_what_close_raises() -> None:
    class Failing(HookBus):
        def close(self, timeout: float | None = None) -> None:
            super().close(timeout)
            raise RuntimeError("flush failed")

    async def main(root: Path) -> None:
        bus = Failing(root)
        with pytest.raises(RuntimeError, match="flush failed"):
            await bus.aclose()

    import tempfile

    with tempfile.TemporaryDirectory() as root:
        asyncio.run(main(Path(root)))


def test_trigger_returns_the_duration_the_record_stores(write_hook: Writer, make_bus: Callable[..., HookBus]) -> None:
    write_hook("h", event="Stop", command="exit 0")
    bus = make_bus()
    record = bus.trigger("h")
    bus.close()
    stored = make_bus().read_runs("h")[-1]
    assert stored == record
    assert record.duration == round(record.duration, 6)



def test_list_is_not_stalled_by_a_fifo_where_a_broken_hooks_state_json_should_be(write_hook: Writer, home: Path) -> None:
    """list reads a broken hook's state.json for the last-good marker: never a FIFO's."""
    broken = write_hook("broken", command="exit 0")
    broken.write_text('{"trigger": ')
    os.mkfifo(broken.parent / "state.json", 0o600)
    started = time.monotonic()
    result = hookbus("list", "--home", str(home))
    assert time.monotonic() - started < 30
    assert "broken (not loaded)" in result.stdout
