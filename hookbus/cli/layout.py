"""What in ``hooks/`` looks meant to be a hook but is none: a directory without a spec, a
spec by another name (``hook.yml``, ``Hook.json``, ``hook.json.bak``), a spec file where a
directory should be. The loader passes over these silently, as it must (an editor's
half-made directory is no error); ``hookbus validate`` says what it saw, so that a hook
that never fires is not a mystery.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from hookbus.files import is_ignored_name
from hookbus.registry import SPEC_NAMES

_SPECS = tuple(name for name, _ in SPEC_NAMES)


def _intended_spec(name: str) -> bool:
    """Whether a file name reads as a try at ``hook.json`` or ``hook.yaml``."""
    lowered = name.lower()
    return lowered.startswith("hook.") or lowered in ("hook", "hooks.json", "hooks.yaml", "hook_json")


def _spelling(name: str) -> str:
    return "hook.yaml" if "y" in name.lower().split(".", 1)[-1][:2] else "hook.json"


def layout_findings(hooks_dir: Path) -> list[str]:
    """One message per entry of ``hooks_dir`` that is meant as a hook and is none (paths
    relative to the home). Nothing when the directory is missing or unreadable (the
    loader reports those)."""
    try:
        names = sorted(os.listdir(hooks_dir))
    except OSError:
        return []
    findings = []
    for name in names:
        if is_ignored_name(name) and not _intended_spec(name):
            continue
        path = hooks_dir / name
        try:
            info = os.lstat(path)
        except OSError:
            continue
        where = f"hooks/{name}"
        if not stat.S_ISDIR(info.st_mode):
            if _intended_spec(name):
                findings.append(f"{where}: a spec file directly in hooks/: a hook is a directory; move it to hooks/<id>/{_spelling(name)}")
            continue
        if is_ignored_name(name):
            continue
        try:
            entries = os.listdir(path)
        except OSError:
            continue  # the loader says why it cannot be read
        if any(entry in _SPECS for entry in entries):
            continue
        misnamed = sorted(entry for entry in entries if _intended_spec(entry))
        if misnamed:
            found = ", ".join(misnamed)
            findings.append(f"{where}: no hook.json or hook.yaml, so it is no hook; found {found}: rename it to {_spelling(misnamed[0])}")
        else:
            findings.append(f"{where}: no hook.json or hook.yaml, so it is no hook")
    return findings
