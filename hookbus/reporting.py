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
    """

    def __init__(self, log: logging.Logger = logger, quiet_seconds: float = QUIET_SECONDS) -> None:
        self._log = log
        self._quiet = quiet_seconds
        self._failing: set[str] = set()
        self._reported_at: dict[str, float] = {}
        self._recovery_told: set[str] = set()
        self._lock = threading.Lock()

    def failed(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._failing:
                return
            self._failing.add(key)
            now = time.monotonic()
            last = self._reported_at.get(key)
            if last is not None and now - last < self._quiet:
                return  # flapping: it was said a moment ago
            self._reported_at[key] = now
            self._recovery_told.discard(key)
        self._log.error("%s (reported once until it recovers)", message)

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
        self._log.warning("%s: recovered", key)
