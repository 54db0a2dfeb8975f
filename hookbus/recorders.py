"""The recorders in effect: which recorder plugins record (settings.json ``"recorder"``),
and every record, load error, read and loss that goes to them.

Everything on its way to a recorder passes through here, and is masked here, once, for all
of them (``hookbus.redaction.redact_record``, ``redact_emit_record``, ``mask``): registered
secrets and secrets of a known shape never reach a recorder, built-in or third-party.

A recorder that raises is reported once (and once when it recovers) and skipped: it never
breaks the bus, an emit, or the other recorders. Nor can one that is slow to shut down hold
up ``close()`` (and so a process's exit) past RECORDER_FLUSH_SECONDS.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from hookbus.errors import Problem
from hookbus.plugins import config_problems, each_implementation
from hookbus.records import EmitRecord, RefusedRecords, RunRecord
from hookbus.redaction import mask, redact_emit_record, redact_record
from hookbus.reporting import ReportOnce

if TYPE_CHECKING:
    import pluggy

    from hookbus.home import Home
    from hookbus.plugins import PluginInfo
    from hookbus.settings import Settings

logger = logging.getLogger("hookbus")

#: The built-in recorder's plugin name: the one that records unless settings.json says otherwise.
DEFAULT_RECORDER = "recorder"
#: How long ``HookBus.close()`` waits for the plugins' ``hookbus_shutdown`` (the recorders'
#: flush: state.json, a database, spans to a collector), in seconds, all of them at once. A
#: plugin not done by then is reported and left to finish in the background; what it had not
#: written is lost if the process exits first. It bounds how late ``hookbus emit`` exits
#: after printing its decision, whatever a recorder's storage or collector does. More than
#: the built-in recorder's one wait for hook directories another process holds locked (2 s),
#: so that a healthy disk's state.json always makes it. Read at each close.
RECORDER_FLUSH_SECONDS = 3.0


class Recorders:
    """The active recorders of one bus. ``owner`` is what recorder hooks get as ``bus``."""

    def __init__(self, plugins: pluggy.PluginManager, home: Home, owner: object) -> None:
        self._plugins = plugins
        self._home = home
        self._owner = owner
        #: The plugin names that record and answer ``read_runs``, in order.
        self.active: tuple[str, ...] = ()
        self._newly_active: set[str] = set()
        #: (report key, call taking the record) per active recorder, in order.
        self._functions: list[tuple[str, Callable[[RunRecord], object]]] = []
        self._load_errors: Mapping[str, str | None] = {}
        #: Records each recorder raised on (and so lost), by report key.
        self._raised: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._report = ReportOnce()

    def check_config(self, settings: Settings, home_is_unsafe: bool, plugin_infos: list[PluginInfo]) -> list[Problem]:
        """What the plugins find wrong with the configuration they own, and the problems of
        the recorder selection (``select``): the publisher's ``check_config``. Nothing is
        read from an unsafe home (its own problem says why); recorders are chosen all the
        same, so that what happens meanwhile is recorded."""
        checked = [] if home_is_unsafe else config_problems(self._plugins, self._home, settings)
        return checked + self.select(settings, plugin_infos)

    def select(self, settings: Settings, plugin_infos: list[PluginInfo]) -> list[Problem]:
        """Which recorder plugins record: settings.json ``"recorder"``, else the built-in
        one, else (when it is blocked) every recorder installed; the problems of the choice."""
        # Looked up once per selection, not on every fire.
        implementations = {i.plugin_name: i for i in self._plugins.hook.hookbus_record.get_hookimpls()}
        installed = list(implementations)
        wanted = settings.recorders
        problems = []
        default = [DEFAULT_RECORDER] if DEFAULT_RECORDER in installed else sorted(installed)
        if wanted is None:
            chosen = default
        else:
            chosen = [name for name in wanted if name in installed]
            missing = [name for name in wanted if name not in installed]
            if missing:
                # A typo must never stop recording: with no listed recorder left, the
                # default one records, and the problem says so.
                if not chosen:
                    chosen = default
                using = ", ".join(repr(name) for name in chosen) or "nothing"
                known = ", ".join(sorted(installed)) or "none"
                for name in missing:
                    message = (
                        f"recorder {name!r} is not installed or is blocked (installed recorders: "
                        f"{known}); recording with {using} instead"
                    )
                    problems.append(Problem("settings.json", message, "$.recorder"))
        # Recorders handed to HookBus(plugins=[...]) were asked for by the embedder: they record.
        in_process = {info.name for info in plugin_infos if info.in_process}
        chosen += [name for name in installed if name in in_process and name not in chosen]
        if not chosen:
            logger.error("no recorder is active: fires are not recorded")
        self._newly_active |= set(chosen) - set(self.active)
        self.active = tuple(chosen)
        self._functions = [(f"recorder {name!r}", _record_call(implementations[name], self._owner)) for name in chosen]
        return problems

    def _calls(self, hook_name: str, **kwargs: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        """The implementations of ``hook_name`` by the active recorders, in their order."""
        calls = dict(each_implementation(getattr(self._plugins.hook, hook_name), **kwargs))
        for name in self.active:
            if name in calls:
                yield name, calls[name]

    def record(self, record: RunRecord) -> RunRecord:
        """Hand a record to every active recorder. Secrets are masked first: those a runner
        registered (an API key a server echoed back) and those of a known shape (a token in
        a tool's input, whatever registered it); the masked record is returned."""
        record = redact_record(record)
        for key, call in self._functions:
            try:
                call(record)
            except Exception as exc:
                with self._lock:
                    self._raised[key] += 1
                self._report.failed(key, f"{key} raised {type(exc).__name__}: {exc}; the record is lost to it")
            else:
                self._report.succeeded(key)
        return record

    def load_errors(self, current: Mapping[str, str | None]) -> None:
        """Tell recorders about load errors that appeared or went away (state.json's
        last_error). A recorder that has just become active hears of every current one."""
        # Masked as records are: a spec's error may quote what the file holds.
        current = {hook_id: None if error is None else mask(error) for hook_id, error in current.items()}
        changed = {
            hook_id: error for hook_id, error in current.items() if self._load_errors.get(hook_id, "unknown") != error
        }
        self._load_errors = dict(current)
        newly_active, self._newly_active = self._newly_active, set()
        for errors, wanted in ((changed, lambda name: name not in newly_active), (current, newly_active.__contains__)):
            if not errors:
                continue
            for plugin, call in self._calls("hookbus_record_load_errors", bus=self._owner, errors=errors):
                if not wanted(plugin):
                    continue
                try:
                    call()
                except Exception as exc:
                    self._report.failed(f"recorder {plugin!r}", f"recorder {plugin!r} raised {type(exc).__name__}: {exc}")

    def read_runs(self, hook_id: str | None, limit: int | None) -> list[RunRecord]:
        """Recorded fires, oldest first, from the first active recorder that can read them."""
        runs: list[RunRecord] = self._first_reading("hookbus_read_runs", "runs", hook_id=hook_id, limit=limit)
        return runs

    def _first_reading(self, hook_name: str, what: str, refusable: bool = False, **kwargs: Any) -> list[Any]:
        """What the first active recorder that can read ``what`` answers ``hook_name`` with;
        [] when none can (a reader that raises is reported, and the next one asked).
        ``refusable``: a reader's RefusedRecords goes to the caller, whose to say it is."""
        for plugin, call in self._calls(hook_name, bus=self._owner, **kwargs):
            try:
                found = call()
            except RefusedRecords:
                if refusable:
                    raise  # what was refused must not look like nothing recorded
                self._report.failed(f"reader {plugin!r}", f"recorder {plugin!r} refused to read some {what}")
                continue
            except Exception as exc:
                self._report.failed(f"reader {plugin!r}", f"recorder {plugin!r} could not read {what}: {type(exc).__name__}: {exc}")
                continue
            if found is not None:
                return list(found)
        return []

    def record_emit(self, record: EmitRecord) -> bool:
        """Hand an emit record to every active recorder that keeps them, its envelope and
        decision masked first as a record's are; whether one did."""
        record = redact_emit_record(record)
        kept = False
        for plugin, call in self._calls("hookbus_record_emit", bus=self._owner, record=record):
            try:
                call()
                kept = True
            except Exception as exc:
                self._report.failed(f"recorder {plugin!r}", f"recorder {plugin!r} raised {type(exc).__name__}: {exc}; the emit record is lost to it")
        return kept

    def keeps_emits(self) -> bool:
        """Whether an active recorder keeps emit records."""
        return any(True for _ in self._calls("hookbus_read_emits", bus=self._owner, since=None, until=None))

    def read_emits(self, since: str | None, until: str | None) -> list[EmitRecord]:
        """Emit records, oldest first, from the first active recorder that can read them.
        ``RefusedRecords`` when it refused some (files another user could have written),
        holding the records it did read."""
        emits: list[EmitRecord] = self._first_reading("hookbus_read_emits", "emits", refusable=True, since=since, until=until)
        return emits

    @property
    def lost(self) -> int:
        """Records that did not reach an active recorder: those a recorder raised on, plus
        those a recorder counted as lost itself, through an optional module-level
        ``lost_records(home)`` of its plugin."""
        counted = 0
        for name in self.active:
            count = getattr(self._plugins.get_plugin(name), "lost_records", None)
            if callable(count):
                counted += int(count(self._home))
        with self._lock:
            return counted + sum(self._raised.values())

    def shut_down(self, seconds: float | None = None) -> list[str]:
        """Call every plugin's ``hookbus_shutdown``, each on a thread of its own so that
        all run at once, and wait ``seconds`` (RECORDER_FLUSH_SECONDS) for them at most.
        Returns the plugins not done by then, each reported on the ``hookbus`` logger."""
        bound = RECORDER_FLUSH_SECONDS if seconds is None else seconds
        deadline = time.monotonic() + bound
        started: list[tuple[str, threading.Thread]] = []
        for plugin, call in each_implementation(self._plugins.hook.hookbus_shutdown, bus=self._owner):
            thread = threading.Thread(
                target=_shut_down, args=(plugin, call), name=f"hookbus-shutdown-{plugin}", daemon=True
            )
            try:
                thread.start()
            except RuntimeError:  # no thread to be had (the process is out of them): wait inline
                _shut_down(plugin, call)
                continue
            started.append((plugin, thread))
        late = []
        for plugin, thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                late.append(plugin)
                logger.warning(
                    "plugin %r did not finish shutting down within %g s (hookbus.recorders."
                    "RECORDER_FLUSH_SECONDS), so close() returns without it: it goes on in the "
                    "background, and what it had not written yet (records it was flushing, "
                    "spans for a collector) is lost if the process exits first; its storage or "
                    "collector is slow or not answering",
                    plugin,
                    bound,
                )
        return late

    def report_losses(self) -> None:
        """Say, as the bus closes, how many fires were not recorded (each failure was
        reported as it began; this is the total)."""
        lost = self.lost
        if lost:
            one = lost == 1
            logger.warning(
                "%s %s of %s %s not recorded (refused by the disk or by a recorder; the "
                "errors reported earlier say why)",
                f"{lost:,}", "fire" if one else "fires", self._home.root, "was" if one else "were",
            )


def _shut_down(plugin: str, call: Callable[[], Any]) -> None:
    try:
        call()
    except Exception:  # one plugin's failure must not cost the others their shutdown
        logger.exception("plugin %r failed to shut down", plugin)


def _record_call(implementation: Any, owner: object) -> Callable[[RunRecord], object]:
    """A recorder's ``hookbus_record`` as a call taking the record, with only the arguments
    it asks for (as pluggy would pass them), bound once."""
    function = implementation.function
    takes_bus, takes_record = "bus" in implementation.argnames, "record" in implementation.argnames
    if takes_bus and takes_record:
        return lambda record: function(bus=owner, record=record)
    if takes_record:
        return lambda record: function(record=record)
    return lambda record: function(bus=owner) if takes_bus else function()
