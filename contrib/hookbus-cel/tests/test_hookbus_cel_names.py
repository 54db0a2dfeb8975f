"""The fields an expression is given: only those it names, and never a different answer for it.

The engine converts every variable it is handed before it evaluates, so the runner passes
only the envelope's fields whose names appear in the expression's text; a name it reads
that was left out is evaluated again over every field. These tests hold both ways of
evaluating side by side over odd expressions and envelopes: they must agree exactly.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import pytest

from hookbus import HookBus, HookCall, Outcome
from hookbus.envelope import encode_envelope
from hookbus.testing import Fired, TestHome
from hookbus_cel import _evaluate, compile_expression

pytestmark = pytest.mark.timeout(120)

Fire = Callable[..., Fired]

EXPRESSIONS = [
    "tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': 'no rm -rf'} : null",
    "envelope.tool_input.command.contains('rm') ? {'behavior': 'deny', 'reason': 'via envelope'} : null",
    "envelope['tool_name'] == 'bash' ? {'behavior': 'context', 'context': event} : null",
    "{'behavior': 'context', 'context': event + ' ' + tool_name}",
    "has(tool_input.command) ? null : {'behavior': 'deny', 'reason': 'no command'}",
    "missing_field == 1 || tool_name == 'bash' ? {'behavior': 'deny', 'reason': 'absorbed'} : null",
    "missing_field == 1 ? null : {}",
    "tool_name == 'bash' && missing_field ? {'behavior': 'deny', 'reason': 'x'} : null",
    "[1, 2].exists(tool_name, tool_name == 2) ? {'behavior': 'context', 'context': 'shadowed'} : null",
    "cwd.startsWith('/') && size(envelope) > 2 ? {'behavior': 'context', 'context': string(size(envelope))} : null",
    "'tool_name' in envelope ? {'behavior': 'context', 'context': 'named in a string only'} : null",
    "tool_input.odd > 1e20 ? {'behavior': 'deny', 'reason': 'big'} : null",
    "string(tool_input.deep).size() > 0 ? {'behavior': 'context', 'context': 'deep'} : null",
    "event == envelope.event ? {'behavior': 'deny', 'reason': 'forged event'} : null",
]

ENVELOPES: list[dict[str, Any]] = [
    {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/"},
    {"tool_name": "bash", "tool_input": {}, "cwd": "/tmp", "event": "Stop", "envelope": {"tool_name": "x"}},
    {"tool_name": "edit", "tool_input": {"command": "ls", "odd": 2**70}, "missing_field": 1},
    {"tool_name": "bash", "tool_input": {"command": "a\ud800b", "deep": [[[["x"]]]]}, "cwd": "/"},
    {"tool_name": "bash", "tool_input": {"command": "echo"}, "cwd": "/", "other": list(range(20_000))},
    {},
]


def _said(outcome: object) -> tuple[Any, ...]:
    assert isinstance(outcome, Outcome)
    return (outcome.behavior, outcome.reason, outcome.context, outcome.input, outcome.error, outcome.failure, outcome.answer)


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_the_fields_left_out_never_change_the_answer(hookbus_home: TestHome, hookbus_bus: HookBus, expression: str) -> None:
    hookbus_home.write_hook("policy", event="PreToolUse", mode="sync", blocking=True, cel=expression)
    hookbus_bus.reload()
    hook = hookbus_bus.snapshot.hooks["policy"]
    program = compile_expression(expression)
    for envelope in ENVELOPES:
        full, payload = encode_envelope("PreToolUse", envelope)
        call = HookCall(hook=hook, event="PreToolUse", envelope=full, payload=payload, deadline=time.monotonic() + 30, home=hookbus_bus.home)
        named = hook.runner.run(call)
        whole = _evaluate(call, program, None)
        assert _said(named) == _said(whole), (expression, envelope)


def test_an_expression_is_given_only_the_fields_it_names() -> None:
    program = compile_expression("tool_input.command.contains('rm') ? {'behavior': 'deny', 'reason': 'x'} : null")
    assert {"tool_input", "command", "contains", "rm"} <= program.names
    assert "envelope" not in program.names and "event" not in program.names


def test_a_large_field_the_expression_never_names_costs_it_nothing(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    # Nested comprehensions over tool_input: cheap, whatever else the envelope carries. Over
    # the whole envelope (``envelope.other``) the same work would be refused by the estimate.
    narrow = "tool_input.args.exists(a, tool_input.args.exists(b, a + b == 'rm-rf')) ? {'behavior': 'deny', 'reason': 'x'} : null"
    wide = "envelope.other.exists(a, envelope.other.exists(b, a == b + 'y')) ? {'behavior': 'deny', 'reason': 'x'} : null"
    hookbus_home.write_hook("narrow", event="PreToolUse", mode="sync", blocking=True, cel=narrow, timeout="1s")
    hookbus_home.write_hook("wide", event="PreToolUse", mode="sync", blocking=True, cel=wide, timeout="1s")
    envelope = {"tool_name": "bash", "tool_input": {"args": ["rm", "-rf"]}, "other": ["x" * 1_000] * 2_000}
    fired = hookbus_fire("PreToolUse", envelope)
    narrow_record, wide_record = fired.record_of("narrow"), fired.record_of("wide")
    assert narrow_record.status == "deny" and narrow_record.error is None, narrow_record
    assert wide_record.status == "allow" and "not evaluated" in (wide_record.error or ""), wide_record


def test_a_name_the_envelope_lacks_is_the_same_error_either_way(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    hookbus_home.write_hook("policy", event="PreToolUse", mode="sync", blocking=True, cel="no_such_field == 1 ? null : {}", on_error="deny")
    fired = hookbus_fire("PreToolUse", {"tool_name": "bash"})
    record = fired.record_of("policy")
    assert record.status == "deny" and 'No value with name "no_such_field"' in (record.error or ""), record
