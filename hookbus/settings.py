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
from hookbus.homepath import TRUTHY



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
    #: settings.json ``"record_envelopes": true``: each emit that ran a sync hook leaves an
    #: emit record (its envelope, redacted and capped, the decision, the hooks that ran),
    #: which ``hookbus replay`` re-runs through the hooks as they are now.
    record_envelopes: bool = False
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
    """``VIX_DISABLE_HOOKS`` as the environment holds it now; the bus reads it once, when
    it starts."""
    value = os.environ.get("VIX_DISABLE_HOOKS", "")
    return value.strip().lower() in TRUTHY

#: What an ignored settings.json is replaced with, as a message says it.
IN_EFFECT_INSTEAD = "the last settings.json that could be trusted stays in effect (the defaults, if none was read)"


def load_settings(home: Home, disabled_by_env: bool = False) -> tuple[Settings | None, list[Problem]]:
    """Settings of ``home``: a missing file is all defaults; None (with the Problem that
    says why) when the file must not be obeyed: it is broken, or another user could have
    written it (owned by someone else, or writable by group or others). Then the caller
    keeps the last settings it could trust, so that nobody else can turn hooks off, stop
    recording, or send the prompt provider's key elsewhere."""
    path = home.settings_path
    shown = home.relative(path)
    try:
        data, info = read_capped(path)
    except SpecError as exc:
        if not os.path.lexists(path):
            return Settings(disabled_by_env=disabled_by_env), []
        return None, [Problem(shown, f"{exc.message}; {IN_EFFECT_INSTEAD}")]
    refusal, _ = check_permissions(path, info, relaxable=False)
    if refusal:
        return None, [Problem(shown, f"{refusal}; it is ignored: {IN_EFFECT_INSTEAD}")]
    try:
        document = decode_document(data, "json")
    except SpecError as exc:
        return None, [Problem(shown, f"{exc.message}; {IN_EFFECT_INSTEAD}")]
    if not isinstance(document, dict):
        return None, [Problem(shown, f"expected an object at the top level; {IN_EFFECT_INSTEAD}", "$")]
    problems: list[Problem] = []
    hooks_feature = True
    features = document.get("features", {})
    if not isinstance(features, dict):
        problems.append(Problem(shown, "expected an object", "$.features"))
    elif "hooks" in features:
        if isinstance(features["hooks"], bool):
            hooks_feature = features["hooks"]
        else:
            # A typo must not silently leave hooks on when they were meant to be off, nor
            # off when meant on: the last trusted value stays, as for a broken file.
            return None, [Problem(shown, f"expected true or false; {IN_EFFECT_INSTEAD}", "$.features.hooks")]
    strict_modes = document.get(STRICT_MODES_SETTING, True)
    if not isinstance(strict_modes, bool):
        problems.append(Problem(shown, "expected true or false", f"$.{STRICT_MODES_SETTING}"))
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
    record_envelopes = document.get("record_envelopes", False)
    if not isinstance(record_envelopes, bool):
        problems.append(Problem(shown, "expected true or false", "$.record_envelopes"))
        record_envelopes = False
    settings = Settings(
        hooks_feature=hooks_feature,
        strict_modes=strict_modes,
        recorders=recorders,
        record_envelopes=record_envelopes,
        disabled_by_env=disabled_by_env,
        raw=MappingProxyType(document),
    )
    return settings, problems
