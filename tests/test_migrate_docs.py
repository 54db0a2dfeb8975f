"""docs/claude-code.md's sections on the migration run as written, in a fresh HOME with
the venv's bin on PATH: "Your own hooks move into the home" (its settings file, installed,
says the lines the page quotes) and "Undoing it" (its two commands: the dry run writes
nothing, the other gives the settings file back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docskit import DOCS, bash, logical_lines, private_dir, section, section_blocks, user_environment

DOC = DOCS / "claude-code.md"
MOVE = "Your own hooks move into the home"
UNDO = "Undoing it"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def user(tmp_path: Path) -> Path:
    return private_dir(tmp_path / "ana")


def test_the_moved_hooks_example_says_what_the_page_quotes_and_comes_back(user: Path) -> None:
    [settings] = section_blocks(DOC, MOVE, "json")
    private_dir(user / ".claude")
    (user / ".claude" / "settings.json").write_text(settings)
    env = user_environment(user)
    install = "hookbus import claude-code .claude/settings.json --install-bridge"
    assert f"`{install}`" in section(DOC, MOVE)
    done = bash(install, env, cwd=user)
    assert done.returncode == 0, done.stderr
    [quoted] = section_blocks(DOC, MOVE, "text")
    lines = done.stdout.splitlines()
    for line in quoted.splitlines():
        assert line.replace("/home/you", str(user)) in lines, done.stdout
    # Before the lines about the bridge, as the page says.
    assert lines.index(quoted.splitlines()[-1]) < next(i for i, line in enumerate(lines) if line.startswith("PreToolUse: add"))
    assert (user / ".vix" / "hooks" / "pretooluse-bash-no-rm-sh" / "hook.json").exists()
    installed = (user / ".claude" / "settings.json").read_text()
    [block] = section_blocks(DOC, UNDO, "sh")
    dry, real = logical_lines(block)
    planned = bash(dry, env, cwd=user)
    assert planned.returncode == 0, planned.stderr
    assert "dry run: nothing was written" in planned.stdout
    assert (user / ".claude" / "settings.json").read_text() == installed
    undone = bash(real, env, cwd=user)
    assert undone.returncode == 0, undone.stderr
    assert json.loads((user / ".claude" / "settings.json").read_text()) == json.loads(settings)
    assert not (user / ".vix" / "hooks" / "pretooluse-bash-no-rm-sh").exists()
