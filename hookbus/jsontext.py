"""JSON text that every reader can parse, whatever the values handed to it hold."""

from __future__ import annotations

import _json
import functools
import json
import math
import re

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: A lone UTF-16 surrogate: what a ``\\ud800`` JSON escape without its partner decodes to,
#: and how Python hands back undecodable bytes of file names. Not text: UTF-8 cannot hold it.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


#: How a JSON user names each type a parsed document holds.
JSON_TYPE_NAMES: dict[type, str] = {
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    dict: "an object",
    list: "an array",
    type(None): "null",
}


class DuplicateKeyError(ValueError):
    """A JSON object that names one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An ``object_pairs_hook`` for ``json.loads`` that refuses an object naming a key twice
    (DuplicateKeyError), at any depth. ``json`` keeps the last value and other readers the
    first, so such a document means whatever its reader guesses: ``{"behavior": "deny",
    "behavior": "allow"}`` would be an allow."""
    result = dict(pairs)
    if len(result) != len(pairs):  # rare: only then look for which key repeats
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return result


def json_type_name(value: object) -> str:
    """How a JSON user would name the type of ``value``."""
    if isinstance(value, bool):
        return "a boolean"
    for python_type, name in JSON_TYPE_NAMES.items():
        if type(value) is python_type:
            return name
    return type(value).__name__


def strict_json(
    document: Any, indent: int | None = None, separators: tuple[str, str] | None = None
) -> bytes:
    """``document`` as UTF-8 JSON text.

    Python's ``json.dumps`` writes NaN as the non-JSON ``NaN``, and a lone surrogate (a
    file name the OS handed back with undecodable bytes, say) cannot be encoded as UTF-8.
    Such a document is still written, as strict JSON: the surrogate escaped (``\\udcff``)
    and NaN or infinity spelled as a string, rather than raising or writing what a JSON
    parser refuses. A document nested past the C encoder (a thousand levels) is written
    without recursion, up to ``hookbus.deepjson.MAX_NESTING`` levels; deeper raises
    ``TooDeep`` (a ValueError).
    """
    try:
        if indent is None:
            return "".join(_compact_encoder(separators)(document, 0)).encode()
        return _encoder(indent, separators).encode(document).encode()
    except (RecursionError, ValueError, UnicodeEncodeError) as exc:
        if indent is None:
            # The careful path, without recursion: NaN, a surrogate, a document nested past
            # the C encoder; a cycle is a ValueError there too, and too deep a TooDeep.
            from hookbus.deepjson import dumps_strict

            return dumps_strict(document, separators or (", ", ": ")).encode()
        if not isinstance(exc, UnicodeEncodeError) and (isinstance(exc, RecursionError) or "Circular" in str(exc)):
            raise
        text = json.dumps(
            _finite(document), ensure_ascii=True, allow_nan=False, indent=indent, separators=separators, default=str
        )
        return text.encode()


@functools.lru_cache(maxsize=8)
def _encoder(indent: int | None, separators: tuple[str, str] | None) -> json.JSONEncoder:
    """One encoder per layout, made once: ``json.dumps`` with options builds a new one on
    every call, which costs an emit more than the encoding of a small envelope."""
    return json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=indent, separators=separators, default=str)


@functools.lru_cache(maxsize=8)
def _compact_encoder(separators: tuple[str, str] | None) -> Any:
    """The C encoder behind ``_encoder(None, separators)``, made once: ``JSONEncoder.encode``
    builds a new one on every call. No cycle markers (a dict each call would need its own,
    and the encoder may run on several threads at once): a cycle is a RecursionError, which
    the careful path then names."""
    item_separator, key_separator = separators or (", ", ": ")
    return _json.make_encoder(None, str, _json.encode_basestring, None, key_separator, item_separator, False, False, False)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
