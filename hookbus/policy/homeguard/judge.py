"""Judging bash: ``CommandCheck`` walks one command as bash runs it (its lists, pipelines,
subshells, substitutions, and the code and scripts it runs), follows the directories it
runs in and the values its words expand to, and hands each simple command to its
program's handler (``registry``); what is written is judged by ``Targets``, its base.

Relative paths are read in the directory the command runs in: ``cd`` and ``pushd`` are
followed (``cd lnk && touch hooks/x``, ``cd lnk; ...``, ``(cd lnk && ...)``, ``cd -P``,
``cd "$HOME"/x``, ``CDPATH``), links resolved as the kernel resolves them. A ``cd`` may
fail, so after ``;`` both the old and the new directory count; after ``&&`` only the new
one; a subshell's ``cd`` ends with it; a ``cd`` in a loop or a function that the guard
cannot follow round, or into a directory it cannot read (``cd "$X"`` with ``$X`` unknown,
``cd "$(cmd)"``), makes the directory unknown, and a relative write there is refused.

Words are expanded as bash would expand them, as far as the text says: braces before
tildes (``{~/.vix/x,y}``), ``~``, ``$HOME``, ``$PWD``, a place's variable (``$VIX_HOME``),
variables the command sets itself (``d=~/.vix; touch $d/x``, ``for f in ...``, ``set --``,
``read f`` from a pipe or a file, ``bash -c CODE _ ARG``'s ``$1``), ``${X:-default}``,
and the output of the simple programs a ``$(...)`` or a pipe runs (``output``). What a
word's value cannot be known of is MARK, which ``Targets`` reads by the text around it.

Scripts are read too: ``bash FILE``, ``source FILE`` and ``./script`` by the script
(written earlier in the command, or on disk: at most MAX_SCRIPT_BYTES, 256 KiB, is read,
never from a FIFO).
"""

from __future__ import annotations

import os
import re
import stat
from typing import Sequence

from hookbus.policy.homeguard.bounds import MAX_ALTERNATIVES, MAX_PATHS, MAX_SCRIPT_BYTES
from hookbus.policy.homeguard.errors import Deny, Unreadable
from hookbus.policy.homeguard.globs import GLOB_CHARS, MAX_GLOB, brace_words
from hookbus.policy.homeguard.output import pipeline_output, program_output
from hookbus.policy.homeguard.places import Places, Walked, cached_lstat
from hookbus.policy.homeguard.programs import SHELLS, program_of, program_path
from hookbus.policy.homeguard.reader import Budget, Reader
from hookbus.policy.homeguard.registry import handler_for
from hookbus.policy.homeguard.runners import shell
from hookbus.policy.homeguard.syntax import Command, Group, Item, Lit, Loop, Op, Redirect, Sub, Var, Word, after_equals, assignment_match
from hookbus.policy.homeguard.targets import Targets
from hookbus.policy.homeguard.text import expand_user
from hookbus.policy.homeguard.values import MARK, OVERFLOW, UNKNOWN_DIRECTORY, Arg, Call, Directory, Scope, flatten, shown, unique_directories

#: What makes an unquoted literal more than itself: a tilde, a glob, an assignment's ``=``.
_EXPANDS = re.compile(r"[*?[{~=]")
#: What a file run by its path (``./x``) starts with to be read as bash: a ``#!`` naming a shell, or no ``#!``.
_SHELL_SCRIPT = re.compile(r"#!\s*\S*(?:/|env\s+)(?:ba|da|z|k|mk)?sh\b|(?!#!)")


class CommandCheck(Targets):
    """One bash command, judged: ``run`` says what it writes into a place, or None."""

    def __init__(self, places: Places, command: str, start: Directory) -> None:
        super().__init__(places, command)
        self.command = command
        self.start = start
        self.budget = Budget(len(command))
        #: Files the command writes, and what it writes, when the guard can tell.
        self.written: dict[str, str | None] = {}

    def run(self) -> str | None:
        scope = Scope((self.start,))
        try:
            self.script(self.command, scope, same_shell=True, root=True)
        except Deny as deny:
            return deny.phrase
        except Unreadable as unreadable:
            return f"the bash command cannot be checked: {unreadable.why}"
        return None

    # -- command lists --------------------------------------------------------------------------

    def script(self, text: str, scope: Scope, *, same_shell: bool = False, root: bool = False, positional: Sequence[Arg] = ()) -> None:
        """Read ``text`` as bash and judge it, in ``scope`` (``same_shell``) or a child's."""
        if not root:
            self.budget.enter()
        try:
            items = Reader(text, self.budget).parse()
            inner = scope if same_shell else scope.child()
            for number, arg in enumerate(positional):
                inner.variables[str(number)] = arg.alts
            if positional:
                joined = tuple(dict.fromkeys(alt for arg in positional[1:] for alt in arg.alts)) or ("",)
                inner.variables["@"] = inner.variables["*"] = joined[:MAX_ALTERNATIVES]
            self._items(items, inner)
        finally:
            if not root:
                self.budget.leave()

    def _items(self, items: Sequence[Item], scope: Scope) -> None:
        for index, item in enumerate(items):
            if isinstance(item, Op) and item.text in ("while", "until"):
                scope.loop_input = self._loop_input(items, index, scope) or scope.loop_input
            if isinstance(item, Command):
                self._command(item, scope)
            elif isinstance(item, Op):
                self._separator(item.text, scope)
            elif isinstance(item, Group):
                self.budget.enter()
                self._items(item.items, scope.child())
                self.budget.leave()
                scope.pending = None
            else:
                if item.words is None:
                    values: tuple[str, ...] = (MARK,)
                else:
                    values = flatten(self._expand(word, scope) for word in item.words)
                scope.variables[item.name] = values
                scope.repeats = True

    def _loop_input(self, items: Sequence[Item], start: int, scope: Scope) -> str | None:
        """What a ``while``/``until`` loop reads: the input redirection after its ``done``
        (``while read f; do ...; done < FILE``), for the ``read`` inside it."""
        depth = 0
        for index in range(start, len(items)):
            item = items[index]
            if isinstance(item, Op) and item.text in ("while", "until", "for", "select"):
                depth += 1
            elif isinstance(item, Loop):
                depth += 1
            elif isinstance(item, Op) and item.text == "done":
                depth -= 1
                if depth == 0:
                    following = items[index + 1] if index + 1 < len(items) else None
                    if isinstance(following, Command) and not following.words:
                        for redirect in following.redirects:
                            if redirect.op in ("<", "<<<", "<<", "<<-"):
                                got = self._redirection(redirect, scope, [])
                                return self.known_file_text(got, scope) if isinstance(got, Arg) else got
                    return None
        return None

    def _separator(self, op: str, scope: Scope) -> None:
        if op == "&&":
            if scope.pending is not None:
                scope.fallback = unique_directories(scope.fallback + scope.cwds)
                scope.cwds = scope.pending
            scope.pending = None
            scope.pipeline = []
            return
        if op in ("|", "|&"):
            scope.pending = None  # each stage of a pipeline is a subshell
            return
        if op in ("do", "function"):
            scope.repeats = True
        pending = () if scope.pending is None or op == "&" else scope.pending
        scope.cwds = unique_directories(scope.cwds + pending + scope.fallback)
        scope.pending = None
        scope.fallback = ()
        if op in (";", "\n", "&", "||", "then", "else", "elif", "fi", "done", "esac", "}", "{"):
            scope.pipeline = []

    def _command(self, command: Command, scope: Scope) -> None:
        words = command.words
        count = 0
        while count < len(words) and words[count].assignment() is not None:
            count += 1
        assignments = [(words[index].assignment() or "", self._expand(words[index], scope, assignment=True)) for index in range(count)]
        args = [self._expand(word, scope) for word in words[count:]]
        stdin: str | None = None
        stdin_file: Arg | None = None
        writes: list[Arg] = []
        for redirect in command.redirects:
            got = self._redirection(redirect, scope, writes)
            if isinstance(got, str):
                stdin, stdin_file = got, None
            elif got is not None:
                stdin, stdin_file = None, got
        scope.pending = None
        env = {name: tuple(after_equals(alt) for alt in value.alts) for name, value in assignments}
        if not args:
            scope.variables.update(env)
            return
        name = program_of(args[0])
        call = Call(name, args, env, stdin, stdin_file)
        self.call(call, scope)
        scope.pipeline.append((name, args, stdin))
        for target in writes:
            self._remember_written(target, call, scope)

    def _redirection(self, redirect: Redirect, scope: Scope, writes: list[Arg]) -> str | Arg | None:
        """Judge a redirection that writes; return what one feeds to standard input: its
        text, or the file it comes from."""
        if redirect.op in ("<<", "<<-"):
            body = self._expand(redirect.body, scope) if redirect.body is not None else None
            return body.text if body is not None else None
        assert redirect.target is not None
        target = self._expand(redirect.target, scope)
        if redirect.op == "<<<":
            return target.text + "\n"
        if redirect.op == "<":
            written = self._file_text(target, scope)
            return written if written is not None else target
        if redirect.op in (">&", "<&") and re.fullmatch(r"\d*-?", target.text):
            return None  # a duplicated or closed descriptor
        if redirect.op == "<&":
            return None
        self.write(target, scope, "redirects output to", streams=True)
        writes.append(target)
        return None

    # -- programs -----------------------------------------------------------------------------------

    def call(self, call: Call, scope: Scope) -> None:
        """Judge one simple command: its program's handler (and, for a program named by a path,
        its script)."""
        self.budget.enter()
        try:
            handler = handler_for(call.name)
            script = program_path(call.args[0])
            if script is not None and handler is not shell:
                self.run_script_file(script, call, scope)
            handler(self, call, scope)
        finally:
            self.budget.leave()

    def standard_input(self, call: Call, scope: Scope, what: str) -> None:
        """A shell's commands from a here-document, a here-string, a file or a pipe."""
        text = self.input(call, scope)
        if text is not None:
            self._script_or_scan(text, scope, what)
            return
        if scope.pipeline:
            output = pipeline_output(scope.pipeline, self, scope)
            if output is not None:
                self._script_or_scan(output, scope, what)
            else:
                self.scan([arg for _, args, _ in scope.pipeline for arg in args[1:]], scope, what)

    def input(self, call: Call, scope: Scope) -> str | None:
        """What ``call`` reads on standard input, when the guard can have it."""
        if call.stdin is not None:
            return call.stdin
        return self.known_file_text(call.stdin_file, scope) if call.stdin_file is not None else None

    def _script_or_scan(self, text: str, scope: Scope, what: str) -> None:
        try:
            self.script(text, scope)
        except Unreadable:
            self.scan_text(text, scope, what)

    def code(self, code: Arg, scope: Scope, what: str, *, positional: Sequence[Arg] = (), same_shell: bool = False) -> None:
        """Bash code given as a word (``bash -c``, ``eval``, ``trap``): each value it may
        have, read; refused when the guard cannot know it."""
        for alt in code.alts:
            if MARK in alt:
                raise Deny(f"the bash command runs `{what}` on {shown(code.source)}, which the guard cannot read")
            self.script(alt, scope, same_shell=same_shell, positional=positional)

    def produced(self, scope: Scope) -> Arg:
        """What the earlier stages of the pipeline print, as the words a consumer gets."""
        output = pipeline_output(scope.pipeline, self, scope)
        if output is not None:
            printed = tuple(dict.fromkeys(output.split()))[:MAX_PATHS] or ("",)
            return Arg(printed, "(the pipe's words)")
        words = [alt for _, args, _ in scope.pipeline for arg in args[1:] for alt in arg.alts]
        below = [f"{word.rstrip('/')}/{MARK}" for word in words if "/" in word or word in (".", "~")]
        return Arg(tuple(dict.fromkeys([*words, *below, MARK]))[:MAX_PATHS], "(the pipe's words)", True)

    # -- directories --------------------------------------------------------------------------------

    def changed_directory(self, value: str, cwd: Directory, physical: bool, globbed: bool, cdpath: Sequence[str], scope: Scope) -> list[Directory]:
        """Where ``cd value`` from ``cwd`` may go (through CDPATH's entries, and ``cd -L``'s
        fallback to the physical directory)."""
        if MARK in value or globbed and GLOB_CHARS.search(value) or value == OVERFLOW:
            return [UNKNOWN_DIRECTORY]
        if not value:
            return [cwd]
        relative = not value.startswith("/")
        if relative and cwd.logical is None:
            return [UNKNOWN_DIRECTORY]
        if scope.repeats and relative:
            return [UNKNOWN_DIRECTORY]  # a loop or a function may run it from elsewhere
        bases: list[str] = []
        if relative and not value.startswith(("./", "../")) and value not in (".", ".."):
            for paths in cdpath:
                bases.extend(entry for entry in paths.split(":") if entry)
        found: list[Directory] = []
        for base in [*bases, None]:
            if base is None:
                start = cwd.physical if physical else cwd.logical
            else:
                start = base if base.startswith("/") else f"{(cwd.logical or '').rstrip('/')}/{base}"
            if relative and start is None:
                continue
            logical = value if not relative or start is None else f"{start.rstrip('/')}/{value}"
            if not physical:
                logical = _lexical(logical)
            found.append(self._directory(logical, cwd, physical))
            if not physical and base is None and cwd.physical is not None and relative:
                walked = found[-1]
                if walked.physical is not None and cached_lstat(walked.physical, self.cache) is None:
                    found.append(self._directory(f"{cwd.physical.rstrip('/')}/{value}", cwd, True))
        return found

    def _directory(self, path: str, cwd: Directory, physical: bool) -> Directory:
        """Where ``cd`` to ``path`` goes: ``physical`` (``cd -P``), $PWD is where it lands."""
        try:
            walked = self.places.walk(path, cwd.physical, self.links, self.cache)
        except (Unreadable, OSError, ValueError, RuntimeError):
            return UNKNOWN_DIRECTORY
        return Directory(walked.path if physical else path, walked.path, self.places.root_of(walked.path) or walked.through)

    def directories_of(self, arg: Arg, scope: Scope) -> tuple[Directory, ...]:
        """The directories ``arg`` names, read from where the command is (``-C DIR``)."""
        found: list[Directory] = []
        for alt in arg.alts:
            for cwd in scope.cwds:
                found.extend(self.changed_directory(alt, cwd, True, arg.globbed, (), Scope(scope.cwds)))
        return unique_directories(tuple(found))

    # -- scripts ----------------------------------------------------------------------------------

    def run_script_file(self, script: Arg, call: Call, scope: Scope, *, positional: Sequence[Arg] = (), same_shell: bool = False) -> None:
        """``bash FILE``, ``source FILE``, ``./FILE``: the script's commands, when the guard
        can have them (written earlier in the command, a process substitution's output, or
        a file on disk that starts as a shell script)."""
        if script.text in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"):
            self.standard_input(call, scope if same_shell else scope.child(), call.name or "source")
            return
        text = self.known_file_text(script, scope, shell_only=call.name not in SHELLS | {"source", "."})
        if text is not None:
            self._script_or_scan(text, scope if same_shell else scope.child(), f"the script {shown(script.source)}")

    def known_file_text(self, arg: Arg, scope: Scope, shell_only: bool = False) -> str | None:
        """The text of the file ``arg`` names, when the guard can have it: written earlier in the
        command, a process substitution's output, or a small file on disk (``shell_only``:
        one that starts as a shell script)."""
        if len(arg.alts) != 1 or MARK in arg.text:
            return None
        if arg.text in self.substituted:
            return self.substituted[arg.text]
        for cwd in scope.cwds:
            if cwd.physical is None and not arg.text.startswith("/"):
                continue
            absolute = arg.text if arg.text.startswith("/") else f"{(cwd.physical or '').rstrip('/')}/{arg.text}"
            try:
                path = self.places.walk(absolute, cwd.physical, self.links, self.cache).path
            except (Unreadable, OSError, ValueError, RuntimeError):
                continue
            if path in self.written:
                return self.written[path]
            text = _read_script(path)
            if text is not None and (not shell_only or _SHELL_SCRIPT.match(text)):
                return text
        return None

    def _file_text(self, target: Arg, scope: Scope) -> str | None:
        """What a ``< FILE`` feeds, when the command wrote FILE itself."""
        if len(target.alts) != 1 or MARK in target.text:
            return None
        for cwd in scope.cwds:
            if cwd.physical is None and not target.text.startswith("/"):
                continue
            absolute = target.text if target.text.startswith("/") else f"{(cwd.physical or '').rstrip('/')}/{target.text}"
            try:
                path = self.places.walk(absolute, cwd.physical, self.links, self.cache).path
            except (Unreadable, OSError, ValueError, RuntimeError):
                continue
            if path in self.written:
                return self.written[path]
        return None

    def _remember_written(self, target: Arg, call: Call, scope: Scope) -> None:
        if len(target.alts) != 1 or MARK in target.text or len(self.written) >= MAX_PATHS:
            return
        output = program_output(call.name, call.args, call.stdin, self)
        if output is None:
            return  # what the file then holds is not known: a later read of it goes to disk
        for cwd in scope.cwds:
            if cwd.physical is None and not target.text.startswith("/"):
                continue
            absolute = target.text if target.text.startswith("/") else f"{(cwd.physical or '').rstrip('/')}/{target.text}"
            try:
                path = self.places.walk(absolute, cwd.physical, self.links, self.cache).path
            except (Unreadable, OSError, ValueError, RuntimeError):
                continue
            self.written[path] = output

    def remember_links(self, destination: Arg, sources: Sequence[Arg], scope: Scope) -> None:
        """A link ``ln -s`` makes, for later commands to follow."""
        if len(destination.alts) != 1 or MARK in destination.text or len(sources) != 1 or len(sources[0].alts) != 1:
            return
        target = sources[0].text
        for cwd in scope.cwds:
            if cwd.physical is None:
                continue
            absolute = destination.text if destination.text.startswith("/") else f"{cwd.physical.rstrip('/')}/{destination.text}"
            try:
                where = self.places.walk(absolute, cwd.physical, self.links, self.cache)
            except (Unreadable, OSError, ValueError, RuntimeError):
                continue
            if where.stat is not None and stat.S_ISDIR(where.stat.st_mode):
                where = Walked(f"{where.path.rstrip('/')}/{target.rstrip('/').rsplit('/', 1)[-1]}", None, None)
            if len(self.links) < MAX_PATHS:
                self.links[where.path] = target

    # -- expansion ------------------------------------------------------------------------------------

    def _expand(self, word: Word, scope: Scope, assignment: bool = False) -> Arg:
        """The values ``word`` may have once bash expands it (substitutions run, and are
        judged, here)."""
        if len(word.parts) == 1 and not assignment:
            only = word.parts[0]
            if isinstance(only, Lit) and (only.quoted or not _EXPANDS.search(only.text)):
                return Arg((only.text,), word.source)  # most words: a literal, as it is
        alts: list[str] = [""]
        globbed = False
        overflow = False
        for index, part in enumerate(word.parts):
            if isinstance(part, Lit):
                text = part.text
                if not part.quoted:
                    if index == 0:
                        text = self._tilde(text, word, scope, assignment)
                    if GLOB_CHARS.search(text) is not None:
                        globbed = True
                values: tuple[str, ...] = (text,)
            elif isinstance(part, Var):
                values = self._parameter(part, scope)
            elif isinstance(part, Sub):
                values, from_glob = self._substitution(part, scope)
                globbed = globbed or from_glob
            else:
                for sub in part.subs:
                    self._substitution(sub, scope)
                values = ("0",)
            combined = [alt + value for alt in alts for value in values]
            if len(combined) > MAX_ALTERNATIVES:
                overflow = True
                combined = combined[:MAX_ALTERNATIVES]
            alts = combined
        if globbed and any("{" in alt and "," in alt for alt in alts):
            alts = self._braces(alts, word, scope)
        result = tuple(dict.fromkeys(alts))
        if overflow or len(result) > MAX_ALTERNATIVES:
            result = (*result[:MAX_ALTERNATIVES], OVERFLOW)
        return Arg(result, word.source, globbed)

    def _braces(self, alts: list[str], word: Word, scope: Scope) -> list[str]:
        """Bash expands braces before tildes: ``{~/.vix/x,/tmp/y}`` is two words, the first
        ``$HOME/.vix/x``. Each value's brace words, each tilde expanded; a pattern kept as it
        is when it expands to no words the guard reads (a sequence, too many)."""
        found: list[str] = []
        for alt in alts:
            words = brace_words(alt) if len(alt) <= MAX_GLOB else None
            if words is None:
                found.append(alt)
                continue
            found.append(alt)  # the pattern too: matched against the places' names
            for expanded in words:
                found.append(self._tilde(expanded, Word((Lit(expanded, False),), expanded), scope, False) if expanded.startswith("~") else expanded)
        return found

    def _tilde(self, text: str, word: Word, scope: Scope, assignment: bool) -> str:
        found = assignment_match(text)
        if assignment or found is not None:
            if found is not None and text[found.end() :].startswith("~"):
                return text[: found.end()] + self._tilde(text[found.end() :], word, scope, False)
            return text
        if not text.startswith("~"):
            return text
        slash = text.find("/")
        if slash < 0 and len(word.parts) > 1:
            return text  # the prefix runs into a quoted part: bash leaves it alone
        prefix, rest = (text, "") if slash < 0 else (text[:slash], text[slash:])
        if prefix == "~":
            home = self.variable_values("HOME", scope)[0]
        elif prefix == "~+":
            home = self.variable_values("PWD", scope)[0]
        elif prefix == "~-":
            home = MARK
        else:
            home = expand_user(prefix)
            if home == prefix:
                return text
        return home + rest

    def variable_values(self, name: str, scope: Scope) -> tuple[str, ...]:
        """The values of ``$name`` (MARK when the guard cannot know them)."""
        found = self._lookup(name, scope)
        return found if found is not None else (MARK,)

    def _lookup(self, name: str, scope: Scope) -> tuple[str, ...] | None:
        if name in scope.variables:
            return scope.variables[name]
        if name == "HOME":
            return (os.path.expanduser("~"),)
        if name == "PWD":
            return tuple(dict.fromkeys(cwd.logical if cwd.logical is not None else MARK for cwd in scope.cwds))
        if name in self.places.variables:
            return (self.places.variables[name],)
        return None

    def _parameter(self, part: Var, scope: Scope) -> tuple[str, ...]:
        argument = self._expand(part.arg, scope).alts if part.arg is not None else ("",)
        if part.prefix == "#":
            return ("0",)
        if part.prefix == "!" or part.op == "[":
            return (MARK,)
        found = self._lookup(part.name, scope)
        op = part.op
        if op in (":-", "-", ":=", "="):
            if found is None:
                if op in (":=", "="):
                    scope.variables[part.name] = argument
                return (MARK, *argument)
            if op.startswith(":") and any(not value for value in found):
                return tuple(dict.fromkeys([*(value for value in found if value), *argument]))
            return found
        if op in (":+", "+"):
            return ("", *argument) if found is None else (argument if any(found) else ("",))
        if op in (":?", "?"):
            return found if found is not None else (MARK,)
        if op:
            return (MARK,)
        return found if found is not None else (MARK,)

    def _substitution(self, sub: Sub, scope: Scope) -> tuple[tuple[str, ...], bool]:
        """Run (judge) a substitution's commands; its value: what they print, when the guard
        can tell, else unknown, or one of the paths they name (``$(ls -d ~/.v*)``)."""
        inner = scope.child()
        self.budget.enter()
        try:
            self._items(sub.items, inner)
        finally:
            self.budget.leave()
        output = pipeline_output(inner.pipeline, self, inner)
        if sub.kind in ("<(", ">("):
            path = f"/dev/fd/{63 + len(self.substituted)}"
            self.substituted[path] = output
            return (path,), False
        if output is not None:
            return (output.rstrip("\n"),), False
        named = [alt for _, args, _ in inner.pipeline for arg in args[1:] if not arg.text.startswith("-") for alt in arg.alts if MARK not in alt]
        globbed = any(arg.globbed for _, args, _ in inner.pipeline for arg in args[1:])
        return tuple(dict.fromkeys([MARK, *named]))[:MAX_ALTERNATIVES], globbed


def _read_script(path: str) -> str | None:
    """The text of a small regular file, read without blocking (never a FIFO), or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SCRIPT_BYTES:
            return None
        data = os.read(descriptor, MAX_SCRIPT_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if b"\0" in data[:1024] or len(data) > MAX_SCRIPT_BYTES:
        return None  # a binary
    return data.decode("utf-8", "replace").replace("\0", "")


def _lexical(path: str) -> str:
    """A path as ``cd -L`` reads it: ``..`` removes the component before it."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)
