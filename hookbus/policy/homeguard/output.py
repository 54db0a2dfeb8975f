"""What programs print: the output of a pipeline whose every stage the guard can tell from
its words (``echo``, ``printf``, ``cat FILE``, ``base64 -d``, ``xxd -r``, ``tr``, ``rev``,
``dirname``, ``realpath``...), for a ``$(...)``'s value, what a pipe feeds a shell, and what
a redirection writes into a file the command later reads; None for any other."""

from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Sequence

from hookbus.policy.homeguard.bounds import MAX_OUTPUT
from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.errors import Unreadable
from hookbus.policy.homeguard.reader import ansi_c
from hookbus.policy.homeguard.values import MARK, Arg, Scope


def pipeline_output(stages: Sequence[tuple[str | None, list[Arg], str | None]], check: Check, scope: Scope | None = None) -> str | None:
    """What the last stage of a pipeline prints, when every stage is one whose output the
    guard can tell from its words (echo, printf, cat, base64 -d, xxd -r, tr...); with
    ``scope``, ``cat FILE`` reads FILE (as a script is read)."""
    output: str | None = None
    for name, args, stdin in stages:
        given = stdin if stdin is not None else output
        output = program_output(name, args, given, check, scope)
        if output is None or len(output) > MAX_OUTPUT:
            return None
    return output


def program_output(name: str | None, args: Sequence[Arg], given: str | None, check: Check, scope: Scope | None = None) -> str | None:
    """What one program prints, given ``given`` on its standard input; None when the guard
    cannot tell."""
    if any(len(arg.alts) != 1 or MARK in arg.text for arg in args):
        return None
    words = [arg.text for arg in args[1:]]
    if name == "echo":
        escapes = False
        while words and re.fullmatch(r"-[neE]+", words[0]):
            escapes = escapes or "e" in words[0]
            words = words[1:]
        text = " ".join(words)
        return (ansi_c(text) if escapes else text) + "\n"
    if name == "printf":
        if words and words[0] == "--":
            words = words[1:]
        if not words or words[0] == "-v":
            return None
        return _printf(words[0], words[1:])
    if name == "cat" and given is not None and all(word == "-" or word.startswith("-") for word in words):
        return given
    if name == "cat" and scope is not None and words and not any(word.startswith("-") for word in words):
        texts = [check.known_file_text(arg, scope) for arg in args[1:]]
        return None if any(text is None for text in texts) else "".join(text or "" for text in texts)
    if given is not None and name in ("base64", "base32") and any(word in ("-d", "--decode", "-D") for word in words):
        try:
            decoded = base64.b64decode(re.sub(r"\s", "", given) + "==", validate=False) if name == "base64" else base64.b32decode(re.sub(r"\s", "", given))
        except (binascii.Error, ValueError):
            return None
        return decoded.decode("utf-8", "replace")
    if given is not None and name == "xxd" and any(word.startswith("-r") for word in words):
        try:
            return binascii.unhexlify(re.sub(r"[^0-9A-Fa-f]", "", given)).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            return None
    if given is not None and name == "tr" and words:
        return _tr(words, given)
    if given is not None and name == "rev" and not words:
        return "\n".join(line[::-1] for line in given.split("\n"))
    if name == "pwd":
        return None
    if name in ("dirname", "basename") and words and not words[0].startswith("-"):
        path = words[0].rstrip("/") or "/"
        return (os.path.dirname(path) or "." if name == "dirname" else os.path.basename(path)) + "\n"
    if name in ("realpath", "readlink") and words and (name == "realpath" or words[0] in ("-f", "-e", "-m")):
        target = words[-1]
        try:
            cwd = check.start.physical
            absolute = target if target.startswith("/") else f"{(cwd or '/').rstrip('/')}/{target}"
            return check.places.walk(absolute, cwd, check.links, check.cache).path + "\n"
        except (Unreadable, OSError, ValueError, RuntimeError):
            return None
    return None


_PRINTF_CONVERSION = re.compile(r"%(?:%|[-+ #0]*[0-9*]*(?:\.[0-9*]*)?[a-zA-Z])")


def _printf(form: str, values: Sequence[str]) -> str:
    form = ansi_c(form)
    queue = list(values)
    pieces: list[str] = []
    while True:
        def convert(found: re.Match[str]) -> str:
            if found.group() == "%%":
                return "%"
            value = queue.pop(0) if queue else ""
            return ansi_c(value) if found.group().endswith("b") else value

        pieces.append(_PRINTF_CONVERSION.sub(convert, form))
        if not queue or _PRINTF_CONVERSION.search(form) is None or len(pieces) > 64:
            return "".join(pieces)


def _tr(words: Sequence[str], given: str) -> str | None:
    flags = [word for word in words if word.startswith("-")]
    sets = [_tr_set(word) for word in words if not word.startswith("-")]
    if any(found is None for found in sets):
        return None
    if flags == ["-d"] and len(sets) == 1:
        return given.translate({ord(char): None for char in sets[0] or ""})
    if flags or len(sets) != 2:
        return None
    first, second = sets[0] or "", sets[1] or ""
    if not second:
        return None
    second = second + second[-1] * max(0, len(first) - len(second))
    return given.translate(str.maketrans(first, second[: len(first)]))


def _tr_set(word: str) -> str | None:
    if "[" in word or len(word) > 256:
        return None
    word = ansi_c(word)
    out: list[str] = []
    index = 0
    while index < len(word):
        if index + 2 < len(word) and word[index + 1] == "-":
            low, high = ord(word[index]), ord(word[index + 2])
            if high < low or high - low > 256:
                return None
            out.extend(chr(code) for code in range(low, high + 1))
            index += 3
        else:
            out.append(word[index])
            index += 1
    return "".join(out)
