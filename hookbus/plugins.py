"""Finding plugins (the ``hookbus`` entry-point group) and wiring them into a PluginManager.

The built-in runners, resolver and recorder are found the same way as a third party's.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

import attrs
import pluggy

from hookbus import hookspecs
from hookbus.entrypoints import EntryPoint, entry_points
from hookbus.errors import PluginError, Problem, did_you_mean
from hookbus.runners import RunnerTable

if TYPE_CHECKING:
    from hookbus.home import Home
    from hookbus.settings import Settings

ENTRY_POINT_GROUP = "hookbus"
logger = logging.getLogger("hookbus")


#: Loaded even when HOOKBUS_LOAD_PLUGINS leaves them out (HOOKBUS_DISABLE_PLUGINS can still
#: block them): without these the bus cannot run a command hook, decide, or record.
ESSENTIAL_PLUGINS = ("command", "resolver", "recorder")

#: The variables that select plugins: a managed directory makes the bus ignore them.
SELECTION_VARIABLES = ("HOOKBUS_DISABLE_PLUGINS", "HOOKBUS_LOAD_PLUGINS")

#: What a plugin provides, by the hooks it implements (runner keys are added to these).
PROVIDES = {
    "hookbus_resolve": "resolver",
    "hookbus_record": "recorder",
    "hookbus_read_runs": "run reader",
    "hookbus_run_prompt": "prompt provider",
    "hookbus_check_input": "input check",
    "hookbus_config_problems": "config checks",
}


@attrs.frozen
class PluginInfo:
    """One plugin as ``hookbus plugins`` shows it."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    #: Why it could not be loaded, when it could not.
    error: str | None = None
    #: Why it was not loaded on purpose (HOOKBUS_DISABLE_PLUGINS, HOOKBUS_LOAD_PLUGINS).
    blocked: str | None = None
    #: What it provides: runner keys (``runner:http``), resolver, recorder, ...
    provides: tuple[str, ...] = ()
    #: Handed to ``HookBus(plugins=[...])``: the embedder asked for it (a recorder records).
    in_process: bool = False


def _names(value: str | None) -> set[str]:
    return {name.strip() for name in (value or "").split(",") if name.strip()}


def blocked_reason(name: str, environ: Mapping[str, str]) -> str | None:
    """Why the environment keeps plugin ``name`` from loading, or None."""
    if name in _names(environ.get("HOOKBUS_DISABLE_PLUGINS")):
        return "blocked by HOOKBUS_DISABLE_PLUGINS"
    only = environ.get("HOOKBUS_LOAD_PLUGINS")
    if only is not None and name not in _names(only) and name not in ESSENTIAL_PLUGINS:
        return "not listed in HOOKBUS_LOAD_PLUGINS"
    return None


_discovered: list[EntryPoint] | None = None
_discover_lock = threading.Lock()


def discover() -> list[EntryPoint]:
    """The entry points of the ``hookbus`` group, scanned once per process."""
    global _discovered
    with _discover_lock:
        if _discovered is None:
            _discovered = sorted(entry_points(ENTRY_POINT_GROUP), key=lambda item: item.name)
        return _discovered


def build_plugin_manager(
    extra_plugins: Sequence[object] = (),
    environ: Mapping[str, str] | None = None,
) -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """A PluginManager with the hookspecs, every discovered plugin the environment allows
    (HOOKBUS_DISABLE_PLUGINS, HOOKBUS_LOAD_PLUGINS) and ``extra_plugins``.

    PluginError, naming the plugin, when one implements a hook that is not hookbus's or
    takes arguments its hookspec does not pass."""
    environ = os.environ if environ is None else environ
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    discovered = discover()
    _warn_unknown_names(environ, [entry_point.name for entry_point in discovered])
    #: Where each registered plugin came from, for the messages that name it.
    origins: dict[str, str] = {}
    for entry_point in discovered:
        reason = blocked_reason(entry_point.name, environ)
        if reason is not None:
            infos.append(
                PluginInfo(entry_point.name, entry_point.value, entry_point.distribution, entry_point.version, blocked=reason)
            )
            continue
        try:
            plugin = entry_point.load()
        except Exception as exc:  # a broken third-party plugin must not take the bus down
            message = f"{type(exc).__name__}: {exc}"
            logger.error("plugin %r (%s) failed to load: %s", entry_point.name, entry_point.value, message)
            infos.append(
                PluginInfo(entry_point.name, entry_point.value, entry_point.distribution, entry_point.version, message)
            )
            continue
        if manager.is_registered(plugin):
            continue
        version = f" {entry_point.version}" if entry_point.version else ""
        origins[entry_point.name] = f"{entry_point.value}, from {entry_point.distribution}{version}"
        _register(manager, plugin, entry_point.name, origins)
        infos.append(PluginInfo(entry_point.name, entry_point.value, entry_point.distribution, entry_point.version))
    # An in-process plugin must not take the name of an installed one, even a blocked one:
    # `hookbus plugins` and the recorder selection tell plugins apart by name.
    taken = {entry_point.name for entry_point in discovered}
    for plugin in extra_plugins:
        if manager.is_registered(plugin):  # an installed plugin handed in again
            name = manager.get_name(plugin)
            infos = [attrs.evolve(i, in_process=True) if i.name == name else i for i in infos]
            continue
        name = _in_process_name(plugin, taken)
        taken.add(name)
        origins[name] = f"in process, module {_module_of(plugin)}"
        _register(manager, plugin, name, origins)
        infos.append(PluginInfo(name, _module_of(plugin), in_process=True))
    _check_hook_names(manager, origins)
    return manager, infos


def _warn_unknown_names(environ: Mapping[str, str], installed: Sequence[str]) -> None:
    """Warn about each name in HOOKBUS_DISABLE_PLUGINS or HOOKBUS_LOAD_PLUGINS that no
    installed plugin has: a typo there silently blocks, or loads, nothing."""
    known = ", ".join(sorted(installed)) or "none"
    for variable, effect in (
        ("HOOKBUS_DISABLE_PLUGINS", "blocks nothing"),
        ("HOOKBUS_LOAD_PLUGINS", "loads nothing"),
    ):
        for name in sorted(_names(environ.get(variable)) - set(installed)):
            logger.warning(
                "%s names %r, which is not an installed plugin, so it %s%s; installed plugins: "
                "%s (fix the name in %s; `hookbus plugins` lists them)",
                variable, name, effect, did_you_mean(name, installed), known, variable,
            )


def _in_process_name(plugin: object, taken: set[str]) -> str:
    """A readable name for a plugin handed to ``HookBus(plugins=[...])``: a module's or a
    class's own name, an instance's class name (pluggy would name an instance by its id()),
    made unique with ``-2``, ``-3``, ... when two plugins share it."""
    base = getattr(plugin, "__name__", None)
    if not isinstance(base, str) or not base:
        base = type(plugin).__name__
    name, number = base, 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    return name


def _register(manager: pluggy.PluginManager, plugin: object, name: str, origins: Mapping[str, str]) -> None:
    try:
        manager.register(plugin, name=name)
    except pluggy.PluginValidationError as exc:
        # pluggy's message is several lines, the first naming the plugin (by id() for an
        # object): the plugin is named here, and its lines are joined into one.
        lines = str(exc).splitlines()
        if lines and lines[0].startswith("Plugin "):
            hook = lines[0].partition(" for hook ")[2]
            lines = ([f"hook {hook}"] if hook else []) + lines[1:]
        detail = "; ".join(line.strip() for line in lines if line.strip())
        raise PluginError(
            f"plugin {name!r} ({origins[name]}) does not match hookbus's hookspecs: {detail}; "
            "fix the hook's signature (hookbus/hookspecs.py has the arguments of each hook)"
        ) from None


def _check_hook_names(manager: pluggy.PluginManager, origins: Mapping[str, str]) -> None:
    """What ``check_pending`` checks (every hookimpl names a hookspec), with a message that
    names the plugin as it was registered, says where it came from and suggests the hook it
    meant; pluggy's own names the plugin object (``<Typo object at 0x7f...>``)."""
    callers: dict[str, Any] = {name: caller for name, caller in vars(manager.hook).items() if not name.startswith("_")}
    specified = sorted(name for name, caller in callers.items() if caller.has_spec())
    for hook_name, caller in sorted(callers.items()):
        if caller.has_spec():
            continue
        for implementation in caller.get_hookimpls():
            if implementation.optionalhook:
                continue
            name = implementation.plugin_name
            where = origins.get(name, _module_of(implementation.plugin))
            raise PluginError(
                f"plugin {name!r} ({where}) implements {hook_name!r}, which is not a hookbus "
                f"hook{did_you_mean(hook_name, specified)}: rename it to one of the hooks in "
                "hookbus/hookspecs.py, or mark it @hookimpl(optionalhook=True) if it is meant "
                "for another version of hookbus"
            )
    try:  # anything pluggy checks that the loop above does not
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        name = manager.get_name(exc.plugin) or _module_of(exc.plugin)
        raise PluginError(f"plugin {name!r}: {exc}") from None


def _module_of(plugin: object) -> str:
    module = getattr(plugin, "__module__", None) or getattr(plugin, "__name__", None)
    return str(module or type(plugin).__module__)


def each_implementation(caller: Any, **kwargs: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    """One call per implementation of a hook, in pluggy's order, so that the caller can
    isolate them: ``(plugin name, call)``. Each gets only the arguments it asks for, as
    pluggy would pass them."""
    for implementation in reversed(caller.get_hookimpls()):
        arguments = {name: kwargs[name] for name in implementation.argnames}
        yield implementation.plugin_name, functools.partial(implementation.function, **arguments)


def build_runner_table(manager: pluggy.PluginManager) -> RunnerTable:
    """Ask every plugin for its runners; a key claimed twice raises PluginError."""
    table = RunnerTable()
    for implementation in manager.hook.hookbus_register_runners.get_hookimpls():
        try:
            implementation.function(register=table.registration_for(implementation.plugin_name))
        except PluginError:
            raise
        except Exception as exc:
            raise PluginError(
                f"plugin {implementation.plugin_name!r} failed to register its runners: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
    return table


def describe_plugins(
    manager: pluggy.PluginManager, infos: Sequence[PluginInfo], runners: RunnerTable
) -> list[PluginInfo]:
    """``infos`` with what each loaded plugin provides filled in."""
    provided: dict[str, list[str]] = {}
    for entry in runners.entries():
        provided.setdefault(entry.plugin, []).append(f"runner:{entry.key}")
    for hook_name, label in PROVIDES.items():
        for implementation in getattr(manager.hook, hook_name).get_hookimpls():
            provided.setdefault(implementation.plugin_name, []).append(label)
    return [attrs.evolve(info, provides=tuple(provided.get(info.name, ()))) for info in infos]


def call_each(manager: pluggy.PluginManager, hook_name: str, doing: str, **kwargs: Any) -> None:
    """Call every implementation of ``hook_name`` (startup, shutdown); one that raises is
    logged as having failed to ``doing``, and the others are still called."""
    for plugin, call in each_implementation(getattr(manager.hook, hook_name), **kwargs):
        try:
            call()
        except Exception:
            logger.exception("plugin %r failed to %s", plugin, doing)


def config_problems(manager: pluggy.PluginManager, home: Home, settings: Settings) -> list[Problem]:
    """What plugins find wrong with the configuration they own (``hookbus_config_problems``:
    the workflow config, say); a plugin that raises is a problem of its own."""
    problems: list[Problem] = []
    for plugin, call in each_implementation(manager.hook.hookbus_config_problems, home=home, settings=settings):
        try:
            problems += call() or []
        except Exception as exc:
            logger.exception("plugin %r failed to check its configuration", plugin)
            problems.append(Problem(plugin, f"could not check its configuration: {exc}"))
    return problems
