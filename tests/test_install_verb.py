"""``hookbus new ID --dir DIR`` and ``hookbus install DIR/ID``: a hook drafted outside the home
(where an agent may write), reviewed, then copied in, on real files.

What is installed loads and fires; what the home would not obey (an invalid spec, a failing
fixture, a link, a FIFO, another user's file, a loose mode, too much) is refused with nothing
written; the copy reaches ``hooks/ID`` by one rename, so a watching bus never sees half of it;
and a copy that fails half-way leaves no temporary directory and the old hook as it was.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import wait_until
from hookbus import HookBus
from hookbus.cli import staged
from hookbus.cli.verbs import main
from test_cli import run_cli

pytestmark = pytest.mark.timeout(120)

RM = {"tool_name": "bash", "tool_input": {"command": "rm -rf build"}}
LS = {"tool_name": "bash", "tool_input": {"command": "ls"}}
DENY_RM = "#!/usr/bin/env bash\ngrep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; }\nexit 0\n"
GUARD = {
    "id": "guard", "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True,
    "command": '"$HOOKBUS_HOOK_DIR/check.sh"',
}


def run(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main(list(arguments))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def draft(directory: Path, spec: dict[str, Any] | None = None, files: dict[str, tuple[str, int]] | None = None) -> Path:
    """A staged hook in ``directory``: hook.json (0600), check.sh (0700) and ``files``
    (relative name: (content, mode)), every directory 0700."""
    directory.mkdir(parents=True, mode=0o700)
    everything = {"hook.json": (json.dumps(spec or GUARD), 0o600), "check.sh": (DENY_RM, 0o700), **(files or {})}
    for name, (content, mode) in everything.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(content)
        path.chmod(mode)
    return directory


def fixture(expect: dict[str, Any], envelope: dict[str, Any] = RM, **extra: Any) -> tuple[str, int]:
    return json.dumps({"event": "PreToolUse", "envelope": envelope, "expect": expect, **extra}), 0o600


def leftovers(home: Path) -> list[str]:
    """What is in ``hooks/`` besides hooks: a scratch home or a hook renamed aside."""
    hooks = home / "hooks"
    return sorted(name for name in os.listdir(hooks) if name.startswith(".")) if hooks.is_dir() else []


def install(capsys: pytest.CaptureFixture[str], home: Path, source: Path, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "install", str(source), "--home", str(home), *extra)


def decide(home: Path, envelope: dict[str, Any]) -> str:
    with HookBus(home) as bus:
        return bus.emit("PreToolUse", envelope).behavior


# -- the round trip -----------------------------------------------------------------------------


def test_new_dir_then_install_loads_and_fires(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"  # does not exist: the draft leaves it alone, install makes it
    drafts = tmp_path / "drafts"

    code, out, err = run(capsys, "new", "guard", "--event", "PreToolUse", "--dir", str(drafts), "--home", str(home))

    assert code == 0, err
    assert not home.exists()
    staged_dir = drafts / "guard"
    assert sorted(os.listdir(staged_dir)) == ["check.sh", "envelope.json", "hook.json", "tests"]
    assert os.listdir(staged_dir / "tests") == ["sample.json"]
    assert f"ok  {staged_dir}: valid as a hook of {home}" in out
    assert f"hookbus install {staged_dir} --home {home}" in out
    assert "review every file" in out

    code, out, err = install(capsys, home, staged_dir)

    assert code == 0, err
    assert err == ""
    assert out.splitlines() == [f"PASS  {staged_dir}/tests/sample.json", f"installed hooks/guard from {staged_dir} (4 files)"]
    hook_dir = home / "hooks" / "guard"
    assert sorted(os.listdir(hook_dir)) == ["check.sh", "envelope.json", "hook.json", "tests"]
    assert (mode_of(hook_dir), mode_of(hook_dir / "check.sh"), mode_of(hook_dir / "hook.json")) == (0o700, 0o700, 0o600)
    assert leftovers(home) == []
    assert decide(home, RM) == "deny"
    assert decide(home, LS) == "allow"
    # The home's own check says the same of it.
    assert run(capsys, "validate", "guard", "--home", str(home))[0] == 0


def test_a_draft_is_checked_against_the_homes_settings_and_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A workflow_id hook names a workflow of the home's config/: it is valid only there."""
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True, mode=0o700)
    home.chmod(0o700)
    spec = {"id": "veto", "trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True, "workflow_id": "fast-veto"}
    source = draft(tmp_path / "drafts" / "veto", spec)

    refused = install(capsys, home, source)

    assert refused[0] == 1
    assert f"hookbus install: {source}/hook.json: " in refused[2] and "fast-veto" in refused[2]
    (home / "config").mkdir(mode=0o700)
    workflows = {"fast-veto": {"steps": [{"bash": "grep -q 'rm -rf' && echo 'BLOCK: no rm -rf' || true"}]}}
    (home / "config" / "workflow.json").write_text(json.dumps(workflows))
    (home / "config" / "workflow.json").chmod(0o600)

    code, out, err = install(capsys, home, source)

    assert code == 0, err
    assert decide(home, RM) == "deny"


# -- what the home would not load, or that does not pass its tests ------------------------------


def test_an_invalid_hook_is_refused_with_its_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    source = draft(tmp_path / "drafts" / "late", {"trigger": {"event": "Stop"}, "blocking": True, "command": "exit 0"})

    code, out, err = install(capsys, home, source)

    assert code == 1
    lines = err.splitlines()
    assert f'hookbus install: {source}/hook.json: blocking needs "mode": "sync" @ $.blocking' in lines
    assert lines[-1].startswith(f"hookbus install: {source} is not a valid hook") and "nothing was installed" in lines[-1]
    assert "Traceback" not in err
    assert not home.exists()  # the home it made for the install is gone with it


def test_a_script_the_hook_runs_must_be_there(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    source = draft(tmp_path / "drafts" / "guard")
    (source / "check.sh").unlink()

    code, _, err = install(capsys, home, source)

    assert code == 1
    assert f"hookbus install: {source}/hook.json: the command runs $HOOKBUS_HOOK_DIR/check.sh" in err
    assert os.listdir(home / "hooks") == []


def test_a_failing_fixture_is_refused_unless_skip_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    source = draft(tmp_path / "drafts" / "guard", files={
        "tests/deny.json": fixture({"behavior": "deny", "reason": "rm -rf"}),
        "tests/wrong.json": fixture({"behavior": "deny"}, LS),
    })

    code, out, err = install(capsys, home, source)

    assert code == 1
    assert f"PASS  {source}/tests/deny.json" in out
    assert f"FAIL  {source}/tests/wrong.json" in err and "expected behavior to be 'deny', got 'allow'" in err
    assert err.splitlines()[-1].startswith(f"hookbus install: 1 of 2 fixtures of {source} failed")
    assert "--skip-tests" in err.splitlines()[-1]
    assert os.listdir(home / "hooks") == []

    code, out, err = install(capsys, home, source, "--skip-tests")

    assert code == 0, err
    assert "PASS" not in out and "FAIL" not in out + err
    assert out.splitlines()[-1] == f"installed hooks/guard from {source} (4 files)"
    assert leftovers(home) == []


def test_a_merged_fixture_is_left_for_after_the_install(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    source = draft(tmp_path / "drafts" / "guard", files={"tests/all.json": fixture({"behavior": "deny"}, merged=True)})

    code, out, err = install(capsys, home, source)

    assert code == 0, err
    assert f'SKIP  {source}/tests/all.json: "merged": true' in out and "hookbus test guard" in out


# -- what is never copied -----------------------------------------------------------------------


def link(source: Path) -> Path:
    (source / "check.sh").unlink()
    target = source.parent / "elsewhere.sh"
    target.write_text(DENY_RM)
    target.chmod(0o700)
    (source / "check.sh").symlink_to(target)
    return source / "check.sh"


def fifo(source: Path) -> Path:
    os.mkfifo(source / "pipe")
    return source / "pipe"


def loose(source: Path) -> Path:
    (source / "check.sh").chmod(0o775)
    return source / "check.sh"


def loose_directory(source: Path) -> Path:
    (source / "lib").mkdir(mode=0o700)
    (source / "lib").chmod(0o777)
    return source / "lib"


def foreign(source: Path) -> Path:
    os.chown(source / "hook.json", 12345, -1)
    return source / "hook.json"


def foreign_directory(source: Path) -> Path:
    os.chown(source, 12345, -1)
    return source


@pytest.mark.parametrize(
    ("spoil", "said"),
    [
        (link, "is a symbolic link"),
        (fifo, "is a FIFO"),
        (loose, "is writable by group (mode 0775)"),
        (loose_directory, "is writable by group and others (mode 0777)"),
        (foreign, "is owned by uid 12345"),
        (foreign_directory, "is owned by uid 12345"),
    ],
)
def test_what_the_home_would_not_obey_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spoil: Callable[[Path], Path], said: str
) -> None:
    if os.geteuid() != 0 and spoil in (foreign, foreign_directory):
        pytest.skip("only root can give a file away")
    home = tmp_path / "home"
    source = draft(tmp_path / "drafts" / "guard")
    culprit = spoil(source)

    code, out, err = install(capsys, home, source)

    assert code == 1
    assert out == ""
    assert err.startswith(f"hookbus install: {culprit} {said}") and len(err.splitlines()) == 1
    fixes = {"symbolic": "replace it with what it points to", "FIFO": "remove it", "writable": f"chmod go-w {culprit}", "owned": "chown"}
    assert any(word in said and fix in err for word, fix in fixes.items())
    assert not home.exists()


def test_too_many_files_or_bytes_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    many = draft(tmp_path / "drafts" / "many")
    (many / "data").mkdir(mode=0o700)
    for number in range(staged.MAX_FILES):
        (many / "data" / str(number)).touch(mode=0o600)
    big = draft(tmp_path / "drafts" / "big")
    with open(big / "blob", "wb") as handle:
        handle.truncate(staged.MAX_BYTES)  # with hook.json and check.sh: past the limit, sparse

    code, _, err = install(capsys, home, many)
    assert code == 1 and f"hookbus install: {many} holds more than 1,000 files and directories" in err

    code, _, err = install(capsys, home, big)
    assert code == 1 and f"hookbus install: {big} holds more than 16 MiB" in err
    assert os.listdir(home / "hooks") == []


def test_a_state_json_stays_behind_and_modes_lose_group_write_and_set_id(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    source = draft(tmp_path / "drafts" / "guard", files={"state.json": ("{}", 0o600), "notes.txt": ("hi", 0o644), "lib/tool": ("x", 0o755)})
    (source / "lib" / "tool").chmod(0o4755)  # set-uid: copied by root, it would be root's
    (source / "lib").chmod(0o755)

    code, out, err = install(capsys, home, source)

    assert code == 0, err
    hook_dir = home / "hooks" / "guard"
    assert sorted(os.listdir(hook_dir)) == ["check.sh", "hook.json", "lib", "notes.txt"]
    assert out.splitlines()[-1] == f"installed hooks/guard from {source} (4 files)"
    assert (mode_of(hook_dir / "notes.txt"), mode_of(hook_dir / "lib"), mode_of(hook_dir / "lib" / "tool")) == (0o644, 0o755, 0o755)


# -- where it goes --------------------------------------------------------------------------------


def test_an_existing_hook_is_replaced_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    old = draft(home / "hooks" / "guard", files={"old.txt": ("old", 0o600), "state.json": ('{"fires": 3}', 0o600)})
    source = draft(tmp_path / "drafts" / "guard", files={"new.txt": ("new", 0o600)})

    code, out, err = install(capsys, home, source)

    assert code == 1
    assert err == (
        f"hookbus install: hook 'guard' exists already ({old}): pass --force to replace it (its files and "
        "state.json are removed), or --id ID to install this one under another id\n"
    )
    assert sorted(os.listdir(old)) == ["check.sh", "hook.json", "old.txt", "state.json"]

    code, out, err = install(capsys, home, source, "--force")

    assert code == 0, err
    assert sorted(os.listdir(old)) == ["check.sh", "hook.json", "new.txt"]
    assert leftovers(home) == []
    assert decide(home, RM) == "deny"


def test_another_id_is_given_with_id(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    source = draft(tmp_path / "drafts" / "guard", {**GUARD, "id": "second"})

    code, _, err = install(capsys, home, source, "--id", "second")

    assert code == 0, err
    assert (home / "hooks" / "second" / "hook.json").is_file() and not (home / "hooks" / "guard").exists()


def test_a_failed_copy_leaves_nothing_behind_and_the_old_hook_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    old = draft(home / "hooks" / "guard", files={"old.txt": ("old", 0o600)})
    before = {name: (old / name).read_bytes() for name in os.listdir(old)}
    source = draft(tmp_path / "drafts" / "guard", files={"a.txt": ("a", 0o600), "b.txt": ("b", 0o600)})
    real = staged.copy_data
    calls = []

    def disk_full(source_fd: int, target_fd: int, limit: int) -> int:
        calls.append(1)
        if len(calls) == 3:  # part of the hook is copied already
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(source_fd, target_fd, limit)

    monkeypatch.setattr(staged, "copy_data", disk_full)

    code, out, err = install(capsys, home, source, "--force")

    assert code == 1
    assert err == (
        f"hookbus install: cannot copy {source} into {home / 'hooks'}: No space left on device; nothing was "
        "installed, and hooks/guard is as it was\n"
    )
    assert leftovers(home) == []
    assert {name: (old / name).read_bytes() for name in os.listdir(old)} == before


def test_a_watching_bus_sees_the_whole_hook_at_once(tmp_path: Path, home: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Every load the watcher makes is logged: the only one is of the whole hook, never of
    the scratch home or of a hook missing a file. (The install runs as its own process, as
    it does beside a running `hookbus serve`.)"""
    source = draft(tmp_path / "drafts" / "guard", files={"tests/deny.json": fixture({"behavior": "deny"})})
    caplog.set_level(logging.INFO, logger="hookbus.load")
    with HookBus(home, watch=True) as bus:
        assert "guard" not in bus.snapshot.hooks

        done = run_cli(tmp_path, "install", str(source), home=home)

        assert done.returncode == 0, done.stderr
        wait_until(bus, lambda: "guard" in bus.snapshot.hooks)
        assert bus.snapshot.problems == () and bus.snapshot.warnings == ()
        assert [hook_id for hook_id in bus.snapshot.hooks if not hook_id.startswith("hookbus:")] == ["guard"]
        assert bus.emit("PreToolUse", RM).behavior == "deny"
    loads = [record.getMessage() for record in caplog.records if record.name == "hookbus.load" and "hooks/" in record.getMessage()]
    assert [line for line in loads if line.startswith(("loaded", "reloaded", "skipped", "kept", "removed"))] == [
        "loaded hooks/guard: PreToolUse sync blocking, command"
    ], loads


def test_a_path_in_the_hooks_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    inside = draft(home / "hooks" / "guard")

    code, _, err = install(capsys, home, inside, "--id", "other")

    assert code == 1
    assert err.startswith(f"hookbus install: {inside} is in the home's hooks directory") and "hookbus new ID --dir DIR" in err
    code, _, err = install(capsys, home, tmp_path, "--id", "all")
    assert code == 1 and f"{tmp_path} holds the home's hooks directory" in err
    assert sorted(os.listdir(home / "hooks")) == ["guard"]


@pytest.mark.parametrize(("name", "given"), [(".hidden", None), ("guard", "a/b"), ("guard", "x.swp"), ("guard", "")])
def test_an_id_a_hook_cannot_have_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path, name: str, given: str | None) -> None:
    source = draft(tmp_path / "drafts" / name)

    code, _, err = install(capsys, home, source, *(["--id", given] if given is not None else []))

    assert code == 1
    assert err.startswith("hookbus install: cannot install a hook with the id")
    assert ("pass --id ID" in err) == (given is None)
    assert os.listdir(home / "hooks") == []


def test_a_path_that_is_no_hook_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    source = draft(tmp_path / "drafts" / "guard")

    assert install(capsys, home, tmp_path / "nope")[2] == f"hookbus install: {tmp_path / 'nope'} does not exist: name the directory of the hook to install\n"
    assert "is not a directory" in install(capsys, home, source / "hook.json", "--id", "guard")[2]
    (source / "hook.json").rename(source / "hook.yml")
    assert f"{source} holds no hook.json or hook.yaml" in install(capsys, home, source)[2]
    assert os.listdir(home / "hooks") == []


# -- what was checked is what is installed ------------------------------------------------------


def tampering(tamper: str) -> str:
    """check.sh that runs ``tamper`` when its fixture runs it, then denies rm -rf."""
    return f'#!/usr/bin/env bash\nif [ "$HOOKBUS_TEST" = 1 ]; then {tamper}; fi\n' + DENY_RM.split("\n", 1)[1]


CATCH_ALL = json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "command": "true"})


def test_a_fixture_that_changes_its_copy_refuses_the_install(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    """The fixture's script rewrites the copy it runs from into a catch-all hook and adds a
    file: what the fixtures checked is not what would be installed."""
    tamper = f"printf %s '{CATCH_ALL}' > \"$HOOKBUS_HOOK_DIR/hook.json\"; echo 'exit 0' > \"$HOOKBUS_HOOK_DIR/evil.sh\""
    source = draft(tmp_path / "drafts" / "guard", files={"check.sh": (tampering(tamper), 0o700), "tests/deny.json": fixture({"behavior": "deny"})})

    code, out, err = install(capsys, home, source)

    assert code == 1
    assert err.splitlines()[-1] == (
        f"hookbus install: running {source}/tests/deny.json changed the hook's own files (evil.sh: added; hook.json: its "
        "content changed), so what its fixtures checked is not what would be installed, and nothing was installed: a hook "
        "keeps what it writes outside its directory (or writes nothing when HOOKBUS_TEST=1, as its fixtures run)"
    )
    assert os.listdir(home / "hooks") == []
    assert json.loads((source / "hook.json").read_text()) == GUARD  # the draft is as it was


def test_the_fixtures_run_from_a_copy_apart_from_the_one_installed(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    seen = tmp_path / "seen"
    source = draft(tmp_path / "drafts" / "guard", files={
        "check.sh": (tampering(f'echo "$HOOKBUS_HOOK_DIR" > {seen}'), 0o700), "tests/deny.json": fixture({"behavior": "deny"}),
    })

    code, out, err = install(capsys, home, source)

    assert code == 0, err
    ran_in = Path(seen.read_text().strip())
    assert home not in ran_in.parents and not ran_in.exists()  # a scratch home elsewhere, removed
    assert sorted(os.listdir(home / "hooks" / "guard")) == ["check.sh", "hook.json", "tests"]


def test_a_fixture_that_changes_the_draft_changes_nothing_installed(tmp_path: Path, capsys: pytest.CaptureFixture[str], home: Path) -> None:
    drafts = tmp_path / "drafts"
    tamper = f"printf %s '{CATCH_ALL}' > '{drafts}/guard/hook.json'; echo x > '{drafts}/guard/late.sh'"
    source = draft(drafts / "guard", files={"check.sh": (tampering(tamper), 0o700), "tests/deny.json": fixture({"behavior": "deny"})})
    checked = {name: (source / name).read_bytes() for name in ("hook.json", "check.sh", "tests/deny.json")}

    code, out, err = install(capsys, home, source)

    assert code == 0, err
    installed = home / "hooks" / "guard"
    assert sorted(os.listdir(installed)) == ["check.sh", "hook.json", "tests"]
    assert {name: (installed / name).read_bytes() for name in checked} == checked
    assert (source / "late.sh").exists()  # the fixture did change the draft


def test_a_copy_changed_as_it_is_moved_into_place_is_taken_out_and_the_old_hook_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """A process that found the checked copy writes into it just as it is renamed into place:
    the copy is taken out again and the hook it was to replace (--force) is back."""
    from hookbus.cli import installverb

    old = draft(home / "hooks" / "guard", files={"old.txt": ("old", 0o600)})
    before = {name: (old / name).read_bytes() for name in os.listdir(old)}
    source = draft(tmp_path / "drafts" / "guard")
    real_rename = os.rename

    def rename_then_write(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_rename(src, dst, *args, **kwargs)
        if Path(dst) == old and Path(src).name == "guard":
            (Path(dst) / "hook.json").write_text(CATCH_ALL)

    monkeypatch.setattr(installverb.os, "rename", rename_then_write)

    code, out, err = install(capsys, home, source, "--force")

    assert code == 1
    assert err.startswith(f"hookbus install: the checked copy of {source} changed as it was moved into place (hook.json: its content changed)")
    assert "nothing was installed" in err
    assert {name: (old / name).read_bytes() for name in os.listdir(old)} == before
    assert leftovers(home) == []


def test_manifests_say_what_changed(tmp_path: Path) -> None:
    directory = draft(tmp_path / "hook", files={"lib/a.sh": ("a", 0o700)})
    before = staged.manifest_of(directory)
    assert before["."][0] == "directory" and before["hook.json"][0] == "file" and before["lib/a.sh"][1] == 0o700
    assert staged.differences(before, staged.manifest_of(directory)) == []
    (directory / "check.sh").chmod(0o755)
    (directory / "lib" / "a.sh").write_text("b")
    (directory / "lib" / "b").symlink_to("/etc/passwd")
    os.link(directory / "hook.json", tmp_path / "elsewhere")
    (directory / "state.json").write_text("{}")
    assert staged.differences(before, staged.manifest_of(directory)) == [
        "check.sh: its mode changed from 0700 to 0755",
        "hook.json: it has 2 names now (a hard link to it was made)",
        "lib/a.sh: its content changed",
        "lib/b: added (a symbolic link)",
        "state.json: added",
    ]
    assert "state.json" not in staged.manifest_of(directory, in_place=True)


def test_bytecode_python_writes_as_a_fixture_runs_refuses_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """A Python hook that imports a module beside it makes Python write __pycache__ into the
    copy its fixtures run from: that is not the hook changing itself."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    seen = tmp_path / "pycache"
    check = (
        f"#!{sys.executable}\nimport json, os, sys\nsys.path.insert(0, os.environ['HOOKBUS_HOOK_DIR'])\nimport rules\n"
        f"open({str(seen)!r}, 'w').write(str(os.listdir(os.environ['HOOKBUS_HOOK_DIR'])))\n"
        "sys.exit(rules.decide(json.load(sys.stdin)))\n"
    )
    rules = "def decide(envelope):\n    return 2 if 'rm -rf' in envelope['tool_input']['command'] else 0\n"
    source = draft(tmp_path / "drafts" / "guard", files={
        "check.sh": (check, 0o700), "rules.py": (rules, 0o600), "tests/deny.json": fixture({"behavior": "deny"}),
    })

    code, out, err = install(capsys, home, source)

    assert code == 0, err
    assert "__pycache__" in seen.read_text()  # Python did write it where the fixture ran
    assert sorted(os.listdir(home / "hooks" / "guard")) == ["check.sh", "hook.json", "rules.py", "tests"]
