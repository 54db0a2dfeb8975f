"""The ``prompt`` runner, and the default OpenAI-compatible prompt provider.

A prompt hook sends its prompt text, with the envelope JSON appended, to
``hookbus_run_prompt`` and decides by the final text
(``hookbus.contract.outcome_from_final_text``). The thread id an embedder's provider
returns is recorded with the fire.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from hookbus import hookimpl
from hookbus.contract import outcome_from_final_text
from hookbus.converter import json_type_name
from hookbus.decision import Outcome
from hookbus.errors import Problem, SpecError, SpecErrors
from hookbus.home import Home
from hookbus.prompts import NO_PROVIDER, PromptError, PromptRequest, PromptResult
from hookbus.runners import HookCall, ParseContext, RunnerRegistration
from hookbus.settings import Settings

from hookbus_prompt import provider


class PromptRunner:
    """Runs ``"prompt": "..."`` hooks."""

    def parse(self, key: str, value: object, context: ParseContext) -> str:
        if not isinstance(value, str):
            raise SpecError(f"expected a string (the prompt), got {json_type_name(value)}")
        if not value.strip():
            raise SpecError("the prompt is empty")
        return value

    def schema(self, key: str) -> dict[str, Any]:
        return {
            "type": "string",
            "minLength": 1,
            "description": "A prompt for an LLM; the envelope JSON is appended. It decides by its final text.",
        }

    def run(self, call: HookCall) -> Outcome:
        try:
            answer = call.ask(call.hook.options)
        except PromptError as exc:
            message = str(exc)
            if exc.failure == "timeout" and call.remaining() <= 0:
                message = f"timed out after {call.hook.spec.timeout}"
            return Outcome.fail_open(message, failure=exc.failure)
        return attrs.evolve(outcome_from_final_text(answer.text, call.event), thread_id=answer.thread_id)


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    register.add("prompt", PromptRunner())


#: (settings document, its provider config): read once per settings, not per prompt.
#: Settings documents are immutable, one per reload.
_last_config: tuple[object, provider.ProviderConfig | None] | None = None


def _config_of(raw_settings: Mapping[str, Any]) -> provider.ProviderConfig | None:
    global _last_config
    last = _last_config
    if last is not None and last[0] is raw_settings:
        return last[1]
    config = provider.read_config(raw_settings)
    _last_config = (raw_settings, config)
    return config


@hookimpl(trylast=True)
def hookbus_run_prompt(request: PromptRequest) -> PromptResult:
    try:
        config = _config_of(request.settings.raw)
    except SpecErrors as exc:
        raise PromptError(f"settings.json prompt_provider is invalid: {exc}") from None
    if config is None:
        raise PromptError(NO_PROVIDER)
    return PromptResult(provider.complete(config, request))


@hookimpl
def hookbus_config_problems(home: Home, settings: Settings) -> list[Problem]:
    return provider.config_problems(settings.raw)
