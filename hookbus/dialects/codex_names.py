"""Codex CLI's names for vixd's events and tools, for ``hookbus codex-hook``.

Codex CLI (0.169.0) sends the envelope Claude Code does (``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name``, ``tool_name``, ``tool_input``,
``tool_use_id``), with ``model`` and ``turn_id`` beside it. Its shell tool is reported under
Claude's name, ``Bash``, with ``{"command": ...}``; ``apply_patch`` keeps its own name (its
``command`` is the patch), as do the other tools (``spawn_agent``, ``mcp__server__tool``).
PostToolUse's ``tool_response`` is a string.

Its own events PreModelRequest, PostModelRequest and Interrupt, and SessionEnd, have no
counterpart in vixd: the bridge answers them with nothing. It has no Notification.

Built-in modules only: the bridge uses it on its way to a server.
"""

from __future__ import annotations

from hookbus.dialects.claude_names import VIX_EVENT as CLAUDE_VIX_EVENT
from hookbus.dialects.claude_names import ToolName, ToolNames

#: Codex CLI's event → vixd's, for every Codex event vixd has: Claude Code's names, all ten.
VIX_EVENT = dict(CLAUDE_VIX_EVENT)
#: vixd's event → Codex CLI's.
CODEX_EVENT = {vix: codex for codex, vix in VIX_EVENT.items()}
#: Every event Codex CLI runs hooks on (the bridge is installed on each): vixd's ten, and
#: those it answers with nothing.
ALL_EVENTS: tuple[str, ...] = (
    *VIX_EVENT, "PreModelRequest", "PostModelRequest", "Interrupt", "SessionEnd",
)

#: vixd's events on which Codex CLI hands a hook's ``additionalContext`` to the model (as a
#: developer message).
CONTEXT_EVENTS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "ThreadStart", "SubagentStart")
#: vixd's events on which Codex CLI takes ``continue: false`` (SessionStart, UserPromptSubmit
#: and Stop); elsewhere it is refused, or does not stop the turn.
HALT_EVENTS: tuple[str, ...] = ("ThreadStart", "UserPromptSubmit", "Stop")

#: Codex's tools as it names them to hooks: only its shell has a vixd name of its own.
CODEX_TOOLS = ToolNames((ToolName("bash", "Bash"),))
