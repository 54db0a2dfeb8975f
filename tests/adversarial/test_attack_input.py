"""Promise 3 against hostile files: a spec that is cheap to write must be cheap to refuse.

Hooks are written by users and, as the spec invites, by the agent itself: a model can be
talked into writing a hook.yaml. A YAML "billion laughs" (aliases of aliases) of a few
hundred bytes once took 47 s to load, nine times longer per level.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable

import pytest

from attackkit import attack
from hookbus import HookBus

Maker = Callable[..., HookBus]


def laughs(levels: int) -> str:
    """A hook.yaml whose matcher is an alias bomb of ``levels`` levels (9 per level)."""
    # The escape makes every string of the document get looked at, as a loader must.
    lines = ["trigger:", "  event: Stop", 'command: "tru\\u0065"', "x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels + 1):
        previous = f"*x{level - 1}"
        lines.append(f"x{level}: &x{level} [{', '.join([previous] * 9)}]")
    return "\n".join(lines) + "\n"


def load_within(home: Path, seconds: float) -> HookBus:
    """Load ``home`` on a thread, failing if it takes longer than ``seconds``."""
    built: list[HookBus] = []
    thread = threading.Thread(target=lambda: built.append(HookBus(home)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"loading took longer than {seconds}s"
    return built[0]


@pytest.mark.timeout(60)
def test_a_yaml_alias_bomb_is_refused_at_once(home: Path) -> None:
    with attack(3, "hook.yaml: an alias bomb of under 600 bytes (9 levels)"):
        text = laughs(9)
        assert len(text) < 600
        (home / "hooks" / "bomb").mkdir()
        (home / "hooks" / "bomb" / "hook.yaml").write_text(text)
        (home / "hooks" / "fine").mkdir()
        (home / "hooks" / "fine" / "hook.json").write_text(json.dumps({"trigger": {"event": "Stop"}, "command": "true"}))
        bus = load_within(home, 5)
        try:
            assert list(bus.snapshot.hooks) == ["fine"]
            [problem] = bus.problems
            assert problem.path == "hooks/bomb/hook.yaml"
            assert "YAML an anchor (&x0) at line 4: anchors and aliases are not allowed" in problem.message
        finally:
            bus.close()


@pytest.mark.parametrize(
    "text",
    [
        'trigger: {event: Stop}\ncommand: &c "true"\nname: *c\n',
        "base: &b {event: Stop}\ntrigger: *b\ncommand: 'true'\n",
        "base: &b {event: Stop}\ntrigger:\n  <<: *b\ncommand: 'true'\n",
    ],
    ids=["scalar alias", "mapping alias", "merge key"],
)
def test_any_anchor_or_alias_is_refused_with_a_clear_message(text: str, home: Path) -> None:
    with attack(3, "hook.yaml with an anchor or alias"):
        (home / "hooks" / "h").mkdir()
        (home / "hooks" / "h" / "hook.yaml").write_text(text)
        with HookBus(home) as bus:
            assert bus.snapshot.hooks == {}
            [problem] = bus.problems
            assert "anchors and aliases are not allowed" in problem.message


@pytest.mark.timeout(60)
def test_a_workflow_yaml_alias_bomb_is_refused_at_once(home: Path) -> None:
    with attack(3, "config/workflow.yaml: alias bomb"):
        (home / "config").mkdir()
        bomb = "x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
            f"x{level}: &x{level} [{', '.join([f'*x{level - 1}'] * 9)}]\n" for level in range(1, 10)
        )
        (home / "config" / "workflow.yaml").write_text(bomb)
        (home / "hooks" / "w").mkdir()
        (home / "hooks" / "w" / "hook.json").write_text(
            json.dumps({"trigger": {"event": "Stop"}, "workflow_id": "x0"})
        )
        bus = load_within(home, 5)
        try:
            assert bus.snapshot.hooks == {}
            assert any("anchors and aliases are not allowed" in str(p) for p in bus.problems)
        finally:
            bus.close()
