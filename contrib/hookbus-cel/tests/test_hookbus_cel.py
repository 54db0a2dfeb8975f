"""hookbus-cel through a real bus: the plugin comes in through its entry point, as it would
for a user (``pip install contrib/hookbus-cel`` first; ``make test`` does it)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from hookbus import HookBus
from hookbus.testing import CaptureRecorder, Fired, TestHome, run_fixtures
from hookbus_cel import CUT, MAX_DEPTH, CelProgram, EnvelopeSize, compile_expression, estimated_cost, measure

pytestmark = pytest.mark.timeout(120)

Fire = Callable[..., Fired]

DENY_RM = "tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': 'no rm -rf'} : null"
BASH = {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/"}


def cel_hook(home: TestHome, hook_id: str, expression: Any, **fields: Any) -> Path:
    fields.setdefault("mode", "sync")
    fields.setdefault("blocking", True)
    return home.write_hook(hook_id, event=fields.pop("event", "PreToolUse"), cel=expression, **fields)


@pytest.mark.parametrize(
    ("expression", "behavior", "said"),
    [
        (DENY_RM, "deny", "no rm -rf"),
        ("envelope.tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': 'both spellings'} : null", "deny", "both spellings"),
        ("{'behavior': 'modify', 'input': {'command': tool_input.command.replace('rm -rf', 'echo')}}", "modify", {"command": "echo /"}),
        ("{'behavior': 'context', 'context': 'event ' + event + ', tool ' + tool_name}", "context", "event PreToolUse, tool bash"),
        ("null", "allow", None),
        ("{}", "allow", None),
        ("tool_input.command.startsWith('ls') ? {'behavior': 'deny', 'reason': 'x'} : null", "allow", None),
    ],
)
def test_the_value_decides_as_a_command_hooks_json(hookbus_home: TestHome, hookbus_fire: Fire, expression: str, behavior: str, said: Any) -> None:
    cel_hook(hookbus_home, "policy", expression)
    fired = hookbus_fire("PreToolUse", BASH)
    record = fired.record_of("policy")
    assert record.status == behavior, record
    assert record.error is None
    if behavior == "deny":
        assert fired.decision.reason == f"hook 'policy' denied: {said}"
    elif behavior == "modify":
        assert fired.decision.input == said
    elif behavior == "context":
        assert fired.decision.context == said


@pytest.mark.parametrize(
    "expression, message",
    [
        ("true", "is a bool (true), not a decision"),
        ("'deny'", "is a string ('deny'), not a decision"),
        ("[1, 2]", "is a list of 2"),
        ("{'behavior': 'block'}", 'needs "behavior" set to one of'),
        ("tool_input.absent.contains('x')", "evaluation failed"),
        ("no_such_name == 1", 'No value with name "no_such_name"'),
        ("1 / 0 == 1", "evaluation failed"),
    ],
)
def test_anything_else_is_the_hooks_failure_under_its_on_error(
    hookbus_home: TestHome, hookbus_fire: Fire, expression: str, message: str
) -> None:
    cel_hook(hookbus_home, "open", expression)
    cel_hook(hookbus_home, "closed", expression, on_error="deny")
    fired = hookbus_fire("PreToolUse", BASH)
    opened, closed = fired.record_of("open"), fired.record_of("closed")
    assert opened.status == "allow" and message in (opened.error or ""), opened
    assert closed.status == "deny", closed
    assert fired.decision.behavior == "deny"
    assert "closed" in (fired.decision.reason or "")


def test_an_expression_that_does_not_compile_names_the_field_and_the_position(hookbus_home: TestHome) -> None:
    cel_hook(hookbus_home, "broken", "tool_input.command.contains(")
    cel_hook(hookbus_home, "not-a-string", {"expr": "true"})
    cel_hook(hookbus_home, "empty", "  ")
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "--home", str(hookbus_home.root), "validate"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "hooks/broken/hook.json: does not compile: line 1, column 29: Syntax error" in out, out
    assert "@ $.cel" in out
    assert "hooks/not-a-string/hook.json: expected a string holding a CEL expression, got an object @ $.cel" in out, out
    assert "hooks/empty/hook.json: the expression is empty" in out, out
    assert "Traceback" not in out


def test_the_last_good_version_keeps_running(hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_capture: CaptureRecorder) -> None:
    cel_hook(hookbus_home, "policy", DENY_RM)
    hookbus_bus.reload()
    assert hookbus_bus.emit("PreToolUse", BASH).behavior == "deny"
    cel_hook(hookbus_home, "policy", "tool_input.command.contains(")
    hookbus_bus.reload()
    assert hookbus_bus.emit("PreToolUse", BASH).behavior == "deny"
    (problem,) = hookbus_bus.problems
    assert problem.kept_last_good and "does not compile" in str(problem), problem


def test_a_hostile_envelope_ends_fast_under_on_error_and_holds_no_other_hook(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    # 20,000 items, compared pairwise: 400 million comparisons (about 160 s in an engine
    # without a budget). The engine stops at its 10,000 iterations; the timeout is 5 s.
    quadratic = "tool_input.items.exists(a, tool_input.items.exists(b, a == b + 100000)) ? {'behavior': 'deny', 'reason': 'x'} : null"
    cel_hook(hookbus_home, "quadratic", quadratic, on_error="deny", timeout="5s")
    hookbus_home.write_hook("beside", mode="sync", command="echo '{\"behavior\": \"context\", \"context\": \"I ran\"}'")
    envelope = {"tool_name": "bash", "tool_input": {"command": "ls", "items": list(range(20_000))}}
    started = time.monotonic()
    fired = hookbus_fire("PreToolUse", envelope)
    elapsed = time.monotonic() - started
    record = fired.record_of("quadratic")
    assert record.status == "deny" and "comprehension iterations" in (record.error or ""), record
    assert fired.record_of("beside").status == "context"
    assert elapsed < 60, elapsed  # generous: the point is that it ends, not how fast


def test_work_the_estimate_says_the_timeout_cannot_hold_is_not_evaluated(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    # A comprehension whose body searches 16 MiB, once per item of a 5,000-item list.
    body = "tool_input.items.exists(i, tool_input.content.contains('needle')) ? {'behavior': 'deny', 'reason': 'x'} : null"
    cel_hook(hookbus_home, "heavy", body, on_error="deny", timeout="1s")
    envelope = {"tool_name": "bash", "tool_input": {"content": "x" * (16 << 20), "items": list(range(5_000))}}
    fired = hookbus_fire("PreToolUse", envelope)
    record = fired.record_of("heavy")
    assert record.status == "deny" and "not evaluated" in (record.error or ""), record


def test_the_estimate_lets_ordinary_policies_through_large_envelopes() -> None:
    program = compile_expression("tool_input.edits.exists(e, e.new_string.contains('password'))")
    write = measure({"tool_name": "edit", "tool_input": {"edits": [{"new_string": "y" * 100_000}] * 20}})
    assert estimated_cost(program, write) < 256 * 1024 * 1024
    flat = compile_expression(DENY_RM)
    big = measure({"tool_input": {"command": "x" * (16 << 20)}})
    assert estimated_cost(flat, big) == big.chars + big.items + 1
    assert isinstance(flat, CelProgram) and flat.comprehensions == 0
    assert compile_expression("a.map(x, b.filter(y, y.split(',').size() > 0))").comprehensions == 2
    assert measure({"a": [[1, 2], {"b": "xyz"}]}) == EnvelopeSize(items=6, chars=5, depth=3)


def test_an_envelope_nested_ten_thousand_levels_is_cut_not_crashed(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    cel_hook(hookbus_home, "policy", DENY_RM)
    cel_hook(hookbus_home, "deep-reader", "{'behavior': 'context', 'context': string(tool_input.n)}", blocking=False)
    nested: Any = []
    for _ in range(9_990):  # the bus takes 10,000 levels at most
        nested = [nested]
    fired = hookbus_fire("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf x", "n": nested}})
    assert fired.record_of("policy").status == "deny"
    assert f"deeper than {MAX_DEPTH} levels" in (fired.record_of("policy").note or "")
    assert fired.record_of("deep-reader").status in ("context", "allow")
    assert MAX_DEPTH < 200 and CUT


@pytest.mark.parametrize(
    ("value", "check"),
    [(2**70, "type(tool_input.odd) == double && tool_input.odd > 1e20"), ("a\ud800b", "tool_input.odd == 'a\\ufffdb'")],
    ids=["integer-past-64-bits", "lone-surrogate"],
)
def test_values_the_engine_cannot_take_reach_it_as_cel_reads_json(hookbus_home: TestHome, hookbus_fire: Fire, value: Any, check: str) -> None:
    # Left as they are, either would fail the whole map that holds it, and with it every
    # policy reading tool_input: an envelope could switch a policy off.
    cel_hook(hookbus_home, "reader", f"{check} ? {{'behavior': 'deny', 'reason': 'seen'}} : null", on_error="deny")
    cel_hook(hookbus_home, "policy", DENY_RM)
    fired = hookbus_fire("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf x", "odd": value}})
    assert fired.record_of("reader").status == "deny" and fired.record_of("reader").error is None, fired.record_of("reader")
    assert fired.record_of("policy").status == "deny" and fired.record_of("policy").error is None


def test_concurrent_emits_each_get_their_own_answer(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    cel_hook(hookbus_home, "policy", "{'behavior': 'context', 'context': tool_input.command}", blocking=False)
    hookbus_bus.reload()
    answers: dict[int, str | None] = {}

    def emit(index: int) -> None:
        answers[index] = hookbus_bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": f"n{index}"}}).context

    threads = [threading.Thread(target=emit, args=(index,)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == {index: f"n{index}" for index in range(16)}


def test_explain_shows_the_expression_and_its_value(hookbus_home: TestHome) -> None:
    cel_hook(hookbus_home, "policy", DENY_RM)
    words = [sys.executable, "-m", "hookbus", "--home", str(hookbus_home.root), "explain", "PreToolUse"]
    result = subprocess.run([*words, "--json"], input=json.dumps(BASH), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    verdict = next(hook for hook in json.loads(result.stdout)["hooks"] if hook["id"] == "policy")
    assert verdict["action"] == {"cel": DENY_RM}
    assert json.loads(verdict["result"]["answer"]) == {"behavior": "deny", "reason": "no rm -rf"}
    text = subprocess.run(words, input=json.dumps(BASH), capture_output=True, text=True, timeout=60).stdout
    assert f"policy: cel {DENY_RM} = " in text, text


def test_hookbus_test_fixtures_run_cel_hooks(hookbus_home: TestHome) -> None:
    cel_hook(hookbus_home, "policy", DENY_RM)
    fixtures = hookbus_home.home.hook_dir("policy") / "tests"
    fixtures.mkdir()
    (fixtures / "rm.json").write_text(json.dumps({"event": "PreToolUse", "envelope": BASH, "expect": {"behavior": "deny"}}))
    (fixtures / "ls.json").write_text(json.dumps({"event": "PreToolUse", "envelope": {"tool_name": "bash", "tool_input": {"command": "ls"}}, "expect": {"behavior": "allow"}}))
    results = run_fixtures(hookbus_home.root)
    assert len(results) == 2 and all(result.ok for result in results), results


def test_a_shadow_cel_hook_is_recorded_and_enforces_nothing(hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_capture: CaptureRecorder) -> None:
    cel_hook(hookbus_home, "policy", DENY_RM, shadow=True)
    hookbus_bus.reload()
    assert hookbus_bus.emit("PreToolUse", BASH).behavior == "allow"
    (record,) = hookbus_capture.wait_for(1)
    assert record.status == "deny" and record.hook_id == "policy"


def test_replay_runs_recorded_emits_through_a_changed_expression(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    hookbus_home.write_settings({"record_envelopes": True})
    cel_hook(hookbus_home, "policy", DENY_RM)
    hookbus_bus.reload()
    for command in ("ls", "rm -rf build", "git push --force"):
        hookbus_bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": command}})
    hookbus_bus.close()
    words = [sys.executable, "-m", "hookbus", "--home", str(hookbus_home.root), "replay", "--json"]
    same = subprocess.run(words, capture_output=True, text=True, timeout=60)
    assert same.returncode == 0, same.stdout + same.stderr
    cel_hook(hookbus_home, "policy", "tool_input.command.matches('rm -rf|--force') ? {'behavior': 'deny', 'reason': 'no'} : null")
    changed = subprocess.run(words, capture_output=True, text=True, timeout=60)
    assert changed.returncode == 3, changed.stdout + changed.stderr
    [flip] = json.loads(changed.stdout)["flipped"]
    assert flip["recorded"] == {"behavior": "allow"} and flip["now"]["behavior"] == "deny" and flip["by"] == ["policy"]


def test_explain_shows_null_when_the_expression_has_no_opinion(hookbus_home: TestHome) -> None:
    cel_hook(hookbus_home, "policy", DENY_RM)
    words = [sys.executable, "-m", "hookbus", "--home", str(hookbus_home.root), "explain", "PreToolUse"]
    quiet = {"tool_name": "bash", "tool_input": {"command": "ls"}}
    text = subprocess.run(words, input=json.dumps(quiet), capture_output=True, text=True, timeout=60).stdout
    assert f"policy: cel {DENY_RM} = null" in text, text
    failing = subprocess.run(words, input=json.dumps({"tool_name": "bash"}), capture_output=True, text=True, timeout=60).stdout
    assert "policy: cel" not in failing and "evaluation failed" in failing, failing


def test_event_and_envelope_are_hookbus_names_whatever_the_envelope_holds(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    """An envelope cannot pass itself off as another event, nor hide a field, by sending
    fields named ``event`` or ``envelope``: those two names are hookbus's."""
    expression = (
        "event == 'PreToolUse' && envelope.event == 'Stop' && envelope.envelope == 'x' && tool_input.command == 'rm -rf /' "
        "? {'behavior': 'deny', 'reason': 'seen as it is'} : null"
    )
    cel_hook(hookbus_home, "policy", expression, on_error="deny")
    fired = hookbus_fire("PreToolUse", {**BASH, "event": "Stop", "envelope": "x"})
    assert fired.decision.reason == "hook 'policy' denied: seen as it is", fired.record_of("policy")
