"""The handlers of archivers: ``zip`` (the archive, and with ``-m`` the files it removes),
and the extractors (``tar``, ``unzip``, ``7z``, ``cpio``, ``patch``), which fill a tree:
they write anything below their target directory (the working directory without
``-C``/``-d``), so a target that holds a place is a write into it."""

from __future__ import annotations

from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.programs import parse_options
from hookbus.policy.homeguard.values import Arg, Call, Scope


def zip_files(check: Check, call: Call, scope: Scope) -> None:
    """zip ARCHIVE FILES: it writes the archive, and with -m removes the files."""
    options, operands = parse_options(call.args[1:], "bnOPtxiZYsI", frozenset({"--output-file", "--temp-path", "--password", "--exclude", "--include"}))
    flags = {option for option, _ in options}
    what = "runs `zip`, which writes"
    for option, value in options:
        if option in ("-O", "--output-file", "-b", "--temp-path") and value is not None:
            check.write(value, scope, what)
    if operands:
        check.write(operands[0], scope, what)
    if flags & {"-m", "--move", "-d", "--delete"}:
        for operand in operands[1:]:
            check.write(operand, scope, "runs `zip -m`, which removes")


def extractor(check: Check, call: Call, scope: Scope) -> None:
    """tar, unzip, 7z, cpio, patch: they write into a directory, all below it."""
    name = call.name or ""
    what = f"runs `{name}`, which writes"
    args = call.args[1:]
    if name in ("tar", "bsdtar", "gtar"):
        _tar(check, args, scope, what)
    elif name == "unzip":
        options, operands = parse_options(args, "dxX", frozenset())
        flags = {option for option, _ in options}
        if flags & {"-l", "-t", "-v", "-p", "-c", "-z", "-Z"}:
            return
        target = next((value for option, value in options if option == "-d" and value is not None), Arg((".",), "."))
        check.write(target, scope, what, tree=True)
    elif name in ("7z", "7za", "7zr", "7zz"):
        operands = [arg for arg in args if not arg.text.startswith("-")]
        verb = operands[0].text if operands else ""
        if verb in ("x", "e"):
            output = next((Arg((arg.text[2:],), arg.source) for arg in args if arg.text.startswith("-o")), Arg((".",), "."))
            check.write(output, scope, what, tree=True)
        elif verb not in ("l", "t", "i", "h") and len(operands) > 1:
            check.write(operands[1], scope, what)
    elif name == "cpio":
        options, _ = parse_options(args, "DEFHIMORV", frozenset({"--directory", "--file", "--format"}))
        flags = {option for option, _ in options}
        if flags & {"-i", "--extract", "-p", "--pass-through"}:
            directory = next((value for option, value in options if option in ("-D", "--directory") and value is not None), Arg((".",), "."))
            check.write(directory, scope, what, tree=True)
        for option, value in options:
            if option in ("-F", "-O", "--file") and value is not None and flags & {"-o", "--create"}:
                check.write(value, scope, what)
    else:  # patch
        options, operands = parse_options(args, "dioprBDFVYzg", frozenset({"--directory", "--input", "--output", "--strip", "--reject-file", "--prefix", "--suffix"}))
        directory = next((value for option, value in options if option in ("-d", "--directory") and value is not None), Arg((".",), "."))
        for option, value in options:
            if option in ("-o", "--output", "-r", "--reject-file") and value is not None:
                check.write(value, scope, what)
        if operands:
            check.write(operands[0], scope, what)
        check.write(directory, scope, what, tree=True)


def _tar(check: Check, args: list[Arg], scope: Scope, what: str) -> None:
    if args and not args[0].text.startswith("-") and args[0].text:
        letters, rest = args[0].text, args[1:]  # old style: tar xf FILE
        expanded: list[Arg] = []
        for letter in letters:
            expanded.append(Arg((f"-{letter}",), args[0].source))
            if letter in "fCbTXNVgKLHIF" and rest:
                expanded.append(rest.pop(0))
        args = expanded + rest
    options, _ = parse_options(
        args, "fCbTXNVgKLHIF",
        frozenset({"--file", "--directory", "--files-from", "--exclude-from", "--listed-incremental", "--use-compress-program", "--to-command", "--one-top-level", "--transform", "--exclude", "--owner", "--group", "--mode", "--mtime", "--newer", "--after-date", "--format", "--blocking-factor", "--label", "--volno-file", "--info-script", "--rsh-command"}),
    )
    flags = {option for option, _ in options}
    creates = bool(flags & {"-c", "-r", "-u", "-A", "--create", "--append", "--update", "--concatenate", "--catenate", "--delete"})
    lists = bool(flags & {"-t", "--list", "-d", "--diff", "--compare"})
    extracts = bool(flags & {"-x", "--extract", "--get"}) or not (creates or lists)
    for option, value in options:
        if value is None:
            continue
        if option in ("-f", "--file") and creates and value.text != "-":
            check.write(value, scope, what)
        elif option in ("-g", "--listed-incremental"):
            check.write(value, scope, what)
    if extracts:
        directories = [value for option, value in options if option in ("-C", "--directory") and value is not None]
        for directory in directories or [Arg((".",), ".")]:
            check.write(directory, scope, what, tree=True)
