"""The handlers of the shell's own state: ``cd``, ``pushd`` and ``popd`` (the directories
the next commands may run in), and the builtins that set variables (``export``,
``declare``, ``read``, ``set --``, ``unset``, ``mapfile``...), which later words expand."""

from __future__ import annotations

import os

from hookbus.policy.homeguard.bounds import MAX_ALTERNATIVES, MAX_PATHS
from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.programs import parse_options
from hookbus.policy.homeguard.syntax import after_equals, assignment_match
from hookbus.policy.homeguard.values import MARK, UNKNOWN_DIRECTORY, Arg, Call, Directory, Scope, flatten, unique_directories


def cd(check: Check, call: Call, scope: Scope) -> None:
    """cd, pushd, popd: where the next commands may run (see ``judge``)."""
    name = call.name or "cd"
    args = call.args[1:]
    physical = False
    while args and args[0].text.startswith("-") and args[0].text not in ("-",) and not args[0].text[1:].isdigit():
        if args[0].text == "--":
            args = args[1:]
            break
        physical = physical or "P" in args[0].text
        args = args[1:]
    if name == "popd" or name == "pushd" and (not args or args[0].text[:1] in "+-"):
        scope.pending = unique_directories(tuple(scope.seen) + scope.cwds + (() if scope.seen else (UNKNOWN_DIRECTORY,)))
        return
    if args and args[0].text == "-":
        scope.pending = unique_directories(tuple(scope.seen)) if scope.seen else (UNKNOWN_DIRECTORY,)
        return
    target = args[0] if args else Arg(check.variable_values("HOME", scope), "$HOME")
    cdpath = call.env.get("CDPATH") or scope.variables.get("CDPATH") or ((os.environ["CDPATH"],) if os.environ.get("CDPATH") else ())
    went: list[Directory] = []
    for alt in target.alts:
        for cwd in scope.cwds:
            went.extend(check.changed_directory(alt, cwd, physical, target.globbed, cdpath, scope))
    scope.pending = unique_directories(tuple(went))
    scope.seen.extend(scope.pending)


def assign(check: Check, call: Call, scope: Scope) -> None:
    """export, declare, local, readonly, typeset: the assignments among their words."""
    for arg in call.args[1:]:
        found = assignment_match(arg.text)
        if found is not None:
            scope.variables[found.group(1)] = tuple(after_equals(alt) for alt in arg.alts)
    scope.variables.update(call.env)


def read(check: Check, call: Call, scope: Scope) -> None:
    """read: its variables get the words it reads, when the guard has them."""
    options, names = parse_options(call.args[1:], "adinNptu", frozenset())
    targets = [value.text for option, value in options if option == "-a" and value is not None] + [arg.text for arg in names]
    text = check.input(call, scope)
    if text is None and not scope.pipeline:
        text = scope.loop_input
    if text is not None:
        values = tuple(dict.fromkeys(text.split()))[:MAX_PATHS] or ("",)
    elif scope.pipeline:
        values = check.produced(scope).alts
    else:
        values = (MARK,)
    for name in targets or ["REPLY"]:
        scope.variables[name] = tuple(dict.fromkeys((*values, MARK)))


def unknown_value(check: Check, call: Call, scope: Scope) -> None:
    """mapfile, printf -v, getopts: variables they set to what the guard cannot know."""
    options, operands = parse_options(call.args[1:], "vdnOsuCc", frozenset())
    for option, value in options:
        if option == "-v" and value is not None:
            scope.variables[value.text] = (MARK,)
    if call.name in ("mapfile", "readarray"):
        scope.variables[operands[-1].text if operands else "MAPFILE"] = check.produced(scope).alts if scope.pipeline else (MARK,)


def set_positional(check: Check, call: Call, scope: Scope) -> None:
    """``set -- WORDS`` (or ``set WORDS``): the positional parameters."""
    words = [arg.text for arg in call.args[1:]]
    if "--" in words:
        positional = call.args[1 + words.index("--") + 1 :]
    elif words and not words[0].startswith(("-", "+")):
        positional = call.args[1:]
    else:
        return
    for number, arg in enumerate(positional, start=1):
        scope.variables[str(number)] = arg.alts
    scope.variables["@"] = scope.variables["*"] = flatten(positional)[:MAX_ALTERNATIVES]


def unset(check: Check, call: Call, scope: Scope) -> None:
    """unset: the variables are forgotten."""
    for arg in call.args[1:]:
        scope.variables.pop(arg.text, None)
