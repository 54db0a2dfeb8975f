"""The wire protocol's error codes and limits, at the path docs/protocol.md names:
``hookbus.serve.protocol`` holds them."""

from __future__ import annotations

from hookbus.serve.protocol import *  # noqa: F403
