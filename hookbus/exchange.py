"""One HTTP request under one deadline, for runners that talk to a server: connecting, the
TLS handshake, sending, the status line and headers, the body.

The prompt provider and hookbus-http use it; a third party's runner can too
(``hookbus.exchange.http_request``). A socket timeout bounds each operation on its own, so a
server that drips a byte every half second (or a TLS handshake that does) could hold a
request for ever. Here a watchdog shuts the socket down at the deadline, and the fire's
CancelToken (``close()``, an interrupt) does the same: that ends every pending and future
operation on it at once, whatever phase the request is in. On Linux it even aborts a
connect still waiting for the server's SYN-ACK. Each operation also gets a socket timeout of
what remains, in case the watchdog is late.

One watchdog thread serves every request of the process: it keeps the deadlines in a heap.
A ``threading.Timer`` per request would start a thread per request; measured here that is
300 µs per request (start, cancel, join), against 2 µs to push and pop a heap entry: half
again the cost of a whole request to a server on localhost. The thread starts with the first
request and ends after ``IDLE_SECONDS`` without one, so an idle daemon holds no thread.

What this cannot bound: the name lookup. ``getaddrinfo`` blocks in the C library with no
socket to shut down; the resolver's own timeouts (resolv.conf: 5 s per try, 2 tries per
server by default) bound it. An IP address or ``localhost`` needs no lookup over the network.
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Mapping
from urllib.parse import urlsplit

import attrs

if TYPE_CHECKING:
    import http.client
    import ssl

    from hookbus.runners import CancelToken

#: The longest socket timeout set. CPython hands poll() the timeout as an int of
#: milliseconds and wraps past 2**31 of them: a timeout of 49.7 days + 1 s ends after 1 s.
#: A hook timeout may be up to threading.TIMEOUT_MAX (292 years): one silent read longer
#: than this ends as a timeout even when the deadline is later.
MAX_SOCKET_TIMEOUT = 2_000_000.0  # 23 days
#: The watchdog waits at most this long at a time, whatever its next deadline.
MAX_WAIT = 3600.0
#: The watchdog thread ends after this long without a deadline to watch.
IDLE_SECONDS = 0.5


class DeadlinePassed(TimeoutError):
    """The deadline passed: whatever the request saw after it is not the reply."""


class Cancelled(Exception):
    """The request's CancelToken fired (the bus is closing)."""


class Watchdog:
    """Calls each registered callback at its deadline, on one daemon thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._condition = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int]] = []
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` at ``deadline`` (``time.monotonic()``); returns a function that
        cancels the call. The callback runs on the watchdog thread: it must not block."""
        with self._condition:
            ident = next(self._ids)
            self._callbacks[ident] = callback
            heapq.heappush(self._heap, (deadline, ident))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._heap[0][1] == ident:  # sooner than what the thread waits for
                self._condition.notify()
        return lambda: self._forget(ident)

    def _forget(self, ident: int) -> None:
        with self._condition:
            if self._callbacks.pop(ident, None) is None:
                return
            if not self._callbacks:
                self._heap.clear()
                self._condition.notify()  # start the idle countdown now
            elif len(self._heap) > 64 + 2 * len(self._callbacks):
                # Most requests end long before their deadline: without this, a long hook
                # timeout would keep the entries of finished requests for that long.
                self._heap = [entry for entry in self._heap if entry[1] in self._callbacks]
                heapq.heapify(self._heap)

    def _run(self) -> None:
        idle_since: float | None = None
        self._condition.acquire()
        try:
            while True:
                heap = self._heap
                while heap and heap[0][1] not in self._callbacks:
                    heapq.heappop(heap)
                now = time.monotonic()
                if not heap:
                    idle_since = now if idle_since is None else idle_since
                    if now - idle_since >= IDLE_SECONDS:
                        self._thread = None  # the next call_at starts a new thread
                        return
                    self._condition.wait(IDLE_SECONDS - (now - idle_since))
                    continue
                idle_since = None
                deadline, ident = heap[0]
                if deadline > now:
                    self._condition.wait(min(deadline - now, MAX_WAIT))
                    continue
                heapq.heappop(heap)
                callback = self._callbacks.pop(ident)
                self._condition.release()
                try:
                    callback()
                except Exception:  # a failing callback must not stop every other deadline
                    pass
                finally:
                    self._condition.acquire()
        finally:
            self._condition.release()


_watchdog = Watchdog("hookbus-deadline")


class Cutoff:
    """Ends one exchange at ``deadline`` or when ``cancel`` fires, by shutting its socket
    down. Use it as a context manager around the whole exchange."""

    def __init__(self, deadline: float, cancel: CancelToken) -> None:
        self.deadline = deadline
        self._cancel = cancel
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._done = False
        self.reason: str | None = None
        self._forget_deadline: Callable[[], None] = lambda: None
        self._forget_cancel: Callable[[], None] = lambda: None

    def __enter__(self) -> Cutoff:
        self._forget_deadline = _watchdog.call_at(self.deadline, lambda: self.fire("deadline"))
        self._forget_cancel = self._cancel.on_cancel(lambda: self.fire("cancel"))
        try:
            self.check()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._done = True
            self._sock = None
        self._forget_deadline()
        self._forget_cancel()

    def attach(self, sock: socket.socket) -> None:
        """The socket to shut down, held here because http.client lets go of its own once
        a reply says the connection closes after it. Raises if the cutoff fired already."""
        with self._lock:
            self._sock = sock
        self.check()

    def fire(self, reason: str) -> None:
        with self._lock:
            if self._done or self.reason is not None:
                return
            self.reason = reason
            if self._sock is not None:
                try:
                    # The plain socket's shutdown, also for an SSL socket: it ends the TCP
                    # connection under TLS without touching the TLS object another thread uses.
                    socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
                except OSError:
                    pass

    def check(self) -> None:
        """Raise if the cutoff fired, or if the deadline passed while nobody was looking."""
        if self.reason == "cancel" or self._cancel.cancelled:
            raise Cancelled
        if self.reason == "deadline" or time.monotonic() >= self.deadline:
            raise DeadlinePassed

    def timeout(self) -> float:
        """The socket timeout for the next operation: what remains, capped."""
        self.check()
        return min(max(self.deadline - time.monotonic(), 0.001), MAX_SOCKET_TIMEOUT)


_tls_context: ssl.SSLContext | None = None
_tls_lock = threading.Lock()


def tls_context() -> ssl.SSLContext:
    """The default verifying context, made once: loading the CA store costs milliseconds."""
    global _tls_context
    with _tls_lock:
        if _tls_context is None:
            import ssl

            context = ssl.create_default_context()
            context.set_alpn_protocols(["http/1.1"])
            _tls_context = context
        return _tls_context


def open_socket(host: str, port: int, cutoff: Cutoff, tls: bool) -> socket.socket:
    """A connected socket (TLS-wrapped, handshake done, when ``tls``) to ``host``, every
    step of it under ``cutoff``. The name lookup is the one step nothing can interrupt."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    cutoff.check()
    last_error: OSError | None = None
    for family, kind, protocol, _, address in infos:
        sock = socket.socket(family, kind, protocol)
        try:
            cutoff.attach(sock)  # before the connect: shutting down aborts a pending one
            sock.settimeout(cutoff.timeout())
            sock.connect(address)
        except OSError as exc:
            sock.close()
            cutoff.check()  # the cutoff ended it: no other address gets a try
            last_error = exc
            continue
        except BaseException:
            sock.close()
            raise
        break
    else:
        raise last_error or OSError(f"no address found for {host}")
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as http.client does
        if not tls:
            return sock
        # Without the handshake yet: it must run under the cutoff like every other step.
        secure = tls_context().wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    except BaseException:
        sock.close()
        raise
    try:
        cutoff.attach(secure)  # wrap_socket took over the descriptor: shut this one down now
        secure.settimeout(cutoff.timeout())
        secure.do_handshake()
    except BaseException:
        secure.close()
        raise
    return secure


@attrs.frozen
class Reply:
    status: int
    reason: str
    #: At most ``max_body + 1`` bytes: more than ``max_body`` means the reply was too big.
    body: bytes


def http_request(
    url: str,
    method: str,
    body: bytes,
    headers: Mapping[str, str],
    deadline: float,
    cancel: CancelToken,
    max_body: int,
) -> Reply:
    """Send ``body`` to ``url`` and read the reply, all of it under ``deadline`` and
    ``cancel``. Raises DeadlinePassed (a TimeoutError) or Cancelled when those ended it,
    OSError or http.client.HTTPException when the exchange failed. Only the host name of
    the URL is used to connect: its userinfo is the caller's to send (or not)."""
    import http.client

    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if tls else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection: http.client.HTTPConnection
    if tls:
        connection = http.client.HTTPSConnection(host, port, context=tls_context())
    else:
        connection = http.client.HTTPConnection(host, port)
    response: http.client.HTTPResponse | None = None
    sock: socket.socket | None = None
    with Cutoff(deadline, cancel) as cutoff:
        try:
            sock = open_socket(host, port, cutoff, tls)
            connection.sock = sock  # http.client sends on it instead of connecting itself
            sock.settimeout(cutoff.timeout())
            connection.request(method, target, body=body, headers=dict(headers))
            sock.settimeout(cutoff.timeout())
            response = connection.getresponse()
            data = _read(response, sock, cutoff, max_body)
            cutoff.check()  # an end of file the cutoff caused is not the end of the body
            if response.length and len(data) <= max_body:  # Content-Length said more
                raise http.client.IncompleteRead(data, response.length)
            return Reply(response.status, response.reason, data)
        except (OSError, http.client.HTTPException):
            cutoff.check()  # the cutoff caused it: say so, not "connection reset"
            raise
        finally:
            if response is not None:
                response.close()  # it holds a reference to the socket of its own
            connection.close()
            if sock is not None:
                sock.close()


def _read(response: http.client.HTTPResponse, sock: socket.socket, cutoff: Cutoff, max_body: int) -> bytes:
    """The body, up to one byte past ``max_body``, each read under what remains."""
    chunks: list[bytes] = []
    size = 0
    while size <= max_body:
        sock.settimeout(cutoff.timeout())
        chunk = response.read1(max_body + 1 - size)
        if not chunk:
            break
        size += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks)
