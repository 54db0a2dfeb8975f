"""Every code block of README.md, CONTRIBUTING.md and docs/*.md is what it says it is.

- Each fenced block says what it holds: json, python, sh, toml, rego or text (output, layouts).
- json parses; python compiles; toml parses; sh passes `bash -n`, and each `hookbus`
  command line in it parses with the real command line's parser (a synopsis with
  `[options]` only names a real verb).
- Every hook spec (an object with a "trigger" object) is valid for `hookbus validate`, in a
  home of its own, with the page's workflows in config/workflow.json and a script for each
  `$HOOKBUS_HOOK_DIR/<file>` its command runs.
- Every settings.json (an object of hookbus's settings keys) and workflow config loads
  without a problem.
- Every JSON decision (an object with "behavior") is that decision under the command
  contract.

What each page's examples do when they run is tested page by page: tests/test_readme.py and
tests/test_docs_<page>.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from docskit import (
    Block,
    blocks,
    hookbus,
    hookbus_command_lines,
    is_decision,
    is_hook_spec,
    name_of,
    pages,
    private_dir,
    private_file,
    user_environment,
    write_hook,
)
from hookbus.contract import outcome_from_command

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

pytestmark = pytest.mark.timeout(120)

KINDS = ("json", "python", "sh", "toml", "text", "rego")
#: The keys of settings.json that hookbus and the contrib plugins read (docs/reference.md).
SETTINGS_KEYS = {"features", "hooks_strict_modes", "recorder", "prompt_provider", "claude_code", "sqlite_recorder", "jsonl_recorder"}

#: Pages whose bare blocks (output) are allowed: none, every block says what it holds.
UNMARKED_ALLOWED: set[str] = set()

BLOCKS = [(page, block) for page in pages() for block in blocks(page)]


def _id(page: Path, block: Block) -> str:
    return f"{name_of(page)}:{block.line}:{block.info or 'bare'}"


def of_kind(kind: str) -> list[tuple[Path, Block]]:
    return [(page, block) for page, block in BLOCKS if block.info == kind]


def documents() -> list[tuple[Path, int, Any]]:
    return [(page, block.line, json.loads(block.body)) for page, block in of_kind("json")]


def is_settings(document: Any) -> bool:
    return isinstance(document, dict) and bool(document) and set(document) <= SETTINGS_KEYS


def is_workflow_config(document: Any) -> bool:
    return (
        isinstance(document, dict) and bool(document) and not is_hook_spec(document)
        and all(isinstance(value, dict) and "steps" in value for value in document.values())
    )


def workflows_of(page: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for other, _, document in documents():
        if other == page and is_workflow_config(document):
            merged.update(document)
    return merged


@pytest.mark.parametrize(("page", "block"), BLOCKS, ids=[_id(page, block) for page, block in BLOCKS])
def test_every_block_says_what_it_holds(page: Path, block: Block) -> None:
    if not block.info and name_of(page) in UNMARKED_ALLOWED:
        pytest.skip(f"{name_of(page)} is not this test's to change: its output blocks are bare")
    assert block.info in KINDS, (
        f"{name_of(page)}:{block.line}: a block marked {block.info!r}; mark it one of {', '.join(KINDS)}"
    )


@pytest.mark.parametrize(("page", "block"), of_kind("json"), ids=[_id(p, b) for p, b in of_kind("json")])
def test_json_parses(page: Path, block: Block) -> None:
    try:
        json.loads(block.body)
    except ValueError as exc:
        pytest.fail(f"{name_of(page)}:{block.line}: not JSON ({exc}); mark a partial example text")


@pytest.mark.parametrize(("page", "block"), of_kind("python"), ids=[_id(p, b) for p, b in of_kind("python")])
def test_python_compiles(page: Path, block: Block) -> None:
    compile(block.body, f"{name_of(page)}:{block.line}", "exec")


@pytest.mark.parametrize(("page", "block"), of_kind("toml"), ids=[_id(p, b) for p, b in of_kind("toml")])
def test_toml_parses(page: Path, block: Block) -> None:
    if tomllib is None:
        pytest.skip("tomllib is Python 3.11's")
    tomllib.loads(block.body)


@pytest.mark.parametrize(("page", "block"), of_kind("sh"), ids=[_id(p, b) for p, b in of_kind("sh")])
def test_shell_parses_and_its_hookbus_commands_too(page: Path, block: Block) -> None:
    checked = subprocess.run(["bash", "-n"], input=block.body, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, f"{name_of(page)}:{block.line}: {checked.stderr}"
    from hookbus.cli.verbs import VERBS, build_parser

    for argv in hookbus_command_lines(block.body):
        where = f"{name_of(page)}:{block.line}: hookbus {' '.join(argv)}"
        if any(word.startswith("[") for word in argv):  # a synopsis: hookbus serve [--home HOME]
            assert argv[0] in VERBS, f"{where}: no such verb"
            continue
        try:
            build_parser().parse_args(argv)
        except SystemExit as exit:
            pytest.fail(f"{where}: the command line refuses it (exit {exit.code})")


SPECS = [(page, line, doc) for page, line, doc in documents() if is_hook_spec(doc)]


@pytest.mark.parametrize(("page", "line", "spec"), SPECS, ids=[f"{name_of(p)}:{line}" for p, line, _ in SPECS])
def test_every_hook_spec_is_valid(tmp_path: Path, page: Path, line: int, spec: dict[str, Any]) -> None:
    home = private_dir(tmp_path / "home")
    hook_id = spec.get("id") or f"doc-example-{line}"
    scripts = re.findall(r"\$\{?HOOKBUS_HOOK_DIR\}?/([\w.-]+)", str(spec.get("command", "")))
    files = {name: "#!/bin/sh\nexit 0\n" for name in scripts}
    rego = spec.get("rego")
    if isinstance(rego, dict):
        # A Rego hook's policy is the page's own: its first rego block.
        files[rego["file"]] = next(block.body for block in blocks(page) if block.info == "rego")
    write_hook(home, hook_id, spec, files)
    workflows = workflows_of(page)
    if workflows:
        private_file(private_dir(home / "config") / "workflow.json", json.dumps(workflows, indent=2))
    done = hookbus("validate", "--home", str(home), env=user_environment(tmp_path))
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{name_of(page)}:{line}: hookbus validate refuses the spec:\n{output}"
    assert f"ok  hooks/{hook_id}" in done.stdout, f"{name_of(page)}:{line}: not loaded:\n{output}"


CONFIGS = [(page, line, doc) for page, line, doc in documents() if is_settings(doc) or is_workflow_config(doc)]


@pytest.mark.parametrize(("page", "line", "document"), CONFIGS, ids=[f"{name_of(p)}:{line}" for p, line, _ in CONFIGS])
def test_every_settings_and_workflow_config_loads_without_a_problem(tmp_path: Path, page: Path, line: int, document: dict[str, Any]) -> None:
    home = private_dir(tmp_path / "home")
    private_dir(home / "hooks")
    if is_settings(document):
        private_file(home / "settings.json", json.dumps(document))
    else:
        private_file(private_dir(home / "config") / "workflow.json", json.dumps(document))
    done = hookbus("validate", "--home", str(home), env=user_environment(tmp_path))
    assert done.returncode == 0 and "settings.json" not in done.stdout and "config/" not in done.stdout, (
        f"{name_of(page)}:{line}:\n{done.stdout}{done.stderr}"
    )


DECISIONS = [(page, line, doc) for page, line, doc in documents() if is_decision(doc)]


@pytest.mark.parametrize(("page", "line", "decision"), DECISIONS, ids=[f"{name_of(p)}:{line}" for p, line, _ in DECISIONS])
def test_every_json_decision_decides_what_it_says(page: Path, line: int, decision: dict[str, Any]) -> None:
    new_input = decision.get("input")
    event = "UserPromptSubmit" if isinstance(new_input, dict) and "prompt" in new_input else "PreToolUse"
    outcome = outcome_from_command(0, json.dumps(decision).encode(), b"", event)
    where = f"{name_of(page)}:{line}"
    assert outcome.error is None, f"{where}: {outcome.error}"
    assert outcome.behavior == decision["behavior"], where
    if decision["behavior"] == "modify":
        assert outcome.input == decision["input"], where
    if decision["behavior"] == "context":
        assert outcome.context == decision["context"], where
    if decision["behavior"] == "deny":
        assert outcome.reason == decision.get("reason"), where


def test_the_kinds_are_all_used_and_every_page_has_examples() -> None:
    assert {block.info for page, block in BLOCKS if name_of(page) not in UNMARKED_ALLOWED} <= set(KINDS)
    for page in pages():
        assert any(p == page for p, _ in BLOCKS), f"{name_of(page)} has no example"
