"""What programs are: the tables that sort the programs the guard knows by what they do
(read only, write their arguments, run a shell or an interpreter, wrap another command...),
and how a program's words are read (GNU-style options, the program a command word runs)."""

from __future__ import annotations

import re
from typing import Iterator, Sequence

from hookbus.policy.homeguard.text import OPTION_VALUE
from hookbus.policy.homeguard.values import MARK, Arg

#: Shells: judged by the code they run (``-c``), their script, or what they read.
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "fish", "busybox"})
#: Programs that only read: nothing they name is written (their redirections still are).
READERS = frozenset(
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
OUTPUT_READERS: dict[str, tuple[str, frozenset[str], frozenset[str], int | None]] = {
    "sort": ("kotST", frozenset({"--key", "--output", "--field-separator", "--buffer-size", "--temporary-directory", "--files0-from", "--compress-program", "--parallel", "--batch-size", "--random-source"}), frozenset({"-o", "--output"}), None),
    "uniq": ("fsw", frozenset({"--skip-fields", "--skip-chars", "--check-chars"}), frozenset(), 1),
    "tree": ("LPIHTo", frozenset({"--filelimit", "--charset", "--sort", "--timefmt"}), frozenset({"-o"}), None),
    "xxd": ("cglsonC", frozenset(), frozenset(), 1),
    "sdiff": ("oIwW", frozenset({"--output", "--width"}), frozenset({"-o", "--output"}), None),
    "yq": ("", frozenset(), frozenset(), None),
}
COPIER_OPTIONS: dict[str, tuple[str, frozenset[str]]] = {
    "cp": ("tS", frozenset({"--target-directory", "--suffix", "--backup", "--reflink", "--sparse", "--preserve", "--no-preserve"})),
    "mv": ("tS", frozenset({"--target-directory", "--suffix", "--backup"})),
    "ln": ("tS", frozenset({"--target-directory", "--suffix", "--backup"})),
    "install": ("tSmogM", frozenset({"--target-directory", "--suffix", "--mode", "--owner", "--group", "--backup", "--strip-program", "--context"})),
    "scp": ("cFiJlPSoOD", frozenset()),
    "rsync": ("efTBM@", frozenset({"--rsh", "--filter", "--exclude", "--include", "--exclude-from", "--include-from", "--files-from", "--link-dest", "--compare-dest", "--copy-dest", "--backup-dir", "--partial-dir", "--temp-dir", "--log-file", "--password-file", "--chmod", "--rsync-path", "--port", "--timeout", "--block-size", "--bwlimit", "--max-size", "--min-size", "--suffix", "--chown", "--usermap", "--groupmap", "--info", "--debug", "--out-format", "--log-file-format", "--iconv", "--compress-level", "--skip-compress", "--write-batch", "--only-write-batch", "--read-batch", "--max-delete", "--modify-window", "--address", "--sockopts", "--contimeout", "--stop-after", "--stop-at", "--max-alloc", "--checksum-choice", "--compress-choice"})),
}
#: (short options taking a value, long ones, positional words before the command).
WRAPPERS: dict[str, tuple[str, frozenset[str], int]] = {
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
#: Programs whose arguments are the paths they write (and options): each argument is read
#: as a path, and as nothing else.
PATH_WRITERS = frozenset(
    """touch mkdir tee truncate dd mkfifo mknod setfacl chattr split csplit sponge mktemp dos2unix unix2dos""".split()
)
#: Other programs that write their arguments, judged as any other program (every argument
#: that lands in a place, as a path or as text, is refused); named so that a deny says
#: "which writes".
WRITERS = frozenset(
    """shuf gzip gunzip bzip2 bunzip2
    xz unxz zstd unzstd lz4 lzma compress uncompress jar vi vim nvim gvim view nano pico emacs
    emacsclient micro ed ex joe jed mg kak hx helix code codium subl gedit kate mousepad curl wget aria2c sftp
    ssh-keygen openssl gpg install-info make cmake""".split()
)
#: Python and the other interpreters: their script, or what they read, is scanned as text.
PYTHON = re.compile(r"(?:python|pypy)[0-9.]*")
INTERPRETERS = frozenset({"perl", "ruby", "node", "nodejs", "bun", "deno", "php", "lua", "luajit", "Rscript", "julia", "tclsh", "osascript"})


def program_of(arg: Arg) -> str | None:
    """The program a command word runs (its last path component), or None when the guard
    cannot know it."""
    if len(arg.alts) != 1 or MARK in arg.text:
        return None
    return arg.text.rsplit("/", 1)[-1]


def program_path(arg: Arg) -> Arg | None:
    """A program named by a path (``./plant.sh``, ``/tmp/x``): its script may be read."""
    if len(arg.alts) == 1 and "/" in arg.text and MARK not in arg.text:
        return arg
    return None


def parse_options(args: Sequence[Arg], values: str, long_values: frozenset[str], stop: bool = False) -> tuple[list[tuple[str, Arg | None]], list[Arg]]:
    """GNU-style options and operands: ``values`` are the short options that take a value
    (glued, ``-tDIR``, or the next word), ``long_values`` the long ones (``--opt=value`` or
    the next word). ``stop``: operands start at the first non-option (a command follows)."""
    options: list[tuple[str, Arg | None]] = []
    operands: list[Arg] = []
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        index += 1
        if text == "--":
            operands.extend(args[index:])
            break
        if not text.startswith("-") or text == "-" or MARK in text[:2]:
            operands.append(arg)
            if stop:
                operands.extend(args[index:])
                break
            continue
        if text.startswith("--"):
            key, equals, value = text.partition("=")
            if equals:
                options.append((key, Arg((value,), arg.source)))
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
                    options.append((f"-{letter}", Arg((rest,), arg.source)))
                elif index < len(args):
                    options.append((f"-{letter}", args[index]))
                    index += 1
                else:
                    options.append((f"-{letter}", None))
                break
            options.append((f"-{letter}", None))
    return options, operands


def option_values(arg: Arg) -> Iterator[Arg]:
    """The paths a word may name: itself; the value of ``--opt=value`` or ``NAME=value``;
    what follows a short option (``-C/x``, ``-o~/x``)."""
    yield arg
    text = arg.text
    if "=" in text and MARK not in text.split("=", 1)[0]:
        yield Arg(tuple(alt.split("=", 1)[1] for alt in arg.alts if "=" in alt), arg.source, arg.globbed)
    if text.startswith("-") and not text.startswith("--"):
        start = OPTION_VALUE.search(text)
        if start is not None:
            yield Arg((text[start.start() :],), arg.source, arg.globbed)
