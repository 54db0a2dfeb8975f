"""Attacks that carry a registered secret out of hookbus through a reason, not a record.

Promise 5: secrets never reach a record, a log or an error. Records were masked; what a
hook *says* was not. Here the prompt provider's API key (registered by the provider when it
sends it, as in real life) comes back in what the hooks of a fail-closed guard say:

- a command hook that echoes the key on stderr and crashes (its error, and the fail-closed
  deny's reason made of it), one whose error keeps the end of its stderr, cut inside the
  key, and one that prints it as context;
- the provider itself, answering 401 as OpenAI does ("Incorrect API key provided:
  sk-proj-ab****wxyz": a prefix of the key, stars, its last 4), and 400 with the key
  %-encoded in a URL.

Each way out of hookbus must show ``[redacted]`` and no run of 8 or more characters of the
key (in these echoes, all cut at the key's start or end), in any of the spellings an echo
takes: ``HookBus.emit``'s Decision (reason, context,
continue_with, halt, each failed hook's error), ``hookbus emit`` in-process (stdout and its
stderr lines), ``hookbus explain`` (text and ``--json``), a ``hookbus serve`` answer, and
the Claude Code bridge's ``permissionDecisionReason``, which goes to the model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import quote, quote_plus

import pytest

from attackkit import attack
from conftest import read_log
from hookbus import HookBus
from hookbus.chat_stub import StubChatServer, StubReply
from hookbus.redaction import MARKER, MIN_SECRET_LENGTH, clear_secrets
from servekit import Raw, Served, environment

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]

PROMISE = 5
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
#: Shaped like an OpenAI project key, with the characters a %-encoding changes.
KEY = "sk-proj-ab/Q3+x9=Zt7Lm2Kp8Vw4Rn6Yc1Hd5wxyz"
KEY_VARIABLE = "HOOKBUS_SECRETS_KEY"
ENVELOPE = {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/tmp"}
CLAUDE_ENVELOPE = {
    "hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/tmp", "tool_name": "Bash", "tool_input": {"command": "ls"},
}
#: OpenAI's 401 quotes a key cut short: its first characters, stars, its last 4.
OPENAI_401 = json.dumps({
    "error": {
        "message": f"Incorrect API key provided: {KEY[:10]}{'*' * 24}{KEY[-4:]}. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key",
    }
}).encode()
ENCODED_400 = json.dumps({
    "error": "unknown key", "retry": f"https://api.example.test/v1/auth?key={quote(KEY, safe='')}&plus={quote_plus(KEY)}"
}).encode()


def runs(secret: str) -> set[str]:
    """Every run of MIN_SECRET_LENGTH characters of ``secret``: none may be left in clear."""
    return {secret[start : start + MIN_SECRET_LENGTH] for start in range(len(secret) - MIN_SECRET_LENGTH + 1)}


FORBIDDEN = runs(KEY) | runs(quote(KEY, safe="")) | runs(quote_plus(KEY)) | runs(quote(KEY))


def assert_masked(*texts: str) -> None:
    """No run of the key in any spelling, and the mask where it was."""
    shown = "\n".join(texts)
    left = sorted(run for run in FORBIDDEN if run in shown)
    assert left == [], f"runs of the key left in clear: {left}\n{shown}"
    assert MARKER in shown


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Nothing registered before a test: the provider's send must be what registers the key."""
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    clear_secrets()
    yield
    clear_secrets()


def provider_answer(request: dict[str, Any]) -> str | StubReply:
    prompt = request["body"]["messages"][0]["content"]
    if prompt.startswith("judge-401"):
        return StubReply(status=401, raw_body=OPENAI_401)
    if prompt.startswith("judge-400"):
        return StubReply(status=400, raw_body=ENCODED_400)
    return '{"behavior": "allow"}'


@pytest.fixture
def stub() -> Iterator[StubChatServer]:
    with StubChatServer(provider_answer) as server:
        yield server


def guarded(home: Path, write_hook: Writer, stub: StubChatServer, event: str = "PreToolUse") -> Path:
    """A home whose fail-closed guards all let the key out in what they say."""
    settings = {"prompt_provider": {"base_url": stub.base_url, "model": "m", "api_key_env": KEY_VARIABLE}}
    (home / "settings.json").write_text(json.dumps(settings))
    closed: dict[str, Any] = {"event": event, "mode": "sync", "blocking": True, "on_error": "deny", "timeout": "10s"}
    write_hook("judge-401", prompt="judge-401: is this safe?", **closed)
    write_hook("judge-400", prompt="judge-400: is this safe?", **closed)
    variable = f"${KEY_VARIABLE}"
    write_hook("scan", command=f'echo "scanner: the token {variable} was refused" >&2; exit 1', **closed)
    # Its error keeps the last 500 characters of stderr: the cut falls inside the key.
    tail = f'echo "token={variable}" >&2; head -c 480 /dev/zero | tr "\\0" . >&2; exit 1'
    write_hook("scan-tail", command=tail, **closed)
    write_hook("note", command=f'echo "the key in use is {variable}"', **closed)
    return home


def hookbus(
    home: Path, *arguments: str, stdin: dict[str, Any], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOOKBUS, "--home", str(home), *arguments], input=json.dumps(stdin), capture_output=True, text=True,
        timeout=60, env=env or environment(**{KEY_VARIABLE: KEY}),
    )


@pytest.mark.timeout(60)
def test_the_decision_of_an_emit_holds_no_secret(
    home: Path, write_hook: Writer, make_bus: Maker, stub: StubChatServer
) -> None:
    with attack(PROMISE, "the API key in a fail-closed deny's reason, a context and failed hooks' errors of HookBus.emit"):
        bus = make_bus(guarded(home, write_hook, stub))
        decision = bus.emit("PreToolUse", ENVELOPE)
        assert decision.behavior == "deny"
        assert {failure.hook_id for failure in decision.failed} == {"judge-401", "judge-400", "scan", "scan-tail"}
        assert decision.context is not None and decision.context.startswith("the key in use is ")
        assert_masked(json.dumps(decision.as_dict()), *[json.dumps(failure.as_dict()) for failure in decision.failed])
        assert_masked(*[failure.line() for failure in decision.failed])
        bus.read_runs()  # the records were masked already: still so
        assert_masked(json.dumps(read_log(home)))


STOP_SHAPES = [
    pytest.param('{"decision": "block", "reason": "retry with %s"}', "continue_with", id="continue_with"),
    pytest.param('{"continue": false, "stopReason": "stopped: %s"}', "halt", id="halt"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("shape", "field"), STOP_SHAPES)
def test_continue_with_and_halt_hold_no_secret(
    shape: str, field: str, home: Path, write_hook: Writer, make_bus: Maker, stub: StubChatServer
) -> None:
    """Claude Code's shapes on Stop: ``decision: block`` goes on with its reason (to the
    model), ``continue: false`` ends the turn with its stopReason (to the user)."""
    with attack(PROMISE, f"the API key in {field}"):
        settings = {"prompt_provider": {"base_url": stub.base_url, "model": "m", "api_key_env": KEY_VARIABLE}}
        (home / "settings.json").write_text(json.dumps(settings))
        write_hook("judge", event="Stop", mode="sync", prompt="judge: may the turn end?")
        write_hook("says", event="Stop", mode="sync", command=f"printf '{shape}' \"${KEY_VARIABLE}\"")
        said = getattr(make_bus().emit("Stop", {}), field)
        assert said is not None
        assert_masked(said)


@pytest.mark.timeout(60)
def test_hookbus_emit_prints_no_secret(home: Path, write_hook: Writer, stub: StubChatServer) -> None:
    """The CLI process registers the key only when its prompt hooks send it: the same way
    a user's does."""
    with attack(PROMISE, "the API key in hookbus emit's decision and stderr lines"):
        result = hookbus(guarded(home, write_hook, stub), "emit", "PreToolUse", "--no-server", stdin=ENVELOPE)
        assert result.returncode == 2, result.stderr
        assert json.loads(result.stdout)["behavior"] == "deny"
        assert "hook 'scan' failed closed (crashed)" in result.stderr
        assert_masked(result.stdout)
        assert_masked(result.stderr)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("form", ["json", "text"])
def test_hookbus_explain_prints_no_secret(form: str, home: Path, write_hook: Writer, stub: StubChatServer) -> None:
    with attack(PROMISE, f"the API key in hookbus explain ({form})"):
        arguments = ["--json"] if form == "json" else []
        result = hookbus(guarded(home, write_hook, stub), "explain", "PreToolUse", *arguments, stdin=ENVELOPE)
        assert result.returncode == 0, result.stderr
        if form == "json":
            explanation = json.loads(result.stdout)
            assert explanation["decision"]["behavior"] == "deny"
            assert {hook["id"] for hook in explanation["hooks"] if hook["result"]["error"]} == {
                "judge-401", "judge-400", "scan", "scan-tail",
            }
        assert_masked(result.stdout)
        assert not any(run in result.stderr for run in FORBIDDEN)


@pytest.mark.timeout(90)
def test_a_serve_answer_holds_no_secret(home: Path, write_hook: Writer, stub: StubChatServer) -> None:
    """The key is registered in the server's process when its prompt hooks send it; what
    the server answers, and what ``hookbus emit`` prints of it, must be masked."""
    with attack(PROMISE, "the API key in hookbus serve's answer"):
        guarded(home, write_hook, stub)
        with Served(home, env=environment(**{KEY_VARIABLE: KEY})) as served:
            with Raw(served.wait_ready()) as raw:
                answer = raw.call(1, "emit", event="PreToolUse", envelope=ENVELOPE, failures=True)
            result = hookbus(home, "emit", "PreToolUse", stdin=ENVELOPE, env=environment(**{KEY_VARIABLE: None}))
        assert answer["result"]["behavior"] == "deny", answer
        assert len(answer["result"]["failed"]) == 4
        assert_masked(json.dumps(answer))
        assert result.returncode == 2, result.stderr
        assert "hook 'scan' failed closed (crashed)" in result.stderr
        assert_masked(result.stdout)
        assert_masked(result.stderr)
        assert not any(run in served.stderr for run in FORBIDDEN)


@pytest.mark.timeout(60)
def test_the_claude_code_bridge_tells_the_model_no_secret(home: Path, write_hook: Writer, stub: StubChatServer) -> None:
    """``permissionDecisionReason`` is what Claude Code shows the model."""
    with attack(PROMISE, "the API key in the Claude Code bridge's permissionDecisionReason"):
        result = hookbus(guarded(home, write_hook, stub), "claude-code-hook", "--no-server", stdin=CLAUDE_ENVELOPE)
        assert result.returncode == 0, result.stderr
        output = json.loads(result.stdout)["hookSpecificOutput"]
        assert output["permissionDecision"] == "deny"
        assert_masked(output["permissionDecisionReason"])
        assert_masked(result.stdout)
        assert not any(run in result.stderr for run in FORBIDDEN)
