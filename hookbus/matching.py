"""Matchers: a regex anchored to the whole field, with literal alternations as a set lookup.

Regexes run on RE2 (the google-re2 package), whose matching time is linear in the length
of the field. The field is often the model's choice (a tool name), and with Python's
backtracking ``re`` a matcher like ``(a+)+$`` takes time exponential in it while holding
the GIL: a 25-character tool name froze the whole process for 2.5 s, twice as long for
each character more. What RE2 cannot run in linear time (backreferences, lookaround,
possessive and atomic groups, conditionals) is refused at load, and so is what RE2 would
read differently from Python's ``re`` (the dialect authors know), rather than letting a
matcher change meaning silently.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs

from hookbus.errors import SpecError, shorten

# `write_file|edit_file` is a set of names: no regex needed to match it.
_LITERAL_ALTERNATION = re.compile(r"[\w-]+(?:\|[\w-]+)*")

#: RE2's default: the compiled program gets most of it, the DFA's cache the rest.
MAX_MEMORY = 8 << 20

_WHY = "(hookbus matches with RE2, which runs in linear time)"


def encode(value: str) -> bytes:
    """``value`` as RE2 reads it. A lone surrogate (JSON's ``"\\ud800"``) has no UTF-8 form:
    it is kept as its three bytes, which ``.`` matches as Python's ``re`` did, instead of
    failing the emit."""
    return value.encode("utf-8", "surrogatepass")


@attrs.frozen
class Regex:
    """A pattern compiled by RE2, asked only whether it matches all of a value."""

    source: str
    _compiled: Any = attrs.field(eq=False, repr=False)

    def fullmatch(self, data: bytes) -> bool:
        """Whether the pattern matches all of ``data`` (a value passed through ``encode``)."""
        return self._compiled.fullmatch(data) is not None


@attrs.frozen
class Matcher:
    """A compiled ``trigger.matcher``: match-all, a set of literal names, or a regex."""

    source: str
    #: The names of a literal alternation; None when the matcher is a true regex or match-all.
    names: frozenset[str] | None = None
    #: Compiled from ``source``, so equal sources make equal matchers whatever RE2 returns.
    pattern: Regex | None = attrs.field(default=None, eq=False)

    @property
    def matches_all(self) -> bool:
        return self.names is None and self.pattern is None

    def matches(self, value: str) -> bool:
        if self.names is not None:
            return value in self.names
        if self.pattern is not None:
            return self.pattern.fullmatch(encode(value))
        return True

    def matches_encoded(self, data: bytes) -> bool:
        """``matches`` for a value already passed through ``encode``: the registry encodes
        a value once for all the regexes of an event."""
        if self.pattern is not None:
            return self.pattern.fullmatch(data)
        return self.matches(data.decode("utf-8", "surrogatepass"))


def compile_matcher(source: str) -> Matcher:
    """Compile ``source``; "" and "*" match everything. SpecError when the regex is invalid."""
    if source in ("", "*"):
        return Matcher(source)
    if _LITERAL_ALTERNATION.fullmatch(source):
        return Matcher(source, names=frozenset(source.split("|")))
    try:
        pattern = compile_regex(source)
    except ValueError as exc:
        raise SpecError(
            f"invalid matcher regex {shorten(source)!r}: {exc}", "$.trigger.matcher"
        ) from None
    return Matcher(source, pattern=pattern)


def compile_regex(source: str) -> Regex:
    """RE2's compilation of ``source``; ValueError saying, in plain words, why RE2 cannot run
    it or would read it differently from Python's ``re``."""
    problem = _misread(source)
    if problem is None:
        try:
            encoded = source.encode("utf-8")
        except UnicodeEncodeError:
            problem = "it is not valid Unicode (it holds a lone surrogate such as \\ud800)"
        else:
            re2, options = _engine()
            try:
                return Regex(source, re2.compile(encoded, options))
            except re2.error as exc:
                problem = _explain(exc, source)
    raise ValueError(problem)


@functools.cache
def _engine() -> tuple[Any, Any]:
    # Imported on first use (some 3 ms): a home without a true regex, which is what most
    # CLI runs load, does not pay for it.
    try:
        import re2

        options = re2.Options()
    except (ImportError, AttributeError):  # AttributeError: another package's "re2" module
        raise ValueError(
            "regex matchers need the google-re2 package, which is missing or hidden by "
            "another module named re2: pip install google-re2"
        ) from None
    options.max_mem = MAX_MEMORY
    # RE2 would also print each refused pattern to stderr; the SpecError says it instead.
    options.log_errors = False
    # A matcher's groups mean nothing, and without them RE2 answers from its DFA alone.
    options.never_capture = True
    return re2, options


# -- what RE2 would read differently from Python's re, or slowly -------------------------------

# A repeat as Python's re reads it; RE2 reads only {m}, {m,} and {m,n}, without leading
# zeros, and takes the other forms as literal text.
_BRACES = re.compile(r"\{([0-9]*)(?:(,)([0-9]*))?\}")  # one way to match: linear
# Three octal digits are a character code in both; other digit escapes are group references.
_OCTAL = re.compile(r"[1-3][0-7][0-7]")
_POSIX_CLASS = re.compile(r"\[:\^?[a-z]+:\]")
_MAX_REPEAT = 1000

_BACKREFERENCE = f"backreferences are not supported {_WHY}: rewrite it without one"
_LITERAL_BRACKET = (
    "[: inside a character class starts a POSIX class such as [:alpha:]: "
    "write \\[ for a literal ["
)


def _misread(source: str) -> str | None:
    """Why ``source`` is refused before RE2 sees it: RE2 would take it for something other
    than what Python's ``re`` reads (the dialect authors know), or parse it in quadratic
    time. None when nothing is."""
    position, end = 0, len(source)
    while position < end:
        char = source[position]
        if char == "\\":
            following = source[position + 1 : position + 2]
            if following == "Q":
                closing = source.find("\\E", position + 2)
                if closing < 0:
                    return None  # quoted to the end: nothing after it is syntax
                position = closing + 2
                continue
            if following and following in "123456789" and not _OCTAL.match(source, position + 1):
                return _BACKREFERENCE  # RE2 would take \10 as an octal escape
            position += 2
        elif char == "[":
            position, problem = _class_end(source, position)
            if problem is not None:
                return problem
        elif char == "{":
            braces = _BRACES.match(source, position)
            if braces is not None and braces.group(0) != "{}":
                low, comma, high = braces.groups(default="")
                problem = _repeat_problem(low, comma, high)
                if problem is not None:
                    return f"{shorten(braces.group(0), 30)}{problem}"
            position += 1
        else:
            position += 1
    return None


def _repeat_problem(low: str, comma: str, high: str) -> str | None:
    if any(_count(number) > _MAX_REPEAT for number in (low, high) if number):
        return f": repeat counts go up to {_MAX_REPEAT}"
    if not low:
        rewritten = "*" if not high else f"{{0,{_count(high)}}}"
        return f" would be read as literal text: write {rewritten}"
    if any(len(number) > 1 and number.startswith("0") for number in (low, high)):
        rewritten = f"{{{_count(low)}{comma}{_count(high) if high else ''}}}"
        return f" would be read as literal text: write {rewritten}"
    return None


def _count(digits: str) -> int:
    """The number ``digits`` write; past a million, a million (int() would refuse 100,000
    digits, and no limit here is near)."""
    digits = digits.lstrip("0")
    return int(digits or "0") if len(digits) <= 6 else 10**6


def _class_end(source: str, position: int) -> tuple[int, str | None]:
    """Where the character class opening at ``position`` ends (the end of ``source`` when it
    never closes: RE2 then refuses it), or why it is refused."""
    position += 1
    if source.startswith("^", position):
        position += 1
    if source.startswith("]", position):
        position += 1  # a ] first is a member, not the end
    end = len(source)
    while position < end:
        char = source[position]
        if char == "\\":
            position += 2
        elif char == "]":
            return position + 1, None
        elif char == "[" and source.startswith(":", position + 1):
            # RE2 searches the rest of the pattern for the ":]" that would close a POSIX
            # class; thousands of "[:" make that quadratic, seconds at load. Python's re
            # reads them as a literal [ (and warns of a possible nested set).
            posix = _POSIX_CLASS.match(source, position)
            if posix is None:
                return end, _LITERAL_BRACKET
            position = posix.end()
        else:
            position += 1
    return end, None


# -- RE2's refusals in plain words -------------------------------------------------------------

# Escapes RE2 knows; any other letter after a backslash is one it does not support.
_KNOWN_ESCAPES = frozenset("afntrvxAbBzdDsSwWpPQEC")
_FLAGS = re.compile(r"\(\?-?[a-zA-Z]+(?:-[a-zA-Z]*)?")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})")

_PERL_OPERATORS = {
    "(?=": f"lookahead is not supported {_WHY}: rewrite it without it",
    "(?!": f"lookahead is not supported {_WHY}: rewrite it without it",
    "(?<=": f"lookbehind is not supported {_WHY}: rewrite it without it",
    "(?<!": f"lookbehind is not supported {_WHY}: rewrite it without it",
    "(?>": f"atomic groups are not supported {_WHY}: rewrite it without one",
    "(?(": f"conditionals are not supported {_WHY}: rewrite it without one",
    "(?#": "comments (?#...) are not supported: remove it",
    "(?'": "a named group is written (?P<name>...) or (?<name>...)",
    "(?|": "branch reset groups (?|...) are not supported",
}
_RECURSION = f"recursion and subroutine calls are not supported {_WHY}: rewrite it without them"


def _explain(error: Exception, source: str) -> str:
    """RE2's error about ``source`` in plain words; RE2's own message when no rule knows it."""
    raw = error.args[0] if error.args else ""
    message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if message.startswith("pattern too large"):
        return (
            f"it is too big for RE2's memory budget ({MAX_MEMORY >> 20} MiB compiled): make "
            "it smaller, with fewer or shorter repeats of . or of large classes like \\pL"
        )
    kind, _, fragment = message.partition(": ")
    if kind == "invalid perl operator":
        return _perl_operator(fragment, source) or shorten(message)
    if kind == "invalid escape sequence":
        return _escape(fragment, source) or shorten(message)
    if kind == "bad repetition operator":
        operator = shorten(fragment, 30)
        if len(fragment) > 1 and fragment.endswith("+"):
            return (
                f"possessive quantifiers ({operator}) are not supported {_WHY}: "
                "rewrite it without one"
            )
        return f"{operator} repeats a repetition: remove one, or group the first with (?:...)"
    if kind == "invalid repetition size":
        numbers = [int(number) for number in re.findall(r"[0-9]+", fragment)]
        repeat = shorten(fragment, 30)
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            return f"invalid repetition size: {repeat} (the minimum is above the maximum)"
        return (
            f"{repeat}: repeat counts go up to {_MAX_REPEAT}, counting repeats nested in "
            "each other multiplied"
        )
    plain = {
        "missing )": "missing ): a ( is never closed",
        "missing ]": "missing ]: a [ is never closed",
        "unexpected )": "unexpected ): a ) closes no group",
        "trailing \\": "trailing \\: it ends in a lone backslash (write \\\\ for a backslash)",
    }
    if kind in plain:
        return plain[kind]
    if kind == "no argument for repetition operator":
        return f"nothing to repeat before {shorten(fragment)}"
    return shorten(message)


def _perl_operator(fragment: str, source: str) -> str | None:
    if fragment in _PERL_OPERATORS:
        return _PERL_OPERATORS[fragment]
    if fragment == "(?P":  # (?P=name) or (?P>name): RE2 names only the common start
        if "(?P=" in source:
            return _BACKREFERENCE
        if "(?P>" in source:
            return _RECURSION
        return None
    if re.fullmatch(r"\(\?(?:R|&|[+-]?[0-9])", fragment):
        return _RECURSION
    if _FLAGS.fullmatch(fragment) and fragment[-1] not in "imsU":  # else: (?i never closed
        return f"the flag {fragment[-1]} is not supported: RE2 knows i, m, s and U"
    return None


def _escape(fragment: str, source: str) -> str | None:
    letter = fragment[1:2]
    if len(fragment) != 2 or not (letter.isascii() and letter.isalnum()):
        return None
    if letter.isdigit() or letter in "kg":
        return _BACKREFERENCE
    if letter == "Z":
        return (
            "\\Z is not supported: leave it out, a matcher is anchored to the whole field "
            "already (or write \\z)"
        )
    if letter in "uUN":
        code = _UNICODE_ESCAPE.search(source)
        example = f"{int(code.group(1) or code.group(2), 16):04x}" if code else "263a"
        return f"\\{letter} is not supported: write the character itself, or \\x{{{example}}}"
    if letter not in _KNOWN_ESCAPES:
        return (
            f"the escape \\{letter} is not supported "
            "(RE2's syntax: https://github.com/google/re2/wiki/Syntax)"
        )
    return None
