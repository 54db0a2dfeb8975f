"""The hook spec (hook.json / hook.yaml): its model, its defaults, and every check it gets."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Literal, Mapping

import attrs

from hookbus.converter import structure
from hookbus.jsontext import json_type_name
from hookbus.durations import not_a_duration_message, parse_duration
from hookbus.errors import SpecError, SpecErrors, check_runnable, did_you_mean, reroot, shorten
from hookbus.events import BLOCKING_EVENTS, EVENT_NAMES, EVENTS
from hookbus.dialects.claude_names import claude_matcher, tool_names
from hookbus.matching import Matcher, compile_matcher, compile_regex, encode


Mode = Literal["sync", "async"]
MODES: tuple[str, ...] = ("sync", "async")
OnError = Literal["allow", "deny"]
ON_ERROR: tuple[str, ...] = ("allow", "deny")
#: What a hook's ``dialect`` may be: whose conventions its envelope, environment and
#: output follow (absent: hookbus's own).
DIALECTS: tuple[str, ...] = ("claude-code", "codex")
DEFAULT_SYNC_TIMEOUT = "5s"
DEFAULT_ASYNC_TIMEOUT = "10m"

#: Where an editor finds the JSON Schema of the file (``hookbus schema``), as JSON Schema
#: itself spells it. The bus never reads what it names: a string, and nothing else.
SCHEMA_KEY = "$schema"


@attrs.frozen
class Trigger:
    event: str
    matcher: str = ""


@attrs.frozen
class HookSpecFields:
    """Every field of hook.json except the action, as cattrs structures it."""

    trigger: Trigger
    id: str | None = None
    name: str = ""
    enabled: bool = True
    mode: str = "async"
    blocking: bool = False
    cwd: str = ""
    timeout: str | None = None
    created_by: str = ""
    on_error: str = "allow"
    dialect: str | None = None
    env: dict[str, str] = attrs.field(factory=dict)
    shadow: bool = False


SPEC_FIELDS: tuple[str, ...] = tuple(field.name for field in attrs.fields(HookSpecFields))
#: The JSON type each field must have, for the fast path of ``_structure_fields``.
_FIELD_TYPES: dict[str, type] = {
    "id": str, "name": str, "enabled": bool, "mode": str, "blocking": bool,
    "cwd": str, "timeout": str, "created_by": str, "on_error": str, "dialect": str, "env": dict, "shadow": bool,
}


def _structure_fields(base: dict[str, Any]) -> HookSpecFields:
    """``HookSpecFields`` from the base fields. The common, well-typed spec is built directly
    (a load of 1,000 hooks spends most of its time here); anything else goes through the
    strict converter, which says what is wrong and where."""
    trigger = base.get("trigger")
    if (
        type(trigger) is dict
        and type(trigger.get("event")) is str
        and type(trigger.get("matcher", "")) is str
        and all(type(value) is _FIELD_TYPES.get(key) for key, value in base.items() if key != "trigger")
    ):
        rest = {key: value for key, value in base.items() if key != "trigger"}
        return HookSpecFields(Trigger(trigger["event"], trigger.get("matcher", "")), **rest)
    return structure(base, HookSpecFields)


SPEC_FIELD_SET = frozenset(SPEC_FIELDS)
#: Optional string fields whose default is None: a JSON null must not pass for leaving them out.
_NONE_MEANS_ABSENT: tuple[str, ...] = tuple(
    field.name for field in attrs.fields(HookSpecFields) if field.default is None
)
TRIGGER_FIELDS: tuple[str, ...] = tuple(field.name for field in attrs.fields(Trigger))


@attrs.frozen
class HookSpec:
    """A valid hook spec: the fields of the file, defaults applied, and its one action."""

    id: str
    trigger: Trigger
    action_key: str
    #: The JSON value under ``action_key``, as written.
    action: Any
    name: str = ""
    enabled: bool = True
    mode: Mode = "async"
    blocking: bool = False
    cwd: str = ""
    timeout: str = DEFAULT_ASYNC_TIMEOUT
    created_by: str = ""
    #: What a failure of the hook decides: "allow" (fail open) or, for a blocking hook,
    #: "deny" (fail closed).
    on_error: OnError = "allow"
    #: Whose conventions the hook follows: None for hookbus's, "claude-code" for Claude
    #: Code's (its envelope, tool names, environment and output rules).
    dialect: str | None = None
    #: Variables added to the environment of the hook's process.
    env: Mapping[str, str] = attrs.field(factory=dict)
    #: Runs and is recorded, but never enters the merge (nor delays the decision): what it
    #: would have decided is there to compare before it enforces.
    shadow: bool = False


def unknown_field_errors(
    keys: list[str], allowed: tuple[str, ...], location: str, plugin_hint: bool = False
) -> list[SpecError]:
    errors = []
    for key in keys:
        hint = did_you_mean(key, allowed)
        if not hint and plugin_hint:
            # With no action at all, a stray key is most likely a missing plugin's action.
            hint = ": not a hook field, and no installed plugin runs it as an action (see `hookbus plugins`)"
        errors.append(SpecError(f"unknown field {key!r}{hint}", location))
    return errors


def _check_semantics(
    fields: HookSpecFields, directory_name: str, settings_document: Mapping[str, Any]
) -> tuple[Matcher | None, list[SpecError]]:
    """The compiled matcher, and every rule the fields break."""
    errors: list[SpecError] = []
    matcher: Matcher | None = None
    event = fields.trigger.event
    info = EVENTS.get(event)
    if info is None:
        errors.append(
            SpecError(
                f"unknown event {event!r}{did_you_mean(event, EVENT_NAMES)}; "
                f"events are {', '.join(EVENT_NAMES)}",
                "$.trigger.event",
            )
        )
    source = fields.trigger.matcher
    if info is not None and info.matcher_field is None and source not in ("", "*"):
        errors.append(
            SpecError(f"{event} has no matcher field: remove the matcher", "$.trigger.matcher")
        )
    else:
        try:
            matcher = compile_matcher(source)
            if fields.dialect in DIALECTS:
                # Written against the host's tool names: tried against vixd's equivalents too.
                names = tool_names(settings_document)
                if fields.dialect == "codex":
                    from hookbus.dialects.codex_names import CODEX_TOOLS

                    names = CODEX_TOOLS
                translated = claude_matcher(source, names, _regex_matches)
                if translated != source:
                    matcher = compile_matcher(translated)
        except SpecError as exc:
            errors.append(exc)
    if fields.mode not in MODES:
        errors.append(SpecError(f'mode must be "sync" or "async", got {fields.mode!r}', "$.mode"))
    if fields.blocking and fields.mode != "sync":
        errors.append(SpecError('blocking needs "mode": "sync"', "$.blocking"))
    if fields.shadow and fields.mode != "sync":
        errors.append(SpecError('shadow needs "mode": "sync": an async hook never enters the merge anyway', "$.shadow"))
    if fields.blocking and info is not None and not info.can_block:
        errors.append(
            SpecError(
                f"{event} cannot block: only {', '.join(BLOCKING_EVENTS)} can",
                "$.blocking",
            )
        )
    if fields.on_error not in ON_ERROR:
        errors.append(SpecError(f'on_error must be "allow" or "deny", got {shorten(fields.on_error)!r}', "$.on_error"))
    elif fields.on_error == "deny" and not fields.blocking:
        errors.append(
            SpecError(
                'on_error "deny" needs "blocking": true: only a blocking hook\'s deny takes effect',
                "$.on_error",
            )
        )
    if fields.timeout is not None:
        try:
            parse_duration(fields.timeout)
        except ValueError as exc:
            errors.append(SpecError(str(exc), "$.timeout"))
    try:
        check_runnable(fields.cwd, "cwd")
    except SpecError as exc:
        errors.append(SpecError(exc.message, "$.cwd"))
    if fields.dialect is not None and fields.dialect not in DIALECTS:
        errors.append(
            SpecError(
                f"unknown dialect {shorten(fields.dialect)!r}{did_you_mean(fields.dialect, DIALECTS)}; "
                f"dialects are {', '.join(DIALECTS)} (leave it out for hookbus's own)",
                "$.dialect",
            )
        )
    errors += _check_env(fields.env)
    if fields.id is not None and fields.id != directory_name:
        errors.append(
            SpecError(
                f"id {fields.id!r} differs from its directory name {directory_name!r}: "
                "rename one so they match",
                "$.id",
            )
        )
    return matcher, errors


def _regex_matches(source: str, name: str) -> bool:
    return compile_regex(source).fullmatch(encode(name))


def _check_env(env: dict[str, Any]) -> list[SpecError]:
    """Every entry of ``env`` that cannot be an environment variable, with where it is."""
    errors: list[SpecError] = []
    for name, value in env.items():
        where = f"$.env.{name}" if name.isidentifier() else "$.env"
        if not name or "=" in name or "\0" in name:
            errors.append(SpecError(f"{shorten(name)!r} cannot be an environment variable's name", where))
        elif not isinstance(value, str):
            errors.append(SpecError(f"expected a string, got {json_type_name(value)}", where))
        elif "\0" in value:
            errors.append(SpecError("an environment variable cannot hold a NUL character", where))
    return errors


def check_spec_fields(
    base: dict[str, Any], directory_name: str, settings_document: Mapping[str, Any]
) -> tuple[HookSpecFields | None, Matcher | None, list[SpecError]]:
    """The fields of hook.json but the action (``base``), structured; the compiled matcher;
    and every error they hold. Neither is None unless an error says why."""
    errors: list[SpecError] = []
    trigger = base.get("trigger")
    if isinstance(trigger, dict):
        unknown = [key for key in trigger if key not in TRIGGER_FIELDS]
        errors += unknown_field_errors(unknown, TRIGGER_FIELDS, "$.trigger")
        base["trigger"] = {k: v for k, v in trigger.items() if k in TRIGGER_FIELDS}
    for key in _NONE_MEANS_ABSENT:
        if key in base and base[key] is None:  # the model's None is "absent", not JSON null
            errors.append(SpecError("expected a string, got null", f"$.{key}"))
            del base[key]
    if not isinstance(base.get("timeout", ""), str):
        # The converter would only say "expected a string"; `"timeout": 60` deserves the
        # string it most likely meant.
        errors.append(SpecError(not_a_duration_message(base.pop("timeout")), "$.timeout"))
    fields: HookSpecFields | None = None
    try:
        fields = _structure_fields(base)
    except SpecErrors as exc:
        errors += exc.errors
    matcher: Matcher | None = None
    if fields is not None:
        matcher, problems = _check_semantics(fields, directory_name, settings_document)
        errors += problems
    return fields, matcher, errors


def build_spec(fields: HookSpecFields, directory_name: str, action_key: str, action: Any) -> HookSpec:
    """The HookSpec of checked fields and the action, its defaults filled in."""
    timeout = fields.timeout or (DEFAULT_SYNC_TIMEOUT if fields.mode == "sync" else DEFAULT_ASYNC_TIMEOUT)
    return HookSpec(
        id=fields.id or directory_name,
        trigger=fields.trigger,
        action_key=action_key,
        action=action,
        name=fields.name,
        enabled=fields.enabled,
        mode="sync" if fields.mode == "sync" else "async",
        blocking=fields.blocking,
        cwd=fields.cwd,
        timeout=timeout,
        created_by=fields.created_by,
        on_error="deny" if fields.on_error == "deny" else "allow",
        dialect=fields.dialect,
        env=MappingProxyType(dict(fields.env)),
        shadow=fields.shadow,
    )
