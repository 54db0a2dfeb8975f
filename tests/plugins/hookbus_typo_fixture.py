"""An installed plugin with a misspelled hookimpl (``hookbus_recod``), as a new author writes
one: tests/test_plugins.py hands it to the bus as the entry point ``typo``."""

from __future__ import annotations

from typing import Any

from hookbus import hookimpl


@hookimpl
def hookbus_recod(record: Any) -> None:
    pass
