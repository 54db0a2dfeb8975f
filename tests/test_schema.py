"""`hookbus schema`: the JSON Schema of hook.json, and its published copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "contrib" / "schema" / "hook.schema.json"

SPEC_EXAMPLE = {
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


def schema_from_cli(**env: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "schema"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=True,
    )
    schema: dict[str, Any] = json.loads(result.stdout)
    return schema


@pytest.fixture(scope="module")
def published() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(PUBLISHED.read_text())
    return schema


def test_the_published_copy_is_what_the_built_in_runners_generate(published: dict[str, Any]) -> None:
    """contrib/schema/hook.schema.json is regenerated with:
    HOOKBUS_LOAD_PLUGINS=workflow,prompt hookbus schema > contrib/schema/hook.schema.json"""
    assert schema_from_cli(HOOKBUS_LOAD_PLUGINS="workflow,prompt") == published


def test_it_is_a_valid_draft_2020_12_schema(published: dict[str, Any]) -> None:
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(published)


def errors_of(schema: dict[str, Any], document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [error.message for error in validator.iter_errors(document)]


def test_the_spec_example_validates(published: dict[str, Any]) -> None:
    assert errors_of(published, SPEC_EXAMPLE) == []


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"blockng": True}, "Additional properties are not allowed ('blockng' was unexpected)"),
        ({"mode": "async"}, "'sync' was expected"),
        ({"trigger": {"event": "PostToolUse"}}, "is not one of"),
        ({"trigger": {"event": "PreToolUse2"}}, "is not one of"),
        ({"timeout": "5 seconds"}, "does not match"),
        ({"prompt": "and also this"}, "is valid under each of"),
        ({"enabled": "false"}, "is not of type 'boolean'"),
    ],
    ids=["typo", "blocking-async", "blocking-non-blocking-event", "unknown-event", "timeout", "two-actions", "type"],
)
def test_mistakes_do_not_validate(published: dict[str, Any], change: dict[str, Any], fragment: str) -> None:
    document = {**SPEC_EXAMPLE, **change}
    errors = errors_of(published, document)
    assert any(fragment in error for error in errors), errors


def test_no_action_does_not_validate(published: dict[str, Any]) -> None:
    document = {k: v for k, v in SPEC_EXAMPLE.items() if k != "command"}
    assert errors_of(published, document)


@pytest.mark.parametrize(
    "action",
    [
        {"workflow_id": "fast-veto"},
        {"workflow": {"steps": [{"bash": "exit 0", "name": "veto", "timeout": "1s"}, {"prompt": "ok?"}]}},
        {"prompt": "Is this safe?"},
    ],
    ids=["workflow_id", "workflow", "prompt"],
)
def test_every_built_in_action_validates(published: dict[str, Any], action: dict[str, Any]) -> None:
    document = {k: v for k, v in SPEC_EXAMPLE.items() if k != "command"} | action
    assert errors_of(published, document) == []


def test_a_bad_inline_step_does_not_validate(published: dict[str, Any]) -> None:
    document = {k: v for k, v in SPEC_EXAMPLE.items() if k != "command"}
    document["workflow"] = {"steps": [{"bsh": "x"}]}
    assert errors_of(published, document)


def test_installed_runner_plugins_add_their_keys() -> None:
    """With every installed plugin (contrib ones included when installed), each registered
    runner key is a property: an editor sees the same keys the bus accepts."""
    from hookbus.plugins import build_plugin_manager, build_runner_table

    manager, _ = build_plugin_manager()
    keys = set(build_runner_table(manager).keys())
    schema = schema_from_cli()
    assert keys <= set(schema["properties"])
    assert [{"required": [key]} for key in sorted(keys)] == schema["oneOf"]


@pytest.mark.parametrize("duration", ["5s", ".5s", "1.5h", "1h30m", "250ms", "10us", "3µs"])
def test_every_duration_the_loader_takes_the_schema_takes(published: dict[str, Any], duration: str) -> None:
    from hookbus.durations import parse_duration

    parse_duration(duration)  # the loader takes it
    assert errors_of(published, {**SPEC_EXAMPLE, "timeout": duration}) == []


@pytest.mark.parametrize("duration", ["5", "5 s", "s", "٥s", "5d"])
def test_every_duration_the_loader_refuses_the_schema_refuses(published: dict[str, Any], duration: str) -> None:
    from hookbus.durations import parse_duration

    with pytest.raises(ValueError):
        parse_duration(duration)
    assert errors_of(published, {**SPEC_EXAMPLE, "timeout": duration}) != []
