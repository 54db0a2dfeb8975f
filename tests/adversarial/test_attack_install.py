"""Promise 2 at install time: ``hookbus import claude-code|gemini-cli FILE --install-bridge``
writes nothing through what another local user planted.

The attacker is another local user who can write the directory FILE lives in: a project's
``.claude/`` (or ``.gemini/``) that is group- or world-writable, a checkout under /tmp. They
plant ``FILE.bak`` (a link to one of the user's files, a link to where they want a file
created, their own file, a FIFO, a hard link), or FILE itself as a link to one of the
user's files. Each attack runs the real CLI and checks that no file of the user's changed
but FILE (and its backup, made by the user alone), that nothing was written where the
attacker pointed, and that a refusal names the path and the fix, with FILE unchanged.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from attackkit import FOREIGN_UID, attack, needs_root

HOOKBUS = str(Path(sys.executable).parent / "hookbus")
#: A settings file that holds a secret: the backup must be no easier to read than it.
ORIGINAL = json.dumps({"env": {"API_KEY": "s3cret-" + "x" * 3000}, "hooks": {}}, indent=2) + "\n"
HOSTS = ("claude-code", "gemini-cli")


def install(file: Path, host: str, home: Path, *, shell_prefix: str = "") -> subprocess.CompletedProcess[str]:
    """The real CLI, through real bash (``shell_prefix`` runs first: umask, ulimit)."""
    command = f'{shell_prefix} exec "$0" import "$1" "$2" --install-bridge --home "$3"'
    return subprocess.run(
        ["bash", "-c", command, HOOKBUS, host, str(file), str(home)],
        capture_output=True, text=True, timeout=60,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A settings directory anyone may write (no sticky bit), holding the user's 0600 FILE."""
    directory = tmp_path / "project" / ".claude"
    directory.mkdir(parents=True)
    directory.chmod(0o777)
    settings = directory / "settings.json"
    settings.write_text(ORIGINAL)
    settings.chmod(0o600)
    return settings


def assert_refused(result: subprocess.CompletedProcess[str], settings: Path, where: Path) -> None:
    """Exit 1, a message naming ``where`` and what to do, and FILE as it was."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{where}:" in result.stderr, result.stderr
    assert "remove it" in result.stderr, result.stderr
    assert f"{settings} was not changed" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert settings.read_text() == ORIGINAL


@needs_root
@pytest.mark.parametrize("host", HOSTS)
def test_a_planted_link_as_the_backup_is_not_written_through(host: str, project: Path, tmp_path: Path) -> None:
    with attack(2, f"install {host}: FILE.bak is another user's link to the user's file"):
        victim = tmp_path / "dotfile"
        victim.write_text("the user's own file\n")
        backup = Path(f"{project}.bak")
        backup.symlink_to(victim)
        os.lchown(backup, FOREIGN_UID, FOREIGN_UID)
        result = install(project, host, tmp_path / "home")
        assert_refused(result, project, backup)
        assert victim.read_text() == "the user's own file\n"
        assert os.readlink(backup) == str(victim)


@needs_root
def test_a_dangling_link_as_the_backup_creates_nothing_where_it_points(project: Path, tmp_path: Path) -> None:
    with attack(2, "install: FILE.bak is another user's link to where they want the secret"):
        drop = tmp_path / "attacker" / "loot.json"
        drop.parent.mkdir()
        drop.parent.chmod(0o777)
        backup = Path(f"{project}.bak")
        backup.symlink_to(drop)
        os.lchown(backup, FOREIGN_UID, FOREIGN_UID)
        result = install(project, "claude-code", tmp_path / "home")
        assert_refused(result, project, backup)
        assert not os.path.lexists(drop), "the backup was written where the attacker's link points"


@needs_root
def test_another_users_file_as_the_backup_is_not_written_into(project: Path, tmp_path: Path) -> None:
    with attack(2, "install: FILE.bak is another user's file, 0666"):
        backup = Path(f"{project}.bak")
        backup.write_text("planted\n")
        backup.chmod(0o666)
        os.chown(backup, FOREIGN_UID, FOREIGN_UID)
        result = install(project, "claude-code", tmp_path / "home")
        assert_refused(result, project, backup)
        assert backup.read_text() == "planted\n", "the secret went into a file the attacker owns"


@needs_root
def test_a_fifo_as_the_backup_is_refused_without_blocking(project: Path, tmp_path: Path) -> None:
    with attack(2, "install: FILE.bak is another user's FIFO"):
        backup = Path(f"{project}.bak")
        os.mkfifo(backup, 0o666)
        os.chown(backup, FOREIGN_UID, FOREIGN_UID)
        result = install(project, "gemini-cli", tmp_path / "home")  # timeout=60: a blocked open fails
        assert_refused(result, project, backup)
        assert stat.S_ISFIFO(os.lstat(backup).st_mode)


def test_a_hard_link_as_the_backup_is_passed_over_not_written_into(project: Path, tmp_path: Path) -> None:
    with attack(2, "install: FILE.bak is a hard link to another of the user's files"):
        victim = tmp_path / "notes.txt"
        victim.write_text("the user's own file\n")
        backup = Path(f"{project}.bak")
        os.link(victim, backup)
        result = install(project, "claude-code", tmp_path / "home")
        assert result.returncode == 0, result.stderr
        # A file of the user's there is an earlier backup: kept, and the new one made beside it.
        assert victim.read_text() == "the user's own file\n"
        assert os.lstat(backup).st_ino == os.lstat(victim).st_ino
        new = Path(f"{project}.bak.1")
        assert new.read_text() == ORIGINAL
        assert stat.S_IMODE(os.lstat(new).st_mode) == 0o600
        assert os.lstat(new).st_ino != os.lstat(victim).st_ino


@pytest.mark.parametrize("host", HOSTS)
def test_the_backup_is_never_readable_by_others_even_for_a_moment(host: str, project: Path, tmp_path: Path) -> None:
    """A backup that exists at 0644 before its mode is fixed can be opened by anyone then,
    and read after. To see the moment without timing it: the writes fail (a file size
    limit), and whatever the failed install leaves must be no wider than FILE."""
    with attack(2, f"install {host}: the backup is readable by others while it is written"):
        result = install(project, host, tmp_path / "home", shell_prefix="umask 000; trap '' XFSZ; ulimit -f 1;")
        assert result.returncode == 1, result.stdout + result.stderr
        assert "Traceback" not in result.stderr
        assert project.read_text() == ORIGINAL
        leftovers = [path for path in project.parent.iterdir() if path != project]
        for path in leftovers:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            assert mode & 0o077 == 0, f"{path.name} was left at {mode:04o}, readable by others"


@needs_root
@pytest.mark.parametrize("host", HOSTS)
def test_file_as_another_users_link_to_the_users_settings_is_refused(host: str, project: Path, tmp_path: Path) -> None:
    with attack(2, f"install {host}: FILE is another user's link to the user's own settings"):
        own = tmp_path / "dot-claude" / "settings.json"
        own.parent.mkdir()
        own.write_text('{"model": "opus"}\n')
        project.unlink()
        project.symlink_to(own)
        os.lchown(project, FOREIGN_UID, FOREIGN_UID)
        result = install(project, host, tmp_path / "home")
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"{project}:" in result.stderr and "another user" in result.stderr, result.stderr
        assert own.read_text() == '{"model": "opus"}\n'
        assert not os.path.lexists(f"{project}.bak")
