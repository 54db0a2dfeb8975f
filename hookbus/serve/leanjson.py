"""JSON read and written by ``_json``, the C core of the ``json`` module, without ``json``.

``import json`` costs a bare interpreter's start-up again (it imports re, and re imports
enum), and the path of ``hookbus emit`` to a server must start in about the time of
``python -c pass``. ``loads`` and ``dumps`` here are what ``json.loads`` and
``json.dumps`` do with the options given, through the very same C functions; anything
they cannot do as ``json`` would (NaN, which ``json.loads`` reads and hookbus's wire
refuses, say) raises LeanJSONError, and the caller takes the ``json`` way instead.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: What ``json.loads`` skips around a document.
_WHITESPACE = " \t\n\r"


class LeanJSONError(ValueError):
    """The document is not one this module reads or writes exactly as ``json`` would."""


def _not_here(value: object) -> object:
    raise LeanJSONError(f"{value!r} is not written here")


class _ScannerContext:
    """The settings ``_json.make_scanner`` reads off a ``json.JSONDecoder``: the defaults,
    except that NaN and Infinity are refused instead of read."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> object:
        raise LeanJSONError(f"{name} is not JSON")


# typeshed types the scanner's argument as a scanner, not as the decoder it reads.
_make_scanner: Any = _json.make_scanner
_scan: Callable[[str, int], tuple[Any, int]] = _make_scanner(_ScannerContext())


def loads(text: str) -> Any:
    """``json.loads(text)``, or LeanJSONError for anything ``json.loads`` would refuse
    (its message is then ``json``'s to give) and for NaN and Infinity."""
    document = text.strip(_WHITESPACE)
    try:
        value, end = _scan(document, 0)
    except (StopIteration, ValueError, RecursionError, SystemError) as exc:
        # SystemError: before Python 3.12, _json raises its JSONDecodeError only once
        # json.decoder has been imported by someone, and otherwise fails without one.
        raise LeanJSONError(str(exc)) from None
    if end != len(document):
        raise LeanJSONError("extra data after the document")
    return value


def _encoder(ensure_ascii: bool, separators: tuple[str, str]) -> Callable[[Any, int], Any]:
    item_separator, key_separator = separators
    escape = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    # (markers, default, encoder, indent, key_separator, item_separator, sort_keys,
    # skipkeys, allow_nan): JSONEncoder.iterencode's call. No markers: what is written
    # here was read from JSON, which cannot hold itself (and a cycle is a RecursionError).
    encode: Callable[[Any, int], Any] = _json.make_encoder(
        None, _not_here, escape, None, key_separator, item_separator, False, False, False
    )
    return encode


_ENCODERS = {
    (ensure_ascii, separators): _encoder(ensure_ascii, separators)
    for ensure_ascii in (True, False)
    for separators in ((", ", ": "), (",", ":"))
}


def dumps(value: Any, *, ensure_ascii: bool = True, separators: tuple[str, str] = (", ", ": ")) -> str:
    """``json.dumps(value, ensure_ascii=..., separators=..., allow_nan=False)`` for a value
    made of JSON's types; LeanJSONError for anything else, NaN included."""
    try:
        return "".join(_ENCODERS[ensure_ascii, separators](value, 0))
    except (ValueError, TypeError, RecursionError) as exc:
        raise LeanJSONError(str(exc)) from None
