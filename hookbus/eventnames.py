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
    """What the bus, the server and the CLI all say about an event name that is not one:
    ``unknown event 'preToolUse'; events are PreToolUse, ... (did you mean 'PreToolUse'?)``.
    The suggestion comes last, so that the start of the message stays what clients match."""
    suggestion = suggest_event(event)
    hint = f" (did you mean {suggestion[0]!r}?{suggestion[1]})" if suggestion else ""
    return f"unknown event {event!r}; events are {', '.join(EVENT_NAMES)}{hint}"


def suggest_event(event: str) -> tuple[str, str] | None:
    """The event ``event`` most likely meant, and why when it is not a spelling (another
    host's name for it); None when nothing is close. Only a mistake pays for this."""
    folded = event.strip().lower()
    for name in EVENT_NAMES:
        if name.lower() == folded:
            return name, ""
    # Hosts' names for the same events: a Claude Code, Gemini CLI or Codex CLI user types
    # their own. (Lazily: these modules are the bridges', on built-in modules only.)
    from hookbus.dialects.claude_names import VIX_EVENT as CLAUDE_EVENTS
    from hookbus.dialects.codex_names import VIX_EVENT as CODEX_EVENTS
    from hookbus.dialects.gemini_names import VIX_EVENT as GEMINI_EVENTS

    hosts = (("Claude Code", CLAUDE_EVENTS), ("Gemini CLI", GEMINI_EVENTS), ("Codex CLI", CODEX_EVENTS))
    for _, names in hosts:
        for theirs, ours in names.items():
            if theirs != ours and theirs.lower() == folded:
                whose = [f"{host}'s" for host, spelled in hosts if spelled.get(theirs) == ours]
                said = whose[0] if len(whose) == 1 else f"{', '.join(whose[:-1])} and {whose[-1]}"
                return ours, f" {theirs} is {said} name for it"
    import difflib

    lowered = {name.lower(): name for name in EVENT_NAMES}
    close = difflib.get_close_matches(folded, list(lowered), n=1, cutoff=0.6)
    return (lowered[close[0]], "") if close else None
