"""The JSON Schema (draft 2020-12) of hook.json, for editors: ``hookbus schema``.

It describes the hook fields, the ten events, and one property per action key that an
installed runner registered, with that runner's options (``Runner.schema(key)``, which
``schema_of`` can derive from an attrs options class).
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, Literal, Union

import attrs

from hookbus.durations import DURATION_SYNTAX
from hookbus.events import BLOCKING_EVENTS, EVENT_NAMES
from hookbus.runners import RunnerTable

DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: The very rule parse_duration applies, so an editor and the loader never disagree.
DURATION_PATTERN = f"^{DURATION_SYNTAX.pattern}$"
DURATION = {
    "type": "string",
    "pattern": DURATION_PATTERN,
    "description": "A Go-style duration: 500ms, 5s, 10m, 1h30m.",
}


def schema_of(annotation: Any) -> dict[str, Any]:
    """A JSON Schema for a type as the core's converter structures it: attrs classes
    (unknown fields refused), str, bool, int, float, Literal, optional, lists, str-keyed dicts."""
    if attrs.has(annotation):
        hints = typing.get_type_hints(annotation)
        properties = {}
        required = []
        for field in attrs.fields(annotation):
            properties[field.name] = schema_of(hints[field.name])
            if field.default is attrs.NOTHING:
                required.append(field.name)
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        return schema
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is Literal:
        return {"enum": list(arguments)}
    if origin in (Union, types.UnionType):
        options = [schema_of(argument) for argument in arguments if argument is not type(None)]
        if type(None) in arguments:
            options.append({"type": "null"})
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin in (list, tuple, collections.abc.Sequence):
        return {"type": "array", "items": schema_of(arguments[0]) if arguments else {}}
    if origin in (dict, collections.abc.Mapping):
        return {"type": "object", "additionalProperties": schema_of(arguments[1])}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if annotation in simple:
        return {"type": simple[annotation]}
    return {}


def hook_schema(runners: RunnerTable) -> dict[str, Any]:
    """The schema of hook.json with the action keys of ``runners``."""
    actions = {}
    for entry in sorted(runners.entries(), key=lambda entry: entry.key):
        describe = getattr(entry.runner, "schema", None)
        action = dict(describe(entry.key)) if callable(describe) else {}
        action.setdefault("description", f"An action run by the plugin {entry.plugin!r}.")
        actions[entry.key] = action
    exactly_one_action = [{"required": [key]} for key in actions]
    schema: dict[str, Any] = {
        "$schema": DRAFT,
        "title": "hookbus hook spec (hooks/<id>/hook.json)",
        "type": "object",
        "properties": {
            # A hook.json may name this schema, for editors; the bus reads nothing from it.
            "$schema": {
                "type": "string",
                "description": "Where an editor finds this schema, relative to the file: "
                '"../../hook.schema.json" after `hookbus schema > HOME/hook.schema.json`. '
                "hookbus reads nothing from it, and checks only that it is a string.",
            },
            "id": {"type": "string", "description": "Must equal the hook's directory name."},
            "name": {"type": "string"},
            "enabled": {"type": "boolean", "default": True},
            "trigger": {
                "type": "object",
                "properties": {
                    "event": {"enum": list(EVENT_NAMES)},
                    "matcher": {
                        "type": "string",
                        "default": "",
                        "description": 'An RE2 regex (Python-like syntax, linear time) anchored to the whole field; "" or "*" match all.',
                    },
                },
                "required": ["event"],
                "additionalProperties": False,
            },
            "mode": {"enum": ["sync", "async"], "default": "async"},
            "blocking": {"type": "boolean", "default": False},
            "cwd": {"type": "string", "default": ""},
            "timeout": {**DURATION, "description": DURATION["description"] + " Default 5s sync, 10m async."},
            "created_by": {"type": "string"},
            "on_error": {
                "enum": ["allow", "deny"],
                "default": "allow",
                "description": 'What a blocking hook that fails (times out, crashes, is killed, or '
                'answers with something unparseable) decides: "allow" (fail open, the default) or '
                '"deny" (fail closed). "deny" needs "blocking": true.',
            },
            "dialect": {
                "enum": ["claude-code", "codex"],
                "description": "Whose conventions the hook follows. \"claude-code\": it gets Claude "
                "Code's envelope (tool names such as Bash and Write, file_path, session_id), "
                "CLAUDE_PROJECT_DIR and friends, its matcher is tried against Claude's tool names, "
                "and its output is read as Claude Code reads it. \"codex\": the same with Codex "
                "CLI's names (Bash for bash) and its stricter reading of output. Leave it out for "
                "hookbus's own.",
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Variables added to the environment of the hook's process.",
            },
            "shadow": {
                "type": "boolean",
                "default": False,
                "description": "Run and record the hook, but keep its decision out of the merge (and never wait "
                "for it): what it would have decided is recorded, to compare before it enforces. "
                "Needs \"mode\": \"sync\". Promote it by removing the flag.",
            },
            **actions,
        },
        "required": ["trigger"],
        "additionalProperties": False,
        "allOf": [
            {
                "if": {"properties": {"blocking": {"const": True}}, "required": ["blocking"]},
                "then": {
                    "properties": {
                        "mode": {"const": "sync"},
                        "trigger": {"properties": {"event": {"enum": list(BLOCKING_EVENTS)}}},
                    },
                    "required": ["mode"],
                },
            },
            {
                "if": {"properties": {"on_error": {"const": "deny"}}, "required": ["on_error"]},
                "then": {"properties": {"blocking": {"const": True}}, "required": ["blocking"]},
            },
            {
                "if": {"properties": {"shadow": {"const": True}}, "required": ["shadow"]},
                "then": {"properties": {"mode": {"const": "sync"}}, "required": ["mode"]},
            },
        ],
    }
    if exactly_one_action:
        schema["oneOf"] = exactly_one_action
    return schema
