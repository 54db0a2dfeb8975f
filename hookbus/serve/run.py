"""``hookbus serve``: one long-lived, watching HookBus for every process of a home.

Start-up: the run directory, the lock, the bus, then the socket; ``hookbus serve:
listening on PATH`` on stderr once requests are answered. With ``--http 127.0.0.1:PORT``,
also an HTTP listener for Claude Code's http hooks (``hookbus.serve.httplistener``), and
``hookbus serve: listening on http://127.0.0.1:PORT`` (the real port) after the socket's.
Under systemd socket activation (``LISTEN_PID``, ``LISTEN_FDS``: a .socket unit holds the
port across restarts, so no one else can take it meanwhile), the http listener is the
socket systemd passed (``hookbus.serve.httpconfig.systemd_socket``), with or without
``--http``. A port that is taken stops the start with who holds it, when that can be
found (another user is a probable squatter).
SIGTERM or SIGINT: stop accepting, answer what is running (and each http request that has
begun to arrive), close the bus (every fire recorded), remove the socket, exit 0; a second
one kills the hooks still running (recorded as interrupted). SIGHUP: reload.
"""

from __future__ import annotations

import asyncio
import errno
import signal
import socket
import sys
import threading
from typing import TYPE_CHECKING, Callable

from hookbus.bus import HookBus
from hookbus.serve.listener import ServeError, ServeLock, check_socket_dir, ensure_run_dir, listen, remove_socket
from hookbus.serve.rendezvous import default_socket_path, home_root, socket_path
from hookbus.serve.server import HookServer

if TYPE_CHECKING:
    from hookbus.serve.httplistener import HttpListener, MemoryBudget

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
    from hookbus.serve.httpconfig import parse_http_address, systemd_socket

    root = home_root(home)
    path = socket_path(socket_file, root)
    address = parse_http_address(http) if http is not None else None
    # Taken (and the variables unset) before anything can start a hook that would inherit them.
    inherited = systemd_socket()
    try:
        ensure_run_dir(root)
        if path != default_socket_path(root):
            check_socket_dir(path)
        lock = ServeLock(root)
        lock.acquire(path)
    except BaseException:
        if inherited is not None:
            inherited.close()
        raise
    try:
        http_socket, token = _http_socket(root, address, inherited) if address is not None or inherited is not None else (None, "")
        try:
            bus = HookBus(root, watch=True)
            try:
                listener, identity = listen(path)
                served = asyncio.run(_serve(bus, listener, path, identity, announce or _to_stderr, http_socket, token))
            finally:
                bus.close()  # idempotent: already closed unless start-up failed
        finally:
            if http_socket is not None:
                http_socket.close()
    finally:
        lock.release()
    return 0 if served else 1


def _http_socket(home: str, address: tuple[str, int] | None, inherited: socket.socket | None) -> tuple[socket.socket, str]:
    """A TCP socket listening on ``address`` (loopback, checked), or the one systemd passed
    (``inherited``, which must be on ``address`` when both are given), and the token
    requests must carry."""
    from hookbus.serve.httpconfig import load_token, port_holder, url_of
    from hookbus.serve.listener import BACKLOG

    try:
        token, _ = load_token(home)
        if inherited is not None:
            _check_inherited(inherited, address)
    except BaseException:
        if inherited is not None:
            inherited.close()
        raise
    if inherited is not None:
        return inherited, token
    assert address is not None
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
        holder = port_holder(host, port, home) if exc.errno == errno.EADDRINUSE else ""
        raise ServeError(f"cannot listen on {url_of(host, port)}: {exc.strerror or exc}{holder}") from None
    sock.setblocking(False)
    return sock, token


def _check_inherited(sock: socket.socket, address: tuple[str, int] | None) -> None:
    """ServeError when ``--http`` names another address than the socket systemd passed."""
    import ipaddress

    from hookbus.serve.httpconfig import url_of

    if address is None:
        return
    host, port = sock.getsockname()[:2]
    bound = ipaddress.ip_address(host)
    bound = (bound.ipv4_mapped or bound) if isinstance(bound, ipaddress.IPv6Address) else bound
    if bound != ipaddress.ip_address(address[0]) or address[1] not in (0, port):
        raise ServeError(
            f"systemd passed a socket listening on {url_of(str(bound), port)}, but --http says {url_of(*address)}: "
            "make the .socket unit's ListenStream= and --http name the same address"
        )


def _sockets_budget(server: HookServer) -> MemoryBudget:
    """The socket server's memory budget, lent to the http listener: one budget for every
    request the process parses, whichever way it came. (Made here, not at import: a serve
    without --http loads no http code.)"""
    from hookbus.serve.httplistener import HttpListener, MemoryBudget

    class SocketsBudget(MemoryBudget):
        @property
        def held(self) -> int:
            return server.bytes_in_flight

        def _hold(self, change: int) -> None:
            server.hold_bytes(change)

    return SocketsBudget()


#: How often a server looks whether it can still vouch for the managed tier.
TIER_CHECK_SECONDS = 0.5


async def _stop_if_unenforceable(bus: HookBus, announce: Callable[[str], None], stop: Callable[[], None]) -> bool:
    """Stop the server once its bus cannot vouch for the managed tier: it imported code from
    where its environment pointed (``PYTHONPATH``) before the managed directory appeared.
    Its clients already decide in their own process; Claude Code's http hooks cannot tell,
    so the server stops (exit 1: a unit with ``Restart=on-failure`` starts it anew, under
    the managed tier from its first import). True when it stopped the server."""
    while bus.snapshot.managed.enforceable:
        await asyncio.sleep(TIER_CHECK_SECONDS)
    announce(f"hookbus serve: stopping: the managed tier is {bus.managed_tier}; start it again to serve it")
    stop()
    return True


def _write_gate_file(bus: HookBus, http: HttpListener, token: str, proof: str, announce: Callable[[str], None]) -> None:
    """The gate's run file (``hookbus.serve.gatefile``); a warning when it cannot be
    written: the gates then run the bridge, which finds the server on its socket."""
    from hookbus.serve.gatefile import gate_file_path, write_gate_file

    try:
        write_gate_file(str(bus.home.root), http.host, http.port, token, proof)
    except OSError as exc:
        announce(
            f"hookbus serve: warning: cannot write {gate_file_path(str(bus.home.root))} ({exc.strerror or exc}): "
            "the gate cannot find this server, and runs the command bridge on every call"
        )


def _remove_gate_file(bus: HookBus, proof: str) -> None:
    from hookbus.serve.gatefile import remove_gate_file

    remove_gate_file(str(bus.home.root), proof)


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
) -> bool:
    """Serve until stopped: True, or False when the server stopped itself because it cannot
    vouch for the managed tier (``stop_if_unenforceable``)."""
    from hookbus.workers import ElasticThreads

    loop = asyncio.get_running_loop()
    server = HookServer(bus, listener)
    http = None
    proof = ""
    http_threads = ElasticThreads("hookbus-http")
    if http_socket is not None:
        from hookbus.serve.httplistener import HttpListener

        from hookbus.serve.gatefile import new_proof

        proof = new_proof()
        http = server.http = HttpListener(bus, http_socket, token, http_threads, _sockets_budget(server), proof)
    stops = 0

    def on_stop(signum: int) -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            server.stop()
            if http is not None:
                _remove_gate_file(bus, proof)
                http.stop_accepting()
            return
        # A second signal: do not wait for slow hooks. They are killed and recorded as
        # interrupted; from a thread, since interrupt takes the bus's locks.
        reason = f"interrupted by {signal.Signals(signum).name}"
        threading.Thread(target=bus.interrupt, args=(reason,), name="hookbus-interrupt", daemon=True).start()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_stop, signum)
    loop.add_signal_handler(signal.SIGHUP, server.reload_in_background)
    watching = loop.create_task(_stop_if_unenforceable(bus, announce, lambda: on_stop(signal.SIGTERM)))
    try:
        announce(READY_MESSAGE.format(path=path))
        if http is not None:
            await http.start()
            _write_gate_file(bus, http, token, proof, announce)
            announce(READY_MESSAGE.format(path=http.url))
        await server.serve(on_stop_accepting=lambda: remove_socket(path, identity))
        if http is not None:
            await http.close()
        # Still under the handlers above: a signal now interrupts the drain, it does not
        # kill the process with fires unrecorded.
        await loop.run_in_executor(None, bus.close)
    finally:
        watching.cancel()
        remove_socket(path, identity)
        if http is not None:
            _remove_gate_file(bus, proof)
        http_threads.shutdown()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)
    return not (watching.done() and not watching.cancelled() and watching.result())
