"""Where plugins come from, so that nothing a user puts on the import path can hide, replace
or add a plugin behind the managed tier's back.

The built-in plugins (the command, workflow and prompt runners, the resolver, the recorder)
are imported from hookbus's own installation, always: the ``hookbus`` entry points only say
that they exist. So a stray ``hookbus-9.dist-info`` earlier on ``sys.path`` cannot hide
them, and no other distribution can take their names.

Where a managed directory exists, the user's environment stops choosing code as well: the
entries of ``sys.path`` it put there (``$PYTHONPATH``, the working directory, the user's
site-packages) are not searched for plugins, and a plugin module they would shadow is
imported from where it is installed instead. Third-party plugins then load only when the
managed settings.json names them (``"plugins": [...]``, see ``hookbus.policy.tiers``).

This is not a sandbox: code that runs as the user before hookbus does (a ``PYTHONPATH``
that replaces hookbus itself or one of its dependencies, a ``usercustomize`` module) is a
program of the user's, which could as well not be hookbus. What it guards is hookbus's own
choice of code: no file the user drops on the path changes what the managed tier runs.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import os
import site
import sys
import threading
from typing import TYPE_CHECKING, Iterable, Mapping

if TYPE_CHECKING:
    from types import ModuleType

#: The built-in plugins, by their plugin name: the module each one is.
BUILTIN_PLUGINS: Mapping[str, str] = {
    "command": "hookbus_command",
    "workflow": "hookbus_workflow",
    "prompt": "hookbus_prompt",
    "resolver": "hookbus_resolver",
    "recorder": "hookbus_recorder",
}
#: The distribution that ships them, and its version (``hookbus.__version__`` is this one:
#: kept here so that the engine never imports the package that imports all of it).
HOOKBUS_DISTRIBUTION = "hookbus"
HOOKBUS_VERSION = "0.1.0"

_import_lock = threading.Lock()


class PluginImportError(ImportError):
    """A plugin's module could not be imported from a place hookbus trusts."""


def _real(path: str) -> str:
    return os.path.realpath(path or os.curdir)


@functools.lru_cache(maxsize=1)
def installation_dirs() -> tuple[str, ...]:
    """Where hookbus's own installation keeps its built-in plugins: beside the ``hookbus``
    package (a wheel), or in ``plugins/`` beside it (a source tree, an editable install)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # hookbus/, from hookbus/policy/
    parent = os.path.dirname(package)
    return parent, os.path.join(parent, "plugins")


def untrusted_entries(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The entries of ``sys.path`` (real paths) that the user's environment chose rather
    than the installation: each ``$PYTHONPATH`` entry, the working directory (``''``, and
    the entry ``python -m`` or a script adds for it), and the user's site-packages unless
    hookbus itself is installed there."""
    environ = os.environ if environ is None else environ
    entries = sys.path
    installation = {_real(directory) for directory in installation_dirs()}
    chosen: set[str] = set()
    if environ.get("PYTHONPATH"):
        # An empty entry between separators is the working directory, as Python reads it.
        chosen.update(_real(entry) for entry in environ["PYTHONPATH"].split(os.pathsep))
    cwd = _real(os.curdir)
    if "" in entries or cwd in {_real(entry) for entry in entries[:1]}:
        chosen.add(cwd)
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if isinstance(user_site, str) and _real(user_site) not in installation:
        chosen.add(_real(user_site))
    # hookbus's own installation is never the environment's choice, even when the working
    # directory is its source tree.
    return frozenset(chosen - installation)


def trusted_path(untrusted: frozenset[str] | None = None) -> list[str]:
    """``sys.path`` without the ``untrusted`` entries (default: ``untrusted_entries()``)."""
    untrusted = untrusted_entries() if untrusted is None else untrusted
    return [entry for entry in sys.path if _real(entry) not in untrusted]


def imported_from(untrusted: frozenset[str]) -> list[str]:
    """The top-level modules this process imported from one of the ``untrusted`` entries of
    the path: code the user's environment chose, running in this process already (a server
    started before the managed directory appeared, with a ``PYTHONPATH``)."""
    found = []
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        spec = getattr(module, "__spec__", None)
        if spec is not None and _found_in(spec, untrusted):
            found.append(name)
    return sorted(found)


def import_builtin(module_name: str) -> ModuleType:
    """A built-in plugin's module, from hookbus's own installation: imported as usual when
    that is where the import system finds it; otherwise (a module of that name earlier on
    the path) loaded from the installation, in its place."""
    spec = importlib.machinery.PathFinder.find_spec(module_name, list(installation_dirs()))
    if spec is None:
        raise PluginImportError(
            f"hookbus's built-in plugin module {module_name!r} is not in its installation "
            f"({' or '.join(installation_dirs())}): reinstall hookbus"
        )
    return _import_as(spec)


def import_trusted(module_name: str, untrusted: frozenset[str]) -> ModuleType:
    """The top-level module ``module_name`` as the import system finds it when the
    ``untrusted`` entries of the path are left out: the installed plugin, not one that a
    file on ``$PYTHONPATH`` would put in its place."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        if find_spec is None:
            continue
        try:
            if finder is importlib.machinery.PathFinder:
                spec = find_spec(module_name, trusted_path(untrusted))
            else:
                spec = find_spec(module_name, None)
        except (ImportError, ValueError):
            continue
        if spec is not None and not _found_in(spec, untrusted):
            return _import_as(spec)
    raise PluginImportError(f"module {module_name!r} is not installed outside the paths the environment adds")


def _found_in(spec: importlib.machinery.ModuleSpec, entries: frozenset[str]) -> bool:
    """Whether ``spec`` was found directly in one of ``entries`` (``ENTRY/name/`` or
    ``ENTRY/name.py``)."""
    if spec.submodule_search_locations:
        places = list(spec.submodule_search_locations)
    elif spec.origin and spec.has_location:
        places = [spec.origin]
    else:
        return False  # built into the interpreter
    return any(_real(os.path.dirname(place)) in entries for place in places)


def _import_as(spec: importlib.machinery.ModuleSpec) -> ModuleType:
    """The module of ``spec`` under its own name: the one already imported when it is the
    same file, else a fresh load from ``spec`` that replaces an impostor (and its
    submodules) in ``sys.modules``."""
    name = spec.name
    with _import_lock:
        loaded = sys.modules.get(name)
        if loaded is not None and _places(getattr(loaded, "__path__", None), getattr(loaded, "__file__", None)) == _spec_places(spec):
            return loaded
        if loaded is None:
            found = importlib.util.find_spec(name)
            if found is not None and _spec_places(found) == _spec_places(spec):
                return importlib.import_module(name)
        for other in [module for module in sys.modules if module == name or module.startswith(name + ".")]:
            del sys.modules[other]
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            assert spec.loader is not None
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module


def _places(locations: Iterable[str] | None, origin: str | None) -> set[str]:
    return {_real(place) for place in locations} if locations else ({_real(origin)} if origin else set())


def _spec_places(spec: importlib.machinery.ModuleSpec) -> set[str]:
    return _places(spec.submodule_search_locations, spec.origin)
