"""Claude Code's names for vixd's events, tools and fields, both ways.

A ``"dialect": "claude-code"`` hook sees the envelope as Claude Code would send it, and
``hookbus claude-code-hook`` turns Claude Code's envelope into vixd's. The tool map has
defaults for the tools the spec names; settings.json extends it for an embedder's others:

    {"claude_code": {"tools": {"apply_patch": "Patch",
                               "notebook_edit": {"name": "NotebookEdit",
                                                 "fields": {"path": "notebook_path"}}}}}

Standard library only: the bridge uses it on its way to a server.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

#: vixd's event → Claude Code's, where they differ.
CLAUDE_EVENT = {"ThreadStart": "SessionStart"}
#: Claude Code's event → vixd's, for every Claude event vixd has.
VIX_EVENT = {
    "SessionStart": "ThreadStart",
    **{
        name: name
        for name in (
            "PreToolUse", "PostToolUse", "UserPromptSubmit", "PermissionRequest", "Stop",
            "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
        )
    },
}


#: vixd's events on which Claude Code hands a hook's ``additionalContext`` to the model.
CONTEXT_EVENTS: tuple[str, ...] = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "ThreadStart")


class ToolName:
    """One tool's two names, vixd's and a host's (Claude Code's, Gemini CLI's), and its
    input fields' (vixd's name → the host's)."""

    __slots__ = ("vix", "host", "fields")

    def __init__(self, vix: str, host: str, fields: Mapping[str, str] | None = None) -> None:
        self.vix = vix
        self.host = host
        self.fields = dict(fields or {})


_PATH = {"path": "file_path"}
DEFAULT_TOOLS: tuple[ToolName, ...] = (
    ToolName("bash", "Bash"),
    ToolName("read_file", "Read", _PATH),
    ToolName("write_file", "Write", _PATH),
    ToolName("edit_file", "Edit", _PATH),
    ToolName("glob", "Glob"),
    ToolName("grep", "Grep"),
    ToolName("web_fetch", "WebFetch"),
    ToolName("web_search", "WebSearch"),
)


class ToolNames:
    """A tool map between vixd's names and a host's. Claude Code's in effect: the defaults,
    extended by settings.json's ``claude_code.tools``."""

    def __init__(self, tools: tuple[ToolName, ...] = DEFAULT_TOOLS) -> None:
        self.by_vix = {tool.vix: tool for tool in tools}
        self.by_host = {tool.host: tool for tool in tools}

    @classmethod
    def from_settings(cls, raw: Mapping[str, Any]) -> tuple[ToolNames, list[str]]:
        """The map settings.json (``raw``) asks for, and what is wrong in it (those entries
        are left out; the defaults stay)."""
        section = raw.get("claude_code")
        if section is None:
            return DEFAULT_NAMES, []
        problems: list[str] = []
        tools = {tool.vix: tool for tool in DEFAULT_TOOLS}
        entries = section.get("tools", {}) if isinstance(section, dict) else None
        if not isinstance(entries, dict):
            return DEFAULT_NAMES, ['settings.json: "claude_code.tools" must be an object of vixd tool names']
        for vix, entry in entries.items():
            where = f"settings.json: claude_code.tools.{vix}"
            if isinstance(entry, str):
                entry = {"name": entry}
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                problems.append(f'{where}: expected Claude\'s tool name, or {{"name": ..., "fields": {{...}}}}')
                continue
            fields = entry.get("fields", {})
            if not isinstance(fields, dict) or not all(isinstance(v, str) for v in fields.values()):
                problems.append(f"{where}.fields: expected an object of vixd field → Claude field names")
                continue
            tools[vix] = ToolName(vix, entry["name"], fields)
        return cls(tuple(tools.values())), problems

    def host_tool(self, vix_name: str) -> str:
        tool = self.by_vix.get(vix_name)
        return tool.host if tool is not None else vix_name

    def vix_tool(self, host_name: str) -> str:
        tool = self.by_host.get(host_name)
        return tool.vix if tool is not None else host_name

    def input_to_host(self, vix_name: str, tool_input: object) -> object:
        tool = self.by_vix.get(vix_name)
        return _renamed(tool_input, tool.fields) if tool is not None else tool_input

    def input_to_vix(self, vix_name: str, tool_input: object) -> object:
        tool = self.by_vix.get(vix_name)
        if tool is None:
            return tool_input
        return _renamed(tool_input, {host: vix for vix, host in tool.fields.items()})


DEFAULT_NAMES = ToolNames()
#: The last settings document read, and its map: settings change on reload, rarely.
_last: tuple[object, ToolNames] = ({}, DEFAULT_NAMES)


def tool_names(raw: Mapping[str, Any]) -> ToolNames:
    """The tool map of a settings.json document (its problems: ``ToolNames.from_settings``)."""
    global _last
    document, names = _last
    if document is not raw:
        names = ToolNames.from_settings(raw)[0]
        _last = (raw, names)
    return names


def _renamed(value: object, names: Mapping[str, str]) -> object:
    if not names or not isinstance(value, dict):
        return value
    return {names.get(key, key): item for key, item in value.items()}


def envelope_to_claude(event: str, envelope: Mapping[str, Any], names: ToolNames) -> dict[str, Any]:
    """vixd's envelope as Claude Code would send it: its event and tool names, its input
    fields, ``session_id``; vixd's own fields stay beside them."""
    claude = dict(envelope)
    claude["hook_event_name"] = CLAUDE_EVENT.get(event, event)
    thread = envelope.get("thread_id")
    if thread is not None and "session_id" not in envelope:
        claude["session_id"] = thread
    tool = envelope.get("tool_name")
    if isinstance(tool, str):
        claude["tool_name"] = names.host_tool(tool)
        if "tool_input" in envelope:
            claude["tool_input"] = names.input_to_host(tool, envelope["tool_input"])
    # The subagent's final message: vixd's ``result``, Claude Code's ``last_assistant_message``
    # (vixd's Stop carries none: docs/hooks.md).
    if event == "SubagentStop" and envelope.get("result") is not None and "last_assistant_message" not in envelope:
        claude["last_assistant_message"] = envelope["result"]
    return claude


def envelope_to_vix(host: Mapping[str, Any], names: ToolNames) -> dict[str, Any]:
    """A host's envelope (Claude Code's, Gemini CLI's: they spell it alike) as vixd would
    send it, with ``names`` the host's tool map: the bridge's way in."""
    envelope = {key: value for key, value in host.items() if key != "hook_event_name"}
    session = host.get("session_id")
    if session is not None and "thread_id" not in host:
        envelope["thread_id"] = session
    tool = host.get("tool_name")
    if isinstance(tool, str):
        vix = names.vix_tool(tool)
        envelope["tool_name"] = vix
        if "tool_input" in host:
            envelope["tool_input"] = names.input_to_vix(vix, host["tool_input"])
    if host.get("hook_event_name") == "SubagentStop" and "result" not in host and host.get("last_assistant_message") is not None:
        envelope["result"] = host["last_assistant_message"]  # vixd's name for the subagent's final message
    return envelope


def claude_matcher(source: str, names: ToolNames, compile_check: Any = None) -> str:
    """A dialect hook's matcher, written against Claude's tool names, as one against
    vixd's: each Claude name of a literal list becomes its vixd name; a regex also matches
    the vixd name of every known tool whose Claude name it matches."""
    if source in ("", "*"):
        return source
    words = source.split("|")
    if all(word and all(c.isalnum() or c in "_-" for c in word) for word in words):
        return "|".join(dict.fromkeys([*(names.vix_tool(word) for word in words), *words]))
    if compile_check is None:
        return source
    matched = [tool.vix for tool in names.by_host.values() if compile_check(source, tool.host)]
    return "|".join([f"(?:{source})", *matched]) if matched else source


def dialect_environment(
    event: str, envelope: Mapping[str, Any], hook_dir: str, home: str
) -> dict[str, str]:
    """CLAUDE_PROJECT_DIR, CLAUDE_PLUGIN_ROOT and CLAUDE_ENV_FILE for a dialect hook, from
    the envelope alone (a server's own environment is not the caller's).

    The project is the envelope's ``project_dir``, else its ``cwd``. The plugin root is the
    hook's directory unless the hook's ``env`` says otherwise. The env file is the
    envelope's ``env_file``; else, on ThreadStart (Claude's SessionStart, where Claude Code
    offers one), ``HOME/run/claude-env/THREAD.sh``, made private, for the embedder to read.
    ``hookbus claude-code-hook`` puts Claude Code's own project and env file in the envelope."""
    variables = {"CLAUDE_PLUGIN_ROOT": hook_dir}
    project = envelope.get("project_dir")
    if not isinstance(project, str) or not project:
        project = envelope.get("cwd")
    variables["CLAUDE_PROJECT_DIR"] = project if isinstance(project, str) else ""
    env_file = envelope.get("env_file")
    if (not isinstance(env_file, str) or not env_file) and event == "ThreadStart":
        try:
            env_file = _thread_env_file(home, envelope.get("thread_id"))
        except OSError:
            env_file = None  # a home it cannot write: the hook's writes would fail anyway
    # Always set, empty for none: an inherited one (vixd started under Claude Code) is
    # another session's.
    variables["CLAUDE_ENV_FILE"] = env_file if isinstance(env_file, str) else ""
    return variables


#: How much of the thread id an env file's name shows, for a person looking at the directory.
_READABLE_PART = 40


def _thread_env_file(home: str, thread: object) -> str:
    """``HOME/run/claude-env/NAME.sh``, one file per exact thread id: NAME is a readable
    prefix of the id (letters, digits, ``-_.``; no leading dot) and a hash of the id itself,
    because the prefix alone is the same for ``team/alice`` and ``team_alice``, or for two
    long ids that start alike. One path component, at most 68 characters."""
    import hashlib  # here, not at the top: the bridge's fast path imports this module

    # The hash of the id's text (UTF-8), which an embedder can compute to find the file. A
    # JSON string may hold a lone surrogate: it is hashed as it is, not refused.
    text = "" if thread is None else str(thread)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    shown = text if thread is not None else "no-thread"
    readable = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in shown[:_READABLE_PART]).lstrip(".")
    directory = os.path.join(home, "run", "claude-env")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return os.path.join(directory, f"{readable or 'thread'}-{digest}.sh")
