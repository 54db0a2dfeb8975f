"""Where the organization's managed directory is, and what a watcher polls of it.

The managed directory is laid out like a home (``hooks/<id>/hook.json``, ``settings.json``,
``config/``) and is deployed by the organization's configuration management. Root must own
it, everything in it and every directory above it, and none of them may be writable by
group or others: then no user of the machine can change what runs for everyone.

``$HOOKBUS_MANAGED_DIR`` names it, for tests and for a fleet that keeps it elsewhere; but
never instead of a ``/etc/vix`` that exists, since the environment is the user's to set and
must not move the organization's directory away.

Built-in modules only: ``hookbus emit``'s quick path reads ``managed_identity`` on its way
to a server.
"""

from __future__ import annotations

import os
import stat

from hookbus.homepath import kernel_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

#: Where an organization deploys its managed hooks.
DEFAULT_MANAGED_DIR = "/etc/vix"
MANAGED_DIR_VARIABLE = "HOOKBUS_MANAGED_DIR"
#: Entries of the managed directory a poll looks at, at most: a managed tier holds a few
#: guards, and one past this is re-read whole on every reload instead of polled.
MAX_POLLED_ENTRIES = 2_000


def managed_root(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The managed directory's absolute path, and why ``$HOOKBUS_MANAGED_DIR`` is ignored
    when it is (None otherwise)."""
    environ = os.environ if environ is None else environ
    given = environ.get(MANAGED_DIR_VARIABLE, "")
    default = DEFAULT_MANAGED_DIR
    if not given:
        return default, None
    chosen = kernel_path(os.path.expanduser(given))
    if chosen != default and os.path.lexists(default):
        why = (
            f"{MANAGED_DIR_VARIABLE}={given} is ignored: {default} exists, and the environment "
            f"cannot move the organization's managed directory away from it"
        )
        return default, why
    return chosen, None


def managed_identity(environ: Mapping[str, str] | None = None) -> str:
    """The managed tier a bus started here would load, as a client and a server compare
    it: the managed directory's path when it exists, else ``""``."""
    root, _ = managed_root(environ)
    return root if os.path.isdir(root) else ""


def managed_signature(root: str) -> object:
    """What a poll compares to know that the managed directory changed: who owns each
    directory on the way to it and their modes, and the lstat of everything in it (a few
    dozen entries). A directory that does not exist is one value; so is one too big to
    poll, whose reloads then come from its settings.json and its top directory alone."""
    try:
        chain = []
        path = root
        while True:
            info = os.lstat(path)
            chain.append((path, info.st_ino, info.st_mode, info.st_uid))
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    except OSError as exc:
        return ("absent", exc.errno)
    entries: list[tuple[str, int, int, int, int, int]] = []
    pending = [root]
    while pending and len(entries) <= MAX_POLLED_ENTRIES:
        directory = pending.pop()
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    entries.append((entry.path, info.st_ino, info.st_mode, info.st_uid, info.st_size, info.st_mtime_ns))
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
        except OSError as exc:
            entries.append((directory, -1, exc.errno or 0, 0, 0, 0))
    return tuple(chain), tuple(sorted(entries))
