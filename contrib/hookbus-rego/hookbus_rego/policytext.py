"""What hookbus reads in a policy's text before and after rego-cpp compiles it: UTF-8 with no
NUL, brackets no deeper than MAX_DEPTH, no ``print()``, a package the query can reach; and
rego-cpp's report of a failed compile, turned into ``policy.rego:2:6: message``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import attrs

from hookbus import SpecError
from hookbus.errors import SpecErrors, shorten
from hookbus_rego.limits import MAX_DEPTH

if TYPE_CHECKING:
    from hookbus_rego import RegoOptions


def _decode(options: RegoOptions, source: bytes) -> str:
    """The policy as text, when hookbus can hand it to rego-cpp whole; SpecErrors otherwise."""
    file = shorten(options.file)
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecErrors([SpecError(f"{file} is not valid UTF-8 (byte {exc.start})", "$.file")]) from None
    if "\x00" in text:
        line, column = _line_column(text, text.index("\x00"))
        message = f"{file}:{line}:{column}: a NUL character, where rego-cpp would see the end of the policy: remove it"
        raise SpecErrors([SpecError(message, "$.file")])
    return text


def _check_nesting(options: RegoOptions, text: str, code: str) -> None:
    """SpecErrors for a policy whose brackets nest deeper than MAX_DEPTH: rego-cpp's
    compiler would overflow its stack and kill the process."""
    depth = 0
    for bracket in _BRACKET.finditer(code):
        depth += 1 if bracket.group() in "([{" else -1
        if depth > MAX_DEPTH:
            line, column = _line_column(text, bracket.start())
            message = (
                f"{shorten(options.file)}:{line}:{column}: brackets nested more than {MAX_DEPTH} levels deep, "
                "past what rego-cpp's compiler can take: flatten it"
            )
            raise SpecErrors([SpecError(message, "$.file")])


def _check_code(options: RegoOptions, text: str, code: str) -> None:
    """SpecErrors for a policy that compiles but must not run (it calls print), or that
    nothing of can answer the query (a mistyped package or rule would allow everything).
    ``code`` is ``text`` with its comments and strings blanked."""
    file = shorten(options.file)
    printing = _PRINT.search(code)
    if printing is not None:
        line, column = _line_column(text, printing.start())
        message = (
            f"{file}:{line}:{column}: print() is not allowed: rego-cpp writes it to this process's standard "
            "output, where hookbus answers its host. Remove it (`hookbus explain` shows the query's value)"
        )
        raise SpecErrors([SpecError(message, "$.file")])
    package = _PACKAGE.search(code)
    if package is None:
        raise SpecErrors([SpecError(f"{file} has no package: start it with `package hooks`", "$.file")])
    name = re.sub(r"\s+", "", package.group(1))
    if _DOTTED.fullmatch(name):
        problem = _unanswerable(options.query, name.split("."), code)
        if problem:
            raise SpecErrors([SpecError(f"{options.query} {problem}", "$.query")])


def _unanswerable(query: str, package: list[str], code: str) -> str | None:
    """Why nothing in a policy of ``package`` (whose code is ``code``) can answer ``query``
    (it would always be undefined, and so always allow), or None when something may."""
    path = query.split(".")[1:]
    shared = min(len(path), len(package))
    if path[:shared] != package[:shared]:
        dotted, wanted = ".".join(package), ".".join(path[:-1]) or path[0]
        return (
            f"reads outside the policy, which is package {dotted}: write `package {wanted}`, "
            f"or set the query to data.{dotted}.<rule>"
        )
    if len(path) <= len(package):
        return None  # the whole package, or a part of it
    rule = path[len(package)]
    if re.search(rf"^[ \t]*(?:default[ \t]+)?{re.escape(rule)}\b", code, re.MULTILINE):
        return None
    return (
        f"is always undefined: the policy defines no rule {rule!r} (an undefined query is no opinion, "
        "so the hook would always allow)"
    )


@attrs.define
class _Found:
    """One error of rego-cpp's report."""

    source: str | None = None
    #: In bytes, from the start of ``source``.
    offset: int | None = None
    message: str | None = None


_BLANK = frozenset(b" \t\r\n")


_ATOM = re.compile(rb"[^\s()|]+")


_SIZED = re.compile(rb"(\d+):")


_WHERE = re.compile(rb"\|(\d+)\|(\d+)")


def _error_entries(report: str) -> list[_Found]:
    """The errors of rego-cpp's report of a failed compile: its AST printed as an
    S-expression, ``(error 11:policy.rego|19|1 (errormsg 16:this is unclosed) ...)``, where
    a string is prefixed with its length in bytes and a location is ``|offset|length`` in
    the source named before it."""
    data = report.encode("utf-8", "replace")
    found: list[_Found] = []
    kinds: list[bytes] = []
    position = 0
    while position < len(data):
        if data[position] in _BLANK:
            position += 1
            continue
        if data[position : position + 1] == b"(":
            atom = _ATOM.match(data, position + 1)
            kinds.append(atom.group() if atom else b"")
            if atom and atom.group() == b"error":
                found.append(_Found())
            position = atom.end() if atom else position + 1
            continue
        if data[position : position + 1] == b")":
            if kinds:
                kinds.pop()
            position += 1
            continue
        sized = _SIZED.match(data, position)
        if sized is not None:
            start = sized.end()
            end = start + int(sized.group(1))
            value = data[start:end].decode("utf-8", "replace")
            position = end
            where = _WHERE.match(data, position)
            if where is not None:
                position = where.end()
            parent = kinds[-1] if kinds else b""
            if found and parent == b"error":
                found[-1].source = value
                found[-1].offset = int(where.group(1)) if where else None
            elif found and parent == b"errormsg":
                found[-1].message = value
            continue
        where = _WHERE.match(data, position)
        if where is not None:  # a location in the source named above
            position = where.end()
            continue
        atom = _ATOM.match(data, position)
        position = atom.end() if atom else position + 1
    return found


def _compile_message(name: str, source: bytes, found: list[_Found], report: str) -> str:
    """``policy.rego:2:6: this is unclosed``: each distinct error once (the first three),
    where the report says where it is."""
    shown = shorten(name)
    messages: dict[str, str] = {}
    for entry in found:
        if entry.message is None or entry.message in messages:
            continue
        where = shown
        if entry.source == name and entry.offset is not None and source:
            line, column = _line_column_of_bytes(source, entry.offset)
            where = f"{shown}:{line}:{column}"
        messages[entry.message] = f"{where}: {entry.message}"
    if not messages:
        return f"{shown} does not compile: {shorten(' '.join(report.split()), 300)}"
    listed = list(messages.values())
    more = f" (and {len(listed) - 3} more)" if len(listed) > 3 else ""
    return "; ".join(listed[:3]) + more


def _line_column_of_bytes(source: bytes, offset: int) -> tuple[int, int]:
    """Line and column (in characters), from 1, of a byte offset."""
    offset = max(0, min(offset, len(source)))
    start = source.rfind(b"\n", 0, offset) + 1
    return source.count(b"\n", 0, offset) + 1, len(source[start:offset].decode("utf-8", "replace")) + 1


def _line_column(text: str, index: int) -> tuple[int, int]:
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


#: Where a comment, a string or a brace starts.
_LEXEME = re.compile(r'#|\$"|\$`|"|`|\{|\}')


#: The rest of a string after its opening quote, up to and with its closing one.
_STRING_REST = re.compile(r'(?:[^"\\\n]|\\.)*"?')


#: Text of a template string up to its next interpolation or its end.
_TEMPLATE_TEXT = {'"': re.compile(r'(?:[^"\\{\n]|\\.)*'), "`": re.compile(r"[^`{]*")}


#: A call of the print builtin (``internal.print`` is what rego-cpp makes of it).
_PRINT = re.compile(r"(?<![\w.])(?:internal\s*\.\s*)?print\s*\(")


_BRACKET = re.compile(r"[\[\](){}]")


_PACKAGE = re.compile(r"^[ \t]*package[ \t]+(\S[^\n]*?)[ \t]*$", re.MULTILINE)


_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _code_only(source: str) -> str:
    """``source`` with its comments and the text of its strings blanked (each character a
    space, newlines kept), so that a search finds code only, at its own line and column.
    The expressions inside template strings (``$"...{expr}..."``) are code, and stay."""
    out = list(source)
    length = len(source)

    def blank(start: int, end: int) -> None:
        for index in range(start, end):
            if out[index] != "\n":
                out[index] = " "

    #: For each brace open in code: None, or the quote of the template string it is an
    #: interpolation of (its closing brace goes back to the string's text).
    braces: list[str | None] = []
    template: str | None = None
    position = 0
    while position < length:
        if template is not None:
            end = _end_of(_TEMPLATE_TEXT[template], source, position)
            blank(position, end)
            position = end
            if position < length and source[position] == "{":
                braces.append(template)
            template = None  # an interpolation, the closing quote, or an unclosed string's end
            position += 1
            continue
        found = _LEXEME.search(source, position)
        if found is None:
            break
        token, start = found.group(), found.start()
        if token == "#":
            end = source.find("\n", start)
            end = length if end < 0 else end
            blank(start, end)
        elif token == '"':
            end = _end_of(_STRING_REST, source, start + 1)
            blank(start + 1, max(start + 1, end - 1))
        elif token == "`":
            end = source.find("`", start + 1)
            end = length if end < 0 else end + 1
            blank(start + 1, max(start + 1, end - 1))
        elif token in ('$"', "$`"):
            template = token[1]
            end = start + 2
        elif token == "{":
            braces.append(None)
            end = start + 1
        else:  # "}"
            template = braces.pop() if braces else None
            end = start + 1
        position = end
    return "".join(out)


def _end_of(pattern: re.Pattern[str], text: str, position: int) -> int:
    """Where ``pattern`` (one that matches the empty string too) ends, from ``position``."""
    found = pattern.match(text, position)
    return found.end() if found is not None else position

