"""Differential: ``POST /claude-code`` answers what ``hookbus claude-code-hook`` prints, byte
for byte, through a server (the quick path) and in-process, for every output shape of the
compatibility table and for odd input: nesting at and past the limit, bytes that are not
UTF-8, lone surrogates, NaN, non-ASCII reasons, events hookbus has no counterpart of.

Where the command bridge answers with an exit code instead (1: no opinion), the http answer
is an error status, which Claude Code takes the same way; where it exits 2 (a block with
an unknown event), a 200 ``decision: block``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from httpkit import HttpClient, http_address, token_of
from servekit import Served, environment
from test_claude_compat import BRIDGE_CASES

pytestmark = pytest.mark.timeout(300)

HOOK_EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "PermissionRequest", "ThreadStart", "Stop")
CAN_BLOCK = ("PreToolUse", "UserPromptSubmit", "PermissionRequest")
CLAUDE_EVENT = {"ThreadStart": "SessionStart"}


class Setup:
    def __init__(self, home: Path, served: Served) -> None:
        self.home = home
        self.served = served
        host, self.port = http_address(served)
        self.token = token_of(home)

    def answer_with(self, decision: dict[str, Any] | None) -> None:
        (self.home / "answer.json").write_text(json.dumps(decision) if decision is not None else "")

    def post(self, body: bytes) -> Any:
        with HttpClient(self.port, self.token) as http:
            return http.post(body)

    def bridge(self, body: bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(self.home), *extra],
            input=body, capture_output=True, timeout=120, env=environment(CLAUDE_PROJECT_DIR=None, CLAUDE_ENV_FILE=None),
        )

    def check(self, body: bytes) -> Any:
        """The http answer, after checking it against both ways of the command bridge."""
        answer = self.post(body)
        for extra in ((), ("--no-server",)):
            bridged = self.bridge(body, *extra)
            if bridged.returncode == 0:
                assert (answer.status, answer.body) == (200, bridged.stdout), (extra, bridged.stderr)
            elif bridged.returncode == 1:
                assert bridged.stdout == b"" and answer.status in (400, 500), (extra, answer, bridged.stderr)
            else:
                assert bridged.returncode == 2, bridged.stderr
                assert answer.status == 200 and answer.json()["decision"] == "block", answer
        return answer


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    home = tmp_path_factory.mktemp("parity") / "home"
    answer = home / "answer.json"
    for event in HOOK_EVENTS:
        spec: dict[str, Any] = {"id": f"say-{event.lower()}", "trigger": {"event": event}, "mode": "sync", "command": f"cat {answer}"}
        if event in CAN_BLOCK:
            spec["blocking"] = True
        directory = home / "hooks" / spec["id"]
        directory.mkdir(parents=True)
        (directory / "hook.json").write_text(json.dumps(spec))
    guard = home / "hooks" / "guard"
    guard.mkdir()
    guard.joinpath("hook.json").write_text(json.dumps(
        {"id": "guard", "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True, "on_error": "deny", "command": "true"}
    ))
    answer.write_text("")
    with Served(home, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None)) as served:
        yield Setup(home, served)


def claude_envelope(event: str, **extra: Any) -> dict[str, Any]:
    envelope: dict[str, Any] = {"session_id": f"s-{event}", "transcript_path": "/tmp/t.jsonl", "cwd": "/", "hook_event_name": CLAUDE_EVENT.get(event, event)}
    if event in ("PreToolUse", "PostToolUse", "PermissionRequest"):
        envelope.update(tool_name="Write", tool_input={"file_path": "a.txt", "content": "x"}, tool_use_id="t")
    if event == "UserPromptSubmit":
        envelope["prompt"] = "hello"
    return {**envelope, **extra}


@pytest.mark.parametrize(("event", "decision"), [(case[0], case[1]) for case in BRIDGE_CASES.values()], ids=list(BRIDGE_CASES))
def test_every_output_shape_is_the_bridges_byte_for_byte(setup: Setup, event: str, decision: dict[str, Any]) -> None:
    setup.answer_with(decision)
    setup.check(json.dumps(claude_envelope(event)).encode())


def test_a_non_ascii_reason_is_written_alike(setup: Setup) -> None:
    setup.answer_with({"behavior": "deny", "reason": "nicht erlaubt: 🚫 \u202e"})
    answer = setup.check(json.dumps(claude_envelope("PreToolUse")).encode())
    assert answer.body.isascii() and "🚫" in answer.json()["hookSpecificOutput"]["permissionDecisionReason"]


def _nested(depth: int) -> bytes:
    inner = "[" * (depth - 2) + "]" * (depth - 2)
    return ('{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"deep": ' + inner + "}}").encode()


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_nested(10_000), id="nested-at-the-limit"),
        pytest.param(_nested(10_001), id="nested-past-the-limit"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "\xff\xfe"}}', id="not-utf8"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "\\ud800"}}', id="lone-surrogate"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"n": NaN}}', id="nan"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", broken', id="not-json-fail-closed"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "Stop", broken', id="not-json-fail-open"),
        pytest.param(b'[1, 2]', id="not-an-object"),
        pytest.param(b'"hook_event_name": "UserPromptSubmit"', id="a-fragment"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"session_id": "s"}', id="no-event"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "SessionEnd", "reason": "other"}', id="session-end"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "Notification", "message": "hi"}', id="notification"),
        pytest.param(b'{"session_id": "s", "hook_event_name": 7}', id="event-not-a-string"),
        pytest.param(b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": ["Bash"], "tool_input": "x"}', id="odd-types"),
    ],
)
def test_odd_input_is_decided_alike(setup: Setup, body: bytes) -> None:
    setup.answer_with({"behavior": "deny", "reason": "said by the hook"})
    setup.check(body)
