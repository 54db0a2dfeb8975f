"""The event table and matchers: which field each event matches on, who may block."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from hookbus import EVENTS, HookBus
from hookbus.durations import format_duration, parse_duration
from hookbus.errors import SpecError
from hookbus.matching import compile_matcher

SPEC_TABLE = [
    ("PreToolUse", "tool_name", True),
    ("PostToolUse", "tool_name", False),
    ("UserPromptSubmit", None, True),
    ("PermissionRequest", "tool_name", True),
    ("ThreadStart", "source", False),
    ("Stop", None, False),
    ("PreCompact", "trigger", False),
    ("PostCompact", "trigger", False),
    ("SubagentStart", "agent_type", False),
    ("SubagentStop", "agent_type", False),
]


def test_the_ten_events_of_the_spec() -> None:
    assert [(e.name, e.matcher_field, e.can_block) for e in EVENTS.values()] == SPEC_TABLE


@pytest.mark.parametrize(
    ("matcher", "value", "matches"),
    [
        ("", "anything", True),
        ("*", "anything", True),
        ("bash", "bash", True),
        ("bash", "Bash", False),
        ("bash", "bash2", False),
        ("write_file|edit_file", "edit_file", True),
        ("write_file|edit_file", "write_file_x", False),
        ("write_file|edit_file", "x_write_file", False),
        ("mcp__.*", "mcp__github__create_issue", True),
        ("mcp__.*", "xmcp__a", False),
        ("(read|write)_file", "write_file", True),
        ("(read|write)_file", "write_files", False),
        ("a|b.*", "bcd", True),
        ("a|b.*", "ab", False),
    ],
)
def test_matcher_is_anchored_to_the_whole_field(matcher: str, value: str, matches: bool) -> None:
    assert compile_matcher(matcher).matches(value) is matches


def test_literal_alternations_need_no_regex() -> None:
    compiled = compile_matcher("write_file|edit_file")
    assert compiled.names == frozenset({"write_file", "edit_file"})
    assert compiled.pattern is None
    assert compile_matcher("mcp__.*").pattern is not None


def test_invalid_regex() -> None:
    with pytest.raises(SpecError, match="invalid matcher regex"):
        compile_matcher("(")


@pytest.mark.parametrize(("event", "field", "_"), [row for row in SPEC_TABLE if row[1]])
def test_each_event_matches_on_its_field(
    event: str,
    field: str,
    _: bool,
    write_hook: Callable[..., Path],
    make_bus: Callable[..., HookBus],
) -> None:
    write_hook("h", event=event, matcher="wanted|also", mode="sync", command="echo hit")
    bus = make_bus()
    assert bus.emit(event, {field: "wanted"}).context == "hit"
    assert bus.emit(event, {field: "other"}).behavior == "allow"
    assert bus.emit(event, {}).behavior == "allow"  # the field is missing: "" matches nothing


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop"])
def test_events_without_matcher_field_fire_every_hook(
    event: str, write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook("h", event=event, matcher="*", mode="sync", command="echo hit")
    assert make_bus().emit(event, {"tool_name": "x"}).context == "hit"


def test_regex_and_literal_hooks_combine_in_id_order(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook("c-all", matcher="", mode="sync", command="echo c")
    write_hook("a-regex", matcher="write_.*", mode="sync", command="echo a")
    write_hook("b-literal", matcher="write_file", mode="sync", command="echo b")
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "write_file"}).context == "a\n\nb\n\nc"
    assert bus.emit("PreToolUse", {"tool_name": "write_x"}).context == "a\n\nc"
    assert bus.emit("PreToolUse", {"tool_name": "read"}).context == "c"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("5s", 5), ("10m", 600), ("1h30m", 5400), ("1.5s", 1.5), ("250us", 0.00025)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["5", "5 s", "s", "-1s", "1d", "", "0s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.0004, 0.0124, 1.5, 125, 5400)] == [
        "400µs",
        "12.4ms",
        "1.5s",
        "2m5s",
        "1h30m0s",
    ]


def test_regex_results_are_remembered_but_bounded(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    from hookbus.registry import MEMO_LIMIT

    write_hook("r", matcher="mcp__.*", mode="sync", command="echo r")
    bus = make_bus()
    index = bus.snapshot.index["PreToolUse"]
    for number in range(MEMO_LIMIT + 10):
        bus.emit("PreToolUse", {"tool_name": f"tool{number}"})
    assert len(index._memo) <= MEMO_LIMIT
    assert bus.emit("PreToolUse", {"tool_name": "mcp__x"}).context == "r"
    assert bus.emit("PreToolUse", {"tool_name": "mcp__x"}).context == "r"  # remembered


def test_backreferences_are_refused_and_the_other_regexes_combine(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    """Regexes are combined into one alternation for speed. A backreference, which an
    alternation would renumber, cannot be among them: RE2 has none, and it is refused."""
    write_hook("a", matcher=r"(x)\1", mode="sync", command="echo a")
    write_hook("b", matcher=r"(y+)z", mode="sync", command="echo b")
    bus = make_bus()
    assert [str(problem) for problem in bus.problems] == [
        "hooks/a/hook.json: invalid matcher regex '(x)\\\\1': backreferences are not supported "
        "(hookbus matches with RE2, which runs in linear time): rewrite it without one "
        "@ $.trigger.matcher"
    ]
    assert bus.snapshot.index["PreToolUse"].any_regex is not None
    assert bus.emit("PreToolUse", {"tool_name": "xx"}).behavior == "allow"
    assert bus.emit("PreToolUse", {"tool_name": "yyz"}).context == "b"
    assert bus.emit("PreToolUse", {"tool_name": "xy"}).behavior == "allow"
