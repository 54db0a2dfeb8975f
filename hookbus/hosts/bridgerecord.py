"""What ``--install-bridge`` moved out of a Claude Code settings.json, kept in the home so
that ``--uninstall-bridge`` can put it back.

One JSON file per settings file, ``HOME/bridged/claude-code-<digest>.json``, named by a
digest of the settings file's real path (which the record also holds, and which is checked
on reading). It lives in the home, beside ``hooks/`` and not in it, so the loader never
reads it as a hook, and not in the settings file, which Claude Code validates. The
directory is 0700 and the file 0600, replaced in one rename: it holds the hooks' commands.

A record that is not hookbus's (a link, another user's, one others may write, another
file's, one that does not parse as below) is never acted on: ``load_record`` says why.

    {"format": "hookbus bridge record", "version": 1, "host": "claude-code",
     "file": "/real/path/.claude/settings.json",
     "hooks_existed": true, "events_before": ["PreToolUse", "SessionEnd"],
     "env": {"existed": false, "before": null, "written": "<sha256 of the token>"},
     "backups": ["/real/path/.claude/settings.json.bak"],
     "steps": [{"events": {"PreToolUse": {
         "groups": [<the event's groups before the step, without the bridge>],
         "moved": [{"group": 0, "entry": 1, "hook_id": "pretooluse-bash-lint-sh",
                    "hook": {<its hook.json>}, "created": true}]}}}]}

Each install that moves something adds a step; ``--uninstall-bridge`` undoes them last
first. ``created``: the install made that hook directory (false: it held the same hook
already, so it is not the install's to remove). ``env``: the token the install wrote into
the settings file's ``env`` (its digest: the token itself is in ``HOME/run``), and what was
there before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hookbus.hosts.settingsfile import ImportFailed, make_directory, write_atomically

FORMAT = "hookbus bridge record"
VERSION = 1
#: The home's directory of records.
DIRECTORY = "bridged"
#: The ids an import gives: lowercase words joined by dashes, at most 48 characters.
_HOOK_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_DIGEST = re.compile(r"[0-9a-f]{64}")
#: What a record may weigh: it holds a settings file's hooks, which are small.
MAX_BYTES = 16 * 1024 * 1024


@dataclass
class MovedEntry:
    """One entry moved out of the settings file, and the hook it became."""

    group: int
    entry: int
    hook_id: str
    hook: dict[str, Any]
    created: bool


@dataclass
class EventStep:
    """One event's groups before a step (the bridge taken out), and what moved out of them."""

    groups: list[Any]
    moved: list[MovedEntry]


@dataclass
class Step:
    events: dict[str, EventStep] = field(default_factory=dict)


@dataclass
class EnvRecord:
    """The token the install wrote into the settings file's env."""

    #: Whether the settings file had an ``env`` object before.
    existed: bool
    #: The variable's value before (None: it had none).
    before: str | None
    #: sha256 of the value written.
    written: str


@dataclass
class Record:
    file: str
    hooks_existed: bool
    events_before: list[str]
    env: EnvRecord | None = None
    backups: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    def created_hooks(self) -> dict[str, dict[str, Any]]:
        """The hooks the installs made in the home: id -> hook.json's content."""
        return {moved.hook_id: moved.hook for step in self.steps for event in step.events.values() for moved in event.moved if moved.created}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def record_path(home: str | os.PathLike[str], file: str) -> Path:
    """Where the record of the settings file at real path ``file`` is."""
    return Path(home) / DIRECTORY / f"claude-code-{digest(file)[:40]}.json"


@dataclass
class Loaded:
    """What ``load_record`` found: the record, or why there is none to act on."""

    path: Path
    record: Record | None = None
    #: Why the file there is not a record to act on; None when it is, or is missing.
    problem: str | None = None

    @property
    def missing(self) -> bool:
        return self.record is None and self.problem is None


def _owned_privately(path: Path, kind: str) -> str | None:
    """Why ``path`` (not followed) is not this user's own ``kind`` that others cannot write."""
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        return f"it is a symbolic link (to {os.readlink(path)}), not the {kind} hookbus made"
    wanted = stat.S_ISDIR if kind == "directory" else stat.S_ISREG
    if not wanted(status.st_mode):
        return f"it is not a {kind}"
    if status.st_uid != os.geteuid():
        return f"it belongs to another user (uid {status.st_uid})"
    if status.st_mode & 0o022:
        return f"others may write it (mode {stat.S_IMODE(status.st_mode):04o})"
    return None


def load_record(home: str | os.PathLike[str], file: str) -> Loaded:
    """The record of the settings file at real path ``file``; never raises."""
    path = record_path(home, file)
    loaded = Loaded(path)
    if not os.path.lexists(path):
        if os.path.lexists(path.parent):
            problem = _check_directory(path.parent)
            if problem is not None:
                loaded.problem = f"{path.parent}: {problem}"
        return loaded
    try:
        problem = _check_directory(path.parent) or _owned_privately(path, "file")
        if problem is not None:
            loaded.problem = problem if problem.startswith(str(path.parent)) else f"{path}: {problem}"
            return loaded
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        loaded.problem = f"{path}: cannot read it: {exc.strerror or exc}"
        return loaded
    if len(data) > MAX_BYTES:
        loaded.problem = f"{path}: larger than a record hookbus writes"
        return loaded
    try:
        loaded.record = parse_record(json.loads(data.decode("utf-8")), file)
    except (ValueError, RecursionError) as exc:
        loaded.problem = f"{path}: not a record hookbus wrote ({exc})"
    return loaded


def _check_directory(directory: Path) -> str | None:
    problem = _owned_privately(directory, "directory")
    return None if problem is None else f"{directory}: {problem}"


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(what)


def parse_record(document: Any, file: str) -> Record:
    """The record in ``document``; ValueError saying what is wrong with it."""
    _expect(isinstance(document, dict), "not an object")
    _expect(document.get("format") == FORMAT and document.get("version") == VERSION, f'no "format": "{FORMAT}", "version": {VERSION}')
    _expect(document.get("host") == "claude-code", 'no "host": "claude-code"')
    _expect(isinstance(document.get("file"), str), '"file" is not a path')
    _expect(document["file"] == file, f"it is the record of {document['file']}, not of {file}")
    _expect(isinstance(document.get("hooks_existed"), bool), '"hooks_existed" is not true or false')
    events_before = document.get("events_before")
    _expect(isinstance(events_before, list) and all(isinstance(name, str) for name in events_before), '"events_before" is not a list of names')
    backups = document.get("backups")
    _expect(isinstance(backups, list) and all(isinstance(name, str) for name in backups), '"backups" is not a list of paths')
    record = Record(file, document["hooks_existed"], list(events_before), backups=list(backups))
    env = document.get("env")
    if env is not None:
        _expect(isinstance(env, dict) and isinstance(env.get("existed"), bool), '"env" is not an object with "existed"')
        _expect(env.get("before") is None or isinstance(env.get("before"), str), '"env.before" is not a string')
        _expect(isinstance(env.get("written"), str) and bool(_DIGEST.fullmatch(env["written"])), '"env.written" is not a sha256')
        record.env = EnvRecord(env["existed"], env.get("before"), env["written"])
    steps = document.get("steps")
    _expect(isinstance(steps, list), '"steps" is not a list')
    seen: set[str] = set()
    for number, step in enumerate(steps):
        where = f"steps[{number}]"
        _expect(isinstance(step, dict) and isinstance(step.get("events"), dict), f"{where} has no events")
        parsed = Step()
        for event, value in step["events"].items():
            at = f"{where}.events.{event}"
            _expect(isinstance(value, dict) and isinstance(value.get("groups"), list), f"{at} has no groups")
            _expect(isinstance(value.get("moved"), list) and bool(value["moved"]), f"{at} moved nothing")
            groups: list[Any] = value["groups"]
            moved = [_parse_moved(item, groups, f"{at}.moved[{index}]") for index, item in enumerate(value["moved"])]
            places = [(item.group, item.entry) for item in moved]
            _expect(len(set(places)) == len(places), f"{at} moves an entry twice")
            for item in moved:
                if item.created:
                    _expect(item.hook_id not in seen, f"{at}: hook {item.hook_id} is made twice")
                    seen.add(item.hook_id)
            parsed.events[event] = EventStep(groups, moved)
        record.steps.append(parsed)
    return record


def _parse_moved(item: Any, groups: list[Any], at: str) -> MovedEntry:
    _expect(isinstance(item, dict), f"{at} is not an object")
    group, entry, hook_id, hook, created = (item.get(key) for key in ("group", "entry", "hook_id", "hook", "created"))
    _expect(isinstance(group, int) and not isinstance(group, bool) and 0 <= group < len(groups), f"{at}.group is not one of the groups")
    entries = groups[group].get("hooks") if isinstance(groups[group], dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{at}.group is not a group with hooks")
    _expect(isinstance(entry, int) and not isinstance(entry, bool) and 0 <= entry < len(entries), f"{at}.entry is not one of its hooks")
    _expect(isinstance(entries[entry], dict), f"{at}.entry is not a hook")
    _expect(isinstance(hook_id, str) and len(hook_id) <= 48 and bool(_HOOK_ID.fullmatch(hook_id)), f"{at}.hook_id is not an id hookbus gives")
    _expect(isinstance(hook, dict) and hook.get("id") == hook_id, f"{at}.hook is not that hook's hook.json")
    _expect(isinstance(created, bool), f"{at}.created is not true or false")
    return MovedEntry(group, entry, hook_id, hook, created)


def record_document(record: Record) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "host": "claude-code",
        "file": record.file,
        "hooks_existed": record.hooks_existed,
        "events_before": record.events_before,
        "env": None if record.env is None else {"existed": record.env.existed, "before": record.env.before, "written": record.env.written},
        "backups": record.backups,
        "steps": [
            {"events": {
                event: {
                    "groups": value.groups,
                    "moved": [
                        {"group": item.group, "entry": item.entry, "hook_id": item.hook_id, "hook": item.hook, "created": item.created}
                        for item in value.moved
                    ],
                }
                for event, value in step.events.items()
            }}
            for step in record.steps
        ],
    }


def save_record(path: Path, record: Record) -> None:
    """Write ``record`` at ``path`` in one rename, 0600, in a 0700 directory of this user's
    (made when missing); ImportFailed when the directory is not one hookbus may write to."""
    make_directory(path.parent, 0o700)
    problem = _check_directory(path.parent)
    if problem is not None:
        raise ImportFailed([f"{problem}: hookbus keeps there what --install-bridge moved; remove it or fix it (chmod 700), then run this again"])
    write_atomically(path, json.dumps(record_document(record), indent=2, ensure_ascii=False) + "\n", 0o600)


def read_bytes(path: Path) -> bytes | None:
    """What the file at ``path`` holds now (not followed); None when nothing is there."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        return handle.read()
