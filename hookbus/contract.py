"""The decision contracts: how a command's exit and output, or a final text, become an Outcome.

They live in the core so that every runner, first-party or not, decides the same way:
``outcome_from_command`` for processes (exit code and stdout), ``outcome_from_final_text``
for workflows, prompts and anything else that answers with text.
"""

from __future__ import annotations

import json
import re
import signal
from typing import Any

from hookbus.dialects.claude_output import (
    UNDERSTOOD,
    ForeignDecisionError,
    is_foreign,
    outcome_from_codex,
    outcome_from_foreign,
)
from hookbus.decision import BEHAVIORS, Outcome, cap_text
from hookbus.errors import json_limit_message
from hookbus.jsontext import LONE_SURROGATE, DuplicateKeyError, unique_keys

# What bash (older: "bad interpreter"; 5.2: "required file not found") and env say when a
# script's #! line names a program that does not exist.
_BAD_INTERPRETER = re.compile(
    rb"bad interpreter|cannot execute: required file not found|^/usr/bin/env: .*No such file", re.MULTILINE
)

#: How much of a failing command's stderr is kept in the recorded error.
ERROR_TAIL_CHARS = 500


class DecisionError(ValueError):
    """A JSON decision object that does not say anything valid."""


class UnreadableDecision(DecisionError):
    """A JSON object hookbus cannot read for sure: a key named twice, NaN, past Python's
    limits. In a command's output and in a final text alike, it is the hook's failure
    ("unparseable"), never text: whatever it was meant to say, reading it as allow or as
    context would be hookbus's guess."""


def outcome_from_object(decision: dict[str, Any], event: str | None = None) -> Outcome:
    """The explicit decision in a JSON object; DecisionError when it is not a valid one.

    hookbus's own shape has ``behavior``; keys other than behavior, reason, input and
    context are ignored, so hooks may add their own notes. Without ``behavior``, Claude
    Code's and Gemini CLI's shapes decide as those CLIs would on ``event``, and ``{}``
    allows.
    """
    behavior = decision.get("behavior")
    if behavior is None and "behavior" not in decision:
        if not decision:
            return Outcome("allow")
        if is_foreign(decision):
            try:
                return outcome_from_foreign(decision, event)
            except ForeignDecisionError as exc:
                raise DecisionError(f"JSON decision (Claude Code's shape): {exc}") from None
        keys = ", ".join(repr(key)[:40] for key in list(decision)[:5])
        raise DecisionError(f"JSON decision not understood (keys {keys}); hookbus reads {UNDERSTOOD}")
    if behavior not in BEHAVIORS:
        allowed = ", ".join(BEHAVIORS)
        raise DecisionError(
            f'JSON decision needs "behavior" set to one of {allowed} (got {behavior!r:.60})'
        )
    if behavior == "deny":
        reason = decision.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise DecisionError('JSON decision: "reason" must be a string')
        return _deny(reason.strip() if reason else None)
    if behavior == "modify":
        new_input = decision.get("input")
        if not isinstance(new_input, dict):
            raise DecisionError('JSON decision: modify needs an object in "input"')
        return Outcome("modify", input=new_input)
    if behavior == "context":
        context = decision.get("context")
        if not isinstance(context, str) or not context.strip():
            raise DecisionError('JSON decision: context needs a non-empty string in "context"')
        return Outcome("context", context=cap_text(context.strip()))
    return Outcome("allow")


def outcome_from_value(value: Any, event: str | None = None, what: str = "the value") -> Outcome:
    """A policy engine's value (a CEL expression's, a Rego query's) read as a command hook's
    JSON decision: a map decides as that object would, ``None`` (and ``{}``) is no opinion,
    and anything else is the hook's failure ("unparseable"), named by ``what``, so that its
    ``on_error`` decides. The value is the Outcome's ``answer``, for ``explain``."""
    if value is None:
        return Outcome("allow", answer=None)
    # Lone surrogates out, as from a command's output: the reason must reach a host as JSON,
    # and the answer be printable by ``explain``.
    value = _scrub_surrogates(value)
    if isinstance(value, dict):
        try:
            outcome = outcome_from_object(value, event)
        except DecisionError as exc:
            return Outcome("allow", error=f"{what}: {exc}", failure="unparseable", answer=value)
        # Set in place: the Outcome was made for this call alone, and attrs.evolve costs
        # about as much as evaluating a CEL expression (5 µs).
        object.__setattr__(outcome, "answer", value)
        return outcome
    return Outcome(
        "allow",
        error=(
            f"{what} is {_value_kind(value)}, not a decision: evaluate to a map such as "
            "{'behavior': 'deny', 'reason': '...'}, or to null for no opinion"
        ),
        failure="unparseable",
        answer=value,
    )


def _value_kind(value: Any) -> str:
    """``a bool (true)``, ``a list of 3``: what a value is, for a message, shown short."""
    if isinstance(value, bool):
        return f"a bool ({str(value).lower()})"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    return f"a {type(value).__name__}"


def _parse_object(text: str) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, or None when it is not JSON or not an object.

    UnreadableDecision when it is a JSON object that cannot be read for sure: one that
    names a key twice at any depth (``{"behavior": "deny", ..., "behavior": "allow"}``:
    which value counts would be a guess), one Python cannot take whole (an integer over
    4,300 digits, nesting past the recursion limit), or one that is not JSON at all (NaN).
    It was meant as a decision, so it must neither be dropped nor pass as context.
    """
    if not text.startswith("{"):
        return None
    try:
        value = _DECODER.decode(text)
    except (UnreadableDecision, DuplicateKeyError) as exc:
        # Both stop the parse where they are met, before a syntax error further on shows.
        if not _is_json(text):
            return None  # text that opens with a brace, not JSON: what it holds is words
        if isinstance(exc, UnreadableDecision):
            raise
        raise UnreadableDecision(
            f"JSON decision could not be read: {exc} (a reader would have to guess which value counts); "
            "name each key once"
        ) from None
    except json.JSONDecodeError:
        return None
    except ValueError as exc:
        raise UnreadableDecision(f"JSON decision could not be read: {json_limit_message(exc)}") from None
    except RecursionError:
        raise UnreadableDecision("JSON decision could not be read: it is nested too deeply") from None
    if not isinstance(value, dict):
        return None
    if "\\u" in text:  # only an escape can make a lone surrogate, which is not text
        scrubbed: dict[str, Any] = _scrub_surrogates(value)
        return scrubbed
    return value


def _is_json(text: str) -> bool:
    """Whether ``text`` is one JSON document as ``json`` reads it (repeated keys and NaN
    taken), whatever else is wrong with it."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    except (ValueError, RecursionError):
        return True  # past Python's limits: JSON all the same
    return True


def _refuse_constant(name: str) -> Any:
    raise UnreadableDecision(f"JSON decision: {name} is not valid JSON (use a number or null)")


#: Made once: ``json.loads`` with options builds a decoder on every call, which costs more
#: than reading a small decision. Threads may share it: a decode keeps nothing of its own
#: in it but the scanner's key cache, which only saves memory.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=unique_keys)


def _scrub_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate (a ``\\ud800`` escape with no partner) replaced by
    U+FFFD, as undecodable output bytes are: the decision stays text a log can hold. A copy,
    made without recursion: a policy engine's value may be nested as deep as an envelope."""

    def fix(item: Any) -> Any:
        if isinstance(item, str):
            return LONE_SURROGATE.sub("\ufffd", item) if not item.isascii() else item
        if isinstance(item, dict):
            fixed = {fix(key): element for key, element in item.items()}
            pending.append(fixed)
            return fixed
        if isinstance(item, list):
            copied = list(item)
            pending.append(copied)
            return copied
        return item

    pending: list[Any] = []
    top = fix(value)
    while pending:
        container = pending.pop()
        if isinstance(container, dict):
            for key in container:
                container[key] = fix(container[key])
        else:
            for index, element in enumerate(container):
                container[index] = fix(element)
    return top


def _deny(reason: str | None) -> Outcome:
    """Deny, with ``reason`` capped; an empty reason is no reason."""
    return Outcome("deny", reason=cap_text(reason) if reason else None)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").strip()


#: Where Claude Code adds a command's plain stdout to the model's context; elsewhere it only
#: shows it in the transcript view. (ThreadStart is its SessionStart.)
_CLAUDE_PLAIN_TEXT_EVENTS = frozenset({"UserPromptSubmit", "ThreadStart"})


def outcome_from_text(text: str, event: str | None = None, dialect: str | None = None) -> Outcome:
    """Exit-0 output of a command: nothing is allow, a JSON object decides, text is context
    (for a ``claude-code`` dialect hook, only where Claude Code makes it context)."""
    text = text.strip()
    if not text:
        return Outcome("allow")
    try:
        decision = _parse_object(text)
        if decision is None:
            if dialect == "codex" and text.startswith("{"):
                # Codex reads what opens with a brace as JSON: not JSON, it reports "Failed".
                return Outcome.fail_open("invalid JSON output (Codex CLI reports the hook Failed)", failure="unparseable")
            if dialect in ("claude-code", "codex") and event not in _CLAUDE_PLAIN_TEXT_EVENTS:
                return Outcome("allow")
            return Outcome("context", context=cap_text(text))
        if dialect == "codex":
            return _codex_object(decision, event)
        return outcome_from_object(decision, event)
    except DecisionError as exc:
        return Outcome.fail_open(str(exc), failure="unparseable")


def _codex_object(decision: dict[str, Any], event: str | None) -> Outcome:
    """A ``codex`` dialect hook's JSON output, read as Codex CLI reads it."""
    try:
        return outcome_from_codex(decision, event)
    except ForeignDecisionError as exc:
        raise DecisionError(f"JSON output (Codex CLI's shape): {exc}") from None


def describe_exit(returncode: int, stderr: bytes) -> str:
    """A recorded error a user can act on: status, the likely cause, the end of stderr."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        message = f"killed by {name}"
    else:
        message = f"exited with status {returncode}"
        if returncode in (126, 127) and _BAD_INTERPRETER.search(stderr):
            message += " (bad interpreter: the script's #! line names a program that is not installed)"
        elif returncode == 127:
            message += " (command not found)"
        elif returncode == 126:
            message += " (not executable: check the script's run bit, chmod +x)"
    tail = _decode(stderr)[-ERROR_TAIL_CHARS:]
    return f"{message}: {tail}" if tail else message


def outcome_from_command(
    returncode: int, stdout: bytes, stderr: bytes, event: str | None = None, dialect: str | None = None
) -> Outcome:
    """The command contract, row by row as the spec states it.

    - exit 0 and no output: allow; exit 0 and plain text: that text as context;
      exit 0 and a JSON object: that decision (an invalid one fails open, recorded).
    - exit 2: deny; the reason is stderr, or stdout when stderr is empty.
    - any other exit, or a signal: allow (fail open), with the error recorded.

    A ``claude-code`` dialect hook follows Claude Code's channels instead: plain stdout is
    context only on UserPromptSubmit and ThreadStart, and exit 2's reason is stderr alone,
    fed to the model on PostToolUse (context) and Stop/SubagentStop (continue_with). A
    ``codex`` one follows Codex CLI's, which are the same but stricter: exit 2 without
    stderr, or on an event where it means nothing, is the hook's failure, as is a JSON
    answer Codex refuses (``claude_output.outcome_from_codex``).
    """
    if returncode == 0:
        return outcome_from_text(_decode(stdout), event, dialect)
    if returncode == 2:
        if dialect == "codex":
            return _codex_exit_2(_decode(stderr), event)
        if dialect == "claude-code":
            return _claude_exit_2(_decode(stderr), event)
        return _deny(_decode(stderr) or _decode(stdout))
    return Outcome.fail_open(describe_exit(returncode, stderr), failure="killed" if returncode < 0 else "crash")


def _claude_exit_2(stderr: str, event: str | None) -> Outcome:
    if event in ("Stop", "SubagentStop"):
        return Outcome(continue_with=cap_text(stderr or "a hook asked to keep going"))
    if event == "PostToolUse":
        return Outcome("context", context=cap_text(stderr)) if stderr else Outcome()
    if event is None or event in ("PreToolUse", "UserPromptSubmit", "PermissionRequest"):
        return _deny(stderr)
    return Outcome()  # Claude Code only shows it to the user


#: Where Codex CLI acts on exit 2 with a reason on stderr.
_CODEX_EXIT_2_EVENTS = frozenset({"PreToolUse", "PermissionRequest", "UserPromptSubmit", "PostToolUse", "Stop", "SubagentStop"})


def _codex_exit_2(stderr: str, event: str | None) -> Outcome:
    if not stderr:
        return Outcome.fail_open(
            "exited with status 2 but wrote no reason on stderr (Codex CLI reports the hook Failed)", failure="crash"
        )
    if event is not None and event not in _CODEX_EXIT_2_EVENTS:
        return Outcome.fail_open(
            f"exited with status 2, which Codex CLI does not act on for {event} (it reports the hook Failed): {stderr[-ERROR_TAIL_CHARS:]}",
            failure="crash",
        )
    return _claude_exit_2(stderr, event)


# A whole reply that is one fenced block: ```json\n{...}\n``` (the language tag optional).
_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*?)\n?```", re.DOTALL)
_BLOCK = re.compile(r"^[ \t]*BLOCK:(?P<reason>.*)$", re.MULTILINE)


def outcome_from_final_text(text: str, event: str | None = None) -> Outcome:
    """The final-text contract of workflows and prompts (and any runner that answers in text).

    - a JSON object with a valid behavior is that decision (also inside a ```json fence);
    - a JSON object that cannot be read for sure (a key named twice, NaN, past Python's
      limits) is the hook's failure ("unparseable"), recorded, and closed under
      ``"on_error": "deny"``;
    - otherwise, a line starting with ``BLOCK:`` denies, with the rest of the line as reason;
    - otherwise, non-empty text becomes context; empty text allows.
    """
    # A provider's reply may carry lone surrogates (JSON escapes): not text, as in decisions.
    text = LONE_SURROGATE.sub("\ufffd", text.replace("\r\n", "\n")).strip()
    if not text:
        return Outcome("allow")
    try:
        decision = _decision_object(text, event)
    except UnreadableDecision as exc:
        return Outcome.fail_open(str(exc), failure="unparseable")
    if decision is not None:
        return decision
    block = _BLOCK.search(text)
    if block is not None:
        return _deny(block.group("reason").strip())
    return Outcome("context", context=cap_text(text))


def _decision_object(text: str, event: str | None) -> Outcome | None:
    """The decision of a reply that is a JSON object, or one fenced JSON object; None when
    it is not one, or has no valid behavior (then it is just text). UnreadableDecision when
    it is one that cannot be read for sure."""
    candidate = _parse_object(text)
    if candidate is None:
        fenced = _FENCED.findall(text)
        if len(fenced) == 1:
            candidate = _parse_object(fenced[0].strip())
    if candidate is None:
        return None
    try:
        return outcome_from_object(candidate, event)
    except DecisionError:
        return None
