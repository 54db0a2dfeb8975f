"""The managed tier: hooks an organization deploys in a root-owned directory, which run for
every home and which no user setting can weaken."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from hookbus import HookBus, hookimpl
from hookbus.cli.verbs import main
from hookbus.decision import ALLOW, Decision
from hookbus.policy import managed as managed_module
from hookbus.policy.guardhook import GUARD_ID

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a managed directory must be root's: these tests make one")

BASH = {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"}
DENY = {"mode": "sync", "blocking": True, "command": "echo 'managed says no' >&2; exit 2"}

ManagedWriter = Callable[..., Path]


@pytest.fixture
def managed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "managed"
    (root / "hooks").mkdir(parents=True)
    root.chmod(0o755)
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(root))
    return root


@pytest.fixture
def write_managed(managed: Path) -> ManagedWriter:
    def write(hook_id: str, event: str = "PreToolUse", matcher: str | None = "bash", **fields: Any) -> Path:
        directory = managed / "hooks" / hook_id
        directory.mkdir(parents=True, exist_ok=True)
        trigger: dict[str, Any] = {"event": event}
        if matcher is not None:
            trigger["matcher"] = matcher
        path = directory / "hook.json"
        temp = directory / ".hook.json.tmp"
        temp.write_text(json.dumps({"trigger": trigger, **fields}))
        os.replace(temp, path)
        return path

    return write


def write_settings(root: Path, settings: dict[str, Any]) -> None:
    path = root / "settings.json"
    path.write_text(json.dumps(settings))
    path.chmod(0o644)


def run_cli(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main(list(arguments))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- trust ----------------------------------------------------------------------------------


def test_a_managed_deny_runs_for_the_home(make_bus: Callable[..., HookBus], write_managed: ManagedWriter) -> None:
    write_managed("org-guard", **DENY)
    bus = make_bus()
    decision = bus.emit("PreToolUse", BASH)
    assert decision.behavior == "deny" and decision.denied_by == ("org-guard",)
    assert bus.snapshot.hooks["org-guard"].tier == "managed"
    assert bus.problems == ()


def _deny_is_refused(bus: HookBus, fragment: str) -> None:
    assert "org-guard" not in bus.snapshot.hooks
    assert bus.emit("PreToolUse", BASH) == ALLOW
    assert any(fragment in str(problem) for problem in bus.problems), bus.problems


def test_a_managed_directory_root_does_not_own_is_not_loaded(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, managed: Path
) -> None:
    write_managed("org-guard", **DENY)
    os.chown(managed, 4242, 4242)
    bus = make_bus()
    _deny_is_refused(bus, "is owned by uid 4242, not by root")
    assert any("nothing in the managed directory" in str(problem) for problem in bus.problems)


@pytest.mark.parametrize("target", ["root", "hooks", "hook-dir", "hook.json"])
def test_a_managed_path_others_can_write_is_not_loaded(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, managed: Path, target: str
) -> None:
    spec = write_managed("org-guard", **DENY)
    path = {"root": managed, "hooks": managed / "hooks", "hook-dir": spec.parent, "hook.json": spec}[target]
    path.chmod(path.stat().st_mode | 0o022)
    _deny_is_refused(make_bus(), "is writable by group and others")


def test_a_file_of_a_managed_hook_that_another_user_owns_refuses_that_hook(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    spec = write_managed("org-guard", mode="sync", blocking=True, command="./check.sh")
    script = spec.parent / "check.sh"
    script.write_text("#!/bin/sh\nexit 2\n")
    script.chmod(0o755)
    os.chown(script, 4242, 4242)
    write_managed("other", **DENY, matcher="write_file")
    bus = make_bus()
    _deny_is_refused(bus, "check.sh: is owned by uid 4242, not by root")
    assert "other" in bus.snapshot.hooks
    code, out, _ = run_cli(capsys, "validate", "--home", str(home))
    assert code == 1 and "check.sh: is owned by uid 4242, not by root" in out and "chown root" in out


def test_a_parent_of_the_managed_directory_others_can_write_refuses_it(
    make_bus: Callable[..., HookBus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = tmp_path / "open"
    root = parent / "managed"
    (root / "hooks" / "org-guard").mkdir(parents=True)
    (root / "hooks" / "org-guard" / "hook.json").write_text(json.dumps({"trigger": {"event": "PreToolUse"}, **DENY}))
    parent.chmod(0o777)
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(root))
    _deny_is_refused(make_bus(), f"{parent}: is writable by group and others")


def test_a_link_inside_the_managed_directory_is_refused(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, tmp_path: Path
) -> None:
    spec = write_managed("org-guard", mode="sync", blocking=True, command="./check.sh")
    elsewhere = tmp_path / "check.sh"
    elsewhere.write_text("#!/bin/sh\nexit 2\n")
    elsewhere.chmod(0o755)
    (spec.parent / "check.sh").symlink_to(elsewhere)
    _deny_is_refused(make_bus(), "is a symbolic link, and a managed directory holds its files in place")


def test_the_variable_cannot_move_an_existing_default_away(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "etc-vix"
    default.mkdir()
    monkeypatch.setattr(managed_module, "DEFAULT_MANAGED_DIR", str(default))
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(tmp_path / "elsewhere"))
    root, why = managed_module.managed_root()
    assert root == str(default)
    assert why is not None and "cannot move the organization's managed directory" in why
    default.rmdir()
    assert managed_module.managed_root() == (str(tmp_path / "elsewhere"), None)


# -- what the user cannot do ------------------------------------------------------------


def test_the_users_kill_switch_does_not_stop_managed_hooks(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path], home: Path
) -> None:
    write_managed("org-guard", **DENY)
    write_hook("mine", mode="sync", blocking=True, matcher="bash", command="exit 2")
    write_settings(home, {"features": {"hooks": False}})
    bus = make_bus()
    decision = bus.emit("PreToolUse", BASH)
    assert decision.denied_by == ("org-guard",)  # the user's own deny is off, the managed one is not
    explanation = bus.explain("PreToolUse", BASH, dry_run=True)
    verdicts = {verdict.hook_id: verdict for verdict in explanation.hooks}
    assert verdicts["mine"].status == "kill switch" and verdicts["org-guard"].status == "matched"


def test_vix_disable_hooks_does_not_stop_managed_hooks(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_managed("org-guard", **DENY)
    monkeypatch.setenv("VIX_DISABLE_HOOKS", "1")
    assert make_bus().emit("PreToolUse", BASH).denied_by == ("org-guard",)


@pytest.mark.parametrize(
    "variable, value", [("HOOKBUS_DISABLE_PLUGINS", "command"), ("HOOKBUS_LOAD_PLUGINS", ""), ("HOOKBUS_DISABLE_PLUGINS", "command,resolver,recorder")]
)
def test_the_plugin_selection_does_not_stop_managed_hooks(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    write_managed("org-guard", **DENY)
    monkeypatch.setenv(variable, value)
    bus = make_bus()
    assert bus.emit("PreToolUse", BASH).denied_by == ("org-guard",)
    assert any(f"{variable} is ignored: the managed directory" in warning for warning in bus.snapshot.warnings)


def test_the_plugin_selection_still_applies_without_a_managed_directory(
    make_bus: Callable[..., HookBus], write_hook: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(tmp_path / "none"))
    monkeypatch.setenv("HOOKBUS_DISABLE_PLUGINS", "workflow")
    bus = make_bus()
    assert any(info.name == "workflow" and info.blocked for info in bus.plugin_infos)


def test_a_same_id_user_hook_is_refused_and_cannot_disable_the_managed_one(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path], home: Path
) -> None:
    write_managed("org-guard", **DENY)
    write_hook("org-guard", matcher="bash", mode="sync", blocking=True, enabled=False, command="exit 0")
    bus = make_bus()
    assert bus.emit("PreToolUse", BASH).denied_by == ("org-guard",)
    assert bus.snapshot.hooks["org-guard"].tier == "managed"
    refusal = [problem for problem in bus.problems if problem.path == "hooks/org-guard"]
    assert refusal and "a managed hook has this id" in refusal[0].message and "rename your hook's directory" in refusal[0].message
    # and its state.json says so (it is the user's file to fix)
    bus.close()
    state = json.loads((home / "hooks" / "org-guard" / "state.json").read_text())
    assert "a managed hook has this id" in state["load_error"]


def test_managed_only_keeps_the_users_hooks_out_but_not_the_managed_deny(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path], managed: Path
) -> None:
    write_managed("org-guard", **DENY, matcher="write_file")
    write_hook("mine", mode="sync", blocking=True, matcher="bash", command="exit 2")
    write_settings(managed, {"managed_only": True})
    bus = make_bus()
    assert "mine" not in bus.snapshot.hooks
    assert bus.emit("PreToolUse", BASH) == ALLOW
    assert bus.emit("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "/tmp/x"}}).denied_by == ("org-guard",)
    assert any('"managed_only": true' in warning for warning in bus.snapshot.warnings)


def test_a_users_managed_only_means_nothing(
    make_bus: Callable[..., HookBus], write_hook: Callable[..., Path], home: Path, managed: Path
) -> None:
    write_hook("mine", mode="sync", blocking=True, matcher="bash", command="exit 2")
    write_settings(home, {"managed_only": True})
    assert make_bus().emit("PreToolUse", BASH).denied_by == ("mine",)


def test_an_unsafe_user_home_still_runs_managed_hooks(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, home: Path
) -> None:
    write_managed("org-guard", **DENY)
    home.chmod(0o777)
    bus = make_bus()
    assert any("nothing in the home" in str(problem) for problem in bus.problems)
    assert bus.emit("PreToolUse", BASH).denied_by == ("org-guard",)


class AllowEverything:
    """A resolver plugin of the user's, tried first, that allows whatever the hooks say."""

    @hookimpl(tryfirst=True)
    def hookbus_resolve(self, event: str, results: Any) -> Decision:
        return ALLOW


def test_a_resolver_plugin_cannot_supersede_a_managed_deny(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path]
) -> None:
    write_managed("org-guard", **DENY)
    write_hook("mine", mode="sync", blocking=True, matcher="bash", command="exit 2")
    decision = make_bus(plugins=[AllowEverything()]).emit("PreToolUse", BASH)
    assert decision.behavior == "deny" and decision.denied_by == ("org-guard",)
    assert "managed says no" in (decision.reason or "")


def test_a_managed_modify_wins_over_the_users(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path], home: Path
) -> None:
    say = 'echo \'{"behavior": "modify", "input": {"command": "%s"}}\''
    write_managed("zz-org", mode="sync", blocking=True, command=say % "echo managed")
    write_hook("aa-mine", mode="sync", blocking=True, matcher="bash", command=say % "echo user")
    bus = make_bus()
    decision = bus.emit("PreToolUse", BASH)
    assert decision.behavior == "modify" and decision.modified_by == "zz-org"
    assert decision.input == {"command": "echo managed"}
    bus.close()
    notes = {entry["hook_id"]: entry.get("note") for entry in _log(home)}
    assert notes["aa-mine"] == "superseded by the modify of hook 'zz-org'"


def test_a_users_deny_still_wins_over_a_managed_modify(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path]
) -> None:
    write_managed("org", mode="sync", blocking=True, command='echo \'{"behavior": "modify", "input": {"command": "x"}}\'')
    write_hook("mine", mode="sync", blocking=True, matcher="bash", command="exit 2")
    assert make_bus().emit("PreToolUse", BASH).behavior == "deny"


def test_a_managed_hooks_on_error_is_honoured(make_bus: Callable[..., HookBus], write_managed: ManagedWriter) -> None:
    write_managed("org-guard", mode="sync", blocking=True, on_error="deny", command="exit 7")
    decision = make_bus(plugins=[AllowEverything()]).emit("PreToolUse", BASH)
    assert decision.behavior == "deny" and "failed closed" in (decision.reason or "")


def test_a_managed_hooks_on_error_is_honoured_when_hookbus_cannot_decide(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter
) -> None:
    write_managed("org-guard", mode="sync", blocking=True, on_error="deny", command="exit 0")
    decision = make_bus().undecided("PreToolUse", {"tool_name": "bash"}, "the envelope is nested too deeply")
    assert decision.behavior == "deny"


# -- managed settings --------------------------------------------------------------------


def test_managed_settings_keys_win_over_the_users(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, home: Path, managed: Path
) -> None:
    write_managed("org-guard", **DENY)
    write_settings(home, {"record_envelopes": False, "protect_home": False, "recorder": "recorder"})
    write_settings(managed, {"record_envelopes": True, "protect_home": True})
    bus = make_bus()
    settings = bus.snapshot.settings
    assert settings.record_envelopes and settings.protect_home
    assert settings.managed_keys == {"record_envelopes", "protect_home"}
    bus.emit("PreToolUse", BASH)
    assert bus.read_emits(), "the organization's record_envelopes wins"
    assert GUARD_ID in bus.snapshot.builtin


def test_a_managed_recorder_choice_wins(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, home: Path, managed: Path
) -> None:
    write_settings(home, {"recorder": "recorder"})
    write_settings(managed, {"recorder": "org-audit"})
    bus = make_bus()
    assert bus.snapshot.settings.recorders == ("org-audit",)
    assert any("org-audit" in str(problem) for problem in bus.problems), bus.problems


def test_a_managed_settings_file_root_does_not_own_is_ignored(
    make_bus: Callable[..., HookBus], managed: Path
) -> None:
    write_settings(managed, {"protect_home": False})
    os.chown(managed / "settings.json", 4242, 4242)
    bus = make_bus()
    assert bus.snapshot.settings.protect_home
    assert any("settings.json: is owned by uid 4242, not by root" in str(problem) for problem in bus.problems)


def test_the_managed_tiers_own_switch_turns_its_hooks_off(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, managed: Path
) -> None:
    write_managed("org-guard", **DENY)
    write_settings(managed, {"features": {"hooks": False}})
    assert make_bus().emit("PreToolUse", BASH) == ALLOW


# -- visibility ----------------------------------------------------------------------------


def _log(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((home / "logs" / "hooks").glob("*.jsonl")) for line in path.read_text().splitlines()]


def test_records_and_state_of_a_managed_hook_go_to_the_users_home(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, home: Path, managed: Path
) -> None:
    write_managed("org-guard", **DENY)
    write_hook_dir = home / "hooks"
    bus = make_bus()
    bus.emit("PreToolUse", BASH)
    records = bus.read_runs("org-guard")
    assert [record.tier for record in records] == ["managed"]
    bus.close()
    entries = [entry for entry in _log(home) if entry["hook_id"] == "org-guard"]
    assert entries and entries[0]["tier"] == "managed"
    state = json.loads((home / "managed" / "org-guard" / "state.json").read_text())
    assert state["last_status"] == "deny"
    assert not (managed / "hooks" / "org-guard" / "state.json").exists()
    assert not (write_hook_dir / "org-guard").exists()
    assert (home / "managed").stat().st_mode & 0o777 == 0o700


def test_list_explain_and_log_show_the_tier(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, write_hook: Callable[..., Path],
    home: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    write_managed("org-guard", **DENY)
    write_hook("mine", matcher="bash", command="true")
    with HookBus(home) as bus:
        bus.emit("PreToolUse", BASH)
    code, out, _ = run_cli(capsys, "list", "--home", str(home), "--json")
    rows = {row["id"]: row["tier"] for row in json.loads(out)["hooks"]}
    assert rows == {"org-guard": "managed", "mine": "user", GUARD_ID: "builtin"}
    code, out, _ = run_cli(capsys, "list", "--home", str(home))
    assert "TIER" in out and "managed" in out and "builtin" in out
    envelope = home.parent / "envelope.json"
    envelope.write_text(json.dumps(BASH))
    code, out, _ = run_cli(capsys, "explain", "--home", str(home), "--json", "--input", str(envelope), "PreToolUse")
    tiers = {hook["id"]: hook["tier"] for hook in json.loads(out)["hooks"]}
    assert tiers["org-guard"] == "managed" and tiers["mine"] == "user" and tiers[GUARD_ID] == "builtin"
    code, out, _ = run_cli(capsys, "explain", "--home", str(home), "--input", str(envelope), "PreToolUse")
    assert "org-guard [managed]" in out
    code, out, _ = run_cli(capsys, "log", "--home", str(home))
    assert "org-guard [managed]" in out
    code, out, _ = run_cli(capsys, "log", "--home", str(home), "--json")
    tiers = {json.loads(line)["hook_id"]: json.loads(line).get("tier") for line in out.splitlines()}
    assert tiers["org-guard"] == "managed"


def test_validate_names_a_managed_hook_by_its_path(
    write_managed: ManagedWriter, managed: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_managed("org-guard", **DENY)
    code, out, _ = run_cli(capsys, "validate", "--home", str(home))
    assert code == 0, out
    assert f"ok  {managed / 'hooks' / 'org-guard'} (managed)" in out
    assert GUARD_ID not in out


# -- hot reload ------------------------------------------------------------------------------


@pytest.fixture
def watching_bus(make_bus: Callable[..., HookBus], managed: Path) -> Iterator[HookBus]:
    bus = make_bus(watch=True)
    yield bus


@pytest.mark.timeout(60)
def test_managed_hooks_are_hot_reloaded_with_last_good(
    watching_bus: HookBus, write_managed: ManagedWriter, managed: Path
) -> None:
    bus = watching_bus
    assert bus.emit("PreToolUse", BASH) == ALLOW
    since = bus.generation
    spec = write_managed("org-guard", **DENY)
    assert bus.wait_for_reload(since, timeout=10)
    _wait_for(bus, lambda: "org-guard" in bus.snapshot.hooks)
    assert bus.emit("PreToolUse", BASH).denied_by == ("org-guard",)
    since = bus.generation
    temp = spec.with_name(".broken.tmp")
    temp.write_text("{not json")
    os.replace(temp, spec)
    _wait_for(bus, lambda: any(problem.kept_last_good for problem in bus.problems))
    assert bus.emit("PreToolUse", BASH).denied_by == ("org-guard",), "the last good version stays in effect"
    (spec.parent / "hook.json").unlink()
    _wait_for(bus, lambda: "org-guard" not in bus.snapshot.hooks)
    assert bus.emit("PreToolUse", BASH) == ALLOW


@pytest.mark.timeout(60)
def test_a_managed_directory_made_unsafe_while_watched_stops_loading(
    watching_bus: HookBus, write_managed: ManagedWriter, managed: Path
) -> None:
    bus = watching_bus
    write_managed("org-guard", **DENY)
    _wait_for(bus, lambda: "org-guard" in bus.snapshot.hooks)
    managed.chmod(0o777)
    _wait_for(bus, lambda: "org-guard" not in bus.snapshot.hooks)
    managed.chmod(0o755)
    _wait_for(bus, lambda: "org-guard" in bus.snapshot.hooks)


def _wait_for(bus: HookBus, predicate: Callable[[], bool], timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not reloaded in time"
        bus.wait_for_reload(bus.generation, timeout=0.5)


def test_install_refuses_a_managed_hooks_id(
    write_managed: ManagedWriter, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_managed("org-guard", **DENY)
    draft = tmp_path / "drafts" / "org-guard"
    draft.mkdir(parents=True)
    (draft / "hook.json").write_text(json.dumps({"trigger": {"event": "Stop"}, "command": "true"}))
    code, _, err = run_cli(capsys, "install", str(draft), "--home", str(home))
    assert code == 1 and "a managed hook has the id 'org-guard'" in err and "--id ID" in err
    assert not (home / "hooks" / "org-guard").exists()
    code, _, err = run_cli(capsys, "install", str(draft), "--home", str(home), "--id", GUARD_ID)
    assert code == 1 and "home guard" in err


def test_a_link_planted_where_managed_state_goes_is_not_written_through(
    make_bus: Callable[..., HookBus], write_managed: ManagedWriter, home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_managed("org-guard", **DENY)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / "managed").symlink_to(elsewhere)
    bus = make_bus()
    assert bus.emit("PreToolUse", BASH).denied_by == ("org-guard",)  # the decision stands
    bus.close()
    assert list(elsewhere.iterdir()) == []
    assert [entry["hook_id"] for entry in _log(home)] == ["org-guard"]  # the log has the fire
    assert any("cannot make" in record.getMessage() and "managed" in record.getMessage() for record in caplog.records)
