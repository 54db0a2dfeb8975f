"""The snapshot publisher: loads the home (the loader), watches it (the watcher), and
publishes each load as one new immutable Snapshot, with a generation to wait on.

It also holds the managed tier (``policy.tiers``), which says which plugins load: the
bus's PluginSet adopts that as the publisher is made, and again whenever a load finds the
managed directory changed.

Two callbacks from the bus run under the reload lock, before a snapshot is published:
``check_config`` (the plugins' own configuration and the recorder selection, whose problems
are part of the load) and ``loaded`` (the hooks' load errors, handed to the recorders, so
that whoever waits for a generation finds state.json updated already).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Mapping

from hookbus.errors import HookNotFoundError, HooksDisabledError, Problem, UnknownEventError
from hookbus.eventnames import unknown_event_message
from hookbus.events import EVENTS
from hookbus.loader import HookLoader, LoadEvent
from hookbus.policy.tiers import ManagedTier
from hookbus.registry import Snapshot
from hookbus.settings import Settings, env_disables_hooks, in_effect

if TYPE_CHECKING:
    from typing import Any, Sequence

    from hookbus.home import Home
    from hookbus.plugins import PluginSet
    from hookbus.runners import Hook
    from hookbus.watch import ChangeSet, HomeWatcher

logger = logging.getLogger("hookbus")
#: What loads, reloads and is skipped: verbs that print problems themselves silence it.
load_logger = logging.getLogger("hookbus.load")

#: How long a watching publisher waits for the watch to be in place before it goes on.
WATCH_READY_SECONDS = 5.0

#: ``check_config(settings, home_is_unsafe)``: the problems of what plugins configure.
ConfigCheck = Callable[[Settings, bool], list[Problem]]
#: ``loaded(load_errors)``: each hook's current load error, None for one that loads.
LoadedCallback = Callable[[Mapping[str, "str | None"]], None]


class SnapshotPublisher:
    """The Snapshot in effect, and how a new one replaces it."""

    def __init__(self, home: Home, plugins: PluginSet, check_config: ConfigCheck, loaded: LoadedCallback) -> None:
        self.home = home
        runners = plugins.runners
        # VIX_DISABLE_HOOKS is read once: the README promises the variable as it was when
        # the bus started.
        self._loader = HookLoader(home, runners, disabled_by_env=env_disables_hooks())
        # The managed tier, where one exists, says which plugins load: before anything
        # else reads them, and again whenever that changes while the bus runs (``replug``).
        self.managed = ManagedTier.from_environment(runners)
        plugins.adopt(self.managed.plugin_policy(read=True))
        self._check_config = check_config
        self._loaded = loaded
        self._replug = plugins.replug
        self._reload_lock = threading.Lock()
        self._published = threading.Condition()
        #: The Snapshot in effect, swapped whole by each load; a plain attribute, as every
        #: emit reads it (a property's call cost a no-match emit 10%).
        self.snapshot = Snapshot.build({}, Settings(), (), generation=0)
        self.watcher: HomeWatcher | None = None

    def matching(self, event: str, envelope: Mapping[str, Any]) -> tuple[Sequence[Hook], Settings] | None:
        """The enabled hooks of ``event`` whose matcher takes ``envelope``, with the
        settings they run under; None when none does, or the kill switch or the recursion
        guard (``"origin": "vix"``) says no hook fires. UnknownEventError for no event."""
        snapshot = self.snapshot
        index = snapshot.index.get(event)
        if index is None:
            if event not in EVENTS:
                raise UnknownEventError(unknown_event_message(event))
            return None
        hooks = index.match(envelope)
        # Recursion guard: a vix-initiated thread's own tool calls never fire hooks; but
        # its writes into the home are the home guard's all the same.
        if envelope.get("origin") == "vix":
            hooks = tuple(hook for hook in hooks if hook.tier == "builtin")
        return (hooks, snapshot.settings) if hooks else None

    def hook(self, hook_id: str) -> tuple[Hook, Settings]:
        """The hook ``trigger`` fires, and its settings: HooksDisabledError when the user's
        hooks are off and it is one of theirs (or none is loaded by that id), else
        HookNotFoundError (saying where to look) when none is."""
        snapshot = self.snapshot
        hook = snapshot.hooks.get(hook_id)
        reason = snapshot.settings.disabled_reason
        if reason and (hook is None or hook.tier == "user"):
            raise HooksDisabledError(f"hooks are disabled: {reason}")
        if hook is None:
            known = ", ".join(snapshot.hooks) or "none"
            raise HookNotFoundError(
                f"no valid hook {hook_id!r} in {self.home.hooks_dir} (loaded: {known}); "
                "`hookbus validate` says why a hook is skipped"
            )
        return hook, snapshot.settings

    def watch(self) -> None:
        """Reload on every change from now on (one background thread)."""
        from hookbus.watch import HomeWatcher

        self.watcher = HomeWatcher(self.home, self._on_change, self.managed.locate)
        self.watcher.start()
        if not self.watcher.wait_ready(WATCH_READY_SECONDS):
            logger.error("the hookbus watcher is not ready after %ss; changes may be late", WATCH_READY_SECONDS)

    @property
    def watching(self) -> bool:
        return self.watcher is not None and self.watcher.alive

    def ensure_watching(self) -> None:
        """Restart a watcher thread that died (each emit that fires a hook asks)."""
        if self.watcher is not None:
            self.watcher.ensure_running()

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()

    def reload(self) -> Snapshot:
        """Re-read settings and every hook now, and publish the result."""
        self.apply(settings=True, rescan=True, force=True)
        return self.snapshot

    def wait_for_reload(self, since: int | None = None, timeout: float = 5.0) -> bool:
        """Wait until a snapshot newer than generation ``since`` (default: now) is in
        effect; False when none came within ``timeout`` seconds."""
        self.ensure_watching()
        target = self.snapshot.generation if since is None else since
        with self._published:
            return self._published.wait_for(lambda: self.snapshot.generation > target, timeout)

    def _on_change(self, change: ChangeSet) -> None:
        if change.rescan:
            load_logger.info("rescanning %s: %s", self.home.hooks_dir, change.rescan)
        self.apply(
            hook_ids=change.hook_ids,
            settings=change.settings or change.managed,
            rescan=bool(change.rescan or change.sweep) or change.config,
            force=change.config,
            sweep=change.only_sweep,
        )

    def apply(
        self,
        hook_ids: frozenset[str] = frozenset(),
        settings: bool = False,
        rescan: bool = False,
        force: bool = False,
        sweep: bool = False,
    ) -> None:
        """Reload what changed and publish a new snapshot whole, under the reload lock.

        Settings feed every hook's validation (strict modes, plugin options), so a settings
        change re-reads every hook; a rescan re-reads those whose stat changed. ``sweep``:
        this rescan is the watcher's periodic safety net, which publishes (and logs)
        nothing when it found nothing changed, so that a quiet home keeps its generation.
        """
        with self._reload_lock:
            state = self.snapshot.managed
            if settings and self.managed.retarget():
                load_logger.warning("the managed directory is now %s: its hooks are read anew", self.managed.root)
            loader, managed = self._loader, self.managed.loader
            loader.verbose = managed.verbose = load_logger.isEnabledFor(logging.INFO)
            before = (loader.outcome(), managed.outcome()) if sweep else None
            events = []
            if settings or rescan or force:
                events += managed.check_home() + loader.check_home()
            if settings:
                events += managed.load_settings() + loader.load_settings()
                force = True
                if self._replug(self.managed.plugin_policy()):
                    events.append(LoadEvent("settings", "plugins", "reloaded as the managed directory now says"))
                state = self.managed.state()
            effective = in_effect(loader.settings, managed.settings if managed.home_problem is None else None)
            loader.in_effect = effective
            if force:
                loader.config_problems = self._check_config(effective, loader.home_problem is not None)
                events += [LoadEvent("skipped", str(problem)) for problem in loader.config_problems]
            if rescan or force:
                events += managed.scan(force=force)
            if effective.managed_only:
                events += loader.clear()
            elif rescan or force:
                events += loader.scan(force=force)
            else:
                events += loader.reload(hook_ids)
            if sweep:
                if (loader.outcome(), managed.outcome()) == before:
                    return
                # Changes the watch missed (an inotify queue overflow, which watchfiles does
                # not report), or is about to report: worth a line in the journal either way.
                load_logger.info("the periodic sweep of %s found changes", self.home.hooks_dir)
            snapshot, load_errors = self.managed.combine(loader, effective, self.snapshot.generation + 1, state)
            self._loaded(load_errors)
            with self._published:
                self.snapshot = snapshot
                self._published.notify_all()
            for event in events:
                level = logging.WARNING if event.kind in ("skipped", "kept", "warning") else logging.INFO
                load_logger.log(level, "%s", event)
