"""The tracer provider hookbus-otel sets up when the daemon set up none: OTLP, configured
by the standard ``OTEL_*`` environment variables, and counting what it loses.

Only built when spans would otherwise go to the API's no-op provider, and only when an
endpoint variable (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``)
is set: without one the spans go nowhere, as before, and that is said once. The exporter
reads the endpoint, headers, timeout, compression and certificates itself;
``Resource.create`` reads ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``; the batch
processor reads ``OTEL_BSP_*``; the provider reads ``OTEL_TRACES_SAMPLER``. Nothing here
re-parses what those read, except the queue and batch sizes, which the loss count must
know. ``OTEL_SDK_DISABLED=true`` and ``OTEL_TRACES_EXPORTER=none`` build nothing.

Losses: a span the collector refused or never got (``SpanExportResult.FAILURE``, or an
exporter that raised), a span that found the batch queue full (in spans, or in bytes:
``MAX_SPAN_BYTES``), and a span still unexported when the last bus closes or the process
exits and the collector did not take it in time, are counted by the home whose bus recorded
it (``lost_in``) and reported once on the ``hookbus.otel`` logger until export works again.
Export runs on the batch processor's thread, or in ``force_flush`` when a bus closes, never
on an emitting thread.

Exit: the SDK's own exit handler (``TracerProvider(shutdown_on_exit=True)``) would wait up
to 30 s for the batch processor's thread, which retries a collector that is down with
backoff (1, 2, 4 s: some 7.5 s) and waits OTEL_EXPORTER_OTLP_TIMEOUT (10 s) on one that
never answers. This provider has none: ``OwnProvider.close`` bounds it instead, from the
last bus's close or from an exit handler of hookbus-otel's, to hookbus's
RECORDER_FLUSH_SECONDS, then stops the exporter's retries and counts what is left as lost.

``hookbus_otel`` imports this module (and so the SDK) only when it builds the provider: a
daemon with a provider of its own never pays for it.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from hookbus.redaction import redact_url, register_secret
from hookbus.reporting import ReportOnce
from hookbus_otel import ENDPOINT_VARIABLES, call_within
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.re import parse_env_headers

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "LossLedger",
    "OwnProvider",
    "build_own_provider",
    "ending_span_home",
]

logger = logging.getLogger("hookbus.otel")

#: service.name when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names one
#: (the SDK's own default, ``unknown_service:python3``, says nothing in a fleet's backend).
DEFAULT_SERVICE_NAME = "hookbus"
#: The SDK's defaults for OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE.
DEFAULT_MAX_QUEUE_SIZE = 2048
DEFAULT_MAX_EXPORT_BATCH_SIZE = 512
#: A reason longer than this (an exporter quoting a whole urllib3 chain) is cut.
MAX_REASON_CHARS = 600
#: What the spans waiting for the collector, and those being exported, may hold at most, in
#: bytes (``span_bytes`` estimates each): the queue's bound in spans alone
#: (OTEL_BSP_MAX_QUEUE_SIZE, 2048) would let spans that carry long error texts hold
#: gigabytes behind a collector that is down.
MAX_SPAN_BYTES = 16 << 20
#: What an ended SDK span holds beyond its text (its context, resource and attribute
#: containers, the processor's slot), measured with tracemalloc at about 3.1 KiB.
SPAN_OVERHEAD_BYTES = 4096
#: How long stopping the provider waits for its exports to give up once told to stop.
ABORT_GRACE_SECONDS = 0.2

_EXPORTING = "hookbus-otel: exporting spans"
_QUEUEING = "hookbus-otel: queueing spans"

#: The home whose bus is ending a span on this thread: ``span.end`` calls the processor's
#: ``on_end`` synchronously on the same thread, so this says whose span it is without any
#: attribute on the span itself.
ending_span_home = threading.local()


def span_bytes(span: ReadableSpan) -> int:
    """What an ended span holds, by estimate: SPAN_OVERHEAD_BYTES and its text (name,
    string attributes, status description), each string's real size."""
    size = SPAN_OVERHEAD_BYTES + sys.getsizeof(span.name)
    for value in (span.attributes or {}).values():
        if isinstance(value, str):
            size += sys.getsizeof(value)
    description = span.status.description
    if description:
        size += sys.getsizeof(description)
    return size


class LossLedger:
    """Spans handed to the batch processor and not yet exported, and spans lost, by home.

    At most ``capacity`` (the batch processor's queue size) spans wait in the queue, and the
    spans waiting and being exported hold at most ``capacity_bytes``: a span that would make
    more is refused and counted here, so the processor's own queue never fills and never
    drops a span silently (it would drop the oldest; this drops the newest, which the
    specification allows too), and never holds more than that many bytes. A span that weighs
    more than ``capacity_bytes`` on its own is still taken when none is held.
    """

    def __init__(self, capacity: int, capacity_bytes: int = MAX_SPAN_BYTES) -> None:
        self.capacity = capacity
        self.capacity_bytes = capacity_bytes
        self._lock = threading.Lock()
        #: span id -> the home that recorded it and what it weighs: in the processor's queue,
        #: and handed to the exporter (until it says how that went).
        self._in_flight: dict[int, tuple[Path | None, int]] = {}
        self._exporting: dict[int, tuple[Path | None, int]] = {}
        self._bytes = 0
        self._lost: Counter[Path | None] = Counter()

    def admit(self, span_id: int, home: Path | None, size: int = 0) -> bool:
        """Whether the span may be queued; when not, it is counted as lost."""
        with self._lock:
            full = len(self._in_flight) >= self.capacity
            if full or (self._bytes and self._bytes + size > self.capacity_bytes):
                self._lost[home] += 1
                return False
            self._in_flight[span_id] = home, size
            self._bytes += size
            return True

    def received(self, spans: Sequence[ReadableSpan]) -> list[Path | None]:
        """The homes of ``spans``, which reached the exporter: out of the queue, held until
        ``settled`` says how the export went."""
        homes: list[Path | None] = []
        with self._lock:
            for span in spans:
                held = self._in_flight.pop(span.context.span_id, None) if span.context is not None else None
                if held is None:
                    homes.append(None)
                    continue
                assert span.context is not None
                self._exporting[span.context.span_id] = held
                homes.append(held[0])
        return homes

    def settled(self, spans: Sequence[ReadableSpan], exported: bool) -> int:
        """The export of ``spans`` ended: they are no longer held, and unless ``exported``
        they are lost. Returns how many were counted lost now (a span ``abandon`` counted
        already is not counted twice)."""
        lost = 0
        with self._lock:
            for span in spans:
                held = self._exporting.pop(span.context.span_id, None) if span.context is not None else None
                if held is None:
                    continue
                self._bytes -= held[1]
                if not exported:
                    self._lost[held[0]] += 1
                    lost += 1
        return lost

    def abandon(self) -> int:
        """Every span still held (queued, or in an export that did not end) is lost: the
        provider is stopping without them. Returns how many."""
        with self._lock:
            held = [*self._in_flight.values(), *self._exporting.values()]
            self._in_flight.clear()
            self._exporting.clear()
            self._bytes = 0
            self._lost.update(home for home, _ in held)
        return len(held)

    def lose(self, homes: Sequence[Path | None]) -> None:
        with self._lock:
            self._lost.update(homes)

    def lost_in(self, home: Path | None = None) -> int:
        """Spans lost of ``home`` (of every home, when None) since this process started."""
        with self._lock:
            return sum(self._lost.values()) if home is None else self._lost[home]

    @property
    def in_flight(self) -> int:
        """Spans held: queued, or being exported."""
        with self._lock:
            return len(self._in_flight) + len(self._exporting)

    @property
    def held_bytes(self) -> int:
        """What the spans held weigh, by ``span_bytes``."""
        with self._lock:
            return self._bytes


class _ExporterLogCapture(logging.Filter):
    """Takes the exporter's own warnings and errors, while ``CountingExporter`` runs it on
    this thread, out of the log and hands them over: the exporter logs every failed batch
    (and every retry), every few seconds while a collector is down, and the report of the
    failure is to be said once, with their text as its reason."""

    def __init__(self) -> None:
        super().__init__()
        self._local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        said: list[str] | None = getattr(self._local, "said", None)
        if said is None or record.levelno < logging.WARNING:
            return True
        try:
            said.append(record.getMessage())
        except Exception:  # msg and args that do not fit: keep the template at least
            said.append(str(record.msg))
        return False

    @contextmanager
    def capturing(self) -> Iterator[list[str]]:
        said: list[str] = []
        self._local.said = said
        try:
            yield said
        finally:
            self._local.said = None


def _exporter_loggers(exporter: object) -> list[logging.Logger]:
    """The loggers the exporter logs its failures on: those of the modules of its classes
    (the OTLP/HTTP exporter passes its own to its HTTP client; the gRPC one logs on its
    mixin's), and the HTTP client's default one. Not the SDK's: its batch processor's lines
    (a full queue) cannot happen behind the ledger's bound."""
    names = {
        cls.__module__
        for cls in type(exporter).__mro__
        if cls is not object and not cls.__module__.startswith(("opentelemetry.sdk", "builtins", "abc"))
    }
    names.add("opentelemetry.exporter.otlp.common.http")
    return [logging.getLogger(name) for name in sorted(names)]


class CountingExporter(SpanExporter):
    """Wraps a SpanExporter: the spans of a failed export (FAILURE, or an exporter that
    raised) are counted in the ledger and reported once until an export succeeds again."""

    def __init__(self, delegate: SpanExporter, ledger: LossLedger, endpoint: str, report: ReportOnce) -> None:
        self.delegate = delegate
        self.ledger = ledger
        self.endpoint = endpoint
        self.report = report
        #: Set by ``abort``: no export is tried any more, each fails at once.
        self.aborted = False
        self._shut = False
        self._shut_lock = threading.Lock()
        self._capture = _ExporterLogCapture()
        for exporter_logger in _exporter_loggers(delegate):
            exporter_logger.addFilter(self._capture)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.ledger.received(spans)
        reason = ""
        with self._capture.capturing() as said:
            try:
                if self.aborted:
                    result = SpanExportResult.FAILURE
                    reason = "hookbus-otel stopped exporting: the collector had not taken the spans in time"
                else:
                    result = self.delegate.export(spans)
            except Exception as exc:
                result = SpanExportResult.FAILURE
                reason = f"the exporter raised {type(exc).__name__}: {exc}"
        if result is SpanExportResult.SUCCESS:
            self.ledger.settled(spans, exported=True)
            self.report.succeeded(_EXPORTING)
            return result
        lost = self.ledger.settled(spans, exported=False)
        # The retries say the same thing each time; "retrying in 1s" is no reason once it
        # gave up.
        reasons = list(dict.fromkeys(message.split(", retrying in ")[0] for message in said))
        if reason:
            reasons.append(reason)
        why = "; ".join(reasons) or "the exporter gave no reason"
        if len(why) > MAX_REASON_CHARS:
            why = why[: MAX_REASON_CHARS - 3] + "..."
        self.report.failed(
            _EXPORTING,
            f"hookbus-otel could not export {len(spans)} {'span' if len(spans) == 1 else 'spans'} "
            f"to {self.endpoint} ({why}): check that a collector takes OTLP there "
            f"(OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and that "
            f"OTEL_EXPORTER_OTLP_TIMEOUT gives it time; the hooks' decisions are not affected",
            lost=lost,
        )
        return SpanExportResult.FAILURE

    def abort(self) -> None:
        """Stop exporting: the exporter is shut down, which ends the retries it is waiting
        out (an OTLP exporter backs off 1, 2, 4 s against a collector that is down), and
        every later export fails at once, counted."""
        self.aborted = True
        self.shutdown()

    def shutdown(self) -> None:
        # Once: the batch processor shuts its exporter down too, and a second shutdown of
        # the OTLP exporter logs a warning nobody can act on.
        with self._shut_lock:
            if self._shut:
                return
            self._shut = True
        self.delegate.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.delegate.force_flush(timeout_millis))


class AdmittingProcessor(SpanProcessor):
    """A BatchSpanProcessor behind the ledger's bound: a span that finds ``capacity`` spans in
    flight is counted as lost and reported instead of being queued."""

    def __init__(self, batch: SpanProcessor, ledger: LossLedger, endpoint: str, report: ReportOnce) -> None:
        self.batch = batch
        self.ledger = ledger
        self.endpoint = endpoint
        self.report = report

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.batch.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return  # the batch processor drops unsampled spans too: sampling is no loss
        home: Path | None = getattr(ending_span_home, "home", None)
        if not self.ledger.admit(context.span_id, home, span_bytes(span)):
            self.report.failed(
                _QUEUEING,
                f"hookbus-otel dropped spans: {self.ledger.capacity} were already waiting for "
                f"the collector at {self.endpoint}, or {self.ledger.capacity_bytes >> 20} MiB of "
                f"them (hookbus_otel.export.MAX_SPAN_BYTES), and it is down or slower than the "
                f"hooks fire (OTEL_BSP_MAX_QUEUE_SIZE sets how many may wait); the hooks' "
                f"decisions are not affected",
                lost=1,
            )
            return
        self.report.succeeded(_QUEUEING)
        self.batch.on_end(span)

    def shutdown(self) -> None:
        self.batch.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.batch.force_flush(timeout_millis))


class OwnProvider:
    """The provider hookbus-otel built, with its ledger, and how it stops within a bound."""

    def __init__(
        self,
        provider: TracerProvider,
        ledger: LossLedger,
        endpoint: str,
        counting: CountingExporter | None = None,
        report: ReportOnce | None = None,
    ) -> None:
        self.provider = provider
        self.ledger = ledger
        self.endpoint = endpoint
        self.counting = counting
        self.report = report or ReportOnce(logger)
        #: Set by ``close``: it takes no spans any more (a later bus gets a new provider).
        self.stopped = False
        self._stop_lock = threading.Lock()

    def flush(self, deadline: float) -> bool:
        """Export what is held, waiting until ``deadline`` (``time.monotonic()``) at most:
        the SDK's force_flush ignores its timeout (it exports on the caller's thread with
        the exporter's retries), so it runs on a thread of its own. True when nothing is
        held any more."""
        if not self.ledger.in_flight:
            return True
        call_within(self.provider.force_flush, deadline, "hookbus-otel-flush")
        return not self.ledger.in_flight

    def close(self, deadline: float, why: str) -> int:
        """Flush until ``deadline``, then shut the provider down: what the collector had not
        taken by then is dropped, counted as lost and reported (``why`` says when it was
        given up). Idempotent; returns how many spans were lost here. It returns by
        ``deadline`` plus ABORT_GRACE_SECONDS, whatever the collector does."""
        with self._stop_lock:
            if self.stopped:
                return 0
            self.stopped = True
        flushed = self.flush(deadline)
        if not flushed and self.counting is not None:
            self.counting.abort()  # its retries end now, and the processor's last export fails fast
        call_within(self.provider.shutdown, time.monotonic() + ABORT_GRACE_SECONDS, "hookbus-otel-shutdown")
        lost = self.ledger.abandon()
        if lost:
            self.report.failed(
                _EXPORTING,
                f"hookbus-otel could not export {lost} {'span' if lost == 1 else 'spans'} to "
                f"{self.endpoint}: the collector had not taken {'it' if lost == 1 else 'them'} {why}, "
                "so they are dropped; check that a collector takes OTLP there "
                "(OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); the hooks' "
                "decisions are not affected",
                lost=lost,
            )
        return lost


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def _positive_int(name: str, default: int) -> int:
    raw = _env(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        logger.warning("hookbus-otel: %s=%r is not a positive integer; using %d", name, raw, default)
        return default
    return value


def _traces_endpoint(protocol: str) -> str:
    """Where the spans go, as the exporter resolves it: for messages only (the exporter
    reads the variables itself). A password in it is masked."""
    signal = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if signal:
        return redact_url(signal)
    base = _env("OTEL_EXPORTER_OTLP_ENDPOINT")
    return redact_url(base if protocol == "grpc" else f"{base.rstrip('/')}/v1/traces")


def _register_header_secrets() -> None:
    """The exporter's headers usually carry a backend's API key: masked from now on in every
    record and hookbus log line, whatever echoes it."""
    for name in ("OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        raw = _env(name)
        if not raw:
            continue
        try:
            headers = parse_env_headers(raw, liberal=True)
        except Exception:  # the exporter says what is wrong with them; the raw text is masked
            register_secret(raw)
            continue
        for value in headers.values():
            register_secret(value)


def _otlp_exporter(protocol: str) -> SpanExporter | None:
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":
        try:
            module = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
        except ImportError:
            logger.error(
                "hookbus-otel: OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs the gRPC exporter "
                "(pip install opentelemetry-exporter-otlp-proto-grpc), or use the collector's "
                "OTLP/HTTP port (4318) with the protocol http/protobuf; spans go nowhere meanwhile"
            )
            return None
        exporter: SpanExporter = module.OTLPSpanExporter()
        return exporter
    logger.error(
        "hookbus-otel: the OTLP protocol %r is not supported (use http/protobuf, the default, or "
        "grpc): set OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL to one of "
        "those; spans go nowhere meanwhile",
        protocol,
    )
    return None


def build_own_provider(ledger: LossLedger | None = None) -> OwnProvider | None:
    """The provider for spans that would go to the no-op one, or None when the environment
    says to send them nowhere (no endpoint, OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER=none,
    an exporter or protocol this cannot build): each case but the deliberate ones is said
    once, here. ``ledger``: the one a provider closed earlier kept, so that the counts go on."""
    if _env("OTEL_SDK_DISABLED").lower() == "true":
        return None
    exporters = {name.strip().lower() for name in _env("OTEL_TRACES_EXPORTER").split(",") if name.strip()}
    if exporters == {"none"}:
        return None
    if exporters and "otlp" not in exporters:
        logger.warning(
            "hookbus-otel: OTEL_TRACES_EXPORTER=%s, and hookbus-otel itself only builds an OTLP "
            "exporter: set up the tracer provider in the daemon (or run it under "
            "opentelemetry-instrument) for that exporter; hookbus's spans go nowhere meanwhile",
            _env("OTEL_TRACES_EXPORTER"),
        )
        return None
    if not any(_env(name) for name in ENDPOINT_VARIABLES):
        logger.warning(
            "hookbus-otel records, but there is no tracer provider and no collector to send its "
            "spans to: they go nowhere. Set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. "
            "http://localhost:4318 for a collector on this machine), or set the tracer provider "
            "up in the daemon; OTEL_TRACES_EXPORTER=none says that nowhere is intended"
        )
        return None
    protocol = (_env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _env("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").lower()
    _register_header_secrets()
    exporter = _otlp_exporter(protocol)
    if exporter is None:
        return None

    endpoint = _traces_endpoint(protocol)
    queue_size = _positive_int("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE)
    batch_size = min(_positive_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_MAX_EXPORT_BATCH_SIZE), queue_size)
    if ledger is None:
        ledger = LossLedger(queue_size)
    report = ReportOnce(logger)

    counting = CountingExporter(exporter, ledger, endpoint, report)
    # Sizes passed explicitly, so that the ledger's bound and the queue's are the same number;
    # the schedule delay and the export timeout the processor reads itself.
    batch = BatchSpanProcessor(counting, max_queue_size=queue_size, max_export_batch_size=batch_size)
    # service.name is ours only when the environment names none (explicit attributes would
    # win over OTEL_SERVICE_NAME in Resource.create).
    named = SERVICE_NAME in (OTELResourceDetector().detect().attributes or {})
    resource = Resource.create(None if named else {SERVICE_NAME: DEFAULT_SERVICE_NAME})
    # No exit handler of the SDK's: it would wait out the exporter's retries (7.5 s against
    # a collector that is down). hookbus_otel closes it within hookbus's bound instead.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(AdmittingProcessor(batch, ledger, endpoint, report))
    logger.info("hookbus-otel: exporting spans over OTLP (%s) to %s", protocol, endpoint)
    return OwnProvider(provider, ledger, endpoint, counting, report)

