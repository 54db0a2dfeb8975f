"""Another program's settings file (Claude Code's and Gemini CLI's JSON, Codex CLI's JSON
and TOML), read with messages that say where it is wrong, and written so that a reader
never sees half of it."""

from __future__ import annotations

import json
import os
import sys
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
    text = read_text_file(path, shown)
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ImportFailed([f"{shown}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"]) from None
    except RecursionError:
        raise ImportFailed([f"{shown}: invalid JSON: nested too deeply"]) from None
    except ValueError as exc:
        raise ImportFailed([f"{shown}: invalid JSON: {exc}"]) from None


def load_toml(text: str, shown: str) -> dict[str, Any]:
    """The TOML document ``text`` (read with the standard library's ``tomllib``; on Python
    3.10, which has none, with ``tomlkit``); ImportFailed saying what is wrong with it."""
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ImportFailed([f"{shown}: invalid TOML: {exc}"]) from None
        except RecursionError:
            raise ImportFailed([f"{shown}: invalid TOML: nested too deeply"]) from None
    else:  # Python 3.10 has no tomllib
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        try:
            parsed: dict[str, Any] = tomlkit.parse(text).unwrap()
            return parsed
        except TOMLKitError as exc:
            raise ImportFailed([f"{shown}: invalid TOML: {exc}"]) from None
        except RecursionError:
            raise ImportFailed([f"{shown}: invalid TOML: nested too deeply"]) from None


def read_text_file(path: str, shown: str) -> str:
    """The UTF-8 text in ``path``; ImportFailed saying why it cannot be read."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise ImportFailed([f"{shown}: cannot read it: {exc.strerror or exc}"]) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed([f"{shown}: not valid UTF-8 (byte {exc.start})"]) from None


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


#: Opens a file that must be new: never an existing one, never through a link.
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def create_exclusively(path: str | os.PathLike[str], data: bytes, mode: int) -> None:
    """Create ``path`` holding ``data``, at ``mode`` from the start (masked by the umask;
    then exactly ``mode``, never wider). FileExistsError when anything is there (a link
    included, which is not followed); a file it could not fill is removed."""
    fd = os.open(path, _NEW_FILE, mode & 0o777)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode & 0o777)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise


def replace_atomically(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` in one rename: a reader sees the old file or the new.
    The new file is made exclusively beside it, at ``mode`` from the start; the rename
    replaces whatever is at ``path`` (a link itself, not what it points to)."""
    for _ in range(100):
        # A random name that is not there yet: nothing planted is opened, or followed.
        temp = path.with_name(f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            create_exclusively(temp, data, mode)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(f"no free temporary name beside {path}")
    try:
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` (UTF-8) in one rename; see ``replace_atomically``."""
    replace_atomically(path, text.encode("utf-8"), mode)
