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
import time
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
from hookbus.dispatch import RUNNER_GRACE_SECONDS
from hookbus.loader import failing_problems
from hookbus.serve.protocol import (
    HOOK_NOT_FOUND,
    HOOKBUS_ERROR,
    HOOKS_DISABLED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MAX_LINE_BYTES,
    METHOD_NOT_FOUND,
    METHODS,
    OTHER_HOME,
    OTHER_TIER,
    PERMISSION_DENIED,
    JSONRPC_VERSION,
    REQUEST_TOO_LARGE,
    SERVER_BUSY,
    SHUTTING_DOWN,
    TOO_LATE,
    ProtocolError,
    Request,
    encode,
    error_response,
    parse_request,
    result_response,
)
from hookbus.serve.rendezvous import START_GRACE_SECONDS, STARTED, kernel_path, peer_uid, trusted_uid
from hookbus.reporting import ReportOnce
from hookbus.workers import ElasticThreads, finished

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

#: Requests running hooks at once, over every connection: past it, new ones are shed
#: (SERVER_BUSY: nothing ran, and the client runs the hooks itself).
MAX_REQUESTS_RUNNING = 256
#: What the requests being parsed and running may hold in memory, as estimated from their
#: lines (``request_cost``); a request that would take the total past it is shed.
MEMORY_BUDGET_BYTES = 256 * 1024 * 1024
#: What all connections together may hold of lines not yet complete; the connection whose
#: data takes the total past it is answered SERVER_BUSY and closed.
BUFFER_BUDGET_BYTES = 64 * 1024 * 1024
#: What a parsed container costs in memory, at least (an empty dict is 64 bytes, a list
#: 56, plus its slot in its parent): ``[{},{},...]`` parses to 26 times its text.
CONTAINER_BYTES = 104
#: Lines longer than this are parsed on a thread, so that the loop answers others meanwhile
#: (the slowest, a deeply nested line, parses at about 2 MB/s).
PARSE_INLINE_BYTES = 64 * 1024
#: Descriptors kept for the hooks' pipes and the server's own files: connections may take
#: half of what is left.
DESCRIPTOR_RESERVE = 64


def request_cost(line: bytes) -> int:
    """What ``line`` may take in memory once parsed, estimated from above in linear time:
    its text, and each ``{`` or ``[`` in it (inside strings too) as a container."""
    return len(line) + CONTAINER_BYTES * (line.count(b"{") + line.count(b"["))


def connection_limit() -> int:
    """How many connections the server holds at once: half the descriptors it may open,
    the reserve aside, so that hooks can always start (EMFILE is for the excess clients,
    answered SERVER_BUSY, not for a good client's hook)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(8, (soft - DESCRIPTOR_RESERVE) // 2)


#: What a method returns: a JSON-ready result, or a Future and how to make its result JSON.
_Answer = Any
_Handler = Callable[[dict[str, Any], "_Connection", Request], _Answer]


class _Pending:
    """A request whose hooks are running."""

    __slots__ = ("future", "convert", "cost")

    def __init__(self, future: Future[Any], convert: Callable[[Any], Any]) -> None:
        self.future = future
        self.convert = convert
        #: What its line was estimated to hold in memory, while it runs.
        self.cost = 0


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
        value = params.get(name)
        if name in params and (not isinstance(value, kind) or (kind is float and isinstance(value, bool))):
            wanted = {str: "a string", bool: "true or false", float: "a number"}.get(kind, "an object")
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
        #: Estimated bytes of the requests being parsed on threads and of those running.
        self._bytes_in_flight = 0
        #: Bytes of incomplete lines, over every connection.
        self.buffered = 0
        self._max_connections = connection_limit()
        self._refused_uids: set[int] = set()
        self._report = ReportOnce()
        #: When it started serving, for ``status``: its uptime (monotonic) and the moment.
        self._started = time.monotonic(), time.time()
        #: The HTTP listener beside the socket (``serve --http``), for ``status``.
        self.http: Any = None
        # Bound to no loop until used (Python 3.10+): stop() works before serve() runs.
        self._stop_requested = asyncio.Event()
        self._drained = asyncio.Event()
        self._handlers: dict[str, _Handler] = {
            "emit": self._emit,
            "trigger": self._trigger,
            "ping": self._ping,
            "reload": self._reload,
            "status": self._status,
            "explain": self._explain,
        }

    @property
    def connections(self) -> int:
        return len(self._connections)

    @property
    def bytes_in_flight(self) -> int:
        """What the requests being parsed and running are estimated to hold in memory
        (``request_cost``), against MEMORY_BUDGET_BYTES."""
        return self._bytes_in_flight

    def hold_bytes(self, change: int) -> None:
        """Count ``change`` bytes more (fewer, when negative) against the memory budget:
        the http listener's requests share it. On the server's event loop only."""
        self._bytes_in_flight += change

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
        if len(self._connections) + len(self._connecting) >= self._max_connections:
            self._shed(sock, f"the server holds {self._max_connections} connections, its most")
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

    def _shed(self, sock: socket.socket, why: str) -> None:
        """Answer a connection SERVER_BUSY and close it, before reading a byte."""
        self._report.failed("load", f"shedding load: {why}; clients run their hooks in-process meanwhile")
        try:
            sock.setblocking(False)
            sock.send(encode(error_response(None, SERVER_BUSY, f"server busy: {why}; nothing was run")))
        except OSError:
            pass
        sock.close()

    # -- requests -------------------------------------------------------------------------

    def handle(self, connection: _Connection, line: bytes) -> None:
        cost = request_cost(line)
        if self._bytes_in_flight + cost > MEMORY_BUDGET_BYTES:
            # Not parsed: parsing it is what would take the memory. Its id is unknown.
            why = (
                f"the request would take about {cost >> 20} MiB once parsed, and requests in flight "
                f"hold {self._bytes_in_flight >> 20} MiB of the {MEMORY_BUDGET_BYTES >> 20} MiB the server allows"
            )
            self._report.failed("load", f"shedding load: {why}")
            connection.send(error_response(None, SERVER_BUSY, f"server busy: {why}; nothing was run"))
            return
        if len(line) <= PARSE_INLINE_BYTES:
            self._handle_parsed(connection, _parse(line), cost)
            return
        self._bytes_in_flight += cost
        connection.started()
        loop = self._loop

        def parse_and_hand_back() -> None:
            parsed = _parse(line)
            loop.call_soon_threadsafe(self._parsed_on_thread, connection, parsed, cost)

        try:
            self._threads.submit(parse_and_hand_back)
        except RuntimeError as exc:  # no thread to parse it on
            self._bytes_in_flight -= cost
            connection.finished()
            connection.send(error_response(None, SERVER_BUSY, f"server busy: cannot start a thread ({exc}); nothing was run"))

    def _parsed_on_thread(self, connection: _Connection, parsed: Request | ProtocolError, cost: int) -> None:
        self._bytes_in_flight -= cost
        try:
            self._handle_parsed(connection, parsed, cost)
        finally:
            connection.finished()

    def _handle_parsed(self, connection: _Connection, parsed: Request | ProtocolError, cost: int) -> None:
        if isinstance(parsed, ProtocolError):
            if parsed.answered:
                connection.send(parsed.response())
            return
        request = parsed
        try:
            if self._in_flight >= MAX_REQUESTS_RUNNING:
                raise ProtocolError(
                    SERVER_BUSY, f"server busy: {self._in_flight} requests are running hooks, the most it runs at once; nothing was run"
                )
            answer = self._run(request, connection)
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
        answer.cost = cost
        self._bytes_in_flight += cost
        self._in_flight += 1
        connection.started()
        loop = self._loop
        answer.future.add_done_callback(
            lambda _: loop.call_soon_threadsafe(self._finished, connection, request, answer)
        )

    def _run(self, request: Request, connection: _Connection) -> _Answer:
        if self._stopping:
            raise ProtocolError(SHUTTING_DOWN, "the server is shutting down; it takes no new requests")
        handler = self._handlers.get(request.method)
        if handler is None:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"method not found: {request.method!r}; methods are {', '.join(METHODS)}",
            )
        params = request.params
        if "home" in params or "managed" in params:
            params = dict(params)
            if "home" in params:
                self._check_home(params.pop("home"))
            if "managed" in params:
                self._check_managed(params.pop("managed"))
        return handler(params, connection, request)

    def _check_managed(self, managed: object) -> None:
        """OTHER_TIER unless ``managed`` (the managed tier the client would load: the
        managed directory's path, or ``""`` for none) is the one this server loads. A
        server started before ``/etc/vix`` appeared, or with another
        ``$HOOKBUS_MANAGED_DIR``, never decides for a client that would load another
        tier; the client decides in its own process, and the server catches up at its
        next poll of the managed directory."""
        if not isinstance(managed, str):
            raise ProtocolError(INVALID_PARAMS, "invalid params: 'managed' must be a string")
        loaded = self.bus.managed_tier
        if managed != loaded:
            def named(tier: str) -> str:
                return f"the managed directory {tier}" if tier else "no managed directory"

            raise ProtocolError(
                OTHER_TIER,
                f"this server loads {named(loaded)}, and the client would load {named(managed)}; nothing was run",
                data={"managed": loaded},
            )

    def _check_home(self, home: object) -> None:
        """OTHER_HOME unless ``home`` is the directory this server serves (any path to it)."""
        if not isinstance(home, str):
            raise ProtocolError(INVALID_PARAMS, "invalid params: 'home' must be a string")
        root = str(self.bus.home.root)
        # The spelling the clients of this home send (the same rules find it) costs no stat;
        # ".." is read as the kernel reads it, never lexically (A/lnk/.. is not A).
        try:
            served = os.path.normpath(kernel_path(home)) == os.path.normpath(root)
        except (OSError, ValueError):
            served = False
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
        self._bytes_in_flight -= answer.cost
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

    def _emit(self, params: dict[str, Any], connection: _Connection, request: Request) -> _Answer:
        _params(params, {"event": str}, {"envelope": dict, "failures": bool, "start_by": float, "undecided": str})
        convert = self._decision_with_failures_json if params.get("failures") else _decision_json
        start_by = params.get("start_by")
        _check_in_time(start_by, 0.0)
        undecided = request.unreadable or params.get("undecided")
        if undecided is not None:
            # Nothing runs: the matching hooks count as failed, under their on_error.
            return _Pending(finished(self.bus.undecided(params["event"], params.get("envelope"), undecided)), convert)
        on_start = None
        if start_by is not None and not request.is_notification:

            def on_start(wait: float) -> None:
                # Checked again just before the word goes out: a server stopped between the
                # two checks must not start what the client has given up on.
                _check_in_time(start_by, START_GRACE_SECONDS / 2)
                connection.send_started(request.id, wait)

        try:
            future = self.bus.submit(params["event"], params.get("envelope"), on_start=on_start)
        except RuntimeError as exc:  # no thread to run the hooks on: nothing ran
            raise ProtocolError(SERVER_BUSY, f"server busy: cannot start a thread to run the hooks ({exc}); nothing was run") from None
        return _Pending(future, convert)

    def _decision_with_failures_json(self, decision: Any) -> Any:
        return decision_with_failures(self.bus, decision)

    def _trigger(self, params: dict[str, Any], connection: _Connection, request: Request) -> _Answer:
        _params(params, {"hook_id": str}, {"envelope": dict, "start_by": float})
        hook_id, envelope = params["hook_id"], params.get("envelope")
        start_by = params.get("start_by")
        _check_in_time(start_by, 0.0)
        if start_by is not None and not request.is_notification:
            hook = self.bus.snapshot.hooks.get(hook_id)
            if hook is not None:  # else trigger answers HOOK_NOT_FOUND at once
                _check_in_time(start_by, START_GRACE_SECONDS / 2)
                connection.send_started(request.id, hook.timeout + RUNNER_GRACE_SECONDS)
        try:
            job = self._threads.submit(lambda: self.bus.trigger(hook_id, envelope))
        except RuntimeError as exc:
            raise ProtocolError(SERVER_BUSY, f"server busy: cannot start a thread to run the hook ({exc}); nothing was run") from None
        return _Pending(job.future, _record_json)

    def _ping(self, params: dict[str, Any], connection: _Connection, request: Request) -> _Answer:
        _params(params, {}, {"start_by": float})
        return {"version": __version__, "generation": self.bus.generation, "home": str(self.bus.home.root), "pid": os.getpid()}

    def _status(self, params: dict[str, Any], connection: _Connection, request: Request) -> _Answer:
        """What ``hookbus list`` shows, as this server enforces it: its hooks (a broken
        file's last good version among them), their last fires, the problems; and what
        ``hookbus status`` shows of the server: its version, how long it has run, its
        socket, and its plugins as ``hookbus plugins`` shows them."""
        _params(params, {}, {"start_by": float})
        _check_in_time(params.get("start_by"), 0.0)
        snapshot = self.bus.snapshot

        def status() -> dict[str, Any]:
            from hookbus.cli.views import hook_rows, plugin_rows
            from hookbus.records import utc_timestamp

            last_runs = {hook_id: _last_run(self.bus, hook_id) for hook_id in snapshot.every_hook}
            started, started_at = self._started
            return {
                "home": str(self.bus.home.root),
                "pid": os.getpid(),
                "generation": snapshot.generation,
                "hooks": hook_rows(snapshot, last_runs, {}),
                "problems": [str(problem) for problem in snapshot.problems],
                "warnings": list(snapshot.warnings),
                "disabled": snapshot.settings.disabled_reason,
                "version": __version__,
                "started_at": utc_timestamp(started_at),
                "uptime_seconds": round(time.monotonic() - started, 3),
                "socket": self._socket_path(),
                "plugins": plugin_rows(self.bus.plugin_infos, self.bus.active_recorders),
                "recorders": list(self.bus.active_recorders),
                "managed": self.bus.managed_tier,
                **({"http": self.http.status()} if self.http is not None else {}),
            }

        return self._on_a_thread(status, connection, request, params.get("start_by"), 0.0)

    def _socket_path(self) -> str | None:
        """The path this server listens on, as ``serve`` announced it: what its lock file
        says, when this process holds it (a path too long for a socket address is bound
        through a descriptor, and the socket's own name is then no path); else the
        socket's name, when it is one."""
        import json

        from hookbus.serve.rendezvous import LOCK_NAME, run_dir

        try:
            with open(os.path.join(run_dir(str(self.bus.home.root)), LOCK_NAME), "rb") as handle:
                holder = json.loads(handle.read(4096))
            if holder.get("pid") == os.getpid() and isinstance(holder.get("socket"), str):
                return str(holder["socket"])
        except (OSError, ValueError, AttributeError):
            pass
        try:
            name = self._listener.getsockname()
        except OSError:
            return None
        return name if isinstance(name, str) and name.startswith("/") and not name.startswith("/proc/self/fd/") else None

    def _explain(self, params: dict[str, Any], connection: _Connection, request: Request) -> _Answer:
        """``hookbus explain`` as this server would decide: its hooks run (and are
        recorded) unless ``dry_run``."""
        _params(params, {"event": str}, {"envelope": dict, "dry_run": bool, "undecided": str, "start_by": float})
        event, envelope, dry_run = params["event"], params.get("envelope"), params.get("dry_run", False)
        _check_in_time(params.get("start_by"), 0.0)
        undecided = request.unreadable or params.get("undecided")
        snapshot = self.bus.snapshot
        wait = max((hook.timeout for hook in snapshot.hooks.values() if hook.event == event and hook.is_sync), default=0.0)
        home = str(self.bus.home.root)
        return self._on_a_thread(
            lambda: {**self.bus.explain(event, envelope, dry_run=dry_run, undecided=undecided).as_json(), "home": home},
            connection, request, params.get("start_by"), 0.0 if dry_run else wait + RUNNER_GRACE_SECONDS,
        )

    def _on_a_thread(
        self, work: Callable[[], Any], connection: _Connection, request: Request, start_by: float | None, wait: float
    ) -> _Pending:
        """Run ``work`` on a thread (it reads files, or runs hooks): the loop answers others
        meanwhile. A client that sent ``start_by`` hears that it started, and for how long."""
        if start_by is not None and not request.is_notification:
            _check_in_time(start_by, START_GRACE_SECONDS / 2)
            connection.send_started(request.id, wait)
        try:
            job = self._threads.submit(work)
        except RuntimeError as exc:
            raise ProtocolError(SERVER_BUSY, f"server busy: cannot start a thread ({exc}); nothing was run") from None
        return _Pending(job.future, _as_is)

    def _reload(self, params: dict[str, Any], connection: _Connection, request: Request) -> _Answer:
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


def _parse(line: bytes) -> Request | ProtocolError:
    try:
        return parse_request(line)
    except ProtocolError as exc:
        return exc



def decision_with_failures(bus: HookBus, decision: Any) -> Any:
    """The decision, with what an in-process ``hookbus emit`` would say on stderr:
    ``failed``, the sync hooks that failed, and ``problems``, what loading the home
    reported; each only when there is any."""
    answer = decision.as_dict()
    if decision.failed:
        answer["failed"] = [failure.as_dict() for failure in decision.failed]
    snapshot = bus.snapshot
    # As the in-process load logs them: a hook that will fail is loaded, so a warning.
    failing = {id(problem) for problems in failing_problems(snapshot).values() for problem in problems}
    problems = [
        f"{'warning:' if id(problem) in failing else 'kept' if problem.kept_last_good else 'skipped'} {problem}"
        for problem in snapshot.problems
    ]
    problems += [f"warning: {warning}" for warning in snapshot.warnings]
    if problems:
        answer["problems"] = problems
    return answer

def _check_in_time(start_by: float | None, grace: float) -> None:
    """TOO_LATE when the client's ``start_by`` (plus ``grace``) has passed: it stopped
    waiting, and may be running the hooks itself."""
    if start_by is not None and time.time() > start_by + grace:
        raise ProtocolError(TOO_LATE, "too late: the client stopped waiting for this request before the server read it; nothing was run")


def _as_is(result: Any) -> Any:
    return result


def _last_run(bus: HookBus, hook_id: str) -> Any:
    runs = bus.read_runs(hook_id, limit=1)
    return runs[-1] if runs else None


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
        self._clear()
        self._server.forget(self)

    def _clear(self) -> None:
        self._server.buffered -= len(self._buffer)
        self._buffer.clear()
        self._scanned = 0

    def data_received(self, data: bytes) -> None:
        server = self._server
        self._buffer += data
        server.buffered += len(data)
        self._process()
        if server.buffered > BUFFER_BUDGET_BYTES and self._buffer:
            why = f"clients hold {server.buffered >> 20} MiB of unfinished requests, more than the {BUFFER_BUDGET_BYTES >> 20} MiB it keeps"
            self.send(error_response(None, SERVER_BUSY, f"server busy: {why}; nothing was run; closing the connection"))
            self.close()

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
            removed = min(start, len(buffer))  # close() may have emptied it meanwhile
            del buffer[:start]
            self._server.buffered -= removed
            self._scanned = max(self._scanned - start, 0)
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

    def send_started(self, id: Any, wait: float) -> None:
        """Tell the client its request's hooks start now, and may take ``wait`` seconds."""
        self.send({"jsonrpc": JSONRPC_VERSION, "method": STARTED, "params": {"id": id, "wait": round(wait, 3)}})

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
        self._clear()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()
