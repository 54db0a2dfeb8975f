"""hookbus.policy.homeguard: which tool calls write into the hookbus home or the managed
directory, on a real tree under tmp_path (a real home with a hook in it, a real link to it,
a real managed directory, a sibling that only shares the home's prefix).

Each case is a template: ``<base>``, ``<home>`` and ``<managed>`` become the tree's paths
(not str.format: shell commands are full of braces). ``expect`` is a piece of the phrase
``check`` returns, or None for a call it lets through.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from hookbus.policy.homeguard import MAX_PATHS, MAX_WORDS, HomeGuard, ProtectedPlace

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


# -- bash ------------------------------------------------------------------------------------

COMMANDS = [
    # 1: the place's path, whole.
    pytest.param("cat > <home>/hooks/x/hook.json", f"names {HOME_LABEL} (<home>)", id="absolute"),
    pytest.param('cp x "<home>/hooks/a/hook.json"', IN_HOME.replace("inside", "names"), id="double-quoted"),
    pytest.param("echo x ><home>/hooks/a/hook.json", "names", id="redirect-glued"),
    pytest.param("hookbus list --home=<home>", "names", id="option-value"),
    pytest.param("ls <home>*", "names", id="glob-after"),
    pytest.param("cd <home>; ls", "names", id="cd-semicolon"),
    pytest.param("cat <home>", "names", id="at-end"),
    pytest.param("ls <managed>/policy", f"names {MANAGED_LABEL} (<managed>)", id="managed-absolute"),
    pytest.param("ls /x<managed>", None, id="managed-inside-longer-path"),
    pytest.param("ls <managed>2 <managed>-old <managed>.bak <managed>é", None, id="managed-prefix-siblings"),
    # 1: the spellings the caller passes.
    pytest.param("mkdir -p ~/.vix/hooks/evil", f"names {HOME_LABEL} (~/.vix)", id="spelling-tilde"),
    pytest.param("cp x $HOME/.vix/hooks/a/hook.json", "($HOME/.vix)", id="spelling-HOME"),
    pytest.param("cp x ${HOME}/.vix/hooks/a/hook.json", "(${HOME}/.vix)", id="spelling-HOME-braced"),
    # 2: the variables.
    pytest.param('echo {} > "$VIX_HOME/hooks/a/hook.json"', f"names {HOME_LABEL} ($VIX_HOME)", id="VIX_HOME"),
    pytest.param("cd ${VIX_HOME}", "($VIX_HOME)", id="VIX_HOME-braced"),
    pytest.param("cd ${VIX_HOME:-/tmp}", "($VIX_HOME)", id="VIX_HOME-default"),
    pytest.param("ls $HOOKBUS_MANAGED_DIR", f"names {MANAGED_LABEL} ($HOOKBUS_MANAGED_DIR)", id="HOOKBUS_MANAGED_DIR"),
    pytest.param("echo $VIX_HOMEDIR $VIX_HOME_2 ${VIX_HOMES}", None, id="longer-variable-names"),
    # 1-3 on the unquoted copy.
    pytest.param("cp x ~/'.vix'/hooks/a/hook.json", "names", id="single-quoted-part"),
    pytest.param('cp x "$HOME"/.vix/hooks/a', "names", id="quoted-HOME"),
    pytest.param("cp x <base>/root/.v\\ix/hooks/a", "names", id="backslash"),
    pytest.param("cp x <base>/etc/v''ix/a", "names", id="empty-quotes-in-managed"),
    # 3: the home's name as a component.
    pytest.param("cd ~ && echo x > .vix/hooks/a/hook.json", f"names {HOME_LABEL} (.vix)", id="dot-name-relative"),
    pytest.param("cd .vix", "(.vix)", id="cd-dot-name"),
    pytest.param("cd ~ && cd .v'i'x", "(.vix)", id="dot-name-quoted"),
    pytest.param("ls ~/.vix-other ~/.vixrc .vixrc .vix-other ~/.vix.bak", None, id="dot-name-prefix-siblings"),
    pytest.param("ls <base>/root/.vix-other/x <base>/root/.vixen", None, id="prefix-siblings-absolute"),
    # 4: path-like words, resolved.
    pytest.param("cp x <base>/tmp/link/hooks/a/hook.json", "which is <home>/hooks/a/hook.json", id="symlink-word"),
    pytest.param("cp x '<base>/tmp/link'/hooks/a", "which is <home>/hooks/a", id="symlink-word-quoted"),
    pytest.param("ls <base>/tmp/managed-link", f"which is <managed>, {IN_MANAGED}", id="symlink-word-managed"),
    pytest.param("ls <base>/etc/x/../vix/policy", IN_MANAGED, id="dotdot-word"),
    pytest.param("cd ../etc/vix", IN_MANAGED, id="relative-dotdot-word"),
    pytest.param("tar -C<base>/tmp/link -xf x.tar", IN_HOME, id="short-option-value"),
    pytest.param("hookbus list --home=<base>/tmp/link", IN_HOME, id="long-option-value"),
    pytest.param("ls ~/.v*", f"can name {HOME_LABEL}", id="glob"),
    pytest.param("ls <base>/root/.{vix,x}/hooks", f"can name {HOME_LABEL}", id="brace"),
    pytest.param("ls <base>/etc/v?x", f"can name {MANAGED_LABEL}", id="glob-managed"),
    pytest.param("shopt -s dotglob; cp x ~/*/hooks/a", f"can name {HOME_LABEL}", id="dotglob"),
    pytest.param("ls ~/* <base>/etc/x* && mkdir -p {a,b}/x", None, id="globs-elsewhere"),
    # Unrelated commands.
    pytest.param("ls /tmp", None, id="ls-tmp"),
    pytest.param("git status", None, id="git-status"),
    pytest.param("cat README.md | grep -n vix > /tmp/out.txt", None, id="pipeline"),
    pytest.param("python -m pytest tests/ -q -k 'not slow'", None, id="pytest"),
    pytest.param("cd <base>/work && ls -la . .. ~ && echo $HOME $PATH", None, id="work-dir"),
    pytest.param("echo vix && ls <base>/root <base>/tmp", None, id="beside-the-places"),
    pytest.param("", None, id="empty"),
    pytest.param("ls /tmp/a\0b", "NUL byte", id="nul-byte"),
]


@pytest.mark.parametrize(("command", "expect"), COMMANDS)
def test_bash_commands(world: World, command: str, expect: str | None) -> None:
    phrase = world.check("bash", {"command": world.fill(command)})
    if expect is None:
        assert phrase is None
    else:
        assert phrase is not None and world.fill(expect) in phrase, phrase
        assert phrase.startswith("the bash command")


@pytest.mark.parametrize(
    ("cwd", "expect"),
    [
        pytest.param("<home>", f"runs in <home>, {IN_HOME}", id="home"),
        pytest.param("<home>/hooks/x", f"runs in <home>/hooks/x, {IN_HOME}", id="below-home"),
        pytest.param("<base>/tmp/link/hooks", IN_HOME, id="through-link"),
        pytest.param("<managed>/policy", IN_MANAGED, id="managed"),
        pytest.param("<base>/root", None, id="above-home"),
        pytest.param("<base>/root/.vix-other", None, id="prefix-sibling"),
    ],
)
def test_bash_working_directory(world: World, cwd: str, expect: str | None) -> None:
    phrase = world.check("bash", {"command": "ls"}, cwd)
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


def test_claude_bash(world: World) -> None:
    assert IN_HOME in (world.check("Bash", {"command": f"cp x {world.base}/tmp/link/hooks"}) or "")
    assert world.check("Bash", {"command": "git status"}) is None


def test_too_many_paths(world: World) -> None:
    many = " ".join(f"/tmp/p{i}" for i in range(MAX_PATHS + 1))
    assert f"more than {MAX_PATHS} paths" in (world.check("bash", {"command": many}) or "")
    assert world.check("bash", {"command": " ".join(f"/tmp/p{i}" for i in range(MAX_PATHS))}) is None
    repeated = "ls /tmp/p " * (MAX_WORDS + 1)
    assert f"more than {MAX_WORDS} paths" in (world.check("bash", {"command": repeated}) or "")


FIVE_MB = 5 * 1024 * 1024


@pytest.mark.parametrize(
    ("shape", "tail", "expect"),
    [
        pytest.param("a ", "", None, id="words"),
        pytest.param("a", "", None, id="one-word"),
        pytest.param(";", "", None, id="separators"),
        pytest.param("$", "", None, id="dollars"),
        pytest.param("/", "", None, id="slashes"),
        pytest.param(".vi", "", None, id="near-name"),
        pytest.param("'\"\\", "", None, id="quotes"),
        pytest.param("a=b ", "", None, id="assignments"),
        pytest.param("~b ", "", f"more than {MAX_WORDS} paths", id="tildes"),
        pytest.param("a ", " > <home>/hooks/a/hook.json", "names", id="home-at-end"),
        pytest.param("a ", " <base>/tmp/link/hooks", IN_HOME, id="link-at-end"),
        pytest.param("/tmp/x ", "", f"more than {MAX_WORDS} paths", id="paths"),
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
