"""hookbus.policy.homeguard: which tool calls write into the hookbus home or the managed
directory, on a real tree under tmp_path (a real home with a hook in it, a real link to it,
a real managed directory, a sibling that only shares the home's prefix).

Each case is a template: ``<base>``, ``<home>`` and ``<managed>`` become the tree's paths
(not str.format: shell commands are full of braces). ``expect`` is a piece of the phrase
``check`` returns, or None for a call it lets through.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from hookbus.policy.homeguard import MAX_DEPTH, MAX_PATHS, MAX_WORDS, HomeGuard, ProtectedPlace

HOME_LABEL = "the hookbus home"
MANAGED_LABEL = "the managed directory"
IN_HOME = f"inside {HOME_LABEL}"
IN_MANAGED = f"inside {MANAGED_LABEL}"
CANNOT = "cannot check"


@attrs.frozen
class World:
    base: Path
    home: Path
    managed: Path
    guard: HomeGuard

    def fill(self, template: str) -> str:
        return (
            template.replace("<home>", str(self.home))
            .replace("<managed>", str(self.managed))
            .replace("<base>", str(self.base))
        )

    def check(self, tool: str, tool_input: Any, cwd: str | None = "<base>/work") -> str | None:
        envelope: dict[str, Any] = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}
        if cwd is not None:
            envelope["cwd"] = self.fill(cwd)
        return self.guard.check(envelope)


def make_places(home: Path, managed: Path) -> list[ProtectedPlace]:
    return [
        ProtectedPlace(HOME_LABEL, str(home), ("VIX_HOME",), ("~/.vix", "$HOME/.vix", "${HOME}/.vix")),
        ProtectedPlace(MANAGED_LABEL, str(managed), ("HOOKBUS_MANAGED_DIR",)),
    ]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    base = tmp_path.resolve()
    user = base / "root"  # the user's home directory: $HOME
    home = user / ".vix"
    (home / "hooks" / "x").mkdir(parents=True)
    (home / "hooks" / "x" / "hook.json").write_text("{}")
    (home / "linkout").symlink_to(base / "work", target_is_directory=True)  # a link out of the home
    (user / ".vix-other").mkdir()
    (user / "x").mkdir()
    managed = base / "etc" / "vix"
    (managed / "policy").mkdir(parents=True)
    (base / "etc" / "x").mkdir()
    (base / "work").mkdir()
    (base / "tmp").mkdir()
    (base / "tmp" / "link").symlink_to(home, target_is_directory=True)
    (base / "tmp" / "managed-link").symlink_to(managed, target_is_directory=True)
    (base / "tmp" / "dangling").symlink_to(home / "hooks" / "new" / "hook.json")
    monkeypatch.setenv("HOME", str(user))
    return World(base, home, managed, HomeGuard(make_places(home, managed)))


# -- write_file / edit_file ------------------------------------------------------------------

TARGETS = [
    pytest.param("write_file", "<home>/hooks/x/hook.json", "<base>/work", IN_HOME, id="inside"),
    pytest.param("edit_file", "<home>/hooks/x/hook.json", "<base>/work", IN_HOME, id="edit-inside"),
    pytest.param("write_file", "<home>", "<base>/work", IN_HOME, id="the-home-itself"),
    pytest.param("write_file", "<home>/", "<base>/work", IN_HOME, id="trailing-slash"),
    pytest.param("write_file", "<home>//hooks///x/./hook.json", "<base>/work", IN_HOME, id="extra-slashes"),
    pytest.param("write_file", "<home>/hooks/new/deep/hook.json", "<base>/work", IN_HOME, id="not-yet-existing"),
    pytest.param("write_file", "<base>/work/notes.txt", "<base>/work", None, id="outside"),
    pytest.param("edit_file", "<base>/root/notes.txt", "<base>/work", None, id="beside-the-home"),
    pytest.param("write_file", "<base>/root/.vix-other/hook.json", "<base>/work", None, id="prefix-sibling"),
    pytest.param("write_file", "<base>/root/.vixen", "<base>/work", None, id="prefix-file"),
    pytest.param("write_file", "<base>/tmp/link/hooks/y/hook.json", "<base>/work", "which is <home>/hooks/y/hook.json", id="through-symlinked-dir"),
    pytest.param("write_file", "<base>/tmp/dangling", "<base>/work", IN_HOME, id="dangling-link-into-home"),
    pytest.param("write_file", "<home>/linkout/x", "<base>/work", IN_HOME, id="link-out-of-home-as-named"),
    pytest.param("write_file", "<base>/root/x/../.vix/hooks/a/hook.json", "<base>/work", IN_HOME, id="dotdot-into"),
    pytest.param("write_file", "<home>/hooks/../../notes.txt", "<base>/work", None, id="dotdot-out"),
    pytest.param("write_file", "<home>/../.vix-other/x", "<base>/work", None, id="dotdot-to-sibling"),
    # The kernel reads .. after a link from the link's target: <base>/tmp/link/.. is <base>/root.
    pytest.param("write_file", "<base>/tmp/link/../.vix/hooks/a", "<base>/work", IN_HOME, id="dotdot-after-link"),
    pytest.param("write_file", "<base>/tmp/link/../x/notes", "<base>/work", None, id="dotdot-after-link-out"),
    pytest.param("write_file", "hooks/a/hook.json", "<home>", IN_HOME, id="relative-in-home"),
    pytest.param("write_file", ".vix/hooks/a/hook.json", "<base>/root", IN_HOME, id="relative-from-user-home"),
    pytest.param("write_file", "../root/.vix/hooks/a", "<base>/work", IN_HOME, id="relative-dotdot"),
    pytest.param("write_file", "notes.txt", "<base>/work", None, id="relative-outside"),
    pytest.param("write_file", "~/.vix/hooks/a/hook.json", "<base>/work", IN_HOME, id="tilde"),
    pytest.param("write_file", "~root-does-not-exist/.vix", "<base>/work", None, id="tilde-unknown-user"),
    pytest.param("write_file", "~/notes.txt", "<base>/work", None, id="tilde-outside"),
    pytest.param("write_file", "<managed>/policy/p.json", "<base>/work", IN_MANAGED, id="managed"),
    pytest.param("write_file", "<base>/tmp/managed-link/p.json", "<base>/work", IN_MANAGED, id="managed-through-link"),
    pytest.param("write_file", "<base>/etc/vix2/p.json", "<base>/work", None, id="managed-prefix-sibling"),
    pytest.param("write_file", "<home>/hooks/a\0/hook.json", "<base>/work", "NUL byte", id="nul-byte"),
    pytest.param("Write", "<home>/hooks/a/hook.json", "<base>/work", IN_HOME, id="claude-Write"),
    pytest.param("Edit", "<home>/hooks/x/hook.json", "<base>/work", IN_HOME, id="claude-Edit"),
    pytest.param("MultiEdit", "<home>/hooks/x/hook.json", "<base>/work", IN_HOME, id="claude-MultiEdit"),
    pytest.param("NotebookEdit", "<home>/hooks/x/n.ipynb", "<base>/work", IN_HOME, id="claude-NotebookEdit"),
    pytest.param("Write", "<base>/work/notes.txt", "<base>/work", None, id="claude-Write-outside"),
]
FIELD = {"write_file": "path", "edit_file": "path", "Write": "file_path", "Edit": "file_path",
         "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}  # fmt: skip


@pytest.mark.parametrize(("tool", "target", "cwd", "expect"), TARGETS)
def test_write_targets(world: World, tool: str, target: str, cwd: str, expect: str | None) -> None:
    phrase = world.check(tool, {FIELD[tool]: world.fill(target), "content": "x"}, cwd)
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase
        assert phrase.startswith(tool)


def test_phrase_names_target_and_place(world: World) -> None:
    target = f"{world.home}/hooks/x/hook.json"
    assert world.check("write_file", {"path": target}) == f"write_file targets {target}, inside {HOME_LABEL} {world.home}"


def test_relative_target_without_cwd_reads_this_process_directory(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(world.home)
    assert IN_HOME in (world.check("write_file", {"path": "hooks/a/hook.json"}, cwd=None) or "")
    # A cwd that is not absolute is no working directory either.
    assert IN_HOME in (world.check("write_file", {"path": "hooks/a/hook.json"}, cwd="work") or "")
    monkeypatch.chdir(world.base / "work")
    assert world.check("write_file", {"path": "hooks/a/hook.json"}, cwd=None) is None


@pytest.mark.parametrize(
    ("tool", "tool_input", "expect"),
    [
        pytest.param("write_file", {"path": 42}, "path is a number", id="number"),
        pytest.param("write_file", {"path": ["/x"]}, "path is a list", id="list"),
        pytest.param("edit_file", {"path": None}, "path is null", id="null"),
        pytest.param("Write", {"file_path": {"p": 1}}, "file_path is an object", id="object"),
        pytest.param("bash", {"command": ["rm", "-rf", "/"]}, "command is a list", id="command-list"),
        pytest.param("Bash", {"command": 7}, "command is a number", id="command-number"),
        pytest.param("write_file", "/tmp/x", "input is a string", id="input-string"),
        pytest.param("bash", ["ls"], "input is a list", id="input-list"),
        pytest.param("edit_file", None, "input is null", id="input-null"),
        pytest.param("write_file", {"content": "x"}, None, id="path-absent"),
        pytest.param("bash", {"description": "x"}, None, id="command-absent"),
        pytest.param("Write", {"path": "/x"}, None, id="claude-name-vixd-field"),
    ],
)
def test_inputs_it_cannot_read(world: World, tool: str, tool_input: Any, expect: str | None) -> None:
    phrase = world.check(tool, tool_input)
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and expect in phrase and CANNOT in phrase, phrase


def test_absent_input_is_left_alone(world: World) -> None:
    assert world.guard.check({"tool_name": "write_file"}) is None
    assert world.guard.check({"tool_name": "bash", "cwd": str(world.base / "work")}) is None


# -- /proc, read as the writer reads it (issue #28, item 3) --------------------------------------


@pytest.fixture
def elsewhere(world: World, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process works somewhere else than the writer, as a server does: its own
    /proc/self/cwd must not stand for the writer's."""
    directory = world.base / "elsewhere"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


PROC_TARGETS = [
    pytest.param("/proc/self/cwd/.vix/hooks/a/hook.json", "<base>/root", IN_HOME, id="self-cwd"),
    pytest.param("/proc/self/cwd/../root/.vix/hooks/a/hook.json", "<base>/work", IN_HOME, id="self-cwd-dotdot"),
    pytest.param("/proc/thread-self/cwd/../root/.vix/hooks/a", "<base>/work", IN_HOME, id="thread-self-cwd"),
    pytest.param("/proc/self/./cwd/../root/.vix/x", "<base>/work", IN_HOME, id="self-dot-cwd"),
    pytest.param("/proc/self/root<home>/hooks/a/hook.json", "<base>/work", IN_HOME, id="self-root"),
    pytest.param("/proc/self/cwd/notes.txt", "<base>/work", None, id="self-cwd-outside"),
    pytest.param("/proc/self/cwd/hooks/a", "<base>/work", None, id="not-this-process-cwd"),
    pytest.param("<base>/work/proclink/root/.vix/hooks/a", "<base>/work", IN_HOME, id="a-link-to-proc-self"),
    pytest.param("/proc/1/cwd/x", "<base>/work", "as the writer would", id="another-process"),
    pytest.param(f"/proc/{os.getpid()}/cwd/x", "<base>/work", "as the writer would", id="this-process-by-pid"),
    pytest.param("/proc/self/fd/3", "<base>/work", "as the writer would", id="a-descriptor"),
    pytest.param("/dev/stdout", "<base>/work", "as the writer would", id="dev-stdout"),
    pytest.param("/dev/fd/1", "<base>/work", "as the writer would", id="dev-fd"),
    pytest.param("/proc/self/map_files/x", "<base>/work", "as the writer would", id="map-files"),
    pytest.param("/proc/sys/kernel/hostname", "<base>/work", None, id="procfs-file"),
    pytest.param("/proc/self/status", "<base>/work", None, id="own-procfs-file"),
]


@pytest.mark.parametrize(("target", "cwd", "expect"), PROC_TARGETS)
def test_proc_paths_are_read_as_the_writer_reads_them(world: World, elsewhere: Path, target: str, cwd: str, expect: str | None) -> None:
    (world.home / "hooks").mkdir(exist_ok=True)
    (elsewhere / "hooks").mkdir()  # what /proc/self/cwd/hooks would be in this process
    (world.base / "work" / "proclink").symlink_to("/proc/self/cwd/..")
    phrase = world.check("write_file", {"path": world.fill(target)}, cwd)
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase


def test_proc_self_cwd_without_a_working_directory_is_refused(world: World, elsewhere: Path) -> None:
    phrase = world.check("write_file", {"path": "/proc/self/cwd/x"}, None)
    assert phrase is not None and "working directory, which is unknown" in phrase


@pytest.mark.timeout(30)
@pytest.mark.parametrize("cwd", ["/proc/self/cwd", "/proc/thread-self/cwd/x/..", "/proc/self/cwd/../proc/self/cwd"])
@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [("write_file", {"path": "x"}), ("bash", {"command": "touch x"}), ("bash", {"command": "ls"}), ("write_file", {"path": "/proc/self/cwd/x"})],
)
def test_a_working_directory_that_is_its_own_link_is_decided_at_once(world: World, cwd: str, tool: str, tool_input: dict[str, str]) -> None:
    """A host's cwd that leads back to itself through /proc/self/cwd is a loop of links, as
    the kernel counts them: the guard decides (a write is refused as unreadable), it never
    walks for ever on the emitting thread."""
    phrase = world.check(tool, tool_input, cwd)
    if tool_input != {"command": "ls"}:
        assert phrase is not None


@pytest.mark.parametrize(
    ("command", "cwd", "expect"),
    [
        pytest.param("touch /proc/self/cwd/../root/.vix/hooks/a", "<base>/work", IN_HOME, id="self-cwd"),
        pytest.param("cd -P /proc/self/cwd/.. && touch root/.vix/hooks/a", "<base>/work", IN_HOME, id="cd-self-cwd"),
        pytest.param("cd /proc/self/cwd/.. && touch root/.vix/hooks/a", "<base>/work", None, id="cd-logical-self-is-the-shell-process"),
        pytest.param("cd <base>/root && echo x > /proc/self/cwd/.vix/hooks/a", "<base>/work", IN_HOME, id="after-cd"),
        pytest.param("touch /proc/self/cwd/hooks/a", "<base>/work", None, id="not-this-process-cwd"),
        pytest.param("echo x > /dev/stdout; echo y > /dev/stderr 2>&1; echo z > /proc/self/fd/1", "<base>/work", None, id="own-streams"),
        pytest.param("echo x > /dev/fd/5", "<base>/work", "as the writer would", id="a-descriptor"),
        pytest.param("touch /proc/1/cwd/x", "<base>/work", "as the writer would", id="another-process"),
        pytest.param("touch /proc/$$/cwd/x", "<base>/work", "/proc path built at run time", id="a-pid-built-at-run-time"),
        pytest.param("cat /proc/1/cwd/x /proc/self/cwd/../root/.vix/settings.json", "<base>/work", None, id="reads"),
    ],
)
def test_bash_proc_paths(world: World, elsewhere: Path, command: str, cwd: str, expect: str | None) -> None:
    (elsewhere / "hooks").mkdir()
    phrase = world.check("bash", {"command": world.fill(command)}, cwd)
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase


# -- bash: writes, in every spelling --------------------------------------------------------------

WRITES = [
    # The place's path, whole.
    pytest.param("cat > <home>/hooks/x/hook.json", f"redirects output to <home>/hooks/x/hook.json, {IN_HOME} <home>", id="redirect"),
    pytest.param('cp x "<home>/hooks/a/hook.json"', IN_HOME, id="double-quoted"),
    pytest.param("echo x ><home>/hooks/a/hook.json", IN_HOME, id="redirect-glued"),
    pytest.param("hookbus new x --event PreToolUse --dir=<home>/hooks", IN_HOME, id="option-value"),
    pytest.param("touch <home>*", f"which is <home>, {IN_HOME}", id="glob-after"),
    pytest.param("cd <home>; touch x", f"runs `touch` in <home>, {IN_HOME}", id="cd-semicolon"),
    pytest.param("rm -r <home>", IN_HOME, id="the-home-itself"),
    pytest.param("touch <managed>/policy/x", f"{IN_MANAGED} <managed>", id="managed-absolute"),
    pytest.param("touch /x<managed>", None, id="managed-inside-longer-path"),
    pytest.param("touch <managed>2 <managed>-old <managed>.bak <managed>é", None, id="managed-prefix-siblings"),
    # Spellings.
    pytest.param("mkdir -p ~/.vix/hooks/evil", f"mkdir`, which writes ~/.vix/hooks/evil, which is <home>/hooks/evil, {IN_HOME}", id="tilde"),
    pytest.param("cp x $HOME/.vix/hooks/a/hook.json", IN_HOME, id="HOME"),
    pytest.param("cp x ${HOME}/.vix/hooks/a/hook.json", IN_HOME, id="HOME-braced"),
    pytest.param('echo {} > "$VIX_HOME/hooks/a/hook.json"', IN_HOME, id="VIX_HOME"),
    pytest.param("cd ${VIX_HOME} && touch a", IN_HOME, id="VIX_HOME-braced"),
    pytest.param("touch ${VIX_HOME:-/tmp}/a", IN_HOME, id="VIX_HOME-default"),
    pytest.param("touch $HOOKBUS_MANAGED_DIR/x", IN_MANAGED, id="HOOKBUS_MANAGED_DIR"),
    pytest.param("touch $VIX_HOMEDIR $VIX_HOME_2 ${VIX_HOMES}", None, id="longer-variable-names"),
    pytest.param("cp x ~/'.vix'/hooks/a/hook.json", IN_HOME, id="single-quoted-part"),
    pytest.param('cp x "$HOME"/.vix/hooks/a', IN_HOME, id="quoted-HOME"),
    pytest.param("cp x <base>/root/.v\\ix/hooks/a", IN_HOME, id="backslash"),
    pytest.param("cp x <base>/etc/v''ix/a", IN_MANAGED, id="empty-quotes-in-managed"),
    pytest.param("cp x ~/$'\\x2evix'/hooks/a", IN_HOME, id="ansi-c"),
    pytest.param("cp x '~/.vix/hooks/a'", None, id="a-quoted-tilde-is-a-directory-named-tilde"),
    # Relative, after a cd.
    pytest.param("cd ~ && echo x > .vix/hooks/a/hook.json", IN_HOME, id="relative-after-cd-home"),
    pytest.param("cd ~ && cd .vix && touch a", IN_HOME, id="cd-dot-name"),
    pytest.param("cd ~ && cd .v'i'x && touch a", IN_HOME, id="cd-dot-name-quoted"),
    pytest.param("touch ~/.vix-other ~/.vixrc .vixrc .vix-other ~/.vix.bak", None, id="prefix-siblings"),
    pytest.param("touch <base>/root/.vix-other/x <base>/root/.vixen", None, id="prefix-siblings-absolute"),
    # Links and ..
    pytest.param("cp x <base>/tmp/link/hooks/a/hook.json", "which is <home>/hooks/a/hook.json", id="symlink"),
    pytest.param("cp x '<base>/tmp/link'/hooks/a", "which is <home>/hooks/a", id="symlink-quoted"),
    pytest.param("touch <base>/tmp/managed-link", f"which is <managed>, {IN_MANAGED}", id="symlink-managed"),
    pytest.param("touch <base>/etc/x/../vix/policy", IN_MANAGED, id="dotdot"),
    pytest.param("cd ../etc/vix && touch x", IN_MANAGED, id="relative-dotdot-cd"),
    pytest.param("tar -C<base>/tmp/link -xf x.tar", IN_HOME, id="short-option-value"),
    pytest.param("hookbus new x --event PreToolUse --dir=<base>/tmp/link", IN_HOME, id="long-option-value"),
    pytest.param("touch <home>/linkout/x", IN_HOME, id="through-a-link-inside-the-home"),
    # Globs and braces.
    pytest.param("touch ~/.v*", f"which is <home>, {IN_HOME}", id="glob"),
    pytest.param("touch <base>/root/.{vix,x}/hooks", f"which is <home>/hooks, {IN_HOME}", id="brace"),
    pytest.param("touch <base>/etc/v?x", f"which is <managed>, {IN_MANAGED}", id="glob-managed"),
    pytest.param("shopt -s dotglob; cp x ~/*/hooks/a", f"which is <home>/hooks/a, {IN_HOME}", id="dotglob"),
    pytest.param("cp x <base>/tmp/l*/hooks/", f"which is <home>/hooks, {IN_HOME}", id="glob-through-a-link"),
    pytest.param("touch <base>/root/.v*/hooks/new/hook.json", IN_HOME, id="glob-then-a-new-file"),
    pytest.param("touch <base>/nothing-here/.v*", None, id="glob-matching-nothing"),
    pytest.param("touch <base>/nothing-here/../root/.v?x/x", IN_HOME, id="glob-after-dotdot"),
    pytest.param("touch ~/* <base>/etc/x* && mkdir -p {a,b}/x", None, id="globs-elsewhere"),
    # Recursive writes into what holds a place.
    pytest.param("cp -r stage/. ~", f"which holds {HOME_LABEL}", id="cp-r-into-the-user-home"),
    pytest.param("rm -rf <base>/root; chmod -R go-w /", None, id="a-wholesale-delete-above-is-left-to-hooks"),
    pytest.param("rm -rf <base>/root/.vix", IN_HOME, id="rm-rf-the-home"),
    pytest.param("find <base>/root -name hook.json -delete", f"which holds {HOME_LABEL}", id="find-delete-above"),
    pytest.param("rsync -a stage/ <base>/root/", f"which holds {HOME_LABEL}", id="rsync-above"),
    pytest.param("unzip -q x.zip -d <base>", f"which holds {HOME_LABEL}", id="unzip-above"),
    pytest.param("tar -xf x.tar -C ~", f"which holds {HOME_LABEL}", id="tar-into-the-user-home"),
    pytest.param("rm -rf <base>/work/build && cp -r src <base>/work/out", None, id="recursive-elsewhere"),
    # Hard links.
    pytest.param("ln <home>/hooks/x/hook.json <base>/work/alias", IN_HOME, id="hard-link-of-a-hook"),
    pytest.param("ln -s <home>/hooks/x/hook.json <base>/work/alias", None, id="a-symbolic-link-to-a-hook-is-no-write"),
    pytest.param("echo x > <base>/work/hardlinked", "hard link", id="writing-a-hard-linked-file"),
    pytest.param("", None, id="empty"),
    pytest.param("ls /tmp/a\0b", "NUL byte", id="nul-byte"),
]


@pytest.mark.parametrize(("command", "expect"), WRITES)
def test_bash_writes(world: World, command: str, expect: str | None) -> None:
    if "hardlinked" in command:
        os.link(world.home / "hooks" / "x" / "hook.json", world.base / "work" / "hardlinked")
    phrase = world.check("bash", {"command": world.fill(command)})
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase
        assert phrase.startswith("the bash command")


# -- bash: reads go through (issue #28, item 6) --------------------------------------------------

READS = [
    "ls ~/.vix <home> $VIX_HOME && cat <home>/hooks/x/hook.json",
    "grep -rn deny <managed> ~/.vix; find ~/.vix -name '*.json'",
    "jq . <home>/hooks/x/hook.json | head -3",
    "echo $VIX_HOME ${VIX_HOME} ~/.vix; printf '%s\\n' <home>",
    'git commit -m "fix .vix docs" && git log -- ~/.vix',
    "grep '\\.vix' -r src; find . -name '*.vix*'",
    "hookbus list; hookbus validate; hookbus log --since 1h; hookbus explain PreToolUse --input <home>/hooks/x/envelope.json",
    "hookbus new x --event PreToolUse --dir ~/drafts",
    "cd <home> && ls && cat hooks/x/hook.json",
    "cd <base>/tmp/link && wc -l hooks/x/hook.json",
    "diff <home>/hooks/x/hook.json <base>/work/x; cmp a b; stat ~/.vix; du -sh ~/.vix",
    "test -d ~/.vix && [ -f <home>/hooks/x/hook.json ] && echo yes",
    "cat <home>/hooks/x/hook.json > <base>/work/copy.json 2>/dev/null",
    "cp <home>/hooks/x/hook.json <base>/work/backup.json",
    "tar -czf <base>/work/home.tgz -C <base>/root .vix",
    "sed -n 1p <home>/hooks/x/hook.json; awk '{print $1}' <home>/hooks/x/hook.json; sort <home>/hooks/x/hook.json",
    "find <home> -name hook.json -exec cat {} \\; ; find <home> -type f | xargs grep -l deny",
    "echo 'echo x > ~/.vix/hooks/a' # > ~/.vix/hooks/b",
    "cat <<'EOF'\\nrm -rf ~/.vix\\nEOF",
    "realpath ~/.vix; readlink -f <base>/tmp/link; git status; git diff ~/.vix",
]


@pytest.mark.parametrize("command", [pytest.param(command, id=f"read-{number}") for number, command in enumerate(READS)])
def test_bash_reads_are_allowed(world: World, command: str) -> None:
    assert world.check("bash", {"command": world.fill(command).replace("\\\\n", "\\n")}) is None


def test_readers_may_run_inside_the_home_but_nothing_else_may(world: World) -> None:
    for command in ("ls -la", "cat hooks/x/hook.json | jq .", "grep -r x .", "git log"):
        assert world.check("bash", {"command": command}, "<home>") is None, command
    for command in ("touch a", "make", "python3 build.py", "npm install", "git commit -m x"):
        phrase = world.check("bash", {"command": command}, "<home>/hooks/x")
        assert phrase is not None and world.fill(f"in <home>/hooks/x, {IN_HOME}") in phrase, (command, phrase)


@pytest.mark.parametrize(
    ("cwd", "expect"),
    [
        pytest.param("<home>", f"runs `touch` in <home>, {IN_HOME}", id="home"),
        pytest.param("<home>/hooks/x", f"runs `touch` in <home>/hooks/x, {IN_HOME}", id="below-home"),
        pytest.param("<base>/tmp/link/hooks", IN_HOME, id="through-link"),
        pytest.param("<managed>/policy", IN_MANAGED, id="managed"),
        pytest.param("<base>/root", None, id="above-home"),
        pytest.param("<base>/root/.vix-other", None, id="prefix-sibling"),
    ],
)
def test_bash_working_directory(world: World, cwd: str, expect: str | None) -> None:
    phrase = world.check("bash", {"command": "touch notes"}, cwd)
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase


@pytest.mark.parametrize(
    ("cwd", "command", "expect"),
    [
        pytest.param("<base>/tmp", "cp x link/hooks/a/hook.json", IN_HOME, id="relative-link"),
        pytest.param("<base>/tmp", "cp x $PWD/link/hooks/a", IN_HOME, id="PWD"),
        pytest.param("<base>/tmp", "cp x ${PWD}/link/hooks/a", IN_HOME, id="PWD-braced"),
        pytest.param("<base>/tmp", "cp x ~+/link/hooks/a", IN_HOME, id="tilde-plus"),
        pytest.param("<base>/work", "cp x $PWD/link/hooks/a ~+/link", None, id="PWD-elsewhere"),
        pytest.param("<base>/work", "cp x ~root-does-not-exist/link", None, id="tilde-unknown-user"),
    ],
)
def test_bash_words_read_against_the_working_directory(world: World, cwd: str, command: str, expect: str | None) -> None:
    phrase = world.check("bash", {"command": command}, cwd)
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and expect in phrase, phrase


# -- bash: cd into a link is followed (issue #28, item 4) -----------------------------------------

CDS = [
    pytest.param("cd link && touch hooks/p/hook.json", IN_HOME, id="and"),
    pytest.param("cd link; touch hooks/p/hook.json", IN_HOME, id="semicolon"),
    pytest.param("cd link\ntouch hooks/p/hook.json", IN_HOME, id="newline"),
    pytest.param("(cd link && touch hooks/p/hook.json)", IN_HOME, id="subshell"),
    pytest.param("cd -P link && touch hooks/p/hook.json", IN_HOME, id="physical"),
    pytest.param("cd -L link/.. && touch settings.json", None, id="logical-dotdot-leaves-the-link"),
    pytest.param("cd link/hooks/.. && touch settings.json", IN_HOME, id="logical-dotdot-stays-in-the-link"),
    pytest.param("cd -P link/hooks/.. && touch settings.json", IN_HOME, id="physical-dotdot-stays"),
    pytest.param('cd "$HOME"/.vix && touch x', IN_HOME, id="quoted-HOME"),
    pytest.param("cd && cd .vix && touch x", IN_HOME, id="cd-alone-goes-home"),
    pytest.param("pushd link >/dev/null && touch x", IN_HOME, id="pushd"),
    pytest.param("pushd link; popd; touch x", IN_HOME, id="popd-may-return-anywhere-seen"),
    pytest.param("CDPATH=<base>/tmp cd link && touch x", IN_HOME, id="CDPATH"),
    pytest.param("(cd link); touch hooks/p/hook.json", None, id="a-subshell-cd-ends-with-it"),
    pytest.param("cd link | true; touch hooks/p/hook.json", None, id="a-pipeline-cd-ends-with-it"),
    pytest.param("cd link && cd <base>/work; touch hooks/p/hook.json", IN_HOME, id="a-failed-cd-leaves-the-old"),
    pytest.param("cd /nonexistent; touch ../root/.vix/x", IN_HOME, id="a-cd-that-fails"),
    pytest.param('cd "$SOMEWHERE" && touch x', "cannot tell", id="an-unknown-cd-then-a-write"),
    pytest.param('cd "$(git rev-parse --show-toplevel)" && touch x', "cannot tell", id="a-substitution-cd-then-a-write"),
    pytest.param('cd "$SOMEWHERE" && ls -la && cat x', None, id="an-unknown-cd-then-reads"),
    pytest.param('cd "$SOMEWHERE" && make', None, id="an-unknown-cd-then-a-program-without-paths"),
    pytest.param("for d in a b; do cd $d; touch x; done", "cannot tell", id="a-cd-in-a-loop"),
    pytest.param("cd link; cd hooks; touch p/hook.json", IN_HOME, id="two-cds"),
    pytest.param("cd <base>/work && touch x", None, id="elsewhere"),
]


@pytest.mark.parametrize(("command", "expect"), CDS)
def test_bash_cd_is_followed(world: World, command: str, expect: str | None) -> None:
    phrase = world.check("bash", {"command": world.fill(command)}, "<base>/tmp")
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase


# -- bash: comments, quotes and here-documents (issue #28, item 5) --------------------------------

SYNTAX = [
    pytest.param("hookbus new x --event PreToolUse # --dir /tmp/d", "without --dir", id="dir-in-a-comment"),
    pytest.param("hookbus new x --event PreToolUse --dir /tmp/d", None, id="dir"),
    pytest.param("hookbus new x --event PreToolUse --di /tmp/d", None, id="dir-abbreviated"),
    pytest.param("hookbus new x --event PreToolUse '--dir' /tmp/d", None, id="dir-quoted"),
    pytest.param("hookbus new x --event PreToolUse --dir=", None, id="dir-empty-is-the-cwd"),
    pytest.param("cd <home>/hooks && hookbus new x --event PreToolUse --dir=", IN_HOME, id="dir-empty-in-the-home"),
    pytest.param("echo 'a # b' > <base>/work/f", None, id="hash-in-quotes"),
    pytest.param("echo a#b > <home>/x", IN_HOME, id="hash-inside-a-word"),
    pytest.param("touch <home>/x # a comment", IN_HOME, id="write-before-a-comment"),
    pytest.param("ls # ; touch <home>/x", None, id="write-in-a-comment"),
    pytest.param("ls #\ntouch <home>/x", IN_HOME, id="a-comment-ends-at-the-line"),
    pytest.param("echo x;#\ntouch <home>/x", IN_HOME, id="a-comment-after-an-operator"),
    pytest.param("echo '# not a comment' \"$(touch <home>/x)\"", IN_HOME, id="substitution-in-double-quotes"),
    pytest.param("echo '$(touch <home>/x)'", None, id="substitution-in-single-quotes"),
    pytest.param("cat <<EOF > <base>/work/f\ntouch <home>/x\nEOF", None, id="heredoc-is-data"),
    pytest.param("cat <<EOF\n$(touch <home>/x)\nEOF", IN_HOME, id="heredoc-runs-substitutions"),
    pytest.param("cat <<'EOF'\n$(touch <home>/x)\nEOF", None, id="quoted-heredoc-is-literal"),
    pytest.param("cat <<-EOF\n\t$(touch <home>/x)\n\tEOF\ntouch <home>/y", IN_HOME, id="heredoc-tabs"),
    pytest.param("cat <<EOF\nEOF\ntouch <home>/x", IN_HOME, id="after-a-heredoc"),
    pytest.param("cat <<A <<B\na\nA\nb\nB\ntouch <home>/x", IN_HOME, id="two-heredocs"),
    pytest.param("echo \\# > <home>/x", IN_HOME, id="escaped-hash"),
    pytest.param("echo x \\\n> <home>/x", IN_HOME, id="line-continuation"),
    pytest.param("echo $((1<<2))\ntouch <home>/x", IN_HOME, id="arithmetic-is-no-heredoc"),
    pytest.param("[[ a < b ]] && echo ok", None, id="comparison-in-double-brackets-is-no-redirection"),
    pytest.param("case x in x) touch <home>/x;; esac", IN_HOME, id="case"),
    pytest.param("echo 'unbalanced", "cannot be checked", id="unbalanced-quote"),
    pytest.param("echo \"$(", "cannot be checked", id="unclosed-substitution"),
]


@pytest.mark.parametrize(("command", "expect"), SYNTAX)
def test_bash_is_read_as_bash_reads_it(world: World, command: str, expect: str | None) -> None:
    phrase = world.check("bash", {"command": world.fill(command)})
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase


def test_claude_bash(world: World) -> None:
    assert IN_HOME in (world.check("Bash", {"command": f"cp x {world.base}/tmp/link/hooks"}) or "")
    assert world.check("Bash", {"command": "git status"}) is None


def test_too_many_paths(world: World) -> None:
    many = "touch " + " ".join(f"/tmp/p{i}" for i in range(MAX_PATHS + 1))
    assert f"more than {MAX_PATHS} paths" in (world.check("bash", {"command": many}) or "")
    assert world.check("bash", {"command": "touch " + " ".join(f"/tmp/p{i}" for i in range(MAX_PATHS - 1))}) is None
    repeated = "ls /tmp/p; " * (MAX_WORDS // 2)
    assert f"more than {MAX_WORDS} words" in (world.check("bash", {"command": repeated}) or "")
    assert world.check("bash", {"command": "ls /tmp/p; " * (MAX_WORDS // 4)}) is None


FIVE_MB = 5 * 1024 * 1024
TOO_MANY = "cannot be checked"


@pytest.mark.parametrize(
    ("shape", "tail", "expect"),
    [
        pytest.param("a ", "", f"more than {MAX_WORDS} words", id="words"),
        pytest.param("a", "", None, id="one-word"),
        pytest.param(";", "", TOO_MANY, id="separators"),
        pytest.param("\n", "", TOO_MANY, id="newlines"),
        pytest.param("$", "", TOO_MANY, id="dollars"),
        pytest.param("/", "", None, id="slashes"),
        pytest.param(".vi", "", None, id="near-name"),
        pytest.param("'\"\\", "", TOO_MANY, id="quotes"),
        pytest.param("a=b ", "", TOO_MANY, id="assignments"),
        pytest.param("~b ", "", TOO_MANY, id="tildes"),
        pytest.param("~", "", None, id="one-tilde-word"),
        pytest.param("$(", "", f"more than {MAX_DEPTH} deep", id="substitutions"),
        pytest.param("$((", "", f"more than {MAX_DEPTH} deep", id="arithmetic"),
        pytest.param("${a:-", "", f"more than {MAX_DEPTH} deep", id="parameters"),
        pytest.param("`", "", TOO_MANY, id="backticks"),
        pytest.param("a", " > <home>/hooks/a/hook.json", IN_HOME, id="home-at-end"),
        pytest.param("a", " <base>/tmp/link/hooks", None, id="read-of-link-at-end"),
        pytest.param("/tmp/x ", "", TOO_MANY, id="paths"),
    ],
)
def test_five_megabyte_command(world: World, shape: str, tail: str, expect: str | None) -> None:
    # Completes (in a fraction of a second); the time is not asserted.
    command = "echo " + shape * (FIVE_MB // len(shape)) + world.fill(tail)
    phrase = world.check("bash", {"command": command})
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, str(phrase)[:200]


def test_globs_list_a_bounded_number_of_entries(world: World) -> None:
    """Past the listing bound a pattern is matched against the places' names alone (a
    pattern that can name a place is refused, one that cannot goes through)."""
    crowd = world.base / "crowd"
    crowd.mkdir()
    for number in range(4200):
        (crowd / f"f{number}").touch()
    phrase = world.check("bash", {"command": world.fill("touch <base>/crowd/*/x <base>/root/.v*/y")})
    assert phrase is not None and f"can name {HOME_LABEL}" in phrase, phrase
    assert world.check("bash", {"command": world.fill("touch <base>/crowd/*/x <base>/work/*.txt")}) is None


def test_a_megabyte_user_name_is_not_looked_up(world: World) -> None:
    """A ``~name`` no user can have is no lookup: a huge one aborts some NSS modules."""
    huge = "~" + "a" * FIVE_MB
    assert world.check("write_file", {"path": huge + "/x"}) is None
    assert world.check("bash", {"command": f"touch {huge}/x"}) is None


# -- what it does not look at ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        pytest.param("read_file", {"path": "<home>/hooks/x/hook.json"}, id="read_file"),
        pytest.param("glob", {"pattern": "<home>/**"}, id="glob"),
        pytest.param("grep", {"pattern": "x", "path": "<home>"}, id="grep"),
        pytest.param("Read", {"file_path": "<home>/hooks/x/hook.json"}, id="claude-Read"),
        pytest.param("run_shell_command", {"command": "rm -rf <home>"}, id="gemini-name"),
        pytest.param("apply_patch", {"path": "<home>/hooks/x/hook.json"}, id="other-tool"),
    ],
)
def test_other_tools_are_ignored(world: World, tool: str, tool_input: dict[str, str]) -> None:
    filled = {key: world.fill(value) for key, value in tool_input.items()}
    assert world.check(tool, filled) is None
    assert world.check(tool, 42) is None


def test_envelopes_without_a_tool(world: World) -> None:
    assert world.guard.check({}) is None
    assert world.guard.check({"tool_name": None, "tool_input": {"path": str(world.home)}}) is None
    assert world.guard.check({"tool_name": ["write_file"], "tool_input": {"path": str(world.home)}}) is None


def test_tools() -> None:
    assert HomeGuard.TOOLS == {"write_file", "edit_file", "bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"}


def test_no_places_guards_nothing(world: World) -> None:
    guard = HomeGuard([])
    assert guard.check({"tool_name": "write_file", "tool_input": {"path": str(world.home)}}) is None
    assert guard.check({"tool_name": "bash", "tool_input": {"command": "cat ~/.vix/x $VIX_HOME"}}) is None


def test_home_configured_as_a_link(world: World) -> None:
    """A home that is itself a link: its configured path and its realpath are both it."""
    link = world.base / "tmp" / "link"
    guard = HomeGuard([ProtectedPlace(HOME_LABEL, str(link))])
    for path in (f"{world.home}/hooks/a/hook.json", f"{link}/hooks/a/hook.json"):
        assert IN_HOME in (guard.check({"tool_name": "write_file", "tool_input": {"path": path}}) or ""), path
        assert guard.check({"tool_name": "bash", "tool_input": {"command": f"cp x {path}"}, "cwd": "/"}) is not None
    assert guard.check({"tool_name": "write_file", "tool_input": {"path": f"{world.base}/root/.vix-other/a"}}) is None


def test_checks_read_the_filesystem_of_now(world: World) -> None:
    """A link made after the guard was built is followed: only the places are resolved once."""
    later = world.base / "work" / "later"
    envelope = {"tool_name": "write_file", "tool_input": {"path": f"{later}/hooks/a/hook.json"}}
    assert world.guard.check(envelope) is None
    later.symlink_to(world.home, target_is_directory=True)
    assert IN_HOME in (world.guard.check(envelope) or "")


def test_long_phrases_are_shortened(world: World) -> None:
    target = f"{world.home}/hooks/{'a' * 5000}/hook.json"
    phrase = world.check("write_file", {"path": target})
    assert phrase is not None and IN_HOME in phrase and len(phrase) < 600
    control = world.check("write_file", {"path": f"{world.home}/\x1b[31mred"})
    assert control is not None and "\x1b" not in control
