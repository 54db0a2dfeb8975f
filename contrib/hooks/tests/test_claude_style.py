"""The Claude Code style hooks of contrib/hooks (``cc-*``), two ways each:

- copied into a temp home and fired through a real HookBus with real bash, on vixd-style
  envelopes (``bash``, ``write_file`` with ``tool_input.path``, ...): their
  ``"dialect": "claude-code"`` makes hookbus hand them Claude Code's envelope and read
  their output as Claude Code would;
- run directly, as Claude Code runs a command hook: its envelope on stdin,
  CLAUDE_PROJECT_DIR in the environment, stdout and the exit status read back.

Run: .venv/bin/python -m pytest contrib/hooks/tests -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from hookbus import HookBus
from hookbus.testing import Fired, TestHome

CONTRIB = Path(__file__).resolve().parents[1]
#: Each hook, its script, and what its hook.json must say.
HOOKS: dict[str, tuple[str, str, str | None, bool]] = {
    # id: (script, event, matcher, blocking)
    "cc-block-rm-rf": ("block-rm-rf.sh", "PreToolUse", "Bash", True),
    "cc-protect-env": ("protect-env.sh", "PreToolUse", "Write|Edit", True),
    "cc-format-on-write": ("format.sh", "PostToolUse", "Write|Edit", False),
    "cc-git-status-context": ("git-status.sh", "UserPromptSubmit", None, False),
    "cc-stop-gate": ("stop-gate.sh", "Stop", None, False),
}
#: The environment the hooks read, cleared for every test: the one running pytest (say,
#: under Claude Code) must not leak in. hookbus itself prefers an inherited
#: CLAUDE_PROJECT_DIR to the envelope's cwd.
HOOK_VARIABLES = (
    "CLAUDE_PROJECT_DIR", "CLAUDE_ENV_FILE", "CLAUDE_PLUGIN_ROOT", "CC_STOP_GATE_CHECK",
    "CC_STOP_GATE_MAX_BLOCKS", "CC_GIT_STATUS_MAX_LINES",
)

Fire = Callable[..., Fired]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


# -- helpers ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in HOOK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    tmp = tmp_path / "tmpdir"  # where cc-stop-gate keeps its fallback counter
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


def install(home: TestHome, hook_id: str) -> Path:
    """``cp -r contrib/hooks/<id> <home>/hooks/`` (modes kept), then ``chmod -R go-w``."""
    target = home.root / "hooks" / hook_id
    shutil.copytree(CONTRIB / hook_id, target)
    for path in (target, *target.rglob("*")):
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o022)
    return target


def script(hook_id: str) -> Path:
    return CONTRIB / hook_id / HOOKS[hook_id][0]


def envelope(project: Path, **fields: Any) -> dict[str, Any]:
    """An envelope as vixd sends it: the common fields, then the event's own."""
    base: dict[str, Any] = {
        "thread_id": "t-123",
        "cwd": str(project),
        "model": "anthropic/claude",
        "permission_mode": "default",
        "origin": "user",
        "headless": False,
        "thread_mode": "chat",
        "agent": "general",
        "turn_count": 3,
    }
    return {**base, **fields}


def claude_envelope(event: str, project: Path, **fields: Any) -> dict[str, Any]:
    """An envelope as Claude Code sends it to a command hook."""
    return {
        "session_id": "0f6d3e9c-claude-session",
        "transcript_path": str(project / ".transcript.jsonl"),
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


def run_as_claude_code(
    hook_id: str, stdin: dict[str, Any], project: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """What Claude Code does: the script, its JSON on stdin (compact, as Claude Code writes
    it), in the project, with CLAUDE_PROJECT_DIR set."""
    return subprocess.run(
        [str(script(hook_id))],
        input=json.dumps(stdin, separators=(",", ":")),
        capture_output=True,
        text=True,
        cwd=project,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(project), **(env or {})},
        timeout=60,
    )


def restricted_path(tmp_path: Path, tools: tuple[str, ...], name: str = "bin") -> Path:
    """A directory holding only links to ``tools``, to use as the whole PATH."""
    directory = tmp_path / name
    directory.mkdir()
    for tool in tools:
        found = os.path.realpath(sys.executable) if tool == "python3" else shutil.which(tool)
        assert found, f"{tool} is needed to run this test"
        (directory / tool).symlink_to(found)
    return directory


def write_executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


# -- every cc- hook -------------------------------------------------------------------------


def test_every_cc_hook_is_a_claude_code_dialect_hook_with_its_script() -> None:
    found = sorted(entry.name for entry in CONTRIB.glob("cc-*") if (entry / "hook.json").is_file())
    assert found == sorted(HOOKS)
    for hook_id, (name, event, matcher, blocking) in HOOKS.items():
        spec = json.loads((CONTRIB / hook_id / "hook.json").read_text())
        assert spec["id"] == hook_id
        assert spec["dialect"] == "claude-code"
        assert (spec["mode"], spec.get("blocking", False)) == ("sync", blocking)
        trigger = {"event": event} if matcher is None else {"event": event, "matcher": matcher}
        assert spec["trigger"] == trigger
        assert spec["command"] == f'"$HOOKBUS_HOOK_DIR/{name}"'
        path = script(hook_id)
        assert os.access(path, os.X_OK), f"chmod +x {path}"
        assert path.read_text().startswith("#!/usr/bin/env bash\n")
        assert sorted(p.name for p in (CONTRIB / hook_id).iterdir()) == sorted(["hook.json", name])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hook_id", sorted(HOOKS))
def test_scripts_are_valid_bash(hook_id: str) -> None:
    result = subprocess.run(["bash", "-n", str(script(hook_id))], capture_output=True, text=True, timeout=30)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.timeout(60)
def test_every_cc_hook_passes_validate(hookbus_home: TestHome) -> None:
    for hook_id in HOOKS:
        install(hookbus_home, hook_id)
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", *sorted(HOOKS), "--home", str(hookbus_home.root)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [f"ok  hooks/{hook_id}" for hook_id in sorted(HOOKS)]


def test_the_index_describes_each_cc_hook() -> None:
    index = (CONTRIB / "README.md").read_text()
    section = index.split("## Claude Code style hooks", 1)[1]
    for hook_id in HOOKS:
        assert f"[`{hook_id}`]({hook_id}/)" in section
    assert "unchanged under Claude Code" in section
    assert '"dialect": "claude-code"' in section


# -- cc-block-rm-rf ---------------------------------------------------------------------------


def _bash(project: Path, command: str) -> dict[str, Any]:
    return envelope(project, tool_name="bash", tool_input={"command": command})


RM_DENIED = [
    ("rm -rf /", "the filesystem root"),
    ("rm -rf //", "the filesystem root"),
    ("rm -fr /*", "everything in the filesystem root"),
    ("sudo rm -rf /usr", "the system directory /usr"),
    ("rm -rf --no-preserve-root /srv/x", "--no-preserve-root"),
    ("rm -rf ~", "your home directory"),
    ("rm -rf ~/", "your home directory"),
    ("rm -Rf ~/*", "everything in your home directory"),
    ('rm -rf "$HOME"', "your home directory"),
    ("rm -rf ${HOME}/*", "everything in your home directory"),
    ("rm -rf ~/..", "a parent of your home directory"),
    ("rm -r ~alice", "the home directory ~alice"),
    ("rm -rf ..", ".., outside the working directory"),
    ("rm -rf ../", ".., outside the working directory"),
    ("rm -rf ../other-project", "../other-project, outside the working directory"),
    ("rm -rf build/../..", ".., outside the working directory"),
    ("rm -rf *", "everything in the working directory"),
    ("rm -rf ./*", "everything in the working directory"),
    ("rm -rf .", "the working directory itself"),
    ('rm -rf "$DIR/"*', "everything in / when DIR is empty or unset"),
    ("rm --recursive --force ${BUILD}/", "/ when BUILD is empty or unset"),
    ("make clean && rm -rf /", "the filesystem root"),
    ("cd /tmp\nrm -rf *", "everything in the working directory"),
    ("echo $(rm -rf ~)", "your home directory"),
    ("bash -c 'rm -rf /'", "the filesystem root"),
    ("FORCE=1 env -i nohup /bin/rm -rf -- /", "the filesystem root"),
    ("sudo -E rm -rf /", "the filesystem root"),
    ("sudo -n -u root rm -rf ~", "your home directory"),
    ("timeout -s KILL 10 rm -rf /", "the filesystem root"),
    ("nice -n 5 rm -rf ..", ".., outside the working directory"),
    ("find . -print0 | xargs -0 -n 1 rm -rf ../x", "../x, outside the working directory"),
    ("rm / -rf", "the filesystem root"),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("command", "what"), RM_DENIED, ids=[c for c, _ in RM_DENIED])
def test_block_rm_rf_denies_with_claude_codes_permission_decision(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, command: str, what: str
) -> None:
    install(hookbus_home, "cc-block-rm-rf")
    fired = hookbus_fire("PreToolUse", _bash(project, command))
    assert fired.decision.behavior == "deny", fired.records
    assert fired.decision.denied_by == ("cc-block-rm-rf",)
    reason = fired.decision.reason
    assert reason is not None and reason.startswith("hook 'cc-block-rm-rf' denied: Blocked `")
    assert what in reason
    assert reason.endswith("Delete only the specific paths you mean, inside the project "
                           "(for example rm -rf ./build), or ask the user to run it.")
    record = fired.record_of("cc-block-rm-rf")
    assert (record.status, record.error) == ("deny", None)


RM_ALLOWED = [
    "rm -rf build", "rm -rf ./dist/*", "rm -rf node_modules .cache", "rm -rf /tmp/scratch",
    "rm -rf ~/project/node_modules", "rm -f *", "rm *.o", 'rm -rf "${DIR:?}/"*',
    "rm -rf $DIR/build", "rm -rf build/../dist", 'echo "rm -rf /"', "git rm -r --cached .",
    "ls -la /", "rm -rf x 2>/dev/null", "ls > rm -rf /",
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", RM_ALLOWED)
def test_block_rm_rf_allows_everyday_commands(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, command: str
) -> None:
    install(hookbus_home, "cc-block-rm-rf")
    fired = hookbus_fire("PreToolUse", _bash(project, command))
    assert (fired.decision.behavior, fired.decision.reason) == ("allow", None)
    assert fired.decision.permission is None  # no opinion, not an approve
    record = fired.record_of("cc-block-rm-rf")
    assert (record.status, record.error) == ("allow", None)


@pytest.mark.timeout(30)
def test_block_rm_rf_knows_the_home_directory_spelled_out(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user_home = tmp_path / "users" / "ada"
    user_home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    install(hookbus_home, "cc-block-rm-rf")
    reason = hookbus_fire("PreToolUse", _bash(project, f"rm -rf {user_home}/")).decision.reason
    assert reason is not None and "it would delete your home directory" in reason
    reason = hookbus_fire("PreToolUse", _bash(project, f"rm -rf {user_home.parent}")).decision.reason
    assert reason is not None and f"{user_home.parent}, a parent of your home directory" in reason
    fired = hookbus_fire("PreToolUse", _bash(project, f"rm -rf {user_home}/project/build"))
    assert fired.decision.behavior == "allow"


@pytest.mark.timeout(30)
def test_block_rm_rf_watches_only_bash(hookbus_home: TestHome, hookbus_fire: Fire, project: Path) -> None:
    """The matcher says Claude's "Bash"; hookbus matches vixd's "bash" with it, nothing else."""
    install(hookbus_home, "cc-block-rm-rf")
    write = envelope(project, tool_name="write_file", tool_input={"path": "x.sh", "content": "rm -rf /\n"})
    fired = hookbus_fire("PreToolUse", write)
    assert (fired.decision.behavior, fired.records) == ("allow", ())


@pytest.mark.timeout(30)
def test_block_rm_rf_without_python3_fails_open_visibly(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(hookbus_home, "cc-block-rm-rf")
    monkeypatch.setenv("PATH", str(restricted_path(tmp_path, ("bash", "cat"))))
    fired = hookbus_fire("PreToolUse", _bash(project, "rm -rf /"))
    assert fired.decision.behavior == "allow"
    error = fired.record_of("cc-block-rm-rf").error
    assert error is not None and "python3 is not installed" in error


@pytest.mark.timeout(30)
def test_block_rm_rf_run_as_claude_code(project: Path) -> None:
    denied = run_as_claude_code(
        "cc-block-rm-rf",
        claude_envelope("PreToolUse", project, tool_name="Bash",
                        tool_input={"command": "rm -rf ~/", "description": "clean up"},
                        tool_use_id="toolu_01"),
        project,
    )
    assert (denied.returncode, denied.stderr) == (0, "")
    output = json.loads(denied.stdout)
    assert output == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "Blocked `rm -rf ~/`: it would delete your home directory. "
        "Delete only the specific paths you mean, inside the project (for example rm -rf "
        "./build), or ask the user to run it.",
    }}
    allowed = run_as_claude_code(
        "cc-block-rm-rf",
        claude_envelope("PreToolUse", project, tool_name="Bash", tool_input={"command": "rm -rf build"}),
        project,
    )
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")


# -- cc-protect-env ---------------------------------------------------------------------------


def _write(project: Path, path: str, tool: str = "write_file") -> dict[str, Any]:
    return envelope(project, tool_name=tool, tool_input={"path": path, "content": "KEY=1\n"})


def _env_reason(path: str) -> str:
    return (f"Blocked writing {path}: .env files hold secrets and are off limits to the agent. "
            "Put new variable names (with placeholder values) in .env.example and ask the "
            "user to set the real values.")


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("tool", "path"),
    [("write_file", ".env"), ("edit_file", "config/.env"), ("write_file", ".env.local"),
     ("write_file", "/srv/app/.env.production"), ("edit_file", "deploy/prod.env"),
     ("write_file", "app/.ENV")],
)
def test_protect_env_denies_with_exit_2_and_its_stderr(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tool: str, path: str
) -> None:
    install(hookbus_home, "cc-protect-env")
    fired = hookbus_fire("PreToolUse", _write(project, path, tool))
    assert fired.decision.behavior == "deny"
    assert fired.decision.denied_by == ("cc-protect-env",)
    assert fired.decision.reason == f"hook 'cc-protect-env' denied: {_env_reason(path)}"
    record = fired.record_of("cc-protect-env")
    assert (record.status, record.error) == ("deny", None)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "path", [".env.example", "config/.env.sample", ".env.template", "src/app.py", ".envrc",
             "environment.ts", "env/config.json"],
)
def test_protect_env_allows_templates_and_other_files(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, path: str
) -> None:
    install(hookbus_home, "cc-protect-env")
    fired = hookbus_fire("PreToolUse", _write(project, path))
    assert (fired.decision.behavior, fired.decision.reason) == ("allow", None)
    record = fired.record_of("cc-protect-env")
    assert (record.status, record.error) == ("allow", None)


@pytest.mark.timeout(30)
def test_protect_env_is_matched_on_write_and_edit_only(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "cc-protect-env")
    read = envelope(project, tool_name="read_file", tool_input={"path": ".env"})
    assert hookbus_fire("PreToolUse", read).records == ()
    bash = envelope(project, tool_name="bash", tool_input={"command": "echo A=1 > .env"})
    assert hookbus_fire("PreToolUse", bash).records == ()  # a guardrail, not a boundary


@pytest.mark.timeout(30)
def test_protect_env_reads_the_path_not_the_content(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "cc-protect-env")
    tricky = envelope(project, tool_name="write_file",
                      tool_input={"path": "notes.md", "content": 'see {"file_path":".env"}'})
    assert hookbus_fire("PreToolUse", tricky).decision.behavior == "allow"
    tricky["tool_input"] = {"content": '"file_path":"notes.md"', "path": ".env"}
    assert hookbus_fire("PreToolUse", tricky).decision.behavior == "deny"


@pytest.mark.timeout(30)
def test_protect_env_needs_only_bash_and_sed(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No python3 (nor jq): the sed reader of the compact envelope."""
    install(hookbus_home, "cc-protect-env")
    monkeypatch.setenv("PATH", str(restricted_path(tmp_path, ("bash", "cat", "sed", "head", "tr"))))
    fired = hookbus_fire("PreToolUse", _write(project, "config/.env.local"))
    assert fired.decision.reason == f"hook 'cc-protect-env' denied: {_env_reason('config/.env.local')}"
    tricky = envelope(project, tool_name="write_file",
                      tool_input={"path": "notes.md", "content": 'see {"file_path":".env"}'})
    fired = hookbus_fire("PreToolUse", tricky)
    assert (fired.decision.behavior, fired.record_of("cc-protect-env").error) == ("allow", None)


@pytest.mark.timeout(30)
def test_protect_env_run_as_claude_code(project: Path) -> None:
    target = str(project / ".env")
    denied = run_as_claude_code(
        "cc-protect-env",
        claude_envelope("PreToolUse", project, tool_name="Write",
                        tool_input={"file_path": target, "content": "TOKEN=abc\n"}),
        project,
    )
    assert (denied.returncode, denied.stdout) == (2, "")
    assert denied.stderr == _env_reason(target) + "\n"
    allowed = run_as_claude_code(
        "cc-protect-env",
        claude_envelope("PreToolUse", project, tool_name="Edit",
                        tool_input={"file_path": str(project / ".env.example"),
                                    "old_string": "A=", "new_string": "B="}),
        project,
    )
    assert (allowed.returncode, allowed.stdout, allowed.stderr) == (0, "", "")


# -- cc-format-on-write -----------------------------------------------------------------------

FAKE_GOFMT = """#!/usr/bin/env bash
# A stand-in for gofmt -w: turns each leading run of four spaces into a tab.
printf '%s\\n' "$*" >> "{log}"
[ "$1" = -w ] || exit 3
out=
while IFS= read -r line || [ -n "$line" ]; do
  while [ "${{line:0:4}}" = "    " ]; do line=$'\\t'"${{line:4}}"; done
  out+="$line"$'\\n'
done < "$2"
printf '%s' "$out" > "$2"
"""
FAILING_GOFMT = """#!/usr/bin/env bash
echo "$2:3:1: expected declaration, found '}'" >&2
exit 2
"""
#: What format.sh runs, for a PATH that holds nothing else.
FORMAT_TOOLS = ("bash", "cat", "sed", "cksum", "tail", "head", "tr")
FORMATTED = "with gofmt: the file on disk changed, re-read it before editing it again"


def _post(project: Path, path: str, tool: str = "write_file") -> dict[str, Any]:
    return envelope(
        project, tool_name=tool, tool_input={"path": path, "content": "..."},
        tool_response={"path": "other.go", "ok": True}, is_error=False,
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("with_python", [True, False], ids=["python3", "sed-fallback"])
def test_format_on_write_formats_and_says_so_as_additional_context(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, with_python: bool,
) -> None:
    """A fake gofmt on a PATH of only what format.sh needs; tool_response naming another
    file is not read."""
    install(hookbus_home, "cc-format-on-write")
    bin_dir = restricted_path(tmp_path, FORMAT_TOOLS + (("python3",) if with_python else ()))
    log = tmp_path / "gofmt.log"
    write_executable(bin_dir / "gofmt", FAKE_GOFMT.format(log=log))
    monkeypatch.setenv("PATH", str(bin_dir))
    (project / "pkg").mkdir()
    source = project / "pkg" / "main.go"
    source.write_text("package main\n\nfunc main() {\n    println(1)\n}\n")
    other = project / "other.go"
    other.write_text("package main\n    // untouched\n")

    fired = hookbus_fire("PostToolUse", _post(project, "pkg/main.go"))
    assert (fired.decision.behavior, fired.decision.context) == ("context", f"formatted pkg/main.go {FORMATTED}")
    assert source.read_text() == "package main\n\nfunc main() {\n\tprintln(1)\n}\n"
    assert other.read_text() == "package main\n    // untouched\n"
    assert log.read_text() == "-w pkg/main.go\n"
    assert fired.record_of("cc-format-on-write").error is None

    # Already formatted (now an edit): the formatter runs, nothing changes, nothing is said.
    fired = hookbus_fire("PostToolUse", _post(project, "pkg/main.go", tool="edit_file"))
    assert (fired.decision.behavior, fired.decision.context) == ("allow", None)
    assert log.read_text() == "-w pkg/main.go\n" * 2
    assert fired.record_of("cc-format-on-write").error is None


@pytest.mark.timeout(60)
def test_format_on_write_reports_a_failing_formatter(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(hookbus_home, "cc-format-on-write")
    bin_dir = restricted_path(tmp_path, FORMAT_TOOLS + ("python3",))
    write_executable(bin_dir / "gofmt", FAILING_GOFMT)
    monkeypatch.setenv("PATH", str(bin_dir))
    (project / "bad.go").write_text("package main\n\n}\n")
    fired = hookbus_fire("PostToolUse", _post(project, "bad.go"))
    assert fired.decision.behavior == "context"
    assert fired.decision.context == (
        "gofmt could not format bad.go:\nbad.go:3:1: expected declaration, found '}'"
    )
    assert (project / "bad.go").read_text() == "package main\n\n}\n"
    assert fired.record_of("cc-format-on-write").error is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("name", "exists", "with_formatters"),
    [("notes.xyz", True, True), ("missing.go", False, True), ("app.py", True, False),
     ("main.go", True, False), ("site.ts", True, False)],
    ids=["unknown-extension", "missing-file", "py-no-formatter", "go-no-formatter",
         "ts-no-prettier"],
)
def test_format_on_write_is_a_no_op_when_nothing_fits(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, name: str, exists: bool, with_formatters: bool,
) -> None:
    install(hookbus_home, "cc-format-on-write")
    bin_dir = restricted_path(tmp_path, FORMAT_TOOLS + ("python3",))
    log = tmp_path / "formatter.log"
    if with_formatters:  # formatters that would leave a trace if they were wrongly run
        for tool in ("gofmt", "ruff", "black", "prettier"):
            write_executable(bin_dir / tool, f'#!/usr/bin/env bash\necho "{tool} $*" >> "{log}"\n')
    monkeypatch.setenv("PATH", str(bin_dir))
    if exists:
        (project / name).write_text("some   text\n")
    fired = hookbus_fire("PostToolUse", _post(project, name))
    assert (fired.decision.behavior, fired.decision.context) == ("allow", None)
    record = fired.record_of("cc-format-on-write")
    assert (record.status, record.error) == ("allow", None)
    assert not log.exists()
    if exists:
        assert (project / name).read_text() == "some   text\n"


def _real_formatters() -> list[Any]:
    py_tool = "ruff format" if shutil.which("ruff") else "black" if shutil.which("black") else None
    return [
        pytest.param(
            "messy.py", "x = {  'a':1 }\nprint( x )\n", 'x = {"a": 1}\nprint(x)\n', py_tool,
            marks=pytest.mark.skipif(py_tool is None, reason="neither ruff nor black is installed"),
            id="python",
        ),
        pytest.param(
            "main.go", "package main\nfunc main() {\n  println( 1 )\n}\n",
            "package main\n\nfunc main() {\n\tprintln(1)\n}\n", "gofmt",
            marks=pytest.mark.skipif(shutil.which("gofmt") is None, reason="gofmt is not installed"),
            id="go",
        ),
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "messy", "formatted", "tool"), _real_formatters())
def test_format_on_write_with_a_real_formatter(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path,
    name: str, messy: str, formatted: str, tool: str,
) -> None:
    install(hookbus_home, "cc-format-on-write")
    source = project / name
    source.write_text(messy)
    fired = hookbus_fire("PostToolUse", _post(project, str(source)))
    assert fired.decision.context == f"formatted {source} with {tool}: the file on disk changed, " \
        "re-read it before editing it again"
    assert source.read_text() == formatted


@pytest.mark.timeout(30)
def test_format_on_write_is_not_matched_by_reads(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "cc-format-on-write")
    read = envelope(project, tool_name="read_file", tool_input={"path": "a.go"})
    assert hookbus_fire("PostToolUse", read).records == ()


@pytest.mark.timeout(60)
def test_format_on_write_run_as_claude_code(project: Path, tmp_path: Path) -> None:
    """Claude Code's paths are absolute, and its tool_response names the file too."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    write_executable(bin_dir / "gofmt", FAKE_GOFMT.format(log=tmp_path / "gofmt.log"))
    source = project / "main.go"
    source.write_text("package main\n    // indented\n")
    stdin = claude_envelope(
        "PostToolUse", project, tool_name="Write",
        tool_input={"file_path": str(source), "content": "..."},
        tool_response={"filePath": str(source), "success": True},
    )
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    result = run_as_claude_code("cc-format-on-write", stdin, project, {"PATH": path})
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PostToolUse",
        "additionalContext": f"formatted {source} {FORMATTED}",
    }}
    assert source.read_text() == "package main\n\t// indented\n"
    again = run_as_claude_code("cc-format-on-write", stdin, project, {"PATH": path})
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


# -- cc-git-status-context --------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo, capture_output=True, text=True, timeout=30, check=True,
    )
    return result.stdout


@pytest.fixture
def repo(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository on branch main with one commit; no user or system git config."""
    git_home = tmp_path / "git-home"
    git_home.mkdir()
    monkeypatch.setenv("HOME", str(git_home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    _git(project, "init", "-q")
    _git(project, "symbolic-ref", "HEAD", "refs/heads/main")
    (project / "tracked.txt").write_text("one\n")
    _git(project, "add", "tracked.txt")
    _git(project, "commit", "-q", "-m", "first")
    return project


def _prompt(project: Path, **extra: Any) -> dict[str, Any]:
    return envelope(project, prompt="fix the failing test", **extra)


@needs_git
@pytest.mark.timeout(60)
def test_git_status_context_gives_branch_and_short_status(
    hookbus_home: TestHome, hookbus_fire: Fire, repo: Path
) -> None:
    install(hookbus_home, "cc-git-status-context")
    (repo / "tracked.txt").write_text("two\n")
    (repo / "new file.txt").write_text("x\n")
    fired = hookbus_fire("UserPromptSubmit", _prompt(repo))
    assert fired.decision.behavior == "context"
    assert fired.decision.context == (
        f"git: {repo} is on branch main.\n"
        "git status --short (2 changed paths):\n"
        ' M tracked.txt\n'
        '?? "new file.txt"'
    )
    record = fired.record_of("cc-git-status-context")
    assert (record.status, record.error) == ("context", None)


@needs_git
@pytest.mark.timeout(60)
def test_git_status_context_says_clean_and_detached(
    hookbus_home: TestHome, hookbus_fire: Fire, repo: Path
) -> None:
    install(hookbus_home, "cc-git-status-context")
    fired = hookbus_fire("UserPromptSubmit", _prompt(repo))
    assert fired.decision.context == (
        f"git: {repo} is on branch main.\ngit status --short: clean (nothing to commit)."
    )
    short = _git(repo, "rev-parse", "--short", "HEAD").strip()
    _git(repo, "checkout", "-q", "--detach")
    fired = hookbus_fire("UserPromptSubmit", _prompt(repo))
    assert fired.decision.context is not None
    assert fired.decision.context.startswith(f"git: {repo} is detached HEAD at {short}.\n")


@needs_git
@pytest.mark.timeout(60)
def test_git_status_context_caps_the_status(
    hookbus_home: TestHome, hookbus_fire: Fire, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(hookbus_home, "cc-git-status-context")
    for n in range(25):
        (repo / f"f{n:02d}.txt").write_text("x\n")
    context = hookbus_fire("UserPromptSubmit", _prompt(repo)).decision.context
    assert context is not None
    lines = context.splitlines()
    assert lines[1] == "git status --short (25 changed paths):"
    assert lines[2:22] == [f"?? f{n:02d}.txt" for n in range(20)]
    assert lines[22:] == ["... and 5 more (run git status to see them all)"]
    monkeypatch.setenv("CC_GIT_STATUS_MAX_LINES", "3")
    context = hookbus_fire("UserPromptSubmit", _prompt(repo)).decision.context
    assert context is not None and context.splitlines()[2:] == [
        "?? f00.txt", "?? f01.txt", "?? f02.txt", "... and 22 more (run git status to see them all)"
    ]


@needs_git
@pytest.mark.timeout(60)
def test_git_status_context_reads_the_envelopes_project_dir(
    hookbus_home: TestHome, hookbus_fire: Fire, repo: Path, tmp_path: Path
) -> None:
    """CLAUDE_PROJECT_DIR is the envelope's project_dir when it has one, not its cwd."""
    install(hookbus_home, "cc-git-status-context")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fired = hookbus_fire("UserPromptSubmit", _prompt(elsewhere, project_dir=str(repo)))
    assert fired.decision.context is not None
    assert fired.decision.context.startswith(f"git: {repo} is on branch main.")


@needs_git
@pytest.mark.timeout(60)
def test_git_status_context_says_nothing_outside_a_repository(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # never the checkout above
    install(hookbus_home, "cc-git-status-context")
    fired = hookbus_fire("UserPromptSubmit", _prompt(project))
    assert (fired.decision.behavior, fired.decision.context) == ("allow", None)
    record = fired.record_of("cc-git-status-context")
    assert (record.status, record.error) == ("allow", None)


@needs_git
@pytest.mark.timeout(60)
def test_git_status_context_run_as_claude_code(repo: Path, tmp_path: Path) -> None:
    (repo / "tracked.txt").write_text("changed\n")
    stdin = claude_envelope("UserPromptSubmit", repo, prompt="what next?")
    result = run_as_claude_code("cc-git-status-context", stdin, repo)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        f"git: {repo} is on branch main.\ngit status --short (1 changed path):\n M tracked.txt\n"
    )
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    result = run_as_claude_code(
        "cc-git-status-context", stdin, outside, {"GIT_CEILING_DIRECTORIES": str(tmp_path)}
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# -- cc-stop-gate -----------------------------------------------------------------------------


def _stop(project: Path, active: bool | None = False, **extra: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {} if active is None else {"stop_hook_active": active}
    return envelope(project, **fields, **extra)


@pytest.mark.timeout(30)
def test_stop_gate_lets_the_agent_stop_when_nothing_is_unfinished(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "cc-stop-gate")
    fired = hookbus_fire("Stop", _stop(project))
    assert fired.decision.as_dict() == {"behavior": "allow"}
    record = fired.record_of("cc-stop-gate")
    assert (record.status, record.error) == ("allow", None)


@pytest.mark.timeout(30)
def test_stop_gate_keeps_going_while_the_marker_file_exists(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "cc-stop-gate")
    marker = project / ".stop-gate"
    marker.write_text('the "login" tests still fail\n\tsee tests/test_login.py\n')
    fired = hookbus_fire("Stop", _stop(project))
    expected = (
        f'The file {marker} says the work is not finished: the "login" tests still fail\n'
        "\tsee tests/test_login.py\nFinish it, then delete .stop-gate."
    )
    assert fired.decision.as_dict() == {"behavior": "allow", "continue_with": expected}
    assert fired.record_of("cc-stop-gate").error is None

    marker.write_text("")  # empty: still unfinished, no details
    assert hookbus_fire("Stop", _stop(project)).decision.continue_with == (
        f"The file {marker} says the work is not finished\nFinish it, then delete .stop-gate."
    )
    marker.unlink()
    assert hookbus_fire("Stop", _stop(project)).decision.continue_with is None


@pytest.mark.timeout(30)
def test_stop_gate_respects_stop_hook_active(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop guard: already going on because of a Stop hook, the agent may stop."""
    install(hookbus_home, "cc-stop-gate")
    (project / ".stop-gate").write_text("unfinished\n")
    monkeypatch.setenv("CC_STOP_GATE_CHECK", "exit 1")
    assert hookbus_fire("Stop", _stop(project, active=False)).decision.continue_with is not None
    fired = hookbus_fire("Stop", _stop(project, active=True))
    assert fired.decision.as_dict() == {"behavior": "allow"}
    record = fired.record_of("cc-stop-gate")
    assert (record.status, record.error) == ("allow", None)


@pytest.mark.timeout(60)
def test_stop_gate_runs_the_check_command_in_the_project(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(hookbus_home, "cc-stop-gate")
    check = "test -f tests-pass || { echo '2 failed, 40 passed'; exit 1; }"
    monkeypatch.setenv("CC_STOP_GATE_CHECK", check)
    fired = hookbus_fire("Stop", _stop(project))
    assert fired.decision.behavior == "allow"
    assert fired.decision.continue_with == (
        f"The check `{check}` fails (exit status 1) in {project}: fix what it reports "
        "before stopping.\n2 failed, 40 passed"
    )
    (project / "tests-pass").write_text("")
    assert hookbus_fire("Stop", _stop(project)).decision.continue_with is None


@pytest.mark.timeout(60)
def test_stop_gate_check_from_hook_json_env_and_both_reasons(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    """Configured in hook.json's "env", as the README shows; with the marker there too,
    the reason gives both; only the last 20 lines of the check's output are kept."""
    target = install(hookbus_home, "cc-stop-gate")
    spec = json.loads((target / "hook.json").read_text())
    spec["env"] = {"CC_STOP_GATE_CHECK": "seq 1 30; exit 7"}
    (target / "hook.json").write_text(json.dumps(spec))
    (project / ".stop-gate").write_text("docs missing")
    continue_with = hookbus_fire("Stop", _stop(project)).decision.continue_with
    assert continue_with == (
        f"The file {project / '.stop-gate'} says the work is not finished: docs missing\n"
        "Finish it, then delete .stop-gate.\n\n"
        f"The check `seq 1 30; exit 7` fails (exit status 7) in {project}: fix what it "
        "reports before stopping.\n" + "\n".join(str(n) for n in range(11, 31))
    )


@pytest.mark.timeout(60)
def test_stop_gate_fallback_guard_without_stop_hook_active(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host that sends no stop_hook_active. One bus remembers that it said "go on" and
    tells the hook (stop_hook_active: true), as Claude Code would. Where no bus lives from
    one stop to the next (a fresh `hookbus emit` each time), the hook's own guard holds: at
    most CC_STOP_GATE_MAX_BLOCKS blocks in a row per session (thread_id is Claude's
    session_id), then the agent may stop."""
    install(hookbus_home, "cc-stop-gate")
    monkeypatch.setenv("CC_STOP_GATE_MAX_BLOCKS", "2")
    (project / ".stop-gate").write_text("unfinished")
    remembered = [hookbus_fire("Stop", _stop(project, active=None)).decision.continue_with is not None
                  for _ in range(4)]
    assert remembered == [True, False, True, False]  # the bus's memory: block once, then let through

    def fresh(envelope: dict[str, Any]) -> bool:
        with HookBus(hookbus_home.root) as bus:
            return bus.emit("Stop", envelope).continue_with is not None

    said = [fresh(_stop(project, active=None, thread_id="t-fresh")) for _ in range(4)]
    assert said == [True, True, False, True]  # the let-through resets the count
    assert fresh(_stop(project, active=None, thread_id="t-other"))  # counted per session
    # With the flag present, the envelope decides: no counting.
    for _ in range(3):
        assert hookbus_fire("Stop", _stop(project, active=False)).decision.continue_with is not None


@pytest.mark.timeout(60)
def test_stop_gate_run_as_claude_code(project: Path) -> None:
    (project / ".stop-gate").write_text("write the changelog entry")
    stdin = claude_envelope("Stop", project, stop_hook_active=False)
    result = run_as_claude_code("cc-stop-gate", stdin, project)
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {
        "decision": "block",
        "reason": f"The file {project / '.stop-gate'} says the work is not finished: write the "
        "changelog entry\nFinish it, then delete .stop-gate.",
    }
    looping = run_as_claude_code("cc-stop-gate", {**stdin, "stop_hook_active": True}, project)
    assert (looping.returncode, looping.stdout, looping.stderr) == (0, "", "")
    (project / ".stop-gate").unlink()
    done = run_as_claude_code("cc-stop-gate", stdin, project, {"CC_STOP_GATE_CHECK": "true"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# -- through hookbus's Claude Code bridge -----------------------------------------------------


@pytest.mark.timeout(60)
def test_the_hooks_answer_claude_code_through_the_bridge_too(
    hookbus_home: TestHome, project: Path
) -> None:
    """``hookbus claude-code-hook`` (Claude Code's engine when the bridge is installed):
    Claude's envelope in, vixd's through the bus, Claude's again for the dialect hooks, and
    the merged decision back in Claude's format."""
    for hook_id in HOOKS:
        install(hookbus_home, hook_id)

    def bridge(stdin: dict[str, Any]) -> Any:
        result = subprocess.run(
            [sys.executable, "-m", "hookbus", "claude-code-hook", "--no-server",
             "--home", str(hookbus_home.root)],
            input=json.dumps(stdin), capture_output=True, text=True, cwd=project, timeout=60,
            env={**os.environ, "CLAUDE_PROJECT_DIR": str(project)},
        )
        assert (result.returncode, result.stderr) == (0, ""), result.stderr
        return json.loads(result.stdout) if result.stdout else None

    rm = claude_envelope("PreToolUse", project, tool_name="Bash", tool_input={"command": "rm -rf /"})
    assert bridge(rm)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "hook 'cc-block-rm-rf' denied: Blocked `rm -rf /`: it would "
        "delete the filesystem root. Delete only the specific paths you mean, inside the project "
        "(for example rm -rf ./build), or ask the user to run it.",
    }
    env = claude_envelope("PreToolUse", project, tool_name="Write",
                          tool_input={"file_path": str(project / ".env"), "content": "A=1"})
    reason = bridge(env)["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason == f"hook 'cc-protect-env' denied: {_env_reason(str(project / '.env'))}"
    (project / ".stop-gate").write_text("not yet")
    stop = claude_envelope("Stop", project, stop_hook_active=False)
    assert bridge(stop) == {
        "decision": "block",
        "reason": f"The file {project / '.stop-gate'} says the work is not finished: not yet\n"
        "Finish it, then delete .stop-gate.",
    }
    assert bridge({**stop, "stop_hook_active": True}) is None
