"""The final-text contract of workflow and prompt hooks, row by row.

Each row is checked twice: directly (``outcome_from_final_text``) and through a real hook,
once as the output of a workflow's bash step and once as a model's answer from the stub
chat server, so that every runner that answers in text decides the same way.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Callable

import pytest

from conftest import read_log, read_state
from hookbus import HookBus, Outcome
from hookbus.chat_stub import StubChatServer
from hookbus.contract import outcome_from_final_text
from hookbus.decision import MAX_CONTEXT_CHARS

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]

DENY_JSON = '{"behavior": "deny", "reason": "Destructive command blocked."}'
MODIFY_JSON = '{"behavior": "modify", "input": {"path": "safe.txt"}}'
CONTEXT_JSON = '{"behavior": "context", "context": "Note shown to the model."}'
ALLOW_JSON = '{"behavior": "allow"}'

LONG = "x" * (MAX_CONTEXT_CHARS + 2_000)
TWO_FENCES = (
    "First:\n```json\n" + DENY_JSON + "\n```\nSecond:\n```json\n" + ALLOW_JSON + "\n```"
)
NO_BEHAVIOR = '{"verdict": "deny", "reason": "nope"}'
BAD_BEHAVIOR = '{"behavior": "block", "reason": "nope"}'

# (id, final text, the outcome it must give)
ROWS: list[tuple[str, str, Outcome]] = [
    # A JSON object with a valid behavior is that decision.
    ("json-deny", DENY_JSON, Outcome("deny", reason="Destructive command blocked.")),
    ("json-modify", MODIFY_JSON, Outcome("modify", input={"path": "safe.txt"})),
    ("json-context", CONTEXT_JSON, Outcome("context", context="Note shown to the model.")),
    ("json-allow", ALLOW_JSON, Outcome("allow")),
    ("json-surrounded-by-blank-lines", "\n\n  " + DENY_JSON + "  \n\n", Outcome("deny", reason="Destructive command blocked.")),
    # ... also inside a ```json fence, or a bare ``` fence.
    ("json-fence-deny", "```json\n" + DENY_JSON + "\n```", Outcome("deny", reason="Destructive command blocked.")),
    ("json-fence-modify", "```json\n" + MODIFY_JSON + "\n```", Outcome("modify", input={"path": "safe.txt"})),
    ("json-fence-context", "```json\n" + CONTEXT_JSON + "\n```", Outcome("context", context="Note shown to the model.")),
    ("json-fence-allow", "```json\n" + ALLOW_JSON + "\n```", Outcome("allow")),
    ("bare-fence-deny", "```\n" + DENY_JSON + "\n```", Outcome("deny", reason="Destructive command blocked.")),
    ("bare-fence-modify", "```\n" + MODIFY_JSON + "\n```", Outcome("modify", input={"path": "safe.txt"})),
    ("bare-fence-multiline-json", "```\n{\n  \"behavior\": \"context\",\n  \"context\": \"multi\"\n}\n```", Outcome("context", context="multi")),
    # ... also when a sentence precedes the single fence.
    (
        "sentence-then-fence",
        "I looked at the tool call and it is dangerous.\n```json\n" + DENY_JSON + "\n```",
        Outcome("deny", reason="Destructive command blocked."),
    ),
    (
        "sentence-then-bare-fence-modify",
        "Rewriting the path:\n\n```\n" + MODIFY_JSON + "\n```",
        Outcome("modify", input={"path": "safe.txt"}),
    ),
    # A line starting with BLOCK: denies, with the rest of that line (trimmed) as reason.
    ("block", "BLOCK: no rm", Outcome("deny", reason="no rm")),
    ("block-trimmed", "BLOCK:    spaced out reason   ", Outcome("deny", reason="spaced out reason")),
    ("block-no-space", "BLOCK:tight", Outcome("deny", reason="tight")),
    (
        "block-on-a-later-line",
        "I checked the command.\nBLOCK: writes to .env\nThat is all.",
        Outcome("deny", reason="writes to .env"),
    ),
    ("block-alone", "BLOCK:", Outcome("deny")),
    ("block-alone-with-spaces", "BLOCK:   ", Outcome("deny")),
    ("block-alone-on-a-line", "Not allowed.\nBLOCK:\nSorry.", Outcome("deny")),
    # BLOCK: in the middle of a line does not count: that is just text.
    (
        "block-mid-line",
        "You could write BLOCK: something to deny, but this is fine.",
        Outcome("context", context="You could write BLOCK: something to deny, but this is fine."),
    ),
    ("block-lowercase", "block: not the marker", Outcome("context", context="block: not the marker")),
    # Any other non-empty text becomes context.
    ("plain-text", "Remember to run the tests.", Outcome("context", context="Remember to run the tests.")),
    ("text-trimmed", "\n  some context  \n", Outcome("context", context="some context")),
    ("json-without-behavior", NO_BEHAVIOR, Outcome("context", context=NO_BEHAVIOR)),
    ("json-invalid-behavior", BAD_BEHAVIOR, Outcome("context", context=BAD_BEHAVIOR)),
    (
        "fenced-json-invalid-behavior",
        "```json\n" + BAD_BEHAVIOR + "\n```",
        Outcome("context", context="```json\n" + BAD_BEHAVIOR + "\n```"),
    ),
    ("json-array", "[" + DENY_JSON + "]", Outcome("context", context="[" + DENY_JSON + "]")),
    ("two-fences", TWO_FENCES, Outcome("context", context=TWO_FENCES)),
    # Empty or whitespace-only text allows.
    ("empty", "", Outcome("allow")),
    ("whitespace", "  \n\t \n  ", Outcome("allow")),
    # Context over 10,000 characters is cut, with a visible marker.
    (
        "long-context-capped",
        LONG,
        Outcome(
            "context",
            context="x" * MAX_CONTEXT_CHARS + "\n[hookbus: truncated 2000 more characters]",
        ),
    ),
    (
        "json-long-context-capped",
        json.dumps({"behavior": "context", "context": LONG}),
        Outcome(
            "context",
            context="x" * MAX_CONTEXT_CHARS + "\n[hookbus: truncated 2000 more characters]",
        ),
    ),
]
IDS = [row[0] for row in ROWS]


@pytest.mark.parametrize(("text", "expected"), [row[1:] for row in ROWS], ids=IDS)
def test_outcome_from_final_text(text: str, expected: Outcome) -> None:
    assert outcome_from_final_text(text) == expected


def test_context_at_exactly_the_limit_is_not_cut() -> None:
    text = "y" * MAX_CONTEXT_CHARS
    assert outcome_from_final_text(text) == Outcome("context", context=text)


def test_a_capped_context_says_how_much_was_dropped() -> None:
    outcome = outcome_from_final_text("z" * (MAX_CONTEXT_CHARS + 1))
    assert outcome.context is not None
    assert outcome.context.startswith("z" * MAX_CONTEXT_CHARS + "\n")
    assert outcome.context.endswith("[hookbus: truncated 1 more characters]")
    assert "z" * (MAX_CONTEXT_CHARS + 1) not in outcome.context


# -- through a real hook -----------------------------------------------------------------


@pytest.fixture
def answer_file(home: Path) -> Path:
    """The text the stub model answers and the workflow's bash step prints."""
    return home / "answer.txt"


def workflow_hook(write_hook: Writer, home: Path, answer_file: Path) -> None:
    write_hook(
        "ft",
        mode="sync",
        blocking=True,
        timeout="10s",
        workflow={"steps": [{"bash": f"cat {answer_file}"}]},
    )


def prompt_hook(write_hook: Writer, home: Path, server: StubChatServer) -> None:
    (home / "settings.json").write_text(
        json.dumps({"prompt_provider": {"base_url": server.base_url, "model": "m1"}})
    )
    write_hook("ft", mode="sync", blocking=True, timeout="10s", prompt="Decide about this tool call.")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("runner", ["workflow", "prompt"])
@pytest.mark.parametrize(("text", "expected"), [row[1:] for row in ROWS], ids=IDS)
def test_final_text_through_a_real_hook(
    runner: str,
    text: str,
    expected: Outcome,
    home: Path,
    answer_file: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    answer_file.write_text(text)
    with contextlib.ExitStack() as stack:
        if runner == "prompt":
            server = stack.enter_context(StubChatServer(lambda request: answer_file.read_text()))
            prompt_hook(write_hook, home, server)
        else:
            workflow_hook(write_hook, home, answer_file)
        bus = make_bus()
        assert bus.problems == ()
        decision = bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": ".env"}})
        if runner == "prompt":
            assert len(server.requests) == 1

    assert decision.behavior == expected.behavior
    assert decision.context == expected.context
    assert decision.input == expected.input
    if expected.behavior == "deny":
        assert decision.denied_by == ("ft",)
        shown = f"hook 'ft' denied: {expected.reason}" if expected.reason else "hook 'ft' denied"
        assert decision.reason == shown
    else:
        assert decision.reason is None

    bus.read_runs("ft")  # flushes the recorder
    entry = read_log(home)[-1]
    assert entry["hook_id"] == "ft"
    assert entry["status"] == expected.behavior
    assert entry["error"] is None
    assert entry["decision"] == expected.as_dict()
    state = read_state(home, "ft")
    assert state["last_status"] == expected.behavior
    assert state["last_error"] is None


@pytest.mark.timeout(30)
def test_a_non_blocking_hook_keeps_only_the_context_of_its_final_text(
    home: Path, answer_file: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """The final text decides what the hook says; blocking decides whether a deny applies."""
    answer_file.write_text("Looks risky.\nBLOCK: not now")
    write_hook("nb", mode="sync", workflow={"steps": [{"bash": f"cat {answer_file}"}]})
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    assert decision.behavior == "allow"
    bus.read_runs("nb")
    entry = read_log(home)[-1]
    assert entry["status"] == "deny"
    assert entry["decision"] == {"behavior": "deny", "reason": "not now"}
    assert entry["note"].startswith("not applied: the hook is not blocking")


CRLF_FENCE = '```json\r\n{"behavior": "deny", "reason": "crlf"}\r\n```'


def test_crlf_lines_still_make_a_block_line_and_a_whole_json_object() -> None:
    assert outcome_from_final_text("Checked.\r\nBLOCK: crlf\r\nDone.") == Outcome("deny", reason="crlf")
    assert outcome_from_final_text('{\r\n"behavior": "deny",\r\n"reason": "crlf"\r\n}') == Outcome(
        "deny", reason="crlf"
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize("route", ["direct", "workflow"])
def test_a_fenced_json_object_with_crlf_lines_is_a_decision(
    route: str, home: Path, answer_file: Path, write_hook: Writer, make_bus: Maker
) -> None:
    if route == "direct":
        assert outcome_from_final_text(CRLF_FENCE) == Outcome("deny", reason="crlf")
        return
    answer_file.write_bytes(CRLF_FENCE.encode())
    write_hook("crlf", mode="sync", blocking=True, workflow={"steps": [{"bash": f"cat {answer_file}"}]})
    bus = make_bus()
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    assert (decision.behavior, decision.reason) == ("deny", "hook 'crlf' denied: crlf")


def test_lone_surrogates_in_a_final_text_become_replacement_characters() -> None:
    """A provider's JSON reply can carry ``\\ud800`` escapes with no partner: the context
    handed to the agent (and to the log) must be text, as undecodable command output is."""
    outcome = outcome_from_final_text("note \ud800 here")
    assert outcome == Outcome("context", context="note \ufffd here")
    outcome.context.encode("utf-8")  # type: ignore[union-attr]
    assert outcome_from_final_text("BLOCK: no \udfff") == Outcome("deny", reason="no \ufffd")
