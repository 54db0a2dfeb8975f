"""``hookbus import claude-code|gemini-cli|codex FILE --uninstall-bridge``: what
``--install-bridge`` did to FILE, undone.

hookbus's entries leave FILE: the command bridge in any spelling (``is_bridge_command``),
the http bridge (``is_http_bridge``), and the ``HOOKBUS_HTTP_TOKEN`` the install put in
FILE's ``env`` (only the one hookbus wrote: the record's digest of it, or the home's token
file, says so). For Claude Code, the hooks the install moved into the home come back into
FILE as they were, from the home's record (``bridgerecord``), and the hook directories the
install made go, when they still hold what it wrote. FILE is backed up first, as the install
does, and written before the home is touched.

A record that is missing or that hookbus cannot trust changes nothing but the bridge's
removal: the output says what was not put back and where FILE's backups are.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hookbus.hosts.bridgerecord import Loaded, Record, digest, load_record
from hookbus.hosts.codex_config import CodexTrust, plan_codex_trust
from hookbus.hosts.install import (
    CLAUDE_CODE,
    CODEX,
    BridgedHost,
    _foreign_link,
    _put_back,
    backup_names,
    running_hookbus,
    write_backup,
)
from hookbus.hosts.restore import hooks_of, is_bridge_entry, put_back, strip_bridges, summary_of
from hookbus.hosts.settingsfile import ImportFailed, key_path, read_json_file, write_atomically
from hookbus.jsontext import json_type_name
from hookbus.serve.rendezvous import home_root
from hookbus.terminal import printable


@dataclass
class Undo:
    """What an uninstall changes: FILE's new document, and what it says of it."""

    document: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    #: The home's hooks the install made: id -> the hook.json it wrote.
    created: dict[str, dict[str, Any]] = field(default_factory=dict)


def _home_token(home: Path) -> str | None:
    """The token of ``HOME/run/http.token``, the one the installer writes into FILE."""
    from hookbus.serve.httpconfig import token_path

    try:
        descriptor = os.open(token_path(str(home)), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as handle:
            return handle.read(4096).decode("ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _already_back(current: list[Any], groups: list[Any], moved: list[tuple[int, int]]) -> bool:
    """Whether every entry of ``moved`` is in ``current`` already, in a group with the same
    matcher: FILE was put back by hand (from its backup, say), so none comes back twice."""
    present = {
        (json.dumps(group.get("matcher"), sort_keys=True), json.dumps(entry, sort_keys=True))
        for group in current if isinstance(group, dict)
        for entry in hooks_of(group) or []
    }
    for group_index, entry_index in moved:
        group = groups[group_index]
        entry = (hooks_of(group) or [])[entry_index]
        if (json.dumps(group.get("matcher"), sort_keys=True), json.dumps(entry, sort_keys=True)) not in present:
            return False
    return True


def plan_undo(document: dict[str, Any], shown: str, home: Path, host: BridgedHost, record: Record | None) -> Undo:
    """FILE's ``document`` without hookbus's entries, with what ``record`` says was moved
    out of it put back. ImportFailed when FILE's hooks are not an object of events."""
    from hookbus.hosts.httpbridge import TOKEN_VARIABLE

    hooks = document.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise ImportFailed([f"{shown}: expected an object of events, got {json_type_name(hooks)} @ $.hooks"])
    undo = Undo(dict(document))
    new_hooks: dict[str, Any] = {}
    for event, groups in (hooks or {}).items():
        if not isinstance(groups, list):
            new_hooks[event] = groups
            continue
        new_hooks[event], _ = strip_bridges(groups, host)
        removed = [entry for group in groups for entry in hooks_of(group) or [] if is_bridge_entry(entry, host)]
        for entry in removed:
            undo.lines.append(f"{event}: take out hookbus's bridge ({summary_of(entry, 100)})")
    for step in reversed(record.steps if record is not None else []):
        for event, moved_step in step.events.items():
            current = new_hooks.get(event, [])
            places = [(moved.group, moved.entry) for moved in moved_step.moved]
            if not isinstance(current, list):
                undo.lines.append(
                    f"{event}: not put back: {key_path('$.hooks', event)} is no array now; the hooks moved from it are "
                    "in the backups and in the home"
                )
                continue
            if _already_back(current, moved_step.groups, places):
                undo.lines.append(f"{event}: the hooks moved from it are back in {shown} already")
                continue
            new_hooks[event] = put_back(current, moved_step.groups, places)
            for moved in moved_step.moved:
                group = moved_step.groups[moved.group]
                matcher = group.get("matcher") if isinstance(group, dict) else None
                with_matcher = f" (matcher {matcher})" if isinstance(matcher, str) else ""
                entry = (hooks_of(group) or [])[moved.entry]
                undo.lines.append(f"{event}: put back {summary_of(entry)}{with_matcher}, from hooks/{moved.hook_id}")
    events_before = set(record.events_before) if record is not None else set()
    for event in list(new_hooks):
        was = (hooks or {}).get(event)
        if new_hooks[event] == [] and was != [] and event not in events_before:
            del new_hooks[event]  # the install added this event for the bridge alone
    if hooks is not None or new_hooks:
        undo.document["hooks"] = new_hooks
    if new_hooks == {} and hooks != {} and not (record is not None and record.hooks_existed):
        undo.document.pop("hooks", None)
    env = document.get("env")
    token = env.get(TOKEN_VARIABLE) if isinstance(env, dict) else None
    if isinstance(env, dict) and isinstance(token, str):
        known = record.env if record is not None else None
        if known is not None and digest(token) == known.written:
            new_env = {key: value for key, value in env.items() if key != TOKEN_VARIABLE}
            if known.before is not None:
                new_env[TOKEN_VARIABLE] = known.before
            drop = not new_env and not known.existed
        elif token == _home_token(home):
            new_env = {key: value for key, value in env.items() if key != TOKEN_VARIABLE}
            drop = not new_env
        else:
            new_env, drop = env, False
        if new_env != env:
            undo.lines.append(f"env: take out {TOKEN_VARIABLE}, the token hookbus wrote" + (
                " (the value it had before is put back)" if TOKEN_VARIABLE in new_env else ""))
            if drop:
                undo.document.pop("env")
            else:
                undo.document["env"] = new_env
    if record is not None:
        undo.created = record.created_hooks()
    return undo


def hook_state(home: Path, hook_id: str, hook: dict[str, Any]) -> str | None:
    """Why the home's ``hooks/<hook_id>`` is kept rather than removed: it is not the
    directory the install made holding the hook.json it wrote (and hookbus's state). None:
    remove it. ``""``: it is gone already."""
    from hookbus.trust import STATE_FILES

    hooks_dir = home / "hooks"
    directory = hooks_dir / hook_id
    try:
        if stat.S_ISLNK(os.lstat(hooks_dir).st_mode):
            return f"{hooks_dir} is a symbolic link, which hookbus removes nothing through"
        status = os.lstat(directory)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"it cannot be checked: {exc.strerror or exc}"
    if stat.S_ISLNK(status.st_mode):
        return f"it is a symbolic link now (to {os.readlink(directory)}), not the directory the install made"
    if not stat.S_ISDIR(status.st_mode):
        return "it is no directory now"
    if status.st_uid != os.geteuid():
        return f"it belongs to another user now (uid {status.st_uid})"
    try:
        names = sorted(os.listdir(directory))
        extra = [name for name in names if name != "hook.json" and name not in STATE_FILES]
        if extra:
            return f"it holds files the install did not write ({', '.join(extra[:3])})"
        descriptor = os.open(directory / "hook.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as handle:
            content = json.loads(handle.read(16 * 1024 * 1024))
    except FileNotFoundError:
        return "its hook.json is gone"
    except (OSError, ValueError, RecursionError):
        return "its hook.json changed since the install"
    if content != hook:
        return "it changed since the install"
    return None


def remove_hook(home: Path, hook_id: str) -> None:
    """Remove the hook directory ``hook_state`` found unchanged: its files, then it."""
    directory = home / "hooks" / hook_id
    for name in os.listdir(directory):
        os.unlink(directory / name)
    os.rmdir(directory)


def _backups_said(shown: str, record: Record | None) -> str:
    names = backup_names(f"{shown}.bak")
    for name in record.backups if record is not None else []:
        if name not in names and os.path.abspath(name) not in map(os.path.abspath, names) and os.path.lexists(name):
            names.append(name)
    if not names:
        return f"there is no backup of {shown}"
    return f"the backups of {shown}, oldest first: {', '.join(names)}"


def uninstall_bridge(
    file: str,
    home: str | os.PathLike[str] | None = None,
    *,
    host: BridgedHost = CLAUDE_CODE,
    dry_run: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Take hookbus's entries out of FILE and, for Claude Code, put back what the install
    moved; the exit code: 0, or 1 when FILE could not be changed or the record of what was
    moved could not be used (the bridge is taken out all the same)."""
    out = out or sys.stdout
    err = err or sys.stderr
    shown = os.fspath(file)
    root = Path(home_root(home))

    def say(text: str, stream: TextIO = out) -> None:
        print(printable(text), file=stream)

    loaded: Loaded | None = None
    try:
        refusal = _foreign_link(shown)
        if refusal is not None:
            raise ImportFailed([refusal])
        if not os.path.lexists(shown):
            say(f"{shown} does not exist: nothing to undo")
            return 0
        document = read_json_file(shown, shown)
        if not isinstance(document, dict):
            raise ImportFailed([f"{shown}: expected an object at the top level, got {json_type_name(document)} @ $"])
        if host is CLAUDE_CODE:
            loaded = load_record(root, os.path.realpath(shown))
        record = loaded.record if loaded is not None else None
        undo = plan_undo(document, shown, root, host, record)
        trust: CodexTrust | None = None
        if host is CODEX:
            # Codex trusts a hook by its place: the trust of the bridge's entries goes, and
            # that of the user's own hooks after them follows them to their new places.
            moved = {
                event: strip_bridges(groups, host)[1]
                for event, groups in (document.get("hooks") or {}).items() if isinstance(groups, list)
            }
            trust = plan_codex_trust(shown, document, undo.document, None, home, running_hookbus(), moved)
    except ImportFailed as exc:
        for message in exc.messages:
            say(message, err)
        say(f"{shown} was not changed", err)
        return 1
    kept: dict[str, str] = {}
    removable: list[str] = []
    for hook_id, hook in undo.created.items():
        why = hook_state(root, hook_id, hook)
        if why is None:
            removable.append(hook_id)
        elif why:
            kept[hook_id] = why
    changed = undo.document != document
    trust_changed = trust is not None and trust.plan.changed
    if not changed and not removable and not trust_changed and (loaded is None or loaded.missing):
        say(f"{shown} holds no hookbus bridge, and hookbus moved nothing out of it: nothing to undo")
        return 0
    for line in [*undo.lines, *(trust.lines() if trust is not None else ())]:
        say(line)
    hooks_dir = root / "hooks"
    for hook_id in removable if dry_run else ():
        say(f"would remove {hooks_dir / hook_id}: the install made it, and it is unchanged")
    for hook_id, why in kept.items():
        say(
            f"kept {hooks_dir / hook_id}: {why}; it no longer runs from Claude Code through {shown} (its entry is back "
            f"there): remove it (rm -r {shlex.quote(str(hooks_dir / hook_id))}) if you do not want it"
        )
    if dry_run:
        say(f"{shown} would hold these hooks:" if changed else f"{shown} needs no change; its hooks:")
        print(printable(json.dumps({"hooks": undo.document.get("hooks", {})}, indent=2, ensure_ascii=False), keep="\n"), file=out)
        if trust is not None:
            trust.say_dry_run(out)
        say("dry run: nothing was written")
        return _say_record(loaded, shown, root, dry_run, out, err)
    target = Path(os.path.realpath(shown))
    if changed or trust_changed:
        try:
            original = target.read_bytes()
            if changed:
                backup = write_backup(str(target), f"{shown}.bak")
                say(f"backed up {shown} to {backup}")
                mode = stat.S_IMODE(os.stat(target).st_mode) & 0o777
                write_atomically(target, json.dumps(undo.document, indent=2, ensure_ascii=False) + "\n", mode)
                say(f"wrote {shown}")
            if trust is not None:
                try:
                    trust.write(out)
                except BaseException:
                    if changed and (why := _put_back(target, original)) is not None:
                        say(f"{shown} could not be put back ({why}); its backup is beside it", err)
                    raise
        except ImportFailed as exc:
            for message in exc.messages:
                say(message, err)
            say(f"{shown} was not changed, nor the home", err)
            return 1
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            say(f"cannot write{where}: {exc.strerror or exc}; {shown} was not changed, nor the home", err)
            return 1
    for hook_id in removable:
        try:
            remove_hook(root, hook_id)
            say(f"removed {hooks_dir / hook_id}: the install made it, and it was unchanged")
        except OSError as exc:
            say(f"cannot remove {hooks_dir / hook_id}: {exc.strerror or exc}; remove it yourself (it no longer runs from {shown})", err)
    return _say_record(loaded, shown, root, dry_run, out, err)


def _say_record(loaded: Loaded | None, shown: str, root: Path, dry_run: bool, out: TextIO, err: TextIO) -> int:
    """What became of the record (removed once FILE holds what it said), and what could not
    be put back without one; the exit code."""

    def say(text: str, stream: TextIO = out) -> None:
        print(printable(text), file=stream)

    if loaded is None:
        return 0
    if loaded.record is not None:
        if dry_run:
            say(f"would remove the record {loaded.path}")
            return 0
        try:
            os.unlink(loaded.path)
            say(f"removed the record {loaded.path}")
        except OSError as exc:
            say(f"cannot remove the record {loaded.path}: {exc.strerror or exc}; remove it yourself", err)
        return 0
    if loaded.problem is not None:
        say(
            f"{loaded.problem}: so hookbus did not put back the hooks --install-bridge moved out of {shown}, and took "
            f"the bridge out all the same. The record is left where it is. Those hooks are in {root / 'hooks'} (each "
            f"hook.json says created_by import:claude-code:{os.path.abspath(shown)}); {_backups_said(shown, None)}",
            err,
        )
        return 1
    say(
        f"note: {root} holds no record of hooks moved out of {shown} (an install by an older hookbus, or with another "
        f"--home, moved none), so none was put back; {_backups_said(shown, None)}"
    )
    return 0
