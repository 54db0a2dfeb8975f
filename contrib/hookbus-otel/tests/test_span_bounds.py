"""The spans waiting for a collector are bounded in bytes, not only in number.

The batch processor's queue holds OTEL_BSP_MAX_QUEUE_SIZE spans (2048); each carries the
fire's error as its status description, and a runner's error can be a megabyte. A real bus
with a real (in-process) runner whose every fire fails with a megabyte of error, and a
collector that never takes a span (the processor behind the ledger keeps them all): what the
spans hold stays small, because their texts are cut at MAX_TEXT_CHARS and the ledger bounds
the bytes held (MAX_SPAN_BYTES). Measured with tracemalloc.
"""

from __future__ import annotations

import json
import logging
import tracemalloc
from typing import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

import hookbus_otel
from hookbus import HookBus, HookCall, Outcome, RunnerRegistration, hookimpl
from hookbus.reporting import ReportOnce
from hookbus.runners import ParseContext
from hookbus.testing import TestHome
from hookbus_otel.export import AdmittingProcessor, LossLedger

MiB = 1 << 20


class Stuck(SpanProcessor):
    """Stands in for a batch processor whose collector never takes a span: keeps them all."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


class Failing:
    """A runner whose every fire fails with a megabyte of error."""

    def parse(self, key: str, value: object, context: ParseContext) -> object:
        return value

    def run(self, call: HookCall) -> Outcome:
        return Outcome.fail_open(f"{call.envelope['n']:04d}" + "e" * MiB)


class FailingPlugin:
    @hookimpl
    def hookbus_register_runners(self, register: RunnerRegistration) -> None:
        register.add("failing", Failing())


@pytest.fixture
def stuck_provider() -> Iterator[tuple[TracerProvider, LossLedger, Stuck]]:
    ledger = LossLedger(capacity=2048)
    stuck = Stuck()
    provider = TracerProvider(shutdown_on_exit=False)
    report = ReportOnce(logging.getLogger("hookbus.otel"))
    provider.add_span_processor(AdmittingProcessor(stuck, ledger, "http://collector:4318/v1/traces", report))
    hookbus_otel.set_tracer_provider_for_hookbus(provider)
    yield provider, ledger, stuck
    hookbus_otel.set_tracer_provider_for_hookbus(None)
    provider.shutdown()


@pytest.mark.timeout(120)
def test_spans_of_megabyte_errors_behind_a_stuck_collector_hold_little(
    hookbus_home: TestHome, stuck_provider: tuple[TracerProvider, LossLedger, Stuck]
) -> None:
    _, ledger, stuck = stuck_provider
    hookbus_home.write_settings({"recorder": "otel"})
    (hookbus_home.root / "hooks" / "loud").mkdir(parents=True, exist_ok=True)
    (hookbus_home.root / "hooks" / "loud" / "hook.json").write_text(
        json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "failing": {}})
    )
    with HookBus(hookbus_home.root, plugins=[FailingPlugin()]) as bus:
        tracemalloc.start()
        try:
            baseline = tracemalloc.get_traced_memory()[0]
            for n in range(64):
                bus.emit("PreToolUse", {"tool_name": "bash", "n": n})
            held = tracemalloc.get_traced_memory()[0] - baseline
        finally:
            tracemalloc.stop()
    # Unbounded: 64 spans of a megabyte of description each.
    assert held < 4 * MiB, f"{held / MiB:.1f} MiB held by 64 spans"
    assert len(stuck.ended) == 64  # all kept (they fit), none silently dropped
    description = stuck.ended[0].status.description or ""
    assert description.startswith("0000eee") and "[hookbus: truncated" in description
    assert len(description) < hookbus_otel.MAX_TEXT_CHARS + 100
    assert ledger.held_bytes <= ledger.capacity_bytes


def test_the_ledger_turns_spans_away_past_its_bytes_and_counts_them() -> None:
    ledger = LossLedger(capacity=100, capacity_bytes=10_000)
    assert ledger.admit(1, None, 6_000)
    assert not ledger.admit(2, None, 6_000)  # 12,000 bytes would be held: counted lost
    assert ledger.admit(3, None, 4_000)
    assert (ledger.in_flight, ledger.held_bytes, ledger.lost_in(None)) == (2, 10_000, 1)
    assert ledger.abandon() == 2  # stopping without them: lost too
    assert (ledger.in_flight, ledger.held_bytes, ledger.lost_in(None)) == (0, 0, 3)
    alone = LossLedger(capacity=100, capacity_bytes=10)
    assert alone.admit(4, None, 1_000)  # one span larger than the bound is taken when none is held
