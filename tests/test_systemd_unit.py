"""contrib/systemd/hookbus.service: the user unit example runs ``hookbus serve``, stops it
with the signal that lets hooks finish, and reloads it with SIGHUP. hookbus.socket holds
the http port across restarts (socket activation), on loopback, named as serve looks for
it; and ``hookbus serve`` really takes a socket passed that way (systemd-socket-activate).

Read with configparser (a unit file is close enough to INI for these keys); checked with
``systemd-analyze verify --user`` too where that works without a running systemd.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent.parent / "contrib" / "systemd" / "hookbus.service"
SOCKET = UNIT.with_name("hookbus.socket")


def read_unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",), comment_prefixes=("#", ";"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are case-sensitive
    parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    return parser


def seconds(value: str) -> float:
    units = {"ms": 0.001, "s": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}
    for suffix, factor in units.items():
        if value.endswith(suffix) and value[: -len(suffix)].isdigit():
            return int(value[: -len(suffix)]) * factor
    return float(value)


@pytest.mark.timeout(60)
def test_unit_runs_serve_and_signals_it() -> None:
    unit = read_unit(UNIT)
    service = unit["Service"]

    assert "hookbus serve" in service["ExecStart"]
    assert service["ExecStart"].startswith(("/", "%h/"))  # systemd wants an absolute path
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["KillSignal"] == "SIGTERM"
    assert service.get("KillMode") == "mixed"  # hooks are not sent SIGTERM behind the server's back
    assert service["Restart"] == "on-failure"
    assert seconds(service["TimeoutStopSec"]) >= 30
    assert unit["Install"]["WantedBy"] == "default.target"  # a user unit: no multi-user.target
    assert "Environment" not in service  # VIX_HOME is an example, commented out
    assert "#Environment=VIX_HOME=" in UNIT.read_text(encoding="utf-8")


@pytest.mark.timeout(60)
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """No warning from systemd-analyze, ExecStart pointed at a hookbus that exists."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not on PATH")
    hookbus = Path(sys.executable).with_name("hookbus")
    if not hookbus.exists():
        pytest.skip(f"no hookbus script beside {sys.executable} to point ExecStart at")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime), "PATH": "/usr/bin:/bin", "SYSTEMD_LOG_COLOR": "0"}

    def verify(unit: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [analyze, "verify", "--user", str(unit)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30
        )

    probe = tmp_path / "probe.service"
    probe.write_text("[Service]\nExecStart=/bin/true\n")
    probed = verify(probe)
    if probed.returncode != 0 or probed.stderr.strip():
        pytest.skip(f"systemd-analyze verify --user does not work here: {probed.stderr.strip()[:200]}")

    unit = tmp_path / "hookbus.service"
    unit.write_text(UNIT.read_text(encoding="utf-8").replace("%h/.local/bin/hookbus", str(hookbus)))
    (tmp_path / "hookbus.socket").write_text(SOCKET.read_text(encoding="utf-8"))
    for name in ("hookbus.service", "hookbus.socket"):
        result = verify(tmp_path / name)
        assert result.returncode == 0, result.stderr
        assert "hookbus." not in result.stderr + result.stdout, result.stderr


@pytest.mark.timeout(60)
def test_the_socket_unit_holds_the_http_port_on_loopback_for_serve() -> None:
    import ipaddress

    from hookbus.serve.httpconfig import SYSTEMD_NAME

    unit = read_unit(SOCKET)
    socket_section = unit["Socket"]
    host, _, port = socket_section["ListenStream"].rpartition(":")
    assert ipaddress.ip_address(host.strip("[]")).is_loopback and int(port) > 0
    assert socket_section["FileDescriptorName"] == SYSTEMD_NAME  # what serve looks for in LISTEN_FDNAMES
    assert socket_section.get("Accept", "no") == "no"  # one server takes the listening socket
    assert unit["Install"]["WantedBy"] == "sockets.target"
    # The service it activates (the same name) serves http on that address.
    assert f"#ExecStart=%h/.local/bin/hookbus serve --http {host}:{port}" in UNIT.read_text(encoding="utf-8")


@pytest.mark.timeout(90)
def test_serve_takes_the_socket_systemd_socket_activate_passes(tmp_path: Path) -> None:
    """systemd's own tool passes the socket as a .socket unit would (it starts the service
    at the first connection, which waits meanwhile): serve answers that connection."""
    import json
    import os
    import socket
    import time

    activate = shutil.which("systemd-socket-activate")
    if activate is None:
        pytest.skip("systemd-socket-activate is not on PATH")
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "run").mkdir(mode=0o700)
    token = "a-token-for-the-activation-test-0123"
    (home / "run" / "http.token").write_text(token + "\n")
    (home / "run" / "http.token").chmod(0o600)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {key: value for key, value in os.environ.items() if key != "HOOKBUS_HTTP_TOKEN"}
    process = subprocess.Popen(
        [activate, "-l", f"127.0.0.1:{port}", "--fdname=http", sys.executable, "-m", "hookbus", "serve", "--home", str(home),
         "--http", f"127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not listening(port):
            assert process.poll() is None and time.monotonic() < deadline, "systemd-socket-activate did not listen"
            time.sleep(0.05)
        body = json.dumps({"session_id": "s", "hook_event_name": "Stop"}).encode()
        request = (
            f"POST /claude-code HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(request)
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 "), answer
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0 and f"listening on http://127.0.0.1:{port}" in stderr, stderr


def listening(port: int) -> bool:
    """Whether something listens on 127.0.0.1:PORT, asked without connecting (a connection
    would start the service)."""
    from hookbus.serve.httpconfig import listener_uids

    return bool(listener_uids("127.0.0.1", port))
