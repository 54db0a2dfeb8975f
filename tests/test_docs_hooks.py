"""docs/hooks.md says what hookbus does.

- Every hook spec in it (an object with a "trigger" object) is valid for `hookbus validate`,
  written into a home of its own, with the page's workflow configs in config/workflow.json
  and the page's own script beside the spec that runs it.
- Its examples decide as the page says: block-env-writes and protect deny a write to .env
  (the shell example of "Checking a hook", run as written), the fail-closed hook denies with
  the reason the page quotes, the fast veto and the inline workflow deny `rm -rf`.
- The messages it quotes are what `hookbus validate` prints.
- The final-text contract, the context cap and hook.yaml's final newline are as the page
  says.

(Every ```json block parses and every JSON decision decides what it says:
tests/test_docs_examples.py, for every page. Every link resolves: tests/test_docs_links.py.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from docskit import (
    DOCS,
    bash,
    blocks,
    hookbus,
    is_decision,
    is_hook_spec,
    json_documents,
    links,
    logical_lines,
    private_dir,
    private_file,
    section,
    section_blocks,
    user_environment,
    write_hook,
)
from hookbus.contract import outcome_from_final_text

DOC = DOCS / "hooks.md"

pytestmark = pytest.mark.timeout(120)


def parsed_blocks() -> list[tuple[int, Any]]:
    return list(json_documents(DOC))


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


SPECS = [(line, doc) for line, doc in parsed_blocks() if is_hook_spec(doc)]
DECISIONS = [(line, doc) for line, doc in parsed_blocks() if is_decision(doc)]


def spec_by_id(hook_id: str) -> tuple[int, dict[str, Any]]:
    return next((line, spec) for line, spec in SPECS if spec.get("id") == hook_id)


def script_after(line: int) -> str:
    """The page shows a script beside the spec that runs it, in the first ```sh block after it."""
    return next(block.body for block in blocks(DOC) if block.info == "sh" and block.line > line)


def install(home: Path, hook_id: str) -> None:
    """The page's hook ``hook_id`` in ``home``, with its script and the page's workflows."""
    line, spec = spec_by_id(hook_id)
    files = {"script.sh": script_after(line)} if '"$HOOKBUS_HOOK_DIR/script.sh"' in str(spec.get("command", "")) else {}
    write_hook(home, hook_id, spec, files)
    workflows = workflow_config()
    if workflows:
        private_file(private_dir(home / "config") / "workflow.json", json.dumps(workflows, indent=2) + "\n")


def test_the_page_has_the_examples_it_promises() -> None:
    ids = {doc.get("id") for _, doc in SPECS}
    assert {"block-env-writes", "protect", "subagent-done", "fast-veto", "no-rm-rf", "no-secrets-asked", "scan"} <= ids
    assert {doc["behavior"] for _, doc in DECISIONS} == {"deny", "modify", "context", "allow"}
    envelopes = [doc for _, doc in parsed_blocks() if isinstance(doc, dict) and "hook_event_name" in doc]
    assert envelopes, "the page shows no envelope"


@pytest.mark.parametrize(("line", "spec"), SPECS, ids=[f"line{line}" for line, _ in SPECS])
def test_every_hook_spec_is_valid(tmp_path: Path, line: int, spec: dict[str, Any]) -> None:
    home = private_dir(tmp_path / "home")
    hook_id = spec.get("id") or f"doc-example-{line}"
    files = {"script.sh": script_after(line)} if '"$HOOKBUS_HOOK_DIR/script.sh"' in str(spec.get("command", "")) else {}
    write_hook(home, hook_id, spec, files)
    workflows = workflow_config()
    if workflows:
        private_file(private_dir(home / "config") / "workflow.json", json.dumps(workflows, indent=2) + "\n")
    done = hookbus("validate", "--home", str(home), env=user_environment(tmp_path))
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"docs/hooks.md:{line}: hookbus validate refuses the spec:\n{output}"
    assert f"ok  hooks/{hook_id}" in done.stdout, f"docs/hooks.md:{line}: not loaded:\n{output}"


# -- the examples decide as the page says ------------------------------------------------------


def emit(home: Path, tmp_path: Path, event: str, envelope: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return hookbus("emit", event, "--home", str(home), "--no-server", input=json.dumps(envelope), env=user_environment(tmp_path))


def test_block_env_writes_denies_a_write_to_env(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    install(home, "block-env-writes")
    denied = emit(home, tmp_path, "PreToolUse", {"tool_name": "write_file", "tool_input": {"path": ".env"}})
    assert denied.returncode == 2
    assert json.loads(denied.stdout) == {"behavior": "deny", "reason": "hook 'block-env-writes' denied: writing .env could leak secrets"}
    allowed = emit(home, tmp_path, "PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "notes.md"}})
    assert (allowed.returncode, json.loads(allowed.stdout)) == (0, {"behavior": "allow"})


def test_checking_a_hook_as_written_denies_with_the_reason_shown(tmp_path: Path) -> None:
    """Step 2 of "Checking a hook", its shell block run as written, with `protect` (jq) in ~/.vix."""
    user = private_dir(tmp_path / "ana")
    install(private_dir(user / ".vix"), "protect")
    block = section_blocks(DOC, "Checking a hook", "sh")[0]
    [line] = logical_lines(block)
    done = bash(line, user_environment(user), cwd=user)
    assert done.returncode == 2, done.stderr
    shown = section(DOC, "Checking a hook")
    decision = json.loads(done.stdout)
    assert decision == {"behavior": "deny", "reason": "hook 'protect' denied: protected: .env"}
    assert "`{\"behavior\": \"deny\", \"reason\": \"hook 'protect'\n   denied: protected: .env\"}`" in shown


def test_the_fail_closed_hook_denies_with_the_reason_quoted(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    install(home, "scan")
    done = emit(home, tmp_path, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "git push"}})
    assert done.returncode == 2
    reason = json.loads(done.stdout)["reason"]
    assert reason.startswith("hook 'scan' denied: failed closed: the hook crashed (exited with status 127 (command not found): "), reason
    quoted = "`hook 'scan' denied: failed closed: the hook\ncrashed (exited with status 127 (command not found): ...)`"
    assert quoted in section(DOC, 'Failing closed: `"on_error": "deny"`')
    passed = emit(home, tmp_path, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}})
    assert passed.returncode == 0


@pytest.mark.parametrize("hook_id", ["fast-veto", "no-rm-rf"])
def test_the_workflow_examples_veto_rm_rf(tmp_path: Path, hook_id: str) -> None:
    home = private_dir(tmp_path / "home")
    install(home, hook_id)
    done = emit(home, tmp_path, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}})
    assert (done.returncode, json.loads(done.stdout)["reason"]) == (2, f"hook '{hook_id}' denied: rm -rf is not allowed here")
    assert emit(home, tmp_path, "PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}}).returncode == 0


# -- the messages it quotes ----------------------------------------------------------------------


def test_the_validation_examples_are_what_validate_prints(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    files = {
        "x": '{"trigger": {"event": "Stop"}, "blocking": true, "command": "exit 0"}',
        "y": '{"trigger": {"event": "Stop"}, "blockng": true, "command": "exit 0"}',
        "z": '{\n  "trigger": {"event": "Stop"}\n    "command": "exit 0"\n}',
    }
    for hook_id, text in files.items():
        private_file(private_dir(private_dir(home / "hooks") / hook_id) / "hook.json", text)
    private_file(private_dir(home / "config") / "workflow.json", json.dumps({"fast-veto": {"steps": [{"bsh": "exit 0"}]}}))
    printed = hookbus("validate", "--home", str(home), env=user_environment(tmp_path)).stdout
    text = section(DOC, "What validate checks")
    [block] = section_blocks(DOC, "What validate checks", "text")
    quoted = [line for line in block.splitlines() if line.startswith("hooks/")]
    assert len(quoted) == 3
    for line in quoted:
        assert line in printed, f"the page quotes {line!r}; validate printed:\n{printed}"
    config = "config/workflow.json: unknown step kind 'bsh' (did you mean 'bash'?): a step is bash or prompt @ $.fast-veto.steps[0]"
    assert config in printed and f"`{config}`" in text


def test_a_script_that_is_not_executable_is_named_as_the_page_says(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    write_hook(home, "guard", {"trigger": {"event": "Stop"}, "command": '"$HOOKBUS_HOOK_DIR/check.sh"'})
    private_file(home / "hooks" / "guard" / "check.sh", "#!/bin/sh\nexit 0\n", 0o600)
    printed = hookbus("validate", "--home", str(home), env=user_environment(tmp_path)).stdout
    assert "hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh, which is not\nexecutable: run chmod +x".replace("\n", " ") in printed
    assert "`hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh, which is not\nexecutable: run chmod +x ...`" in section(DOC, "What validate checks")


# -- what the page says of the contracts -----------------------------------------------------------


def test_the_final_text_contract() -> None:
    fenced = outcome_from_final_text('Sure:\n```json\n{"behavior": "deny", "reason": "no"}\n```')
    assert (fenced.behavior, fenced.reason) == ("deny", "no")
    block = outcome_from_final_text("Looked at it.\nBLOCK: rm -rf is not allowed here")
    assert (block.behavior, block.reason) == ("deny", "rm -rf is not allowed here")
    assert outcome_from_final_text("a note").behavior == "context"
    assert outcome_from_final_text('{"no": "behavior"}').behavior == "context"
    assert outcome_from_final_text("").behavior == "allow"
    twice = outcome_from_final_text('{"behavior": "deny", "behavior": "allow"}')
    assert twice.error is not None


def test_context_is_capped_with_the_marker_the_page_shows(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    write_hook(home, "long", {"trigger": {"event": "Stop"}, "mode": "sync", "command": "cat >/dev/null; head -c 10050 /dev/zero | tr '\\0' a"})
    context = json.loads(emit(home, tmp_path, "Stop", {}).stdout)["context"]
    assert context.endswith("\n[hookbus: truncated 50 more characters]")
    assert "`[hookbus: truncated N more characters]`" in section(DOC, "Limits")


def test_a_hook_yaml_without_its_final_newline_is_not_loaded(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    directory = private_dir(private_dir(home / "hooks") / "y")
    private_file(directory / "hook.yaml", "trigger:\n  event: Stop\ncommand: echo one two")
    assert "ok  hooks/y" not in hookbus("validate", "--home", str(home), env=user_environment(tmp_path)).stdout
    private_file(directory / "hook.yaml", "trigger:\n  event: Stop\ncommand: echo one two\n")
    assert "ok  hooks/y" in hookbus("validate", "--home", str(home), env=user_environment(tmp_path)).stdout


def test_the_page_links_into_the_readme_and_the_other_pages() -> None:
    targets = [target for _, target in links(DOC)]
    assert any(target.startswith("../README.md#") for target in targets)
    for page in ("reference.md", "security.md", "claude-code.md", "plugins.md", "embedding.md", "hot-reload.md"):
        assert any(target.startswith(page) for target in targets), page


def test_pointing_an_editor_at_the_schema_as_the_page_says(tmp_path: Path) -> None:
    from jsonschema import Draft202012Validator

    user = private_dir(tmp_path / "ana")
    home = private_dir(user / ".vix")
    private_dir(home / "hooks")
    [line] = [line for block in section_blocks(DOC, "Editors, and hooks to copy", "sh") for line in logical_lines(block)]
    done = bash(line, user_environment(user), cwd=user)
    assert done.returncode == 0, done.stderr
    [example] = section_blocks(DOC, "Editors, and hooks to copy", "json")
    spec = write_hook(home, "edited", json.loads(example))
    schema_path = (spec.parent / json.loads(example)["$schema"]).resolve()
    assert schema_path == home / "hook.schema.json"
    Draft202012Validator(json.loads(schema_path.read_text())).validate(json.loads(spec.read_text()))
    checked = hookbus("validate", "--home", str(home), env=user_environment(user))
    assert checked.returncode == 0 and "ok  hooks/edited" in checked.stdout, checked.stdout
