"""JSON nested past the interpreter's recursion limit, read and written without recursion.

json's C parser and encoder recurse once per level of nesting and stop at the
interpreter's recursion limit, about a thousand levels. Yet an envelope is what a model
wrote: a tool input can be nested a thousand levels deep and still be the valid JSON a
host really sends. So every path that reads or writes an envelope (``hookbus emit`` and
its way to a server, ``hookbus serve``, the bridges, ``HookBus.emit``) goes through here,
and accepts the same depth: MAX_NESTING levels, counted as containers (``{}`` is one level,
``{"a": []}`` two). The C functions take every document they can; only one nested past
them goes through the loops below. A document nested deeper than the bound raises
TooDeep, and ``shallow`` still reads its top-level fields, which is all a matcher needs.
"""

from __future__ import annotations

import json

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator

#: How deep an envelope may be nested, on every path: the same bound everywhere.
MAX_NESTING = 10_000

#: What ``shallow`` puts where a container lay deeper than it reads.
CUT = "[hookbus: nested too deeply to read]"

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class TooDeep(ValueError):
    """The document is nested deeper than the bound."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit:,} levels")
        self.limit = limit


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str, *, allow_nan: bool = True, max_depth: int = MAX_NESTING) -> Any:
    """``json.loads(text)`` for documents nested up to ``max_depth`` levels; TooDeep past
    it, json.JSONDecodeError (a ValueError) for text that is not JSON. ``allow_nan=False``
    refuses NaN and Infinity (ValueError), which ``json.loads`` reads and JSON has not."""
    parse_constant = _CONSTANTS.__getitem__ if allow_nan else _refuse_constant
    try:
        return json.loads(text, parse_constant=parse_constant)
    except RecursionError:
        pass  # nested past the C parser: the loop below takes it, up to the bound
    value, _ = _parse(text, parse_constant, max_depth, cut_below=None)
    return value


def shallow(text: str, keep: int, *, allow_nan: bool = True) -> Any:
    """The document with every container nested deeper than ``keep`` levels replaced by
    CUT, read however deep it is: ``shallow(text, 1)`` keeps an envelope's top-level
    scalar fields (the event, the tool's name, the thread), enough to match hooks by.
    json.JSONDecodeError for text that is not JSON."""
    parse_constant = _CONSTANTS.__getitem__ if allow_nan else _refuse_constant
    value, _ = _parse(text, parse_constant, None, cut_below=keep)
    return value


class _Context:
    """What ``_json.make_scanner`` reads off a JSONDecoder: here it only ever scans
    numbers, literals and strings, never a container."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    def __init__(self, parse_constant: Callable[[str], Any]) -> None:
        self.parse_constant = parse_constant
        self.memo: dict[str, str] = {}


def _parse(
    text: str, parse_constant: Callable[[str], Any], max_depth: int | None, cut_below: int | None
) -> tuple[Any, int]:
    """The document in ``text`` and where it ends, read with an explicit stack.

    ``max_depth``: TooDeep past it (None: no bound). ``cut_below``: containers deeper are
    read through without being built, and become CUT. One loop, its names local: it runs
    once per token of a document that may be megabytes long."""
    # typeshed types make_scanner's argument as a scanner, not the decoder it reads.
    make_scanner: Any = _json.make_scanner
    scan_scalar: Callable[[str, int], tuple[Any, int]] = make_scanner(_Context(parse_constant))
    scanstring: Callable[[str, int, bool], tuple[str, int]] = _json.scanstring
    whitespace = _WHITESPACE
    limit = max_depth if max_depth is not None else -1
    cut = cut_below if cut_below is not None else -1
    end = len(text)
    # The open containers, innermost last: the container (None while it is read through
    # without being built), whether it is an object, and (objects) the key of the value
    # being read.
    containers: list[Any] = []
    is_object: list[bool] = []
    keys: list[Any] = []
    # Reading through without building is the loop's alone: the C parser builds.
    attempts = _Attempts(scan_scalar) if cut_below is None else None
    parsed: tuple[Any, int] | None = None
    index = 0
    while index < end and text[index] in whitespace:
        index += 1
    while True:
        parsed = None
        # A value starts at ``index``.
        char = text[index] if index < end else ""
        if (char == "{" or char == "[") and attempts is not None:
            parsed = attempts.scan(text, index, len(containers) + 1, limit)
            if parsed is not None:
                value, index = parsed
                char = ""  # the container is read: hand it over below
        if char == "{" or char == "[":
            depth = len(containers) + 1
            if depth == limit + 1:
                raise TooDeep(limit)
            opens_object = char == "{"
            container: Any = None if depth == cut + 1 or (containers and containers[-1] is None) else ({} if opens_object else [])
            containers.append(container)
            is_object.append(opens_object)
            keys.append(None)
            index += 1
            while index < end and text[index] in whitespace:
                index += 1
            if index < end and text[index] == ("}" if opens_object else "]"):
                index += 1
                value = containers.pop()
                is_object.pop()
                keys.pop()
                if value is None:
                    value = CUT
                if attempts is not None:
                    attempts.leave(depth)
            elif opens_object:
                index = _read_key(text, index, keys, scanstring)
                continue
            else:
                continue
        elif char:
            try:
                value, index = scan_scalar(text, index)
            except StopIteration:
                raise json.JSONDecodeError("Expecting value", text, index) from None
        elif parsed is None:
            raise json.JSONDecodeError("Expecting value", text, index)
        # ``value`` is complete: hand it to its container, then see what follows.
        while True:
            if not containers:
                tail = index
                while tail < end and text[tail] in whitespace:
                    tail += 1
                if tail != end:
                    raise json.JSONDecodeError("Extra data", text, tail)
                return value, index
            top = containers[-1]
            object_open = is_object[-1]
            if top is not None:
                if object_open:
                    top[keys[-1]] = value
                else:
                    top.append(value)
            while index < end and text[index] in whitespace:
                index += 1
            char = text[index] if index < end else ""
            if char == ",":
                index += 1
                while index < end and text[index] in whitespace:
                    index += 1
                if object_open:
                    index = _read_key(text, index, keys, scanstring)
                break
            if char == ("}" if object_open else "]"):
                index += 1
                if attempts is not None:
                    attempts.leave(len(containers))
                value = containers.pop()
                is_object.pop()
                keys.pop()
                if value is None:
                    value = CUT
                continue
            raise json.JSONDecodeError("Expecting ',' delimiter", text, index)


class _Attempts:
    """The C parser, tried on the containers the loop meets: it reads every one nested
    less deeply than the interpreter's recursion limit at C speed, and fails on one that
    leads deeper, which the loop then opens itself.

    A failed try costs what it read before failing, and every ancestor's try reads the
    same containers again. So below a failed try the loop reads BAND levels alone before
    it tries again: every byte is read by at most a few failed tries, and the time stays
    linear in the document's length, whatever its shape."""

    __slots__ = ("_scan", "_quiet_until")

    def __init__(self, scan: Callable[[str, int], tuple[Any, int]]) -> None:
        self._scan = scan
        #: The depth down to which containers are opened without a try.
        self._quiet_until = 0

    def scan(self, text: str, index: int, depth: int, limit: int) -> tuple[Any, int] | None:
        """The container at ``index``, opened at ``depth``, and where it ends; None when
        the loop is to open it itself: the C parser cannot read it (nested too deeply for
        it), the document would then be nested past ``limit`` (-1: none), or it lies in
        the band below a failed try."""
        if depth <= self._quiet_until:
            return None
        try:
            value, end = self._scan(text, index)
        except RecursionError:
            self._quiet_until = depth + _BAND
            return None
        except (StopIteration, ValueError):
            return None  # not JSON: the loop finds where, and says it as json would
        if limit >= 0 and depth - 1 + depth_of(value, limit) > limit:
            return None  # the loop raises TooDeep at the very level
        return value, end

    def leave(self, depth: int) -> None:
        """The loop closed a container at ``depth``: a band ends with the container that
        started it."""
        if depth <= self._quiet_until - _BAND:
            self._quiet_until = 0


#: How many levels below a failed try the loop opens containers itself. Less than the
#: recursion limit's reach, so the next try can succeed.
_BAND = 256


def _read_key(text: str, index: int, keys: list[Any], scanstring: Callable[[str, int, bool], tuple[str, int]]) -> int:
    """Read an object's key and its colon at ``index`` into ``keys``; where its value starts."""
    end = len(text)
    if index >= end or text[index] != '"':
        raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, index)
    keys[-1], index = scanstring(text, index + 1, True)
    while index < end and text[index] in _WHITESPACE:
        index += 1
    if index >= end or text[index] != ":":
        raise json.JSONDecodeError("Expecting ':' delimiter", text, index)
    index += 1
    while index < end and text[index] in _WHITESPACE:
        index += 1
    return index


# -- writing ---------------------------------------------------------------------------------


def depth_of(value: Any, limit: int) -> int:
    """How deep ``value`` is nested, counting up to ``limit + 1`` at most (a cycle counts as
    deeper than any limit). Lists, tuples and dicts are containers."""
    level: list[Any] = [value] if isinstance(value, (dict, list, tuple)) else []
    depth = 0
    while level and depth <= limit:
        depth += 1
        level = [
            child
            for container in level
            for child in (container.values() if isinstance(container, dict) else container)
            if isinstance(child, (dict, list, tuple))
        ]
    return depth


def dumps_strict(value: Any, separators: tuple[str, str], max_depth: int = MAX_NESTING) -> str:
    """What ``hookbus.jsontext.strict_json`` writes (NaN and infinity as strings, a lone
    surrogate escaped, str() of anything else), without recursion, for a value nested past
    the C encoder. TooDeep past ``max_depth``; ValueError for a cycle, TypeError for a key
    JSON cannot hold."""
    try:
        return "".join(_pieces(value, separators, max_depth, _json.encode_basestring))
    except UnicodeEncodeError:
        pass
    # A lone surrogate: UTF-8 cannot hold it, so every string is escaped to ASCII, as the
    # careful path of strict_json does.
    return "".join(_pieces(value, separators, max_depth, _json.encode_basestring_ascii))


def _pieces(
    value: Any, separators: tuple[str, str], max_depth: int, quote: Callable[[str], str]
) -> Iterator[str]:
    item_separator, key_separator = separators
    check_utf8 = quote is _json.encode_basestring
    # The open containers: an iterator over what is left of each, and whether it is an object.
    stack: list[tuple[Iterator[Any], bool]] = []
    # The ids of the open containers, in order and as a set: a cycle is found in O(1).
    path_ids: list[int] = []
    on_path: set[int] = set()
    first = True
    pending: Any = value
    while True:
        if pending is not _NOTHING:
            item, pending = pending, _NOTHING
            if isinstance(item, (dict, list, tuple)):
                if len(stack) >= max_depth:
                    raise TooDeep(max_depth)
                if id(item) in on_path:
                    raise ValueError("Circular reference detected")
                if isinstance(item, dict):
                    yield "{"
                    stack.append((iter(item.items()), True))
                else:
                    yield "["
                    stack.append((iter(item), False))
                path_ids.append(id(item))
                on_path.add(id(item))
                first = True
            else:
                text = _scalar(item, quote)
                if check_utf8:
                    text.encode()  # UnicodeEncodeError on a lone surrogate: start again, escaping
                yield text
                first = False
        if not stack:
            return
        children, is_object = stack[-1]
        child: Any = next(children, _NOTHING)
        if child is _NOTHING:
            stack.pop()
            on_path.discard(path_ids.pop())
            yield "}" if is_object else "]"
            first = False
            continue
        if not first:
            yield item_separator
        first = False
        if is_object:
            key, pending = child
            key_text = _key_text(key, quote)
            if check_utf8:
                key_text.encode()
            yield key_text
            yield key_separator
        else:
            pending = child


_NOTHING: Any = object()


def _scalar(value: Any, quote: Callable[[str], str]) -> str:
    if isinstance(value, str):
        return quote(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return quote(str(value))  # strict_json's spelling: "nan", "inf", "-inf"
        return float.__repr__(value)
    return quote(str(value))


def _key_text(key: Any, quote: Callable[[str], str]) -> str:
    if isinstance(key, str):
        return quote(key)
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return quote(int.__repr__(key))
    if isinstance(key, float):
        if key != key or key in (float("inf"), float("-inf")):
            raise ValueError(f"Out of range float values are not JSON compliant: {key!r}")
        return quote(float.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
