"""The home guard's door: ``HomeGuard.check`` reads one PreToolUse envelope, already in
vixd's names (Claude Code's native names are read too, for an envelope that was not
translated), and judges the file a write tool names (``places``) or the bash command
(``judge``). A call whose field is absent entirely is left alone: it writes nothing; one
whose ``tool_input`` is not an object, or whose path or command is not a string or holds a
NUL byte, is refused."""

from __future__ import annotations

import os
from typing import Any, ClassVar, Mapping, Sequence

from hookbus.policy.homeguard.errors import Unreadable
from hookbus.policy.homeguard.judge import CommandCheck
from hookbus.policy.homeguard.places import Places, ProtectedPlace, hard_linked
from hookbus.policy.homeguard.text import expand_user
from hookbus.policy.homeguard.values import UNKNOWN_DIRECTORY, Directory, shown

#: The tools that write one file, and the field of their input that names it.
_TARGET_FIELDS: dict[str, str] = {
    "write_file": "path",
    "edit_file": "path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_COMMAND_TOOLS = frozenset({"bash", "Bash"})


class HomeGuard:
    """Whether a tool call writes into one of ``places``; see the package's docstring."""

    #: The vixd tool names (and Claude Code's native names) this guard looks at.
    TOOLS: ClassVar[frozenset[str]] = frozenset(_TARGET_FIELDS) | _COMMAND_TOOLS

    def __init__(self, places: Sequence[ProtectedPlace]) -> None:
        self._places = Places(places)

    def check(self, envelope: Mapping[str, Any]) -> str | None:
        """None when the call writes into no protected place; else a short phrase saying what it does, for the deny reason, e.g. "write_file targets /root/.vix/hooks/x/hook.json, inside the hookbus home /root/.vix" or "the bash command's `touch` writes ~/.vix/hooks/x/hook.json, which is /root/.vix/hooks/x/hook.json, inside the hookbus home /root/.vix"."""
        tool = envelope.get("tool_name")
        if not self._places.roots or not isinstance(tool, str) or tool not in self.TOOLS:
            return None
        if "tool_input" not in envelope:
            return None
        tool_input = envelope["tool_input"]
        if not isinstance(tool_input, Mapping):
            return f"{tool}'s input is {_kind(tool_input)}, not an object: the guard cannot check it"
        field = "command" if tool in _COMMAND_TOOLS else _TARGET_FIELDS[tool]
        if field not in tool_input:
            return None
        value = tool_input[field]
        if not isinstance(value, str):
            return f"{tool}'s {field} is {_kind(value)}, not a string: the guard cannot check it"
        if tool in _COMMAND_TOOLS:
            return self._check_command(value, envelope)
        return self._check_target(tool, value, envelope)

    # -- write_file and the like ----------------------------------------------------------------

    def _check_target(self, tool: str, target: str, envelope: Mapping[str, Any]) -> str | None:
        if "\0" in target:
            return f"{tool}'s {_TARGET_FIELDS[tool]} holds a NUL byte: the guard cannot check it"
        given_cwd = _envelope_cwd(envelope)
        absolute = expand_user(target)
        if not os.path.isabs(absolute):
            cwd = _working_directory(envelope)
            if cwd is None:
                return f"{tool} targets the relative path {shown(target)}, and the working directory is unknown"
            absolute = os.path.join(cwd, absolute)
        try:
            walked = self._places.walk(absolute, given_cwd)
        except Unreadable as unreadable:
            return f"{tool} targets {shown(target)}, which the guard cannot read as the writer would: {unreadable.why}"
        except (OSError, ValueError, RuntimeError):
            return f"{tool} targets {shown(target)}, which the guard cannot resolve"
        root = self._places.root_of(walked.path) or walked.through
        if root is None:
            if hard_linked(walked, self._places.devices):
                return f"{tool} targets {shown(target)}, a file with another name (a hard link) that may be inside {self._places.roots[0].place.label}"
            return None
        where = f"{root.place.label} {root.place.path}"
        if walked.path == target:
            return f"{tool} targets {shown(target)}, inside {where}"
        return f"{tool} targets {shown(target)}, which is {shown(walked.path)}, inside {where}"

    # -- bash -------------------------------------------------------------------------------------

    def _check_command(self, command: str, envelope: Mapping[str, Any]) -> str | None:
        if "\0" in command:
            return "the bash command holds a NUL byte: the guard cannot check it"
        cwd = _working_directory(envelope)
        if cwd is None:
            start = UNKNOWN_DIRECTORY
        else:
            try:
                walked = self._places.walk(cwd, _envelope_cwd(envelope))
            except (Unreadable, OSError, ValueError, RuntimeError):
                return f"the bash command runs in {shown(cwd)}, which the guard cannot resolve"
            start = Directory(cwd, walked.path, self._places.root_of(walked.path) or walked.through)
        return CommandCheck(self._places, command, start).run()


def _envelope_cwd(envelope: Mapping[str, Any]) -> str | None:
    """The writer's working directory, as the envelope gives it: the only one a
    ``/proc/self/cwd`` can be read against."""
    cwd = envelope.get("cwd")
    if isinstance(cwd, str) and os.path.isabs(cwd) and "\0" not in cwd:
        return cwd
    return None


def _working_directory(envelope: Mapping[str, Any]) -> str | None:
    """The agent's working directory: the envelope's ``cwd``, else this process's; None when
    neither can be had."""
    cwd = _envelope_cwd(envelope)
    if cwd is not None:
        return cwd
    try:
        return os.getcwd()
    except OSError:
        return None


def _kind(value: object) -> str:
    """A JSON value's kind, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"
