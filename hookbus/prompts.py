"""Prompts: what a prompt hook or a workflow prompt step sends, and what comes back.

The ``hookbus_run_prompt`` hookspec answers a PromptRequest. An embedder that runs prompts
in its own isolated threads implements it (and returns the thread id); otherwise the
built-in OpenAI-compatible provider of the ``prompt`` plugin answers.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import attrs

from hookbus.cancel import CancelToken
from hookbus.decision import Failure
from hookbus.settings import Settings

NO_PROVIDER = "no prompt provider configured (see docs/hooks.md: prompt hooks)"


class PromptError(Exception):
    """A prompt could not be answered; the message is recorded as the hook's error.

    ``failure`` says how, for a blocking hook that fails closed (``"on_error": "deny"``):
    "timeout", "killed" (cancelled), "unparseable" (a reply that is no answer), "crash" or
    "error"."""

    def __init__(self, message: str, failure: Failure = "error") -> None:
        super().__init__(message)
        self.failure: Failure = failure


@attrs.frozen
class PromptRequest:
    """One prompt to evaluate."""

    #: The whole message: the hook's text, a previous step's output, the envelope JSON.
    prompt: str
    hook_id: str
    event: str
    #: The envelope the hook received.
    envelope: Mapping[str, Any]
    #: ``time.monotonic()`` by which the answer must be in.
    deadline: float
    #: The settings in effect (the default provider reads ``prompt_provider`` there).
    settings: Settings
    #: The hook's mode: an embedder may run async prompts in a thread of their own.
    mode: str = "sync"
    cancel: CancelToken = attrs.field(factory=CancelToken)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


@attrs.frozen
class PromptResult:
    """The final text of a prompt, and the thread it ran in when the embedder says."""

    text: str
    thread_id: str | None = None


def compose_prompt(text: str, envelope_json: str, previous_output: str | None = None) -> str:
    """The message for a prompt: its text, then the previous step's output (workflows),
    then the envelope JSON, as the spec says ("appended to the message")."""
    parts = [text.rstrip()]
    if previous_output is not None:
        parts.append(f"Output of the previous step:\n{previous_output.rstrip()}")
    parts.append(f"Hook context (JSON):\n{envelope_json.rstrip()}")
    return "\n\n".join(parts)


def prompt_sender(plugins: Any) -> Callable[[PromptRequest], PromptResult]:
    """How a bus answers prompts: through ``hookbus_run_prompt`` of ``plugins`` (a pluggy
    PluginManager), the embedder's provider before the default one. The call raises
    PromptError saying why it failed: cancelled, no provider, a provider that raised or
    answered something that is no PromptResult."""
    import logging

    from hookbus.records import CANCELLED_AT_SHUTDOWN

    logger = logging.getLogger("hookbus")

    def send(request: PromptRequest) -> PromptResult:
        if request.cancel.cancelled:
            raise PromptError(request.cancel.reason or CANCELLED_AT_SHUTDOWN, "killed")
        try:
            result = plugins.hook.hookbus_run_prompt(request=request)
        except PromptError:
            raise
        except Exception as exc:
            logger.exception("a prompt provider failed on hook %r", request.hook_id)
            raise PromptError(f"the prompt provider raised {type(exc).__name__}: {exc}", "crash") from exc
        if result is None:
            raise PromptError(NO_PROVIDER)
        if isinstance(result, str):
            return PromptResult(result)
        if not isinstance(result, PromptResult):
            raise PromptError(f"the prompt provider returned {type(result).__name__}, not a PromptResult", "unparseable")
        return result

    return send
