"""Several hooks on one event: deny > modify > context > allow, context from every hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from conftest import read_log
from hookbus import HookBus
from hookbus.decision import Decision, HookResult, Outcome
from hookbus_resolver import resolve

SAYS = {
    "allow": "exit 0",
    "silent": "true",
    "context": "echo 'note from {id}'",
    "deny": "echo 'no by {id}' >&2; exit 2",
    "modify": """echo '{{"behavior": "modify", "input": {{"by": "{id}"}}}}'""",
    "broken": "exit 1",
}

# (what hooks a, b, c, ... say) -> (behavior, reason, context, input)
PRECEDENCE = [
    (("allow", "allow"), ("allow", None, None, None)),
    (("allow", "context"), ("context", None, "note from b", None)),
    (("context", "context"), ("context", None, "note from a\n\nnote from b", None)),
    (("context", "modify"), ("modify", None, "note from a", {"by": "b"})),
    (("modify", "deny"), ("deny", "hook 'b' denied: no by b", None, None)),
    (("broken", "deny"), ("deny", "hook 'b' denied: no by b", None, None)),
    (("context", "deny", "allow"), ("deny", "hook 'b' denied: no by b", "note from a", None)),
    (("modify", "modify", "context"), ("modify", None, "note from c", {"by": "a"})),
    (
        ("deny", "context", "deny", "modify"),
        ("deny", "hook 'a' denied: no by a\nhook 'c' denied: no by c", "note from b", None),
    ),
    (
        ("context", "broken", "modify", "context", "allow"),
        ("modify", None, "note from a\n\nnote from d", {"by": "c"}),
    ),
    (("silent", "broken", "allow", "silent", "allow"), ("allow", None, None, None)),
]


@pytest.mark.parametrize(("says", "expected"), PRECEDENCE, ids=["-".join(p[0]) for p in PRECEDENCE])
def test_precedence(
    says: tuple[str, ...],
    expected: tuple[str, str | None, str | None, dict[str, str] | None],
    write_hook: Callable[..., Path],
    make_bus: Callable[..., HookBus],
) -> None:
    # Written in reverse so that directory order is not what makes the result.
    for hook_id, behavior in reversed(list(zip("abcde", says))):
        write_hook(hook_id, mode="sync", blocking=True, command=SAYS[behavior].format(id=hook_id))
    decision = make_bus().emit("PreToolUse", {"tool_name": "x"})
    assert (decision.behavior, decision.reason, decision.context, decision.input) == expected


def test_superseded_modifications_are_visible_in_the_log(
    home: Path, write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    for hook_id in ("m1", "m2", "m3"):
        write_hook(hook_id, mode="sync", blocking=True, command=SAYS["modify"].format(id=hook_id))
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "x"}).input == {"by": "m1"}
    bus.close()
    by_hook = {entry["hook_id"]: entry for entry in read_log(home)}
    assert "note" not in by_hook["m1"]
    for loser in ("m2", "m3"):
        assert by_hook[loser]["note"] == "superseded by the modify of hook 'm1'"
        assert by_hook[loser]["decision"] == {"behavior": "modify", "input": {"by": loser}}


def test_modify_superseded_by_deny_is_noted(
    home: Path, write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook("a", mode="sync", blocking=True, command=SAYS["modify"].format(id="a"))
    write_hook("b", mode="sync", blocking=True, command=SAYS["deny"].format(id="b"))
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "x"})
    assert (decision.behavior, decision.denied_by) == ("deny", ("b",))
    bus.close()
    note = {entry["hook_id"]: entry.get("note") for entry in read_log(home)}["a"]
    assert note == "superseded by deny"


def test_resolve_unit() -> None:
    results = [
        HookResult("z", Outcome("context", context="last")),
        HookResult("a", Outcome("deny")),
        HookResult("m", Outcome("modify", input={"k": 1})),
    ]
    assert resolve(results) == Decision(
        "deny", reason="hook 'a' denied", context="last", denied_by=("a",)
    )
    assert resolve([]) == Decision()


def test_a_stricter_team_resolver_goes_first(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    """The built-in resolver is trylast: a policy plugin's answer wins."""
    from hookbus import hookimpl

    class ContextIsDeny:
        @hookimpl
        def hookbus_resolve(self, event: str, results: list[HookResult]) -> Decision | None:
            if any(r.outcome.behavior == "context" for r in results):
                return Decision("deny", reason="policy: no context allowed")
            return None

    write_hook("ctx", mode="sync", command="echo hi")
    write_hook("quiet", event="Stop", mode="sync", command="true")
    bus = make_bus(plugins=[ContextIsDeny()])
    assert bus.emit("PreToolUse", {"tool_name": "x"}).reason == "policy: no context allowed"
    assert bus.emit("Stop", {}).behavior == "allow"  # None: falls through to the built-in
    assert json.dumps(bus.emit("Stop", {}).as_dict()) == '{"behavior": "allow"}'
