"""Promise 11: the managed tier cannot be weakened by anything the user controls, short of
editing hookbus itself: not by the environment, not by what is on ``PYTHONPATH``, not by a
plugin of theirs, not by a server they started earlier.

The attacker is the user: every attack here is something a user can do without root (set a
variable, drop files in a directory of theirs and put it on ``PYTHONPATH``, start a
``hookbus serve`` before the organization deploys its managed directory). Each runs
``hookbus`` as a host would, in a process of its own, and checks that the managed
fail-closed hook still denies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import attack
from hookbus import HookBus, hookimpl
from hookbus.client import Client
from hookbus.decision import ALLOW, Decision, HookResult
from servekit import Served, environment, wait_for

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="a managed directory must be root's: these attacks make one"),
    pytest.mark.timeout(120),
]

BASH = {"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"}
#: The organization's guard: fail closed, so a runner that cannot run it still denies.
MANAGED_DENY = {"mode": "sync", "blocking": True, "on_error": "deny", "command": "echo 'the organization says no' >&2; exit 2"}
#: Where an impostor plugin leaves its mark when it is imported.
MARK = "HOOKBUS_ATTACK_MARK"


@pytest.fixture
def managed(tmp_path: Path) -> Path:
    root = tmp_path / "etc-vix"
    (root / "hooks" / "org-guard").mkdir(parents=True)
    for directory in (root, root / "hooks", root / "hooks" / "org-guard"):
        directory.chmod(0o755)
    spec = root / "hooks" / "org-guard" / "hook.json"
    spec.write_text(json.dumps({"trigger": {"event": "PreToolUse", "matcher": "bash"}, **MANAGED_DENY}))
    spec.chmod(0o644)
    return root


@pytest.fixture
def user_site(tmp_path: Path) -> Path:
    """A directory of the user's, for PYTHONPATH."""
    site = tmp_path / "user-site"
    site.mkdir()
    return site


def write_settings(root: Path, settings: dict[str, Any]) -> None:
    path = root / "settings.json"
    path.write_text(json.dumps(settings))
    path.chmod(0o644)


def distribution(site: Path, name: str, version: str, entry_points: str, modules: dict[str, str] | None = None) -> None:
    """A distribution as pip leaves it: its dist-info (METADATA, entry_points.txt) and its
    modules, in ``site``."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (info / "entry_points.txt").write_text(entry_points)
    for path, text in (modules or {}).items():
        target = site / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


#: A runner that allows everything and marks that it was imported.
ALLOWING_RUNNER = f"""
    import os
    from pathlib import Path
    from hookbus import Outcome, hookimpl

    Path(os.environ["{MARK}"]).write_text(__name__)

    class Allow:
        def parse(self, key, value, context):
            return value
        def run(self, call):
            return Outcome()

    @hookimpl
    def hookbus_register_runners(register):
        register.add("command", Allow())
"""


def emit(home: Path, managed: Path, site: Path | None, *, verb: str = "emit", extra: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``hookbus emit PreToolUse`` (or a bridge) as a host runs it: a process of its own,
    the user's PYTHONPATH in its environment, no server."""
    env = environment(
        HOOKBUS_MANAGED_DIR=str(managed), PYTHONPATH=str(site) if site else None, HOOKBUS_SOCKET=str(home / "no.sock"),
        **{MARK: str(home.parent / "imported")}, **(extra or {}),
    )
    arguments = [verb, "PreToolUse"] if verb == "emit" else [verb]
    envelope = BASH if verb == "emit" else {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/", "session_id": "s"}
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments, "--home", str(home)],
        input=json.dumps(envelope), capture_output=True, text=True, env=env, timeout=60, cwd=cwd,
    )


def denied(result: subprocess.CompletedProcess[str], verb: str = "emit") -> bool:
    if verb == "emit":
        return result.returncode == 2 and json.loads(result.stdout)["behavior"] == "deny"
    return result.returncode == 0 and '"permissionDecision": "deny"' in result.stdout


def impostor_imported(home: Path) -> bool:
    return (home.parent / "imported").exists()


# -- what is on PYTHONPATH ------------------------------------------------------------------


@pytest.mark.parametrize("verb", ["emit", "claude-code-hook"])
def test_a_bare_hookbus_dist_info_on_the_path_hides_no_built_in_plugin(home: Path, managed: Path, user_site: Path, verb: str) -> None:
    with attack(11, "a bare hookbus-9.dist-info on PYTHONPATH hides no built-in plugin"):
        distribution(user_site, "hookbus", "9", "")
        result = emit(home, managed, user_site, verb=verb)
        assert denied(result, verb), result


@pytest.mark.parametrize(
    ("distributed_as", "entry_points", "what"),
    [
        ("hookbus", "[hookbus]\ncommand = allowall\nresolver = allowall\n", "a fake hookbus distribution pointing the built-in names at its own modules"),
        ("my-runner", "[hookbus]\ncommand = allowall\n", "a user's entry point named command replaces no runner"),
    ],
)
def test_an_entry_point_named_like_a_built_in_cannot_replace_it(
    home: Path, managed: Path, user_site: Path, distributed_as: str, entry_points: str, what: str
) -> None:
    with attack(11, what):
        distribution(user_site, distributed_as, "9", entry_points, {"allowall.py": ALLOWING_RUNNER})
        result = emit(home, managed, user_site)
        assert denied(result), result
        assert not impostor_imported(home)


def test_an_entry_point_named_like_a_built_in_is_refused_without_a_managed_directory_too(home: Path, user_site: Path, tmp_path: Path) -> None:
    with attack(11, "a built-in plugin's name is never taken, managed directory or not"):
        distribution(user_site, "my-runner", "1.0", "[hookbus]\ncommand = allowall\n", {"allowall.py": ALLOWING_RUNNER})
        (home / "hooks" / "mine").mkdir()
        (home / "hooks" / "mine" / "hook.json").write_text(json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "blocking": True, "command": "exit 2"}))
        result = emit(home, tmp_path / "no-managed-dir", user_site)
        assert denied(result), result
        assert not impostor_imported(home)
        # From a directory of no distribution's (a source tree's hookbus.egg-info would be
        # found first, and the first entry point of a name is the one listed).
        listed = subprocess.run(
            [sys.executable, "-m", "hookbus", "plugins", "--json", "--home", str(home)],
            capture_output=True, text=True, timeout=60, env=environment(PYTHONPATH=str(user_site)), cwd=tmp_path,
        )
        refused = [row for row in json.loads(listed.stdout)["plugins"] if row.get("distribution") == "my-runner"]
        assert refused and "built-in plugin" in (refused[0].get("detail") or ""), listed.stdout


def test_a_module_shadowing_a_built_in_plugin_is_not_imported(home: Path, managed: Path, user_site: Path) -> None:
    with attack(11, "a hookbus_command package on PYTHONPATH shadows no built-in plugin"):
        (user_site / "hookbus_command").mkdir()
        (user_site / "hookbus_command" / "__init__.py").write_text(textwrap.dedent(ALLOWING_RUNNER))
        result = emit(home, managed, user_site)
        assert denied(result), result
        assert not impostor_imported(home)


def test_a_module_in_the_working_directory_shadows_no_built_in_plugin(home: Path, managed: Path, tmp_path: Path) -> None:
    with attack(11, "a hookbus_resolver package in the working directory of `python -m hookbus`"):
        work = tmp_path / "work"
        (work / "hookbus_resolver").mkdir(parents=True)
        (work / "hookbus_resolver" / "__init__.py").write_text(textwrap.dedent(f"""
            import os
            from pathlib import Path
            from hookbus import ALLOW, hookimpl
            Path(os.environ["{MARK}"]).write_text(__name__)
            @hookimpl(trylast=True)
            def hookbus_resolve(event, results):
                return ALLOW
        """))
        result = emit(home, managed, None, cwd=work)
        assert denied(result), result
        assert not impostor_imported(home)


def test_a_third_party_plugin_the_managed_settings_do_not_name_does_not_load(home: Path, managed: Path, user_site: Path) -> None:
    with attack(11, "a user's resolver plugin on PYTHONPATH does not load under a managed directory"):
        distribution(user_site, "lenient", "1.0", "[hookbus]\nlenient = lenient\n", {"lenient.py": f"""
            import os
            from pathlib import Path
            from hookbus import ALLOW, hookimpl
            Path(os.environ["{MARK}"]).write_text(__name__)
            @hookimpl(tryfirst=True)
            def hookbus_resolve(event, results):
                return ALLOW
        """})
        result = emit(home, managed, user_site)
        assert denied(result), result
        assert not impostor_imported(home)


def test_a_plugin_the_managed_settings_allow_is_loaded_from_where_it_is_installed(home: Path, managed: Path, user_site: Path) -> None:
    with attack(11, "an allowed plugin's distribution and module shadowed on PYTHONPATH"):
        write_settings(managed, {"plugins": ["http"]})
        # The user's copy of hookbus-http, earlier on the path: its dist-info and its module.
        distribution(user_site, "hookbus-http", "99", "[hookbus]\nhttp = hookbus_http\n", {"hookbus_http/__init__.py": ALLOWING_RUNNER})
        result = emit(home, managed, user_site)
        assert denied(result), result
        assert not impostor_imported(home)
        listed = subprocess.run(
            [sys.executable, "-m", "hookbus", "plugins", "--json", "--home", str(home)],
            capture_output=True, text=True, timeout=60, env=environment(HOOKBUS_MANAGED_DIR=str(managed), PYTHONPATH=str(user_site)),
        )
        http = [row for row in json.loads(listed.stdout)["plugins"] if row["name"] == "http"]
        assert http and http[0]["version"] != "99" and not http[0].get("error") and not http[0].get("blocked"), http


def test_without_a_managed_directory_the_users_plugins_still_load(home: Path, user_site: Path, tmp_path: Path) -> None:
    distribution(user_site, "lenient", "1.0", "[hookbus]\nlenient = lenient\n", {"lenient.py": f"""
        import os
        from pathlib import Path
        Path(os.environ["{MARK}"]).write_text(__name__)
    """})
    emit(home, tmp_path / "no-managed-dir", user_site)
    assert impostor_imported(home)  # the user's own choice, where no organization has one


# -- what a resolver plugin claims ----------------------------------------------------------


class ClaimsTheManagedRewrite:
    """A resolver of the user's that rewrites the call its own way and says the managed
    hook did it, dropping what the managed hook added."""

    @hookimpl(tryfirst=True)
    def hookbus_resolve(self, event: str, results: list[HookResult]) -> Decision:
        return Decision("modify", input={"command": "echo the user's way"}, modified_by="org-rewrite")


def managed_hook(managed: Path, hook_id: str, answer: dict[str, Any], **fields: Any) -> None:
    directory = managed / "hooks" / hook_id
    directory.mkdir()
    directory.chmod(0o755)
    (directory / "answer.json").write_text(json.dumps(answer))
    command = 'cat "$HOOKBUS_HOOK_DIR/answer.json"'
    spec = {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True, "command": command, **fields}
    (directory / "hook.json").write_text(json.dumps(spec))
    for name in ("hook.json", "answer.json"):
        (directory / name).chmod(0o644)


@pytest.fixture
def managed_only_rewrite(managed: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (managed / "hooks" / "org-guard" / "hook.json").unlink()
    (managed / "hooks" / "org-guard").rmdir()
    monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(managed))
    yield managed


def test_a_resolver_that_names_the_managed_hook_gets_the_managed_rewrite_back(
    make_bus: Callable[..., HookBus], managed_only_rewrite: Path
) -> None:
    with attack(11, "a resolver claims the managed modify and substitutes its own input"):
        managed_hook(managed_only_rewrite, "org-rewrite", {"behavior": "modify", "input": {"command": "echo the organization's way"}})
        decision = make_bus(plugins=[ClaimsTheManagedRewrite()]).emit("PreToolUse", BASH)
        assert decision.behavior == "modify" and decision.modified_by == "org-rewrite"
        assert decision.input == {"command": "echo the organization's way"}


class DropsEverything:
    """A resolver of the user's that says allow, whatever was said."""

    @hookimpl(tryfirst=True)
    def hookbus_resolve(self, event: str, results: list[HookResult]) -> Decision:
        return ALLOW


def test_a_resolver_cannot_drop_what_a_managed_hook_added(make_bus: Callable[..., HookBus], managed_only_rewrite: Path) -> None:
    with attack(11, "a resolver drops a managed hook's context, ask and halt"):
        # Claude Code's own words for "ask the user, and tell the model this".
        said = {"permissionDecision": "ask", "permissionDecisionReason": "confirm it", "additionalContext": "the organization's note"}
        managed_hook(managed_only_rewrite, "org-ask", {"hookSpecificOutput": {"hookEventName": "PreToolUse", **said}}, dialect="claude-code")
        decision = make_bus(plugins=[DropsEverything()]).emit("PreToolUse", BASH)
        assert decision.context == "the organization's note"
        assert decision.permission == "ask"


def test_a_forged_deny_reason_keeps_the_managed_hooks_own(make_bus: Callable[..., HookBus], managed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Forges:
        @hookimpl(tryfirst=True)
        def hookbus_resolve(self, event: str, results: list[HookResult]) -> Decision:
            return Decision("deny", reason="nothing to see", denied_by=("org-guard",))

    with attack(11, "a resolver denies in the managed hook's name with a reason of its own"):
        monkeypatch.setenv("HOOKBUS_MANAGED_DIR", str(managed))
        decision = make_bus(plugins=[Forges()]).emit("PreToolUse", BASH)
        assert decision.behavior == "deny" and "the organization says no" in (decision.reason or "")


# -- a server started before the managed directory --------------------------------------------


def launcher(default: Path) -> tuple[str, ...]:
    """How these attacks run hookbus: as ``python -m hookbus``, with the organization's
    default managed directory (``/etc/vix``) at ``default``, a path the test makes appear."""
    code = (
        "import sys; import hookbus.policy.managed as m; "
        f"m.DEFAULT_MANAGED_DIR = {str(default)!r}; "
        "from hookbus.serve.quickpath import main; sys.argv[0] = 'hookbus'; raise SystemExit(main())"
    )
    return ("-c", code)


def run_as_host(home: Path, default: Path, verb: str = "emit", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    arguments = [verb, "PreToolUse"] if verb == "emit" else [verb]
    envelope = BASH if verb == "emit" else {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": "/", "session_id": "s"}
    return subprocess.run(
        [sys.executable, *launcher(default), *arguments, "--home", str(home)],
        input=json.dumps(envelope), capture_output=True, text=True, timeout=60,
        env=env or environment(HOOKBUS_MANAGED_DIR=None, HOOKBUS_DISABLE_PLUGINS=None, HOOKBUS_LOAD_PLUGINS=None, HOOKBUS_SOCKET=None),
    )


def deploy(managed: Path, default: Path) -> None:
    """The organization's configuration management puts the managed directory in place."""
    os.rename(managed, default)


@pytest.mark.parametrize("verb", ["emit", "claude-code-hook"])
@pytest.mark.parametrize("started_with", ["managed-dir-variable", "disable-plugins"])
def test_a_server_started_before_the_managed_directory_never_answers_for_it(
    home: Path, managed: Path, tmp_path: Path, verb: str, started_with: str
) -> None:
    with attack(11, f"a server started with {started_with} before /etc/vix appears"):
        default = tmp_path / "etc" / "vix"
        default.parent.mkdir()
        default.parent.chmod(0o755)
        empty = tmp_path / "empty-managed"
        (empty / "hooks").mkdir(parents=True)
        empty.chmod(0o755)
        (empty / "hooks").chmod(0o755)
        started: dict[str, str | None] = (
            {"HOOKBUS_MANAGED_DIR": str(empty)} if started_with == "managed-dir-variable" else {"HOOKBUS_DISABLE_PLUGINS": "command", "HOOKBUS_MANAGED_DIR": None}
        )
        server_env = environment(HOOKBUS_SOCKET=None, **started)
        with Served(home, env=server_env, python=launcher(default)) as served:
            assert run_as_host(home, default, verb).returncode == 0  # nothing managed yet: allowed
            deploy(managed, default)
            # At once, and from then on: the client would load the managed tier, so it never
            # takes the answer of a server that does not.
            first = run_as_host(home, default, verb)
            assert denied(first, verb), first
            # The server picks the managed directory up, and answers for it.
            def served_tier() -> object:
                with Client(served.socket) as client:
                    return client.status().get("managed")

            wait_for(lambda: served_tier() == str(default), timeout=20, message="the server to load the managed directory")
            later = run_as_host(home, default, verb)
            assert denied(later, verb), later
            assert "running in-process" not in later.stderr, later.stderr
            assert served.process.poll() is None


def test_a_client_never_takes_the_answer_of_a_server_of_another_tier(home: Path, managed: Path, tmp_path: Path) -> None:
    with attack(11, "a server whose managed tier differs from the client's"):
        default = tmp_path / "etc" / "vix"
        server_env = environment(HOOKBUS_MANAGED_DIR=str(managed), HOOKBUS_SOCKET=None)
        with Served(home, env=server_env, python=launcher(default)):
            # The client has no managed directory: its own answer, not the server's deny.
            result = run_as_host(home, default)
            assert result.returncode == 0, result
            assert "running in-process" in result.stderr and "managed directory" in result.stderr


def test_a_server_that_ran_the_users_code_before_the_managed_directory_never_answers_for_it(
    home: Path, managed: Path, user_site: Path, tmp_path: Path
) -> None:
    with attack(11, "a server started with a PYTHONPATH plugin before /etc/vix appears"):
        default = tmp_path / "etc" / "vix"
        default.parent.mkdir()
        default.parent.chmod(0o755)
        distribution(user_site, "lenient", "1.0", "[hookbus]\nlenient = lenient\n", {"lenient.py": """
            from hookbus import ALLOW, hookimpl
            @hookimpl(tryfirst=True)
            def hookbus_resolve(event, results):
                return ALLOW
        """})
        server_env = environment(HOOKBUS_MANAGED_DIR=None, HOOKBUS_SOCKET=None, PYTHONPATH=str(user_site))
        with Served(home, env=server_env, python=launcher(default)) as served:
            deploy(managed, default)
            # Until it stops, no client takes its answer; then it stops itself (exit 1, for a
            # unit's Restart=on-failure), since Claude Code's http hooks could not tell.
            result = run_as_host(home, default)
            assert denied(result), result
            assert served.wait(timeout=30) == 1
            assert "stopping: the managed tier is" in served.stderr and "not enforceable here: lenient came from" in served.stderr
        result = run_as_host(home, default)
        assert denied(result), result


@pytest.mark.parametrize("claimed", [5, None, ["/etc/vix"], "/elsewhere", "", "\x00"])
def test_a_request_that_names_another_tier_or_no_valid_one_runs_nothing(home: Path, managed: Path, tmp_path: Path, claimed: Any) -> None:
    """A client's "managed" param is checked before anything runs: a wrong type is -32602,
    another tier -32009; neither runs the server's hooks (whose deny would be logged)."""
    from hookbus.client import RemoteError
    from hookbus.serve.errorcodes import INVALID_PARAMS, OTHER_TIER

    with attack(11, f"an emit whose managed param is {claimed!r}"):
        server_env = environment(HOOKBUS_MANAGED_DIR=str(managed), HOOKBUS_SOCKET=None)
        with Served(home, env=server_env, python=launcher(tmp_path / "etc" / "vix")) as served:
            with Client(served.socket) as client, pytest.raises(RemoteError) as refused:
                client.call("emit", {"event": "PreToolUse", "envelope": BASH, "managed": claimed})
        assert refused.value.code == (INVALID_PARAMS if not isinstance(claimed, str) else OTHER_TIER)
        assert refused.value.ran_nothing
        assert not any((home / "logs" / "hooks").glob("*.jsonl"))
