"""The gate (``gate.sh`` beside this module): a host's command hook that posts its stdin to
``hookbus serve --http`` with bash's builtins alone, and runs the command bridge on
anything but a whole answer of that server (``hookbus.serve.gatehttp`` answers it).

It costs the host a bash process instead of a Python one, and stays fail closed: with the
server down, the bridge decides in-process, so a fail-closed hook and the home guard deny.
Its command names bash and the script by absolute path, then the bridge's own command::

    /bin/bash /…/hookbus/hosts/gate.sh claude-code /home/me/.vix -- /…/bin/hookbus claude-code-hook --home /home/me/.vix

It reads the server's address and token from ``HOME/run/http.gate`` (0600), so no token
is ever written into a host's settings for it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

#: The host names the gate takes, by the bridge's verb.
GATE_HOSTS = {"claude-code-hook": "claude-code", "gemini-cli-hook": "gemini-cli", "codex-hook": "codex"}
#: The oldest bash the gate posts from (read -N, printf %(...)T); older ones run the bridge.
MIN_BASH = (4, 2)


def gate_script() -> Path:
    """Where the gate is: shipped in the package, beside this module."""
    return Path(__file__).resolve().with_name("gate.sh")


def find_bash() -> str | None:
    """bash's absolute path on this machine (the host runs the gate with it)."""
    for candidate in ("/bin/bash", "/usr/bin/bash"):
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("bash")
    return os.path.abspath(found) if found else None


def bash_version(bash: str) -> tuple[int, int] | None:
    """(major, minor) of ``bash``; None when it cannot be run."""
    try:
        result = subprocess.run(
            [bash, "-c", 'echo "${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}"'],
            capture_output=True, text=True, timeout=10, env={"PATH": os.defpath},
        )
        major, minor = result.stdout.split()
        return int(major), int(minor)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def gate_command(bridge_words: Sequence[str], verb: str, home: str, bash: str | None = None) -> str:
    """The host's command for the gate in front of the bridge ``bridge_words`` (the words
    of ``install.bridge_command``: ``… VERB --home HOME``), shell-quoted."""
    words = [bash or find_bash() or "bash", str(gate_script()), GATE_HOSTS[verb], os.path.abspath(home), "--", *bridge_words]
    return " ".join(shlex.quote(word) for word in words)


def is_gate_command(command: object) -> bool:
    """Whether ``command`` runs a hookbus gate (from any install of hookbus)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) >= 6 and os.path.basename(words[1]) == "gate.sh" and words[2] in GATE_HOSTS.values() and words[4] == "--"
