"""Who may decide what runs as you: sshd's StrictModes, applied to the home and what is in it.

A file that decides what runs (a hook, a script beside it, a workflow, settings.json) or
where a secret goes (settings.json's prompt provider) is obeyed only when no other user can
change it: it, and every directory on the way to it, must be owned by you or root and not
writable by group or others. A world-writable directory with the sticky bit (the system
temp dir) is accepted as an ancestor of the home, as sshd accepts it: others cannot rename
or delete what you own in it. The home itself gets no such exception.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Iterator

from hookbus.permissions import check_permissions, loose_refusal, owner_refusal

#: Symbolic links followed while resolving the home's path, at most (the kernel's limit).
MAX_LINK_HOPS = 40
#: Entries of a hook directory (or of config/) checked at most, subdirectories included; a
#: directory holding more is refused rather than half-checked.
MAX_CHECKED_ENTRIES = 10_000
#: How deep subdirectories of a hook directory are checked; deeper is refused.
MAX_CHECKED_DEPTH = 8
#: Files in a hook directory that hookbus writes itself and never runs.
STATE_FILES = ("state.json",)


def path_refusal(path: Path, root_only: bool = False) -> tuple[Path, str] | None:
    """Why ``path`` (a directory, normally the home) is not safe to take orders from, as
    (the offending directory or link, why and how to fix it), or None: it and every
    directory on the way to it, symbolic links resolved one hop at a time, are owned by you
    or root and not writable by group or others (a sticky ancestor excepted), and every
    link is owned by you or root. A path that does not exist holds nothing to obey: None.
    ``root_only`` (the managed directory): root, not you, must own each of them."""
    try:
        # Not os.path.abspath: it reads "lnk/.." as nothing at all, where the kernel
        # leaves the link's target; walk() follows links and ".." as the kernel does.
        absolute = path if path.is_absolute() else Path(os.getcwd(), path)
        for directory, info, is_target in walk(absolute):
            refusal = owner_refusal(info, root_only)
            if refusal is None and not stat.S_ISLNK(info.st_mode):
                refusal = loose_refusal(info)
                if refusal is not None and not is_target and info.st_mode & stat.S_ISVTX:
                    refusal = None  # like /tmp: others cannot replace what is yours in it
            if refusal is not None:
                if root_only:
                    return directory, f"{refusal}, so someone other than root could change what runs for every user: {_fix(directory, info, root_only)}"
                return directory, f"{refusal}, so another user could change what runs as you: {_fix(directory, info)}"
    except FileNotFoundError:
        return None
    except OSError as exc:
        where = Path(exc.filename) if exc.filename else Path(path)
        return where, f"cannot be checked: {exc.strerror or exc}"
    return None


def _fix(path: Path, info: os.stat_result, root_only: bool = False) -> str:
    if root_only:
        what = "chown root" if owner_refusal(info, root_only) is not None else "chmod go-w"
        return f"run `{what} {path}` (or keep the managed directory elsewhere)"
    if owner_refusal(info) is not None:
        return f"run `chown {os.geteuid()} {path}` (or use a home elsewhere)"
    return f"run `chmod go-w {path}` (or use a home elsewhere)"


def walk(path: Path) -> Iterator[tuple[Path, os.stat_result, bool]]:
    """Every directory and link met resolving ``path`` from the root, with its lstat, and
    whether it is ``path``'s own final directory."""
    pending = list(path.parts[1:])
    current = Path(path.anchor or "/")
    yield current, os.lstat(current), not pending
    hops = 0
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent
            continue
        candidate = current / name
        info = os.lstat(candidate)
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", str(path))
            yield candidate, info, False
            target = Path(os.readlink(candidate))
            if target.is_absolute():
                current = Path(target.anchor)
            pending = [*target.parts[1 if target.is_absolute() else 0 :], *pending]
            continue
        current = candidate
        yield current, info, not pending


def _nearest_existing(path: Path) -> Path:
    """``path``, or the closest directory above it that exists."""
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


Findings = list[tuple[Path, str]]


def entry_refusals(
    dir_fd: int,
    shown: Path,
    strict_modes: bool,
    skip: tuple[str, ...] = (),
    relaxable: bool = True,
    names: list[str] | None = None,
    root_only: bool = False,
) -> tuple[Findings, Findings]:
    """Check every entry under the open directory ``dir_fd`` (shown as ``shown``):
    ``(refusals, warnings)`` as (path, message). Subdirectories are checked too; a symbolic
    link is checked by where it leads. ``skip`` names entries of the top directory itself
    that are not checked (state.json, which hookbus writes and never runs). ``names``: the
    top directory's listing, when the caller has just taken it. ``root_only``: the managed
    directory's entries, which root must own (and no link may leave)."""
    check = _EntryCheck(strict_modes, relaxable, root_only)
    check.directory(dir_fd, shown, skip, 0, names)
    return check.refusals, check.warnings


class _EntryCheck:
    """One walk of a directory tree, with its budget of entries and what it found."""

    def __init__(self, strict_modes: bool, relaxable: bool, root_only: bool = False) -> None:
        self.strict_modes = strict_modes
        self.relaxable = relaxable
        self.root_only = root_only
        self.refusals: Findings = []
        self.warnings: Findings = []
        self.budget = MAX_CHECKED_ENTRIES

    def directory(self, dir_fd: int, shown: Path, skip: tuple[str, ...], depth: int, listed: list[str] | None = None) -> None:
        if listed is None:
            with os.scandir(dir_fd) as entries:
                listed = [entry.name for entry in entries]
        names = sorted(listed)
        # The temp files a state.json writer makes (".state.json.<pid>.<n>.tmp") go with it.
        temporaries = tuple(f".{name}." for name in skip)
        for name in names:
            if name in skip or (temporaries and name.startswith(temporaries)):
                continue
            self.budget -= 1
            if self.budget < 0:
                message = f"holds more than {MAX_CHECKED_ENTRIES:,} files, too many to check: move the extra files elsewhere"
                self.refusals.append((shown, message))
                return
            self.entry(dir_fd, name, shown / name, depth)

    def entry(self, dir_fd: int, name: str, path: Path, depth: int) -> None:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return  # removed while we looked
        if stat.S_ISLNK(info.st_mode):
            if self.root_only:
                # What a managed hook runs is kept in the managed directory itself, where
                # only root can change it; a link would make that a question of elsewhere.
                self.refusals.append((path, "is a symbolic link, and a managed directory holds its files in place: copy the file there"))
                return
            refusal = owner_refusal(info) or _link_refusal(dir_fd, name, path.parent)
            if refusal:
                self.refusals.append((path, refusal))
            return
        refusal, warning = check_permissions(path, info, self.strict_modes, self.relaxable, self.root_only)
        if refusal:
            self.refusals.append((path, refusal))
            return
        if warning:
            self.warnings.append((path, warning))
        if not stat.S_ISDIR(info.st_mode):
            return
        if depth + 1 >= MAX_CHECKED_DEPTH:
            message = f"is nested more than {MAX_CHECKED_DEPTH} directories deep, too deep to check: flatten it"
            self.refusals.append((path, message))
            return
        try:
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            self.refusals.append((path, f"cannot be checked: {exc.strerror or exc}"))
            return
        try:
            self.directory(child, path, (), depth + 1)
        finally:
            os.close(child)


def _link_refusal(dir_fd: int, name: str, shown: Path) -> str | None:
    """A link inside a checked directory is safe when what it leads to is: the target and
    every directory on its way."""
    try:
        target = os.readlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # removed while we looked
    except OSError as exc:
        return f"cannot be checked: {exc.strerror or exc}"
    resolved = Path(os.path.join(shown, target))
    try:
        info = os.stat(resolved)
    except OSError:
        # Dangling: it runs nothing now, but whoever can create the target later decides
        # what it runs then. Safe only where nobody else can create it (not in /tmp, sticky
        # or not, nor in a directory still to be made there).
        unsafe = path_refusal(_nearest_existing(resolved.parent))
        if unsafe is None:
            return None
        where, why = unsafe
        return f"is a symbolic link to {resolved}, which does not exist, and {where} {why}"
    unsafe = path_refusal(resolved if stat.S_ISDIR(info.st_mode) else resolved.parent)
    if unsafe is not None:
        where, why = unsafe
        return f"is a symbolic link to {resolved}, and {where} {why}"
    refusal = owner_refusal(info) or loose_refusal(info)
    if refusal is not None:
        return f"is a symbolic link to {resolved}, which {refusal}: copy the file into the hook's directory"
    return None
