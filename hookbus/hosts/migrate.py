"""``hookbus import claude-code FILE --install-bridge``: FILE's own hooks move into the
home, so that each runs once, through the bridge, and not a second time by Claude Code.

An entry moves when the import can translate it and its event is one the bridge carries;
anything else stays in FILE, said entry by entry. ``claude_import.plan_migration`` decides
what the import can translate; this module takes the moved entries out of FILE's document,
writes their hooks into the home and records what moved (``bridgerecord``), so that
``--uninstall-bridge`` can put it back. The home's hooks and the record are written before
FILE, and taken back if FILE cannot be written, so that a failure leaves both as they were.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hookbus.hosts.bridgerecord import (
    EnvRecord,
    EventStep,
    Loaded,
    MovedEntry,
    Record,
    Step,
    digest,
    load_record,
    read_bytes,
    save_record,
)
from hookbus.hosts.install import CLAUDE_CODE, BridgedHost
from hookbus.hosts.restore import hooks_of, is_bridge_entry, strip_bridges, summary_of
from hookbus.hosts.settingsfile import ImportFailed, create_exclusively, key_path, make_directory, replace_atomically

#: ``$CLAUDE_PROJECT_DIR`` or ``${CLAUDE_PROJECT_DIR}``, which Claude Code gives command hooks only.
_PROJECT_DIR = "CLAUDE_PROJECT_DIR"


@dataclass(frozen=True)
class Move:
    """An entry of FILE that moves into the home as a hook."""

    claude_event: str
    group_index: int
    entry_index: int
    #: Where it is in FILE: ``$.hooks.PreToolUse[0].hooks[1]``.
    location: str
    hook_id: str
    #: Its hook.json, as a document and as the text written.
    hook: dict[str, Any]
    text: str
    #: The home holds this very hook already: nothing is written for it.
    exists: bool


@dataclass(frozen=True)
class Stay:
    """An entry of FILE that stays there, and why."""

    location: str
    summary: str
    reason: str


@dataclass
class Migration:
    """What moves out of FILE, the document left to bridge, and how to write it all."""

    shown: str
    #: FILE's real path: the record's key.
    file: str
    home: Path
    host: BridgedHost
    moves: list[Move]
    stays: list[Stay]
    warnings: list[str]
    #: FILE's document without the moved entries: the bridge is merged into this.
    remaining: dict[str, Any]
    step: Step
    loaded: Loaded
    #: Whether the record there is replaced rather than added to: FILE holds no bridge, so
    #: the one it holds is of an install undone by hand (FILE.bak put back, say).
    stale: bool
    #: What each moved entry runs, by its location, for people.
    summaries: dict[str, str] = field(default_factory=dict)
    done: list[str] = field(default_factory=list)

    def command_events(self) -> dict[str, str]:
        """Claude Code's events (with why) that keep a command hook (the gate) under
        ``--http`` because a moved hook reads ``$CLAUDE_PROJECT_DIR``, which Claude Code gives to
        command hooks only: the home does not hold those hooks yet when that is decided."""
        readers: dict[str, list[str]] = {}
        for move in self.moves:
            if _PROJECT_DIR in move.text:
                readers.setdefault(move.claude_event, []).append(move.hook_id)
        return {
            event: f"hook(s) {', '.join(repr(hook) for hook in ids[:3])}{', ...' if len(ids) > 3 else ''} "
            f"(moved from {self.shown}) use ${_PROJECT_DIR}, which Claude Code gives to command hooks only"
            for event, ids in readers.items()
        }

    def lines(self, dry_run: bool) -> list[str]:
        """What moves and what stays, an entry a line."""
        hooks_dir = self.home / "hooks"
        found: list[str] = []
        for move in self.moves:
            where = hooks_dir / move.hook_id
            verb = "would move" if dry_run else "moved"
            how = " (the home holds it already)" if move.exists else ""
            found.append(f"{verb} {move.location} ({self.summaries.get(move.location, '')}) into hookbus: {where}{how}")
        for stay in self.stays:
            found.append(f"stays in {self.shown}: {stay.location} ({stay.summary}): {stay.reason}; it still runs in Claude Code")
        return found

    def apply(self, before: dict[str, Any], after: dict[str, Any], backup: str | None) -> Callable[[], None]:
        """Write the moved hooks into the home, then the record (``before`` and ``after``:
        FILE's document now and as it is about to be written; ``backup``: where FILE was
        just backed up). What takes them back out, if FILE then cannot be written."""
        self._check_routed(after)
        created: list[Path] = []
        path = self.loaded.path
        keep_record = self.loaded.problem is None  # else nothing moves (refused then), and it is left alone
        previous = read_bytes(path) if keep_record else None

        def undo() -> None:
            for directory in reversed(created):
                _remove_written(directory)
            if not keep_record:
                return
            try:
                if previous is None:
                    os.unlink(path)
                else:
                    replace_atomically(path, previous, 0o600)
            except FileNotFoundError:
                pass

        try:
            for move in self.moves:
                if not move.exists:
                    created.append(self._write_hook(move))
            if keep_record:
                save_record(path, self._record(before, after, backup))
        except BaseException:
            for directory in reversed(created):
                _remove_written(directory)
            raise
        for directory in created:
            self.done.append(f"wrote {directory / 'hook.json'}")
        return undo

    def _check_routed(self, after: dict[str, Any]) -> None:
        """ImportFailed when an event whose hooks move keeps a bridge to another home (one
        the merge left alone): those hooks would then run nowhere."""
        hooks = after.get("hooks")
        home = os.path.realpath(self.home)
        for event in self.step.events:
            groups = hooks.get(event) if isinstance(hooks, dict) else None
            entries = [entry for group in groups for entry in hooks_of(group) or []] if isinstance(groups, list) else []
            homes = [_home_of(entry.get("command")) for entry in entries if is_bridge_entry(entry, self.host)]
            if homes and all(other is not None and other != home for other in homes):
                raise ImportFailed([
                    f"{self.shown}: the bridge on {event} sends to the home {homes[0]}, not {home}, so the hooks that "
                    f"would move from {event} into {home} would run nowhere: run this with --home {shlex.quote(str(homes[0]))}, "
                    "or take that bridge out first (--uninstall-bridge)"
                ])

    def _write_hook(self, move: Move) -> Path:
        hooks_dir = self.home / "hooks"
        make_directory(hooks_dir, 0o755)
        directory = hooks_dir / move.hook_id
        try:
            os.mkdir(directory, 0o755)
        except FileExistsError:
            raise ImportFailed([
                f"{directory}: made by someone else while {self.shown}'s hooks were being moved; "
                "nothing was moved: look at what it holds, then run this again"
            ]) from None
        try:
            create_exclusively(directory / "hook.json", move.text.encode("utf-8"), 0o644)
        except BaseException:
            os.rmdir(directory)
            raise
        return directory

    def _record(self, before: dict[str, Any], after: dict[str, Any], backup: str | None) -> Record:
        old = self.loaded.record
        hooks = before.get("hooks")
        # FILE as it was before hookbus: an event that holds nothing but a bridge (of an
        # install with no record) was hookbus's, and goes with it.
        events = [
            event for event, groups in (hooks.items() if isinstance(hooks, dict) else ())
            if not (isinstance(groups, list) and groups and not strip_bridges(groups, self.host)[0])
        ]
        fresh = Record(self.file, hooks_existed=isinstance(hooks, dict) and (bool(events) or not hooks), events_before=events)
        if old is None or self.stale:
            record = fresh
            if old is not None:
                # The home's hooks that the undone install made stay the install's to remove.
                made = old.created_hooks()
                for event in self.step.events.values():
                    for moved in event.moved:
                        moved.created = moved.created or made.get(moved.hook_id) == moved.hook
        else:
            record = old
        if backup is not None:
            record.backups.append(os.path.abspath(backup))
        if self.step.events:
            record.steps.append(self.step)
        record.env = _env_change(before, after, record.env)
        return record


def _home_of(command: object) -> str | None:
    """The home a command bridge names (``--home DIR``), made absolute; None when it names
    none (an http bridge, or one that takes the host's environment's)."""
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for index, word in enumerate(words[:-1]):
        if word == "--home":
            return os.path.realpath(os.path.expanduser(words[index + 1]))
    return None


def _env_change(before: dict[str, Any], after: dict[str, Any], known: EnvRecord | None) -> EnvRecord | None:
    """What the record says of the token in FILE's env once ``after`` is written."""
    from hookbus.hosts.httpbridge import TOKEN_VARIABLE

    old_env = before.get("env") if isinstance(before.get("env"), dict) else {}
    new_env = after.get("env") if isinstance(after.get("env"), dict) else {}
    old, new = (old_env or {}).get(TOKEN_VARIABLE), (new_env or {}).get(TOKEN_VARIABLE)
    if not isinstance(new, str) or new == old:
        return known
    if known is not None and isinstance(old, str) and digest(old) == known.written:
        return EnvRecord(known.existed, known.before, digest(new))  # hookbus's token, replaced
    return EnvRecord("env" in before, old if isinstance(old, str) else None, digest(new))


def _remove_written(directory: Path) -> None:
    """Take out a hook directory this install made (its hook.json, then it)."""
    for name in os.listdir(directory) if os.path.isdir(directory) and not os.path.islink(directory) else ():
        try:
            os.unlink(directory / name)
        except OSError:
            pass
    try:
        os.rmdir(directory)
    except OSError:
        pass


def build_migration(
    document: dict[str, Any],
    shown: str,
    home: Path,
    moves: list[Move],
    why: Callable[[str, str], str],
    warnings: list[str],
    host: BridgedHost = CLAUDE_CODE,
) -> Migration:
    """The migration of FILE's ``document``: ``moves``, what the import can translate on
    the bridge's events; every other entry (but the bridge) stays, ``why(location,
    group_location)`` saying why for one on a bridged event. ImportFailed when a hook
    cannot be written (its id is taken by another hook) or the record cannot be kept."""
    file = os.path.realpath(shown)
    loaded = load_record(home, file)
    hooks = document.get("hooks")
    by_place = {(move.claude_event, move.group_index, move.entry_index): move for move in moves}
    stays: list[Stay] = []
    summaries: dict[str, str] = {}
    remaining_hooks: dict[str, Any] = dict(hooks) if isinstance(hooks, dict) else {}
    step = Step()
    has_bridge = False
    for event, groups in (hooks.items() if isinstance(hooks, dict) else ()):
        if not isinstance(groups, list):
            continue
        moved_here: list[tuple[int, int]] = []
        for group_index, group in enumerate(groups):
            group_location = f"{key_path('$.hooks', event)}[{group_index}]"
            if hooks_of(group) is None:
                reason = f"the bridge does not carry {event}" if event not in host.events else why(group_location, group_location)
                stays.append(Stay(group_location, "not a matcher group with hooks", reason))
            for entry_index, entry in enumerate(hooks_of(group) or []):
                location = f"{group_location}.hooks[{entry_index}]"
                if is_bridge_entry(entry, host):
                    has_bridge = True
                elif (event, group_index, entry_index) in by_place:
                    moved_here.append((group_index, entry_index))
                    summaries[location] = summary_of(entry)
                elif event not in host.events:
                    stays.append(Stay(location, summary_of(entry), f"the bridge does not carry {event}"))
                else:
                    stays.append(Stay(location, summary_of(entry), why(location, group_location)))
        if moved_here:
            remaining_hooks[event] = _without(groups, moved_here)
            stripped, places = strip_bridges(groups, host)
            entries = []
            for group_index, entry_index in moved_here:
                move = by_place[(event, group_index, entry_index)]
                entries.append(MovedEntry(*places[(group_index, entry_index)], move.hook_id, move.hook, not move.exists))
            step.events[event] = EventStep(stripped, entries)
    problems = [problem for problem in (_refusal(move, home, shown) for move in moves) if problem is not None]
    if moves and loaded.problem is not None:
        problems.append(
            f"{loaded.problem}: hookbus keeps there what --install-bridge moved out of {shown}, to put it back with "
            f"--uninstall-bridge; move it away (mv {shlex.quote(str(loaded.path))} ...) if you do not need it, then run this again"
        )
    if problems:
        raise ImportFailed([*problems, "nothing was moved or written"])
    remaining = dict(document)
    if isinstance(hooks, dict):
        remaining["hooks"] = remaining_hooks
    moved_locations = [move.location for move in moves]
    kept_warnings = [warning for warning in warnings if any(_about(warning, location) for location in moved_locations)]
    return Migration(
        shown, file, home, host, moves, stays, kept_warnings, remaining, step, loaded, stale=not has_bridge, summaries=summaries,
    )


def _about(warning: str, location: str) -> bool:
    where = warning.rpartition(" @ ")[2]
    return where == location or where.startswith(location + ".")


def _without(groups: list[Any], places: list[tuple[int, int]]) -> list[Any]:
    """``groups`` without the entries at ``places``; a group left with none is dropped."""
    taken = set(places)
    kept: list[Any] = []
    for group_index, group in enumerate(groups):
        entries = hooks_of(group)
        if entries is None or not any(place[0] == group_index for place in taken):
            kept.append(group)
            continue
        left = [entry for entry_index, entry in enumerate(entries) if (group_index, entry_index) not in taken]
        if left:
            kept.append({**group, "hooks": left})
    return kept


def _refusal(move: Move, home: Path, shown: str) -> str | None:
    """Why ``move``'s hook cannot be written into the home: something else is there."""
    if move.exists:
        return None
    directory = home / "hooks" / move.hook_id
    try:
        status = os.lstat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{directory}: cannot be checked: {exc.strerror or exc}"
    what = (
        f"a symbolic link (to {os.readlink(directory)})" if stat.S_ISLNK(status.st_mode)
        else "a hook with other content" if stat.S_ISDIR(status.st_mode) else "a file"
    )
    fix = (
        f"remove it (rm -r {shlex.quote(str(directory))}) if it is an old copy, or run "
        f"`hookbus import claude-code {shlex.quote(shown)} --force` first to overwrite it with {shown}'s version"
        if stat.S_ISDIR(status.st_mode) else f"move it away (mv {shlex.quote(str(directory))} ...)"
    )
    return (
        f"{directory}: {what} is there, where {shown}'s hook at {move.location} would move: {fix}, then run this again"
    )
