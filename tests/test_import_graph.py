"""No import cycles in hookbus/ and plugins/: data flows one way, and each module can be read
(and changed) without the ones that use it.

Every import counts: at the top of a module, inside a function (a lazy import is an
import too, only later), and under ``if TYPE_CHECKING:`` (it never runs, but a reader, and
mypy, still need the other module to read this one).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {"hookbus": ROOT / "hookbus", **{path.name: path for path in sorted((ROOT / "plugins").glob("hookbus_*"))}}


def module_files() -> dict[str, Path]:
    """Every module of ours by dotted name."""
    modules = {}
    for package, directory in SOURCES.items():
        for path in sorted(directory.rglob("*.py")):
            parts = [package, *path.relative_to(directory).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.AST, *, type_only: bool = True) -> list[tuple[str, list[str]]]:
    """(module, names) of each import; those under ``if TYPE_CHECKING`` only with ``type_only``."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if not type_only and isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [alias.name for alias in node.names]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(*, type_only: bool = True) -> dict[str, set[str]]:
    modules = module_files()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target, names in runtime_imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), type_only=type_only):
            edges = [f"{target}.{item}" for item in names if f"{target}.{item}" in modules] or [target]
            for edge in edges:
                # An import of a.b.c runs a and a.b first: the nearest module of ours.
                while edge and edge not in modules:
                    edge = edge.rpartition(".")[0]
                if edge and edge != name:
                    graph[name].add(edge)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan), as a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def connect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def path_through(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete cycle inside ``component``, for the message."""
    members = set(component)
    start = component[0]
    trail = [start]
    seen = {start}
    while True:
        nexts = sorted(target for target in graph[trail[-1]] if target in members)
        back = [target for target in nexts if target in seen]
        if back:
            return trail[trail.index(back[0]):] + [back[0]]
        trail.append(nexts[0])
        seen.add(nexts[0])


def test_the_import_graph_has_no_cycle_not_even_through_type_only_imports() -> None:
    graph = import_graph()
    assert len(graph) > 40, "the modules were not found"
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" -> ".join(path_through(graph, component)) for component in found)


def test_the_checker_finds_a_cycle_and_reads_type_checking_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import x\nelse:\n    import y\ndef f():\n    import z\n"
    assert [name for name, _ in runtime_imports(ast.parse(source))] == ["typing", "x", "y", "z"]
    assert [name for name, _ in runtime_imports(ast.parse(source), type_only=False)] == ["typing", "y", "z"]


#: The edges: what a host or a person touches. They may import the engine; never the reverse.
EDGES = ("hookbus.cli", "hookbus.serve", "hookbus.hosts")
#: Old paths of moved modules that the docs publish, kept working: each only re-exports
#: its edge module (CONTRIBUTING names them).
SHIMS = ("hookbus.client", "hookbus.protocol")
#: How many modules the top of hookbus/ may hold, ``__init__`` and ``__main__`` included:
#: the engine, and the public shims. Host code lives in ``hookbus.dialects`` and the edges.
MAX_TOP_MODULES = 50


def _in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(f"{package}.") for package in packages)


def test_imports_only_go_downward_from_the_edges_to_the_engine() -> None:
    """The engine (hookbus's top-level modules and the built-in plugins) never imports an
    edge, not even lazily: the tree says where a newcomer is, and the engine can be read,
    tested and embedded without the command line, the server or the host bridges."""
    upward = {
        module: sorted(target for target in targets if _in(target, EDGES))
        for module, targets in import_graph().items()
        if not _in(module, EDGES) and module not in (*SHIMS, "hookbus.__main__")
    }
    assert not {module: targets for module, targets in upward.items() if targets}


def test_the_top_of_the_package_stays_small() -> None:
    top = [path.stem for path in (ROOT / "hookbus").glob("*.py")]
    assert len(top) <= MAX_TOP_MODULES, sorted(top)
    for package in EDGES:
        assert (ROOT / package.replace(".", "/") / "__init__.py").is_file(), package


def test_the_old_public_paths_still_import() -> None:
    import importlib

    from hookbus.serve import client, protocol

    assert importlib.import_module("hookbus.client").Client is client.Client
    assert importlib.import_module("hookbus.protocol").HOOK_NOT_FOUND == protocol.HOOK_NOT_FOUND


def test_the_version_is_the_distributions() -> None:
    """``hookbus.__version__`` is kept where the engine reads it (``policy.plugintrust``,
    which names the built-in plugins' distribution) and matches pyproject.toml's."""
    import re

    import hookbus
    from hookbus.policy.plugintrust import HOOKBUS_VERSION

    found = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)  # 3.10 has no tomllib
    declared = found.group(1) if found else None
    assert hookbus.__version__ == HOOKBUS_VERSION == declared


#: How long the HookBus class may grow: a facade that forwards to its parts.
MAX_FACADE_LINES = 250


def test_the_facade_stays_a_facade() -> None:
    """``HookBus`` forwards to its parts (publisher, dispatcher, decider, recorders, firing):
    a feature lives in the part it belongs to, not in the class every embedder reads."""
    tree = ast.parse((ROOT / "hookbus" / "bus.py").read_text(encoding="utf-8"))
    (facade,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "HookBus"]
    assert facade.end_lineno is not None
    assert facade.end_lineno - facade.lineno + 1 <= MAX_FACADE_LINES
