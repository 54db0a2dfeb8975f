"""A home that does not exist: a mistyped ``--home`` or ``$VIX_HOME``, or no home made yet.

Every verb that inspects a home says so in one line on stderr and exits 1 (``validate``
used to say "nothing to validate" and exit 0, which a CI gate reads as "all valid").
``emit`` and the bridges still decide, allow when no hook of the home can exist (a missing
home must never break the host), and say once on stderr what is wrong. Nothing makes the
home but the verbs that write one (``new``, ``install``, ``import``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from servekit import environment


def run(home: Path | None, *arguments: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m hookbus ARGUMENTS [--home HOME]`` with no server of another home in reach."""
    where = ("--home", str(home)) if home is not None else ()
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments, *where],
        input=stdin, capture_output=True, text=True, timeout=60,
        env=env or environment(VIX_HOME=None, HOOKBUS_SOCKET=None, NO_COLOR="1"),
    )


def refusal(verb: str, home: Path) -> str:
    return (
        f"hookbus {verb}: the home {home} does not exist: make one with `hookbus new ID --event EVENT`, "
        "or name the right one with --home or $VIX_HOME\n"
    )


INSPECTING = [
    ("validate",), ("validate", "--json"), ("list",), ("list", "--json"), ("log",), ("test",), ("replay",), ("status",),
    ("trigger", "guard"), ("explain", "PreToolUse", "--input", "-"), ("explain", "Stop", "--dry-run", "--input", "-"),
    ("watch",), ("serve",),
]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("arguments", INSPECTING, ids=[" ".join(arguments) for arguments in INSPECTING])
def test_a_verb_that_inspects_a_home_refuses_one_that_does_not_exist(arguments: tuple[str, ...], tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    result = run(missing, *arguments, stdin="{}")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", refusal(arguments[0], missing))
    assert not missing.exists()


@pytest.mark.timeout(60)
def test_the_home_named_by_vix_home_is_named_too(tmp_path: Path) -> None:
    missing = tmp_path / "from-the-environment"
    result = run(None, "validate", env=environment(VIX_HOME=str(missing), HOOKBUS_SOCKET=None))
    assert (result.returncode, result.stderr) == (1, refusal("validate", missing))


@pytest.mark.timeout(60)
def test_a_home_that_is_a_file_is_no_home(tmp_path: Path) -> None:
    file = tmp_path / "home"
    file.write_text("")
    result = run(file, "list")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"hookbus list: the home {file} is not a directory: make one with `hookbus new ID --event EVENT`, "
        "or name the right one with --home or $VIX_HOME\n"
    )


def said_once(verb: str, home: Path) -> str:
    return (
        f"hookbus {verb}: the home {home} does not exist, so no hook of yours can fire: make one with "
        "`hookbus new ID --event EVENT`, or name the right one with --home or $VIX_HOME\n"
    )


BASH = {"tool_name": "bash", "tool_input": {"command": "ls"}}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("verb", "arguments", "envelope", "answer"),
    [
        ("emit", ("PreToolUse",), BASH, '{"behavior": "allow"}\n'),
        ("claude-code-hook", (), {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Bash", "tool_input": {"command": "ls"}}, ""),
        ("claude-code-hook", (), {"hook_event_name": "Stop", "session_id": "s", "stop_hook_active": False}, ""),
        ("gemini-cli-hook", (), {"hook_event_name": "BeforeTool", "session_id": "s", "tool_name": "run_shell_command", "tool_input": {"command": "ls"}}, "{}\n"),
        ("gemini-cli-hook", (), {"hook_event_name": "AfterAgent", "session_id": "s", "prompt": "p", "prompt_response": "r", "stop_hook_active": False}, "{}\n"),
    ],
    ids=["emit", "claude-code-hook", "claude-code-hook Stop", "gemini-cli-hook", "gemini-cli-hook AfterAgent"],
)
def test_emit_and_the_bridges_still_decide_and_say_it_once(
    verb: str, arguments: tuple[str, ...], envelope: dict[str, object], answer: str, tmp_path: Path
) -> None:
    """No hook of the home can exist, so none can deny: the host goes on, and the one line
    on stderr (which a host shows when a hook fails) says why nothing fired."""
    missing = tmp_path / "typo"
    result = run(missing, verb, *arguments, stdin=json.dumps(envelope))
    assert (result.returncode, result.stdout, result.stderr) == (0, answer, said_once(verb, missing))
    assert not missing.exists()  # not even a run/ directory for the Stop memory


@pytest.mark.timeout(60)
def test_plugins_shows_the_installation_and_says_the_home_is_missing(tmp_path: Path) -> None:
    """``plugins`` is about what is installed here; a home only picks the recorders, and a
    missing one picks the default."""
    missing = tmp_path / "typo"
    result = run(missing, "plugins")
    assert result.returncode == 0
    assert "recording with: recorder" in result.stdout
    assert result.stderr == said_once("plugins", missing)


@pytest.mark.timeout(60)
def test_new_makes_the_home(tmp_path: Path) -> None:
    home = tmp_path / "fresh"
    result = run(home, "new", "guard", "--event", "PreToolUse")
    assert result.returncode == 0, result.stderr
    assert (home / "hooks" / "guard" / "hook.json").is_file()
    assert run(home, "validate").returncode == 0
