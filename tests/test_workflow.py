"""Workflow hooks with real bash (and the stub chat server for prompt steps).

``workflow_id`` names a workflow of config/workflow.json (or .yaml); ``workflow`` is an
inline one. Steps run in order, each bash step with the envelope on stdin and the previous
output in HOOKBUS_PREVIOUS_OUTPUT; the last step's output is the final text.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from conftest import atomic_write, read_log, read_state, wait_until
from hookbus import HookBus, hookimpl
from hookbus.chat_stub import StubChatServer, StubReply
from hookbus.prompts import PromptRequest, PromptResult

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]

FAST_VETO = "grep -q rm && echo 'BLOCK: no rm' || true"


def write_config(home: Path, workflows: dict[str, Any], kind: str = "json") -> Path:
    config = home / "config"
    config.mkdir(exist_ok=True)
    path = config / f"workflow.{kind}"
    text = json.dumps(workflows) if kind == "json" else yaml.safe_dump(workflows)
    atomic_write(path, text)
    return path


def write_provider(home: Path, server: StubChatServer) -> None:
    (home / "settings.json").write_text(
        json.dumps({"prompt_provider": {"base_url": server.base_url, "model": "m1"}})
    )


def recorded(bus: HookBus, home: Path, hook_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """state.json and the last log line of ``hook_id``, once the recorder has flushed."""
    bus.read_runs(hook_id)
    entries = [entry for entry in read_log(home) if entry["hook_id"] == hook_id]
    assert entries, f"no log line for {hook_id!r}"
    return read_state(home, hook_id), entries[-1]


def problem_strings(bus: HookBus) -> list[str]:
    return [str(problem) for problem in bus.problems]


# -- where a workflow comes from -----------------------------------------------------------

PIPELINE = {
    "description": "two steps: the second turns the first's output into a decision",
    "steps": [
        {"name": "tool", "bash": "jq -r .tool_name 2>/dev/null || sed -n 's/.*\"tool_name\":\"\\([^\"]*\\)\".*/\\1/p'"},
        {
            "name": "decide",
            "bash": 'tool=$(printf "%s" "$HOOKBUS_PREVIOUS_OUTPUT"); '
            'printf \'{"behavior": "context", "context": "tool was %s"}\' "$tool"',
        },
    ],
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("source", ["config/workflow.json", "config/workflow.yaml", "inline"])
def test_workflow_id_from_json_or_yaml_and_inline_give_the_same_result(
    source: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    if source == "inline":
        write_hook("wf", mode="sync", workflow=PIPELINE)
    else:
        write_config(home, {"pipeline": PIPELINE, "unused": {"steps": [{"bash": "exit 1"}]}}, source[-4:])
        write_hook("wf", mode="sync", workflow_id="pipeline")
    bus = make_bus()
    assert bus.problems == ()
    hook = bus.snapshot.hooks["wf"]
    assert hook.spec.action_key == ("workflow" if source == "inline" else "workflow_id")
    decision = bus.emit("PreToolUse", {"tool_name": "edit_file"})
    assert (decision.behavior, decision.context) == ("context", "tool was edit_file")
    state, entry = recorded(bus, home, "wf")
    assert state["last_status"] == "context"
    assert state["last_error"] is None
    assert entry["decision"] == {"behavior": "context", "context": "tool was edit_file"}


# -- a single bash step: the fast veto -------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("source", ["workflow_id", "workflow"])
def test_single_bash_step_fast_veto(source: str, home: Path, write_hook: Writer, make_bus: Maker) -> None:
    definition = {"description": "no rm", "steps": [{"bash": FAST_VETO}]}
    if source == "workflow_id":
        write_config(home, {"fast-veto": definition})
        write_hook("veto", mode="sync", blocking=True, matcher="bash", workflow_id="fast-veto")
    else:
        write_hook("veto", mode="sync", blocking=True, matcher="bash", workflow=definition)
    bus = make_bus()
    assert bus.problems == ()

    denied = bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf build"}})
    assert denied.behavior == "deny"
    assert denied.reason == "hook 'veto' denied: no rm"
    assert denied.denied_by == ("veto",)
    state, entry = recorded(bus, home, "veto")
    assert state["last_status"] == "deny"
    assert state["last_error"] is None
    assert entry["decision"] == {"behavior": "deny", "reason": "no rm"}

    allowed = bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls -la"}})
    assert allowed.behavior == "allow"
    assert allowed.context is None
    state, entry = recorded(bus, home, "veto")
    assert state["last_status"] == "allow"
    assert state["last_error"] is None
    assert entry["error"] is None
    assert [run["status"] for run in state["recent_runs"]] == ["deny", "allow"]


# -- several steps ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_each_step_gets_the_envelope_and_the_previous_output(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    seen = home / "seen"
    seen.mkdir()
    steps = [
        {"name": "first", "bash": f'cat > {seen}/stdin1; printf "%s" "${{HOOKBUS_PREVIOUS_OUTPUT-unset}}" > {seen}/prev1; echo "first output"'},
        {"name": "second", "bash": f'cat > {seen}/stdin2; printf "%s" "$HOOKBUS_PREVIOUS_OUTPUT" > {seen}/prev2; printf "second\\noutput\\n"'},
        {"name": "judge", "prompt": "Judge the tool call below."},
    ]
    envelope = {"tool_name": "write_file", "tool_input": {"path": "a.txt"}, "turn_count": 3}
    with StubChatServer(lambda request: "Checked.\nBLOCK: judged unsafe") as server:
        write_provider(home, server)
        write_hook("multi", mode="sync", blocking=True, workflow={"steps": steps})
        bus = make_bus()
        decision = bus.emit("PreToolUse", envelope)

    full = {**envelope, "hook_event_name": "PreToolUse"}
    assert json.loads((seen / "stdin1").read_text()) == full
    assert json.loads((seen / "stdin2").read_text()) == full
    assert (seen / "prev1").read_text() == ""  # the first step has no previous output
    assert (seen / "prev2").read_text().strip() == "first output"

    (request,) = server.requests
    content = request["body"]["messages"][0]["content"]
    assert content.startswith("Judge the tool call below.")
    assert "second\noutput" in content
    assert "first output" not in content  # only the previous step's output
    assert json.loads(content.rstrip().splitlines()[-1]) == full  # the envelope, appended
    assert content.index("Judge the tool call") < content.index("second\noutput") < content.rindex('"hook_event_name"')

    assert decision.behavior == "deny"
    assert decision.reason == "hook 'multi' denied: judged unsafe"
    state, entry = recorded(bus, home, "multi")
    assert state["last_status"] == "deny"
    assert entry["decision"] == {"behavior": "deny", "reason": "judged unsafe"}


@pytest.mark.timeout(30)
def test_the_final_text_is_the_last_steps_output(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    """An earlier step's BLOCK: is only passed on; what the last step prints decides."""
    steps = [
        {"bash": "echo 'BLOCK: the first step says no'"},
        {"bash": 'echo "reviewed: $HOOKBUS_PREVIOUS_OUTPUT"'},
    ]
    write_hook("last", mode="sync", blocking=True, workflow={"steps": steps})
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    assert decision.behavior == "context"
    assert decision.context == "reviewed: BLOCK: the first step says no"


@pytest.mark.timeout(30)
def test_a_prompt_step_output_reaches_the_next_bash_step(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    steps = [
        {"name": "ask", "prompt": "Summarise."},
        {"name": "relay", "bash": 'printf \'{"behavior": "context", "context": "model said: %s"}\' "$HOOKBUS_PREVIOUS_OUTPUT"'},
    ]
    with StubChatServer(lambda request: "all good") as server:
        write_provider(home, server)
        write_hook("relay", event="Stop", mode="sync", workflow={"steps": steps})
        bus = make_bus()
        decision = bus.emit("Stop", {})
    assert decision.context == "model said: all good"
    content = server.requests[0]["body"]["messages"][0]["content"]
    assert content.startswith("Summarise.")
    assert json.loads(content.rstrip().splitlines()[-1]) == {"hook_event_name": "Stop"}


# -- a failing step stops the workflow -------------------------------------------------------

FAILING_STEPS = [
    ("exit-1", {"bash": "echo partial; echo 'went wrong' >&2; exit 1"}, "exited with status 1: went wrong"),
    ("exit-2", {"bash": "echo 'BLOCK: not a veto here' >&2; exit 2"}, "exited with status 2: BLOCK: not a veto here"),
    ("missing-command", {"bash": "no-such-command-hookbus-test"}, "exited with status 127 (command not found): "),
    ("step-timeout", {"bash": "sleep 5", "timeout": "200ms"}, "timed out after 200ms"),
    ("provider-error", {"prompt": "Check it."}, "answered HTTP 500: "),
    ("prompt-step-timeout", {"prompt": "HANG until the step times out", "timeout": "200ms"}, "timed out after 200ms"),
]


def failing_model(request: dict[str, Any]) -> StubReply:
    if "HANG" in request["body"]["messages"][0]["content"]:
        return StubReply(hang=True)
    return StubReply(status=500, text="model unavailable")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("step", "expected"), [row[1:] for row in FAILING_STEPS], ids=[row[0] for row in FAILING_STEPS]
)
def test_a_failing_step_stops_the_workflow_and_fails_open(
    step: dict[str, Any], expected: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    marker = home / "step3-ran"
    steps = [
        {"name": "prepare", "bash": "echo ready"},
        {"name": "check", **step},
        {"name": "after", "bash": f"touch {marker}; echo 'BLOCK: the third step ran'"},
    ]
    with StubChatServer(failing_model) as server:
        write_provider(home, server)
        write_hook("wf", mode="sync", blocking=True, timeout="10s", workflow={"steps": steps})
        bus = make_bus()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    assert decision.behavior == "allow"
    assert decision.context is None
    assert not marker.exists(), "a step after the failing one ran"
    state, entry = recorded(bus, home, "wf")
    error = state["last_error"]
    assert error.startswith("step 2 of 3 (check) failed: "), error
    assert expected in error, error
    assert state["last_status"] == "allow"
    assert entry["error"] == error
    assert entry["status"] == "allow"
    if "prompt" in step:
        assert len(server.requests) == 1
        if "timeout" not in step:
            assert "model unavailable" in error
    else:
        assert server.requests == []


@pytest.mark.timeout(30)
def test_an_unnamed_failing_step_is_named_by_its_position(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("wf", event="Stop", mode="sync", workflow={"steps": [{"bash": "exit 3"}]})
    bus = make_bus()
    assert bus.emit("Stop", {}).behavior == "allow"
    state, _ = recorded(bus, home, "wf")
    assert state["last_error"] == "step 1 of 1 failed: exited with status 3"


@pytest.mark.timeout(30)
def test_the_hook_timeout_bounds_the_whole_workflow(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    trace = home / "trace"
    step = {"bash": f"sleep 0.4; echo done >> {trace}"}
    write_hook("slow", mode="sync", blocking=True, timeout="1s", workflow={"steps": [step, step, step]})
    bus = make_bus()
    started = time.monotonic()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    elapsed = time.monotonic() - started
    assert elapsed < 1.0 + 1.0, f"a 1s workflow held emit for {elapsed:.2f}s"
    assert decision.behavior == "allow"
    finished = trace.read_text().splitlines() if trace.exists() else []
    assert len(finished) < 3, "all three 0.4 s steps ran to the end under a 1 s timeout"
    state, entry = recorded(bus, home, "slow")
    assert "timed out after 1s" in state["last_error"], state["last_error"]
    assert state["last_error"].startswith("step 3 of 3") or state["last_error"].startswith("step 2 of 3")
    assert entry["error"] == state["last_error"]


@pytest.mark.timeout(30)
def test_a_step_timeout_longer_than_what_is_left_reports_the_hooks_timeout(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    steps = [{"name": "long", "bash": "sleep 5", "timeout": "30s"}]
    write_hook("wf", event="Stop", mode="sync", timeout="500ms", workflow={"steps": steps})
    bus = make_bus()
    started = time.monotonic()
    assert bus.emit("Stop", {}).behavior == "allow"
    assert time.monotonic() - started < 0.5 + 1.0
    state, _ = recorded(bus, home, "wf")
    assert state["last_error"] == "step 1 of 1 (long) failed: timed out after 500ms"


@pytest.mark.timeout(30)
def test_the_hook_timeout_bounds_a_prompt_step(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with StubChatServer(lambda request: StubReply(hang=True)) as server:
        write_provider(home, server)
        write_hook(
            "wf",
            event="Stop",
            mode="sync",
            timeout="1s",
            workflow={"steps": [{"bash": "echo hi"}, {"name": "ask", "prompt": "Anything?"}]},
        )
        bus = make_bus()
        started = time.monotonic()
        assert bus.emit("Stop", {}).behavior == "allow"
        elapsed = time.monotonic() - started
        assert elapsed < 1.0 + 1.0, f"a 1s workflow held emit for {elapsed:.2f}s"
    state, _ = recorded(bus, home, "wf")
    assert state["last_error"] == "step 2 of 2 (ask) failed: timed out after 1s"


# -- async workflows -------------------------------------------------------------------------


class ThreadedProvider:
    """An embedder that runs prompts in threads of its own and says which."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    @hookimpl
    def hookbus_run_prompt(self, request: PromptRequest) -> PromptResult:
        self.prompts.append(request.prompt)
        return PromptResult("looked fine", thread_id="t-77")


@pytest.mark.timeout(30)
def test_an_async_workflow_records_the_thread_of_its_prompt_step(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    provider = ThreadedProvider()
    steps = [{"bash": "echo from bash"}, {"prompt": "Review."}, {"bash": 'echo "final: $HOOKBUS_PREVIOUS_OUTPUT"'}]
    write_hook("bg", event="SubagentStop", workflow={"steps": steps})
    bus = make_bus(plugins=[provider])
    hook = bus.snapshot.hooks["bg"]
    assert (hook.spec.mode, hook.timeout) == ("async", 600)
    assert bus.emit("SubagentStop", {"agent_type": "explore"}).behavior == "allow"
    bus.close()
    (prompt,) = provider.prompts
    assert prompt.startswith("Review.")
    assert "from bash" in prompt
    state = read_state(home, "bg")
    assert state["last_status"] == "done"
    (run,) = state["recent_runs"]
    assert run["thread_id"] == "t-77"
    (entry,) = read_log(home)
    assert entry["thread_id"] == "t-77"
    assert entry["decision"] == {"behavior": "context", "context": "final: looked fine"}


@pytest.mark.timeout(30)
def test_an_async_workflow_failing_after_its_prompt_step_keeps_the_thread_id(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("bg", event="Stop", workflow={"steps": [{"prompt": "Review."}, {"name": "fail", "bash": "exit 4"}]})
    bus = make_bus(plugins=[ThreadedProvider()])
    bus.emit("Stop", {})
    bus.close()
    state = read_state(home, "bg")
    assert state["last_status"] == "error"
    assert state["last_error"] == "step 2 of 2 (fail) failed: exited with status 4"
    assert state["recent_runs"][0]["thread_id"] == "t-77"


@pytest.mark.timeout(30)
def test_close_cancels_a_running_async_workflow(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    started_flag = home / "started"
    marker = home / "step2-ran"
    steps = [
        {"name": "wait", "bash": f"touch {started_flag}; sleep 30"},
        {"name": "after", "bash": f"touch {marker}"},
    ]
    write_hook("bg", event="Stop", workflow={"steps": steps})
    bus = make_bus()
    bus.emit("Stop", {})
    deadline = time.monotonic() + 10
    while not started_flag.exists():
        assert time.monotonic() < deadline, "the first step never started"
        time.sleep(0.01)
    began = time.monotonic()
    bus.close(timeout=0.3)
    assert time.monotonic() - began < 5.0
    assert not marker.exists()
    state = read_state(home, "bg")
    assert state["last_status"] == "error"
    assert state["last_error"] == "cancelled at shutdown"


# -- validation ------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_a_workflow_id_naming_no_workflow_is_a_problem(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_config(home, {"other": {"steps": [{"bash": "true"}]}})
    write_hook("wf", mode="sync", workflow_id="fast-veto")
    bus = make_bus()
    assert "wf" not in bus.snapshot.hooks
    (problem,) = [p for p in bus.problems if p.hook_id == "wf"]
    assert problem.path == "hooks/wf/hook.json"
    assert problem.location == "$.workflow_id"
    assert str(problem) == (
        "hooks/wf/hook.json: workflow_id 'fast-veto' names no workflow in config/workflow.json; "
        "defined: 'other' @ $.workflow_id"
    )


@pytest.mark.timeout(30)
def test_a_misspelled_workflow_id_names_itself_and_the_one_meant(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """Was: "names no workflow in config/workflow.json; defined: format, test", without the
    id it looked for or which one was probably meant."""
    write_config(home, {name: {"steps": [{"bash": "true"}]} for name in ("test", "lint-all", "format")})
    write_hook("wf", mode="sync", workflow_id="lint-al")
    write_hook("far", mode="sync", workflow_id="deploy")
    problems = {p.hook_id: str(p) for p in make_bus().problems}
    assert problems == {
        "wf": "hooks/wf/hook.json: workflow_id 'lint-al' names no workflow in config/workflow.json; "
        "defined: 'format', 'lint-all', 'test' (did you mean 'lint-all'?) @ $.workflow_id",
        "far": "hooks/far/hook.json: workflow_id 'deploy' names no workflow in config/workflow.json; "
        "defined: 'format', 'lint-all', 'test' @ $.workflow_id",
    }


@pytest.mark.timeout(30)
def test_a_workflow_id_without_any_config_is_a_problem(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("wf", mode="sync", workflow_id="fast-veto")
    bus = make_bus()
    assert problem_strings(bus) == [
        "hooks/wf/hook.json: workflow_id 'fast-veto' names no workflow in config/workflow.json "
        "(which does not exist); defined: none @ $.workflow_id"
    ]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["json", "yaml"])
def test_a_malformed_step_in_the_config_leaves_the_other_workflows_working(
    kind: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_config(
        home,
        {
            "fast-veto": {"steps": [{"bsh": "grep -q rm && echo 'BLOCK: no rm'"}]},
            "greet": {"steps": [{"bash": "echo hello"}]},
        },
        kind,
    )
    write_hook("uses-bad", mode="sync", workflow_id="fast-veto")
    write_hook("uses-good", mode="sync", workflow_id="greet")
    bus = make_bus()
    config_problems = [p for p in bus.problems if p.path == f"config/workflow.{kind}"]
    (problem,) = config_problems
    assert problem.message.startswith("unknown step kind 'bsh'")
    assert problem.location == "$.fast-veto.steps[0]"
    assert str(problem).startswith(f"config/workflow.{kind}: unknown step kind 'bsh'")
    assert str(problem).endswith(" @ $.fast-veto.steps[0]")
    (hook_problem,) = [p for p in bus.problems if p.hook_id == "uses-bad"]
    assert hook_problem.location == "$.workflow_id"
    assert "fast-veto" in hook_problem.message and "unknown step kind 'bsh'" in hook_problem.message
    assert "uses-bad" not in bus.snapshot.hooks
    assert "uses-good" in bus.snapshot.hooks
    assert bus.emit("Stop", {}).behavior == "allow"  # Stop is not these hooks' event
    decision = bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm x"}})
    assert (decision.behavior, decision.context) == ("context", "hello")


@pytest.mark.timeout(30)
def test_workflow_json_and_yaml_both_present_is_a_problem(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_config(home, {"greet": {"steps": [{"bash": "echo json"}]}}, "json")
    write_config(home, {"greet": {"steps": [{"bash": "echo yaml"}]}}, "yaml")
    write_hook("wf", mode="sync", workflow_id="greet")
    bus = make_bus()
    problems = problem_strings(bus)
    assert any(
        p.startswith("config/workflow.") and "both workflow.json and workflow.yaml exist" in p for p in problems
    ), problems
    # Neither file is guessed at: the hook that names a workflow in it is not loaded.
    assert "wf" not in bus.snapshot.hooks
    (hook_problem,) = [p for p in bus.problems if p.hook_id == "wf"]
    assert hook_problem.location == "$.workflow_id"
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "allow"


@pytest.mark.timeout(30)
def test_a_config_that_is_not_json_is_a_problem(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    (home / "config").mkdir()
    (home / "config" / "workflow.json").write_text('{"greet": {"steps": [')
    write_hook("wf", mode="sync", workflow_id="greet")
    bus = make_bus()
    assert any(p.path == "config/workflow.json" for p in bus.problems), problem_strings(bus)
    (hook_problem,) = [p for p in bus.problems if p.hook_id == "wf"]
    assert "config/workflow.json cannot be used" in hook_problem.message


INVALID_DEFINITIONS = [
    ("empty-steps", {"steps": []}, "steps must be a non-empty array of steps", ".steps"),
    ("no-steps", {"description": "nothing"}, 'required field missing: "steps"', ""),
    ("both-kinds", {"steps": [{"bash": "true", "prompt": "check"}]}, "a step is either bash or prompt, not both", ".steps[0]"),
    ("neither-kind", {"steps": [{"name": "x"}]}, 'a step needs "bash" or "prompt"', ".steps[0]"),
    ("bad-timeout", {"steps": [{"bash": "true", "timeout": "5 seconds"}]}, "invalid duration '5 seconds'", ".steps[0].timeout"),
    ("zero-timeout", {"steps": [{"bash": "true", "timeout": "0s"}]}, "invalid duration '0s'", ".steps[0].timeout"),
    ("timeout-not-a-string", {"steps": [{"bash": "true", "timeout": [5]}]}, "expected a string, got an array", ".steps[0].timeout"),
    # Was: only "expected a string"; a bare number is seconds with the unit left out.
    ("timeout-a-number", {"steps": [{"bash": "true", "timeout": 5}]}, 'expected a string, got an integer (did you mean "5s"?)', ".steps[0].timeout"),
    ("timeout-a-fraction", {"steps": [{"bash": "true", "timeout": 1.5}]}, 'expected a string, got a number (did you mean "1.5s"?)', ".steps[0].timeout"),
    ("timeout-a-negative-number", {"steps": [{"bash": "true", "timeout": -1}]}, 'expected a duration string like "5s" or "10m", got an integer', ".steps[0].timeout"),
    ("empty-bash", {"steps": [{"bash": "  "}]}, "must not be empty", ".steps[0].bash"),
    ("step-not-an-object", {"steps": ["echo hi"]}, "expected a step object", ".steps[0]"),
    ("unknown-step-field", {"steps": [{"bash": "true", "timout": "1s"}]}, "unknown field 'timout'", ".steps[0]"),
    ("unknown-workflow-field", {"stepz": [], "steps": [{"bash": "true"}]}, "unknown field 'stepz'", ""),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("definition", "message", "where"),
    [row[1:] for row in INVALID_DEFINITIONS],
    ids=[row[0] for row in INVALID_DEFINITIONS],
)
@pytest.mark.parametrize("source", ["config", "inline"])
def test_an_invalid_definition_is_reported_with_a_path(
    source: str,
    definition: dict[str, Any],
    message: str,
    where: str,
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    if source == "config":
        write_config(home, {"broken": definition, "fine": {"steps": [{"bash": "echo fine"}]}})
        write_hook("fine", event="Stop", mode="sync", workflow_id="fine")
        path, location = "config/workflow.json", f"$.broken{where}"
    else:
        write_hook("inline", mode="sync", workflow=definition)
        path, location = "hooks/inline/hook.json", f"$.workflow{where}"
    bus = make_bus()
    matching = [p for p in bus.problems if p.path == path and message in p.message]
    assert matching, problem_strings(bus)
    assert matching[0].location == location
    assert str(matching[0]).startswith(f"{path}: ")
    assert str(matching[0]).endswith(f" @ {location}")
    if source == "config":
        assert bus.emit("Stop", {}).context == "fine"
    else:
        assert "inline" not in bus.snapshot.hooks


# -- hot reload of the config ----------------------------------------------------------------


def context_of(bus: HookBus) -> str | None:
    return bus.emit("Stop", {}).context


@pytest.mark.timeout(60)
def test_editing_the_config_reloads_workflow_id_hooks(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    config = write_config(home, {"wf": {"steps": [{"bash": "echo one"}]}, "other": {"steps": [{"bash": "echo other"}]}})
    spec = write_hook("h", event="Stop", mode="sync", workflow_id="wf")
    spec_stat = os.stat(spec)
    bus = make_bus(watch=True)
    assert context_of(bus) == "one"

    atomic_write(config, json.dumps({"wf": {"steps": [{"bash": "echo two"}]}, "other": {"steps": [{"bash": "echo other"}]}}))
    wait_until(bus, lambda: context_of(bus) == "two")

    # The named workflow goes away: the hook's problem appears, its last good version stays.
    atomic_write(config, json.dumps({"other": {"steps": [{"bash": "echo other"}]}}))
    wait_until(bus, lambda: any(p.hook_id == "h" for p in bus.problems))
    (problem,) = [p for p in bus.problems if p.hook_id == "h"]
    assert problem.kept_last_good
    assert problem.location == "$.workflow_id"
    assert "workflow_id 'wf' names no workflow in config/workflow.json; defined: 'other'" in problem.message
    assert str(problem).endswith("(its last good version stays in effect)")
    assert "h" in bus.snapshot.hooks
    assert context_of(bus) == "two"
    bus.read_runs("h")
    state = read_state(home, "h")
    assert "names no workflow" in state["load_error"]

    # Back again: the problem clears and the new definition runs.
    atomic_write(config, json.dumps({"wf": {"steps": [{"bash": "echo three"}]}, "other": {"steps": [{"bash": "echo other"}]}}))
    wait_until(bus, lambda: not bus.problems and context_of(bus) == "three")
    bus.read_runs("h")
    state = read_state(home, "h")
    assert "load_error" not in state

    stat_now = os.stat(spec)
    assert (stat_now.st_ino, stat_now.st_mtime_ns) == (spec_stat.st_ino, spec_stat.st_mtime_ns)


@pytest.mark.timeout(60)
def test_a_config_created_after_start_makes_a_workflow_id_hook_load(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("h", event="Stop", mode="sync", workflow_id="wf")
    bus = make_bus(watch=True)
    assert any(p.hook_id == "h" for p in bus.problems)
    assert context_of(bus) is None
    write_config(home, {"wf": {"steps": [{"bash": "echo created"}]}})
    wait_until(bus, lambda: not bus.problems and context_of(bus) == "created")


@pytest.mark.timeout(60)
def test_a_step_broken_in_the_config_keeps_the_last_good_version(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    config = write_config(home, {"wf": {"steps": [{"bash": "echo good"}]}}, "yaml")
    write_hook("h", event="Stop", mode="sync", workflow_id="wf")
    bus = make_bus(watch=True)
    assert context_of(bus) == "good"
    atomic_write(config, yaml.safe_dump({"wf": {"steps": [{"bsh": "echo bad"}]}}))
    wait_until(bus, lambda: any(p.hook_id == "h" for p in bus.problems))
    assert any(str(p).startswith("config/workflow.yaml: unknown step kind 'bsh'") for p in bus.problems)
    (problem,) = [p for p in bus.problems if p.hook_id == "h"]
    assert problem.kept_last_good
    assert context_of(bus) == "good"
    atomic_write(config, yaml.safe_dump({"wf": {"steps": [{"bash": "echo fixed"}]}}))
    wait_until(bus, lambda: not bus.problems and context_of(bus) == "fixed")


@pytest.mark.timeout(60)
def test_moving_the_config_from_json_to_yaml_and_deleting_it(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    json_config = write_config(home, {"wf": {"steps": [{"bash": "echo from json"}]}})
    write_hook("h", event="Stop", mode="sync", workflow_id="wf")
    bus = make_bus(watch=True)
    assert context_of(bus) == "from json"

    yaml_config = write_config(home, {"wf": {"steps": [{"bash": "echo from yaml"}]}}, "yaml")
    wait_until(bus, lambda: any("both workflow.json and workflow.yaml" in str(p) for p in bus.problems))
    assert context_of(bus) == "from json"  # kept while the config cannot be used
    json_config.unlink()
    wait_until(bus, lambda: not bus.problems and context_of(bus) == "from yaml")

    yaml_config.unlink()
    wait_until(bus, lambda: any(p.hook_id == "h" for p in bus.problems))
    (problem,) = [p for p in bus.problems if p.hook_id == "h"]
    assert problem.kept_last_good
    assert "(which does not exist)" in problem.message
    assert context_of(bus) == "from yaml"


# -- HOOKBUS_PREVIOUS_OUTPUT: cut by bytes so that the next step can always start ---------


@pytest.mark.parametrize("character", ["a", "ж", "€", "😀"])
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4, 5, 7, 100, 101, 102, 103])
def test_cut_utf8_keeps_whole_characters_within_the_limit(character: str, limit: int) -> None:
    from hookbus_workflow import cut_utf8

    text = "x" * 97 + character * 20
    cut = cut_utf8(text, limit)
    encoded = cut.encode("utf-8")  # strict: no half character, no surrogate
    assert text.startswith(cut)
    assert len(encoded) <= limit
    assert len(encoded) > limit - len(character.encode()), "cut more than one character short"


def test_cut_utf8_counts_what_the_environment_will_hold() -> None:
    """A lone surrogate becomes U+FFFD (3 bytes) in the environment, and counts 3; text
    within the limit is returned as it is, without copying."""
    from hookbus_workflow import cut_utf8

    assert cut_utf8("\ud800" * 4, 9) == "\ud800" * 3
    assert cut_utf8("ab\udce9", 4) == "ab"
    text = "ж" * 10
    assert cut_utf8(text, 20) is text
    assert cut_utf8("abc", -5) == ""


@pytest.mark.timeout(30)
def test_a_wide_previous_output_is_cut_by_bytes_and_the_next_step_runs(
    tmp_path: Path, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """70,000 × "ж" is 140,000 bytes, over the kernel's 128 KiB for one environment string:
    the next step gets the first MAX_PREVIOUS_OUTPUT_BYTES of it (50,000 characters), and runs."""
    from hookbus_workflow import MAX_PREVIOUS_OUTPUT_BYTES

    seen = tmp_path / "seen"
    write_hook("h", mode="sync", blocking=True, timeout="30s", workflow={"steps": [
        {"bash": "printf '%*s' 70000 '' | sed 's/ /ж/g'"},
        {"bash": f'printf "%s" "$HOOKBUS_PREVIOUS_OUTPUT" > {seen}; echo "BLOCK: second step ran"'},
    ]})
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    assert decision.reason == "hook 'h' denied: second step ran"
    assert seen.read_text(encoding="utf-8") == "ж" * (MAX_PREVIOUS_OUTPUT_BYTES // 2)
