"""StrictModes for the hooks directory: nobody but you (or root) decides what runs as you.

A hook.json, hook directory or hooks/ directory that is writable by group or others, or
owned by another user, is refused with a message naming the fix; symlinked spec files and
hook directories are refused; ``"hooks_strict_modes": false`` relaxes only the mode check,
and never silently. Real files, the real watcher, real subprocesses.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import read_state
from otheruser import python_path
from hookbus import HookBus
from hookbus.errors import HookNotFoundError, Problem

Maker = Callable[..., HookBus]
Writer = Callable[..., Path]

FOREIGN_UID = 4242
ME = os.geteuid()
#: Tests that give files to another uid (or to root): only root may chown so.
needs_chown = pytest.mark.skipif(ME != 0, reason="skipped: needs root, to give files to another uid (chown)")


# -- helpers ------------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("safe_modes")


def stop_spec(text: str, **fields: Any) -> str:
    """A sync Stop hook whose context is ``text``: what fires is visible in the Decision."""
    return json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "command": f"echo {text}", **fields})


def write_stop_hook(write_hook: Writer, hook_id: str, text: str | None = None) -> Path:
    return write_hook(hook_id, event="Stop", mode="sync", command=f"echo {text or hook_id}")


def atomic_write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def fired(bus: HookBus) -> str | None:
    """The merged context of a Stop emit: which hooks' contents actually ran."""
    return bus.emit("Stop", {}).context


def problems_of(bus: HookBus, hook_id: str | None) -> list[Problem]:
    return [problem for problem in bus.problems if problem.hook_id == hook_id]


def wait_for(bus: HookBus, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait on the bus generation (never a sleep) until ``predicate`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        generation = bus.generation
        if predicate():
            return
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"timed out; problems: {[str(p) for p in bus.problems]}"
        bus.wait_for_reload(generation, remaining)


def hookbus_records(caplog: pytest.LogCaptureFixture, level: int, text: str) -> list[logging.LogRecord]:
    return [
        record
        for record in caplog.records
        if record.name.startswith("hookbus") and record.levelno == level and text in record.getMessage()
    ]


def set_settings(home: Path, document: dict[str, Any]) -> None:
    atomic_write(home / "settings.json", json.dumps(document))


# -- loose modes --------------------------------------------------------------------------

# (case, what is loosened, mode, who the message says can write)
LOOSE_MODES: list[tuple[str, str, int, str]] = [
    ("hook.json 0664", "file", 0o664, "group"),
    ("hook.json 0646", "file", 0o646, "others"),
    ("hook.json 0666", "file", 0o666, "group and others"),
    ("hook.json 0622 (write-only for others)", "file", 0o622, "group and others"),
    ("hook dir 0775", "dir", 0o775, "group"),
    ("hook dir 0757", "dir", 0o757, "others"),
    ("hook dir 1777 (sticky, like /tmp)", "dir", 0o1777, "group and others"),
    ("hook dir 2775 (setgid)", "dir", 0o2775, "group"),
]


def loosen(path: Path, target: str, mode: int) -> Path:
    """chmod the hook.json ``path`` or its directory; the path that was changed."""
    changed = path if target == "file" else path.parent
    changed.chmod(mode)
    return changed


@pytest.mark.parametrize(("case", "target", "mode", "who"), LOOSE_MODES, ids=[row[0] for row in LOOSE_MODES])
def test_loose_mode_refuses_only_that_hook(
    case: str, target: str, mode: int, who: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x", "from-x")
    write_stop_hook(write_hook, "good", "fine")
    changed = loosen(path, target, mode)
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    assert "good" in bus.snapshot.hooks
    [problem] = problems_of(bus, "x")
    shown = "hooks/x/hook.json" if target == "file" else "hooks/x"
    assert problem.path == shown
    assert problem.location is None
    assert not problem.kept_last_good
    assert f"is writable by {who} (mode {mode & 0o7777:04o})" in problem.message
    assert f"run `chmod go-w {changed}`" in problem.message
    assert changed.is_absolute()
    assert str(problem).startswith(f"{shown}: is writable by ")
    # Every other hook still loads and fires; the refused one never does.
    assert fired(bus) == "fine"
    with pytest.raises(HookNotFoundError):
        bus.trigger("x")


def test_yaml_spec_is_checked_the_same_way(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    path = write_hook("y", name="hook.yaml", raw="trigger: {event: Stop}\nmode: sync\ncommand: echo from-y\n")
    path.chmod(0o664)
    bus = make_bus()
    assert "y" not in bus.snapshot.hooks
    [problem] = problems_of(bus, "y")
    assert problem.path == "hooks/y/hook.yaml"
    assert f"chmod go-w {path}`" in problem.message
    assert fired(bus) is None


@pytest.mark.parametrize(
    ("file_mode", "dir_mode"),
    [(0o644, 0o755), (0o600, 0o700), (0o444, 0o555), (0o640, 0o750), (0o604, 0o705)],
    ids=lambda mode: f"{mode:04o}",
)
def test_modes_not_writable_by_group_or_others_load(
    file_mode: int, dir_mode: int, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x", "loaded")
    path.chmod(file_mode)
    path.parent.chmod(dir_mode)
    bus = make_bus()
    assert bus.problems == ()
    assert fired(bus) == "loaded"


def test_loose_file_and_loose_directory_are_both_reported(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x")
    path.chmod(0o666)
    path.parent.chmod(0o777)
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    assert sorted(p.path for p in problems_of(bus, "x")) == ["hooks/x", "hooks/x/hook.json"]
    messages = " ".join(p.message for p in problems_of(bus, "x"))
    assert f"chmod go-w {path.parent}`" in messages
    assert f"chmod go-w {path}`" in messages


def test_message_names_the_absolute_path_when_the_home_is_relative(
    tmp_path: Path, home: Path, write_hook: Writer, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_stop_hook(write_hook, "x")
    path.chmod(0o664)
    monkeypatch.chdir(tmp_path)
    bus = make_bus(Path(home.name))
    [problem] = problems_of(bus, "x")
    assert problem.path == "hooks/x/hook.json"
    assert f"run `chmod go-w {path}`" in problem.message


# -- the hooks directory itself ------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "who"), [(0o775, "group"), (0o757, "others"), (0o777, "group and others")], ids=["0775", "0757", "0777"]
)
def test_loose_hooks_directory_loads_nothing(
    mode: int, who: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_stop_hook(write_hook, "a")
    write_stop_hook(write_hook, "b")
    hooks_dir = home / "hooks"
    hooks_dir.chmod(mode)
    bus = make_bus()
    assert dict(bus.snapshot.hooks) == {}
    [problem] = bus.problems
    assert problem.path == "hooks"
    assert problem.hook_id is None
    assert f"is writable by {who} (mode {mode:04o})" in problem.message
    assert f"run `chmod go-w {hooks_dir}`" in problem.message
    assert problem.message.endswith("no hook is loaded from it")
    assert fired(bus) is None


@needs_chown
def test_foreign_owned_hooks_directory_loads_nothing(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    write_stop_hook(write_hook, "a")
    hooks_dir = home / "hooks"
    os.chown(hooks_dir, FOREIGN_UID, -1)
    bus = make_bus()
    assert dict(bus.snapshot.hooks) == {}
    [problem] = bus.problems
    assert problem.path == "hooks"
    assert f"is owned by uid {FOREIGN_UID}" in problem.message
    assert f"run `chown {ME} {hooks_dir}`" in problem.message
    assert fired(bus) is None


# -- ownership ----------------------------------------------------------------------------

# (case, what is chowned, owner uid, refused)
OWNERS: list[tuple[str, str, int, bool]] = [
    ("hook.json owned by another uid", "file", FOREIGN_UID, True),
    ("hook dir owned by another uid", "dir", FOREIGN_UID, True),
    ("hook.json owned by root", "file", 0, False),
    ("hook dir owned by root", "dir", 0, False),
]


@needs_chown
@pytest.mark.parametrize(("case", "target", "uid", "refused"), OWNERS, ids=[row[0] for row in OWNERS])
def test_ownership(
    case: str, target: str, uid: int, refused: bool, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x", "from-x")
    write_stop_hook(write_hook, "good", "fine")
    changed = path if target == "file" else path.parent
    os.chown(changed, uid, -1)
    bus = make_bus()
    if not refused:
        assert bus.problems == ()
        assert "x" in bus.snapshot.hooks
        return
    assert "x" not in bus.snapshot.hooks
    [problem] = problems_of(bus, "x")
    assert problem.path == ("hooks/x/hook.json" if target == "file" else "hooks/x")
    assert f"is owned by uid {uid}, not by you (uid {ME}) or root" in problem.message
    assert f"run `chown {ME} {changed}`" in problem.message
    assert fired(bus) == "fine"


# Run in a child that drops its effective uid: only then can "root is fine" be told apart
# from "you are fine". Everything is imported (by a first bus) before the uid is dropped.
AS_ANOTHER_USER = r"""
import json, os, sys
from hookbus import HookBus
HookBus(sys.argv[2]).close()
os.seteuid(int(sys.argv[3]))
bus = HookBus(sys.argv[1])
result = {
    "euid": os.geteuid(),
    "hooks": sorted(bus.snapshot.hooks),
    "problems": {p.hook_id: p.message for p in bus.problems},
}
bus.close()
print(json.dumps(result))
"""


def reachable_by_everyone() -> str:
    """A directory another user can reach: every directory on the way to it searchable by
    others. The temporary directory when it is one; else /tmp or /var/tmp (a TMPDIR private
    to the user, as macOS gives each user, is not)."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        path = Path(candidate).resolve()
        try:
            if path.is_dir() and all(os.stat(step).st_mode & stat.S_IXOTH for step in (path, *path.parents)):
                return str(path)
        except OSError:
            continue
    pytest.skip("no directory here that another user can reach, to put a home in")


@needs_chown
@pytest.mark.timeout(60)
def test_non_root_bus_trusts_itself_and_root_but_nobody_else(tmp_path: Path) -> None:
    user, stranger = FOREIGN_UID, FOREIGN_UID + 1
    warm = tmp_path / "warm"
    (warm / "hooks").mkdir(parents=True)
    # tmp_path's parents are root-only; the child's uid needs a home it can reach.
    with tempfile.TemporaryDirectory(prefix="hookbus-perm-", dir=reachable_by_everyone()) as top:
        os.chmod(top, 0o755)
        home = Path(top) / "home"
        # (hook, owner of its directory, owner of its hook.json)
        layout = [
            ("mine", user, user),
            ("root-owned", 0, 0),
            ("root-dir", 0, user),
            ("stranger-file", user, stranger),
            ("stranger-dir", stranger, user),
        ]
        for hook_id, dir_uid, file_uid in layout:
            directory = home / "hooks" / hook_id
            directory.mkdir(parents=True, mode=0o755)
            directory.chmod(0o755)
            spec = directory / "hook.json"
            spec.write_text(stop_spec(hook_id))
            spec.chmod(0o644)
            os.chown(spec, file_uid, -1)
            os.chown(directory, dir_uid, -1)
        (home / "hooks").chmod(0o755)
        os.chown(home / "hooks", user, -1)
        os.chown(home, user, -1)
        # Where that uid can read hookbus, its plugins and dependencies: the checkout, or a
        # copy when the checkout is under a directory only its owner may enter (otheruser).
        environ = {**os.environ, "PYTHONPATH": os.pathsep.join(python_path(user, gid=0))}
        result = subprocess.run(
            [sys.executable, "-c", AS_ANOTHER_USER, str(home), str(warm), str(user)],
            capture_output=True,
            text=True,
            timeout=60,
            env=environ,
            cwd=top,  # not the checkout, which python -c would import hookbus from first
        )
        assert result.returncode == 0, result.stderr
        found = json.loads(result.stdout)
    assert found["euid"] == user
    assert found["hooks"] == ["mine", "root-dir", "root-owned"]
    assert set(found["problems"]) == {"stranger-file", "stranger-dir"}
    for hook_id, path in (
        ("stranger-file", home / "hooks" / "stranger-file" / "hook.json"),
        ("stranger-dir", home / "hooks" / "stranger-dir"),
    ):
        message = found["problems"][hook_id]
        assert f"is owned by uid {stranger}, not by you (uid {user}) or root" in message
        assert f"run `chown {user} {path}`" in message


# -- "hooks_strict_modes": false ----------------------------------------------------------


@pytest.mark.parametrize(("target", "mode"), [("file", 0o664), ("file", 0o666), ("dir", 0o775), ("dir", 0o757)])
def test_relaxed_modes_load_with_a_warning_naming_the_file(
    target: str,
    mode: int,
    home: Path,
    write_hook: Writer,
    make_bus: Maker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    set_settings(home, {"hooks_strict_modes": False})
    path = write_stop_hook(write_hook, "x", "relaxed")
    loosen(path, target, mode)
    bus = make_bus()
    assert bus.problems == ()
    assert fired(bus) == "relaxed"
    shown = "hooks/x/hook.json" if target == "file" else "hooks/x"
    warnings = hookbus_records(caplog, logging.WARNING, f"{shown} is writable by")
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    message = warnings[0].getMessage()
    assert f"(mode {mode:04o})" in message
    assert '"hooks_strict_modes": false' in message


def test_strict_modes_on_by_default_and_when_true(home: Path, write_hook: Writer, make_bus: Maker) -> None:
    path = write_stop_hook(write_hook, "x")
    path.chmod(0o664)
    assert "x" not in make_bus().snapshot.hooks
    set_settings(home, {"hooks_strict_modes": True, "unrelated": 1})
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    [problem] = problems_of(bus, "x")
    assert 'or set "hooks_strict_modes": false in settings.json' in problem.message


def test_strict_modes_setting_of_the_wrong_type_keeps_them_strict(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x")
    path.chmod(0o664)
    set_settings(home, {"hooks_strict_modes": "false"})
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    shown = [str(p) for p in bus.problems]
    assert "settings.json: expected true or false @ $.hooks_strict_modes" in shown
    assert any("chmod go-w" in text for text in shown)


@needs_chown
@pytest.mark.parametrize("target", ["file", "dir"])
def test_relaxed_modes_never_relax_ownership(
    target: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    set_settings(home, {"hooks_strict_modes": False})
    path = write_stop_hook(write_hook, "x", "from-x")
    changed = loosen(path, target, 0o666 if target == "file" else 0o777)
    os.chown(changed, FOREIGN_UID, -1)
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    [problem] = problems_of(bus, "x")
    assert f"is owned by uid {FOREIGN_UID}" in problem.message
    assert f"run `chown {ME} {changed}`" in problem.message
    assert fired(bus) is None


@needs_chown
def test_relaxed_modes_never_relax_ownership_of_the_hooks_directory(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    set_settings(home, {"hooks_strict_modes": False})
    write_stop_hook(write_hook, "x")
    os.chown(home / "hooks", FOREIGN_UID, -1)
    bus = make_bus()
    assert dict(bus.snapshot.hooks) == {}
    [problem] = bus.problems
    assert f"is owned by uid {FOREIGN_UID}" in problem.message


def test_relaxed_loose_hooks_directory_is_not_silent(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    set_settings(home, {"hooks_strict_modes": False})
    write_stop_hook(write_hook, "x", "relaxed")
    (home / "hooks").chmod(0o777)
    bus = make_bus()
    assert fired(bus) == "relaxed"
    assert hookbus_records(caplog, logging.WARNING, "hooks is writable by group and others"), [
        r.getMessage() for r in caplog.records
    ]


def test_turning_strict_modes_back_on_stops_a_relaxed_hook(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    set_settings(home, {"hooks_strict_modes": False})
    path = write_stop_hook(write_hook, "x", "relaxed")
    path.chmod(0o664)
    bus = make_bus()
    assert fired(bus) == "relaxed"
    set_settings(home, {"hooks_strict_modes": True})
    bus.reload()
    assert any("chmod go-w" in p.message for p in problems_of(bus, "x"))
    assert "x" not in bus.snapshot.hooks
    assert fired(bus) is None


@pytest.mark.timeout(60)
def test_toggling_strict_modes_in_settings_reloads_with_the_watcher(
    home: Path, write_hook: Writer, make_bus: Maker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="hookbus")
    path = write_stop_hook(write_hook, "x", "relaxed")
    path.chmod(0o664)
    bus = make_bus(watch=True)
    assert "x" not in bus.snapshot.hooks
    set_settings(home, {"hooks_strict_modes": False})
    wait_for(bus, lambda: "x" in bus.snapshot.hooks)
    assert bus.problems == ()
    assert fired(bus) == "relaxed"
    assert hookbus_records(caplog, logging.WARNING, "hooks/x/hook.json is writable by group (mode 0664)")


# -- symbolic links -----------------------------------------------------------------------


def link_outside_file(home: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside.json"
    outside.write_text(stop_spec("outside"))
    directory = home / "hooks" / "x"
    directory.mkdir()
    os.symlink(outside, directory / "hook.json")
    return directory / "hook.json"


def link_outside_yaml(home: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside.yaml"
    outside.write_text("trigger: {event: Stop}\nmode: sync\ncommand: echo outside\n")
    directory = home / "hooks" / "x"
    directory.mkdir()
    os.symlink(outside, directory / "hook.yaml")
    return directory / "hook.yaml"


def link_inside_file(home: Path, tmp_path: Path) -> Path:
    """x/hook.json -> ../good/hook.json: another hook's file, inside the hooks directory."""
    directory = home / "hooks" / "x"
    directory.mkdir()
    os.symlink(Path("..") / "good" / "hook.json", directory / "hook.json")
    return directory / "hook.json"


def link_dangling_file(home: Path, tmp_path: Path) -> Path:
    directory = home / "hooks" / "x"
    directory.mkdir()
    os.symlink(tmp_path / "nowhere.json", directory / "hook.json")
    return directory / "hook.json"


def link_outside_dir(home: Path, tmp_path: Path) -> Path:
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (outside / "hook.json").write_text(stop_spec("outside"))
    os.symlink(outside, home / "hooks" / "x")
    return home / "hooks" / "x"


def link_inside_dir(home: Path, tmp_path: Path) -> Path:
    os.symlink("good", home / "hooks" / "x")
    return home / "hooks" / "x"


# (case, builder, the refused path relative to the home)
LINKS: list[tuple[str, Callable[[Path, Path], Path], str]] = [
    ("hook.json to a file outside", link_outside_file, "hooks/x/hook.json"),
    ("hook.yaml to a file outside", link_outside_yaml, "hooks/x/hook.yaml"),
    ("hook.json to another hook's file", link_inside_file, "hooks/x/hook.json"),
    ("dangling hook.json", link_dangling_file, "hooks/x/hook.json"),
    ("hook dir to a directory outside", link_outside_dir, "hooks/x"),
    ("hook dir to another hook's directory", link_inside_dir, "hooks/x"),
]


@pytest.mark.parametrize(("case", "build", "shown"), LINKS, ids=[row[0] for row in LINKS])
def test_symlinks_are_refused(
    case: str,
    build: Callable[[Path, Path], Path],
    shown: str,
    home: Path,
    tmp_path: Path,
    write_hook: Writer,
    make_bus: Maker,
) -> None:
    write_stop_hook(write_hook, "good", "fine")
    link = build(home, tmp_path)
    assert link.is_symlink()
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    assert "good" in bus.snapshot.hooks
    [problem] = problems_of(bus, "x")
    assert problem.path == shown
    assert "is a symbolic link" in problem.message
    assert fired(bus) == "fine"  # never the linked file's content, never twice
    bus.read_runs()  # flush the recorder
    # Nothing is written through a link: the outside directory gets no state.json.
    assert not (tmp_path / "outside-dir" / "state.json").exists()


# -- the check is on what was opened, not on a path looked at before ----------------------


@pytest.mark.timeout(60)
def test_swapping_the_file_during_reloads_never_loads_what_was_not_checked(
    home: Path, tmp_path: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """A thread swaps hook.json among a safe file, a hard link to a world-writable file,
    and a symlink to a file outside, while the bus reloads: only the safe content ever
    loads, whichever moment the swap lands in."""
    path = write_stop_hook(write_hook, "x", "safe")
    safe, loose, outside = tmp_path / "safe.json", tmp_path / "loose.json", tmp_path / "outside.json"
    safe.write_text(stop_spec("safe"))
    loose.write_text(stop_spec("loose"))
    loose.chmod(0o666)
    outside.write_text(stop_spec("outside"))
    bus = make_bus()
    stop = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        temp = path.with_name(".swap.tmp")
        while not stop.is_set():
            kind = swaps % 3
            if kind == 0:
                os.link(safe, temp)
            elif kind == 1:
                os.link(loose, temp)
            else:
                os.symlink(outside, temp)
            os.replace(temp, path)
            swaps += 1

    seen = {"loaded": 0, "loose": 0, "link": 0}
    thread = threading.Thread(target=swap, name="swapper")
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while min(seen.values()) < 100 and time.monotonic() < deadline:
            snapshot = bus.reload()
            hook = snapshot.hooks.get("x")
            # A refused mode unloads the hook; a symlink keeps the last good (safe) version.
            assert hook is None or hook.spec.action == "echo safe", hook
            # The swapper's temp file (a loose hard link, at times) is refused too, while it
            # sits in the hook directory: a command could run any file there.
            messages = [p.message for p in snapshot.problems if p.hook_id == "x" and p.path.endswith("hook.json")]
            assert len(messages) <= 1, messages
            if not messages:
                seen["loaded"] += 1
            elif "symbolic link" in messages[0]:
                seen["link"] += 1
            else:
                assert "is writable by group and others (mode 0666)" in messages[0]
                seen["loose"] += 1
    finally:
        stop.set()
        thread.join()
    assert min(seen.values()) >= 100, f"the swaps did not interleave with the reloads: {seen}"
    os.link(safe, path.with_name(".swap.tmp"))
    os.replace(path.with_name(".swap.tmp"), path)
    bus.reload()
    assert fired(bus) == "safe"


# -- with the real watcher ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_hook_json_swapped_for_a_symlink_keeps_the_last_good_version(
    home: Path, tmp_path: Path, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x", "before")
    outside = tmp_path / "outside.json"
    outside.write_text(stop_spec("outside"))
    bus = make_bus(watch=True)
    assert fired(bus) == "before"
    temp = path.with_name(".hook.json.link")
    os.symlink(outside, temp)
    os.replace(temp, path)
    wait_for(bus, lambda: bool(problems_of(bus, "x")))
    assert path.is_symlink()
    [problem] = problems_of(bus, "x")
    assert problem.path == "hooks/x/hook.json"
    assert "is a symbolic link" in problem.message
    assert problem.kept_last_good
    assert str(problem).endswith("(its last good version stays in effect)")
    assert fired(bus) == "before"  # the outside file's content never fires
    # The link's target changing is no way in either.
    outside.write_text(stop_spec("outside-again"))
    bus.reload()
    assert fired(bus) == "before"
    # A real file again: it loads, and the problem is gone.
    atomic_write(path, stop_spec("after"))
    wait_for(bus, lambda: not problems_of(bus, "x") and fired(bus) == "after")


@pytest.mark.timeout(60)
def test_hook_directory_swapped_for_a_symlink_never_runs_the_outside_file(
    home: Path, tmp_path: Path, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x", "before")
    outside = tmp_path / "outside-dir"
    outside.mkdir()
    (outside / "hook.json").write_text(stop_spec("outside"))
    bus = make_bus(watch=True)
    assert fired(bus) == "before"
    temp = home / "hooks" / ".x.link"
    os.symlink(outside, temp)
    os.rename(path.parent, tmp_path / "old-x")
    os.rename(temp, path.parent)
    wait_for(bus, lambda: any("symbolic link" in p.message for p in problems_of(bus, "x")))
    [problem] = problems_of(bus, "x")
    assert problem.path == "hooks/x"
    assert fired(bus) != "outside"
    assert bus.snapshot.hooks.get("x") is None or bus.snapshot.hooks["x"].spec.action == "echo before"
    bus.read_runs()
    assert not (outside / "state.json").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", ["file", "dir"])
def test_chmod_alone_is_noticed_by_the_watcher(
    target: str, home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    path = write_stop_hook(write_hook, "x", "before")
    changed = path if target == "file" else path.parent
    safe_mode = 0o644 if target == "file" else 0o755
    bus = make_bus(watch=True)
    assert fired(bus) == "before"
    changed.chmod(safe_mode | 0o002)  # chmod o+w: no content changes, only the mode
    wait_for(bus, lambda: bool(problems_of(bus, "x")))
    [problem] = problems_of(bus, "x")
    assert problem.path == ("hooks/x/hook.json" if target == "file" else "hooks/x")
    assert f"run `chmod go-w {changed}`" in problem.message
    # While refused, what someone else writes into the file never loads.
    path.write_text(stop_spec("intruder"))
    bus.reload()
    assert problems_of(bus, "x")
    assert fired(bus) != "intruder"
    # chmod back: it loads again, as it is on disk now.
    changed.chmod(safe_mode)
    wait_for(bus, lambda: not problems_of(bus, "x"))
    assert fired(bus) == "intruder"


@pytest.mark.timeout(60)
def test_chmod_of_the_hooks_directory_is_noticed_by_the_watcher(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    write_stop_hook(write_hook, "x", "before")
    bus = make_bus(watch=True)
    assert fired(bus) == "before"
    (home / "hooks").chmod(0o775)
    wait_for(bus, lambda: bool(problems_of(bus, None)))
    [problem] = bus.problems
    assert problem.path == "hooks"
    assert f"chmod go-w {home / 'hooks'}`" in problem.message
    assert dict(bus.snapshot.hooks) == {}
    assert fired(bus) is None
    (home / "hooks").chmod(0o755)
    wait_for(bus, lambda: "x" in bus.snapshot.hooks)
    assert bus.problems == ()
    assert fired(bus) == "before"


# -- hookbus validate ---------------------------------------------------------------------


def run_validate(tmp_path: Path, home: Path, *ids: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIX_HOME", "VIX_DISABLE_HOOKS")}
    user_home = tmp_path / "user-home"
    user_home.mkdir(exist_ok=True)
    env["HOME"] = str(user_home)
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", *ids, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@needs_chown
@pytest.mark.timeout(120)
def test_validate_exits_1_and_prints_each_refusal(
    home: Path, tmp_path: Path, write_hook: Writer
) -> None:
    write_stop_hook(write_hook, "good")
    loose = write_stop_hook(write_hook, "loose")
    loose.chmod(0o664)
    loose_dir = write_stop_hook(write_hook, "loose-dir").parent
    loose_dir.chmod(0o757)
    foreign = write_stop_hook(write_hook, "foreign")
    os.chown(foreign, FOREIGN_UID, -1)
    link_outside_file(home, tmp_path)  # hooks/x/hook.json -> outside
    result = run_validate(tmp_path, home)
    assert result.returncode == 1, result
    assert "Traceback" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "ok  hooks/good" in lines
    assert not any(line.startswith("ok  hooks/") and line != "ok  hooks/good" for line in lines)

    def line_for(prefix: str) -> str:
        [line] = [line for line in lines if line.startswith(prefix)]
        return line

    assert f"run `chmod go-w {loose}`" in line_for("hooks/loose/hook.json: is writable by group (mode 0664)")
    assert f"run `chmod go-w {loose_dir}`" in line_for("hooks/loose-dir: is writable by others (mode 0757)")
    assert f"run `chown {ME} {foreign}`" in line_for(f"hooks/foreign/hook.json: is owned by uid {FOREIGN_UID}")
    assert "symbolic link" in line_for("hooks/x/hook.json: ")
    # Asking about the good hook alone succeeds; about a refused one fails.
    assert run_validate(tmp_path, home, "good").returncode == 0
    one = run_validate(tmp_path, home, "loose")
    assert one.returncode == 1
    assert one.stdout.startswith("hooks/loose/hook.json: is writable by group")


@pytest.mark.timeout(60)
def test_validate_reports_a_loose_hooks_directory(home: Path, tmp_path: Path, write_hook: Writer) -> None:
    write_stop_hook(write_hook, "good")
    (home / "hooks").chmod(0o777)
    result = run_validate(tmp_path, home)
    assert result.returncode == 1, result
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"hooks: is writable by group and others (mode 0777), who could then decide what runs "
        f"as you: run `chmod go-w {home / 'hooks'}` (or set \"hooks_strict_modes\": false in "
        f"settings.json); no hook is loaded from it",
        f"no valid hooks, 1 problem in {home / 'hooks'}",
    ]


# -- state.json ---------------------------------------------------------------------------


@needs_chown
def test_refusal_lands_in_state_json_and_clears_when_fixed(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    loose = write_stop_hook(write_hook, "loose")
    loose.chmod(0o666)
    loose_dir = write_stop_hook(write_hook, "loose-dir").parent
    loose_dir.chmod(0o775)
    foreign = write_stop_hook(write_hook, "foreign")
    os.chown(foreign, FOREIGN_UID, -1)
    write_stop_hook(write_hook, "good")
    bus = make_bus()
    bus.read_runs()  # flushes the recorder
    for hook_id, fragment in (
        ("loose", f"chmod go-w {loose}`"),
        ("loose-dir", f"chmod go-w {loose_dir}`"),
        ("foreign", f"chown {ME} {foreign}`"),
    ):
        state = read_state(home, hook_id)
        [problem] = problems_of(bus, hook_id)
        assert state["load_error"] == str(problem)
        assert state["last_error"] == state["load_error"]
        assert fragment in state["load_error"]
    assert not (home / "hooks" / "good" / "state.json").exists()
    # Fixed: the next load clears load_error and the last_error it set.
    loose.chmod(0o644)
    bus.reload()
    assert "loose" in bus.snapshot.hooks
    bus.read_runs()
    # It never fired: the error was all its state.json held, so the file goes with it.
    assert not (home / "hooks" / "loose" / "state.json").exists()


def test_symlinked_spec_refusal_lands_in_state_json(
    home: Path, tmp_path: Path, make_bus: Maker
) -> None:
    link_outside_file(home, tmp_path)
    bus = make_bus()
    bus.close()
    state = read_state(home, "x")
    assert "is a symbolic link" in state["load_error"]
    assert state["last_error"] == state["load_error"]
    assert (tmp_path / "outside.json").read_text() == stop_spec("outside")  # untouched


@pytest.mark.timeout(60)
def test_refusal_noticed_by_the_watcher_lands_in_state_json(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """A refused mode unloads the hook at once (its scripts may now be writable by others),
    and says why in state.json."""
    path = write_stop_hook(write_hook, "x", "before")
    bus = make_bus(watch=True)
    assert fired(bus) == "before"
    path.chmod(0o664)
    wait_for(bus, lambda: bool(problems_of(bus, "x")))
    assert "x" not in bus.snapshot.hooks
    assert fired(bus) is None
    bus.read_runs()
    state = read_state(home, "x")
    assert "is writable by group (mode 0664)" in state["load_error"]
    assert "last good version" not in state["load_error"]
    assert state["last_error"] == state["load_error"]
    path.chmod(0o644)
    wait_for(bus, lambda: fired(bus) == "before")
    bus.read_runs()
    assert "load_error" not in read_state(home, "x")

def test_relaxing_is_only_trusted_from_a_settings_file_that_passes_the_checks(
    home: Path, write_hook: Writer, make_bus: Maker
) -> None:
    """Whoever can write settings.json could otherwise switch the checks off."""
    set_settings(home, {"hooks_strict_modes": False})
    (home / "settings.json").chmod(0o666)
    write_stop_hook(write_hook, "x").chmod(0o664)
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    messages = [str(p) for p in bus.problems]
    assert any(
        m.startswith("settings.json: is writable by group and others (mode 0666)") and "it is ignored" in m
        for m in messages
    ), messages


def test_validate_shows_what_loads_only_because_the_checks_are_relaxed(
    tmp_path: Path, home: Path, write_hook: Writer
) -> None:
    set_settings(home, {"hooks_strict_modes": False})
    write_stop_hook(write_hook, "x").chmod(0o664)
    result = run_validate(tmp_path, home)
    assert result.returncode == 0
    assert "warning: hooks/x/hook.json is writable by group (mode 0664); loaded because" in result.stdout
    assert "ok  hooks/x" in result.stdout
