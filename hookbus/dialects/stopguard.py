"""Claude Code's loop guard for Stop hooks, for hosts that do not send it.

Claude Code tells a Stop (or SubagentStop) hook ``stop_hook_active: true`` when the agent
is stopping again after a Stop hook made it go on, so that a gate that keeps the agent
going once lets the next stop through. vixd's envelope has no such field, and without it
such a gate would never let the agent stop. So the bus remembers, for each thread (and
subagent), whether it answered its last stop with ``continue_with``; a ``claude-code``
dialect hook then sees ``stop_hook_active: true`` where Claude Code would send it, unless
the envelope says already. Where the bus knows of no such stop, the field is left out
rather than false: a hook that finds no flag knows its host keeps none.

Gemini CLI sends ``stop_hook_active: false`` on every AfterAgent, even after a hook kept the
agent going, and each of its hook calls is a process of its own, which a bus's memory does
not outlive. So ``hookbus gemini-cli-hook`` keeps the same memory on disk
(``remembered_stop``, ``remember_stop``), whether a server or the bridge's own process ran
the hooks, and puts ``stop_hook_active: true`` into the envelope itself, for every hook,
native or dialect. It is one file per session that was told "go on" (holding how many
stops in a row were, past the first, which ``hookbus codex-hook`` bounds), named by the
digest of its ids, in a directory private to the user:
``$XDG_RUNTIME_DIR/hookbus/stops`` (a per-user tmpfs, gone at logout) when that is set,
else ``$XDG_STATE_HOME/hookbus/stops`` (``~/.local/state/hookbus/stops``). Not the home:
the bridge meets the host's envelope before it knows which home it serves, on its quick
way to a server. A directory another user could change, or a link, is not used: hooks
then see no flag, as without the memory. At most MAX_REMEMBERED_FILES entries, the
oldest forgotten first; a stop answered "stop" removes its entry; a full disk means
forgetting, said once on stderr.

Built-in modules only: the bridge uses this on its way to a server.
"""

from __future__ import annotations

import os
import stat  # os imports it already: free
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

    from hookbus.decision import Decision

#: Threads remembered at most; the oldest are forgotten first.
MAX_REMEMBERED = 10_000
#: Each is remembered by a digest of this many bytes, never by the ids as sent: a host (or a
#: client of ``hookbus serve``) may send thread ids of a megabyte, and the memory must not
#: keep them. With the dict's own slot, an entry costs about ENTRY_BYTES.
DIGEST_BYTES = 16
ENTRY_BYTES = 160
#: The most the memory holds: MAX_REMEMBERED entries (some 1.6 MB), whatever the ids sent.
MAX_BYTES = MAX_REMEMBERED * ENTRY_BYTES


def _key(event: str, envelope: Mapping[str, Any]) -> bytes | None:
    """Which stop this is: a digest of the exact event, thread and subagent; None when the
    envelope names them with values that cannot be told apart as text."""
    parts = [event]
    for field in ("thread_id", "agent_id"):
        value = envelope.get(field)
        if value is not None and not isinstance(value, (str, int)):
            return None
        parts.append("" if value is None else str(value))
    try:  # the C core alone: hashlib would import OpenSSL's bindings, for one digest
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b

    digest = blake2b(digest_size=DIGEST_BYTES, person=b"hookbus-stops")
    for part in parts:
        # Each part with its length first, so that no two triples give the same bytes (a
        # separator could be inside an id); surrogatepass: a lone surrogate is text too.
        encoded = part.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.digest()


class StopMemory:
    """The stops the bus answered with ``continue_with``, by thread; thread-safe. It holds
    at most MAX_REMEMBERED digests (MAX_BYTES), however long the ids it was sent."""

    def __init__(self) -> None:
        import threading

        from hookbus.events import CONTINUE_EVENTS

        self._events = CONTINUE_EVENTS
        self._continued: dict[bytes, None] = {}
        self._lock = threading.Lock()

    def active(self, event: str, envelope: Mapping[str, Any]) -> bool:
        """Claude Code's ``stop_hook_active`` for this stop: whether the last stop of the
        same thread was answered "go on"."""
        key = _key(event, envelope) if event in self._events else None
        return key is not None and key in self._continued

    def answered(self, event: str, envelope: Mapping[str, Any], decision: Decision) -> None:
        """Remember how the bus answered this stop."""
        if event not in self._events:
            return
        key = _key(event, envelope)
        if key is None:
            return
        with self._lock:
            self._continued.pop(key, None)
            if decision.continue_with is not None:
                self._continued[key] = None
                if len(self._continued) > MAX_REMEMBERED:
                    del self._continued[next(iter(self._continued))]


# -- the same memory on disk, for a host's one-process-per-event bridge ---------------------

#: Sessions remembered on disk at most (one empty file each); the oldest are forgotten.
MAX_REMEMBERED_FILES = 1_000
#: An entry older than this is stale (a session that ended while told to go on, resumed a
#: day later): not taken for this stop's flag.
MAX_AGE_SECONDS = 24 * 3600.0


def stop_memory_directory(environ: Mapping[str, str]) -> str | None:
    """Where the Stop memory of the bridges is kept; None when the environment names no
    absolute place for it (no HOME, say)."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and _is_own_directory(runtime):
        return os.path.join(runtime, "hookbus", "stops")
    state = environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        home = environ.get("HOME") or os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        state = os.path.join(home, ".local", "state")
    return os.path.join(state, "hookbus", "stops")


def _is_own_directory(path: str) -> bool:
    """Whether ``path`` is a directory of this user's (root with another user's
    XDG_RUNTIME_DIR, from sudo -E, leaves that user's directory alone)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def remembered_stop(environ: Mapping[str, str], event: str, envelope: Mapping[str, Any]) -> bool:
    """Whether the last stop of this session (of the event, thread and subagent of
    ``envelope``) was answered "go on", as ``remember_stop`` kept it. False whenever the
    memory cannot say: a missing, unsafe or unreadable directory."""
    key = _key(event, envelope)
    if key is None:
        return False
    descriptor, _ = _open_memory(environ, create=False)
    if descriptor is None:
        return False
    try:
        info = os.stat(key.hex(), dir_fd=descriptor, follow_symlinks=False)
    except OSError:
        return False
    finally:
        os.close(descriptor)
    fresh = time.time() - info.st_mtime < MAX_AGE_SECONDS
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and fresh


def remembered_rounds(environ: Mapping[str, str], event: str, envelope: Mapping[str, Any]) -> int:
    """How many stops of this session in a row were answered "go on", as ``remember_stop``
    counted them; 0 whenever the memory cannot say."""
    if not remembered_stop(environ, event, envelope):
        return 0
    key = _key(event, envelope)
    descriptor, _ = _open_memory(environ, create=False)
    if key is None or descriptor is None:
        return 0
    try:
        entry = os.open(key.hex(), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=descriptor)
    except OSError:
        return 0
    finally:
        os.close(descriptor)
    try:
        text = os.read(entry, 16)
    except OSError:
        return 0
    finally:
        os.close(entry)
    # An entry of an older hookbus is empty: one round.
    return int(text) if text.isdigit() else 1


def remember_stop(
    environ: Mapping[str, str], event: str, envelope: Mapping[str, Any], continued: bool, rounds: int = 1
) -> str | None:
    """Keep how this stop was answered: ``continued`` ("go on") makes its entry, holding
    ``rounds`` (how many stops in a row were), anything else removes it. None when done (or
    nothing needed doing); else why it could not be kept, for one line on stderr: the next
    stop then sees no flag."""
    key = _key(event, envelope)
    if key is None:
        return None
    descriptor, why = _open_memory(environ, create=continued)
    if descriptor is None:
        return why if continued else None  # no memory: nothing to forget
    name = key.hex()
    try:
        if not continued:
            os.unlink(name, dir_fd=descriptor)
            return None
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        entry = os.open(name, flags, 0o600, dir_fd=descriptor)
        try:
            if rounds > 1:
                os.write(entry, str(rounds).encode())
        finally:
            os.close(entry)
        # Its time, to the nanosecond (the kernel's own is coarser): the newest, for the bound.
        now = time.time_ns()
        os.utime(name, ns=(now, now), dir_fd=descriptor, follow_symlinks=False)
        _forget_the_oldest(descriptor)
        return None
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        os.close(descriptor)


def _open_memory(environ: Mapping[str, str], create: bool) -> tuple[int | None, str]:
    """The memory's directory, open, when it is one only this user may use: a directory
    (not a link) this user owns, which no one else may read, write or enter; made (0700)
    when ``create``. Otherwise None, and why: another user's directory, or a planted
    link, is never used."""
    path = stop_memory_directory(environ)
    if path is None:
        return None, "no HOME or XDG_STATE_HOME says where to keep it"
    if create:
        try:
            os.makedirs(path, 0o700, exist_ok=True)
        except OSError as exc:
            return None, f"cannot make {path}: {exc.strerror or exc}"
    private = f"no private directory for it at {path}"
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None, private
    info = os.fstat(descriptor)
    if info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
        os.close(descriptor)
        return None, private
    return descriptor, ""


def _is_entry_name(name: str) -> bool:
    """Whether ``name`` is one ``remember_stop`` gives an entry: a digest, in hex."""
    return len(name) == 2 * DIGEST_BYTES and all(char in "0123456789abcdef" for char in name)


def _forget_the_oldest(descriptor: int) -> None:
    """Keep at most MAX_REMEMBERED_FILES entries: the oldest go first. Only entries are
    counted and removed (regular files named as ``remember_stop`` names them): whatever
    else the directory holds is not the memory's to remove."""
    names = [name for name in os.listdir(descriptor) if _is_entry_name(name)]
    if len(names) <= MAX_REMEMBERED_FILES:
        return
    aged = []
    for name in names:
        try:
            info = os.stat(name, dir_fd=descriptor, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            aged.append((info.st_mtime_ns, name))
    aged.sort()
    for _, name in aged[: len(aged) - MAX_REMEMBERED_FILES]:
        try:
            os.unlink(name, dir_fd=descriptor)
        except OSError:
            pass
