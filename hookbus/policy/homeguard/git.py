"""The handler of ``git``: a verb that only reads (``log``, ``status``, ``diff``..., ``branch``
that lists) writes nothing but its ``--output``; ``clone`` and ``init`` write their
directory; any other verb writes in the repository it runs in (``-C``), so running it in a
place, or naming a path in one, is refused."""

from __future__ import annotations

from typing import Sequence

from hookbus.policy.homeguard.check import Check
from hookbus.policy.homeguard.programs import parse_options
from hookbus.policy.homeguard.values import UNKNOWN_DIRECTORY, Arg, Call, Scope, joined_path

_GIT_READS = frozenset(
    """status log show diff blame grep ls-files ls-tree ls-remote rev-parse rev-list describe shortlog cat-file show-ref
    for-each-ref whatchanged name-rev merge-base check-ignore check-attr help version cherry count-objects annotate
    var show-branch range-diff --version --help -h""".split()
)
_GIT_TEXT_OPTIONS = ("--message", "--file", "--author", "--date", "--template", "--trailer", "--fixup", "--squash", "--reuse-message", "--reedit-message", "--gpg-sign", "--branch", "--origin", "--depth", "--reference", "--jobs", "--filter", "--upload-pack", "--config", "--separate-git-dir", "--shallow-since", "--shallow-exclude", "--format", "--pretty")


def git(check: Check, call: Call, scope: Scope) -> None:
    """git: by its verb (see the module's docstring), in the repository it runs in (``-C``)."""
    args = call.args[1:]
    repository = Arg((".",), ".")
    index = 0
    while index < len(args):
        word = args[index].text
        if word == "-C" and index + 1 < len(args):
            repository = joined_path(repository, args[index + 1])
            index += 2
        elif word in ("-c", "--config-env", "--exec-path", "--namespace") and index + 1 < len(args):
            index += 2
        elif word.startswith(("--git-dir=", "--work-tree=")):
            check.write(Arg((word.split("=", 1)[1],), args[index].source), scope, "runs `git` on")
            index += 1
        elif word.startswith("-"):
            index += 1
        else:
            break
    if index >= len(args):
        return
    verb, rest = args[index].text, args[index + 1 :]
    what = f"runs `git {verb}`, which writes"
    if verb in _GIT_READS or _git_lists(verb, rest):
        for position, arg in enumerate(rest):
            if arg.text.startswith("--output="):
                check.write(Arg((arg.text.split("=", 1)[1],), arg.source), scope, what)
            elif arg.text in ("--output", "-o") and verb in ("diff", "log", "show", "format-patch") and position + 1 < len(rest):
                check.write(rest[position + 1], scope, what)
        return
    options, operands = parse_options(rest, "mFCctSbjoBu", frozenset(_GIT_TEXT_OPTIONS))
    in_repository = Scope(check.directories_of(repository, scope) or (UNKNOWN_DIRECTORY,))
    if verb == "clone":
        if len(operands) >= 2:
            check.write(operands[1], in_repository, what)
        elif operands:
            name = operands[0].text.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
            check.write(Arg((name[:-4] if name.endswith(".git") else name,), operands[0].source), in_repository, what)
        return
    if verb == "init":
        check.write(operands[0] if operands else Arg((".",), "."), in_repository, what)
        return
    check.not_in_a_place(f"git {verb}", in_repository)
    for option, value in options:
        if value is not None and option in ("-o", "--output", "--file") and verb in ("config", "archive", "bundle", "format-patch"):
            check.write(value, in_repository, what)
    for operand in operands:
        check.write(operand, in_repository, what, strict=False)


def _git_lists(verb: str, rest: Sequence[Arg]) -> bool:
    """``git branch``, ``tag``, ``remote``, ``stash``, ``config``, ``worktree``,
    ``notes`` that only list."""
    words = [arg.text for arg in rest]
    operands = [word for word in words if not word.startswith("-")]
    if verb in ("branch", "tag"):
        return not operands or any(word in ("-l", "--list", "-a", "-r", "--all", "--remotes", "--show-current", "--contains", "--merged", "--no-merged", "--points-at", "-v", "-vv") for word in words)
    if verb == "remote":
        return not operands or operands[0] in ("show", "get-url", "-v")
    if verb in ("stash", "worktree", "notes"):
        return bool(operands) and operands[0] in ("list", "show")
    if verb == "config":
        return any(word.startswith(("--get", "--list", "-l", "--show")) for word in words) or len(operands) == 1
    return False
