"""Finding plugins (the ``hookbus`` entry-point group) and wiring them into a PluginManager.

The built-in runners, resolver and recorder are found the same way as a third party's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import threading
from typing import Any, Callable, Iterator, Sequence

import attrs
import pluggy

from hookbus import hookspecs
from hookbus.errors import PluginError
from hookbus.runners import RunnerTable

ENTRY_POINT_GROUP = "hookbus"
logger = logging.getLogger("hookbus")


@attrs.frozen
class PluginInfo:
    """One plugin as ``hookbus plugins`` shows it."""

    name: str
    module: str
    distribution: str | None = None
    version: str | None = None
    #: Why it could not be loaded, when it could not.
    error: str | None = None


@attrs.frozen
class _Discovered:
    entry_point: importlib.metadata.EntryPoint
    distribution: str | None
    version: str | None


_discovered: list[_Discovered] | None = None
_discover_lock = threading.Lock()


def discover() -> list[_Discovered]:
    """The entry points of the ``hookbus`` group, scanned once per process."""
    global _discovered
    with _discover_lock:
        if _discovered is None:
            found = []
            seen: set[str] = set()
            for dist in importlib.metadata.distributions():
                for entry_point in dist.entry_points:
                    if entry_point.group != ENTRY_POINT_GROUP or entry_point.name in seen:
                        continue
                    seen.add(entry_point.name)
                    found.append(
                        _Discovered(entry_point, dist.metadata["Name"], dist.version)
                    )
            _discovered = sorted(found, key=lambda item: item.entry_point.name)
        return _discovered


def build_plugin_manager(
    extra_plugins: Sequence[object] = (),
) -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """A PluginManager with the hookspecs, every discovered plugin and ``extra_plugins``."""
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    for item in discover():
        entry_point = item.entry_point
        try:
            plugin = entry_point.load()
        except Exception as exc:  # a broken third-party plugin must not take the bus down
            message = f"{type(exc).__name__}: {exc}"
            logger.error("plugin %r (%s) failed to load: %s", entry_point.name, entry_point.value, message)
            infos.append(
                PluginInfo(entry_point.name, entry_point.value, item.distribution, item.version, message)
            )
            continue
        if manager.is_registered(plugin):
            continue
        manager.register(plugin, name=entry_point.name)
        infos.append(PluginInfo(entry_point.name, entry_point.value, item.distribution, item.version))
    for plugin in extra_plugins:
        name = manager.register(plugin)
        infos.append(PluginInfo(name or repr(plugin), _module_of(plugin)))
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
