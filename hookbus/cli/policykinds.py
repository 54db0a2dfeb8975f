"""What ``hookbus new --kind cel`` and ``--kind rego`` write: an expression or a policy that
does, for the event's sample envelope, what the command kind's script does (deny ``rm -rf``,
a ``.env`` write or an API key in a prompt; otherwise add a line of context), so that the
fixture ``hookbus new`` writes beside it passes as it stands."""

from __future__ import annotations

from typing import Any

#: The file ``--kind rego`` writes beside hook.json, and the query hook.json names.
POLICY_NAME = "policy.rego"
QUERY = "data.hooks.decision"

# RE2 (CEL's matches) and Rego's regex.match take the same syntax: one pattern for both.
_RM_RF = r"(^|[^A-Za-z0-9_-])rm\s+-[A-Za-z]*([rR][A-Za-z]*f|f[A-Za-z]*[rR])"
_DOT_ENV = r"(^|/)(\.env|[^/]*\.env|\.env\.[^/]*)$"
_API_KEY = r"sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{20,}|AKIA[A-Z0-9]{16}"
_API_KEY_REASON = "the prompt holds what looks like an API key: take it out and send the prompt again"


def case_of(event: str, sample: str | None) -> str:
    """Which example fits the event: "bash", "file", "prompt", "failed" or "context"."""
    if event in ("PreToolUse", "PermissionRequest"):
        return "bash" if sample == "bash" else "file"
    if event == "UserPromptSubmit":
        return "prompt"
    if event == "PostToolUse":
        return "failed"
    return "context"


def about(case: str, event: str, field: str | None) -> str:
    """What the example does, in the words ``hookbus new`` prints."""
    return {
        "bash": "denies a bash command that runs rm -rf",
        "file": "denies writing a .env file (secrets)",
        "prompt": "denies a prompt that holds what looks like an API key",
        "failed": "adds a note for the model when a tool call failed (PostToolUse cannot deny)",
    }.get(case, f"adds a line of context naming the {field or 'cwd'} ({event} cannot deny)")


def cel_expression(case: str, event: str, field: str | None) -> str:
    """The ``"cel"`` of the example. ``has()`` first: a field the envelope lacks is an
    evaluation error, which would make the hook fail instead of having no opinion."""
    if case == "bash":
        return (
            f"has(tool_input.command) && tool_input.command.matches(r'{_RM_RF}') "
            "? {'behavior': 'deny', 'reason': 'rm -rf is not allowed here: ' + tool_input.command} : null"
        )
    if case == "file":
        return (
            f"has(tool_input.path) && tool_input.path.matches(r'{_DOT_ENV}') "
            "? {'behavior': 'deny', 'reason': 'writing ' + tool_input.path + ' could leak secrets'} : null"
        )
    if case == "prompt":
        return f"has(envelope.prompt) && prompt.matches(r'{_API_KEY}') ? {{'behavior': 'deny', 'reason': '{_API_KEY_REASON}'}} : null"
    if case == "failed":
        return (
            "has(envelope.is_error) && envelope.is_error == true "
            "? {'behavior': 'context', 'context': 'The ' + tool_name + ' call failed: read its output before relying on what it did.'} : null"
        )
    name = field or "cwd"
    return (
        f"{{'behavior': 'context', 'context': event + ': {name} ' + "
        f"(has(envelope.{name}) ? string(envelope.{name}) : 'unknown') + '.'}}"
    )


_REGO_HEADER = """\
# Made by `hookbus new`: edit it to do what you need. The envelope is `input`.
# `decision` is the hook's answer, read like a command hook's JSON:
#   {"behavior": "deny", "reason": "..."}, {"behavior": "modify", "input": {...}},
#   {"behavior": "context", "context": "..."}; left undefined, no opinion (allow).
package hooks

import rego.v1

"""


def rego_policy(case: str, event: str, field: str | None) -> str:
    """policy.rego of the example."""
    if case == "bash":
        body = f"""\
decision := {{"behavior": "deny", "reason": concat("", ["rm -rf is not allowed here: ", input.tool_input.command])}} if {{
\tregex.match(`{_RM_RF}`, input.tool_input.command)
}}
"""
    elif case == "file":
        body = f"""\
decision := {{"behavior": "deny", "reason": concat("", ["writing ", input.tool_input.path, " could leak secrets"])}} if {{
\tregex.match(`{_DOT_ENV}`, input.tool_input.path)
}}
"""
    elif case == "prompt":
        body = f"""\
decision := {{"behavior": "deny", "reason": "{_API_KEY_REASON}"}} if {{
\tregex.match(`{_API_KEY}`, input.prompt)
}}
"""
    elif case == "failed":
        body = """\
decision := {"behavior": "context", "context": concat("", ["The ", input.tool_name, " call failed: read its output before relying on what it did."])} if {
\tinput.is_error == true
}
"""
    else:
        name = field or "cwd"
        body = f"""\
decision := {{"behavior": "context", "context": concat("", [input.hook_event_name, ": {name} ", shown, "."])}}

shown := sprintf("%v", [object.get(input, "{name}", "unknown")])
"""
    return _REGO_HEADER + body


def rego_action() -> dict[str, Any]:
    return {"file": POLICY_NAME, "query": QUERY}
