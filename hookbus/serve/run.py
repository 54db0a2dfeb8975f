"""``hookbus serve``: one long-lived, watching HookBus for every process of a home.

Start-up: the run directory, the lock, the bus, then the socket; ``hookbus serve:
listening on PATH`` on stderr once requests are answered. With ``--http 127.0.0.1:PORT``,
also an HTTP listener for Claude Code's http hooks (``hookbus.serve.httplistener``), and
``hookbus serve: listening on http://127.0.0.1:PORT`` (the real port) after the socket's.
SIGTERM or SIGINT: stop accepting, answer what is running, close the bus (every fire
recorded), remove the socket, exit 0; a second one kills the hooks still running (recorded
as interrupted). SIGHUP: reload.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import threading
from typing import Callable

from hookbus.bus import HookBus
from hookbus.serve.listener import ServeError, ServeLock, check_socket_dir, ensure_run_dir, listen, remove_socket
from hookbus.serve.rendezvous import default_socket_path, home_root, socket_path
from hookbus.serve.server import HookServer

READY_MESSAGE = "hookbus serve: listening on {path}"


def serve(
    home: str | None = None,
    socket_file: str | None = None,
    *,
    http: str | None = None,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Serve the hooks of ``home`` on ``socket_file`` (and, with ``http``, a loopback
    ``HOST:PORT``, on ``POST /claude-code``) until SIGTERM or SIGINT; 0 then. ServeError (a
    HookBusError) when it cannot start. Call it from the main thread."""
    from hookbus.serve.httpconfig import parse_http_address

    root = home_root(home)
    path = socket_path(socket_file, root)
    address = parse_http_address(http) if http is not None else None
    ensure_run_dir(root)
    if path != default_socket_path(root):
        check_socket_dir(path)
    lock = ServeLock(root)
    lock.acquire(path)
    try:
        http_socket, token = _http_socket(root, address) if address is not None else (None, "")
        try:
            bus = HookBus(root, watch=True)
            try:
                listener, identity = listen(path)
                asyncio.run(_serve(bus, listener, path, identity, announce or _to_stderr, http_socket, token))
            finally:
                bus.close()  # idempotent: already closed unless start-up failed
        finally:
            if http_socket is not None:
                http_socket.close()
    finally:
        lock.release()
    return 0


def _http_socket(home: str, address: tuple[str, int]) -> tuple[socket.socket, str]:
    """A TCP socket listening on ``address`` (loopback, checked), and the token requests
    must carry."""
    from hookbus.serve.httpconfig import load_token, url_of
    from hookbus.serve.listener import BACKLOG

    token, _ = load_token(home)
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        # A restart may find the port in TIME_WAIT; Linux still refuses a second listener.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {url_of(host, port)}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock, token


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _serve(
    bus: HookBus,
    listener: socket.socket,
    path: str,
    identity: tuple[int, int],
    announce: Callable[[str], None],
    http_socket: socket.socket | None = None,
    token: str = "",
) -> None:
    from hookbus.workers import ElasticThreads

    loop = asyncio.get_running_loop()
    server = HookServer(bus, listener)
    http = None
    http_threads = ElasticThreads("hookbus-http")
    if http_socket is not None:
        from hookbus.serve.httplistener import HttpListener

        http = server.http = HttpListener(bus, http_socket, token, http_threads)
    stops = 0

    def on_stop(signum: int) -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            server.stop()
            if http is not None:
                http.stop_accepting()
            return
        # A second signal: do not wait for slow hooks. They are killed and recorded as
        # interrupted; from a thread, since interrupt takes the bus's locks.
        reason = f"interrupted by {signal.Signals(signum).name}"
        threading.Thread(target=bus.interrupt, args=(reason,), name="hookbus-interrupt", daemon=True).start()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_stop, signum)
    loop.add_signal_handler(signal.SIGHUP, server.reload_in_background)
    try:
        announce(READY_MESSAGE.format(path=path))
        if http is not None:
            await http.start()
            announce(READY_MESSAGE.format(path=http.url))
        await server.serve(on_stop_accepting=lambda: remove_socket(path, identity))
        if http is not None:
            await http.close()
        # Still under the handlers above: a signal now interrupts the drain, it does not
        # kill the process with fires unrecorded.
        await loop.run_in_executor(None, bus.close)
    finally:
        remove_socket(path, identity)
        http_threads.shutdown()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)
