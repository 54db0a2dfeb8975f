"""docs/hooks.md says what hookbus does.

- Every ```json block parses as JSON (a deliberately partial example is not marked json).
- Every hook spec in it (an object with a "trigger" object) is valid for `hookbus validate`,
  written into a home of its own, with the page's workflow configs in config/workflow.json.
- Every JSON decision in it (an object with "behavior") is that decision under the command
  contract, with no error.
- Every relative link resolves to a file of the repository, and every anchor to a heading of
  the file it points into (GitHub's slugs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from hookbus.contract import outcome_from_command

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "hooks.md"

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(?P<text>.*?)[ \t#]*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\[\]]*\])*\]\((?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def split_fences(text: str) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    """(fenced blocks as (info string, body, first line number), prose lines with their
    numbers). Indented fences (inside list items) count, as GitHub renders them."""
    blocks: list[tuple[str, str, int]] = []
    prose: list[tuple[str, int]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        opening = _FENCE.match(line.lstrip()) if line.strip() else None
        if opening is None:
            prose.append((line, index + 1))
            index += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").strip()
        indent = len(line) - len(line.lstrip())
        body: list[str] = []
        index += 1
        start = index + 1
        while index < len(lines):
            stripped = lines[index].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                index += 1
                break
            body.append(lines[index][indent:] if lines[index][:indent].isspace() else lines[index].lstrip())
            index += 1
        blocks.append((info, "\n".join(body), start))
    return blocks, prose


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def json_blocks() -> list[tuple[int, str]]:
    """(line, body) of each block whose info string is exactly json."""
    blocks, _ = split_fences(doc_text())
    return [(line, body) for info, body, line in blocks if info.split()[:1] == ["json"]]


def parsed_blocks() -> list[tuple[int, Any]]:
    return [(line, json.loads(body)) for line, body in json_blocks()]


def is_hook_spec(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("trigger"), dict)


def is_decision(document: Any) -> bool:
    return isinstance(document, dict) and "behavior" in document


def is_workflow_config(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and bool(document)
        and not is_hook_spec(document)
        and all(isinstance(value, dict) and "steps" in value for value in document.values())
    )


def workflow_config() -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for _, document in parsed_blocks():
        if is_workflow_config(document):
            merged.update(document)
    return merged


def _ids(blocks: list[tuple[int, Any]]) -> list[str]:
    return [f"line{line}" for line, _ in blocks]


ALL_JSON = json_blocks()
SPECS = [(line, doc) for line, doc in parsed_blocks() if is_hook_spec(doc)]
DECISIONS = [(line, doc) for line, doc in parsed_blocks() if is_decision(doc)]


def test_the_page_has_the_examples_it_promises() -> None:
    ids = {doc.get("id") for _, doc in SPECS}
    assert {"block-env-writes", "protect", "subagent-done"} <= ids
    assert {doc["behavior"] for _, doc in DECISIONS} == {"deny", "modify", "context", "allow"}
    envelopes = [doc for _, doc in parsed_blocks() if isinstance(doc, dict) and "hook_event_name" in doc]
    assert envelopes, "the page shows no envelope"


@pytest.mark.parametrize(("line", "body"), ALL_JSON, ids=[f"line{line}" for line, _ in ALL_JSON])
def test_every_json_block_parses(line: int, body: str) -> None:
    try:
        json.loads(body)
    except ValueError as exc:
        pytest.fail(f"docs/hooks.md:{line}: the ```json block is not JSON ({exc}); mark a partial example otherwise")


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def _private_file(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    path.chmod(0o600)


@pytest.mark.parametrize(("line", "spec"), SPECS, ids=_ids(SPECS))
def test_every_hook_spec_is_valid(tmp_path: Path, line: int, spec: dict[str, Any]) -> None:
    home = _private_dir(tmp_path / "home")
    hook_id = spec.get("id") or f"doc-example-{line}"
    hook_dir = _private_dir(_private_dir(home / "hooks") / hook_id)
    _private_file(hook_dir / "hook.json", json.dumps(spec, indent=2) + "\n")
    if '"$HOOKBUS_HOOK_DIR/script.sh"' in str(spec.get("command", "")):
        # The page shows the script beside the spec, in the first ```sh block after it
        # (mode 0700, as it says): validate checks that it is there and executable.
        blocks, _ = split_fences(DOC.read_text(encoding="utf-8"))
        script = next(body for info, body, start in blocks if info == "sh" and start > line)
        _private_file(hook_dir / "script.sh", script)
        (hook_dir / "script.sh").chmod(0o700)
    workflows = workflow_config()
    if workflows:
        _private_file(_private_dir(home / "config") / "workflow.json", json.dumps(workflows, indent=2) + "\n")
    env = {key: value for key, value in os.environ.items() if key not in ("VIX_HOME", "VIX_DISABLE_HOOKS")}
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"docs/hooks.md:{line}: hookbus validate refuses the spec:\n{output}"
    assert f"ok  hooks/{hook_id}" in done.stdout, f"docs/hooks.md:{line}: not loaded:\n{output}"


def _event_for(decision: dict[str, Any]) -> str:
    new_input = decision.get("input")
    return "UserPromptSubmit" if isinstance(new_input, dict) and "prompt" in new_input else "PreToolUse"


@pytest.mark.parametrize(("line", "decision"), DECISIONS, ids=_ids(DECISIONS))
def test_every_json_decision_decides_what_it_says(line: int, decision: dict[str, Any]) -> None:
    stdout = json.dumps(decision).encode("utf-8")
    outcome = outcome_from_command(0, stdout, b"", _event_for(decision))
    assert outcome.error is None, f"docs/hooks.md:{line}: {outcome.error}"
    assert outcome.behavior == decision["behavior"], f"docs/hooks.md:{line}"
    if decision["behavior"] == "modify":
        assert outcome.input == decision["input"]
    if decision["behavior"] == "context":
        assert outcome.context == decision["context"]
    if decision["behavior"] == "deny":
        assert outcome.reason == decision.get("reason")


# -- links ----------------------------------------------------------------------------------


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, punctuation other than
    '-' and '_' dropped, each space made a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    _, prose = split_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for line, _ in prose:
        match = _HEADING.match(line)
        if match is None:
            continue
        slug = github_slug(match.group("text"))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def links() -> list[tuple[int, str]]:
    _, prose = split_fences(doc_text())
    found: list[tuple[int, str]] = []
    for line, number in prose:
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            found.append((number, match.group("target").strip("<>")))
    return found


LINKS = links()


def test_the_page_links_into_the_readme() -> None:
    assert any(target.startswith("../README.md#") for _, target in LINKS)


@pytest.mark.parametrize(("line", "target"), LINKS, ids=[f"line{line}:{target}" for line, target in LINKS])
def test_every_link_resolves_inside_the_repository(line: int, target: str) -> None:
    where = f"docs/hooks.md:{line}: {target}"
    assert not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE), f"{where}: links outside the repository"
    assert not target.startswith("/"), f"{where}: an absolute path is not in a clone"
    path_part, _, anchor = target.partition("#")
    path = (DOC.parent / unquote(path_part)).resolve() if path_part else DOC
    assert path == REPO or REPO in path.parents, f"{where}: points outside the repository"
    assert path.exists(), f"{where}: {path.relative_to(REPO)} does not exist"
    if anchor:
        assert path.suffix == ".md", f"{where}: an anchor into a file that is not markdown"
        assert unquote(anchor) in anchors_of(path), f"{where}: no heading of {path.relative_to(REPO)} has this anchor"


def test_slugs_follow_github() -> None:
    assert github_slug('Failing closed: `"on_error": "deny"`') == "failing-closed-on_error-deny"
    assert github_slug("The final-text contract (workflows and prompts)") == "the-final-text-contract-workflows-and-prompts"
    assert github_slug("Serving: one bus for every process, in any language") == "serving-one-bus-for-every-process-in-any-language"
