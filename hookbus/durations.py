"""Go-style durations (``500ms``, ``5s``, ``10m``, ``1h30m``), as hook.json's ``timeout`` uses."""

from __future__ import annotations

import functools
import re
import threading

from hookbus.errors import shorten
from hookbus.jsontext import json_type_name

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
# ASCII digits only: Python's \d (and float()) would take "٥s" or "５s".
_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
#: A whole duration, as hook.json's schema publishes it too.
DURATION_SYNTAX = re.compile(rf"(?:{_PART.pattern})+")
#: The longest duration a wait can take: threading's limit, just under Go's own maximum
#: (2562047h47m16.854775807s), so every duration Go refuses is refused here too.
MAX_SECONDS = threading.TIMEOUT_MAX


@functools.lru_cache(maxsize=256)  # hooks repeat the same few timeouts: "5s", "10m"
def parse_duration(text: str, allow_zero: bool = False) -> float:
    """Seconds in a Go-style duration; ValueError with a usable message when it isn't one."""
    if not DURATION_SYNTAX.fullmatch(text):
        raise ValueError(
            f"invalid duration {shorten(text)!r}: use a number and a unit, like 500ms, 5s, 10m or 1h30m"
        )
    seconds = sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(text))
    if seconds <= 0 and not allow_zero:
        raise ValueError(f"invalid duration {shorten(text)!r}: it must be longer than zero")
    if seconds > MAX_SECONDS:
        raise ValueError(
            f"invalid duration {shorten(text)!r}: longer than the maximum, "
            f"{format_duration(MAX_SECONDS)} (about 292 years)"
        )
    return seconds


def not_a_duration_message(value: object) -> str:
    """What to say about a duration written as something other than a string. A bare
    number is most often seconds with the unit left out, as other tools take it, so a
    positive one is answered with the string it most likely meant."""
    written = f"expected a string, got {json_type_name(value)}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):  # JSON true is no number
        return written
    expected = f'expected a duration string like "5s" or "10m", got {json_type_name(value)}'
    # Compared before any str(): an integer of 5,000 digits cannot even be printed.
    if not 0 < value <= MAX_SECONDS:  # NaN fails this too
        return expected
    suggestion = _number_text(value) + "s"
    if len(suggestion) > 24:  # 1e-300 written out: nobody meant that many zeros
        return expected
    return f'{written} (did you mean "{suggestion}"?)'


def _number_text(value: float) -> str:
    """``value`` as plain decimal digits, as a duration needs them: ``60``, ``60.5``,
    ``0.0001`` (never ``1e-04``, which is no duration)."""
    if isinstance(value, int) or value.is_integer():
        return str(int(value))
    text = repr(value)
    if "e" in text or "E" in text:
        from decimal import Decimal  # only a tiny or huge float needs it

        text = format(Decimal(text), "f")
    return text


def format_duration(seconds: float) -> str:
    """A short Go-style rendering that ``parse_duration`` reads back: ``830µs``, ``12.4ms``,
    ``1.503s``, ``2m5s``."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1.0:
        return _trim(f"{seconds * 1e3:.{_decimals(seconds * 1e3)}f}") + "ms"
    if seconds < 60.0:
        return _trim(f"{seconds:.3f}") + "s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes}m{rest}s"


def _decimals(value: float) -> int:
    """Decimals for three significant digits, without ever switching to exponent form."""
    return 2 if value < 10 else 1 if value < 100 else 0


def _trim(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number
