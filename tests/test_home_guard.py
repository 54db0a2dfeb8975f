"""The built-in home guard as the bus runs it: on by default, a hook like the others where
people look, off only by the user's settings.json, kept on by the managed one, and the same
on every path (in-process, the server, the bridge)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from hookbus import HookBus
from hookbus.cli.verbs import main
from hookbus.decision import ALLOW
from hookbus.policy.guardhook import GUARD_ID

Maker = Callable[..., HookBus]


def write_call(path: str, cwd: str = "/") -> dict[str, Any]:
    return {"tool_name": "write_file", "tool_input": {"path": path, "content": "{}"}, "cwd": cwd}


def bash(command: str, cwd: str = "/") -> dict[str, Any]:
    return {"tool_name": "bash", "tool_input": {"command": command}, "cwd": cwd}


@pytest.fixture(autouse=True)
def no_managed_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(tmp_path / "no-managed"))


def test_it_is_on_by_default_and_denies_a_write_into_the_home(make_bus: Maker, home: Path) -> None:
    bus = make_bus()
    decision = bus.emit("PreToolUse", write_call(str(home / "hooks" / "x" / "hook.json")))
    assert decision.behavior == "deny" and decision.denied_by == (GUARD_ID,)
    reason = decision.reason or ""
    assert "inside the hookbus home" in reason
    assert '"protect_home": false' in reason and str(home / "settings.json") in reason
    assert "hookbus install" in reason


@pytest.mark.parametrize(
    "envelope",
    [
        write_call("/tmp/elsewhere/hook.json"),
        {"tool_name": "edit_file", "tool_input": {"path": "notes.txt"}, "cwd": "/tmp"},
        bash("ls -la /tmp && git status"),
        {"tool_name": "read_file", "tool_input": {"path": "/"}},
    ],
)
def test_calls_that_do_not_write_into_the_home_are_allowed_and_not_recorded(make_bus: Maker, home: Path, envelope: dict[str, Any]) -> None:
    bus = make_bus()
    assert bus.emit("PreToolUse", envelope) == ALLOW
    bus.close()
    assert not (home / "logs" / "hooks").exists() or not any((home / "logs" / "hooks").iterdir())


def test_the_forms_it_catches(make_bus: Maker, home: Path, tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(home)
    bus = make_bus()
    denied = [
        write_call(str(link / "hooks" / "x" / "hook.json")),  # a symlink into the home
        write_call(str(home / "hooks" / ".." / "settings.json")),  # a .. spelling
        write_call("hooks/x/hook.json", cwd=str(home)),  # relative, from inside it
        {"tool_name": "edit_file", "tool_input": {"path": str(home / "settings.json")}},
        bash(f"echo '{{}}' > {home}/hooks/x/hook.json"),
        bash("cp x $VIX_HOME/hooks/x/hook.json"),
        bash("cp x ${HOOKBUS_MANAGED_DIR}/hooks/x/hook.json"),
        bash(f"cp x {link}/hooks/y/hook.json"),
        bash("touch hooks/x/hook.json", cwd=str(home)),
        bash("hookbus install /tmp/draft"),
        bash("hookbus new x --event PreToolUse"),
    ]
    for envelope in denied:
        assert bus.emit("PreToolUse", envelope).denied_by == (GUARD_ID,), envelope
    allowed = [
        write_call(str(home) + "-other/hooks/x/hook.json"),  # only shares a prefix
        bash(f"cat {home}-other/notes"),
        bash("hookbus new x --event PreToolUse --dir /tmp/drafts"),
        bash("hookbus list"),
    ]
    for envelope in allowed:
        assert bus.emit("PreToolUse", envelope) == ALLOW, envelope


def test_the_default_homes_spellings_are_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_home = tmp_path / "ada"
    (user_home / ".vix" / "hooks").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user_home))
    monkeypatch.delenv("VIX_HOME", raising=False)
    with HookBus() as bus:
        assert bus.home.root == user_home / ".vix"
        for command in ("cat x > ~/.vix/hooks/a/hook.json", 'cp x "$HOME"/.vix/hooks/a/hook.json', "cd ~ && cd .vix && touch hooks/a"):
            assert bus.emit("PreToolUse", bash(command, cwd=str(tmp_path))).denied_by == (GUARD_ID,), command
        assert bus.emit("PreToolUse", bash("ls ~/.vix-other", cwd=str(tmp_path))) == ALLOW


def test_protect_home_false_turns_it_off(make_bus: Maker, home: Path) -> None:
    (home / "settings.json").write_text(json.dumps({"protect_home": False}))
    bus = make_bus()
    assert GUARD_ID not in bus.snapshot.every_hook
    assert bus.emit("PreToolUse", write_call(str(home / "hooks" / "x" / "hook.json"))) == ALLOW


def test_a_managed_protect_home_keeps_it_on(make_bus: Maker, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("a managed directory must be root's")
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "settings.json").write_text(json.dumps({"protect_home": True}))
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(managed))
    (home / "settings.json").write_text(json.dumps({"protect_home": False}))
    bus = make_bus()
    decision = bus.emit("PreToolUse", write_call(str(home / "hooks" / "x" / "hook.json")))
    assert decision.denied_by == (GUARD_ID,)
    assert "managed settings.json" in (decision.reason or "") and "stays on" in (decision.reason or "")
    # and the managed directory itself is guarded
    assert bus.emit("PreToolUse", write_call(str(managed / "hooks" / "x" / "hook.json"))).denied_by == (GUARD_ID,)


def test_it_guards_even_a_thread_vix_started(make_bus: Maker, home: Path, write_hook: Callable[..., Path]) -> None:
    write_hook("mine", mode="sync", blocking=True, matcher="write_file", command="exit 2")
    envelope = {**write_call(str(home / "hooks" / "x" / "hook.json")), "origin": "vix"}
    assert make_bus().emit("PreToolUse", envelope).denied_by == (GUARD_ID,)  # the user's hook does not fire there


def test_it_is_not_stopped_by_the_kill_switch(make_bus: Maker, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIX_DISABLE_HOOKS", "1")
    assert make_bus().emit("PreToolUse", write_call(str(home / "hooks" / "x" / "hook.json"))).denied_by == (GUARD_ID,)


def test_a_deny_is_recorded_with_its_tier_and_no_state(make_bus: Maker, home: Path) -> None:
    bus = make_bus()
    bus.emit("PreToolUse", write_call(str(home / "hooks" / "x" / "hook.json")))
    bus.emit("PreToolUse", write_call("/tmp/fine"))
    records = bus.read_runs(GUARD_ID)
    assert [(record.status, record.tier) for record in records] == [("deny", "builtin")]
    bus.close()
    assert not (home / "hooks" / GUARD_ID).exists() and not (home / "managed").exists()


def test_explain_shows_it_like_any_other_hook(make_bus: Maker, home: Path) -> None:
    bus = make_bus()
    explanation = bus.explain("PreToolUse", bash("ls"))
    verdict = next(verdict for verdict in explanation.hooks if verdict.hook_id == GUARD_ID)
    assert verdict.tier == "builtin" and verdict.status == "matched"
    assert verdict.run is not None and verdict.run.outcome.behavior == "allow"
    explanation = bus.explain("PreToolUse", bash(f"rm -rf {home}"))
    assert explanation.decision is not None and explanation.decision.denied_by == (GUARD_ID,)
    assert any(GUARD_ID in line for line in explanation.merge)
    other = bus.explain("PreToolUse", {"tool_name": "read_file"}, dry_run=True)
    verdict = next(verdict for verdict in other.hooks if verdict.hook_id == GUARD_ID)
    assert verdict.status == "matcher"


def test_a_user_hook_cannot_take_its_id(make_bus: Maker, write_hook: Callable[..., Path], home: Path) -> None:
    write_hook(GUARD_ID, mode="sync", matcher="write_file", command="exit 0")
    bus = make_bus()
    assert GUARD_ID not in bus.snapshot.hooks and bus.snapshot.builtin[GUARD_ID].tier == "builtin"
    assert any("hookbus's home guard's" in str(problem) for problem in bus.problems)
    assert bus.emit("PreToolUse", write_call(str(home / "hooks" / "x" / "hook.json"))).denied_by == (GUARD_ID,)


def test_hookbus_cannot_read_the_call_so_the_guard_denies(make_bus: Maker) -> None:
    decision = make_bus().undecided("PreToolUse", {"tool_name": "bash"}, "the envelope is nested too deeply")
    assert decision.behavior == "deny" and GUARD_ID in decision.denied_by


def test_test_fire_and_replay_see_it(make_bus: Maker, home: Path) -> None:
    bus = make_bus()
    envelope = write_call(str(home / "hooks" / "x" / "hook.json"))
    assert bus.test_fire("PreToolUse", envelope).denied_by == (GUARD_ID,)
    assert bus.replay("PreToolUse", envelope)[0].denied_by == (GUARD_ID,)


# -- the same on every path ---------------------------------------------------------------------


ODD_CALLS: list[Callable[[Path], dict[str, Any]]] = [
    lambda home: write_call(str(home / "hooks" / "x" / "hook.json")),
    lambda home: write_call(str(home) + "-other/x"),
    lambda home: {"tool_name": "write_file", "tool_input": {"path": ["a", "list"]}},
    lambda home: {"tool_name": "write_file", "tool_input": "not an object"},
    lambda home: {"tool_name": "write_file", "tool_input": {"path": "x\u0000y"}},
    lambda home: {"tool_name": "write_file", "tool_input": {"path": "relative/x"}},
    lambda home: bash(f"echo > '{home}'/hooks/a/hook.json"),
    lambda home: bash("echo \u202e" + str(home)),
    lambda home: bash("x" * 200_000 + f" {home}"),
    lambda home: bash("cat /etc/hostname"),
    lambda home: {"tool_name": "Bash", "tool_input": {"command": f"ls {home}"}},
    lambda home: {"tool_name": "MultiEdit", "tool_input": {"file_path": str(home / "settings.json")}},
    # /proc/self and its links, read as the writer (whose cwd is the envelope's) reads them,
    # never as the guard's own process: the server and `hookbus emit` run in the home's
    # parent, where /proc/self/cwd/home is the home.
    lambda home: write_call(f"/proc/self/cwd/{home.name}/hooks/x/hook.json", cwd=str(home.parent / "elsewhere")),
    lambda home: write_call(f"/proc/self/cwd/{home.name}/hooks/x/hook.json", cwd=str(home.parent)),
    lambda home: write_call("/proc/thread-self/cwd/hooks/x/hook.json", cwd=str(home)),
    lambda home: write_call(f"/proc/self/root{home}/hooks/x/hook.json"),
    lambda home: write_call("/proc/self/cwd/x", cwd="relative"),
    lambda home: write_call("/dev/stdout"),
    lambda home: write_call("/proc/self/fd/1"),
    lambda home: write_call("/proc/1/cwd/x"),
    lambda home: bash(f"touch /proc/self/cwd/{home.name}/hooks/x/hook.json", cwd=str(home.parent / "elsewhere")),
    lambda home: bash(f"cd -P /proc/self/cwd/.. && touch {home.name}/hooks/x/hook.json", cwd=str(home.parent / "elsewhere")),
    lambda home: bash(f"cat /proc/self/cwd/{home.name}/hooks/x/hook.json", cwd=str(home.parent)),
    lambda home: bash(f"echo x > /proc/self/cwd/{home.name}/hooks/x/hook.json", cwd=str(home.parent)),
    lambda home: bash("touch hooks/x/hook.json", cwd=str(home.parent / "elsewhere")),
    lambda home: bash(f"cd {home.name} && touch hooks/x/hook.json", cwd=str(home.parent)),
    lambda home: {"tool_name": "write_file", "tool_input": {"path": "elsewhere/x"}},
]


def _emit_cli(home: Path, envelope: dict[str, Any], *extra: str, cwd: Path | None = None) -> tuple[int, dict[str, Any]]:
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "emit", "PreToolUse", "--home", str(home), *extra],
        input=json.dumps(envelope), capture_output=True, text=True, timeout=60, cwd=cwd,
    )
    return result.returncode, json.loads(result.stdout) if result.stdout.strip() else {}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", ["command line", "server"])
def test_in_process_and_each_other_path_agree_on_odd_calls(make_bus: Maker, home: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The same decision from the bus in this process, ``hookbus emit`` (in its own
    process), and a ``hookbus serve`` asked through its socket; the other two run in the
    home's parent, this process elsewhere, so a guard that read /proc/self as its own
    process would disagree."""
    from hookbus.serve.client import Client
    from servekit import Served

    (home.parent / "elsewhere").mkdir()
    (home / "hooks" / "x").mkdir(exist_ok=True)
    bus = make_bus()
    with contextlib.ExitStack() as stack:
        served = None
        if path == "server":
            monkeypatch.delenv("HOOKBUS_MANAGED_DIR")  # the server's environment: /etc/vix, absent here
            monkeypatch.chdir(home.parent)  # the server's own working directory
            served = stack.enter_context(Served(home))
        monkeypatch.chdir(home.parent / "elsewhere")
        for make in ODD_CALLS:
            envelope = make(home)
            ours = bus.emit("PreToolUse", envelope)
            if served is not None:
                assert served.socket is not None
                with Client(served.socket, timeout=60) as client:
                    theirs = client.emit("PreToolUse", envelope)
                assert (theirs["behavior"], theirs.get("reason")) == (ours.behavior, ours.reason), envelope
            else:
                code, printed = _emit_cli(home, envelope, cwd=home.parent)
                assert printed.get("behavior", "allow") == ours.behavior, envelope
                assert code == (2 if ours.behavior == "deny" else 0)


@pytest.mark.timeout(120)
def test_the_claude_code_bridge_denies_a_write_into_the_home(home: Path) -> None:
    envelope = {
        "session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_input": {"file_path": str(home / "hooks" / "x" / "hook.json"), "content": "{}"},
    }
    result = subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(home)],
        input=json.dumps(envelope), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode in (0, 2)
    said = json.loads(result.stdout) if result.stdout.strip() else {}
    denied = result.returncode == 2 or said.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"
    assert denied, (result.stdout, result.stderr)


def test_the_last_resort_denies_a_tool_call_when_the_guard_is_on(home: Path) -> None:
    from hookbus.hosts.lastresort import last_resort

    deny, reason = last_resort(str(home), "PreToolUse", "no memory")
    assert deny and "home guard" in reason
    assert last_resort(str(home), "Stop", "no memory")[0] is False
    (home / "settings.json").write_text(json.dumps({"protect_home": False}))
    assert last_resort(str(home), "PreToolUse", "no memory")[0] is False


def test_list_shows_it(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--home", str(home), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["hooks"]
    assert [(row["id"], row["tier"], row["state"]) for row in rows] == [(GUARD_ID, "builtin", "enabled")]
