"""hookbus-otel: a hookbus recorder that emits every hook fire as an OpenTelemetry span.

Installed, the plugin is available as the recorder ``otel``; like every recorder it records
only when settings.json selects it. To keep the built-in files (state.json and the daily
JSONL log) and add spans::

    {"recorder": ["recorder", "otel"]}

``{"recorder": "otel"}`` sends spans only (``hookbus log`` then has nothing to read).

Each fire becomes one span, named ``hookbus <event> <hook_id>``, that starts at the
record's ``at`` and lasts its ``duration``, with the attributes ``hookbus.hook_id``,
``hookbus.event``, ``hookbus.mode``, ``hookbus.status``, ``hookbus.duration_ms``,
``hookbus.manual``, and ``hookbus.error``, ``hookbus.thread_id`` and ``hookbus.note`` when
the record has them. Its status is ERROR (with the error as description) when the fire
failed, OK otherwise: a deny is a decision, not an error.

Spans go to the global tracer provider (``opentelemetry.trace.get_tracer_provider()``), so
whatever the daemon configured (an OTLP exporter pointed by ``OTEL_EXPORTER_OTLP_ENDPOINT``,
say) is used; with none configured they cost next to nothing and go nowhere.
``set_tracer_provider_for_hookbus(provider)`` sends them to another provider instead (tests
use it with the SDK's in-memory exporter). A sync hook's span is a child of the span current
on the thread that called ``emit``, so hook fires nest under the daemon's own spans.

Recording never raises into the bus: a tracer or exporter that fails is logged once on the
``hookbus.otel`` logger (and once more when it recovers), and the fire is decided and
recorded by the other recorders as usual. ``close()`` of the bus force-flushes the provider
the spans went to, so that none are lost when the daemon exits.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from hookbus import hookimpl
from hookbus.records import RunRecord
from hookbus.reporting import ReportOnce
from opentelemetry import trace

if TYPE_CHECKING:
    from hookbus.bus import HookBus

__version__ = "0.1.0"

__all__ = [
    "FLUSH_TIMEOUT_MILLIS",
    "TRACER_NAME",
    "__version__",
    "hookbus_record",
    "hookbus_shutdown",
    "set_tracer_provider_for_hookbus",
    "span_attributes",
    "span_name",
    "span_times",
]

#: The instrumentation scope of the spans.
TRACER_NAME = "hookbus"
#: How long closing a bus waits for the provider to export its spans.
FLUSH_TIMEOUT_MILLIS = 30_000

logger = logging.getLogger("hookbus.otel")

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_lock = threading.Lock()
#: The provider set by set_tracer_provider_for_hookbus; None: the global one.
_provider: trace.TracerProvider | None = None
#: The tracer of the provider last used, so a fire does not ask the provider again.
_tracer: tuple[trace.TracerProvider, trace.Tracer] | None = None
#: The providers that got spans since the last flush.
_unflushed: list[trace.TracerProvider] = []
#: Failures are logged once until they recover, as the core's are.
_report = ReportOnce(logger)
#: The one thing this plugin can fail at, as its reports name it.
_EMITTING = "hookbus-otel: emitting spans"


def set_tracer_provider_for_hookbus(provider: trace.TracerProvider | None) -> None:
    """Send the spans to ``provider`` instead of the global tracer provider (None: back to
    the global one). For tests, and for daemons that keep hookbus's spans apart.

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


def span_attributes(record: RunRecord) -> dict[str, str | bool | float]:
    """The span's attributes; error, thread_id and note only when the record has them."""
    attributes: dict[str, str | bool | float] = {
        "hookbus.hook_id": record.hook_id,
        "hookbus.event": record.event,
        "hookbus.mode": record.mode,
        "hookbus.status": record.status,
        "hookbus.duration_ms": round(record.duration * 1000, 3),
        "hookbus.manual": record.manual,
    }
    if record.error:
        attributes["hookbus.error"] = record.error
    if record.thread_id:
        attributes["hookbus.thread_id"] = record.thread_id
    if record.note:
        attributes["hookbus.note"] = record.note
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


def _current_tracer() -> tuple[trace.TracerProvider, trace.Tracer]:
    global _tracer
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    cached = _tracer
    if cached is not None and cached[0] is provider:
        return cached
    tracer = provider.get_tracer(TRACER_NAME, __version__)
    with _lock:
        _tracer = (provider, tracer)
    return provider, tracer


@hookimpl
def hookbus_record(record: RunRecord) -> None:
    """One span per fire; never raises."""
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
                span.set_status(trace.Status(trace.StatusCode.ERROR, record.error))
            else:
                span.set_status(trace.Status(trace.StatusCode.OK))
        finally:
            span.end(end_time=end)
    except Exception as exc:
        _report.failed(
            _EMITTING,
            f"hookbus-otel could not emit the span of hook {record.hook_id!r}: {type(exc).__name__}: {exc}",
        )
    else:
        _report.succeeded(_EMITTING)


@hookimpl
def hookbus_shutdown(bus: HookBus) -> None:
    """Flush the providers that got spans, so that none are lost when the daemon exits.

    A provider without ``force_flush`` (the API's no-op and proxy providers) is skipped.
    """
    with _lock:
        providers = list(_unflushed)
        _unflushed.clear()
    for provider in providers:
        flush: Callable[..., Any] | None = getattr(provider, "force_flush", None)
        if flush is None:
            continue
        try:
            if flush(timeout_millis=FLUSH_TIMEOUT_MILLIS) is False:
                logger.warning(
                    "hookbus-otel: the tracer provider did not flush its spans within %s ms",
                    FLUSH_TIMEOUT_MILLIS,
                )
        except Exception as exc:
            logger.error("hookbus-otel: flushing the tracer provider raised %s: %s", type(exc).__name__, exc)

