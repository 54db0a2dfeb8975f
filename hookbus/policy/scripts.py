"""The scripts a hook runs from its own directory, checked when the hook loads.

A guard whose ``check.sh`` is missing, not executable, or a link out of its directory would
load and then fail at every fire: open, letting through what it guards. So the loader asks
``check_scripts`` about each hook it loads, and a script a fire would find broken is one of
the hook's problems, which every view shows (``hookbus validate`` exits 1 on it); the hook
stays loaded all the same, so that its ``on_error`` still decides each fire. What it checks
is what a hook's command (or a workflow's bash step) names inside the hook's directory:

- ``$HOOKBUS_HOOK_DIR/...`` and ``${HOOKBUS_HOOK_DIR}/...``, quoted or not; for a
  ``claude-code`` hook ``$CLAUDE_PLUGIN_ROOT/...`` too, unless its ``env`` sets that;
- an absolute path into the hook's directory;
- a relative path, when the hook runs in its directory (its ``cwd`` says so); with no
  ``cwd`` a hook runs in the envelope's, and a relative path that names a file beside
  hook.json is reported as the mistake it is.

Such a script must exist, be a regular file, be executable when it is run as a command
(the first word of a simple command, also after ``exec``, ``nohup``, ``env`` and the
like), with a ``#!`` line that names an interpreter that exists (and no carriage return),
be readable when an interpreter runs it (``bash x.sh``, ``python3 x.py``, ``source
x.sh``), and be trusted as every hook file is (yours or root's, not writable by group or
others). Each of those, broken, makes the fire fail (``ScriptFinding.fails``). One more
thing is said, though the script runs: that it is outside the hook's directory (through
``..``, or a link out), where hookbus checks nothing; ``hookbus validate`` alone reports
that.

The command is split into words as bash would, by a small lexer of its own (shlex cannot
tell a single-quoted ``'$HOOKBUS_HOOK_DIR'`` from an expanded one), in time linear in the
command, and conservatively: what it does not follow (a here-document, ``((``, an unclosed
quote) ends what is checked, a ``case`` statement's commands are skipped, a relative path
after ``cd`` is not checked, and a word whose value depends on the run (``$(...)``,
another variable, a glob) is not checked. Nothing is run.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

import attrs

from hookbus.errors import did_you_mean
from hookbus.permissions import check_permissions
from hookbus.runners import expand_variables

if TYPE_CHECKING:
    from hookbus.runners import Hook

#: The variable every hook's process gets for its directory.
HOOK_DIR_VARIABLE = "HOOKBUS_HOOK_DIR"
#: The same, as a ``claude-code`` hook's scripts spell it.
PLUGIN_ROOT_VARIABLE = "CLAUDE_PLUGIN_ROOT"

# -- splitting a command into words ------------------------------------------------------


@attrs.frozen
class Word:
    """One word of a command: its pieces of literal text and variables, as bash would
    expand it, and how it is shown (as written, without its quotes)."""

    #: ("text", TEXT) or ("var", NAME), in order.
    parts: tuple[tuple[str, str], ...]
    shown: str
    #: Its value depends on the run: a command substitution, a glob, a special parameter.
    dynamic: bool = False

    def literal(self) -> str | None:
        """The word's value when it is plain text, else None."""
        if self.dynamic or any(kind == "var" for kind, _ in self.parts):
            return None
        return "".join(text for _, text in self.parts)


#: A separator between simple commands, or a redirection ("<", ">", ">>", ...).
@attrs.frozen
class Operator:
    text: str


Token = Word | Operator

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEPARATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")", "\n")
_REDIRECTIONS = ("<<<", "&>>", "<<-", "<<", ">>", "<>", ">|", ">&", "<&", "&>", "<", ">")
_OPERATORS = sorted(_SEPARATORS + _REDIRECTIONS, key=len, reverse=True)
_GLOB = frozenset("*?[")
_OPERATOR_STARTS = frozenset(operator[0] for operator in _OPERATORS)
#: Characters that are literal text wherever they are in an unquoted word (``#`` and ``~``
#: are not at a word's start, and are read one at a time).
_PLAIN = re.compile(r"[^ \t\n\\'\"$`<>|&;()*?\[\]{}~#]+")
#: The same inside double quotes.
_QUOTED_PLAIN = re.compile(r'[^"\\$`]+')


class _Unparsed(Exception):
    """Something this parser does not follow: nothing from there on is checked."""


class _Lexer:
    """bash's word splitting, for what hooks' commands commonly hold."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.tokens: list[Token] = []
        self.parts: list[tuple[str, str]] = []
        #: The literal text read since the last part: joined once, so that a long word
        #: costs time linear in its length.
        self.pending: list[str] = []
        self.shown: list[str] = []
        self.dynamic = False
        self.braced = False  # an unquoted { or }: brace expansion, unless the word is just that
        self.started = False  # a word is being read (even an empty one: "")

    def run(self) -> list[Token]:
        """The tokens up to the end, or up to what cannot be followed."""
        try:
            self._lex()
        except _Unparsed:
            self.started = False  # a word cut short (an unclosed quote) is no word
            self.tokens.append(Operator("?"))  # stops the commands there
        return self.tokens

    # -- building the current word --

    def _text(self, text: str, shown: str | None = None) -> None:
        self.started = True
        self.pending.append(text)
        self.shown.append(text if shown is None else shown)

    def _flush(self) -> None:
        """The pending text, as one part."""
        if self.pending:
            self.parts.append(("text", "".join(self.pending)))
            self.pending = []

    def _end_word(self) -> None:
        self._flush()
        if self.started:
            shown = "".join(self.shown)
            dynamic = self.dynamic or (self.braced and shown not in ("{", "}"))
            self.tokens.append(Word(tuple(self.parts), shown, dynamic))
        self.parts, self.shown, self.dynamic, self.braced, self.started = [], [], False, False, False

    # -- reading --

    def _lex(self) -> None:
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if char in " \t":
                self._end_word()
                self.at += 1
            elif char == "#" and not self.started:
                end = text.find("\n", self.at)
                self.at = len(text) if end < 0 else end
            elif char == "\\":
                if text.startswith("\\\n", self.at):
                    self.at += 2
                    continue
                if self.at + 1 >= len(text):
                    raise _Unparsed
                self._text(text[self.at + 1], text[self.at : self.at + 2])
                self.at += 2
            elif char == "'":
                end = text.find("'", self.at + 1)
                if end < 0:
                    raise _Unparsed
                self._text(text[self.at + 1 : end])
                self.at = end + 1
            elif char == '"':
                self._double_quoted()
            elif char == "$":
                self._dollar(quoted=False)
            elif char == "`":
                self._skip_backticks()
            elif char in "<>" and text.startswith("(", self.at + 1):
                self.at += 1  # process substitution: a dynamic word
                self._skip_balanced()
                self.dynamic = self.started = True
            elif char in _OPERATOR_STARTS and self._operator():
                pass
            elif (plain := _PLAIN.match(text, self.at)) is not None:
                self._text(plain.group())  # a run of characters that mean nothing to bash
                self.at = plain.end()
            else:
                if char in _GLOB or (char == "~" and not self.started):
                    self.dynamic = True
                self.braced = self.braced or char in "{}"
                self._text(char)
                self.at += 1
        self._end_word()

    def _operator(self) -> bool:
        for operator in _OPERATORS:
            if self.text.startswith(operator, self.at):
                break
        else:
            return False
        if operator in _REDIRECTIONS and operator[0] in "<>" and self._is_descriptor_number():
            self.parts, self.pending, self.shown, self.started = [], [], [], False  # 2>file: the 2 is no word
        self._end_word()
        if operator in ("<<", "<<-") or self.text.startswith("((", self.at):
            raise _Unparsed  # a here-document's lines are no commands; (( is arithmetic
        self.tokens.append(Operator(operator))
        self.at += len(operator)
        return True

    def _is_descriptor_number(self) -> bool:
        """Whether the word just before a redirection is its descriptor (the 2 of 2>)."""
        self._flush()
        if not self.started or self.dynamic or len(self.parts) != 1 or self.parts[0][0] != "text":
            return False
        value = self.parts[0][1]
        return value.isdigit() and "".join(self.shown) == value

    def _double_quoted(self) -> None:
        text = self.text
        self.at += 1
        self.started = True
        while True:
            if self.at >= len(text):
                raise _Unparsed
            char = text[self.at]
            if char == '"':
                self.at += 1
                return
            if char == "\\" and self.at + 1 < len(text) and text[self.at + 1] in '$`"\\\n':
                if text[self.at + 1] != "\n":
                    self._text(text[self.at + 1], text[self.at : self.at + 2])
                self.at += 2
            elif char == "$":
                self._dollar(quoted=True)
            elif char == "`":
                self._skip_backticks()
            else:
                quoted = _QUOTED_PLAIN.match(text, self.at)
                end = quoted.end() if quoted is not None else self.at + 1
                self._text(text[self.at : end])
                self.at = end

    def _dollar(self, quoted: bool) -> None:
        text = self.text
        following = text[self.at + 1 : self.at + 2]
        if following == "(":
            self.at += 1
            self._skip_balanced()
            self.dynamic = self.started = True
        elif following == "{":
            end = text.find("}", self.at + 2)
            if end < 0:
                raise _Unparsed
            inner = text[self.at + 2 : end]
            if _NAME.fullmatch(inner):
                self._variable(inner, text[self.at : end + 1])
            else:
                self.dynamic = self.started = True  # ${X:-y}, ${#X}, ${X/a/b}: not knowable
            self.at = end + 1
        elif following == "'" and not quoted:
            end = text.find("'", self.at + 2)
            if end < 0:
                raise _Unparsed
            self.dynamic = self.started = True  # $'...': escapes this parser does not decode
            self.at = end + 1
        else:
            found = _NAME.match(text, self.at + 1)
            if found is not None:
                self._variable(found.group(), f"${found.group()}")
                self.at = found.end()
            elif following and following in "0123456789@*#?$!-":
                self.dynamic = self.started = True
                self.at += 2
            else:
                self._text("$")
                self.at += 1

    def _variable(self, name: str, shown: str) -> None:
        self._flush()
        self.started = True
        self.parts.append(("var", name))
        self.shown.append(shown)

    def _skip_backticks(self) -> None:
        end = self.text.find("`", self.at + 1)
        if end < 0:
            raise _Unparsed
        self.dynamic = self.started = True
        self.at = end + 1

    def _skip_balanced(self) -> None:
        """From a "(" past its matching ")", quotes respected."""
        depth = 0
        text = self.text
        while self.at < len(text):
            char = text[self.at]
            if char == "\\":
                self.at += 2
                continue
            if char in "'\"":
                end = text.find(char, self.at + 1)
                if end < 0:
                    raise _Unparsed
                self.at = end + 1
                continue
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    self.at += 1
                    return
            self.at += 1
        raise _Unparsed


def split_words(command: str) -> list[Token]:
    """``command`` as bash's words and operators, up to what this parser cannot follow
    (an ``Operator("?")`` marks that)."""
    return _Lexer(command).run()


# -- finding what runs --------------------------------------------------------------------

#: Reserved words after which the next word is a command again.
_RESERVED = frozenset(("if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time", "coproc"))
#: Commands after which a relative path is no longer relative to where the hook started.
_CHANGES_DIRECTORY = frozenset(("cd", "pushd", "popd"))
#: Commands that run the command after their options: the options that take a value, and
#: how many operands come before the command (timeout's duration).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "exec": (frozenset(("-a",)), 0),
    "command": (frozenset(), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "env": (frozenset(("-u", "-C", "-S", "--unset", "--chdir")), 0),
    "nice": (frozenset(("-n", "--adjustment")), 0),
    "timeout": (frozenset(("-s", "-k", "--signal", "--kill-after")), 1),
    "stdbuf": (frozenset(("-i", "-o", "-e")), 0),
}
#: Interpreters that read a script named as their first operand, and their options that
#: take a value. After one of ``_INLINE``, the program is on the command line: no file.
_INTERPRETERS: dict[str, frozenset[str]] = {
    **dict.fromkeys(("bash", "sh", "dash", "zsh", "ksh", "mksh"), frozenset(("-o", "+o", "-O", "+O"))),
    **dict.fromkeys(("python", "python2", "python3", "pypy", "pypy3"), frozenset(("-W", "-X", "-Q"))),
    **dict.fromkeys(("node", "nodejs", "bun"), frozenset(("--require", "--import", "--loader"))),
    **dict.fromkeys(("perl", "ruby", "php"), frozenset()),
}
_INLINE = frozenset(("-c", "-e", "-E", "-m", "-p", "-r", "--eval", "--print"))
#: Interpreters that also run a directory (its __main__.py, its package.json's main).
_RUN_DIRECTORIES = frozenset(("python", "python2", "python3", "pypy", "pypy3", "node", "nodejs", "bun"))
#: Builtins that read the script they name (one without a slash is looked up on PATH).
_SOURCE = frozenset(("source", "."))


@attrs.frozen
class Use:
    """A word that names a file the command runs: as a command (``how`` is None) or as
    the script of an interpreter or ``source`` (``how`` names it)."""

    word: Word
    how: str | None = None
    #: A ``cd`` ran before it: a relative path is not where the hook started.
    moved: bool = False


def _interpreter(name: str) -> str | None:
    base = name.rsplit("/", 1)[-1]
    if base in _INTERPRETERS:
        return base
    if re.fullmatch(r"python\d(\.\d+)?", base):
        return "python3"
    return None


def script_uses(command: str) -> list[Use]:
    """Every word of ``command`` that names a file it runs, in order."""
    uses: list[Use] = []
    simple: list[Word] = []
    redirected = False
    in_case = False
    for token in [*split_words(command), Operator("\n")]:
        if in_case:
            # A case's patterns end in ")", which reads as an operator here: its commands
            # are not followed; checking resumes after esac.
            in_case = not (isinstance(token, Word) and token.literal() == "esac")
            continue
        if isinstance(token, Word):
            if redirected:
                redirected = False  # a redirection's target: no command, no argument
            else:
                simple.append(token)
            continue
        if token.text in _REDIRECTIONS:
            redirected = True
            continue
        in_case = _uses_of(simple, uses)
        simple = []
        if token.text == "?":
            break
    return uses


def _uses_of(words: Sequence[Word], uses: list[Use]) -> bool:
    """Add the uses of one simple command's ``words``; True when a case statement begins."""
    moved = bool(uses) and uses[-1].moved
    index = 0
    while index < len(words):
        word = words[index]
        value = word.literal()
        if value == "case":
            return True
        if value in ("[[", "for", "select"):
            return False  # a test, or "for NAME in WORDS": nothing runs until the separator
        if value == "function":
            index += 2  # function NAME { ...: its body runs commands
            continue
        if value in _RESERVED or _is_assignment(word.shown):
            index += 1
            continue
        if value in _WRAPPERS:
            valued, skipped = _WRAPPERS[value]
            index = _after_options(words, index + 1, valued, value)
            if index < 0:
                return False
            index += skipped
            continue
        moved = moved or value in _CHANGES_DIRECTORY
        uses.append(Use(word, moved=moved))
        name = value.rsplit("/", 1)[-1] if value else None
        if name in _SOURCE:
            if index + 1 < len(words):
                uses.append(Use(words[index + 1], name, moved))
            return False
        interpreter = _interpreter(value) if value else None
        if interpreter is not None:
            operand = _after_options(words, index + 1, _INTERPRETERS[interpreter], interpreter)
            if 0 <= operand < len(words):
                uses.append(Use(words[operand], name, moved))
        return False
    return False


def _after_options(words: Sequence[Word], index: int, valued: frozenset[str], command: str) -> int:
    """The index of the first operand from ``index`` on, past options (and the values of
    ``valued`` ones) and ``env``'s assignments; -1 when there is no file to run
    (``command -v``, ``bash -c``)."""
    while index < len(words):
        value = words[index].literal()
        if value is None:
            return index
        if value == "--":
            return index + 1
        if (command in _INTERPRETERS and value in _INLINE) or (command == "command" and value in ("-v", "-V")):
            return -1
        if command == "env" and _is_assignment(value):
            index += 1
        elif value.startswith(("-", "+")) and len(value) > 1:
            index += 2 if value in valued else 1
        else:
            return index
    return -1


def _is_assignment(text: str) -> bool:
    """``NAME=...`` or ``NAME+=...``: a variable set for the command, not a word of it."""
    found = _NAME.match(text)
    return found is not None and text[found.end() :].startswith(("=", "+="))


# -- checking what a hook runs ------------------------------------------------------------

#: How much of a script is read for its ``#!`` line: Linux reads no more (BINPRM_BUF_SIZE).
INTERPRETER_LINE_BYTES = 256


@attrs.frozen
class ScriptFinding:
    """Something wrong with a script a hook runs: ``message`` names the command and the
    script (``the command runs $HOOKBUS_HOOK_DIR/check.sh, which is not executable: ...``)."""

    message: str
    #: A fire runs into it: the script is missing, cannot be run or read, or its ``#!``
    #: line names nothing that runs. False when the script runs, but from outside the
    #: hook's directory, where hookbus checks nothing (``hookbus validate`` says so).
    fails: bool = True


def check_scripts(hook: Hook, home_root: Path, strict_modes: bool = True, *, root_only: bool = False) -> list[ScriptFinding]:
    """What is wrong with each script ``hook`` runs from its own directory, in the order
    its commands name them. ``home_root``: the home the hook runs for (its ``$HOOKBUS_HOME``),
    which messages show the hook's directory relative to; ``root_only``: a hook of the
    managed directory, which root must own, and whose paths are shown whole."""
    checker = _HookScripts(hook, home_root, strict_modes, root_only)
    for label, command in _commands(hook):
        checker.check(label, command)
    return checker.findings


def _commands(hook: Hook) -> Iterator[tuple[str, str]]:
    """(how a message names it, the bash text) of each command the hook runs."""
    spec = hook.spec
    if spec.action_key == "command" and isinstance(hook.options, str):
        yield "the command", hook.options
        return
    if spec.action_key not in ("workflow", "workflow_id") or hook.runner_plugin != "workflow":
        return
    steps = getattr(hook.options, "steps", ())
    owner = f"workflow {spec.action!r}, " if spec.action_key == "workflow_id" else ""
    for index, step in enumerate(steps):
        if getattr(step, "kind", None) == "bash" and isinstance(getattr(step, "text", None), str):
            named = f" ({step.name})" if getattr(step, "name", "") else ""
            yield f"{owner}step {index + 1} of {len(steps)}{named}", step.text


class _HookScripts:
    def __init__(self, hook: Hook, home_root: Path, strict_modes: bool, root_only: bool) -> None:
        self.hook = hook
        self.strict_modes = strict_modes
        self.root_only = root_only
        self.directory = Path(os.path.abspath(hook.directory))
        #: The same as text: what is inside it starts with this (pathlib's checks cost the
        #: load of a thousand hooks a good part of a second).
        self.prefix = str(self.directory).rstrip(os.sep) + os.sep
        self._real_directory: Path | None = None
        self.shown_directory = str(self.directory)
        if not root_only:
            try:
                self.shown_directory = str(self.directory.relative_to(home_root))
            except ValueError:
                pass
        self.home_root = home_root
        self.variables = self._directory_variables()
        #: Where a relative path is taken from: the hook's directory or one inside it; None
        #: when the hook runs in the envelope's cwd or somewhere else.
        self.cwd = self._working_directory()
        self.findings: list[ScriptFinding] = []

    def _directory_variables(self) -> frozenset[str]:
        """The variables that hold the hook's directory in its process."""
        env = self.hook.spec.env
        names = set() if HOOK_DIR_VARIABLE in env else {HOOK_DIR_VARIABLE}
        if self.hook.spec.dialect == "claude-code" and PLUGIN_ROOT_VARIABLE not in env:
            names.add(PLUGIN_ROOT_VARIABLE)
        return frozenset(names)

    def _working_directory(self) -> Path | None:
        """Where the hook runs when that is its directory or inside it; None when it runs
        in the envelope's cwd (no ``cwd``) or somewhere else."""
        configured = self.hook.spec.cwd
        if not configured:
            return None
        # As HookCall.working_directory expands it: with the variables the command gets.
        variables = {
            **os.environ,
            "HOOKBUS_HOOK_ID": self.hook.id,
            HOOK_DIR_VARIABLE: str(self.directory),
            "HOOKBUS_HOME": str(self.home_root),
            **({PLUGIN_ROOT_VARIABLE: str(self.directory)} if self.hook.spec.dialect == "claude-code" else {}),
            **self.hook.spec.env,
        }
        expanded = os.path.expanduser(expand_variables(configured, variables))
        if "$" in expanded:
            return None
        path = Path(os.path.normpath(self.directory / expanded))
        return path if self._inside(Path(os.path.realpath(path))) else None

    @property
    def real_directory(self) -> Path:
        """The hook's directory with its links resolved: found once, and only when a link
        is met (realpath walks every directory from the root)."""
        if self._real_directory is None:
            self._real_directory = Path(os.path.realpath(self.directory))
        return self._real_directory

    def _inside(self, real: Path) -> bool:
        return real == self.real_directory or self.real_directory in real.parents

    def _real_if_linked(self, path: Path) -> Path | None:
        """``path`` (inside the hook's directory, as written) with its links resolved, when
        one of its parts below the directory is a symbolic link; None when none is (it then
        is where it is written)."""
        current = self.prefix.rstrip(os.sep)
        for part in str(path)[len(self.prefix) :].split(os.sep):
            current = f"{current}{os.sep}{part}"
            try:
                if stat.S_ISLNK(os.lstat(current).st_mode):
                    return Path(os.path.realpath(path))
            except OSError:
                return None  # it goes no further: nothing below can lead elsewhere
        return None

    def check(self, label: str, command: str) -> None:
        for use in script_uses(command):
            self._check_use(label, use)

    def _check_use(self, label: str, use: Use) -> None:
        path = self._path_of(use)
        if path is None:
            return
        runs = f"{label} runs {use.word.shown}" + (f" with {use.how}" if use.how else "")
        relative = use.word.literal()
        if relative is not None and not os.path.isabs(relative) and self.cwd is None:
            # Only a word that names a file beside hook.json comes this far (_path_of).
            self._say(
                f"{runs}, which is relative to the envelope's cwd, where the hook runs (it sets no "
                f'"cwd"), not to {self.shown_directory}, where {relative} is: write '
                f'"${HOOK_DIR_VARIABLE}/{relative.removeprefix("./")}" (or set "cwd": "${HOOK_DIR_VARIABLE}")'
            )
            return
        found = self._problem(path, executable=use.how is None, directory_ok=_interpreter(use.how or "") in _RUN_DIRECTORIES)
        if found is not None:
            problem, fails = found
            self._say(f"{runs}, which {problem}", fails)

    def _say(self, message: str, fails: bool = True) -> None:
        finding = ScriptFinding(message, fails)
        if finding not in self.findings:
            self.findings.append(finding)

    def _path_of(self, use: Use) -> Path | None:
        """The absolute path ``use`` names in or from the hook's directory, or None when it
        names none (or cannot be known before the run)."""
        word = use.word
        if word.dynamic or not word.parts:
            return None
        first_kind, first = word.parts[0]
        if first_kind == "var":
            rest = word.parts[1:]
            if first not in self.variables or not rest or any(kind != "text" for kind, _ in rest):
                return None
            tail = "".join(text for _, text in rest)
            return Path(os.path.normpath(f"{self.directory}/{tail}")) if tail.startswith("/") else None
        value = word.literal()
        if not value:
            return None
        if os.path.isabs(value):
            path = Path(os.path.normpath(value))
            return path if self._inside_lexically(path) else None
        if use.moved:
            return None  # after a cd: relative to somewhere this does not know
        if "/" not in value and (use.how is None or use.how in _SOURCE):
            return None  # a command's name, or source's: looked up on PATH first
        if self.cwd is not None:
            return Path(os.path.normpath(self.cwd / value))
        if self.hook.spec.cwd:
            return None  # it runs elsewhere: a relative path names a file there
        # No cwd of its own: the word names a file of the envelope's cwd at run time, which
        # is a mistake only when it names one beside hook.json.
        beside = Path(os.path.normpath(self.directory / value))
        return beside if self._inside_lexically(beside) and os.path.lexists(beside) else None

    def _inside_lexically(self, path: Path) -> bool:
        text = str(path)
        return text == self.prefix.rstrip(os.sep) or text.startswith(self.prefix)

    def _problem(self, path: Path, executable: bool, directory_ok: bool = False) -> tuple[str, bool] | None:
        """Why ``path`` would not run (said after "which"), and whether a fire fails for it;
        None when nothing is wrong. ``executable``: it is run as a command, not read by an
        interpreter; ``directory_ok``: the interpreter runs a directory too."""
        if not self._inside_lexically(path):
            return f"leads out of the hook's directory (to {path}): hookbus checks only what is in {self.shown_directory}; copy the script there", False
        real = self._real_if_linked(path)
        if real is not None and not self._inside(real):
            if not os.path.exists(path):
                return f"is a symbolic link out of the hook's directory to {real}, which does not exist", True
            return f"leads out of the hook's directory through a symbolic link (to {real}): hookbus checks only what is in {self.shown_directory}; copy the script there", False
        try:
            info = os.stat(path)
        except FileNotFoundError:
            if os.path.lexists(path):
                return f"is a symbolic link to {real or os.path.realpath(path)}, which does not exist", True
            return f"does not exist{self._close_names(path)}: put it in {path.parent}", True
        except NotADirectoryError:
            return f"does not exist: {self._first_file_on_the_way(path)} is a file, not a directory", True
        except OSError as exc:
            return f"cannot be checked: {exc.strerror or exc}", True
        if stat.S_ISDIR(info.st_mode):
            return None if directory_ok else ("is a directory, not a script", True)
        if not stat.S_ISREG(info.st_mode):
            return "is not a regular file", True
        refusal, _ = check_permissions(path, info, self.strict_modes, root_only=self.root_only)
        if refusal is not None:
            return refusal, True
        effective = os.access in os.supports_effective_ids
        if executable and not os.access(path, os.X_OK, effective_ids=effective):
            return f"is not executable: run chmod +x {path}", True
        if not executable and not os.access(path, os.R_OK, effective_ids=effective):
            return f"is not readable: run chmod u+r {path}", True
        if executable:
            interpreter = _interpreter_line_problem(path)
            if interpreter is not None:
                return interpreter, True
        return None

    @staticmethod
    def _close_names(path: Path) -> str:
        try:
            names = os.listdir(path.parent)
        except OSError:
            return ""
        return did_you_mean(path.name, [name for name in names if name != "state.json"])

    def _first_file_on_the_way(self, path: Path) -> Path:
        for parent in reversed(path.parents):
            if self.directory in parent.parents and os.path.isfile(parent):
                return parent
        return path.parent


def _interpreter_line_problem(path: Path) -> str | None:
    """Why the kernel would refuse to run ``path`` for its ``#!`` line (said after
    "which"); None when it has none, or a good one. Like the kernel: the interpreter is
    the first word after ``#!``, the rest of the line its one argument; a carriage return
    is part of the line, not its end."""
    line = _first_line(path)
    if line is None or not line.startswith(b"#!"):
        return None  # no interpreter line: bash runs the script itself (or it is a binary)
    text = line[2:].decode("utf-8", "surrogateescape").strip(" \t")
    interpreter, *rest = re.split(r"[ \t]", text, maxsplit=1)
    argument = rest[0].strip(" \t") if rest else ""
    if not interpreter:
        return None  # "#!" alone: the kernel refuses, and bash runs the script itself
    if text.endswith("\r"):
        name = argument if argument.endswith("\r") else interpreter
        return (
            f"ends its #! line with a carriage return (Windows line endings), which the kernel takes as part "
            f"of {name!r}: run sed -i 's/\\r$//' {path}"
        )
    if not os.path.isabs(interpreter):
        return f"names {interpreter} on its #! line, which is no absolute path: write #!/usr/bin/env {interpreter}"
    try:
        info = os.stat(interpreter)
    except OSError:
        return f"names {interpreter} on its #! line, which does not exist"
    effective = os.access in os.supports_effective_ids
    if stat.S_ISDIR(info.st_mode) or not os.access(interpreter, os.X_OK, effective_ids=effective):
        return f"names {interpreter} on its #! line, which is not an executable file"
    return None


def _first_line(path: Path) -> bytes | None:
    """The first line of ``path`` (without its newline), as the kernel reads it; None when
    it cannot be read, or it is longer than the kernel reads (then it is not judged)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.read(descriptor, INTERPRETER_LINE_BYTES)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    end = head.find(b"\n")
    if end < 0:
        return head if len(head) < INTERPRETER_LINE_BYTES else None
    return head[:end]
