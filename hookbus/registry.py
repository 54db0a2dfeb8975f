"""The immutable, event-indexed Snapshot of the loaded hooks.

A Snapshot is never changed after it is built: a reload builds a new one and the bus
swaps it in with one assignment, so an emit in flight keeps the one it started with.
"""

from __future__ import annotations

from collections import defaultdict
from types import MappingProxyType
from typing import Any, Iterable, Mapping

import attrs

from hookbus.errors import Problem
from hookbus.events import EVENTS
from hookbus.matching import Regex, compile_regex, encode
from hookbus.settings import Settings
from hookbus.runners import Hook

SPEC_NAMES: tuple[tuple[str, str], ...] = (("hook.json", "json"), ("hook.yaml", "yaml"))


@attrs.frozen
class EventIndex:
    """The enabled hooks of one event, arranged so a miss costs one dict lookup."""

    field: str | None
    #: Hooks whose matcher matches everything.
    match_all: tuple[Hook, ...]
    #: For each literal name: the hooks that match it, match-all hooks included, id order.
    by_name: Mapping[str, tuple[Hook, ...]]
    #: Hooks with a true regex matcher, tried one by one.
    regex: tuple[Hook, ...]

    #: All the regexes as one alternation, to rule a value out in one search; None when
    #: RE2 cannot compile them together (past its memory budget, say).
    any_regex: Regex | None = None
    #: Results of regex matching by field value (tool names repeat, so this stays small).
    _memo: dict[str, tuple[Hook, ...]] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def build(cls, field: str | None, hooks: Iterable[Hook]) -> EventIndex:
        match_all: list[Hook] = []
        named: dict[str, list[Hook]] = defaultdict(list)
        regex: list[Hook] = []
        for hook in hooks:
            if field is None or hook.matcher.matches_all:
                match_all.append(hook)
            elif hook.matcher.names is not None:
                for name in hook.matcher.names:
                    named[name].append(hook)
            else:
                regex.append(hook)
        by_name = {name: _by_id([*match_all, *group]) for name, group in named.items()}
        return cls(
            field,
            _by_id(match_all),
            MappingProxyType(by_name),
            _by_id(regex),
            _combine(hook.matcher.source for hook in regex),
        )

    def match(self, envelope: Mapping[str, Any]) -> tuple[Hook, ...]:
        """The hooks whose matcher accepts the envelope's matcher field, in hook-id order."""
        if self.field is None:
            return self.match_all
        value = envelope.get(self.field)
        if value.__class__ is not str:
            value = ""
        if not self.regex:
            return self.by_name.get(value, self.match_all)
        found = self._memo.get(value)
        if found is None:
            found = self._match_regexes(value)
        return found

    def _match_regexes(self, value: str) -> tuple[Hook, ...]:
        found = self.by_name.get(value, self.match_all)
        data = encode(value)
        if self.any_regex is None or self.any_regex.fullmatch(data):
            extra = [hook for hook in self.regex if hook.matcher.matches_encoded(data)]
            if extra:
                found = _by_id([*found, *extra])
        # Real field values are short names that repeat; a long one is not worth keeping
        # (4,096 of them, megabytes each, would be).
        if len(value) <= MEMO_VALUE_LIMIT:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()  # a flood of distinct values must not grow memory
            self._memo[value] = found
        return found


#: How many distinct field values an EventIndex remembers regex results for.
MEMO_LIMIT = 4096
#: The longest field value (in characters) whose regex results are remembered.
MEMO_VALUE_LIMIT = 1024


def _combine(sources: Iterable[str]) -> Regex | None:
    """One alternation of ``sources``, each of which RE2 compiled alone. RE2 has no
    backreferences to renumber, and a flag such as (?i) stays inside its group. An unclosed
    \\Q would quote the rest of the alternation, but then the group it opened in never
    closes and the whole fails to compile, like a combination past RE2's memory budget:
    the hooks are then tried one by one."""
    sources = list(sources)
    if not sources:
        return None
    try:
        return compile_regex("|".join(f"(?:{source})" for source in sources))
    except ValueError:
        return None


def _by_id(hooks: Iterable[Hook]) -> tuple[Hook, ...]:
    return tuple(sorted(hooks, key=lambda hook: hook.id))


#: What the tier of a process that runs code the environment chose says (``identity``).
NOT_ENFORCEABLE = "not enforceable here"


@attrs.frozen
class ManagedTierState:
    """The managed tier a snapshot was published under, as a server compares it with the
    tier its client would load (``HookBus.managed_tier``)."""

    #: The managed directory, when it exists; ``""`` for none.
    root: str = ""
    #: Modules this process imported from where the user's environment pointed before the
    #: managed directory appeared: then it cannot vouch for what it runs.
    tainted_by: tuple[str, ...] = ()

    @property
    def enforceable(self) -> bool:
        """False when the process should be restarted to enforce the tier (``tainted_by``)."""
        return not self.tainted_by

    @property
    def identity(self) -> str:
        """The directory's path; never a client's when the process cannot vouch for it."""
        if self.root and self.tainted_by:
            return f"{self.root} ({NOT_ENFORCEABLE}: {', '.join(self.tainted_by)} came from the environment's import path)"
        return self.root


@attrs.frozen
class Snapshot:
    """Everything an emit needs, frozen: the hooks, their index, settings and problems."""

    #: Every valid hook by id, disabled ones included.
    hooks: Mapping[str, Hook]
    #: Enabled hooks by event; events without hooks are absent.
    index: Mapping[str, EventIndex]
    settings: Settings
    problems: tuple[Problem, ...] = ()
    generation: int = 0
    #: Things that load but deserve a look (a relaxed permission check, say).
    warnings: tuple[str, ...] = ()
    #: The hooks hookbus adds itself (the home guard), by id: in the index, and shown by
    #: ``list`` and ``explain``, but not among ``hooks``, which are those loaded from files.
    builtin: Mapping[str, Hook] = attrs.field(factory=dict)
    #: The managed tier it was published under, together with it: a server compares that
    #: with its client's, then decides with this snapshot (or a newer one).
    managed: ManagedTierState = ManagedTierState()

    @property
    def every_hook(self) -> Mapping[str, Hook]:
        """``builtin`` and ``hooks`` together, by id: what ``list`` and ``explain`` show."""
        return {**self.builtin, **self.hooks}

    @classmethod
    def build(
        cls,
        hooks: Mapping[str, Hook],
        settings: Settings,
        problems: Iterable[Problem] = (),
        generation: int = 0,
        warnings: Iterable[str] = (),
        builtin: Mapping[str, Hook] | None = None,
        managed: ManagedTierState = ManagedTierState(),
    ) -> Snapshot:
        by_event: dict[str, list[Hook]] = defaultdict(list)
        # The kill switch takes the user's hooks out of the index (a disabled engine costs an
        # emit one lookup); the managed tier has its own switch, and the home guard its key.
        on = {"user": settings.hooks_enabled, "managed": settings.managed_hooks_feature, "builtin": True}
        for hook in [*hooks.values(), *(builtin or {}).values()]:
            if hook.spec.enabled and on[hook.tier]:
                by_event[hook.event].append(hook)
        index = {
            event: EventIndex.build(EVENTS[event].matcher_field, group)
            for event, group in by_event.items()
        }
        return cls(
            hooks=MappingProxyType(dict(sorted(hooks.items()))),
            index=MappingProxyType(index),
            settings=settings,
            problems=tuple(problems),
            generation=generation,
            warnings=tuple(warnings),
            builtin=MappingProxyType(dict(builtin or {})),
            managed=managed,
        )
