"""The parts of the daemon's ``settings.json`` that hookbus reads, and the environment switch.

settings.json belongs to the daemon and holds many keys hookbus knows nothing about, so
unknown keys are left alone; only the keys hookbus owns are checked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from hookbus.errors import Problem, SpecError
from hookbus.files import decode_document, read_capped
from hookbus.home import Home
from hookbus.permissions import STRICT_MODES_SETTING, check_permissions

_TRUTHY = {"1", "true", "yes", "on"}


@attrs.frozen
class Settings:
    """What settings.json and the environment say about the engine as a whole."""

    #: settings.json ``{"features": {"hooks": false}}`` turns every hook off.
    hooks_feature: bool = True
    #: settings.json ``"hooks_strict_modes": false`` loads group/other-writable hook files.
    strict_modes: bool = True
    #: ``VIX_DISABLE_HOOKS=1`` in the environment turns every hook off.
    disabled_by_env: bool = False
    #: settings.json ``"recorder"``: the recorder plugin(s) that record, by name; None: the
    #: built-in one.
    recorders: tuple[str, ...] | None = None
    #: The whole document, for plugins that own keys of their own.
    raw: Mapping[str, Any] = attrs.field(factory=lambda: MappingProxyType({}))

    @property
    def hooks_enabled(self) -> bool:
        return self.hooks_feature and not self.disabled_by_env

    @property
    def disabled_reason(self) -> str | None:
        if self.disabled_by_env:
            return "VIX_DISABLE_HOOKS is set in the environment"
        if not self.hooks_feature:
            return 'settings.json has "features": {"hooks": false}'
        return None


def env_disables_hooks() -> bool:
    value = os.environ.get("VIX_DISABLE_HOOKS", "")
    return value.strip().lower() in _TRUTHY


def load_settings(home: Home) -> tuple[Settings, list[Problem]]:
    """Settings of ``home``; a missing file is all defaults, a broken one is a Problem."""
    disabled_by_env = env_disables_hooks()
    path = home.settings_path
    shown = home.relative(path)
    if not os.path.lexists(path):
        return Settings(disabled_by_env=disabled_by_env), []
    try:
        data, info = read_capped(path)
        document = decode_document(data, "json")
    except SpecError as exc:
        return Settings(disabled_by_env=disabled_by_env), [Problem(shown, exc.message)]
    if not isinstance(document, dict):
        problem = Problem(shown, "expected an object at the top level", "$")
        return Settings(disabled_by_env=disabled_by_env), [problem]
    problems: list[Problem] = []
    hooks_feature = True
    features = document.get("features", {})
    if not isinstance(features, dict):
        problems.append(Problem(shown, "expected an object", "$.features"))
    elif "hooks" in features:
        if isinstance(features["hooks"], bool):
            hooks_feature = features["hooks"]
        else:
            problems.append(Problem(shown, "expected true or false", "$.features.hooks"))
    strict_modes = document.get(STRICT_MODES_SETTING, True)
    if not isinstance(strict_modes, bool):
        problems.append(Problem(shown, "expected true or false", f"$.{STRICT_MODES_SETTING}"))
        strict_modes = True
    if not strict_modes:
        # Relaxing the checks is only trusted from a settings.json that passes them itself.
        refusal, _ = check_permissions(path, info, strict_modes=True)
        if refusal:
            problems.append(
                Problem(shown, f"{STRICT_MODES_SETTING} is ignored: settings.json {refusal}")
            )
            strict_modes = True
    recorders = document.get("recorder")
    if isinstance(recorders, str):
        recorders = (recorders,)
    elif isinstance(recorders, list) and recorders and all(isinstance(n, str) for n in recorders):
        recorders = tuple(recorders)
    elif recorders is not None:
        problems.append(
            Problem(shown, "expected a recorder plugin name or a list of names", "$.recorder")
        )
        recorders = None
    settings = Settings(
        hooks_feature=hooks_feature,
        strict_modes=strict_modes,
        recorders=recorders,
        disabled_by_env=disabled_by_env,
        raw=MappingProxyType(document),
    )
    return settings, problems
