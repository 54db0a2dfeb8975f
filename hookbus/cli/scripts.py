"""The scripts a hook runs from its own directory, as ``hookbus validate`` (and ``install``)
report them: one line per script, starting with the hook's spec file.

The check itself is the engine's (``hookbus.policy.scripts``): the loader runs it on every
hook it loads, so that a script a fire would find broken is one of the hook's problems in
every view. What validate adds here is the one kind of finding that is no load problem:
a script that runs, but from outside the hook's directory, where hookbus checks nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from hookbus.policy.scripts import Use as Use
from hookbus.policy.scripts import check_scripts
from hookbus.policy.scripts import script_uses as script_uses
from hookbus.policy.scripts import split_words as split_words

if TYPE_CHECKING:
    from hookbus.runners import Hook


def script_findings(hook: Hook, home_root: Path, strict_modes: bool = True) -> list[str]:
    """One message per script of ``hook`` that a fire would find broken, or that is outside
    the hook's directory, each starting with the hook's spec file (relative to
    ``home_root`` when it is inside it): as the loader's problems print."""
    try:
        shown = str(hook.source.relative_to(home_root))
    except ValueError:
        shown = str(hook.source)
    root_only = hook.tier == "managed"
    return [f"{shown}: {finding.message}" for finding in check_scripts(hook, home_root, strict_modes, root_only=root_only)]
