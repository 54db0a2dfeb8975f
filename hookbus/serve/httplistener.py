"""``hookbus serve --http``: an HTTP/1.1 listener on loopback, beside the Unix socket, in the
same process and on the same bus. Its routes are ``POST /claude-code``, Claude Code's http
hooks (``hookbus.serve.claudehttp``); ``POST /gate/claude-code``, ``POST
/gate/gemini-cli`` and ``POST /gate/codex``, the gate's, and ``POST /gemini-cli``, what ``hookbus gemini-cli-hook``
prints (``hookbus.serve.gatehttp``); ``GET /ping`` says which server this is, to a client
with the token (the import checks its token with it).

HTTP is parsed by h11 (sans-IO: it runs inside this loop and never touches a socket).
Nothing another local user or a web page sends gets as far as a hook:
- a request carrying ``Origin`` (a browser), or whose ``Host`` is not the listener's own
  address and port (DNS rebinding; on port 80, the address alone too), gets 403; one
  without the bearer token, 401 (counted); both before a byte of the body is read, and the
  connection is closed;
- headers over MAX_HEADER_BYTES get 431; a request must arrive whole within
  REQUEST_SECONDS of its first byte (else 408), and a keep-alive connection idle for
  IDLE_SECONDS is closed.

Claude Code runs the tool on any answer that is not a 2xx, so what the server cannot take
is decided by the hooks' ``on_error`` (``ClaudeCodeEndpoint.unparsed``), never answered
with a bare error while a fail-closed hook could fire: a body over MAX_BODY_BYTES, one
that would take the server past its memory budget once parsed (estimated before, as the
socket estimates a line: ``request_cost``), bodies past BODY_BUDGET_BYTES being received,
and a connection that finds every other with a request in flight.

Connections: past the regular limit, a new one makes room by closing another: one that
was refused (401, 403), then one that never sent a good token and has been silent past
GRACE_SECONDS, then the longest idle keep-alive connection. One that has not sent a good
token yet is never closed for another within its grace: Claude Code may pause between
connecting and sending, so new connections wait in the kernel's queue meanwhile.

At SIGTERM: no new connection; idle ones are closed; a request already arriving is given
until its deadline, then run and answered. No connection is closed without an answer
while a request on it has begun to arrive.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hmac
import logging
import os
import socket
import struct
import termios
import time
from typing import TYPE_CHECKING, Any, Callable

import h11

from hookbus.serve.claudehttp import ClaudeCodeEndpoint, Reply
from hookbus.serve.gatehttp import BridgeEndpoint
from hookbus.serve.httpconfig import accepted_hosts, host_header
from hookbus.reporting import ReportOnce
from hookbus.serve.server import (
    ACCEPT_BACKOFF_SECONDS,
    ACCEPTS_PER_WAKEUP,
    BUFFER_BUDGET_BYTES,
    MEMORY_BUDGET_BYTES,
    request_cost,
)

if TYPE_CHECKING:
    from hookbus.bus import HookBus
    from hookbus.workers import ElasticThreads

logger = logging.getLogger("hookbus")

#: Claude Code's http hooks' route; POST only, as every route but PING_ROUTE.
ROUTE = b"/claude-code"
#: The gate's routes, by host (``hookbus.serve.gatehttp``).
GATE_ROUTES = {b"/gate/claude-code": "claude-code-hook", b"/gate/gemini-cli": "gemini-cli-hook", b"/gate/codex": "codex-hook"}
#: What ``hookbus gemini-cli-hook`` prints, over http.
GEMINI_ROUTE = b"/gemini-cli"
#: The headers a gate request carries that its endpoint reads (the rest are h11's).
_GATE_FIELD = b"hookbus-"
#: What a client with the token may ask of this server, to know it is the one it meant.
PING_ROUTE = b"/ping"
#: Request line and headers together, at most (h11 answers more with 431).
MAX_HEADER_BYTES = 32 * 1024
#: A body, at most: the largest request the Unix socket takes, too.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: What all connections together may hold of bodies being received: what the socket's
#: connections may hold of their unfinished lines.
BODY_BUDGET_BYTES = BUFFER_BUDGET_BYTES
#: How much of an oversized body is read to find its event, before it is answered.
PEEK_BYTES = 64 * 1024
#: A request must arrive whole within this many seconds of its first byte, and a new
#: connection must send its first byte within as long.
REQUEST_SECONDS = 10.0
#: A keep-alive connection with no request for this long is closed (and clients are told,
#: with ``Keep-Alive: timeout=``, so that they do not reuse it just as it closes).
IDLE_SECONDS = 60.0
#: Connections open at once, at most. An eighth of them are kept for answering "busy":
#: past the rest, a new connection makes room by closing another, and when none can go
#: (each has a request in flight), its request is decided by the hooks' on_error.
MAX_CONNECTIONS = 256
#: The share of connections kept for answering "busy" (one in so many).
BUSY_SHARE = 8
#: How long a new connection may stay silent before it may be closed for another: Claude
#: Code may pause about 50 ms between connecting and sending. Until then, no other new
#: connection is accepted for its sake.
GRACE_SECONDS = 0.5
#: The rank of a new connection within its grace: never closed for another.
FRESH = 3
#: The kernel hands over a new connection only once its first bytes arrive, or after this
#: many seconds (TCP_DEFER_ACCEPT): a flood of silent connections reaches the server late,
#: and old, while one that sends, whenever it sends, comes at once with its request.
DEFER_ACCEPT_SECONDS = 1
#: Answers buffered for a client before no further request of its is read.
WRITE_BUFFER_HIGH = 256 * 1024
#: How long a closing connection keeps reading (and dropping) what the client still sends,
#: so that the answer reaches it rather than a reset.
LINGER_SECONDS = 1.0

_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 413: "Content Too Large", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable", 422: "Unprocessable Content"}


class MemoryBudget:
    """What requests may hold in memory once parsed, estimated before they are parsed
    (``request_cost``) and held until they are answered. The listener keeps one of its own
    unless it is lent the server's, so that the socket and http share one budget
    (``hookbus.serve.run``)."""

    def __init__(self, limit: int = MEMORY_BUDGET_BYTES) -> None:
        self.limit = limit
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    def take(self, cost: int) -> bool:
        """Hold ``cost`` bytes; False (nothing held) when that would pass the limit."""
        if self.held + cost > self.limit:
            return False
        self._hold(cost)
        return True

    def give_back(self, cost: int) -> None:
        self._hold(-cost)

    def _hold(self, change: int) -> None:
        self._held += change


class HttpListener:
    """Serves ``POST /claude-code`` from ``bus`` on ``sock`` (bound to a loopback address,
    listening) for requests that carry ``token``."""

    def __init__(
        self,
        bus: HookBus,
        sock: socket.socket,
        token: str,
        threads: ElasticThreads,
        budget: MemoryBudget | None = None,
        proof: str = "",
    ) -> None:
        self.bus = bus
        #: What the gate's answers carry to show they are this server's (the run file's).
        self.proof = proof
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.host, self.port = str(host), int(port)
        #: The ``Host`` a request must carry: the listener's own address and port.
        self.expected_host = host_header(self.host, self.port).encode()
        self._hosts = accepted_hosts(self.host, self.port)
        self._authorization = b"Bearer " + token.encode()
        self._threads = threads
        self.budget = budget or MemoryBudget()
        self.connections: dict[_HttpConnection, None] = {}
        #: Requests refused for want of the token, and for a foreign Host or an Origin.
        self.unauthorized = 0
        self.forbidden = 0
        #: Bytes of bodies being received, over every connection.
        self.receiving = 0
        self._stopping = False
        self._refused_once = False
        #: Sockets accepted whose protocol is being set up (they count as connections).
        self._setting_up: dict[asyncio.Task[Any], socket.socket] = {}
        #: Whether the listening socket is watched; and the timer that watches it again.
        self._accepting = False
        self._resume: asyncio.TimerHandle | None = None
        #: Accepting is paused because the process is out of descriptors.
        self._backing_off = False
        #: Whether the kernel holds back a connection until its first bytes (Linux).
        self.deferred = False
        self._report = ReportOnce()
        # Beside the socket's connections: both together stay within the descriptors the
        # process may open, the hooks' reserve kept.
        from hookbus.serve.server import connection_limit

        self._descriptor_share = max(8, connection_limit() // 2)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.endpoint = ClaudeCodeEndpoint(self.bus, self._threads, self._loop)
        from hookbus.hosts.bridge import HOSTS

        self.bridges: dict[bytes, BridgeEndpoint] = {
            route: BridgeEndpoint(self.bus, self._threads, self._loop, HOSTS[verb], gate=True, proof=self.proof)
            for route, verb in GATE_ROUTES.items()
        }
        self.bridges[GEMINI_ROUTE] = BridgeEndpoint(
            self.bus, self._threads, self._loop, HOSTS["gemini-cli-hook"], gate=False, proof=self.proof
        )
        self._sock.setblocking(False)
        self.deferred = _defer_accept(self._sock)
        self._resume_accepting()

    def stop_accepting(self) -> None:
        """No new connections; idle ones are closed, and the others once the request they
        have begun to receive is answered. The listening socket is closed (under systemd,
        this process's copy: systemd's keeps the port, and queues what comes meanwhile)."""
        self._stopping = True
        self._pause_accepting(None)
        self._sock.close()
        for task in self._setting_up:
            task.cancel()  # _connected closes its socket
        for connection in list(self.connections):
            connection.finish_then_close()

    # -- accepting ----------------------------------------------------------------------
    # A connection is accepted only once there is room for it; until then it waits in the
    # kernel's queue, which costs no descriptor and resets nothing.

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            room = self._make_room()
            if room is None:
                return
            try:
                sock, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Out of descriptors (EMFILE/ENFILE) or similar: pause rather than spin.
                self._report.failed("http accepting", f"http: cannot accept a connection: {exc.strerror}")
                self._pause_accepting(self._loop.time() + ACCEPT_BACKOFF_SECONDS)
                self._backing_off = True
                return
            self._report.succeeded("http accepting")
            sock.setblocking(False)
            protocol = functools.partial(_HttpConnection, self, room or None)
            task = self._loop.create_task(self._loop.connect_accepted_socket(protocol, sock))
            self._setting_up[task] = sock
            task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[Any]) -> None:
        sock = self._setting_up.pop(task, None)
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                logger.error("http: a connection could not be set up: %s", task.exception())
            if sock is not None:
                sock.close()
        if not self._setting_up and not self._accepting and not self._backing_off:
            self._resume_accepting()  # paused until the new ones could be judged

    def _make_room(self) -> str | None:
        """Room for one more connection: "" when there is, why it would be answered busy
        when only that is left, None when accepting is paused meanwhile (until the oldest
        new connection has had its grace, or a connection goes)."""
        regular, most = self.connection_limits()
        now = self._loop.time()
        while len(self.connections) + len(self._setting_up) >= regular:
            victim = self._victim(now)
            if victim is None:
                break
            victim.make_room()
            self.forget(victim)  # its connection_lost comes later, on the loop
        count = len(self.connections) + len(self._setting_up)
        if count < regular:
            return ""
        if len(self._setting_up):  # judged once they are set up (_connected resumes)
            self._pause_accepting(now + GRACE_SECONDS)
            return None
        fresh = min((c.opened for c in self.connections if c.eviction_rank(now) is not None), default=None)
        if fresh is not None:  # new connections, within their grace: let them send first
            self._pause_accepting(max(fresh + GRACE_SECONDS, now + GRACE_SECONDS / 10))
            return None
        if count < most:
            return f"the server is busy: {count} http connections are open, each with a request in flight"
        if not self._refused_once:
            self._refused_once = True
            logger.warning("http: %d connections are open, each with a request in flight; new ones wait", most)
        self._pause_accepting(now + GRACE_SECONDS / 10)  # or until a connection goes
        return None

    def _pause_accepting(self, until: float | None) -> None:
        if self._accepting:
            self._accepting = False
            self._loop.remove_reader(self._sock.fileno())
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if until is not None and not self._stopping:
            self._resume = self._loop.call_at(until, self._resume_accepting)

    def _resume_accepting(self) -> None:
        if self._resume is not None:
            self._resume.cancel()  # a no-op when it is the timer that called
            self._resume = None
        self._backing_off = False
        if not self._accepting and not self._stopping:
            self._accepting = True
            self._loop.add_reader(self._sock.fileno(), self._accept)

    @property
    def url(self) -> str:
        return f"http://{self.expected_host.decode()}"

    async def close(self) -> None:
        """Stop accepting; let every request that has begun to arrive finish arriving (each
        within its deadline) and be answered; then close every connection (those that do
        not take their answer within 2 s are aborted)."""
        self.stop_accepting()
        while self.running or any(connection.in_flight for connection in self.connections):
            await asyncio.sleep(0.01)
        deadline = time.monotonic() + 2.0
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            connection.abort()

    @property
    def running(self) -> int:
        """Requests running hooks, over every route."""
        return self.endpoint.running + sum(bridge.running for bridge in self.bridges.values())

    def status(self) -> dict[str, Any]:
        return {
            "url": self.url, "connections": len(self.connections),
            "unauthorized": self.unauthorized, "forbidden": self.forbidden, "running": self.running,
            "fail_closed_over_http": self.endpoint.fail_closed_posted(),
            "gate": self.gate_status(),
        }

    def gate_status(self) -> dict[str, Any]:
        from hookbus.hosts.gate import gate_script
        from hookbus.serve.gatefile import gate_file_path, read_gate_file

        home = str(self.bus.home.root)
        written = read_gate_file(home)
        ours = written is not None and written["pid"] == str(os.getpid()) and written["port"] == str(self.port)
        gates = [self.bridges[route] for route in GATE_ROUTES]
        return {
            "script": str(gate_script()), "run_file": gate_file_path(home) if ours else None,
            "answered": sum(gate.answered for gate in gates), "sent_to_bridge": sum(gate.sent_to_bridge for gate in gates),
            "hosts": {gate.host.name: gate.answered for gate in gates},
        }

    def connection_limits(self) -> tuple[int, int]:
        """(regular, most): past ``regular`` connections a new one makes room by closing
        another, and when none can go it is answered "busy"; past ``most``, it waits in the
        kernel's queue."""
        most = min(MAX_CONNECTIONS, self._descriptor_share)
        return most - max(1, most // BUSY_SHARE), most

    def _victim(self, now: float) -> _HttpConnection | None:
        """The connection to close for a new one; None when none may go (a new connection
        within its grace is never closed for another: accepting waits instead)."""
        chosen: _HttpConnection | None = None
        best: tuple[int, float] | None = None
        for connection in self.connections:
            rank = connection.eviction_rank(now)
            if rank is not None and rank[0] < FRESH and (best is None or rank < best):
                chosen, best = connection, rank
        return chosen

    def forget(self, connection: _HttpConnection) -> None:
        if self.connections.pop(connection, None) is not None and not self._accepting and not self._backing_off:
            self._resume_accepting()  # paused for want of room: there may be some now

    def refusal(self, request: h11.Request, host: bytes | None, hosts: int, origin: bytes | None, authorization: bytes | None) -> tuple[int, str] | None:
        """Why ``request`` may not be answered, as (status, message); None when it may."""
        if origin is not None:
            self.forbidden += 1
            return 403, "requests from a web page (with an Origin header) are refused; nothing was run"
        if hosts != 1 or host not in self._hosts:
            self.forbidden += 1
            return 403, f"the Host header must be {self.expected_host.decode()}, this listener's own address; nothing was run"
        if authorization is None or not hmac.compare_digest(authorization, self._authorization):
            self.unauthorized += 1
            if self.unauthorized == 1 or self.unauthorized % 1000 == 0:
                logger.warning("http: %d request(s) without the right token refused so far", self.unauthorized)
            what = "no" if authorization is None else "a wrong"
            return 401, f"{what} bearer token: send Authorization: Bearer with the token of HOME/run/http.token or $HOOKBUS_HTTP_TOKEN; nothing was run"
        path = request.target.split(b"?", 1)[0]
        if path == PING_ROUTE:
            return None if request.method == b"GET" else (405, "only GET is taken, on /ping")
        if path != ROUTE and path not in GATE_ROUTES and path != GEMINI_ROUTE:
            return 404, (
                f"no such route {request.target.decode('ascii', 'replace')[:200]!r}; the routes are POST /claude-code, "
                "POST /gemini-cli and the gate's POST /gate/claude-code and /gate/gemini-cli"
            )
        if request.method != b"POST":
            return 405, f"only POST is taken, on {path.decode()}"
        return None


class _HttpConnection(asyncio.Protocol):
    """One client: requests in, one at a time; answers out in order."""

    def __init__(self, listener: HttpListener, busy: str | None = None) -> None:
        self._listener = listener
        self._transport: asyncio.Transport | None = None
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        #: The body as it arrived, and its length.
        self._chunks: list[bytes] = []
        self._received = 0
        self._timer: asyncio.TimerHandle | None = None
        #: When the timer's action is due (loop time), and the action; None: nothing is.
        self._deadline: float | None = None
        self._on_deadline: Callable[[], None] = self._timed_out
        #: Whether reading is paused, for a request still running or a client not reading.
        self._reading_paused = False
        #: Whether a request is arriving (its first byte is in), being answered, or neither.
        self._receiving = False
        self.handling = False
        #: Whether this client ever sent the right token.
        self.trusted = False
        #: When it connected, and when it last had nothing in flight (loop time).
        self.opened = self.idle_since = 0.0
        #: Why the server is too busy to run this connection's request (None: it is not):
        #: it is read only to be decided by the hooks' on_error, and the connection closed.
        self.busy = busy
        #: The request is not to be parsed: the status and why (too large, too busy).
        self._shed: tuple[int, str] | None = None
        #: What the request being handled holds of the memory budget.
        self._cost = 0
        #: The request's route (ROUTE, PING_ROUTE, or a key of the listener's bridges),
        #: once its headers are in; and the ``hookbus-*`` headers a bridge's route reads.
        self._route = ROUTE
        self._fields: dict[bytes, bytes] = {}
        self._closing = False
        #: The server is stopping: the request arriving is answered, then the connection closed.
        self._final = False
        self._pumping = False
        #: The client is not reading its answers: no further request is read until it does.
        self._writing_paused = False

    # -- the connection -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self.opened = self.idle_since = asyncio.get_running_loop().time()
        if self._listener.deferred and not self._unread():
            # The kernel held it back until its first bytes or DEFER_ACCEPT_SECONDS: with
            # none, it has been silent that long already, past its grace.
            self.opened -= GRACE_SECONDS
        # Room was made before it was accepted (``_make_room``, which counts it meanwhile).
        self._listener.connections[self] = None
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        self._arm(REQUEST_SECONDS, self._timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._cancel_timer()
        self._release_body()
        self._listener.forget(self)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    @property
    def in_flight(self) -> bool:
        """Whether a request on it has begun to arrive, or is being answered."""
        return self._transport is not None and not self._closing and (self.handling or self._receiving or self._pending())

    def eviction_rank(self, now: float) -> tuple[int, float] | None:
        """Where it stands among the connections that may be closed to make room, first
        first; None when it may not (a request on it is in flight). A connection that was
        refused; then one that never sent a good token, silent for longer than
        GRACE_SECONDS, oldest first; then a keep-alive one with nothing in flight, the
        longest idle first. One that has not sent a good token yet and is within its grace
        (or has bytes the loop has not read) ranks FRESH: never closed for another."""
        if self._closing:
            return 0, self.opened
        if not self.trusted:
            # Past its grace without a whole request (silent, or dripping its headers), it is
            # not a client that paused: unless what it sent waits for a loop that reads late.
            old = now - self.opened > GRACE_SECONDS
            return (1 if old and not self._unread() else FRESH), self.opened
        if self.in_flight:
            return None
        return 2, self.idle_since

    def _unread(self) -> bool:
        """Whether bytes the loop has not read yet wait in the kernel (a busy loop reads
        late: the client is not silent for that)."""
        transport = self._transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return False
        try:
            return bool(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0])
        except OSError:
            return False

    def make_room(self) -> None:
        """Closed for another connection: a keep-alive one is told (FIN), so that its
        client drops it from its pool; any other is aborted, at once."""
        transport = self._transport
        if transport is None:
            return
        if self.trusted and not self._closing:
            self._closing = True
            self._cancel_timer()
            transport.close()
        else:
            transport.abort()

    def finish_then_close(self) -> None:
        """The server stops: close now when nothing is in flight, else once the request
        that has begun to arrive is answered."""
        self._final = True
        if not self.in_flight:
            self._close()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        if not self.handling:
            self._pump()

    def data_received(self, data: bytes) -> None:
        if self._closing or self._transport is None:
            return  # lingering: what the client still sends is dropped
        if not self._receiving and not self.handling:
            self._receiving = True
            self._arm(REQUEST_SECONDS, self._timed_out)
        self._h11.receive_data(data)
        self._pump()

    def eof_received(self) -> bool:
        if not self._closing and self._transport is not None:
            self._h11.receive_data(b"")
            self._pump()
        # A client that shut its sending side after its request still gets the answer: the
        # connection stays open while the hooks run, and closes once it is written.
        return self.handling

    def _pending(self) -> bool:
        """Whether bytes of a further request are in, not yet read."""
        return bool(self._h11.trailing_data[0])

    # -- requests -------------------------------------------------------------------------

    def _pump(self) -> None:
        if self._pumping:
            return  # an answer given inline, inside this loop: the loop goes on by itself
        self._pumping = True
        try:
            self._next_events()
        finally:
            self._pumping = False

    def _next_events(self) -> None:
        while self._transport is not None and not self.handling and not self._closing and not self._writing_paused:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                status = 431 if exc.error_status_hint == 431 else 400
                self._refuse(status, f"not a request this server takes: {exc}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._begin(event)
            elif isinstance(event, h11.Data):
                self._take(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._dispatch()
            elif isinstance(event, h11.ConnectionClosed):
                self._close()
                return

    def _begin(self, request: h11.Request) -> None:
        # One pass over the headers. h11 measures only what is still incomplete: headers
        # that arrive in one piece are measured here.
        size = len(request.method) + len(request.target)
        host = origin = authorization = declared = None
        hosts = 0
        for name, value in request.headers:
            size += len(name) + len(value) + 4
            if name == b"host":
                host, hosts = value, hosts + 1
            elif name == b"authorization":
                authorization = value
            elif name == b"content-length":
                declared = value
            elif name == b"origin":
                origin = value
            elif name.startswith(_GATE_FIELD):
                self._fields[name] = value
        path = request.target.split(b"?", 1)[0]
        self._route = path if path == PING_ROUTE or path in self._listener.bridges else ROUTE
        if size > MAX_HEADER_BYTES:
            self._refuse(431, f"the request line and headers hold {size:,} bytes, more than the {MAX_HEADER_BYTES:,} taken; nothing was run")
            return
        refusal = self._listener.refusal(request, host, hosts, origin, authorization)
        if refusal is not None:
            self._refuse(*refusal)
            return
        self.trusted = True
        self._receiving = True
        if self._h11.they_are_waiting_for_100_continue and self._transport is not None:
            self._transport.write(self._h11.send(h11.InformationalResponse(status_code=100, headers=[])) or b"")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            self._shed = 413, f"the request body is {int(declared):,} bytes, more than the {MAX_BODY_BYTES:,} a request may hold"
        elif self.busy is not None and self._route != PING_ROUTE:
            self._shed = 503, self.busy

    def _take(self, data: bytes) -> None:
        listener = self._listener
        if self._shed is None:
            if self._received + len(data) > MAX_BODY_BYTES:
                self._shed = 413, f"the request body is more than the {MAX_BODY_BYTES:,} bytes a request may hold"
            elif listener.receiving + len(data) > BODY_BUDGET_BYTES:
                self._shed = 503, (
                    f"the server is busy: it holds {listener.receiving >> 20} MiB of request bodies being received, "
                    f"the most it holds ({BODY_BUDGET_BYTES >> 20} MiB)"
                )
        room = PEEK_BYTES - self._received if self._shed is not None else len(data)
        if room > 0:
            taken = data[:room] if room < len(data) else data
            self._chunks.append(bytes(taken))
            self._received += len(taken)
            listener.receiving += len(taken)
        if self._shed is not None and self._received >= PEEK_BYTES:
            self._answer_shed()

    def _body(self) -> bytes:
        chunks = self._chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _answer_shed(self) -> None:
        """Answer a request that is not parsed, from the start of its body (its event), and
        close: the rest of it is not read."""
        assert self._shed is not None
        status, why = self._shed
        reply = self._endpoint().unparsed(self._body(), why, status)
        self._release_body()
        self._send(reply, close=True)

    def _endpoint(self) -> ClaudeCodeEndpoint | BridgeEndpoint:
        return self._listener.bridges.get(self._route) or self._listener.endpoint

    def _dispatch(self) -> None:
        if self._route == PING_ROUTE:
            self._release_body()
            self._send(self._listener.endpoint.ping(), close=self.busy is not None)
            return
        if self._shed is not None:
            self._answer_shed()
            return
        body = self._body()
        self._release_body()
        budget = self._listener.budget
        cost = request_cost(body)
        if not budget.take(cost):
            # Not parsed: parsing it is what would take the memory.
            why = (
                f"the server is busy: the request would take about {cost >> 20} MiB once parsed, and requests in flight "
                f"hold {budget.held >> 20} MiB of the {budget.limit >> 20} MiB the server allows"
            )
            self._send(self._endpoint().unparsed(body, why, 503), close=False)
            return
        self._cost = cost
        self._disarm()
        self._receiving = False
        self.handling = True
        bridge = self._listener.bridges.get(self._route)
        if bridge is None:
            self._listener.endpoint.handle(body, self._reply)
        else:
            fields, self._fields = self._fields, {}
            bridge.handle(body, fields, self._reply, self._interim)
        self._update_reading()  # still running (hooks): read nothing more meanwhile

    def _reply(self, reply: Reply) -> None:
        self.handling = False
        self._listener.budget.give_back(self._cost)
        self._cost = 0
        if self._transport is None:
            return  # the client went away; the hooks ran and were recorded all the same
        self._send(reply, close=False)

    def _interim(self, wait: float) -> None:
        """``102 Processing`` before the hooks start, saying how long they may take (the
        gate waits that long for the answer, then decides without running them)."""
        transport = self._transport
        if transport is None or self._h11.our_state is not h11.SEND_RESPONSE:
            return
        headers = [(b"hookbus-wait", f"{wait:.3f}".encode()), (b"hookbus-proof", self._listener.proof.encode())]
        informational = h11.InformationalResponse(status_code=102, headers=headers, reason=SIZE_PLACEHOLDER)
        transport.write(sized(self._h11.send(informational) or b""))

    def _refuse(self, status: int, message: str) -> None:
        self._send(Reply.text(status, message), close=True)

    def _timed_out(self) -> None:
        if self._receiving:
            self._refuse(408, f"the request did not arrive whole within {REQUEST_SECONDS:g} s; nothing was run")
        else:
            self._close()

    # -- answers --------------------------------------------------------------------------

    def _send(self, reply: Reply, *, close: bool) -> None:
        transport = self._transport
        if transport is None:
            return
        # The last answer of a busy connection, or of a stopping server (unless the client
        # has already sent more: each request that has begun to arrive is answered).
        close = close or self.busy is not None or (self._final and not self._pending())
        headers = [(b"content-type", reply.content_type), (b"content-length", str(len(reply.body)).encode()), *reply.headers]
        if reply.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="hookbus"'))
        elif reply.status == 405:
            headers.append((b"allow", b"GET" if self._route == PING_ROUTE else b"POST"))
        if close:
            headers.append((b"connection", b"close"))
        else:
            headers.append((b"keep-alive", f"timeout={int(IDLE_SECONDS)}".encode()))
        try:
            reason = SIZE_PLACEHOLDER if reply.sized else _REASONS.get(reply.status, "OK").encode()
            data = self._h11.send(h11.Response(status_code=reply.status, headers=headers, reason=reason))
            assert data is not None
            if reply.body:
                data += self._h11.send(h11.Data(data=reply.body)) or b""
            data += self._h11.send(h11.EndOfMessage()) or b""
            if reply.sized:
                data = sized(data)
        except h11.LocalProtocolError:
            # h11 cannot answer in this state (the request line itself was unreadable).
            data = _raw(reply.status, reply.body.decode("utf-8", "replace").strip())
            close = True
        transport.write(data)
        self._receiving = False
        self._shed = None
        self._route = ROUTE
        self._fields = {}
        if close or self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            self._close()
            return
        self._h11.start_next_cycle()
        self.idle_since = asyncio.get_running_loop().time()
        if self._pending():  # the client sent (part of) its next request already
            self._receiving = True
            self._arm(REQUEST_SECONDS, self._timed_out)
        else:
            self._arm(IDLE_SECONDS, self._timed_out)
        self._update_reading()
        if not self._writing_paused:  # else resume_writing reads on, once the answers are taken
            self._pump()  # a request the client sent already

    def _close(self) -> None:
        """Close once the answer is written, reading and dropping what still comes for up
        to LINGER_SECONDS: closing with unread data would reset the connection, and the
        client could lose the answer."""
        transport = self._transport
        if transport is None:
            return
        self._closing = True
        self._disarm()
        self._release_body()
        if transport.can_write_eof():
            transport.write_eof()
            if self._reading_paused:
                self._reading_paused = False
                transport.resume_reading()
            self._arm(LINGER_SECONDS, self.abort)
        else:
            transport.close()

    def _release_body(self) -> None:
        self._listener.receiving -= self._received
        self._chunks = []
        self._received = 0

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing:
            return
        pause = self.handling or self._writing_paused
        if pause != self._reading_paused:
            self._reading_paused = pause
            if pause:
                transport.pause_reading()
            else:
                transport.resume_reading()

    # -- one timer per connection ---------------------------------------------------------
    # Deadlines move on every request; a timer made and cancelled each time would cost
    # more than the request. One timer fires at most REQUEST_SECONDS apart (the shortest
    # deadline there is, so never late) and acts only once the deadline has come.

    def _arm(self, seconds: float, then: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + seconds
        self._on_deadline = then
        timer = self._timer
        if timer is not None and timer.when() > self._deadline:
            timer.cancel()
            timer = self._timer = None
        if timer is None:
            self._timer = loop.call_at(min(self._deadline, loop.time() + REQUEST_SECONDS), self._tick)

    def _disarm(self) -> None:
        self._deadline = None

    def _tick(self) -> None:
        self._timer = None
        deadline = self._deadline
        if deadline is None or self._transport is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= deadline:
            self._deadline = None
            self._on_deadline()
            return
        self._timer = loop.call_at(min(deadline, loop.time() + REQUEST_SECONDS), self._tick)

    def _cancel_timer(self) -> None:
        self._deadline = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


#: The reason phrase of a sized answer, until it is written (``sized``).
SIZE_PLACEHOLDER = b"000000000"


def sized(data: bytes) -> bytes:
    """An answer whose reason phrase (SIZE_PLACEHOLDER) becomes the count of the bytes after
    its status line, in as many digits: the gate reads them in one call."""
    line_end = data.index(b"\r\n") + 2
    head = data[:line_end]
    assert head.endswith(b" " + SIZE_PLACEHOLDER + b"\r\n")
    size = len(data) - line_end
    return head[: -len(SIZE_PLACEHOLDER) - 2] + b"%09d\r\n" % size + data[line_end:]


def _defer_accept(sock: socket.socket) -> bool:
    """Ask the kernel to hold back connections until their first bytes; whether it will."""
    option = getattr(socket, "TCP_DEFER_ACCEPT", None)
    if option is None:
        return False
    try:
        sock.setsockopt(socket.IPPROTO_TCP, option, DEFER_ACCEPT_SECONDS)
    except OSError:
        return False
    return True


def _raw(status: int, message: str) -> bytes:
    """An answer written without h11, for a connection it has no state for."""
    body = f"hookbus: {message}\n".encode("utf-8", "backslashreplace") if message and not message.startswith("hookbus:") else (message + "\n").encode()
    head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode() + body
