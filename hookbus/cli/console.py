"""Logging for the command line: hookbus's log lines with their escape sequences shown,
not obeyed by the terminal (a hook's error can quote a model's output)."""

from __future__ import annotations

import logging
from typing import TextIO

from hookbus.terminal import printable


class PrintableFormatter(logging.Formatter):
    """Log lines for a terminal: the message's escape sequences shown, not obeyed."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), keep="\n")


def log_to_stderr() -> None:
    """Warnings and errors as ``hookbus: message`` lines on stderr."""
    import sys

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PrintableFormatter("hookbus: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def log_everything_to(stream: TextIO) -> None:
    """Every hookbus log line, info included, timestamped, on ``stream`` alone."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(PrintableFormatter("%(asctime)s.%(msecs)03d %(message)s", "%H:%M:%S"))
    log = logging.getLogger("hookbus")
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False
