"""The handlers of programs that run another command, judged by the command they run:
wrappers (``sudo``, ``env``, ``nohup``, ``timeout``...) and runners (``uv run``, ``npx``...)
by their command's handler; shells (``bash -c``), ``eval``, ``trap``, ``alias``, ``watch``,
``su -c`` by the code they run (refused when the guard cannot read it); ``source`` and a
shell given a file by the script; ``find`` by its ``-exec`` command and its writing actions
(``-delete``, ``-fprint``); ``xargs`` by its command, given the words it reads."""

from __future__ import annotations

from hookbus.policy.homeguard.bounds import MAX_PATHS
from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.interpreters import unknown
from hookbus.policy.homeguard.programs import WRAPPERS, parse_options, program_of
from hookbus.policy.homeguard.syntax import assignment_match
from hookbus.policy.homeguard.values import MARK, UNKNOWN_DIRECTORY, Arg, Call, Scope, combinations


def wrapper(check: Check, call: Call, scope: Scope) -> None:
    """sudo, env, nohup, timeout, nice...: judged by the command they run."""
    name = call.name or ""
    values, long_values, skip = WRAPPERS[name]
    options, rest = parse_options(call.args[1:], values, long_values, stop=True)
    flags = {option for option, _ in options}
    inner_scope = scope
    for option, value in options:
        if value is None:
            continue
        if option in ("-C", "--chdir", "-D") and name in ("env", "sudo"):
            inner_scope = Scope(check.directories_of(value, scope) or (UNKNOWN_DIRECTORY,), dict(scope.variables), repeats=scope.repeats)
        elif option in ("-o", "--output") and name == "time":
            check.write(value, scope, "runs `time -o`, which writes")
        elif option in ("-S", "--split-string") and name == "env":
            check.script(" ".join([value.text, *(arg.text for arg in rest)]), scope)
            return
    if name == "command" and flags & {"-v", "-V"}:
        return
    if name in ("sudo", "sudoedit") and (flags & {"-e", "--edit"} or name == "sudoedit"):
        for arg in rest:
            check.write(arg, scope, "runs `sudoedit`, which writes")
        return
    if name == "env":
        while rest and assignment_match(rest[0].text):
            rest = rest[1:]
    if name == "flock" and rest:
        check.write(rest[0], scope, "runs `flock`, which creates")
        rest = rest[1:]
        command = next((value for option, value in options if option in ("-c", "--command") and value is not None), None)
        if command is not None:
            check.code(command, scope, "flock -c")
            return
    if name == "chroot" and rest:
        check.write(rest[0], scope, "runs `chroot` in", tree=rest[0].text not in ("/", ""))
        return
    rest = rest[skip:]
    if rest:
        check.call(Call(program_of(rest[0]), list(rest), {}, call.stdin, call.stdin_file), inner_scope)


def runner(check: Check, call: Call, scope: Scope) -> None:
    """uv run, uvx, pipx run, poetry run, npx...: the command after their options."""
    args = call.args[1:]
    if call.name in ("uv", "pipx", "poetry", "pdm", "pnpm", "conda", "bundle"):
        if not args or args[0].text not in ("run", "exec", "dlx", "x"):
            unknown(check, call, scope)
            return
        args = args[1:]
    rest = [arg for arg in args]
    while rest and rest[0].text.startswith("-"):
        rest = rest[1:]
    if rest:
        check.call(Call(program_of(rest[0]), rest, {}, call.stdin, call.stdin_file), scope)


def shell(check: Check, call: Call, scope: Scope) -> None:
    """bash, sh...: ``-c CODE``, a script file, or what they read on standard input."""
    args = call.args[1:]
    mode = ""
    index = 0
    while index < len(args):
        word = args[index].text
        if word in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if word in ("--", "-"):
            index += 1
            break
        if word.startswith("--"):
            index += 1
            continue
        if len(word) > 1 and word[0] in "-+":
            if word[0] == "-" and "c" in word:
                mode = "c"
            elif word[0] == "-" and "s" in word and not mode:
                mode = "s"
            index += 1
            continue
        break
    rest = args[index:]
    what = call.name or "bash"
    if mode == "c":
        if rest:
            check.code(rest[0], scope, f"{what} -c", positional=rest[1:])
        return
    if rest and mode != "s":
        check.run_script_file(rest[0], call, scope, positional=rest)
        return
    check.standard_input(call, scope, what)


def evaluate(check: Check, call: Call, scope: Scope) -> None:
    """eval: its words, joined, read as code in the same shell."""
    words = call.args[1:]
    if not words:
        return
    joined = Arg(tuple(" ".join(combination) for combination in combinations([arg.alts for arg in words])), " ".join(arg.source for arg in words))
    check.code(joined, scope, "eval", same_shell=True)


def source(check: Check, call: Call, scope: Scope) -> None:
    """source and ``.``: the script, in the same shell."""
    if len(call.args) > 1:
        check.run_script_file(call.args[1], call, scope, positional=call.args[1:], same_shell=True)


def trap(check: Check, call: Call, scope: Scope) -> None:
    """trap: the code it sets, read as code."""
    operands = [arg for arg in call.args[1:] if arg.text not in ("-p", "-l", "--")]
    if len(operands) >= 2 and operands[0].text != "-":
        check.code(operands[0], scope, "trap")


def alias(check: Check, call: Call, scope: Scope) -> None:
    """alias: each value it defines, read as code."""
    for arg in call.args[1:]:
        if "=" in arg.text:
            check.code(Arg(tuple(alt.split("=", 1)[1] for alt in arg.alts), arg.source), scope, "alias")


def watch(check: Check, call: Call, scope: Scope) -> None:
    """watch: the command it repeats (``-x``: its words; else, joined, as code)."""
    options, rest = parse_options(call.args[1:], "nqd", frozenset({"--interval", "--differences", "--equexit"}), stop=True)
    if rest:
        if any(option in ("-x", "--exec") for option, _ in options):
            check.call(Call(program_of(rest[0]), list(rest), {}, None), scope)
        else:
            check.code(Arg((" ".join(arg.text for arg in rest),), " ".join(arg.source for arg in rest)), scope, "watch")


def su(check: Check, call: Call, scope: Scope) -> None:
    """su and runuser: ``-c``'s code, runuser's command, or what they read on standard input."""
    options, rest = parse_options(call.args[1:], "cgGsuw", frozenset({"--command", "--group", "--supp-group", "--shell", "--user", "--whitelist-environment", "--session-command"}))
    command = next((value for option, value in options if option in ("-c", "--command", "--session-command") and value is not None), None)
    if command is not None:
        check.code(command, scope, f"{call.name} -c")
    elif call.name == "runuser" and rest:
        check.call(Call(program_of(rest[0]), list(rest), {}, call.stdin, call.stdin_file), scope)
    else:
        check.standard_input(call, scope, call.name or "su")


def find(check: Check, call: Call, scope: Scope) -> None:
    """find: ``-delete`` removes what is below its starting points, ``-fprint`` writes a file,
    ``-exec`` runs a command on what is below them."""
    args = call.args[1:]
    index = 0
    while index < len(args) and args[index].text in ("-H", "-L", "-P") or index < len(args) and args[index].text.startswith(("-D", "-O")):
        index += 2 if args[index].text == "-D" else 1
    starts: list[Arg] = []
    while index < len(args) and not args[index].text.startswith(("-", "(", "!", ",")) and args[index].text != ")":
        starts.append(args[index])
        index += 1
    starts = starts or [Arg((".",), ".")]
    while index < len(args):
        word = args[index].text
        index += 1
        if word == "-delete":
            for start in starts:
                check.write(start, scope, "runs `find -delete`, which removes", tree=True)
        elif word in ("-fprint", "-fprint0", "-fls", "-fprintf") and index < len(args):
            check.write(args[index], scope, f"runs `find {word}`, which writes")
            index += 2 if word == "-fprintf" else 1
        elif word in ("-exec", "-execdir", "-ok", "-okdir"):
            end = index
            while end < len(args) and args[end].text not in (";", "+"):
                end += 1
            below = tuple(f"{alt.rstrip('/')}/{MARK}" for start in starts for alt in start.alts)
            globbed = any(start.globbed for start in starts)
            inner = [
                Arg(tuple(dict.fromkeys(alt.replace("{}", found) for alt in arg.alts for found in below))[:MAX_PATHS], arg.source, arg.globbed or globbed)
                if "{}" in arg.text else arg
                for arg in args[index:end]
            ]
            index = end + 1
            if inner:
                check.call(Call(program_of(inner[0]), inner, {}, None), scope)


def xargs(check: Check, call: Call, scope: Scope) -> None:
    """xargs: its command, given the words it reads (``-a FILE``, standard input, the pipe)."""
    args = call.args[1:]
    options, rest = parse_options(args, "adEeIiLlnPs", frozenset({"--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}), stop=True)
    replace = next((value.text for option, value in options if option in ("-I", "--replace", "-i") and value is not None), None)
    if any(option in ("-i", "--replace") and value is None for option, value in options):
        replace = "{}"
    listed = next((value for option, value in options if option in ("-a", "--arg-file") and value is not None), None)
    text = check.input(call, scope) if listed is None else check.known_file_text(listed, scope)
    if text is not None:
        produced = Arg(tuple(dict.fromkeys(text.split()))[:MAX_PATHS] or ("",), "(the words it reads)")
    elif listed is not None or not scope.pipeline:
        produced = Arg((MARK,), "(the words it reads)")
    else:
        produced = check.produced(scope)
    inner = list(rest) or [Arg(("echo",), "echo")]
    if replace is not None:
        inner = [Arg(tuple(alt.replace(replace, value) for alt in arg.alts for value in produced.alts)[:MAX_PATHS], arg.source) if any(replace in alt for alt in arg.alts) else arg for arg in inner]
    else:
        inner = [*inner, produced]
    check.call(Call(program_of(inner[0]), inner, {}, None), scope)
