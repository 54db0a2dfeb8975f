"""Tables for people: columns with headers, long text cut at a word, colour on a terminal.

Every cell goes through ``printable`` first (a hook's output or a model's reply must not
drive the terminal), then is cut to its column's width at a word boundary with ``…``.
Colour is used only when stdout is a terminal, ``NO_COLOR`` is unset (no-color.org) and
``TERM`` is not ``dumb``.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence, TextIO

from hookbus.terminal import printable

ELLIPSIS = "…"

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
#: The colour of a fire's status, or of a hook's verdict in ``explain``.
STATUS_COLOURS = {
    "deny": "red", "error": "red", "load error": "red", "modify": "yellow", "context": "cyan",
    "allow": "green", "done": "green", "matched": "green", "cancelled": "yellow", "interrupted": "yellow",
}


def wants_colour(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (stdout) should get colour."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Style:
    """Colours, or none: ``Style(on=False)`` returns text unchanged."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, *names: str) -> str:
        codes = [_CODES[name] for name in names if name in _CODES]
        if not self.on or not codes or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def status(self, text: str) -> str:
        colour = STATUS_COLOURS.get(text.split(" ", 1)[0] if text not in STATUS_COLOURS else text)
        return self(text, colour) if colour else text


def cut(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters: cut at the last word boundary
    that fits, with ``…``, or mid-word when the first word alone is too long."""
    text = " ".join(text.split())
    if width <= 0 or len(text) <= width:
        return text
    room = width - len(ELLIPSIS)
    head = text[:room + 1]
    space = head.rfind(" ")
    if space > room // 2:
        return text[:space].rstrip(" ,;:") + ELLIPSIS
    return text[:room] + ELLIPSIS


def table(
    rows: Sequence[Sequence[str]],
    headers: Sequence[str],
    style: Style,
    *,
    widths: Sequence[int | None] | None = None,
    status_column: int | None = None,
) -> list[str]:
    """Aligned lines: a header, then one line per row. ``widths`` caps columns (None: as
    wide as its widest cell); the last column is never padded. ``status_column`` is
    coloured by its value."""
    caps = list(widths or [None] * len(headers))
    cells = [[cut(printable(str(cell)), caps[index] or 0) for index, cell in enumerate(row)] for row in rows]
    sizes = [max([len(header), *(len(row[index]) for row in cells)]) for index, header in enumerate(headers)]
    lines = ["  ".join(style(header.ljust(size), "bold") for header, size in zip(headers, sizes)).rstrip()]
    for row in cells:
        parts = []
        for index, (cell, size) in enumerate(zip(row, sizes)):
            padded = cell if index == len(row) - 1 else cell.ljust(size)
            if index == status_column:
                padded = style.status(cell) + padded[len(cell):]
            parts.append(padded)
        lines.append("  ".join(parts).rstrip())
    return lines
