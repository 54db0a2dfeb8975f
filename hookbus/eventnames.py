"""The names of the ten events, without the engine: ``hookbus emit`` checks an event name
before it talks to a server, and must not import attrs to do it. ``hookbus.events`` holds
what each event means."""

from __future__ import annotations

EVENT_NAMES: tuple[str, ...] = (
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "PermissionRequest",
    "ThreadStart",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SubagentStart",
    "SubagentStop",
)


def unknown_event_message(event: str) -> str:
    """What the bus, the server and the CLI all say about an event name that is not one."""
    return f"unknown event {event!r}; events are {', '.join(EVENT_NAMES)}"
