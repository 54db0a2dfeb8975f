"""What is written: whether a target a command writes lands in a place (``Targets.write``),
or a text a program is given names one (``Targets.scan_text``).

A target is read in each directory the command may run in, walked as the kernel walks it
(``places``). A writer that fills a tree (``tree``) writes anything below its target, so a
target that holds a place is a write into it. A glob is expanded as bash expands it,
listing directories as the writer would (through links), at most MAX_LISTED (4,096) entries
a command; past that, or when nothing matches, it is matched component by component against
each place's name (``~/.v*``, ``~/.{vix,x}``). What stays unknown (an environment variable,
another program's output) lands in a place when the text around it says so: the directory
it is built in is, or holds, a place (a write to ``~/$X/hook.json``), or a literal part
names the place's name (``$X/.vix/hooks``).
"""

from __future__ import annotations

import os
import stat
from typing import Sequence

from hookbus.policy.homeguard.bounds import MAX_LISTED, MAX_PATHS, MAX_WORDS, PATH_MAX
from hookbus.policy.homeguard.errors import Deny, Unreadable
from hookbus.policy.homeguard.globs import GLOB_CHARS, component_matches
from hookbus.policy.homeguard.places import Places, Walked, cached_lstat, hard_linked
from hookbus.policy.homeguard.text import UNQUOTE, expanded_path, hookbus_writes, path_candidates, path_like, path_words
from hookbus.policy.homeguard.values import MARK, OVERFLOW, Arg, Directory, Scope, shown


class Targets:
    """The writes of one bash command, judged; ``judge.CommandCheck`` is one, and adds the
    walk of the command."""

    def __init__(self, places: Places, command: str) -> None:
        self.places = places
        self.cache: dict[str, os.stat_result | None] = {}
        self.resolved: set[tuple[str, str | None, bool]] = set()
        #: Links the command makes (``ln -s``), followed by later commands of it.
        self.links: dict[str, str] = {}
        #: Process substitutions' paths, and what their command prints when known.
        self.substituted: dict[str, str | None] = {}
        self.dotglob = "dotglob" in command or "GLOBIGNORE" in command
        #: Directory entries listed to expand globs, for the bound.
        self.listed = 0

    def not_in_a_place(self, what: str, scope: Scope) -> None:
        """Refuse running ``what`` in a directory inside a place."""
        for cwd in scope.cwds:
            if cwd.root is not None:
                place = cwd.root.place
                raise Deny(f"the bash command runs `{what}` in {shown(cwd.logical or '')}, inside {place.label} {place.path}")

    def write(self, arg: Arg, scope: Scope, how: str, *, tree: bool = False, strict: bool = True, streams: bool = False) -> None:
        """Refuse when ``arg``, written by the command (``how``: "redirects output to",
        "runs `cp`, which writes"...), lands in a place: with ``tree``, anywhere below it
        too; not ``strict`` (an unknown program's argument, which may be no path), a bare
        word in an unknown directory is let go."""
        for value in arg.alts:
            if value == OVERFLOW:
                raise Deny(f"the bash command {how} {shown(arg.source)}, which can be more paths than the guard checks")
            for cwd in scope.cwds:
                self._write_value(value, arg, cwd, how, tree, strict, streams)

    def _write_value(self, value: str, arg: Arg, cwd: Directory, how: str, tree: bool, strict: bool, streams: bool) -> None:
        if MARK in value:
            self._write_unknown(value, arg, cwd, how, tree, strict)
            return
        if not value or value in self.substituted:
            return
        if value.startswith("/"):
            absolute = value
        elif cwd.physical is None:
            if strict or "/" in value or value.startswith("."):
                raise Deny(f"the bash command {how} {shown(arg.source)}, a relative path in a directory the guard cannot tell (after a cd it cannot follow)")
            return
        else:
            absolute = f"{cwd.physical.rstrip('/')}/{value}"
        if len(absolute) > PATH_MAX:
            return
        key = (absolute, cwd.physical, tree)
        if key in self.resolved:
            return
        self.resolved.add(key)
        if len(self.resolved) > MAX_PATHS:
            raise Deny(f"the bash command names more than {MAX_PATHS} paths: too many to check")
        if "/" not in value and value not in ("..", ".") and cwd.physical is not None:
            # A name in the working directory (already walked): one lstat says whether it
            # is a link to follow; else it lands as named.
            info = cached_lstat(absolute, self.cache)
            if (info is None or not stat.S_ISLNK(info.st_mode)) and absolute not in self.links:
                walked = Walked(absolute, cwd.root, info)
                self._judge(walked, value, arg, cwd, how, tree, strict, absolute)
                return
        try:
            walked = self.places.walk(absolute, cwd.physical, self.links, self.cache)
        except Unreadable as unreadable:
            if streams and unreadable.descriptor in (0, 1, 2) or unreadable.descriptor is not None and f"/dev/fd/{unreadable.descriptor}" in self.substituted:
                return
            raise Deny(f"the bash command {how} {shown(arg.source)}, which the guard cannot read as the writer would: {unreadable.why}") from None
        except (OSError, ValueError, RuntimeError):
            raise Deny(f"the bash command {how} {shown(arg.source)}, which the guard cannot resolve") from None
        self._judge(walked, value, arg, cwd, how, tree, strict, absolute)

    def _judge(self, walked: Walked, value: str, arg: Arg, cwd: Directory, how: str, tree: bool, strict: bool, absolute: str) -> None:
        """Refuse a write that ``walked`` shows lands in a place (or, ``tree``, above one)."""
        which = "" if walked.path == arg.source else f", which is {shown(walked.path)}"
        root = self.places.root_of(walked.path) or walked.through
        if root is not None:
            raise Deny(f"the bash command {how} {shown(arg.source)}{which}, inside {root.place.label} {root.place.path}")
        if tree:
            root = self.places.above(walked.path)
            if root is not None:
                raise Deny(f"the bash command {how} everything in {shown(arg.source)}{which}, which holds {root.place.label} {root.place.path}")
        if arg.globbed and GLOB_CHARS.search(value) is not None:
            for match in self._glob(absolute, cwd):
                self._write_value(match, Arg((match,), arg.source), cwd, how, tree, strict, True)
            root = self.places.glob_root(absolute, self.dotglob, cwd.physical, tree)
            if root is not None:
                raise Deny(f"the bash command {how} the pattern {shown(arg.source)}, which can name {root.place.label} {root.place.path}")
        if strict and hard_linked(walked, self.places.devices):
            raise Deny(f"the bash command {how} {shown(arg.source)}{which}, a file with another name (a hard link) that may be inside {self.places.roots[0].place.label}")

    def _glob(self, pattern: str, cwd: Directory) -> list[str]:
        """What bash expands the absolute ``pattern`` to, listing directories as the writer
        would (through links, /proc read as the writer's); [] when nothing matches or the
        listing goes past its bound (the pattern is then matched against the places' names
        alone)."""
        paths = ["/"]
        for component in pattern.split("/"):
            if component in ("", "."):
                continue
            if GLOB_CHARS.search(component) is None:
                paths = [f"{path.rstrip('/')}/{component}" for path in paths]
                continue
            found: list[str] = []
            for path in paths:
                try:
                    directory = self.places.walk(path, cwd.physical, self.links, self.cache).path
                    with os.scandir(directory) as entries:
                        for entry in entries:
                            self.listed += 1
                            if self.listed > MAX_LISTED:
                                return []
                            if component_matches(component, entry.name, self.dotglob):
                                found.append(f"{directory.rstrip('/')}/{entry.name}")
                except (Unreadable, OSError, ValueError, RuntimeError):
                    continue
            paths = found[:MAX_PATHS]
            if not paths:
                return []
        return paths

    def _write_unknown(self, value: str, arg: Arg, cwd: Directory, how: str, tree: bool, strict: bool) -> None:
        """A target built at run time: refused when the text around what is unknown puts
        it in a place (see the module's docstring)."""
        pieces = value.split(MARK)
        for piece in pieces:
            for name, pattern, place in self.places.dot_names:
                if pattern.search(piece) is not None:
                    raise Deny(f"the bash command {how} {shown(arg.source)}, a path built at run time with {name} in it: {place.label} {place.path}")
        head = pieces[0]
        if "/" not in head:
            if not strict:
                return
            if cwd.physical is None:
                raise Deny(f"the bash command {how} {shown(arg.source)}, a path built at run time in a directory the guard cannot tell")
            root = cwd.root or self.places.above(cwd.physical)
            if root is not None:
                raise Deny(f"the bash command {how} {shown(arg.source)}, a path built at run time in {shown(cwd.logical or '')}, which is or holds {root.place.label} {root.place.path}")
            return
        directory = head.rsplit("/", 1)[0] or "/"
        if not directory.startswith("/"):
            if cwd.physical is None:
                if strict:
                    raise Deny(f"the bash command {how} {shown(arg.source)}, a path built at run time in a directory the guard cannot tell")
                return
            directory = f"{cwd.physical.rstrip('/')}/{directory}"
        try:
            walked = self.places.walk(directory, cwd.physical, self.links, self.cache)
        except (Unreadable, OSError, ValueError, RuntimeError):
            raise Deny(f"the bash command {how} {shown(arg.source)}, a path built at run time the guard cannot read") from None
        if walked.path == "/proc" or walked.path.startswith("/proc/"):
            raise Deny(f"the bash command {how} {shown(arg.source)}, a /proc path built at run time, which the guard cannot read as the writer would")
        root = self.places.root_of(walked.path) or walked.through or self.places.above(walked.path)
        if root is not None:
            raise Deny(f"the bash command {how} {shown(arg.source)}, a path built at run time in {shown(walked.path)}, which is or holds {root.place.label} {root.place.path}")

    # -- text that is not bash ----------------------------------------------------------------------

    def scan(self, args: Sequence[Arg], scope: Scope, what: str) -> None:
        """The text rules, on a program's arguments (``scan_text``)."""
        text = "\n".join(alt.replace(MARK, " ") for arg in args for alt in arg.alts)
        if text:
            self.scan_text(text, scope, f"`{what}`")

    def scan_text(self, text: str, scope: Scope, what: str) -> None:
        """Code or text a program is given (python -c, a sed script, what a pipe feeds a
        shell): it names a place, runs hookbus install, or holds a path that lands in one."""
        unquoted = text.translate(UNQUOTE)
        for form in (text, unquoted) if unquoted != text else (text,):
            named = self.places.named(form)
            if named is not None:
                raise Deny(f"the bash command gives {what} text that {named}")
        if "hookbus" in unquoted:
            running = hookbus_writes(unquoted)
            if running is not None:
                raise Deny(f"the bash command gives {what} text that {running}")
        for count, word in enumerate(path_words(unquoted)):
            if count >= MAX_WORDS:
                raise Deny(f"the bash command gives {what} more than {MAX_WORDS} paths: too many to check")
            for candidate in path_candidates(word):
                if not path_like(candidate) or len(candidate) > PATH_MAX:
                    continue
                for cwd in scope.cwds:
                    absolute = expanded_path(candidate, cwd.logical)
                    if absolute is None:
                        raise Deny(f"the bash command gives {what} the relative path {shown(candidate)}, in a directory the guard cannot tell")
                    self._write_value(absolute, Arg((absolute,), candidate, bool(GLOB_CHARS.search(candidate))), cwd, f"gives {what} the path", False, True, True)
