"""Bash's patterns, as the guard matches them: brace expansion (``.{vix,x}``), and whether
a glob's path component can name an entry (``~/.v*`` can name ``.vix``)."""

from __future__ import annotations

import fnmatch
import re

GLOB_CHARS = re.compile(r"[*?[{]")
#: A glob component longer than this is taken as matching anything: no name is this long
#: (NAME_MAX is 255), and compiling it is not worth the time.
MAX_GLOB = 1024
_INNER_BRACE = re.compile(r"\{([^{}]*)\}")
#: Words a component's brace groups expand to, at most; past it, any name may result.
_MAX_EXPANSIONS = 64


def component_matches(pattern: str, name: str, dotglob: bool) -> bool:
    """Whether bash could expand the path component ``pattern`` to ``name``."""
    if pattern == name:
        return True
    if GLOB_CHARS.search(pattern) is None:
        return False
    words = brace_words(pattern) if len(pattern) <= MAX_GLOB else None
    if words is None:
        return True  # a pattern it does not read: assume the worst
    for word in words:
        if word == name:
            return True
        # Globbing comes after brace expansion; a leading dot is matched only by a dot.
        if name.startswith(".") and not word.startswith(".") and not dotglob:
            continue
        # fnmatch's translation does not backtrack catastrophically (since 3.9); compiled
        # through re's bounded cache, not fnmatch's own (32768 patterns an agent chooses).
        # Bash reads [^...] as [!...].
        if re.match(fnmatch.translate(word.replace("[^", "[!")), name) is not None:
            return True
    return False


def brace_words(pattern: str) -> list[str] | None:
    """The words bash's brace expansion makes of ``pattern`` (``.{vix,x}`` -> ``.vix``,
    ``.x``), innermost group first; None for a sequence (``{a..z}``), a group it does not
    expand (``{x}``) or more than _MAX_EXPANSIONS words."""
    pending: list[str] = [pattern]
    words: list[str] = []
    while pending:
        word = pending.pop()
        group = _INNER_BRACE.search(word)
        if group is None:
            words.append(word)  # an unpaired brace is a literal character
            continue
        if "," not in group.group(1):
            return None
        head, tail = word[: group.start()], word[group.end() :]
        pending.extend(head + part + tail for part in group.group(1).split(","))
        if len(pending) + len(words) > _MAX_EXPANSIONS:
            return None
    return words
