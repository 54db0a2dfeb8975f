"""Reporting a recurring failure once, not once per emit, on the ``hookbus`` logger."""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger("hookbus")


class ReportOnce:
    """Logs the first failure of each kind and, when it stops failing, that it recovered."""

    def __init__(self, log: logging.Logger = logger) -> None:
        self._log = log
        self._failing: set[str] = set()
        self._lock = threading.Lock()

    def failed(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._failing:
                return
            self._failing.add(key)
        self._log.error("%s (reported once until it recovers)", message)

    def succeeded(self, key: str) -> None:
        if not self._failing or key not in self._failing:  # the common case costs no lock
            return
        with self._lock:
            if key not in self._failing:
                return
            self._failing.discard(key)
        self._log.warning("%s: recovered", key)
