"""A ``"dialect": "claude-code"`` (or ``"codex"``) hook, at the edge of a run: the
envelope, stdin and environment it gets are Claude Code's (Codex CLI's), and a rewrite it
answers in the host's field names goes back into vixd's.

Codex CLI sends Claude Code's envelope with its own tool names (only its shell is renamed,
``Bash``), PostToolUse's ``tool_response`` as text, and no variable of its own: a
``codex`` hook gets hookbus's and its ``env``."""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from hookbus.dialects.claude_names import ToolNames, dialect_environment, envelope_to_claude, tool_names
from hookbus.decision import Outcome
from hookbus.events import CONTINUE_EVENTS
from hookbus.jsontext import strict_json

if TYPE_CHECKING:
    from hookbus.settings import Settings
    from hookbus.runners import Hook
    from hookbus.dialects.stopguard import StopMemory


def dialect_tools(dialect: str | None, settings: Settings) -> ToolNames:
    """The tool map of a dialect: Codex CLI's, or Claude Code's (settings.json's)."""
    if dialect == "codex":
        from hookbus.dialects.codex_names import CODEX_TOOLS

        return CODEX_TOOLS
    return tool_names(settings.raw)


def in_dialect(
    hook: Hook, event: str, envelope: Mapping[str, Any], settings: Settings, home: str, stops: StopMemory
) -> tuple[Mapping[str, Any], bytes, Mapping[str, str]]:
    """The envelope, stdin and environment a dialect hook gets: its host's."""
    dialect = hook.spec.dialect
    translated = envelope_to_claude(event, envelope, dialect_tools(dialect, settings))
    if event in CONTINUE_EVENTS and "stop_hook_active" not in translated and stops.active(event, envelope):
        # Only when true: a hook that finds no flag at all can tell it has no host that
        # keeps one (and guard against looping itself, as cc-stop-gate does).
        translated["stop_hook_active"] = True
    response = translated.get("tool_response")
    if dialect == "codex" and isinstance(response, (dict, list)):
        # Codex CLI hands PostToolUse's tool_response over as text (a shell's output).
        translated["tool_response"] = strict_json(response, separators=(",", ":")).decode("utf-8")
    if dialect == "codex":
        hook_env: Mapping[str, str] = hook.spec.env
    else:
        hook_env = {**dialect_environment(event, envelope, str(hook.directory), home), **hook.spec.env}
    return MappingProxyType(translated), strict_json(translated, separators=(",", ":")) + b"\n", hook_env


def input_from_dialect(envelope: Mapping[str, Any], outcome: Outcome, settings: Settings, dialect: str | None = "claude-code") -> Outcome:
    """A dialect hook's modify, in its host's field names, back in vixd's (``envelope`` is
    the one the hook got: the host's)."""
    claude_tool = envelope.get("tool_name")
    names = dialect_tools(dialect, settings)
    vix_tool = names.vix_tool(claude_tool) if isinstance(claude_tool, str) else ""
    renamed = names.input_to_vix(vix_tool, outcome.input)
    return attrs.evolve(outcome, input=renamed if isinstance(renamed, dict) else outcome.input)
