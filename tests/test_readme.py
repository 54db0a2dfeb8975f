"""The README does what it says, on a fresh machine.

- Its quick start, run line by line from the README itself in a fresh HOME (no VIX_HOME,
  the venv's bin on PATH standing in for the install step), reaches a deny: the last emit
  exits 2 and prints the decision the README shows. With the install step, that is under
  ten commands.
- The hook.json it shows is the one `hookbus new` made; the embedding snippet runs on that
  home and prints the refusal.
- Its tables hold what hookbus has: the hook file's fields (every key of `hookbus schema`),
  the ten events with their matcher field and whether they can block, the command contract,
  and every verb of the command line.
- It stays a five-minute read (about 300 lines) and links each topic it leaves out to its
  page.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from docskit import (
    README,
    bash,
    hookbus_argv,
    commands_of,
    logical_lines,
    run_python,
    section,
    section_blocks,
    user_environment,
)

pytestmark = pytest.mark.timeout(120)


def readme() -> str:
    return README.read_text(encoding="utf-8")


def quick_start_lines() -> list[str]:
    """The commands of the quick start's shell block(s), one logical line each, comments kept
    (bash drops them)."""
    blocks = section_blocks(README, "Quick start", "sh")
    assert blocks, "the quick start has no ```sh block"
    return [line for block in blocks for line in logical_lines(block) if not line.lstrip().startswith("#")]


class QuickStart:
    """The quick start, run once: each line's result, and the HOME it ran in."""

    def __init__(self, home_dir: Path, results: list[tuple[str, subprocess.CompletedProcess[str]]]) -> None:
        self.home_dir = home_dir
        self.results = results

    @property
    def vix(self) -> Path:
        return self.home_dir / ".vix"

    def of(self, verb: str) -> list[tuple[str, subprocess.CompletedProcess[str]]]:
        return [(line, done) for line, done in self.results if _verb(line) == verb]


def _verb(line: str) -> str | None:
    for command in commands_of(line):
        argv = hookbus_argv(command)
        if argv:
            return argv[0]
    return None


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> QuickStart:
    home_dir = tmp_path_factory.mktemp("fresh") / "ana"
    home_dir.mkdir(mode=0o700)
    env = user_environment(home_dir)
    results = []
    for line in quick_start_lines():
        results.append((line, bash(line, env, cwd=home_dir)))
    return QuickStart(home_dir, results)


def _shown(results: list[tuple[str, subprocess.CompletedProcess[str]]]) -> str:
    return "\n".join(f"$ {line}\n[exit {done.returncode}]\n{done.stdout}{done.stderr}" for line, done in results)


def test_the_quick_start_reaches_a_deny_on_a_fresh_machine(quick_start: QuickStart) -> None:
    transcript = _shown(quick_start.results)
    emits = quick_start.of("emit")
    assert emits, "the quick start emits nothing"
    last_line, last = emits[-1]
    assert last.returncode == 2, f"the last emit must deny (exit 2):\n{transcript}"
    decision = json.loads(last.stdout)
    assert decision["behavior"] == "deny", transcript
    for line, done in quick_start.results:
        if (line, done) != (last_line, last):
            assert done.returncode == 0, f"{line!r} failed:\n{transcript}"
    assert quick_start.of("new") and quick_start.of("validate") and quick_start.of("explain") and quick_start.of("log")
    verbs = [_verb(line) for line, _ in quick_start.results]
    assert verbs.index("new") < verbs.index("validate") < verbs.index("emit") < verbs.index("explain") < verbs.index("log")


def test_it_takes_under_ten_commands_with_the_install(quick_start: QuickStart) -> None:
    install = [
        line
        for block in section_blocks(README, "Install", "sh")
        for line in logical_lines(block)
        if line.lstrip().startswith("pip install .")
    ]
    assert install, "the install section shows no `pip install .`"
    # a clone, cd into it, pip install ., then the quick start
    assert 3 + len(quick_start.results) < 10


def test_what_the_readme_shows_is_what_they_print(quick_start: QuickStart) -> None:
    quick = section(README, "Quick start")
    shown = section_blocks(README, "Quick start", "text")
    _, last = quick_start.of("emit")[-1]
    assert last.stdout.strip() in [block.strip() for block in shown], (
        f"the README shows {shown}, emit printed {last.stdout!r}"
    )
    [(_, validate)] = quick_start.of("validate")
    assert "ok  hooks/no-rm-rf" in validate.stdout and "`ok  hooks/no-rm-rf`" in quick
    [(_, log)] = quick_start.of("log")
    assert "no-rm-rf" in log.stdout and "deny" in log.stdout
    [(_, explain)] = quick_start.of("explain")
    assert "no-rm-rf" in explain.stdout
    made = quick_start.vix / "hooks" / "no-rm-rf"
    for name in ("hook.json", "check.sh", "envelope.json"):
        assert (made / name).is_file() and f"`{name}`" in quick, name
    assert (quick_start.vix / "logs" / "hooks").is_dir()


def test_the_hook_file_shown_is_the_one_new_made(quick_start: QuickStart) -> None:
    [shown] = section_blocks(README, "The hook file", "json")
    shown_spec = json.loads(shown)
    made = json.loads((quick_start.vix / "hooks" / "no-rm-rf" / "hook.json").read_text())
    for key, value in shown_spec.items():
        assert made.get(key) == value, f"the README shows {key}: {value!r}; hookbus new wrote {made.get(key)!r}"


def test_the_embedding_snippet_runs_on_the_quick_start_home(quick_start: QuickStart) -> None:
    [code] = section_blocks(README, "Embedding", "python")
    assert len(code.splitlines()) <= 12, "about 10 lines"
    result = run_python(code, env=user_environment(quick_start.home_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("refused: hook 'no-rm-rf' denied:"), result.stdout


# -- the tables --------------------------------------------------------------------------------


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|[-|\s]+\|$", line):
            rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows[1:]  # without the header


def test_the_hook_file_table_has_every_field_of_the_schema() -> None:
    from hookbus.plugins import build_plugin_manager, build_runner_table
    from hookbus.schema import hook_schema

    manager, _ = build_plugin_manager()
    schema: dict[str, Any] = hook_schema(build_runner_table(manager))
    fields = " ".join(row[0] + " " + row[-1] for row in table_rows(section(README, "The hook file")))
    names = [*schema["properties"], *(f"trigger.{key}" for key in schema["properties"]["trigger"]["properties"])]
    missing = [name for name in names if f"`{name}`" not in fields and name != "trigger"]
    assert not missing, f"the README's hook file table leaves out {missing}"


def test_the_events_table_is_the_ten_events() -> None:
    from hookbus.events import EVENTS

    rows = table_rows(section(README, "Events"))
    listed: dict[str, list[str]] = {}
    for row in rows:
        for name in row[0].split(", "):
            listed[name] = row
    assert set(listed) == set(EVENTS)
    for name, event in EVENTS.items():
        row = listed[name]
        field = getattr(event, "matcher_field", None)
        assert (f"`{field}`" if field else "(no matcher)") == row[2], name
        assert row[3].startswith("yes") == bool(getattr(event, "can_block")), name


def test_the_command_contract_is_what_the_command_runner_decides() -> None:
    from hookbus.contract import outcome_from_command

    event = "PreToolUse"
    assert outcome_from_command(0, b"", b"", event).behavior == "allow"
    assert outcome_from_command(0, b"42\n", b"", event).behavior == "context"
    assert outcome_from_command(0, b'{"behavior": "deny", "reason": "no"}', b"", event).reason == "no"
    denied = outcome_from_command(2, b"", b"nope\n", event)
    assert (denied.behavior, denied.reason) == ("deny", "nope")
    assert outcome_from_command(2, b"from stdout\n", b"", event).reason == "from stdout"
    failed = outcome_from_command(1, b"", b"", event)
    assert failed.behavior == "allow" and failed.error
    assert "exits 2" in section(README, "The command contract")


def test_the_verbs_table_is_every_verb() -> None:
    from hookbus.cli.verbs import VERBS

    rows = table_rows(section(README, "The command line"))
    listed = {word for row in rows for word in re.findall(r"`hookbus ([a-z-]+)", row[0])}
    assert listed == set(VERBS), f"missing {set(VERBS) - listed}, not verbs {listed - set(VERBS)}"


# -- a five-minute read --------------------------------------------------------------------------


def test_the_readme_is_about_300_lines_in_the_issues_order() -> None:
    text = readme()
    assert len(text.splitlines()) <= 330
    headings = re.findall(r"^## (.+)$", text, re.M)
    order = ["Install", "Quick start", "The hook file", "Events", "The command contract", "Embedding",
             "The command line", "Claude Code, Gemini CLI and Codex CLI", "Serving", "Plugins", "Security", "Performance"]
    assert [heading for heading in headings if heading in order] == order


@pytest.mark.parametrize(
    ("heading", "page"),
    [
        ("Serving", "docs/serving.md"),
        ("Plugins", "docs/plugins.md"),
        ("Security", "docs/security.md"),
        ("Performance", "docs/performance.md"),
    ],
)
def test_each_topic_left_out_is_one_paragraph_and_a_link(heading: str, page: str) -> None:
    text = section(README, heading).strip()
    assert "\n\n" not in text, f"{heading}: one paragraph"
    assert f"]({page})" in text


def test_the_hosts_are_a_paragraph_a_table_with_a_row_each_and_a_link() -> None:
    text = section(README, "Claude Code, Gemini CLI and Codex CLI").strip()
    blocks = text.split("\n\n")
    tables = [block for block in blocks if block.startswith("|")]
    assert len(blocks) == 3 and len(tables) == 1, "a line, the host table, a paragraph"
    hosts = [row[0] for row in table_rows(tables[0])]
    assert hosts == ["Claude Code", "Gemini CLI", "Codex CLI"]
    assert "](docs/claude-code.md)" in blocks[-1]


def test_the_install_section_says_how_the_cli_gets_on_path() -> None:
    text = section(README, "Install")
    for words in ("pip install .", "pipx install .", "PATH", "~/.local/bin", "python3 -m hookbus", "Python 3.10"):
        assert words in text, words
