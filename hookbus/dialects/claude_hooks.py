"""A ``"dialect": "claude-code"`` hook, at the edge of a run: the envelope, stdin and
environment it gets are Claude Code's, and a rewrite it answers in Claude's field names
goes back into vixd's."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from hookbus.dialects.claude_names import dialect_environment, envelope_to_claude, tool_names
from hookbus.decision import Outcome
from hookbus.events import CONTINUE_EVENTS
from hookbus.jsontext import strict_json

if TYPE_CHECKING:
    from hookbus.settings import Settings
    from hookbus.runners import Hook
    from hookbus.dialects.stopguard import StopMemory


def in_dialect(
    hook: Hook, event: str, envelope: Mapping[str, Any], settings: Settings, home: str, stops: StopMemory
) -> tuple[Mapping[str, Any], bytes, Mapping[str, str]]:
    """The envelope, stdin and environment a ``claude-code`` hook gets: Claude Code's."""
    translated = envelope_to_claude(event, envelope, tool_names(settings.raw))
    if event in CONTINUE_EVENTS and "stop_hook_active" not in translated and stops.active(event, envelope):
        # Only when true: a hook that finds no flag at all can tell it has no host that
        # keeps one (and guard against looping itself, as cc-stop-gate does).
        translated["stop_hook_active"] = True
    hook_env = {**dialect_environment(event, envelope, str(hook.directory), home), **hook.spec.env}
    return MappingProxyType(translated), strict_json(translated, separators=(",", ":")) + b"\n", hook_env


def input_from_dialect(envelope: Mapping[str, Any], outcome: Outcome, settings: Settings) -> Outcome:
    """A dialect hook's modify, in Claude's field names, back in vixd's (``envelope`` is
    the one the hook got: Claude's)."""
    claude_tool = envelope.get("tool_name")
    names = tool_names(settings.raw)
    vix_tool = names.vix_tool(claude_tool) if isinstance(claude_tool, str) else ""
    renamed = names.input_to_vix(vix_tool, outcome.input)
    return attrs.evolve(outcome, input=renamed if isinstance(renamed, dict) else outcome.input)
