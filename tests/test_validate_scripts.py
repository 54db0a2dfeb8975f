"""`hookbus validate` checks the scripts a hook runs from its own directory.

A guard whose script is missing or not executable loaded fine, validate said ok, and every
fire then failed open. Each case writes a real home, runs the real CLI, and asserts its
exact lines; the parser's own cases (hookbus.cli.scripts) show what it leaves unchecked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import HookWriter
from hookbus import HookBus
from hookbus.cli.scripts import script_uses

REPOSITORY = Path(__file__).resolve().parents[1]


def validate(tmp_path: Path, home: Path, *ids: str) -> tuple[int, list[str]]:
    """``hookbus validate [IDS] --home HOME``: its exit code and stdout's lines."""
    env = {key: value for key, value in os.environ.items() if key not in ("VIX_HOME", "VIX_DISABLE_HOOKS")}
    (tmp_path / "user-home").mkdir(exist_ok=True)
    env["HOME"] = str(tmp_path / "user-home")
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", *ids, "--home", str(home)],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stdout.splitlines()


def guard(write_hook: HookWriter, command: str, hook_id: str = "guard", files: dict[str, str] | None = None, **fields: Any) -> Path:
    return write_hook(hook_id, mode="sync", blocking=True, on_error="deny", command=command, files=files, **fields).parent


SCRIPT = "#!/bin/sh\nexit 0\n"


# -- what a hook runs from its directory ---------------------------------------------------


@pytest.mark.timeout(60)
def test_a_missing_script_is_a_problem(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    directory = guard(write_hook, '"$HOOKBUS_HOOK_DIR/check.sh"')
    code, lines = validate(tmp_path, home)
    assert code == 1
    assert lines == [
        f"hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh, which does not exist: put it in {directory}",
        f"no valid hooks, 1 problem in {home / 'hooks'}",
    ]


@pytest.mark.timeout(60)
def test_a_script_that_is_not_executable_is_a_problem(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    directory = guard(write_hook, '"$HOOKBUS_HOOK_DIR/check.sh"', files={"check.sh": SCRIPT})
    (directory / "check.sh").chmod(0o644)
    write_hook("fine", event="Stop", command='"$HOOKBUS_HOOK_DIR/ok.sh"', files={"ok.sh": SCRIPT})
    code, lines = validate(tmp_path, home)
    assert code == 1
    assert lines == [
        f"hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh, which is not executable: run chmod +x {directory / 'check.sh'}",
        "ok  hooks/fine",
        f"1 valid hook, 1 problem in {home / 'hooks'}",
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "command",
    ['$HOOKBUS_HOOK_DIR/chek.sh --strict', '"${HOOKBUS_HOOK_DIR}/chek.sh"', '"$HOOKBUS_HOOK_DIR"/chek.sh 2>/dev/null',
     'cat | exec "$HOOKBUS_HOOK_DIR/chek.sh"', 'if true; then X=1 "$HOOKBUS_HOOK_DIR/chek.sh"; fi'],
    ids=["unquoted", "braced", "quoted-variable", "after-exec", "in-if"],
)
def test_every_spelling_of_the_hook_directory_is_checked(command: str, tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    """A typo in the script's name: the message offers the name that is there."""
    directory = guard(write_hook, command, files={"check.sh": SCRIPT})
    shown = "${HOOKBUS_HOOK_DIR}/chek.sh" if "{" in command else "$HOOKBUS_HOOK_DIR/chek.sh"
    code, lines = validate(tmp_path, home)
    assert (code, lines[0]) == (
        1, f"hooks/guard/hook.json: the command runs {shown}, which does not exist (did you mean 'check.sh'?): put it in {directory}"
    )


@pytest.mark.timeout(60)
def test_an_interpreters_script_must_exist_but_need_not_be_executable(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    directory = guard(write_hook, 'bash "$HOOKBUS_HOOK_DIR/read.sh" && python3 -u $HOOKBUS_HOOK_DIR/gone.py', files={"read.sh": SCRIPT})
    (directory / "read.sh").chmod(0o644)
    code, lines = validate(tmp_path, home)
    assert (code, lines[0]) == (
        1, f"hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/gone.py with python3, which does not exist: put it in {directory}"
    )
    assert len(lines) == 2


@pytest.mark.timeout(60)
def test_a_script_must_stay_in_the_hooks_directory(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    """hookbus checks who may change what is in a hook's directory, nothing elsewhere: a
    script reached through ``..`` or a link out is one nobody checked."""
    (home / "shared.sh").write_text(SCRIPT)
    (home / "shared.sh").chmod(0o755)
    escaping = guard(write_hook, '"$HOOKBUS_HOOK_DIR/../../shared.sh"', hook_id="escapes")
    linked = guard(write_hook, '"$HOOKBUS_HOOK_DIR/true"', hook_id="linked")
    (linked / "true").symlink_to(shutil.which("true") or "/bin/true")
    real_true = os.path.realpath(linked / "true")
    dangling = guard(write_hook, '"$HOOKBUS_HOOK_DIR/later.sh"', hook_id="dangling")
    (dangling / "later.sh").symlink_to(dangling / "not-yet.sh")
    (escaping / "sub").mkdir()
    guard(write_hook, '"$HOOKBUS_HOOK_DIR/sub"', hook_id="escapes-dir")
    (home / "hooks" / "escapes-dir" / "sub").mkdir()
    code, lines = validate(tmp_path, home)
    assert code == 1
    # What fails a fire is a load problem, said first; then what runs, unchecked, from outside.
    assert lines == [
        f"hooks/dangling/hook.json: the command runs $HOOKBUS_HOOK_DIR/later.sh, which is a symbolic link to {dangling / 'not-yet.sh'}, which does not exist",
        "hooks/escapes-dir/hook.json: the command runs $HOOKBUS_HOOK_DIR/sub, which is a directory, not a script",
        f"hooks/escapes/hook.json: the command runs $HOOKBUS_HOOK_DIR/../../shared.sh, which leads out of the hook's directory (to {home / 'shared.sh'}): hookbus checks only what is in hooks/escapes; copy the script there",
        f"hooks/linked/hook.json: the command runs $HOOKBUS_HOOK_DIR/true, which leads out of the hook's directory through a symbolic link (to {real_true}): hookbus checks only what is in hooks/linked; copy the script there",
        f"no valid hooks, 4 problems in {home / 'hooks'}",
    ]


@pytest.mark.timeout(60)
def test_a_relative_path_is_checked_where_the_hook_runs(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    """With ``"cwd": "$HOOKBUS_HOOK_DIR"`` a relative path names a file beside hook.json;
    with no cwd the hook runs in the envelope's cwd, where ./check.sh is not."""
    pinned = guard(write_hook, "./check.sh", hook_id="pinned", cwd="$HOOKBUS_HOOK_DIR", files={"check.sh": SCRIPT})
    (pinned / "check.sh").chmod(0o644)
    guard(write_hook, "./check.sh", hook_id="floating", files={"check.sh": SCRIPT})
    guard(write_hook, "./check.sh", hook_id="elsewhere", cwd=str(tmp_path), files={"check.sh": SCRIPT})
    guard(write_hook, "cd /tmp && ./check.sh", hook_id="moved", cwd="$HOOKBUS_HOOK_DIR", files={"check.sh": SCRIPT})
    code, lines = validate(tmp_path, home)
    assert code == 1
    assert lines == [
        "hooks/floating/hook.json: the command runs ./check.sh, which is relative to the envelope's cwd, where the hook runs "
        '(it sets no "cwd"), not to hooks/floating, where ./check.sh is: write "$HOOKBUS_HOOK_DIR/check.sh" '
        '(or set "cwd": "$HOOKBUS_HOOK_DIR")',
        f"hooks/pinned/hook.json: the command runs ./check.sh, which is not executable: run chmod +x {pinned / 'check.sh'}",
        "ok  hooks/elsewhere",
        "ok  hooks/moved",
        f"2 valid hooks, 2 problems in {home / 'hooks'}",
    ]


@pytest.mark.timeout(60)
def test_a_claude_code_hook_names_its_directory_claude_plugin_root(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    directory = guard(write_hook, '"$CLAUDE_PLUGIN_ROOT"/hooks/check.sh', dialect="claude-code", matcher="Bash")
    guard(write_hook, '"$CLAUDE_PLUGIN_ROOT"/hooks/check.sh', hook_id="elsewhere", dialect="claude-code",
          matcher="Bash", env={"CLAUDE_PLUGIN_ROOT": str(tmp_path)})
    code, lines = validate(tmp_path, home)
    assert code == 1
    assert lines == [
        f"hooks/guard/hook.json: the command runs $CLAUDE_PLUGIN_ROOT/hooks/check.sh, which does not exist: put it in {directory / 'hooks'}",
        "ok  hooks/elsewhere",
        f"1 valid hook, 1 problem in {home / 'hooks'}",
    ]


@pytest.mark.timeout(60)
def test_a_workflows_bash_steps_are_checked(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    inline = write_hook("flow", mode="sync", blocking=True, workflow={"steps": [
        {"bash": "cat"}, {"bash": '"$HOOKBUS_HOOK_DIR/step.sh"', "name": "check"},
    ]}).parent
    (home / "config").mkdir()
    (home / "config" / "workflow.json").write_text(json.dumps({"veto": {"steps": [{"bash": 'sh "$HOOKBUS_HOOK_DIR/veto.sh"'}]}}))
    named = write_hook("named", mode="sync", blocking=True, workflow_id="veto").parent
    code, lines = validate(tmp_path, home)
    assert code == 1
    assert lines == [
        f"hooks/flow/hook.json: step 2 of 2 (check) runs $HOOKBUS_HOOK_DIR/step.sh, which does not exist: put it in {inline}",
        f"hooks/named/hook.json: workflow 'veto', step 1 of 1 runs $HOOKBUS_HOOK_DIR/veto.sh with sh, which does not exist: put it in {named}",
        f"no valid hooks, 2 problems in {home / 'hooks'}",
    ]


@pytest.mark.timeout(60)
def test_validate_ids_checks_only_those_hooks_scripts(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    guard(write_hook, '"$HOOKBUS_HOOK_DIR/check.sh"')
    write_hook("good", event="Stop", command="true")
    assert validate(tmp_path, home, "good") == (0, ["ok  hooks/good"])
    code, lines = validate(tmp_path, home, "guard")
    assert code == 1 and len(lines) == 1 and lines[0].startswith("hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh")


@pytest.mark.timeout(60)
def test_what_is_no_script_of_the_hook_is_left_alone(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    """Files a command writes, creates or only tests, another directory's files, words only
    known at the run, single-quoted text, and what follows a here-document or a case are
    not taken for scripts; nor are the hooks of contrib/. Among them, the one broken script
    is the only problem."""
    for index, command in enumerate([
        'echo $$ > "$HOOKBUS_HOOK_DIR/pid"; cat >> "$HOOKBUS_HOOK_DIR/seen.json"',
        'touch "$HOOKBUS_HOOK_DIR/stamp"; test -x "$HOOKBUS_HOOK_DIR/maybe" || exit 0',
        '"$HOOKBUS_HOOK_DIR/$(cat name)"; "$HOOKBUS_HOOK_DIR/$NAME"; "$HOOKBUS_HOOK_DIR"/*.sh',
        "echo '$HOOKBUS_HOOK_DIR/quoted.sh'; command -v \"$HOOKBUS_HOOK_DIR/probe\"",
        'cat <<EOF\n"$HOOKBUS_HOOK_DIR/doc.sh"\nEOF',
        'p=$(jq -r .tool_input.path); case "$p" in *.env) "$HOOKBUS_HOOK_DIR/in-case";; esac; exit 0',
        '"$HOME/bin/tool" && /usr/bin/env true && python3 -c "print(1)" x.py',
    ]):
        write_hook(f"h{index}", event="Stop", command=command)
    for hook in (REPOSITORY / "contrib" / "hooks").iterdir():
        if (hook / "hook.json").exists():
            shutil.copytree(hook, home / "hooks" / hook.name)
    for directory, _, names in os.walk(home / "hooks"):
        for path in (Path(directory), *(Path(directory) / name for name in names)):
            path.chmod(path.stat().st_mode & ~0o022)  # as a checkout with any umask may not be
    broken = guard(write_hook, 'for f in a; do "$HOOKBUS_HOOK_DIR/after-loop"; done', hook_id="z-broken")
    code, lines = validate(tmp_path, home)
    assert code == 1, lines
    assert [line for line in lines if not line.startswith("ok  ")] == [
        f"hooks/z-broken/hook.json: the command runs $HOOKBUS_HOOK_DIR/after-loop, which does not exist: put it in {broken}",
        f"{len(lines) - 2} valid hooks, 1 problem in {home / 'hooks'}",
    ]


# -- the parser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ('"$HOOKBUS_HOOK_DIR/a.sh" | jq .', [("$HOOKBUS_HOOK_DIR/a.sh", None), ("jq", None)]),
        ("bash -o pipefail -x ./b.sh arg", [("bash", None), ("./b.sh", "bash")]),
        ("python3 -W ignore x.py", [("python3", None), ("x.py", "python3")]),
        ("python3 -m module x.py", [("python3", None)]),
        ("timeout 5 env -i A=1 nice -n 5 ./c", [("./c", None)]),
        (". ./lib.sh && source lib2.sh", [(".", None), ("./lib.sh", "."), ("source", None), ("lib2.sh", "source")]),
        ("a; case $x in y) ./in;; esac; ./after", [("a", None), ("./after", None)]),
        ("a\n((n++))\n./never", [("a", None)]),
        ('echo "unterminated', [("echo", None)]),
        ("2>/dev/null ./d.sh", [("./d.sh", None)]),
    ],
)
def test_the_words_a_command_runs(command: str, expected: list[tuple[str, str | None]]) -> None:
    assert [(use.word.shown, use.how) for use in script_uses(command)] == expected


# -- what validate says, the bus shows ------------------------------------------------------
#
# A hook whose script cannot run is loaded all the same (its on_error must still decide each
# fire: a fail-closed guard that vanished would let its event through), and the problem is
# carried everywhere: in the snapshot's problems, serve's log, list, explain and status.


def run_cli(tmp_path: Path, home: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("VIX_HOME", "VIX_DISABLE_HOOKS", "HOOKBUS_SOCKET")}
    (tmp_path / "user-home").mkdir(exist_ok=True)
    env.update(HOME=str(tmp_path / "user-home"), NO_COLOR="1")
    done = subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments, "--home", str(home)],
        capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def replace_with_a_directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


#: How the script is broken: (what to do to it, what the problem says after "which ").
BROKEN: dict[str, tuple[Callable[[Path], object], str]] = {
    "not executable": (lambda path: path.chmod(0o644), "is not executable: run chmod +x {path}"),
    "missing": (lambda path: path.unlink(), "does not exist: put it in {path.parent}"),
    "a directory": (lambda path: replace_with_a_directory(path), "is a directory, not a script"),
    "a bad interpreter line": (
        lambda path: path.write_text("#!/nonexistent/bash\nexit 0\n"),
        "names /nonexistent/bash on its #! line, which does not exist",
    ),
    "Windows line endings": (
        lambda path: path.write_text("#!/bin/sh\r\nexit 0\r\n"),
        "ends its #! line with a carriage return (Windows line endings), which the kernel takes as part "
        "of '/bin/sh\\r': run sed -i 's/\\r$//' {path}",
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_hook_whose_script_cannot_run_stays_loaded_and_every_view_says_so(
    broken: str, tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]
) -> None:
    directory = guard(write_hook, '"$HOOKBUS_HOOK_DIR/check.sh"', files={"check.sh": "#!/bin/sh\nexit 0\n"})
    script = directory / "check.sh"
    spoil, said = BROKEN[broken]
    spoil(script)
    line = f"hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh, which {said.format(path=script)}"

    bus = make_bus()
    assert "guard" in bus.snapshot.hooks  # not dropped: its on_error decides every fire
    assert [str(problem) for problem in bus.problems] == [line]
    decision = bus.emit("PreToolUse", {"tool_name": "bash"})
    assert decision.behavior == "deny"  # "on_error": "deny": it fails closed

    validated = run_cli(tmp_path, home, "validate")
    assert (validated.returncode, validated.stdout.splitlines()) == (1, [line, f"no valid hooks, 1 problem in {home / 'hooks'}"])

    listed = json.loads(run_cli(tmp_path, home, "list", "--json").stdout)
    [row] = [row for row in listed["hooks"] if row["id"] == "guard"]
    assert (row["state"], row["error"]) == ("broken (will fail)", line.split(": ", 1)[1])
    assert listed["problems"] == [line]
    text = run_cli(tmp_path, home, "list").stdout
    assert "broken (will fail)" in text and f"  {line}" in text

    explained = json.loads(run_cli(tmp_path, home, "explain", "PreToolUse", "--dry-run", "--json").stdout)
    [verdict] = [verdict for verdict in explained["hooks"] if verdict["id"] == "guard"]
    assert verdict["detail"].endswith(f" (it will fail when it runs: {line})")


@pytest.mark.timeout(120)
def test_serve_warns_of_a_script_that_cannot_run_and_counts_it(tmp_path: Path, home: Path, write_hook: HookWriter) -> None:
    from servekit import Served

    directory = guard(write_hook, '"$HOOKBUS_HOOK_DIR/check.sh"', files={"check.sh": SCRIPT})
    (directory / "check.sh").chmod(0o644)
    line = f"hooks/guard/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh, which is not executable: run chmod +x {directory / 'check.sh'}"
    env = {key: value for key, value in os.environ.items() if key not in ("VIX_HOME", "HOOKBUS_SOCKET")}
    with Served(home, env=env) as served:
        status = run_cli(tmp_path, home, "status")
        listed = run_cli(tmp_path, home, "list", "--json")
    assert f"hookbus: warning: {line}" in served.lines
    assert not any("loaded hooks/guard" in logged for logged in served.lines), served.stderr
    assert status.returncode == 0
    assert f"1 problem (" in status.stdout and f"  {line}" in status.stdout
    assert json.loads(listed.stdout)["problems"] == [line]


@pytest.mark.timeout(60)
def test_chmod_x_on_the_script_reloads_the_hook_clean(home: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]) -> None:
    directory = guard(write_hook, '"$HOOKBUS_HOOK_DIR/check.sh"', files={"check.sh": "#!/bin/sh\necho 'checked' >&2\nexit 2\n"})
    (directory / "check.sh").chmod(0o644)
    bus = make_bus(watch=True)
    assert [problem.hook_id for problem in bus.problems] == ["guard"]
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).reason != "hook 'guard' denied: checked"
    generation = bus.generation
    (directory / "check.sh").chmod(0o755)
    assert bus.wait_for_reload(generation, 10)
    from conftest import wait_until

    wait_until(bus, lambda: not bus.problems)
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).reason == "hook 'guard' denied: checked"


@pytest.mark.timeout(60)
def test_what_only_validate_can_judge_is_no_load_problem(tmp_path: Path, home: Path, write_hook: HookWriter, make_bus: Callable[..., HookBus]) -> None:
    """A script reached through a link out of the hook's directory runs; hookbus only could
    not check it. validate says so (exit 1); the bus runs the hook, and lists it enabled."""
    linked = guard(write_hook, '"$HOOKBUS_HOOK_DIR/true"', hook_id="linked")
    (linked / "true").symlink_to(shutil.which("true") or "/bin/true")
    bus = make_bus()
    assert "linked" in bus.snapshot.hooks and not bus.problems
    assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "allow"
    assert validate(tmp_path, home)[0] == 1
    [row] = [row for row in json.loads(run_cli(tmp_path, home, "list", "--json").stdout)["hooks"] if row["id"] == "linked"]
    assert row["state"] == "enabled"


@pytest.mark.timeout(60)
@pytest.mark.skipif(os.geteuid() != 0, reason="root must own the managed directory")
def test_a_managed_hooks_script_that_cannot_run_is_shown_as_the_managed_tiers(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    managed = tmp_path / "managed"
    directory = managed / "hooks" / "org-guard"
    directory.mkdir(parents=True)
    for step in (managed, managed / "hooks", directory):
        step.chmod(0o755)
    (directory / "hook.json").write_text(json.dumps(
        {"trigger": {"event": "PreToolUse"}, "mode": "sync", "blocking": True, "on_error": "deny", "command": '"$HOOKBUS_HOOK_DIR/check.sh"'}
    ))
    (directory / "check.sh").write_text(SCRIPT)
    (directory / "check.sh").chmod(0o644)
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(managed))
    line = (
        f"{directory / 'hook.json'}: the command runs $HOOKBUS_HOOK_DIR/check.sh, which is not executable: "
        f"run chmod +x {directory / 'check.sh'}"
    )
    with HookBus(home) as bus:
        assert bus.snapshot.hooks["org-guard"].tier == "managed"
        assert [(str(problem), problem.tier) for problem in bus.problems] == [(line, "managed")]
        assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "deny"
    validated = run_cli(tmp_path, home, "validate")
    assert (validated.returncode, validated.stdout.splitlines()[0]) == (1, line)
    [row] = [row for row in json.loads(run_cli(tmp_path, home, "list", "--json").stdout)["hooks"] if row["id"] == "org-guard"]
    assert (row["tier"], row["state"]) == ("managed", "broken (will fail)")
