"""``"on_error": "deny"``: a blocking guardrail that fails closed, by choice, per hook.

The spec's default stays fail-open. A blocking hook may opt in to failing closed (like a
Kubernetes admission webhook's ``failurePolicy: Fail``): when it times out, crashes, is
killed or answers with something unparseable, its fire is a deny whose reason says which.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import read_log
from hookbus import HookBus, HookCall, Outcome, ParseContext, RunnerRegistration, hookimpl

Maker = Callable[..., HookBus]
Writer = Callable[..., Path]

FAILURES = [
    ("timeout", "sleep 5", "timed out (timed out after 1s)"),
    ("exit 1", "echo broken >&2; exit 1", "crashed (exited with status 1: broken)"),
    ("exit 127", "no-such-command-anywhere", "crashed (exited with status 127 (command not found)"),
    ("killed", "kill -9 $$", "was killed (killed by SIGKILL)"),
    ("bad JSON decision", """echo '{"behavior": "nope"}'""", "answered with something unparseable"),
    ("output over the cap", "head -c 2000000 /dev/zero", "was killed (stdout went over 1 MiB"),
]


def guard(write_hook: Writer, command: str, **fields: Any) -> None:
    write_hook("guard", mode="sync", blocking=True, on_error="deny", command=command, timeout="1s", **fields)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("case", "command", "how"), FAILURES, ids=[row[0] for row in FAILURES])
@pytest.mark.parametrize("alone", [True, False], ids=["alone", "beside-another-hook"])
def test_a_failing_guard_denies_and_says_how(
    case: str, command: str, how: str, alone: bool, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    guard(write_hook, command)
    if not alone:
        write_hook("other", mode="sync", command="echo noted")
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    bus.close()
    assert decision.behavior == "deny", decision
    assert decision.reason is not None and decision.reason.startswith("hook 'guard' denied: failed closed: the hook ")
    assert how in decision.reason
    [record] = [entry for entry in read_log(home) if entry["hook_id"] == "guard"]
    assert record["status"] == "deny"
    assert record["error"]  # the failure itself is kept, truthfully
    assert record["note"] == 'failed closed ("on_error": "deny")'


def test_the_modify_input_case_is_unparseable(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_hook(
        "guard", event="UserPromptSubmit", mode="sync", blocking=True, on_error="deny",
        command="""echo '{"behavior": "modify", "input": {}}'""",
    )
    bus = make_bus()
    decision = bus.emit("UserPromptSubmit", {"prompt": "hi"})
    assert decision.behavior == "deny"
    assert "answered with something unparseable" in (decision.reason or "")


@pytest.mark.timeout(30)
def test_the_default_still_fails_open(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("guard", mode="sync", blocking=True, command="sleep 5", timeout="1s")
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "allow"
    bus.close()
    [record] = read_log(home)
    assert (record["status"], record["error"]) == ("allow", "timed out after 1s")


def test_a_guard_that_answers_is_obeyed_as_ever(write_hook: Writer, make_bus: Maker) -> None:
    guard(write_hook, "exit 0")
    assert make_bus().emit("PreToolUse", {"tool_name": "bash"}).behavior == "allow"
    guard(write_hook, "echo 'no' >&2; exit 2")
    assert make_bus().emit("PreToolUse", {"tool_name": "bash"}).reason == "hook 'guard' denied: no"


def test_a_runner_that_raises_fails_closed_as_a_crash(home: Path, make_bus: Maker) -> None:
    class Raising:
        def parse(self, key: str, value: object, context: ParseContext) -> object:
            return value

        def run(self, call: HookCall) -> Outcome:
            raise RuntimeError("backend down")

    class Plugin:
        @hookimpl
        def hookbus_register_runners(self, register: RunnerRegistration) -> None:
            register.add("raising", Raising())

    (home / "hooks" / "guard").mkdir()
    (home / "hooks" / "guard" / "hook.json").write_text(
        json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "blocking": True, "on_error": "deny", "raising": 1})
    )
    decision = make_bus(plugins=[Plugin()]).emit("PreToolUse", {"tool_name": "x"})
    assert decision.behavior == "deny"
    assert "the hook crashed (runner" in (decision.reason or "") and "backend down" in (decision.reason or "")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"mode": "sync", "on_error": "deny"}, 'on_error "deny" needs "blocking": true'),
        ({"on_error": "deny"}, 'on_error "deny" needs "blocking": true'),
        ({"mode": "sync", "blocking": True, "on_error": "block"}, 'on_error must be "allow" or "deny", got \'block\''),
        ({"mode": "sync", "blocking": True, "on_error": True}, "expected a string"),
    ],
)
def test_on_error_is_validated(fields: dict[str, Any], message: str, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("g", command="exit 0", **fields)
    bus = make_bus()
    [problem] = bus.problems
    assert message in problem.message
    assert problem.location == "$.on_error"


def test_on_error_allow_is_the_default_and_may_be_written(write_hook: Writer, make_bus: Maker) -> None:
    write_hook("g", command="exit 0", on_error="allow")
    write_hook("h", command="exit 0")
    bus = make_bus()
    assert bus.problems == ()
    assert bus.snapshot.hooks["g"].spec.on_error == bus.snapshot.hooks["h"].spec.on_error == "allow"


# -- workflows and prompts fail closed the same way ---------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("steps", "how"),
    [
        ([{"bash": "echo first"}, {"bash": "exit 3"}], "crashed (step 2 of 2 failed: exited with status 3)"),
        ([{"bash": "sleep 5", "timeout": "300ms"}], "timed out (step 1 of 1 failed: timed out after 300ms)"),
        ([{"bash": "kill -9 $$"}], "was killed (step 1 of 1 failed: killed by SIGKILL)"),
    ],
    ids=["exit 3", "step timeout", "killed"],
)
def test_a_failing_workflow_guard_denies(steps: list[dict[str, str]], how: str, write_hook: Writer, make_bus: Maker) -> None:
    write_hook("guard", mode="sync", blocking=True, on_error="deny", workflow={"steps": steps}, timeout="2s")
    decision = make_bus().emit("PreToolUse", {"tool_name": "bash"})
    assert decision.behavior == "deny"
    assert decision.reason == f"hook 'guard' denied: failed closed: the hook {how}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("answer", "how"),
    [("malformed", "answered with something unparseable"), ("slow", "timed out (timed out after 1s)")],
)
def test_a_failing_prompt_guard_denies(answer: str, how: str, home: Path, write_hook: Writer, make_bus: Maker) -> None:
    from hookbus.chat_stub import StubChatServer, StubReply

    def reply(request: dict[str, Any]) -> StubReply:
        return StubReply(hang=True) if answer == "slow" else StubReply(raw_body=b"not json at all")

    with StubChatServer(reply) as server:
        (home / "settings.json").write_text(json.dumps({"prompt_provider": {"base_url": server.base_url, "model": "m"}}))
        write_hook("guard", mode="sync", blocking=True, on_error="deny", prompt="judge", timeout="1s")
        bus = make_bus()
        decision = bus.emit("PreToolUse", {"tool_name": "bash"})
        bus.close()
    assert decision.behavior == "deny"
    assert f"failed closed: the hook {how}" in (decision.reason or "")
