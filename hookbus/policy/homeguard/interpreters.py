"""The handlers of any other program, and of the interpreters: a program the guard does not
model is refused when one of its arguments, read as a path, lands in a place, when an
argument names a place as text (code for ``python -c``), or when it runs in a place; an
interpreter's script or standard input is read as text too. ``python -m json.tool`` and
``hookbus`` (and ``python -m hookbus``) are read by their verbs."""

from __future__ import annotations

from typing import Sequence

from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.errors import Deny
from hookbus.policy.homeguard.programs import INTERPRETERS, PATH_WRITERS, PYTHON, WRITERS, option_values
from hookbus.policy.homeguard.values import Arg, Call, Scope, joined_entry, shown


def unknown(check: Check, call: Call, scope: Scope) -> None:
    """A program the guard does not model: any argument that lands in a place, read as a
    path or as text, is refused, and so is running it in a place."""
    what = call.name or shown(call.args[0].source)
    check.not_in_a_place(what, scope)
    if call.name in PATH_WRITERS:
        # Their arguments are the paths they write (or options): read as paths alone.
        for arg in call.args[1:]:
            for candidate in option_values(arg):
                check.write(candidate, scope, f"runs `{what}`, which writes", strict=not candidate.text.startswith("-"))
        return
    how = f"runs `{what}`, which writes" if call.name in WRITERS else f"runs `{what}` on"
    for arg in call.args[1:]:
        for candidate in option_values(arg):
            if candidate is not arg or not arg.text.startswith("-"):  # an option is no path
                check.write(candidate, scope, how, strict=False)
    check.scan(call.args[1:], scope, what)
    runs_code = any(arg.text in ("-m", "-c", "-e", "-E", "-r", "--eval", "-p", "--print") for arg in call.args[1:])
    if call.name is not None and (call.name in INTERPRETERS or PYTHON.fullmatch(call.name)):
        script = None if runs_code else next((arg for arg in call.args[1:] if not arg.text.startswith("-")), None)
        text = check.known_file_text(script, scope) if script is not None else None
        if text is not None and script is not None:
            check.scan_text(text, scope, f"`{what}`'s script {shown(script.source)}")
        text = check.input(call, scope) if script is None and not runs_code else None
        if text is not None:
            check.scan_text(text, scope, f"`{what}`'s standard input")


def python(check: Check, call: Call, scope: Scope) -> None:
    """python: ``-m hookbus`` and ``-m json.tool`` by their verbs; any other use as any other program."""
    args = call.args[1:]
    index = 0
    while index < len(args):
        word = args[index].text
        if word == "-m" and index + 1 < len(args):
            module, rest = args[index + 1].text, args[index + 2 :]
            if module == "hookbus":
                hookbus_args(check, rest, scope)
                return
            if module == "json.tool":
                operands = [arg for arg in rest if not arg.text.startswith("-")]
                if len(operands) > 1:
                    check.write(operands[1], scope, "runs `python -m json.tool`, which writes")
                return
            break
        if word in ("-c", "-W", "-X", "-Q") or not word.startswith("-"):
            break
        index += 1
    unknown(check, call, scope)


def hookbus(check: Check, call: Call, scope: Scope) -> None:
    """hookbus: by its verb."""
    hookbus_args(check, call.args[1:], scope)


def hookbus_args(check: Check, args: Sequence[Arg], scope: Scope) -> None:
    """hookbus's arguments (``--home DIR`` first): ``install`` and ``import`` write hooks into the
    home, and so does ``new`` without ``--dir``; ``new --dir`` writes into its directory."""
    index = 0
    while index < len(args) and args[index].text.startswith("-"):
        index += 2 if args[index].text == "--home" else 1
    if index >= len(args):
        return
    verb = args[index].text
    if verb in ("install", "import"):
        raise Deny(f"the bash command runs `hookbus {verb}`, which writes hooks into the hookbus home")
    if verb != "new":
        return
    rest = list(args[index + 1 :])
    directory: Arg | None = None
    for position, arg in enumerate(rest):
        key, equals, value = arg.text.partition("=")
        if len(key) >= 3 and "--dir".startswith(key):
            if equals:
                directory = Arg((value or ".",), arg.source)
            elif position + 1 < len(rest):
                directory = rest[position + 1]
    if directory is None:
        raise Deny("the bash command runs `hookbus new` without --dir, which writes hooks into the hookbus home")
    check.write(directory, scope, "runs `hookbus new --dir`, which writes into", tree=False)
    operands = [arg for arg in rest if not arg.text.startswith("-")]
    for operand in operands[:1]:
        check.write(joined_entry(directory, operand), scope, "runs `hookbus new --dir`, which writes into")
