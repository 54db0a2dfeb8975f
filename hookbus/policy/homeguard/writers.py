"""The handlers of programs that write the files they name: copiers (``cp``, ``mv``,
``install``, ``ln``, ``rsync``, ``scp``: the destination, and the destination's entry of
each source; ``mv`` and a hard ``ln`` their sources too), removers and re-moders (``rm``,
``chmod``...), readers with an option that writes (``sort -o``...), and ``sed`` and ``awk``
with a writing command or in place. Each takes the check, the call and its scope, and
raises Deny for a write into a place."""

from __future__ import annotations

import re

from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.programs import COPIER_OPTIONS, OUTPUT_READERS, parse_options
from hookbus.policy.homeguard.values import Arg, Call, Scope, joined_entry

_SED_WRITES = re.compile(r"(?:^|[\s;{}!0-9$/])[wWe](?:\s|$|;|\})|/[gpIiMm0-9]*[we](?:\s|$|;|\})")
_AWK_WRITES = re.compile(r">|\||system|fflush|close\(")


def copier(check: Check, call: Call, scope: Scope) -> None:
    """cp, mv, install, ln, rsync: the destination, and each source's entry in it."""
    name = call.name or ""
    values, long_values = COPIER_OPTIONS.get(name, ("", frozenset()))
    options, operands = parse_options(call.args[1:], values, long_values)
    flags = {option for option, _ in options}
    what = f"runs `{name}`, which writes"
    tree = bool(flags & {"-r", "-R", "-a", "--recursive", "--archive"})
    if name == "install" and flags & {"-d", "--directory"}:
        for operand in operands:
            check.write(operand, scope, what)
        return
    if name in ("rsync", "scp"):
        operands = [operand for operand in operands if not _remote(operand.text)]
        for option, value in options:
            if value is not None and option in ("--log-file", "--backup-dir", "--temp-dir", "-T", "--partial-dir"):
                check.write(value, scope, what)
    hard = name == "ln" and not flags & {"-s", "--symbolic"} or name == "cp" and flags & {"-l", "--link"}
    target = next((value for option, value in options if option in ("-t", "--target-directory") and value is not None), None)
    if target is not None:
        destination, sources = target, operands
    elif len(operands) >= 2:
        destination, sources = operands[-1], operands[:-1]
    elif len(operands) == 1 and name == "ln":
        destination, sources = Arg((".",), "."), operands
    else:
        return
    check.write(destination, scope, what, tree=tree)
    if not flags & {"-T", "--no-target-directory"}:
        for source in sources:
            if name == "rsync" and source.text.endswith("/"):
                continue  # its contents, which the destination's tree holds
            check.write(joined_entry(destination, source), scope, what, tree=tree)
    if name == "mv" or hard:
        for source in sources:
            check.write(source, scope, f"runs `{name}`, which changes")
    if name == "ln" and flags & {"-s", "--symbolic"}:
        check.remember_links(destination, sources, scope)


def _remote(text: str) -> bool:
    """An rsync operand on another host (``host:path``)."""
    colon = text.find(":")
    return colon > 0 and "/" not in text[:colon]


def remover(check: Check, call: Call, scope: Scope) -> None:
    """rm, chmod, chown, chgrp...: each operand, and what is below it. A directory that
    holds a place (``rm -rf ~``) is not refused: deleting it wholesale plants nothing,
    and is for a hook that guards destructive commands to stop."""
    name = call.name or ""
    values = {"chmod": "", "chown": "", "chgrp": "", "shred": "nsu", "rm": "", "rmdir": "", "unlink": ""}.get(name, "")
    options, operands = parse_options(call.args[1:], values, frozenset({"--reference", "--from", "--iterations", "--size", "--random-source"}))
    flags = {option for option, _ in options}
    if name in ("chmod", "chown", "chgrp") and not any(option == "--reference" for option, _ in options):
        operands = operands[1:]  # the mode, owner or group
    for operand in operands:
        check.write(operand, scope, f"runs `{name}`, which changes")


def output_reader(check: Check, call: Call, scope: Scope) -> None:
    """A reader with an output option (sort -o, uniq IN OUT, tree -o, xxd IN OUT...)."""
    name = call.name or ""
    values, long_values, written, operand = OUTPUT_READERS[name]
    options, operands = parse_options(call.args[1:], values, long_values)
    what = f"runs `{name}`, which writes"
    for option, value in options:
        if option in written and value is not None:
            check.write(value, scope, what)
    if operand is not None and len(operands) > operand:
        check.write(operands[operand], scope, what)
    if name == "yq" and any(option in ("-i", "--inplace") for option, _ in options):
        for target in operands[1:]:
            check.write(target, scope, what)


def sed(check: Check, call: Call, scope: Scope) -> None:
    """sed: ``-i`` rewrites its files; a script that writes (``w``, ``e``) as any other program."""
    options, operands = parse_options(call.args[1:], "efl", frozenset({"--expression", "--file", "--line-length"}))
    scripts = [value for option, value in options if option in ("-e", "--expression") and value is not None]
    has_file = any(option in ("-f", "--file") for option, _ in options)
    if not scripts and not has_file and operands:
        scripts, operands = [operands[0]], operands[1:]
    if any(option == "-i" or option.startswith("--in-place") for option, _ in options):
        for operand in operands:
            check.write(operand, scope, "runs `sed -i`, which rewrites")
    writing = [script for script in scripts if any(_SED_WRITES.search(alt) for alt in script.alts)]
    if writing or has_file:
        check.not_in_a_place("sed", scope)
        check.scan(writing, scope, "sed")


def awk(check: Check, call: Call, scope: Scope) -> None:
    """awk: ``-i inplace`` rewrites its files; a program that writes (``>``, ``system``...) as any
    other program."""
    name = call.name or "awk"
    options, operands = parse_options(call.args[1:], "fFvEil", frozenset({"--file", "--field-separator", "--assign", "--include", "--load", "--source", "--exec"}))
    inplace = any(option in ("-i", "--include") and value is not None and value.text == "inplace" for option, value in options)
    programs = [value for option, value in options if option == "--source" and value is not None]
    if not any(option in ("-f", "--file", "-E", "--exec") for option, _ in options) and operands:
        programs, operands = [*programs, operands[0]], operands[1:]
    elif any(option in ("-f", "--file", "-E", "--exec") for option, _ in options):
        check.not_in_a_place(name, scope)
    if inplace:
        for operand in operands:
            check.write(operand, scope, f"runs `{name} -i inplace`, which rewrites")
    writing = [program for program in programs if any(_AWK_WRITES.search(alt) for alt in program.alts)]
    if writing:
        check.not_in_a_place(name, scope)
        check.scan(writing, scope, name)
