"""contrib/systemd/hookbus.service: the user unit example runs ``hookbus serve``, stops it
with the signal that lets hooks finish, and reloads it with SIGHUP.

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
    result = verify(unit)

    assert result.returncode == 0, result.stderr
    assert "hookbus.service" not in result.stderr + result.stdout, result.stderr
