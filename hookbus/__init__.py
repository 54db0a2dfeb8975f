"""hookbus: the lifecycle-hooks engine an agent daemon embeds.

    from hookbus import HookBus
    with HookBus(home="~/.vix") as bus:
        decision = bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {...}})

The names below are imported on first use (PEP 562), so that ``hookbus`` on the command
line starts without loading what a verb does not need.
"""

from __future__ import annotations

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from hookbus.hookspecs import hookimpl, hookspec
    from hookbus.bus import HookBus
    from hookbus.contract import outcome_from_command, outcome_from_final_text, outcome_from_object, outcome_from_value
    from hookbus.decision import ALLOW, Decision, HookFailure, HookResult, Outcome
    from hookbus.explain import Explanation, HookVerdict
    from hookbus.files import read_config_file
    from hookbus.errors import (
        BusClosedError,
        EnvelopeError,
        HookBusError,
        HookNotFoundError,
        HooksDisabledError,
        PluginError,
        Problem,
        SpecError,
        UnknownEventError,
    )
    from hookbus.events import EVENT_NAMES, EVENTS, EventInfo
    from hookbus.home import Home
    from hookbus.prompts import PromptError, PromptRequest, PromptResult
    from hookbus.records import EmitRecord, RunRecord
    from hookbus.recording import BackgroundWriter
    from hookbus.runners import (
        CancelToken,
        Hook,
        HookCall,
        ParseContext,
        Runner,
        RunnerRegistration,
        check_runnable,
    )
    from hookbus.spec import HookSpec, Trigger
    from hookbus.policy.plugintrust import HOOKBUS_VERSION as __version__

_WHERE = {
    "HookBus": "hookbus.bus",
    "outcome_from_command": "hookbus.contract",
    "outcome_from_final_text": "hookbus.contract",
    "outcome_from_object": "hookbus.contract",
    "outcome_from_value": "hookbus.contract",
    "ALLOW": "hookbus.decision",
    "Decision": "hookbus.decision",
    "HookResult": "hookbus.decision",
    "HookFailure": "hookbus.decision",
    "Explanation": "hookbus.explain",
    "HookVerdict": "hookbus.explain",
    "Outcome": "hookbus.decision",
    "BusClosedError": "hookbus.errors",
    "EnvelopeError": "hookbus.errors",
    "HookBusError": "hookbus.errors",
    "HookNotFoundError": "hookbus.errors",
    "HooksDisabledError": "hookbus.errors",
    "PluginError": "hookbus.errors",
    "Problem": "hookbus.errors",
    "SpecError": "hookbus.errors",
    "UnknownEventError": "hookbus.errors",
    "EVENT_NAMES": "hookbus.events",
    "EVENTS": "hookbus.events",
    "EventInfo": "hookbus.events",
    "Home": "hookbus.home",
    "read_config_file": "hookbus.files",
    "PromptError": "hookbus.prompts",
    "PromptRequest": "hookbus.prompts",
    "PromptResult": "hookbus.prompts",
    "RunRecord": "hookbus.records",
    "EmitRecord": "hookbus.records",
    "BackgroundWriter": "hookbus.recording",
    "CancelToken": "hookbus.runners",
    "HookCall": "hookbus.runners",
    "ParseContext": "hookbus.runners",
    "Runner": "hookbus.runners",
    "RunnerRegistration": "hookbus.runners",
    "check_runnable": "hookbus.runners",
    "Hook": "hookbus.runners",
    "HookSpec": "hookbus.spec",
    "Trigger": "hookbus.spec",
    "hookimpl": "hookbus.hookspecs",
    "hookspec": "hookbus.hookspecs",
}

__all__ = [
    "ALLOW",
    "BackgroundWriter",
    "BusClosedError",
    "CancelToken",
    "Decision",
    "EVENTS",
    "EVENT_NAMES",
    "EmitRecord",
    "EnvelopeError",
    "EventInfo",
    "Explanation",
    "Home",
    "Hook",
    "HookBus",
    "HookBusError",
    "HookCall",
    "HookFailure",
    "HookNotFoundError",
    "HooksDisabledError",
    "HookResult",
    "HookSpec",
    "HookVerdict",
    "Outcome",
    "ParseContext",
    "PluginError",
    "Problem",
    "PromptError",
    "PromptRequest",
    "PromptResult",
    "RunRecord",
    "Runner",
    "RunnerRegistration",
    "SpecError",
    "Trigger",
    "UnknownEventError",
    "__version__",
    "check_runnable",
    "hookimpl",
    "hookspec",
    "outcome_from_command",
    "outcome_from_final_text",
    "outcome_from_object",
    "outcome_from_value",
    "read_config_file",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":  # kept where the engine reads it without importing this package
        from hookbus.policy.plugintrust import HOOKBUS_VERSION

        globals()[name] = HOOKBUS_VERSION
        return HOOKBUS_VERSION
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'hookbus' has no attribute {name!r}")
    import importlib  # here: `hookbus emit` on its way to a server imports no more than it must

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
