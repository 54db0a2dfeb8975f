"""Matchers: a regex anchored to the whole field, with literal alternations as a set lookup."""

from __future__ import annotations

import re

import attrs

from hookbus.errors import SpecError, shorten

# `write_file|edit_file` is a set of names: no regex needed to match it.
_LITERAL_ALTERNATION = re.compile(r"[\w-]+(?:\|[\w-]+)*")


@attrs.frozen
class Matcher:
    """A compiled ``trigger.matcher``: match-all, a set of literal names, or a regex."""

    source: str
    #: The names of a literal alternation; None when the matcher is a true regex or match-all.
    names: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None

    @property
    def matches_all(self) -> bool:
        return self.names is None and self.pattern is None

    def matches(self, value: str) -> bool:
        if self.names is not None:
            return value in self.names
        if self.pattern is not None:
            return self.pattern.fullmatch(value) is not None
        return True


def compile_matcher(source: str) -> Matcher:
    """Compile ``source``; "" and "*" match everything. SpecError when the regex is invalid."""
    if source in ("", "*"):
        return Matcher(source)
    if _LITERAL_ALTERNATION.fullmatch(source):
        return Matcher(source, names=frozenset(source.split("|")))
    try:
        pattern = re.compile(source)
    except re.error as exc:
        problem = str(exc)
    except RecursionError:
        problem = "nested too deeply"
    except OverflowError:  # a repeat count like a{4294967296}
        problem = "a repeat count is too large"
    else:
        return Matcher(source, pattern=pattern)
    raise SpecError(f"invalid matcher regex {shorten(source)!r}: {problem}", "$.trigger.matcher")
