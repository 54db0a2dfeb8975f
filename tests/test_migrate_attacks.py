"""Attacks on the Claude Code migration (``--install-bridge`` moving FILE's hooks into the
home, ``--uninstall-bridge`` putting them back): what another user planted, a record
tampered with, a hook directory swapped for a link, a disk that fills up while writing.

Each runs the real CLI and checks that FILE and the home stay consistent: nothing written
through a link, nothing removed that the install did not make, nothing half-written, and a
message that names the path and the fix, never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookbus.hosts.bridgerecord import DIRECTORY
from hookbus.hosts.install import is_bridge_command
from migratekit import hook_ids, read, write_json
from servekit import environment

pytestmark = pytest.mark.timeout(120)

FOREIGN_UID = 4242
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can make files owned by another user")

SETTINGS: dict[str, Any] = {
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo guard"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}],
        "SessionEnd": [{"hooks": [{"type": "command", "command": "echo bye"}]}],
    },
}
IDS = ["pretooluse-bash-echo-guard", "stop-echo-stop"]


def cli(*arguments: str, limit_kib: int | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m hookbus ARGUMENTS`` through bash; with ``limit_kib``, no file it writes
    may grow past that many KiB (a disk that fills up), the signal ignored as Python does."""
    prefix = f"trap '' XFSZ; ulimit -f {limit_kib}; " if limit_kib is not None else ""
    return subprocess.run(
        ["bash", "-c", prefix + 'exec "$@"', "bash", sys.executable, "-m", "hookbus", *arguments],
        capture_output=True, text=True, timeout=60,
        env=environment(VIX_HOME=None, HOOKBUS_SOCKET=None, HOOKBUS_HTTP_TOKEN=None),
    )


def install(file: Path, home: Path, limit_kib: int | None = None) -> subprocess.CompletedProcess[str]:
    return cli("import", "claude-code", str(file), "--install-bridge", "--home", str(home), limit_kib=limit_kib)


def uninstall(file: Path, home: Path, limit_kib: int | None = None) -> subprocess.CompletedProcess[str]:
    return cli("import", "claude-code", str(file), "--uninstall-bridge", "--home", str(home), limit_kib=limit_kib)


def the_record(home: Path) -> Path:
    (record,) = (home / DIRECTORY).iterdir()
    return record


def bridges_in(file: Path) -> int:
    return sum(
        is_bridge_command(entry.get("command"))
        for groups in read(file).get("hooks", {}).values() for group in groups for entry in group["hooks"]
    )


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr, result.stderr


@pytest.fixture
def file(tmp_path: Path) -> Path:
    return write_json(tmp_path / "project" / ".claude" / "settings.json", SETTINGS)


@pytest.fixture
def vix(tmp_path: Path) -> Path:
    return tmp_path / "vix"


# -- FILE itself ---------------------------------------------------------------------------


@needs_root
def test_file_as_another_users_link_is_refused_both_ways(tmp_path: Path, vix: Path) -> None:
    own = write_json(tmp_path / "dot-claude" / "settings.json", SETTINGS)
    link = tmp_path / "shared" / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(own)
    os.lchown(link, FOREIGN_UID, FOREIGN_UID)
    for result in (install(link, vix), uninstall(link, vix)):
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"{link}: a symbolic link of another user's (uid {FOREIGN_UID})" in result.stderr
        assert f"{link} was not changed" in result.stderr
        no_traceback(result)
    assert read(own) == SETTINGS and not vix.exists()
    assert not Path(f"{link}.bak").exists()


# -- the record ----------------------------------------------------------------------------


def test_a_record_that_is_no_record_takes_the_bridge_out_and_says_what_it_did_not_put_back(file: Path, vix: Path) -> None:
    assert install(file, vix).returncode == 0
    record = the_record(vix)
    record.write_text('{"format": "hookbus bridge record", "version": 1, "steps": "all of them"}')
    result = uninstall(file, vix)
    assert result.returncode == 1
    no_traceback(result)
    assert bridges_in(file) == 0
    assert f"{record}: not a record hookbus wrote" in result.stderr
    assert f"did not put back the hooks --install-bridge moved out of {file}" in result.stderr
    assert f"the backups of {file}, oldest first: {file}.bak, {file}.bak.1" in result.stderr
    # The hooks it could not put back are where the message says, and the record is left.
    assert hook_ids(vix) == IDS and record.exists()
    assert read(Path(f"{file}.bak")) == SETTINGS


def test_a_record_pointing_outside_the_hooks_removes_nothing_there(file: Path, vix: Path, tmp_path: Path) -> None:
    assert install(file, vix).returncode == 0
    record = the_record(vix)
    document = read(record)
    moved = document["steps"][0]["events"]["Stop"]["moved"][0]
    # A directory outside hooks/ holding that very hook.json: a record that names it must
    # not make the uninstall remove it.
    victim = vix / "victim"
    shutil.copytree(vix / "hooks" / moved["hook_id"], victim)
    moved["hook_id"] = "../victim"
    moved["hook"]["id"] = "../victim"
    record.write_text(json.dumps(document))
    result = uninstall(file, vix)
    assert result.returncode == 1
    no_traceback(result)
    assert "hook_id is not an id hookbus gives" in result.stderr
    assert (victim / "hook.json").exists()
    assert hook_ids(vix) == IDS


def test_the_record_of_another_file_is_not_used(tmp_path: Path, vix: Path) -> None:
    first = write_json(tmp_path / "a" / "settings.json", {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo a"}]}]}})
    second = write_json(tmp_path / "b" / "settings.json", {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo b"}]}]}})
    assert install(first, vix).returncode == 0
    first_record = the_record(vix)
    assert install(second, vix).returncode == 0
    (second_record,) = [path for path in (vix / DIRECTORY).iterdir() if path != first_record]
    shutil.copyfile(first_record, second_record)  # b's record now says a's moves
    result = uninstall(second, vix)
    assert result.returncode == 1
    no_traceback(result)
    assert f"it is the record of {os.path.realpath(first)}, not of {os.path.realpath(second)}" in result.stderr
    assert bridges_in(second) == 0 and "echo a" not in second.read_text()
    # a's hook was not b's to remove, nor was b's own (the record could not say it was).
    assert hook_ids(vix) == ["stop-echo-a", "stop-echo-b"]
    assert uninstall(first, vix).returncode == 0
    assert read(first) == {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo a"}]}]}}


@pytest.mark.parametrize("how", ["others may write it", "a link"])
def test_a_record_others_could_have_written_is_not_used(file: Path, vix: Path, tmp_path: Path, how: str) -> None:
    assert install(file, vix).returncode == 0
    record = the_record(vix)
    if how == "a link":
        elsewhere = tmp_path / "elsewhere.json"
        shutil.copyfile(record, elsewhere)
        record.unlink()
        record.symlink_to(elsewhere)
    else:
        record.chmod(0o666)
    result = uninstall(file, vix)
    assert result.returncode == 1
    no_traceback(result)
    assert (how if how != "a link" else "it is a symbolic link") in result.stderr
    assert bridges_in(file) == 0 and hook_ids(vix) == IDS


def test_an_unusable_record_stops_an_install_that_would_move_hooks(file: Path, vix: Path) -> None:
    assert install(file, vix).returncode == 0
    record = the_record(vix)
    record.write_text("not json")
    installed = read(file)
    installed["hooks"]["PreToolUse"].append({"matcher": "Edit", "hooks": [{"type": "command", "command": "echo new"}]})
    write_json(file, installed)
    text = file.read_text()
    result = install(file, vix)
    assert result.returncode == 1
    no_traceback(result)
    assert f"{record}: not a record hookbus wrote" in result.stderr and f"mv {record}" in result.stderr
    assert file.read_text() == text and hook_ids(vix) == IDS and record.read_text() == "not json"
    assert not Path(f"{file}.bak.1").exists()


# -- the home's hook directories -------------------------------------------------------------


def test_a_link_where_a_hook_would_move_writes_nothing(file: Path, vix: Path, tmp_path: Path) -> None:
    # The very hook the move would write, behind a link: still refused, nothing followed.
    reference = tmp_path / "reference"
    assert cli("import", "claude-code", str(file), "--home", str(reference)).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(reference / "hooks" / "stop-echo-stop", elsewhere)
    (vix / "hooks").mkdir(parents=True)
    (vix / "hooks" / "stop-echo-stop").symlink_to(elsewhere)
    result = install(file, vix)
    assert result.returncode == 1
    no_traceback(result)
    link = vix / "hooks" / "stop-echo-stop"
    assert f"{link}: a symbolic link (to {elsewhere}) is there" in result.stderr and f"mv {link}" in result.stderr
    assert read(file) == SETTINGS and hook_ids(vix) == ["stop-echo-stop"] and not (vix / DIRECTORY).exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == ["hook.json"]


def test_a_hook_directory_swapped_for_a_link_is_not_removed_through_it(file: Path, vix: Path, tmp_path: Path) -> None:
    assert install(file, vix).returncode == 0
    moved = vix / "hooks" / "stop-echo-stop"
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(moved), elsewhere)
    moved.symlink_to(elsewhere)
    result = uninstall(file, vix)
    assert result.returncode == 0, result.stderr
    assert read(file) == SETTINGS
    assert f"kept {moved}: it is a symbolic link now (to {elsewhere})" in result.stdout
    assert (elsewhere / "hook.json").exists() and moved.is_symlink()
    assert hook_ids(vix) == ["stop-echo-stop"]


def test_hooks_behind_a_linked_hooks_directory_are_not_removed(file: Path, vix: Path, tmp_path: Path) -> None:
    assert install(file, vix).returncode == 0
    elsewhere = tmp_path / "elsewhere-hooks"
    shutil.move(str(vix / "hooks"), elsewhere)
    (vix / "hooks").symlink_to(elsewhere)
    result = uninstall(file, vix)
    assert result.returncode == 0, result.stderr
    assert read(file) == SETTINGS
    assert sorted(p.name for p in elsewhere.iterdir()) == IDS
    assert "is a symbolic link, which hookbus removes nothing through" in result.stdout


# -- a full disk -----------------------------------------------------------------------------


def test_an_install_whose_file_cannot_be_written_leaves_file_and_home_as_they_were(tmp_path: Path) -> None:
    """FILE is the last thing written: a disk that fills up there (its new text is larger
    than the old, the hooks and the record smaller) takes back the hooks and the record."""
    document = {"padding": "x" * 5000, **SETTINGS}
    file = write_json(tmp_path / "project" / ".claude" / "settings.json", document)
    reference = write_json(tmp_path / "reference" / ".claude" / "settings.json", document)
    assert install(reference, tmp_path / "reference-home").returncode == 0
    limit = 6  # KiB: between FILE's size before and after, above the hooks' and the record's
    assert file.stat().st_size < limit * 1024 < reference.stat().st_size
    assert the_record(tmp_path / "reference-home").stat().st_size < limit * 1024
    vix = tmp_path / "vix"
    result = install(file, vix, limit_kib=limit)
    assert result.returncode == 1, result.stdout + result.stderr
    no_traceback(result)
    assert f"{file} was not changed, nor the home" in result.stderr
    assert read(file) == document
    assert hook_ids(vix) == [] and list((vix / DIRECTORY).iterdir()) == []
    assert [p.name for p in file.parent.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    assert install(file, vix).returncode == 0  # with room, it goes through
    assert hook_ids(vix) == IDS


def test_an_uninstall_whose_file_cannot_be_written_leaves_file_and_home_as_they_were(tmp_path: Path) -> None:
    long_command = "echo " + "y" * 6000
    document = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": long_command}]}]}}
    file = write_json(tmp_path / "project" / ".claude" / "settings.json", document)
    vix = tmp_path / "vix"
    assert install(file, vix).returncode == 0
    installed = file.read_text()
    ids, record = hook_ids(vix), the_record(vix).read_text()
    limit = 4  # KiB: above the installed FILE (the backup goes through), below the restored one
    assert len(installed) < limit * 1024 < len(json.dumps(document, indent=2))
    result = uninstall(file, vix, limit_kib=limit)
    assert result.returncode == 1, result.stdout + result.stderr
    no_traceback(result)
    assert f"{file} was not changed, nor the home" in result.stderr
    assert file.read_text() == installed and hook_ids(vix) == ids and the_record(vix).read_text() == record
    done = uninstall(file, vix)
    assert done.returncode == 0, done.stderr
    assert read(file) == document and hook_ids(vix) == []
