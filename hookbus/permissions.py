"""sshd-style StrictModes for hook files: only you (or root) may decide what runs as you.

``owner_refusal`` and ``loose_refusal`` are the two checks; every file hookbus must not
obey (or write through) when another user could change it goes through them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: settings.json key that relaxes the mode check (never the ownership check).
STRICT_MODES_SETTING = "hooks_strict_modes"


def owner_refusal(info: os.stat_result, root_only: bool = False) -> str | None:
    """``is owned by uid N, not by you (uid M) or root``, or None when you or root own it.
    ``root_only`` (the managed directory, which decides what runs for every user): ``is
    owned by uid N, not by root``, or None when root owns it."""
    if root_only:
        return None if info.st_uid == 0 else f"is owned by uid {info.st_uid}, not by root"
    me = os.geteuid()
    if info.st_uid in (me, 0):
        return None
    return f"is owned by uid {info.st_uid}, not by you (uid {me}) or root"


def loose_refusal(info: os.stat_result) -> str | None:
    """``is writable by group (mode 0664)``, or None when only its owner can write it."""
    loose = info.st_mode & 0o022
    if not loose:
        return None
    who = {0o022: "group and others", 0o020: "group", 0o002: "others"}[loose]
    return f"is writable by {who} (mode {stat.S_IMODE(info.st_mode):04o})"


def check_permissions(
    path: Path, info: os.stat_result, strict_modes: bool = True, relaxable: bool = True, root_only: bool = False
) -> tuple[str | None, str | None]:
    """``(refusal, warning)`` for a file or directory that decides what runs, given the
    stat of what was opened.

    Refused: owned by a user other than this process's or root, or (with strict modes)
    writable by group or others. With strict modes off, the latter loads with a warning.
    ``relaxable`` says whether the settings.json escape hatch applies (only to hooks).
    ``root_only``: a file of the managed directory, which root must own, strictly.
    """
    if root_only:
        return _managed_refusal(path, info), None
    foreign = owner_refusal(info)
    if foreign is not None:
        me = os.geteuid()
        return f"{foreign}; hooks run as you, so only you may define them: run `chown {me} {path}`", None
    what = loose_refusal(info)
    if what is None:
        return None, None
    if strict_modes or not relaxable:
        hatch = f' (or set "{STRICT_MODES_SETTING}": false in settings.json)' if relaxable else ""
        return f"{what}, who could then decide what runs as you: run `chmod go-w {path}`{hatch}", None
    return None, f'{what}; loaded because settings.json sets "{STRICT_MODES_SETTING}": false'


def _managed_refusal(path: Path, info: os.stat_result) -> str | None:
    foreign = owner_refusal(info, root_only=True)
    if foreign is not None:
        return f"{foreign}; managed hooks run for every user, so only root may define them: run `chown root {path}`"
    what = loose_refusal(info)
    if what is not None:
        return f"{what}, who could then decide what runs for every user: run `chmod go-w {path}`"
    return None
