"""``hookbus serve --http``: an HTTP/1.1 listener on loopback, beside the Unix socket, in the
same process and on the same bus. Its one route is ``POST /claude-code``
(``hookbus.serve.claudehttp``).

HTTP is parsed by h11 (sans-IO: it runs inside this loop and never touches a socket).
Nothing another local user or a web page sends gets as far as a hook:
- a request carrying ``Origin`` (a browser), or whose ``Host`` is not the listener's own
  address and port (DNS rebinding), gets 403; one without the bearer token, 401 (counted);
  both before a byte of the body is read, and the connection is closed;
- headers over MAX_HEADER_BYTES get 431; a body over MAX_BODY_BYTES gets 413, or a deny
  when a fail-closed hook could fire on it (Claude Code runs the tool on any non-2xx);
- a request must arrive whole within REQUEST_SECONDS of its first byte (else 408), and a
  keep-alive connection idle for IDLE_SECONDS is closed; a connection that never sent a
  good token is the first to go when MAX_CONNECTIONS are open.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import socket
import time
from typing import TYPE_CHECKING, Any, Callable

import h11

from hookbus.serve.claudehttp import ClaudeCodeEndpoint, Reply
from hookbus.serve.httpconfig import host_header

if TYPE_CHECKING:
    from hookbus.bus import HookBus
    from hookbus.workers import ElasticThreads

logger = logging.getLogger("hookbus")

#: The route, and the only method it takes.
ROUTE = b"/claude-code"
#: Request line and headers together, at most (h11 answers more with 431).
MAX_HEADER_BYTES = 32 * 1024
#: A body, at most: the largest request the Unix socket takes, too.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: What all connections together may hold of bodies being received.
BODY_BUDGET_BYTES = 256 * 1024 * 1024
#: How much of an oversized body is read to find its event, before it is answered.
PEEK_BYTES = 64 * 1024
#: A request must arrive whole within this many seconds of its first byte, and a new
#: connection must send its first byte within as long.
REQUEST_SECONDS = 10.0
#: A keep-alive connection with no request for this long is closed (and clients are told,
#: with ``Keep-Alive: timeout=``, so that they do not reuse it just as it closes).
IDLE_SECONDS = 60.0
#: Connections open at once; past it, the oldest that never sent a good token is closed,
#: and when every one has, the new one gets 503.
MAX_CONNECTIONS = 256
#: Answers buffered for a client before no further request of its is read.
WRITE_BUFFER_HIGH = 256 * 1024
#: How long a closing connection keeps reading (and dropping) what the client still sends,
#: so that the answer reaches it rather than a reset.
LINGER_SECONDS = 1.0

_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 413: "Content Too Large", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable"}


class HttpListener:
    """Serves ``POST /claude-code`` from ``bus`` on ``sock`` (bound to a loopback address,
    listening) for requests that carry ``token``."""

    def __init__(self, bus: HookBus, sock: socket.socket, token: str, threads: ElasticThreads) -> None:
        self.bus = bus
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.host, self.port = str(host), int(port)
        #: The ``Host`` a request must carry: the listener's own address and port.
        self.expected_host = host_header(self.host, self.port).encode()
        self._authorization = b"Bearer " + token.encode()
        self._threads = threads
        self.connections: dict[_HttpConnection, None] = {}
        #: Requests refused for want of the token, and for a foreign Host or an Origin.
        self.unauthorized = 0
        self.forbidden = 0
        #: Bytes of bodies being received, over every connection.
        self.receiving = 0
        self._server: asyncio.AbstractServer | None = None
        self._stopping = False
        self._refused_once = False
        # Beside the socket's connections: both together stay within the descriptors the
        # process may open, the hooks' reserve kept.
        from hookbus.serve.server import connection_limit

        self._descriptor_share = max(8, connection_limit() // 2)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.endpoint = ClaudeCodeEndpoint(self.bus, self._threads, loop)
        self._server = await loop.create_server(lambda: _HttpConnection(self), sock=self._sock)

    def stop_accepting(self) -> None:
        """No new connections; idle ones are closed, and the others once their answer is
        written."""
        self._stopping = True
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close_when_idle()

    @property
    def url(self) -> str:
        return f"http://{self.expected_host.decode()}"

    async def close(self) -> None:
        """Stop accepting, answer the requests running hooks, then close every connection
        (those that do not take their answer within 2 s are aborted)."""
        self.stop_accepting()
        while self.endpoint.running:
            await asyncio.sleep(0.01)
        deadline = time.monotonic() + 2.0
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for connection in list(self.connections):
            connection.abort()

    def status(self) -> dict[str, Any]:
        return {
            "url": self.url, "connections": len(self.connections),
            "unauthorized": self.unauthorized, "forbidden": self.forbidden, "running": self.endpoint.running,
            "fail_closed_over_http": sorted(self.endpoint.fail_closed_over_http),
        }

    def admit(self, connection: _HttpConnection) -> bool:
        """Whether a new connection may stay: room is made by closing the oldest that never
        sent a good token."""
        limit = min(MAX_CONNECTIONS, self._descriptor_share)
        if len(self.connections) >= limit:
            for other in self.connections:
                if not other.trusted and not other.handling:
                    other.abort()
                    self.forget(other)  # its connection_lost comes later, on the loop
                    break
        if len(self.connections) >= limit:
            if not self._refused_once:
                self._refused_once = True
                logger.warning("http: %d connections are open, the most it holds; refusing new ones", limit)
            return False
        self.connections[connection] = None
        return True

    def forget(self, connection: _HttpConnection) -> None:
        self.connections.pop(connection, None)

    def refusal(self, request: h11.Request, host: bytes | None, hosts: int, origin: bytes | None, authorization: bytes | None) -> tuple[int, str] | None:
        """Why ``request`` may not be answered, as (status, message); None when it may."""
        if origin is not None:
            self.forbidden += 1
            return 403, "requests from a web page (with an Origin header) are refused; nothing was run"
        if hosts != 1 or host != self.expected_host:
            self.forbidden += 1
            return 403, f"the Host header must be {self.expected_host.decode()}, this listener's own address; nothing was run"
        if authorization is None or not hmac.compare_digest(authorization, self._authorization):
            self.unauthorized += 1
            if self.unauthorized == 1 or self.unauthorized % 1000 == 0:
                logger.warning("http: %d request(s) without the right token refused so far", self.unauthorized)
            what = "no" if authorization is None else "a wrong"
            return 401, f"{what} bearer token: send Authorization: Bearer with the token of HOME/run/http.token or $HOOKBUS_HTTP_TOKEN; nothing was run"
        if request.target != ROUTE and request.target.split(b"?", 1)[0] != ROUTE:
            return 404, f"no such route {request.target.decode('ascii', 'replace')[:200]!r}; the route is POST /claude-code"
        if request.method != b"POST":
            return 405, "only POST is taken, on /claude-code"
        return None


class _HttpConnection(asyncio.Protocol):
    """One client: requests in, one at a time; answers out in order."""

    def __init__(self, listener: HttpListener) -> None:
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
        #: Whether this client ever sent the right token: such a one is not evicted for others.
        self.trusted = False
        self._oversized: str | None = None
        self._closing = False
        self._pumping = False
        #: The client is not reading its answers: no further request is read until it does.
        self._writing_paused = False

    # -- the connection -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if not self._listener.admit(self):
            transport.write(_raw(503, "too many connections; nothing was run"))
            transport.close()
            self._transport = None
            return
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

    def close_when_idle(self) -> None:
        self._closing = True
        if not self.handling and not self._receiving:
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
            self._oversized = f"the request body is {int(declared):,} bytes, more than the {MAX_BODY_BYTES:,} a request may hold"

    def _take(self, data: bytes) -> None:
        listener = self._listener
        if self._oversized is None:
            if self._received + len(data) > MAX_BODY_BYTES:
                self._oversized = f"the request body is more than the {MAX_BODY_BYTES:,} bytes a request may hold"
            elif listener.receiving + len(data) > BODY_BUDGET_BYTES:
                self._oversized = (
                    f"the server holds {listener.receiving >> 20} MiB of request bodies, the most it holds "
                    f"({BODY_BUDGET_BYTES >> 20} MiB)"
                )
        room = PEEK_BYTES - self._received if self._oversized is not None else len(data)
        if room > 0:
            taken = data[:room] if room < len(data) else data
            self._chunks.append(bytes(taken))
            self._received += len(taken)
            listener.receiving += len(taken)
        if self._oversized is not None and self._received >= PEEK_BYTES:
            self._answer_oversized()

    def _body(self) -> bytes:
        chunks = self._chunks
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _answer_oversized(self) -> None:
        assert self._oversized is not None
        reply = self._listener.endpoint.oversized(self._body(), self._oversized)
        self._release_body()
        self._send(reply, close=True)

    def _dispatch(self) -> None:
        if self._oversized is not None:
            self._answer_oversized()
            return
        self._disarm()
        self._receiving = False
        self.handling = True
        body = self._body()
        self._release_body()
        self._listener.endpoint.handle(body, self._reply)
        self._update_reading()  # still running (hooks): read nothing more meanwhile

    def _reply(self, reply: Reply) -> None:
        self.handling = False
        if self._transport is None:
            return  # the client went away; the hooks ran and were recorded all the same
        self._send(reply, close=self._closing)

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
        headers = [(b"content-type", reply.content_type), (b"content-length", str(len(reply.body)).encode())]
        if reply.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="hookbus"'))
        elif reply.status == 405:
            headers.append((b"allow", b"POST"))
        if close:
            headers.append((b"connection", b"close"))
        else:
            headers.append((b"keep-alive", f"timeout={int(IDLE_SECONDS)}".encode()))
        try:
            data = self._h11.send(h11.Response(status_code=reply.status, headers=headers, reason=_REASONS.get(reply.status, "OK")))
            assert data is not None
            if reply.body:
                data += self._h11.send(h11.Data(data=reply.body)) or b""
            data += self._h11.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            # h11 cannot answer in this state (the request line itself was unreadable).
            data = _raw(reply.status, reply.body.decode("utf-8", "replace").strip())
            close = True
        transport.write(data)
        self._receiving = False
        if close or self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            self._close()
            return
        self._h11.start_next_cycle()
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


def _raw(status: int, message: str) -> bytes:
    """An answer written without h11, for a connection it has no state for."""
    body = f"hookbus: {message}\n".encode("utf-8", "backslashreplace") if message and not message.startswith("hookbus:") else (message + "\n").encode()
    head = f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode() + body
