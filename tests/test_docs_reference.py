"""docs/reference.md is complete: every field of `hookbus schema` (the installed runners'
included), every settings.json key hookbus and the contrib plugins read, every environment
variable the code names, every verb and every option of the command line, and every exit
code have their place on the page."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Any, Iterator

import attrs
import pytest

from docskit import DOCS, REPO, section

DOC = DOCS / "reference.md"

pytestmark = pytest.mark.timeout(60)


def first_column(text: str) -> str:
    """The first cells of the tables of ``text``, joined."""
    cells = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells.append(line.strip().strip("|").split(" | ")[0])
    return "\n".join(cells)


def schema_paths(node: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in node.get("properties", {}).items():
        yield prefix + key
        yield from schema_paths(value, f"{prefix}{key}.")
    if "items" in node:
        yield from schema_paths(node["items"], prefix[:-1] + "[].")
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key, []):
            if isinstance(sub, dict):
                yield from schema_paths(sub, prefix)


def test_every_field_of_the_schema_has_a_row() -> None:
    from hookbus.plugins import build_plugin_manager, build_runner_table
    from hookbus.schema import hook_schema

    manager, _ = build_plugin_manager()
    rows = first_column(section(DOC, "hook.json"))
    missing = [path for path in schema_paths(hook_schema(build_runner_table(manager))) if f"`{path}`" not in rows]
    assert not missing, f"docs/reference.md's hook.json table leaves out {missing}"


def settings_keys() -> set[str]:
    from hookbus.permissions import STRICT_MODES_SETTING
    from hookbus_prompt import provider

    sqlite = pytest.importorskip("hookbus_sqlite")  # contrib/hookbus-sqlite, which make test installs
    SQLITE, SQLITE_KEYS = sqlite.SETTING, sqlite._KEYS

    keys = {"features.hooks", STRICT_MODES_SETTING, "recorder", "claude_code.tools.<vixd tool>", "jsonl_recorder.path"}
    keys |= {f"{provider.SETTING}.{field.name}" for field in attrs.fields(provider.ProviderConfig)}
    keys |= {f"{SQLITE}.{key}" for key in SQLITE_KEYS}
    return keys


def test_every_settings_key_has_a_row() -> None:
    rows = first_column(section(DOC, "settings.json"))
    missing = [key for key in sorted(settings_keys()) if f"`{key}`" not in rows]
    assert not missing, missing


#: Strings of the code that look like environment variables and are not.
NOT_VARIABLES = {"HOOKBUS_ERROR"}  # the name of error code -32000
ENVIRONMENT = re.compile(r"\b((?:HOOKBUS|VIX|CLAUDE|GEMINI|OTEL)_[A-Z0-9_]+)\b")


def variables_named_in_code() -> set[str]:
    found: set[str] = set()
    roots = [REPO / "hookbus", REPO / "plugins", *sorted((REPO / "contrib").glob("hookbus-*/hookbus_*"))]
    for root in roots:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found |= set(ENVIRONMENT.findall(node.value))
    found = {name for name in found if not name.endswith("_")}
    return found - NOT_VARIABLES


def test_every_environment_variable_the_code_names_is_there() -> None:
    text = section(DOC, "Environment variables") + (REPO / "contrib" / "hookbus-otel" / "README.md").read_text()
    missing = sorted(name for name in variables_named_in_code() if f"`{name}`" not in text)
    assert not missing, f"docs/reference.md (or, for OTEL_*, contrib/hookbus-otel/README.md) leaves out {missing}"
    page = section(DOC, "Environment variables")
    for name in ("VIX_HOME", "VIX_DISABLE_HOOKS", "HOOKBUS_DISABLE_PLUGINS", "HOOKBUS_LOAD_PLUGINS", "HOOKBUS_SOCKET",
                 "NO_COLOR", "HOOKBUS_HOOK_ID", "HOOKBUS_HOOK_DIR", "HOOKBUS_EVENT", "HOOKBUS_HOME", "HOOKBUS_PREVIOUS_OUTPUT",
                 "CLAUDE_PROJECT_DIR", "CLAUDE_PLUGIN_ROOT", "CLAUDE_ENV_FILE", "GEMINI_PROJECT_DIR", "OTEL_EXPORTER_OTLP_ENDPOINT"):
        assert f"`{name}`" in page, name


def verb_options() -> dict[str, set[str]]:
    from hookbus.cli.verbs import VERBS, build_parser

    parser = build_parser()
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    options = {}
    for verb in VERBS:
        sub = subparsers.choices[verb]
        options[verb] = {
            string for action in sub._actions for string in action.option_strings
            if string not in ("-h", "--help", "--home")
        }
    return options


def verb_section(verb: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^### [^\n]*`hookbus {re.escape(verb)}`[^\n]*\n(.*?)(?=^##)", text, re.M | re.S)
    assert match is not None, f"docs/reference.md has no section for `hookbus {verb}`"
    return match.group(1)


@pytest.mark.parametrize("verb", sorted(verb_options()))
def test_every_verb_and_option_is_there(verb: str) -> None:
    text = verb_section(verb)
    missing = sorted(option for option in verb_options()[verb] if option not in text)
    assert not missing, f"`hookbus {verb}`: the page leaves out {missing}"


def test_every_exit_code_is_there() -> None:
    from hookbus.cli.status import NOT_SERVING

    codes = {line.split("|")[1].strip() for line in section(DOC, "Exit codes").splitlines() if line.startswith("| ")}
    assert {"0", "1", "2", str(NOT_SERVING), "130, 143"} <= codes


# -- JSON output ----------------------------------------------------------------------------------


def json_example(heading: str, index: int = 0) -> Any:
    import json

    from docskit import section_blocks

    return json.loads(section_blocks(DOC, heading, "json")[index])


@pytest.fixture
def a_home(tmp_path: Path) -> Path:
    from docskit import hookbus, private_dir, user_environment, write_hook

    home = private_dir(tmp_path / "home")
    write_hook(home, "guard", {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True,
                               "command": "cat >/dev/null; echo no >&2; exit 2"})
    write_hook(home, "bad", {"trigger": {"event": "Stop"}, "blocking": True, "command": "exit 0"})
    hookbus("emit", "PreToolUse", "--home", str(home), "--no-server", input='{"tool_name": "bash"}', env=user_environment(tmp_path))
    return home


def printed_json(home: Path, *arguments: str) -> Any:
    import json

    from docskit import hookbus, user_environment

    done = hookbus(*arguments, "--home", str(home), "--json", env=user_environment(home.parent))
    return done, [json.loads(line) for line in done.stdout.splitlines()]


def test_list_validate_and_plugins_print_the_keys_shown(a_home: Path) -> None:
    _, [listed] = printed_json(a_home, "list")
    shown = json_example("`list --json`")
    assert set(listed) == set(shown)
    assert set(listed["hooks"][0]) == set(shown["hooks"][0])
    done, [validated] = printed_json(a_home, "validate")
    shown = json_example("`validate --json`")
    assert done.returncode == 1 and validated["ok"] is False
    assert set(validated) == set(shown) and set(validated["hooks"][0]) == set(shown["hooks"][0])
    _, [plugins] = printed_json(a_home, "plugins")
    shown = json_example("`plugins --json`")
    assert set(plugins) == set(shown) and set(plugins["plugins"][0]) == set(shown["plugins"][0])


def test_status_prints_the_keys_shown(a_home: Path) -> None:
    from docskit import user_environment
    from servekit import Served

    done, [absent] = printed_json(a_home, "status")
    assert done.returncode == 3
    assert set(absent) == set(json_example("`status --json`", 1)) and absent["serving"] is False
    with Served(a_home, env=user_environment(a_home.parent)):
        done, [serving] = printed_json(a_home, "status")
    assert done.returncode == 0
    shown = json_example("`status --json`", 0)
    assert set(serving) == set(shown)


def test_explain_and_log_print_the_keys_named(a_home: Path) -> None:
    import json

    from docskit import hookbus, user_environment

    done = hookbus("explain", "PreToolUse", "--home", str(a_home), "--dry-run", "--json", input='{"tool_name": "bash"}', env=user_environment(a_home.parent))
    explained = json.loads(done.stdout)
    text = section(DOC, "`explain --json`")
    for key in explained:
        assert f"`{key}`" in text, key
    for key in explained["hooks"][0]:
        assert f"`{key}`" in text, key
    _, records = printed_json(a_home, "log")
    shown = json_example("`log --json`")
    text = section(DOC, "`log --json`")
    for record in records:
        for key in record:
            assert f"`{key}`" in text, key
    assert set(records[0]) == set(shown)
