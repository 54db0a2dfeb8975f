"""``hookbus import claude-code|gemini-cli FILE --install-bridge``: a host's settings.json
made to send every one of its events to hookbus.

The host's own hooks in FILE stay as they are; the bridge is added once per event (and
left alone when another spelling of it is there already). FILE is backed up to FILE.bak
before it changes, created when it is missing, and written in one rename.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, TextIO

from hookbus.jsontext import json_type_name
from hookbus.rendezvous import home_root
from hookbus.settingsfile import ImportFailed, key_path, make_directory, read_json_file, write_atomically
from hookbus.terminal import printable


class BridgedHost:
    """What ``--install-bridge`` writes for one host."""

    __slots__ = ("name", "verb", "events", "tool_events", "all_tools")

    def __init__(self, name: str, verb: str, events: tuple[str, ...], tool_events: tuple[str, ...], all_tools: str | None) -> None:
        self.name = name
        #: The bridge's verb: ``hookbus VERB``.
        self.verb = verb
        #: The host's events the bridge is put on.
        self.events = events
        #: Those among them whose matcher filters tool names.
        self.tool_events = tool_events
        #: The matcher that takes every tool on those (None: the group has no matcher).
        self.all_tools = all_tools


CLAUDE_CODE = BridgedHost(
    "Claude Code",
    "claude-code-hook",
    ("PreToolUse", "PostToolUse", "UserPromptSubmit", "PermissionRequest", "SessionStart", "Stop", "SubagentStop", "PreCompact"),
    ("PreToolUse", "PostToolUse", "PermissionRequest"),
    "*",
)
# Gemini CLI's matchers are regexes, where "*" is not one: a group without a matcher runs
# for every tool.
GEMINI_CLI = BridgedHost(
    "Gemini CLI",
    "gemini-cli-hook",
    ("BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "SessionStart", "PreCompress"),
    (),
    None,
)


def bridge_command(home: str | os.PathLike[str] | None = None, host: BridgedHost = CLAUDE_CODE) -> str:
    """The command the host runs for every event: ``hookbus claude-code-hook`` (with
    ``--home ABS`` when a home was named)."""
    command = f"hookbus {host.verb}"
    if home is not None:
        command += f" --home {shlex.quote(home_root(home))}"
    return command


def is_bridge_command(command: object, host: BridgedHost = CLAUDE_CODE) -> bool:
    """Whether ``command`` runs ``hookbus VERB`` of ``host`` (however hookbus is reached)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if host.verb not in words:
        return False
    before = words[: words.index(host.verb)]
    return any(os.path.basename(word) == "hookbus" for word in before)


def merge_bridge(
    document: dict[str, Any], command: str, shown: str, host: BridgedHost = CLAUDE_CODE
) -> tuple[dict[str, Any], list[str]]:
    """``document`` (the host's settings.json) with the bridge on every bridged event, and
    a line per event saying what was done. The user's other hooks stay as they are."""
    hooks = document.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ImportFailed([f"{shown}: expected an object of events, got {json_type_name(hooks)} @ $.hooks"])
    merged = dict(hooks)
    lines: list[str] = []
    for event in host.events:
        groups = merged.get(event, [])
        if not isinstance(groups, list):
            where = key_path("$.hooks", event)
            raise ImportFailed([f"{shown}: expected an array of matcher groups, got {json_type_name(groups)} @ {where}"])
        present = [
            entry.get("command")
            for group in groups if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for entry in group["hooks"] if isinstance(entry, dict) and is_bridge_command(entry.get("command"), host)
        ]
        if command in present:
            lines.append(f"{event}: already routed to {command}")
            continue
        if present:
            lines.append(
                f"{event}: left alone: already routed by {present[0]!r}, not {command!r} "
                "(edit it by hand if you meant this one)"
            )
            continue
        on_tools = event in host.tool_events and host.all_tools is not None
        group: dict[str, Any] = {"matcher": host.all_tools} if on_tools else {}
        group["hooks"] = [{"type": "command", "command": command}]
        merged[event] = [*groups, group]
        lines.append(f"{event}: add {command}" + (f" (matcher {host.all_tools})" if on_tools else ""))
    result = dict(document)
    result["hooks"] = merged
    return result, lines


def _has_own_hooks(document: dict[str, Any], host: BridgedHost) -> bool:
    """Whether a settings document holds hooks other than the bridge."""
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return False
    for groups in hooks.values():
        for group in groups if isinstance(groups, list) else ():
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else ():
                if not (isinstance(entry, dict) and is_bridge_command(entry.get("command"), host)):
                    return True
    return False


def install_bridge(
    file: str,
    home: str | os.PathLike[str] | None = None,
    *,
    host: BridgedHost = CLAUDE_CODE,
    dry_run: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Merge the bridge into FILE (created when missing, backed up to FILE.bak before a
    change), or print it; the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    shown = os.fspath(file)
    command = bridge_command(home, host)
    exists = os.path.lexists(shown)
    try:
        document = read_json_file(shown, shown) if exists else {}
        if not isinstance(document, dict):
            raise ImportFailed([f"{shown}: expected an object at the top level, got {json_type_name(document)} @ $"])
        merged, lines = merge_bridge(document, command, shown, host)
    except ImportFailed as exc:
        for message in exc.messages:
            print(printable(message), file=err)
        print(printable(f"{shown} was not changed"), file=err)
        return 1
    for line in lines:
        print(printable(line), file=out)
    if _has_own_hooks(document, host):
        advice = "remove those you imported with `hookbus import claude-code`" if host is CLAUDE_CODE else "move them into hookbus hooks"
        print(printable(f"note: the other hooks of {shown} still run as well: {advice}, or they run twice"), file=out)
    changed = merged != document or not exists
    if dry_run:
        print(printable(f"{shown} would hold these hooks:" if changed else f"{shown} needs no change; its hooks:"), file=out)
        print(printable(json.dumps({"hooks": merged["hooks"]}, indent=2, ensure_ascii=False), keep="\n"), file=out)
        print("dry run: nothing was written", file=out)
        return 0
    if not changed:
        print(printable(f"{shown} needs no change"), file=out)
        return 0
    target = Path(os.path.realpath(shown))  # through a link (dotfiles), not over it
    try:
        if exists:
            backup = f"{shown}.bak"
            shutil.copyfile(target, backup)
            shutil.copymode(target, backup)
            print(printable(f"backed up {shown} to {backup}"), file=out)
            mode = os.stat(target).st_mode & 0o7777
        else:
            make_directory(target.parent, 0o755)
            mode = 0o644
        write_atomically(target, json.dumps(merged, indent=2, ensure_ascii=False) + "\n", mode)
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        print(printable(f"cannot write{where}: {exc.strerror or exc}; {shown} was not changed"), file=err)
        return 1
    print(printable(f"wrote {shown}"), file=out)
    return 0
