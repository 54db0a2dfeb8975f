"""The Python clients of ``hookbus serve``, at the path they were first published under:
``hookbus.serve.client`` holds them."""

from __future__ import annotations

from hookbus.serve.client import *  # noqa: F403
from hookbus.serve.client import __all__ as __all__
