"""Where a ``hookbus`` console script installed before the edges moved into packages
starts: ``hookbus.serve.quickpath`` holds it now."""

from __future__ import annotations

from hookbus.serve.quickpath import main as main
