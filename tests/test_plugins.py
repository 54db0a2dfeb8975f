"""The plugin door: built-ins through entry points, third-party runners, clear plugin errors."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any, Callable

import attrs
import pytest

from hookbus import HookBus, HookCall, Outcome, ParseContext, PluginError, RunnerRegistration, hookimpl
from hookbus.converter import structure

Writer = Callable[..., Path]
Maker = Callable[..., HookBus]


def test_builtins_come_through_the_installed_distributions_entry_points(make_bus: Maker) -> None:
    declared = {
        ep.name: ep.value
        for ep in importlib.metadata.distribution("hookbus").entry_points
        if ep.group == "hookbus"
    }
    assert declared == {
        "command": "hookbus_command",
        "workflow": "hookbus_workflow",
        "prompt": "hookbus_prompt",
        "resolver": "hookbus_resolver",
        "recorder": "hookbus_recorder",
    }
    infos = {info.name: info for info in make_bus().plugin_infos}
    for name, module in declared.items():
        assert infos[name].module == module
        assert infos[name].distribution == "hookbus"
        assert infos[name].version == importlib.metadata.version("hookbus")


@attrs.frozen
class EchoOptions:
    text: str
    upper: bool = False


class EchoRunner:
    """A minimal third-party runner: its options validated through the core's converter."""

    def parse(self, key: str, value: object, context: ParseContext) -> EchoOptions:
        return structure(value, EchoOptions)

    def run(self, call: HookCall) -> Outcome:
        options: EchoOptions = call.hook.options
        text = options.text.upper() if options.upper else options.text
        return Outcome("context", context=f"{text} ({call.event})")


class EchoPlugin:
    @hookimpl
    def hookbus_register_runners(self, register: RunnerRegistration) -> None:
        register.add("echo", EchoRunner())


def test_a_third_party_runner_claims_its_spec_key(
    write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("e", event="Stop", mode="sync", echo={"text": "hi", "upper": True})
    write_hook("bad", event="Stop", mode="sync", echo={"txt": "hi", "upper": "yes"})
    bus = make_bus(plugins=[EchoPlugin()])
    assert bus.emit("Stop", {}).context == "HI (Stop)"
    problems = sorted(str(p) for p in bus.problems)
    assert problems == [
        "hooks/bad/hook.json: expected true or false, got a string @ $.echo.upper",
        "hooks/bad/hook.json: required field missing @ $.echo.text",
        "hooks/bad/hook.json: unknown field 'txt' @ $.echo",
    ]


def test_without_the_plugin_its_key_is_an_unknown_field(write_hook: Writer, make_bus: Maker) -> None:
    write_hook("e", event="Stop", mode="sync", echo={"text": "hi"})
    problems = [str(p) for p in make_bus().problems]
    assert (
        "hooks/e/hook.json: unknown field 'echo': not a hook field, and no installed plugin "
        "runs it as an action (see `hookbus plugins`) @ $"
    ) in problems


def test_two_plugins_claiming_one_key_is_an_error_naming_both(home: Path) -> None:
    class Another:
        @hookimpl
        def hookbus_register_runners(self, register: RunnerRegistration) -> None:
            register.add("command", EchoRunner())

    with pytest.raises(PluginError, match=r"spec key 'command' is claimed by two plugins: '.+' and '.+'") as info:
        HookBus(home, plugins=[Another()])
    assert "'command'" in str(info.value)


def test_a_runner_cannot_claim_a_hook_field(home: Path) -> None:
    class Greedy:
        @hookimpl
        def hookbus_register_runners(self, register: RunnerRegistration) -> None:
            register.add("timeout", EchoRunner())

    with pytest.raises(PluginError, match="cannot register runner key 'timeout': it is a hook field"):
        HookBus(home, plugins=[Greedy()])


def test_a_misspelled_hookimpl_is_reported_with_the_plugin_name(home: Path) -> None:
    class Typo:
        @hookimpl
        def hookbus_recrod(self, bus: Any, record: Any) -> None:
            pass

    with pytest.raises(PluginError, match="hookbus_recrod") as info:
        HookBus(home, plugins=[Typo()])
    assert "plugin '" in str(info.value)


def test_a_runner_that_raises_fails_open_with_the_error_recorded(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    class Boom:
        def parse(self, key: str, value: object, context: ParseContext) -> object:
            return value

        def run(self, call: HookCall) -> Outcome:
            raise RuntimeError("boom")

    class BoomPlugin:
        @hookimpl
        def hookbus_register_runners(self, register: RunnerRegistration) -> None:
            register.add("boom", Boom())

    write_hook("b", mode="sync", blocking=True, boom=True)
    bus = make_bus(plugins=[BoomPlugin()])
    assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
    runs = bus.read_runs("b")
    assert runs[-1].status == "allow"
    assert runs[-1].error is not None and "raised RuntimeError: boom" in runs[-1].error
