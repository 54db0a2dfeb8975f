"""Text rules, for what is not bash: code given to ``python -c``, a sed script, the words a
pipe feeds a shell the guard cannot read. A place is found in such a text by its path, a
spelling of it or its variable as a whole (the regexes built here, once per place), by a
``hookbus`` command line that writes hooks, or by a word that reads as a path (``~``,
``$HOME`` and ``$PWD`` expanded as a shell would expand them)."""

from __future__ import annotations

import os
import re
from typing import Iterator

# Name characters: what the shell keeps in one word and a file name commonly holds, so a
# place followed by one is another name (``.vix-other``). Non-ASCII counts as a name
# character: a multibyte letter continues a name.
_NAME_CHARS = r"A-Za-z0-9_.\-~+@%\u0080-\U0010ffff"
_PATH_CHARS = _NAME_CHARS + "/"
# What ends a word in text that is not bash (code given to python -c, a sed script):
# blanks, bash's metacharacters, backticks, and the quotes code uses around a path.
_SEPARATORS = " \t\n;&|<>()`'\",="
_WORD_CHAR = f"[^{_SEPARATORS}]"
_SEPARATOR = re.compile(f"[{_SEPARATORS}]")
_TILDE_WORD = re.compile(f"~(?<![^{_SEPARATORS}]~){_WORD_CHAR}*")
UNQUOTE = str.maketrans("", "", "'\"\\")
# Variables bash expands in a word's first place; $VIX_HOME is rule 2's.
_LEADING_VARIABLE = re.compile(r"\$(?:(HOME|PWD)|\{(HOME|PWD)\})(?=/|$)")
OPTION_VALUE = re.compile(r"[/~]")


#: ``hookbus`` as a command word (``/usr/bin/hookbus``, ``python -m hookbus``), and the
#: verbs that write hooks into the home. A text that names hookbus more often than this
#: is refused rather than read to its end.
_HOOKBUS_WORD = re.compile(r"(?<![\w.-])hookbus(?![\w.-])")
_WRITING_VERBS = ("install", "import", "new")
_MAX_HOOKBUS_WORDS = 256
#: How far past ``hookbus`` its verb is looked for (``--home DIR`` comes first, at most).
_VERB_WINDOW = 4096
_SEGMENT_END = re.compile(r"[;&|\n()`]")


def hookbus_writes(command: str) -> str | None:
    """The phrase for the first hookbus command line in a text that writes hooks into the
    home, or None."""
    for count, found in enumerate(_HOOKBUS_WORD.finditer(command)):
        if count >= _MAX_HOOKBUS_WORDS:
            return f"names hookbus more than {_MAX_HOOKBUS_WORDS} times: the guard cannot check it"
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
        has_dir = any(len(word.split("=", 1)[0]) >= 3 and "--dir".startswith(word.split("=", 1)[0]) for word in words)
        if verb in _WRITING_VERBS and (verb != "new" or not has_dir):
            return f"runs `hookbus {verb}`, which writes hooks into the hookbus home"
    return None


def path_pattern(path: str) -> re.Pattern[str]:
    """``path`` as a whole path: not preceded by a path character, nor followed by a name
    character. Each regex starts with its literal (no lookbehind first, which would have
    the engine try the pattern at every position) and checks the character before it after."""
    literal = re.escape(path)
    return re.compile(rf"{literal}(?<![{_PATH_CHARS}]{literal})(?![{_NAME_CHARS}])")


def variable_pattern(form: str) -> re.Pattern[str]:
    """``$NAME`` or ``${NAME``, the name ending there (``${NAME:-x}``, not ``$NAMEX``)."""
    return re.compile(rf"{re.escape(form)}(?![A-Za-z0-9_])")


def component_pattern(name: str) -> re.Pattern[str]:
    """``name`` as a path component: after the start, a ``/`` or a character that is no
    path character; before the end, a ``/`` or a character that is no name character."""
    literal = re.escape(name)
    return re.compile(rf"{literal}(?<![{_NAME_CHARS}]{literal})(?![{_NAME_CHARS}])")


#: A user name ``~name`` may hold: what is looked up (the system's user database is not
#: asked about a name no user can have: a megabyte one aborts some NSS modules).
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def expand_user(path: str) -> str:
    """``os.path.expanduser``, for a name a user can have."""
    if path.startswith("~"):
        end = path.find("/")
        name = path[1:] if end < 0 else path[1:end]
        if name and not _USER_NAME.fullmatch(name):
            return path
    return os.path.expanduser(path)


def path_words(text: str) -> Iterator[str]:
    """The words of ``text`` with a slash, then those that start with ``~``; repeats
    included. A word with a slash is found by its slash, the engine skipping to each, and
    then its start, backward, and its end."""
    end = 0
    while (slash := text.find("/", end)) != -1:
        start = max(text.rfind(separator, end, slash) for separator in _SEPARATORS) + 1
        after = _SEPARATOR.search(text, slash)
        end = after.start() if after is not None else len(text)
        yield text[start:end]
    for match in _TILDE_WORD.finditer(text):
        yield match.group()


def path_candidates(word: str) -> list[str]:
    """The paths a word of text may name: itself; the value of ``--opt=value``; what follows
    a short option (``-C/x``, ``-o~/x``)."""
    candidates = [word]
    if "=" in word:
        candidates.append(word.split("=", 1)[1])
    if word.startswith("-"):
        start = OPTION_VALUE.search(word)
        if start is not None:
            candidates.append(word[start.start() :])
    return candidates


def path_like(word: str) -> bool:
    """A word that may be a path: it has a slash, or starts with ``~``."""
    return "/" in word or word.startswith("~")


def expanded_path(word: str, cwd: str | None) -> str | None:
    """``word`` as an absolute path, as a shell would expand its start (``~``, ``~user``,
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
        word = expand_user(word)
    if os.path.isabs(word):
        return word
    return os.path.join(cwd, word) if cwd is not None else None
