"""Tables for people: columns with headers, long text cut at a word, colour on a terminal.

Every cell goes through ``printable`` first (a hook's output or a model's reply must not
drive the terminal), then is cut to its column's width at a word boundary with ``…``.
Colour is used only when stdout is a terminal, ``NO_COLOR`` is unset (no-color.org) and
``TERM`` is not ``dumb``.

On a terminal, tables fit its width (``$COLUMNS`` when set, else the terminal's own): the
widest columns shrink first, down to a floor, so that a short column is never cut for a
long one's sake. Piped output is never fitted, whatever ``$COLUMNS`` says (readline, for
one, exports it into the environment of every process a Python program starts): a file or
``grep`` gets whole cells (within each column's own cap), and lines as long as they need.
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
    "shadow": "dim",
}


def wants_colour(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (stdout) should get colour."""
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


#: The narrowest a column is cut to when the table must fit (its header, if wider, stays whole).
MIN_COLUMN = 8
#: Between two columns.
GAP = 2


def terminal_width(stream: TextIO | None = None) -> int | None:
    """How wide lines may be on ``stream`` (stdout): None when it is no terminal (piped: no
    limit); else ``$COLUMNS`` when it is a positive number, else the terminal's width."""
    stream = stream or sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(stream.fileno()).columns or None
    except (AttributeError, ValueError, OSError):
        return None


class Style:
    """How text is shown: in colour or not (``Style(False)`` returns text unchanged), and
    how wide a line may be (``width``; None: no limit)."""

    def __init__(self, on: bool, width: int | None = None) -> None:
        self.on = on
        self.width = width

    @classmethod
    def for_stdout(cls) -> Style:
        """Colour and width as stdout wants them (``wants_colour``, ``terminal_width``)."""
        return cls(wants_colour(), terminal_width())

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


def fit(sizes: Sequence[int], width: int | None, floors: Sequence[int]) -> list[int]:
    """Column sizes whose line (with a GAP between columns) is at most ``width``: the widest
    columns are shrunk to one common cap, as high as fits, each to no less than its floor
    (nor more than its size). When even the floors do not fit, the floors: the line is then
    as narrow as the table can be. ``width`` None: ``sizes`` unchanged."""
    sizes = list(sizes)
    room = None if width is None else width - GAP * (len(sizes) - 1)
    if room is None or sum(sizes) <= room:
        return sizes
    floors = [min(size, floor) for size, floor in zip(sizes, floors)]

    def capped(cap: int) -> list[int]:
        return [max(floor, min(size, cap)) for size, floor in zip(sizes, floors)]

    low, high = 0, max(sizes)  # capped(high) is sizes, which does not fit
    while low < high - 1:
        middle = (low + high) // 2
        if sum(capped(middle)) <= room:
            low = middle
        else:
            high = middle
    return capped(low)


def table(
    rows: Sequence[Sequence[str]],
    headers: Sequence[str],
    style: Style,
    *,
    widths: Sequence[int | None] | None = None,
    status_column: int | None = None,
    keep: Sequence[int] = (),
) -> list[str]:
    """Aligned lines: a header, then one line per row. ``widths`` caps columns (None: as
    wide as its widest cell); the last column is never padded. ``status_column`` is
    coloured by its value. The table fits ``style.width``, the columns in ``keep`` (ids)
    aside, which are never cut to fit."""
    caps = list(widths or [None] * len(headers))
    texts = [[printable(str(cell)) for cell in row] for row in rows]
    sizes = [
        max([len(header), *(len(_one_line(row[index])) for row in texts)]) for index, header in enumerate(headers)
    ]
    sizes = [min(size, max(cap, len(header))) if cap else size for size, cap, header in zip(sizes, caps, headers)]
    floors = [size if index in keep else max(len(header), MIN_COLUMN) for index, (size, header) in enumerate(zip(sizes, headers))]
    sizes = fit(sizes, style.width, floors)
    cells = [[cut(text, size) for text, size in zip(row, sizes)] for row in texts]
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


def _one_line(text: str) -> str:
    """``text`` as ``cut`` shows it: its whitespace runs as single spaces."""
    return " ".join(text.split())
