"""The hot-reload watcher: one background thread that tells the bus what changed.

- ``hooks/`` is watched with watchfiles (inotify on Linux), tuned to ``debounce=50, step=5``
  so a write takes effect in milliseconds rather than watchfiles' default of up to 1.6 s.
- ``settings.json`` and the files of ``config/`` (plugins' configuration, such as
  ``workflow.json``) are single files that editors replace by rename, so they are polled by
  stat on every wake-up (at least every 250 ms). So is the managed directory, which may not
  exist yet to be watched, and changes when the organization deploys: every entry of it.
- watchfiles drops inotify's queue-overflow notice, so a stat-only sweep of every hook
  directory runs every 30 s as a safety net; a watcher error or a restart rescans too. A
  sweep that finds nothing changed publishes nothing: state.json, which the recorder
  replaces after every fire, is no change of its hook, here or in the sweep.
- An error restarts the watch (with backoff); a thread that died is noticed and restarted
  by ``ensure_running``. Reloading never stops silently.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

import attrs

from hookbus.files import config_signature, file_signature, is_ignored_name
from hookbus.home import Home
from hookbus.policy.managed import managed_signature
from hookbus.trust import STATE_FILES
from hookbus.trust import walk as trust_walk

logger = logging.getLogger("hookbus")

DEBOUNCE_MS = 50
STEP_MS = 5
POLL_SECONDS = 0.25
SWEEP_SECONDS = 30.0


@attrs.frozen
class ChangeSet:
    """What one wake-up of the watcher found."""

    hook_ids: frozenset[str] = frozenset()
    settings: bool = False
    config: bool = False
    #: Why every hook directory must be looked at again, when it must.
    rescan: str | None = None
    #: The periodic sweep is due: every hook directory's stat is looked at again, and those
    #: that changed re-read (nothing is published when none did).
    sweep: bool = False
    #: Something in the managed directory (or on the way to it) changed: it is re-read.
    managed: bool = False

    def __bool__(self) -> bool:
        return bool(self.hook_ids or self.settings or self.config or self.rescan or self.sweep or self.managed)

    @property
    def only_sweep(self) -> bool:
        """Whether the sweep is all there is: nothing the watch or the polls reported."""
        return self.sweep and not (self.hook_ids or self.settings or self.config or self.rescan or self.managed)


def classify(home: Home, paths: Iterable[str]) -> tuple[set[str], bool]:
    """The hook ids touched by ``paths``, and whether the hooks directory itself changed.

    A hook is touched by a change to its directory or to any file in it, a script beside
    hook.json included (a chmod can make the hook unsafe to run). Not by state.json, which
    is written after every fire (nor its temporaries), nor by editor temporaries and
    backups: for the entries of a hook directory, the rule of ``is_part_of_hook``, which
    the sweep's signature follows too. A temporary file renamed into place shows up as its
    final name.
    """
    hooks_dir = str(home.hooks_dir)
    touched: set[str] = set()
    whole = False
    for path in paths:
        relative = os.path.relpath(path, hooks_dir)
        if relative == ".":
            whole = True
            continue
        parts = relative.split(os.sep)
        if parts[0] == ".." or is_ignored_name(parts[0]):
            continue
        # hooks/<id>/state.json and hooks/<id>/.state.json.<pid>.<n>.tmp: the recorder's.
        if len(parts) > 1 and (parts[1] in STATE_FILES or is_ignored_name(parts[-1])):
            continue
        touched.add(parts[0])
    return touched, whole


class HomeWatcher:
    """Runs in one daemon thread and calls ``deliver`` with each ChangeSet, in order."""

    def __init__(
        self, home: Home, deliver: Callable[[ChangeSet], None], locate_managed: Callable[[], str] | None = None
    ) -> None:
        self.home = home
        self.deliver = deliver
        #: Where the managed directory is now, polled like settings.json: it changes when
        #: the organization deploys, it may not exist yet to be watched, and ``/etc/vix``
        #: appearing moves it there from ``$HOOKBUS_MANAGED_DIR``.
        self.locate_managed = locate_managed
        self.restarts = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stopping = False
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._polled = self._poll_signatures()

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, args=(self._stop,), name="hookbus-watcher", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopping = True
            self._stop.set()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def ensure_running(self) -> bool:
        """Restart the thread if it died; True when it had to."""
        if self.alive or self._stopping:
            return False
        with self._lock:
            if self.alive or self._stopping:
                return False
            self.restarts += 1
        logger.error("the hookbus watcher thread died; restarting it and rescanning")
        self.start()
        return True

    # -- the thread ---------------------------------------------------------------------

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the watch is in place: a change made after this is seen."""
        return self._ready.wait(timeout)

    def _run(self, stop: threading.Event) -> None:
        backoff = 0.05
        reason = "watcher started"
        while not stop.is_set():
            try:
                self._watch(stop, reason)
                backoff = 0.05
                reason = "hooks directory replaced"
            except Exception as exc:
                logger.error("hookbus watcher error (%s); rescanning and restarting the watch", exc)
                reason = f"watcher error: {exc}"
                stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)

    def _watch(self, stop: threading.Event, reason: str) -> None:
        """Watch until stopped or the hooks directory is replaced (returns), or an error
        (raises). The rescan runs once the watch is in place, so nothing falls between."""
        # RustNotify is watchfiles' own engine behind watch(); used directly because only
        # it says when the watch is in place, which the rescan must wait for.
        from watchfiles._rust_notify import RustNotify

        hooks_dir = self.home.hooks_dir
        hooks_dir.mkdir(parents=True, exist_ok=True)
        identity = file_signature(hooks_dir)
        with RustNotify([str(hooks_dir)], False, False, 300, True, False) as notify:
            settings, config, _ = self._poll()
            self.deliver(ChangeSet(rescan=reason, settings=settings, config=config))
            self._ready.set()
            last_sweep = time.monotonic()
            while True:
                raw = notify.watch(DEBOUNCE_MS, STEP_MS, int(POLL_SECONDS * 1000), stop)
                if raw == "stop":
                    return
                paths = [path for _, path in raw] if isinstance(raw, set) else []
                hook_ids, whole = classify(self.home, paths)
                settings, config, managed = self._poll()
                now = time.monotonic()
                current = file_signature(hooks_dir)
                replaced = current is None or identity is None or current[0] != identity[0]
                rescan = None
                sweep = False
                if whole or replaced:
                    rescan = "hooks directory changed"
                elif now - last_sweep >= SWEEP_SECONDS:
                    sweep = True
                    last_sweep = now
                change = ChangeSet(frozenset(hook_ids), settings, config, rescan, sweep, managed)
                if change:
                    self.deliver(change)
                if replaced:
                    return  # the watch is on the old directory: start a new one

    def _poll_signatures(self) -> dict[str, object]:
        """settings.json, everything in config/ (plugins keep their configuration there, and
        the core need not know which), and every directory on the way to the home: a chmod
        of any of them can change what may be obeyed."""
        home = self.home
        try:
            # Who owns each directory and its mode, not its times: a file made or renamed
            # in the home (settings.json saved, a hook's log written there) is no change to
            # who may write it.
            chain: object = tuple(
                (str(path), info.st_ino, info.st_mode, info.st_uid) for path, info, _ in trust_walk(home.root)
            )
        except OSError as exc:
            chain = ("unreadable", exc.errno)
        signatures = {"settings": file_signature(home.settings_path), "home": chain, "config": config_signature(home)}
        if self.locate_managed is not None:
            root = self.locate_managed()
            signatures["managed"] = (root, managed_signature(root))
        return signatures

    def _poll(self) -> tuple[bool, bool, bool]:
        """Whether settings.json (or the home's path), anything in config/, or anything of
        the managed directory changed since the last poll."""
        current = self._poll_signatures()
        changed = {key for key in current if self._polled.get(key) != current[key]}
        self._polled = current
        return bool(changed & {"settings", "home"}), "config" in changed, "managed" in changed
