"""Reporting a recurring failure once, not once per emit, on the ``hookbus`` logger."""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("hookbus")

#: A failure that comes back within this long of being reported stays quiet: a disk that is
#: nearly full fails every other write, and must not fill the daemon's log instead.
QUIET_SECONDS = 60.0


class ReportOnce:
    """Logs the first failure of each kind, and once that it recovered.

    A failure that returns within QUIET_SECONDS of its last report (flapping) is not logged
    again, nor is its next recovery; after that quiet period it is reported afresh.

    A failure that loses something (a record the disk refused) says so with ``lost``: the
    losses are counted by key (``lost_by_key``), the report says how many so far, and the
    recovery how many were lost since the last recovery was told.
    """

    def __init__(self, log: logging.Logger = logger, quiet_seconds: float = QUIET_SECONDS) -> None:
        self._log = log
        self._quiet = quiet_seconds
        self._failing: set[str] = set()
        self._reported_at: dict[str, float] = {}
        self._recovery_told: set[str] = set()
        #: What each key lost since its last recovery was told.
        self._lost: dict[str, int] = {}
        self.lost_by_key: dict[str, int] = {}
        self._lock = threading.Lock()

    def failed(self, key: str, message: str, lost: int = 0) -> None:
        with self._lock:
            if lost:
                self.lost_by_key[key] = self.lost_by_key.get(key, 0) + lost
                lost = self._lost[key] = self._lost.get(key, 0) + lost
            if key in self._failing:
                return
            self._failing.add(key)
            now = time.monotonic()
            last = self._reported_at.get(key)
            if last is not None and now - last < self._quiet:
                return  # flapping: it was said a moment ago
            self._reported_at[key] = now
            self._recovery_told.discard(key)
        so_far = f"; {_count(lost)} lost so far" if lost else ""
        self._log.error("%s%s (reported once until it recovers)", message, so_far)

    @property
    def any_failing(self) -> bool:
        """Whether anything is failing now (read without the lock: a hint for hot paths)."""
        return bool(self._failing)

    def succeeded(self, key: str) -> None:
        if not self._failing or key not in self._failing:  # the common case costs no lock
            return
        with self._lock:
            if key not in self._failing:
                return
            self._failing.discard(key)
            if key in self._recovery_told:
                return
            self._recovery_told.add(key)
            lost = self._lost.pop(key, 0)
        meanwhile = f"; {_count(lost, were=True)} lost meanwhile" if lost else ""
        self._log.warning("%s: recovered%s", key, meanwhile)


def _count(records: int, were: bool = False) -> str:
    noun = "record" if records == 1 else "records"
    verb = (" was" if records == 1 else " were") if were else ""
    return f"{records} {noun}{verb}"
