"""The workflow schema, and ``config/workflow.json`` (or ``.yaml``): name -> definition.

A definition is ``{"steps": [...], "description": "..."}``; each step is ``{"bash": CMD}``
or ``{"prompt": TEXT}``, with an optional ``name`` and ``timeout`` (a Go duration).
"""

from __future__ import annotations

import threading
from typing import Any, Literal, Mapping

import attrs

from hookbus.converter import json_type_name
from hookbus.durations import not_a_duration_message, parse_duration
from hookbus.errors import Problem, SpecError, SpecErrors, did_you_mean
from hookbus.files import config_signature, decode_document, read_config_file
from hookbus.home import Home
from hookbus.runners import check_runnable
from hookbus.schema import DURATION

CONFIG_NAMES: tuple[tuple[str, str], ...] = (("workflow.json", "json"), ("workflow.yaml", "yaml"))
STEP_KINDS = ("bash", "prompt")
_STEP_FIELDS = (*STEP_KINDS, "name", "timeout")
_WORKFLOW_FIELDS = ("steps", "description")


_TEXT = {"type": "string", "minLength": 1}
STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "bash": {**_TEXT, "description": "Envelope on stdin, previous output in HOOKBUS_PREVIOUS_OUTPUT."},
        "prompt": {**_TEXT, "description": "Sent with the previous output and the envelope."},
        "name": {"type": "string"},
        "timeout": DURATION,
    },
    "additionalProperties": False,
    "oneOf": [{"required": ["bash"]}, {"required": ["prompt"]}],
}
WORKFLOW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {"type": "string"},
        "steps": {"type": "array", "minItems": 1, "items": STEP_SCHEMA},
    },
    "required": ["steps"],
    "additionalProperties": False,
}


@attrs.frozen
class Step:
    kind: Literal["bash", "prompt"]
    text: str
    name: str = ""
    #: Seconds; None: bounded only by the hook's timeout.
    timeout: float | None = None
    timeout_text: str = ""

    def label(self, index: int, count: int) -> str:
        named = f" ({self.name})" if self.name else ""
        return f"step {index + 1} of {count}{named}"


@attrs.frozen
class Workflow:
    steps: tuple[Step, ...]
    description: str = ""


def _string(value: Any, location: str, errors: list[SpecError], empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        errors.append(SpecError(f"expected a string, got {json_type_name(value)}", location))
        return ""
    if not empty_ok and not value.strip():
        errors.append(SpecError("must not be empty", location))
    return value


def _unknown(key: str, allowed: tuple[str, ...], location: str) -> SpecError:
    return SpecError(f"unknown field {key!r}{did_you_mean(key, allowed)}", location)


def parse_step(value: Any, location: str, errors: list[SpecError]) -> Step | None:
    if not isinstance(value, dict):
        errors.append(SpecError(f"expected a step object, got {json_type_name(value)}", location))
        return None
    kinds = [kind for kind in STEP_KINDS if kind in value]
    extra = [key for key in value if key not in _STEP_FIELDS]
    if not kinds:
        if extra:
            hint = did_you_mean(extra[0], STEP_KINDS)
            errors.append(SpecError(f"unknown step kind {extra[0]!r}{hint}: a step is bash or prompt", location))
        else:
            errors.append(SpecError('a step needs "bash" or "prompt"', location))
        return None
    if len(kinds) > 1:
        errors.append(SpecError("a step is either bash or prompt, not both", location))
        return None
    errors += [_unknown(key, _STEP_FIELDS, location) for key in extra]
    kind = kinds[0]
    text = _string(value[kind], f"{location}.{kind}", errors)
    if kind == "bash":
        try:
            check_runnable(text)
        except SpecError as exc:
            errors.append(SpecError(exc.message, f"{location}.bash"))
    name = _string(value.get("name", ""), f"{location}.name", errors, empty_ok=True)
    timeout: float | None = None
    timeout_text = ""
    if "timeout" in value and not isinstance(value["timeout"], str):
        # As hook.json's timeout: `"timeout": 30` is answered with the string meant.
        errors.append(SpecError(not_a_duration_message(value["timeout"]), f"{location}.timeout"))
    elif "timeout" in value:
        timeout_text = _string(value["timeout"], f"{location}.timeout", errors)
        if timeout_text:
            try:
                timeout = parse_duration(timeout_text)
            except ValueError as exc:
                errors.append(SpecError(str(exc), f"{location}.timeout"))
    return Step("bash" if kind == "bash" else "prompt", text, name, timeout, timeout_text)


def parse_workflow(value: Any, location: str = "$") -> Workflow:
    """A workflow definition; SpecErrors (locations under ``location``) when it is invalid."""
    errors: list[SpecError] = []
    if not isinstance(value, dict):
        raise SpecErrors([SpecError(f"expected a workflow object, got {json_type_name(value)}", location)])
    errors += [_unknown(key, _WORKFLOW_FIELDS, location) for key in value if key not in _WORKFLOW_FIELDS]
    description = _string(value.get("description", ""), f"{location}.description", errors, empty_ok=True)
    raw_steps = value.get("steps")
    steps: list[Step] = []
    if raw_steps is None:
        errors.append(SpecError('required field missing: "steps"', location))
    elif not isinstance(raw_steps, list) or not raw_steps:
        errors.append(SpecError("steps must be a non-empty array of steps", f"{location}.steps"))
    else:
        for index, raw in enumerate(raw_steps):
            step = parse_step(raw, f"{location}.steps[{index}]", errors)
            if step is not None:
                steps.append(step)
    if errors:
        raise SpecErrors(errors)
    return Workflow(tuple(steps), description)


@attrs.frozen
class WorkflowConfig:
    """What config/workflow.* defines: the valid workflows, and what is wrong with the rest."""

    path: str | None = None
    workflows: Mapping[str, Workflow] = attrs.field(factory=dict)
    #: Per workflow name, why it is invalid.
    invalid: Mapping[str, tuple[SpecError, ...]] = attrs.field(factory=dict)
    #: Problems of the file as a whole (unreadable, not JSON, both .json and .yaml).
    file_errors: tuple[str, ...] = ()

    def problems(self) -> list[Problem]:
        shown = self.path or "config/workflow.json"
        found = [Problem(shown, message) for message in self.file_errors]
        for errors in self.invalid.values():
            found += [Problem(shown, error.message, error.location) for error in errors]
        return found


def _key_location(name: str) -> str:
    plain = name.replace("_", "").replace("-", "").isalnum()
    return f"$.{name}" if plain else f"$[{name!r}]"


def read_config(home: Home) -> WorkflowConfig:
    found: list[tuple[str, str, bytes]] = []
    for name, kind in CONFIG_NAMES:
        try:
            read = read_config_file(home, name)
        except SpecError as exc:
            # Refused (others could write it, or something beside it): nothing of it is used.
            return WorkflowConfig(home.relative(home.config_dir / name), file_errors=(exc.message,))
        if read is not None:
            found.append((home.relative(home.config_dir / name), kind, read[0]))
    if not found:
        return WorkflowConfig()
    shown = found[0][0]
    if len(found) > 1:
        return WorkflowConfig(shown, file_errors=("both workflow.json and workflow.yaml exist: keep one",))
    _, kind, data = found[0]
    try:
        document = decode_document(data, kind)
    except SpecError as exc:
        return WorkflowConfig(shown, file_errors=(exc.message,))
    if not isinstance(document, dict):
        message = f"expected an object mapping workflow names to definitions, got {json_type_name(document)}"
        return WorkflowConfig(shown, file_errors=(message,))
    workflows: dict[str, Workflow] = {}
    invalid: dict[str, tuple[SpecError, ...]] = {}
    for name, definition in document.items():
        try:
            workflows[name] = parse_workflow(definition, _key_location(name))
        except SpecErrors as exc:
            invalid[name] = tuple(exc.errors)
    return WorkflowConfig(shown, workflows, invalid)


class ConfigCache:
    """The parsed workflow config, re-read only when anything in config/ changes (a chmod of
    a file beside workflow.json can make the whole directory untrusted)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[object, WorkflowConfig]] = {}

    def get(self, home: Home) -> WorkflowConfig:
        signature = config_signature(home)
        key = str(home.root)
        with self._lock:
            cached = self._cached.get(key)
            if cached is not None and cached[0] == signature:
                return cached[1]
        config = read_config(home)
        with self._lock:
            self._cached[key] = (signature, config)
        return config
