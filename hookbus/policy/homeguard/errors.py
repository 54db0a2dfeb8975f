"""The two ways a check ends early: a path or command the guard cannot read as the
writer would (``Unreadable``: the call is refused, the guard failing closed), and a write
into a place, found (``Deny``)."""

from __future__ import annotations


class Unreadable(Exception):
    """A path or command the guard cannot read as the writer would: the call is refused."""

    def __init__(self, why: str, descriptor: int | None = None) -> None:
        super().__init__(why)
        self.why = why
        #: The descriptor a ``/proc/self/fd/N`` path names, when it names one.
        self.descriptor = descriptor


class Deny(Exception):
    """A write into a place was found: ``phrase`` says what."""

    def __init__(self, phrase: str) -> None:
        super().__init__(phrase)
        self.phrase = phrase
