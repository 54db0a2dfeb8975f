"""CONTRIBUTING.md holds: its layout names every module of the engine and of each edge, each
built-in plugin and each part of contrib/; the make targets and files it names exist; every
page of docs/ has the test module it promises; and each dependency of pyproject.toml is
there with why it is needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docskit import CONTRIBUTING, DOCS, README, REPO, commands_of, logical_lines, section, section_blocks

pytestmark = pytest.mark.timeout(60)

#: Modules kept only so that old import paths and console scripts work (named in the text).
SHIMS = {"client", "protocol", "quickpath"}


def layout() -> str:
    [block] = section_blocks(CONTRIBUTING, "Layout", "text")
    return block


def words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def test_the_layout_names_every_module() -> None:
    named = words(layout())
    top = {path.stem for path in (REPO / "hookbus").glob("*.py")} - {"__init__", "__main__"} - SHIMS
    missing = sorted(top - named)
    assert not missing, f"the layout leaves out hookbus/{missing}"
    for edge in ("cli", "serve", "hosts"):
        assert f"\n  {edge}/" in layout(), edge
        modules = {path.stem for path in (REPO / "hookbus" / edge).glob("*.py")} - {"__init__"}
        missing = sorted(modules - named)
        assert not missing, f"the layout leaves out hookbus/{edge}/{missing}"
    for plugin in (REPO / "plugins").glob("hookbus_*"):
        assert f"{plugin.name}/" in layout(), plugin.name
    for part in ("hooks", "schema", "node", "systemd", "examples"):
        assert (REPO / "contrib" / part).is_dir() and f"{part}/" in layout(), part
    for distribution in (REPO / "contrib").glob("hookbus-*"):
        assert distribution.name in layout(), distribution.name
    text = " ".join(section(CONTRIBUTING, "Layout").split())
    for public in ("`hookbus`", "`hookbus.testing`", "`hookbus.recording`", "`hookbus.client`", "`hookbus.protocol`"):
        assert public in text, public


def test_the_targets_and_files_it_names_exist() -> None:
    makefile = (REPO / "Makefile").read_text()
    for target in set(re.findall(r"`make ([a-z]+)`", CONTRIBUTING.read_text())):
        assert re.search(rf"^{target}:", makefile, re.M), target
    for path in set(re.findall(r"`((?:tests|bench|contrib|docs)/[\w./-]+)`", CONTRIBUTING.read_text())):
        if "<" not in path:
            assert (REPO / path).exists(), path
    for block in section_blocks(CONTRIBUTING, "The suites", "sh"):
        for line in logical_lines(block):
            for command in commands_of(line):
                for word in command:
                    if word.startswith(("tests/", "bench/")):
                        assert (REPO / word).exists(), line


def test_every_page_has_its_test() -> None:
    for page in DOCS.glob("*.md"):
        if page.name in ("hooks.md", "protocol.md"):
            continue  # tests/test_docs_hooks.py, tests/test_protocol_doc.py
        module = REPO / "tests" / f"test_docs_{page.stem.replace('-', '_')}.py"
        assert module.is_file(), f"{page.name} has no {module.name}"
    assert (REPO / "tests" / "test_docs_hooks.py").is_file() and (REPO / "tests" / "test_protocol_doc.py").is_file()


def dependencies() -> tuple[list[str], list[str]]:
    text = (REPO / "pyproject.toml").read_text()
    runtime = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S)
    test = re.search(r"^test = \[(.*?)\]", text, re.M)
    assert runtime is not None and test is not None

    def names(block: str) -> list[str]:
        return [re.split(r"[<>=\[ ]", name)[0] for name in re.findall(r'"([^"]+)"', block)]

    return names(runtime.group(1)), names(test.group(1))


def test_each_dependency_is_there_with_why() -> None:
    runtime, test = dependencies()
    text = section(CONTRIBUTING, "Dependencies")
    for name in runtime:
        match = re.search(rf"\*\*{re.escape(name)}\*\*[^\n]*?:", text)
        assert match is not None or f"**{name}**" in text, f"CONTRIBUTING.md does not say why {name}"
        assert name in section(README, "Install"), f"the README's install section does not name {name}"
    for name in test:
        assert f"**{name}**" in text, f"CONTRIBUTING.md does not name the test dependency {name}"
