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
from hookbus.policy.plugintrust import imported_from, untrusted_entries
from hookbus.plugins import SELECTION_VARIABLES, PluginPolicy
from hookbus.registry import ManagedTierState, Snapshot

if TYPE_CHECKING:
    from hookbus.runners import RunnerTable
    from hookbus.settings import Settings
    from hookbus.runners import Hook


class ManagedTier:
    """The managed directory's loader, and how its hooks join the user's."""

    def __init__(self, root: str, runners: RunnerTable, notes: list[str] | None = None) -> None:
        self.runners = runners
        #: Whether a managed directory existed when the bus started.
        self.started_under_it = False
        #: The variables that choose plugins and the import path, as the bus started with them.
        self.environ: Mapping[str, str] = {}
        self._point_at(root, notes or [])

    def _point_at(self, root: str, notes: list[str]) -> None:
        self.root = root
        self.home = Home(Path(root))
        self.loader = HookLoader(self.home, self.runners, tier="managed")
        #: What the user should know about how the tier was found (an ignored variable):
        #: shown with the load's warnings.
        self.notes = list(notes)
        #: Why the plugin selection variables are ignored, when they are.
        self.plugin_notes: list[str] = []
        #: Modules this process imported from where the user's environment pointed, before
        #: the managed directory appeared: it cannot vouch for what it runs.
        self.tainted_by: list[str] = []

    @classmethod
    def from_environment(cls, runners: RunnerTable) -> ManagedTier:
        root, ignored = managed_root()
        return cls(root, runners, [ignored] if ignored else [])

    @staticmethod
    def locate() -> str:
        """Where the environment puts the managed directory now (what a watcher polls)."""
        return managed_root()[0]

    def retarget(self) -> bool:
        """Follow the environment to the managed directory it names now: ``/etc/vix`` that
        appeared while the bus ran wins over ``$HOOKBUS_MANAGED_DIR``. True when it moved
        (its hooks are then read anew, with no last good version from the old place)."""
        root, ignored = managed_root()
        if root == self.root:
            return False
        self._point_at(root, [ignored] if ignored else [])
        return True

    @property
    def present(self) -> bool:
        """Whether the managed directory exists (safe or not): then it decides which
        plugins load, and the environment's selection is ignored."""
        return os.path.isdir(self.root)

    def state(self) -> ManagedTierState:
        """The managed tier this bus loads now, as a client compares it with its own: the
        directory when it exists, and what this process imported from where the user's
        environment pointed (``tainted_by``), which it cannot vouch for."""
        if not self.present:
            return ManagedTierState()
        return ManagedTierState(self.root, tuple(self.tainted_by))

    def plugin_policy(self, environ: Mapping[str, str] | None = None, *, read: bool = False) -> PluginPolicy:
        """Which plugins load: the environment's selection where no managed directory
        exists; where one does, the built-in plugins and the third-party ones its
        settings.json allows (``"plugins"``, and the recorders it names in ``"recorder"``),
        found where they are installed, never where the environment points
        (``plugintrust``). ``read``: read the managed settings.json first (the bus
        starting: its first load reads it again, and says what is wrong with it)."""
        if read:
            self.started_under_it = self.present
            # As the process started: the selection is the bus's from then on, and the
            # import path was made from PYTHONPATH then.
            self.environ = {name: os.environ[name] for name in (*SELECTION_VARIABLES, "PYTHONPATH") if name in os.environ}
        environ = self.environ if environ is None else environ
        if not self.present:
            self.plugin_notes = []
            self.tainted_by = []
            return PluginPolicy.from_environment(environ)
        untrusted = untrusted_entries(environ)
        # A process that started under the managed directory imported nothing from there
        # (the command line drops those entries first; an embedder's own modules are its
        # program's); one that started before it appeared may have.
        self.tainted_by = [] if self.started_under_it else imported_from(untrusted)
        if read:
            self.loader.check_home()
            self.loader.load_settings()
        self.plugin_notes = []
        allowed: frozenset[str] = frozenset()
        settings = self.loader.trusted_settings if self.loader.home_problem is None else None
        if settings is not None:
            named = settings.raw.get("plugins", [])
            if isinstance(named, list) and all(isinstance(name, str) for name in named):
                allowed = frozenset(named)
            else:
                self.plugin_notes.append(
                    f'{self.home.settings_path}: "plugins" must be a list of plugin names; no third-party plugin loads until it is'
                )
            allowed |= frozenset(settings.recorders or ())
        selected = [name for name in SELECTION_VARIABLES if name in environ]
        if selected:
            self.plugin_notes.append(
                f"{' and '.join(selected)} {'is' if len(selected) == 1 else 'are'} ignored: the managed directory "
                f"{self.root} exists, and it decides which plugins load"
            )
        if self.tainted_by:
            self.plugin_notes.append(
                f"this process imported {', '.join(self.tainted_by)} from $PYTHONPATH, the working directory or the user's "
                f"site-packages before the managed directory {self.root} appeared: restart it, so that no code the "
                "environment chose runs beside the managed hooks (meanwhile hookbus's clients decide in their own process)"
            )
        return PluginPolicy(managed_allows=allowed, untrusted=untrusted, managed_settings=str(self.home.settings_path))

    def combine(
        self, user: HookLoader, effective: Settings, generation: int, state: ManagedTierState
    ) -> tuple[Snapshot, dict[str, str | None]]:
        """The Snapshot of both tiers and the guard, under the settings in effect and the
        tier's ``state``; and each user hook's load error, for its state.json (a refused
        id's refusal included)."""
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
        warnings += user_warnings + self.notes + self.plugin_notes
        if effective.managed_only:
            warnings.append(
                f'the managed settings.json ({self.home.settings_path}) sets "managed_only": true: '
                f"the hooks in {user.home.hooks_dir} are not loaded"
            )
        return Snapshot.build(hooks, effective, problems, generation, warnings, builtin, state), load_errors

    def _refusal(self, hook_id: str) -> str:
        if hook_id == GUARD_ID:
            return f"the id {GUARD_ID!r} is hookbus's home guard's, and no hook may take it: rename the hook's directory"
        where = self.home.hook_dir(hook_id)
        return (
            f"a managed hook has this id ({where}), and a hook of yours cannot replace it: "
            "rename your hook's directory (the managed one runs whatever yours says)"
        )
