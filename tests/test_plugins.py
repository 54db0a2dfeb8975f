"""The plugin door: built-ins through entry points, third-party runners, clear plugin errors."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Callable

import attrs
import pytest

from conftest import read_log
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
        "hooks/bad/hook.json: unknown field 'txt' (did you mean 'text'?) @ $.echo",
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


class Recod:
    @hookimpl
    def hookbus_recod(self, record: Any) -> None:
        pass


def test_a_misspelled_hookimpl_of_an_object_names_its_class_not_its_id(home: Path) -> None:
    with pytest.raises(PluginError) as info:
        HookBus(home, plugins=[Recod()])
    message = str(info.value)
    assert message.startswith(
        f"plugin 'Recod' (in process, module {__name__}) implements 'hookbus_recod', which is "
        "not a hookbus hook (did you mean 'hookbus_record'?): rename it"
    )
    assert str(id(info.value)) not in message and " at 0x" not in message


def test_a_misspelled_hookimpl_of_a_module_names_the_module(home: Path) -> None:
    @hookimpl
    def hookbus_recod(record: Any) -> None:
        pass

    module = types.ModuleType("my_recorder")
    module.hookbus_recod = hookbus_recod  # type: ignore[attr-defined]
    with pytest.raises(PluginError, match=r"^plugin 'my_recorder' \(in process, module my_recorder\) implements 'hookbus_recod'"):
        HookBus(home, plugins=[module])


def test_a_misspelled_hookimpl_of_an_installed_plugin_names_its_entry_point(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hookbus.plugins
    from hookbus.entrypoints import EntryPoint

    monkeypatch.syspath_prepend(str(Path(__file__).parent / "plugins"))
    installed = hookbus.plugins.discover()
    typo = EntryPoint("typo", "hookbus_typo_fixture", "hookbus-typo", "1.0")
    monkeypatch.setattr(hookbus.plugins, "discover", lambda paths=None: [*installed, typo])
    with pytest.raises(PluginError) as info:
        HookBus(home)
    assert str(info.value).startswith(
        "plugin 'typo' (hookbus_typo_fixture, from hookbus-typo 1.0) implements 'hookbus_recod', "
        "which is not a hookbus hook (did you mean 'hookbus_record'?)"
    )


def test_a_hookimpl_taking_an_argument_its_hookspec_lacks_names_the_plugin(home: Path) -> None:
    class Recrd:
        @hookimpl
        def hookbus_record(self, recrd: Any) -> None:
            pass

    with pytest.raises(PluginError) as info:
        HookBus(home, plugins=[Recrd(), Recrd()])
    message = str(info.value)
    assert message.startswith("plugin 'Recrd' (in process, module ")
    assert "hook 'hookbus_record'" in message and "{'recrd'}" in message
    assert "\n" not in message and " at 0x" not in message


def test_in_process_objects_of_one_class_get_names_of_their_own(home: Path, make_bus: Maker) -> None:
    first, second = ListRecorder(), ListRecorder()
    bus = make_bus(plugins=[first, second])
    names = [info.name for info in bus.plugin_infos if info.in_process]
    assert names == ["ListRecorder", "ListRecorder-2"]
    assert set(names) <= set(bus.active_recorders)


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


# -- choosing plugins -----------------------------------------------------------------------


def infos_by_name(bus: HookBus) -> dict[str, Any]:
    return {info.name: info for info in bus.plugin_infos}


def test_disable_plugins_blocks_by_entry_point_name(
    write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKBUS_DISABLE_PLUGINS", "prompt, workflow")
    write_hook("p", event="Stop", mode="sync", prompt="hi")
    write_hook("c", event="Stop", mode="sync", command="echo still here")
    bus = make_bus()
    infos = infos_by_name(bus)
    assert infos["prompt"].blocked == "blocked by HOOKBUS_DISABLE_PLUGINS"
    assert infos["workflow"].blocked == "blocked by HOOKBUS_DISABLE_PLUGINS"
    assert infos["command"].blocked is None
    assert [str(p) for p in bus.problems] == [
        "hooks/p/hook.json: no runner for 'prompt': it is provided by the built-in plugin "
        "'prompt' (module hookbus_prompt), which is not installed or is disabled (see "
        "`hookbus plugins`) @ $.prompt"
    ]
    assert bus.emit("Stop", {}).context == "still here"


@pytest.mark.parametrize(
    ("value", "loaded"),
    [("", {"command", "resolver", "recorder"}), ("workflow", {"command", "resolver", "recorder", "workflow"})],
    ids=["empty-means-essentials", "listed"],
)
def test_load_plugins_restricts_to_the_listed_ones(
    value: str, loaded: set[str], make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKBUS_LOAD_PLUGINS", value)
    infos = infos_by_name(make_bus())
    assert {name for name, info in infos.items() if info.blocked is None} >= loaded
    assert infos["prompt"].blocked == "not listed in HOOKBUS_LOAD_PLUGINS"


def hookbus_messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "hookbus" and r.levelno == level]


NO_RESOLVER = (
    "no resolver plugin: the built-in 'resolver' is blocked by HOOKBUS_DISABLE_PLUGINS, so "
    "every emit allows, whatever its sync hooks decide; take 'resolver' out of "
    "HOOKBUS_DISABLE_PLUGINS, or install a plugin that implements hookbus_resolve "
    "(`hookbus plugins` lists them)"
)


def test_without_the_resolver_the_bus_starts_and_emits_fail_open(
    home: Path, write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The spec's rule, as for a resolver that breaks: the action proceeds, the hooks' fires
    are recorded, and the log says why their decisions were ignored."""
    caplog.set_level(logging.WARNING, logger="hookbus")
    monkeypatch.setenv("HOOKBUS_DISABLE_PLUGINS", "resolver")
    write_hook("d", event="PreToolUse", mode="sync", blocking=True, command="echo no >&2; exit 2")
    bus = make_bus()
    assert infos_by_name(bus)["resolver"].blocked == "blocked by HOOKBUS_DISABLE_PLUGINS"
    assert hookbus_messages(caplog, logging.WARNING) == [NO_RESOLVER]
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "allow"
    assert [r.status for r in bus.read_runs("d")] == ["deny"]
    assert hookbus_messages(caplog, logging.ERROR) == [
        f"the resolver raised PluginError: {NO_RESOLVER}; failing open (reported once until it recovers)"
    ]


def test_without_the_resolver_list_log_and_plugins_work_and_emit_allows(
    home: Path, write_hook: Writer, tmp_path: Path
) -> None:
    write_hook("d", event="PreToolUse", mode="sync", blocking=True, command="echo no >&2; exit 2")
    env = {**os.environ, "HOME": str(tmp_path), "HOOKBUS_DISABLE_PLUGINS": "resolver"}
    env.pop("VIX_HOME", None)
    env.pop("VIX_DISABLE_HOOKS", None)

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "hookbus", *args, "--home", str(home)]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, timeout=60)

    for verb in ("list", "log", "plugins"):
        result = run(verb)
        assert result.returncode == 0, (verb, result.stderr)
        assert result.stderr == f"hookbus: {NO_RESOLVER}\n", verb
    assert "d" in run("list").stdout
    emitted = run("emit", "PreToolUse", stdin='{"tool_name": "bash"}')
    assert emitted.returncode == 0, emitted.stderr
    assert json.loads(emitted.stdout)["behavior"] == "allow"
    assert f"hookbus: the resolver raised PluginError: {NO_RESOLVER}; failing open" in emitted.stderr
    assert "Traceback" not in emitted.stderr
    assert run("log").stdout.count("PreToolUse") == 1  # the fire was recorded



@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "HOOKBUS_DISABLE_PLUGINS",
            "prompt, promt",
            "HOOKBUS_DISABLE_PLUGINS names 'promt', which is not an installed plugin, so it blocks "
            "nothing (did you mean 'prompt'?); installed plugins: {installed} (fix the name in "
            "HOOKBUS_DISABLE_PLUGINS; `hookbus plugins` lists them)",
        ),
        (
            "HOOKBUS_DISABLE_PLUGINS",
            "nosuch",
            "HOOKBUS_DISABLE_PLUGINS names 'nosuch', which is not an installed plugin, so it blocks "
            "nothing; installed plugins: {installed} (fix the name in HOOKBUS_DISABLE_PLUGINS; "
            "`hookbus plugins` lists them)",
        ),
        (
            "HOOKBUS_LOAD_PLUGINS",
            "workflw",
            "HOOKBUS_LOAD_PLUGINS names 'workflw', which is not an installed plugin, so it loads "
            "nothing (did you mean 'workflow'?); installed plugins: {installed} (fix the name in "
            "HOOKBUS_LOAD_PLUGINS; `hookbus plugins` lists them)",
        ),
    ],
    ids=["disable-typo", "disable-unknown", "load-typo"],
)
def test_an_unknown_plugin_name_in_the_environment_is_warned(
    variable: str,
    value: str,
    expected: str,
    make_bus: Maker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import hookbus.plugins

    installed = ", ".join(sorted(ep.name for ep in hookbus.plugins.discover()))
    caplog.set_level(logging.WARNING, logger="hookbus")
    monkeypatch.setenv(variable, value)
    make_bus()
    assert hookbus_messages(caplog, logging.WARNING) == [expected.format(installed=installed)]


def test_known_plugin_names_in_the_environment_are_not_warned(
    make_bus: Maker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    monkeypatch.setenv("HOOKBUS_DISABLE_PLUGINS", "prompt")
    monkeypatch.setenv("HOOKBUS_LOAD_PLUGINS", "workflow, http")
    make_bus()
    assert hookbus_messages(caplog, logging.WARNING) == []


def test_hookbus_plugins_warns_of_an_unknown_name_and_still_lists(home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "HOOKBUS_DISABLE_PLUGINS": "recordr"}
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "plugins", "--home", str(home)],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(
        "hookbus: HOOKBUS_DISABLE_PLUGINS names 'recordr', which is not an installed plugin, so "
        "it blocks nothing (did you mean 'recorder'?); installed plugins: "
    )
    assert "command, " in result.stderr  # in name order, after contrib's cel when installed
    assert "recorder  " in result.stdout and "blocked" not in result.stdout


def test_what_each_built_in_provides(make_bus: Maker) -> None:
    infos = infos_by_name(make_bus())
    assert infos["command"].provides == ("runner:command",)
    assert set(infos["workflow"].provides) == {"runner:workflow_id", "runner:workflow", "config checks"}
    assert set(infos["prompt"].provides) == {"runner:prompt", "prompt provider", "config checks"}
    assert infos["resolver"].provides == ("resolver",)
    assert set(infos["recorder"].provides) == {"recorder", "run reader", "config checks"}


def test_hookbus_plugins_lists_the_built_ins(home: Path) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "plugins", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "STATUS", "PROVIDES"]
    rows = {line.split()[0]: line for line in lines[1:] if line.strip() and not line.startswith("recording")}
    for name in ("command", "workflow", "prompt", "resolver", "recorder"):
        assert "hookbus" in rows[name] and "loaded" in rows[name]
    assert "runner:command" in rows["command"]
    assert "recording with: recorder" in result.stdout


# -- choosing recorders ---------------------------------------------------------------------


class ListRecorder:
    def __init__(self) -> None:
        self.records: list[Any] = []

    @hookimpl
    def hookbus_record(self, record: Any) -> None:
        self.records.append(record)


def test_an_in_process_recorder_records_beside_the_built_in(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_hook("c", event="Stop", mode="sync", command="true")
    mine = ListRecorder()
    bus = make_bus(plugins=[mine])
    bus.emit("Stop", {})
    assert [r.hook_id for r in bus.read_runs("c")] == ["c"]  # the built-in still records
    assert [r.hook_id for r in mine.records] == ["c"]


def test_blocking_the_default_recorder_by_name(
    home: Path, write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKBUS_DISABLE_PLUGINS", "recorder")
    monkeypatch.setenv("HOOKBUS_LOAD_PLUGINS", "")  # no installed third-party recorder either
    write_hook("c", event="Stop", mode="sync", command="true")
    mine = ListRecorder()
    bus = make_bus(plugins=[mine])
    assert bus.active_recorders == (bus.plugin_infos[-1].name,)
    bus.emit("Stop", {})
    bus.close()
    assert len(mine.records) == 1
    assert not (home / "logs").exists()
    assert not (home / "hooks" / "c" / "state.json").exists()


def test_a_recorder_setting_naming_nothing_installed_falls_back_loudly(
    home: Path, write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo ("sqllite") must never stop recording: the built-in recorder records, and
    the problem says so."""
    monkeypatch.setenv("HOOKBUS_LOAD_PLUGINS", "")  # only the built-in recorder is installed
    (home / "settings.json").write_text(json.dumps({"recorder": "nosuch"}))
    write_hook("c", event="Stop", mode="sync", command="true")
    bus = make_bus()
    assert [str(p) for p in bus.problems] == [
        "settings.json: recorder 'nosuch' is not installed or is blocked (installed "
        "recorders: recorder); recording with 'recorder' instead @ $.recorder"
    ]
    assert bus.active_recorders == ("recorder",)
    bus.emit("Stop", {})
    bus.close()
    assert len(read_log(home)) == 1


def test_a_recorder_setting_of_the_wrong_type(home: Path, make_bus: Maker) -> None:
    (home / "settings.json").write_text(json.dumps({"recorder": 3}))
    problems = [str(p) for p in make_bus().problems]
    assert problems == ["settings.json: expected a recorder plugin name or a list of names @ $.recorder"]


# -- hookbus.testing ------------------------------------------------------------------------


def test_an_author_tests_a_runner_in_five_lines(hookbus_home: Any, hookbus_fire: Any) -> None:
    hookbus_home.write_hook("h", event="Stop", mode="sync", echo={"text": "hi"})
    fired = hookbus_fire("Stop")
    assert fired.decision.context == "hi (Stop)"
    assert fired.record_of("h").status == "context"


@pytest.fixture
def hookbus_plugins() -> list[object]:
    return [EchoPlugin()]


def test_the_capture_recorder_sees_async_fires(hookbus_home: Any, hookbus_bus: Any, hookbus_capture: Any) -> None:
    hookbus_home.write_hook("a", event="Stop", command="echo later")
    hookbus_bus.reload()
    assert hookbus_bus.emit("Stop", {}).behavior == "allow"
    [record] = hookbus_capture.wait_for(1)
    assert (record.hook_id, record.mode, record.status) == ("a", "async", "done")
