"""What ``hookbus serve --http`` listens on, and the token every request must carry.

The listener takes loopback addresses only (127.0.0.0/8 and ::1, as IP literals): any
other address would serve the home's hooks to another machine. The token is
``$HOOKBUS_HTTP_TOKEN`` when set; else the one in ``HOME/run/http.token``, made at the
first start (mode 0600, in the run directory that only this user may enter), and taken
only while it is a regular file of this user's that no one else may read.

The port is another user's to take while no server holds it (Claude Code does not
authenticate the server it posts to). Two things close that window: a listening socket
passed by systemd (socket activation: the .socket unit holds the port across restarts),
taken by ``systemd_socket``; and, when a bind finds the port taken, ``port_holder`` names
whoever listens there from the kernel's tables (another user is a probable squatter).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import stat
import sys
from typing import MutableMapping

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


def accepted_hosts(host: str, port: int) -> frozenset[bytes]:
    """The ``Host`` headers a client of the listener may send: its address and port, as in
    its URL; on port 80, HTTP's default, also the address alone, since clients leave the
    default port out (``Host: 127.0.0.1``, ``Host: [::1]``). Nothing else: a name there
    is a page's DNS rebinding."""
    hosts = {host_header(host, port)}
    if port == 80:
        hosts.add(f"[{host}]" if ":" in host else host)
    return frozenset(name.encode() for name in hosts)


# -- who holds a port ---------------------------------------------------------------------

#: The kernel's tables of TCP sockets, with the uid of each (this network namespace's).
PROC_NET_TCP = ("/proc/net/tcp", "/proc/net/tcp6")
#: The state /proc/net/tcp gives a listening socket.
_LISTENING = "0A"


def listener_uids(host: str, port: int) -> set[int] | None:
    """The uids of the TCP sockets listening where a connection to ``host``:``port`` goes:
    bound to that address, to the wildcard (0.0.0.0, ::) or to its IPv4-mapped form, on
    that port. None when the kernel's tables cannot be read (not Linux)."""
    wanted = ipaddress.ip_address(host)
    uids: set[int] = set()
    readable = False
    for path in PROC_NET_TCP:
        try:
            with open(path, encoding="ascii", errors="replace") as table:
                lines = table.read(8 << 20).splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != _LISTENING:
                continue
            address_hex, _, port_hex = fields[1].partition(":")
            try:
                if int(port_hex, 16) != port or not _takes(_proc_address(address_hex), wanted):
                    continue
                uids.add(int(fields[7]))
            except ValueError:
                continue
    return uids if readable else None


def _proc_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp* prints it: 32-bit words in host order, in hex."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[index:index + 4][::-1] for index in range(0, len(raw), 4)) if sys.byteorder == "little" else raw
    return ipaddress.ip_address(words)


def _takes(bound: ipaddress.IPv4Address | ipaddress.IPv6Address, wanted: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if bound == wanted or bound.is_unspecified:
        return True
    return isinstance(bound, ipaddress.IPv6Address) and bound.ipv4_mapped == wanted


def port_holder(host: str, port: int, home: str) -> str:
    """Who holds ``host``:``port``, and what to do, for the message of a bind that found it
    taken; "" when that cannot be found."""
    uids = listener_uids(host, port)
    if not uids:
        return ""
    me = os.geteuid()
    others = sorted(uid for uid in uids if uid not in (me, 0))
    where = f"{'[' + host + ']' if ':' in host else host}:{port}"
    if others:
        return (
            f"; {_user(others[0])} listens there, another user: probably squatting on the port, so that Claude Code sends "
            "them its token and every envelope, and obeys their answers. Do not run Claude Code with http hooks to it "
            f"until that listener is gone (an administrator finds it with `ss -ltnp 'sport = :{port}'`); then remove "
            f"{token_path(home)} so that the next start makes a new token, and let systemd hold the port across restarts "
            "(contrib/systemd/hookbus.socket)"
        )
    if me in uids:
        return (
            f"; a process of yours listens on {where} (another hookbus serve --http? `ss -ltnp 'sport = :{port}'` "
            "names it): stop it, or choose another port"
        )
    return f"; a process of root's listens on {where} (`ss -ltnp 'sport = :{port}'` names it): choose another port"


def _user(uid: int) -> str:
    import pwd

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


# -- a socket from systemd ----------------------------------------------------------------

#: sd_listen_fds(3): the first descriptor a service manager passes.
LISTEN_FDS_START = 3
#: The variables of socket activation, unset once read so that hooks do not inherit them.
LISTEN_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")
#: The name the .socket unit gives the http listener (``FileDescriptorName=http``).
SYSTEMD_NAME = "http"


def systemd_socket(environ: MutableMapping[str, str] | None = None) -> socket.socket | None:
    """The listening socket systemd passed (socket activation, sd_listen_fds(3)): when
    ``LISTEN_PID`` is this process and ``LISTEN_FDS`` is 1 or more, the descriptor named
    ``http`` in ``LISTEN_FDNAMES``, else the only TCP one. None when none was passed. The
    variables are unset whatever they say, and every passed descriptor is made
    close-on-exec, so that no hook inherits them. ServeError for a socket hookbus must not
    serve on: not a listening TCP socket, or not on a loopback address."""
    environ = os.environ if environ is None else environ
    pid, count_text, names_text = (environ.pop(name, None) for name in LISTEN_VARIABLES)
    if pid is None or count_text is None or pid != str(os.getpid()):
        return None
    try:
        count = int(count_text, 10)
    except ValueError:
        raise ServeError(f"LISTEN_FDS={count_text!r} is not a number; the service manager's socket activation is broken") from None
    if count < 1:
        return None
    descriptors = list(range(LISTEN_FDS_START, LISTEN_FDS_START + count))
    for descriptor in descriptors:
        try:
            os.set_inheritable(descriptor, False)
        except OSError as exc:
            raise ServeError(f"LISTEN_FDS={count} was passed, but descriptor {descriptor} is not open ({exc.strerror})") from None
    names = names_text.split(":") if names_text else []
    if SYSTEMD_NAME in names:
        chosen = [descriptors[names.index(SYSTEMD_NAME)]] if names.index(SYSTEMD_NAME) < count else []
    else:
        chosen = [descriptor for descriptor in descriptors if _is_tcp(descriptor)]
    if len(chosen) != 1:
        what = "none is a TCP socket" if not chosen else f"{len(chosen)} are TCP sockets"
        raise ServeError(
            f"systemd passed {count} descriptor(s) and {what}: give the http one FileDescriptorName={SYSTEMD_NAME} "
            "in the .socket unit (contrib/systemd/hookbus.socket)"
        )
    return _checked_listener(chosen[0])


def _is_tcp(descriptor: int) -> bool:
    try:
        probe = socket.socket(fileno=descriptor)
    except OSError:
        return False
    try:
        return probe.family in (socket.AF_INET, socket.AF_INET6) and probe.type == socket.SOCK_STREAM
    finally:
        probe.detach()  # the descriptor stays open: it is systemd's to give


def _checked_listener(descriptor: int) -> socket.socket:
    """The socket of ``descriptor``: a listening TCP socket on a loopback address, or a
    ServeError that says what it is instead."""
    try:
        sock = socket.socket(fileno=descriptor)
    except OSError as exc:
        raise ServeError(f"the descriptor systemd passed ({descriptor}) is not a socket: {exc.strerror}") from None
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            raise ServeError(
                f"the socket systemd passed (descriptor {descriptor}) is not a TCP socket: use ListenStream=127.0.0.1:PORT"
            )
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise ServeError(f"the socket systemd passed (descriptor {descriptor}) is not listening: leave Accept= out of the .socket unit")
        host, port = sock.getsockname()[:2]
        address = ipaddress.ip_address(host)
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        if not (mapped or address).is_loopback:
            raise ServeError(
                f"the socket systemd passed listens on {url_of(str(address), port)}, which is not a loopback address; "
                "hookbus serves http on 127.0.0.1 or ::1 only: use ListenStream=127.0.0.1:PORT"
            )
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
