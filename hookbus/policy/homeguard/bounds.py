"""The home guard's bounds: how much of one tool call it reads, resolves and follows at
most. A call that goes past one is refused (the guard fails closed), so that what it costs
is bounded whatever an agent sends; MAX_DEPTH, MAX_PATHS and MAX_WORDS are public."""

from __future__ import annotations

#: Distinct paths resolved at most for one call: each costs a few system calls.
MAX_PATHS = 256
#: Words and operators read at most in one bash command, the commands it runs (``bash -c``,
#: scripts, substitutions) included: a command with more is refused, not read to its end.
MAX_WORDS = 16 * MAX_PATHS
#: Pieces of words (quoted parts, expansions) read at most.
MAX_PIECES = 4 * MAX_WORDS
#: An arithmetic expression is looked for this far, at most (past it, the parentheses are
#: read as a subshell, as bash reads parentheses that do not close as arithmetic).
MAX_ARITHMETIC = 4096
#: Substitutions within substitutions, shells within shells, at most.
MAX_DEPTH = 32
#: Longer path names are refused by the kernel (ENAMETOOLONG), so they reach no place.
PATH_MAX = 4096
#: Links followed in one path at most, as the kernel does (ELOOP).
MAX_LINKS = 40
#: The values one word may expand to that are followed (a loop's words, a default).
MAX_ALTERNATIVES = 64
#: Directories a command may be in at once (after cd's that may fail) that are followed.
MAX_DIRECTORIES = 16
#: A script read from disk, at most.
MAX_SCRIPT_BYTES = 256 * 1024
#: Directory entries listed to expand a command's globs, at most.
MAX_LISTED = 4096
#: Text a command's programs are guessed to print (echo, base64 -d...), at most.
MAX_OUTPUT = 1024 * 1024
