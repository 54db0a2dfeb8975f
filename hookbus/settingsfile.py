"""Another program's JSON settings file (Claude Code's, Gemini CLI's), read with messages
that say where it is wrong, and written so that a reader never sees half of it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


class ImportFailed(Exception):
    """The file cannot be used: every line of ``messages`` says why, and where."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def read_json_file(path: str, shown: str) -> Any:
    """The JSON document in ``path``; ImportFailed saying what is wrong with it."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ImportFailed([f"{shown}: cannot read it: {exc.strerror or exc}"]) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed([f"{shown}: not valid UTF-8 (byte {exc.start})"]) from None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ImportFailed([f"{shown}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]) from None
    except RecursionError:
        raise ImportFailed([f"{shown}: invalid JSON: nested too deeply"]) from None
    except ValueError as exc:
        raise ImportFailed([f"{shown}: invalid JSON: {exc}"]) from None


def key_path(base: str, key: str) -> str:
    """``$.hooks.PreToolUse``, or ``$.hooks["odd name"]`` for a key that is no identifier."""
    return f"{base}.{key}" if key.isidentifier() else f"{base}[{json.dumps(key)}]"


def make_directory(path: Path, mode: int) -> None:
    """``path`` and the directories above it that are missing, each with ``mode`` (masked
    by the umask, as always), so that none ends up writable by others."""
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            pass


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` in one rename: a reader sees the old file or the new."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
