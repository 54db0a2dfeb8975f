"""Changing policy safely: a hook's fixtures (``hookbus test``).

Part of the engine: it runs hooks through ``HookBus.test_fire`` and imports no edge.
"""

from __future__ import annotations
