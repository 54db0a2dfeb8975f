"""The protected places, and paths read as the writer reads them.

A target is expanded (``~``), made absolute against the envelope's ``cwd`` (else this
process's working directory), and walked one component at a time as the kernel walks it:
each symbolic link followed from where it stands, ``..`` taken after the link's target. A
path that goes through ``/proc/self``, ``/proc/thread-self`` or a link to them
(``/dev/fd``, ``/dev/stdout``) is read as the *writer's* process would read it, not this
one's (a ``hookbus serve`` has its own working directory): ``/proc/self/cwd`` is the
writer's working directory, ``/proc/self/root`` is ``/``; another process's entry
(``/proc/<pid>/cwd``), a descriptor (``/proc/self/fd/N``), or ``/proc/self/cwd`` with no
working directory cannot be read so, and is refused (in bash, descriptors 0-2 are the
command's own streams, whose redirections are checked themselves). A path lands in a place
when where it leads is inside it (its configured path or its realpath, equal or followed by
``/``), or when it goes through a link that stands inside it (``hooks -> /srv/hooks`` writes
hooks all the same); a sibling that only shares a prefix (``~/.vix-other``) is not inside.
A regular file with another name (a hard link) on a place's file system is refused as a
write target too: its other name may be a hook.

Cost: the places' realpaths and regexes are built once, when ``Places`` is; a write target
costs an ``lstat`` per component, cached within a call.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Mapping, NamedTuple, Sequence

import attrs

from hookbus.policy.homeguard.bounds import MAX_LINKS
from hookbus.policy.homeguard.errors import Unreadable
from hookbus.policy.homeguard.globs import GLOB_CHARS, component_matches
from hookbus.policy.homeguard.text import UNQUOTE, component_pattern, path_pattern, variable_pattern


@attrs.frozen
class ProtectedPlace:
    #: "the hookbus home" or "the managed directory": used in messages.
    label: str
    #: The path as configured, absolute (already made absolute by the caller).
    path: str
    #: Environment variable names whose value is this place (e.g. ("VIX_HOME",) or ("HOOKBUS_MANAGED_DIR",)).
    variables: tuple[str, ...] = ()
    #: Extra spellings a shell would read as this path, e.g. ("~/.vix", "$HOME/.vix", "${HOME}/.vix") when the home is the default ~/.vix; the caller passes them.
    spellings: tuple[str, ...] = ()


@attrs.frozen
class Root:
    """One path a place is known by (configured, or resolved), ready to compare."""

    place: ProtectedPlace
    path: str
    #: ``path`` and a slash: what a path inside it starts with.
    prefix: str
    #: ``path``'s components, without the empty one before the first slash.
    parts: tuple[str, ...]


class Walked(NamedTuple):
    """Where a path leads, walked as the kernel walks it."""

    path: str
    #: A place that a link on the way stands in (the path went through it), if any.
    through: Root | None
    #: The path's own lstat, when it exists.
    stat: os.stat_result | None


# Entries of a /proc/<pid> directory that lead out of procfs, or that name a descriptor.
_PROC_LINKS = frozenset({"cwd", "root", "exe", "fd", "fdinfo", "map_files", "task", "ns"})


class Places:
    """The places, ready to compare: the paths each is known by (configured, and resolved),
    the regexes of the text rules, the file systems they are on, their variables."""

    def __init__(self, places: Sequence[ProtectedPlace]) -> None:
        roots: list[Root] = []
        # Text rules (for code and other programs' arguments): (regex, what it finds, as a
        # phrase shows it, place), first found first.
        names: dict[str, tuple[re.Pattern[str], str, ProtectedPlace]] = {}
        dot_names: dict[str, ProtectedPlace] = {}
        devices: set[int] = set()
        for place in places:
            configured = os.path.abspath(place.path)
            try:
                resolved = os.path.realpath(configured)
            except (OSError, ValueError):
                resolved = configured  # a path no file can have: its spelling is all there is
            for path in dict.fromkeys((configured, resolved)):
                prefix = path if path.endswith("/") else path + "/"
                roots.append(Root(place, path, prefix, tuple(part for part in path.split("/") if part)))
            spellings = (spelling.rstrip("/") or spelling for spelling in place.spellings)
            for text in (configured, resolved, *spellings):
                # The unquoted form too: it is matched against the unquoted copy of a text.
                for form in (text, text.translate(UNQUOTE)):
                    if form and form not in names:
                        names[form] = (path_pattern(form), text, place)
            for variable in place.variables:
                for form in (f"${variable}", f"${{{variable}"):
                    if form not in names:
                        names[form] = (variable_pattern(form), f"${variable}", place)
            for path in (configured, resolved):
                name = os.path.basename(path)
                if name.startswith(".") and len(name) >= 3:
                    dot_names.setdefault(name, place)
                    if name not in names:
                        names[name] = (component_pattern(name), name, place)
                try:
                    devices.add(os.stat(os.path.dirname(path) or "/").st_dev)
                except (OSError, ValueError):
                    pass
        self.roots = tuple(roots)
        self.names = tuple(names.values())
        self.dot_names = tuple((name, component_pattern(name), place) for name, place in dot_names.items())
        self.devices = frozenset(devices)
        self.variables = {variable: place.path for place in places for variable in place.variables}

    def walk(
        self,
        absolute: str,
        writer_cwd: str | None,
        links: Mapping[str, str] | None = None,
        cache: dict[str, os.stat_result | None] | None = None,
    ) -> Walked:
        """``absolute`` walked as the kernel walks it for the writer, whose working
        directory is ``writer_cwd``; ``links``: links made earlier in the same command.
        Raises Unreadable for what only the writer's process could read (see the module's
        docstring), OSError for a loop of links."""
        pending = absolute.split("/")[::-1]
        done = ""  # the root
        hops = 0
        through: Root | None = None
        missing = False
        info: os.stat_result | None = None
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                done = done.rsplit("/", 1)[0]
                info = None
                continue
            if not missing and done == "/proc" and (name in ("self", "thread-self") or name.isdigit()):
                entry = _next_component(pending)
                if entry is None:
                    return Walked(f"/proc/{name}", through, None)
                if entry == "..":
                    continue
                if name.isdigit():
                    if entry in _PROC_LINKS:
                        raise Unreadable(f"/proc/{name}/{entry} is another process's")
                    return Walked("/".join([f"/proc/{name}/{entry}", *reversed(pending)]), through, None)
                if entry in ("cwd", "root"):
                    # A link the kernel follows, and counts: a working directory that is
                    # itself /proc/self/cwd would otherwise be followed for ever.
                    hops += 1
                    if hops > MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symbolic links", absolute)
                    if entry == "cwd":
                        if writer_cwd is None:
                            raise Unreadable(f"/proc/{name}/cwd is the writer's working directory, which is unknown")
                        pending.extend(writer_cwd.split("/")[::-1])
                    done = ""
                    continue
                if entry in ("fd", "fdinfo"):
                    number = _next_component(pending)
                    descriptor = int(number) if number is not None and number.isdigit() else None
                    raise Unreadable(f"/proc/{name}/{entry}/{number or ''} is a descriptor of the writer", descriptor)
                if entry in _PROC_LINKS:
                    raise Unreadable(f"/proc/{name}/{entry} is the writer's")
                return Walked("/".join([f"/proc/{name}/{entry}", *reversed(pending)]), through, None)
            candidate = f"{done}/{name}"
            if missing:
                done = candidate
                continue
            target = links.get(candidate) if links else None
            if target is None:
                found = cached_lstat(candidate, cache)
                if found is None:
                    missing = True
                    done = candidate
                    info = None
                    continue
                if not stat.S_ISLNK(found.st_mode):
                    done = candidate
                    info = found
                    continue
                target = os.readlink(candidate)
            hops += 1
            if hops > MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", absolute)
            if through is None:
                through = self.root_of(candidate)
            if target.startswith("/"):
                done = ""
            pending.extend(target.split("/")[::-1])
            info = None
        return Walked(done or "/", through, info)

    def root_of(self, path: str) -> Root | None:
        """The place ``path`` is in (equal, or below it), or None."""
        for root in self.roots:
            if path == root.path or path.startswith(root.prefix):
                return root
        return None

    def above(self, path: str) -> Root | None:
        """A place strictly inside ``path``: what a recursive write there reaches."""
        prefix = path if path.endswith("/") else path + "/"
        for root in self.roots:
            if root.path.startswith(prefix):
                return root
        return None

    def glob_root(self, absolute: str, dotglob: bool, writer_cwd: str | None, holds: bool) -> Root | None:
        """A place that the pattern ``absolute`` can name, or something inside it (or, with
        ``holds``, a directory above it)."""
        components = absolute.split("/")
        first = next((index for index, part in enumerate(components) if GLOB_CHARS.search(part)), len(components))
        prefix = "/".join(components[:first]) or "/"
        try:
            base = self.walk(prefix, writer_cwd).path
        except (Unreadable, OSError, ValueError, RuntimeError):
            base = prefix
        parts = [part for part in base.split("/") if part] + [part for part in components[first:] if part and part != "."]
        for root in self.roots:
            matched = all(component_matches(pattern, name, dotglob) for pattern, name in zip(parts, root.parts))
            if matched and (len(parts) >= len(root.parts) or holds):
                return root
        return None

    def named(self, text: str) -> str | None:
        """The text rules: a place's path or spelling as a whole path, its variable, its
        dot-name as a path component. One regex per name: each starts with its name's first
        character, so the engine skips to where that name is."""
        for pattern, shown, place in self.names:
            if pattern.search(text) is not None:
                return f"names {place.label} ({shown})"
        return None


def _next_component(pending: list[str]) -> str | None:
    while pending:
        name = pending.pop()
        if name not in ("", "."):
            return name
    return None


def cached_lstat(path: str, cache: dict[str, os.stat_result | None] | None) -> os.stat_result | None:
    """``path``'s lstat, or None when nothing is there to follow (missing, not a directory,
    not searchable: the kernel's write fails there too, or lands as named)."""
    if cache is not None and path in cache:
        return cache[path]
    try:
        found: os.stat_result | None = os.lstat(path)
    except (OSError, ValueError):
        found = None
    if cache is not None:
        cache[path] = found
    return found


def hard_linked(walked: Walked, devices: frozenset[int]) -> bool:
    """A regular file with more than one name, on a place's file system."""
    info = walked.stat
    return info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink > 1 and info.st_dev in devices
