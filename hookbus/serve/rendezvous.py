"""Where ``hookbus serve`` and its clients meet: the home, the socket's path, and Unix
sockets that check who is at the other end.

The interpreter's built-in modules only (``_socket``, not ``socket``, which imports
enum and selectors): ``hookbus emit`` and the host bridges use this on their way to a live
server, where every millisecond of start-up counts.
"""

from __future__ import annotations

import os
import time
import _socket
import _struct

# Where a home is, and what in a client's environment keeps it from a server: the engine's
# own answers, given here to the clients that find a server.
from hookbus.homepath import in_process_reason as in_process_reason
from hookbus.homepath import home_root as home_root
from hookbus.homepath import kernel_path as kernel_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any, Callable, Mapping, TypeVar

    AnySocket = TypeVar("AnySocket", bound=_socket.socket)

#: Overrides the socket's path, for ``hookbus serve`` and its clients alike.
SOCKET_ENV = "HOOKBUS_SOCKET"
#: The directory in the home that holds the socket and the lock: mode 0700.
RUN_DIR = "run"
SOCKET_NAME = "hookbus.sock"
LOCK_NAME = "serve.lock"
#: The longest line either side of the protocol accepts, its newline excluded.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: How long connecting waits for room while the server's queue of unaccepted connections is full.
CONNECT_TIMEOUT_SECONDS = 5.0
#: How long a client gives a server to start a request. It sends ``"start_by"``, this
#: far ahead; a server that reads the request later runs none of it (TOO_LATE), so a client
#: that waited this long can run the hooks itself without running them twice.
START_WINDOW_SECONDS = 2.0
#: How long past ``start_by`` a client still waits for the server's word that it started:
#: the server checks the time just before it says so.
START_GRACE_SECONDS = 0.5
#: How long past the time the server said its hooks may take a client still waits for the
#: answer; then it decides as the hooks' own on_error says for a failure.
ANSWER_MARGIN_SECONDS = 2.0
#: The notification a server sends before it starts the hooks of a request that has a
#: ``start_by``: ``{"method": "started", "params": {"id": ..., "wait": SECONDS}}``.
STARTED = "started"
#: sun_path holds 108 bytes with its NUL. A longer path is reached through /proc/self/fd.
_SUN_PATH_MAX = 107
_CREDENTIALS = _struct.Struct("3i")
_TIMEVAL = _struct.Struct("ll")


class NoServer(ConnectionError):
    """Nothing answers on the socket (no file there, or no one listening)."""


class UntrustedPeer(ConnectionError):
    """The other end of the socket is neither this user nor root."""


class NotStarted(ConnectionError):
    """The server did not start the request in time (stopped, wedged, or gone before it
    said it started): none of its hooks ran, and none will."""


class NoAnswer(ConnectionError):
    """The server started the request's hooks and then gave no answer in time (it stopped,
    died, or sent what is no answer): they may have run."""


class ServerBusy(ConnectionError):
    """A server listens, but its queue of connections waiting to be accepted stayed full
    for the whole connect timeout (it is stopped, or far behind)."""


def run_dir(home: str) -> str:
    return os.path.join(home, RUN_DIR)


def default_socket_path(home: str) -> str:
    return os.path.join(home, RUN_DIR, SOCKET_NAME)


def socket_path(explicit: str | None, home: str) -> str:
    """``explicit`` (``--socket``), else ``$HOOKBUS_SOCKET``, else ``HOME/run/hookbus.sock``."""
    chosen = explicit or os.environ.get(SOCKET_ENV) or default_socket_path(home)
    return os.path.abspath(os.path.expanduser(chosen))


def trusted_uid(uid: int) -> bool:
    """Whether a peer running as ``uid`` may talk to this process: this user, or root."""
    return uid == os.geteuid() or uid == 0


def peer_uid(sock: _socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket (SO_PEERCRED:
    the kernel's word, taken when the connection was made, not anything the peer sent)."""
    _, uid, _ = _CREDENTIALS.unpack(sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _CREDENTIALS.size))
    return int(uid)


class reachable:
    """``with reachable(path) as address``: an address ``bind`` and ``connect`` accept for
    ``path``: itself, or, when it is too long for sun_path, the same file reached through a
    descriptor of its directory. (A class: contextlib costs ``hookbus emit`` milliseconds.)"""

    def __init__(self, path: str) -> None:
        self._path = path
        self._descriptor: int | None = None

    def __enter__(self) -> str:
        if len(os.fsencode(self._path)) <= _SUN_PATH_MAX:
            return self._path
        directory, name = os.path.split(self._path)
        self._descriptor = os.open(directory or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return f"/proc/self/fd/{self._descriptor}/{name}"

    def __exit__(self, *exc_info: object) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)
            self._descriptor = None


def _connect_waiting_for_room(sock: _socket.socket, address: str, timeout: float | None) -> None:
    """Connect, waiting up to ``timeout`` while the server's accept queue is full.

    A Unix socket with a Python timeout is non-blocking, and its connect fails at once with
    EAGAIN when the queue is full (it never completes later, as TCP's does). A blocking
    connect sleeps in the kernel until there is room, bounded by SO_SNDTIMEO."""
    if timeout is not None and timeout <= 0:
        sock.setblocking(False)
        sock.connect(address)
        return
    if timeout is not None:
        seconds = int(timeout)
        bound = _TIMEVAL.pack(seconds, max(1, int((timeout - seconds) * 1_000_000)))
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_SNDTIMEO, bound)
    sock.connect(address)
    if timeout is not None:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_SNDTIMEO, _TIMEVAL.pack(0, 0))


def connect(path: str, timeout: float | None = None) -> socket.socket:
    """A connection to the server on ``path``, whose peer is this user or root.

    NoServer when nothing listens there; UntrustedPeer when another user's process does
    (it would be sent envelopes, and its answers obeyed); ServerBusy when the server's
    accept queue stays full for ``timeout`` seconds (until then, it waits for room)."""
    import socket

    return connect_as(socket.socket, path, timeout)


def connect_as(kind: type[AnySocket], path: str, timeout: float | None = None) -> AnySocket:
    """``connect``, to a socket of class ``kind``: ``socket.socket``, or the built-in
    ``_socket.socket`` that it extends, for a client that must not import ``socket``."""
    sock = kind(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    try:
        try:
            with reachable(path) as address:
                _connect_waiting_for_room(sock, address, timeout)
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            raise NoServer(f"no server on {path}: {exc.strerror}") from None
        except BlockingIOError:
            raise ServerBusy(
                f"the server on {path} accepted no connection in {timeout:g} s: its queue of "
                "waiting connections is full (is it stopped, or overloaded?)"
            ) from None
        sock.settimeout(timeout)
        uid = peer_uid(sock)
        if not trusted_uid(uid):
            raise UntrustedPeer(
                f"the server on {path} runs as uid {uid}, not as you (uid {os.geteuid()}) or "
                "root; nothing was sent to it"
            )
    except BaseException:
        sock.close()
        raise
    return sock


def read_line(sock: _socket.socket, buffer: bytearray, path: str, give_up: float | None = None) -> bytes:
    """The next line ``sock`` sends, without its newline; ``buffer`` holds what came before
    (and keeps what comes after it). ConnectionError when the server on ``path`` closes
    first, or sends a line longer than MAX_LINE_BYTES. ``give_up`` (time.monotonic()): wait
    until then at most, TimeoutError after (what arrived by then counts: a last look is
    taken without waiting); None: as long as the socket's own timeout says."""
    start = 0
    while True:
        end = buffer.find(b"\n", start)
        if end >= 0:
            line = bytes(buffer[:end])
            del buffer[: end + 1]
            return line
        if len(buffer) > MAX_LINE_BYTES:
            raise ConnectionError(f"the server on {path} sent a line longer than {MAX_LINE_BYTES} bytes")
        start = len(buffer)
        if give_up is None:
            chunk = sock.recv(1 << 16)
        else:
            try:
                sock.settimeout(max(give_up - time.monotonic(), 0.0))
                chunk = sock.recv(1 << 16)
            except (TimeoutError, BlockingIOError):
                raise TimeoutError from None
        if not chunk:
            raise ConnectionError(f"the server on {path} closed the connection before answering")
        buffer += chunk


def await_response(
    sock: _socket.socket, buffer: bytearray, path: str, wanted: object, parse: Callable[[str], Any]
) -> Any:
    """The response to request ``wanted``, sent with a ``start_by`` of
    START_WINDOW_SECONDS from now: wait for the server's ``started`` or its answer until
    then (plus a grace), and after ``started`` for as long as it said its hooks may take
    (plus a margin). NotStarted when nothing ran; NoAnswer when the hooks may have run.
    Responses to other requests are skipped; a null-id error (the server refusing the
    connection) is returned as the response."""
    give_up = time.monotonic() + START_WINDOW_SECONDS + START_GRACE_SECONDS
    started = False
    while True:
        try:
            line = read_line(sock, buffer, path, give_up)
            message = parse(line.decode())
        except TimeoutError:
            if started:
                raise NoAnswer(f"the server on {path} started the hooks and gave no answer in time (is it stopped?), so they may have run") from None
            raise NotStarted(f"the server on {path} did not start the request within {START_WINDOW_SECONDS:g} s (is it stopped or overloaded?), so nothing ran") from None
        except (OSError, ValueError) as exc:
            if started:
                raise NoAnswer(f"{exc}, after it had started the hooks, so they may have run") from None
            raise NotStarted(f"{exc}, before it had started the request, so nothing ran") from None
        if message.__class__ is not dict:
            continue
        if message.get("method") == STARTED:
            params = message.get("params")
            if params.__class__ is dict and params.get("id") == wanted:
                wait = params.get("wait")
                seconds = float(wait) if wait.__class__ in (int, float) and wait >= 0 else 0.0
                started = True
                give_up = time.monotonic() + min(seconds, MAX_WAIT_SECONDS) + ANSWER_MARGIN_SECONDS
            continue
        if message.get("id") == wanted or (message.get("id") is None and "error" in message):
            return message


#: The longest a client waits for hooks that the server says take longer (a hook may have
#: a timeout of centuries): a month.
MAX_WAIT_SECONDS = 30 * 24 * 3600.0
