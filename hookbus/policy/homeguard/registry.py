"""Which handler judges each program, by what it does. Each simple command is judged by
what it writes:

- **writes**: every redirection that opens a file for writing (``>``, ``>>``, ``>|``,
  ``&>``, ``&>>``, ``<>``, ``n>``, ``{fd}>``, ``>& FILE``); the targets of programs that
  write (``cp``, ``mv``, ``install``, ``ln``, ``rsync``: their destination, and the
  destination's entry of each source; ``mv`` and a hard ``ln`` their sources too; ``rm``,
  ``touch``, ``mkdir``, ``tee``, ``truncate``, ``chmod``, ``sed -i``, ``perl -i``, ``dd of=``,
  ``sort -o``, ``patch``, ``curl -o``, ``wget -O``, ``git`` clone/init and any git verb that
  writes, in the repository it runs in, ``find -delete``/``-exec``/``-fprint``,
  ``hookbus install``, ``hookbus import``, ``hookbus new`` without ``--dir``...). A writer
  that fills a tree (``cp -r``, ``rsync``, ``tar -x`` and ``unzip`` in their target, which
  is the working directory without ``-C``/``-d``, ``find -delete`` or a writing ``-exec``
  below its starting points) writes anything below its target, so a target that holds a
  place (``cp -r stage/. ~``) is a write into it. Deleting or re-moding a directory that
  holds a place wholesale (``rm -rf ~``, ``chmod -R go-w ~``) plants nothing and is left to
  hooks that guard destructive commands; ``rm -rf ~/.vix/hooks/x`` is refused;
- **runs another command**: wrappers (``sudo``, ``env``, ``nohup``, ``timeout``, ``nice``,
  ``command``, ``exec``, ``xargs``, ``find -exec``, ``flock``...) are judged by the command
  they run; ``bash -c``, ``sh -c``, ``eval``, ``trap``, ``watch`` by the command text they
  run (refused when the guard cannot read it: ``eval "$X"``); a shell reading a
  here-document, a here-string, a file (``bash < FILE``, ``source /dev/stdin``) or a pipe
  is judged by what it reads, and so is ``xargs`` (``xargs -a FILE``) and ``read`` (``while
  read f; ...; done < FILE``); ``bash FILE``, ``source FILE`` and ``./script`` by the script
  (written earlier in the command, or on disk: at most 256 KiB is read, never from a FIFO);
- **reads only**: ``ls``, ``cat``, ``head``, ``tail``, ``less``, ``jq``, ``grep``, ``rg``,
  ``find`` without a writing action, ``wc``, ``stat``, ``file``, ``diff``, ``cmp``,
  ``echo``, ``printf``, ``test``, ``realpath``, ``readlink``, ``du``, ``tree``, ``sed`` and
  ``awk`` without a writing command, ``git`` log/show/status/diff/blame..., ``hookbus`` list,
  validate, log, explain...: not writes, whatever they name (their redirections still are);
- **any other program** is refused when one of its arguments, read as a path (a whole
  argument, ``--opt=value``, ``-Cvalue``, ``NAME=value``), lands in a place, when an argument
  names a place as text (code for ``python -c``: the place's path or a spelling of it,
  ``$VIX_HOME``, its name ``.vix`` as a path component), or when it runs in a working
  directory inside a place (every program but a reader then writes there, or may).

The handlers are in ``writers``, ``archivers``, ``git``, ``interpreters`` (any other
program), ``runners`` and ``shellstate``; the redirections are the judge's own.
"""

from __future__ import annotations

from typing import Iterable

from hookbus.policy.homeguard.archivers import extractor, zip_files
from hookbus.policy.homeguard.check import Check, Handler
from hookbus.policy.homeguard.git import git
from hookbus.policy.homeguard.interpreters import hookbus, python, unknown
from hookbus.policy.homeguard.programs import COPIER_OPTIONS, OUTPUT_READERS, PYTHON, READERS, SHELLS, WRAPPERS
from hookbus.policy.homeguard.runners import alias, evaluate, find, runner, shell, source, su, trap, watch, wrapper, xargs
from hookbus.policy.homeguard.shellstate import assign, cd, read, set_positional, unknown_value, unset
from hookbus.policy.homeguard.values import Call, Scope
from hookbus.policy.homeguard.writers import awk, copier, output_reader, remover, sed


def _reads_only(check: Check, call: Call, scope: Scope) -> None:
    """Programs that only read: nothing they name is written."""


_HANDLERS: dict[str, Handler] = {}


def _register(handler: Handler, names: Iterable[str]) -> None:
    for name in names:
        _HANDLERS[name] = handler


_register(_reads_only, READERS)
_register(output_reader, OUTPUT_READERS)
_register(copier, COPIER_OPTIONS)
_register(zip_files, ("zip",))
_register(remover, ("rm", "rmdir", "unlink", "shred", "chmod", "chown", "chgrp"))
_register(extractor, ("tar", "bsdtar", "gtar", "unzip", "7z", "7za", "7zr", "7zz", "cpio", "patch"))
_register(sed, ("sed", "gsed"))
_register(awk, ("awk", "gawk", "mawk", "nawk"))
_register(find, ("find", "gfind"))
_register(xargs, ("xargs",))
_register(git, ("git",))
_register(hookbus, ("hookbus",))
_register(wrapper, WRAPPERS)
_register(runner, ("uv", "uvx", "pipx", "poetry", "pdm", "npx", "bunx", "pnpm", "conda", "bundle"))
_register(shell, SHELLS)
_register(evaluate, ("eval",))
_register(source, ("source", "."))
_register(trap, ("trap",))
_register(alias, ("alias",))
_register(watch, ("watch",))
_register(su, ("su", "runuser"))
_register(cd, ("cd", "pushd", "popd"))
_register(assign, ("export", "declare", "typeset", "local", "readonly"))
_register(read, ("read",))
_register(unknown_value, ("mapfile", "readarray", "getopts"))
_register(unset, ("unset",))
_register(set_positional, ("set",))


def handler_for(name: str | None) -> Handler:
    """The handler of the program ``name`` (None: a program the guard cannot know)."""
    if name is None:
        return unknown
    found = _HANDLERS.get(name)
    if found is not None:
        return found
    if PYTHON.fullmatch(name):
        return python
    return unknown
