"""The home guard: does one agent tool call write into a protected place?

The protected places are the hookbus home (``~/.vix``: its ``hooks/<id>/hook.json`` is
hot-reloaded, so an agent that writes there plants a hook that runs outside the agent's
sandbox) and the organization's managed directory (``/etc/vix``). The guard is built in and
on by default; ``HomeGuard.check`` reads a PreToolUse envelope, already in vixd's names
(Claude Code's native names are read too, for an envelope that was not translated), and
says what the call does wrong, or None. It stops writes; a call that only reads a place
(``cat ~/.vix/hooks/x/hook.json``) goes through.

What it checks (each module's docstring says how):

- **the path a write tool names** (``write_file``, ``edit_file``, ``Write``, ``Edit``,
  ``MultiEdit``, ``NotebookEdit``), read as the writer reads it: ``~`` expanded, made
  absolute against the envelope's ``cwd``, walked as the kernel walks it, ``/proc/self``
  read as the writer's (``places``). It is refused when it lands in a place, goes through
  a link that stands in one, or is a hard link that may be in one;
- **a bash command**, read as bash reads it (``reader``), walked as bash runs it, with the
  ``cd``'s it makes and the values its words expand to (``judge``), each simple command
  judged by what it writes (``registry``, and its handlers): its redirections, the targets
  of programs that write, the command a wrapper or a shell runs, nothing for a program that
  only reads, and any argument of another program that lands in a place, as a path or as
  text (``targets``, ``text``).

This is **best effort** against a determined agent: a path built by a program the guard
does not model (a script that writes, ``python`` building the name from parts) gets
through; docs/security.md counts which. The hard boundary is a sandbox.

It fails closed: what it cannot read (a ``tool_input`` that is not an object, a path or
command that is not a string, a NUL byte, unbalanced quotes or parentheses, nesting deeper
than MAX_DEPTH, more than MAX_WORDS words and operators, more than MAX_PATHS paths to
resolve, a relative write with no working directory) is refused. A call whose field is
absent entirely is left alone: it writes nothing. A ``~name`` no user can have is not
looked up (a megabyte one aborts some NSS modules, and the process with them). Every bound
is in ``bounds``.

Cost: the places' realpaths and regexes are built once, in ``HomeGuard.__init__``. A bash
command is read in one pass of anchored regexes (linear in its length); a reader's
arguments are never resolved, and a write target costs an ``lstat`` per component, cached
within a call. A megabyte of words is refused at MAX_WORDS, long before it costs much.

The modules, each with one job, and importing one way (each only those before it):
``errors``, ``bounds``, ``globs`` and ``text`` (the text rules); ``places`` (the places,
and paths walked as the writer walks them); ``values`` (what a command is judged with);
``syntax`` and ``reader`` (bash, read); ``check`` (the check as a handler sees it);
``output`` (what programs print); ``programs`` (what programs are); the handlers,
``writers``, ``archivers``, ``git``, ``interpreters``, ``runners``, ``shellstate``, and
``registry`` (which judges which program); ``targets`` (what is written) and ``judge``
(the walk of a command); ``guard`` (``HomeGuard``).
"""

from __future__ import annotations

from hookbus.policy.homeguard.bounds import MAX_DEPTH, MAX_PATHS, MAX_WORDS
from hookbus.policy.homeguard.guard import HomeGuard
from hookbus.policy.homeguard.places import ProtectedPlace

__all__ = ["MAX_DEPTH", "MAX_PATHS", "MAX_WORDS", "HomeGuard", "ProtectedPlace"]
