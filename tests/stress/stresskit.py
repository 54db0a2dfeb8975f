"""Shared by the reliability suite: its scale, its figures, and what a run left behind.

``make stress`` sets HOOKBUS_STRESS=1 for the full sizes; ``make test`` runs the same tests
at a fast size. Every test adds its figures to ``FIGURES``; tests/conftest.py prints them.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter
from pathlib import Path

#: Full sizes under `make stress`; quick ones under `make test`.
FULL = os.environ.get("HOOKBUS_STRESS") == "1"

#: "faults injected", "faults survived", "specs fuzzed", "emits under load", ...
FIGURES: Counter[str] = Counter()

#: Every hook process of this test session carries this in its environment (hooks inherit
#: the bus's environment), so leftovers can be found, setsid'd escapees included.
MARKER = "HOOKBUS_STRESS_SESSION"
os.environ.setdefault(MARKER, uuid.uuid4().hex)


def scale(fast: int, full: int) -> int:
    return full if FULL else fast


def live_hook_processes() -> list[int]:
    """Pids of living (not zombie) processes started by hooks of this session."""
    needle = f"{MARKER}={os.environ[MARKER]}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if needle not in Path(f"/proc/{name}/environ").read_bytes():
                continue
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(name))
    return found


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def thread_count() -> int:
    return threading.active_count()
