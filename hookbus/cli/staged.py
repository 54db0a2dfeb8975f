"""A hook drafted outside the home (``hookbus new ID --dir DIR``), on its way in
(``hookbus install DIR/ID``): checked file by file, copied, and loaded as the home loads it.

An agent may not write into the home (a hook there runs at the next event, outside the
agent's sandbox), so it drafts hooks elsewhere and the user installs them. What is copied is
what hookbus would obey, so the staged tree is held to the home's trust rules before a byte
of it is copied: no symbolic link (once installed it could lead anywhere), no FIFO or
device, nothing owned by another user or writable by group or others, at most
``MAX_FILES`` entries and ``MAX_BYTES`` in all. The copy checks each file again on what it
opened, since whoever drafted it may still be changing it.

The copy is then loaded in a scratch home: ``ROOT/hooks/ID`` beside copies of the home's
settings.json and config/, so that the hook is read by the loader, with the home's settings,
exactly as it will be once in place. ``hookbus install`` makes that scratch home inside
``HOME/hooks/`` under a name the loader passes over, so that the validated copy is the one
renamed into place: nothing the drafter changes after the check is installed.

Its fixtures run the hook's own code, which can write wherever you can: into the copy it
runs from, into the draft, into a process that goes on after it. So they run from another
copy, in a scratch home of the system's temporary directory; ``manifest_of`` takes what a
copy holds (every path, its kind, mode and content's digest), taken as it is made and
compared after each fixture (a fixture that changed the hook's own files checked something
else than what would be installed) and again before and after the checked copy is moved
into place (``differences`` says what changed).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Iterator, Mapping

import attrs

from hookbus.cli.core import UsageError, open_bus, warn
from hookbus.files import kind_of
from hookbus.permissions import loose_refusal, owner_refusal
from hookbus.registry import SPEC_NAMES
from hookbus.trust import MAX_CHECKED_DEPTH, STATE_FILES

if TYPE_CHECKING:
    from hookbus.bus import HookBus
    from hookbus.home import Home
    from hookbus.policy.fixtures import FixtureResult

#: Entries of a staged hook (files and directories), at most: a hook needs a few.
MAX_FILES = 1_000
#: Bytes of a staged hook's files, at most.
MAX_BYTES = 16 << 20
#: What each read of a copy takes at most.
CHUNK = 1 << 20

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the survey must not block the open; fstat refuses it.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refusal(Exception):
    """A staged hook hookbus will not copy: the message names the file and says how to fix it."""


@attrs.frozen
class Copied:
    """What a walk of a staged hook found (or copied)."""

    #: Regular files.
    files: int
    #: Files and directories under the hook's directory.
    entries: int
    size: int
    #: The names directly in the hook's directory.
    names: tuple[str, ...]


def survey(source: Path) -> Copied:
    """What ``source`` holds, checked as ``copy_hook`` checks it, writing nothing: Refusal
    at the first entry it would not copy, or when it holds no hook.json or hook.yaml."""
    walk = _Walk(source)
    walk.run(None)
    found = walk.result()
    specs = [name for name, _ in SPEC_NAMES]
    if not any(name in found.names for name in specs):
        raise Refusal(f"{source} holds no {' or '.join(specs)}, so it is no hook: name the hook's own directory")
    return found


def copy_hook(source: Path, target: Path) -> Copied:
    """Copy the hook directory ``source`` to ``target`` (which must not exist), checking every
    entry on what it opened. Modes are kept without group and others' write (and without
    set-id bits: the copy may be root's), each file and directory is synced, a top-level
    state.json is left behind. Refusal, or OSError, leaves a partial ``target`` for the
    caller to remove."""
    os.mkdir(target, 0o700)
    walk = _Walk(source)
    target_fd = os.open(target, _DIRECTORY_FLAGS)
    try:
        walk.run(target_fd)
        os.fchmod(target_fd, _directory_mode(walk.source_mode))
        os.fsync(target_fd)
    finally:
        os.close(target_fd)
    sync_directory(target.parent)
    return walk.result()


def copy_data(source: int, target: int, limit: int) -> int:
    """Copy the file open on ``source`` to ``target``; stop past ``limit`` bytes. How many
    bytes were read (more than ``limit``: the file is too big)."""
    copied = 0
    while copied <= limit:
        chunk = os.read(source, min(CHUNK, limit + 1 - copied))
        if not chunk:
            break
        copied += len(chunk)
        view = memoryview(chunk)
        while view:
            view = view[os.write(target, view):]
    return copied


def sync_directory(directory: Path) -> None:
    """fsync a directory, so that the entries made or renamed in it survive a crash."""
    fd = os.open(directory, _DIRECTORY_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _file_mode(info: os.stat_result) -> int:
    # No set-id bits: run as root, a copy would be a root set-uid program of the drafter's.
    return stat.S_IMODE(info.st_mode) & 0o755


def _directory_mode(mode: int) -> int:
    # The owner keeps full access: the install renames the directory and may remove it.
    return (mode & 0o755) | 0o700


class _Walk:
    """One walk of a staged hook: every entry checked, counted, and copied when there is a
    target. Directories are opened relative to their parent, without following links, so
    that what is checked is what is read."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.source_mode = 0o700
        self.entries = 0
        self.files = 0
        self.size = 0
        self.names: list[str] = []

    def result(self) -> Copied:
        return Copied(self.files, self.entries, self.size, tuple(self.names))

    def run(self, target: int | None) -> None:
        fd = _open_directory(self.source, None, self.source)
        try:
            info = os.fstat(fd)
            _check(self.source, info)
            self.source_mode = stat.S_IMODE(info.st_mode)
            self.directory(fd, target, PurePath(), 0)
        finally:
            os.close(fd)

    def directory(self, fd: int, target: int | None, relative: PurePath, depth: int) -> None:
        for name in sorted(os.listdir(fd)):
            if depth == 0:
                if name in STATE_FILES:
                    continue  # the hook's history where it was drafted, not part of it
                self.names.append(name)
            self.entry(fd, target, name, relative / name, depth)

    def entry(self, fd: int, target: int | None, name: str, relative: PurePath, depth: int) -> None:
        where = self.source / relative
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return  # removed while we looked: it is not part of what is copied
        _check(where, info)
        self.entries += 1
        if self.entries > MAX_FILES:
            raise Refusal(f"{self.source} holds more than {MAX_FILES:,} files and directories, more than a hook needs: move the others out of it")
        if stat.S_ISDIR(info.st_mode):
            self.subdirectory(fd, target, name, relative, depth, info)
            return
        self.files += 1
        if target is None:
            self.size += info.st_size
            self._check_size()
        else:
            self.copy_file(fd, target, name, where)  # counts what it reads: the file may have grown

    def subdirectory(self, fd: int, target: int | None, name: str, relative: PurePath, depth: int, info: os.stat_result) -> None:
        where = self.source / relative
        # The loader's own bound: deeper than it checks, the installed hook would not load.
        if depth + 1 >= MAX_CHECKED_DEPTH:
            raise Refusal(f"{where} is nested more than {MAX_CHECKED_DEPTH} directories deep, deeper than hookbus checks a hook: flatten it")
        child = _open_directory(name, fd, where)
        child_target: int | None = None
        try:
            info = os.fstat(child)  # what was opened, which the lstat may not have been
            _check(where, info)
            if target is not None:
                os.mkdir(name, 0o700, dir_fd=target)
                child_target = os.open(name, _DIRECTORY_FLAGS, dir_fd=target)
            self.directory(child, child_target, relative, depth + 1)
            if child_target is not None:
                os.fchmod(child_target, _directory_mode(stat.S_IMODE(info.st_mode)))
                os.fsync(child_target)
        finally:
            os.close(child)
            if child_target is not None:
                os.close(child_target)

    def copy_file(self, fd: int, target: int, name: str, where: Path) -> None:
        source = _open_file(name, fd, where)
        try:
            info = os.fstat(source)
            _check(where, info)
            if not stat.S_ISREG(info.st_mode):
                raise Refusal(f"{where} changed from a file to a directory while it was copied: stop changing it, then install it again")
            copy = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=target)
            try:
                self.size += copy_data(source, copy, MAX_BYTES - self.size)
                self._check_size()
                os.fchmod(copy, _file_mode(info))
                os.fsync(copy)
            finally:
                os.close(copy)
        finally:
            os.close(source)

    def _check_size(self) -> None:
        if self.size > MAX_BYTES:
            raise Refusal(f"{self.source} holds more than {MAX_BYTES >> 20} MiB, more than a hook needs: move the large files out of it")


def _open_directory(name: str | Path, parent: int | None, where: Path) -> int:
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _refusal_of(exc, where, "a directory") from None


def _open_file(name: str, parent: int, where: Path) -> int:
    try:
        return os.open(name, _FILE_FLAGS, dir_fd=parent)
    except OSError as exc:
        raise _refusal_of(exc, where, "a file") from None


def _refusal_of(exc: OSError, where: Path, what: str) -> Refusal:
    if exc.errno == errno.ELOOP:
        return Refusal(_LINK.format(where=where))
    if exc.errno == errno.ENOENT:
        return Refusal(f"{where} does not exist: name the directory of the hook to install")
    if exc.errno == errno.ENOTDIR:
        return Refusal(f"{where} is not a directory: name the hook's directory, the one that holds its hook.json")
    return Refusal(f"cannot read {where} ({what}): {exc.strerror or exc}")


_LINK = (
    "{where} is a symbolic link, and a hook is installed without links (once in the home, a link "
    "could lead anywhere): replace it with what it points to, or remove it"
)


def _check(where: Path, info: os.stat_result) -> None:
    """Refusal when the entry ``info`` (at ``where``) may not become part of a hook."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        raise Refusal(_LINK.format(where=where))
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise Refusal(f"{where} is a {kind_of(mode)}, and a hook holds only files and directories: remove it")
    foreign = owner_refusal(info)
    if foreign is not None:
        raise Refusal(
            f"{where} {foreign}, so it is not yours to install: check what it holds, then run "
            f"`chown {os.geteuid()} {where}` (or copy it)"
        )
    loose = loose_refusal(info)
    if loose is not None:
        raise Refusal(f"{where} {loose}, so another user could have changed it: check what it holds, then run `chmod go-w {where}`")


# -- the scratch home ----------------------------------------------------------------------------


@contextlib.contextmanager
def scratch_home(home: Home, parent: Path | None, prefix: str) -> Iterator[Path]:
    """A new directory (mode 0700) in ``parent`` (None: the system's temporary directory),
    named ``PREFIX...tmp`` and holding ``hooks/`` and copies of ``home``'s settings.json and
    config/: a home that loads a hook as ``home`` would. Removed, with all it holds, on the
    way out."""
    root = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))
    try:
        os.mkdir(root / "hooks", 0o700)
        _mirror(home, root)
        yield root
    finally:
        if not remove_tree(root):
            warn(f"hookbus: could not remove the temporary directory {root}: remove it by hand")


def remove_tree(root: Path) -> bool:
    """Remove ``root`` and what it holds (a read-only directory in it is no obstacle);
    whether it is gone."""
    try:
        shutil.rmtree(root)
    except FileNotFoundError:
        pass
    except OSError:
        for directory, _, _ in os.walk(root):
            with contextlib.suppress(OSError):
                os.chmod(directory, 0o700)
        shutil.rmtree(root, ignore_errors=True)
    return not os.path.lexists(root)


def _mirror(home: Home, root: Path) -> None:
    """settings.json and config/ of ``home`` in ``root``, as they are (modes and links
    kept): what the loader reads of the home besides the hook. A FIFO or device there is
    left out rather than opened (it could block)."""
    try:
        if os.path.lexists(home.settings_path):
            _copy_entry(str(home.settings_path), str(root / "settings.json"))
        if os.path.islink(home.config_dir):
            os.symlink(os.readlink(home.config_dir), root / "config")
        elif os.path.isdir(home.config_dir):
            shutil.copytree(home.config_dir, root / "config", symlinks=True, copy_function=_copy_entry)
    except (OSError, shutil.Error) as exc:
        raise UsageError(f"cannot read the settings of the home {home.root} to check the hook against: {exc}") from None


def _copy_entry(source: str, target: str) -> str:
    info = os.lstat(source)
    if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
        shutil.copy2(source, target, follow_symlinks=False)
    return target


# -- loading it ----------------------------------------------------------------------------------


@attrs.frozen
class Review:
    """What loading a hook in a home said of it."""

    #: It loaded, with no problem (its scripts and fixture files included).
    valid: bool
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    #: settings.json names a prompt provider.
    has_provider: bool
    #: The fixtures run (when asked), and those left for after the install.
    results: tuple[FixtureResult, ...] = ()
    merged: tuple[str, ...] = ()
    #: The fixture whose run changed the hook's own files, and what it changed
    #: (``differences``); the fixtures after it were not run.
    changed_by: str | None = None
    changes: tuple[str, ...] = ()


def hook_problems(bus: HookBus, hook_id: str) -> tuple[bool, list[str], list[str]]:
    """Whether hook ``hook_id`` of ``bus``'s home is valid as ``hookbus validate ID`` says,
    its problems (or those of the home that keep it from loading), and its warnings."""
    from hookbus.cli.scripts import script_findings
    from hookbus.policy.fixtures import fixture_problems

    snapshot = bus.snapshot
    hook = snapshot.hooks.get(hook_id)
    problems = [str(problem) for problem in snapshot.problems if problem.hook_id == hook_id]
    if hook is None and not problems:
        # Not loaded, and nothing said of it: what keeps the whole home from loading.
        problems = [str(problem) for problem in snapshot.problems if problem.hook_id is None]
    if hook is not None and not problems:
        problems = script_findings(hook, bus.home.root, snapshot.settings.strict_modes) + fixture_problems(bus.home.root, hook_id)
    if hook is None and not problems:
        problems = [f"hooks/{hook_id}: it did not load"]
    warnings = [warning for warning in snapshot.warnings if warning.startswith((f"hooks/{hook_id}/", f"hooks/{hook_id} "))]
    return hook is not None and not problems, problems, warnings


def review(root: Path, hook_id: str, *, run_tests: bool, manifest: Manifest | None = None) -> Review:
    """Load the home ``root`` as ``hookbus validate`` does and say what it makes of hook
    ``hook_id``; with ``run_tests``, and when it is valid, run its fixtures as ``hookbus
    test`` does (nothing recorded). A ``"merged": true`` fixture is not run: it checks the
    hook with the rest of the home, which is not here. With ``manifest`` (what the hook's
    directory held before), the directory is compared with it after each fixture, and the
    first that changed it stops the run (``changed_by``, ``changes``)."""
    import argparse

    with open_bus(argparse.Namespace(home=str(root), verb="install"), quiet=True, read_only=True) as bus:
        valid, problems, warnings = hook_problems(bus, hook_id)
        has_provider = bool(bus.snapshot.settings.raw.get("prompt_provider"))
        if not (run_tests and valid):
            return Review(valid, tuple(problems), tuple(warnings), has_provider)
        run = _run_fixtures(bus, hook_id, manifest)
    return Review(valid, tuple(problems), tuple(warnings), has_provider, *run)


def _run_fixtures(
    bus: HookBus, hook_id: str, manifest: Manifest | None
) -> tuple[tuple[FixtureResult, ...], tuple[str, ...], str | None, tuple[str, ...]]:
    from hookbus.policy.fixtures import fixture_files, load_fixture, run_fixture

    root = Path(bus.home.root)
    results: list[FixtureResult] = []
    merged: list[str] = []
    for path in fixture_files(root, hook_id):
        fixture = load_fixture(root, hook_id, path)  # each was read once already: valid
        if fixture.merged:
            merged.append(fixture.path)
            continue
        results.append(run_fixture(bus, fixture))
        if manifest is not None:
            changes = differences(manifest, _without_bytecode_added(manifest, manifest_of(root / "hooks" / hook_id)))
            if changes:
                return tuple(results), tuple(merged), fixture.path, tuple(changes)
    return tuple(results), tuple(merged), None, ()


def _without_bytecode_added(before: Manifest, after: dict[str, Entry]) -> dict[str, Entry]:
    """``after`` less the ``__pycache__`` entries Python added as a hook imported a module
    beside it: Python's doing, not the hook's, and never part of what is installed (the
    copy the fixtures ran from is thrown away)."""
    return {path: entry for path, entry in after.items() if path in before or "__pycache__" not in PurePath(path).parts}


# -- what a copy holds ---------------------------------------------------------------------------

#: One entry of a hook's directory: its kind ("file", "directory", or what else it is), its
#: mode, its content's SHA-256 (files), and how many names it has (files: a hard link made
#: to it elsewhere is a way to change it later).
Entry = tuple[str, int, str, int]
#: A hook's directory, by path relative to it ("." for itself).
Manifest = Mapping[str, Entry]
#: What hookbus itself writes in a hook's directory once it is in place: state.json, and its
#: temporary (``.state.json.<pid>.<n>.tmp``).
_RECORDER_FILES = re.compile(r"state\.json|\.state\.json\.[0-9]+\.[0-9]+\.tmp")


def manifest_of(directory: Path, *, in_place: bool = False) -> dict[str, Entry]:
    """What ``directory`` holds, read without following a link or opening a FIFO:
    every entry's kind, mode and, for a file, its content's digest and how many names it
    has. ``in_place``: the directory is a hook of the home, whose top-level state.json the
    recorder may write at any time; it is left out. Past MAX_FILES entries, MAX_BYTES of
    content or MAX_CHECKED_DEPTH levels, a ``...`` entry says there is more."""
    found: dict[str, Entry] = {}
    try:
        fd = os.open(directory, _DIRECTORY_FLAGS)
    except OSError as exc:
        return {".": (_missing(exc), 0, "", 0)}
    try:
        found["."] = ("directory", stat.S_IMODE(os.fstat(fd).st_mode), "", 0)
        _ManifestWalk(found, in_place).directory(fd, PurePath(), 0)
    finally:
        os.close(fd)
    return found


def _missing(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "nothing"
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return "symbolic link or a file"
    return f"unreadable ({exc.strerror or exc})"


class _ManifestWalk:
    def __init__(self, found: dict[str, Entry], in_place: bool) -> None:
        self.found = found
        self.in_place = in_place
        self.read = 0

    def directory(self, fd: int, relative: PurePath, depth: int) -> None:
        for name in sorted(os.listdir(fd)):
            if depth == 0 and self.in_place and _RECORDER_FILES.fullmatch(name):
                continue
            if len(self.found) > MAX_FILES + 1 or self.read > MAX_BYTES:  # + 1: the directory itself
                self.found["..."] = ("more than a hook holds", 0, "", 0)
                return
            self.entry(fd, name, str(relative / name), depth)

    def entry(self, fd: int, name: str, shown: str, depth: int) -> None:
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISDIR(info.st_mode):
            self.found[shown] = ("directory", mode, "", 0)
            if depth + 1 >= MAX_CHECKED_DEPTH:
                self.found[f"{shown}/..."] = ("deeper than hookbus checks", 0, "", 0)
                return
            try:
                child = os.open(name, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError as exc:
                self.found[shown] = (_missing(exc), mode, "", 0)
                return
            try:
                self.directory(child, PurePath(shown), depth + 1)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode):
            self.found[shown] = self.file(fd, name, info)
        else:
            self.found[shown] = (kind_of(info.st_mode), mode, "", 0)

    def file(self, fd: int, name: str, info: os.stat_result) -> Entry:
        try:
            handle = os.open(name, _FILE_FLAGS, dir_fd=fd)
        except OSError as exc:
            return (_missing(exc), stat.S_IMODE(info.st_mode), "", 0)
        try:
            opened = os.fstat(handle)
            if not stat.S_ISREG(opened.st_mode):
                return (kind_of(opened.st_mode), stat.S_IMODE(opened.st_mode), "", 0)
            if opened.st_size > MAX_BYTES - self.read:
                self.read += opened.st_size
                return ("file", stat.S_IMODE(opened.st_mode), f"{opened.st_size} bytes, too many to read", opened.st_nlink)
            digest = hashlib.sha256()
            while True:
                chunk = os.read(handle, CHUNK)
                if not chunk:
                    break
                self.read += len(chunk)
                digest.update(chunk)
            return ("file", stat.S_IMODE(opened.st_mode), digest.hexdigest(), opened.st_nlink)
        finally:
            os.close(handle)


#: How many differences a message names before it says how many more there are.
SHOWN_DIFFERENCES = 5


def differences(expected: Manifest, found: Manifest) -> list[str]:
    """What changed from ``expected`` to ``found``, one phrase per path: ``hook.json: its
    content changed``, ``evil.sh: added``, ``check.sh: its mode changed from 0700 to 0755``."""
    said = []
    for path in sorted({*expected, *found}):
        shown = "the hook's directory" if path == "." else path
        before, after = expected.get(path), found.get(path)
        if before is None:
            assert after is not None
            said.append(f"{shown}: added" + ("" if after[0] == "file" else f" (a {after[0]})"))
        elif after is None:
            said.append(f"{shown}: removed")
        elif before[0] != after[0]:
            said.append(f"{shown}: now a {after[0]}")
        elif before[1] != after[1]:
            said.append(f"{shown}: its mode changed from {before[1]:04o} to {after[1]:04o}")
        elif before[2] != after[2]:
            said.append(f"{shown}: its content changed")
        elif before[3] != after[3]:
            said.append(f"{shown}: it has {after[3]} names now (a hard link to it was made)")
    return said


def said_briefly(changes: list[str] | tuple[str, ...]) -> str:
    """``changes`` as one clause: the first SHOWN_DIFFERENCES, and how many more."""
    shown = "; ".join(changes[:SHOWN_DIFFERENCES])
    more = len(changes) - SHOWN_DIFFERENCES
    return shown + (f"; and {more} more" if more > 0 else "")


def shown_as(line: str, root: Path, hook_id: str, source: Path, home: Home) -> str:
    """A line about the scratch home's copy, naming the staged files instead (and the home
    instead of the scratch one), so that it says which file to fix."""
    copy = root / "hooks" / hook_id
    line = line.replace(str(copy), str(source)).replace(str(root), str(home.root))
    prefix = f"hooks/{hook_id}"
    if line.startswith(prefix) and line[len(prefix):len(prefix) + 1] in ("/", ":", " "):
        line = str(source) + line[len(prefix):]
    return line
