"""The check as the program handlers (``registry``) and the guesses of what programs print
(``output``) see it: what they may ask of the command being judged. A Protocol, so that
they need not import the judge (``judge.CommandCheck`` is the one implementation), which
imports them."""

from __future__ import annotations

import os
from typing import Callable, Protocol, Sequence

from hookbus.policy.homeguard.places import Places
from hookbus.policy.homeguard.values import Arg, Call, Directory, Scope


class Check(Protocol):
    """One bash command being judged (see ``judge.CommandCheck`` for each member)."""

    #: The directory the command starts in.
    start: Directory
    places: Places
    #: Links the command makes (``ln -s``), followed by later commands of it.
    links: dict[str, str]
    #: lstat results, cached within the check.
    cache: dict[str, os.stat_result | None]

    def call(self, call: Call, scope: Scope) -> None: ...

    def script(self, text: str, scope: Scope, *, same_shell: bool = False, root: bool = False, positional: Sequence[Arg] = ()) -> None: ...

    def code(self, code: Arg, scope: Scope, what: str, *, positional: Sequence[Arg] = (), same_shell: bool = False) -> None: ...

    def run_script_file(self, script: Arg, call: Call, scope: Scope, *, positional: Sequence[Arg] = (), same_shell: bool = False) -> None: ...

    def standard_input(self, call: Call, scope: Scope, what: str) -> None: ...

    def input(self, call: Call, scope: Scope) -> str | None: ...

    def known_file_text(self, arg: Arg, scope: Scope, shell_only: bool = False) -> str | None: ...

    def produced(self, scope: Scope) -> Arg: ...

    def write(self, arg: Arg, scope: Scope, how: str, *, tree: bool = False, strict: bool = True, streams: bool = False) -> None: ...

    def not_in_a_place(self, what: str, scope: Scope) -> None: ...

    def scan(self, args: Sequence[Arg], scope: Scope, what: str) -> None: ...

    def scan_text(self, text: str, scope: Scope, what: str) -> None: ...

    def remember_links(self, destination: Arg, sources: Sequence[Arg], scope: Scope) -> None: ...

    def directories_of(self, arg: Arg, scope: Scope) -> tuple[Directory, ...]: ...

    def changed_directory(self, value: str, cwd: Directory, physical: bool, globbed: bool, cdpath: Sequence[str], scope: Scope) -> list[Directory]: ...

    def variable_values(self, name: str, scope: Scope) -> tuple[str, ...]: ...


#: A program's handler: it judges one simple command of that program, raising Deny for a
#: write into a place.
Handler = Callable[[Check, Call, Scope], None]
