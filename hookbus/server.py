"""The JSON-RPC server over one HookBus: connections, requests, answers, and a drain.

Each connection is an asyncio Protocol that cuts its bytes into lines. A request that
needs no hook (a no-match emit, ping) is answered on the spot; one that runs hooks holds a
Future from the bus and is answered when it is done, so answers may overtake each other.
What one client does cannot stall another: a connection that does not read its answers,
or has MAX_IN_FLIGHT requests running, is simply not read from until it catches up.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from hookbus import __version__
from hookbus.errors import (
    BusClosedError,
    EnvelopeError,
    HookBusError,
    HookNotFoundError,
    HooksDisabledError,
    UnknownEventError,
)
from hookbus.protocol import (
    HOOK_NOT_FOUND,
    HOOKBUS_ERROR,
    HOOKS_DISABLED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MAX_LINE_BYTES,
    METHOD_NOT_FOUND,
    METHODS,
    OTHER_HOME,
    PERMISSION_DENIED,
    REQUEST_TOO_LARGE,
    SHUTTING_DOWN,
    ProtocolError,
    Request,
    encode,
    error_response,
    parse_request,
    result_response,
)
from hookbus.rendezvous import peer_uid, trusted_uid
from hookbus.reporting import ReportOnce
from hookbus.workers import ElasticThreads

if TYPE_CHECKING:
    from hookbus.bus import HookBus

logger = logging.getLogger("hookbus")

#: Requests of one connection running hooks at once; past it, the connection is not read
#: from until one finishes (so one client cannot start hooks without bound).
MAX_IN_FLIGHT = 64
#: Answers buffered for a connection before it is no longer read from.
WRITE_BUFFER_HIGH = 256 * 1024
#: How long, at shutdown, connections get to take their last answers.
CLOSE_GRACE_SECONDS = 2.0
#: Connections accepted per wake-up of the listening socket, so a flood yields to requests.
ACCEPTS_PER_WAKEUP = 64
#: How long accepting pauses when the process is out of file descriptors.
ACCEPT_BACKOFF_SECONDS = 0.1

#: What a method returns: a JSON-ready result, or a Future and how to make its result JSON.
_Answer = Any
_Handler = Callable[[dict[str, Any]], _Answer]


class _Pending:
    """A request whose hooks are running."""

    __slots__ = ("future", "convert")

    def __init__(self, future: Future[Any], convert: Callable[[Any], Any]) -> None:
        self.future = future
        self.convert = convert


def _params(params: dict[str, Any], required: dict[str, type], optional: dict[str, type]) -> None:
    """INVALID_PARAMS unless ``params`` has each required name, and nothing unknown, each
    of the JSON type wanted."""
    for name in params:
        if name not in required and name not in optional:
            expected = ", ".join(repr(key) for key in [*required, *optional, "home"])
            raise ProtocolError(INVALID_PARAMS, f"invalid params: unknown param {name!r} (params: {expected})")
    for name, kind in required.items():
        if name not in params:
            raise ProtocolError(INVALID_PARAMS, f"invalid params: {name!r} is missing")
    for name, kind in [*required.items(), *optional.items()]:
        if name in params and not isinstance(params[name], kind):
            wanted = {str: "a string", bool: "true or false"}.get(kind, "an object")
            raise ProtocolError(INVALID_PARAMS, f"invalid params: {name!r} must be {wanted}")


def error_for(exc: BaseException) -> tuple[int, str]:
    """The code and message that answer a request that raised ``exc``."""
    if isinstance(exc, ProtocolError):
        return exc.code, exc.message
    if isinstance(exc, (UnknownEventError, EnvelopeError)):
        return INVALID_PARAMS, str(exc)
    if isinstance(exc, HookNotFoundError):
        return HOOK_NOT_FOUND, str(exc)
    if isinstance(exc, HooksDisabledError):
        return HOOKS_DISABLED, str(exc)
    if isinstance(exc, BusClosedError):
        return SHUTTING_DOWN, "the server is shutting down; it takes no new requests"
    if isinstance(exc, HookBusError):
        return HOOKBUS_ERROR, str(exc)
    logger.error("a request failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
    return INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}"


class HookServer:
    """Serves ``bus`` on ``listener`` (a bound, listening Unix socket) until ``stop()``."""

    def __init__(self, bus: HookBus, listener: socket.socket) -> None:
        self.bus = bus
        self._listener = listener
        self._connections: set[_Connection] = set()
        self._connecting: set[asyncio.Task[Any]] = set()
        self._in_flight = 0
        self._stopping = False
        self._threads = ElasticThreads("hookbus-serve")
        self._refused_uids: set[int] = set()
        self._report = ReportOnce()
        # Bound to no loop until used (Python 3.10+): stop() works before serve() runs.
        self._stop_requested = asyncio.Event()
        self._drained = asyncio.Event()
        self._handlers: dict[str, _Handler] = {
            "emit": self._emit,
            "trigger": self._trigger,
            "ping": self._ping,
            "reload": self._reload,
        }

    @property
    def connections(self) -> int:
        return len(self._connections)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def serve(self, on_stop_accepting: Callable[[], None] = lambda: None) -> None:
        """Accept and answer until ``stop()``; then stop accepting (and call
        ``on_stop_accepting``), answer every request already running, and close."""
        self._loop = asyncio.get_running_loop()
        self._listener.setblocking(False)
        self._loop.add_reader(self._listener.fileno(), self._accept)
        try:
            await self._stop_requested.wait()
        finally:
            self._loop.remove_reader(self._listener.fileno())
            self._listener.close()
            on_stop_accepting()
        if self._in_flight:
            await self._drained.wait()
        for task in list(self._connecting):
            task.cancel()
        await self._close_connections()
        self._threads.shutdown()

    def stop(self) -> None:
        """Stop accepting; requests that arrive from now on are answered SHUTTING_DOWN.
        Call it on the loop's thread (a signal handler added with loop.add_signal_handler)."""
        self._stopping = True
        self._stop_requested.set()

    def reload_in_background(self) -> None:
        """Reload on a thread of its own (SIGHUP): the loop keeps answering meanwhile."""
        self._threads.submit(self._reload_and_log)

    def _reload_and_log(self) -> None:
        try:
            snapshot = self.bus.reload()
        except Exception as exc:
            logger.error("reload failed: %s: %s", type(exc).__name__, exc)
            return
        logger.warning(
            "reloaded %s: %d hooks, %d problems",
            self.bus.home.root, len(snapshot.hooks), len(snapshot.problems),
        )

    # -- accepting ----------------------------------------------------------------------

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                # Out of descriptors (EMFILE/ENFILE) or similar: stop accepting for a moment
                # rather than spin; the kernel keeps the waiting clients queued.
                self._report.failed("accepting connections", f"cannot accept a connection: {exc.strerror}")
                self._loop.remove_reader(self._listener.fileno())
                self._loop.call_later(ACCEPT_BACKOFF_SECONDS, self._resume_accepting)
                return
            self._report.succeeded("accepting connections")
            self._admit(sock)

    def _resume_accepting(self) -> None:
        if not self._stop_requested.is_set():
            self._loop.add_reader(self._listener.fileno(), self._accept)

    def _admit(self, sock: socket.socket) -> None:
        """Check who is calling before reading a byte: this user or root, or it is closed."""
        try:
            uid = peer_uid(sock)
        except OSError:
            sock.close()
            return
        if not trusted_uid(uid):
            self._refuse(sock, uid)
            return
        sock.setblocking(False)
        task = self._loop.create_task(self._loop.connect_accepted_socket(lambda: _Connection(self), sock))
        self._connecting.add(task)
        task.add_done_callback(self._connected)

    def _connected(self, task: asyncio.Task[Any]) -> None:
        self._connecting.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("a connection could not be set up: %s", task.exception())

    def _refuse(self, sock: socket.socket, uid: int) -> None:
        if uid not in self._refused_uids:
            self._refused_uids.add(uid)  # logged once per uid: refusals must not flood the log
            allowed = "root" if os.geteuid() == 0 else f"uid {os.geteuid()} and root"
            logger.warning("refused a connection from uid %d (only %s may connect)", uid, allowed)
        message = f"permission denied: uid {uid} may not use this server; only its own user and root may"
        try:
            sock.setblocking(False)
            sock.send(encode(error_response(None, PERMISSION_DENIED, message)))
        except OSError:
            pass
        sock.close()

    # -- requests -------------------------------------------------------------------------

    def handle(self, connection: _Connection, line: bytes) -> None:
        try:
            request = parse_request(line)
        except ProtocolError as exc:
            if exc.answered:
                connection.send(exc.response())
            return
        try:
            answer = self._run(request)
        except Exception as exc:
            if not request.is_notification:
                code, message = error_for(exc)
                data = exc.data if isinstance(exc, ProtocolError) else None
                connection.send(error_response(request.id, code, message, data))
            return
        if not isinstance(answer, _Pending):
            if not request.is_notification:
                connection.send(result_response(request.id, answer))
            return
        if answer.future.done():
            self._answer(connection, request, answer)
            return
        self._in_flight += 1
        connection.started()
        loop = self._loop
        answer.future.add_done_callback(
            lambda _: loop.call_soon_threadsafe(self._finished, connection, request, answer)
        )

    def _run(self, request: Request) -> _Answer:
        if self._stopping:
            raise ProtocolError(SHUTTING_DOWN, "the server is shutting down; it takes no new requests")
        handler = self._handlers.get(request.method)
        if handler is None:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"method not found: {request.method!r}; methods are {', '.join(METHODS)}",
            )
        params = request.params
        if "home" in params:
            params = dict(params)
            self._check_home(params.pop("home"))
        return handler(params)

    def _check_home(self, home: object) -> None:
        """OTHER_HOME unless ``home`` is the directory this server serves (any path to it)."""
        if not isinstance(home, str):
            raise ProtocolError(INVALID_PARAMS, "invalid params: 'home' must be a string")
        root = str(self.bus.home.root)
        # The spelling the clients of this home send (the same rules find it) costs no stat.
        served = os.path.normpath(home) == os.path.normpath(root)
        if not served:
            try:
                served = os.path.samefile(home, root)
            except (OSError, ValueError):
                served = False
        if not served:
            served_home = str(self.bus.home.root)
            raise ProtocolError(
                OTHER_HOME, f"this server serves {served_home}, not {home}; nothing was run", data={"home": served_home}
            )

    def _finished(self, connection: _Connection, request: Request, answer: _Pending) -> None:
        self._in_flight -= 1
        self._answer(connection, request, answer)
        connection.finished()  # after the answer: it may close a connection the client ended
        if not self._in_flight and self._stopping:
            self._drained.set()

    def _answer(self, connection: _Connection, request: Request, answer: _Pending) -> None:
        if request.is_notification:
            exception = answer.future.exception()
            if exception is not None and not isinstance(exception, HookBusError):
                error_for(exception)  # logs what no one will be told
            return
        try:
            message = result_response(request.id, answer.convert(answer.future.result()))
        except Exception as exc:
            code, text = error_for(exc)
            message = error_response(request.id, code, text)
        connection.send(message)

    # -- methods ----------------------------------------------------------------------

    def _emit(self, params: dict[str, Any]) -> _Answer:
        _params(params, {"event": str}, {"envelope": dict, "failures": bool})
        future = self.bus.submit(params["event"], params.get("envelope"))
        return _Pending(future, self._decision_with_failures_json if params.get("failures") else _decision_json)

    def _decision_with_failures_json(self, decision: Any) -> Any:
        """The decision, with what an in-process ``hookbus emit`` would say on stderr:
        ``failed``, the sync hooks that failed, and ``problems``, what loading the home
        reported; each only when there is any."""
        answer = decision.as_dict()
        if decision.failed:
            answer["failed"] = [failure.as_dict() for failure in decision.failed]
        snapshot = self.bus.snapshot
        problems = [f"{'kept' if problem.kept_last_good else 'skipped'} {problem}" for problem in snapshot.problems]
        problems += [f"warning: {warning}" for warning in snapshot.warnings]
        if problems:
            answer["problems"] = problems
        return answer

    def _trigger(self, params: dict[str, Any]) -> _Answer:
        _params(params, {"hook_id": str}, {"envelope": dict})
        hook_id, envelope = params["hook_id"], params.get("envelope")
        job = self._threads.submit(lambda: self.bus.trigger(hook_id, envelope))
        return _Pending(job.future, _record_json)

    def _ping(self, params: dict[str, Any]) -> _Answer:
        _params(params, {}, {})
        return {"version": __version__, "generation": self.bus.generation, "home": str(self.bus.home.root)}

    def _reload(self, params: dict[str, Any]) -> _Answer:
        _params(params, {}, {})
        job = self._threads.submit(self.bus.reload)
        return _Pending(job.future, _reload_json)

    # -- closing ----------------------------------------------------------------------

    async def _close_connections(self) -> None:
        """Close every connection once its answers are written; abort those that do not
        take them within CLOSE_GRACE_SECONDS (a client that stopped reading)."""
        connections = list(self._connections)
        for connection in connections:
            connection.close()
        deadline = self._loop.time() + CLOSE_GRACE_SECONDS
        while self._connections and self._loop.time() < deadline:
            await asyncio.sleep(0.01)
        for connection in list(self._connections):
            connection.abort()

    def forget(self, connection: _Connection) -> None:
        self._connections.discard(connection)

    def remember(self, connection: _Connection) -> None:
        self._connections.add(connection)


def _decision_json(decision: Any) -> Any:
    return decision.as_dict()



def _record_json(record: Any) -> Any:
    return record.log_entry()


def _reload_json(snapshot: Any) -> Any:
    return {
        "generation": snapshot.generation,
        "hooks": len(snapshot.hooks),
        "problems": [str(problem) for problem in snapshot.problems],
    }


class _Connection(asyncio.Protocol):
    """One client: bytes in, lines out to the server, answers back in any order."""

    def __init__(self, server: HookServer) -> None:
        self._server = server
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        #: Where the search for the next newline resumes: bytes before it hold none.
        self._scanned = 0
        self._in_flight = 0
        self._writing_paused = False
        self._reading_paused = False
        #: The client sent EOF (closed, or shut its sending side): once its requests are
        #: answered, the connection is closed; else a client gone away would hold it open.
        self._eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self._server.remember(self)

    def connection_lost(self, exc: Exception | None) -> None:
        # Requests still running finish and are recorded by the bus; their answers are
        # dropped by send(), as no one is there to read them.
        self._transport = None
        self._buffer.clear()
        self._server.forget(self)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._process()

    def eof_received(self) -> bool:
        # The client is done sending; it still gets the answers to what it sent. An unended
        # last line is no request. False: asyncio closes once the answers are written.
        self._eof = True
        return not self._answered_all()

    def _answered_all(self) -> bool:
        return self._in_flight == 0 and not self._reading_paused

    def _close_if_done(self) -> None:
        if self._eof and self._answered_all():
            self.close()

    def _process(self) -> None:
        buffer = self._buffer
        start = 0
        while not self._reading_paused and self._transport is not None:
            end = buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            if end - start > MAX_LINE_BYTES:
                self._too_large()
                return
            line = bytes(buffer[start:end])
            start = end + 1
            self._scanned = start
            if line.strip():
                self._server.handle(self, line)
        if start:
            del buffer[:start]
            self._scanned -= start
        if self._reading_paused or self._transport is None:
            return
        self._scanned = len(buffer)
        if len(buffer) > MAX_LINE_BYTES:
            self._too_large()

    def _too_large(self) -> None:
        self.send(
            error_response(
                None, REQUEST_TOO_LARGE,
                f"request too large: a line may hold at most {MAX_LINE_BYTES} bytes; closing the connection",
            )
        )
        self.close()

    def send(self, message: dict[str, Any]) -> None:
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.write(encode(message))

    def started(self) -> None:
        self._in_flight += 1
        self._update_reading()

    def finished(self) -> None:
        self._in_flight -= 1
        self._update_reading()
        self._close_if_done()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        pause = self._writing_paused or self._in_flight >= MAX_IN_FLIGHT
        if pause and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not pause and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()
            self._process()  # lines that arrived before the pause

    def close(self) -> None:
        self._buffer.clear()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()
