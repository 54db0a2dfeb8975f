"""What a command is judged with: the values a word may expand to (``Arg``, with MARK for
what the guard cannot know), a simple command to judge (``Call``), the directories a
command may run in and what one shell knows (``Directory``, ``Scope``), the operations on
them, and how a message quotes a word (``shown``)."""

from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

import attrs

from hookbus.policy.homeguard.bounds import MAX_ALTERNATIVES, MAX_DIRECTORIES, MAX_PATHS
from hookbus.policy.homeguard.places import Root

#: The unknown part of a word's value (an environment variable, a program's output). A
#: command holding a NUL byte is refused before it is read, so none is real.
MARK = "\0"
#: A word that expands to more values than are followed.
OVERFLOW = "\0\0"


class Directory(NamedTuple):
    """A directory a command may run in: as ``cd`` names it, as the kernel has it, and the
    place it is in. ``logical`` None: the guard cannot tell which directory."""

    logical: str | None
    physical: str | None
    root: Root | None


UNKNOWN_DIRECTORY = Directory(None, None, None)


@attrs.define
class Scope:
    """What one shell knows while it reads a command list."""

    cwds: tuple[Directory, ...]
    variables: dict[str, tuple[str, ...]] = attrs.Factory(dict)
    #: Directories of a cd chained with && that may have failed: back after the chain.
    fallback: tuple[Directory, ...] = ()
    #: Where the last command, a cd, went: the next && goes there alone.
    pending: tuple[Directory, ...] | None = None
    #: Inside a loop or after a function definition: a cd may run more than once.
    repeats: bool = False
    #: Every directory a cd went to: where a popd or ``cd -`` may go back.
    seen: list[Directory] = attrs.Factory(list)
    #: The simple commands of the pipeline so far: (program, arguments, standard input).
    pipeline: list[tuple[str | None, list[Arg], str | None]] = attrs.Factory(list)
    #: What the ``while`` loop being read reads (``done < FILE``), when known.
    loop_input: str | None = None

    def child(self) -> Scope:
        """A subshell's: it starts where this one is, and changes nothing of this one."""
        return Scope(self.cwds, dict(self.variables), repeats=self.repeats, seen=list(self.seen))


class Arg(NamedTuple):
    """A word, expanded: each value it may have (with MARK for what is unknown)."""

    alts: tuple[str, ...]
    source: str
    #: It holds an unquoted glob or brace: its values are patterns.
    globbed: bool = False

    @property
    def text(self) -> str:
        return self.alts[0] if self.alts else ""


@attrs.frozen
class Call:
    """A simple command to judge: its program and arguments, expanded."""

    name: str | None
    args: list[Arg]
    #: ``NAME=value`` words before it: its environment.
    env: dict[str, tuple[str, ...]]
    #: What it reads on standard input, when the command says (a here-document).
    stdin: str | None
    #: The file it reads standard input from (``< FILE``), read only when that matters.
    stdin_file: Arg | None = None


#: How much of a path or word a phrase quotes.
_SHOWN = 160


def shown(text: str) -> str:
    """``text`` as a phrase quotes it: short, and without control characters."""
    text = text.replace(MARK, "?")
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    return text if text.isprintable() else repr(text)


def flatten(args: Iterable[Arg]) -> tuple[str, ...]:
    """Every value of ``args``, once each (at most MAX_PATHS); one empty value for none."""
    values = tuple(dict.fromkeys(alt for arg in args for alt in arg.alts))
    return values[:MAX_PATHS] or ("",)


def combinations(choices: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Each way of taking one value of each choice, in order (at most MAX_ALTERNATIVES)."""
    found: list[tuple[str, ...]] = [()]
    for choice in choices:
        found = [(*prefix, value) for prefix in found for value in choice][:MAX_ALTERNATIVES]
    return found


def joined_entry(directory: Arg, entry: Arg) -> Arg:
    """``directory``'s entry named as ``entry``'s last component (cp SRC DIR writes DIR/SRC's name)."""
    names = [alt.rstrip("/").rsplit("/", 1)[-1] for alt in entry.alts if alt.rstrip("/")]
    values = tuple(dict.fromkeys(f"{base.rstrip('/')}/{name}" if base.rstrip("/") else f"/{name}" for base in directory.alts for name in names))
    return Arg(values[:MAX_PATHS] or directory.alts, f"{directory.source}/{entry.source}", directory.globbed or entry.globbed)


def joined_path(base: Arg, path: Arg) -> Arg:
    """``path`` read from ``base`` (``git -C BASE -C PATH``)."""
    values = tuple(dict.fromkeys(alt if alt.startswith("/") else f"{start.rstrip('/')}/{alt}" for start in base.alts for alt in path.alts))
    return Arg(values[:MAX_PATHS], path.source, path.globbed)


def unique_directories(found: tuple[Directory, ...]) -> tuple[Directory, ...]:
    """``found`` once each; past MAX_DIRECTORIES, an unknown directory too."""
    unique = tuple(dict.fromkeys(found))
    if len(unique) > MAX_DIRECTORIES:
        return (*unique[:MAX_DIRECTORIES], UNKNOWN_DIRECTORY)
    return unique
