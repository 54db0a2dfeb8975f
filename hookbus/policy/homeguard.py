r"""The home guard: does one agent tool call write into a protected place?

The protected places are the hookbus home (``~/.vix``: its ``hooks/<id>/hook.json`` is
hot-reloaded, so an agent that writes there plants a hook that runs outside the agent's
sandbox) and the organization's managed directory (``/etc/vix``). The guard is built in and
on by default; ``HomeGuard.check`` reads a PreToolUse envelope, already in vixd's names
(Claude Code's native names are read too, for an envelope that was not translated), and
says what the call does wrong, or None.

Writes (``write_file``, ``edit_file``; ``Write``, ``Edit``, ``MultiEdit``, ``NotebookEdit``)
are checked exactly: the target is expanded (``~``), made absolute against the envelope's
``cwd`` (else this process's working directory) and read as the kernel reads it, twice:
fully resolved (``os.path.realpath``, which follows links in the existing prefix and a
dangling link at the end), and as named, with only its ``..`` resolved
(``homepath.kernel_path``), so that a link inside the home that points out of it
(``hooks -> /srv/hooks``) does not let a write to ``~/.vix/hooks/...`` through. Either one inside a place (its configured path or its realpath, equal or followed
by ``/``) is a write into it; a sibling that only shares a prefix (``~/.vix-other``) is not.

Bash is checked on a **best effort** basis only. A shell builds paths at run time
(``a=.v; b=ix; cp x ~/$a$b``, ``eval``, ``base64 -d``, ``$'\x2evix'``, ``python -c``, a
script already on disk, a relative path after ``cd`` to a directory that links into the
home), and no reading of the text can follow all of them: the guard stops the plain ways
and their common disguises, not a determined agent, which its sandbox must. A command is
refused when:

1. it names a place's path (configured or resolved) or one of the spellings the caller
   passes (``~/.vix``, ``$HOME/.vix``) as a whole path: before it, the start or a
   character that is no path character; after it, the end, ``/`` or a character that is no
   name character. Name characters are ASCII letters and digits, ``_ . - ~ + @ %`` and every
   non-ASCII character (bash keeps them in a word, and a file name commonly holds them);
   path characters are those and ``/``. So ``"/root/.vix"``, ``>/root/.vix/hooks``,
   ``--dir=/root/.vix``, ``/root/.vix*``, ``cd /root/.vix;`` are caught, and
   ``/root/.vix-other``, ``/root/.vix.bak``, ``/x/root/.vix`` are not (though 3 catches
   the last);
2. it names one of a place's variables (``$VIX_HOME``, ``${VIX_HOME:-x}``; not
   ``$VIX_HOME`` followed by a word character);
3. it names a place's last component as a path component, when that starts with a dot and
   is at least 3 characters long (``cd ~ && cd .vix``, ``> .vix/hooks/a/hook.json``; not
   ``.vixrc`` nor ``.vix-other``). It also refuses another directory of that name
   (``/srv/app/.vix``): the price of catching the relative ones, whose directory the
   guard cannot know after a ``cd``;
4. a path-like word (one with a ``/``, or starting with ``~``; also the value of
   ``--opt=value`` and ``NAME=value``, and what follows a short option, ``-C/x``) lands
   inside a place once expanded (``~``, ``~user``, ``~+``, a leading ``$HOME`` or
   ``$PWD``) and resolved as a write target is (``/tmp/link/hooks`` where ``/tmp/link`` is
   the home; ``/root/x/../.vix``). ``.`` and ``..`` are not read: they land in a place only
   when the working directory is in it, which 5 refuses. A word with glob or brace
   characters (``~/.v*``, ``/root/.{vix,x}``) is matched, component by component, against
   each place, as bash would expand it: a leading dot is matched only by a dot unless the
   command mentions ``dotglob`` or ``GLOBIGNORE``, and a brace group it does not expand
   (``{a..z}``, more than 64 words) matches anything. At most MAX_PATHS (256) distinct
   path-like words are resolved and MAX_WORDS (4096) read: a command with more is refused.
   A word longer than PATH_MAX is not resolved (the kernel refuses such a path name; 1-3
   still read it);
5. its working directory is inside a place (every relative write would land there);
6. it runs a hookbus verb that writes hooks into the home: ``hookbus install``, ``hookbus
   import``, or ``hookbus new`` without ``--dir`` (the escape hatch for a reviewed hook is
   the user's to run, not the agent's).

1-3 run on the command and on a copy of it without quotes and backslashes (``'``, ``"``,
``\``), which is how the shell concatenates ``~/'.vix'``, ``"$HOME"/.vix`` or
``/root/.v\ix``; 4 reads the words of that copy, split on bash's blanks, ``;&|<>()`` and
backticks, without the shell's quoting rules (a quoted path with a space is two words). A
glob is matched against the places' own names only: one that bash would expand through a
link (``/tmp/l*/hooks``) is not followed. ``~`` and ``$HOME`` are expanded with this
process's environment: the agent's, when it runs as the same user.

The places' realpaths and the regexes are built once, in ``HomeGuard.__init__``; a check
costs a few regex scans (some tens of microseconds for a common command) and a realpath
for each path it names (about as much again). Every regex is linear in the command (no
nested quantifiers), and each starts with a literal or a ``/`` found by ``str.find``, so
the engine skips to where it may match rather than trying every position: a command of
megabytes is read in a fraction of a second.

It fails closed: an input it cannot read (a ``tool_input`` that is not an object, a path or
command that is not a string, a NUL byte, a path that cannot be resolved, a relative path
with no working directory to read it against, too many paths) is refused, so that a call
the guard cannot read does not pass. A call whose field is absent entirely is left alone:
it writes nothing.
"""

from __future__ import annotations

import fnmatch
import os
import re
from typing import Any, ClassVar, Iterator, Mapping, Sequence

import attrs

from hookbus.homepath import kernel_path


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


#: The tools that write one file, and the field of their input that names it.
_TARGET_FIELDS: dict[str, str] = {
    "write_file": "path",
    "edit_file": "path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_COMMAND_TOOLS = frozenset({"bash", "Bash"})

#: Path-like words of a command resolved at most: each costs a few system calls.
MAX_PATHS = 256
#: Longer path names are refused by the kernel (ENAMETOOLONG), so they reach no place.
_PATH_MAX = 4096
#: How much of a path or word a phrase quotes.
_SHOWN = 160

# Name characters: what the shell keeps in one word and a file name commonly holds, so a
# place followed by one is another name (``.vix-other``). Non-ASCII counts as a name
# character: a multibyte letter continues a name.
_NAME_CHARS = r"A-Za-z0-9_.\-~+@%\u0080-\U0010ffff"
_PATH_CHARS = _NAME_CHARS + "/"
# What ends a word for rule 4: bash's blanks and metacharacters, and backticks (not the
# shell's full grammar: cheap, and enough to find paths). None is special in a regex class.
_SEPARATORS = " \t\n;&|<>()`"
_WORD_CHAR = f"[^{_SEPARATORS}]"
_SEPARATOR = re.compile(f"[{_SEPARATORS}]")
# A word that starts with ``~`` (or whose value after ``=`` does). Starting with its
# literal, the regex engine skips to each ``~`` without entering the pattern.
_TILDE_WORD = re.compile(f"~(?<![^{_SEPARATORS}=]~){_WORD_CHAR}*")
_UNQUOTE = str.maketrans("", "", "'\"\\")
#: Path-like words read at most, repeats included: a command that names the same few paths
#: thousands of times is not one to spend time on.
MAX_WORDS = 16 * MAX_PATHS
# Variables bash expands in a word's first place; $VIX_HOME is rule 2's.
_LEADING_VARIABLE = re.compile(r"\$(?:(HOME|PWD)|\{(HOME|PWD)\})(?=/|$)")
_GLOB_CHARS = re.compile(r"[*?[{]")
_OPTION_VALUE = re.compile(r"[/~]")
#: A glob component longer than this is taken as matching anything: no name is this long
#: (NAME_MAX is 255), and compiling it is not worth the time.
_MAX_GLOB = 1024
_INNER_BRACE = re.compile(r"\{([^{}]*)\}")
#: Words a component's brace groups expand to, at most; past it, any name may result.
_MAX_EXPANSIONS = 64


@attrs.frozen
class _Root:
    """One path a place is known by (configured, or resolved), ready to compare."""

    place: ProtectedPlace
    path: str
    #: ``path`` and a slash: what a path inside it starts with.
    prefix: str
    #: ``path``'s components, without the empty one before the first slash.
    parts: tuple[str, ...]


class HomeGuard:
    """Whether a tool call writes into one of ``places``; see the module's docstring."""

    #: The vixd tool names (and Claude Code's native names) this guard looks at.
    TOOLS: ClassVar[frozenset[str]] = frozenset(_TARGET_FIELDS) | _COMMAND_TOOLS

    def __init__(self, places: Sequence[ProtectedPlace]) -> None:
        roots: list[_Root] = []
        # Rules 1-3: (regex, what it finds, as a phrase shows it, place), first found first.
        names: dict[str, tuple[re.Pattern[str], str, ProtectedPlace]] = {}
        for place in places:
            configured = os.path.abspath(place.path)
            try:
                resolved = os.path.realpath(configured)
            except (OSError, ValueError):
                resolved = configured  # a path no file can have: its spelling is all there is
            for path in dict.fromkeys((configured, resolved)):
                prefix = path if path.endswith("/") else path + "/"
                roots.append(_Root(place, path, prefix, tuple(part for part in path.split("/") if part)))
            spellings = (spelling.rstrip("/") or spelling for spelling in place.spellings)
            for text in (configured, resolved, *spellings):
                # The unquoted form too: it is matched against the unquoted copy of a command.
                for form in (text, text.translate(_UNQUOTE)):
                    if form and form not in names:
                        names[form] = (_whole_path(form), text, place)
            for variable in place.variables:
                for form in (f"${variable}", f"${{{variable}"):
                    if form not in names:
                        names[form] = (_variable(form), f"${variable}", place)
            for path in (configured, resolved):
                name = os.path.basename(path)
                if name.startswith(".") and len(name) >= 3 and name not in names:
                    names[name] = (_component(name), name, place)
        self._roots = tuple(roots)
        self._names = tuple(names.values())

    def check(self, envelope: Mapping[str, Any]) -> str | None:
        """None when the call writes into no protected place; else a short phrase saying what it does, for the deny reason, e.g. "write_file targets /root/.vix/hooks/x/hook.json, inside the hookbus home /root/.vix" or "the bash command names the hookbus home (~/.vix)"."""
        tool = envelope.get("tool_name")
        if not self._roots or not isinstance(tool, str) or tool not in self.TOOLS:
            return None
        if "tool_input" not in envelope:
            return None
        tool_input = envelope["tool_input"]
        if not isinstance(tool_input, Mapping):
            return f"{tool}'s input is {_kind(tool_input)}, not an object: the guard cannot check it"
        field = "command" if tool in _COMMAND_TOOLS else _TARGET_FIELDS[tool]
        if field not in tool_input:
            return None
        value = tool_input[field]
        if not isinstance(value, str):
            return f"{tool}'s {field} is {_kind(value)}, not a string: the guard cannot check it"
        if tool in _COMMAND_TOOLS:
            return self._check_command(value, envelope)
        return self._check_target(tool, value, envelope)

    def _check_target(self, tool: str, target: str, envelope: Mapping[str, Any]) -> str | None:
        if "\0" in target:
            return f"{tool}'s {_TARGET_FIELDS[tool]} holds a NUL byte: the guard cannot check it"
        absolute = os.path.expanduser(target)
        if not os.path.isabs(absolute):
            cwd = _working_directory(envelope)
            if cwd is None:
                return f"{tool} targets the relative path {_shown(target)}, and the working directory is unknown"
            absolute = os.path.join(cwd, absolute)
        try:
            found = self._landing(absolute)
        except (OSError, ValueError, RuntimeError):
            return f"{tool} targets {_shown(target)}, which the guard cannot resolve"
        if found is None:
            return None
        landed, root = found
        where = f"{root.place.label} {root.place.path}"
        if landed == target:
            return f"{tool} targets {_shown(target)}, inside {where}"
        return f"{tool} targets {_shown(target)}, which is {_shown(landed)}, inside {where}"

    def _check_command(self, command: str, envelope: Mapping[str, Any]) -> str | None:
        if "\0" in command:
            return "the bash command holds a NUL byte: the guard cannot check it"
        cwd = _working_directory(envelope)
        if cwd is not None:  # rule 5
            try:
                found = self._landing(cwd)
            except (OSError, ValueError, RuntimeError):
                return f"the bash command runs in {_shown(cwd)}, which the guard cannot resolve"
            if found is not None:
                place = found[1].place
                return f"the bash command runs in {_shown(cwd)}, inside {place.label} {place.path}"
        unquoted = command.translate(_UNQUOTE)
        for text in (command, unquoted) if unquoted != command else (command,):  # rules 1-3
            named = self._named(text)
            if named is not None:
                return named
        if "hookbus" in unquoted:  # rule 6
            running = _hookbus_writes(unquoted)
            if running is not None:
                return running
        return self._check_words(unquoted, command, cwd)

    def _named(self, text: str) -> str | None:
        """Rules 1-3. One regex per name: each starts with its name's first character, so
        the engine skips to where that name is (a scan of a few milliseconds per megabyte)."""
        for pattern, shown, place in self._names:
            if pattern.search(text) is not None:
                return f"the bash command names {place.label} ({shown})"
        return None

    def _check_words(self, unquoted: str, command: str, cwd: str | None) -> str | None:
        """Rule 4: each distinct path-like word of the command, resolved."""
        seen: set[str] = set()
        dotglob: bool | None = None  # looked up once, and only for a glob
        for count, word in enumerate(_path_words(unquoted)):
            if count >= MAX_WORDS:
                return f"the bash command names more than {MAX_WORDS} paths: too many to check"
            for candidate in _candidates(word):
                if candidate in seen or not _path_like(candidate):
                    continue
                seen.add(candidate)
                if len(seen) > MAX_PATHS:
                    return f"the bash command names more than {MAX_PATHS} paths: too many to check"
                if len(candidate) > _PATH_MAX:
                    continue
                absolute = _expanded(candidate, cwd)
                if absolute is None:
                    return (
                        f"the bash command names the relative path {_shown(candidate)}, "
                        "and the working directory is unknown"
                    )
                try:
                    found = self._landing(absolute)
                except (OSError, ValueError, RuntimeError):
                    return f"the bash command names {_shown(candidate)}, which the guard cannot resolve"
                if found is not None:
                    landed, root = found
                    return (
                        f"the bash command names {_shown(candidate)}, which is {_shown(landed)}, "
                        f"inside {root.place.label} {root.place.path}"
                    )
                if _GLOB_CHARS.search(candidate) is None:
                    continue
                if dotglob is None:
                    dotglob = "dotglob" in command or "GLOBIGNORE" in command
                root_found = self._glob_root(absolute, dotglob)
                if root_found is not None:
                    place = root_found.place
                    return f"the bash command's pattern {_shown(candidate)} can name {place.label} {place.path}"
        return None

    def _landing(self, absolute: str) -> tuple[str, _Root] | None:
        """The reading of ``absolute`` that lands in a place, and the place's root: fully
        resolved, or as named with only its ``..`` resolved. Raises what realpath raises."""
        for path in dict.fromkeys((os.path.realpath(absolute), kernel_path(absolute))):
            root = self._root_of(path)
            if root is not None:
                return path, root
        return None

    def _root_of(self, path: str) -> _Root | None:
        for root in self._roots:
            if path == root.path or path.startswith(root.prefix):
                return root
        return None

    def _glob_root(self, absolute: str, dotglob: bool) -> _Root | None:
        """A place that the pattern ``absolute`` can name, or something inside it."""
        try:
            path = os.path.realpath(absolute)  # resolves the prefix that exists; globs do not
        except (OSError, ValueError, RuntimeError):
            path = absolute
        parts = [part for part in path.split("/") if part]
        for root in self._roots:
            if len(parts) >= len(root.parts) and all(
                _component_matches(pattern, name, dotglob) for pattern, name in zip(parts, root.parts)
            ):
                return root
        return None


# Rules 1-3's regexes. Each starts with its literal (no lookbehind first, which would have
# the engine try the pattern at every position) and checks the character before it after.


#: ``hookbus`` as a command word (``/usr/bin/hookbus``, ``python -m hookbus``), and the
#: verbs that write hooks into the home. A command that names hookbus more often than this
#: is refused rather than read to its end.
_HOOKBUS_WORD = re.compile(r"(?<![\w.-])hookbus(?![\w.-])")
_WRITING_VERBS = ("install", "import", "new")
_MAX_HOOKBUS_WORDS = 256
#: How far past ``hookbus`` its verb is looked for (``--home DIR`` comes first, at most).
_VERB_WINDOW = 4096


def _hookbus_writes(command: str) -> str | None:
    """Rule 6: the phrase for the first hookbus command line that writes hooks into the
    home, or None."""
    for count, found in enumerate(_HOOKBUS_WORD.finditer(command)):
        if count >= _MAX_HOOKBUS_WORDS:
            return f"the bash command names hookbus more than {_MAX_HOOKBUS_WORDS} times: the guard cannot check it"
        window = command[found.end() : found.end() + _VERB_WINDOW]
        segment = _SEGMENT_END.split(window, maxsplit=1)[0]
        words = segment.split()
        verb = None
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word == "--home":
                skip = True
            elif not word.startswith("-"):
                verb = word
                break
        if verb in _WRITING_VERBS and (verb != "new" or "--dir" not in words and not any(w.startswith("--dir=") for w in words)):
            return f"the bash command runs `hookbus {verb}`, which writes hooks into the hookbus home"
    return None


_SEGMENT_END = re.compile(r"[;&|\n()`]")


def _whole_path(path: str) -> re.Pattern[str]:
    """``path`` as a whole path: not preceded by a path character, nor followed by a name
    character."""
    literal = re.escape(path)
    return re.compile(rf"{literal}(?<![{_PATH_CHARS}]{literal})(?![{_NAME_CHARS}])")


def _variable(form: str) -> re.Pattern[str]:
    """``$NAME`` or ``${NAME``, the name ending there (``${NAME:-x}``, not ``$NAMEX``)."""
    return re.compile(rf"{re.escape(form)}(?![A-Za-z0-9_])")


def _component(name: str) -> re.Pattern[str]:
    """``name`` as a path component: after the start, a ``/`` or a character that is no
    path character; before the end, a ``/`` or a character that is no name character."""
    literal = re.escape(name)
    return re.compile(rf"{literal}(?<![{_NAME_CHARS}]{literal})(?![{_NAME_CHARS}])")


def _working_directory(envelope: Mapping[str, Any]) -> str | None:
    """The agent's working directory: the envelope's ``cwd``, else this process's; None when
    neither can be had."""
    cwd = envelope.get("cwd")
    if isinstance(cwd, str) and os.path.isabs(cwd) and "\0" not in cwd:
        return cwd
    try:
        return os.getcwd()
    except OSError:
        return None


def _path_words(text: str) -> Iterator[str]:
    """The words of ``text`` with a slash, then those that start with ``~``; repeats
    included. A word with a slash is found by its slash, the engine skipping to each (a
    regex tried at every separator costs ten times more on a long command), and then its
    start, backward, and its end."""
    end = 0
    while (slash := text.find("/", end)) != -1:
        start = max(text.rfind(separator, end, slash) for separator in _SEPARATORS) + 1
        after = _SEPARATOR.search(text, slash)
        end = after.start() if after is not None else len(text)
        yield text[start:end]
    for match in _TILDE_WORD.finditer(text):
        yield match.group()


def _candidates(word: str) -> list[str]:
    """The paths a word may name: itself; the value of ``--opt=value`` or ``NAME=value``;
    what follows a short option (``-C/x``, ``-o~/x``)."""
    candidates = [word]
    if "=" in word:
        candidates.append(word.split("=", 1)[1])
    if word.startswith("-"):
        start = _OPTION_VALUE.search(word)
        if start is not None:
            candidates.append(word[start.start() :])
    return candidates


def _path_like(word: str) -> bool:
    return "/" in word or word.startswith("~") or word in (".", "..")


def _expanded(word: str, cwd: str | None) -> str | None:
    """``word`` as an absolute path, as bash would expand its start (``~``, ``~user``,
    ``~+``, ``$HOME``, ``$PWD``); None when it is relative and ``cwd`` unknown."""
    if word == "~+" or word.startswith("~+/"):
        word = (cwd or "~+") + word[2:]
    else:
        variable = _LEADING_VARIABLE.match(word)
        if variable is not None:
            name = variable.group(1) or variable.group(2)
            value = os.path.expanduser("~") if name == "HOME" else cwd
            if value is not None:
                word = value + word[variable.end() :]
        word = os.path.expanduser(word)
    if os.path.isabs(word):
        return word
    return os.path.join(cwd, word) if cwd is not None else None


def _component_matches(pattern: str, name: str, dotglob: bool) -> bool:
    """Whether bash could expand the path component ``pattern`` to ``name``."""
    if pattern == name:
        return True
    if _GLOB_CHARS.search(pattern) is None:
        return False
    words = _brace_words(pattern) if len(pattern) <= _MAX_GLOB else None
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


def _brace_words(pattern: str) -> list[str] | None:
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


def _kind(value: object) -> str:
    """A JSON value's kind, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _shown(text: str) -> str:
    """``text`` as a phrase quotes it: short, and without control characters."""
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    return text if text.isprintable() else repr(text)
