"""Shared by the attack suite (tests/adversarial): who the attacker is, and the figures.

Every test here is an attack on one promise of the security model in docs/security.md
(1-7: the core; 8: hookbus's own trouble is never a host's allow; 9: every bound holds in
bytes, the same on every path; 10: what hookbus shows is what is enforced). It counts itself as tried
when it starts and as held when its assertions pass; tests/conftest.py prints the rows
after the run (``make test``) and ``make stress`` prints them in its summary.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from typing import Iterator

import pytest

#: Full sizes under `make stress`; quick ones under `make test`.
FULL = os.environ.get("HOOKBUS_STRESS") == "1"

#: "promise 1: attacks tried", "promise 1: attacks held", and measured figures.
FIGURES: Counter[str] = Counter()

#: Another local user: not root, not us. Root can chown files to it.
FOREIGN_UID = 4242
ME = os.geteuid()

needs_root = pytest.mark.skipif(ME != 0, reason="only root can make files owned by another user")


def scale(fast: int, full: int) -> int:
    return full if FULL else fast


@contextlib.contextmanager
def attack(promise: int, name: str) -> Iterator[None]:
    """Count one attack on ``promise`` (1-10): tried on entry, held when the block passes."""
    FIGURES[f"promise {promise}: attacks tried"] += 1
    yield
    FIGURES[f"promise {promise}: attacks held"] += 1
