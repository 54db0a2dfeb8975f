"""The ``hookbus`` command line: its verbs (``verbs``), what they share (``core``), and how
they print for people (``console``, ``tables``, ``views``) and for a newcomer (``demo``).

An edge of the engine: it imports hookbus's core, and nothing of the core imports it.
``main`` is imported on first call, so that importing ``hookbus.cli.tables`` (say) costs
no argparse.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Sequence


def main(argv: Sequence[str] | None = None, *, undecided: str | None = None) -> int:
    """The full ``hookbus`` command line (``hookbus.cli.verbs.main``)."""
    from hookbus.cli.verbs import main as run

    return run(argv, undecided=undecided)
