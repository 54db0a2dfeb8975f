"""HookBus: what the embedding daemon holds. ``emit`` per event, ``close`` at the end.

A facade over four parts, and data goes one way through them: the snapshot publisher
(``publisher``: loading, watching, generations, and the managed tier, which says which
plugins load) gives the hooks of an event; the dispatcher (``dispatch``: sync and async
runs, deadlines, cancellation) runs them; the decider (``merge``: the resolver, the input
check, and what an emit hookbus could not decide counts as) makes one Decision of what they
said; the recorders (``recorders``) get every fire. ``firing`` walks one emit through the
last three (the home guard inline, shadow hooks beside the enforcing ones); the fires of a
fixture or a replay (``policy.quietfire``) change nothing.
"""

from __future__ import annotations

import functools
import threading
import time
from os import PathLike
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from hookbus.decision import ALLOW, Decision
from hookbus.dispatch import Dispatcher
from hookbus.envelope import check_envelope
from hookbus.errors import BusClosedError, Problem, ReadOnlyBusError
from hookbus.firing import Firing
from hookbus.home import Home
from hookbus.merge import Decider, Merged
from hookbus.plugins import PluginSet, call_each
from hookbus.policy.quietfire import QuietFires
from hookbus.prompts import prompt_sender
from hookbus.publisher import SnapshotPublisher
from hookbus.recorders import Recorders
from hookbus.records import EmitRecord, RunRecord
from hookbus.redaction import install_log_redaction
from hookbus.runners import RunnerTable
from hookbus.workers import awaited, finished as _done

if TYPE_CHECKING:
    from concurrent.futures import Future

    from hookbus.explain import Explanation
    from hookbus.plugins import PluginInfo
    from hookbus.registry import Snapshot
    from hookbus.runners import Hook
    from hookbus.settings import Settings

#: Default bound on how long ``close()`` lets async hooks finish before killing them.
SHUTDOWN_TIMEOUT_SECONDS = 10.0


class HookBus:
    """Finds the hooks of an event, runs them, merges one Decision, records every fire.

    ``with HookBus(home) as bus: bus.emit("PreToolUse", {...})``. Thread-safe; ``close()``
    once at the end. docs/embedding.md has its promises in full."""

    def __init__(
        self,
        home: str | PathLike[str] | None = None,
        *,
        watch: bool = False,
        plugins: Sequence[object] = (),
        async_workers: int = 8,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT_SECONDS,
        read_only: bool = False,
    ) -> None:
        install_log_redaction()
        self.home = Home.resolve(home)
        self.async_workers = async_workers
        self.shutdown_timeout = shutdown_timeout
        #: Loads and reads, never writes: a load error reaches no state.json (where it would
        #: erase a running bus's last-good mark), and every fire raises ReadOnlyBusError.
        self.read_only = read_only
        self.runners = RunnerTable()
        self._plugin_set = PluginSet(plugins, self.runners)
        # Made first: the managed tier it holds says which plugins load.
        self._publisher = SnapshotPublisher(
            self.home, self._plugin_set, lambda settings, unsafe: self._recorders.check_config(settings, unsafe, self.plugin_infos),
            _ignore_load_errors if read_only else lambda errors: self._recorders.load_errors(errors),
        )
        self._plugins = self._plugin_set.manager
        # Without a resolver the bus still starts (list, log and validate need none) and
        # emit fails open, saying why.
        self._decider = Decider(self._plugins, self.plugin_infos)
        self._plugin_set.on_change.append(lambda: self._decider.refresh(self.plugin_infos))
        self._recorders = Recorders(self._plugins, self.home, owner=self)
        self._firing = Firing(self.home, async_workers, self._decider, self._recorders, prompt_sender(self._plugins))
        self._dispatcher = self._firing.dispatcher
        self._quiet = QuietFires(self.home, self._firing.send_prompt, self._decider.decide, self._publisher.matching)
        self._closing = threading.Lock()
        self._closed = False
        call_each(self._plugins, "hookbus_startup", "start", bus=self)
        self._publisher.reload()
        if watch:
            self._publisher.watch()

    # -- what is loaded ------------------------------------------------------------------

    @property
    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin as ``hookbus plugins`` shows it: loaded, blocked or broken."""
        return list(self._plugin_set.infos)

    def reload(self) -> Snapshot:
        """Re-read settings and every hook now, and swap the new snapshot in whole."""
        return self._publisher.reload()

    def wait_for_reload(self, since: int | None = None, timeout: float = 5.0) -> bool:
        """Wait for a reload newer than generation ``since`` (default: now); False after ``timeout``."""
        return self._publisher.wait_for_reload(since, timeout)

    @property
    def snapshot(self) -> Snapshot:
        """The registry in effect now; immutable."""
        return self._publisher.snapshot

    @property
    def generation(self) -> int:
        """Incremented by every load; wait on it (``wait_for_reload``) instead of sleeping."""
        return self._publisher.snapshot.generation

    @property
    def problems(self) -> tuple[Problem, ...]:
        return self._publisher.snapshot.problems

    @property
    def watching(self) -> bool:
        return self._publisher.watching

    @property
    def managed_tier(self) -> str:
        """The managed directory this bus loads (``""``: none); see ``snapshot.managed``."""
        return self._publisher.snapshot.managed.identity

    @property
    def closed(self) -> bool:
        return self._closed

    # -- firing ----------------------------------------------------------------------

    def emit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Decision:
        """Run the hooks of ``event`` and return the merged Decision (no hook matched:
        nothing is done at all). EnvelopeError for an envelope hooks cannot be given."""
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        if envelope.__class__ is not dict:
            envelope = check_envelope(envelope)
        assert envelope is not None
        found = self._publisher.matching(event, envelope)
        return ALLOW if found is None else self._fire(event, envelope, *found)

    def submit(
        self, event: str, envelope: Mapping[str, Any] | None = None, *, on_start: Callable[[float], None] | None = None
    ) -> Future[Decision]:
        """``emit`` without waiting: a Future of the Decision (``Dispatcher.submit_emit``).
        ``on_start(seconds)``, how long the emit may take, is called before hooks start."""
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        checked = check_envelope(envelope)
        found = self._publisher.matching(event, checked)
        if found is None:
            return _allowed()
        hooks, settings = found
        return self._dispatcher.submit_emit(
            hooks, lambda: self._fire(event, checked, hooks, settings), lambda why: self._undecided(event, checked, hooks, why), on_start
        )

    async def aemit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Decision:
        """``emit`` for asyncio: sync hooks run on a thread of their own, never the loop's."""
        return await awaited(self.submit(event, envelope))

    def undecided(self, event: str, envelope: Mapping[str, Any] | None, why: str) -> Decision:
        """The decision when hookbus cannot run the hooks (``envelope``: what could be read):
        each that matches fails, ``why``, under its own ``on_error`` (``Decider.undecided``)."""
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        checked = check_envelope(envelope)
        found = self._publisher.matching(event, checked)
        return ALLOW if found is None else self._undecided(event, checked, found[0], why)

    def explain(
        self, event: str, envelope: Mapping[str, Any] | None = None, *, dry_run: bool = False, undecided: str | None = None
    ) -> Explanation:
        """Why each hook fires or not, what it said and how they merged: a recorded emit that
        reports itself, or with ``dry_run`` the matching only; ``undecided``: as undecided()."""
        from hookbus.explain import explain

        if self._closed:
            raise BusClosedError("explain on a closed HookBus")
        checked, snapshot = check_envelope(envelope), self._publisher.snapshot
        if undecided is not None:
            why = undecided
            return explain(snapshot, event, checked, dry_run, lambda hooks, merged: self._undecided(event, checked, hooks, why, merged))
        return explain(snapshot, event, checked, dry_run, lambda hooks, merged: self._fire(event, checked, hooks, snapshot.settings, merged))

    def trigger(self, hook_id: str, envelope: Mapping[str, Any] | None = None) -> RunRecord:
        """Fire one hook by id now, on this thread, whatever its trigger; recorded as async."""
        self._check_can_fire("trigger")
        return self._dispatcher.run_manual(*self._publisher.hook(hook_id), check_envelope(envelope))

    def test_fire(self, event: str, envelope: Mapping[str, Any] | None = None, *, hook_id: str | None = None) -> Decision:
        """The decision of the sync hooks (or ``hook_id``'s) on ``envelope``, changing nothing,
        with ``HOOKBUS_TEST=1`` in their environment (``policy.quietfire``)."""
        return self._quiet_fire(event, envelope, hook_id, "HOOKBUS_TEST")[0]

    def replay(self, event: str, envelope: Mapping[str, Any] | None = None) -> tuple[Decision, tuple[str, ...]]:
        """``test_fire`` of a recorded envelope, with ``HOOKBUS_REPLAY=1``; and who ran."""
        return self._quiet_fire(event, envelope, None, "HOOKBUS_REPLAY")

    def _quiet_fire(self, event: str, envelope: Mapping[str, Any] | None, hook_id: str | None, variable: str) -> tuple[Decision, tuple[str, ...]]:
        if self._closed:
            raise BusClosedError("a fire on a closed HookBus")
        return self._quiet.fire(event, check_envelope(envelope), hook_id, variable)

    def _fire(
        self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], settings: Settings, merged: list[Merged] | None = None
    ) -> Decision:
        self._publisher.ensure_watching()
        self._check_can_fire("emit")  # close() may have begun since emit looked
        return self._firing.fire(event, envelope, hooks, settings, merged)

    def _undecided(
        self, event: str, envelope: Mapping[str, Any], hooks: Sequence[Hook], why: str, merged: list[Merged] | None = None
    ) -> Decision:
        self._check_can_fire("emit")
        return self._firing.undecided(event, envelope, hooks, why, merged)

    def _check_can_fire(self, verb: str) -> None:
        if self._closed:
            raise BusClosedError(f"{verb} on a closed HookBus")
        if self.read_only:
            raise ReadOnlyBusError("a read-only HookBus fires no hook and decides nothing: it would write records")

    # -- what is recorded ----------------------------------------------------------------

    @property
    def active_recorders(self) -> tuple[str, ...]:
        """The recorder plugins that record and answer ``read_runs`` (settings "recorder")."""
        return self._recorders.active

    def read_runs(self, hook_id: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Recorded fires, oldest first, from the first active recorder that can read them."""
        return self._recorders.read_runs(hook_id, limit)

    def read_emits(self, since: str | None = None, until: str | None = None) -> list[EmitRecord]:
        """The emit records with ``since <= at < until``, oldest first (``record_envelopes``)."""
        return self._recorders.read_emits(since, until)

    @property
    def keeps_emits(self) -> bool:
        """Whether an active recorder keeps emit records at all."""
        return self._recorders.keeps_emits()

    @property
    def lost_records(self) -> int:
        """Fires no active recorder took; each loss is also said on the ``hookbus`` logger."""
        return self._recorders.lost

    # -- shutting down ------------------------------------------------------------------

    def interrupt(self, reason: str = "interrupted") -> None:
        """Kill every hook running now, recording ``reason``; nothing starts any more. Then
        ``close()``. From a signal handler, call it on a new thread (it takes locks)."""
        self._dispatcher.interrupt(reason)

    def close(self, timeout: float | None = None, *, exiting: str | None = None) -> None:
        """Stop taking emits, let hooks finish for ``timeout`` s (``shutdown_timeout``), kill
        and record the rest, let recorders flush: done within ``timeout`` + 5 s + 3 s.
        ``exiting``: the one-shot command that exits then (``Dispatcher.close``)."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
        self._publisher.stop()
        deadline = time.monotonic() + (self.shutdown_timeout if timeout is None else timeout)
        self._dispatcher.close(deadline, exiting)
        self._quiet.close(deadline)
        self._recorders.shut_down()
        self._recorders.report_losses()

    async def aclose(self, timeout: float | None = None) -> None:
        """``close()`` on a thread of its own: the loop runs on; cancelling does not stop it."""
        from hookbus.workers import run_on_a_thread

        await run_on_a_thread(lambda: self.close(timeout), "hookbus-aclose")

    def __enter__(self) -> HookBus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> HookBus:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _ignore_load_errors(errors: Mapping[str, str | None]) -> None:
    """A read-only bus keeps what it found to itself (``bus.problems``)."""


@functools.lru_cache(maxsize=None)
def _allowed() -> Future[Decision]:
    """What ``submit`` returns when nothing matched: one finished Future, shared (a Future
    costs a lock and a condition to make)."""
    return _done(ALLOW)
