"""hookbus: the lifecycle-hooks engine an agent daemon embeds.

    from hookbus import HookBus
    with HookBus(home="~/.vix") as bus:
        decision = bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {...}})
"""

from __future__ import annotations

from hookbus.hookspecs import hookimpl, hookspec

from hookbus.bus import HookBus
from hookbus.contract import outcome_from_command, outcome_from_object, outcome_from_text
from hookbus.decision import ALLOW, Decision, HookResult, Outcome
from hookbus.errors import (
    BusClosedError,
    HookBusError,
    HookNotFoundError,
    PluginError,
    Problem,
    SpecError,
    UnknownEventError,
)
from hookbus.events import EVENT_NAMES, EVENTS, EventInfo
from hookbus.home import Home
from hookbus.records import RunRecord
from hookbus.runners import CancelToken, HookCall, ParseContext, Runner, RunnerRegistration
from hookbus.spec import Hook, HookSpec, Trigger

__version__ = "0.1.0"

__all__ = [
    "ALLOW",
    "BusClosedError",
    "CancelToken",
    "Decision",
    "EVENTS",
    "EVENT_NAMES",
    "EventInfo",
    "Home",
    "Hook",
    "HookBus",
    "HookBusError",
    "HookCall",
    "HookNotFoundError",
    "HookResult",
    "HookSpec",
    "Outcome",
    "ParseContext",
    "PluginError",
    "Problem",
    "RunRecord",
    "Runner",
    "RunnerRegistration",
    "SpecError",
    "Trigger",
    "UnknownEventError",
    "__version__",
    "hookimpl",
    "hookspec",
    "outcome_from_command",
    "outcome_from_object",
    "outcome_from_text",
]
