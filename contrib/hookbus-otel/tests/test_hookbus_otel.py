"""hookbus-otel against real command hooks, the real bus and the SDK's in-memory exporter.

The fixtures hookbus_home, hookbus_bus, hookbus_fire and hookbus_capture come from
hookbus.testing (a pytest plugin). The CaptureRecorder is registered in process, so it
records after the selected recorders: once it holds a record, the otel span of that fire
has ended (SimpleSpanProcessor exports inside ``span.end``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util import types as otel_types

import hookbus_otel
from hookbus import HookBus, HookBusError, HookCall, Outcome, RunnerRegistration, hookimpl
from hookbus.merge import NOT_BLOCKING_NOTE
from hookbus.runners import ParseContext
from hookbus.prompts import PromptRequest, PromptResult
from hookbus.policy.guardhook import GUARD_ID
from hookbus.records import TIERS, RunRecord
from hookbus.testing import CaptureRecorder, Fired, TestHome

BOTH = {"recorder": ["recorder", "otel"]}
ENVELOPE = {"tool_name": "write_file", "tool_input": {"path": ".env"}}
MS = 1_000_000  # one millisecond in ns
#: The attribute names before they followed OpenTelemetry's naming style.
OLD_NAMES = {"hookbus.hook_id", "hookbus.mode", "hookbus.error", "hookbus.thread_id", "hookbus.note"}


# -- fixtures and helpers --------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """An SDK provider that hookbus-otel sends its spans to, for this test only."""
    tracer_provider = TracerProvider()
    hookbus_otel.set_tracer_provider_for_hookbus(tracer_provider)
    yield tracer_provider
    hookbus_otel.set_tracer_provider_for_hookbus(None)
    tracer_provider.shutdown()


@pytest.fixture
def exporter(provider: TracerProvider) -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


def spans_by_hook(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    """The finished spans, by hook id; fails when a hook has more than one."""
    spans = exporter.get_finished_spans()
    by_hook: dict[str, ReadableSpan] = {}
    for span in spans:
        assert span.attributes is not None
        hook_id = span.attributes["hookbus.hook.id"]
        assert isinstance(hook_id, str)
        assert hook_id not in by_hook, f"two spans for hook {hook_id!r}: {[s.name for s in spans]}"
        by_hook[hook_id] = span
    return by_hook


def expected_attributes(record: RunRecord) -> dict[str, Any]:
    """What the span of ``record`` carries, but ``error.type`` (its value is checked where
    the kind of failure is known)."""
    expected: dict[str, Any] = {
        "hookbus.hook.id": record.hook_id,
        "hookbus.hook.mode": record.mode,
        "hookbus.hook.tier": record.tier,
        "hookbus.event": record.event,
        "hookbus.status": record.status,
        "hookbus.duration_ms": round(record.duration * 1000, 3),
        "hookbus.manual": record.manual,
    }
    if record.decision is not None and "behavior" in record.decision:
        expected["hookbus.decision.behavior"] = record.decision["behavior"]
    if record.thread_id is not None:
        expected["hookbus.thread.id"] = record.thread_id
    if record.note is not None:
        expected["hookbus.decision.note"] = record.note
    return expected


def check_span(span: ReadableSpan, record: RunRecord, window: tuple[int, int]) -> None:
    """Name, attributes, times and status of the span of ``record``, which ran within
    ``window`` (wall-clock ns)."""
    assert span.name == f"hookbus {record.event} {record.hook_id}"
    assert span.kind is trace.SpanKind.INTERNAL
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "hookbus"
    attributes = dict(span.attributes or {})
    assert ("error.type" in attributes) == bool(record.error)
    attributes.pop("error.type", None)
    assert attributes == expected_attributes(record)
    assert span.start_time is not None and span.end_time is not None
    assert abs((span.end_time - span.start_time) - record.duration * 1e9) <= MS
    # ``at`` has millisecond resolution: the start may be up to 1 ms before the run began.
    assert window[0] - MS <= span.start_time <= span.end_time <= window[1] + MS
    if record.error:
        assert span.status.status_code is trace.StatusCode.ERROR
        assert span.status.description == record.error
    else:
        assert span.status.status_code is trace.StatusCode.OK


def log_entries(home: TestHome) -> list[dict[str, Any]]:
    entries = []
    for path in sorted((home.root / "logs" / "hooks").glob("*.jsonl")):
        entries += [json.loads(line) for line in path.read_text().splitlines() if line]
    return entries


def write_sync_hooks(home: TestHome) -> None:
    """Five sync PreToolUse hooks: allow, deny, context, a failure, a non-blocking deny."""
    common: dict[str, Any] = {"event": "PreToolUse", "matcher": "write_file", "mode": "sync"}
    home.write_hook("a-allow", command="true", **common)
    home.write_hook(
        "b-deny", blocking=True, command="echo 'no writes to .env' >&2; exit 2", **common
    )
    home.write_hook("c-context", command="echo 'remember the tests'", **common)
    home.write_hook("d-fails", command="echo 'it broke' >&2; exit 3", **common)
    home.write_hook(
        "e-advisory", command="""echo '{"behavior": "deny", "reason": "advice only"}'""", **common
    )


# -- spans of real fires -----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_each_sync_hook_fire_is_one_span(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, hookbus_fire: Any
) -> None:
    hookbus_home.write_settings(BOTH)
    write_sync_hooks(hookbus_home)
    began = time.time_ns()
    fired: Fired = hookbus_fire("PreToolUse", ENVELOPE)
    ended = time.time_ns()

    assert fired.decision.behavior == "deny"
    assert fired.decision.reason == "hook 'b-deny' denied: no writes to .env"
    assert fired.decision.context == "remember the tests"

    spans = spans_by_hook(exporter)
    assert sorted(spans) == ["a-allow", "b-deny", "c-context", "d-fails", "e-advisory"]
    assert len(fired.records) == 5
    for record in fired.records:
        check_span(spans[record.hook_id], record, (began, ended))

    attributes = {hook_id: dict(span.attributes or {}) for hook_id, span in spans.items()}
    assert {hook_id: a["hookbus.status"] for hook_id, a in attributes.items()} == {
        "a-allow": "allow",
        "b-deny": "deny",
        "c-context": "context",
        "d-fails": "allow",  # a failed hook says allow and carries the error
        "e-advisory": "deny",
    }
    assert attributes["d-fails"]["error.type"] == "crash"
    assert str(spans["d-fails"].status.description).startswith("exited with status 3: it broke")
    assert spans["d-fails"].status.status_code is trace.StatusCode.ERROR
    assert [h for h, span in spans.items() if span.status.status_code is trace.StatusCode.ERROR] == [
        "d-fails"
    ]
    assert attributes["e-advisory"]["hookbus.decision.note"] == NOT_BLOCKING_NOTE
    # The hook's own decision, whatever the merge made of it: the advisory one said deny.
    assert {hook_id: a["hookbus.decision.behavior"] for hook_id, a in attributes.items()} == {
        "a-allow": "allow",
        "b-deny": "deny",
        "c-context": "context",
        "d-fails": "allow",
        "e-advisory": "deny",
    }
    assert all("error.type" not in a for h, a in attributes.items() if h != "d-fails")
    assert all("hookbus.thread.id" not in a for a in attributes.values())
    assert all(a["hookbus.manual"] is False and a["hookbus.hook.mode"] == "sync" for a in attributes.values())
    assert {a["hookbus.hook.tier"] for a in attributes.values()} == {"user"}  # set for the user's too
    # The old names are gone, not sent twice.
    assert not [k for a in attributes.values() for k in a if k in OLD_NAMES]


@pytest.mark.timeout(60)
def test_the_builtin_log_still_gets_its_lines(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_fire: Any
) -> None:
    hookbus_home.write_settings(BOTH)
    write_sync_hooks(hookbus_home)
    hookbus_fire("PreToolUse", ENVELOPE)
    hookbus_fire("PreToolUse", ENVELOPE)
    assert hookbus_bus.active_recorders[:2] == ("recorder", "otel")
    hookbus_bus.close()  # drains the built-in recorder's writer

    entries = log_entries(hookbus_home)
    spans = exporter.get_finished_spans()
    assert len(entries) == len(spans) == 10
    assert sorted(e["hook_id"] for e in entries) == sorted(
        str((s.attributes or {})["hookbus.hook.id"]) for s in spans
    )
    state = json.loads((hookbus_home.root / "hooks" / "b-deny" / "state.json").read_text())
    assert state["last_status"] == "deny"
    assert len(state["recent_runs"]) == 2


@pytest.mark.timeout(60)
def test_async_hook_fires_are_spans_when_they_finish(
    exporter: InMemorySpanExporter,
    hookbus_home: TestHome,
    hookbus_bus: HookBus,
    hookbus_capture: CaptureRecorder,
) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("slow", event="Stop", command="sleep 0.3")
    hookbus_home.write_hook("broken", event="Stop", command="echo 'disk full' >&2; exit 7")
    hookbus_bus.reload()
    began = time.time_ns()
    decision = hookbus_bus.emit("Stop", {"stop_hook_active": False})
    assert decision.behavior == "allow"
    records = {r.hook_id: r for r in hookbus_capture.wait_for(2, timeout=30)}
    ended = time.time_ns()

    spans = spans_by_hook(exporter)
    assert sorted(spans) == ["broken", "slow"]
    for hook_id, record in records.items():
        check_span(spans[hook_id], record, (began, ended))
    assert records["slow"].status == "done"
    assert spans["slow"].end_time is not None and spans["slow"].start_time is not None
    assert spans["slow"].end_time - spans["slow"].start_time >= 300 * MS
    assert spans["slow"].status.status_code is trace.StatusCode.OK
    broken = dict(spans["broken"].attributes or {})
    assert broken["hookbus.hook.mode"] == "async"
    assert broken["hookbus.status"] == "error"
    assert broken["error.type"] == "crash"
    assert str(spans["broken"].status.description).startswith("exited with status 7: disk full")
    assert spans["broken"].status.status_code is trace.StatusCode.ERROR


@pytest.mark.timeout(60)
def test_a_manual_trigger_is_one_span_marked_manual(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, hookbus_bus: HookBus
) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("by-hand", event="ThreadStart", mode="sync", command="echo hello")
    hookbus_bus.reload()
    began = time.time_ns()
    record = hookbus_bus.trigger("by-hand")
    ended = time.time_ns()

    (span,) = exporter.get_finished_spans()
    check_span(span, record, (began, ended))
    assert span.name == "hookbus ThreadStart by-hand"
    attributes = dict(span.attributes or {})
    assert attributes["hookbus.manual"] is True
    assert attributes["hookbus.hook.mode"] == "async"  # a manual fire is recorded as async
    assert attributes["hookbus.status"] == "done"


class ThreadedProvider:
    """The embedder's prompt provider: answers in its own thread, and says which."""

    @hookimpl
    def hookbus_run_prompt(self, request: PromptRequest) -> PromptResult:
        return PromptResult("looked fine", thread_id="t-77")


@pytest.mark.timeout(60)
def test_the_thread_id_of_an_async_prompt_hook_is_an_attribute(
    exporter: InMemorySpanExporter, hookbus_home: TestHome
) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("reviewer", event="PostToolUse", prompt="review this")
    capture = CaptureRecorder()
    with HookBus(hookbus_home.root, plugins=[ThreadedProvider(), capture]) as bus:
        bus.emit("PostToolUse", ENVELOPE)
        (record,) = capture.wait_for(1, timeout=30)
    assert record.thread_id == "t-77"
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["hookbus.thread.id"] == "t-77"
    assert (span.attributes or {})["hookbus.status"] == "done"


@pytest.mark.timeout(60)
def test_a_sync_hook_span_is_a_child_of_the_daemons_current_span(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    hookbus_home: TestHome,
    hookbus_fire: Any,
) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("inline", event="UserPromptSubmit", mode="sync", command="true")
    with provider.get_tracer("vixd").start_as_current_span("agent turn") as turn:
        hookbus_fire("UserPromptSubmit", {"prompt": "hi"})
    spans = {span.name: span for span in exporter.get_finished_spans()}
    hook_span = spans["hookbus UserPromptSubmit inline"]
    assert hook_span.parent is not None
    assert hook_span.parent.span_id == turn.get_span_context().span_id
    assert hook_span.context is not None
    assert hook_span.context.trace_id == turn.get_span_context().trace_id


class StallRunner:
    """A runner (key ``stall``) that ignores its deadline: sleeps 2.5 s whatever the timeout."""

    def parse(self, key: str, value: object, context: ParseContext) -> object:
        return value

    def run(self, call: HookCall) -> Outcome:
        time.sleep(2.5)
        return Outcome()

    @hookimpl
    def hookbus_register_runners(self, register: RunnerRegistration) -> None:
        register.add("stall", self)


@pytest.mark.timeout(60)
def test_the_span_of_a_runner_that_overran_starts_when_it_started(
    exporter: InMemorySpanExporter, hookbus_home: TestHome
) -> None:
    hookbus_home.write_settings(BOTH)
    # a-first runs inline on the emitting thread for 0.5 s; b-stall runs in the pool from
    # the start and is given up on at about 0.5 + 0.5 + 1 (grace) = 2 s.
    hookbus_home.write_hook("a-first", event="Stop", mode="sync", command="sleep 0.5")
    hookbus_home.write_hook("b-stall", event="Stop", mode="sync", stall=True, timeout="500ms")
    with HookBus(hookbus_home.root, plugins=[StallRunner()]) as bus:
        began = time.time_ns()
        bus.emit("Stop", {})
        ended = time.time_ns()
    stalled = spans_by_hook(exporter)["b-stall"]
    assert stalled.status.status_code is trace.StatusCode.ERROR
    assert (stalled.attributes or {})["error.type"] == "timeout"
    assert stalled.start_time is not None and stalled.end_time is not None
    assert stalled.start_time <= began + 250 * MS  # it started with the emit
    assert stalled.end_time >= ended - 250 * MS  # and ran until the bus gave up on it


# -- selection ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_installed_but_not_selected_it_records_nothing(
    exporter: InMemorySpanExporter,
    hookbus_home: TestHome,
    hookbus_bus: HookBus,
    hookbus_fire: Any,
) -> None:
    write_sync_hooks(hookbus_home)  # no settings.json: the built-in recorder alone
    fired = hookbus_fire("PreToolUse", ENVELOPE)
    assert len(fired.records) == 5
    otel = [info for info in hookbus_bus.plugin_infos if info.name == "otel"]
    assert [(i.distribution, i.version, i.provides) for i in otel] == [
        ("hookbus-otel", "0.1.0", ("recorder",))
    ]
    assert "otel" not in hookbus_bus.active_recorders
    assert "recorder" in hookbus_bus.active_recorders
    assert exporter.get_finished_spans() == ()

    # Selecting it (hot, through settings.json) is all it takes.
    hookbus_home.write_settings(BOTH)
    hookbus_fire("PreToolUse", ENVELOPE)
    assert len(exporter.get_finished_spans()) == 5


@pytest.mark.timeout(60)
def test_otel_alone_sends_spans_and_writes_no_files(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_fire: Any
) -> None:
    hookbus_home.write_settings({"recorder": "otel"})
    hookbus_home.write_hook("only", event="Stop", mode="sync", command="echo noted")
    hookbus_fire("Stop")
    assert hookbus_bus.active_recorders[0] == "otel"
    assert "recorder" not in hookbus_bus.active_recorders
    hookbus_bus.close()
    (span,) = exporter.get_finished_spans()
    assert span.name == "hookbus Stop only"
    assert log_entries(hookbus_home) == []


@pytest.mark.timeout(60)
def test_the_installed_module_can_be_handed_to_the_bus_in_process(
    exporter: InMemorySpanExporter, hookbus_home: TestHome
) -> None:
    # An embedder that wants spans whatever settings.json says hands the module over:
    # in-process recorders always record.
    hookbus_home.write_hook("h", event="Stop", mode="sync", command="true")
    try:
        bus = HookBus(hookbus_home.root, plugins=[hookbus_otel])
    except HookBusError:
        return  # a clear refusal is an acceptable fix too
    with bus:
        bus.emit("Stop", {})
    assert [span.name for span in exporter.get_finished_spans()] == ["hookbus Stop h"]


# -- failures never reach the bus -------------------------------------------------------


class RaisingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        raise RuntimeError("collector unreachable")

    def shutdown(self) -> None:
        pass


class RaisingSpan(trace.NonRecordingSpan):
    def end(self, end_time: int | None = None) -> None:
        raise RuntimeError("span.end exploded")


class RaisingTracer(trace.NoOpTracer):
    def __init__(self, where: str) -> None:
        self.where = where

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        if self.where == "start_span":
            raise RuntimeError("start_span exploded")
        return RaisingSpan(trace.INVALID_SPAN_CONTEXT)


class RaisingProvider(trace.NoOpTracerProvider):
    def __init__(self, where: str) -> None:
        self.where = where
        self.flushes = 0

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: otel_types.Attributes = None,
    ) -> trace.Tracer:
        if self.where == "get_tracer":
            raise RuntimeError("get_tracer exploded")
        return RaisingTracer(self.where)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        self.flushes += 1
        raise RuntimeError("force_flush exploded")


def emit_twice_and_close(home: TestHome, caplog: pytest.LogCaptureFixture) -> list[Any]:
    """otel goes first, so the built-in recorder's lines prove the fire went on past it."""
    home.write_settings({"recorder": ["otel", "recorder"]})
    write_sync_hooks(home)
    with caplog.at_level(logging.WARNING):
        with HookBus(home.root) as bus:
            decisions = [bus.emit("PreToolUse", ENVELOPE) for _ in range(2)]
    return decisions


def check_decisions_unchanged(decisions: list[Any], home: TestHome) -> None:
    for decision in decisions:
        assert decision.behavior == "deny"
        assert decision.reason == "hook 'b-deny' denied: no writes to .env"
        assert decision.context == "remember the tests"
    assert len(log_entries(home)) == 10


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["get_tracer", "start_span", "end"])
def test_a_tracer_that_raises_never_changes_a_decision(
    where: str, hookbus_home: TestHome, caplog: pytest.LogCaptureFixture
) -> None:
    provider = RaisingProvider(where)
    hookbus_otel.set_tracer_provider_for_hookbus(provider)
    try:
        decisions = emit_twice_and_close(hookbus_home, caplog)
    finally:
        hookbus_otel.set_tracer_provider_for_hookbus(None)
    check_decisions_unchanged(decisions, hookbus_home)

    # Caught inside the plugin, reported once on its own logger; the bus saw nothing raise.
    ours = [r for r in caplog.records if r.name == "hookbus.otel" and r.levelno == logging.ERROR]
    assert len([r for r in ours if "exploded" in r.getMessage() and "flush" not in r.getMessage()]) == 1
    assert not [r for r in caplog.records if "recorder 'otel' raised" in r.getMessage()]
    if where == "end":  # the span was started, so the provider is flushed at close
        assert provider.flushes == 1
        assert any("force_flush exploded" in r.getMessage() for r in ours)


class FlakyTracer(trace.NoOpTracer):
    """The SDK's tracer, but start_span raises while ``broken`` is set."""

    def __init__(self, real: trace.Tracer) -> None:
        self.real = real
        self.broken = True

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        if self.broken:
            raise RuntimeError("start_span exploded")
        return self.real.start_span(*args, **kwargs)


class FlakyProvider(trace.NoOpTracerProvider):
    def __init__(self, real: TracerProvider) -> None:
        self.tracer = FlakyTracer(real.get_tracer("hookbus"))

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return self.tracer


@pytest.mark.timeout(60)
def test_a_failing_tracer_is_reported_once_and_its_recovery_too(
    hookbus_home: TestHome, caplog: pytest.LogCaptureFixture
) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("h", event="Stop", mode="sync", command="true")
    memory = InMemorySpanExporter()
    working = TracerProvider()
    working.add_span_processor(SimpleSpanProcessor(memory))
    flaky = FlakyProvider(working)
    hookbus_otel.set_tracer_provider_for_hookbus(flaky)
    try:
        with caplog.at_level(logging.WARNING, logger="hookbus.otel"), HookBus(hookbus_home.root) as bus:
            for _ in range(3):
                assert bus.emit("Stop", {}).behavior == "allow"
            flaky.tracer.broken = False
            for _ in range(2):
                bus.emit("Stop", {})
    finally:
        hookbus_otel.set_tracer_provider_for_hookbus(None)
        working.shutdown()
    messages = [r.getMessage() for r in caplog.records if r.name == "hookbus.otel"]
    assert len(messages) == 2, messages
    assert "start_span exploded" in messages[0]
    assert "recovered" in messages[1]
    assert len(memory.get_finished_spans()) == 2


@pytest.mark.timeout(60)
def test_an_exporter_that_raises_never_changes_a_decision(
    provider: TracerProvider, hookbus_home: TestHome, caplog: pytest.LogCaptureFixture
) -> None:
    broken = RaisingExporter()
    provider.add_span_processor(SimpleSpanProcessor(broken))
    decisions = emit_twice_and_close(hookbus_home, caplog)
    check_decisions_unchanged(decisions, hookbus_home)
    assert broken.calls == 10  # every span reached the exporter, which raised each time
    assert not [r for r in caplog.records if "recorder 'otel' raised" in r.getMessage()]


# -- the global provider, flushing, and the CLI -----------------------------------------


GLOBAL_PROVIDER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from hookbus import HookBus

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    # A batch that would not be exported for ten minutes: only a flush gets it out.
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=600_000))
    trace.set_tracer_provider(provider)
    bus = HookBus(sys.argv[1])
    decision = bus.emit("Stop", {})
    before = len(exporter.get_finished_spans())
    bus.close()
    after = [span.name for span in exporter.get_finished_spans()]
    print(json.dumps({"behavior": decision.behavior, "before": before, "after": after}))
    """
)


def run_python(*args: str, home: TestHome) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "HOOKBUS_", "VIX_"))}
    return subprocess.run(
        [sys.executable, "-W", "error", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=home.root,
    )


@pytest.mark.timeout(90)
def test_the_global_provider_is_used_and_flushed_when_the_bus_closes(hookbus_home: TestHome) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("done", event="Stop", mode="sync", command="true")
    result = run_python("-c", GLOBAL_PROVIDER_SCRIPT, str(hookbus_home.root), home=hookbus_home)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "behavior": "allow",
        "before": 0,
        "after": ["hookbus Stop done"],
    }


def plugins_output(home: TestHome) -> tuple[list[str], str]:
    result = run_python("-m", "hookbus", "plugins", "--home", str(home.root), home=home)
    assert result.returncode == 0, result.stderr
    row = [line for line in result.stdout.splitlines() if line.startswith("otel ")]
    assert len(row) == 1, result.stdout
    return re.split(r"\s{2,}", row[0].strip()), result.stdout


@pytest.mark.timeout(90)
def test_hookbus_plugins_lists_otel_as_a_recorder(hookbus_home: TestHome) -> None:
    row, output = plugins_output(hookbus_home)
    assert row == [
        "otel",
        "hookbus-otel",
        "0.1.0",
        'loaded (recorder not selected: settings.json "recorder")',
        "recorder",
    ]
    assert "recording with: recorder\n" in output

    hookbus_home.write_settings(BOTH)
    row, output = plugins_output(hookbus_home)
    assert row == ["otel", "hookbus-otel", "0.1.0", "loaded", "recorder"]
    assert "recording with: recorder, otel\n" in output


# -- the pure parts ----------------------------------------------------------------------


def test_span_times_are_at_plus_duration_in_ns() -> None:
    record = RunRecord(
        at="2026-11-29T18:14:06.123Z", hook_id="h", event="Stop", mode="sync",
        status="allow", duration=0.25,
    )
    start, end = hookbus_otel.span_times(record)
    assert start == 1_795_976_046_123_000_000
    assert end - start == 250_000_000


def test_a_record_whose_at_does_not_parse_ends_now() -> None:
    record = RunRecord(
        at="yesterday", hook_id="h", event="Stop", mode="sync", status="allow", duration=0.5
    )
    began = time.time_ns()
    start, end = hookbus_otel.span_times(record)
    assert began <= end <= time.time_ns()
    assert end - start == 500_000_000


@pytest.mark.timeout(30)
def test_recording_from_many_threads_gives_one_span_each(
    exporter: InMemorySpanExporter, hookbus_bus: HookBus
) -> None:
    def record(index: int) -> None:
        hookbus_otel.hookbus_record(
            bus=hookbus_bus,
            record=RunRecord(
                at="2026-11-29T18:14:06.123Z", hook_id=f"h{index}", event="Stop",
                mode="async", status="done", duration=0.001,
            ),
        )

    threads = [threading.Thread(target=record, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(spans_by_hook(exporter)) == sorted(f"h{i}" for i in range(16))


# -- tiers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
def test_every_span_says_its_hooks_tier(tier: str) -> None:
    record = RunRecord(
        at="2026-11-29T18:14:06.123Z", hook_id="h", event="PreToolUse", mode="sync",
        status="deny", duration=0.01, tier=tier,  # type: ignore[arg-type]
    )
    attributes = hookbus_otel.span_attributes(record)
    assert attributes["hookbus.hook.tier"] == tier
    assert attributes == expected_attributes(record)


@pytest.mark.timeout(60)
def test_the_home_guards_deny_is_a_builtin_span(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, hookbus_fire: Any
) -> None:
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("mine", mode="sync", matcher="write_file", command="true")
    planted = str(hookbus_home.root / "hooks" / "planted" / "hook.json")
    began = time.time_ns()
    fired: Fired = hookbus_fire("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": planted}, "cwd": "/"})
    ended = time.time_ns()
    assert fired.decision.behavior == "deny"
    spans = spans_by_hook(exporter)
    assert sorted(spans) == sorted([GUARD_ID, "mine"])
    for record in fired.records:
        check_span(spans[record.hook_id], record, (began, ended))
    assert (spans[GUARD_ID].attributes or {})["hookbus.hook.tier"] == "builtin"
    assert (spans["mine"].attributes or {})["hookbus.hook.tier"] == "user"


@pytest.mark.timeout(60)
@pytest.mark.skipif(os.geteuid() != 0, reason="a managed directory must be root's: this test makes one")
def test_a_managed_hooks_fire_is_a_managed_span(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed = tmp_path / "managed"
    hook = managed / "hooks" / "org-guard" / "hook.json"
    hook.parent.mkdir(parents=True)
    for directory in (managed, managed / "hooks", hook.parent):
        directory.chmod(0o755)  # the managed tier refuses what others can write
    hook.write_text(json.dumps({"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync",
                                "blocking": True, "command": "echo 'managed says no' >&2; exit 2"}))
    hook.chmod(0o644)
    # Where a managed directory exists, only the third-party plugins it names load.
    (managed / "settings.json").write_text(json.dumps({"plugins": ["otel"]}))
    (managed / "settings.json").chmod(0o644)
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(managed))
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("mine", mode="sync", matcher="bash", command="true")
    capture = CaptureRecorder()
    with HookBus(hookbus_home.root, plugins=[capture]) as bus:
        assert bus.snapshot.hooks["org-guard"].tier == "managed", bus.problems
        assert bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"}).behavior == "deny"
        records = {r.hook_id: r for r in capture.wait_for(2)}
    spans = spans_by_hook(exporter)
    assert {h: (s.attributes or {})["hookbus.hook.tier"] for h, s in spans.items()} == {"org-guard": "managed", "mine": "user"}
    assert {h: r.tier for h, r in records.items()} == {"org-guard": "managed", "mine": "user"}


@pytest.mark.timeout(60)
def test_a_span_holds_no_secret_with_nothing_registered(
    exporter: InMemorySpanExporter, hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_fire: Any
) -> None:
    """The record a span is made of comes masked: a bearer token and a GitHub token in the
    error the span's status describes are masked by their shape."""
    token = "ghp_Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2"
    hookbus_home.write_settings(BOTH)
    hookbus_home.write_hook("leaky", mode="sync", command=f"echo 'Authorization: Bearer Be4rerT0ken99 {token}' >&2; exit 1")
    hookbus_fire("PreToolUse", ENVELOPE)
    [span] = exporter.get_finished_spans()
    said = json.dumps({"attributes": dict(span.attributes or {}), "status": span.status.description})
    assert "Be4rerT0ken99" not in said and token[4:] not in said
    assert "Authorization: Bearer [redacted] ghp_[redacted]" in said
