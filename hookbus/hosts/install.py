"""``hookbus import claude-code|gemini-cli FILE --install-bridge``: a host's settings.json
made to send every one of its events to hookbus.

The bridge is added once per event (and left alone when another spelling of it is there
already). Claude Code's own hooks in FILE move into the home when the caller says how
(``moves``: ``claude_import.plan_migration``, which ``hookbus import`` passes), so that each
runs once; Gemini CLI's stay as they are. Its command names the running
hookbus by its absolute path (``python -m hookbus``: this interpreter's, ``-m hookbus``)
and the home, so that it runs on a host's plain PATH and reaches this home whatever chose
it (``--home``, ``$VIX_HOME``); a command the host's user could not run is still written,
with a warning.

FILE (followed through a link of this user's or root's, as dotfiles are; another user's
link is refused) is backed up before it changes, created when it is missing, and written
in one rename. The backup is FILE.bak, or when that exists FILE.bak.1, FILE.bak.2...: an
earlier backup is never overwritten. It is made exclusively, never through a link, at
FILE's own mode from the start; a name held by anything but a regular file of this user's
is refused. FILE's directory may be writable by others (a shared
project's ``.claude/``, /tmp), who could plant what the backup is written through.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, TextIO

from hookbus.dialects import codex_names
from hookbus.jsontext import json_type_name
from hookbus.serve.rendezvous import home_root
from hookbus.hosts.settingsfile import (
    ImportFailed,
    create_exclusively,
    key_path,
    make_directory,
    read_json_file,
    write_atomically,
)
from hookbus.terminal import printable



#: The time a host gives the bridge for one call, written with it: longer than any sync hook
#: of the home should take (their default timeout is 5 s; an imported Claude Code hook's 60 s).
BRIDGE_TIMEOUT_SECONDS = 600


class BridgedHost:
    """What ``--install-bridge`` writes for one host."""

    __slots__ = ("name", "verb", "events", "tool_events", "all_tools", "timeout")

    def __init__(
        self, name: str, verb: str, events: tuple[str, ...], tool_events: tuple[str, ...], all_tools: str | None, timeout: int
    ) -> None:
        self.name = name
        #: The bridge's verb: ``hookbus VERB``.
        self.verb = verb
        #: The host's events the bridge is put on.
        self.events = events
        #: Those among them whose matcher filters tool names.
        self.tool_events = tool_events
        #: The matcher that takes every tool on those (None: the group has no matcher).
        self.all_tools = all_tools
        #: How long the host lets the bridge run, in its own unit. Its default (60 s for
        #: both) would kill a bridge waiting on a hook with a longer timeout, and the host
        #: then runs the tool: a fail-closed guard would fail open.
        self.timeout = timeout


CLAUDE_CODE = BridgedHost(
    "Claude Code",
    "claude-code-hook",
    ("PreToolUse", "PostToolUse", "UserPromptSubmit", "PermissionRequest", "SessionStart", "Stop", "SubagentStop", "PreCompact"),
    ("PreToolUse", "PostToolUse", "PermissionRequest"),
    "*",
    BRIDGE_TIMEOUT_SECONDS,  # Claude Code counts in seconds
)
# Gemini CLI's matchers are regexes, where "*" is not one: a group without a matcher runs
# for every tool.
GEMINI_CLI = BridgedHost(
    "Gemini CLI",
    "gemini-cli-hook",
    ("BeforeTool", "AfterTool", "BeforeAgent", "AfterAgent", "SessionStart", "PreCompress"),
    (),
    None,
    BRIDGE_TIMEOUT_SECONDS * 1000,  # Gemini CLI in milliseconds
)


# Codex CLI's matchers are regexes too; a group without one runs for every tool. It has no
# http hooks (one voids the whole file). The bridge goes on the ten events hookbus has: on
# PreModelRequest and PostModelRequest (each model request), Interrupt and SessionEnd it
# would answer nothing, and each call costs a process (half of a short run's hook calls).
CODEX = BridgedHost(
    "Codex CLI",
    "codex-hook",
    tuple(codex_names.VIX_EVENT),
    ("PreToolUse", "PostToolUse", "PermissionRequest"),
    None,
    BRIDGE_TIMEOUT_SECONDS,  # Codex CLI counts in seconds
)
#: Every host ``--install-bridge`` knows, by the bridge's verb.
BRIDGED_HOSTS = {host.verb: host for host in (CLAUDE_CODE, GEMINI_CLI, CODEX)}


def running_hookbus(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """The words that run this hookbus again from anywhere: the ``hookbus`` console script
    it was started as (``sys.argv[0]``, made absolute), else, as under ``python -m
    hookbus``, this interpreter with ``-m hookbus``. Paths are made absolute, not resolved:
    a venv's python is a link that must stay one, or the venv is lost."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    if os.path.basename(argv0) == "hookbus":
        found = argv0 if os.sep in argv0 else shutil.which(argv0)
        if found and os.path.isfile(found):
            return [os.path.abspath(found)]
    if executable:
        return [os.path.abspath(executable), "-m", "hookbus"]
    return ["hookbus"]  # an embedded interpreter that cannot say where it is


def bridge_command(home: str | os.PathLike[str] | None = None, host: BridgedHost = CLAUDE_CODE, program: Sequence[str] | None = None) -> str:
    """The command the host runs for every event: ``/abs/hookbus claude-code-hook --home
    /abs/home``, shell-quoted. ``program``: the words that run hookbus (default: the running
    one); the home is the one hookbus would use (``home``, else ``$VIX_HOME``, else
    ``~/.vix``), always spelled out: the host's environment may have no VIX_HOME."""
    return " ".join(shlex.quote(word) for word in bridge_words(home, host, program))


def bridge_words(home: str | os.PathLike[str] | None = None, host: BridgedHost = CLAUDE_CODE, program: Sequence[str] | None = None) -> list[str]:
    """``bridge_command``'s words, unquoted."""
    return [*(program if program is not None else running_hookbus()), host.verb, "--home", os.path.abspath(home_root(home))]


def gate_or_bridge(home: str | os.PathLike[str] | None, host: BridgedHost, program: Sequence[str]) -> tuple[str, str | None]:
    """The command a host runs for an event ``--http`` keeps on a command: the gate
    (``hookbus.hosts.gate``), which starts no Python while the server answers, in front of
    the bridge; the bridge alone, with why, when this machine has no bash the gate runs on."""
    from hookbus.hosts.gate import MIN_BASH, bash_version, find_bash, gate_command

    words = bridge_words(home, host, program)
    bash = find_bash()
    version = bash_version(bash) if bash is not None else None
    if bash is None or version is None or version < MIN_BASH:
        if bash is None:
            found = "no bash was found"
        else:
            found = f"{bash} is bash {version[0]}.{version[1]}" if version else f"{bash} did not say its version"
        why = f"{found}, and the gate needs bash {MIN_BASH[0]}.{MIN_BASH[1]} or later: the command bridge is written instead"
        return " ".join(shlex.quote(word) for word in words), why
    return gate_command(words, host.verb, os.path.abspath(home_root(home)), bash), None


def _user_name(uid: int) -> str:
    import pwd

    if uid == os.geteuid():
        return "you"
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _groups_of(uid: int) -> set[int]:
    import pwd

    if uid == os.geteuid():
        return {os.getegid(), *os.getgroups()}
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return set()  # no such user here: only what others may do is theirs
    return set(os.getgrouplist(entry.pw_name, entry.pw_gid))


def _may(status: os.stat_result, uid: int, groups: set[int]) -> bool:
    """Whether ``uid`` may search the directory, or execute the file, ``status`` describes
    (by its mode bits: ACLs are not read, so this can only be a warning)."""
    if uid == 0:
        return stat.S_ISDIR(status.st_mode) or bool(status.st_mode & 0o111)
    if status.st_uid == uid:
        return bool(status.st_mode & 0o100)
    if status.st_gid in groups:
        return bool(status.st_mode & 0o010)
    return bool(status.st_mode & 0o001)


def _cannot_run(path: str, uid: int, groups: set[int]) -> str | None:
    """Why ``uid`` could not run the file ``path``; None when nothing says it cannot."""
    who = _user_name(uid)
    resolved = os.path.realpath(path)
    for name in dict.fromkeys([path, resolved]):  # the link's directories and its target's
        for directory in reversed(Path(name).parents):
            try:
                status = os.stat(directory)
            except OSError as exc:
                return f"{directory}: {exc.strerror or exc}"
            if not _may(status, uid, groups):
                mode = stat.S_IMODE(status.st_mode)
                return f"{directory} is a directory {who} may not enter (mode {mode:04o}, owner uid {status.st_uid})"
    try:
        status = os.stat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISREG(status.st_mode):
        return f"{path} is not a file"
    if not _may(status, uid, groups):
        return f"{path} is not executable by {who} (mode {stat.S_IMODE(status.st_mode):04o}): chmod +x {shlex.quote(path)}"
    return None


def _interpreter(script: str) -> str | None:
    """The program a ``#!`` script's first line names, if it does."""
    try:
        with open(script, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return None
    words = first[2:].split() if first.startswith(b"#!") else []
    return os.fsdecode(words[0]) if words else None


def _found_only_here() -> bool:
    """Whether this interpreter finds the hookbus package only because of the working
    directory (``python -m hookbus`` in a source checkout): the host runs it elsewhere."""
    import importlib.machinery

    here = {"", os.getcwd()}
    elsewhere = [entry for entry in sys.path if entry not in here and os.path.abspath(entry) != os.getcwd()]
    for finder in sys.meta_path:
        try:
            if finder is importlib.machinery.PathFinder:
                spec = importlib.machinery.PathFinder.find_spec("hookbus", elsewhere)
            else:
                find_spec = getattr(finder, "find_spec", None)
                spec = find_spec("hookbus", None) if find_spec is not None else None
        except Exception:  # a third party's finder: not this check's business
            continue
        if spec is not None:
            return False
    return True


def command_problems(program: Sequence[str], uid: int) -> list[str]:
    """Why the host, running as ``uid``, may fail to start ``program`` (``running_hookbus``'s
    words); [] when nothing says so. Checked: each file is executable by that user and
    every directory above it one they may enter (the script's ``#!`` interpreter too), and
    ``-m hookbus`` finds hookbus outside the working directory."""
    if not program or os.sep not in program[0]:
        return [f"{program[0] if program else 'hookbus'} is found through the host's PATH, which may not hold it"]
    groups = _groups_of(uid)
    files = [program[0]]
    if len(program) == 1:
        interpreter = _interpreter(program[0])
        if interpreter is not None and os.path.isabs(interpreter):
            files.append(interpreter)
    problems = [problem for problem in (_cannot_run(file, uid, groups) for file in files) if problem]
    if program[1:] == ["-m", "hookbus"] and _found_only_here():
        problems.append(
            f"{program[0]} finds hookbus only in the working directory ({os.getcwd()}), and the host "
            "runs it elsewhere: install hookbus into that Python (pip install)"
        )
    return problems


def _host_user(shown: str) -> int:
    """Who the host runs as, as far as can be told: whoever owns FILE (a user's settings
    are theirs, even when root installs the bridge), else this user."""
    try:
        return os.stat(shown).st_uid
    except OSError:
        return os.geteuid()


def is_bridge_command(command: object, host: BridgedHost = CLAUDE_CODE) -> bool:
    """Whether ``command`` runs ``hookbus VERB`` of ``host`` (however hookbus is reached)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if host.verb not in words:
        return False
    before = words[: words.index(host.verb)]
    return any(os.path.basename(word) == "hookbus" for word in before)


def merge_bridge(
    document: dict[str, Any],
    command: str,
    shown: str,
    host: BridgedHost = CLAUDE_CODE,
    http_url: str | None = None,
    keep_command: Mapping[str, str] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """``document`` (the host's settings.json) with the bridge on every bridged event, and
    a line per event saying what was done. The user's other hooks stay as they are.

    With ``http_url`` (Claude Code only), the bridge is an http hook posting there, except
    on the events of ``keep_command`` (event: why), which keep ``command`` (under
    ``--http``, the gate). A bridge of the other kind on an event (http, command or gate)
    is replaced, so that running this again with or without ``--http`` switches between
    them."""
    from hookbus.hosts.gate import is_gate_command
    from hookbus.hosts.httpbridge import http_entry, is_http_bridge

    gate = is_gate_command(command)  # a gate replaces the plain bridge, and the other way round
    hooks = document.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ImportFailed([f"{shown}: expected an object of events, got {json_type_name(hooks)} @ $.hooks"])
    keep_command = keep_command or {}
    merged = dict(hooks)
    lines: list[str] = []
    for event in host.events:
        groups = merged.get(event, [])
        if not isinstance(groups, list):
            where = key_path("$.hooks", event)
            raise ImportFailed([f"{shown}: expected an array of matcher groups, got {json_type_name(groups)} @ {where}"])
        as_command = http_url is None or event in keep_command
        wanted: dict[str, Any] = (
            {"type": "command", "command": command, "timeout": host.timeout} if as_command
            else http_entry(http_url or "", host.timeout)
        )
        what = command if as_command else f"http {http_url}"
        entries = [
            entry
            for group in groups if isinstance(group, dict) and isinstance(group.get("hooks"), list)
            for entry in group["hooks"] if isinstance(entry, dict)
        ]
        commands = [entry.get("command") for entry in entries if is_bridge_command(entry.get("command"), host)]
        https = [entry for entry in entries if is_http_bridge(entry)]
        why_command = f" (a command hook: {keep_command[event]})" if event in keep_command else ""
        if (as_command and command in commands and not https) or (not as_command and wanted in https and not commands):
            lines.append(f"{event}: already routed to {what}{why_command}")
            continue
        if as_command and commands and not https and all(is_gate_command(found) == gate for found in commands):
            lines.append(
                f"{event}: left alone: already routed by {commands[0]!r}, not {command!r} "
                "(edit it by hand if you meant this one)"
            )
            continue
        replaced = bool(commands or https)
        if replaced and host is CODEX:
            # In its place: Codex trusts a hook by its position, and the user's own hooks
            # after it keep theirs.
            merged[event] = _replaced_in_place(groups, host, wanted)
            lines.append(f"{event}: replace the bridge with {what}" + why_command)
            continue
        if replaced:
            groups = _without_bridges(groups, host)
        on_tools = event in host.tool_events and host.all_tools is not None
        group: dict[str, Any] = {"matcher": host.all_tools} if on_tools else {}
        group["hooks"] = [wanted]
        merged[event] = [*groups, group]
        verb = "replace the bridge with" if replaced else "add"
        lines.append(f"{event}: {verb} {what}" + (f" (matcher {host.all_tools})" if on_tools else "") + why_command)
    result = dict(document)
    result["hooks"] = merged
    return result, lines


def _replaced_in_place(groups: list[Any], host: BridgedHost, wanted: dict[str, Any]) -> list[Any]:
    """``groups`` with their first bridge entry made ``wanted``, where it is, and any other
    taken out (a group left with no hook is dropped)."""
    placed = False
    kept: list[Any] = []
    for group in groups:
        if not (isinstance(group, dict) and isinstance(group.get("hooks"), list)):
            kept.append(group)
            continue
        entries: list[Any] = []
        ours = False
        for entry in group["hooks"]:
            if isinstance(entry, dict) and is_bridge_command(entry.get("command"), host):
                ours = True
                if not placed:
                    entries.append(wanted)
                    placed = True
                continue
            entries.append(entry)
        if not ours:
            kept.append(group)
        elif entries:
            kept.append({**group, "hooks": entries})
    return kept


def _without_bridges(groups: list[Any], host: BridgedHost) -> list[Any]:
    """``groups`` without hookbus's own bridge entries (command or http); a group left with
    no hook is dropped."""
    from hookbus.hosts.httpbridge import is_http_bridge

    kept = []
    for group in groups:
        if not (isinstance(group, dict) and isinstance(group.get("hooks"), list)):
            kept.append(group)
            continue
        entries = [
            entry for entry in group["hooks"]
            if not (isinstance(entry, dict) and (is_bridge_command(entry.get("command"), host) or is_http_bridge(entry)))
        ]
        if len(entries) == len(group["hooks"]):
            kept.append(group)  # none of ours (an empty group too): as it was
        elif entries:
            kept.append({**group, "hooks": entries})
    return kept


def _has_own_hooks(document: dict[str, Any], host: BridgedHost) -> bool:
    """Whether a settings document holds hooks other than the bridge."""
    from hookbus.hosts.httpbridge import is_http_bridge

    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return False
    for groups in hooks.values():
        for group in groups if isinstance(groups, list) else ():
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else ():
                if not (isinstance(entry, dict) and (is_bridge_command(entry.get("command"), host) or is_http_bridge(entry))):
                    return True
    return False


def _foreign_link(shown: str) -> str | None:
    """Why FILE may not be followed: a link on its way that neither this user nor root owns
    (another user made FILE point at a file of this user's, say). None: follow it."""
    current = shown
    for _ in range(40):  # the kernel's own limit on links in a row
        try:
            status = os.lstat(current)
            target = os.readlink(current) if stat.S_ISLNK(status.st_mode) else None
        except OSError:
            return None  # nothing there (or it changed meanwhile): the read says what is wrong
        if target is None:
            return None
        if status.st_uid not in (os.geteuid(), 0):
            return (
                f"{current}: a symbolic link of another user's (uid {status.st_uid}), to {target}: hookbus follows only "
                f"your own links; remove it (rm {shlex.quote(current)}) if you did not make it, then run this again"
            )
        current = os.path.join(os.path.dirname(current), target)
    return None


def _what_is(status: os.stat_result) -> str:
    kinds = [(stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")]
    return next((name for test, name in kinds if test(status.st_mode)), "a device file")


#: How many backups of one FILE there may be (FILE.bak, FILE.bak.1, ...).
MAX_BACKUPS = 1000


def backup_names(base: str) -> list[str]:
    """The backups of a FILE whose first backup is ``base`` (``FILE.bak``) that exist now,
    oldest first: ``base``, then ``base.1``, ``base.2``... up to the first missing one."""
    found = []
    for number in range(MAX_BACKUPS):
        name = base if number == 0 else f"{base}.{number}"
        if not os.path.lexists(name):
            break
        found.append(name)
    return found


def write_backup(original: str, base: str) -> str:
    """Copy ``original`` (FILE, followed) to a backup of its own, and say which: ``base``
    (FILE.bak) when there is none yet, else ``base.1``, ``base.2``... the first free one.
    An earlier backup is never overwritten. Each name is tried exclusively, without
    following a link, and the file is made at FILE's permission bits, never wider, so
    nothing another user planted is written through. A name already taken by a regular
    file of this user's is an earlier backup, passed over; anything else there (a link, a
    FIFO, a directory, another user's file, which one could take for a backup) is refused
    (ImportFailed)."""
    with open(original, "rb") as handle:
        data = handle.read()
        mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & 0o777
    number = 0
    while number < MAX_BACKUPS:
        backup = base if number == 0 else f"{base}.{number}"
        try:
            create_exclusively(backup, data, mode)
            return backup
        except FileExistsError:
            pass
        try:
            status = os.lstat(backup)
        except FileNotFoundError:
            continue  # gone meanwhile: the same name again
        if stat.S_ISREG(status.st_mode) and status.st_uid == os.geteuid():
            number += 1  # an earlier backup: kept
            continue
        if stat.S_ISREG(status.st_mode):
            what = f"a file of another user's (uid {status.st_uid})"
        elif stat.S_ISLNK(status.st_mode):
            what = f"a symbolic link (to {os.readlink(backup)})"
        else:
            what = _what_is(status)
        how = "" if stat.S_ISDIR(status.st_mode) else f" (rm {shlex.quote(backup)})"
        raise ImportFailed([
            f"{backup}: {what} is where the backup goes, and hookbus writes a backup only into a new file, after "
            f"earlier backups of your own: remove it{how} or move it away if you did not put it there, then run this again"
        ])
    raise ImportFailed([
        f"{base}: {MAX_BACKUPS} backups of {original} are there already: move the old ones away, then run this again"
    ])


class HostTrust(Protocol):
    """What a host must be told besides FILE before it runs the bridge (Codex CLI's trust in
    its config.toml: ``hookbus.hosts.codex_config.CodexTrust``)."""

    def lines(self) -> list[str]: ...

    def warnings(self) -> list[str]: ...

    def say_dry_run(self, out: TextIO) -> None: ...

    def write(self, out: TextIO) -> None: ...

    def finish(self, out: TextIO, err: TextIO, written: bool = False) -> int: ...


#: Plans a HostTrust: (FILE as shown, its document before, after, the bridge command written
#: (None: taken out), the home, the words that run hookbus).
TrustPlanner = Callable[[str, dict[str, Any], dict[str, Any], "str | None", "str | os.PathLike[str] | None", Sequence[str]], HostTrust]


class Moves(Protocol):
    """What ``--install-bridge`` moves out of a Claude Code FILE into the home, so that its
    hooks run once (``claude_import.plan_migration`` makes it; this module cannot import
    the import)."""

    #: FILE's document without the entries that move: the bridge is merged into this.
    remaining: dict[str, Any]
    #: What the user should check about the hooks that move (stderr).
    warnings: list[str]
    #: What ``apply`` wrote, a line each.
    done: list[str]

    def command_events(self) -> dict[str, str]:
        """The events (with why) that must keep a command hook (the gate) under ``--http``
        because of a hook that moves."""

    def lines(self, dry_run: bool) -> list[str]:
        """What moves and what stays, an entry a line."""

    def apply(self, before: dict[str, Any], after: dict[str, Any], backup: str | None) -> Callable[[], None]:
        """Write the hooks that move, and the record of it, before FILE is written; what
        takes them back out if FILE then cannot be."""


def install_bridge(
    file: str,
    home: str | os.PathLike[str] | None = None,
    *,
    host: BridgedHost = CLAUDE_CODE,
    dry_run: bool = False,
    http: str | None = None,
    http_decisions: bool = False,
    moves: Callable[[dict[str, Any]], Moves] | None = None,
    trust: TrustPlanner | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Merge the bridge into FILE (created when missing, backed up to FILE.bak, or a
    FILE.bak.N of its own, before a change), or print it; the exit code. ``moves``: what
    moves FILE's own hooks into the home (Claude Code: ``claude_import.plan_migration``),
    called with FILE's document; they are written before FILE, and taken back out if FILE
    cannot be. ``http``: the address ``hookbus serve --http``
    printed, for http hooks where they cannot weaken a fail-closed hook, nor be answered
    with an approval or a rewrite by whoever holds the port while the server is down
    (unless ``http_decisions``), and the gate on the other events
    (``hookbus.hosts.httpbridge.plan_layout``). The token written is first checked
    against the server there. ``trust``: what the host must be told besides FILE before it
    runs the bridge (Codex CLI: ``hookbus.hosts.codex_config.plan_codex_trust``), planned
    from FILE before and after, written after FILE, then checked."""
    out = out or sys.stdout
    err = err or sys.stderr
    shown = os.fspath(file)
    program = running_hookbus()
    command = bridge_command(home, host, program)
    exists = os.path.lexists(shown)
    token_advice: str | None = None
    trusted: HostTrust | None = None
    try:
        refusal = _foreign_link(shown)
        if refusal is not None:
            raise ImportFailed([refusal])
        if host is CODEX and shown.endswith(".toml"):
            from hookbus.hosts.codex_trust import codex_home

            raise ImportFailed([
                f"{shown}: --install-bridge writes Codex CLI's bridge into a hooks.json, not into config.toml's "
                f"[hooks] tables: give $CODEX_HOME/hooks.json ({codex_home() / 'hooks.json'}), which Codex reads "
                "beside config.toml, or a trusted project's .codex/hooks.json"
            ])
        document = read_json_file(shown, shown) if exists else {}
        if not isinstance(document, dict):
            raise ImportFailed([f"{shown}: expected an object at the top level, got {json_type_name(document)} @ $"])
        migration = moves(document) if moves is not None else None
        source = migration.remaining if migration is not None else document
        if http is not None:
            from hookbus.hosts.httpbridge import TOKEN_VARIABLE, plan_layout

            root = home_root(home)
            layout = plan_layout(
                shown, root, http, host.events, claude=host is CLAUDE_CODE, decisions=http_decisions, dry_run=dry_run,
                kept=migration.command_events() if migration is not None else None,
            )
            if host is CODEX:
                layout.commands = {event: "Codex CLI has no http hooks: the gate posts to the server" for event in host.events}
            command, no_gate = gate_or_bridge(home, host, program)
            merged, lines = merge_bridge(source, command, shown, host, layout.url, layout.commands)
            plan = layout.token
            notes = [note for note in (no_gate, layout.note, plan.note if plan is not None else None) if note]
            token_advice = "; ".join(notes) or None
            if plan is not None and plan.env is not None:
                env = merged.get("env")
                if env is not None and not isinstance(env, dict):
                    raise ImportFailed([f"{shown}: expected an object of variables, got {json_type_name(env)} @ $.env"])
                merged["env"] = {**(env or {}), **plan.env}
                if (env or {}).get(TOKEN_VARIABLE) != plan.env[TOKEN_VARIABLE] and plan.line is not None:
                    lines.append(plan.line)
        elif http_decisions:
            raise ImportFailed(["--http-decisions goes with --http: it lets the http hooks take the events whose answer approves or rewrites"])
        else:
            merged, lines = merge_bridge(source, command, shown, host)
        if trust is not None:
            trusted = trust(shown, document, merged, command, home, program)
    except ImportFailed as exc:
        for message in exc.messages:
            print(printable(message), file=err)
        print(printable(f"{shown} was not changed"), file=err)
        return 1
    for line in [*(migration.lines(dry_run) if migration is not None else ()), *lines]:
        print(printable(line), file=out)
    for line in trusted.lines() if trusted is not None else ():
        print(printable(line), file=out)
    for warning in trusted.warnings() if trusted is not None else ():
        print(printable(f"warning: {warning}"), file=err)
    for warning in migration.warnings if migration is not None else ():
        print(printable(f"warning: {warning}"), file=err)
    for problem in command_problems(program, _host_user(shown)):
        print(printable(
            f"warning: {host.name} may fail to run the bridge: {problem}. "
            f"Fix that, or run this again with a hookbus {host.name} can run; the command is written all the same"
        ), file=err)
    if token_advice is not None:
        print(printable(f"note: {token_advice}"), file=err)
    if migration is None and _has_own_hooks(document, host):
        if host is CODEX:
            advice = f"import them with `hookbus import codex {shown}` and take them out of it (their trust stays)"
        elif host is CLAUDE_CODE:
            advice = "remove those you imported with `hookbus import claude-code`"
        else:
            advice = "move them into hookbus hooks"
        print(printable(f"note: the other hooks of {shown} still run as well: {advice}, or they run twice"), file=out)
    changed = merged != document or not exists
    if dry_run:
        print(printable(f"{shown} would hold these hooks:" if changed else f"{shown} needs no change; its hooks:"), file=out)
        print(printable(json.dumps({"hooks": merged["hooks"]}, indent=2, ensure_ascii=False), keep="\n"), file=out)
        if trusted is not None:
            trusted.say_dry_run(out)
        print("dry run: nothing was written", file=out)
        return 0
    if not changed:
        print(printable(f"{shown} needs no change"), file=out)
        if trusted is not None:
            return trusted.finish(out, err)
        return 0
    target = Path(os.path.realpath(shown))  # through a link (dotfiles), not over it: checked above
    try:
        backup = None
        original = target.read_bytes() if exists else None
        if exists:
            backup = write_backup(str(target), f"{shown}.bak")
            print(printable(f"backed up {shown} to {backup}"), file=out)
            mode = stat.S_IMODE(os.stat(target).st_mode) & 0o777
        else:
            make_directory(target.parent, 0o755)
            # A file made for http hooks may keep their token: readable by you alone.
            mode = 0o600 if http is not None else 0o644
        # The home's hooks and the record first, FILE last: a failure between leaves FILE
        # as it was, and takes back what was written.
        undo = migration.apply(document, merged, backup) if migration is not None else None
        try:
            write_atomically(target, json.dumps(merged, indent=2, ensure_ascii=False) + "\n", mode)
        except BaseException:
            if undo is not None:
                undo()
            raise
        if trusted is not None:
            try:
                trusted.write(out)
            except BaseException:
                why = _put_back(target, original)
                # A disk that refused config.toml may refuse FILE too: say which it is.
                said = f"{shown} was put back as it was" if why is None else (
                    f"{shown} could not be put back ({why}): it holds the bridge, which Codex does not trust, "
                    f"so Codex skips it; its backup is beside it"
                )
                print(printable(said), file=err)
                raise
    except ImportFailed as exc:
        for message in exc.messages:
            print(printable(message), file=err)
        print(printable(f"{shown} was not changed"), file=err)
        return 1
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        home_too = ", nor the home" if migration is not None else ""
        print(printable(f"cannot write{where}: {exc.strerror or exc}; {shown} was not changed{home_too}"), file=err)
        return 1
    for line in migration.done if migration is not None else ():
        print(printable(line), file=out)
    print(printable(f"wrote {shown}"), file=out)
    if trusted is not None:
        return trusted.finish(out, err, written=True)
    return 0


def _put_back(target: Path, original: bytes | None) -> str | None:
    """FILE as it was before this run wrote it (None: it was not there); why it could not
    be, or None when it was."""
    try:
        if original is None:
            os.unlink(target)
        else:
            from hookbus.hosts.settingsfile import replace_atomically

            replace_atomically(target, original, stat.S_IMODE(os.stat(target).st_mode) & 0o777)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
