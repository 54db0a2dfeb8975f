"""What the reader makes of bash: words and their parts (literals, parameters,
substitutions, arithmetic), simple commands with their redirections, operators and
reserved words, subshells, ``for`` loops; and what an assignment word (``NAME=value``)
assigns."""

from __future__ import annotations

import re
from typing import NamedTuple, Union

import attrs


class Lit(NamedTuple):
    text: str
    quoted: bool


class Var(NamedTuple):
    """``$name`` or ``${name OP arg}``; ``prefix`` is ``#`` (length) or ``!`` (indirect)."""

    name: str
    op: str = ""
    arg: Word | None = None
    prefix: str = ""


class Sub(NamedTuple):
    """``$(...)``, a backtick command, ``<(...)`` or ``>(...)``: commands that run."""

    items: tuple[Item, ...]
    kind: str


class Arith(NamedTuple):
    """``$((...))`` or ``((...))``: a number, and the substitutions inside it."""

    subs: tuple[Sub, ...]


Part = Union[Lit, Var, Sub, Arith]


class Word(NamedTuple):
    parts: tuple[Part, ...]
    #: As written, for messages.
    source: str

    def keyword(self) -> str | None:
        """The word's text when it is one unquoted literal (a reserved word can be)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Lit) and not self.parts[0].quoted:
            return self.parts[0].text
        return None

    def assignment(self) -> str | None:
        """The variable a ``NAME=value`` word assigns, or None."""
        first = self.parts[0] if self.parts else None
        if isinstance(first, Lit) and not first.quoted:
            found = assignment_match(first.text)
            if found is not None:
                return found.group(1)
        return None


@attrs.define
class Redirect:
    op: str
    fd: str
    target: Word | None
    #: A here-document's body, once read.
    body: Word | None = None


@attrs.define
class Command:
    words: list[Word]
    redirects: list[Redirect]


class Op(NamedTuple):
    text: str


@attrs.frozen
class Group:
    """``( ... )``: a subshell."""

    items: tuple[Item, ...]


@attrs.frozen
class Loop:
    """``for NAME in WORDS`` (or ``select``); ``words`` None: the positional parameters."""

    name: str
    words: tuple[Word, ...] | None


Item = Union[Command, Op, Group, Loop]

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
#: A variable's name in an assignment is looked for this far (a longer one is a word).
_MAX_NAME = 1024


def assignment_match(text: str) -> re.Match[str] | None:
    """``NAME=`` (or ``NAME[i]=``, ``NAME+=``) at the start of ``text``, found without
    scanning a long word that holds no ``=`` near its start."""
    equals = text.find("=", 0, _MAX_NAME)
    return _ASSIGNMENT.fullmatch(text, 0, equals + 1) if equals > 0 else None


def after_equals(value: str) -> str:
    """A ``NAME=value`` word's value (the word itself when it assigns nothing)."""
    found = assignment_match(value)
    return value[found.end() :] if found is not None else value
