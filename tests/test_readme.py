"""The README shows what hookbus really says: its quoted messages come from a real run, and
its Python snippets run as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"

pytestmark = pytest.mark.timeout(60)


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_validation_examples_are_what_validate_prints(home: Path) -> None:
    hooks = home / "hooks"
    files = {
        "x": '{"trigger": {"event": "Stop"}, "blocking": true, "command": "exit 0"}',
        "y": '{"trigger": {"event": "Stop"}, "blockng": true, "command": "exit 0"}',
        "z": '{\n  "trigger": {"event": "Stop"}\n    "command": "exit 0"\n}',
    }
    for hook_id, text in files.items():
        (hooks / hook_id).mkdir()
        (hooks / hook_id / "hook.json").write_text(text)
    (home / "config").mkdir()
    (home / "config" / "workflow.json").write_text(json.dumps({"fast-veto": {"steps": [{"bsh": "exit 0"}]}}))
    printed = subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", "--home", str(home)], capture_output=True, text=True, timeout=60,
    ).stdout
    text = readme()
    block = text.split("**Mistakes never break the other hooks.**", 1)[1].split("```", 2)[1]
    quoted = [line for line in block.splitlines() if line.startswith("hooks/")]
    assert len(quoted) == 3
    for line in quoted:
        assert line in printed, f"the README quotes {line!r}; validate printed:\n{printed}"
    config = re.search(r"`(config/workflow\.json: unknown step kind[^`]*)`", text)
    assert config is not None and config.group(1) in printed


def test_the_embedding_snippets_run_as_written(tmp_path: Path) -> None:
    """Both Python blocks of "Embedding the bus", on a home with a guard, run and print."""
    section = readme().split("## Embedding the bus", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    home = tmp_path / "vix"
    guard = home / "hooks" / "block-env-writes"
    guard.mkdir(parents=True)
    (guard / "hook.json").write_text(json.dumps({
        "trigger": {"event": "PreToolUse", "matcher": "write_file"}, "mode": "sync", "blocking": True,
        "command": "cat > /dev/null; echo 'protected: .env' >&2; exit 2",
    }))
    for block in blocks:
        code = block.replace('"~/.vix"', repr(str(home)))
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip(), "the snippet printed nothing"
    first = subprocess.run([sys.executable, "-c", blocks[0].replace('"~/.vix"', repr(str(home)))], capture_output=True, text=True, timeout=60)
    assert "refused: hook 'block-env-writes' denied: protected: .env" in first.stdout


def test_every_relative_link_of_every_document_stays_inside_the_repository() -> None:
    root = README.parent
    documents = [path for path in root.rglob("*.md") if ".venv" not in path.parts and "build" not in path.parts]
    assert README in documents
    for document in documents:
        for target in re.findall(r"\]\(([^)\s]+)\)", document.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address, or an anchor of the same page
            path = (document.parent / target.split("#", 1)[0]).resolve()
            assert path.is_relative_to(root), f"{document.relative_to(root)} links outside the repository: {target}"
            assert path.exists(), f"{document.relative_to(root)} links to {target}, which does not exist"
