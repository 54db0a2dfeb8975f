"""``--json`` on the verbs that print a table or a verdict: one JSON document on stdout
(``log --json``: JSON Lines), the same data the table shows plus what a tool needs, with
the verb's usual exit code. Run through the real CLI, in-process and through a server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from servekit import Served
from test_cli import cli_env, run_cli

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]
HOOK_ROW_KEYS = {"id", "tier", "event", "matcher", "mode", "action", "state", "last_fire", "error"}
PLUGIN_KEYS = {"name", "module", "distribution", "version", "in_process", "status", "detail", "provides"}


def one_document(stdout: str) -> Any:
    """The one JSON document on stdout, on one line."""
    assert stdout.endswith("\n") and stdout.count("\n") == 1, stdout
    return json.loads(stdout)


def good_and_bad(write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="echo no >&2; exit 2")
    write_hook("quiet", event="Stop", command="true", enabled=False)
    write_hook("bad", mode="async", blocking=True, command="true")  # blocking needs sync
    write_hook("noscript", event="Stop", command='"$HOOKBUS_HOOK_DIR/missing.sh"')


# -- list -------------------------------------------------------------------------------------


def test_list_json_in_process(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    good_and_bad(write_hook)
    fired = run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name":"bash"}')
    assert fired.returncode == 2

    result = run_cli(tmp_path, "list", "--json", home=home)

    assert (result.returncode, result.stderr) == (0, "")
    document = one_document(result.stdout)
    assert set(document) == {"home", "source", "server", "generation", "hooks", "problems", "warnings", "disabled"}
    assert (document["home"], document["source"], document["server"], document["disabled"]) == (str(home), "process", None, None)
    assert isinstance(document["generation"], int)
    rows = {row["id"]: row for row in document["hooks"]}
    assert [row["id"] for row in document["hooks"]] == ["hookbus:protect_home", "bad", "guard", "noscript", "quiet"]
    assert [row["tier"] for row in document["hooks"]] == ["builtin", "user", "user", "user", "user"]
    assert all(set(row) == HOOK_ROW_KEYS for row in document["hooks"])
    assert rows["guard"]["mode"] == "sync blocking" and rows["guard"]["last_fire"]["status"] == "deny"
    assert rows["quiet"]["state"] == "disabled" and rows["quiet"]["last_fire"] is None
    assert rows["bad"]["state"] == "broken (not loaded)" and rows["bad"]["event"] is None
    # Loaded (its on_error decides), and shown as what it is: every fire of it fails.
    assert rows["noscript"]["state"] == "broken (will fail)" and "missing.sh, which does not exist" in rows["noscript"]["error"]
    assert document["problems"][0] == 'hooks/bad/hook.json: blocking needs "mode": "sync" @ $.blocking'
    assert document["problems"][1].startswith("hooks/noscript/hook.json: the command runs $HOOKBUS_HOOK_DIR/missing.sh")


def test_list_json_through_a_server_says_which(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    good_and_bad(write_hook)
    with Served(home, env=cli_env(tmp_path)) as served:
        result = run_cli(tmp_path, "list", "--json", home=home)
        pid = served.process.pid
        socket = served.socket

    document = one_document(result.stdout)
    assert (document["source"], document["server"]) == ("server", {"socket": socket, "pid": pid})
    assert [row["id"] for row in document["hooks"]] == ["hookbus:protect_home", "bad", "guard", "noscript", "quiet"]
    assert [row["tier"] for row in document["hooks"]] == ["builtin", "user", "user", "user", "user"]
    # What the server enforces, said as an in-process list says it.
    assert {row["id"]: row["state"] for row in document["hooks"]}["noscript"] == "broken (will fail)"


def test_list_json_of_an_empty_home(tmp_path: Path, home: Path) -> None:
    document = one_document(run_cli(tmp_path, "list", "--json", home=home).stdout)
    assert ([row["id"] for row in document["hooks"]], document["problems"]) == (["hookbus:protect_home"], [])


# -- validate ---------------------------------------------------------------------------------


def test_validate_json_is_the_verdict_per_hook(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    good_and_bad(write_hook)
    (home / "hooks" / "stray").mkdir()  # no spec: a layout finding, of no hook

    result = run_cli(tmp_path, "validate", "--json", home=home)
    text = run_cli(tmp_path, "validate", home=home)

    assert result.returncode == text.returncode == 1
    document = one_document(result.stdout)
    assert set(document) == {"ok", "home", "hooks", "problems", "warnings"}
    assert (document["ok"], document["home"], document["warnings"]) == (False, str(home), [])
    hooks = {hook["id"]: hook for hook in document["hooks"]}
    assert list(hooks) == ["bad", "guard", "noscript", "quiet"]
    assert all(set(hook) == {"id", "ok", "problems", "warnings"} for hook in hooks.values())
    assert hooks["guard"] == {"id": "guard", "ok": True, "problems": [], "warnings": []}
    assert hooks["bad"]["problems"] == ['hooks/bad/hook.json: blocking needs "mode": "sync" @ $.blocking']
    assert hooks["noscript"]["ok"] is False and "missing.sh" in hooks["noscript"]["problems"][0]
    # Every problem, as the text prints them: those of hooks, and the others.
    assert sorted(document["problems"]) == sorted(
        [*hooks["bad"]["problems"], *hooks["noscript"]["problems"], "hooks/stray: no hook.json or hook.yaml, so it is no hook"]
    )
    assert all(problem in text.stdout for problem in document["problems"])


def test_validate_json_of_named_ids(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="exit 0")

    good = run_cli(tmp_path, "validate", "--json", "guard", home=home)
    unknown = run_cli(tmp_path, "validate", "--json", "guard", "nope", home=home)

    assert good.returncode == 0
    assert one_document(good.stdout) == {
        "ok": True, "home": str(home), "hooks": [{"id": "guard", "ok": True, "problems": [], "warnings": []}], "problems": [], "warnings": [],
    }
    assert unknown.returncode == 1
    document = one_document(unknown.stdout)
    assert document["hooks"][1] == {"id": "nope", "ok": False, "problems": ["hooks/nope: no hook.json or hook.yaml"], "warnings": []}
    assert document["ok"] is False


def test_validate_json_attributes_warnings_to_their_hook(tmp_path: Path, home: Path, write_hook: Writer, safe_modes: None) -> None:
    (home / "settings.json").write_text(json.dumps({"hooks_strict_modes": False}))
    write_hook("loose", event="Stop", command="true")
    (home / "hooks" / "loose" / "hook.json").chmod(0o664)

    result = run_cli(tmp_path, "validate", "--json", home=home)

    assert result.returncode == 0
    document = one_document(result.stdout)
    [hook] = document["hooks"]
    assert hook["ok"] is True
    assert len(hook["warnings"]) == 1 and hook["warnings"][0].startswith("hooks/loose/hook.json is writable by group")
    assert hook["warnings"][0] in document["warnings"]


# -- plugins, explain, log --------------------------------------------------------------------


def test_plugins_json(tmp_path: Path, home: Path) -> None:
    result = run_cli(tmp_path, "plugins", "--json", home=home, env=cli_env(tmp_path, HOOKBUS_DISABLE_PLUGINS="workflow"))

    assert result.returncode == 0
    document = one_document(result.stdout)
    assert set(document) == {"plugins", "recorders"}
    assert document["recorders"] == ["recorder"]
    plugins = {row["name"]: row for row in document["plugins"]}
    assert all(set(row) == PLUGIN_KEYS for row in document["plugins"])
    assert plugins["command"]["status"] == "loaded" and plugins["command"]["distribution"] == "hookbus"
    assert plugins["workflow"]["status"] == "blocked" and plugins["workflow"]["detail"] == "blocked by HOOKBUS_DISABLE_PLUGINS"
    assert plugins["recorder"]["provides"] == ["recorder", "run reader", "config checks"]
    # The table shows the same: the status of each, and what each provides.
    table = run_cli(tmp_path, "plugins", home=home, env=cli_env(tmp_path, HOOKBUS_DISABLE_PLUGINS="workflow")).stdout
    assert "blocked by HOOKBUS_DISABLE_PLUGINS" in table


def test_explain_json_holds_the_home_and_the_source(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="echo no >&2; exit 2")

    result = run_cli(tmp_path, "explain", "PreToolUse", "--json", "--dry-run", home=home, stdin='{"tool_name":"bash"}')

    assert result.returncode == 0
    document = one_document(result.stdout)
    assert document["home"] == str(home)
    assert document["source"].startswith("as decided by this process")
    assert [hook["id"] for hook in document["hooks"]] == ["guard", "hookbus:protect_home"]


def test_log_json_is_json_lines(tmp_path: Path, home: Path, write_hook: Writer) -> None:
    write_hook("noter", event="Stop", mode="sync", command="echo noted")
    for _ in range(3):
        run_cli(tmp_path, "emit", "Stop", home=home)

    result = run_cli(tmp_path, "log", "--json", home=home)
    empty = run_cli(tmp_path, "log", "--json", "--hook", "nobody", home=home)

    lines = result.stdout.splitlines()
    assert len(lines) == 3 and all(json.loads(line)["hook_id"] == "noter" for line in lines)
    assert (empty.returncode, empty.stdout) == (0, "")
