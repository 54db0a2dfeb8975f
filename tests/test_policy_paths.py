"""Policy hooks (``cel``, ``rego``) on every path, differential: ``HookBus.emit`` in-process,
``hookbus emit``, the Claude Code bridge with and without a server, its gate, ``POST
/claude-code``, and the Gemini CLI bridge and gate must all decide the same for the same
envelope, odd ones included. The plugins come in through their entry points
(``make test`` installs every contrib distribution)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import HookWriter
from httpkit import HttpClient, http_address, token_of
from servekit import Served
from test_gate import bridge_words, gate_words, run, serve  # noqa: F401  (serve: a fixture)

from hookbus import HookBus
from hookbus import deepjson

pytestmark = pytest.mark.timeout(300)

CEL_DENY = "tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': 'no rm -rf é'} : null"
CEL_REWRITE = (
    "tool_input.command.startsWith('rewrite-me') ? {'behavior': 'modify', 'input': {'command': 'echo rewritten ☃'}} : null"
)
CEL_CONTEXT = "{'behavior': 'context', 'context': 'careful: ' + prompt}"
REGO_DENY = """package hooks

import rego.v1

decision := {"behavior": "deny", "reason": "rego: no curl to other hosts"} if {
	regex.match(`curl\\s+https?://`, input.tool_input.command)
	not contains(input.tool_input.command, "example.internal")
}
"""


def policy_hooks(write_hook: HookWriter) -> None:
    write_hook("cel-deny", event="PreToolUse", matcher="bash", mode="sync", blocking=True, cel=CEL_DENY)
    write_hook("cel-rewrite", event="PreToolUse", matcher="bash", mode="sync", blocking=True, cel=CEL_REWRITE)
    write_hook("cel-context", event="UserPromptSubmit", mode="sync", cel=CEL_CONTEXT)
    write_hook(
        "cel-closed", event="PreToolUse", matcher="write_file", mode="sync", blocking=True, on_error="deny",
        cel="tool_input.absent == 1 ? {'behavior': 'deny', 'reason': 'x'} : null",
    )
    write_hook(
        "rego-curl", event="PreToolUse", matcher="bash", mode="sync", blocking=True,
        rego={"file": "policy.rego"}, files={"policy.rego": REGO_DENY},
    )


BASH = {"session_id": "s-1", "cwd": "/", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t-1"}


def bash(command: Any, **extra: Any) -> bytes:
    return json.dumps({**BASH, "tool_input": {"command": command, **extra}}, ensure_ascii=False).encode()


def nested(levels: int) -> bytes:
    return b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf x", "n": ' + b"[" * levels + b"]" * levels + b"}}"


CASES: dict[str, bytes] = {
    "cel-deny": bash("rm -rf build"),
    "cel-rewrite": bash("rewrite-me please"),
    "rego-deny": bash("curl https://evil.example.com/x"),
    "rego-allow": bash("curl https://example.internal/x"),
    "allow": bash("ls"),
    "context": json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "héllo ☃"}, ensure_ascii=False).encode(),
    "fail-closed": json.dumps({**BASH, "tool_name": "Write", "tool_input": {"file_path": "/tmp/x", "content": "y"}}).encode(),
    "non-ascii": bash("rm -rf é/☃/𝄞/\u202egnp.exe"),
    "integer-past-64-bits": b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf x", "n": 1180591620717411303424}}',
    "lone-surrogate": b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf \\ud800"}}',
    "nested-9000": nested(9_000),
    "big": bash("rm -rf " + "x" * 300_000, items=list(range(20_000))),
}


def test_in_process_and_hookbus_emit_decide_the_same(home: Path, write_hook: HookWriter) -> None:
    policy_hooks(write_hook)
    bus = HookBus(home)
    try:
        for name, data in CASES.items():
            document = deepjson.loads(data.decode())  # 9,000 levels: past json's recursion
            event = document.pop("hook_event_name")
            if event == "PreToolUse" and document.get("tool_name") == "Bash":
                document["tool_name"] = "bash"  # hookbus's own name: no host in between
            if document.get("tool_name") == "Write":
                document["tool_name"] = "write_file"
            decided = bus.emit(event, document).as_dict()
            emitted = subprocess.run(
                [sys.executable, "-m", "hookbus", "--home", str(home), "emit", event, "--no-server"],
                input=deepjson.dumps_strict(document, (",", ":")).encode(), capture_output=True, timeout=120,
            )
            assert emitted.returncode in (0, 2), (name, emitted.stderr)
            assert json.loads(emitted.stdout) == decided, name
    finally:
        bus.close()


def test_every_host_path_prints_what_the_bridge_prints(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:  # noqa: F811
    policy_hooks(write_hook)
    alone = {name: run([*bridge_words(home), "--no-server"], data) for name, data in CASES.items()}
    served = serve()
    host, port = http_address(served)
    token = token_of(home)
    for name, data in CASES.items():
        expected = alone[name]
        for label, ran in (("bridge", run(bridge_words(home), data)), ("gate", run(gate_words(home), data))):
            assert (ran.code, ran.stdout) == (expected.code, expected.stdout), (name, label, ran, expected)
        with HttpClient(port, token, host) as http:
            answer = http.post(data)
        if expected.code == 0:
            assert (answer.status, answer.body) == (200, expected.stdout), (name, answer, expected)
        else:
            assert answer.status != 200 or json.loads(answer.body).get("decision") == "block", (name, answer, expected)
    decided = {name: json.loads(alone[name].stdout or b"{}") for name in ("cel-deny", "rego-deny", "cel-rewrite", "context")}
    assert decided["cel-deny"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "no rm -rf é" in decided["cel-deny"]["hookSpecificOutput"]["permissionDecisionReason"]
    assert "rego: no curl" in decided["rego-deny"]["hookSpecificOutput"]["permissionDecisionReason"]
    assert decided["cel-rewrite"]["hookSpecificOutput"]["updatedInput"] == {"command": "echo rewritten ☃"}
    assert "careful: héllo ☃" in json.dumps(decided["context"], ensure_ascii=False)


def test_the_gemini_paths_agree(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:  # noqa: F811
    policy_hooks(write_hook)
    gemini = {
        "deny": {"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf x"}},
        "rego": {"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": "curl http://a.b/"}},
        "allow": {"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": "ls"}},
    }
    alone = {name: run([*bridge_words(home, "gemini-cli-hook"), "--no-server"], json.dumps(data).encode()) for name, data in gemini.items()}
    serve()
    for name, data in gemini.items():
        gated = run(gate_words(home, "gemini-cli-hook"), json.dumps(data).encode())
        assert (gated.code, gated.stdout) == (alone[name].code, alone[name].stdout), (name, gated, alone[name])
    assert json.loads(alone["deny"].stdout)["decision"] == "deny"
    assert json.loads(alone["rego"].stdout)["decision"] == "deny"
    assert alone["allow"].code == 0


def test_the_server_reloads_a_policy_file_edited_in_place(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:  # noqa: F811
    """policy.rego is part of the hook: the real watcher reloads it, as it reloads hook.json."""
    import time

    policy_hooks(write_hook)
    serve()
    data = bash("curl https://evil.example.com/x")
    assert b"rego: no curl" in run(gate_words(home), data).stdout
    policy = home / "hooks" / "rego-curl" / "policy.rego"
    with open(policy, "r+") as handle:  # in place: the same inode
        text = handle.read().replace("rego: no curl", "rego: curl changed")
        handle.seek(0)
        handle.write(text)
        handle.truncate()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if b"rego: curl changed" in run(gate_words(home), data).stdout:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the server did not reload policy.rego")


def test_a_rego_hook_loaded_before_a_cel_hook_leaves_both_working(home: Path, write_hook: HookWriter) -> None:
    """rego-cpp and cel-expr-python share C++ symbols that the dynamic linker binds to the
    library loaded first; with rego-cpp's first, CEL's error path aborted the process. The
    rego plugin loads CEL's library first: a rego hook whose id sorts first, then a CEL
    expression that fails, in one fresh process."""
    write_hook(
        "a-rego", event="PreToolUse", matcher="bash", mode="sync", blocking=True,
        rego={"file": "policy.rego"}, files={"policy.rego": REGO_DENY},
    )
    write_hook("b-cel", event="PreToolUse", matcher="bash", mode="sync", blocking=True, on_error="deny", cel="tool_input.absent.contains('x')")
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "--home", str(home), "emit", "PreToolUse", "--no-server"],
        input=json.dumps({"tool_name": "bash", "tool_input": {"command": "ls"}}).encode(), capture_output=True, timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "hook 'b-cel' denied: failed closed" in json.loads(done.stdout)["reason"]


def test_a_value_nested_past_the_recursion_limit_with_a_lone_surrogate_is_read_whole() -> None:
    """outcome_from_value serves every policy engine, whose values may be nested as deep as
    an envelope: no recursion, and no lone surrogate left in the reason or the answer."""
    from hookbus import outcome_from_value
    from hookbus.explain import answer_text

    deep: Any = "bottom \ud800"
    for _ in range(5_000):
        deep = [deep]
    outcome = outcome_from_value({"behavior": "deny", "reason": "no \udfff", "note": deep}, "PreToolUse")
    assert (outcome.behavior, outcome.reason) == ("deny", "no \ufffd")
    inner = outcome.answer["note"]
    for _ in range(5_000):
        (inner,) = inner
    assert inner == "bottom \ufffd"
    answer_text(outcome.answer).encode("utf-8")  # printable, nested too deep for json: cut to repr
    assert outcome_from_value(["\ud800"]).answer == ["\ufffd"]
