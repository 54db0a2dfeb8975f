"""Where a hookbus home keeps things: ``--home DIR`` > ``$VIX_HOME`` > ``~/.vix``."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from hookbus.homepath import home_root


@attrs.frozen
class Home:
    """The paths inside one home directory."""

    root: Path
    #: Derived once: these are used on every load and every record.
    hooks_dir: Path = attrs.field(init=False, eq=False)
    config_dir: Path = attrs.field(init=False, eq=False)
    settings_path: Path = attrs.field(init=False, eq=False)
    logs_dir: Path = attrs.field(init=False, eq=False)
    #: Where the state.json of each managed hook is kept (the managed directory is root's).
    managed_state_dir: Path = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        for name, path in (
            ("managed_state_dir", self.root / "managed"),
            ("hooks_dir", self.root / "hooks"),
            ("config_dir", self.root / "config"),
            ("settings_path", self.root / "settings.json"),
            ("logs_dir", self.root / "logs" / "hooks"),
        ):
            object.__setattr__(self, name, path)

    @classmethod
    def resolve(cls, explicit: str | os.PathLike[str] | None = None) -> Home:
        """The home named by ``explicit``, else ``$VIX_HOME``, else ``~/.vix``."""
        return cls(Path(home_root(explicit)))

    def hook_dir(self, hook_id: str) -> Path:
        return self.hooks_dir / hook_id

    def state_dir(self, hook_id: str, tier: str = "user") -> Path | None:
        """The directory of the hook's state.json: its own for the user's hooks,
        ``managed/<id>`` for a managed one; None for the home guard, which keeps none."""
        if tier == "user":
            return self.hooks_dir / hook_id
        if tier == "managed":
            return self.managed_state_dir / hook_id
        return None

    def relative(self, path: Path) -> str:
        """``path`` as users see it in messages: relative to the home when inside it."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)
