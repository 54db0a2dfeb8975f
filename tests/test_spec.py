"""hook.json / hook.yaml: defaults, and every mistake skipped with a path-qualified message."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from hookbus import HookBus

GOOD: dict[str, Any] = {
    "id": "x",
    "trigger": {"event": "PreToolUse", "matcher": "bash"},
    "mode": "sync",
    "blocking": True,
    "command": "exit 0",
}


def with_changes(**changes: Any) -> dict[str, Any]:
    spec = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        if value is ...:
            spec.pop(key, None)
        else:
            spec[key] = value
    return spec


# (case, spec or raw text, expected message fragment, expected location)
MISTAKES: list[tuple[str, Any, str, str | None]] = [
    (
        "more than one action",
        with_changes(prompt="check it"),
        "more than one action (command, prompt): a hook runs exactly one",
        "$",
    ),
    (
        "workflow_id with workflow",
        with_changes(command=..., workflow_id="a", workflow={"steps": []}),
        "workflow_id and workflow are mutually exclusive",
        "$.workflow",
    ),
    ("no action", with_changes(command=...), "no action: set exactly one of command", "$"),
    (
        "blocking without sync",
        with_changes(mode="async"),
        'blocking needs "mode": "sync"',
        "$.blocking",
    ),
    (
        "blocking on an event that cannot block",
        with_changes(trigger={"event": "PostToolUse"}),
        "PostToolUse cannot block",
        "$.blocking",
    ),
    (
        "unknown event",
        with_changes(trigger={"event": "PreToolUse2"}),
        "unknown event 'PreToolUse2' (did you mean 'PreToolUse'?)",
        "$.trigger.event",
    ),
    (
        "invalid matcher regex",
        with_changes(trigger={"event": "PreToolUse", "matcher": "write_(file"}),
        "invalid matcher regex 'write_(file'",
        "$.trigger.matcher",
    ),
    (
        "matcher on an event without a matcher field",
        with_changes(blocking=False, trigger={"event": "Stop", "matcher": "x"}),
        "Stop has no matcher field",
        "$.trigger.matcher",
    ),
    (
        "unknown field",
        with_changes(blockng=True),
        "unknown field 'blockng' (did you mean 'blocking'?)",
        "$",
    ),
    (
        "unknown trigger field",
        with_changes(trigger={"event": "PreToolUse", "matchr": "x"}),
        "unknown field 'matchr' (did you mean 'matcher'?)",
        "$.trigger",
    ),
    ("wrong type: bool", with_changes(enabled="false"), "expected true or false, got a string", "$.enabled"),
    ("wrong type: string", with_changes(timeout=5), "expected a string, got an integer", "$.timeout"),
    ("wrong type: trigger", with_changes(trigger="PreToolUse"), "expected an object, got a string", "$.trigger"),
    ("wrong type: command", with_changes(command=["ls"]), "expected a string (a bash command)", "$.command"),
    ("empty command", with_changes(command="  "), "the command is empty", "$.command"),
    ("missing trigger", with_changes(trigger=...), "required field missing", "$.trigger"),
    ("missing event", with_changes(trigger={"matcher": "x"}), "required field missing", "$.trigger.event"),
    ("bad mode", with_changes(mode="blocking"), 'mode must be "sync" or "async"', "$.mode"),
    ("bad timeout", with_changes(timeout="5 seconds"), "invalid duration '5 seconds'", "$.timeout"),
    ("zero timeout", with_changes(timeout="0s"), "must be longer than zero", "$.timeout"),
    ("id differs from directory", with_changes(id="y"), "id 'y' differs from its directory name 'x'", "$.id"),
    ("top level not an object", "[1, 2]", "expected an object at the top level, got an array", "$"),
    ("invalid JSON", '{"id": "x",', "invalid JSON at line 1, column 12", None),
    ("invalid UTF-8", b'{"id": "\xff"}', "not valid UTF-8", None),
    ("duplicate key", '{"id": "x", "id": "x"}', "duplicate key 'id'", None),
    ("NaN", '{"id": "x", "timeout": NaN}', "NaN is not valid JSON", None),
    ("empty file", "", "invalid JSON at line 1, column 1", None),
    ("over the size cap", " " * (256 * 1024 + 1), "over the 256 KiB limit", None),
    (
        "runner not installed",
        with_changes(command=..., http={"url": "http://127.0.0.1:9/"}),
        "no runner for 'http': it is provided by the plugin 'http' (pip install hookbus-http)",
        "$.http",
    ),
    (
        "workflow_id naming no workflow",
        with_changes(command=..., workflow_id="fast-veto"),
        "names no workflow in config/workflow.json (which does not exist); defined: none",
        "$.workflow_id",
    ),
    (
        "prompt not a string",
        with_changes(command=..., prompt=["check"]),
        "expected a string (the prompt), got an array",
        "$.prompt",
    ),
    (
        "inline workflow with a bad step",
        with_changes(command=..., workflow={"steps": [{"bsh": "x"}]}),
        "unknown step kind 'bsh'",
        "$.workflow.steps[0]",
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "message", "location"), MISTAKES, ids=[row[0] for row in MISTAKES]
)
def test_each_mistake_skips_only_that_hook(
    case: str,
    spec: Any,
    message: str,
    location: str | None,
    write_hook: Callable[..., Path],
    make_bus: Callable[..., HookBus],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKBUS_DISABLE_PLUGINS", "http")  # as if hookbus-http were not installed
    raw = spec if isinstance(spec, (str, bytes)) else json.dumps(spec)
    write_hook("x", raw=raw)
    write_hook("good", event="PreToolUse", mode="sync", command="echo fine")
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    matching = [p for p in bus.problems if message in p.message]
    assert matching, f"no problem says {message!r}: {[str(p) for p in bus.problems]}"
    problem = matching[0]
    assert problem.path == "hooks/x/hook.json"
    assert problem.hook_id == "x"
    assert problem.location == location
    assert str(problem).startswith("hooks/x/hook.json: ")
    # Every other hook still loads and fires.
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).context == "fine"


def test_all_problems_of_a_file_are_reported(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    """Shape problems (unknown fields, types) come together; meaning is checked once the
    shape is right, so a type error never produces a misleading follow-on message."""
    write_hook("x", raw=json.dumps(with_changes(blockng=1, prompt="p", enabled="no")))
    write_hook("y", raw=json.dumps(with_changes(mode="async", timeout="1x", id="z")))
    problems = {str(p) for p in make_bus().problems}
    assert problems == {
        "hooks/x/hook.json: unknown field 'blockng' (did you mean 'blocking'?) @ $",
        "hooks/x/hook.json: more than one action (command, prompt): a hook runs exactly one @ $",
        "hooks/x/hook.json: expected true or false, got a string @ $.enabled",
        'hooks/y/hook.json: blocking needs "mode": "sync" @ $.blocking',
        "hooks/y/hook.json: invalid duration '1x': use a number and a unit, like 500ms, 5s, "
        "10m or 1h30m @ $.timeout",
        "hooks/y/hook.json: id 'z' differs from its directory name 'y': rename one so they "
        "match @ $.id",
    }


NUMBER_TIMEOUTS: list[tuple[str, str, str]] = [
    # (how it is written in JSON, in YAML, what it is answered with)
    ("60", "60", 'expected a string, got an integer (did you mean "60s"?)'),
    ("60.5", "60.5", 'expected a string, got a number (did you mean "60.5s"?)'),
    ("0.25", "0.25", 'expected a string, got a number (did you mean "0.25s"?)'),
    ("1e-7", "1.0e-7", 'expected a string, got a number (did you mean "0.0000001s"?)'),
    ("0", "0", 'expected a duration string like "5s" or "10m", got an integer'),
    ("-5", "-5", 'expected a duration string like "5s" or "10m", got an integer'),
    ("-0.5", "-0.5", 'expected a duration string like "5s" or "10m", got a number'),
    ("1e300", "1.0e+300", 'expected a duration string like "5s" or "10m", got a number'),
]


@pytest.mark.parametrize("kind", ["json", "yaml"])
@pytest.mark.parametrize(("as_json", "as_yaml", "message"), NUMBER_TIMEOUTS, ids=[row[0] for row in NUMBER_TIMEOUTS])
def test_a_timeout_written_as_a_number_is_answered_with_the_string_meant(
    write_hook: Callable[..., Path],
    make_bus: Callable[..., HookBus],
    kind: str,
    as_json: str,
    as_yaml: str,
    message: str,
) -> None:
    """Was: `"timeout": 60` only said "expected a string, got an integer", leaving the
    user to guess that a unit was missing. Zero and negatives are no duration at all, so
    they get no guess."""
    if kind == "json":
        write_hook("x", raw='{"trigger": {"event": "Stop"}, "command": "true", "timeout": %s}' % as_json)
    else:
        write_hook("x", name="hook.yaml", raw=f"trigger: {{event: Stop}}\ncommand: 'true'\ntimeout: {as_yaml}\n")
    assert [str(p) for p in make_bus().problems] == [f"hooks/x/hook.{kind}: {message} @ $.timeout"]


def test_a_number_timeout_is_reported_beside_the_other_problems(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook("x", raw=json.dumps(with_changes(timeout=60, enabled="no")))
    assert {str(p) for p in make_bus().problems} == {
        'hooks/x/hook.json: expected a string, got an integer (did you mean "60s"?) @ $.timeout',
        "hooks/x/hook.json: expected true or false, got a string @ $.enabled",
    }


def test_defaults(write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]) -> None:
    write_hook("a", raw=json.dumps({"trigger": {"event": "Stop"}, "command": "true"}))
    write_hook("s", raw=json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "command": "true"}))
    bus = make_bus()
    a, s = bus.snapshot.hooks["a"], bus.snapshot.hooks["s"]
    assert a.spec.id == "a"  # the id defaults to the directory name
    assert (a.spec.enabled, a.spec.mode, a.spec.blocking) == (True, "async", False)
    assert (a.spec.trigger.matcher, a.spec.cwd, a.spec.created_by) == ("", "", "")
    assert (a.spec.timeout, a.timeout) == ("10m", 600.0)
    assert (s.spec.timeout, s.timeout) == ("5s", 5.0)


def test_spec_example_from_the_docs_loads(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook(
        "block-env-writes",
        raw=json.dumps(
            {
                "id": "block-env-writes",
                "name": "Block .env writes",
                "enabled": True,
                "trigger": {"event": "PreToolUse", "matcher": "write_file|edit_file"},
                "mode": "sync",
                "blocking": True,
                "command": "$HOME/.vix/hooks/block-env-writes/script.sh",
                "cwd": "",
                "timeout": "5s",
                "created_by": "agent:<your-thread-id>",
            }
        ),
    )
    bus = make_bus()
    assert bus.problems == ()
    hook = bus.snapshot.hooks["block-env-writes"]
    assert hook.spec.name == "Block .env writes"
    assert hook.spec.created_by == "agent:<your-thread-id>"
    assert hook.matcher.names == frozenset({"write_file", "edit_file"})


def test_yaml_spec(write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]) -> None:
    write_hook(
        "y",
        name="hook.yaml",
        raw="trigger:\n  event: Stop\nmode: sync\ncommand: echo from-yaml\n",
    )
    write_hook("bad", name="hook.yaml", raw="trigger: [unclosed\n")
    write_hook("dup", name="hook.yaml", raw="trigger: {event: Stop}\ncommand: a\ncommand: b\n")
    bus = make_bus()
    assert bus.emit("Stop", {}).context == "from-yaml"
    problems = {p.hook_id: str(p) for p in bus.problems}
    assert problems["bad"].startswith("hooks/bad/hook.yaml: invalid YAML at line")
    assert "duplicate key 'command' at line 3" in problems["dup"]


def test_both_json_and_yaml_is_refused(
    write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook("both", event="Stop", command="true")
    write_hook("both", name="hook.yaml", raw="trigger: {event: Stop}\ncommand: 'true'\n")
    bus = make_bus()
    assert "both" not in bus.snapshot.hooks
    assert [str(p) for p in bus.problems] == [
        "hooks/both: both hook.json and hook.yaml exist: keep one"
    ]


def test_symlinked_spec_is_refused(
    home: Path, tmp_path: Path, write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"trigger": {"event": "Stop"}, "command": "true"}))
    (home / "hooks" / "link").mkdir()
    os.symlink(outside, home / "hooks" / "link" / "hook.json")
    bus = make_bus()
    assert "link" not in bus.snapshot.hooks
    assert "is a symbolic link" in str(bus.problems[0])


def test_ignores_hidden_dirs_stray_files_and_dirs_without_spec(
    home: Path, write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook(".hidden", event="Stop", command="true")
    (home / "hooks" / "README.md").write_text("notes")
    (home / "hooks" / "empty").mkdir()
    bus = make_bus()
    assert dict(bus.snapshot.hooks) == {}
    assert bus.problems == ()


def test_disabled_hook_is_loaded_but_never_fires(
    home: Path, write_hook: Callable[..., Path], make_bus: Callable[..., HookBus]
) -> None:
    write_hook("off", event="Stop", mode="sync", enabled=False, command="echo should-not")
    bus = make_bus()
    assert "off" in bus.snapshot.hooks
    assert bus.emit("Stop", {}).behavior == "allow"
    bus.close()
    assert not (home / "hooks" / "off" / "state.json").exists()
