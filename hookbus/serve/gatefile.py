"""``HOME/run/http.gate``: how the gate finds this server, and knows it is this server.

One line, written when the http listener starts and removed when it stops::

    PID HOST PORT PROOF TOKEN

The gate (``hookbus/hosts/gate.sh``) reads it with bash's own ``read``: no process. It
posts only while PID is a live process of the user's (``/proc/PID`` is theirs), sends
TOKEN as its bearer token, and believes an answer only when it carries PROOF
(``hookbus-proof``). PROOF is new at every start and sent by no client, so a process of
another user that took the port while the server was down learns the token from the
request at most, never the proof: its answers are not obeyed, and the gate runs the
bridge instead.

The file is 0600 in the 0700 run directory, like ``http.token``: its token is the
server's, and Claude Code's settings files hold none of it.
"""

from __future__ import annotations

import os
import secrets
import stat

from hookbus.serve.rendezvous import run_dir

#: The run file's name in ``HOME/run``.
GATE_FILE = "http.gate"


def gate_file_path(home: str) -> str:
    return os.path.join(run_dir(home), GATE_FILE)


def new_proof() -> str:
    return secrets.token_urlsafe(24)


def write_gate_file(home: str, host: str, port: int, token: str, proof: str) -> None:
    """Write the run file for the listener on ``host``:``port`` of this process, in one
    rename. OSError when it cannot be written (the listener serves all the same: gates
    then run the bridge)."""
    path = gate_file_path(home)
    line = f"{os.getpid()} {host} {port} {proof} {token}\n".encode()
    temporary = f"{path}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            if os.write(descriptor, line) != len(line):
                raise OSError(28, "the run file was cut short")
        finally:
            os.close(descriptor)
        os.rename(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _run_file_words(home: str) -> list[str] | None:
    """The run file's five fields, believed as the gate believes them: only from a file
    of this user's, not a link, in a run directory of this user's that is not a link
    either (another user's would name their port and proof). None otherwise."""
    path = gate_file_path(home)
    try:
        directory = os.lstat(os.path.dirname(path))
        if stat.S_ISLNK(directory.st_mode) or directory.st_uid != os.geteuid():
            return None
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(descriptor, encoding="ascii", errors="replace") as handle:
            if os.fstat(handle.fileno()).st_uid != os.geteuid():
                return None
            words = handle.readline(4096).split()
    except OSError:
        return None
    return words if len(words) == 5 else None


def read_gate_file(home: str) -> dict[str, str] | None:
    """The run file's fields (pid, host, port; the secrets left out), for ``status``;
    None when there is none the gate would believe."""
    words = _run_file_words(home)
    return None if words is None else {"pid": words[0], "host": words[1], "port": words[2]}


def gate_token(home: str) -> str | None:
    """The token the gate sends to this home's server (the run file's); None when there is
    no run file the gate would believe."""
    words = _run_file_words(home)
    return None if words is None else words[4]


def remove_gate_file(home: str, proof: str) -> None:
    """Remove the run file when it is still this server's (holds ``proof``)."""
    path = gate_file_path(home)
    try:
        with open(path, "rb") as handle:
            words = handle.readline(4096).split()
        if len(words) == 5 and words[3] == proof.encode():
            os.unlink(path)
    except OSError:
        pass
