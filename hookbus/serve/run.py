"""``hookbus serve``: one long-lived, watching HookBus for every process of a home.

Start-up: the run directory, the lock, the bus, then the socket; ``hookbus serve:
listening on PATH`` on stderr once requests are answered. SIGTERM or SIGINT: stop
accepting, answer what is running, close the bus (every fire recorded), remove the socket,
exit 0; a second one kills the hooks still running (recorded as interrupted). SIGHUP:
reload.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import threading
from typing import Callable

from hookbus.bus import HookBus
from hookbus.serve.listener import ServeLock, check_socket_dir, ensure_run_dir, listen, remove_socket
from hookbus.serve.rendezvous import default_socket_path, home_root, socket_path
from hookbus.serve.server import HookServer

READY_MESSAGE = "hookbus serve: listening on {path}"


def serve(
    home: str | None = None,
    socket_file: str | None = None,
    *,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Serve the hooks of ``home`` on ``socket_file`` until SIGTERM or SIGINT; 0 then.
    ServeError (a HookBusError) when it cannot start. Call it from the main thread."""
    root = home_root(home)
    path = socket_path(socket_file, root)
    ensure_run_dir(root)
    if path != default_socket_path(root):
        check_socket_dir(path)
    lock = ServeLock(root)
    lock.acquire(path)
    try:
        bus = HookBus(root, watch=True)
        try:
            listener, identity = listen(path)
            asyncio.run(_serve(bus, listener, path, identity, announce or _to_stderr))
        finally:
            bus.close()  # idempotent: already closed unless start-up failed
    finally:
        lock.release()
    return 0


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _serve(
    bus: HookBus,
    listener: socket.socket,
    path: str,
    identity: tuple[int, int],
    announce: Callable[[str], None],
) -> None:
    loop = asyncio.get_running_loop()
    server = HookServer(bus, listener)
    stops = 0

    def on_stop(signum: int) -> None:
        nonlocal stops
        stops += 1
        if stops == 1:
            server.stop()
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
        await server.serve(on_stop_accepting=lambda: remove_socket(path, identity))
        # Still under the handlers above: a signal now interrupts the drain, it does not
        # kill the process with fires unrecorded.
        await loop.run_in_executor(None, bus.close)
    finally:
        remove_socket(path, identity)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)
