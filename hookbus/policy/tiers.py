"""The three tiers of hooks in one Snapshot: the organization's managed hooks, the
user's, and hookbus's own home guard.

The managed directory is loaded like a home, by a loader of its own that wants root to own
everything. When the tiers meet, the managed one wins: a user's hook with a managed hook's
id (or the guard's) is refused with a message, ``managed_only`` keeps the user's hooks out,
and each key of the managed settings.json wins over the user's.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
from typing import TYPE_CHECKING, Mapping

from hookbus.errors import Problem
from hookbus.home import Home
from hookbus.loader import HookLoader
from hookbus.policy.guardhook import GUARD_ID, guard_hook
from hookbus.policy.managed import managed_root
from hookbus.plugins import SELECTION_VARIABLES
from hookbus.registry import Snapshot

if TYPE_CHECKING:
    from hookbus.runners import RunnerTable
    from hookbus.settings import Settings
    from hookbus.spec import Hook


class ManagedTier:
    """The managed directory's loader, and how its hooks join the user's."""

    def __init__(self, root: str, runners: RunnerTable, notes: list[str] | None = None) -> None:
        self.root = root
        self.home = Home(Path(root))
        self.loader = HookLoader(self.home, runners, tier="managed")
        #: What the user should know about how the tier was found (an ignored variable,
        #: an ignored plugin selection): shown with the load's warnings.
        self.notes = list(notes or ())

    @classmethod
    def from_environment(cls, runners: RunnerTable) -> ManagedTier:
        root, ignored = managed_root()
        return cls(root, runners, [ignored] if ignored else [])

    def combine(self, user: HookLoader, effective: Settings, generation: int) -> tuple[Snapshot, dict[str, str | None]]:
        """The Snapshot of both tiers and the guard, under the settings in effect; and each
        user hook's load error, for its state.json (a refused id's refusal included)."""
        managed_hooks, managed_problems, warnings = self.loader.parts()
        problems = [attrs.evolve(problem, tier="managed") for problem in managed_problems]
        user_hooks, user_problems, user_warnings = user.parts()
        load_errors = user.load_errors()
        refused = {hook_id: self._refusal(hook_id) for hook_id in user.states if hook_id in self.loader.states or hook_id == GUARD_ID}
        hooks: dict[str, Hook] = dict(managed_hooks)
        hooks.update((hook_id, hook) for hook_id, hook in user_hooks.items() if hook_id not in refused)
        problems += [problem for problem in user_problems if problem.hook_id not in refused]
        for hook_id, message in sorted(refused.items()):
            problems.append(Problem(f"hooks/{hook_id}", message, None, hook_id))
            load_errors[hook_id] = f"hooks/{hook_id}: {message}"
        guard = guard_hook(user.home, self.root, effective)
        builtin = {} if guard is None else {guard.id: guard}
        if guard is not None and hooks.pop(guard.id, None) is not None:
            problems.append(Problem(self.loader.shown(self.home.hook_dir(guard.id)), self._refusal(guard.id), None, guard.id, tier="managed"))
        warnings += user_warnings + self.notes
        if effective.managed_only:
            warnings.append(
                f'the managed settings.json ({self.home.settings_path}) sets "managed_only": true: '
                f"the hooks in {user.home.hooks_dir} are not loaded"
            )
        return Snapshot.build(hooks, effective, problems, generation, warnings, builtin), load_errors

    def _refusal(self, hook_id: str) -> str:
        if hook_id == GUARD_ID:
            return f"the id {GUARD_ID!r} is hookbus's home guard's, and no hook may take it: rename the hook's directory"
        where = self.home.hook_dir(hook_id)
        return (
            f"a managed hook has this id ({where}), and a hook of yours cannot replace it: "
            "rename your hook's directory (the managed one runs whatever yours says)"
        )


def plugin_environment(environ: Mapping[str, str] | None = None) -> tuple[str, list[str], Mapping[str, str]]:
    """The managed directory, what to tell the user about finding it, and the environment
    plugins are selected by. Where a managed directory exists, the plugin selection
    (HOOKBUS_DISABLE_PLUGINS, HOOKBUS_LOAD_PLUGINS) is ignored: it could keep the runners
    its hooks need, or the recorder of its audit trail, from loading."""
    environ = os.environ if environ is None else environ
    root, ignored = managed_root(environ)
    notes = [ignored] if ignored else []
    selected = [name for name in SELECTION_VARIABLES if name in environ]
    if not selected or not os.path.isdir(root):
        return root, notes, environ
    notes.append(
        f"{' and '.join(selected)} {'is' if len(selected) == 1 else 'are'} ignored: the managed directory "
        f"{root} exists, and its hooks run with every installed plugin"
    )
    return root, notes, {name: value for name, value in environ.items() if name not in SELECTION_VARIABLES}
