"""What a test needs to run hookbus as another user (nobody, uid 65534), wherever the suite
runs from.

Tests that attack across users run hookbus as nobody, with this checkout and the venv's
packages on its PYTHONPATH. A checkout under a directory nobody may not enter (a 0700 home,
a ``mktemp -d`` folder) cannot be imported from there, and the failure would stand in for
the one the test means to provoke. So ``python_path`` gives nobody those paths themselves
when it can reach them, and otherwise a copy of what hookbus needs (its package, the
built-in plugins, its dependencies' files and its own entry points), made once per session
in a directory nobody can reach, root's and read-only to others, and removed at exit. When
there is no such directory, the test is skipped, saying which directory stops nobody.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import stat
import sysconfig
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

NOBODY = 65534
REPOSITORY = Path(__file__).resolve().parents[1]

#: The copy of this session, made on first use: its PYTHONPATH entries.
_copied: list[str] | None = None


def blocked_at(path: Path, uid: int = NOBODY, gid: int = NOBODY) -> Path | None:
    """The first directory on the way to ``path`` (``path`` too, when it is one) that
    ``uid`` may not enter; None when it can reach ``path``."""
    path = path.resolve()
    for directory in [*reversed(path.parents), path]:
        try:
            info = directory.stat()
        except OSError:
            return directory
        if not stat.S_ISDIR(info.st_mode):
            continue
        if info.st_uid == uid:
            allowed = info.st_mode & stat.S_IXUSR
        elif info.st_gid == gid:
            allowed = info.st_mode & stat.S_IXGRP
        else:
            allowed = info.st_mode & stat.S_IXOTH
        if not allowed:
            return directory
    return None


def python_path(uid: int = NOBODY, gid: int = NOBODY) -> list[str]:
    """The PYTHONPATH under which ``uid`` (in group ``gid``) imports this checkout's
    hookbus, the built-in plugins and hookbus's dependencies: these paths when it can reach
    them, else a copy (see the module's doc). Skips the test when neither can be had."""
    site_packages = Path(sysconfig.get_paths()["purelib"])
    own = [REPOSITORY, REPOSITORY / "plugins", site_packages]
    if all(blocked_at(path, uid, gid) is None for path in own):
        return [str(path) for path in own]
    global _copied
    if _copied is None:
        _copied = _copy_for(uid, gid, site_packages)
    return _copied


def _copy_for(uid: int, gid: int, site_packages: Path) -> list[str]:
    """A copy readable by everyone, so one copy serves every uid a session asks for."""
    place = next((Path(path) for path in _candidates() if blocked_at(Path(path), uid, gid) is None and os.access(path, os.W_OK)), None)
    if place is None:
        stopped = next(blocked for path in (REPOSITORY, site_packages) if (blocked := blocked_at(path, uid, gid)) is not None)
        pytest.skip(
            f"skipped: uid {uid} cannot enter {stopped} ({stat.S_IMODE(stopped.stat().st_mode):04o}), and no temporary "
            "directory it can reach was found to copy hookbus into"
        )
    root = Path(tempfile.mkdtemp(prefix="hookbus-for-another-user-", dir=place))
    atexit.register(shutil.rmtree, root, True)
    # The source tree's own layout: hookbus trusts built-in plugins from plugins/ beside its
    # package, and from nowhere else (hookbus.policy.plugintrust).
    source, packages = root / "source", root / "site-packages"
    plugins = source / "plugins"
    shutil.copytree(REPOSITORY / "hookbus", source / "hookbus", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPOSITORY / "plugins", plugins, ignore=shutil.ignore_patterns("__pycache__"))
    for distribution in _needed("hookbus"):
        for file in distribution.files or ():
            if file.name.endswith(".pth") or "__editable__" in file.name or "__pycache__" in file.parts:
                continue
            located = Path(str(distribution.locate_file(file)))
            if located.is_file() and site_packages in located.parents:
                target = packages / located.relative_to(site_packages)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(located, target)
    for directory, names, files in os.walk(root):
        os.chmod(directory, 0o755)
        for name in files:
            path = os.path.join(directory, name)
            os.chmod(path, 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644)
    return [str(source), str(plugins), str(packages)]


def _candidates() -> list[str]:
    """Where a copy may go: the temporary directory first, then the system's usual ones
    (a private TMPDIR, as macOS gives each user, is not one another user can reach)."""
    return [path for path in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm") if os.path.isdir(path)]


def _needed(name: str) -> list[metadata.Distribution]:
    """``name``'s distribution and every one it requires at run time, transitively (extras
    left out)."""
    found: dict[str, metadata.Distribution] = {}
    waiting = [name]
    while waiting:
        wanted = waiting.pop()
        key = re.sub(r"[-_.]+", "-", wanted).lower()
        if key in found:
            continue
        try:
            distribution = metadata.distribution(wanted)
        except metadata.PackageNotFoundError:
            continue  # a requirement of another platform or Python: not installed, not needed
        found[key] = distribution
        for requirement in distribution.requires or ():
            if "extra ==" in requirement:
                continue
            match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
            if match:
                waiting.append(match.group(0))
    return list(found.values())
