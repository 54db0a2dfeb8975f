r"""The home guard: does one agent tool call write into a protected place?

The protected places are the hookbus home (``~/.vix``: its ``hooks/<id>/hook.json`` is
hot-reloaded, so an agent that writes there plants a hook that runs outside the agent's
sandbox) and the organization's managed directory (``/etc/vix``). The guard is built in and
on by default; ``HomeGuard.check`` reads a PreToolUse envelope, already in vixd's names
(Claude Code's native names are read too, for an envelope that was not translated), and
says what the call does wrong, or None. It stops writes; a call that only reads a place
(``cat ~/.vix/hooks/x/hook.json``) goes through.

**Paths are read as the writer reads them.** A target is expanded (``~``), made absolute
against the envelope's ``cwd`` (else this process's working directory), and walked one
component at a time as the kernel walks it: each symbolic link followed from where it
stands, ``..`` taken after the link's target. A path that goes through ``/proc/self``,
``/proc/thread-self`` or a link to them (``/dev/fd``, ``/dev/stdout``) is read as the
*writer's* process would read it, not this one's (a ``hookbus serve`` has its own working
directory): ``/proc/self/cwd`` is the writer's working directory, ``/proc/self/root`` is
``/``; another process's entry (``/proc/<pid>/cwd``), a descriptor (``/proc/self/fd/N``),
or ``/proc/self/cwd`` with no working directory cannot be read so, and is refused (in bash,
descriptors 0-2 are the command's own streams, whose redirections are checked themselves).
A path lands in a place when where it leads is inside it (its configured path or its
realpath, equal or followed by ``/``), or when it goes through a link that stands inside it
(``hooks -> /srv/hooks`` writes hooks all the same); a sibling that only shares a prefix
(``~/.vix-other``) is not inside. A regular file with another name (a hard link) on a
place's file system is refused as a write target too: its other name may be a hook.

**Bash is read as bash reads it**, into simple commands (bash's tokens: quotes and
backslashes removed as bash removes them, ``$'...'`` decoded, a ``#`` that begins a word
starting a comment, here-documents, ``$(...)``, backticks and process substitutions, which
run too, and compound commands), and each simple command is judged by what it writes:

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

Relative paths are read in the directory the command runs in: ``cd`` and ``pushd`` are
followed (``cd lnk && touch hooks/x``, ``cd lnk; ...``, ``(cd lnk && ...)``, ``cd -P``,
``cd "$HOME"/x``, ``CDPATH``), links resolved as the kernel resolves them. A ``cd`` may
fail, so after ``;`` both the old and the new directory count; after ``&&`` only the new
one; a subshell's ``cd`` ends with it; a ``cd`` in a loop or a function that the guard
cannot follow round, or into a directory it cannot read (``cd "$X"`` with ``$X`` unknown,
``cd "$(cmd)"``), makes the directory unknown, and a relative write there is refused.

Words are expanded as bash would expand them, as far as the text says: braces before
tildes (``{~/.vix/x,y}``), ``~``, ``$HOME``, ``$PWD``, a place's variable (``$VIX_HOME``),
variables the command sets itself (``d=~/.vix; touch $d/x``, ``for f in ...``, ``set --``,
``read f`` from a pipe or a file, ``bash -c CODE _ ARG``'s ``$1``), ``${X:-default}``,
and the output of the simple programs a ``$(...)`` or a pipe runs (``echo``, ``printf``,
``base64 -d``, ``xxd -r``, ``tr``, ``dirname``, ``realpath``, ``cat FILE``...). A glob is
expanded as bash expands it, listing directories as the writer would (through links), at
most 4,096 entries a command; past that, or when nothing matches, it is matched
component by component against each place's name (``~/.v*``, ``~/.{vix,x}``). What
stays unknown (an environment variable, another program's output) lands in a place when
the text around it says so: the directory it is built in is, or holds, a place (a write to
``~/$X/hook.json``), or a literal part names the place's name (``$X/.vix/hooks``).

This is **best effort** against a determined agent: a path built by a program the guard
does not model (a script that writes, ``python`` building the name from parts) gets
through; docs/security.md counts which. The hard boundary is a sandbox.

It fails closed: what it cannot read (a ``tool_input`` that is not an object, a path or
command that is not a string, a NUL byte, unbalanced quotes or parentheses, nesting deeper
than MAX_DEPTH, more than MAX_WORDS words and operators, more than MAX_PATHS paths to
resolve, a relative write with no working directory) is refused. A call whose field is
absent entirely is left alone: it writes nothing. A ``~name`` no user can have is not
looked up (a megabyte one aborts some NSS modules, and the process with them).

Cost: the places' realpaths and regexes are built once, in ``HomeGuard.__init__``. A bash
command is read in one pass of anchored regexes (linear in its length); a reader's
arguments are never resolved, and a write target costs an ``lstat`` per component, cached
within a call. A megabyte of words is refused at MAX_WORDS, long before it costs much.
"""

from __future__ import annotations

import base64
import binascii
import errno
import fnmatch
import os
import re
import stat
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, NamedTuple, Sequence, Union

import attrs


@attrs.frozen
class ProtectedPlace:
    #: "the hookbus home" or "the managed directory": used in messages.
    label: str
    #: The path as configured, absolute (already made absolute by the caller).
    path: str
    #: Environment variable names whose value is this place (e.g. ("VIX_HOME",) or ("HOOKBUS_MANAGED_DIR",)).
    variables: tuple[str, ...] = ()
    #: Extra spellings a shell would read as this path, e.g. ("~/.vix", "$HOME/.vix", "${HOME}/.vix") when the home is the default ~/.vix; the caller passes them.
    spellings: tuple[str, ...] = ()


#: The tools that write one file, and the field of their input that names it.
_TARGET_FIELDS: dict[str, str] = {
    "write_file": "path",
    "edit_file": "path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_COMMAND_TOOLS = frozenset({"bash", "Bash"})

#: Distinct paths resolved at most for one call: each costs a few system calls.
MAX_PATHS = 256
#: Words and operators read at most in one bash command, the commands it runs (``bash -c``,
#: scripts, substitutions) included: a command with more is refused, not read to its end.
MAX_WORDS = 16 * MAX_PATHS
#: Pieces of words (quoted parts, expansions) read at most.
_MAX_PIECES = 4 * MAX_WORDS
#: An arithmetic expression is looked for this far, at most (past it, the parentheses are
#: read as a subshell, as bash reads parentheses that do not close as arithmetic).
_MAX_ARITHMETIC = 4096
#: Substitutions within substitutions, shells within shells, at most.
MAX_DEPTH = 32
#: Longer path names are refused by the kernel (ENAMETOOLONG), so they reach no place.
_PATH_MAX = 4096
#: Links followed in one path at most, as the kernel does (ELOOP).
_MAX_LINKS = 40
#: How much of a path or word a phrase quotes.
_SHOWN = 160
#: The values one word may expand to that are followed (a loop's words, a default).
_MAX_ALTERNATIVES = 64
#: Directories a command may be in at once (after cd's that may fail) that are followed.
_MAX_DIRECTORIES = 16
#: A script read from disk, at most.
_MAX_SCRIPT_BYTES = 256 * 1024
#: Directory entries listed to expand a command's globs, at most.
_MAX_LISTED = 4096
#: Text a command's programs are guessed to print (echo, base64 -d...), at most.
_MAX_OUTPUT = 1024 * 1024

# Name characters: what the shell keeps in one word and a file name commonly holds, so a
# place followed by one is another name (``.vix-other``). Non-ASCII counts as a name
# character: a multibyte letter continues a name.
_NAME_CHARS = r"A-Za-z0-9_.\-~+@%\u0080-\U0010ffff"
_PATH_CHARS = _NAME_CHARS + "/"
# What ends a word in text that is not bash (code given to python -c, a sed script):
# blanks, bash's metacharacters, backticks, and the quotes code uses around a path.
_SEPARATORS = " \t\n;&|<>()`'\",="
_WORD_CHAR = f"[^{_SEPARATORS}]"
_SEPARATOR = re.compile(f"[{_SEPARATORS}]")
_TILDE_WORD = re.compile(f"~(?<![^{_SEPARATORS}]~){_WORD_CHAR}*")
_UNQUOTE = str.maketrans("", "", "'\"\\")
# Variables bash expands in a word's first place; $VIX_HOME is rule 2's.
_LEADING_VARIABLE = re.compile(r"\$(?:(HOME|PWD)|\{(HOME|PWD)\})(?=/|$)")
_GLOB_CHARS = re.compile(r"[*?[{]")
#: What makes an unquoted literal more than itself: a tilde, a glob, an assignment's ``=``.
_EXPANDS = re.compile(r"[*?[{~=]")
_OPTION_VALUE = re.compile(r"[/~]")
#: A glob component longer than this is taken as matching anything: no name is this long
#: (NAME_MAX is 255), and compiling it is not worth the time.
_MAX_GLOB = 1024
_INNER_BRACE = re.compile(r"\{([^{}]*)\}")
#: Words a component's brace groups expand to, at most; past it, any name may result.
_MAX_EXPANSIONS = 64

#: The unknown part of a word's value (an environment variable, a program's output). A
#: command holding a NUL byte is refused before it is read, so none is real.
_MARK = "\0"
#: A word that expands to more values than are followed.
_OVERFLOW = "\0\0"


@attrs.frozen
class _Root:
    """One path a place is known by (configured, or resolved), ready to compare."""

    place: ProtectedPlace
    path: str
    #: ``path`` and a slash: what a path inside it starts with.
    prefix: str
    #: ``path``'s components, without the empty one before the first slash.
    parts: tuple[str, ...]


class _Unreadable(Exception):
    """A path or command the guard cannot read as the writer would: the call is refused."""

    def __init__(self, why: str, descriptor: int | None = None) -> None:
        super().__init__(why)
        self.why = why
        #: The descriptor a ``/proc/self/fd/N`` path names, when it names one.
        self.descriptor = descriptor


class _Deny(Exception):
    """A write into a place was found: ``phrase`` says what."""

    def __init__(self, phrase: str) -> None:
        super().__init__(phrase)
        self.phrase = phrase


class _Walked(NamedTuple):
    """Where a path leads, walked as the kernel walks it."""

    path: str
    #: A place that a link on the way stands in (the path went through it), if any.
    through: _Root | None
    #: The path's own lstat, when it exists.
    stat: os.stat_result | None


# Entries of a /proc/<pid> directory that lead out of procfs, or that name a descriptor.
_PROC_LINKS = frozenset({"cwd", "root", "exe", "fd", "fdinfo", "map_files", "task", "ns"})


class HomeGuard:
    """Whether a tool call writes into one of ``places``; see the module's docstring."""

    #: The vixd tool names (and Claude Code's native names) this guard looks at.
    TOOLS: ClassVar[frozenset[str]] = frozenset(_TARGET_FIELDS) | _COMMAND_TOOLS

    def __init__(self, places: Sequence[ProtectedPlace]) -> None:
        roots: list[_Root] = []
        # Text rules (for code and other programs' arguments): (regex, what it finds, as a
        # phrase shows it, place), first found first.
        names: dict[str, tuple[re.Pattern[str], str, ProtectedPlace]] = {}
        dot_names: dict[str, ProtectedPlace] = {}
        devices: set[int] = set()
        for place in places:
            configured = os.path.abspath(place.path)
            try:
                resolved = os.path.realpath(configured)
            except (OSError, ValueError):
                resolved = configured  # a path no file can have: its spelling is all there is
            for path in dict.fromkeys((configured, resolved)):
                prefix = path if path.endswith("/") else path + "/"
                roots.append(_Root(place, path, prefix, tuple(part for part in path.split("/") if part)))
            spellings = (spelling.rstrip("/") or spelling for spelling in place.spellings)
            for text in (configured, resolved, *spellings):
                # The unquoted form too: it is matched against the unquoted copy of a text.
                for form in (text, text.translate(_UNQUOTE)):
                    if form and form not in names:
                        names[form] = (_whole_path(form), text, place)
            for variable in place.variables:
                for form in (f"${variable}", f"${{{variable}"):
                    if form not in names:
                        names[form] = (_variable(form), f"${variable}", place)
            for path in (configured, resolved):
                name = os.path.basename(path)
                if name.startswith(".") and len(name) >= 3:
                    dot_names.setdefault(name, place)
                    if name not in names:
                        names[name] = (_component(name), name, place)
                try:
                    devices.add(os.stat(os.path.dirname(path) or "/").st_dev)
                except (OSError, ValueError):
                    pass
        self._roots = tuple(roots)
        self._names = tuple(names.values())
        self._dot_names = tuple((name, _component(name), place) for name, place in dot_names.items())
        self._devices = frozenset(devices)
        self._variables = {variable: place.path for place in places for variable in place.variables}

    def check(self, envelope: Mapping[str, Any]) -> str | None:
        """None when the call writes into no protected place; else a short phrase saying what it does, for the deny reason, e.g. "write_file targets /root/.vix/hooks/x/hook.json, inside the hookbus home /root/.vix" or "the bash command's `touch` writes ~/.vix/hooks/x/hook.json, which is /root/.vix/hooks/x/hook.json, inside the hookbus home /root/.vix"."""
        tool = envelope.get("tool_name")
        if not self._roots or not isinstance(tool, str) or tool not in self.TOOLS:
            return None
        if "tool_input" not in envelope:
            return None
        tool_input = envelope["tool_input"]
        if not isinstance(tool_input, Mapping):
            return f"{tool}'s input is {_kind(tool_input)}, not an object: the guard cannot check it"
        field = "command" if tool in _COMMAND_TOOLS else _TARGET_FIELDS[tool]
        if field not in tool_input:
            return None
        value = tool_input[field]
        if not isinstance(value, str):
            return f"{tool}'s {field} is {_kind(value)}, not a string: the guard cannot check it"
        if tool in _COMMAND_TOOLS:
            return self._check_command(value, envelope)
        return self._check_target(tool, value, envelope)

    # -- write_file and the like ----------------------------------------------------------------

    def _check_target(self, tool: str, target: str, envelope: Mapping[str, Any]) -> str | None:
        if "\0" in target:
            return f"{tool}'s {_TARGET_FIELDS[tool]} holds a NUL byte: the guard cannot check it"
        given_cwd = _envelope_cwd(envelope)
        absolute = _expand_user(target)
        if not os.path.isabs(absolute):
            cwd = _working_directory(envelope)
            if cwd is None:
                return f"{tool} targets the relative path {_shown(target)}, and the working directory is unknown"
            absolute = os.path.join(cwd, absolute)
        try:
            walked = self._walk(absolute, given_cwd)
        except _Unreadable as unreadable:
            return f"{tool} targets {_shown(target)}, which the guard cannot read as the writer would: {unreadable.why}"
        except (OSError, ValueError, RuntimeError):
            return f"{tool} targets {_shown(target)}, which the guard cannot resolve"
        root = self._root_of(walked.path) or walked.through
        if root is None:
            if _hard_linked(walked, self._devices):
                return f"{tool} targets {_shown(target)}, a file with another name (a hard link) that may be inside {self._roots[0].place.label}"
            return None
        where = f"{root.place.label} {root.place.path}"
        if walked.path == target:
            return f"{tool} targets {_shown(target)}, inside {where}"
        return f"{tool} targets {_shown(target)}, which is {_shown(walked.path)}, inside {where}"

    # -- bash -------------------------------------------------------------------------------------

    def _check_command(self, command: str, envelope: Mapping[str, Any]) -> str | None:
        if "\0" in command:
            return "the bash command holds a NUL byte: the guard cannot check it"
        cwd = _working_directory(envelope)
        if cwd is None:
            start = _UNKNOWN_DIRECTORY
        else:
            try:
                walked = self._walk(cwd, _envelope_cwd(envelope))
            except (_Unreadable, OSError, ValueError, RuntimeError):
                return f"the bash command runs in {_shown(cwd)}, which the guard cannot resolve"
            start = _Directory(cwd, walked.path, self._root_of(walked.path) or walked.through)
        return _CommandCheck(self, command, start).run()

    # -- paths ------------------------------------------------------------------------------------

    def _walk(
        self,
        absolute: str,
        writer_cwd: str | None,
        links: Mapping[str, str] | None = None,
        cache: dict[str, os.stat_result | None] | None = None,
    ) -> _Walked:
        """``absolute`` walked as the kernel walks it for the writer, whose working
        directory is ``writer_cwd``; ``links``: links made earlier in the same command.
        Raises _Unreadable for what only the writer's process could read (see the module's
        docstring), OSError for a loop of links."""
        pending = absolute.split("/")[::-1]
        done = ""  # the root
        hops = 0
        through: _Root | None = None
        missing = False
        info: os.stat_result | None = None
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                done = done.rsplit("/", 1)[0]
                info = None
                continue
            if not missing and done == "/proc" and (name in ("self", "thread-self") or name.isdigit()):
                entry = _next_component(pending)
                if entry is None:
                    return _Walked(f"/proc/{name}", through, None)
                if entry == "..":
                    continue
                if name.isdigit():
                    if entry in _PROC_LINKS:
                        raise _Unreadable(f"/proc/{name}/{entry} is another process's")
                    return _Walked("/".join([f"/proc/{name}/{entry}", *reversed(pending)]), through, None)
                if entry == "cwd":
                    if writer_cwd is None:
                        raise _Unreadable(f"/proc/{name}/cwd is the writer's working directory, which is unknown")
                    pending.extend(writer_cwd.split("/")[::-1])
                    done = ""
                    continue
                if entry == "root":
                    done = ""
                    continue
                if entry in ("fd", "fdinfo"):
                    number = _next_component(pending)
                    descriptor = int(number) if number is not None and number.isdigit() else None
                    raise _Unreadable(f"/proc/{name}/{entry}/{number or ''} is a descriptor of the writer", descriptor)
                if entry in _PROC_LINKS:
                    raise _Unreadable(f"/proc/{name}/{entry} is the writer's")
                return _Walked("/".join([f"/proc/{name}/{entry}", *reversed(pending)]), through, None)
            candidate = f"{done}/{name}"
            if missing:
                done = candidate
                continue
            target = links.get(candidate) if links else None
            if target is None:
                found = _lstat(candidate, cache)
                if found is None:
                    missing = True
                    done = candidate
                    info = None
                    continue
                if not stat.S_ISLNK(found.st_mode):
                    done = candidate
                    info = found
                    continue
                target = os.readlink(candidate)
            hops += 1
            if hops > _MAX_LINKS:
                raise OSError(errno.ELOOP, "too many levels of symbolic links", absolute)
            if through is None:
                through = self._root_of(candidate)
            if target.startswith("/"):
                done = ""
            pending.extend(target.split("/")[::-1])
            info = None
        return _Walked(done or "/", through, info)

    def _root_of(self, path: str) -> _Root | None:
        for root in self._roots:
            if path == root.path or path.startswith(root.prefix):
                return root
        return None

    def _above(self, path: str) -> _Root | None:
        """A place strictly inside ``path``: what a recursive write there reaches."""
        prefix = path if path.endswith("/") else path + "/"
        for root in self._roots:
            if root.path.startswith(prefix):
                return root
        return None

    def _glob_root(self, absolute: str, dotglob: bool, writer_cwd: str | None, holds: bool) -> _Root | None:
        """A place that the pattern ``absolute`` can name, or something inside it (or, with
        ``holds``, a directory above it)."""
        components = absolute.split("/")
        first = next((index for index, part in enumerate(components) if _GLOB_CHARS.search(part)), len(components))
        prefix = "/".join(components[:first]) or "/"
        try:
            base = self._walk(prefix, writer_cwd).path
        except (_Unreadable, OSError, ValueError, RuntimeError):
            base = prefix
        parts = [part for part in base.split("/") if part] + [part for part in components[first:] if part and part != "."]
        for root in self._roots:
            matched = all(_component_matches(pattern, name, dotglob) for pattern, name in zip(parts, root.parts))
            if matched and (len(parts) >= len(root.parts) or holds):
                return root
        return None

    def _named(self, text: str) -> str | None:
        """The text rules: a place's path or spelling as a whole path, its variable, its
        dot-name as a path component. One regex per name: each starts with its name's first
        character, so the engine skips to where that name is."""
        for pattern, shown, place in self._names:
            if pattern.search(text) is not None:
                return f"names {place.label} ({shown})"
        return None


def _next_component(pending: list[str]) -> str | None:
    while pending:
        name = pending.pop()
        if name not in ("", "."):
            return name
    return None


def _lstat(path: str, cache: dict[str, os.stat_result | None] | None) -> os.stat_result | None:
    """``path``'s lstat, or None when nothing is there to follow (missing, not a directory,
    not searchable: the kernel's write fails there too, or lands as named)."""
    if cache is not None and path in cache:
        return cache[path]
    try:
        found: os.stat_result | None = os.lstat(path)
    except (OSError, ValueError):
        found = None
    if cache is not None:
        cache[path] = found
    return found


def _hard_linked(walked: _Walked, devices: frozenset[int]) -> bool:
    info = walked.stat
    return info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink > 1 and info.st_dev in devices


# -- reading bash ------------------------------------------------------------------------------------


class _Lit(NamedTuple):
    text: str
    quoted: bool


class _Var(NamedTuple):
    """``$name`` or ``${name OP arg}``; ``prefix`` is ``#`` (length) or ``!`` (indirect)."""

    name: str
    op: str = ""
    arg: _Word | None = None
    prefix: str = ""


class _Sub(NamedTuple):
    """``$(...)``, a backtick command, ``<(...)`` or ``>(...)``: commands that run."""

    items: tuple[_Item, ...]
    kind: str


class _Arith(NamedTuple):
    """``$((...))`` or ``((...))``: a number, and the substitutions inside it."""

    subs: tuple[_Sub, ...]


_Part = Union[_Lit, _Var, _Sub, _Arith]


class _Word(NamedTuple):
    parts: tuple[_Part, ...]
    #: As written, for messages.
    source: str

    def keyword(self) -> str | None:
        """The word's text when it is one unquoted literal (a reserved word can be)."""
        if len(self.parts) == 1 and isinstance(self.parts[0], _Lit) and not self.parts[0].quoted:
            return self.parts[0].text
        return None

    def assignment(self) -> str | None:
        """The variable a ``NAME=value`` word assigns, or None."""
        first = self.parts[0] if self.parts else None
        if isinstance(first, _Lit) and not first.quoted:
            found = _assignment(first.text)
            if found is not None:
                return found.group(1)
        return None


@attrs.define
class _Redirect:
    op: str
    fd: str
    target: _Word | None
    #: A here-document's body, once read.
    body: _Word | None = None


@attrs.define
class _Command:
    words: list[_Word]
    redirects: list[_Redirect]


class _Op(NamedTuple):
    text: str


@attrs.frozen
class _Group:
    """``( ... )``: a subshell."""

    items: tuple[_Item, ...]


@attrs.frozen
class _Loop:
    """``for NAME in WORDS`` (or ``select``); ``words`` None: the positional parameters."""

    name: str
    words: tuple[_Word, ...] | None


_Item = Union[_Command, _Op, _Group, _Loop]

_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[[^\]]*\])?\+?=")
#: A variable's name in an assignment is looked for this far (a longer one is a word).
_MAX_NAME = 1024


def _assignment(text: str) -> re.Match[str] | None:
    """``NAME=`` (or ``NAME[i]=``, ``NAME+=``) at the start of ``text``, found without
    scanning a long word that holds no ``=`` near its start."""
    equals = text.find("=", 0, _MAX_NAME)
    return _ASSIGNMENT.fullmatch(text, 0, equals + 1) if equals > 0 else None
_BLANKS = re.compile(r"(?:[ \t]|\\\n)+")
_PLAIN = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
# The lookahead-and-backreference reads the run once, without backtracking into it.
_PLAIN_WORD = re.compile(r"(?=([^ \t\n;&|()<>'\"\\$`#{}]+))\1(?![^ \t\n;&|()<>])")
_BRACE_PLAIN = re.compile(r"[^}'\"\\$`]+")
_DOUBLE_PLAIN = re.compile(r'[^"\\$`]+')
_HEREDOC_PLAIN = re.compile(r"[^\\$`]+")
_ARITH_PLAIN = re.compile(r"[^()$`]+")
_OPERATOR = re.compile(r";;&|;;|;&|&&|\|\||\|&|[;&|()]")
_REDIRECTION = re.compile(r"(\d+|\{[A-Za-z_][A-Za-z0-9_]*\})?(&>>|&>|<<<|<<-|<<|<>|<&|>>|>\||>&|<|>)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ANSI_C = re.compile(r"'((?:[^'\\]|\\.)*)'", re.S)
_BACKTICK = re.compile(r"((?:[^`\\]|\\.)*)`", re.S)
_PARAMETER = re.compile(r"([#!]?)([A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?|[0-9]+|[@*#?$!-])")
_PARAMETER_OPERATOR = re.compile(r":[-=+?]|[-=+?]|##|#|%%|%|//|/#|/%|/|\^\^|\^|,,|,|:|@")
_RESERVED = frozenset({"if", "then", "elif", "else", "fi", "do", "done", "while", "until", "{", "}", "!", "time", "case", "for", "select", "function", "coproc", "esac"})
_COLON = _Word((_Lit(":", False),), ":")


class _Budget:
    """What one check reads at most: words, pieces, nesting, characters lexed."""

    def __init__(self, size: int) -> None:
        self.words = 0
        self.pieces = 0
        self.depth = 0
        self.lexed = 0
        self.max_lexed = 4 * size + _MAX_OUTPUT

    def word(self) -> None:
        self.words += 1
        if self.words > MAX_WORDS:
            raise _Unreadable(f"it has more than {MAX_WORDS} words and operators: too many to check")

    def piece(self) -> None:
        self.pieces += 1
        if self.pieces > _MAX_PIECES:
            raise _Unreadable(f"it has more than {_MAX_PIECES} quoted parts and expansions: too many to check")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Unreadable(f"it nests commands more than {MAX_DEPTH} deep")

    def leave(self) -> None:
        self.depth -= 1

    def lex(self, size: int) -> None:
        self.lexed += size
        if self.lexed > self.max_lexed:
            raise _Unreadable("it runs more command text than the guard reads")


class _Reader:
    """Bash's grammar, as far as the guard needs it: one pass over ``text``."""

    def __init__(self, text: str, budget: _Budget) -> None:
        budget.lex(len(text))
        self.text = text
        self.i = 0
        self.budget = budget
        self.pushed: list[tuple[str, Any]] = []
        self.heredocs: list[tuple[_Redirect, str, bool, bool]] = []
        self.test_mode = False

    def parse(self) -> list[_Item]:
        items, _ = self.parse_list(frozenset())
        return items

    def parse_list(self, closers: frozenset[str]) -> tuple[list[_Item], str]:
        items: list[_Item] = []
        command: _Command | None = None
        while True:
            kind, value = self._token(command is None or not command.words)
            if kind == "eof":
                if command is not None:
                    items.append(command)
                if closers:
                    raise _Unreadable("a (, $(, { or case is never closed")
                return items, ""
            if kind == "op":
                if value in closers:
                    if command is not None:
                        items.append(command)
                    return items, value
                if value == "(":
                    if command is not None and len(command.words) == 1 and not command.redirects:
                        if self._token(False) != ("op", ")"):
                            raise _Unreadable("a ( after a command's name")
                        command = None
                        items.append(_Op("function"))
                        continue
                    if command is not None:
                        items.append(command)
                        command = None
                    items.append(_Group(tuple(self._nested(")"))))
                    continue
                if value in (")", ";;", ";&", ";;&"):
                    raise _Unreadable(f"a {value} that closes nothing")
                if command is not None:
                    items.append(command)
                    command = None
                items.append(_Op(value))
                continue
            if kind == "redir":
                if command is None:
                    command = _Command([], [])
                command.redirects.append(value)
                continue
            if kind == "arith":
                if command is not None:
                    items.append(command)
                    command = None
                items.append(_Command([_COLON, _Word((value,), "((...))")], []))
                continue
            word: _Word = value
            if command is None or not command.words:
                reserved = word.keyword()
                if reserved is not None and reserved in closers:
                    if command is not None:
                        items.append(command)
                    return items, reserved
                if reserved is not None and reserved in _RESERVED:
                    if command is not None:
                        items.append(command)
                        command = None
                    self._reserved(reserved, items)
                    continue
            if command is None:
                command = _Command([], [])
            command.words.append(word)
            keyword = word.keyword()
            if len(command.words) == 1 and keyword == "[[":
                self.test_mode = True
            elif self.test_mode and keyword == "]]":
                self.test_mode = False

    def _nested(self, closer: str) -> list[_Item]:
        self.budget.enter()
        items, found = self.parse_list(frozenset({closer}))
        self.budget.leave()
        if found != closer:
            raise _Unreadable(f"a {closer} is missing")
        return items

    def _reserved(self, word: str, items: list[_Item]) -> None:
        if word == "case":
            self._case(items)
        elif word in ("for", "select"):
            self._for(items)
        elif word == "function":
            kind, _ = self._token(False)
            if kind != "word":
                raise _Unreadable("a function with no name")
            following = self._token(False)
            if following == ("op", "("):
                if self._token(False) != ("op", ")"):
                    raise _Unreadable("a function's ( is not closed")
            else:
                self.pushed.append(following)
            items.append(_Op("function"))
        else:
            items.append(_Op(word))

    def _case(self, items: list[_Item]) -> None:
        kind, subject = self._token(False)
        if kind != "word":
            raise _Unreadable("a case with no word")
        kind, value = self._skip_newlines()
        if kind != "word" or value.keyword() != "in":
            raise _Unreadable("a case with no in")
        words: list[_Word] = [_COLON, subject]
        bodies: list[_Item] = []
        while True:
            kind, value = self._skip_newlines()
            if kind == "word" and value.keyword() == "esac":
                break
            if (kind, value) == ("op", "("):
                kind, value = self._token(False)
            while True:
                if kind != "word":
                    raise _Unreadable("a case pattern bash cannot read")
                words.append(value)
                kind, value = self._token(False)
                if (kind, value) == ("op", "|"):
                    kind, value = self._token(False)
                    continue
                if (kind, value) == ("op", ")"):
                    break
                raise _Unreadable("a case pattern with no )")
            body, closer = self.parse_list(frozenset({";;", ";&", ";;&", "esac"}))
            bodies.extend(body)
            bodies.append(_Op(";"))
            if closer == "esac":
                break
        items.append(_Command(words, []))
        items.append(_Op(";"))
        items.extend(bodies)

    def _for(self, items: list[_Item]) -> None:
        kind, value = self._token(True)
        if kind == "arith":
            items.append(_Command([_COLON, _Word((value,), "((...))")], []))
            return
        name = value.keyword() if kind == "word" else None
        if name is None:
            raise _Unreadable("a for loop with no name")
        kind, value = self._skip_newlines()
        if kind == "word" and value.keyword() == "in":
            words: list[_Word] = []
            while True:
                kind, value = self._token(False)
                if kind == "word":
                    words.append(value)
                    continue
                if kind == "op" and value in (";", "\n"):
                    break
                raise _Unreadable("a for loop's words are not closed")
            items.append(_Loop(name, tuple(words)))
            items.append(_Op(";"))
            return
        self.pushed.append((kind, value))
        items.append(_Loop(name, None))

    def _skip_newlines(self) -> tuple[str, Any]:
        while True:
            token = self._token(False)
            if token != ("op", "\n"):
                return token

    def _token(self, command_start: bool) -> tuple[str, Any]:
        if self.pushed:
            return self.pushed.pop()
        text = self.text
        while True:
            blanks = _BLANKS.match(text, self.i)
            if blanks is not None:
                self.i = blanks.end()
            if self.i >= len(text):
                return "eof", ""
            if text[self.i] != "#":
                break
            end = text.find("\n", self.i)  # a comment, to the end of the line
            self.i = len(text) if end < 0 else end
        char = text[self.i]
        self.budget.word()
        plain = _PLAIN_WORD.match(text, self.i)
        if plain is not None and not self.test_mode:
            # Most tokens: a word of ordinary characters, ended by a blank or an operator
            # (digits before < or > are a descriptor, left to the full reading).
            word = plain.group()
            if not (word.isdigit() and text.startswith(("<", ">"), plain.end())):
                self.i = plain.end()
                self.budget.piece()
                return "word", _Word((_Lit(word, False),), word)
        if char == "\n":
            self.i += 1
            self._read_heredocs()
            return "op", "\n"
        if self.test_mode and char in "<>()":
            self.i += 1
            return "word", _Word((_Lit(char, True),), char)
        if command_start and text.startswith("((", self.i):
            arith = self._arithmetic(self.i + 2)
            if arith is not None:
                return "arith", arith
        found = _REDIRECTION.match(text, self.i)
        if found is not None:
            descriptor, op = found.group(1) or "", found.group(2)
            substitution = op in ("<", ">") and text.startswith("(", found.end())
            if not substitution and not (descriptor and op.startswith("&")):
                self.i = found.end()
                return "redir", self._redirect(op, descriptor)
        operator = _OPERATOR.match(text, self.i)
        if operator is not None and not (char in "<>"):
            self.i = operator.end()
            return "op", operator.group()
        return "word", self._word()

    def _redirect(self, op: str, descriptor: str) -> _Redirect:
        kind, target = self._token(False)
        if kind != "word":
            raise _Unreadable(f"a {op} with no word after it")
        redirect = _Redirect(op, descriptor, target)
        if op in ("<<", "<<-"):
            delimiter = "".join(part.text for part in target.parts if isinstance(part, _Lit))
            quoted = any(isinstance(part, _Lit) and part.quoted for part in target.parts)
            self.heredocs.append((redirect, delimiter, op == "<<-", quoted))
        return redirect

    def _read_heredocs(self) -> None:
        for redirect, delimiter, strip_tabs, quoted in self.heredocs:
            line = re.compile("^" + ("\t*" if strip_tabs else "") + re.escape(delimiter) + "$", re.M)
            found = line.search(self.text, self.i)
            end = found.start() if found is not None else len(self.text)
            body = self.text[self.i : end]
            self.i = min(found.end() + 1, len(self.text)) if found is not None else len(self.text)
            if quoted:
                redirect.body = _Word((_Lit(body, True),), body)
            else:
                redirect.body = _Reader(body, self.budget).heredoc_word()
        self.heredocs.clear()

    def heredoc_word(self) -> _Word:
        """The whole text as an unquoted here-document's body: expansions, no quotes."""
        parts: list[_Part] = []
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char == "\\":
                following = text[self.i + 1 : self.i + 2]
                if following == "\n":
                    self.i += 2
                elif following in ("$", "`", "\\"):
                    parts.append(_Lit(following, True))
                    self.i += 2
                else:
                    parts.append(_Lit("\\", True))
                    self.i += 1
            elif char == "$":
                parts.extend(self._dollar(True))
            elif char == "`":
                parts.append(self._backtick())
            else:
                plain = _HEREDOC_PLAIN.match(text, self.i)
                assert plain is not None
                parts.append(_Lit(plain.group(), True))
                self.i = plain.end()
            self.budget.piece()
        return _Word(tuple(parts), text)

    def _word(self) -> _Word:
        start = self.i
        parts = self._parts(False)
        return _Word(tuple(parts), self.text[start : self.i])

    def _parts(self, in_braces: bool) -> list[_Part]:
        """A word's parts, up to a metacharacter (or, ``in_braces``, up to ``}``)."""
        parts: list[_Part] = []
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if in_braces:
                if char == "}":
                    break
            elif char in " \t\n;&|()<>":
                if char in "<>" and text.startswith("(", self.i + 1):
                    self.i += 2
                    parts.append(_Sub(tuple(self._nested(")")), char + "("))
                    continue
                break
            if char == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise _Unreadable("a ' is never closed")
                parts.append(_Lit(text[self.i + 1 : end], True))
                self.i = end + 1
            elif char == '"':
                parts.extend(self._double_quoted())
            elif char == "\\":
                following = text[self.i + 1 : self.i + 2]
                if following == "\n":
                    self.i += 2
                    continue
                parts.append(_Lit(following or "\\", True))
                self.i += 2
            elif char == "$":
                parts.extend(self._dollar(False))
            elif char == "`":
                parts.append(self._backtick())
            else:
                plain = (_BRACE_PLAIN if in_braces else _PLAIN).match(text, self.i)
                if plain is None:
                    parts.append(_Lit(char, False))
                    self.i += 1
                else:
                    parts.append(_Lit(plain.group(), False))
                    self.i = plain.end()
            self.budget.piece()
        return parts

    def _double_quoted(self) -> list[_Part]:
        text = self.text
        self.i += 1
        parts: list[_Part] = [_Lit("", True)]  # "" is an empty word, not none
        while True:
            if self.i >= len(text):
                raise _Unreadable('a " is never closed')
            char = text[self.i]
            if char == '"':
                self.i += 1
                return parts
            if char == "\\":
                following = text[self.i + 1 : self.i + 2]
                if following == "\n":
                    self.i += 2
                elif following in ("$", "`", '"', "\\"):
                    parts.append(_Lit(following, True))
                    self.i += 2
                else:
                    parts.append(_Lit("\\", True))
                    self.i += 1
            elif char == "$":
                parts.extend(self._dollar(True))
            elif char == "`":
                parts.append(self._backtick())
            else:
                plain = _DOUBLE_PLAIN.match(text, self.i)
                assert plain is not None
                parts.append(_Lit(plain.group(), True))
                self.i = plain.end()
            self.budget.piece()

    def _dollar(self, quoted: bool) -> list[_Part]:
        text, start = self.text, self.i
        following = text[start + 1 : start + 2]
        if following == "'" and not quoted:
            found = _ANSI_C.match(text, start + 1)
            if found is None:
                raise _Unreadable("a $' is never closed")
            self.i = found.end()
            return [_Lit(_ansi_c(found.group(1)), True)]
        if following == '"' and not quoted:
            self.i += 1
            return self._double_quoted()
        if following == "(":
            if text.startswith("((", start + 1):
                arith = self._arithmetic(start + 3)
                if arith is not None:
                    return [arith]
            self.i = start + 2
            return [_Sub(tuple(self._nested(")")), "$(")]
        if following == "{":
            return [self._parameter(start + 2)]
        name = _NAME.match(text, start + 1)
        if name is not None:
            self.i = name.end()
            return [_Var(name.group())]
        if following and following in "0123456789@*#?$!-":
            self.i = start + 2
            return [_Var(following)]
        self.i = start + 1
        return [_Lit("$", quoted)]

    def _parameter(self, start: int) -> _Var:
        found = _PARAMETER.match(self.text, start)
        if found is None:
            raise _Unreadable("a ${...} bash cannot read")
        prefix, name = found.group(1), found.group(2)
        self.i = found.end()
        operator = _PARAMETER_OPERATOR.match(self.text, self.i)
        op = operator.group() if operator is not None else ""
        argument: _Word | None = None
        if op:
            self.i = operator.end() if operator is not None else self.i
            at = self.i
            self.budget.enter()
            argument = _Word(tuple(self._parts(True)), self.text[at : self.i])
            self.budget.leave()
        if not self.text.startswith("}", self.i):
            raise _Unreadable("a ${ is never closed")
        self.i += 1
        if "[" in name:
            return _Var(name, "[", argument, prefix)  # an array's element: not followed
        return _Var(name, op, argument, prefix)

    def _arithmetic(self, start: int) -> _Arith | None:
        """``$((`` or ``((`` that ``start`` follows, up to its ``))``; None when the
        parentheses do not close as arithmetic (it is then a subshell, as bash decides)."""
        text, saved, depth, position = self.text, self.i, 0, start
        subs: list[_Sub] = []
        end = min(len(text), start + _MAX_ARITHMETIC)
        while position < end:
            plain = _ARITH_PLAIN.match(text, position, end)
            if plain is not None:
                position = plain.end()
                continue
            char = text[position]
            if char == "(":
                depth += 1
            elif char == ")":
                if depth == 0:
                    if text.startswith("))", position):
                        self.i = position + 2
                        return _Arith(tuple(subs))
                    break
                depth -= 1
            elif char == "$" and text.startswith("(", position + 1) and not text.startswith("((", position + 1):
                self.i = position + 2
                subs.append(_Sub(tuple(self._nested(")")), "$("))
                position = self.i
                continue
            elif char == "`":
                self.i = position
                subs.append(self._backtick())
                position = self.i
                continue
            position += 1
        self.i = saved
        return None

    def _backtick(self) -> _Sub:
        found = _BACKTICK.match(self.text, self.i + 1)
        if found is None:
            raise _Unreadable("a ` is never closed")
        self.i = found.end()
        inner = re.sub(r"\\([$`\\])", r"\1", found.group(1))
        self.budget.enter()
        items = _Reader(inner, self.budget).parse()
        self.budget.leave()
        return _Sub(tuple(items), "`")


_ANSI_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))", re.S)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _ansi_c(text: str) -> str:
    """``$'...'``'s escapes decoded as bash decodes them (a NUL ends the string)."""

    def decoded(found: re.Match[str]) -> str:
        hexa, short, long, octal, control, other = found.groups()
        try:
            if hexa or short or long:
                return chr(int(hexa or short or long, 16))
            if octal:
                return chr(int(octal, 8) & 0xFF)
        except (ValueError, OverflowError):
            return "?"
        if control:
            return chr(ord(control) & 0x1F)
        return _SIMPLE_ESCAPES.get(other, other if other in "\\'\"?" else "\\" + other)

    return _ANSI_ESCAPE.sub(decoded, text).split("\0", 1)[0]


# -- judging bash -------------------------------------------------------------------------------------


class _Directory(NamedTuple):
    """A directory a command may run in: as ``cd`` names it, as the kernel has it, and the
    place it is in. ``logical`` None: the guard cannot tell which directory."""

    logical: str | None
    physical: str | None
    root: _Root | None


_UNKNOWN_DIRECTORY = _Directory(None, None, None)


@attrs.define
class _Scope:
    """What one shell knows while it reads a command list."""

    cwds: tuple[_Directory, ...]
    variables: dict[str, tuple[str, ...]] = attrs.Factory(dict)
    #: Directories of a cd chained with && that may have failed: back after the chain.
    fallback: tuple[_Directory, ...] = ()
    #: Where the last command, a cd, went: the next && goes there alone.
    pending: tuple[_Directory, ...] | None = None
    #: Inside a loop or after a function definition: a cd may run more than once.
    repeats: bool = False
    #: Every directory a cd went to: where a popd or ``cd -`` may go back.
    seen: list[_Directory] = attrs.Factory(list)
    #: The simple commands of the pipeline so far: (program, arguments, standard input).
    pipeline: list[tuple[str | None, list[_Arg], str | None]] = attrs.Factory(list)
    #: What the ``while`` loop being read reads (``done < FILE``), when known.
    loop_input: str | None = None

    def child(self) -> _Scope:
        """A subshell's: it starts where this one is, and changes nothing of this one."""
        return _Scope(self.cwds, dict(self.variables), repeats=self.repeats, seen=list(self.seen))


class _Arg(NamedTuple):
    """A word, expanded: each value it may have (with _MARK for what is unknown)."""

    alts: tuple[str, ...]
    source: str
    #: It holds an unquoted glob or brace: its values are patterns.
    globbed: bool = False

    @property
    def text(self) -> str:
        return self.alts[0] if self.alts else ""


@attrs.frozen
class _Call:
    """A simple command to judge: its program and arguments, expanded."""

    name: str | None
    args: list[_Arg]
    #: ``NAME=value`` words before it: its environment.
    env: dict[str, tuple[str, ...]]
    #: What it reads on standard input, when the command says (a here-document).
    stdin: str | None
    #: The file it reads standard input from (``< FILE``), read only when that matters.
    stdin_file: _Arg | None = None


Handler = Callable[["_CommandCheck", _Call, _Scope], None]


class _CommandCheck:
    """One bash command, judged: ``run`` says what it writes into a place, or None."""

    def __init__(self, guard: HomeGuard, command: str, start: _Directory) -> None:
        self.guard = guard
        self.command = command
        self.start = start
        self.budget = _Budget(len(command))
        self.cache: dict[str, os.stat_result | None] = {}
        self.resolved: set[tuple[str, str | None, bool]] = set()
        #: Links the command makes (``ln -s``), followed by later commands of it.
        self.links: dict[str, str] = {}
        #: Files the command writes, and what it writes, when the guard can tell.
        self.written: dict[str, str | None] = {}
        #: Process substitutions' paths, and what their command prints when known.
        self.substituted: dict[str, str | None] = {}
        self.dotglob = "dotglob" in command or "GLOBIGNORE" in command
        #: Directory entries listed to expand globs, for the bound.
        self.listed = 0

    def run(self) -> str | None:
        scope = _Scope((self.start,))
        try:
            self._script(self.command, scope, same_shell=True, root=True)
        except _Deny as deny:
            return deny.phrase
        except _Unreadable as unreadable:
            return f"the bash command cannot be checked: {unreadable.why}"
        return None

    # -- command lists --------------------------------------------------------------------------

    def _script(self, text: str, scope: _Scope, *, same_shell: bool = False, root: bool = False, positional: Sequence[_Arg] = ()) -> None:
        """Read ``text`` as bash and judge it, in ``scope`` (``same_shell``) or a child's."""
        if not root:
            self.budget.enter()
        try:
            items = _Reader(text, self.budget).parse()
            inner = scope if same_shell else scope.child()
            for number, arg in enumerate(positional):
                inner.variables[str(number)] = arg.alts
            if positional:
                joined = tuple(dict.fromkeys(alt for arg in positional[1:] for alt in arg.alts)) or ("",)
                inner.variables["@"] = inner.variables["*"] = joined[:_MAX_ALTERNATIVES]
            self._items(items, inner)
        finally:
            if not root:
                self.budget.leave()

    def _items(self, items: Sequence[_Item], scope: _Scope) -> None:
        for index, item in enumerate(items):
            if isinstance(item, _Op) and item.text in ("while", "until"):
                scope.loop_input = self._loop_input(items, index, scope) or scope.loop_input
            if isinstance(item, _Command):
                self._command(item, scope)
            elif isinstance(item, _Op):
                self._separator(item.text, scope)
            elif isinstance(item, _Group):
                self.budget.enter()
                self._items(item.items, scope.child())
                self.budget.leave()
                scope.pending = None
            else:
                if item.words is None:
                    values: tuple[str, ...] = (_MARK,)
                else:
                    values = _flatten(self._expand(word, scope) for word in item.words)
                scope.variables[item.name] = values
                scope.repeats = True

    def _loop_input(self, items: Sequence[_Item], start: int, scope: _Scope) -> str | None:
        """What a ``while``/``until`` loop reads: the input redirection after its ``done``
        (``while read f; do ...; done < FILE``), for the ``read`` inside it."""
        depth = 0
        for index in range(start, len(items)):
            item = items[index]
            if isinstance(item, _Op) and item.text in ("while", "until", "for", "select"):
                depth += 1
            elif isinstance(item, _Loop):
                depth += 1
            elif isinstance(item, _Op) and item.text == "done":
                depth -= 1
                if depth == 0:
                    following = items[index + 1] if index + 1 < len(items) else None
                    if isinstance(following, _Command) and not following.words:
                        for redirect in following.redirects:
                            if redirect.op in ("<", "<<<", "<<", "<<-"):
                                got = self._redirection(redirect, scope, [])
                                return self._known_file_text(got, scope) if isinstance(got, _Arg) else got
                    return None
        return None

    def _separator(self, op: str, scope: _Scope) -> None:
        if op == "&&":
            if scope.pending is not None:
                scope.fallback = _directories(scope.fallback + scope.cwds)
                scope.cwds = scope.pending
            scope.pending = None
            scope.pipeline = []
            return
        if op in ("|", "|&"):
            scope.pending = None  # each stage of a pipeline is a subshell
            return
        if op in ("do", "function"):
            scope.repeats = True
        pending = () if scope.pending is None or op == "&" else scope.pending
        scope.cwds = _directories(scope.cwds + pending + scope.fallback)
        scope.pending = None
        scope.fallback = ()
        if op in (";", "\n", "&", "||", "then", "else", "elif", "fi", "done", "esac", "}", "{"):
            scope.pipeline = []

    def _command(self, command: _Command, scope: _Scope) -> None:
        words = command.words
        count = 0
        while count < len(words) and words[count].assignment() is not None:
            count += 1
        assignments = [(words[index].assignment() or "", self._expand(words[index], scope, assignment=True)) for index in range(count)]
        args = [self._expand(word, scope) for word in words[count:]]
        stdin: str | None = None
        stdin_file: _Arg | None = None
        writes: list[_Arg] = []
        for redirect in command.redirects:
            got = self._redirection(redirect, scope, writes)
            if isinstance(got, str):
                stdin, stdin_file = got, None
            elif got is not None:
                stdin, stdin_file = None, got
        scope.pending = None
        env = {name: tuple(_after_equals(alt) for alt in value.alts) for name, value in assignments}
        if not args:
            scope.variables.update(env)
            return
        name = _program(args[0])
        call = _Call(name, args, env, stdin, stdin_file)
        self._call(call, scope)
        scope.pipeline.append((name, args, stdin))
        for target in writes:
            self._remember_written(target, call, scope)

    def _redirection(self, redirect: _Redirect, scope: _Scope, writes: list[_Arg]) -> str | _Arg | None:
        """Judge a redirection that writes; return what one feeds to standard input: its
        text, or the file it comes from."""
        if redirect.op in ("<<", "<<-"):
            body = self._expand(redirect.body, scope) if redirect.body is not None else None
            return body.text if body is not None else None
        assert redirect.target is not None
        target = self._expand(redirect.target, scope)
        if redirect.op == "<<<":
            return target.text + "\n"
        if redirect.op == "<":
            written = self._file_text(target, scope)
            return written if written is not None else target
        if redirect.op in (">&", "<&") and re.fullmatch(r"\d*-?", target.text):
            return None  # a duplicated or closed descriptor
        if redirect.op == "<&":
            return None
        self._write(target, scope, "redirects output to", streams=True)
        writes.append(target)
        return None

    # -- programs -----------------------------------------------------------------------------------

    def _call(self, call: _Call, scope: _Scope) -> None:
        self.budget.enter()
        try:
            handler = _handler(call.name)
            script = _program_path(call.args[0])
            if script is not None and handler is not _CommandCheck._shell:
                self._run_script_file(script, call, scope)
            handler(self, call, scope)
        finally:
            self.budget.leave()

    def _reader(self, call: _Call, scope: _Scope) -> None:
        """Programs that only read: nothing they name is written."""

    def _unknown(self, call: _Call, scope: _Scope) -> None:
        """A program the guard does not model: any argument that lands in a place, read as a
        path or as text, is refused, and so is running it in a place."""
        what = call.name or _shown(call.args[0].source)
        self._not_in_a_place(what, scope)
        if call.name in _PATH_WRITERS:
            # Their arguments are the paths they write (or options): read as paths alone.
            for arg in call.args[1:]:
                for candidate in _option_values(arg):
                    self._write(candidate, scope, f"runs `{what}`, which writes", strict=not candidate.text.startswith("-"))
            return
        how = f"runs `{what}`, which writes" if call.name in _WRITERS else f"runs `{what}` on"
        for arg in call.args[1:]:
            for candidate in _option_values(arg):
                if candidate is not arg or not arg.text.startswith("-"):  # an option is no path
                    self._write(candidate, scope, how, strict=False)
        self._scan(call.args[1:], scope, what)
        runs_code = any(arg.text in ("-m", "-c", "-e", "-E", "-r", "--eval", "-p", "--print") for arg in call.args[1:])
        if call.name is not None and (call.name in _INTERPRETERS or _PYTHON.fullmatch(call.name)):
            script = None if runs_code else next((arg for arg in call.args[1:] if not arg.text.startswith("-")), None)
            text = self._known_file_text(script, scope) if script is not None else None
            if text is not None and script is not None:
                self._scan_text(text, scope, f"`{what}`'s script {_shown(script.source)}")
            text = self._input(call, scope) if script is None and not runs_code else None
            if text is not None:
                self._scan_text(text, scope, f"`{what}`'s standard input")

    def _not_in_a_place(self, what: str, scope: _Scope) -> None:
        for cwd in scope.cwds:
            if cwd.root is not None:
                place = cwd.root.place
                raise _Deny(f"the bash command runs `{what}` in {_shown(cwd.logical or '')}, inside {place.label} {place.path}")

    # -- writing programs -----------------------------------------------------------------------------

    def _copier(self, call: _Call, scope: _Scope) -> None:
        """cp, mv, install, ln, rsync: the destination, and each source's entry in it."""
        name = call.name or ""
        values, long_values = _COPIER_OPTIONS.get(name, ("", frozenset()))
        options, operands = _options(call.args[1:], values, long_values)
        flags = {option for option, _ in options}
        what = f"runs `{name}`, which writes"
        tree = bool(flags & {"-r", "-R", "-a", "--recursive", "--archive"})
        if name == "install" and flags & {"-d", "--directory"}:
            for operand in operands:
                self._write(operand, scope, what)
            return
        if name in ("rsync", "scp"):
            operands = [operand for operand in operands if not _remote(operand.text)]
            for option, value in options:
                if value is not None and option in ("--log-file", "--backup-dir", "--temp-dir", "-T", "--partial-dir"):
                    self._write(value, scope, what)
        hard = name == "ln" and not flags & {"-s", "--symbolic"} or name == "cp" and flags & {"-l", "--link"}
        target = next((value for option, value in options if option in ("-t", "--target-directory") and value is not None), None)
        if target is not None:
            destination, sources = target, operands
        elif len(operands) >= 2:
            destination, sources = operands[-1], operands[:-1]
        elif len(operands) == 1 and name == "ln":
            destination, sources = _Arg((".",), "."), operands
        else:
            return
        self._write(destination, scope, what, tree=tree)
        if not flags & {"-T", "--no-target-directory"}:
            for source in sources:
                if name == "rsync" and source.text.endswith("/"):
                    continue  # its contents, which the destination's tree holds
                self._write(_joined(destination, source), scope, what, tree=tree)
        if name == "mv" or hard:
            for source in sources:
                self._write(source, scope, f"runs `{name}`, which changes")
        if name == "ln" and flags & {"-s", "--symbolic"}:
            self._remember_links(destination, sources, scope)

    def _zip(self, call: _Call, scope: _Scope) -> None:
        """zip ARCHIVE FILES: it writes the archive, and with -m removes the files."""
        options, operands = _options(call.args[1:], "bnOPtxiZYsI", frozenset({"--output-file", "--temp-path", "--password", "--exclude", "--include"}))
        flags = {option for option, _ in options}
        what = "runs `zip`, which writes"
        for option, value in options:
            if option in ("-O", "--output-file", "-b", "--temp-path") and value is not None:
                self._write(value, scope, what)
        if operands:
            self._write(operands[0], scope, what)
        if flags & {"-m", "--move", "-d", "--delete"}:
            for operand in operands[1:]:
                self._write(operand, scope, "runs `zip -m`, which removes")

    def _remover(self, call: _Call, scope: _Scope) -> None:
        """rm, chmod, chown, chgrp...: each operand, and what is below it. A directory that
        holds a place (``rm -rf ~``) is not refused: deleting it wholesale plants nothing,
        and is for a hook that guards destructive commands to stop."""
        name = call.name or ""
        values = {"chmod": "", "chown": "", "chgrp": "", "shred": "nsu", "rm": "", "rmdir": "", "unlink": ""}.get(name, "")
        options, operands = _options(call.args[1:], values, frozenset({"--reference", "--from", "--iterations", "--size", "--random-source"}))
        flags = {option for option, _ in options}
        if name in ("chmod", "chown", "chgrp") and not any(option == "--reference" for option, _ in options):
            operands = operands[1:]  # the mode, owner or group
        for operand in operands:
            self._write(operand, scope, f"runs `{name}`, which changes")

    def _extractor(self, call: _Call, scope: _Scope) -> None:
        """tar, unzip, 7z, cpio, patch: they write into a directory, all below it."""
        name = call.name or ""
        what = f"runs `{name}`, which writes"
        args = call.args[1:]
        if name in ("tar", "bsdtar", "gtar"):
            self._tar(args, scope, what)
        elif name == "unzip":
            options, operands = _options(args, "dxX", frozenset())
            flags = {option for option, _ in options}
            if flags & {"-l", "-t", "-v", "-p", "-c", "-z", "-Z"}:
                return
            target = next((value for option, value in options if option == "-d" and value is not None), _Arg((".",), "."))
            self._write(target, scope, what, tree=True)
        elif name in ("7z", "7za", "7zr", "7zz"):
            operands = [arg for arg in args if not arg.text.startswith("-")]
            verb = operands[0].text if operands else ""
            if verb in ("x", "e"):
                output = next((_Arg((arg.text[2:],), arg.source) for arg in args if arg.text.startswith("-o")), _Arg((".",), "."))
                self._write(output, scope, what, tree=True)
            elif verb not in ("l", "t", "i", "h") and len(operands) > 1:
                self._write(operands[1], scope, what)
        elif name == "cpio":
            options, _ = _options(args, "DEFHIMORV", frozenset({"--directory", "--file", "--format"}))
            flags = {option for option, _ in options}
            if flags & {"-i", "--extract", "-p", "--pass-through"}:
                directory = next((value for option, value in options if option in ("-D", "--directory") and value is not None), _Arg((".",), "."))
                self._write(directory, scope, what, tree=True)
            for option, value in options:
                if option in ("-F", "-O", "--file") and value is not None and flags & {"-o", "--create"}:
                    self._write(value, scope, what)
        else:  # patch
            options, operands = _options(args, "dioprBDFVYzg", frozenset({"--directory", "--input", "--output", "--strip", "--reject-file", "--prefix", "--suffix"}))
            directory = next((value for option, value in options if option in ("-d", "--directory") and value is not None), _Arg((".",), "."))
            for option, value in options:
                if option in ("-o", "--output", "-r", "--reject-file") and value is not None:
                    self._write(value, scope, what)
            if operands:
                self._write(operands[0], scope, what)
            self._write(directory, scope, what, tree=True)

    def _tar(self, args: list[_Arg], scope: _Scope, what: str) -> None:
        if args and not args[0].text.startswith("-") and args[0].text:
            letters, rest = args[0].text, args[1:]  # old style: tar xf FILE
            expanded: list[_Arg] = []
            for letter in letters:
                expanded.append(_Arg((f"-{letter}",), args[0].source))
                if letter in "fCbTXNVgKLHIF" and rest:
                    expanded.append(rest.pop(0))
            args = expanded + rest
        options, _ = _options(
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
                self._write(value, scope, what)
            elif option in ("-g", "--listed-incremental"):
                self._write(value, scope, what)
        if extracts:
            directories = [value for option, value in options if option in ("-C", "--directory") and value is not None]
            for directory in directories or [_Arg((".",), ".")]:
                self._write(directory, scope, what, tree=True)

    def _output_reader(self, call: _Call, scope: _Scope) -> None:
        """A reader with an output option (sort -o, uniq IN OUT, tree -o, xxd IN OUT...)."""
        name = call.name or ""
        values, long_values, written, operand = _OUTPUT_READERS[name]
        options, operands = _options(call.args[1:], values, long_values)
        what = f"runs `{name}`, which writes"
        for option, value in options:
            if option in written and value is not None:
                self._write(value, scope, what)
        if operand is not None and len(operands) > operand:
            self._write(operands[operand], scope, what)
        if name == "yq" and any(option in ("-i", "--inplace") for option, _ in options):
            for target in operands[1:]:
                self._write(target, scope, what)

    def _sed(self, call: _Call, scope: _Scope) -> None:
        options, operands = _options(call.args[1:], "efl", frozenset({"--expression", "--file", "--line-length"}))
        scripts = [value for option, value in options if option in ("-e", "--expression") and value is not None]
        has_file = any(option in ("-f", "--file") for option, _ in options)
        if not scripts and not has_file and operands:
            scripts, operands = [operands[0]], operands[1:]
        if any(option == "-i" or option.startswith("--in-place") for option, _ in options):
            for operand in operands:
                self._write(operand, scope, "runs `sed -i`, which rewrites")
        writing = [script for script in scripts if any(_SED_WRITES.search(alt) for alt in script.alts)]
        if writing or has_file:
            self._not_in_a_place("sed", scope)
            self._scan(writing, scope, "sed")

    def _awk(self, call: _Call, scope: _Scope) -> None:
        name = call.name or "awk"
        options, operands = _options(call.args[1:], "fFvEil", frozenset({"--file", "--field-separator", "--assign", "--include", "--load", "--source", "--exec"}))
        inplace = any(option in ("-i", "--include") and value is not None and value.text == "inplace" for option, value in options)
        programs = [value for option, value in options if option == "--source" and value is not None]
        if not any(option in ("-f", "--file", "-E", "--exec") for option, _ in options) and operands:
            programs, operands = [*programs, operands[0]], operands[1:]
        elif any(option in ("-f", "--file", "-E", "--exec") for option, _ in options):
            self._not_in_a_place(name, scope)
        if inplace:
            for operand in operands:
                self._write(operand, scope, f"runs `{name} -i inplace`, which rewrites")
        writing = [program for program in programs if any(_AWK_WRITES.search(alt) for alt in program.alts)]
        if writing:
            self._not_in_a_place(name, scope)
            self._scan(writing, scope, name)

    def _find(self, call: _Call, scope: _Scope) -> None:
        args = call.args[1:]
        index = 0
        while index < len(args) and args[index].text in ("-H", "-L", "-P") or index < len(args) and args[index].text.startswith(("-D", "-O")):
            index += 2 if args[index].text == "-D" else 1
        starts: list[_Arg] = []
        while index < len(args) and not args[index].text.startswith(("-", "(", "!", ",")) and args[index].text != ")":
            starts.append(args[index])
            index += 1
        starts = starts or [_Arg((".",), ".")]
        while index < len(args):
            word = args[index].text
            index += 1
            if word == "-delete":
                for start in starts:
                    self._write(start, scope, "runs `find -delete`, which removes", tree=True)
            elif word in ("-fprint", "-fprint0", "-fls", "-fprintf") and index < len(args):
                self._write(args[index], scope, f"runs `find {word}`, which writes")
                index += 2 if word == "-fprintf" else 1
            elif word in ("-exec", "-execdir", "-ok", "-okdir"):
                end = index
                while end < len(args) and args[end].text not in (";", "+"):
                    end += 1
                below = tuple(f"{alt.rstrip('/')}/{_MARK}" for start in starts for alt in start.alts)
                globbed = any(start.globbed for start in starts)
                inner = [
                    _Arg(tuple(dict.fromkeys(alt.replace("{}", found) for alt in arg.alts for found in below))[:MAX_PATHS], arg.source, arg.globbed or globbed)
                    if "{}" in arg.text else arg
                    for arg in args[index:end]
                ]
                index = end + 1
                if inner:
                    self._call(_Call(_program(inner[0]), inner, {}, None), scope)

    def _xargs(self, call: _Call, scope: _Scope) -> None:
        args = call.args[1:]
        options, rest = _options(args, "adEeIiLlnPs", frozenset({"--arg-file", "--delimiter", "--eof", "--replace", "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"}), stop=True)
        replace = next((value.text for option, value in options if option in ("-I", "--replace", "-i") and value is not None), None)
        if any(option in ("-i", "--replace") and value is None for option, value in options):
            replace = "{}"
        listed = next((value for option, value in options if option in ("-a", "--arg-file") and value is not None), None)
        text = self._input(call, scope) if listed is None else self._known_file_text(listed, scope)
        if text is not None:
            produced = _Arg(tuple(dict.fromkeys(text.split()))[:MAX_PATHS] or ("",), "(the words it reads)")
        elif listed is not None or not scope.pipeline:
            produced = _Arg((_MARK,), "(the words it reads)")
        else:
            produced = self._produced(scope)
        inner = list(rest) or [_Arg(("echo",), "echo")]
        if replace is not None:
            inner = [_Arg(tuple(alt.replace(replace, value) for alt in arg.alts for value in produced.alts)[:MAX_PATHS], arg.source) if any(replace in alt for alt in arg.alts) else arg for arg in inner]
        else:
            inner = [*inner, produced]
        self._call(_Call(_program(inner[0]), inner, {}, None), scope)

    def _produced(self, scope: _Scope) -> _Arg:
        """What the earlier stages of the pipeline print, as the words a consumer gets."""
        output = _pipeline_output(scope.pipeline, self, scope)
        if output is not None:
            printed = tuple(dict.fromkeys(output.split()))[:MAX_PATHS] or ("",)
            return _Arg(printed, "(the pipe's words)")
        words = [alt for _, args, _ in scope.pipeline for arg in args[1:] for alt in arg.alts]
        below = [f"{word.rstrip('/')}/{_MARK}" for word in words if "/" in word or word in (".", "~")]
        return _Arg(tuple(dict.fromkeys([*words, *below, _MARK]))[:MAX_PATHS], "(the pipe's words)", True)

    def _git(self, call: _Call, scope: _Scope) -> None:
        args = call.args[1:]
        repository = _Arg((".",), ".")
        index = 0
        while index < len(args):
            word = args[index].text
            if word == "-C" and index + 1 < len(args):
                repository = _joined_path(repository, args[index + 1])
                index += 2
            elif word in ("-c", "--config-env", "--exec-path", "--namespace") and index + 1 < len(args):
                index += 2
            elif word.startswith(("--git-dir=", "--work-tree=")):
                self._write(_Arg((word.split("=", 1)[1],), args[index].source), scope, "runs `git` on")
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
                    self._write(_Arg((arg.text.split("=", 1)[1],), arg.source), scope, what)
                elif arg.text in ("--output", "-o") and verb in ("diff", "log", "show", "format-patch") and position + 1 < len(rest):
                    self._write(rest[position + 1], scope, what)
            return
        options, operands = _options(rest, "mFCctSbjoBu", frozenset(_GIT_TEXT_OPTIONS))
        in_repository = _Scope(self._directories_of(repository, scope) or (_UNKNOWN_DIRECTORY,))
        if verb == "clone":
            if len(operands) >= 2:
                self._write(operands[1], in_repository, what)
            elif operands:
                name = operands[0].text.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
                self._write(_Arg((name[:-4] if name.endswith(".git") else name,), operands[0].source), in_repository, what)
            return
        if verb == "init":
            self._write(operands[0] if operands else _Arg((".",), "."), in_repository, what)
            return
        self._not_in_a_place(f"git {verb}", in_repository)
        for option, value in options:
            if value is not None and option in ("-o", "--output", "--file") and verb in ("config", "archive", "bundle", "format-patch"):
                self._write(value, in_repository, what)
        for operand in operands:
            self._write(operand, in_repository, what, strict=False)

    def _hookbus(self, call: _Call, scope: _Scope) -> None:
        self._hookbus_args(call.args[1:], scope)

    def _hookbus_args(self, args: Sequence[_Arg], scope: _Scope) -> None:
        index = 0
        while index < len(args) and args[index].text.startswith("-"):
            index += 2 if args[index].text == "--home" else 1
        if index >= len(args):
            return
        verb = args[index].text
        if verb in ("install", "import"):
            raise _Deny(f"the bash command runs `hookbus {verb}`, which writes hooks into the hookbus home")
        if verb != "new":
            return
        rest = list(args[index + 1 :])
        directory: _Arg | None = None
        for position, arg in enumerate(rest):
            key, equals, value = arg.text.partition("=")
            if len(key) >= 3 and "--dir".startswith(key):
                if equals:
                    directory = _Arg((value or ".",), arg.source)
                elif position + 1 < len(rest):
                    directory = rest[position + 1]
        if directory is None:
            raise _Deny("the bash command runs `hookbus new` without --dir, which writes hooks into the hookbus home")
        self._write(directory, scope, "runs `hookbus new --dir`, which writes into", tree=False)
        operands = [arg for arg in rest if not arg.text.startswith("-")]
        for operand in operands[:1]:
            self._write(_joined(directory, operand), scope, "runs `hookbus new --dir`, which writes into")

    def _python(self, call: _Call, scope: _Scope) -> None:
        args = call.args[1:]
        index = 0
        while index < len(args):
            word = args[index].text
            if word == "-m" and index + 1 < len(args):
                module, rest = args[index + 1].text, args[index + 2 :]
                if module == "hookbus":
                    self._hookbus_args(rest, scope)
                    return
                if module == "json.tool":
                    operands = [arg for arg in rest if not arg.text.startswith("-")]
                    if len(operands) > 1:
                        self._write(operands[1], scope, "runs `python -m json.tool`, which writes")
                    return
                break
            if word in ("-c", "-W", "-X", "-Q") or not word.startswith("-"):
                break
            index += 1
        self._unknown(call, scope)

    # -- programs that run other commands ----------------------------------------------------------

    def _wrapper(self, call: _Call, scope: _Scope) -> None:
        """sudo, env, nohup, timeout, nice...: judged by the command they run."""
        name = call.name or ""
        values, long_values, skip = _WRAPPERS[name]
        options, rest = _options(call.args[1:], values, long_values, stop=True)
        flags = {option for option, _ in options}
        inner_scope = scope
        for option, value in options:
            if value is None:
                continue
            if option in ("-C", "--chdir", "-D") and name in ("env", "sudo"):
                inner_scope = _Scope(self._directories_of(value, scope) or (_UNKNOWN_DIRECTORY,), dict(scope.variables), repeats=scope.repeats)
            elif option in ("-o", "--output") and name == "time":
                self._write(value, scope, "runs `time -o`, which writes")
            elif option in ("-S", "--split-string") and name == "env":
                self._script(" ".join([value.text, *(arg.text for arg in rest)]), scope)
                return
        if name == "command" and flags & {"-v", "-V"}:
            return
        if name in ("sudo", "sudoedit") and (flags & {"-e", "--edit"} or name == "sudoedit"):
            for arg in rest:
                self._write(arg, scope, "runs `sudoedit`, which writes")
            return
        if name == "env":
            while rest and _assignment(rest[0].text):
                rest = rest[1:]
        if name == "flock" and rest:
            self._write(rest[0], scope, "runs `flock`, which creates")
            rest = rest[1:]
            command = next((value for option, value in options if option in ("-c", "--command") and value is not None), None)
            if command is not None:
                self._code(command, scope, "flock -c")
                return
        if name == "chroot" and rest:
            self._write(rest[0], scope, "runs `chroot` in", tree=rest[0].text not in ("/", ""))
            return
        rest = rest[skip:]
        if rest:
            self._call(_Call(_program(rest[0]), list(rest), {}, call.stdin, call.stdin_file), inner_scope)

    def _runner(self, call: _Call, scope: _Scope) -> None:
        """uv run, uvx, pipx run, poetry run, npx...: the command after their options."""
        args = call.args[1:]
        if call.name in ("uv", "pipx", "poetry", "pdm", "pnpm", "conda", "bundle"):
            if not args or args[0].text not in ("run", "exec", "dlx", "x"):
                self._unknown(call, scope)
                return
            args = args[1:]
        rest = [arg for arg in args]
        while rest and rest[0].text.startswith("-"):
            rest = rest[1:]
        if rest:
            self._call(_Call(_program(rest[0]), rest, {}, call.stdin, call.stdin_file), scope)

    def _shell(self, call: _Call, scope: _Scope) -> None:
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
                self._code(rest[0], scope, f"{what} -c", positional=rest[1:])
            return
        if rest and mode != "s":
            self._run_script_file(rest[0], call, scope, positional=rest)
            return
        self._standard_input(call, scope, what)

    def _standard_input(self, call: _Call, scope: _Scope, what: str) -> None:
        """A shell's commands from a here-document, a here-string, a file or a pipe."""
        text = self._input(call, scope)
        if text is not None:
            self._script_or_scan(text, scope, what)
            return
        if scope.pipeline:
            output = _pipeline_output(scope.pipeline, self, scope)
            if output is not None:
                self._script_or_scan(output, scope, what)
            else:
                self._scan([arg for _, args, _ in scope.pipeline for arg in args[1:]], scope, what)

    def _input(self, call: _Call, scope: _Scope) -> str | None:
        """What ``call`` reads on standard input, when the guard can have it."""
        if call.stdin is not None:
            return call.stdin
        return self._known_file_text(call.stdin_file, scope) if call.stdin_file is not None else None

    def _script_or_scan(self, text: str, scope: _Scope, what: str) -> None:
        try:
            self._script(text, scope)
        except _Unreadable:
            self._scan_text(text, scope, what)

    def _code(self, code: _Arg, scope: _Scope, what: str, *, positional: Sequence[_Arg] = (), same_shell: bool = False) -> None:
        """Bash code given as a word (``bash -c``, ``eval``, ``trap``): each value it may
        have, read; refused when the guard cannot know it."""
        for alt in code.alts:
            if _MARK in alt:
                raise _Deny(f"the bash command runs `{what}` on {_shown(code.source)}, which the guard cannot read")
            self._script(alt, scope, same_shell=same_shell, positional=positional)

    def _eval(self, call: _Call, scope: _Scope) -> None:
        words = call.args[1:]
        if not words:
            return
        joined = _Arg(tuple(" ".join(combination) for combination in _combinations([arg.alts for arg in words])), " ".join(arg.source for arg in words))
        self._code(joined, scope, "eval", same_shell=True)

    def _source(self, call: _Call, scope: _Scope) -> None:
        if len(call.args) > 1:
            self._run_script_file(call.args[1], call, scope, positional=call.args[1:], same_shell=True)

    def _trap(self, call: _Call, scope: _Scope) -> None:
        operands = [arg for arg in call.args[1:] if arg.text not in ("-p", "-l", "--")]
        if len(operands) >= 2 and operands[0].text != "-":
            self._code(operands[0], scope, "trap")

    def _alias(self, call: _Call, scope: _Scope) -> None:
        for arg in call.args[1:]:
            if "=" in arg.text:
                self._code(_Arg(tuple(alt.split("=", 1)[1] for alt in arg.alts), arg.source), scope, "alias")

    def _watch(self, call: _Call, scope: _Scope) -> None:
        options, rest = _options(call.args[1:], "nqd", frozenset({"--interval", "--differences", "--equexit"}), stop=True)
        if rest:
            if any(option in ("-x", "--exec") for option, _ in options):
                self._call(_Call(_program(rest[0]), list(rest), {}, None), scope)
            else:
                self._code(_Arg((" ".join(arg.text for arg in rest),), " ".join(arg.source for arg in rest)), scope, "watch")

    def _su(self, call: _Call, scope: _Scope) -> None:
        options, rest = _options(call.args[1:], "cgGsuw", frozenset({"--command", "--group", "--supp-group", "--shell", "--user", "--whitelist-environment", "--session-command"}))
        command = next((value for option, value in options if option in ("-c", "--command", "--session-command") and value is not None), None)
        if command is not None:
            self._code(command, scope, f"{call.name} -c")
        elif call.name == "runuser" and rest:
            self._call(_Call(_program(rest[0]), list(rest), {}, call.stdin, call.stdin_file), scope)
        else:
            self._standard_input(call, scope, call.name or "su")

    # -- the shell's own state ------------------------------------------------------------------

    def _cd(self, call: _Call, scope: _Scope) -> None:
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
            scope.pending = _directories(tuple(scope.seen) + scope.cwds + (() if scope.seen else (_UNKNOWN_DIRECTORY,)))
            return
        if args and args[0].text == "-":
            scope.pending = _directories(tuple(scope.seen)) if scope.seen else (_UNKNOWN_DIRECTORY,)
            return
        target = args[0] if args else _Arg(self._variable_values("HOME", scope), "$HOME")
        cdpath = call.env.get("CDPATH") or scope.variables.get("CDPATH") or ((os.environ["CDPATH"],) if os.environ.get("CDPATH") else ())
        went: list[_Directory] = []
        for alt in target.alts:
            for cwd in scope.cwds:
                went.extend(self._changed_directory(alt, cwd, physical, target.globbed, cdpath, scope))
        scope.pending = _directories(tuple(went))
        scope.seen.extend(scope.pending)

    def _changed_directory(self, value: str, cwd: _Directory, physical: bool, globbed: bool, cdpath: Sequence[str], scope: _Scope) -> list[_Directory]:
        if _MARK in value or globbed and _GLOB_CHARS.search(value) or value == _OVERFLOW:
            return [_UNKNOWN_DIRECTORY]
        if not value:
            return [cwd]
        relative = not value.startswith("/")
        if relative and cwd.logical is None:
            return [_UNKNOWN_DIRECTORY]
        if scope.repeats and relative:
            return [_UNKNOWN_DIRECTORY]  # a loop or a function may run it from elsewhere
        bases: list[str] = []
        if relative and not value.startswith(("./", "../")) and value not in (".", ".."):
            for paths in cdpath:
                bases.extend(entry for entry in paths.split(":") if entry)
        found: list[_Directory] = []
        for base in [*bases, None]:
            if base is None:
                start = cwd.physical if physical else cwd.logical
            else:
                start = base if base.startswith("/") else f"{(cwd.logical or '').rstrip('/')}/{base}"
            if relative and start is None:
                continue
            logical = value if not relative or start is None else f"{start.rstrip('/')}/{value}"
            if not physical:
                logical = _lexical(logical)
            found.append(self._directory(logical, cwd, physical))
            if not physical and base is None and cwd.physical is not None and relative:
                walked = found[-1]
                if walked.physical is not None and _lstat(walked.physical, self.cache) is None:
                    found.append(self._directory(f"{cwd.physical.rstrip('/')}/{value}", cwd, True))
        return found

    def _directory(self, path: str, cwd: _Directory, physical: bool) -> _Directory:
        """Where ``cd`` to ``path`` goes: ``physical`` (``cd -P``), $PWD is where it lands."""
        try:
            walked = self.guard._walk(path, cwd.physical, self.links, self.cache)
        except (_Unreadable, OSError, ValueError, RuntimeError):
            return _UNKNOWN_DIRECTORY
        return _Directory(walked.path if physical else path, walked.path, self.guard._root_of(walked.path) or walked.through)

    def _directories_of(self, arg: _Arg, scope: _Scope) -> tuple[_Directory, ...]:
        found: list[_Directory] = []
        for alt in arg.alts:
            for cwd in scope.cwds:
                found.extend(self._changed_directory(alt, cwd, True, arg.globbed, (), _Scope(scope.cwds)))
        return _directories(tuple(found))

    def _assign(self, call: _Call, scope: _Scope) -> None:
        """export, declare, local, readonly, typeset: the assignments among their words."""
        for arg in call.args[1:]:
            found = _assignment(arg.text)
            if found is not None:
                scope.variables[found.group(1)] = tuple(_after_equals(alt) for alt in arg.alts)
        scope.variables.update(call.env)

    def _read(self, call: _Call, scope: _Scope) -> None:
        options, names = _options(call.args[1:], "adinNptu", frozenset())
        targets = [value.text for option, value in options if option == "-a" and value is not None] + [arg.text for arg in names]
        text = self._input(call, scope)
        if text is None and not scope.pipeline:
            text = scope.loop_input
        if text is not None:
            values = tuple(dict.fromkeys(text.split()))[:MAX_PATHS] or ("",)
        elif scope.pipeline:
            values = self._produced(scope).alts
        else:
            values = (_MARK,)
        for name in targets or ["REPLY"]:
            scope.variables[name] = tuple(dict.fromkeys((*values, _MARK)))

    def _unknown_value(self, call: _Call, scope: _Scope) -> None:
        """mapfile, printf -v, getopts: variables they set to what the guard cannot know."""
        options, operands = _options(call.args[1:], "vdnOsuCc", frozenset())
        for option, value in options:
            if option == "-v" and value is not None:
                scope.variables[value.text] = (_MARK,)
        if call.name in ("mapfile", "readarray"):
            scope.variables[operands[-1].text if operands else "MAPFILE"] = self._produced(scope).alts if scope.pipeline else (_MARK,)

    def _set(self, call: _Call, scope: _Scope) -> None:
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
        scope.variables["@"] = scope.variables["*"] = _flatten(positional)[:_MAX_ALTERNATIVES]

    def _unset(self, call: _Call, scope: _Scope) -> None:
        for arg in call.args[1:]:
            scope.variables.pop(arg.text, None)

    # -- scripts ----------------------------------------------------------------------------------

    def _run_script_file(self, script: _Arg, call: _Call, scope: _Scope, *, positional: Sequence[_Arg] = (), same_shell: bool = False) -> None:
        """``bash FILE``, ``source FILE``, ``./FILE``: the script's commands, when the guard
        can have them (written earlier in the command, a process substitution's output, or
        a file on disk that starts as a shell script)."""
        if script.text in ("/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "-"):
            self._standard_input(call, scope if same_shell else scope.child(), call.name or "source")
            return
        text = self._known_file_text(script, scope, shell_only=call.name not in _SHELLS | {"source", "."})
        if text is not None:
            self._script_or_scan(text, scope if same_shell else scope.child(), f"the script {_shown(script.source)}")

    def _known_file_text(self, arg: _Arg, scope: _Scope, shell_only: bool = False) -> str | None:
        if len(arg.alts) != 1 or _MARK in arg.text:
            return None
        if arg.text in self.substituted:
            return self.substituted[arg.text]
        for cwd in scope.cwds:
            if cwd.physical is None and not arg.text.startswith("/"):
                continue
            absolute = arg.text if arg.text.startswith("/") else f"{(cwd.physical or '').rstrip('/')}/{arg.text}"
            try:
                path = self.guard._walk(absolute, cwd.physical, self.links, self.cache).path
            except (_Unreadable, OSError, ValueError, RuntimeError):
                continue
            if path in self.written:
                return self.written[path]
            text = _read_script(path)
            if text is not None and (not shell_only or _SHELL_SCRIPT.match(text)):
                return text
        return None

    def _file_text(self, target: _Arg, scope: _Scope) -> str | None:
        """What a ``< FILE`` feeds, when the command wrote FILE itself."""
        if len(target.alts) != 1 or _MARK in target.text:
            return None
        for cwd in scope.cwds:
            if cwd.physical is None and not target.text.startswith("/"):
                continue
            absolute = target.text if target.text.startswith("/") else f"{(cwd.physical or '').rstrip('/')}/{target.text}"
            try:
                path = self.guard._walk(absolute, cwd.physical, self.links, self.cache).path
            except (_Unreadable, OSError, ValueError, RuntimeError):
                continue
            if path in self.written:
                return self.written[path]
        return None

    def _remember_written(self, target: _Arg, call: _Call, scope: _Scope) -> None:
        if len(target.alts) != 1 or _MARK in target.text or len(self.written) >= MAX_PATHS:
            return
        output = _output(call.name, call.args, call.stdin, self)
        if output is None:
            return  # what the file then holds is not known: a later read of it goes to disk
        for cwd in scope.cwds:
            if cwd.physical is None and not target.text.startswith("/"):
                continue
            absolute = target.text if target.text.startswith("/") else f"{(cwd.physical or '').rstrip('/')}/{target.text}"
            try:
                path = self.guard._walk(absolute, cwd.physical, self.links, self.cache).path
            except (_Unreadable, OSError, ValueError, RuntimeError):
                continue
            self.written[path] = output

    def _remember_links(self, destination: _Arg, sources: Sequence[_Arg], scope: _Scope) -> None:
        if len(destination.alts) != 1 or _MARK in destination.text or len(sources) != 1 or len(sources[0].alts) != 1:
            return
        target = sources[0].text
        for cwd in scope.cwds:
            if cwd.physical is None:
                continue
            absolute = destination.text if destination.text.startswith("/") else f"{cwd.physical.rstrip('/')}/{destination.text}"
            try:
                where = self.guard._walk(absolute, cwd.physical, self.links, self.cache)
            except (_Unreadable, OSError, ValueError, RuntimeError):
                continue
            if where.stat is not None and stat.S_ISDIR(where.stat.st_mode):
                where = _Walked(f"{where.path.rstrip('/')}/{target.rstrip('/').rsplit('/', 1)[-1]}", None, None)
            if len(self.links) < MAX_PATHS:
                self.links[where.path] = target

    # -- what is written ----------------------------------------------------------------------------

    def _write(self, arg: _Arg, scope: _Scope, how: str, *, tree: bool = False, strict: bool = True, streams: bool = False) -> None:
        """Refuse when ``arg``, written by the command (``how``: "redirects output to",
        "runs `cp`, which writes"...), lands in a place: with ``tree``, anywhere below it
        too; not ``strict`` (an unknown program's argument, which may be no path), a bare
        word in an unknown directory is let go."""
        for value in arg.alts:
            if value == _OVERFLOW:
                raise _Deny(f"the bash command {how} {_shown(arg.source)}, which can be more paths than the guard checks")
            for cwd in scope.cwds:
                self._write_value(value, arg, cwd, how, tree, strict, streams)

    def _write_value(self, value: str, arg: _Arg, cwd: _Directory, how: str, tree: bool, strict: bool, streams: bool) -> None:
        if _MARK in value:
            self._write_unknown(value, arg, cwd, how, tree, strict)
            return
        if not value or value in self.substituted:
            return
        if value.startswith("/"):
            absolute = value
        elif cwd.physical is None:
            if strict or "/" in value or value.startswith("."):
                raise _Deny(f"the bash command {how} {_shown(arg.source)}, a relative path in a directory the guard cannot tell (after a cd it cannot follow)")
            return
        else:
            absolute = f"{cwd.physical.rstrip('/')}/{value}"
        if len(absolute) > _PATH_MAX:
            return
        key = (absolute, cwd.physical, tree)
        if key in self.resolved:
            return
        self.resolved.add(key)
        if len(self.resolved) > MAX_PATHS:
            raise _Deny(f"the bash command names more than {MAX_PATHS} paths: too many to check")
        if "/" not in value and value not in ("..", ".") and cwd.physical is not None:
            # A name in the working directory (already walked): one lstat says whether it
            # is a link to follow; else it lands as named.
            info = _lstat(absolute, self.cache)
            if (info is None or not stat.S_ISLNK(info.st_mode)) and absolute not in self.links:
                walked = _Walked(absolute, cwd.root, info)
                self._judge(walked, value, arg, cwd, how, tree, strict, absolute)
                return
        try:
            walked = self.guard._walk(absolute, cwd.physical, self.links, self.cache)
        except _Unreadable as unreadable:
            if streams and unreadable.descriptor in (0, 1, 2) or unreadable.descriptor is not None and f"/dev/fd/{unreadable.descriptor}" in self.substituted:
                return
            raise _Deny(f"the bash command {how} {_shown(arg.source)}, which the guard cannot read as the writer would: {unreadable.why}") from None
        except (OSError, ValueError, RuntimeError):
            raise _Deny(f"the bash command {how} {_shown(arg.source)}, which the guard cannot resolve") from None
        self._judge(walked, value, arg, cwd, how, tree, strict, absolute)

    def _judge(self, walked: _Walked, value: str, arg: _Arg, cwd: _Directory, how: str, tree: bool, strict: bool, absolute: str) -> None:
        """Refuse a write that ``walked`` shows lands in a place (or, ``tree``, above one)."""
        which = "" if walked.path == arg.source else f", which is {_shown(walked.path)}"
        root = self.guard._root_of(walked.path) or walked.through
        if root is not None:
            raise _Deny(f"the bash command {how} {_shown(arg.source)}{which}, inside {root.place.label} {root.place.path}")
        if tree:
            root = self.guard._above(walked.path)
            if root is not None:
                raise _Deny(f"the bash command {how} everything in {_shown(arg.source)}{which}, which holds {root.place.label} {root.place.path}")
        if arg.globbed and _GLOB_CHARS.search(value) is not None:
            for match in self._glob(absolute, cwd):
                self._write_value(match, _Arg((match,), arg.source), cwd, how, tree, strict, True)
            root = self.guard._glob_root(absolute, self.dotglob, cwd.physical, tree)
            if root is not None:
                raise _Deny(f"the bash command {how} the pattern {_shown(arg.source)}, which can name {root.place.label} {root.place.path}")
        if strict and _hard_linked(walked, self.guard._devices):
            raise _Deny(f"the bash command {how} {_shown(arg.source)}{which}, a file with another name (a hard link) that may be inside {self.guard._roots[0].place.label}")

    def _glob(self, pattern: str, cwd: _Directory) -> list[str]:
        """What bash expands the absolute ``pattern`` to, listing directories as the writer
        would (through links, /proc read as the writer's); [] when nothing matches or the
        listing goes past its bound (the pattern is then matched against the places' names
        alone)."""
        paths = ["/"]
        for component in pattern.split("/"):
            if component in ("", "."):
                continue
            if _GLOB_CHARS.search(component) is None:
                paths = [f"{path.rstrip('/')}/{component}" for path in paths]
                continue
            found: list[str] = []
            for path in paths:
                try:
                    directory = self.guard._walk(path, cwd.physical, self.links, self.cache).path
                    with os.scandir(directory) as entries:
                        for entry in entries:
                            self.listed += 1
                            if self.listed > _MAX_LISTED:
                                return []
                            if _component_matches(component, entry.name, self.dotglob):
                                found.append(f"{directory.rstrip('/')}/{entry.name}")
                except (_Unreadable, OSError, ValueError, RuntimeError):
                    continue
            paths = found[:MAX_PATHS]
            if not paths:
                return []
        return paths

    def _write_unknown(self, value: str, arg: _Arg, cwd: _Directory, how: str, tree: bool, strict: bool) -> None:
        """A target built at run time: refused when the text around what is unknown puts
        it in a place (see the module's docstring)."""
        pieces = value.split(_MARK)
        for piece in pieces:
            for name, pattern, place in self.guard._dot_names:
                if pattern.search(piece) is not None:
                    raise _Deny(f"the bash command {how} {_shown(arg.source)}, a path built at run time with {name} in it: {place.label} {place.path}")
        head = pieces[0]
        if "/" not in head:
            if not strict:
                return
            if cwd.physical is None:
                raise _Deny(f"the bash command {how} {_shown(arg.source)}, a path built at run time in a directory the guard cannot tell")
            root = cwd.root or self.guard._above(cwd.physical)
            if root is not None:
                raise _Deny(f"the bash command {how} {_shown(arg.source)}, a path built at run time in {_shown(cwd.logical or '')}, which is or holds {root.place.label} {root.place.path}")
            return
        directory = head.rsplit("/", 1)[0] or "/"
        if not directory.startswith("/"):
            if cwd.physical is None:
                if strict:
                    raise _Deny(f"the bash command {how} {_shown(arg.source)}, a path built at run time in a directory the guard cannot tell")
                return
            directory = f"{cwd.physical.rstrip('/')}/{directory}"
        try:
            walked = self.guard._walk(directory, cwd.physical, self.links, self.cache)
        except (_Unreadable, OSError, ValueError, RuntimeError):
            raise _Deny(f"the bash command {how} {_shown(arg.source)}, a path built at run time the guard cannot read") from None
        if walked.path == "/proc" or walked.path.startswith("/proc/"):
            raise _Deny(f"the bash command {how} {_shown(arg.source)}, a /proc path built at run time, which the guard cannot read as the writer would")
        root = self.guard._root_of(walked.path) or walked.through or self.guard._above(walked.path)
        if root is not None:
            raise _Deny(f"the bash command {how} {_shown(arg.source)}, a path built at run time in {_shown(walked.path)}, which is or holds {root.place.label} {root.place.path}")

    # -- text that is not bash ----------------------------------------------------------------------

    def _scan(self, args: Sequence[_Arg], scope: _Scope, what: str) -> None:
        text = "\n".join(alt.replace(_MARK, " ") for arg in args for alt in arg.alts)
        if text:
            self._scan_text(text, scope, f"`{what}`")

    def _scan_text(self, text: str, scope: _Scope, what: str) -> None:
        """Code or text a program is given (python -c, a sed script, what a pipe feeds a
        shell): it names a place, runs hookbus install, or holds a path that lands in one."""
        unquoted = text.translate(_UNQUOTE)
        for form in (text, unquoted) if unquoted != text else (text,):
            named = self.guard._named(form)
            if named is not None:
                raise _Deny(f"the bash command gives {what} text that {named}")
        if "hookbus" in unquoted:
            running = _hookbus_writes(unquoted)
            if running is not None:
                raise _Deny(f"the bash command gives {what} text that {running}")
        for count, word in enumerate(_path_words(unquoted)):
            if count >= MAX_WORDS:
                raise _Deny(f"the bash command gives {what} more than {MAX_WORDS} paths: too many to check")
            for candidate in _candidates(word):
                if not _path_like(candidate) or len(candidate) > _PATH_MAX:
                    continue
                for cwd in scope.cwds:
                    absolute = _expanded(candidate, cwd.logical)
                    if absolute is None:
                        raise _Deny(f"the bash command gives {what} the relative path {_shown(candidate)}, in a directory the guard cannot tell")
                    self._write_value(absolute, _Arg((absolute,), candidate, bool(_GLOB_CHARS.search(candidate))), cwd, f"gives {what} the path", False, True, True)

    # -- expansion ------------------------------------------------------------------------------------

    def _expand(self, word: _Word, scope: _Scope, assignment: bool = False) -> _Arg:
        """The values ``word`` may have once bash expands it (substitutions run, and are
        judged, here)."""
        if len(word.parts) == 1 and not assignment:
            only = word.parts[0]
            if isinstance(only, _Lit) and (only.quoted or not _EXPANDS.search(only.text)):
                return _Arg((only.text,), word.source)  # most words: a literal, as it is
        alts: list[str] = [""]
        globbed = False
        overflow = False
        for index, part in enumerate(word.parts):
            if isinstance(part, _Lit):
                text = part.text
                if not part.quoted:
                    if index == 0:
                        text = self._tilde(text, word, scope, assignment)
                    if _GLOB_CHARS.search(text) is not None:
                        globbed = True
                values: tuple[str, ...] = (text,)
            elif isinstance(part, _Var):
                values = self._parameter(part, scope)
            elif isinstance(part, _Sub):
                values, from_glob = self._substitution(part, scope)
                globbed = globbed or from_glob
            else:
                for sub in part.subs:
                    self._substitution(sub, scope)
                values = ("0",)
            combined = [alt + value for alt in alts for value in values]
            if len(combined) > _MAX_ALTERNATIVES:
                overflow = True
                combined = combined[:_MAX_ALTERNATIVES]
            alts = combined
        if globbed and any("{" in alt and "," in alt for alt in alts):
            alts = self._braces(alts, word, scope)
        result = tuple(dict.fromkeys(alts))
        if overflow or len(result) > _MAX_ALTERNATIVES:
            result = (*result[:_MAX_ALTERNATIVES], _OVERFLOW)
        return _Arg(result, word.source, globbed)

    def _braces(self, alts: list[str], word: _Word, scope: _Scope) -> list[str]:
        """Bash expands braces before tildes: ``{~/.vix/x,/tmp/y}`` is two words, the first
        ``$HOME/.vix/x``. Each value's brace words, each tilde expanded; a pattern kept as it
        is when it expands to no words the guard reads (a sequence, too many)."""
        found: list[str] = []
        for alt in alts:
            words = _brace_words(alt) if len(alt) <= _MAX_GLOB else None
            if words is None:
                found.append(alt)
                continue
            found.append(alt)  # the pattern too: matched against the places' names
            for expanded in words:
                found.append(self._tilde(expanded, _Word((_Lit(expanded, False),), expanded), scope, False) if expanded.startswith("~") else expanded)
        return found

    def _tilde(self, text: str, word: _Word, scope: _Scope, assignment: bool) -> str:
        found = _assignment(text)
        if assignment or found is not None:
            if found is not None and text[found.end() :].startswith("~"):
                return text[: found.end()] + self._tilde(text[found.end() :], word, scope, False)
            return text
        if not text.startswith("~"):
            return text
        slash = text.find("/")
        if slash < 0 and len(word.parts) > 1:
            return text  # the prefix runs into a quoted part: bash leaves it alone
        prefix, rest = (text, "") if slash < 0 else (text[:slash], text[slash:])
        if prefix == "~":
            home = self._variable_values("HOME", scope)[0]
        elif prefix == "~+":
            home = self._variable_values("PWD", scope)[0]
        elif prefix == "~-":
            home = _MARK
        else:
            home = _expand_user(prefix)
            if home == prefix:
                return text
        return home + rest

    def _variable_values(self, name: str, scope: _Scope) -> tuple[str, ...]:
        found = self._lookup(name, scope)
        return found if found is not None else (_MARK,)

    def _lookup(self, name: str, scope: _Scope) -> tuple[str, ...] | None:
        if name in scope.variables:
            return scope.variables[name]
        if name == "HOME":
            return (os.path.expanduser("~"),)
        if name == "PWD":
            return tuple(dict.fromkeys(cwd.logical if cwd.logical is not None else _MARK for cwd in scope.cwds))
        if name in self.guard._variables:
            return (self.guard._variables[name],)
        return None

    def _parameter(self, part: _Var, scope: _Scope) -> tuple[str, ...]:
        argument = self._expand(part.arg, scope).alts if part.arg is not None else ("",)
        if part.prefix == "#":
            return ("0",)
        if part.prefix == "!" or part.op == "[":
            return (_MARK,)
        found = self._lookup(part.name, scope)
        op = part.op
        if op in (":-", "-", ":=", "="):
            if found is None:
                if op in (":=", "="):
                    scope.variables[part.name] = argument
                return (_MARK, *argument)
            if op.startswith(":") and any(not value for value in found):
                return tuple(dict.fromkeys([*(value for value in found if value), *argument]))
            return found
        if op in (":+", "+"):
            return ("", *argument) if found is None else (argument if any(found) else ("",))
        if op in (":?", "?"):
            return found if found is not None else (_MARK,)
        if op:
            return (_MARK,)
        return found if found is not None else (_MARK,)

    def _substitution(self, sub: _Sub, scope: _Scope) -> tuple[tuple[str, ...], bool]:
        """Run (judge) a substitution's commands; its value: what they print, when the guard
        can tell, else unknown, or one of the paths they name (``$(ls -d ~/.v*)``)."""
        inner = scope.child()
        self.budget.enter()
        try:
            self._items(sub.items, inner)
        finally:
            self.budget.leave()
        output = _pipeline_output(inner.pipeline, self, inner)
        if sub.kind in ("<(", ">("):
            path = f"/dev/fd/{63 + len(self.substituted)}"
            self.substituted[path] = output
            return (path,), False
        if output is not None:
            return (output.rstrip("\n"),), False
        named = [alt for _, args, _ in inner.pipeline for arg in args[1:] if not arg.text.startswith("-") for alt in arg.alts if _MARK not in alt]
        globbed = any(arg.globbed for _, args, _ in inner.pipeline for arg in args[1:])
        return tuple(dict.fromkeys([_MARK, *named]))[:_MAX_ALTERNATIVES], globbed


# -- what programs are -------------------------------------------------------------------------------

_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "busybox"})
_READERS = frozenset(
    """ls dir vdir cat tac nl head tail less more most bat batcat jq gojq jless grep egrep fgrep rg ag ack zgrep zegrep zfgrep
    zcat zless zmore bzcat bzless xzcat xzless zstdcat lz4cat wc stat file diff diff3 cmp comm colordiff echo printf test [ [[
    realpath readlink du df basename dirname pwd true false : which type whereis id whoami groups uname hostname date printenv
    ps pgrep pidof lsof getfacl lsattr namei md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum base32
    base64 od hexdump strings cut tr column fold fmt paste join expand unexpand rev seq yes expr sleep locate man help
    history jobs wait shopt umask ulimit hash dirs disown kill let shift return exit break continue getent nproc free
    uptime w who last locale ldd nm objdump readelf size tput clear stty tty numfmt fc compgen complete caller enable
    logname arch env-check lscpu lsblk lsmod dmesg printenv jless""".split()
)
#: Readers with an option or operand that writes: (short options taking a value, long ones,
#: the options whose value is written, the operand written by position).
_OUTPUT_READERS: dict[str, tuple[str, frozenset[str], frozenset[str], int | None]] = {
    "sort": ("kotST", frozenset({"--key", "--output", "--field-separator", "--buffer-size", "--temporary-directory", "--files0-from", "--compress-program", "--parallel", "--batch-size", "--random-source"}), frozenset({"-o", "--output"}), None),
    "uniq": ("fsw", frozenset({"--skip-fields", "--skip-chars", "--check-chars"}), frozenset(), 1),
    "tree": ("LPIHTo", frozenset({"--filelimit", "--charset", "--sort", "--timefmt"}), frozenset({"-o"}), None),
    "xxd": ("cglsonC", frozenset(), frozenset(), 1),
    "sdiff": ("oIwW", frozenset({"--output", "--width"}), frozenset({"-o", "--output"}), None),
    "yq": ("", frozenset(), frozenset(), None),
}
_COPIER_OPTIONS: dict[str, tuple[str, frozenset[str]]] = {
    "cp": ("tS", frozenset({"--target-directory", "--suffix", "--backup", "--reflink", "--sparse", "--preserve", "--no-preserve"})),
    "mv": ("tS", frozenset({"--target-directory", "--suffix", "--backup"})),
    "ln": ("tS", frozenset({"--target-directory", "--suffix", "--backup"})),
    "install": ("tSmogM", frozenset({"--target-directory", "--suffix", "--mode", "--owner", "--group", "--backup", "--strip-program", "--context"})),
    "scp": ("cFiJlPSoOD", frozenset()),
    "rsync": ("efTBM@", frozenset({"--rsh", "--filter", "--exclude", "--include", "--exclude-from", "--include-from", "--files-from", "--link-dest", "--compare-dest", "--copy-dest", "--backup-dir", "--partial-dir", "--temp-dir", "--log-file", "--password-file", "--chmod", "--rsync-path", "--port", "--timeout", "--block-size", "--bwlimit", "--max-size", "--min-size", "--suffix", "--chown", "--usermap", "--groupmap", "--info", "--debug", "--out-format", "--log-file-format", "--iconv", "--compress-level", "--skip-compress", "--write-batch", "--only-write-batch", "--read-batch", "--max-delete", "--modify-window", "--address", "--sockopts", "--contimeout", "--stop-after", "--stop-at", "--max-alloc", "--checksum-choice", "--compress-choice"})),
}
#: (short options taking a value, long ones, positional words before the command).
_WRAPPERS: dict[str, tuple[str, frozenset[str], int]] = {
    "sudo": ("ughpCDrtUTR", frozenset({"--user", "--group", "--host", "--prompt", "--close-from", "--chdir", "--role", "--type", "--other-user", "--command-timeout", "--chroot"}), 0),
    "sudoedit": ("ughpCDrtUTR", frozenset({"--user", "--group"}), 0),
    "doas": ("uC", frozenset(), 0),
    "env": ("uCS", frozenset({"--unset", "--chdir", "--split-string", "--default-signal", "--ignore-signal", "--block-signal"}), 0),
    "nohup": ("", frozenset(), 0),
    "nice": ("n", frozenset({"--adjustment"}), 0),
    "timeout": ("sk", frozenset({"--signal", "--kill-after"}), 1),
    "stdbuf": ("ioe", frozenset({"--input", "--output", "--error"}), 0),
    "command": ("", frozenset(), 0),
    "builtin": ("", frozenset(), 0),
    "exec": ("a", frozenset(), 0),
    "setsid": ("", frozenset(), 0),
    "ionice": ("cnp", frozenset({"--class", "--classdata", "--pid"}), 0),
    "chrt": ("", frozenset(), 1),
    "taskset": ("", frozenset(), 1),
    "time": ("fo", frozenset({"--format", "--output"}), 0),
    "flock": ("wEc", frozenset({"--timeout", "--conflict-exit-code", "--command"}), 0),
    "chroot": ("", frozenset({"--userspec", "--groups"}), 0),
    "unbuffer": ("", frozenset(), 0),
    "caffeinate": ("t", frozenset(), 0),
    "systemd-run": ("puEp", frozenset({"--unit", "--property", "--setenv", "--working-directory", "--description", "--slice"}), 0),
}
_GIT_READS = frozenset(
    """status log show diff blame grep ls-files ls-tree ls-remote rev-parse rev-list describe shortlog cat-file show-ref
    for-each-ref whatchanged name-rev merge-base check-ignore check-attr help version cherry count-objects annotate
    var show-branch range-diff --version --help -h""".split()
)
_GIT_TEXT_OPTIONS = ("--message", "--file", "--author", "--date", "--template", "--trailer", "--fixup", "--squash", "--reuse-message", "--reedit-message", "--gpg-sign", "--branch", "--origin", "--depth", "--reference", "--jobs", "--filter", "--upload-pack", "--config", "--separate-git-dir", "--shallow-since", "--shallow-exclude", "--format", "--pretty")
_SED_WRITES = re.compile(r"(?:^|[\s;{}!0-9$/])[wWe](?:\s|$|;|\})|/[gpIiMm0-9]*[we](?:\s|$|;|\})")
_AWK_WRITES = re.compile(r">|\||system|fflush|close\(")
_SHELL_SCRIPT = re.compile(r"#!\s*\S*(?:/|env\s+)(?:ba|da|z|k|mk)?sh\b|(?!#!)")


def _git_lists(verb: str, rest: Sequence[_Arg]) -> bool:
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


_HANDLERS: dict[str, Handler] = {}


def _register(handler: Handler, names: Iterable[str]) -> None:
    for name in names:
        _HANDLERS[name] = handler


_register(_CommandCheck._reader, _READERS)
_register(_CommandCheck._output_reader, _OUTPUT_READERS)
_register(_CommandCheck._copier, _COPIER_OPTIONS)
_register(_CommandCheck._zip, ("zip",))
_register(_CommandCheck._remover, ("rm", "rmdir", "unlink", "shred", "chmod", "chown", "chgrp"))
_register(_CommandCheck._extractor, ("tar", "bsdtar", "gtar", "unzip", "7z", "7za", "7zr", "7zz", "cpio", "patch"))
_register(_CommandCheck._sed, ("sed", "gsed"))
_register(_CommandCheck._awk, ("awk", "gawk", "mawk", "nawk"))
_register(_CommandCheck._find, ("find", "gfind"))
_register(_CommandCheck._xargs, ("xargs",))
_register(_CommandCheck._git, ("git",))
_register(_CommandCheck._hookbus, ("hookbus",))
_register(_CommandCheck._wrapper, _WRAPPERS)
_register(_CommandCheck._runner, ("uv", "uvx", "pipx", "poetry", "pdm", "npx", "bunx", "pnpm", "conda", "bundle"))
_register(_CommandCheck._shell, _SHELLS)
_register(_CommandCheck._eval, ("eval",))
_register(_CommandCheck._source, ("source", "."))
_register(_CommandCheck._trap, ("trap",))
_register(_CommandCheck._alias, ("alias",))
_register(_CommandCheck._watch, ("watch",))
_register(_CommandCheck._su, ("su", "runuser"))
_register(_CommandCheck._cd, ("cd", "pushd", "popd"))
_register(_CommandCheck._assign, ("export", "declare", "typeset", "local", "readonly"))
_register(_CommandCheck._read, ("read",))
_register(_CommandCheck._unknown_value, ("mapfile", "readarray", "getopts"))
_register(_CommandCheck._unset, ("unset",))
_register(_CommandCheck._set, ("set",))
#: Programs whose arguments are the paths they write (and options): each argument is read
#: as a path, and as nothing else.
_PATH_WRITERS = frozenset(
    """touch mkdir tee truncate dd mkfifo mknod setfacl chattr split csplit sponge mktemp dos2unix unix2dos""".split()
)
#: Other programs that write their arguments, judged as any other program (every argument
#: that lands in a place, as a path or as text, is refused); named so that a deny says
#: "which writes".
_WRITERS = frozenset(
    """shuf gzip gunzip bzip2 bunzip2
    xz unxz zstd unzstd lz4 lzma compress uncompress jar vi vim nvim gvim view nano pico emacs
    emacsclient micro ed ex joe jed mg kak hx helix code codium subl gedit kate mousepad curl wget aria2c sftp
    ssh-keygen openssl gpg install-info make cmake""".split()
)
_PYTHON = re.compile(r"(?:python|pypy)[0-9.]*")
_INTERPRETERS = frozenset({"perl", "ruby", "node", "nodejs", "bun", "deno", "php", "lua", "luajit", "Rscript", "julia", "tclsh", "osascript"})


def _handler(name: str | None) -> Handler:
    if name is None:
        return _CommandCheck._unknown
    found = _HANDLERS.get(name)
    if found is not None:
        return found
    if _PYTHON.fullmatch(name):
        return _CommandCheck._python
    return _CommandCheck._unknown


def _program(arg: _Arg) -> str | None:
    """The program a command word runs (its last path component), or None when the guard
    cannot know it."""
    if len(arg.alts) != 1 or _MARK in arg.text:
        return None
    return arg.text.rsplit("/", 1)[-1]


def _program_path(arg: _Arg) -> _Arg | None:
    """A program named by a path (``./plant.sh``, ``/tmp/x``): its script may be read."""
    if len(arg.alts) == 1 and "/" in arg.text and _MARK not in arg.text:
        return arg
    return None


def _read_script(path: str) -> str | None:
    """The text of a small regular file, read without blocking (never a FIFO), or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SCRIPT_BYTES:
            return None
        data = os.read(descriptor, _MAX_SCRIPT_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if b"\0" in data[:1024] or len(data) > _MAX_SCRIPT_BYTES:
        return None  # a binary
    return data.decode("utf-8", "replace").replace("\0", "")


def _options(args: Sequence[_Arg], values: str, long_values: frozenset[str], stop: bool = False) -> tuple[list[tuple[str, _Arg | None]], list[_Arg]]:
    """GNU-style options and operands: ``values`` are the short options that take a value
    (glued, ``-tDIR``, or the next word), ``long_values`` the long ones (``--opt=value`` or
    the next word). ``stop``: operands start at the first non-option (a command follows)."""
    options: list[tuple[str, _Arg | None]] = []
    operands: list[_Arg] = []
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        index += 1
        if text == "--":
            operands.extend(args[index:])
            break
        if not text.startswith("-") or text == "-" or _MARK in text[:2]:
            operands.append(arg)
            if stop:
                operands.extend(args[index:])
                break
            continue
        if text.startswith("--"):
            key, equals, value = text.partition("=")
            if equals:
                options.append((key, _Arg((value,), arg.source)))
            elif key in long_values and index < len(args):
                options.append((key, args[index]))
                index += 1
            else:
                options.append((key, None))
            continue
        for position in range(1, len(text)):
            letter = text[position]
            if letter in values:
                rest = text[position + 1 :]
                if rest:
                    options.append((f"-{letter}", _Arg((rest,), arg.source)))
                elif index < len(args):
                    options.append((f"-{letter}", args[index]))
                    index += 1
                else:
                    options.append((f"-{letter}", None))
                break
            options.append((f"-{letter}", None))
    return options, operands


def _option_values(arg: _Arg) -> Iterator[_Arg]:
    """The paths a word may name: itself; the value of ``--opt=value`` or ``NAME=value``;
    what follows a short option (``-C/x``, ``-o~/x``)."""
    yield arg
    text = arg.text
    if "=" in text and _MARK not in text.split("=", 1)[0]:
        yield _Arg(tuple(alt.split("=", 1)[1] for alt in arg.alts if "=" in alt), arg.source, arg.globbed)
    if text.startswith("-") and not text.startswith("--"):
        start = _OPTION_VALUE.search(text)
        if start is not None:
            yield _Arg((text[start.start() :],), arg.source, arg.globbed)


def _joined(directory: _Arg, entry: _Arg) -> _Arg:
    """``directory``'s entry named as ``entry``'s last component (cp SRC DIR writes DIR/SRC's name)."""
    names = [alt.rstrip("/").rsplit("/", 1)[-1] for alt in entry.alts if alt.rstrip("/")]
    values = tuple(dict.fromkeys(f"{base.rstrip('/')}/{name}" if base.rstrip("/") else f"/{name}" for base in directory.alts for name in names))
    return _Arg(values[:MAX_PATHS] or directory.alts, f"{directory.source}/{entry.source}", directory.globbed or entry.globbed)


def _joined_path(base: _Arg, path: _Arg) -> _Arg:
    values = tuple(dict.fromkeys(alt if alt.startswith("/") else f"{start.rstrip('/')}/{alt}" for start in base.alts for alt in path.alts))
    return _Arg(values[:MAX_PATHS], path.source, path.globbed)


def _remote(text: str) -> bool:
    """An rsync operand on another host (``host:path``)."""
    colon = text.find(":")
    return colon > 0 and "/" not in text[:colon]


def _after_equals(value: str) -> str:
    found = _assignment(value)
    return value[found.end() :] if found is not None else value


def _flatten(args: Iterable[_Arg]) -> tuple[str, ...]:
    values = tuple(dict.fromkeys(alt for arg in args for alt in arg.alts))
    return values[:MAX_PATHS] or ("",)


def _combinations(choices: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [()]
    for choice in choices:
        found = [(*prefix, value) for prefix in found for value in choice][:_MAX_ALTERNATIVES]
    return found


def _directories(found: tuple[_Directory, ...]) -> tuple[_Directory, ...]:
    unique = tuple(dict.fromkeys(found))
    if len(unique) > _MAX_DIRECTORIES:
        return (*unique[:_MAX_DIRECTORIES], _UNKNOWN_DIRECTORY)
    return unique


def _lexical(path: str) -> str:
    """A path as ``cd -L`` reads it: ``..`` removes the component before it."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


# -- what programs print ---------------------------------------------------------------------------


def _pipeline_output(stages: Sequence[tuple[str | None, list[_Arg], str | None]], check: _CommandCheck, scope: _Scope | None = None) -> str | None:
    """What the last stage of a pipeline prints, when every stage is one whose output the
    guard can tell from its words (echo, printf, cat, base64 -d, xxd -r, tr...); with
    ``scope``, ``cat FILE`` reads FILE (as a script is read)."""
    output: str | None = None
    for name, args, stdin in stages:
        given = stdin if stdin is not None else output
        output = _output(name, args, given, check, scope)
        if output is None or len(output) > _MAX_OUTPUT:
            return None
    return output


def _output(name: str | None, args: Sequence[_Arg], given: str | None, check: _CommandCheck, scope: _Scope | None = None) -> str | None:
    if any(len(arg.alts) != 1 or _MARK in arg.text for arg in args):
        return None
    words = [arg.text for arg in args[1:]]
    if name == "echo":
        escapes = False
        while words and re.fullmatch(r"-[neE]+", words[0]):
            escapes = escapes or "e" in words[0]
            words = words[1:]
        text = " ".join(words)
        return (_ansi_c(text) if escapes else text) + "\n"
    if name == "printf":
        if words and words[0] == "--":
            words = words[1:]
        if not words or words[0] == "-v":
            return None
        return _printf(words[0], words[1:])
    if name == "cat" and given is not None and all(word == "-" or word.startswith("-") for word in words):
        return given
    if name == "cat" and scope is not None and words and not any(word.startswith("-") for word in words):
        texts = [check._known_file_text(arg, scope) for arg in args[1:]]
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
            return check.guard._walk(absolute, cwd, check.links, check.cache).path + "\n"
        except (_Unreadable, OSError, ValueError, RuntimeError):
            return None
    return None


_PRINTF_CONVERSION = re.compile(r"%(?:%|[-+ #0]*[0-9*]*(?:\.[0-9*]*)?[a-zA-Z])")


def _printf(form: str, values: Sequence[str]) -> str:
    form = _ansi_c(form)
    queue = list(values)
    pieces: list[str] = []
    while True:
        def convert(found: re.Match[str]) -> str:
            if found.group() == "%%":
                return "%"
            value = queue.pop(0) if queue else ""
            return _ansi_c(value) if found.group().endswith("b") else value

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
    word = _ansi_c(word)
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


# -- text rules, for what is not bash --------------------------------------------------------------


#: ``hookbus`` as a command word (``/usr/bin/hookbus``, ``python -m hookbus``), and the
#: verbs that write hooks into the home. A text that names hookbus more often than this
#: is refused rather than read to its end.
_HOOKBUS_WORD = re.compile(r"(?<![\w.-])hookbus(?![\w.-])")
_WRITING_VERBS = ("install", "import", "new")
_MAX_HOOKBUS_WORDS = 256
#: How far past ``hookbus`` its verb is looked for (``--home DIR`` comes first, at most).
_VERB_WINDOW = 4096
_SEGMENT_END = re.compile(r"[;&|\n()`]")


def _hookbus_writes(command: str) -> str | None:
    """The phrase for the first hookbus command line in a text that writes hooks into the
    home, or None."""
    for count, found in enumerate(_HOOKBUS_WORD.finditer(command)):
        if count >= _MAX_HOOKBUS_WORDS:
            return f"names hookbus more than {_MAX_HOOKBUS_WORDS} times: the guard cannot check it"
        window = command[found.end() : found.end() + _VERB_WINDOW]
        segment = _SEGMENT_END.split(window, maxsplit=1)[0]
        words = segment.split()
        verb = None
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word == "--home":
                skip = True
            elif not word.startswith("-"):
                verb = word
                break
        has_dir = any(len(word.split("=", 1)[0]) >= 3 and "--dir".startswith(word.split("=", 1)[0]) for word in words)
        if verb in _WRITING_VERBS and (verb != "new" or not has_dir):
            return f"runs `hookbus {verb}`, which writes hooks into the hookbus home"
    return None


def _whole_path(path: str) -> re.Pattern[str]:
    """``path`` as a whole path: not preceded by a path character, nor followed by a name
    character. Each regex starts with its literal (no lookbehind first, which would have
    the engine try the pattern at every position) and checks the character before it after."""
    literal = re.escape(path)
    return re.compile(rf"{literal}(?<![{_PATH_CHARS}]{literal})(?![{_NAME_CHARS}])")


def _variable(form: str) -> re.Pattern[str]:
    """``$NAME`` or ``${NAME``, the name ending there (``${NAME:-x}``, not ``$NAMEX``)."""
    return re.compile(rf"{re.escape(form)}(?![A-Za-z0-9_])")


def _component(name: str) -> re.Pattern[str]:
    """``name`` as a path component: after the start, a ``/`` or a character that is no
    path character; before the end, a ``/`` or a character that is no name character."""
    literal = re.escape(name)
    return re.compile(rf"{literal}(?<![{_NAME_CHARS}]{literal})(?![{_NAME_CHARS}])")


#: A user name ``~name`` may hold: what is looked up (the system's user database is not
#: asked about a name no user can have: a megabyte one aborts some NSS modules).
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def _expand_user(path: str) -> str:
    """``os.path.expanduser``, for a name a user can have."""
    if path.startswith("~"):
        end = path.find("/")
        name = path[1:] if end < 0 else path[1:end]
        if name and not _USER_NAME.fullmatch(name):
            return path
    return os.path.expanduser(path)


def _envelope_cwd(envelope: Mapping[str, Any]) -> str | None:
    """The writer's working directory, as the envelope gives it: the only one a
    ``/proc/self/cwd`` can be read against."""
    cwd = envelope.get("cwd")
    if isinstance(cwd, str) and os.path.isabs(cwd) and "\0" not in cwd:
        return cwd
    return None


def _working_directory(envelope: Mapping[str, Any]) -> str | None:
    """The agent's working directory: the envelope's ``cwd``, else this process's; None when
    neither can be had."""
    cwd = _envelope_cwd(envelope)
    if cwd is not None:
        return cwd
    try:
        return os.getcwd()
    except OSError:
        return None


def _path_words(text: str) -> Iterator[str]:
    """The words of ``text`` with a slash, then those that start with ``~``; repeats
    included. A word with a slash is found by its slash, the engine skipping to each, and
    then its start, backward, and its end."""
    end = 0
    while (slash := text.find("/", end)) != -1:
        start = max(text.rfind(separator, end, slash) for separator in _SEPARATORS) + 1
        after = _SEPARATOR.search(text, slash)
        end = after.start() if after is not None else len(text)
        yield text[start:end]
    for match in _TILDE_WORD.finditer(text):
        yield match.group()


def _candidates(word: str) -> list[str]:
    """The paths a word of text may name: itself; the value of ``--opt=value``; what follows
    a short option (``-C/x``, ``-o~/x``)."""
    candidates = [word]
    if "=" in word:
        candidates.append(word.split("=", 1)[1])
    if word.startswith("-"):
        start = _OPTION_VALUE.search(word)
        if start is not None:
            candidates.append(word[start.start() :])
    return candidates


def _path_like(word: str) -> bool:
    return "/" in word or word.startswith("~")


def _expanded(word: str, cwd: str | None) -> str | None:
    """``word`` as an absolute path, as a shell would expand its start (``~``, ``~user``,
    ``~+``, ``$HOME``, ``$PWD``); None when it is relative and ``cwd`` unknown."""
    if word == "~+" or word.startswith("~+/"):
        word = (cwd or "~+") + word[2:]
    else:
        variable = _LEADING_VARIABLE.match(word)
        if variable is not None:
            name = variable.group(1) or variable.group(2)
            value = os.path.expanduser("~") if name == "HOME" else cwd
            if value is not None:
                word = value + word[variable.end() :]
        word = _expand_user(word)
    if os.path.isabs(word):
        return word
    return os.path.join(cwd, word) if cwd is not None else None


def _component_matches(pattern: str, name: str, dotglob: bool) -> bool:
    """Whether bash could expand the path component ``pattern`` to ``name``."""
    if pattern == name:
        return True
    if _GLOB_CHARS.search(pattern) is None:
        return False
    words = _brace_words(pattern) if len(pattern) <= _MAX_GLOB else None
    if words is None:
        return True  # a pattern it does not read: assume the worst
    for word in words:
        if word == name:
            return True
        # Globbing comes after brace expansion; a leading dot is matched only by a dot.
        if name.startswith(".") and not word.startswith(".") and not dotglob:
            continue
        # fnmatch's translation does not backtrack catastrophically (since 3.9); compiled
        # through re's bounded cache, not fnmatch's own (32768 patterns an agent chooses).
        # Bash reads [^...] as [!...].
        if re.match(fnmatch.translate(word.replace("[^", "[!")), name) is not None:
            return True
    return False


def _brace_words(pattern: str) -> list[str] | None:
    """The words bash's brace expansion makes of ``pattern`` (``.{vix,x}`` -> ``.vix``,
    ``.x``), innermost group first; None for a sequence (``{a..z}``), a group it does not
    expand (``{x}``) or more than _MAX_EXPANSIONS words."""
    pending: list[str] = [pattern]
    words: list[str] = []
    while pending:
        word = pending.pop()
        group = _INNER_BRACE.search(word)
        if group is None:
            words.append(word)  # an unpaired brace is a literal character
            continue
        if "," not in group.group(1):
            return None
        head, tail = word[: group.start()], word[group.end() :]
        pending.extend(head + part + tail for part in group.group(1).split(","))
        if len(pending) + len(words) > _MAX_EXPANSIONS:
            return None
    return words


def _kind(value: object) -> str:
    """A JSON value's kind, for a message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _shown(text: str) -> str:
    """``text`` as a phrase quotes it: short, and without control characters."""
    text = text.replace(_MARK, "?")
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    return text if text.isprintable() else repr(text)
