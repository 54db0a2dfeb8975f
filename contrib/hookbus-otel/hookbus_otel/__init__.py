"""hookbus-otel: a hookbus recorder that emits every hook fire as an OpenTelemetry span.

Installed, the plugin is available as the recorder ``otel``; like every recorder it records
only when settings.json selects it. To keep the built-in files (state.json and the daily
JSONL log) and add spans::

    {"recorder": ["recorder", "otel"]}

``{"recorder": "otel"}`` sends spans only (``hookbus log`` then has nothing to read).

Each fire becomes one span, named ``hookbus <event> <hook_id>``, that starts at the
record's ``at`` and lasts its ``duration``, with attributes in OpenTelemetry's naming style
(lowercase, dot-namespaced; ``span_attributes``): ``hookbus.hook.id``, ``hookbus.hook.mode``,
``hookbus.hook.tier``, ``hookbus.event``, ``hookbus.status``, ``hookbus.decision.behavior``,
``hookbus.duration_ms``, ``hookbus.manual``, and ``hookbus.decision.note``,
``hookbus.thread.id`` and ``error.type`` when they apply. Its status is ERROR (with the
error as description) when the fire failed, OK otherwise: a deny is a decision, not an
error.

Where spans go, first that applies: the provider given to
``set_tracer_provider_for_hookbus`` (tests); the global tracer provider, once the daemon (or
``opentelemetry-instrument``) has set one, so the daemon's own setup always wins, even when
it is set after the bus started; else a provider of hookbus-otel's own, built from the
standard ``OTEL_*`` variables when a bus starts (or on the first fire), that exports over
OTLP/HTTP with a BatchSpanProcessor (``hookbus_otel.export``). With no ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` it builds none: spans go nowhere, as with the API's
no-op provider, and that is said once on the ``hookbus.otel`` logger. A sync hook's span is a
child of the span current on the thread that called ``emit``.

Recording never raises into the bus and never changes a decision. A tracer that fails is
logged once on the ``hookbus.otel`` logger (and once more when it recovers); spans the
collector refuses or never gets, and spans a full export queue turns away, are counted and
reported once: ``lost_records(home)`` says how many, and ``bus.lost_records`` and the bus's
closing total include them. ``close()`` of the bus force-flushes the provider the spans went
to, so that none are left behind when the daemon exits, but for FLUSH_SECONDS (1 s) at
most: a collector that is down or never answers holds neither ``close()`` nor the process's
exit (``hookbus emit`` exits that much late at worst, not the exporter's 7.5 s of retries).
With hookbus-otel's own provider, the spans the collector had not taken by then when the
last bus closes (or at exit) are counted as lost.

Texts that could be long (the error, as the status description; the note and the thread id)
are cut at MAX_TEXT_CHARS, and the spans waiting for the collector are bounded in bytes
(``hookbus_otel.export.MAX_SPAN_BYTES``), not only in number.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import hookbus.recorders
from hookbus import hookimpl
from hookbus.decision import cap_text
from hookbus.records import CANCELLED_AT_SHUTDOWN, RunRecord
from hookbus.redaction import RedactingFilter
from hookbus.reporting import ReportOnce
from opentelemetry import trace

if TYPE_CHECKING:
    from hookbus.bus import HookBus
    from hookbus.home import Home

    from hookbus_otel.export import OwnProvider

__version__ = "0.1.0"

__all__ = [
    "ENDPOINT_VARIABLES",
    "FLUSH_SECONDS",
    "MAX_TEXT_CHARS",
    "TRACER_NAME",
    "__version__",
    "call_within",
    "error_type",
    "flush_seconds",
    "hookbus_record",
    "hookbus_shutdown",
    "hookbus_startup",
    "lost_records",
    "set_tracer_provider_for_hookbus",
    "span_attributes",
    "span_name",
    "span_times",
]

#: The instrumentation scope of the spans.
TRACER_NAME = "hookbus"
#: How long closing a bus (or the process's exit) gives the provider to export the spans it
#: holds, in seconds; then hookbus-otel's own exporter is stopped and what it had not sent is
#: counted as lost. Never more than FLUSH_SHARE of hookbus's own bound on a plugin's
#: shutdown (``hookbus.recorders.RECORDER_FLUSH_SECONDS``), so that the rest is left for
#: stopping and counting before the bus stops waiting for this plugin.
FLUSH_SECONDS = 1.0
FLUSH_SHARE = 0.6
#: A span's texts that could be long (the error as its status description, the note, the
#: thread id) are cut here, with a marker: the log has them whole, and a span queue of them
#: must stay small.
MAX_TEXT_CHARS = 4096

#: Either one says where the collector is; with neither, hookbus-otel builds no exporter.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

#: The general conventions' value for an error of no known kind.
OTHER_ERROR = "_OTHER"

logger = logging.getLogger("hookbus.otel")
# Filters on "hookbus" do not see this child's records: a backend key echoed in an export
# error must be masked here too.
logger.addFilter(RedactingFilter())

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_lock = threading.Lock()
#: The provider set by set_tracer_provider_for_hookbus; None: the global one, or our own.
_provider: trace.TracerProvider | None = None
#: The tracer of the provider last used, so a fire does not ask the provider again.
_tracer: tuple[trace.TracerProvider, trace.Tracer] | None = None
#: The providers that got spans since the last flush.
_unflushed: list[trace.TracerProvider] = []
#: Failures are logged once until they recover, as the core's are.
_report = ReportOnce(logger)
#: A tracer failing to make spans, as its reports name it (export failures are export's).
_EMITTING = "hookbus-otel: emitting spans"
#: Spans the tracer failed to make, by the home whose bus recorded them.
_not_emitted: Counter[Path] = Counter()
#: The OTLP provider built from the environment, once it was asked for (None inside: the
#: environment says to send spans nowhere). Rebuilt, with the same ledger, for a bus that
#: records after the last one closed it.
_own: list[OwnProvider | None] = []
#: Buses started and not shut down yet, in this process: the last one's shutdown closes our
#: own provider when its spans do not get out in time.
_open_buses = 0
#: Set by the exit handler: no provider is built any more.
_exiting = False


def flush_seconds() -> float:
    """How long closing a bus waits for spans to be exported: FLUSH_SECONDS, or less when
    hookbus's RECORDER_FLUSH_SECONDS leaves less (both read now: an embedder may have
    changed them)."""
    return max(0.0, min(FLUSH_SECONDS, FLUSH_SHARE * float(hookbus.recorders.RECORDER_FLUSH_SECONDS)))


def call_within(function: Callable[[], Any], deadline: float, name: str) -> tuple[bool, Any]:
    """``function()`` on a daemon thread of its own, waited for until ``deadline``
    (``time.monotonic()``): ``(True, its result)`` when it returned in time (what it raised
    is raised here), ``(False, None)`` when it had not: it goes on in the background, and
    dies with the process. The SDK's flush and shutdown take no deadline they keep."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, function()))
        except BaseException as exc:  # handed to the waiting thread
            outcome.append((False, exc))

    thread = threading.Thread(target=run, name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread to be had: the process is out of them, or exiting
        run()
    else:
        thread.join(max(0.0, deadline - time.monotonic()))
    if not outcome:
        return False, None
    returned, value = outcome[0]
    if not returned:
        raise value
    return True, value


def set_tracer_provider_for_hookbus(provider: trace.TracerProvider | None) -> None:
    """Send the spans to ``provider`` instead of the global tracer provider (None: back to
    the global one, or hookbus-otel's own OTLP one). For tests, and for daemons that keep
    hookbus's spans apart.

    A failure of the new provider is reported afresh, even if the old one was failing.
    """
    global _provider, _tracer, _report
    with _lock:
        _provider = provider
        _tracer = None
        _report = ReportOnce(logger)


def span_name(record: RunRecord) -> str:
    """``hookbus <event> <hook_id>``."""
    return f"hookbus {record.event} {record.hook_id}"


def error_type(error: str) -> str:
    """``error.type`` of a failed fire: hookbus's own failure kinds (``timeout``, ``crash``,
    ``killed``), read from the error's wording since a record does not carry the kind, else
    ``_OTHER``. Low-cardinality by design: the whole error is the span status's description."""
    if error.startswith("timed out") or "did not return within its timeout" in error:
        return "timeout"
    if error.startswith(("exited with status", "runner ", "the prompt provider raised", "could not start")):
        return "crash"
    if error.startswith(("killed by", "interrupted", "cancelled")) or error == CANCELLED_AT_SHUTDOWN:
        return "killed"
    return OTHER_ERROR


def span_attributes(record: RunRecord) -> dict[str, str | bool | float]:
    """The span's attributes; the decision's behavior, note, thread id and error type only
    when the record has them (the note and the thread id cut at MAX_TEXT_CHARS). The
    decision's reason, rewritten input and context are not sent: they can carry tool input
    and prompt text.

    Named as OpenTelemetry's naming rules ask (lowercase, namespaced under ``hookbus.``);
    ``error.type`` is the general conventions' own. The OS thread is semconv's
    ``thread.id``, so the conversation thread a prompt or workflow ran in is
    ``hookbus.thread.id``. The tier is the hook's, like its id and mode, so it is
    ``hookbus.hook.tier``; it is always set, "user" included, so that a query for the
    user's own hooks needs no "attribute absent" clause."""
    attributes: dict[str, str | bool | float] = {
        "hookbus.hook.id": record.hook_id,
        "hookbus.hook.mode": record.mode,
        "hookbus.hook.tier": record.tier,
        "hookbus.event": record.event,
        "hookbus.status": record.status,
        "hookbus.duration_ms": round(record.duration * 1000, 3),
        "hookbus.manual": record.manual,
    }
    behavior = (record.decision or {}).get("behavior")
    if isinstance(behavior, str):
        attributes["hookbus.decision.behavior"] = behavior
    if record.note:
        attributes["hookbus.decision.note"] = cap_text(record.note, MAX_TEXT_CHARS)
    if record.thread_id:
        attributes["hookbus.thread.id"] = cap_text(record.thread_id, MAX_TEXT_CHARS)
    if record.error:
        attributes["error.type"] = error_type(record.error)
    return attributes


def span_times(record: RunRecord) -> tuple[int, int]:
    """Start and end in nanoseconds since the epoch: ``at``, and ``at`` plus ``duration``.

    ``at`` has millisecond resolution; a record whose ``at`` does not parse (one made by
    hand, not by the bus) ends now instead.
    """
    duration_ns = max(0, round(record.duration * 1e9))
    try:
        moment = datetime.strptime(record.at, "%Y-%m-%dT%H:%M:%S.%f%z")
    except ValueError:
        end = time.time_ns()
        return end - duration_ns, end
    start = (moment - _EPOCH) // _MICROSECOND * 1000
    return start, start + duration_ns


def _own_provider() -> OwnProvider | None:
    """hookbus-otel's OTLP provider, built from the environment on first use; None when the
    environment sends spans nowhere. Built once per process (the variables are read then),
    and a failure to build it is final too: it would fail the same way on every fire. Only
    a provider closed by the last bus's shutdown is built again, for a bus that came after."""
    if _own and (_own[0] is None or not _own[0].stopped):
        return _own[0]
    with _lock:
        closed = _own[0] if _own else None
        if closed is not None and closed.stopped:
            if _exiting:
                return None
            from hookbus_otel.export import build_own_provider

            _own.clear()
            try:
                _own.append(build_own_provider(closed.ledger))
            except Exception:  # it was built once: the same variables build it again
                _own.append(None)
                logger.exception("hookbus-otel could not set its OTLP exporter up again")
        if not _own:
            own: OwnProvider | None = None
            try:
                from hookbus_otel.export import build_own_provider

                own = build_own_provider()
            except Exception as exc:
                logger.error(
                    "hookbus-otel could not set up its OTLP exporter from the OTEL_* variables "
                    "(%s: %s): spans go nowhere in this process; fix the variable it names, or "
                    "set a tracer provider up in the daemon",
                    type(exc).__name__,
                    exc,
                )
            _own.append(own)
            if own is not None:
                atexit.register(_close_own_at_exit)
    return _own[0]


def _close_own_at_exit() -> None:
    """At exit, what our own provider still holds gets ``flush_seconds()`` to reach the
    collector, then is counted as lost: the SDK's own exit handler, which this
    provider does not have, would wait out every retry (7.5 s against a collector that is
    down)."""
    global _exiting
    with _lock:
        _exiting = True
        own = _own[0] if _own else None
    if own is not None and not own.stopped:
        own.close(time.monotonic() + flush_seconds(), f"within {flush_seconds():g} s as the process exited")


def _no_provider_to_defer_to() -> bool:
    """Whether spans would go to the API's proxy: no provider of the daemon's, none set for
    hookbus. The proxy stands in until someone sets a provider."""
    return _provider is None and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _current_tracer() -> tuple[trace.TracerProvider, trace.Tracer]:
    global _tracer
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    # Checked on every fire, so that a daemon that sets its provider after the bus started
    # takes over from then on.
    if _no_provider_to_defer_to():
        own = _own_provider()
        if own is not None:
            provider = own.provider
    cached = _tracer
    if cached is not None and cached[0] is provider:
        return cached
    tracer = provider.get_tracer(TRACER_NAME, __version__)
    with _lock:
        _tracer = (provider, tracer)
    return provider, tracer


@hookimpl
def hookbus_startup(bus: HookBus) -> None:
    """With a collector named in the environment and no provider to defer to, set
    hookbus-otel's own provider up now: importing the exporter takes about 0.1 s, which the
    first fire would otherwise pay inside its emit. (Whether ``otel`` records is not known
    yet; an endpoint variable is the operator's word that this process exports.)"""
    global _open_buses
    with _lock:
        _open_buses += 1
    if _no_provider_to_defer_to() and any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES):
        _own_provider()


@hookimpl
def hookbus_record(bus: HookBus, record: RunRecord) -> None:
    """One span per fire; never raises."""
    home = bus.home.root
    try:
        provider, tracer = _current_tracer()
        if provider not in _unflushed:  # before the span: a half-made one may be buffered
            with _lock:
                if provider not in _unflushed:
                    _unflushed.append(provider)
        start, end = span_times(record)
        span = tracer.start_span(
            span_name(record),
            kind=trace.SpanKind.INTERNAL,
            attributes=span_attributes(record),
            start_time=start,
        )
        try:
            if record.error:
                span.set_status(trace.Status(trace.StatusCode.ERROR, cap_text(record.error, MAX_TEXT_CHARS)))
            else:
                span.set_status(trace.Status(trace.StatusCode.OK))
        finally:
            _end_span(span, end, home)
    except Exception as exc:
        with _lock:
            _not_emitted[home] += 1
        _report.failed(
            _EMITTING,
            f"hookbus-otel could not emit the span of hook {record.hook_id!r}: {type(exc).__name__}: {exc}",
            lost=1,
        )
    else:
        _report.succeeded(_EMITTING)


def _end_span(span: trace.Span, end: int, home: Path) -> None:
    """End ``span``, telling our own processor (which ``end`` calls on this thread) whose
    span it is, so that a loss is counted for the right home."""
    if not _own or _own[0] is None:
        span.end(end_time=end)
        return
    from hookbus_otel.export import ending_span_home

    ending_span_home.home = home
    try:
        span.end(end_time=end)
    finally:
        ending_span_home.home = None


def lost_records(home: Home | None = None) -> int:
    """Fires of ``home`` (of every home, when None) whose span this process lost: the tracer
    failed to make it, or hookbus-otel's own OTLP exporter could not deliver it (the
    collector refused it or could not be reached, or the export queue was full). Each
    failure is also reported on the ``hookbus.otel`` logger, once until it recovers.
    ``bus.lost_records`` asks this of the bus's home.

    Spans given to a daemon's own tracer provider are its SDK's to count: they are lost
    there, if at all, out of hookbus's sight."""
    with _lock:
        lost = sum(_not_emitted.values()) if home is None else _not_emitted[home.root]
    own = _own[0] if _own else None
    if own is not None:
        lost += own.ledger.lost_in(None if home is None else home.root)
    return lost


@hookimpl
def hookbus_shutdown(bus: HookBus) -> None:
    """Flush the providers that got spans, so that none are lost when the daemon exits,
    within ``flush_seconds()`` in all (FLUSH_SECONDS): a collector
    that is down or never answers must not hold the bus's close, nor ``hookbus emit``'s exit.

    A provider without ``force_flush`` (the API's no-op and proxy providers) is skipped.
    hookbus-otel's own provider, when this is the last bus of the process and its spans did
    not get out in time, is closed: its exporter stops retrying, and what it still held is
    counted as lost and reported. With other buses still open it goes on exporting in the
    background. A daemon's provider that is not done in time is left to finish, and said.
    """
    global _open_buses
    budget = flush_seconds()
    deadline = time.monotonic() + budget
    with _lock:
        _open_buses = max(0, _open_buses - 1)
        last = not _open_buses
        providers = list(_unflushed)
        _unflushed.clear()
    own = _own[0] if _own else None
    for provider in providers:
        if own is not None and provider is own.provider:
            continue
        flush: Callable[..., Any] | None = getattr(provider, "force_flush", None)
        if flush is None:
            continue
        try:
            # The SDK ignores the timeout it is given (it exports on this thread, retries
            # and all): the bound is kept by not waiting longer.
            done, flushed = call_within(
                lambda: flush(timeout_millis=int(budget * 1000)), deadline, "hookbus-otel-flush"
            )
            if not done or flushed is False:
                logger.warning(
                    "hookbus-otel: the tracer provider did not flush its spans within %g s; "
                    "they go on being exported in the background, and are lost if the process "
                    "exits first",
                    budget,
                )
        except Exception as exc:
            logger.error("hookbus-otel: flushing the tracer provider raised %s: %s", type(exc).__name__, exc)
    if own is None or own.stopped or own.provider not in providers:
        return
    if last:
        own.close(deadline, f"within {budget:g} s as the last bus closed")
    elif not own.flush(deadline):
        logger.warning(
            "hookbus-otel: %d spans still wait for the collector at %s after %g s; they go on "
            "being exported in the background, and are counted as lost if the process exits first",
            own.ledger.in_flight,
            own.endpoint,
            budget,
        )
