"""What ``hookbus serve --http`` listens on, and the token every request must carry.

The listener takes loopback addresses only (127.0.0.0/8 and ::1, as IP literals): any
other address would serve the home's hooks to another machine. The token is
``$HOOKBUS_HTTP_TOKEN`` when set; else the one in ``HOME/run/http.token``, made at the
first start (mode 0600, in the run directory that only this user may enter), and taken
only while it is a regular file of this user's that no one else may read.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import stat

from hookbus.serve.listener import ServeError
from hookbus.serve.rendezvous import run_dir

#: The variable that gives the token; the file that keeps it otherwise (in the run directory).
TOKEN_VARIABLE = "HOOKBUS_HTTP_TOKEN"
TOKEN_FILE = "http.token"
#: A token shorter than this is refused: it could be guessed.
MIN_TOKEN_CHARS = 16
#: What a token read from the file may be, at most.
MAX_TOKEN_BYTES = 4096


def parse_http_address(text: str) -> tuple[str, int]:
    """``(host, port)`` for ``--http HOST:PORT`` (``[::1]:PORT`` for IPv6); ServeError for
    an address that is not loopback, or not an address."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ServeError(f"--http {text}: expected HOST:PORT, such as 127.0.0.1:8787 (PORT 0 picks a free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text, 10)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ServeError(f"--http {text}: the port must be a number from 0 to 65535 (0 picks a free one)")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ServeError(
            f"--http {text}: {host!r} is not an IP address; use 127.0.0.1 (or ::1): the listener binds loopback only"
        ) from None
    if not address.is_loopback:
        raise ServeError(
            f"--http {text}: {host} is not a loopback address; hookbus serves http on 127.0.0.1 or ::1 only, "
            "since anyone who can reach the port can ask it to run your hooks"
        )
    return str(address), port


def url_of(host: str, port: int) -> str:
    """How a client names the listener: ``http://127.0.0.1:PORT``, ``http://[::1]:PORT``."""
    return f"http://{host_header(host, port)}"


def host_header(host: str, port: int) -> str:
    """The ``Host`` a client of the listener sends: its address and port, as in its URL."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def token_path(home: str) -> str:
    return os.path.join(run_dir(home), TOKEN_FILE)


def load_token(home: str) -> tuple[str, str]:
    """The token, and where it comes from (for messages): ``$HOOKBUS_HTTP_TOKEN``, or the
    token file, made when missing. ServeError when either cannot be used."""
    given = os.environ.get(TOKEN_VARIABLE)
    if given:
        _check_token(given, f"${TOKEN_VARIABLE}")
        return given, f"${TOKEN_VARIABLE}"
    path = token_path(home)
    token = _read_token_file(path)
    if token is None:
        token = secrets.token_urlsafe(32)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            # Another start made it meanwhile: take that one.
            token = _read_token_file(path)
            if token is None:
                raise ServeError(f"{path} vanished while it was being made; start hookbus serve again") from None
            return token, path
        except OSError as exc:
            raise ServeError(f"cannot make the token file {path}: {exc.strerror}") from None
        try:
            written = os.write(descriptor, token.encode() + b"\n")
            if written != len(token) + 1:
                raise OSError(28, "the token was cut short")
        except OSError as exc:
            os.unlink(path)  # a token file cut short must not be found next time
            raise ServeError(f"cannot write the token file {path}: {exc.strerror or exc}") from None
        finally:
            os.close(descriptor)
    return token, path


def _read_token_file(path: str) -> str | None:
    """The token in ``path``; None when there is no such file. ServeError when it is not a
    regular file of this user's, others may read it, or it holds no usable token."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ServeError(f"cannot read the token file {path}: {exc.strerror}; remove it, and hookbus makes a new one") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ServeError(f"the token file {path} is not a regular file; remove it, and hookbus makes a new one")
        if info.st_uid != os.geteuid():
            raise ServeError(
                f"the token file {path} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}): whoever made it "
                "knows the token; remove it, and hookbus makes a new one"
            )
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise ServeError(
                f"the token file {path} may be read by others (mode {mode:04o}), who could then ask this server to "
                "run your hooks; remove it, and hookbus makes a new one (mode 0600)"
            )
        data = os.read(descriptor, MAX_TOKEN_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_TOKEN_BYTES:
        raise ServeError(f"the token file {path} holds more than {MAX_TOKEN_BYTES} bytes; remove it, and hookbus makes a new one")
    token = data.decode("ascii", "replace").strip()
    _check_token(token, path)
    return token


def _check_token(token: str, where: str) -> None:
    if len(token) < MIN_TOKEN_CHARS or not all(33 <= ord(char) < 127 for char in token):
        fix = (
            f"unset {TOKEN_VARIABLE}, and hookbus makes one in HOME/run/{TOKEN_FILE}" if where.startswith("$")
            else "remove it, and hookbus makes a new one"
        )
        raise ServeError(f"the token in {where} must be at least {MIN_TOKEN_CHARS} printable ASCII characters with no space ({fix})")
