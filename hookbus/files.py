"""Reading user-written JSON/YAML documents safely: capped, no symlinks, strict parsing."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import attrs

from hookbus.jsontext import json_type_name
from hookbus.errors import SpecError, json_limit_message
from hookbus.jsontext import LONE_SURROGATE
from hookbus.permissions import check_permissions
from hookbus.trust import STATE_FILES, entry_refusals

if TYPE_CHECKING:
    from hookbus.home import Home

#: A hook.json bigger than this is refused, not parsed.
MAX_SPEC_BYTES = 256 * 1024


def read_capped(path: Path, cap: int = MAX_SPEC_BYTES) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file of at most ``cap`` bytes, and the stat of what was read.

    The file is opened with O_NOFOLLOW and checked with fstat on the open descriptor, so
    what is checked is what is read, even if the path is swapped in between.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise SpecError(_describe_os_error(exc), None) from None
    return _read_descriptor(fd, cap)


_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _read_descriptor(fd: int, cap: int) -> tuple[bytes, os.stat_result]:
    """``read_regular`` of ``fd``, which this closes."""
    try:
        return read_regular(fd, cap)
    finally:
        os.close(fd)


def read_regular(fd: int, cap: int) -> tuple[bytes, os.stat_result]:
    """The whole of the regular file open on ``fd`` (left open), and its fstat; SpecError
    when it is something else (a FIFO would block, a device never end) or bigger than
    ``cap`` bytes."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SpecError(f"is a {kind_of(info.st_mode)}, not a regular file", None)
        if info.st_size > cap:
            raise SpecError(f"is {info.st_size} bytes, over the {_limit(cap)} limit", None)
        # One read of size + 1 returns the whole file short, at its end: no second call.
        data = os.read(fd, info.st_size + 1)
        if len(data) > info.st_size:  # it grew while we read: take the rest, still capped
            chunks = [data]
            size = len(data)
            while size <= cap:
                chunk = os.read(fd, cap + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > cap:
                raise SpecError(f"grew past the {_limit(cap)} limit while being read", None)
            data = b"".join(chunks)
        return data, info
    except OSError as exc:
        raise SpecError(_describe_os_error(exc), None) from None


def _limit(cap: int) -> str:
    return f"{cap >> 20} MiB" if cap >= 1 << 20 and not cap % (1 << 20) else f"{cap // 1024} KiB"


def kind_of(mode: int) -> str:
    """What kind of file ``mode`` says, for a message: "FIFO", "directory"..."""
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISREG, "regular file"),
    ):
        if test(mode):
            return name
    return "special file"


class LoadError(SpecError):
    """A whole file or directory cannot be loaded; ``path`` says which."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message, None)
        self.path = path


@attrs.frozen
class SpecFile:
    """A hook's spec as read, with the fstat of the directory and the file it came from."""

    path: Path
    kind: str
    data: bytes
    file_stat: os.stat_result
    dir_stat: os.stat_result
    #: What ``inspect`` returned for the open directory.
    inspected: Any = None
    #: Every entry of the directory as listed, with its inode: (name, inode).
    entries: tuple[tuple[str, int], ...] = ()


def read_spec_file(
    directory: Path,
    names: tuple[tuple[str, str], ...],
    cap: int = MAX_SPEC_BYTES,
    inspect: Callable[[int, list[str]], Any] | None = None,
) -> SpecFile | None:
    """Read the one spec file of a hook directory; None when it has none.

    The directory is opened first (O_NOFOLLOW) and the file opened relative to it, so
    neither can be swapped for a symlink between the check and the read. It is listed
    once; ``inspect`` is called with the open directory's descriptor and that listing (to
    check the other files in it, say).
    """
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(directory):
            raise LoadError(directory, "is a symbolic link; hook directories are not followed through links") from None
        if exc.errno == errno.ENOTDIR:
            return None
        raise LoadError(directory, f"cannot open: {exc.strerror or exc}") from None
    try:
        dir_stat = os.fstat(dir_fd)
        # One listing serves both: which spec file there is (no open of one that is not
        # there), and the check of the files beside it. A cold load of 1,000 hooks makes
        # some ten system calls a hook; this saves four of them.
        # scandir, not listdir: the same one read of the directory also gives each entry's
        # inode (d_ino, no stat), from which a rescan tells a file replaced by rename.
        with os.scandir(dir_fd) as scanned:
            entries = tuple((entry.name, entry.inode()) for entry in scanned)
        listing = [name for name, _ in entries]
        present = set(listing)
        found: list[tuple[str, str, int]] = []
        try:
            for name, kind in names:
                if name not in present:
                    continue
                try:
                    found.append((name, kind, os.open(name, _READ_FLAGS, dir_fd=dir_fd)))
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise LoadError(directory / name, _describe_os_error(exc)) from None
            if len(found) > 1:
                both = " and ".join(name for name, _, _ in found)
                raise LoadError(directory, f"both {both} exist: keep one")
        except BaseException:
            for _, _, fd in found:
                os.close(fd)
            raise
        if not found:
            return None
        name, kind, fd = found[0]
        path = directory / name
        try:
            data, file_stat = _read_descriptor(fd, cap)
        except SpecError as exc:
            raise LoadError(path, exc.message) from None
        inspected = inspect(dir_fd, listing) if inspect is not None else None
        return SpecFile(path, kind, data, file_stat, dir_stat, inspected, entries)
    finally:
        os.close(dir_fd)


def read_config_file(home: Home, name: str, cap: int = MAX_SPEC_BYTES) -> tuple[bytes, os.stat_result] | None:
    """The bytes of ``config/<name>`` in ``home``, for a plugin that keeps its configuration
    there (as the workflow plugin keeps workflow.json); None when there is no such file.

    SpecError when it must not be obeyed: ``config/``, the file or any other file in
    ``config/`` is owned by another user or writable by group or others (a workflow may run
    a script kept beside it), or the file is a symbolic link or not a regular file.
    """
    try:
        dir_fd = os.open(home.config_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(home.config_dir):
            raise SpecError("config is a symbolic link, which is not followed: move the directory in place", None) from None
        raise SpecError(f"config cannot be read: {exc.strerror or exc}", None) from None
    try:
        info = os.fstat(dir_fd)
        refusal, _ = check_permissions(home.config_dir, info, relaxable=False)
        refusals = [(home.config_dir, refusal)] if refusal else entry_refusals(dir_fd, home.config_dir, strict_modes=True, relaxable=False)[0]
        if refusals:
            where, why = refusals[0]
            raise SpecError(f"{home.relative(where)} {why}; nothing in config/ is used until that is fixed", None)
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise SpecError(_describe_os_error(exc), None) from None
        data, file_info = _read_descriptor(fd, cap)
        refusal, _ = check_permissions(home.config_dir / name, file_info, relaxable=False)  # what was read
        if refusal:
            raise SpecError(f"config/{name} {refusal}", None)
        return data, file_info
    finally:
        os.close(dir_fd)


def _describe_os_error(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link; hook files are not followed through links (copy the file instead)"
    if exc.errno == errno.ENOENT:
        return "file disappeared while being read"
    return f"cannot read: {exc.strerror or exc}"


def file_signature(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """What changes when a file is written or replaced (inode, size, mtime, ctime); None
    when there is no such file. For polling files that editors replace by rename."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def is_ignored_name(name: str) -> bool:
    """Editor temporaries and backups, and anything hidden: never a hook or its spec."""
    return (
        name.startswith(".")
        or name.endswith(("~", ".swp", ".swx", ".tmp"))
        or (name.startswith("#") and name.endswith("#"))
    )


def is_part_of_hook(name: str) -> bool:
    """Whether the entry ``name`` of a hook directory is part of the hook, so that a change
    to it is a change of the hook: not the state.json hookbus replaces after every fire (nor
    its temporaries, ``.state.json.<pid>.<n>.tmp``), nor an editor's temporary or backup,
    nor anything hidden."""
    return name not in STATE_FILES and not is_ignored_name(name)


def config_signature(home: Home) -> tuple[tuple[str, tuple[int, ...] | None], ...]:
    """What changes when anything in ``config/`` is written, replaced, added, removed or
    has its owner or mode changed: the directory and every entry in it (editor temporaries
    aside), not followed."""
    # The directory's identity, owner and mode, not its times: an editor's scratch file
    # coming and going is no change to the configuration.
    found: list[tuple[str, tuple[int, ...] | None]] = [("", _lstat_signature(home.config_dir, times=False))]
    try:
        names = sorted(name for name in os.listdir(home.config_dir) if not is_ignored_name(name))
    except OSError:
        return tuple(found)
    found += [(name, _lstat_signature(home.config_dir / name)) for name in names]
    return tuple(found)


def _lstat_signature(path: Path, times: bool = True) -> tuple[int, ...] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    identity = (info.st_ino, info.st_mode, info.st_uid)
    return (*identity, info.st_size, info.st_mtime_ns, info.st_ctime_ns) if times else identity


def decode_document(data: bytes, kind: str) -> Any:
    """Parse JSON (``kind="json"``) or YAML; SpecError saying where the text is broken."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"not valid UTF-8 (byte {exc.start})", None) from None
    if kind == "yaml":
        document = _decode_yaml(text)
        escapes = "\\u" in text or "\\U" in text
    else:
        document = _decode_json(text)
        escapes = "\\u" in text
    if escapes:  # only an escape can make a string that is not Unicode text
        _reject_surrogates(document, "$")
    return document


def _decode_json(text: str) -> Any:
    try:
        return json.loads(
            text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", None
        ) from None
    except SpecError:
        raise
    except ValueError as exc:  # Python's own limits: an integer over 4,300 digits
        raise SpecError(f"invalid JSON: {json_limit_message(exc)}", None) from None
    except RecursionError:
        raise SpecError("invalid JSON: nested too deeply", None) from None


def _reject_surrogates(value: Any, location: str) -> None:
    """A JSON ``\\ud800`` escape with no partner decodes to a lone surrogate, which is not
    text: no file, log line or terminal can hold it."""
    if isinstance(value, str):
        found = LONE_SURROGATE.search(value)
        if found:
            raise SpecError(
                f"a string holds a lone surrogate escape (\\u{ord(found.group()):04x}), "
                "which is not Unicode text: remove it or write the character itself",
                location,
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_surrogates(key, location)
            _reject_surrogates(item, f"{location}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_surrogates(item, f"{location}[{index}]")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):  # rare: only then look for which key repeats
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise SpecError(f"duplicate key {key!r}", None)
            seen.add(key)
    return result


def _reject_constant(name: str) -> Any:
    raise SpecError(f"{name} is not valid JSON", None)


def _decode_yaml(text: str) -> Any:
    import yaml  # only paid for by homes that use YAML

    class StrictLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            # An alias repeats a node without repeating its text: nine levels of them in a
            # few hundred bytes expand to a billion nodes (the "billion laughs"). A hook
            # has no use for them, so neither an alias nor an anchor is taken.
            event = self.peek_event()  # type: ignore[no-untyped-call]
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                kind = "an alias" if isinstance(event, yaml.AliasEvent) else "an anchor"
                sign = "*" if isinstance(event, yaml.AliasEvent) else "&"
                line = event.start_mark.line + 1
                raise SpecError(
                    f"YAML {kind} ({sign}{anchor}) at line {line}: anchors and aliases are not "
                    "allowed in hookbus files, write the value out in full",
                    None,
                )
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            seen: set[object] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, Hashable):
                    continue  # SafeLoader reports unhashable keys itself
                if not isinstance(key, str):
                    # JSON's keys are strings, and so are ours: YAML reads `on`, `no`,
                    # `1` and `~` as other types.
                    line = key_node.start_mark.line + 1
                    raise SpecError(
                        f"key {key_node.value!r} at line {line} is {json_type_name(key)}, not a "
                        f"string: quote it ('{key_node.value}')",
                        None,
                    )
                if key in seen:
                    line = key_node.start_mark.line + 1
                    raise SpecError(f"duplicate key {key!r} at line {line}", None)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    if text and not text.endswith("\n"):
        # A YAML document has no closing brace: a write caught half-way can parse as a
        # different, valid hook. A file ends with a newline once it is all there.
        raise SpecError(
            "does not end with a newline, so it may be half-written: end the file with a "
            "newline (and write YAML hooks atomically: a temporary file, then rename)",
            None,
        )
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except SpecError:
        raise
    except ValueError as exc:  # Python's own limits: an integer over 4,300 digits
        raise SpecError(f"invalid YAML: {json_limit_message(exc)}", None) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(f"invalid YAML{where}: {problem}", None) from None
    except RecursionError:
        raise SpecError("invalid YAML: nested too deeply", None) from None

