"""Where a home is, and what in the environment changes what its bus does.

The home is ``--home DIR``, else ``$VIX_HOME``, else ``~/.vix``, made absolute the way the
kernel reads it: one reading for every path (the bus, the socket a client looks for, the
server's check of the home a request names). A server has its own environment, so a client
whose environment sets a variable that changes what a bus does must run its hooks in its
own process, where it takes effect: ``in_process_reason`` says when, reading each variable
as the bus reads it (``hookbus.settings``, ``hookbus.plugins``).

Built-in modules only: ``hookbus emit``'s quick path to a server reads it.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


def home_root(explicit: str | os.PathLike[str] | None = None) -> str:
    """The home's absolute path: ``explicit``, else ``$VIX_HOME``, else ``~/.vix``. An empty
    one is no choice, as an empty variable is none: ``--home ''`` means what
    ``VIX_HOME=''`` does (not the working directory). ``..`` is resolved as the kernel
    resolves it (see ``kernel_path``), so that the bus, the socket's path and a server's
    check of the home all name the same directory."""
    given = os.fspath(explicit) if explicit is not None else ""
    chosen = given or os.environ.get("VIX_HOME") or "~/.vix"
    return kernel_path(os.path.expanduser(chosen))


def kernel_path(path: str) -> str:
    """``path`` made absolute with no ``..`` left in it, read as the kernel reads it: a
    ``..`` after a symbolic link leaves the link's target, not the link (so ``A/lnk/../h``
    is the ``h`` beside what ``lnk`` points to, not ``A/h``, which is what a lexical
    normalization such as os.path.abspath would say). What follows the last ``..`` is kept
    as written: its links are the trust checks' to follow, one hop at a time."""
    absolute = path if os.path.isabs(path) else os.path.join(os.getcwd(), path)
    parts = absolute.split(os.sep)
    if ".." not in parts:
        return os.path.normpath(absolute)  # without "..", only "." and extra slashes go
    last = len(parts) - 1 - parts[::-1].index("..")
    head = os.path.realpath(os.sep.join(parts[: last + 1]) or os.sep)
    tail = [part for part in parts[last + 1 :] if part not in ("", ".")]
    return os.path.join(head, *tail)


#: What VIX_DISABLE_HOOKS turns every hook off with.
TRUTHY = frozenset(("1", "true", "yes", "on"))


def in_process_reason(environ: Mapping[str, str]) -> str | None:
    """Why a client must run hooks in its own process, not through a server: ``environ``
    sets a variable that changes what a bus does, and a server has its own environment.
    Read exactly as the bus reads it (hookbus.settings, hookbus.plugins), so that a value
    that changes nothing there (``VIX_DISABLE_HOOKS=0``) sends nobody away from a server,
    and one that does (``HOOKBUS_LOAD_PLUGINS=''``: only the built-in plugins) always does."""
    if environ.get("VIX_DISABLE_HOOKS", "").strip().lower() in TRUTHY:
        return "VIX_DISABLE_HOOKS is set"
    if any(name.strip() for name in environ.get("HOOKBUS_DISABLE_PLUGINS", "").split(",")):
        return "HOOKBUS_DISABLE_PLUGINS is set"
    if "HOOKBUS_LOAD_PLUGINS" in environ:
        return "HOOKBUS_LOAD_PLUGINS is set"
    if environ.get("HOOKBUS_MANAGED_DIR"):
        return "HOOKBUS_MANAGED_DIR is set"
    return None
