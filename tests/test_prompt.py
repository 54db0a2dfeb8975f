"""Prompt hooks against a real chat-completions server on 127.0.0.1 (the stub).

The default provider POSTs {base_url}/chat/completions; an embedder's own
``hookbus_run_prompt`` goes first. Every failure fails open with a recorded error.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import read_log, read_state
from hookbus import HookBus, hookimpl
from hookbus.chat_stub import StubChatServer, StubReply
from hookbus.prompts import NO_PROVIDER, PromptRequest, PromptResult

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]

KEY = "sk-test-9f3c1e7a5b2d4c6e8a0b"
ENVELOPE = {"tool_name": "bash", "tool_input": {"command": "ls -la"}, "cwd": "/tmp"}
PROMPT = "Is this tool call safe? Answer BLOCK: <reason> if not."


def write_settings(home: Path, server: StubChatServer | None = None, **provider: Any) -> None:
    settings: dict[str, Any] = {}
    if server is not None:
        settings["prompt_provider"] = {
            "base_url": server.base_url,
            "model": "m1",
            "api_key_env": "SOME_VAR",
            **provider,
        }
    (home / "settings.json").write_text(json.dumps(settings))


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SOME_VAR", KEY)
    return KEY


def last_run(bus: HookBus, home: Path, hook_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The hook's state.json and its last log line, once the recorder has flushed."""
    bus.read_runs(hook_id)
    entries = [entry for entry in read_log(home) if entry["hook_id"] == hook_id]
    assert entries, f"no log line for {hook_id!r}"
    return read_state(home, hook_id), entries[-1]


def sync_prompt_hook(write_hook: Writer, hook_id: str = "judge", **fields: Any) -> None:
    options: dict[str, Any] = {"mode": "sync", "blocking": True, "prompt": PROMPT}
    options.update(fields)
    write_hook(hook_id, **options)


# -- replies of each kind ------------------------------------------------------------------

REPLIES = [
    ("block", "BLOCK: it deletes files", "deny", {"behavior": "deny", "reason": "it deletes files"}),
    (
        "json",
        '{"behavior": "modify", "input": {"command": "ls"}}',
        "modify",
        {"behavior": "modify", "input": {"command": "ls"}},
    ),
    (
        "fenced-json",
        'Here is my decision:\n```json\n{"behavior": "deny", "reason": "too broad"}\n```',
        "deny",
        {"behavior": "deny", "reason": "too broad"},
    ),
    ("text", "The user prefers short listings.", "context", {"behavior": "context", "context": "The user prefers short listings."}),
    ("empty", "", "allow", {"behavior": "allow"}),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("reply", "behavior", "recorded"), [row[1:] for row in REPLIES], ids=[row[0] for row in REPLIES]
)
def test_each_kind_of_reply_decides(
    reply: str,
    behavior: str,
    recorded: dict[str, Any],
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    with StubChatServer(lambda request: reply) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        assert bus.problems == ()
        decision = bus.emit("PreToolUse", ENVELOPE)
    assert decision.behavior == behavior
    if behavior == "deny":
        assert decision.reason == f"hook 'judge' denied: {recorded['reason']}"
    if behavior == "modify":
        assert decision.input == recorded["input"]
    if behavior == "context":
        assert decision.context == recorded["context"]
    assert len(server.requests) == 1
    state, entry = last_run(bus, home, "judge")
    assert state["last_status"] == behavior
    assert state["last_error"] is None
    assert entry["decision"] == recorded
    assert entry["error"] is None


# -- provider failures fail open ---------------------------------------------------------

FAILURES = [
    ("http-500", StubReply(status=500, text="the model is overloaded"), "answered HTTP 500"),
    ("malformed-json", StubReply(raw_body=b"<html>not json</html>"), "sent a malformed reply"),
    ("no-choices", StubReply(raw_body=b'{"id": "cmpl-1", "object": "chat.completion"}'), "sent a malformed reply"),
    ("empty-choices", StubReply(raw_body=b'{"choices": []}'), "sent a malformed reply"),
    ("nested-too-deep", StubReply(raw_body=b'{"choices": ' + b"[" * 100_000), "sent a malformed reply"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("answer", "expected"), [row[1:] for row in FAILURES], ids=[row[0] for row in FAILURES]
)
def test_provider_failures_fail_open_with_a_recorded_error(
    answer: StubReply,
    expected: str,
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    with StubChatServer(lambda request: answer) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        decision = bus.emit("PreToolUse", ENVELOPE)
    assert decision.behavior == "allow"
    assert decision.context is None
    state, entry = last_run(bus, home, "judge")
    where = f"{server.base_url}/chat/completions"
    assert state["last_status"] == "allow"
    error = state["last_error"]
    assert error is not None
    assert error.startswith(f"{where} {expected}"), error
    assert entry["error"] == error
    assert entry["status"] == "allow"
    if answer.status == 500:
        assert "the model is overloaded" in error  # the body says why: keep it
    if answer.raw_body is not None:
        assert answer.raw_body.decode()[:50] in error


def no_verdict_body(message: dict[str, Any], finish_reason: str) -> bytes:
    choice = {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}
    return json.dumps({"choices": [choice]}).encode()


NO_VERDICT = [
    ({"content": None, "refusal": "I can't help with that."}, "stop", 'the model refused: "I can\'t help with that."'),
    ({"content": None}, "stop", "the message content is null"),
    ({"content": ""}, "length", 'the reply was cut at the token limit (finish_reason "length")'),
    ({"content": "Looks fi"}, "content_filter", 'the provider filtered the reply (finish_reason "content_filter")'),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("message", "finish_reason", "why"), NO_VERDICT, ids=["refusal", "null", "length", "filtered"])
def test_a_reply_with_no_verdict_fails_open_with_the_error_recorded(
    message: dict[str, Any], finish_reason: str, why: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """No verdict is not an empty answer (which allows): it is the hook's failure. Open by
    default, and recorded; closed under "on_error": "deny" (tests/adversarial)."""
    body = no_verdict_body(message, finish_reason)
    with StubChatServer(lambda request: StubReply(raw_body=body)) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        decision = bus.emit("PreToolUse", ENVELOPE)
    assert (decision.behavior, decision.context) == ("allow", None)
    (failure,) = decision.failed
    assert (failure.hook_id, failure.failure, failure.closed) == ("judge", "error", False)
    error = f"{server.base_url}/chat/completions gave no verdict: {why}"
    assert failure.error.startswith(error), failure.error
    state, entry = last_run(bus, home, "judge")
    assert (state["last_status"], state["last_error"]) == ("allow", failure.error)
    assert entry["error"] == failure.error


@pytest.mark.timeout(30)
def test_an_empty_answer_that_finished_normally_still_allows(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    """The final-text contract's row: the model said nothing, so nothing is asked of the
    agent. Only a reply that holds no answer at all is a failure."""
    body = no_verdict_body({"content": ""}, "stop")
    with StubChatServer(lambda request: StubReply(raw_body=body)) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        decision = bus.emit("PreToolUse", ENVELOPE)
    assert (decision.behavior, decision.failed) == ("allow", ())
    assert last_run(bus, home, "judge")[1]["error"] is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "answer",
    [StubReply(status=500, text="overloaded"), StubReply(raw_body=b"not json")],
    ids=["http-500", "malformed"],
)
def test_a_failed_reply_closes_its_connection(
    answer: StubReply, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """Regression: a reply that fails after it was read (an HTTP error, a malformed body)
    used to leave its response, and so its socket, open until a cyclic GC, which warned."""
    gc.collect()
    gc.disable()  # so that the leak, if any, is collected below and nowhere else
    try:
        with StubChatServer(lambda request: answer) as server:
            write_settings(home, server)
            sync_prompt_hook(write_hook)
            bus = make_bus()
            assert bus.emit("PreToolUse", ENVELOPE).behavior == "allow"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            gc.collect()
    finally:
        gc.enable()
    leaks = [str(warning.message) for warning in caught if issubclass(warning.category, ResourceWarning)]
    assert leaks == []


@pytest.mark.timeout(30)
def test_unreachable_provider_fails_open(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with StubChatServer(lambda request: "never") as server:
        url = server.base_url
    (home / "settings.json").write_text(json.dumps({"prompt_provider": {"base_url": url, "model": "m1"}}))
    sync_prompt_hook(write_hook)
    bus = make_bus()
    assert bus.emit("PreToolUse", ENVELOPE).behavior == "allow"
    state, _ = last_run(bus, home, "judge")
    assert state["last_error"].startswith(f"cannot reach {url}/chat/completions")


@pytest.mark.timeout(30)
def test_a_hanging_server_is_bounded_by_the_hook_timeout(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    with StubChatServer(lambda request: StubReply(hang=True)) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook, timeout="1s")
        bus = make_bus()
        started = time.monotonic()
        decision = bus.emit("PreToolUse", ENVELOPE)
        elapsed = time.monotonic() - started
        assert elapsed < 1.0 + 1.0, f"a 1s prompt hook held emit for {elapsed:.2f}s"
        assert decision.behavior == "allow"
        assert len(server.requests) == 1
    state, entry = last_run(bus, home, "judge")
    assert state["last_error"] == "timed out after 1s"
    assert entry["error"] == "timed out after 1s"
    assert entry["status"] == "allow"


# -- the request ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_the_request_carries_prompt_model_envelope_and_key(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with StubChatServer(lambda request: "fine by me") as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        assert bus.emit("PreToolUse", ENVELOPE).context == "fine by me"
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    headers = {name.lower(): value for name, value in request["headers"].items()}
    assert headers["authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["model"] == "m1"
    (message,) = body["messages"]
    assert message["role"] == "user"
    content = message["content"]
    assert content.startswith(PROMPT)
    # The envelope JSON is appended: the last line of the message, with hook_event_name.
    envelope = json.loads(content.rstrip().splitlines()[-1])
    assert envelope == {**ENVELOPE, "hook_event_name": "PreToolUse"}
    assert content.index(PROMPT) < content.rindex('"hook_event_name"')

    bus.read_runs("judge")
    assert KEY not in caplog.text
    assert KEY not in (home / "hooks" / "judge" / "state.json").read_text()
    for path in (home / "logs" / "hooks").glob("*.jsonl"):
        assert KEY not in path.read_text()


@pytest.mark.timeout(30)
def test_the_key_never_shows_in_errors(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing request records the URL and what went wrong, never the key sent."""
    caplog.set_level(logging.DEBUG)
    with StubChatServer(lambda request: StubReply(status=401, text="bad key")) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        bus.emit("PreToolUse", ENVELOPE)
    state, entry = last_run(bus, home, "judge")
    assert "HTTP 401" in state["last_error"]
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in caplog.text
    assert KEY not in json.dumps(state)
    assert KEY not in json.dumps(read_log(home))


@pytest.mark.timeout(30)
def test_the_api_key_wins_over_a_password_in_base_url_and_both_stay_secret(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    password = "hunter2-but-longer"
    with StubChatServer(lambda request: StubReply(status=401, text="bad credentials")) as server:
        base_url = server.base_url.replace("http://", f"http://me:{password}@")
        write_settings(home, server, base_url=base_url)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        bus.emit("PreToolUse", ENVELOPE)
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    state, entry = last_run(bus, home, "judge")
    where = server.base_url.replace("http://", "http://me:[redacted]@")
    assert state["last_error"].startswith(f"{where}/chat/completions answered HTTP 401: ")
    assert "bad credentials" in state["last_error"]
    assert password not in json.dumps([state, entry])


@pytest.mark.timeout(30)
def test_a_missing_key_variable_fails_open_naming_the_variable(
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("SOME_VAR")
    caplog.set_level(logging.DEBUG)
    with StubChatServer(lambda request: "BLOCK: should not be asked") as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        decision = bus.emit("PreToolUse", ENVELOPE)
    assert decision.behavior == "allow"
    assert server.requests == []  # nothing is sent without the key
    state, entry = last_run(bus, home, "judge")
    assert state["last_error"] == "the API key variable SOME_VAR is not set"
    assert entry["error"] == state["last_error"]
    assert KEY not in caplog.text


@pytest.mark.timeout(30)
def test_no_provider_configured(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_settings(home)  # {}: no prompt_provider
    sync_prompt_hook(write_hook)
    bus = make_bus()
    assert bus.problems == ()
    decision = bus.emit("PreToolUse", ENVELOPE)
    assert decision.behavior == "allow"
    state, entry = last_run(bus, home, "judge")
    assert state["last_error"] == "no prompt provider configured (see docs/hooks.md: prompt hooks)"
    assert state["last_error"] == NO_PROVIDER
    assert entry["error"] == NO_PROVIDER
    assert entry["status"] == "allow"


@pytest.mark.timeout(30)
def test_no_settings_file_at_all_is_no_provider(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    sync_prompt_hook(write_hook)
    bus = make_bus()
    bus.emit("PreToolUse", ENVELOPE)
    state, _ = last_run(bus, home, "judge")
    assert state["last_error"] == NO_PROVIDER


INVALID_PROVIDERS = [
    (
        "typo",
        {"base_url": "http://127.0.0.1:9/v1", "model": "m1", "modle": "m2"},
        "settings.json: unknown field 'modle' (did you mean 'model'?) @ $.prompt_provider",
    ),
    (
        "typo-with-no-close-field",
        {"base_url": "http://127.0.0.1:9/v1", "model": "m1", "temperature": 0},
        "settings.json: unknown field 'temperature' @ $.prompt_provider",
    ),
    (
        "no-model",
        {"base_url": "http://127.0.0.1:9/v1"},
        "@ $.prompt_provider.model",
    ),
    (
        "not-a-url",
        {"base_url": "localhost:11434", "model": "m1"},
        "settings.json: base_url must be an http:// or https:// URL, got 'localhost:11434' @ $.prompt_provider.base_url",
    ),
    (
        "bad-port",
        {"base_url": "http://127.0.0.1:99999/v1", "model": "m1"},
        "settings.json: invalid port in base_url: Port out of range 0-65535 @ $.prompt_provider.base_url",
    ),
    (
        "model-not-a-string",
        {"base_url": "http://127.0.0.1:9/v1", "model": 3},
        "@ $.prompt_provider.model",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("provider", "shown"), [row[1:] for row in INVALID_PROVIDERS], ids=[row[0] for row in INVALID_PROVIDERS]
)
def test_an_invalid_provider_is_a_path_qualified_problem(
    provider: dict[str, Any], shown: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    (home / "settings.json").write_text(json.dumps({"prompt_provider": provider}))
    sync_prompt_hook(write_hook)
    bus = make_bus()
    problems = [str(problem) for problem in bus.problems]
    matching = [p for p in problems if p == shown or (p.startswith("settings.json: ") and p.endswith(shown))]
    assert matching, problems
    assert all(problem.path == "settings.json" for problem in bus.problems)
    # The hook itself loads; firing it fails open, saying the provider settings are invalid.
    assert "judge" in bus.snapshot.hooks
    assert bus.emit("PreToolUse", ENVELOPE).behavior == "allow"
    state, _ = last_run(bus, home, "judge")
    assert state["last_error"].startswith("settings.json prompt_provider is invalid: ")


@pytest.mark.timeout(30)
def test_each_unknown_provider_field_is_its_own_problem_with_a_did_you_mean(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """Was: "unknown field 'modle' @ $.prompt_provider" with no hint, where hook.json's own
    unknown fields say what was probably meant; several came as one "unknown fields" line."""
    provider = {"bse_url": "http://127.0.0.1:9/v1", "modle": "m1", "api_key_env": "K", "zzz": 1}
    (home / "settings.json").write_text(json.dumps({"prompt_provider": provider}))
    sync_prompt_hook(write_hook)
    assert sorted(str(problem) for problem in make_bus().problems) == [
        "settings.json: required field missing @ $.prompt_provider.base_url",
        "settings.json: required field missing @ $.prompt_provider.model",
        "settings.json: unknown field 'bse_url' (did you mean 'base_url'?) @ $.prompt_provider",
        "settings.json: unknown field 'modle' (did you mean 'model'?) @ $.prompt_provider",
        "settings.json: unknown field 'zzz' @ $.prompt_provider",
    ]


# -- an embedder's provider ------------------------------------------------------------------


class EmbedderProvider:
    """Runs prompts in the embedder's own threads; says which thread."""

    def __init__(self, answer: str = "BLOCK: the embedder says no", gate: threading.Event | None = None) -> None:
        self.answer = answer
        self.gate = gate
        self.requests: list[PromptRequest] = []
        self.threads: list[str] = []

    @hookimpl
    def hookbus_run_prompt(self, request: PromptRequest) -> PromptResult:
        self.requests.append(request)
        self.threads.append(threading.current_thread().name)
        if self.gate is not None:
            assert self.gate.wait(10), "the test never opened the gate"
        return PromptResult(self.answer, thread_id="t-42")


@pytest.mark.timeout(30)
def test_an_embedders_provider_goes_first_and_its_thread_is_recorded(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    gate = threading.Event()
    provider = EmbedderProvider(gate=gate)
    with StubChatServer(lambda request: "the default provider answered") as server:
        write_settings(home, server)
        write_hook("bg", event="PostToolUse", prompt=PROMPT)  # async, the default
        bus = make_bus(plugins=[provider])
        decision = bus.emit("PostToolUse", ENVELOPE)
        assert decision.behavior == "allow"
        gate.set()
        bus.close()
    assert server.requests == []  # the built-in provider was never asked
    (request,) = provider.requests
    assert request.mode == "async"
    assert request.hook_id == "bg"
    assert request.event == "PostToolUse"
    assert request.prompt.startswith(PROMPT)
    assert dict(request.envelope) == {**ENVELOPE, "hook_event_name": "PostToolUse"}
    assert provider.threads[0].startswith("hookbus-async")

    state = read_state(home, "bg")
    assert state["last_status"] == "done"
    assert state["last_error"] is None
    (run,) = state["recent_runs"]
    assert run["async"] is True
    assert run["status"] == "done"
    assert run["thread_id"] == "t-42"
    (entry,) = [entry for entry in read_log(home) if entry["hook_id"] == "bg"]
    assert entry["thread_id"] == "t-42"
    assert entry["status"] == "done"
    assert entry["mode"] == "async"
    assert entry["decision"] == {"behavior": "deny", "reason": "the embedder says no"}


@pytest.mark.timeout(30)
def test_an_embedders_provider_answers_sync_prompt_hooks_too(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    provider = EmbedderProvider()
    sync_prompt_hook(write_hook)  # no settings.json: only the embedder can answer
    bus = make_bus(plugins=[provider])
    decision = bus.emit("PreToolUse", ENVELOPE)
    assert decision.behavior == "deny"
    assert decision.reason == "hook 'judge' denied: the embedder says no"
    assert provider.requests[0].mode == "sync"


# -- async prompt hooks ----------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_async_prompt_hook_defaults_and_never_delays_emit(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    gate = threading.Event()

    def reply(request: dict[str, Any]) -> str:
        assert gate.wait(10), "the test never opened the gate"
        return "BLOCK: async hooks cannot block"

    with StubChatServer(reply) as server:
        write_settings(home, server)
        write_hook("bg", event="PostToolUse", prompt=PROMPT)
        bus = make_bus()
        hook = bus.snapshot.hooks["bg"]
        assert hook.spec.mode == "async"
        assert hook.spec.timeout == "10m"
        assert hook.timeout == 600
        # The server cannot answer until the gate opens: emit returns all the same.
        decision = bus.emit("PostToolUse", ENVELOPE)
        assert decision.behavior == "allow"
        assert decision.context is None
        assert not gate.is_set()
        gate.set()
        bus.close()
    assert len(server.requests) == 1
    state = read_state(home, "bg")
    assert state["last_status"] == "done"
    assert state["last_error"] is None
    (run,) = state["recent_runs"]
    assert run["async"] is True
    assert run["thread_id"] is None  # the default provider runs no thread


@pytest.mark.timeout(30)
def test_async_prompt_hook_records_an_error(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    with StubChatServer(lambda request: StubReply(status=503, text="unavailable")) as server:
        write_settings(home, server)
        write_hook("bg", event="Stop", prompt=PROMPT)
        bus = make_bus()
        assert bus.emit("Stop", {}).behavior == "allow"
        bus.close()
    state = read_state(home, "bg")
    assert state["last_status"] == "error"
    assert "answered HTTP 503" in state["last_error"]
    (entry,) = read_log(home)
    assert entry["status"] == "error"
    assert entry["error"] == state["last_error"]


@pytest.mark.timeout(30)
def test_close_cancels_a_hanging_async_prompt(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    asked = threading.Event()

    def hang(request: dict[str, Any]) -> StubReply:
        asked.set()
        return StubReply(hang=True)

    with StubChatServer(hang) as server:
        write_settings(home, server)
        write_hook("bg", event="Stop", prompt=PROMPT)
        bus = make_bus()
        assert bus.emit("Stop", {}).behavior == "allow"
        assert asked.wait(10), "the prompt never reached the server"
        started = time.monotonic()
        bus.close(timeout=0.5)
        elapsed = time.monotonic() - started
        # Still inside the with: the server still hangs, so the client cut the request short.
        assert elapsed < 5.0, f"close took {elapsed:.2f}s with a hanging prompt"
        state = read_state(home, "bg")
        assert state["last_status"] == "error"
        assert state["last_error"] == "cancelled at shutdown"
        assert len(server.requests) == 1
    (entry,) = read_log(home)
    assert entry["error"] == "cancelled at shutdown"
    assert entry["status"] == "error"
    assert entry["mode"] == "async"


# -- asyncio ---------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_aemit_with_a_sync_prompt_hook_does_not_block_the_loop(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    def slow(request: dict[str, Any]) -> str:
        time.sleep(0.5)
        return "checked slowly"

    async def main(bus: HookBus) -> tuple[Any, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.02)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # the ticker starts
        try:
            decision = await bus.aemit("PreToolUse", ENVELOPE)
        finally:
            done.set()
            await task
        return decision, ticks

    with StubChatServer(slow) as server:
        write_settings(home, server)
        sync_prompt_hook(write_hook)
        bus = make_bus()
        decision, ticks = asyncio.run(main(bus))
    assert decision.context == "checked slowly"
    assert len(server.requests) == 1
    # Blocked for the 0.5 s answer, the ticker would have ticked once or twice at most.
    assert ticks >= 5, f"the loop ticked only {ticks} times while the hook waited 0.5s"


@pytest.mark.timeout(30)
def test_close_interrupts_a_reply_whose_body_never_comes(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """A server that sends HTTP/1.0 headers and then goes silent: http.client forgets the
    socket once it has those headers, yet close() must still cut the request short."""
    import socket
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    answered = threading.Event()
    done = threading.Event()

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 100\r\n\r\n")
            answered.set()
            done.wait(20)

    server = threading.Thread(target=serve)
    server.start()
    try:
        settings = {"prompt_provider": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}}
        (home / "settings.json").write_text(json.dumps(settings))
        write_hook("silent", event="Stop", prompt="anything")
        bus = make_bus()
        bus.emit("Stop", {})
        assert answered.wait(10)
        started = time.monotonic()
        bus.close(timeout=0.3)
        assert time.monotonic() - started < 5
        assert read_state(home, "silent")["last_error"] == "cancelled at shutdown"
    finally:
        done.set()
        server.join(10)
        listener.close()
