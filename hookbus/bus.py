"""HookBus: what the embedding daemon holds. ``emit`` per event, ``close`` at the end."""

from __future__ import annotations

import functools
import logging
import sys
import threading
import time
from collections import Counter
from os import PathLike
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import attrs

from hookbus.decision import ALLOW, FAILURES, Decision, HookFailure, HookResult, Outcome
from hookbus.errors import (
    BusClosedError,
    EnvelopeError,
    HookBusError,
    HookNotFoundError,
    HooksDisabledError,
    PluginError,
    Problem,
    UnknownEventError,
)
from hookbus.eventnames import unknown_event_message
from hookbus.events import CONTINUE_EVENTS, EVENTS, PERMISSION_EVENTS, check_modify_input
from hookbus.home import Home
from hookbus.jsontext import strict_json
from hookbus.plugins import (
    build_plugin_manager,
    build_runner_table,
    describe_plugins,
    each_implementation,
)
from hookbus.records import CANCELLED_AT_SHUTDOWN, RunRecord, utc_timestamp
from hookbus.redaction import redact_record
from hookbus.workers import clamp_wait
from hookbus.loader import HookLoader, LoadEvent
from hookbus.registry import Snapshot
from hookbus.reporting import ReportOnce
from hookbus.runners import CancelToken, HookCall
from hookbus.settings import Settings, env_disables_hooks
from hookbus.spec import Hook
from hookbus.stopguard import StopMemory

if TYPE_CHECKING:
    from hookbus.explain import Explanation, RunTrace
    from concurrent.futures import Future

    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.workers import AsyncWorkers, ElasticThreads, StartedJob

    from hookbus.watch import ChangeSet, HomeWatcher

#: An async fire waiting for a worker: the hook, the event, the envelope as hooks get it and
#: as JSON, manual, and the settings in effect when it was fired (a reload meanwhile does
#: not change them).
_AsyncJob = tuple[Hook, str, Mapping[str, Any], bytes, bool, Settings]
_Run = tuple[Hook, Outcome, str, float]

logger = logging.getLogger("hookbus")
#: What loads, reloads and is skipped: verbs that print problems themselves silence it.
load_logger = logging.getLogger("hookbus.load")

#: Default bound on how long ``close()`` lets async hooks finish before killing them.
SHUTDOWN_TIMEOUT_SECONDS = 10.0
#: How long close() waits for killed and cancelled async hooks to be recorded.
CANCEL_GRACE_SECONDS = 5.0
#: How long past its own timeout a runner may take before the bus stops waiting for it.
RUNNER_GRACE_SECONDS = 1.0
#: How long a thread that ran sync hooks waits idle for more before it ends.
SYNC_THREAD_IDLE_SECONDS = 30.0
#: The built-in recorder's plugin name: the one that records unless settings.json says otherwise.
DEFAULT_RECORDER = "recorder"
#: How long HookBus(watch=True) waits for the watch to be in place before it returns.
WATCH_READY_SECONDS = 5.0
FAILED_CLOSED_NOTE = 'failed closed ("on_error": "deny")'
NOT_BLOCKING_NOTE = 'not applied: the hook is not blocking (set "mode": "sync", "blocking": true)'
CANNOT_BLOCK_NOTE = "not applied: {event} cannot block or rewrite; only context from it is used"


def encode_envelope(event: str, envelope: Mapping[str, Any]) -> tuple[Mapping[str, Any], bytes]:
    """The envelope hooks receive: the embedder's fields untouched, plus hook_event_name.

    Compact separators, so ``"vix_bin":"..."`` greps the way the spec's examples expect.
    EnvelopeError when it cannot be JSON: nested past Python's recursion limit (about a
    thousand levels), holding itself, or holding a value that cannot be written.
    """
    full = dict(envelope)
    full["hook_event_name"] = event
    try:
        payload = strict_json(full, separators=(",", ":")) + b"\n"
    except RecursionError:
        raise EnvelopeError(
            f"the {event} envelope cannot be encoded as JSON: it is nested too deeply "
            f"(more than about {sys.getrecursionlimit():,} levels)"
        ) from None
    except (ValueError, TypeError) as exc:  # a circular reference, a value str() refuses
        raise EnvelopeError(f"the {event} envelope cannot be encoded as JSON: {exc}") from None
    return MappingProxyType(full), payload


def check_envelope(envelope: object) -> Mapping[str, Any]:
    """``envelope`` when it is a mapping (None is an empty one); EnvelopeError otherwise."""
    if envelope is None:
        return {}
    if isinstance(envelope, Mapping):
        return envelope
    raise EnvelopeError(f"the envelope must be a mapping (a dict of its fields), not {type(envelope).__name__}")


class HookBus:
    """Finds the hooks of an event, runs them, merges one Decision, records every fire.

    ``with HookBus(home) as bus: bus.emit("PreToolUse", {...})``. Thread-safe: emit from
    as many threads as you like; ``close()`` once at the end.
    """

    def __init__(
        self,
        home: str | PathLike[str] | None = None,
        *,
        watch: bool = False,
        plugins: Sequence[object] = (),
        async_workers: int = 8,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT_SECONDS,
    ) -> None:
        _install_log_redaction()
        self.home = Home.resolve(home)
        self.async_workers = async_workers
        self.shutdown_timeout = shutdown_timeout
        self._plugins, self.plugin_infos = build_plugin_manager(plugins)
        self.runners = build_runner_table(self._plugins)
        # Without a resolver the bus still starts: list, log, plugins and validate need
        # none, and emit fails open (the spec's rule), saying why (see _make_resolver).
        self._resolver = self._make_resolver()
        self.plugin_infos = describe_plugins(self._plugins, self.plugin_infos, self.runners)
        self._report = ReportOnce()
        self._stops = StopMemory()
        self._lock = threading.Condition()
        self._sync_emits = 0
        self._async: AsyncWorkers[_AsyncJob] | None = None  # made on the first async fire
        self._sync_threads: ElasticThreads | None = None  # made on the first parallel sync fire
        #: One token per emit whose sync hooks are running: ``interrupt`` cancels them.
        self._running: set[CancelToken] = set()
        #: Why ``interrupt`` was called, once it was: what close() cancels with.
        self._interrupted: str | None = None
        #: Records each recorder raised on (and so lost), by report key.
        self._raised: Counter[str] = Counter()
        self._closed = False
        # Read once: the README promises the variable as it was when the bus started.
        self._loader = HookLoader(self.home, self.runners, disabled_by_env=env_disables_hooks())
        self._reload_lock = threading.Lock()
        self._published = threading.Condition()
        self._load_errors: dict[str, str | None] = {}
        #: The recorder plugins that record and answer ``read_runs`` (settings "recorder").
        self.active_recorders: tuple[str, ...] = ()
        self._newly_active: set[str] = set()
        #: (report key, call taking the record) per active recorder, in order.
        self._record_functions: list[tuple[str, Callable[[RunRecord], object]]] = []
        self._snapshot = Snapshot.build({}, Settings(), (), generation=0)
        for plugin, call in each_implementation(self._plugins.hook.hookbus_startup, bus=self):
            try:
                call()
            except Exception:
                logger.exception("plugin %r failed to start", plugin)
        self._apply(settings=True, rescan=True, force=True)
        self._watcher: HomeWatcher | None = None
        if watch:
            from hookbus.watch import HomeWatcher

            self._watcher = HomeWatcher(self.home, self._on_change)
            self._watcher.start()
            if not self._watcher.wait_ready(WATCH_READY_SECONDS):
                logger.error("the hookbus watcher is not ready after %ss; changes may be late", WATCH_READY_SECONDS)

    # -- loading ----------------------------------------------------------------------

    def _on_change(self, change: ChangeSet) -> None:
        if change.rescan:
            load_logger.info("rescanning %s: %s", self.home.hooks_dir, change.rescan)
        self._apply(
            hook_ids=change.hook_ids,
            settings=change.settings,
            rescan=bool(change.rescan) or change.config,
            force=change.config,
        )

    def _apply(
        self,
        hook_ids: frozenset[str] = frozenset(),
        settings: bool = False,
        rescan: bool = False,
        force: bool = False,
    ) -> None:
        """Reload what changed and publish a new snapshot whole, under the reload lock.

        Settings feed every hook's validation (strict modes, plugin options), so a settings
        change re-reads every hook; a rescan re-reads those whose stat changed.
        """
        with self._reload_lock:
            self._loader.verbose = load_logger.isEnabledFor(logging.INFO)
            events = []
            if settings or rescan or force:
                events += self._loader.check_home()
            if settings:
                events += self._loader.load_settings()
                force = True
            if force:
                events += self._check_config()
            if rescan or force:
                events += self._loader.scan(force=force)
            else:
                events += self._loader.reload(hook_ids)
            snapshot = self._loader.snapshot(self._snapshot.generation + 1)
            # Before publishing: whoever waits for this generation and then reads the
            # recorders (state.json's load_error) must find the update already handed over.
            self._record_load_errors()
            with self._published:
                self._snapshot = snapshot
                self._published.notify_all()
            for event in events:
                level = logging.WARNING if event.kind in ("skipped", "kept", "warning") else logging.INFO
                load_logger.log(level, "%s", event)

    def _check_config(self) -> list[LoadEvent]:
        """Ask plugins about configuration they own (the workflow config, say)."""
        problems: list[Problem] = []
        # An unsafe home is reported once, by the loader; nothing in it is read meanwhile.
        checks = () if self._loader.home_problem else each_implementation(
            self._plugins.hook.hookbus_config_problems, home=self.home, settings=self._loader.settings
        )
        for plugin, call in checks:
            try:
                problems += call() or []
            except Exception as exc:
                logger.exception("plugin %r failed to check its configuration", plugin)
                problems.append(Problem(plugin, f"could not check its configuration: {exc}"))
        problems += self._select_recorders()
        self._loader.config_problems = problems
        return [LoadEvent("skipped", str(problem)) for problem in problems]

    def _select_recorders(self) -> list[Problem]:
        """Which recorder plugins record: settings.json ``"recorder"``, else the built-in
        one, else (when it is blocked) every recorder installed."""
        # Looked up once per selection, not on every fire.
        implementations = {i.plugin_name: i for i in self._plugins.hook.hookbus_record.get_hookimpls()}
        installed = list(implementations)
        wanted = self._loader.settings.recorders
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
        in_process = {info.name for info in self.plugin_infos if info.in_process}
        chosen += [name for name in installed if name in in_process and name not in chosen]
        if not chosen:
            logger.error("no recorder is active: fires are not recorded")
        self._newly_active |= set(chosen) - set(self.active_recorders)
        self.active_recorders = tuple(chosen)
        self._record_functions = [
            (f"recorder {name!r}", _record_call(implementations[name], self)) for name in chosen
        ]
        return problems

    def _recorder_calls(self, hook_name: str, **kwargs: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        """The implementations of ``hook_name`` by the active recorders, in their order."""
        calls = dict(each_implementation(getattr(self._plugins.hook, hook_name), **kwargs))
        for name in self.active_recorders:
            if name in calls:
                yield name, calls[name]

    def _record_load_errors(self) -> None:
        """Tell recorders about load errors that appeared or went away (state.json's
        last_error). A recorder that has just become active hears of every current one."""
        current = self._loader.load_errors()
        changed = {
            hook_id: error
            for hook_id, error in current.items()
            if self._load_errors.get(hook_id, "unknown") != error
        }
        self._load_errors = current
        newly_active, self._newly_active = self._newly_active, set()
        for errors, wanted in ((changed, lambda name: name not in newly_active), (current, newly_active.__contains__)):
            if not errors:
                continue
            for plugin, call in self._recorder_calls("hookbus_record_load_errors", bus=self, errors=errors):
                if not wanted(plugin):
                    continue
                try:
                    call()
                except Exception as exc:
                    self._report.failed(f"recorder {plugin!r}", f"recorder {plugin!r} raised {type(exc).__name__}: {exc}")

    def reload(self) -> Snapshot:
        """Re-read settings and every hook now, and swap the new snapshot in whole."""
        self._apply(settings=True, rescan=True, force=True)
        return self._snapshot

    def wait_for_reload(self, since: int | None = None, timeout: float = 5.0) -> bool:
        """Wait until a reload newer than generation ``since`` is in effect (default: the
        generation now). Take ``since = bus.generation`` before changing files, then wait:
        False means nothing reloaded within ``timeout`` seconds.
        """
        if self._watcher is not None:
            self._watcher.ensure_running()
        target = self.generation if since is None else since
        with self._published:
            return self._published.wait_for(lambda: self._snapshot.generation > target, timeout)

    @property
    def watching(self) -> bool:
        return self._watcher is not None and self._watcher.alive

    @property
    def snapshot(self) -> Snapshot:
        """The registry in effect now; immutable."""
        return self._snapshot

    @property
    def generation(self) -> int:
        """Incremented by every load; wait on it instead of sleeping."""
        return self._snapshot.generation

    @property
    def problems(self) -> tuple[Problem, ...]:
        return self._snapshot.problems

    @property
    def plugin_manager(self) -> Any:
        return self._plugins

    # -- emitting ---------------------------------------------------------------------

    def emit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Decision:
        """Run the hooks of ``event`` and return the merged Decision.

        Async hooks are submitted and not waited for; sync hooks run in parallel, each
        under its own timeout, failing open. No hook matched: nothing is done at all.
        EnvelopeError (a HookBusError) when ``envelope`` is not a mapping, or a matched
        hook would need it as JSON and it cannot be encoded.
        """
        if self._closed:
            raise BusClosedError("emit on a closed HookBus")
        if envelope.__class__ is not dict:
            envelope = check_envelope(envelope)
        snapshot = self._snapshot
        index = snapshot.index.get(event)
        if index is None:
            if event not in EVENTS:
                raise UnknownEventError(unknown_event_message(event))
            return ALLOW
        assert envelope is not None
        # Recursion guard: a vix-initiated thread's own tool calls never fire hooks.
        if envelope.get("origin") == "vix":
            return ALLOW
        hooks = index.match(envelope)
        if not hooks:
            return ALLOW
        return self._fire(event, envelope, hooks, snapshot.settings)

    def submit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Future[Decision]:
        """``emit`` without waiting: a Future of the Decision. It is done already when no
        sync hook matched (async ones are submitted, as by emit); otherwise the sync hooks
        run on a thread of their own, never queued behind other emits. What emit raises at
        once (UnknownEventError, EnvelopeError, BusClosedError), submit raises too."""
        snapshot = self._snapshot
        index = snapshot.index.get(event)
        envelope = check_envelope(envelope)
        if self._closed or index is None or envelope.get("origin") == "vix":
            return _done(self.emit(event, envelope))  # cheap: raises or returns ALLOW at once
        hooks = index.match(envelope)
        if not hooks:
            return _allowed()
        settings = snapshot.settings
        if not any(hook.is_sync for hook in hooks):
            return _done(self._fire(event, envelope, hooks, settings))  # only submits
        return self._threads().submit(lambda: self._fire(event, envelope, hooks, settings)).future

    async def aemit(self, event: str, envelope: Mapping[str, Any] | None = None) -> Decision:
        """``emit`` for asyncio: sync hooks run in a thread of their own, never on the loop
        (and never queued behind other emits, as the loop's default executor would)."""
        future = self.submit(event, envelope)
        if future.done():
            return future.result()
        import asyncio  # only asyncio embedders pay for importing it

        decision: Decision = await asyncio.wrap_future(future)
        return decision

    def explain(self, event: str, envelope: Mapping[str, Any] | None = None, *, dry_run: bool = False) -> Explanation:
        """Why each hook of the home does or does not fire for ``envelope``, what each that
        ran said, and how they merged: an emit that reports itself (its fires are real and
        recorded), or with ``dry_run`` only the matching, running nothing."""
        from hookbus.explain import Explanation, match_verdicts, merge_lines

        if self._closed:
            raise BusClosedError("explain on a closed HookBus")
        if event not in EVENTS:
            raise UnknownEventError(unknown_event_message(event))
        envelope = check_envelope(envelope)
        snapshot = self._snapshot
        verdicts, guard = match_verdicts(snapshot, event, envelope)
        field = EVENTS[event].matcher_field
        value = envelope.get(field) if field is not None else None
        shown = (value if isinstance(value, str) else "") if field is not None else None
        if dry_run:
            return Explanation(event, field, shown, verdicts, True, None, guard=guard)
        hooks = [snapshot.hooks[verdict.hook_id] for verdict in verdicts if verdict.runs]
        traces: list[RunTrace] = []
        decision = self._fire(event, envelope, hooks, snapshot.settings, traces) if hooks else ALLOW
        by_id = {trace.hook_id: trace for trace in traces}
        verdicts = tuple(attrs.evolve(verdict, run=by_id.get(verdict.hook_id)) for verdict in verdicts)
        return Explanation(event, field, shown, verdicts, False, decision, merge_lines(decision, traces), guard)

    def _fire(
        self,
        event: str,
        envelope: Mapping[str, Any],
        hooks: Sequence[Hook],
        settings: Settings,
        trace: list[RunTrace] | None = None,
    ) -> Decision:
        if self._watcher is not None:
            self._watcher.ensure_running()
        if self._closed:  # close() may have begun since emit looked
            raise BusClosedError("emit on a closed HookBus")
        # Encoded once, here, for every hook it fires: an envelope that cannot be JSON is
        # the caller's error to hear about, not something a worker thread dies of later.
        full, payload = encode_envelope(event, envelope)
        sync_hooks: list[Hook] = []
        for hook in hooks:
            if hook.is_sync:
                sync_hooks.append(hook)
                continue
            workers = self._async or self._start_async_workers()
            workers.submit((hook, event, full, payload, False, settings))
        if not sync_hooks:
            self._stops.answered(event, envelope, ALLOW)
            return ALLOW
        cancel = CancelToken()
        with self._lock:
            self._sync_emits += 1
            self._running.add(cancel)
            if self._interrupted is not None:
                cancel.cancel(self._interrupted)
        try:
            runs = self._run_sync(sync_hooks, event, full, payload, settings, cancel)
            decision = self._decide(event, envelope, runs, trace)
            self._stops.answered(event, envelope, decision)
            return decision
        finally:
            with self._lock:
                self._sync_emits -= 1
                self._running.discard(cancel)
                self._lock.notify_all()

    def _run_sync(
        self,
        hooks: Sequence[Hook],
        event: str,
        envelope: Mapping[str, Any],
        payload: bytes,
        settings: Settings,
        cancel: CancelToken,
    ) -> list[_Run]:
        """Run sync hooks: a lone one on this thread (no thread hop on the hot path),
        several in parallel, each on a thread of its own that starts at once, each waited
        for up to its own timeout plus a grace from when it started. The results are in
        the order of ``hooks``."""
        if len(hooks) == 1:
            return [self._run(hooks[0], event, envelope, payload, settings, cancel)]
        threads = self._threads()
        submitted = time.time(), time.monotonic()
        jobs = [
            (hook, threads.submit(functools.partial(self._run, hook, event, envelope, payload, settings, cancel)))
            for hook in hooks
        ]
        return [self._wait_for(hook, job, submitted) for hook, job in jobs]

    def _wait_for(self, hook: Hook, job: StartedJob, submitted: tuple[float, float]) -> _Run:
        """The run of ``hook``, or a fail-open outcome once it is ``RUNNER_GRACE_SECONDS``
        past its own timeout, counted from when it started (not from when it was handed
        over: nothing it waited for may eat into its time)."""
        from concurrent.futures import TimeoutError as FutureTimeout

        wall, monotonic = submitted
        while True:
            started = job.started if job.started is not None else monotonic
            remaining = started + hook.timeout + RUNNER_GRACE_SECONDS - time.monotonic()
            try:
                run: _Run = job.future.result(timeout=clamp_wait(remaining))
                return run
            except FutureTimeout:
                if job.started is not None and job.started != started:
                    continue  # it started later than assumed: its deadline is later too
                if remaining > 0:
                    continue  # a wait is capped at threading's maximum: keep waiting
                error = f"runner {hook.runner_plugin!r} did not return within its timeout"
                return hook, Outcome.fail_open(error, failure="timeout"), utc_timestamp(wall), time.monotonic() - monotonic
            except BaseException as exc:  # _run never raises; this is the thread machinery
                error = f"hookbus could not run it: {type(exc).__name__}: {exc}"
                return hook, Outcome.fail_open(error, failure="crash"), utc_timestamp(wall), time.monotonic() - monotonic

    def _run(
        self,
        hook: Hook,
        event: str,
        envelope: Mapping[str, Any],
        payload: bytes,
        settings: Settings,
        cancel: CancelToken | None = None,
    ) -> _Run:
        """Run one hook; never raises. Returns the hook, its outcome, when, and how long."""
        at = utc_timestamp()
        started = time.monotonic()
        spec = hook.spec
        hook_env: Mapping[str, str] = spec.env
        if spec.dialect is not None:
            envelope, payload, hook_env = self._in_dialect(hook, event, envelope, payload, settings)
        call = HookCall(
            hook=hook,
            event=event,
            envelope=envelope,
            payload=payload,
            deadline=started + hook.timeout,
            home=self.home,
            cancel=cancel or CancelToken(),
            settings=settings,
            prompt_sender=self._send_prompt,
            hook_env=hook_env,
        )
        try:
            outcome = hook.runner.run(call)
            if not isinstance(outcome, Outcome):
                raise TypeError(f"run() returned {type(outcome).__name__}, not an Outcome")
            if spec.dialect is not None and outcome.input is not None and "tool_name" in envelope:
                outcome = self._input_from_dialect(envelope, outcome, settings)
        except (Exception, SystemExit) as exc:  # a plugin's bug never reaches the embedder
            logger.error(
                "runner of plugin %r failed on hook %r", hook.runner_plugin, hook.id, exc_info=exc
            )
            outcome = Outcome.fail_open(
                f"runner {hook.runner_plugin!r} raised {type(exc).__name__}: {exc}", failure="crash"
            )
        if outcome.behavior == "modify":
            problem = check_modify_input(event, outcome.input)
            if problem is not None:
                outcome = Outcome.fail_open(problem, outcome.thread_id, failure="unparseable")
        return hook, outcome, at, time.monotonic() - started

    def _in_dialect(
        self, hook: Hook, event: str, envelope: Mapping[str, Any], payload: bytes, settings: Settings
    ) -> tuple[Mapping[str, Any], bytes, Mapping[str, str]]:
        """The envelope, stdin and environment a ``claude-code`` hook gets: Claude Code's."""
        from hookbus.claude_names import dialect_environment, envelope_to_claude, tool_names

        names = tool_names(settings.raw)
        translated = envelope_to_claude(event, envelope, names)
        if event in CONTINUE_EVENTS and "stop_hook_active" not in translated and self._stops.active(event, envelope):
            # Only when true: a hook that finds no flag at all can tell it has no host
            # that keeps one (and guard against looping itself, as cc-stop-gate does).
            translated["stop_hook_active"] = True
        hook_env = {
            **dialect_environment(event, envelope, str(hook.directory), str(self.home.root)),
            **hook.spec.env,
        }
        return MappingProxyType(translated), strict_json(translated, separators=(",", ":")) + b"\n", hook_env

    @staticmethod
    def _input_from_dialect(envelope: Mapping[str, Any], outcome: Outcome, settings: Settings) -> Outcome:
        """A dialect hook's modify, in Claude's field names, back in vixd's."""
        from hookbus.claude_names import tool_names

        claude_tool = envelope.get("tool_name")
        names = tool_names(settings.raw)
        vix_tool = names.vix_tool(claude_tool) if isinstance(claude_tool, str) else ""
        renamed = names.input_to_vix(vix_tool, outcome.input)
        return attrs.evolve(outcome, input=renamed if isinstance(renamed, dict) else outcome.input)

    def _make_resolver(self) -> Callable[[str, list[HookResult]], Any]:
        """The resolver to call per emit: a lone plain implementation directly (pluggy's
        call machinery costs more than the merge itself), else through pluggy.

        With none (the built-in blocked, say), one that raises: each emit with sync hooks
        then fails open through _resolve, reported once, as when a resolver breaks."""
        implementations = self._plugins.hook.hookbus_resolve.get_hookimpls()
        if not implementations:
            info = next((info for info in self.plugin_infos if info.name == "resolver"), None)
            if info is not None and info.blocked:
                why, fix = f"is {info.blocked}", "take 'resolver' out of HOOKBUS_DISABLE_PLUGINS"
            elif info is not None and info.error:
                why, fix = f"failed to load ({info.error})", "fix or reinstall hookbus"
            else:
                why, fix = "is not installed", "reinstall hookbus"
            message = (
                f"no resolver plugin: the built-in 'resolver' {why}, so every emit allows, "
                f"whatever its sync hooks decide; {fix}, or install a plugin that implements "
                "hookbus_resolve (`hookbus plugins` lists them)"
            )
            logger.warning("%s", message)

            def unresolved(event: str, results: list[HookResult]) -> Decision:
                raise PluginError(message)

            return unresolved
        if len(implementations) == 1 and not (implementations[0].hookwrapper or implementations[0].wrapper):
            function, names = implementations[0].function, set(implementations[0].argnames)
            if names == {"event", "results"}:
                return lambda event, results: function(event=event, results=results)
            if names == {"results"}:
                return lambda event, results: function(results=results)
        hook = self._plugins.hook.hookbus_resolve
        return lambda event, results: hook(event=event, results=results)

    def _send_prompt(self, request: PromptRequest) -> PromptResult:
        """Answer a prompt through ``hookbus_run_prompt``; PromptError says why it failed."""
        from hookbus.prompts import NO_PROVIDER, PromptError, PromptResult

        if request.cancel.cancelled:
            raise PromptError(request.cancel.reason or CANCELLED_AT_SHUTDOWN, "killed")
        try:
            result = self._plugins.hook.hookbus_run_prompt(request=request)
        except PromptError:
            raise
        except Exception as exc:
            logger.exception("a prompt provider failed on hook %r", request.hook_id)
            raise PromptError(f"the prompt provider raised {type(exc).__name__}: {exc}", "crash") from exc
        if result is None:
            raise PromptError(NO_PROVIDER)
        if isinstance(result, str):
            return PromptResult(result)
        if not isinstance(result, PromptResult):
            raise PromptError(f"the prompt provider returned {type(result).__name__}, not a PromptResult", "unparseable")
        return result

    def _decide(
        self,
        event: str,
        envelope: Mapping[str, Any],
        runs: Sequence[tuple[Hook, Outcome, str, float]],
        trace: list[RunTrace] | None = None,
    ) -> Decision:
        # ``runs`` are in hook-id order already: EventIndex.match returns them so.
        notes: dict[str, str] = {}
        runs = [self._fail_closed(run, notes) if run[1].error is not None else run for run in runs]
        results = []
        for hook, outcome, _, _ in runs:
            if not hook.spec.blocking and outcome.behavior in ("deny", "modify"):
                can_block = EVENTS[event].can_block
                notes[hook.id] = NOT_BLOCKING_NOTE if can_block else CANNOT_BLOCK_NOTE.format(event=event)
                outcome = attrs.evolve(
                    outcome, behavior="context" if outcome.context else "allow", reason=None, input=None
                )
            if outcome.permission is not None or outcome.continue_with is not None:
                outcome = self._usable_extras(event, hook, outcome, notes)
            results.append(HookResult(hook.id, outcome))
        decision = self._resolve(event, results)
        if decision.behavior == "modify" and decision.input is not None and EVENTS[event].rewrites_tool_input:
            decision = self._check_input(event, envelope, decision, notes)
        for hook, outcome, _, _ in runs:
            if outcome.behavior == "modify" and hook.id not in notes and hook.id != decision.modified_by:
                winner = decision.modified_by
                notes[hook.id] = (
                    f"superseded by the modify of hook {winner!r}" if winner else f"superseded by {decision.behavior}"
                )
        for hook, outcome, at, duration in runs:
            self._record(
                RunRecord(
                    at=at,
                    hook_id=hook.id,
                    event=event,
                    mode="sync",
                    status=outcome.behavior,
                    duration=duration,
                    error=outcome.error,
                    decision=outcome.as_dict(),
                    note=notes.get(hook.id),
                )
            )
        if trace is not None:
            from hookbus.explain import RunTrace

            trace.extend(RunTrace(hook.id, outcome, duration, notes.get(hook.id)) for hook, outcome, _, duration in runs)
        failed = tuple(
            HookFailure(hook.id, outcome.error, outcome.failure or "error", closed=outcome.behavior == "deny")
            for hook, outcome, _, _ in runs
            if outcome.error is not None
        )
        return attrs.evolve(decision, failed=failed) if failed else decision

    @staticmethod
    def _usable_extras(event: str, hook: Hook, outcome: Outcome, notes: dict[str, str]) -> Outcome:
        """``outcome`` without the extras ``event`` has no use for, and a note saying so:
        approve and ask need a blocking hook of PreToolUse or PermissionRequest, as a deny
        does; continue_with needs Stop or SubagentStop."""
        dropped: list[str] = []
        if outcome.permission is not None and (event not in PERMISSION_EVENTS or not hook.spec.blocking):
            dropped.append(f"{outcome.permission} (it needs a blocking hook of {' or '.join(PERMISSION_EVENTS)})")
            outcome = attrs.evolve(outcome, permission=None, reason=None if outcome.behavior != "deny" else outcome.reason)
        if outcome.continue_with is not None and event not in CONTINUE_EVENTS:
            dropped.append(f"continue_with (only {' and '.join(CONTINUE_EVENTS)} can go on)")
            outcome = attrs.evolve(outcome, continue_with=None)
        if dropped:
            note = "not applied: " + "; ".join(dropped)
            notes[hook.id] = f"{notes[hook.id]}; {note}" if hook.id in notes else note
        return outcome

    @staticmethod
    def _fail_closed(run: _Run, notes: dict[str, str]) -> _Run:
        """A failed hook with ``"on_error": "deny"``: its fire is a deny that says how it
        failed. Any other failed hook fails open, as the spec says."""
        hook, outcome, at, duration = run
        if hook.spec.on_error != "deny" or outcome.behavior != "allow":
            return run
        how = FAILURES.get(outcome.failure or "error", FAILURES["error"])
        closed = attrs.evolve(outcome, behavior="deny", reason=f"failed closed: the hook {how} ({outcome.error})")
        notes[hook.id] = FAILED_CLOSED_NOTE
        return hook, closed, at, duration

    def _resolve(self, event: str, results: list[HookResult]) -> Decision:
        try:
            decision = self._resolver(event, results)
        except Exception as exc:
            self._report.failed("resolver", f"the resolver raised {type(exc).__name__}: {exc}; failing open")
            return ALLOW
        if not isinstance(decision, Decision):
            self._report.failed("resolver", f"the resolver returned {decision!r}; failing open")
            return ALLOW
        self._report.succeeded("resolver")
        return decision

    def _check_input(
        self, event: str, envelope: Mapping[str, Any], decision: Decision, notes: dict[str, str]
    ) -> Decision:
        assert decision.input is not None
        try:
            reason = self._plugins.hook.hookbus_check_input(
                event=event, envelope=envelope, new_input=decision.input
            )
        except Exception as exc:
            logger.exception("hookbus_check_input raised")
            reason = f"the input check failed ({type(exc).__name__}: {exc})"
        if not reason:
            return decision
        modifier = decision.modified_by or "?"
        notes[modifier] = f"rewritten input denied by the input check: {reason}"
        return Decision(
            "deny",
            reason=f"input rewritten by hook {modifier!r} was denied: {reason}",
            context=decision.context,
            denied_by=(modifier,),
        )

    # -- async hooks --------------------------------------------------------------------

    def _threads(self) -> ElasticThreads:
        threads = self._sync_threads
        if threads is not None:
            return threads
        from hookbus.workers import ElasticThreads  # only for parallel sync hooks and aemit

        with self._lock:
            if self._sync_threads is None:
                self._sync_threads = ElasticThreads("hookbus-sync", SYNC_THREAD_IDLE_SECONDS)
            return self._sync_threads

    def _start_async_workers(self) -> AsyncWorkers[_AsyncJob]:
        from hookbus.workers import AsyncWorkers  # a bus with no async hook never needs it

        with self._lock:
            if self._async is None:
                self._async = AsyncWorkers(self.async_workers, self._run_async, self._record_cancelled)
            return self._async

    def _run_async(self, job: _AsyncJob, cancel: CancelToken) -> RunRecord:
        hook, event, full, payload, manual, settings = job
        _, outcome, at, duration = self._run(hook, event, full, payload, settings, cancel)
        # What trigger() returns is the record as recorded: secrets masked there too.
        return self._record(_async_record(hook, event, outcome, at, duration, manual))

    def _record_cancelled(self, job: _AsyncJob, reason: str) -> None:
        """A queued async job that close() ended before it started: recorded, not lost."""
        hook, event, _, _, manual, _ = job
        self._record(_async_record(hook, event, Outcome.fail_open(reason), utc_timestamp(), 0.0, manual))

    # -- manual fire --------------------------------------------------------------------

    def trigger(self, hook_id: str, envelope: Mapping[str, Any] | None = None) -> RunRecord:
        """Fire one hook by id now, on this thread, whatever its trigger; recorded as async."""
        if self._closed:
            raise BusClosedError("trigger on a closed HookBus")
        snapshot = self._snapshot
        reason = snapshot.settings.disabled_reason
        if reason:
            raise HooksDisabledError(f"hooks are disabled: {reason}")
        hook = snapshot.hooks.get(hook_id)
        if hook is None:
            known = ", ".join(snapshot.hooks) or "none"
            raise HookNotFoundError(
                f"no valid hook {hook_id!r} in {self.home.hooks_dir} (loaded: {known}); "
                "`hookbus validate` says why a hook is skipped"
            )
        full, payload = encode_envelope(hook.event, check_envelope(envelope))
        cancel = CancelToken()
        with self._lock:
            self._running.add(cancel)
            if self._interrupted is not None:
                cancel.cancel(self._interrupted)
        try:
            return self._run_async((hook, hook.event, full, payload, True, snapshot.settings), cancel)
        finally:
            with self._lock:
                self._running.discard(cancel)

    # -- recording ----------------------------------------------------------------------

    def _record(self, record: RunRecord) -> RunRecord:
        """Hand a record to every active recorder; one that raises is reported once and skipped.

        Secrets a runner registered (an API key a server echoed back) are masked first; the
        masked record is returned."""
        record = redact_record(record)
        for key, call in self._record_functions:
            try:
                call(record)
            except Exception as exc:
                with self._lock:
                    self._raised[key] += 1
                self._report.failed(key, f"{key} raised {type(exc).__name__}: {exc}; the record is lost to it")
            else:
                self._report.succeeded(key)
        return record

    @property
    def lost_records(self) -> int:
        """Records that did not reach an active recorder: those a recorder raised on, plus
        those a recorder counted as lost itself, through an optional module-level
        ``lost_records(home)`` of its plugin (the built-in one counts what the disk or the
        checks on logs/ refused, for this home, in this process). Each loss is also reported
        on the ``hookbus`` logger, once per failure and once on recovery."""
        counted = 0
        for name in self.active_recorders:
            plugin = self._plugins.get_plugin(name)
            count = getattr(plugin, "lost_records", None)
            if callable(count):
                counted += int(count(self.home))
        with self._lock:
            return counted + sum(self._raised.values())

    def read_runs(self, hook_id: str | None = None, limit: int | None = None) -> list[RunRecord]:
        """Recorded fires, oldest first, from the first active recorder that can read them."""
        for plugin, call in self._recorder_calls("hookbus_read_runs", bus=self, hook_id=hook_id, limit=limit):
            try:
                runs = call()
            except Exception as exc:
                key = f"reader {plugin!r}"
                self._report.failed(key, f"recorder {plugin!r} could not read runs: {type(exc).__name__}: {exc}")
                continue
            if runs is not None:
                return list(runs)
        return []

    # -- shutting down ------------------------------------------------------------------

    def interrupt(self, reason: str = "interrupted") -> None:
        """Stop every hook that is running, sync and async, now: their process groups are
        killed, and each fire is recorded with ``reason`` as its error (a blocking hook with
        ``"on_error": "deny"`` then denies). Emits in progress return at once; hooks that
        were not started yet never start. Safe to call from any thread; a signal handler
        should call it from a new thread (it takes locks the interrupted thread may hold).
        Follow it with ``close()``.
        """
        with self._lock:
            if self._interrupted is None:
                self._interrupted = reason
            running = list(self._running)
            workers = self._async
        for token in running:
            token.cancel(reason)
        if workers is not None:
            workers.cancel_all(reason)

    def close(self, timeout: float | None = None) -> None:
        """Stop taking emits, let running hooks finish for up to ``timeout`` seconds
        (default ``shutdown_timeout``), kill and record what is left as
        "cancelled at shutdown", then let recorders flush. Idempotent.

        It returns within ``timeout`` + CANCEL_GRACE_SECONDS (5 s) plus the recorders' flush;
        killed hooks are recorded within milliseconds, so the grace is rarely used. A runner
        that ignores cancellation can cost one more grace period, never more.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._watcher is not None:
            self._watcher.stop()
        bound = self.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + bound
        workers = self._async
        if workers is not None:
            workers.drain(deadline)
        with self._lock:
            while self._sync_emits and time.monotonic() < deadline:
                self._lock.wait(clamp_wait(deadline - time.monotonic()))
        if workers is not None:
            # What is left is killed (running) or never started (queued): each is recorded.
            workers.cancel_all(self._interrupted or CANCELLED_AT_SHUTDOWN)
            workers.drain(time.monotonic() + CANCEL_GRACE_SECONDS)
            workers.stop(CANCEL_GRACE_SECONDS)
        if self._sync_threads is not None:
            self._sync_threads.shutdown()
        for plugin, call in each_implementation(self._plugins.hook.hookbus_shutdown, bus=self):
            try:
                call()
            except Exception:
                logger.exception("plugin %r failed to shut down", plugin)
        lost = self.lost_records
        if lost:
            # Each failure was reported as it began; this is the total, as the bus closes.
            one = lost == 1
            logger.warning(
                "%s %s of %s %s not recorded (refused by the disk or by a recorder; the "
                "errors reported earlier say why)",
                f"{lost:,}", "fire" if one else "fires", self.home.root, "was" if one else "were",
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> HookBus:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def aclose(self, timeout: float | None = None) -> None:
        """``close()`` for asyncio: it waits for the hooks and the recorders on a thread of
        its own, so the event loop goes on running meanwhile (and no executor's queue can
        hold it up). Cancelling the await does not stop the close."""
        import asyncio

        loop = asyncio.get_running_loop()
        finished: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if finished.done():
                return
            if error is None:
                finished.set_result(None)
            else:
                finished.set_exception(error)

        def run() -> None:
            error: BaseException | None = None
            try:
                self.close(timeout)
            except BaseException as exc:  # handed to the awaiting task, not lost on this thread
                error = exc
            try:
                loop.call_soon_threadsafe(settle, error)
            except RuntimeError:
                pass  # the loop closed meanwhile: nobody is waiting

        threading.Thread(target=run, name="hookbus-aclose", daemon=True).start()
        await finished

    async def __aenter__(self) -> HookBus:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


_log_redaction_installed = False


def _install_log_redaction() -> None:
    """Mask registered secrets in whatever hookbus logs. A filter on a logger sees only what
    is logged on that very logger, so each of hookbus's gets one."""
    global _log_redaction_installed
    if _log_redaction_installed:
        return
    from hookbus.redaction import RedactingFilter

    for name in ("hookbus", "hookbus.load"):
        logging.getLogger(name).addFilter(RedactingFilter())
    _log_redaction_installed = True


def _record_call(implementation: Any, bus: HookBus) -> Callable[[RunRecord], object]:
    """A recorder's ``hookbus_record`` as a call taking the record, with only the arguments
    it asks for (as pluggy would pass them), bound once."""
    function = implementation.function
    takes_bus, takes_record = "bus" in implementation.argnames, "record" in implementation.argnames
    if takes_bus and takes_record:
        return lambda record: function(bus=bus, record=record)
    if takes_record:
        return lambda record: function(record=record)
    return lambda record: function(bus=bus) if takes_bus else function()


def _async_record(
    hook: Hook, event: str, outcome: Outcome, at: str, duration: float, manual: bool
) -> RunRecord:
    return RunRecord(
        at=at,
        hook_id=hook.id,
        event=event,
        mode="async",
        status="error" if outcome.error else "done",
        duration=duration,
        error=outcome.error,
        thread_id=outcome.thread_id,
        decision=outcome.as_dict(),
        manual=manual,
    )


def _done(decision: Decision) -> Future[Decision]:
    from concurrent.futures import Future  # only submit and aemit need it

    future: Future[Decision] = Future()
    future.set_result(decision)
    return future


@functools.lru_cache(maxsize=None)
def _allowed() -> Future[Decision]:
    """What ``submit`` returns when nothing matched: one finished Future, shared (a Future
    costs a lock and a condition to make)."""
    return _done(ALLOW)
