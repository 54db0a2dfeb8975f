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
from hookbus.policy.plugintrust import BUILTIN_PLUGINS, HOOKBUS_DISTRIBUTION, HOOKBUS_VERSION, import_builtin, import_trusted, trusted_path
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


_discovered: dict[tuple[str, ...] | None, list[EntryPoint]] = {}
_discover_lock = threading.Lock()


def discover(paths: Sequence[str] | None = None) -> list[EntryPoint]:
    """The entry points of the ``hookbus`` group on ``paths`` (``sys.path``), scanned once
    per process for each list of paths."""
    key = None if paths is None else tuple(paths)
    with _discover_lock:
        found = _discovered.get(key)
        if found is None:
            found = _discovered[key] = sorted(entry_points(ENTRY_POINT_GROUP, paths), key=lambda item: item.name)
        return found


@attrs.frozen
class PluginPolicy:
    """What decides which plugins load. Without a managed directory: the environment
    (HOOKBUS_DISABLE_PLUGINS, HOOKBUS_LOAD_PLUGINS). Where one exists: the managed
    settings.json alone; the environment chooses no code at all (``plugintrust``)."""

    #: The environment the selection variables are read from (without a managed directory).
    environ: Mapping[str, str] = attrs.field(factory=dict, eq=False)
    #: The selection variables' values, as the comparison of two policies sees them.
    selection: tuple[tuple[str, str], ...] = ()
    #: Where a managed directory exists: the third-party plugins it allows, by name.
    managed_allows: frozenset[str] | None = None
    #: Where a managed directory exists: the entries of sys.path the environment chose.
    untrusted: frozenset[str] = frozenset()
    #: Where the managed settings.json is, for the messages that say how to allow a plugin.
    managed_settings: str = ""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> PluginPolicy:
        environ = os.environ if environ is None else environ
        selection = tuple((name, environ[name]) for name in SELECTION_VARIABLES if name in environ)
        return cls(environ=dict(selection), selection=selection)

    @property
    def managed(self) -> bool:
        return self.managed_allows is not None

    def refusal(self, entry_point: EntryPoint) -> str | None:
        """Why a third-party plugin is not loaded under this policy, or None."""
        if self.managed_allows is None:
            return blocked_reason(entry_point.name, self.environ)
        if entry_point.name not in self.managed_allows:
            where = self.managed_settings or "the managed settings.json"
            return (
                f'not allowed by the managed settings.json: a managed directory exists, and only the third-party '
                f'plugins its settings.json names in "plugins" load (add {entry_point.name!r} to "plugins" in {where})'
            )
        return None


def build_plugin_manager(
    extra_plugins: Sequence[object] = (),
    environ: Mapping[str, str] | None = None,
    policy: PluginPolicy | None = None,
) -> tuple[pluggy.PluginManager, list[PluginInfo]]:
    """A PluginManager with the hookspecs, the built-in plugins (from hookbus's own
    installation), every discovered third-party plugin ``policy`` allows (default: the
    selection variables of ``environ``) and ``extra_plugins``.

    PluginError, naming the plugin, when one implements a hook that is not hookbus's or
    takes arguments its hookspec does not pass."""
    plugins = PluginSet(extra_plugins)
    plugins.adopt(policy if policy is not None else PluginPolicy.from_environment(environ))
    return plugins.manager, list(plugins.infos)


class PluginSet:
    """The plugins of one bus: its PluginManager, what ``hookbus plugins`` shows of each,
    and the runner table built from them, kept up to date when the policy changes (a
    managed directory that appears while the bus runs takes effect without a restart)."""

    def __init__(self, extra_plugins: Sequence[object] = (), runners: RunnerTable | None = None) -> None:
        self.manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
        self.manager.add_hookspecs(hookspecs)
        self.extra_plugins = tuple(extra_plugins)
        self.runners = RunnerTable() if runners is None else runners
        self.infos: tuple[PluginInfo, ...] = ()
        self.policy: PluginPolicy | None = None
        #: The plugins registered from what was discovered, by name.
        self._discovered: dict[str, object] = {}
        #: The names the embedder's own plugins are registered under, by their index.
        self._extra_names: dict[int, str] = {}
        #: Where each registered plugin came from, for the messages that name it.
        self._origins: dict[str, str] = {}
        #: Called after ``replug`` changed the plugins (the bus finds its resolver again).
        self.on_change: list[Callable[[], None]] = []

    def replug(self, policy: PluginPolicy) -> bool:
        """``adopt`` while the bus runs (a managed directory appeared, moved or changed its
        ``"plugins"``): what cannot be loaded is reported, and the plugins stay as they
        were; ``on_change`` hears of a change. False when nothing changed."""
        try:
            changed = self.adopt(policy)
        except PluginError as exc:
            logger.error("the plugins could not be changed to what the managed directory allows: %s", exc)
            return True
        if changed:
            for listener in self.on_change:
                listener()
        return changed

    def adopt(self, policy: PluginPolicy) -> bool:
        """Load and unload plugins so that what is registered is what ``policy`` allows;
        False when it is the policy in effect already."""
        if policy == self.policy:
            return False
        # A third-party plugin loaded while the environment chose code is not kept once a
        # managed directory says where code comes from: it is loaded again from there.
        keep = self.policy is not None and (self.policy.managed, self.policy.untrusted) == (policy.managed, policy.untrusted)
        discovered = discover(trusted_path(policy.untrusted) if policy.managed else None)
        if not policy.managed:
            _warn_unknown_names(policy.environ, sorted({*BUILTIN_PLUGINS, *(entry_point.name for entry_point in discovered)}))
        wanted: dict[str, object] = {}
        infos: list[PluginInfo] = []
        for candidate in _candidates(discovered):
            reusable = candidate.builtin or keep
            info, plugin = self._load(candidate, policy, self._discovered.get(candidate.name) if reusable else None)
            if plugin is not None and any(plugin is other for other in wanted.values()):
                continue  # one module under two names: registered once, as pluggy requires
            infos.append(info)
            if plugin is not None:
                wanted[candidate.name] = plugin
        for name, plugin in list(self._discovered.items()):
            if wanted.get(name) is not plugin:
                self.manager.unregister(plugin)
                del self._discovered[name]
        for name, plugin in wanted.items():
            if name not in self._discovered:
                _register(self.manager, plugin, name, self._origins)
                self._discovered[name] = plugin
        infos += self._register_extras(infos)
        _check_hook_names(self.manager, self._origins)
        self.policy = policy
        self.runners.replace(build_runner_table(self.manager))
        self.infos = tuple(describe_plugins(self.manager, infos, self.runners))
        return True

    def _load(self, candidate: _Candidate, policy: PluginPolicy, loaded: object | None) -> tuple[PluginInfo, object | None]:
        """What ``hookbus plugins`` shows of ``candidate``, and its plugin when it loads
        (``loaded``: the one registered already, kept)."""
        entry_point = candidate.entry_point
        info = PluginInfo(entry_point.name, entry_point.value, entry_point.distribution, entry_point.version)
        if candidate.refused is not None:
            return attrs.evolve(info, error=candidate.refused), None
        reason = blocked_reason(entry_point.name, policy.environ) if candidate.builtin else policy.refusal(entry_point)
        if reason is not None:
            return attrs.evolve(info, blocked=reason), None
        if loaded is not None:
            return info, loaded
        try:
            if candidate.builtin:
                plugin: object = import_builtin(entry_point.value)
            elif policy.managed:
                plugin = _load_trusted(entry_point, policy.untrusted)
            else:
                plugin = entry_point.load()
        except Exception as exc:  # a broken third-party plugin must not take the bus down
            message = f"{type(exc).__name__}: {exc}"
            logger.error("plugin %r (%s) failed to load: %s", entry_point.name, entry_point.value, message)
            return attrs.evolve(info, error=message), None
        version = f" {entry_point.version}" if entry_point.version else ""
        self._origins[entry_point.name] = f"{entry_point.value}, from {entry_point.distribution}{version}"
        return info, plugin

    def _register_extras(self, infos: list[PluginInfo]) -> list[PluginInfo]:
        """The embedder's own plugins (``HookBus(plugins=[...])``): the program's code, so
        they load whatever the policy; their rows for ``hookbus plugins``."""
        rows: list[PluginInfo] = []
        # An in-process plugin must not take the name of an installed one, even a blocked
        # one: `hookbus plugins` and the recorder selection tell plugins apart by name.
        taken = {info.name for info in infos}
        for index, plugin in enumerate(self.extra_plugins):
            if any(plugin is installed for installed in self._discovered.values()):  # an installed plugin handed in again
                installed_name = self.manager.get_name(plugin)
                infos[:] = [attrs.evolve(i, in_process=True) if i.name == installed_name else i for i in infos]
                continue
            name = self._extra_names.get(index)
            if name is None:
                name = self._extra_names[index] = _in_process_name(plugin, taken)
                self._origins[name] = f"in process, module {_module_of(plugin)}"
                _register(self.manager, plugin, name, self._origins)
            taken.add(name)
            rows.append(PluginInfo(name, _module_of(plugin), in_process=True))
        return rows


@attrs.frozen
class _Candidate:
    """A plugin that may load: a built-in one, or a discovered entry point."""

    entry_point: EntryPoint
    builtin: bool = False
    #: Why it is refused whatever the policy (it takes a built-in plugin's name).
    refused: str | None = None

    @property
    def name(self) -> str:
        return self.entry_point.name


def _candidates(discovered: Sequence[EntryPoint]) -> list[_Candidate]:
    """The built-in plugins, from hookbus's own installation whatever was discovered, and
    every discovered entry point, in name order; one that takes a built-in plugin's name
    is refused (the built-in one's own entry point aside)."""
    candidates = [
        _Candidate(EntryPoint(name, module, HOOKBUS_DISTRIBUTION, HOOKBUS_VERSION), builtin=True)
        for name, module in BUILTIN_PLUGINS.items()
    ]
    for entry_point in discovered:
        module = BUILTIN_PLUGINS.get(entry_point.name)
        if module is None:
            candidates.append(_Candidate(entry_point))
        elif entry_point.value.strip() != module or _normalize_name(entry_point.distribution) != HOOKBUS_DISTRIBUTION:
            refusal = (
                f"the name {entry_point.name!r} is hookbus's built-in plugin's, which always loads from hookbus's "
                f"own installation; {entry_point.distribution} cannot replace it (rename its entry point)"
            )
            candidates.append(_Candidate(entry_point, refused=refusal))
    return sorted(candidates, key=lambda candidate: (candidate.name, candidate.refused is not None))


def would_load(policy: PluginPolicy) -> dict[str, tuple[EntryPoint, str | None]]:
    """Each plugin a bus under ``policy`` would consider, by name, and why it would not
    load (blocked, or its entry point takes a built-in plugin's name), or None; found
    without importing any (what ``hookbus status`` compares a server's plugins with)."""
    found: dict[str, tuple[EntryPoint, str | None]] = {}
    for candidate in _candidates(discover(trusted_path(policy.untrusted) if policy.managed else None)):
        entry_point = candidate.entry_point
        if candidate.refused is not None:
            continue  # shown beside the built-in one, which is what loads under the name
        reason = blocked_reason(entry_point.name, policy.environ) if candidate.builtin else policy.refusal(entry_point)
        found[entry_point.name] = (entry_point, reason)
    return found


def _normalize_name(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


def _load_trusted(entry_point: EntryPoint, untrusted: frozenset[str]) -> object:
    """``entry_point.load()``, its module taken from where it is installed, never from an
    entry of the path that the environment chose."""
    import importlib

    module_name, _, attribute = entry_point.value.partition(":")
    module_name = module_name.strip()
    import_trusted(module_name.split(".")[0], untrusted)
    loaded: object = importlib.import_module(module_name)
    for part in attribute.strip().split(".") if attribute.strip() else ():
        loaded = getattr(loaded, part)
    return loaded


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
    return [
        info if info.error or info.blocked else attrs.evolve(info, provides=tuple(provided.get(info.name, ())))
        for info in infos
    ]


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
