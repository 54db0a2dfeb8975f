"""docs/gate.md says what the gate and its installer do: the variables and limits it
names are the script's, the run file is laid out and guarded as it says, and the installer
writes the gate where "Where it is written" says, in the command shape it shows."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest

from conftest import turn_off_home_guard
from docskit import DOCS, REPO, section
from httpkit import http_address
from servekit import Served, environment, hookbus

DOC = DOCS / "gate.md"
SCRIPT = REPO / "hookbus" / "hosts" / "gate.sh"

pytestmark = pytest.mark.timeout(120)


def test_every_variable_the_page_names_sends_the_call_to_the_bridge() -> None:
    table = section(DOC, "What it does when the server cannot answer")
    named = set(re.findall(r"`((?:VIX|HOOKBUS)_[A-Z_]+)`", table))
    assert named, "the table names no variable"
    first_test = next(line for line in SCRIPT.read_text().splitlines() if "VIX_DISABLE_HOOKS" in line)
    assert {name for name in named if name not in first_test} == set()


def test_the_limits_the_page_gives_are_the_scripts() -> None:
    from hookbus.hosts.gate import MIN_BASH

    text = DOC.read_text()
    script = SCRIPT.read_text()
    assert "more than 64 KiB" in text and "-n 65536" in script
    assert "within 2.5 s" in text and "-t 2.5" in script
    assert f"bash older than {MIN_BASH[0]}.{MIN_BASH[1]}" in text


def test_the_run_file_is_as_the_page_says(home: Path) -> None:
    with Served(home, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None)) as served:
        host, port = http_address(served)
        run_file = home / "run" / "http.gate"
        pid, said_host, said_port, proof, token = run_file.read_text().split()
        assert (int(pid), said_host, int(said_port)) == (served.process.pid, host, port)
        assert token == (home / "run" / "http.token").read_text().strip() and len(proof) >= 20
        assert stat.S_IMODE(run_file.stat().st_mode) == 0o600
        assert stat.S_IMODE((home / "run").stat().st_mode) == 0o700
    assert not run_file.exists(), "the run file outlived its server"
    assert "`PID HOST PORT PROOF TOKEN`, mode 0600 in the 0700 run directory" in " ".join(DOC.read_text().split())


def commands(settings: Path) -> dict[str, list[dict[str, Any]]]:
    document = json.loads(settings.read_text())
    return {event: [hook for group in groups for hook in group["hooks"]] for event, groups in document["hooks"].items()}


def test_the_installer_writes_the_gate_where_the_page_says(home: Path, tmp_path: Path) -> None:
    where = " ".join(section(DOC, "Where it is written").split())
    assert "writes the gate on SessionStart" in where and "the gate goes on every event" in where
    turn_off_home_guard(home)
    private = tmp_path / "private.json"
    url = "http://127.0.0.1:8787"
    assert hookbus("import", "claude-code", str(private), "--install-bridge", "--http", url, "--home", str(home)).returncode == 0
    hooks = commands(private)
    gated = {event for event, entries in hooks.items() if "gate.sh" in entries[0].get("command", "")}
    assert gated == {"SessionStart", "PreToolUse", "PermissionRequest", "UserPromptSubmit", "PostToolUse"}
    assert {hooks[event][0]["type"] for event in ("Stop", "SubagentStop", "PreCompact")} == {"http"}
    # The shape the page shows: bash and the script by absolute path, the host, the home, --, the bridge.
    words = hooks["SessionStart"][0]["command"].split()
    assert os.path.isabs(words[0]) and os.path.basename(words[0]) == "bash"
    assert Path(words[1]) == SCRIPT.resolve() and words[2:5] == ["claude-code", str(home), "--"]
    assert words[-3:] == ["claude-code-hook", "--home", str(home)]

    shared = tmp_path / "shared.json"
    shared.write_text("{}")
    shared.chmod(0o644)
    assert hookbus("import", "claude-code", str(shared), "--install-bridge", "--http", url, "--home", str(home)).returncode == 0
    assert all("gate.sh claude-code" in entries[0]["command"] for entries in commands(shared).values())

    gemini = tmp_path / "gemini.json"
    assert hookbus("import", "gemini-cli", str(gemini), "--install-bridge", "--http", url, "--home", str(home)).returncode == 0
    assert all("gate.sh gemini-cli" in entries[0]["command"] for entries in commands(gemini).values())
