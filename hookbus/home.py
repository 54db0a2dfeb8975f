"""Where a hookbus home keeps things: ``--home DIR`` > ``$VIX_HOME`` > ``~/.vix``."""

from __future__ import annotations

import os
from pathlib import Path

import attrs


@attrs.frozen
class Home:
    """The paths inside one home directory."""

    root: Path

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> Home:
        """The home named by ``explicit``, else ``$VIX_HOME``, else ``~/.vix``."""
        chosen = explicit if explicit is not None else os.environ.get("VIX_HOME") or "~/.vix"
        return cls(Path(chosen).expanduser().absolute())

    @property
    def hooks_dir(self) -> Path:
        return self.root / "hooks"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    @property
    def settings_path(self) -> Path:
        return self.root / "settings.json"

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs" / "hooks"

    def hook_dir(self, hook_id: str) -> Path:
        return self.hooks_dir / hook_id

    def relative(self, path: Path) -> str:
        """``path`` as users see it in messages: relative to the home when inside it."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)
