"""Finding plugins (the ``hookbus`` entry-point group) and wiring them into a PluginManager.

The built-in runners, resolver and recorder are found the same way as a third party's.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs
import pluggy

from hookbus import hookspecs
from hookbus.entrypoints import EntryPoint, entry_points
from hookbus.errors import PluginError
from hookbus.runners import RunnerTable

ENTRY_POINT_GROUP = "hookbus"
logger = logging.getLogger("hookbus")


#: Loaded even when HOOKBUS_LOAD_PLUGINS leaves them out (HOOKBUS_DISABLE_PLUGINS can still
#: block them): without these the bus cannot run a command hook, decide, or record.
ESSENTIAL_PLUGINS = ("command", "resolver", "recorder")

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
    (HOOKBUS_DISABLE_PLUGINS, HOOKBUS_LOAD_PLUGINS) and ``extra_plugins``."""
    environ = os.environ if environ is None else environ
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    for entry_point in discover():
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
        manager.register(plugin, name=entry_point.name)
        infos.append(PluginInfo(entry_point.name, entry_point.value, entry_point.distribution, entry_point.version))
    for plugin in extra_plugins:
        if manager.is_registered(plugin):  # an installed plugin handed in again
            name = manager.get_name(plugin)
            infos = [attrs.evolve(i, in_process=True) if i.name == name else i for i in infos]
            continue
        name = manager.register(plugin)
        infos.append(PluginInfo(name or repr(plugin), _module_of(plugin), in_process=True))
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        name = manager.get_name(exc.plugin) or repr(exc.plugin)
        raise PluginError(f"plugin {name!r}: {exc}") from None
    return manager, infos


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
