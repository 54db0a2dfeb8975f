"""Python clients of ``hookbus serve``: ``Client`` (blocking) and ``AsyncClient`` (asyncio).

    from hookbus.serve.client import Client
    with Client(home="~/.vix") as client:
        decision = client.emit("PreToolUse", {"tool_name": "bash", "tool_input": {...}})
        if decision["behavior"] == "deny": ...

Results are the JSON the server sent: ``emit`` gives the decision object ``hookbus emit``
prints, ``trigger`` the run record. Standard library only, so ``hookbus emit`` can use it
without importing the engine; asyncio is imported only by ``AsyncClient``.
"""

from __future__ import annotations

import json
import socket

from hookbus.serve.protocol import (
    MAX_LINE_BYTES,
    NO_ID,
    NOT_RUN,
    OTHER_HOME,
    encode,
    request,
)
from hookbus.serve.rendezvous import (
    ANSWER_MARGIN_SECONDS,
    CONNECT_TIMEOUT_SECONDS,
    MAX_WAIT_SECONDS,
    START_GRACE_SECONDS,
    START_WINDOW_SECONDS,
    STARTED,
    NoAnswer,
    NoServer,
    NotStarted,
    ServerBusy,
    UntrustedPeer,
    await_response,
    connect,
    home_root,
    read_line,
    socket_path,
)

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    import os
    from typing import Any

__all__ = [
    "AsyncClient",
    "Client",
    "NoAnswer",
    "NoServer",
    "NotStarted",
    "OtherHome",
    "RemoteError",
    "ServerBusy",
    "UntrustedPeer",
]


class RemoteError(Exception):
    """The server answered with an error: ``code`` is JSON-RPC's or hookbus's own
    (``hookbus.serve.protocol``), ``message`` says what, ``data`` is extra detail or None.
    ``ran_nothing``: the error came before any of the request ran (``NOT_RUN``), so its
    hooks can be run elsewhere without running twice."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def ran_nothing(self) -> bool:
        return self.code in NOT_RUN

    def __str__(self) -> str:
        return self.message


def _outcome(response: Any) -> Any:
    """The result of a response, or RemoteError for an error response."""
    if not isinstance(response, dict):
        raise ConnectionError(f"the server sent something that is not a response: {response!r:.200}")
    error = response.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ConnectionError(f"the server sent a malformed error: {error!r:.200}")
        code = int(error.get("code", 0))
        kind = OtherHome if code == OTHER_HOME else RemoteError
        raise kind(code, str(error.get("message", "")), error.get("data"))
    return response.get("result")


class OtherHome(RemoteError):
    """The client was made for one home and the server serves another: nothing was run."""


def _with_home(params: dict[str, Any] | None, home: str | None) -> dict[str, Any] | None:
    """``params`` with the client's home in it, when the client was given one."""
    if home is None:
        return params
    return {**(params or {}), "home": home}


def _with_tier(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the managed tier this process would load: a server that loads
    another one (started before the managed directory appeared, say) runs none of the
    request (OTHER_TIER, so ``ran_nothing``), and the caller decides in its own process."""
    from hookbus.policy.managed import managed_identity

    return {**params, "managed": managed_identity()}


class Client:
    """One connection to ``hookbus serve``, one request at a time; not for sharing between
    threads (give each thread its own, or use AsyncClient for many requests in flight).

    The socket is ``path``, else ``$HOOKBUS_SOCKET``, else the default one of ``home``
    (``HOME/run/hookbus.sock``; home: ``$VIX_HOME``, else ``~/.vix``). NoServer when
    nothing listens there, UntrustedPeer when another user's process does, ServerBusy when
    its accept queue stays full for 5 s (until then it waits for room). Given ``home``,
    every request says so, and the server refuses it (OtherHome, a RemoteError) unless it
    serves that home: ``$HOOKBUS_SOCKET`` may name another home's server.

    ``emit``, ``trigger`` and ``ping`` never wait on a stopped or wedged server for long:
    the server must start the request within 2 s (NotStarted otherwise: nothing ran, and
    nothing will), and then answer within the time it said the hooks may take, plus 2 s
    (NoAnswer otherwise: the hooks may have run). ``timeout`` bounds ``reload`` and
    ``call`` (None: as long as it takes). A request that fails so closes the client, since
    its answer could still arrive on the same connection.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
    ) -> None:
        root = home_root(home)
        self.path = socket_path(None if path is None else str(path), root)
        #: The home every request names, when one was given.
        self.home = None if home is None else root
        self._socket: socket.socket | None = connect(self.path, CONNECT_TIMEOUT_SECONDS)
        self._timeout = timeout
        self._socket.settimeout(timeout)
        self._buffer = bytearray()
        self._last_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and return its result; RemoteError if the server says no."""
        sock = self._connected()
        self._last_id += 1
        wanted = self._last_id
        try:
            sock.sendall(encode(request(wanted, method, _with_home(params, self.home))))
            while True:
                response = json.loads(self._read_line(sock))
                if isinstance(response, dict) and response.get("id") in (wanted, None):
                    return _outcome(response)
        except (OSError, ValueError):
            self.close()  # an answer may still be on its way: the connection is spent
            raise

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification: the server runs it and answers nothing."""
        self._connected().sendall(encode(request(NO_ID, method, _with_home(params, self.home))))

    def emit(
        self, event: str, envelope: dict[str, Any] | None = None, *, failures: bool = False, undecided: str | None = None
    ) -> dict[str, Any]:
        """The decision for ``event``: ``{"behavior", "reason"?, "input"?, "context"?}``
        and the extras. With ``failures``, also ``"failed"``: each sync hook that failed
        (``{"hook_id", "failure", "error", "closed"}``), when any did. ``undecided``: the
        envelope could only be read in part (its top-level fields are given), for this
        reason: the server runs nothing, and each hook that matches counts as failed under
        its on_error. NotStarted or NoAnswer when the server is stopped or wedged."""
        params: dict[str, Any] = {"event": event, "envelope": envelope or {}}
        if failures:
            params["failures"] = True
        if undecided is not None:
            params["undecided"] = undecided
        result: dict[str, Any] = self._call_in_time("emit", _with_tier(params))
        return result

    def trigger(self, hook_id: str, envelope: dict[str, Any] | None = None) -> dict[str, Any]:
        """Fire one hook now, whatever its trigger; its run record."""
        result: dict[str, Any] = self._call_in_time("trigger", {"hook_id": hook_id, "envelope": envelope or {}})
        return result

    def ping(self) -> dict[str, Any]:
        """``{"version", "generation", "home"}`` of the server."""
        result: dict[str, Any] = self._call_in_time("ping", {})
        return result

    def status(self) -> dict[str, Any]:
        """What the server enforces: ``{"home", "pid", "generation", "hooks", "problems",
        "warnings", "disabled"}``, each hook as ``hookbus list`` shows it."""
        result: dict[str, Any] = self._call_in_time("status", {})
        return result

    def explain(
        self, event: str, envelope: dict[str, Any] | None = None, *, dry_run: bool = False, undecided: str | None = None
    ) -> dict[str, Any]:
        """``hookbus explain --json`` as the server decides: its hooks run and are recorded
        unless ``dry_run``."""
        params: dict[str, Any] = {"event": event, "envelope": envelope or {}, "dry_run": dry_run}
        if undecided is not None:
            params["undecided"] = undecided
        result: dict[str, Any] = self._call_in_time("explain", _with_tier(params))
        return result

    def _call_in_time(self, method: str, params: dict[str, Any]) -> Any:
        """``call``, with a ``start_by``: bounded as the class says."""
        import time

        sock = self._connected()
        self._last_id += 1
        wanted = self._last_id
        params = {**params, "start_by": time.time() + START_WINDOW_SECONDS}
        try:
            line = encode(request(wanted, method, _with_home(params, self.home)))
            if len(line) > MAX_LINE_BYTES + 1:
                raise NotStarted(f"the request is {len(line):,} bytes, more than a line to the server may hold ({MAX_LINE_BYTES:,}); nothing was sent")
            sock.sendall(line)
            response = await_response(sock, self._buffer, self.path, wanted, json.loads)
            sock.settimeout(self._timeout)
            return _outcome(response)
        except OSError as exc:
            self.close()  # an answer may still be on its way: the connection is spent
            if isinstance(exc, (NotStarted, NoAnswer)):
                raise
            raise NotStarted(f"could not send the request to the server on {self.path} ({exc}); nothing ran") from None
        except ValueError:
            self.close()
            raise

    def reload(self) -> dict[str, Any]:
        """Re-read every hook now; ``{"generation", "hooks", "problems"}`` afterwards."""
        result: dict[str, Any] = self.call("reload")
        return result

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connected(self) -> socket.socket:
        if self._socket is None:
            raise ConnectionError(f"the client of {self.path} is closed")
        return self._socket

    def _read_line(self, sock: socket.socket) -> bytes:
        return read_line(sock, self._buffer, self.path)


async def _connect_in_thread(path: str) -> socket.socket:
    """Wait for room in a full accept queue without blocking the event loop."""
    import asyncio

    waiting = asyncio.get_running_loop().run_in_executor(None, connect, path, CONNECT_TIMEOUT_SECONDS)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        # The thread may still connect: that socket has no one to close it but us.
        waiting.add_done_callback(_close_if_connected)
        raise


def _close_if_connected(done: asyncio.Future[socket.socket]) -> None:
    if not done.cancelled() and done.exception() is None:
        done.result().close()


class AsyncClient:
    """One connection to ``hookbus serve`` for asyncio, with any number of requests in
    flight: ``await client.emit(...)`` from as many tasks as you like. Make one with
    ``await AsyncClient.connect(...)`` (same arguments as Client) and ``await
    client.close()`` it, or use ``async with``."""

    def __init__(
        self, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, home: str | None = None
    ) -> None:
        import asyncio

        self.path = path
        self.home = home
        self._reader = reader
        self._writer = writer
        self._pending: dict[int, asyncio.Future[Any]] = {}
        #: Requests the server said it started: by when (the loop's clock) they must end.
        self._due: dict[int, float] = {}
        self._last_id = 0
        self._failure: BaseException | None = None
        #: A null-id error (permission denied, request too large) comes just before the
        #: server closes the connection: it is what the pending requests are failed with.
        self._last_word: str | None = None
        self._reading = asyncio.get_running_loop().create_task(self._read_responses())

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        home: str | os.PathLike[str] | None = None,
    ) -> AsyncClient:
        import asyncio

        root = home_root(home)
        chosen = socket_path(None if path is None else str(path), root)
        try:
            sock = connect(chosen, 0)  # the usual case: the kernel queues it at once
        except ServerBusy:
            sock = await _connect_in_thread(chosen)
        sock.setblocking(False)
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock, limit=MAX_LINE_BYTES + 1)
        except BaseException:
            sock.close()
            raise
        return cls(chosen, reader, writer, None if home is None else root)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        import asyncio

        if self._failure is not None:
            raise ConnectionError(str(self._failure))
        self._last_id += 1
        wanted = self._last_id
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[wanted] = answer
        try:
            self._writer.write(encode(request(wanted, method, _with_home(params, self.home))))
            await self._writer.drain()
            return await answer
        finally:
            self._pending.pop(wanted, None)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._writer.write(encode(request(NO_ID, method, _with_home(params, self.home))))
        await self._writer.drain()

    async def emit(
        self, event: str, envelope: dict[str, Any] | None = None, *, failures: bool = False, undecided: str | None = None
    ) -> dict[str, Any]:
        """As ``Client.emit``, bounded the same way (NotStarted, NoAnswer)."""
        params: dict[str, Any] = {"event": event, "envelope": envelope or {}}
        if failures:
            params["failures"] = True
        if undecided is not None:
            params["undecided"] = undecided
        result: dict[str, Any] = await self._call_in_time("emit", _with_tier(params))
        return result

    async def trigger(self, hook_id: str, envelope: dict[str, Any] | None = None) -> dict[str, Any]:
        result: dict[str, Any] = await self._call_in_time("trigger", {"hook_id": hook_id, "envelope": envelope or {}})
        return result

    async def ping(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call_in_time("ping", {})
        return result

    async def status(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call_in_time("status", {})
        return result

    async def explain(
        self, event: str, envelope: dict[str, Any] | None = None, *, dry_run: bool = False, undecided: str | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"event": event, "envelope": envelope or {}, "dry_run": dry_run}
        if undecided is not None:
            params["undecided"] = undecided
        result: dict[str, Any] = await self._call_in_time("explain", _with_tier(params))
        return result

    async def _call_in_time(self, method: str, params: dict[str, Any]) -> Any:
        """``call`` with a ``start_by``: NotStarted when the server does not start it in
        time (nothing ran), NoAnswer when it started and does not answer in time."""
        import asyncio
        import time

        if self._failure is not None:
            raise NotStarted(f"{self._failure}; nothing was sent")
        loop = asyncio.get_running_loop()
        self._last_id += 1
        wanted = self._last_id
        params = {**params, "start_by": time.time() + START_WINDOW_SECONDS}
        line = encode(request(wanted, method, _with_home(params, self.home)))
        if len(line) > MAX_LINE_BYTES + 1:
            raise NotStarted(f"the request is {len(line):,} bytes, more than a line to the server may hold ({MAX_LINE_BYTES:,}); nothing was sent")
        answer: asyncio.Future[Any] = loop.create_future()
        self._pending[wanted] = answer
        give_up = loop.time() + START_WINDOW_SECONDS + START_GRACE_SECONDS
        try:
            try:
                self._writer.write(line)
                await self._writer.drain()
            except OSError as exc:
                raise NotStarted(f"could not send the request to the server on {self.path} ({exc}); nothing ran") from None
            while not answer.done():
                due = self._due.get(wanted, give_up)
                remaining = due - loop.time()
                if remaining <= 0:
                    if wanted in self._due:
                        raise NoAnswer(f"the server on {self.path} started the hooks and gave no answer in time (is it stopped?); they may have run")
                    raise NotStarted(f"the server on {self.path} did not start the request within {START_WINDOW_SECONDS:g} s (is it stopped or overloaded?); nothing ran")
                await asyncio.wait([answer], timeout=remaining)
            try:
                return answer.result()
            except ConnectionError as exc:
                if isinstance(exc, (NotStarted, NoAnswer)):
                    raise
                if wanted in self._due:
                    raise NoAnswer(f"{exc}; the hooks may have run") from None
                raise NotStarted(f"{exc}; nothing ran") from None
        finally:
            self._pending.pop(wanted, None)
            self._due.pop(wanted, None)

    async def reload(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.call("reload")
        return result

    async def close(self) -> None:
        import asyncio

        self._fail_pending(ConnectionError(f"the client of {self.path} was closed"))
        self._reading.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass  # already reset by the server: closed either way
        try:
            await self._reading
        except asyncio.CancelledError:
            pass

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _read_responses(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line.endswith(b"\n"):
                    raise ConnectionError(f"the server on {self.path} closed the connection")
                response = json.loads(line)
                if isinstance(response, dict) and response.get("method") == STARTED:
                    self._note_started(response.get("params"))
                    continue
                wanted = response.get("id") if isinstance(response, dict) else None
                answer = self._pending.get(wanted) if isinstance(wanted, int) else None
                if answer is None:
                    if wanted is None and isinstance(response, dict) and isinstance(response.get("error"), dict):
                        self._last_word = str(response["error"].get("message"))
                    continue  # a null-id error answers no request of ours
                if not answer.done():
                    try:
                        answer.set_result(_outcome(response))
                    except (RemoteError, ConnectionError) as exc:
                        answer.set_exception(exc)
        except Exception as exc:
            why = f"{exc}: {self._last_word}" if self._last_word else str(exc)
            self._fail_pending(ConnectionError(f"the connection to {self.path} failed: {why}"))

    def _note_started(self, params: Any) -> None:
        """The server started a request's hooks, which may take ``wait`` seconds."""
        import asyncio

        if not isinstance(params, dict) or params.get("id") not in self._pending:
            return
        wait = params.get("wait")
        seconds = float(wait) if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait >= 0 else 0.0
        self._due[params["id"]] = asyncio.get_running_loop().time() + min(seconds, MAX_WAIT_SECONDS) + ANSWER_MARGIN_SECONDS

    def _fail_pending(self, failure: ConnectionError) -> None:
        if self._failure is None:
            self._failure = failure
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(failure)
