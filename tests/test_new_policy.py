"""``hookbus new --kind cel|rego``: a policy hook to start from (a CEL expression in
hook.json, or policy.rego beside it), through the real CLI, with the plugins installed as a
user installs them (``make test`` installs every contrib distribution). What it makes is
valid, does on its sample what the command kind's script does, and its fixture passes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from test_cli import run_cli
from test_new_verb import BLOCKING, OTHERS, emit_sample, new

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("kind", ["cel", "rego"])
@pytest.mark.parametrize("event", BLOCKING + OTHERS)
def test_every_event_gets_a_policy_hook_that_works_on_its_sample(tmp_path: Path, event: str, kind: str) -> None:
    home = tmp_path / "home"

    made = new(tmp_path, home, "p", "--event", event, "--kind", kind)
    fired = emit_sample(tmp_path, home, "p", event)
    tested = run_cli(tmp_path, "test", home=home)

    assert made.returncode == 0, made.stdout + made.stderr
    assert "ok  hooks/p: valid" in made.stdout
    spec = json.loads((home / "hooks" / "p" / "hook.json").read_text())
    decision = json.loads(fired.stdout)
    if event in BLOCKING:
        assert (fired.returncode, decision["behavior"]) == (2, "deny"), (fired.stdout, fired.stderr)
    else:
        assert (fired.returncode, decision["behavior"]) == (0, "context"), (fired.stdout, fired.stderr)
        assert decision["context"]
    assert fired.stderr == ""
    assert tested.returncode == 0 and "1 passed, 0 failed" in tested.stdout, tested.stdout + tested.stderr
    if kind == "rego":
        assert spec["rego"] == {"file": "policy.rego", "query": "data.hooks.decision"}
        policy = home / "hooks" / "p" / "policy.rego"
        assert stat.S_IMODE(os.lstat(policy).st_mode) == 0o600
        assert "package hooks" in policy.read_text()
        assert f"then edit {policy} " in made.stdout
    else:
        assert isinstance(spec["cel"], str) and spec["cel"]
        assert f"then edit {home / 'hooks' / 'p' / 'hook.json'} " in made.stdout


@pytest.mark.parametrize("kind", ["cel", "rego"])
def test_the_file_example_denies_a_dot_env_write_and_allows_others(tmp_path: Path, kind: str) -> None:
    home = tmp_path / "home"
    assert new(tmp_path, home, "env", "--event", "PreToolUse", "--matcher", "write_file", "--kind", kind).returncode == 0

    denied = emit_sample(tmp_path, home, "env", "PreToolUse")
    allowed = run_cli(tmp_path, "emit", "PreToolUse", "--no-server", home=home, stdin='{"tool_name":"write_file","tool_input":{"path":"notes.txt","content":"x"}}')

    assert denied.returncode == 2 and "could leak secrets" in denied.stdout
    assert (allowed.returncode, json.loads(allowed.stdout)) == (0, {"behavior": "allow"}), allowed.stderr


def test_a_policy_kind_without_its_plugin_is_made_and_says_what_to_install(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = run_cli(tmp_path, "new", "p", "--event", "PreToolUse", "--kind", "cel", home=home, env={"HOOKBUS_DISABLE_PLUGINS": "cel"})
    assert made.returncode == 1
    assert "no runner for 'cel': it is provided by the plugin 'cel' (pip install hookbus-cel)" in made.stdout
