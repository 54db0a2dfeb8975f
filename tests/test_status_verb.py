"""``hookbus status``: whether a ``hookbus serve`` serves this home, asked of a real server.

Exit 0 when one serves (its pid, socket, uptime, generation, plugins, problems), 3 when
none does (one line; with --json ``{"serving": false, "home", "socket"}``), and a word when
the server's plugins differ from what is installed where ``status`` runs: a plugin
installed after the server started needs a restart to load.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from jsonschema import Draft202012Validator

from servekit import Served, environment, hookbus

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]
SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "protocol.schema.json"


def env_for(**overrides: str | None) -> dict[str, str]:
    cleared: dict[str, str | None] = {"VIX_HOME": None, "HOOKBUS_SOCKET": None, "VIX_DISABLE_HOOKS": None, "COLUMNS": None}
    return environment(**{**cleared, **overrides})


def status(home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return hookbus("status", "--home", str(home), *args, env=env or env_for())


def install_plugin(site: Path, name: str, distribution: str, version: str) -> None:
    """What pip leaves on sys.path for a plugin: its metadata, with the entry point. (The
    module itself is never imported by status.)"""
    info = site / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n\n")
    (info / "entry_points.txt").write_text(f"[hookbus]\n{name} = {distribution.replace('-', '_')}\n")


def status_result_schema() -> Draft202012Validator:
    document = json.loads(SCHEMA.read_text())
    return Draft202012Validator({"$schema": document["$schema"], "$defs": document["$defs"], "$ref": "#/$defs/statusResult"})


def test_no_server_exits_3_with_one_line(home: Path) -> None:
    socket = home / "run" / "hookbus.sock"

    plain = status(home)
    as_json = status(home, "--json")

    assert (plain.returncode, plain.stderr) == (3, "")
    assert plain.stdout == f"no hookbus serve serves {home}: nothing listens on {socket}\n"
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout) == {"serving": False, "home": str(home), "socket": str(socket)}
    assert as_json.stdout.count("\n") == 1
    assert as_json.stderr == f"no hookbus serve serves {home}: nothing listens on {socket}\n"


def test_a_server_says_its_pid_socket_uptime_generation_and_plugins(home: Path, write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="exit 0")
    write_hook("off", event="Stop", command="true", enabled=False)
    write_hook("bad", raw="{")
    with Served(home, env=env_for()) as served:
        plain = status(home)
        as_json = status(home, "--json")
        pid = served.process.pid
        socket = served.socket

    assert plain.returncode == 0, plain.stderr
    out = plain.stdout
    assert out.startswith(f"hookbus serve is serving {home} (pid {pid})\n")
    assert f"  socket      {socket}\n" in out
    assert f"  pid         {pid}\n" in out
    assert "  hooks       3 hooks (1 disabled, 1 broken, and hookbus's home guard): hookbus list shows them\n" in out
    assert "  recording   recorder\n" in out
    assert "NAME" in out and "\ncommand " in out and "\nrecorder " in out
    assert "1 problem (skipped files, a broken file whose last good version runs, or a hook that will fail):\n  hooks/bad/hook.json: invalid JSON" in out
    assert "differs" not in out

    assert as_json.returncode == 0
    document = json.loads(as_json.stdout)
    assert (document["serving"], document["home"], document["socket"], document["pid"]) == (True, str(home), socket, pid)
    assert document["differences"] == [] and document["restart_needed"] is False
    assert isinstance(document["uptime_seconds"], (int, float)) and document["uptime_seconds"] >= 0
    assert document["generation"] >= 1
    assert [row["id"] for row in document["hooks"]] == ["hookbus:protect_home", "bad", "guard", "off"]
    names = {row["name"]: row for row in document["plugins"]}
    assert names["command"]["status"] == "loaded" and names["command"]["provides"] == ["runner:command"]
    assert document["recorders"] == ["recorder"]
    # What the server sent is its status method's result, as the schema describes it.
    served_part = {key: value for key, value in document.items() if key not in ("serving", "differences", "restart_needed")}
    errors = [error.message for error in status_result_schema().iter_errors(served_part)]
    assert not errors, errors


def test_a_plugin_installed_after_the_server_started_asks_for_a_restart(tmp_path: Path, home: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    env = env_for(PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    with Served(home, env=env):
        before = status(home, "--json", env=env)
        install_plugin(site, "extra", "hookbus-extra", "1.2")
        after = status(home, "--json", env=env)
        plain = status(home, env=env)

    assert json.loads(before.stdout)["differences"] == []
    document = json.loads(after.stdout)
    assert after.returncode == 0
    assert document["restart_needed"] is True
    assert document["differences"] == [{
        "name": "extra", "what": "installed",
        "message": "plugin 'extra' (hookbus-extra 1.2) is installed, but the server has not loaded it: restart hookbus serve to load what is installed now",
    }]
    assert plain.returncode == 0
    assert plain.stdout.endswith(
        "\nthe server differs from this environment:\n"
        "  plugin 'extra' (hookbus-extra 1.2) is installed, but the server has not loaded it: restart hookbus serve to load what is installed now\n"
    )


def test_a_plugin_blocked_here_but_not_there_is_an_environment_difference(home: Path) -> None:
    with Served(home, env=env_for()):
        result = status(home, "--json", env=env_for(HOOKBUS_DISABLE_PLUGINS="workflow"))

    document = json.loads(result.stdout)
    assert document["differences"] == [{
        "name": "workflow", "what": "environment",
        "message": "plugin 'workflow' is loaded in the server, but would be blocked by HOOKBUS_DISABLE_PLUGINS here: "
        "the server's environment says otherwise (restart it in the environment you mean)",
    }]
    assert document["restart_needed"] is False


def test_a_server_of_another_home_on_the_socket_is_not_this_homes(tmp_path: Path, home: Path) -> None:
    other = tmp_path / "other"
    (other / "hooks").mkdir(parents=True)
    with Served(other, env=env_for()) as served:
        assert served.socket is not None
        result = status(home, env=env_for(HOOKBUS_SOCKET=served.socket))
        as_json = status(home, "--json", env=env_for(HOOKBUS_SOCKET=served.socket))

    assert result.returncode == 3
    assert result.stdout == f"no hookbus serve serves {home}: the one on {served.socket} serves {other}\n"
    assert as_json.returncode == 3
    assert json.loads(as_json.stdout) == {"serving": False, "home": str(home), "socket": served.socket}
