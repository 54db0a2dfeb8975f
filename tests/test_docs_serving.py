"""docs/serving.md's examples run against a real `hookbus serve` of a fresh user's ~/.vix
(with docs/hooks.md's block-env-writes hook): `hookbus status` says it serves (exit 0) and
that none does once it stopped (exit 3); the request of the shell example gets the answer
the page shows; the Python example runs as written."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from docskit import DOCS, commands_of, hookbus, install_hooks_md_hook, logical_lines, private_dir, run_python, section, section_blocks, user_environment
from hookbus.serve.rendezvous import reachable
from servekit import Served

DOC = DOCS / "serving.md"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def user(tmp_path: Path) -> Path:
    user = private_dir(tmp_path / "ana")
    install_hooks_md_hook(private_dir(user / ".vix"), "block-env-writes")
    return user


def test_start_one_and_ask_whether_it_serves(user: Path) -> None:
    [block] = section_blocks(DOC, "Start one", "sh")
    serve, status = logical_lines(block)
    assert serve.split()[:2] == ["hookbus", "serve"] and status.split()[:2] == ["hookbus", "status"]
    env = user_environment(user)
    with Served(user / ".vix", env=env) as served:
        asked = hookbus("status", env=env)
        assert asked.returncode == 0, asked.stdout + asked.stderr
        assert str(served.process.pid) in asked.stdout
        as_json = json.loads(hookbus("status", "--json", env=env).stdout)
        assert as_json["serving"] is True and as_json["pid"] == served.process.pid
        assert as_json["socket"] == str(user / ".vix" / "run" / "hookbus.sock")
        for key in ("generation", "plugins", "problems", "uptime_seconds"):
            assert key in as_json, key
    gone = hookbus("status", env=env)
    assert gone.returncode == 3
    assert json.loads(hookbus("status", "--json", env=env).stdout)["serving"] is False
    text = section(DOC, "Is one running? `hookbus status`")
    assert "exits 0" in text and "3 when none does" in text


def test_the_shell_example_gets_the_answer_shown(user: Path) -> None:
    [block] = section_blocks(DOC, "Talking to it", "sh")
    [line] = logical_lines(block)
    echo = commands_of(line)[0]
    assert echo[0] == "echo"
    request = echo[1]
    [shown] = section_blocks(DOC, "Talking to it", "text")
    with Served(user / ".vix", env=user_environment(user)) as served:
        assert served.socket == str(user / ".vix" / "run" / "hookbus.sock")
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(30)
            with reachable(served.socket) as address:  # a deep TMPDIR makes a path past sun_path
                client.connect(address)
            client.sendall(request.encode() + b"\n")
            client.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
    assert json.loads(answer) == json.loads(shown)


def test_the_python_example_runs_as_written(user: Path) -> None:
    [code] = section_blocks(DOC, "Talking to it", "python")
    env = user_environment(user)
    with Served(user / ".vix", env=env):
        done = run_python(code, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['allow', 'allow', 'allow']"


def test_without_a_server_the_python_client_says_so(user: Path) -> None:
    [code] = section_blocks(DOC, "Talking to it", "python")
    done = run_python(code, env=user_environment(user))
    assert done.returncode == 1 and "NoServer" in done.stderr
