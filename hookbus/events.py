"""The ten agent-loop events of the spec, what a matcher filters on, and who may block."""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

import attrs

from hookbus.eventnames import EVENT_NAMES as EVENT_NAMES  # re-exported: its home is here
from hookbus.jsontext import json_type_name


@attrs.frozen
class EventInfo:
    """One row of the spec's event table."""

    name: str
    #: The envelope field a hook's matcher is tried against; None: the event has no matcher.
    matcher_field: str | None
    can_block: bool
    #: Whether a modify decision rewrites ``tool_input`` (and so goes through the input check).
    rewrites_tool_input: bool = False
    description: str = ""


_TABLE = (
    EventInfo("PreToolUse", "tool_name", True, True, "before a tool runs"),
    EventInfo("PostToolUse", "tool_name", False, False, "after a tool completes"),
    EventInfo("UserPromptSubmit", None, True, False, "before a prompt enters the turn"),
    EventInfo(
        "PermissionRequest", "tool_name", True, True, "before the user is asked to confirm a tool"
    ),
    EventInfo("ThreadStart", "source", False, False, "when a thread begins"),
    EventInfo("Stop", None, False, False, "when a turn finishes"),
    EventInfo("PreCompact", "trigger", False, False, "before the conversation is compacted"),
    EventInfo("PostCompact", "trigger", False, False, "after a successful compaction"),
    EventInfo("SubagentStart", "agent_type", False, False, "when a subagent is spawned"),
    EventInfo("SubagentStop", "agent_type", False, False, "when a subagent finishes"),
)

EVENTS: Mapping[str, EventInfo] = MappingProxyType({e.name: e for e in _TABLE})
if tuple(EVENTS) != EVENT_NAMES:
    raise ImportError("hookbus.eventnames and hookbus.events name different events")
BLOCKING_EVENTS: tuple[str, ...] = tuple(e.name for e in _TABLE if e.can_block)
#: Where the extras take effect: approve and ask, and continue_with.
PERMISSION_EVENTS: tuple[str, ...] = ("PreToolUse", "PermissionRequest")
CONTINUE_EVENTS: tuple[str, ...] = ("Stop", "SubagentStop")


def check_modify_input(event: str, new_input: object) -> str | None:
    """Return why a modify decision's ``input`` is unusable for ``event``, or None.

    PreToolUse and PermissionRequest replace the tool's arguments, so ``input`` must be an
    object; UserPromptSubmit rewrites the prompt, so ``input.prompt`` must be a string.
    """
    if not isinstance(new_input, dict):
        return f"modify needs an object in 'input', got {json_type_name(new_input)}"
    if event == "UserPromptSubmit" and not isinstance(new_input.get("prompt"), str):
        return "modify on UserPromptSubmit needs a string in 'input.prompt' (the rewritten prompt)"
    return None
