"""Gemini CLI's names for vixd's events and tools, for ``hookbus gemini-cli-hook``.

Gemini CLI sends the envelope Claude Code does (``session_id``, ``transcript_path``,
``cwd``, ``hook_event_name``, ``tool_name``, ``tool_input``) with a ``timestamp``, under
its own event names, and its own tool names: ``run_shell_command``, ``write_file`` and
``replace`` with ``file_path``, ...

Built-in modules only: the bridge uses it on its way to a server.
"""

from __future__ import annotations

from hookbus.dialects.claude_names import ToolName, ToolNames

#: Gemini CLI's event → vixd's, for every Gemini event vixd has. (SessionEnd,
#: Notification, BeforeModel, AfterModel and BeforeToolSelection have no counterpart.)
VIX_EVENT = {
    "BeforeTool": "PreToolUse",
    "AfterTool": "PostToolUse",
    "BeforeAgent": "UserPromptSubmit",
    "AfterAgent": "Stop",
    "SessionStart": "ThreadStart",
    "PreCompress": "PreCompact",
}
#: vixd's event → Gemini CLI's.
GEMINI_EVENT = {vix: gemini for gemini, vix in VIX_EVENT.items()}

#: vixd's events on which Gemini CLI hands a hook's ``additionalContext`` to the model.
CONTEXT_EVENTS: tuple[str, ...] = ("PostToolUse", "UserPromptSubmit", "ThreadStart")

_PATH = {"path": "file_path"}
GEMINI_TOOLS = ToolNames(
    (
        ToolName("bash", "run_shell_command"),
        ToolName("read_file", "read_file", _PATH),
        ToolName("write_file", "write_file", _PATH),
        ToolName("edit_file", "replace", _PATH),
        ToolName("glob", "glob"),
        ToolName("grep", "grep_search"),
        ToolName("web_fetch", "web_fetch"),
        ToolName("web_search", "google_web_search"),
    )
)
