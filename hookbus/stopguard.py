"""Claude Code's loop guard for Stop hooks, for hosts that do not send it.

Claude Code tells a Stop (or SubagentStop) hook ``stop_hook_active: true`` when the agent
is stopping again after a Stop hook made it go on, so that a gate that keeps the agent
going once lets the next stop through. vixd's envelope has no such field, and without it
such a gate would never let the agent stop. So the bus remembers, for each thread (and
subagent), whether it answered its last stop with ``continue_with``; a ``claude-code``
dialect hook then sees ``stop_hook_active: true`` where Claude Code would send it, unless
the envelope says already. Where the bus knows of no such stop, the field is left out
rather than false: a hook that finds no flag knows its host keeps none.
"""

from __future__ import annotations

import threading
from typing import Any, Mapping

from hookbus.decision import Decision
from hookbus.events import CONTINUE_EVENTS

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
    import hashlib  # Stop events only: the CLI's other verbs never pay for it

    digest = hashlib.blake2b(digest_size=DIGEST_BYTES, person=b"hookbus-stops")
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
        self._continued: dict[bytes, None] = {}
        self._lock = threading.Lock()

    def active(self, event: str, envelope: Mapping[str, Any]) -> bool:
        """Claude Code's ``stop_hook_active`` for this stop: whether the last stop of the
        same thread was answered "go on"."""
        key = _key(event, envelope) if event in CONTINUE_EVENTS else None
        return key is not None and key in self._continued

    def answered(self, event: str, envelope: Mapping[str, Any], decision: Decision) -> None:
        """Remember how the bus answered this stop."""
        if event not in CONTINUE_EVENTS:
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
