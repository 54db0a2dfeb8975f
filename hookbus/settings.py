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
    #: settings.json ``"protect_home": false`` turns off the built-in guard that denies agent
    #: tool calls writing into the home or the managed directory.
    protect_home: bool = True
    #: The managed settings.json's ``"managed_only": true``: the user's hooks are not loaded.
    managed_only: bool = False
    #: The managed settings.json's own ``"features": {"hooks": false}``: the organization's
    #: switch for its managed hooks (the user's switches never reach them).
    managed_hooks_feature: bool = True
    #: The top-level keys that the managed settings.json set, which win over the user's.
    managed_keys: frozenset[str] = frozenset()
    #: The whole document, for plugins that own keys of their own.
    raw: Mapping[str, Any] = attrs.field(factory=lambda: MappingProxyType({}))

    @property
    def hooks_enabled(self) -> bool:
        """Whether the user's hooks run: neither switch is off, and the managed tier does not
        keep them out (``managed_only``). Managed hooks have their own switch."""
        return self.hooks_feature and not self.disabled_by_env and not self.managed_only

    @property
    def disabled_reason(self) -> str | None:
        if self.disabled_by_env:
            return "VIX_DISABLE_HOOKS is set in the environment"
        if not self.hooks_feature:
            whose = "the managed settings.json" if "features" in self.managed_keys else "settings.json"
            return f'{whose} has "features": {{"hooks": false}}'
        if self.managed_only:
            return 'the managed settings.json has "managed_only": true'
        return None


def env_disables_hooks() -> bool:
    """``VIX_DISABLE_HOOKS`` as the environment holds it now; the bus reads it once, when
    it starts."""
    value = os.environ.get("VIX_DISABLE_HOOKS", "")
    return value.strip().lower() in TRUTHY

#: What an ignored settings.json is replaced with, as a message says it.
IN_EFFECT_INSTEAD = "the last settings.json that could be trusted stays in effect (the defaults, if none was read)"


def load_settings(home: Home, disabled_by_env: bool = False, root_only: bool = False) -> tuple[Settings | None, list[Problem]]:
    """Settings of ``home``: a missing file is all defaults; None (with the Problem that
    says why) when the file must not be obeyed: it is broken, or another user could have
    written it (owned by someone else, or writable by group or others). Then the caller
    keeps the last settings it could trust, so that nobody else can turn hooks off, stop
    recording, or send the prompt provider's key elsewhere. ``root_only``: the managed
    settings.json, which root must own."""
    path = home.settings_path
    shown = str(path) if root_only else home.relative(path)
    try:
        data, info = read_capped(path)
    except SpecError as exc:
        if not os.path.lexists(path):
            return Settings(disabled_by_env=disabled_by_env), []
        return None, [Problem(shown, f"{exc.message}; {IN_EFFECT_INSTEAD}")]
    refusal, _ = check_permissions(path, info, relaxable=False, root_only=root_only)
    if refusal:
        return None, [Problem(shown, f"{refusal}; it is ignored: {IN_EFFECT_INSTEAD}")]
    try:
        document = decode_document(data, "json")
    except SpecError as exc:
        return None, [Problem(shown, f"{exc.message}; {IN_EFFECT_INSTEAD}")]
    if not isinstance(document, dict):
        return None, [Problem(shown, f"expected an object at the top level; {IN_EFFECT_INSTEAD}", "$")]
    return settings_from_document(document, shown, disabled_by_env)


def settings_from_document(
    document: dict[str, Any], shown: str, disabled_by_env: bool = False
) -> tuple[Settings | None, list[Problem]]:
    """The Settings a decoded settings.json (an object) says, and what is wrong in it
    (``shown`` names the file); None when it must not be obeyed at all."""
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
    protect_home = _flag(document, "protect_home", True, shown, problems)
    managed_only = _flag(document, "managed_only", False, shown, problems)
    settings = Settings(
        hooks_feature=hooks_feature,
        strict_modes=strict_modes,
        recorders=recorders,
        record_envelopes=record_envelopes,
        disabled_by_env=disabled_by_env,
        protect_home=protect_home,
        managed_only=managed_only,
        raw=MappingProxyType(document),
    )
    return settings, problems


def _flag(document: Mapping[str, Any], key: str, default: bool, shown: str, problems: list[Problem]) -> bool:
    value = document.get(key, default)
    if isinstance(value, bool):
        return value
    problems.append(Problem(shown, f"expected true or false; {'true' if default else 'false'} is in effect", f"$.{key}"))
    return default


def in_effect(user: Settings, managed: Settings | None) -> Settings:
    """The settings hooks run under: the user's settings.json, each top-level key that the
    managed settings.json sets replaced by the managed one's. ``managed_only`` is read from
    the managed file alone (the user's has no say in it), and so is the managed hooks' own
    switch; ``VIX_DISABLE_HOOKS`` stays the user's hooks' switch."""
    if managed is None or not managed.raw:
        if not user.managed_only:
            return user
        return attrs.evolve(user, managed_only=False)
    merged = {**user.raw, **managed.raw}
    effective, _ = settings_from_document(merged, "settings.json", user.disabled_by_env)
    if effective is None:  # each file was obeyed alone, so each key of theirs is: never here
        effective = user
    return attrs.evolve(
        effective,
        managed_only=managed.managed_only,
        managed_hooks_feature=managed.hooks_feature,
        managed_keys=frozenset(managed.raw),
    )
