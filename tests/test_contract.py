"""The command decision contract, row by row, with real bash through a real HookBus.

Each row of the spec's table ("exit 0, no output -> allow", "exit 2 -> deny", ...) is run
twice: once as a real command hook (sync, blocking, PreToolUse unless stated) and once
through ``hookbus.contract`` directly, so a regression shows up in both places and the fast
unit rows say which layer broke. What a hook receives (stdin envelope, environment, working
directory) is tested here too, because it is half of the same contract.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import attrs
import pytest

from conftest import HookWriter, read_log, read_state
from hookbus import HookBus
from hookbus.loader import failing_problems
from hookbus.contract import ERROR_TAIL_CHARS, outcome_from_command, outcome_from_final_text, outcome_from_text
from hookbus.decision import MAX_CONTEXT_CHARS, Decision, Outcome

pytestmark = pytest.mark.timeout(60)

HOOK_ID = "h"
TOOL_ENVELOPE: dict[str, Any] = {"tool_name": "bash", "tool_input": {"command": "ls"}}
TRUNCATED = "[hookbus: truncated"


@attrs.frozen
class Fired:
    """One emit of one hook, with what it recorded (read after the bus was closed)."""

    decision: Decision
    #: The hook's line in the audit log.
    record: dict[str, Any]
    #: The hook's state.json.
    state: dict[str, Any]
    hook_dir: Path

    @property
    def error(self) -> str | None:
        error: str | None = self.record["error"]
        return error


Fire = Callable[..., Fired]


@pytest.fixture
def fire(home: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]) -> Fire:
    """Write one sync hook running ``command``, emit once, close the bus, read the records."""

    def run(
        command: str,
        *,
        event: str = "PreToolUse",
        envelope: Mapping[str, Any] | None = None,
        hook_id: str = HOOK_ID,
        blocking: bool = True,
        **fields: Any,
    ) -> Fired:
        path = write_hook(
            hook_id, command=command, event=event, mode="sync", blocking=blocking, **fields
        )
        bus = make_bus()
        # A script that cannot run is the subject of some rows: the loader keeps such a hook
        # (its on_error decides) and says it will fail; nothing else may be wrong.
        will_fail = [problem for problems in failing_problems(bus.snapshot).values() for problem in problems]
        assert not [problem for problem in bus.problems if problem not in will_fail], bus.problems
        decision = bus.emit(event, TOOL_ENVELOPE if envelope is None else envelope)
        bus.close()  # flushes the recorder
        records = [entry for entry in read_log(home) if entry["hook_id"] == hook_id]
        assert len(records) == 1, records
        return Fired(decision, records[0], read_state(home, hook_id), path.parent)

    return run


def assert_failed_open(fired: Fired, *fragments: str) -> str:
    """The hook failed open: the action proceeds, and the error is recorded everywhere."""
    assert fired.decision == Decision("allow")
    assert fired.record["status"] == "allow"
    assert fired.state["last_status"] == "allow"
    error = fired.error
    assert error, "a failed hook must record why"
    assert fired.state["last_error"] == error
    assert fired.state["recent_runs"][-1]["error"] == error
    for fragment in fragments:
        assert fragment in error, f"{fragment!r} not in recorded error {error!r}"
    return error


# -- the contract through bash --------------------------------------------------------------


@attrs.frozen
class Row:
    """One row of the contract: a command and the decision it must produce."""

    command: str
    behavior: str
    reason: str | None = None
    context: str | None = None
    input: dict[str, Any] | None = None


DECISION_ROWS: dict[str, Row] = {
    "exit0-no-output": Row("exit 0", "allow"),
    "exit0-blank-lines": Row("printf '\\n   \\n\\t\\n'", "allow"),
    "exit0-stderr-only": Row("echo 'just a warning' >&2", "allow"),
    "exit0-plain-text": Row("echo 'remember: run the tests'", "context", context="remember: run the tests"),
    "exit0-multiline-text": Row("printf 'line one\\nline two\\n'", "context", context="line one\nline two"),
    "exit0-text-stripped": Row("printf '\\n  padded  \\n\\n'", "context", context="padded"),
    "json-deny": Row(
        """echo '{"behavior": "deny", "reason": "Destructive command blocked."}'""",
        "deny",
        reason="Destructive command blocked.",
    ),
    "json-deny-no-reason": Row("""echo '{"behavior": "deny"}'""", "deny"),
    "json-deny-stderr-ignored": Row(
        """echo noise >&2; echo '{"behavior": "deny", "reason": "from json"}'""",
        "deny",
        reason="from json",
    ),
    "json-modify": Row(
        """echo '{"behavior": "modify", "input": {"path": "safe.txt", "n": [1, 2]}}'""",
        "modify",
        input={"path": "safe.txt", "n": [1, 2]},
    ),
    "json-context": Row(
        """echo '{"behavior": "context", "context": "Note shown to the model."}'""",
        "context",
        context="Note shown to the model.",
    ),
    "json-allow": Row("""echo '{"behavior": "allow"}'""", "allow"),
    "json-extra-keys-ignored": Row(
        """echo '{"behavior": "allow", "my_note": "hooks may add keys"}'""", "allow"
    ),
    "json-indented-multiline": Row(
        """printf '  {\\n  "behavior": "deny",\\n  "reason": "pretty"\\n}\\n'""",
        "deny",
        reason="pretty",
    ),
    "exit2-reason-stderr": Row("echo 'on stdout'; echo 'protected: .env' >&2; exit 2", "deny", reason="protected: .env"),
    "exit2-reason-stdout-when-stderr-empty": Row("echo 'protected: .env'; exit 2", "deny", reason="protected: .env"),
    "exit2-stderr-blank-falls-back": Row("echo 'from stdout'; echo '   ' >&2; exit 2", "deny", reason="from stdout"),
    "exit2-no-output": Row("exit 2", "deny"),
    "exit2-json-is-just-a-reason": Row(
        """echo '{"behavior": "allow"}'; exit 2""", "deny", reason='{"behavior": "allow"}'
    ),
    "not-json-brace": Row("echo '{not json'", "context", context="{not json"),
    "not-an-object-number": Row("echo 42", "context", context="42"),
    "not-an-object-array": Row("echo '[1]'", "context", context="[1]"),
    "not-an-object-string": Row("""echo '"quoted"'""", "context", context='"quoted"'),
    "json-then-trailing-text": Row(
        """echo '{"behavior": "deny"} and more'""", "context", context='{"behavior": "deny"} and more'
    ),
}


@pytest.mark.parametrize("row", list(DECISION_ROWS.values()), ids=list(DECISION_ROWS))
def test_command_decision(fire: Fire, row: Row) -> None:
    """Every successful row of the table: the decision taken and the one recorded agree."""
    fired = fire(row.command)
    assert fired.error is None
    assert fired.state["last_error"] is None
    assert fired.decision.behavior == row.behavior
    assert fired.record["status"] == row.behavior
    assert fired.state["last_status"] == row.behavior
    recorded = fired.record["decision"]
    assert recorded.get("reason") == row.reason
    assert recorded.get("context") == row.context
    assert recorded.get("input") == row.input
    assert fired.decision.context == row.context
    assert fired.decision.input == row.input
    if row.behavior == "deny":
        assert fired.decision.denied_by == (HOOK_ID,)
        assert fired.decision.reason is not None
        assert HOOK_ID in fired.decision.reason
        if row.reason is not None:
            assert row.reason in fired.decision.reason
    else:
        assert fired.decision.reason is None


@attrs.frozen
class FailRow:
    command: str
    #: Fragments the recorded error must contain, so a user can act on it.
    fragments: tuple[str, ...]
    files: Mapping[str, str] = attrs.field(factory=dict)
    #: Mode for the files (0o644: the script lost its run bit).
    file_mode: int | None = None


FAIL_ROWS: dict[str, FailRow] = {
    "exit1": FailRow("echo 'boom happened' >&2; exit 1", ("exited with status 1", "boom happened")),
    "exit3": FailRow("exit 3", ("exited with status 3",)),
    "exit1-stdout-decision-ignored": FailRow(
        """echo '{"behavior": "deny", "reason": "no"}'; exit 1""", ("exited with status 1",)
    ),
    "exit127-command-not-found": FailRow(
        "no-such-command-hookbus-test", ("exited with status 127 (command not found)", "no-such-command-hookbus-test")
    ),
    "exit126-no-run-bit": FailRow(
        '"$HOOKBUS_HOOK_DIR/script.sh"',
        ("exited with status 126", "chmod +x", "script.sh"),
        files={"script.sh": "#!/bin/bash\nexit 0\n"},
        file_mode=0o644,
    ),
    "killed-by-sigkill": FailRow("kill -9 $$", ("killed by SIGKILL",)),
    "killed-by-sigterm": FailRow("kill -TERM $$", ("killed by SIGTERM",)),
    "json-unknown-keys": FailRow("""echo '{"verdict": "no"}'""", ("not understood (keys 'verdict')", "Claude Code's")),
    "json-unknown-behavior": FailRow("""echo '{"behavior": "block"}'""", ('"behavior"', "'block'")),
    "json-behavior-wrong-case": FailRow("""echo '{"behavior": "DENY"}'""", ('"behavior"', "'DENY'")),
    "json-reason-without-behavior": FailRow("""echo '{"reason": "nope"}'""", ("not understood (keys 'reason')",)),
    "json-deny-reason-not-string": FailRow("""echo '{"behavior": "deny", "reason": 5}'""", ('"reason" must be a string',)),
    "json-modify-without-input": FailRow("""echo '{"behavior": "modify"}'""", ('modify needs an object in "input"',)),
    "json-modify-input-not-object": FailRow(
        """echo '{"behavior": "modify", "input": ["a"]}'""", ('modify needs an object in "input"',)
    ),
    "json-context-missing": FailRow("""echo '{"behavior": "context"}'""", ('context needs a non-empty string',)),
    "json-context-blank": FailRow(
        """echo '{"behavior": "context", "context": "   "}'""", ('context needs a non-empty string',)
    ),
}


@pytest.mark.parametrize("row", list(FAIL_ROWS.values()), ids=list(FAIL_ROWS))
def test_command_fails_open(fire: Fire, write_hook: HookWriter, row: FailRow) -> None:
    """Other exits, signals and invalid JSON decisions allow, with an actionable error."""
    if row.files:
        hook_dir = write_hook(HOOK_ID, command="true").parent
        for name, content in row.files.items():
            (hook_dir / name).write_text(content)
            if row.file_mode is not None:
                (hook_dir / name).chmod(row.file_mode)
    fired = fire(row.command)
    assert_failed_open(fired, *row.fragments)
    assert fired.record["decision"] == {"behavior": "allow"}


def test_exit_1_output_is_not_context(fire: Fire) -> None:
    """A failing hook's stdout is not injected: fail open means no opinion at all."""
    fired = fire("echo 'half-finished analysis'; exit 1")
    assert_failed_open(fired, "exited with status 1")
    assert fired.decision.context is None


def test_failure_error_is_also_in_the_log(fire: Fire, home: Path) -> None:
    """The audit log carries the same error as state.json (the spec names both places)."""
    fired = fire("echo 'bad config' >&2; exit 4")
    (entry,) = read_log(home)
    assert entry["error"] == fired.state["last_error"] == "exited with status 4: bad config"


def test_user_prompt_submit_modify_without_prompt_fails_open(fire: Fire) -> None:
    """UserPromptSubmit's modify rewrites input.prompt; without it there is nothing to apply."""
    fired = fire(
        """echo '{"behavior": "modify", "input": {"text": "rewritten"}}'""",
        event="UserPromptSubmit",
        envelope={"prompt": "original"},
    )
    assert_failed_open(fired, "UserPromptSubmit", "input.prompt")


def test_user_prompt_submit_modify_prompt_not_a_string_fails_open(fire: Fire) -> None:
    fired = fire(
        """echo '{"behavior": "modify", "input": {"prompt": 42}}'""",
        event="UserPromptSubmit",
        envelope={"prompt": "original"},
    )
    assert_failed_open(fired, "input.prompt")


def test_user_prompt_submit_modify_with_prompt_rewrites(fire: Fire) -> None:
    """The positive control of the two cases above."""
    fired = fire(
        """echo '{"behavior": "modify", "input": {"prompt": "rewritten"}}'""",
        event="UserPromptSubmit",
        envelope={"prompt": "original"},
    )
    assert fired.error is None
    assert fired.decision.behavior == "modify"
    assert fired.decision.input == {"prompt": "rewritten"}


LONG = MAX_CONTEXT_CHARS + 2_345


@pytest.mark.parametrize(
    "command",
    [
        f"head -c {LONG} /dev/zero | tr '\\0' x",
        f"""printf '{{"behavior": "context", "context": "%s"}}' "$(head -c {LONG} /dev/zero | tr '\\0' x)" """,
    ],
    ids=["plain-text", "json-context"],
)
def test_long_context_is_cut_with_a_marker(fire: Fire, command: str) -> None:
    """Context over 10,000 chars is cut, and the cut is visible to the model."""
    fired = fire(command)
    assert fired.error is None
    context = fired.decision.context
    assert context is not None
    assert context.startswith("x" * MAX_CONTEXT_CHARS + "\n")
    assert "x" * (MAX_CONTEXT_CHARS + 1) not in context
    assert f"{TRUNCATED} {LONG - MAX_CONTEXT_CHARS} more characters]" in context
    assert fired.record["decision"]["context"] == context


def test_long_deny_reason_is_cut_with_a_marker(fire: Fire) -> None:
    fired = fire(f"head -c {LONG} /dev/zero | tr '\\0' r >&2; exit 2")
    reason = fired.record["decision"]["reason"]
    assert fired.decision.behavior == "deny"
    assert reason.startswith("r" * MAX_CONTEXT_CHARS + "\n")
    assert TRUNCATED in reason


def test_context_of_exactly_the_limit_is_not_cut(fire: Fire) -> None:
    fired = fire(f"head -c {MAX_CONTEXT_CHARS} /dev/zero | tr '\\0' x")
    assert fired.decision.context == "x" * MAX_CONTEXT_CHARS


# -- the contract as a function -----------------------------------------------------------


def fail(error: str) -> Outcome:
    """A failed command: killed by a signal, or crashed (any other non-zero exit)."""
    return Outcome.fail_open(error, failure="killed" if error.startswith("killed by") else "crash")


COMMAND_UNIT_ROWS: dict[str, tuple[int, bytes, bytes, Outcome]] = {
    "exit0-no-output": (0, b"", b"", Outcome("allow")),
    "exit0-whitespace": (0, b" \n\t\n", b"warning\n", Outcome("allow")),
    "exit0-text": (0, b"hello\n", b"", Outcome("context", context="hello")),
    "exit0-text-ignores-stderr": (0, b"hello\n", b"noise\n", Outcome("context", context="hello")),
    "exit0-non-utf8": (0, b"caf\xe9\n", b"", Outcome("context", context="caf\ufffd")),
    "json-deny": (0, b'{"behavior":"deny","reason":"no"}', b"", Outcome("deny", reason="no")),
    "json-deny-reason-stripped": (0, b'{"behavior":"deny","reason":"  no \\n"}', b"", Outcome("deny", reason="no")),
    "json-deny-null-reason": (0, b'{"behavior":"deny","reason":null}', b"", Outcome("deny")),
    "json-modify": (0, b'{"behavior":"modify","input":{"a":1}}', b"", Outcome("modify", input={"a": 1})),
    "json-context": (0, b'{"behavior":"context","context":" c "}', b"", Outcome("context", context="c")),
    "json-allow": (0, b'{"behavior":"allow"}\n', b"", Outcome("allow")),
    "not-json-brace": (0, b"{not json\n", b"", Outcome("context", context="{not json")),
    "not-object-42": (0, b"42\n", b"", Outcome("context", context="42")),
    "not-object-list": (0, b"[1]\n", b"", Outcome("context", context="[1]")),
    "not-object-null": (0, b"null\n", b"", Outcome("context", context="null")),
    "exit2-stderr": (2, b"out\n", b"err\n", Outcome("deny", reason="err")),
    "exit2-stdout": (2, b"out\n", b"", Outcome("deny", reason="out")),
    "exit2-blank-stderr": (2, b"out\n", b"  \n", Outcome("deny", reason="out")),
    "exit2-nothing": (2, b"", b"", Outcome("deny")),
    "exit2-json-stdout-is-reason": (2, b'{"behavior":"allow"}', b"", Outcome("deny", reason='{"behavior":"allow"}')),
    "exit1": (1, b"", b"", fail("exited with status 1")),
    "exit1-stderr-tail": (1, b"ignored", b"boom\n", fail("exited with status 1: boom")),
    "exit1-json-ignored": (1, b'{"behavior":"deny"}', b"", fail("exited with status 1")),
    "exit3": (3, b"", b"", fail("exited with status 3")),
    "exit127": (127, b"", b"bash: x: command not found\n", fail("exited with status 127 (command not found): bash: x: command not found")),
    "exit126": (126, b"", b"", fail("exited with status 126 (not executable: check the script's run bit, chmod +x)")),
    "sigkill": (-signal.SIGKILL, b"ok", b"", fail("killed by SIGKILL")),
    "sigterm": (-signal.SIGTERM, b"", b"bye\n", fail("killed by SIGTERM: bye")),
    "unknown-signal": (-99, b"", b"", fail("killed by signal 99")),
}


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "expected"),
    list(COMMAND_UNIT_ROWS.values()),
    ids=list(COMMAND_UNIT_ROWS),
)
def test_outcome_from_command(returncode: int, stdout: bytes, stderr: bytes, expected: Outcome) -> None:
    assert outcome_from_command(returncode, stdout, stderr) == expected


INVALID_DECISIONS: dict[str, tuple[str, str]] = {
    "unknown-keys": ('{"verdict":"no","why":1}', "not understood (keys 'verdict', 'why'); hookbus reads hookbus's"),
    "behavior-null": ('{"behavior":null}', '"behavior" set to one of allow, deny, modify, context (got None)'),
    "unknown-behavior": ('{"behavior":"block"}', "(got 'block')"),
    "behavior-not-string": ('{"behavior":1}', "(got 1)"),
    "reason-not-string": ('{"behavior":"deny","reason":["a"]}', '"reason" must be a string'),
    "modify-no-input": ('{"behavior":"modify"}', 'modify needs an object in "input"'),
    "modify-input-string": ('{"behavior":"modify","input":"x"}', 'modify needs an object in "input"'),
    "context-missing": ('{"behavior":"context"}', 'context needs a non-empty string in "context"'),
    "context-not-string": ('{"behavior":"context","context":7}', 'context needs a non-empty string'),
    "context-blank": ('{"behavior":"context","context":" "}', 'context needs a non-empty string'),
}


@pytest.mark.parametrize(("text", "fragment"), list(INVALID_DECISIONS.values()), ids=list(INVALID_DECISIONS))
def test_outcome_from_text_invalid_decision_fails_open(text: str, fragment: str) -> None:
    """A JSON object that says nothing valid is an error, not context: the author meant JSON."""
    outcome = outcome_from_text(text)
    assert outcome.behavior == "allow"
    assert outcome.error is not None and fragment in outcome.error
    assert outcome == Outcome.fail_open(outcome.error, failure="unparseable")
    # Through the command contract too, as exit 0.
    assert outcome_from_command(0, text.encode(), b"") == outcome


def test_outcome_from_text_caps_context() -> None:
    outcome = outcome_from_text("y" * (MAX_CONTEXT_CHARS + 1))
    assert outcome == Outcome(
        "context", context="y" * MAX_CONTEXT_CHARS + "\n[hookbus: truncated 1 more characters]"
    )
    assert outcome_from_text("y" * MAX_CONTEXT_CHARS).context == "y" * MAX_CONTEXT_CHARS


def test_outcome_from_text_deeply_nested_json_fails_open_with_the_reason() -> None:
    """A pathological object must not raise (RecursionError) out of the contract, and what
    looks like a JSON decision is not handed to the model as context either."""
    text = '{"a":' * 100_000
    outcome = outcome_from_text(text)
    assert outcome.behavior == "allow"
    assert outcome.error == "JSON decision could not be read: it is nested too deeply"


DUPLICATE_KEYS: dict[str, tuple[str, str]] = {
    "top-level": ('{"behavior":"deny","reason":"x","behavior":"allow"}', "behavior"),
    "nested-in-input": ('{"behavior":"modify","input":{"path":"a","nested":{"p":1,"p":2}}}', "p"),
    "claude-shape": (
        '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecision":"allow"}}',
        "permissionDecision",
    ),
    "same-value-twice": ('{"behavior":"allow","behavior":"allow"}', "behavior"),
}


@pytest.mark.parametrize(("text", "key"), list(DUPLICATE_KEYS.values()), ids=list(DUPLICATE_KEYS))
def test_a_decision_that_names_a_key_twice_is_unparseable(text: str, key: str) -> None:
    """Which value counts would be a guess (json keeps the last): refused, as spec files do."""
    message = (
        f"JSON decision could not be read: duplicate key {key!r} "
        "(a reader would have to guess which value counts); name each key once"
    )
    expected = Outcome.fail_open(message, failure="unparseable")
    assert outcome_from_text(text, "PreToolUse") == expected
    assert outcome_from_command(0, text.encode(), b"", "PreToolUse") == expected
    assert outcome_from_final_text(text, "PreToolUse") == expected
    assert outcome_from_final_text(f"Verdict:\n```json\n{text}\n```", "PreToolUse") == expected


def test_text_with_a_repeated_key_that_is_not_json_stays_text() -> None:
    """Only a JSON document can be an unreadable decision; words with braces are words."""
    text = '{"a": 1, "a": 2} is how a repeated key looks'
    assert outcome_from_text(text) == Outcome("context", context=text)
    assert outcome_from_final_text(text) == Outcome("context", context=text)


def test_a_final_text_that_is_unreadable_json_is_unparseable_not_context() -> None:
    """A final text that is a JSON object hookbus cannot read was meant as a decision: it is
    the hook's failure (failing closed under on_error deny), as in a command's output. A
    JSON object that is readable but no decision is still only text."""
    for text in ('{"behavior": "deny", "reason": NaN}', '{"behavior": "deny", "n": ' + "9" * 5000 + "}"):
        outcome = outcome_from_final_text(text)
        assert outcome.failure == "unparseable" and outcome.behavior == "allow", outcome
        assert outcome.error is not None and outcome.error.startswith("JSON decision")
    assert outcome_from_final_text('{"verdict": "deny"}') == Outcome("context", context='{"verdict": "deny"}')


def test_failure_error_keeps_only_the_tail_of_stderr() -> None:
    """A chatty failing hook must not flood state.json; the end of stderr is what matters."""
    stderr = ("x" * 2_000 + "THE-END").encode()
    outcome = outcome_from_command(1, b"", stderr)
    assert outcome.error == "exited with status 1: " + stderr.decode()[-ERROR_TAIL_CHARS:]
    assert outcome.error.endswith("THE-END")


# -- what a command hook receives ---------------------------------------------------------


def test_envelope_arrives_on_stdin_untouched(fire: Fire) -> None:
    """The envelope is the embedder's fields, as given, plus hook_event_name."""
    envelope: dict[str, Any] = {
        "thread_id": "t-1",
        "cwd": "/definitely/not/here",
        "turn_count": 3,
        "headless": False,
        "origin": "user",
        "tool_name": "write_file",
        "tool_input": {"path": "a.txt", "content": "héllo \"quoted\"\n\ttab ✓", "n": None},
        "nested": {"list": [1, 2.5, {"k": True}]},
    }
    original = json.loads(json.dumps(envelope))
    fired = fire('cat > "$HOOKBUS_HOOK_DIR/seen.json"', envelope=envelope)
    assert fired.decision == Decision("allow")
    seen = json.loads((fired.hook_dir / "seen.json").read_text())
    assert seen == {**original, "hook_event_name": "PreToolUse"}
    assert envelope == original, "emit must not mutate the embedder's envelope"


def test_envelope_is_never_interpolated_into_the_command(fire: Fire, tmp_path: Path) -> None:
    """Shell syntax in tool_input stays data: the hook gets it on stdin, bash never sees it."""
    markers = [tmp_path / name for name in ("pwned", "pwned-backtick", "pwned-quote")]
    tool_input = {
        "command": f"$(touch {markers[0]})",
        "path": f"`touch {markers[1]}`",
        "note": f"'; touch {markers[2]}; '",
    }
    fired = fire(
        'input=$(cat); printf "%s" "$input" > "$HOOKBUS_HOOK_DIR/seen.json"; '
        'echo "[${tool_name:-unset}] {tool_input} %(tool_name)s"',
        envelope={"tool_name": "bash", "tool_input": tool_input},
    )
    for marker in markers:
        assert not marker.exists(), f"{marker.name} was created: the envelope reached a shell"
    assert json.loads((fired.hook_dir / "seen.json").read_text())["tool_input"] == tool_input
    # Nothing templated into the command, nothing exported as variables either.
    assert fired.decision.context == "[unset] {tool_input} %(tool_name)s"


@pytest.mark.parametrize(
    ("event", "blocking", "envelope"),
    [
        ("PreToolUse", True, TOOL_ENVELOPE),
        ("PostToolUse", False, TOOL_ENVELOPE),
        ("UserPromptSubmit", True, {"prompt": "hi"}),
        ("Stop", False, {}),
    ],
)
def test_environment_names_hook_and_event(
    fire: Fire, home: Path, event: str, blocking: bool, envelope: dict[str, Any]
) -> None:
    fired = fire(
        'printf "%s|%s|%s" "$HOOKBUS_HOOK_ID" "$HOOKBUS_HOOK_DIR" "$HOOKBUS_EVENT"',
        event=event,
        blocking=blocking,
        envelope=envelope,
        hook_id="env-hook",
    )
    assert fired.decision.context == f"env-hook|{home / 'hooks' / 'env-hook'}|{event}"


def test_environment_is_inherited(fire: Fire, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks see the daemon's environment (PATH, HOME, ...) plus the HOOKBUS_ variables."""
    monkeypatch.setenv("HOOKBUS_TEST_INHERITED", "from-the-daemon")
    fired = fire('echo "$HOOKBUS_TEST_INHERITED"')
    assert fired.decision.context == "from-the-daemon"


# -- the working directory ----------------------------------------------------------------

PWD = "pwd -P"


def resolved(path: Path) -> str:
    return str(path.resolve())


def test_cwd_empty_uses_the_envelope_cwd(fire: Fire, tmp_path: Path) -> None:
    workdir = tmp_path / "project"
    workdir.mkdir()
    fired = fire(PWD, envelope={**TOOL_ENVELOPE, "cwd": str(workdir)})
    assert fired.decision.context == resolved(workdir)


@pytest.mark.parametrize(
    "envelope_cwd",
    [None, "/no/such/dir/hookbus-test", 5, ""],
    ids=["absent", "missing-dir", "not-a-string", "empty"],
)
def test_cwd_empty_falls_back_to_the_hook_directory(fire: Fire, envelope_cwd: object) -> None:
    envelope = dict(TOOL_ENVELOPE)
    if envelope_cwd is not None:
        envelope["cwd"] = envelope_cwd
    fired = fire(PWD, envelope=envelope)
    assert fired.error is None
    assert fired.decision.context == resolved(fired.hook_dir)


def test_cwd_empty_envelope_cwd_that_is_a_file_falls_back(fire: Fire, tmp_path: Path) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    fired = fire(PWD, envelope={**TOOL_ENVELOPE, "cwd": str(a_file)})
    assert fired.decision.context == resolved(fired.hook_dir)


def test_cwd_in_spec_wins_over_the_envelope(fire: Fire, tmp_path: Path) -> None:
    configured, other = tmp_path / "configured", tmp_path / "other"
    configured.mkdir()
    other.mkdir()
    fired = fire(PWD, cwd=str(configured), envelope={**TOOL_ENVELOPE, "cwd": str(other)})
    assert fired.decision.context == resolved(configured)


def test_cwd_tilde_is_expanded(fire: Fire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_home = tmp_path / "user-home"
    (fake_home / "work").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(fake_home))
    fired = fire(PWD, cwd="~/work")
    assert fired.decision.context == resolved(fake_home / "work")


@pytest.mark.parametrize("spelling", ["$HOOKBUS_TEST_DIR/sub", "${HOOKBUS_TEST_DIR}/sub"])
def test_cwd_variables_are_expanded(
    fire: Fire, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    target = tmp_path / "vars" / "sub"
    target.mkdir(parents=True)
    monkeypatch.setenv("HOOKBUS_TEST_DIR", str(tmp_path / "vars"))
    fired = fire(PWD, cwd=spelling)
    assert fired.decision.context == resolved(target)


@pytest.mark.parametrize("spelling", ["$HOOKBUS_HOOK_DIR/sub", "${HOOKBUS_HOOK_DIR}/sub"])
def test_cwd_expands_the_hook_directory_variable(
    fire: Fire, write_hook: HookWriter, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """Was: HOOKBUS_HOOK_DIR is set for the command but not in the daemon, so the cwd
    stayed a literal "$HOOKBUS_HOOK_DIR/sub" under the hook's directory and the hook failed."""
    monkeypatch.delenv("HOOKBUS_HOOK_DIR", raising=False)
    hook_dir = write_hook(HOOK_ID, command="true").parent
    (hook_dir / "sub").mkdir()
    fired = fire(PWD, cwd=spelling)
    assert fired.error is None
    assert fired.decision.context == resolved(hook_dir / "sub")


def test_cwd_expands_the_specs_own_env(fire: Fire, tmp_path: Path) -> None:
    """The variables of the spec's env are the command's, so the cwd sees them too."""
    target = tmp_path / "from-env"
    target.mkdir()
    fired = fire(PWD, cwd="$HOOKBUS_TEST_WORK", env={"HOOKBUS_TEST_WORK": str(target)})
    assert fired.decision.context == resolved(target)


def test_cwd_relative_is_taken_from_the_hook_directory(
    fire: Fire, write_hook: HookWriter, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Relative to the hook, not to wherever the daemon happens to run."""
    hook_dir = write_hook(HOOK_ID, command="true").parent
    (hook_dir / "sub" / "dir").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub" / "dir").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    fired = fire(PWD, cwd="sub/dir")
    assert fired.decision.context == resolved(hook_dir / "sub" / "dir")


@pytest.mark.parametrize("configured", ["/no/such/dir/hookbus-test", "missing-sub"], ids=["absolute", "relative"])
def test_cwd_that_does_not_exist_fails_open_naming_it(fire: Fire, home: Path, configured: str) -> None:
    fired = fire("echo should-not-run", cwd=configured)
    expected_path = Path(configured) if configured.startswith("/") else home / "hooks" / HOOK_ID / configured
    assert_failed_open(fired, str(expected_path), "does not exist")
    assert fired.decision.context is None


@pytest.mark.parametrize("configured", ["hook.json", "hook.json/sub"], ids=["file", "under-a-file"])
def test_cwd_that_is_not_a_directory_fails_open_naming_it(fire: Fire, home: Path, configured: str) -> None:
    """Pointing cwd at the script instead of its directory is an easy mistake: say so."""
    fired = fire("echo should-not-run", cwd=configured)
    assert_failed_open(fired, str(home / "hooks" / HOOK_ID / configured))


@pytest.fixture(autouse=True)
def _children_are_reaped() -> Iterator[None]:
    """No hook leaves a child of this process behind, running or as an unreaped zombie."""
    before = _children()
    yield
    assert _children() - before == set()


def _children() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(entry))
    return found
