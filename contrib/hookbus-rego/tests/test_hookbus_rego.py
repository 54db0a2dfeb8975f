"""hookbus-rego through a real bus, on real files: the plugin comes in through its entry
point, as it would for a user (``pip install contrib/hookbus-rego`` first; ``make test``
does it).

``hookbus_home``, ``hookbus_fire``, ``hookbus_bus`` and ``hookbus_capture`` are hookbus's own
pytest fixtures (``hookbus.testing``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

import hookbus_rego
from hookbus import CancelToken, HookBus
from hookbus.deepjson import CUT
from hookbus.errors import Problem
from hookbus.runners import HookCall
from hookbus.testing import Fired, TestHome, run_fixtures
from hookbus_rego import MAX_DEPTH, MAX_EVALUATIONS, MAX_POLICY_BYTES, UNDEFINED, RegoPolicy

pytestmark = pytest.mark.timeout(120)

Fire = Callable[..., Fired]

HEAD = "package hooks\nimport rego.v1\n\n"
DENY_RM = HEAD + (
    'decision := {"behavior": "deny", "reason": sprintf("no %s", [input.tool_input.command])} if {\n'
    '\tcontains(input.tool_input.command, "rm -rf")\n'
    "}\n"
)
BASH = {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/"}


def rego_hook(
    home: TestHome, hook_id: str, policy: str | None, *, file: str = "policy.rego", query: str | None = None, **fields: Any
) -> Path:
    """A blocking PreToolUse hook ``hook_id`` whose policy (when given) is written to
    ``file`` in its directory; returns the hook's directory."""
    fields.setdefault("mode", "sync")
    fields.setdefault("blocking", True)
    options: dict[str, Any] = {"file": file}
    if query is not None:
        options["query"] = query
    directory = home.home.hook_dir(hook_id)
    directory.mkdir(parents=True, exist_ok=True)
    if policy is not None:
        write_policy(directory / file, policy)
    home.write_hook(hook_id, event=fields.pop("event", "PreToolUse"), rego=options, **fields)
    return directory


def write_policy(path: Path, text: str) -> None:
    """Atomically, as an editor saves: a temporary file, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def problems_of(bus: HookBus, hook_id: str) -> list[Problem]:
    return [problem for problem in bus.problems if problem.hook_id == hook_id]


def answer_of(bus: HookBus, hook_id: str, envelope: dict[str, Any]) -> Any:
    explanation = bus.explain("PreToolUse", envelope).as_json()
    verdict = next(hook for hook in explanation["hooks"] if hook["id"] == hook_id)
    return verdict["result"]["answer"]


# -- how the value decides -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "behavior", "said"),
    [
        (DENY_RM[len(HEAD):], "deny", "no rm -rf /"),
        (
            'decision := {"behavior": "modify", "input": {"command": replace(input.tool_input.command, "rm -rf", "echo")}}\n',
            "modify",
            {"command": "echo /"},
        ),
        ('decision := {"behavior": "context", "context": sprintf("event %s", [input.hook_event_name])}\n', "context", "event PreToolUse"),
        ('decision := {"behavior": "allow"}\n', "allow", None),
        ("decision := null\n", "allow", None),
        ("decision := {}\n", "allow", None),
        ('decision := {"behavior": "deny"} if input.tool_name == "write_file"\n', "allow", None),
    ],
    ids=["deny", "modify", "context", "allow", "null", "empty-map", "undefined"],
)
def test_the_value_decides_as_a_command_hooks_json(
    hookbus_home: TestHome, hookbus_fire: Fire, rules: str, behavior: str, said: Any
) -> None:
    rego_hook(hookbus_home, "policy", HEAD + rules)
    fired = hookbus_fire("PreToolUse", BASH)
    record = fired.record_of("policy")
    assert (record.status, record.error) == (behavior, None), record
    if behavior == "deny":
        assert fired.decision.reason == f"hook 'policy' denied: {said}"
    elif behavior == "modify":
        assert fired.decision.input == said
    elif behavior == "context":
        assert fired.decision.context == said


def test_explain_shows_the_action_and_the_value_or_undefined(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    rego_hook(hookbus_home, "policy", DENY_RM)
    hookbus_bus.reload()
    assert json.loads(answer_of(hookbus_bus, "policy", BASH)) == {"behavior": "deny", "reason": "no rm -rf /"}
    assert json.loads(answer_of(hookbus_bus, "policy", {"tool_name": "bash", "tool_input": {"command": "ls"}})) == UNDEFINED
    verdict = next(hook for hook in hookbus_bus.explain("PreToolUse", BASH).as_json()["hooks"] if hook["id"] == "policy")
    assert verdict["action"] == {"rego": {"file": "policy.rego"}}


def test_the_query_picks_another_rule_and_a_subdirectory_holds_the_policy(
    hookbus_home: TestHome, hookbus_fire: Fire
) -> None:
    policy = "package vix.bash\nimport rego.v1\n\nverdict := {\"behavior\": \"deny\", \"reason\": \"from verdict\"}\n"
    rego_hook(hookbus_home, "policy", policy, file="policies/bash.rego", query="data.vix.bash.verdict")
    fired = hookbus_fire("PreToolUse", BASH)
    assert fired.decision.reason == "hook 'policy' denied: from verdict"


def test_the_input_is_the_envelope_byte_for_byte(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    """A NUL or an odd character in the envelope must not cut or change what the policy
    sees: a command hidden behind a NUL would otherwise pass a guard."""
    rego_hook(hookbus_home, "policy", DENY_RM)
    rego_hook(hookbus_home, "echo", HEAD + 'decision := {"behavior": "context", "context": json.marshal(input)}\n')
    envelope = {"tool_name": "bash", "tool_input": {"command": "true\u0000; rm -rf / \u2028 é 😀", "n": 12345678901234567890}}
    fired = hookbus_fire("PreToolUse", envelope)
    assert fired.record_of("policy").status == "deny"
    assert json.loads(fired.decision.context or "") == {**envelope, "hook_event_name": "PreToolUse"}


def test_hookbus_test_fixtures_run_rego_hooks(hookbus_home: TestHome) -> None:
    directory = rego_hook(hookbus_home, "policy", DENY_RM)
    (directory / "tests").mkdir()
    (directory / "tests" / "rm.json").write_text(json.dumps({"event": "PreToolUse", "envelope": BASH, "expect": {"behavior": "deny"}}))
    ls = {"tool_name": "bash", "tool_input": {"command": "ls"}}
    (directory / "tests" / "ls.json").write_text(json.dumps({"event": "PreToolUse", "envelope": ls, "expect": {"behavior": "allow"}}))
    results = run_fixtures(hookbus_home.root)
    assert len(results) == 2 and all(result.ok for result in results), results


def test_an_envelope_nested_too_deep_for_rego_cpp_is_cut(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    """rego-cpp recurses once per level: 5,000 levels of a tool input a policy hands back
    would overflow its stack and kill the process. Deeper containers reach it as CUT."""
    rego_hook(hookbus_home, "policy", HEAD + 'decision := {"behavior": "modify", "input": input.tool_input}\n')
    deep: list[Any] = []
    innermost = deep
    for _ in range(5_000):
        innermost.append([])
        innermost = innermost[0]
    fired = hookbus_fire("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls", "deep": deep}})
    record = fired.record_of("policy")
    assert (record.status, record.error) == ("modify", None), record
    assert f"deeper than {MAX_DEPTH} levels reached the policy as {CUT!r}" in (record.note or ""), record
    given = fired.decision.input or {}
    assert given["command"] == "ls"
    # Levels as the envelope counts them: itself 1, tool_input 2, "deep" 3.
    level, depth = given["deep"], 3
    while isinstance(level, list):
        level, depth = level[0], depth + 1
    assert (level, depth) == (CUT, MAX_DEPTH + 1)  # MAX_DEPTH levels kept, the next one cut


def test_a_policy_nested_too_deep_for_rego_cpp_is_refused(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    rego_hook(hookbus_home, "policy", HEAD + "decision := " + "[" * 5_000 + "]" * 5_000 + "\n")
    hookbus_bus.reload()
    [problem] = problems_of(hookbus_bus, "policy")
    assert problem.location == "$.rego.file"
    assert problem.message.startswith(f"policy.rego:4:{13 + MAX_DEPTH}: brackets nested more than {MAX_DEPTH} levels deep"), problem


# -- failures: the hook's on_error decides ---------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("decision := true\n", "the value of data.hooks.decision (policy.rego) is a bool (true), not a decision"),
        ('decision := "deny"\n', "is a string ('deny'), not a decision"),
        ("decision := [1, 2]\n", "is a list of 2"),
        ('decision := {"behavior": "block"}\n', 'needs "behavior" set to one of'),
    ],
)
def test_a_value_that_is_no_decision_fails_the_hook_under_its_on_error(
    hookbus_home: TestHome, hookbus_fire: Fire, rules: str, message: str
) -> None:
    rego_hook(hookbus_home, "open", HEAD + rules)
    rego_hook(hookbus_home, "closed", HEAD + rules, on_error="deny")
    fired = hookbus_fire("PreToolUse", BASH)
    opened, closed = fired.record_of("open"), fired.record_of("closed")
    assert opened.status == "allow" and message in (opened.error or ""), opened
    assert closed.status == "deny", closed
    assert {(failure.hook_id, failure.failure, failure.closed) for failure in fired.decision.failed} == {
        ("open", "unparseable", False),
        ("closed", "unparseable", True),
    }


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            'decision := {"behavior": "deny"} if input.tool_name == "bash"\ndecision := {"behavior": "allow"} if input.cwd == "/"\n',
            "policy.rego: evaluation failed: complete rules must not produce multiple outputs (eval_conflict_error)",
        ),
        ('decision := {"behavior": "deny", "reason": no_such_function(1)}\n', "policy.rego: evaluation failed: Function not found: no_such_function"),
        ('decision := {"behavior": "deny", "reason": count(1, 2)}\n', "policy.rego: evaluation failed: wrong number of arguments"),
    ],
    ids=["conflict", "unknown-function", "arity"],
)
def test_an_evaluation_error_fails_the_hook_naming_the_file(
    hookbus_home: TestHome, hookbus_fire: Fire, rules: str, message: str
) -> None:
    rego_hook(hookbus_home, "closed", HEAD + rules, on_error="deny")
    fired = hookbus_fire("PreToolUse", BASH)
    record = fired.record_of("closed")
    assert record.status == "deny", record
    assert (record.error or "").startswith(message), record.error
    assert [(failure.failure, failure.closed) for failure in fired.decision.failed] == [("error", True)]


# -- compile errors: reported at load, the last good version keeps running -------------------


def test_a_policy_that_does_not_compile_names_file_line_and_column_and_the_last_good_one_runs(
    hookbus_home: TestHome, hookbus_bus: HookBus
) -> None:
    directory = rego_hook(hookbus_home, "policy", DENY_RM)
    hookbus_bus.reload()
    assert hookbus_bus.problems == ()
    assert hookbus_bus.emit("PreToolUse", BASH).behavior == "deny"

    write_policy(directory / "policy.rego", HEAD + "decision := {this is unclosed\n")
    hookbus_bus.reload()
    [problem] = problems_of(hookbus_bus, "policy")
    assert problem.location == "$.rego.file"
    assert problem.message == "policy.rego:4:13: this is unclosed", problem
    assert problem.kept_last_good
    assert hookbus_bus.emit("PreToolUse", BASH).behavior == "deny"  # the last good version


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + "# é 😀\ndecision := \"é\" + {\n", "policy.rego:5:19: this is unclosed"),
        (HEAD + "import data.foo.bar as\n", "policy.rego:4:1: Invalid import"),
        (HEAD + "default decision := 1\ndefault decision := 2\n", "policy.rego: Multiple default rules"),
        ("decision := 1\n", "policy.rego has no package: start it with `package hooks`"),
        ("import rego.v1\ndecision := 1\n", "policy.rego:1:1: Invalid import declaration"),
        (HEAD + 'decision := {"behavior": "allow"} if {\n\tprint("checking", input)\n}\n', "policy.rego:5:2: print() is not allowed"),
        (HEAD + 'decision := {"behavior": "allow"} if {\n\tx := $"{internal.print([1])}"\n}\n', "policy.rego:5:10: print() is not allowed"),
        (HEAD + "decision := 1 \x00\n", "policy.rego:4:15: a NUL character"),
    ],
    ids=["position-in-characters", "import", "no-location", "no-package", "import-before-package", "print", "print-in-template", "nul"],
)
def test_compile_errors_are_reported_at_the_file(
    hookbus_home: TestHome, hookbus_bus: HookBus, text: str, message: str
) -> None:
    rego_hook(hookbus_home, "policy", text)
    hookbus_bus.reload()
    [problem] = problems_of(hookbus_bus, "policy")
    assert (problem.location, problem.message[: len(message)]) == ("$.rego.file", message), problem


def test_print_in_strings_and_comments_is_no_call(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    text = HEAD + (
        "# print(this) is a comment\n"
        'decision := {"behavior": "context", "context": concat(" ", ["print(", `print(`, $"{input.tool_name} print("])}\n'
    )
    rego_hook(hookbus_home, "policy", text)
    fired = hookbus_fire("PreToolUse", BASH)
    assert fired.decision.context == "print( print( bash print("


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("data.hooks.decision[", "the query must be a reference into data"),
        ("x := data.hooks.decision", "the query must be a reference into data"),
        ("data.hooks.decision with input as {}", "the query must be a reference into data"),
        ("data.hook.decision", "data.hook.decision reads outside the policy, which is package hooks"),
        ("data.hooks.decisions", "data.hooks.decisions is always undefined: the policy defines no rule 'decisions'"),
    ],
)
def test_a_query_that_cannot_answer_is_reported_at_the_query(
    hookbus_home: TestHome, hookbus_bus: HookBus, query: str, message: str
) -> None:
    rego_hook(hookbus_home, "policy", DENY_RM, query=query)
    hookbus_bus.reload()
    [problem] = problems_of(hookbus_bus, "policy")
    assert problem.location == "$.rego.query"
    assert message in problem.message, problem


def test_unknown_and_missing_options_are_reported(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    hookbus_home.write_hook("policy", mode="sync", rego={"fiel": "policy.rego"})
    hookbus_bus.reload()
    messages = sorted(str(problem) for problem in problems_of(hookbus_bus, "policy"))
    assert any("required field missing @ $.rego.file" in message for message in messages), messages
    assert any("unknown field 'fiel'" in message for message in messages), messages


# -- the file stays in the hook's directory ---------------------------------------------------


def test_a_file_outside_the_directory_is_refused(hookbus_home: TestHome, hookbus_bus: HookBus, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write_policy(outside / "policy.rego", DENY_RM)
    rego_hook(hookbus_home, "absolute", None, file=str(outside / "policy.rego"))
    rego_hook(hookbus_home, "home", None, file="~/policy.rego")
    rego_hook(hookbus_home, "parent", None, file="../absolute/../../outside/policy.rego")
    linked = rego_hook(hookbus_home, "linked", None)
    (linked / "policy.rego").symlink_to(outside / "policy.rego")
    through = rego_hook(hookbus_home, "through", None, file="shared/policy.rego")
    (through / "shared").symlink_to(outside, target_is_directory=True)
    rego_hook(hookbus_home, "missing", None)
    hookbus_bus.reload()
    expected = {
        "absolute": "is not a path relative to the hook's directory",
        "home": "is not a path relative to the hook's directory",
        "parent": "leaves the hook's directory ('..')",
        "linked": "policy.rego is a symbolic link; hook files are not followed through links",
        "through": "shared/policy.rego leads out of the hook's directory through a symbolic link",
        "missing": "policy.rego does not exist in the hook's directory",
    }
    for hook_id, message in expected.items():
        problems = problems_of(hookbus_bus, hook_id)
        assert [problem.location for problem in problems] == ["$.rego.file"], (hook_id, problems)
        assert message in problems[0].message, (hook_id, problems[0])
    assert not set(expected) & set(hookbus_bus.snapshot.hooks)


def test_a_link_that_stays_inside_is_followed_for_a_directory(hookbus_home: TestHome, hookbus_fire: Fire) -> None:
    directory = rego_hook(hookbus_home, "policy", DENY_RM, file="real/policy.rego")
    (directory / "alias").symlink_to(directory / "real", target_is_directory=True)
    hookbus_home.write_hook("policy", mode="sync", blocking=True, rego={"file": "alias/policy.rego"})
    assert hookbus_fire("PreToolUse", BASH).decision.behavior == "deny"


def test_an_oversize_policy_is_refused(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    padding = "# " + "x" * 100 + "\n"
    text = DENY_RM + padding * (MAX_POLICY_BYTES // len(padding) + 1)
    rego_hook(hookbus_home, "policy", text)
    hookbus_bus.reload()
    [problem] = problems_of(hookbus_bus, "policy")
    assert problem.location == "$.rego.file"
    assert f"policy.rego is {len(text.encode())} bytes, over the {MAX_POLICY_BYTES // 1024} KiB limit" in problem.message


def test_the_policy_file_is_held_to_the_hook_directorys_owner_and_mode_rules(
    hookbus_home: TestHome, hookbus_bus: HookBus
) -> None:
    directory = rego_hook(hookbus_home, "policy", DENY_RM)
    (directory / "policy.rego").chmod(0o666)
    hookbus_bus.reload()
    assert "policy" not in hookbus_bus.snapshot.hooks
    assert any("policy.rego" in str(problem) and "writable" in str(problem) for problem in hookbus_bus.problems), hookbus_bus.problems


# -- stdout stays the host's -----------------------------------------------------------------

BRIDGE_ENVELOPE = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /"}, "cwd": "/"}


def test_rego_cpp_would_print_compile_errors_to_stdout() -> None:
    """Why the runner sets each interpreter's log level: at its default, rego-cpp prints a
    compile error to the process's stdout."""
    script = (
        "import regopy\n"
        "try:\n"
        "    regopy.Interpreter().add_module('policy.rego', 'package hooks\\nx := {unclosed\\n')\n"
        "except regopy.RegoError:\n"
        "    pass\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert b"policy.rego:2:6" in result.stdout, "rego-cpp no longer prints compile errors: the log level may go"


def test_a_bridge_answers_on_a_clean_stdout(hookbus_home: TestHome) -> None:
    """A bridge loads a home with a policy that does not compile and one that fails at
    evaluation, runs them on worker threads, and prints its answer: nothing else."""
    rego_hook(hookbus_home, "guard", DENY_RM)
    rego_hook(hookbus_home, "broken", HEAD + "decision := {this is unclosed\n")
    conflict = 'decision := {"behavior": "deny"} if true\ndecision := {"behavior": "allow"} if true\n'
    rego_hook(hookbus_home, "conflict", HEAD + conflict)
    words = [sys.executable, "-m", "hookbus", "--home", str(hookbus_home.root), "claude-code-hook", "--no-server"]
    result = subprocess.run(words, input=json.dumps(BRIDGE_ENVELOPE).encode(), capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)  # one JSON document, and nothing around it
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny", answer
    assert result.stdout.count(b"\n") <= 1 and b"unclosed" not in result.stdout, result.stdout


# -- deadlines, cancellation, threads ----------------------------------------------------------

EXPENSIVE = HEAD + 'decision := {"behavior": "deny"} if count([x | some x in input.items; some y in input.items; x == y]) > 0\n'


def test_an_expensive_policy_over_a_huge_envelope_gives_up_at_the_timeout(
    hookbus_home: TestHome, hookbus_fire: Fire
) -> None:
    rego_hook(hookbus_home, "slow", EXPENSIVE, timeout="1s", on_error="deny")
    ticks = 0
    stop = threading.Event()

    def tick() -> None:
        nonlocal ticks
        while not stop.wait(0.01):
            ticks += 1

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        fired = hookbus_fire("PreToolUse", {"tool_name": "bash", "items": list(range(20_000))})
    finally:
        stop.set()
        ticker.join(10)
    record = fired.record_of("slow")
    # The deadline, or on a much faster machine rego-cpp's own statement budget first.
    assert record.status == "deny" and "policy.rego" in (record.error or ""), record
    assert [(failure.failure, failure.closed) for failure in fired.decision.failed] == [("timeout", True)]
    assert record.duration < 30  # generous: the point is that it ends
    # rego-cpp's calls release the GIL: other threads ran all along.
    assert ticks >= 10, ticks


def test_a_cancelled_fire_stops_waiting(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    rego_hook(hookbus_home, "slow", EXPENSIVE, timeout="60s")
    hookbus_bus.reload()
    hook = hookbus_bus.snapshot.hooks["slow"]
    payload = json.dumps({"items": list(range(5_000)), "hook_event_name": "PreToolUse"}).encode() + b"\n"
    cancel = CancelToken()
    call = HookCall(
        hook=hook, event="PreToolUse", envelope={}, payload=payload,
        deadline=time.monotonic() + 60, home=hookbus_bus.home, cancel=cancel,
    )
    timer = threading.Timer(0.2, cancel.cancel, args=("cancelled at shutdown",))
    timer.start()
    started = time.monotonic()
    outcome = hook.runner.run(call)
    timer.join(10)
    assert (outcome.failure, outcome.error) == ("killed", "cancelled at shutdown")
    assert time.monotonic() - started < 20  # generous: it did not wait for the evaluation


def test_concurrent_fires_each_get_their_own_answer(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    """Several emits fire the hook at once: each evaluation gets an interpreter of its own
    (the further ones load the policy compiled at parse), and each answer is its own."""
    busy = 'decision := {"behavior": "context", "context": input.tool_input.command} if count([x | some x in numbers.range(1, 2000)]) > 0\n'
    rego_hook(hookbus_home, "policy", HEAD + busy, blocking=False)
    hookbus_bus.reload()
    answers: dict[int, list[str | None]] = {}
    start = threading.Barrier(2 * MAX_EVALUATIONS)

    def emit(index: int) -> None:
        start.wait(30)
        answers[index] = [
            hookbus_bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": f"n{index}.{round_}"}}).context
            for round_ in range(5)
        ]

    threads = [threading.Thread(target=emit, args=(index,)) for index in range(2 * MAX_EVALUATIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == {index: [f"n{index}.{round_}" for round_ in range(5)] for index in range(2 * MAX_EVALUATIONS)}
    policy: RegoPolicy = hookbus_bus.snapshot.hooks["policy"].options
    assert 1 < policy.interpreters <= MAX_EVALUATIONS


def test_when_every_interpreter_is_still_busy_a_fire_waits_until_its_deadline(
    hookbus_home: TestHome, hookbus_fire: Fire, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluation given up on keeps its interpreter until it ends: with all of them
    busy, a fire waits for one, and no longer than its own deadline."""
    monkeypatch.setattr(hookbus_rego, "MAX_EVALUATIONS", 1)  # what the message says
    monkeypatch.setattr(hookbus_rego.native, "MAX_EVALUATIONS", 1)  # what the pool holds to
    # rego-cpp alone takes over a second to read this input: far past both deadlines.
    rego_hook(hookbus_home, "slow", EXPENSIVE, timeout="300ms")
    huge = {"tool_name": "bash", "items": list(range(20_000))}
    first = hookbus_fire("PreToolUse", huge).record_of("slow")
    assert "timed out after 300ms evaluating policy.rego" in (first.error or ""), first
    second = hookbus_fire("PreToolUse", BASH)
    record = second.record_of("slow")
    expected = "timed out after 300ms waiting for an interpreter of policy.rego: all 1 are busy"
    assert expected in (record.error or ""), record
    assert [failure.failure for failure in second.decision.failed] == ["timeout"]


def test_a_reload_with_the_same_policy_compiles_nothing_again(hookbus_home: TestHome, hookbus_bus: HookBus) -> None:
    directory = rego_hook(hookbus_home, "policy", DENY_RM)
    hookbus_bus.reload()
    first = hookbus_bus.snapshot.hooks["policy"].options
    hookbus_bus.reload()
    assert hookbus_bus.snapshot.hooks["policy"].options is first
    write_policy(directory / "policy.rego", DENY_RM + "# changed\n")
    hookbus_bus.reload()
    assert hookbus_bus.snapshot.hooks["policy"].options is not first


# -- hot reload through the real watcher -----------------------------------------------------


def test_the_watcher_reloads_an_edited_policy_and_keeps_the_last_good_one(hookbus_home: TestHome) -> None:
    directory = rego_hook(hookbus_home, "policy", DENY_RM)
    bus = HookBus(hookbus_home.root, watch=True)
    try:

        def reason() -> str | None:
            return bus.emit("PreToolUse", BASH).reason

        def wait_until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
            deadline = time.monotonic() + timeout
            while True:
                generation = bus.generation
                if predicate():
                    return
                remaining = deadline - time.monotonic()
                assert remaining > 0, "timed out waiting for a reload"
                bus.wait_for_reload(generation, remaining)

        assert reason() == "hook 'policy' denied: no rm -rf /"
        write_policy(directory / "policy.rego", DENY_RM.replace('"no %s"', '"never %s"'))
        wait_until(lambda: reason() == "hook 'policy' denied: never rm -rf /")
        write_policy(directory / "policy.rego", HEAD + "decision := {this is unclosed\n")
        wait_until(lambda: bool(problems_of(bus, "policy")))
        [problem] = problems_of(bus, "policy")
        assert (problem.location, problem.kept_last_good) == ("$.rego.file", True), problem
        assert reason() == "hook 'policy' denied: never rm -rf /"
    finally:
        bus.close()
