"""``hookbus new``: a working hook to start from, made through the real CLI on real files.

What it makes must pass ``hookbus validate`` and work at once: ``hookbus emit EVENT
--input hooks/ID/envelope.json`` fires it (a PreToolUse command hook denies its sample).
What it refuses (an existing id, a bad event, matcher or id) it refuses before writing
anything.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from conftest import read_log, read_state
from test_cli import cli_env, run_cli

pytestmark = pytest.mark.timeout(120)

BLOCKING = ("PreToolUse", "PermissionRequest", "UserPromptSubmit")
OTHERS = ("PostToolUse", "ThreadStart", "Stop", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop")


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def new(tmp_path: Path, home: Path, *args: str) -> object:
    return run_cli(tmp_path, "new", *args, home=home)


def emit_sample(tmp_path: Path, home: Path, hook_id: str, event: str) -> object:
    return run_cli(tmp_path, "emit", event, "--input", str(home / "hooks" / hook_id / "envelope.json"), "--no-server", home=home)


def test_a_pretooluse_command_hook_is_valid_and_denies_its_sample(tmp_path: Path) -> None:
    """The whole promise in one run: files with safe modes, a valid hook, a script that
    reads the envelope without jq, and a sample it denies with exit 2 and a reason."""
    home = tmp_path / "home"  # it does not exist yet: new makes it

    made = new(tmp_path, home, "guard", "--event", "PreToolUse")

    assert made.returncode == 0, made.stderr
    assert made.stderr == ""
    hook_dir = home / "hooks" / "guard"
    assert sorted(os.listdir(hook_dir)) == ["check.sh", "envelope.json", "hook.json", "tests"]
    assert os.listdir(hook_dir / "tests") == ["sample.json"] and mode_of(hook_dir / "tests" / "sample.json") == 0o600
    assert (mode_of(home), mode_of(home / "hooks"), mode_of(hook_dir)) == (0o700, 0o700, 0o700)
    assert (mode_of(hook_dir / "hook.json"), mode_of(hook_dir / "envelope.json"), mode_of(hook_dir / "check.sh")) == (0o600, 0o600, 0o700)
    spec = json.loads((hook_dir / "hook.json").read_text())
    assert spec == {
        "id": "guard", "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True,
        "command": '"$HOOKBUS_HOOK_DIR/check.sh"', "timeout": "5s", "created_by": "hookbus new",
    }
    script = (hook_dir / "check.sh").read_text()
    assert script.startswith("#!/usr/bin/env bash\n")
    assert "jq" not in script.replace("without jq", "")  # reads the envelope with sed
    assert "exit 2" in script and ">&2" in script
    envelope = json.loads((hook_dir / "envelope.json").read_text())
    assert (envelope["tool_name"], envelope["tool_input"]) == ("bash", {"command": "rm -rf build"})
    # What it made, that it is valid, and what to run next, with the real paths.
    out = made.stdout
    assert out.startswith(f"made hook 'guard' in {hook_dir}:\n  hook.json ")
    assert "ok  hooks/guard: valid" in out
    assert f"hookbus emit PreToolUse --input {hook_dir}/envelope.json --home {home}" in out
    assert f"hookbus explain PreToolUse --input {hook_dir}/envelope.json --home {home}" in out

    validated = run_cli(tmp_path, "validate", home=home)
    denied = emit_sample(tmp_path, home, "guard", "PreToolUse")
    allowed = run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name":"bash","tool_input":{"command":"ls \\"a b\\""}}')

    assert (validated.returncode, validated.stdout) == (0, f"ok  hooks/guard\n1 valid hook, no problems in {home}/hooks\n")
    assert denied.returncode == 2, denied.stderr
    assert json.loads(denied.stdout) == {"behavior": "deny", "reason": "hook 'guard' denied: rm -rf is not allowed here: rm -rf build"}
    assert (allowed.returncode, json.loads(allowed.stdout)) == (0, {"behavior": "allow"})
    assert [(entry["status"], entry["tool_name"]) for entry in read_log(home)] == [("deny", "bash"), ("allow", "bash")]


@pytest.mark.parametrize("event", BLOCKING + OTHERS)
def test_every_event_gets_a_command_hook_that_works_on_its_sample(tmp_path: Path, event: str) -> None:
    """Sync and blocking where the event can block (its sample is denied, exit 2); sync
    elsewhere, where the script adds a line of context."""
    home = tmp_path / "home"

    made = new(tmp_path, home, "h", "--event", event)
    fired = emit_sample(tmp_path, home, "h", event)

    assert made.returncode == 0, made.stdout + made.stderr
    spec = json.loads((home / "hooks" / "h" / "hook.json").read_text())
    assert spec["trigger"]["event"] == event and spec["mode"] == "sync"
    decision = json.loads(fired.stdout)
    if event in BLOCKING:
        assert spec["blocking"] is True
        assert (fired.returncode, decision["behavior"]) == (2, "deny"), fired.stderr
        assert "a deny of the sample (exit 2)" in made.stdout
    else:
        assert "blocking" not in spec
        assert (fired.returncode, decision["behavior"]) == (0, "context"), fired.stderr
        assert decision["context"]
    assert fired.stderr == ""
    assert run_cli(tmp_path, "validate", home=home).returncode == 0


def test_a_workflow_hook_is_one_inline_bash_step_that_denies(tmp_path: Path) -> None:
    home = tmp_path / "home"

    made = new(tmp_path, home, "veto", "--event", "PreToolUse", "--kind", "workflow")
    hook_dir = home / "hooks" / "veto"
    assert sorted(os.listdir(hook_dir)) == ["envelope.json", "hook.json", "tests"]
    fired = emit_sample(tmp_path, home, "veto", "PreToolUse")

    assert made.returncode == 0, made.stdout
    spec = json.loads((hook_dir / "hook.json").read_text())
    [step] = spec["workflow"]["steps"]
    assert set(step) == {"name", "bash"} and "BLOCK:" in step["bash"]
    assert (fired.returncode, json.loads(fired.stdout)["reason"]) == (2, "hook 'veto' denied: rm -rf is not allowed here")


def test_a_prompt_hook_is_valid_and_says_a_provider_is_needed(tmp_path: Path) -> None:
    """Nothing at load can tell whether a provider will answer (the embedder may), so new
    says it, and the hook fails open until one does."""
    home = tmp_path / "home"

    made = new(tmp_path, home, "ask", "--event", "UserPromptSubmit", "--kind", "prompt")
    fired = emit_sample(tmp_path, home, "ask", "UserPromptSubmit")

    assert made.returncode == 0, made.stdout
    spec = json.loads((home / "hooks" / "ask" / "hook.json").read_text())
    assert isinstance(spec["prompt"], str) and spec["timeout"] == "30s" and spec["blocking"] is True
    assert "note: settings.json sets no prompt_provider" in made.stdout
    assert '{"prompt_provider": {"base_url": "http://localhost:11434/v1", "model": "llama3.2"}}' in made.stdout
    assert run_cli(tmp_path, "validate", home=home).returncode == 0
    assert (fired.returncode, json.loads(fired.stdout)) == (0, {"behavior": "allow"})
    assert "no prompt provider configured" in fired.stderr


def test_a_prompt_hook_with_a_provider_configured_says_nothing_of_it(tmp_path: Path, home: Path) -> None:
    (home / "settings.json").write_text(json.dumps({"prompt_provider": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}))

    made = new(tmp_path, home, "ask", "--event", "Stop", "--kind", "prompt")

    assert made.returncode == 0, made.stdout
    assert "note:" not in made.stdout and "llama" not in made.stdout


def test_a_tool_matcher_without_bash_gets_a_file_example_that_denies(tmp_path: Path) -> None:
    """The sample takes the first name of the matcher, and the example fits that tool."""
    home = tmp_path / "home"

    made = new(tmp_path, home, "env", "--event", "PreToolUse", "--matcher", "write_file|edit_file")
    fired = emit_sample(tmp_path, home, "env", "PreToolUse")

    assert made.returncode == 0, made.stdout
    envelope = json.loads((home / "hooks" / "env" / "envelope.json").read_text())
    assert envelope["tool_name"] == "write_file" and envelope["tool_input"]["path"] == ".env"
    assert (fired.returncode, json.loads(fired.stdout)["reason"]) == (2, "hook 'env' denied: writing .env could leak secrets")


def test_a_regex_the_sample_cannot_match_is_said_on_stderr(tmp_path: Path) -> None:
    home = tmp_path / "home"

    made = new(tmp_path, home, "mcp", "--event", "PreToolUse", "--matcher", "mcp__.*")

    assert made.returncode == 0
    assert "the sample envelope's tool_name 'bash' does not match the matcher 'mcp__.*'" in made.stderr
    assert "allow, since the sample does not match the matcher" in made.stdout


def test_an_existing_id_is_refused_unless_forced(tmp_path: Path, home: Path) -> None:
    assert new(tmp_path, home, "guard", "--event", "PreToolUse").returncode == 0
    hook_dir = home / "hooks" / "guard"
    assert emit_sample(tmp_path, home, "guard", "PreToolUse").returncode == 2  # writes state.json
    (hook_dir / "notes.txt").write_text("mine\n")
    before = {name: (hook_dir / name).read_bytes() for name in os.listdir(hook_dir) if name != "tests"}

    refused = new(tmp_path, home, "guard", "--event", "Stop")

    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr == (
        f"hookbus new: hook 'guard' exists already ({hook_dir}): choose another id, or pass --force to "
        "overwrite its hook.json, check.sh, envelope.json and tests/sample.json (its other files are kept)\n"
    )
    assert {name: (hook_dir / name).read_bytes() for name in os.listdir(hook_dir) if name != "tests"} == before

    forced = new(tmp_path, home, "guard", "--event", "Stop", "--force")

    assert forced.returncode == 0, forced.stdout
    assert forced.stdout.startswith(f"replaced hook 'guard' in {hook_dir}:")
    assert json.loads((hook_dir / "hook.json").read_text())["trigger"] == {"event": "Stop"}
    assert (hook_dir / "notes.txt").read_text() == "mine\n"
    assert read_state(home, "guard")["last_status"] == "deny"  # the hook's history is kept
    assert not [name for name in os.listdir(hook_dir) if name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x", "--event", "pretooluse"], "hookbus new: unknown event 'pretooluse'; events are PreToolUse, "),
        (["x", "--event", "SessionStart"], "(did you mean 'ThreadStart'? SessionStart is Claude Code's, Gemini CLI's and Codex CLI's name for it)"),
        (["x", "--event", "Stop", "--matcher", "bash"], "hookbus new: Stop has no matcher field, so a hook of it takes no --matcher: leave it out"),
        (["x", "--event", "PreToolUse", "--matcher", r"(a+)\1"], "hookbus new: --matcher: invalid matcher regex '(a+)\\\\1': backreferences are not supported (hookbus matches with RE2"),
        (["x", "--event", "PreToolUse", "--matcher", "a{,3}"], "write {0,3}"),
        (["x", "--event", "PreToolUse", "--matcher", "(bash"], "hookbus new: --matcher: invalid matcher regex '(bash'"),
        (["", "--event", "Stop"], "hookbus new: cannot make a hook with the id '': an id cannot be empty"),
        ([".hidden", "--event", "Stop"], "hookbus passes over a directory named like a hidden file"),
        (["notes~", "--event", "Stop"], "hookbus passes over a directory named like a hidden file or an editor's temporary"),
        (["a/b", "--event", "Stop"], "an id is one directory name: no '/', and not '.' or '..'"),
        (["..", "--event", "Stop"], "an id is one directory name"),
        (["a\x1b[2Jb", "--event", "Stop"], "hookbus new: cannot make a hook with the id 'a\\x1b[2Jb': it holds a control or direction character"),
        (["a\u202eb", "--event", "Stop"], "it holds a control or direction character"),
        (["x" * 256, "--event", "Stop"], "it is 256 bytes long, more than a directory name may be (255)"),
        (["x", "--event", "Stop", "--kind", "shell"], "argument --kind: invalid choice: 'shell'"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path: Path, args: list[str], message: str) -> None:
    home = tmp_path / "home"

    refused = new(tmp_path, home, *args)

    assert refused.returncode == 1
    assert message in refused.stderr
    assert "Traceback" not in refused.stderr
    assert refused.stdout == ""
    assert not home.exists()


def test_an_id_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 reach Python's argv as lone surrogates."""
    import subprocess
    import sys

    home = tmp_path / "home"
    refused = subprocess.run(
        [sys.executable, "-m", "hookbus", "new", os.fsdecode(b"bad\xff"), "--event", "Stop", "--home", str(home)],
        capture_output=True, env=cli_env(tmp_path), timeout=60,
    )

    assert refused.returncode == 1
    assert b"it is not valid UTF-8" in refused.stderr
    assert not home.exists()


def test_a_home_others_can_write_makes_the_hook_but_says_it_does_not_load(tmp_path: Path, home: Path) -> None:
    """The trust rules are the loader's: new says what keeps the hook from loading, and
    how to fix it, and exits 1."""
    home.chmod(0o777)

    made = new(tmp_path, home, "guard", "--event", "PreToolUse")

    assert made.returncode == 1
    assert (home / "hooks" / "guard" / "hook.json").exists()
    assert "chmod go-w" in made.stdout
    assert "hook 'guard' is not valid yet" in made.stdout
    assert f"hookbus validate guard --home {home}" in made.stdout
    home.chmod(0o700)
    assert run_cli(tmp_path, "validate", home=home).returncode == 0


def test_a_symlink_in_place_of_the_hook_is_refused_even_with_force(tmp_path: Path, home: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "hooks" / "guard").symlink_to(elsewhere)

    refused = new(tmp_path, home, "guard", "--event", "PreToolUse", "--force")

    assert refused.returncode == 1
    assert "is a symbolic link: move it away" in refused.stderr
    assert os.listdir(elsewhere) == []


def test_without_home_the_commands_it_prints_need_none(tmp_path: Path) -> None:
    """The home from $VIX_HOME: the printed commands work as they are, in that shell."""
    home = tmp_path / "vixhome"

    made = run_cli(tmp_path, "new", "n", "--event", "Stop", env=cli_env(tmp_path, VIX_HOME=str(home)))

    assert made.returncode == 0, made.stdout
    assert f"  hookbus emit Stop --input {home}/hooks/n/envelope.json\n" in made.stdout
    assert "--home" not in made.stdout
