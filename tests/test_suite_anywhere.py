"""The suite passes wherever a user checks the project out: here, the tests that act as
another user or assume something of the machine's directories, run from a copy of the
checkout under a directory only its owner may enter (a 0700 home, a ``mktemp -d`` folder),
with a private TMPDIR (as macOS gives each user). Each must pass, or skip saying which
assumption does not hold: none may fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]

#: The tests that once failed from such a place, for the other user's sake or the temp dir's.
SLICE = [
    "tests/adversarial/test_attack_hook_runs.py",
    "tests/adversarial/test_attack_edges.py::test_a_client_the_server_refuses_runs_in_process",
    "tests/adversarial/test_attack_trust.py::test_a_dangling_link_others_could_fill_in_is_refused",
    "tests/test_permissions.py::test_non_root_bus_trusts_itself_and_root_but_nobody_else",
    # Raw socket clients, on a socket path past sun_path under the private TMPDIR:
    "tests/adversarial/test_attack_serve.py::test_another_user_who_reaches_the_socket_is_refused_before_a_byte_is_read",
    "tests/adversarial/test_attack_serve.py::test_a_client_that_never_reads_cannot_block_the_others",
    "tests/adversarial/test_attack_serve.py::test_more_clients_than_the_server_has_descriptors_are_shed_and_it_recovers",
    "tests/adversarial/test_attack_serve.py::test_a_full_accept_queue_makes_a_client_wait_not_fail",
]


@pytest.mark.timeout(600)
def test_a_slice_passes_from_a_private_directory_with_a_private_tmpdir(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    checkout = private / "hookbus"
    ignore = shutil.ignore_patterns("__pycache__", ".mypy_cache", ".pytest_cache")
    for name in ("hookbus", "plugins", "tests"):
        shutil.copytree(REPOSITORY / name, checkout / name, ignore=ignore)
    shutil.copy2(REPOSITORY / "pyproject.toml", checkout / "pyproject.toml")
    temporary = private / "tmp"
    temporary.mkdir(mode=0o700)
    environ = {
        key: value for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "VIX_", "HOOKBUS_")) and key not in ("PYTHONPATH", "TMPDIR", "TEMP", "TMP")
    }
    # The copy's hookbus first: this venv's editable install points at the original.
    environ.update(TMPDIR=str(temporary), PYTHONPATH=os.pathsep.join([str(checkout), str(checkout / "plugins")]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *SLICE],
        cwd=checkout, env=environ, capture_output=True, text=True, timeout=540,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, f"{summary}\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    if os.geteuid() == 0:  # root runs the cross-user attacks: none may be skipped for the place
        assert "skipped" not in summary, done.stdout[-4000:]
