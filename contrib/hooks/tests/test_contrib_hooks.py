"""The example hooks of contrib/hooks, each copied into a temp home and fired through a real
HookBus with real bash (fixtures from hookbus.testing, loaded by its pytest11 entry point).

Run: .venv/bin/python -m pytest contrib/hooks/tests -q -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hookbus import HookBus
from hookbus.chat_stub import StubChatServer
from hookbus.testing import CaptureRecorder, Fired, TestHome

CONTRIB = Path(__file__).resolve().parents[1]
EXAMPLES = (
    "block-env-writes",
    "protect",
    "subagent-done",
    "notify-on-stop",
    "format-on-write",
    "reviewer",
    "no-force-push",
)
#: Helper scripts, which must be executable in the source tree (git keeps the bit).
SCRIPTS = {
    "block-env-writes": "script.sh",
    "notify-on-stop": "notify.sh",
    "format-on-write": "format.sh",
}
#: Files a manual run may leave in a hook directory; never part of an example.
RUNTIME_FILES = ("state.json", "turns", "turns.new", "turns.lock")

Fire = Callable[..., Fired]


# -- helpers ------------------------------------------------------------------------------


def install(home: TestHome, hook_id: str) -> Path:
    """What the README says: ``cp -r contrib/hooks/<id> ~/.vix/hooks/`` (modes kept), then
    ``chmod -R go-w`` so a loose umask on the checkout cannot matter."""
    target = home.root / "hooks" / hook_id
    shutil.copytree(CONTRIB / hook_id, target, ignore=shutil.ignore_patterns(*RUNTIME_FILES))
    for path in (target, *target.rglob("*")):
        path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o022)
    return target


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
        "vix_bin": "/usr/local/bin/vix",
        "socket_path": "/tmp/vixd.sock",
    }
    return {**base, **fields}


def restricted_path(tmp_path: Path, tools: tuple[str, ...], name: str = "bin") -> Path:
    """A directory holding only links to ``tools``, to use as the whole PATH."""
    directory = tmp_path / name
    directory.mkdir()
    for tool in tools:
        if tool == "python3":
            found: str | None = os.path.realpath(sys.executable)
        else:
            found = shutil.which(tool)
        assert found, f"{tool} is needed to run this test"
        (directory / tool).symlink_to(found)
    return directory


def write_executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "project"
    directory.mkdir()
    return directory


# -- every example ------------------------------------------------------------------------


def test_every_example_is_a_hook_directory_with_its_id() -> None:
    found = sorted(
        entry.name for entry in CONTRIB.iterdir() if (entry / "hook.json").is_file() and not entry.name.startswith("cc-")  # Claude-style: test_claude_style.py
    )
    assert found == sorted(EXAMPLES)
    for hook_id in EXAMPLES:
        spec = json.loads((CONTRIB / hook_id / "hook.json").read_text())
        assert spec["id"] == hook_id
        leftovers = [name for name in RUNTIME_FILES if (CONTRIB / hook_id / name).exists()]
        assert not leftovers, f"{hook_id} holds runtime files: {leftovers}"


@pytest.mark.parametrize("hook_id", sorted(SCRIPTS))
def test_helper_scripts_are_executable(hook_id: str) -> None:
    script = CONTRIB / hook_id / SCRIPTS[hook_id]
    assert script.is_file()
    assert os.access(script, os.X_OK), f"chmod +x {script}"
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    spec = json.loads((CONTRIB / hook_id / "hook.json").read_text())
    assert f'"$HOOKBUS_HOOK_DIR/{SCRIPTS[hook_id]}"' in spec["command"]


def test_the_index_lists_every_example_and_how_to_install() -> None:
    index = (CONTRIB / "README.md").read_text()
    for hook_id in EXAMPLES:
        assert f"[`{hook_id}`]({hook_id}/)" in index
    assert "cp -r contrib/hooks/block-env-writes ~/.vix/hooks/" in index
    assert "hookbus validate block-env-writes" in index
    assert "HOOKBUS_HOOK_DIR" in index and "jq" in index


def _validate(root: Path, *ids: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", *ids, "--home", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.timeout(120)
def test_every_example_passes_validate(hookbus_home: TestHome) -> None:
    for hook_id in EXAMPLES:
        install(hookbus_home, hook_id)
    result = _validate(hookbus_home.root)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:-1] == [f"ok  hooks/{hook_id}" for hook_id in sorted(EXAMPLES)]
    assert lines[-1].startswith(f"{len(EXAMPLES)} valid hooks, no problems in ")
    assert result.stderr == ""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hook_id", EXAMPLES)
def test_install_with_cp_then_validate_by_id(hookbus_home: TestHome, hook_id: str) -> None:
    """The README's install steps, as written: ``cp -r contrib/hooks/<id> <home>/hooks/``
    (under the common umask 022), then ``hookbus validate <id>``."""
    previous = os.umask(0o022)
    try:
        subprocess.run(
            ["cp", "-r", str(CONTRIB / hook_id), str(hookbus_home.root / "hooks") + "/"],
            check=True, timeout=30,
        )
    finally:
        os.umask(previous)
    if hook_id in SCRIPTS:
        assert os.access(hookbus_home.root / "hooks" / hook_id / SCRIPTS[hook_id], os.X_OK)
    result = _validate(hookbus_home.root, hook_id)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"ok  hooks/{hook_id}\n"


@pytest.mark.timeout(60)
def test_a_group_writable_copy_is_refused_as_the_readme_warns(hookbus_home: TestHome) -> None:
    target = install(hookbus_home, "block-env-writes")
    target.chmod(0o775)
    result = _validate(hookbus_home.root, "block-env-writes")
    assert result.returncode == 1
    assert "chmod go-w" in result.stdout


# -- block-env-writes -----------------------------------------------------------------------


def _write(project: Path, path: str, tool: str = "write_file") -> dict[str, Any]:
    return envelope(project, tool_name=tool, tool_input={"path": path, "content": "KEY=1\n"})


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", [".env", "config/.env", "/srv/app/prod.env", ".env.local"])
def test_block_env_writes_denies_env_files(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, path: str
) -> None:
    install(hookbus_home, "block-env-writes")
    fired = hookbus_fire("PreToolUse", _write(project, path))
    assert fired.decision.behavior == "deny"
    assert fired.decision.denied_by == ("block-env-writes",)
    assert fired.decision.reason is not None
    assert fired.decision.reason.startswith(
        f"hook 'block-env-writes' denied: writing {path} could leak secrets"
    )
    record = fired.record_of("block-env-writes")
    assert (record.status, record.error) == ("deny", None)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "path", ["src/app.py", ".env.example", "docs/.env.sample", ".envrc", "environment.md", "env"]
)
def test_block_env_writes_allows_other_paths(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, path: str
) -> None:
    install(hookbus_home, "block-env-writes")
    fired = hookbus_fire("PreToolUse", _write(project, path))
    assert fired.decision.behavior == "allow"
    assert fired.decision.context is None
    record = fired.record_of("block-env-writes")
    assert (record.status, record.error) == ("allow", None)


@pytest.mark.timeout(30)
def test_block_env_writes_matches_edit_file_not_read_file(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "block-env-writes")
    edit = envelope(
        project, tool_name="edit_file",
        tool_input={"path": "config/.env", "old_string": "A=1", "new_string": "A=2"},
    )
    fired = hookbus_fire("PreToolUse", edit)
    assert fired.decision.behavior == "deny"
    read = envelope(project, tool_name="read_file", tool_input={"path": ".env"})
    fired = hookbus_fire("PreToolUse", read)
    assert fired.decision.behavior == "allow"
    assert fired.records == ()  # not matched: it did not run at all


@pytest.mark.timeout(30)
def test_block_env_writes_needs_only_bash_and_sed(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No jq (or anything else): PATH holds only bash and sed."""
    install(hookbus_home, "block-env-writes")
    monkeypatch.setenv("PATH", str(restricted_path(tmp_path, ("bash", "sed"))))
    fired = hookbus_fire("PreToolUse", _write(project, "config/.env"))
    assert fired.decision.behavior == "deny", fired.records
    fired = hookbus_fire("PreToolUse", _write(project, "config/settings.toml"))
    assert (fired.decision.behavior, fired.record_of("block-env-writes").error) == ("allow", None)


@pytest.mark.timeout(30)
def test_block_env_writes_reads_the_path_not_the_content(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    """Content that spells a "path" key is escaped in the envelope and never read as one."""
    install(hookbus_home, "block-env-writes")
    tricky = envelope(
        project, tool_name="write_file",
        tool_input={"path": "notes.md", "content": 'see {"path":".env"} and "path":".env"'},
    )
    assert hookbus_fire("PreToolUse", tricky).decision.behavior == "allow"
    tricky["tool_input"] = {"content": '{"path":"notes.md"}', "path": ".env"}
    assert hookbus_fire("PreToolUse", tricky).decision.behavior == "deny"


# -- protect (the spec's example, with jq) --------------------------------------------------

needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def test_protect_is_the_spec_example_verbatim() -> None:
    spec = json.loads((CONTRIB / "protect" / "hook.json").read_text())
    assert spec == {
        "id": "protect", "enabled": True, "mode": "sync", "blocking": True,
        "trigger": {"event": "PreToolUse", "matcher": "write_file|edit_file|delete_file"},
        "command": 'p=$(jq -r .tool_input.path); case "$p" in *.env|*/secrets/*) '
        'echo "protected: $p" >&2; exit 2;; esac; exit 0',
    }


@needs_jq
@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("tool", "path"),
    [("write_file", ".env"), ("edit_file", "config/.env"), ("write_file", "/repo/secrets/x"),
     ("write_file", "app/secrets/key.pem"), ("delete_file", "/repo/secrets/x")],
)
def test_protect_denies(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tool: str, path: str
) -> None:
    install(hookbus_home, "protect")
    fired = hookbus_fire("PreToolUse", _write(project, path, tool))
    assert fired.decision.behavior == "deny"
    assert fired.decision.reason == f"hook 'protect' denied: protected: {path}"


@needs_jq
@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", ["README.md", "secrets.txt", "src/environment.py"])
def test_protect_allows(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, path: str
) -> None:
    install(hookbus_home, "protect")
    fired = hookbus_fire("PreToolUse", _write(project, path))
    assert fired.decision.behavior == "allow"
    assert fired.record_of("protect").error is None


@needs_jq
@pytest.mark.timeout(30)
def test_protect_misses_a_top_level_relative_secrets_dir(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    """A gap in the spec's pattern, documented in the README: ``*/secrets/*`` needs a slash
    before ``secrets``, so the relative path ``secrets/x`` is allowed."""
    install(hookbus_home, "protect")
    fired = hookbus_fire("PreToolUse", _write(project, "secrets/x"))
    assert fired.decision.behavior == "allow"


@pytest.mark.timeout(30)
def test_protect_without_jq_allows_silently_as_the_readme_warns(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(hookbus_home, "protect")
    monkeypatch.setenv("PATH", str(restricted_path(tmp_path, ("bash",))))
    fired = hookbus_fire("PreToolUse", _write(project, ".env"))
    assert fired.decision.behavior == "allow"
    assert fired.record_of("protect").error is None


# -- subagent-done (the spec's async example, with jq) --------------------------------------


def test_subagent_done_is_the_spec_example_verbatim() -> None:
    spec = json.loads((CONTRIB / "subagent-done" / "hook.json").read_text())
    assert spec == {
        "id": "subagent-done", "enabled": True, "mode": "async",
        "trigger": {"event": "SubagentStop"},
        "command": "printf '%s finished\\n' \"$(jq -r .agent_type)\" >> ~/.vix/subagents.log",
    }


@needs_jq
@pytest.mark.timeout(60)
def test_subagent_done_logs_each_finished_subagent(
    hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_capture: CaptureRecorder,
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    user_home = tmp_path / "user"
    (user_home / ".vix").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    install(hookbus_home, "subagent-done")
    hookbus_bus.reload()
    for agent_type, agent_id in (("reviewer", "a1"), ("explorer", "a2")):
        decision = hookbus_bus.emit(
            "SubagentStop",
            envelope(project, agent_type=agent_type, agent_id=agent_id, result="done", is_error=False),
        )
        assert decision.behavior == "allow" and decision.context is None  # async: no say
    assert hookbus_bus.emit("SubagentStart", envelope(project, agent_type="x")).behavior == "allow"
    hookbus_bus.close()  # drains the async hooks
    lines = (user_home / ".vix" / "subagents.log").read_text().splitlines()
    assert sorted(lines) == ["explorer finished", "reviewer finished"]
    records = hookbus_capture.records
    assert [(r.hook_id, r.mode, r.status, r.error) for r in records] == [
        ("subagent-done", "async", "done", None)
    ] * 2


# -- notify-on-stop ---------------------------------------------------------------------------

FAKE_VIX = """#!/usr/bin/env bash
# A stand-in for vix: every call leaves its arguments (one per line) and its stdin.
call=$(mktemp "{calls}/call.XXXXXX") || exit 1
printf '%s\\n' "$@" > "$call.argv"
cat > "$call.stdin"
"""


def _notify_every() -> int:
    command = json.loads((CONTRIB / "notify-on-stop" / "hook.json").read_text())["command"]
    found = re.search(r"NOTIFY_EVERY=(\d+)", command)
    assert found, command
    return int(found.group(1))


class FakeVix:
    def __init__(self, directory: Path) -> None:
        self.calls_dir = directory / "calls"
        self.calls_dir.mkdir(parents=True)
        self.path = write_executable(directory / "vix", FAKE_VIX.format(calls=self.calls_dir))

    def calls(self) -> list[tuple[list[str], str]]:
        calls = []
        for argv in sorted(self.calls_dir.glob("*.argv")):
            stdin = argv.with_suffix(".stdin").read_text()
            calls.append((argv.read_text().splitlines(), stdin))
        return calls


@pytest.fixture
def fake_vix(tmp_path: Path) -> FakeVix:
    return FakeVix(tmp_path / "fake-vix")


def _stop(project: Path | str, vix: FakeVix, sock: str, turn: int = 1) -> dict[str, Any]:
    return {**envelope(Path(project), turn_count=turn), "vix_bin": str(vix.path), "socket_path": sock}


@pytest.mark.timeout(120)
def test_notify_on_stop_calls_vix_thread_create_once_every_n_turns(
    hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_capture: CaptureRecorder,
    project: Path, fake_vix: FakeVix, tmp_path: Path,
) -> None:
    every = _notify_every()
    assert every > 1
    hook_dir = install(hookbus_home, "notify-on-stop")
    hookbus_bus.reload()
    sock = str(tmp_path / "run" / "vixd.sock")
    for turn in range(1, every):
        assert hookbus_bus.emit("Stop", _stop(project, fake_vix, sock, turn)).behavior == "allow"
        hookbus_capture.wait_for(turn, timeout=20)
    assert fake_vix.calls() == []
    assert (hook_dir / "turns").read_text() == f"{every - 1}\n"

    hookbus_bus.emit("Stop", _stop(project, fake_vix, sock, every))
    hookbus_capture.wait_for(every, timeout=20)
    calls = fake_vix.calls()
    assert len(calls) == 1
    argv, stdin = calls[0]
    assert argv == ["thread", "create", "--socket-path", sock]
    spec = json.loads(stdin)
    assert set(spec) == {"message", "cwd", "title"}
    assert spec["cwd"] == str(project)
    assert spec["message"].startswith(f"Checkpoint: the agent has finished {every} turns")
    assert "thread t-123" in spec["message"] and str(project) in spec["message"]
    assert all(r.status == "done" and r.error is None for r in hookbus_capture.records)


@pytest.mark.timeout(120)
def test_notify_on_stop_counts_concurrent_stops_exactly(
    hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_capture: CaptureRecorder,
    project: Path, fake_vix: FakeVix,
) -> None:
    """Async hooks run side by side on the pool: the lock keeps the count exact."""
    every = _notify_every()
    hook_dir = install(hookbus_home, "notify-on-stop")
    hookbus_bus.reload()
    for _ in range(2 * every + 1):
        hookbus_bus.emit("Stop", _stop(project, fake_vix, "/tmp/vixd.sock"))
    hookbus_bus.close()
    assert [r.status for r in hookbus_capture.records] == ["done"] * (2 * every + 1)
    assert (hook_dir / "turns").read_text() == f"{2 * every + 1}\n"
    messages = sorted(json.loads(stdin)["message"] for _, stdin in fake_vix.calls())
    assert len(messages) == 2
    assert [m.split(" turns")[0] for m in messages] == sorted(
        f"Checkpoint: the agent has finished {n}" for n in (every, 2 * every)
    )
    assert not (hook_dir / "turns.lock").exists()


@pytest.mark.timeout(60)
def test_notify_on_stop_falls_back_to_home_and_escapes_json(
    hookbus_home: TestHome, hookbus_bus: HookBus, hookbus_capture: CaptureRecorder,
    fake_vix: FakeVix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cwd must be an existing directory: a missing one becomes $HOME, which is JSON-escaped
    into the spec."""
    user_home = tmp_path / 'user "quoted" home'
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    hook_dir = install(hookbus_home, "notify-on-stop")
    (hook_dir / "turns").write_text(f"{_notify_every() - 1}\n")
    hookbus_bus.reload()
    hookbus_bus.emit("Stop", _stop(tmp_path / "gone", fake_vix, "/tmp/vixd.sock"))
    hookbus_capture.wait_for(1, timeout=20)
    [(argv, stdin)] = fake_vix.calls()
    assert argv == ["thread", "create", "--socket-path", "/tmp/vixd.sock"]
    assert json.loads(stdin)["cwd"] == str(user_home)


# -- format-on-write ----------------------------------------------------------------------

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
FORMAT_TOOLS = ("bash", "cat", "sed", "cksum", "tail")


def _post(project: Path, path: str, **extra: Any) -> dict[str, Any]:
    return envelope(
        project, tool_name="write_file", tool_input={"path": path, "content": "..."},
        tool_response={"ok": True}, is_error=False, **extra,
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("with_python", [True, False], ids=["python3", "sed-fallback"])
def test_format_on_write_formats_with_the_formatter_that_fits(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, with_python: bool,
) -> None:
    """A fake gofmt on a PATH of only what format.sh needs (with and without python3, whose
    absence switches to the sed reader); tool_response naming another path is not read."""
    install(hookbus_home, "format-on-write")
    tools = FORMAT_TOOLS + (("python3",) if with_python else ())
    bin_dir = restricted_path(tmp_path, tools)
    log = tmp_path / "gofmt.log"
    write_executable(bin_dir / "gofmt", FAKE_GOFMT.format(log=log))
    monkeypatch.setenv("PATH", str(bin_dir))
    (project / "pkg").mkdir()
    source = project / "pkg" / "main.go"
    source.write_text("package main\n\nfunc main() {\n    println(1)\n}\n")
    other = project / "other.go"
    other.write_text("package main\n    // untouched\n")
    post = _post(project, "pkg/main.go")
    post["tool_response"] = {"path": "other.go", "bytes": 48}

    fired = hookbus_fire("PostToolUse", post)
    assert fired.decision.behavior == "context"
    assert fired.decision.context == (
        "formatted pkg/main.go with gofmt: the file on disk changed, "
        "re-read it before editing it again"
    )
    assert source.read_text() == "package main\n\nfunc main() {\n\tprintln(1)\n}\n"
    assert other.read_text() == "package main\n    // untouched\n"
    assert log.read_text() == "-w pkg/main.go\n"

    # Already formatted: the formatter runs, nothing changes, nothing is said.
    fired = hookbus_fire("PostToolUse", _post(project, "pkg/main.go"))
    assert (fired.decision.behavior, fired.decision.context) == ("allow", None)
    assert log.read_text() == "-w pkg/main.go\n" * 2
    assert fired.record_of("format-on-write").error is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("formatter", "context"),
    [(FAILING_GOFMT, "gofmt could not format bad.go:\nbad.go:3:1: expected declaration, found '}'"),
     ("#!/usr/bin/env bash\nexit 1\n", "gofmt could not format bad.go")],
    ids=["with-message", "silent"],
)
def test_format_on_write_reports_a_failing_formatter_as_context(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, formatter: str, context: str,
) -> None:
    install(hookbus_home, "format-on-write")
    bin_dir = restricted_path(tmp_path, FORMAT_TOOLS + ("python3",))
    write_executable(bin_dir / "gofmt", formatter)
    monkeypatch.setenv("PATH", str(bin_dir))
    (project / "bad.go").write_text("package main\n\n}\n")
    fired = hookbus_fire("PostToolUse", _post(project, "bad.go"))
    assert (fired.decision.behavior, fired.decision.context) == ("context", context)
    assert fired.record_of("format-on-write").error is None
    assert (project / "bad.go").read_text() == "package main\n\n}\n"


def _real_formatters() -> list[Any]:
    cases = []
    py_tool = "ruff format" if shutil.which("ruff") else "black" if shutil.which("black") else None
    cases.append(pytest.param(
        "messy.py", "x = {  'a':1 }\nprint( x )\n", 'x = {"a": 1}\nprint(x)\n', py_tool,
        marks=pytest.mark.skipif(py_tool is None, reason="neither ruff nor black is installed"),
        id="python",
    ))
    go_tool = "gofmt" if shutil.which("gofmt") else None
    cases.append(pytest.param(
        "main.go", "package main\nfunc main() {\n  println( 1 )\n}\n",
        "package main\n\nfunc main() {\n\tprintln(1)\n}\n", go_tool,
        marks=pytest.mark.skipif(go_tool is None, reason="gofmt is not installed"), id="go",
    ))
    return cases


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "messy", "formatted", "tool"), _real_formatters())
def test_format_on_write_with_a_real_formatter(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path,
    name: str, messy: str, formatted: str, tool: str,
) -> None:
    install(hookbus_home, "format-on-write")
    source = project / name
    source.write_text(messy)
    fired = hookbus_fire("PostToolUse", _post(project, str(source)))
    assert fired.decision.behavior == "context", fired.records
    assert fired.decision.context is not None
    assert fired.decision.context.startswith(f"formatted {source} with {tool}")
    assert source.read_text() == formatted  # ruff and black agree on this one


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("name", "exists", "with_formatters"),
    [("notes.xyz", True, True), ("missing.go", False, True), ("app.py", True, False),
     ("main.go", True, False), ("site.ts", True, False)],
    ids=["unknown-extension", "missing-file", "py-no-formatter", "go-no-formatter",
         "ts-no-prettier"],
)
def test_format_on_write_allows_silently_when_nothing_fits(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, name: str, exists: bool, with_formatters: bool,
) -> None:
    """No fit, no file, or no formatter installed: allow, no context, no error recorded."""
    install(hookbus_home, "format-on-write")
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
    record = fired.record_of("format-on-write")
    assert (record.status, record.error) == ("allow", None)
    assert not log.exists()
    if exists:
        assert (project / name).read_text() == "some   text\n"


@pytest.mark.timeout(30)
def test_format_on_write_is_not_matched_by_other_tools(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "format-on-write")
    fired = hookbus_fire("PostToolUse", envelope(project, tool_name="read_file", tool_input={"path": "a.py"}))
    assert fired.records == ()


# -- reviewer (a prompt hook) ------------------------------------------------------------------

REVIEW = (
    "WARNING: the new config.py reads the API key from a hard-coded string on line 3; "
    "load it from the environment instead and remove the literal."
)


def _reviewer_prompt() -> str:
    prompt: str = json.loads((CONTRIB / "reviewer" / "hook.json").read_text())["prompt"]
    return prompt


def test_reviewer_prompt_explains_the_final_text_contract() -> None:
    prompt = _reviewer_prompt()
    assert "ONE short paragraph" in prompt
    assert 'reply with exactly {"behavior": "allow"}' in prompt
    assert "Never start a line with BLOCK:" in prompt
    spec = json.loads((CONTRIB / "reviewer" / "hook.json").read_text())
    assert (spec["mode"], spec.get("blocking", False)) == ("sync", False)
    assert spec["trigger"] == {"event": "PostToolUse", "matcher": "write_file|edit_file"}


class StubModel:
    """A StubChatServer that answers with queued replies, then with REVIEW."""

    def __init__(self) -> None:
        self.replies: list[str] = []
        self.server = StubChatServer(self._reply)

    def _reply(self, request: dict[str, Any]) -> str:
        return self.replies.pop(0) if self.replies else REVIEW

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.server.requests

    def configure(self, home: TestHome) -> None:
        """settings.json: the built-in OpenAI-compatible client, pointed at this stub."""
        home.write_settings({"prompt_provider": {"base_url": self.server.base_url, "model": "stub"}})


@pytest.fixture
def stub_model() -> Iterator[StubModel]:
    model = StubModel()
    with model.server:
        yield model


@pytest.mark.timeout(60)
def test_reviewer_sends_its_prompt_and_the_envelope_and_the_review_becomes_context(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, stub_model: StubModel
) -> None:
    install(hookbus_home, "reviewer")
    stub_model.configure(hookbus_home)
    post = envelope(
        project, tool_name="write_file",
        tool_input={"path": "config.py", "content": 'API_KEY = "sk-123"\n'},
        tool_response={"ok": True}, is_error=False,
    )
    fired = hookbus_fire("PostToolUse", post)
    assert fired.decision.behavior == "context"
    assert fired.decision.context == REVIEW
    record = fired.record_of("reviewer")
    assert (record.status, record.error) == ("context", None)

    [request] = stub_model.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["model"] == "stub"
    [message] = body["messages"]
    assert message["role"] == "user"
    content = message["content"]
    assert content.startswith(_reviewer_prompt().rstrip())
    sent = json.loads(content.split("Hook context (JSON):\n", 1)[1])
    assert sent == {**post, "hook_event_name": "PostToolUse"}


@pytest.mark.timeout(60)
def test_reviewer_with_nothing_to_say_adds_nothing(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, stub_model: StubModel
) -> None:
    """The prompt's "nothing worth saying" answer: an explicit allow, no context."""
    install(hookbus_home, "reviewer")
    stub_model.configure(hookbus_home)
    stub_model.replies.append('{"behavior": "allow"}')
    edit = envelope(project, tool_name="edit_file",
                    tool_input={"path": "a.py", "old_string": "x", "new_string": "y"})
    fired = hookbus_fire("PostToolUse", edit)
    assert (fired.decision.behavior, fired.decision.context) == ("allow", None)
    record = fired.record_of("reviewer")
    assert (record.status, record.error) == ("allow", None)
    assert len(stub_model.requests) == 1


@pytest.mark.timeout(60)
def test_reviewer_block_answer_is_not_applied_which_is_why_the_prompt_forbids_it(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, stub_model: StubModel
) -> None:
    install(hookbus_home, "reviewer")
    stub_model.configure(hookbus_home)
    stub_model.replies.append("BLOCK: hard-coded secret")
    fired = hookbus_fire("PostToolUse", _post(project, "config.py"))
    assert (fired.decision.behavior, fired.decision.context) == ("allow", None)
    record = fired.record_of("reviewer")
    assert record.status == "deny"
    assert record.note is not None and "not applied" in record.note


@pytest.mark.timeout(60)
def test_reviewer_not_applied_note_gives_advice_that_validates(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, stub_model: StubModel
) -> None:
    install(hookbus_home, "reviewer")
    stub_model.configure(hookbus_home)
    stub_model.replies.append("BLOCK: hard-coded secret")
    note = hookbus_fire("PostToolUse", _post(project, "config.py")).record_of("reviewer").note
    assert note is not None and note.startswith("not applied")
    assert '"blocking": true' not in note  # PostToolUse cannot block: the advice cannot work


@pytest.mark.timeout(60)
def test_reviewer_fails_open_without_a_provider(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "reviewer")
    fired = hookbus_fire("PostToolUse", _post(project, "config.py"))
    assert fired.decision.behavior == "allow"
    error = fired.record_of("reviewer").error
    assert error is not None and "no prompt provider configured" in error


# -- no-force-push (an inline workflow) -------------------------------------------------------


def _bash(project: Path, command: str) -> dict[str, Any]:
    return envelope(project, tool_name="bash", tool_input={"command": command})


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "command",
    ["git push --force", "git push -f origin main", "git push origin +main",
     "cd repo && git push --force", "git -C repo push --force origin main",
     'git push "origin" --force', "git push -uf origin topic", "make test\ngit push -f"],
)
def test_no_force_push_denies(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, command: str
) -> None:
    install(hookbus_home, "no-force-push")
    fired = hookbus_fire("PreToolUse", _bash(project, command))
    assert fired.decision.behavior == "deny"
    assert fired.decision.reason == (
        "hook 'no-force-push' denied: force-pushing rewrites shared history; "
        "use git push --force-with-lease, or ask the user to push"
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "command",
    ["git push", "git push origin main", "git push --force-with-lease",
     "git push --force-with-lease=main:abc123 origin main", "git push --follow-tags",
     "git status && rm -f build.log", "git push origin main\nls -f", "legit push -f"],
)
def test_no_force_push_allows(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path, command: str
) -> None:
    install(hookbus_home, "no-force-push")
    fired = hookbus_fire("PreToolUse", _bash(project, command))
    assert fired.decision.behavior == "allow"
    record = fired.record_of("no-force-push")
    assert (record.status, record.error) == ("allow", None)


@pytest.mark.timeout(30)
def test_no_force_push_only_watches_bash(
    hookbus_home: TestHome, hookbus_fire: Fire, project: Path
) -> None:
    install(hookbus_home, "no-force-push")
    write = envelope(project, tool_name="write_file",
                     tool_input={"path": "deploy.sh", "content": "git push --force\n"})
    fired = hookbus_fire("PreToolUse", write)
    assert (fired.decision.behavior, fired.records) == ("allow", ())
