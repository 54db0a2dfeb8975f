"""hookbus-otel's own OTLP export, end to end: a real HookBus with real bash hooks in a
subprocess (so that no tracer provider outlives a test), configured by the standard
OTEL_* variables alone, exporting to a real OTLP/HTTP receiver on 127.0.0.1 that decodes
what it gets with opentelemetry-proto. Then the collector down, or refusing: the decision
and the exit code stay the same, and the loss is counted and said once.

The parts that need no collector (the loss ledger, the admitting processor, the counting
exporter) are tested in process at the end, with SDK spans and fake exporters.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from hookbus.reporting import ReportOnce
from hookbus.testing import TestHome
from hookbus_otel.export import AdmittingProcessor, CountingExporter, LossLedger, ending_span_home

ENVELOPE = {"tool_name": "write_file", "tool_input": {"path": ".env"}}
DENIED = {
    "behavior": "deny",
    "reason": "hook 'a-deny' denied: no writes to .env",
    "context": "remember the tests",
}
HEADER_KEY = "fleet-key-0123456789"


# -- a real OTLP/HTTP receiver -------------------------------------------------------------


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def attributes_of(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {pair.key: value_of(pair.value) for pair in pairs}


class Received:
    """One span as the receiver decoded it, with its resource and scope."""

    def __init__(self, span: ProtoSpan, resource: dict[str, Any], scope: str) -> None:
        self.span = span
        self.resource = resource
        self.scope = scope
        self.attributes = attributes_of(span.attributes)


class Receiver:
    """POST /v1/traces, decoded with opentelemetry-proto; answers an empty
    ExportTraceServiceResponse, or ``status`` (400: a collector refusing the spans)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.spans: list[Received] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self.send_error(404, f"no {self.path} here: OTLP traces go to /v1/traces")
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if receiver.status == 200:
                        for resource_spans in request.resource_spans:
                            resource = attributes_of(resource_spans.resource.attributes)
                            for scope_spans in resource_spans.scope_spans:
                                for span in scope_spans.spans:
                                    receiver.spans.append(Received(span, resource, scope_spans.scope.name))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(receiver.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the test's output is for the test's own failures

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-receiver", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)

    def by_hook(self) -> dict[str, Received]:
        with self.lock:
            spans = list(self.spans)
        by_hook: dict[str, Received] = {}
        for received in spans:
            hook_id = received.attributes["hookbus.hook.id"]
            assert hook_id not in by_hook, f"two spans for hook {hook_id!r}"
            by_hook[hook_id] = received
        return by_hook


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.close()


@pytest.fixture
def refusing_receiver() -> Iterator[Receiver]:
    running = Receiver(status=400)
    yield running
    running.close()


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound, then let go."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


# -- the bus, in a subprocess ----------------------------------------------------------------


def write_hooks(home: TestHome) -> None:
    """A blocking deny, a context and an async hook, all on PreToolUse write_file."""
    home.write_settings({"recorder": ["recorder", "otel"]})
    common: dict[str, Any] = {"event": "PreToolUse", "matcher": "write_file"}
    home.write_hook(
        "a-deny", mode="sync", blocking=True, command="echo 'no writes to .env' >&2; exit 2", **common
    )
    home.write_hook("b-context", mode="sync", command="echo 'remember the tests'", **common)
    home.write_hook("c-async", mode="async", command="sleep 0.3", **common)


def otel_env(endpoint: str, **more: str) -> dict[str, str]:
    """The standard variables only: where, how long, how soon, who."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",  # seconds: a collector that is down fails fast
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # milliseconds
        **more,
    }


def run(args: Sequence[str], home: TestHome, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``python -W error ARGS`` with none of the test process's OTEL_, HOOKBUS_ or VIX_
    variables, only ``env``'s: warnings are errors there as in the suite."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HOOKBUS_", "VIX_"))}
    return subprocess.run(
        [sys.executable, "-W", "error", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
        # Beside the home, not in it: ENVELOPE's relative ".env" would land in the home
        # there, which hookbus's built-in home guard denies (a fire of its own to export).
        cwd=home.root.parent,
    )


def emit(home: TestHome, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(
        ["-m", "hookbus", "emit", "PreToolUse", "--home", str(home.root), "--no-server", "--input", "-"],
        home,
        env,
        stdin=json.dumps(ENVELOPE),
    )


def log_entries(home: TestHome) -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    for path in sorted((home.root / "logs" / "hooks").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            entries[entry["hook_id"]] = entry
    return entries


def otel_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "hookbus-otel" in line]


# -- spans reach a collector ---------------------------------------------------------------


@pytest.mark.timeout(60)
def test_each_fire_reaches_an_otlp_collector_configured_by_the_environment(
    receiver: Receiver, hookbus_home: TestHome
) -> None:
    write_hooks(hookbus_home)
    env = otel_env(
        receiver.endpoint,
        OTEL_SERVICE_NAME="vixd-e2e",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment.name=test,host.name=fleet-7",
        OTEL_EXPORTER_OTLP_HEADERS=f"x-fleet-key={HEADER_KEY}",
    )
    result = emit(hookbus_home, env)

    assert result.returncode == 2, result.stderr  # a deny, as without OTel
    assert json.loads(result.stdout) == DENIED
    assert otel_lines(result.stderr) == [], result.stderr

    spans = receiver.by_hook()
    assert sorted(spans) == ["a-deny", "b-context", "c-async"]
    log = log_entries(hookbus_home)  # the built-in recorder, beside otel, as the reference
    for hook_id, received in spans.items():
        span, attributes, entry = received.span, received.attributes, log[hook_id]
        assert received.resource["service.name"] == "vixd-e2e"
        assert received.resource["deployment.environment.name"] == "test"
        assert received.resource["host.name"] == "fleet-7"
        assert received.scope == "hookbus"
        assert span.name == f"hookbus PreToolUse {hook_id}"
        assert span.kind == ProtoSpan.SPAN_KIND_INTERNAL
        assert span.parent_span_id == b""  # the CLI has no span of its own to nest under
        assert attributes["hookbus.hook.id"] == hook_id
        assert attributes["hookbus.event"] == "PreToolUse"
        assert attributes["hookbus.status"] == entry["status"]
        assert attributes["hookbus.duration_ms"] == entry["duration_ms"]
        assert attributes["hookbus.manual"] is False
        assert attributes["hookbus.hook.tier"] == "user"
        assert abs((span.end_time_unix_nano - span.start_time_unix_nano) / 1e6 - entry["duration_ms"]) < 0.01
        assert span.status.code == ProtoStatus.STATUS_CODE_OK
        assert "error.type" not in attributes
    assert {h: s.attributes["hookbus.hook.mode"] for h, s in spans.items()} == {
        "a-deny": "sync", "b-context": "sync", "c-async": "async",
    }
    assert {h: s.attributes["hookbus.status"] for h, s in spans.items()} == {
        "a-deny": "deny", "b-context": "context", "c-async": "done",
    }
    assert spans["a-deny"].attributes["hookbus.decision.behavior"] == "deny"
    assert spans["b-context"].attributes["hookbus.decision.behavior"] == "context"
    assert spans["c-async"].attributes["hookbus.duration_ms"] >= 300
    # What a hook said beyond its behavior (the reason, the context) stays out of the spans.
    assert not [s for s in spans.values() if "no writes" in json.dumps(s.attributes)]
    # The headers variable reached the collector.
    assert {h.get("x-fleet-key") for h in receiver.headers} == {HEADER_KEY}


@pytest.mark.timeout(60)
def test_the_service_name_defaults_to_hookbus_and_the_signal_endpoint_wins(
    receiver: Receiver, hookbus_home: TestHome
) -> None:
    write_hooks(hookbus_home)
    env = otel_env(
        f"http://127.0.0.1:{closed_port()}",  # the general endpoint: overridden below
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{receiver.endpoint}/v1/traces",
        OTEL_EXPORTER_OTLP_TRACES_COMPRESSION="gzip",
    )
    result = emit(hookbus_home, env)
    assert result.returncode == 2, result.stderr
    assert otel_lines(result.stderr) == [], result.stderr
    spans = receiver.by_hook()
    assert sorted(spans) == ["a-deny", "b-context", "c-async"]
    assert {s.resource["service.name"] for s in spans.values()} == {"hookbus"}


DAEMON_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from hookbus import HookBus

    bus = HookBus(sys.argv[1])
    bus.emit("Stop", {})  # no provider of the daemon's yet: hookbus-otel's own, over OTLP
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)  # the daemon sets its own up: it wins from now on
    bus.emit("Stop", {})
    bus.close()
    print(json.dumps([span.name for span in memory.get_finished_spans()]))
    """
)


@pytest.mark.timeout(60)
def test_a_provider_the_daemon_sets_wins_even_after_the_bus_started(
    receiver: Receiver, hookbus_home: TestHome
) -> None:
    hookbus_home.write_settings({"recorder": "otel"})
    hookbus_home.write_hook("done", event="Stop", mode="sync", command="true")
    result = run(["-c", DAEMON_SCRIPT, str(hookbus_home.root)], hookbus_home, otel_env(receiver.endpoint))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == ["hookbus Stop done"]  # the second fire
    assert [s.span.name for s in receiver.spans] == ["hookbus Stop done"]  # the first


@pytest.mark.timeout(60)
def test_with_no_endpoint_spans_go_nowhere_and_that_is_said_once(hookbus_home: TestHome) -> None:
    write_hooks(hookbus_home)
    result = emit(hookbus_home, {})
    assert result.returncode == 2, result.stderr
    assert json.loads(result.stdout) == DENIED
    (line,) = otel_lines(result.stderr)
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in line and "go nowhere" in line
    assert "not recorded" not in result.stderr  # going nowhere, as asked, is not a loss

    # Saying so is enough to silence it; so is turning the SDK off.
    for quiet in ({"OTEL_TRACES_EXPORTER": "none"}, {"OTEL_SDK_DISABLED": "true"}):
        result = emit(hookbus_home, quiet)
        assert result.returncode == 2, result.stderr
        assert otel_lines(result.stderr) == [], (quiet, result.stderr)


@pytest.mark.timeout(60)
def test_a_protocol_it_cannot_speak_is_said_with_the_fix(hookbus_home: TestHome) -> None:
    write_hooks(hookbus_home)
    result = emit(hookbus_home, otel_env("http://127.0.0.1:4317", OTEL_EXPORTER_OTLP_PROTOCOL="http/json"))
    assert result.returncode == 2, result.stderr
    (line,) = otel_lines(result.stderr)
    assert "'http/json' is not supported" in line and "http/protobuf" in line


# -- the collector down, or refusing ---------------------------------------------------------


LOST_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import hookbus_otel
    from hookbus import HookBus

    bus = HookBus(sys.argv[1])
    decision = bus.emit("PreToolUse", json.loads(sys.argv[2]))
    bus.close()
    print(json.dumps({
        "decision": decision.as_dict(),
        "lost": bus.lost_records,
        "otel": hookbus_otel.lost_records(bus.home),
        "elsewhere": hookbus_otel.lost_records(None) - hookbus_otel.lost_records(bus.home),
    }))
    """
)


@pytest.fixture(params=["down", "refusing"])
def dead_endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """A collector that is not there (nothing listens on the port), or one that answers
    400 to every export."""
    if request.param == "down":
        yield f"http://127.0.0.1:{closed_port()}"
        return
    refusing = Receiver(status=400)
    try:
        yield refusing.endpoint
    finally:
        refusing.close()


@pytest.mark.timeout(90)
def test_a_collector_down_changes_no_decision_and_the_loss_is_counted_once(
    dead_endpoint: str, hookbus_home: TestHome
) -> None:
    write_hooks(hookbus_home)
    result = emit(hookbus_home, otel_env(dead_endpoint))

    assert result.returncode == 2, result.stderr  # as with the collector up
    assert json.loads(result.stdout) == DENIED
    assert sorted(log_entries(hookbus_home)) == ["a-deny", "b-context", "c-async"]  # files intact
    # One report of the failure, with where, why and what to check; the exporter's own
    # per-batch lines are folded into it, not repeated.
    (report,) = otel_lines(result.stderr)
    assert f"could not export" in report and f"{dead_endpoint}/v1/traces" in report
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in report and "reported once until it recovers" in report
    assert "Failed to export" not in result.stderr.replace(report, "")
    # And the bus's closing total counts the three spans.
    assert f"3 fires of {hookbus_home.root} were not recorded" in result.stderr

    # The same, asked of the bus: every fire's span lost, all of this home.
    counted = run(
        ["-c", LOST_SCRIPT, str(hookbus_home.root), json.dumps(ENVELOPE)], hookbus_home, otel_env(dead_endpoint)
    )
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout) == {"decision": DENIED, "lost": 3, "otel": 3, "elsewhere": 0}


# -- the counting parts, in process ----------------------------------------------------------


class Keeping(SpanProcessor):
    """Stands in for the BatchSpanProcessor: keeps the spans handed on, exports nothing."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class Answering(SpanExporter):
    def __init__(self, result: SpanExportResult | None) -> None:
        self.result = result
        self.batches: list[int] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(len(spans))
        if self.result is None:
            raise ConnectionError("collector unreachable")
        logging.getLogger(type(self).__module__).warning("batch failed: HTTP 503")
        return self.result


def ended_spans(provider: TracerProvider, count: int, home: Path | None) -> None:
    tracer = provider.get_tracer("hookbus")
    ending_span_home.home = home
    try:
        for index in range(count):
            tracer.start_span(f"s{index}").end()
    finally:
        ending_span_home.home = None


def test_a_full_queue_turns_spans_away_counted_by_home_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = LossLedger(capacity=2)
    batch = Keeping()
    provider = TracerProvider()
    report = ReportOnce(logging.getLogger("hookbus.otel"))
    provider.add_span_processor(AdmittingProcessor(batch, ledger, "http://c:4318/v1/traces", report))
    with caplog.at_level(logging.WARNING, logger="hookbus.otel"):
        ended_spans(provider, 5, tmp_path / "a")
    assert len(batch.ended) == 2 and ledger.in_flight == 2
    assert ledger.lost_in(tmp_path / "a") == 3 and ledger.lost_in(tmp_path / "b") == 0
    (message,) = [r.getMessage() for r in caplog.records]
    assert "dropped spans: 2 were already waiting" in message and "OTEL_BSP_MAX_QUEUE_SIZE" in message
    assert "3 records lost so far" not in message  # said at the first, with the count then
    assert "1 record lost so far" in message

    # Exported, they leave the queue, and the next span is queued again.
    assert ledger.received(batch.ended) == [tmp_path / "a"] * 2
    ended_spans(provider, 1, tmp_path / "b")
    assert len(batch.ended) == 3 and ledger.lost_in(None) == 3
    provider.shutdown()


@pytest.mark.parametrize("answer", [SpanExportResult.FAILURE, None], ids=["failure", "raises"])
def test_a_failed_export_is_counted_by_home_and_said_once_until_it_recovers(
    answer: SpanExportResult | None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = LossLedger(capacity=100)
    delegate = Answering(answer)
    report = ReportOnce(logging.getLogger("hookbus.otel"))
    counting = CountingExporter(delegate, ledger, "http://c:4318/v1/traces", report)
    provider = TracerProvider()
    batch = Keeping()
    provider.add_span_processor(AdmittingProcessor(batch, ledger, "http://c:4318/v1/traces", counting.report))
    ended_spans(provider, 3, tmp_path / "a")
    ended_spans(provider, 2, tmp_path / "b")
    with caplog.at_level(logging.WARNING):
        assert counting.export(batch.ended[:3]) is SpanExportResult.FAILURE
        assert counting.export(batch.ended[3:]) is SpanExportResult.FAILURE
        delegate.result = SpanExportResult.SUCCESS
        ended_spans(provider, 1, tmp_path / "a")
        assert counting.export(batch.ended[5:]) is SpanExportResult.SUCCESS
    assert ledger.lost_in(tmp_path / "a") == 3 and ledger.lost_in(tmp_path / "b") == 2
    assert ledger.in_flight == 0
    messages = [r.getMessage() for r in caplog.records]
    # The delegate's own warning is folded into the one report, never logged by itself.
    assert len(messages) == 2, messages
    assert "could not export 3 spans to http://c:4318/v1/traces" in messages[0]
    why = "batch failed: HTTP 503" if answer is not None else "the exporter raised ConnectionError: collector unreachable"
    assert why in messages[0]
    assert "recovered; 5 records were lost meanwhile" in messages[1]
    provider.shutdown()
