"""A plain HTTP/1.1 client for tests of ``hookbus serve --http``: raw sockets, so tests see
exactly what the listener sends and can send what no polite client would."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any, Iterator

from servekit import READY, Served


def http_address(served: Served, timeout: float = 30.0) -> tuple[str, int]:
    """The (host, port) the server announced on its second ready line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(served.lines):
            if line.startswith(READY + "http://"):
                host, _, port = line[len(READY + "http://"):].rpartition(":")
                return host.strip("[]"), int(port)
        if served.process.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError(f"no http listener was announced: {served.stderr}")


def token_of(home: Path) -> str:
    return (home / "run" / "http.token").read_text().strip()


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"Answer({self.status}, {self.headers}, {self.body[:300]!r})"


class HttpClient:
    """One keep-alive connection to the listener."""

    def __init__(self, port: int, token: str | None, host: str = "127.0.0.1", timeout: float = 30.0) -> None:
        self.port = port
        self.token = token
        self.host = host
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._buffer = b""

    def request_bytes(
        self, body: bytes, *, path: str = "/claude-code", method: str = "POST", headers: dict[str, str] | None = None,
        host_header: str | None = None,
    ) -> bytes:
        own = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host_header or own}"]
        if self.token is not None:
            lines.append(f"Authorization: Bearer {self.token}")
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def post(self, body: bytes | dict[str, Any], **options: Any) -> Answer:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        self.sock.sendall(self.request_bytes(body, **options))
        return self.read_answer()

    def read_answer(self) -> Answer:
        while b"\r\n\r\n" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed before an answer: {self._buffer!r}")
            self._buffer += chunk
        head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ")[1])
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self._buffer) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                break
            self._buffer += chunk
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return Answer(status, headers, body)

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """Whether the server closes the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


# -- a listener in this process -------------------------------------------------------------

#: The token of the listeners run in this process.
TOKEN = "a-token-for-the-in-process-tests-0123"
PRE_TOOL_USE = b'{"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"}}'


class InProcess:
    """An ``HttpListener`` on its own loop thread in this process: tests may shrink its
    limits (monkeypatch) and look at its state (``on_loop``)."""

    def __init__(self, listener: Any, loop: Any, host: str) -> None:
        self.listener = listener
        self.loop = loop
        self.host = host
        self.port: int = listener.port

    def client(self, token: str | None = TOKEN, timeout: float = 30.0) -> HttpClient:
        return HttpClient(self.port, token, host=self.host, timeout=timeout)

    def on_loop(self, function: Any) -> Any:
        """``function()`` run on the listener's loop, and its result."""
        import asyncio

        async def call() -> Any:
            return function()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def wait_until(self, predicate: Any, timeout: float = 20.0, message: str = "the listener") -> None:
        deadline = time.monotonic() + timeout
        while not self.on_loop(predicate):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {message}")
            time.sleep(0.01)


@contextlib.contextmanager
def in_process(home: Path, address: tuple[str, int] = ("127.0.0.1", 0), token: str = TOKEN) -> Iterator[InProcess]:
    """A listener on ``address`` serving ``home`` (a plain HookBus, no watcher)."""
    import asyncio
    import threading

    from hookbus import HookBus
    from hookbus.serve.httplistener import HttpListener
    from hookbus.workers import ElasticThreads

    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    sock = socket.socket(family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    bus = HookBus(home)
    loop = asyncio.new_event_loop()
    threads = ElasticThreads("test-http")
    listener = HttpListener(bus, sock, token, threads)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(listener.start(), loop).result(10)
        yield InProcess(listener, loop, address[0])
    finally:
        asyncio.run_coroutine_threadsafe(listener.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        sock.close()
        threads.shutdown()
        bus.close()


def resident_bytes(pid: int) -> int:
    """What process ``pid`` holds in memory now (VmRSS)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def containers_body(size: int, event: str = "PreToolUse") -> bytes:
    """A body of about ``size`` bytes that is almost all ``{},``: each costs 3 bytes of text
    and some 100 bytes once parsed."""
    head = b'{"session_id": "s", "hook_event_name": "%s", "tool_name": "Bash", "tool_input": {"command": "ls", "x": [' % event.encode()
    count = max(0, (size - len(head) - 5) // 3)
    return head + b"{}," * count + b"{}]}}"


class Activated(Served):
    """``hookbus serve`` started as systemd starts a socket-activated service: ``listening``
    as descriptor 3, ``LISTEN_PID`` its own pid, ``LISTEN_FDS=1``, ``LISTEN_FDNAMES=http``."""

    def __init__(
        self, home: Path, listening: socket.socket, *arguments: str, env: dict[str, str] | None = None, names: str = "http",
        ready: bool = True,
    ) -> None:
        import subprocess
        import sys
        import threading

        descriptor = listening.fileno()
        # The exec keeps the pid, so LISTEN_PID can be set just before it, as systemd does.
        launcher = (
            "import os, sys\n"
            "descriptor, names = int(sys.argv[1]), sys.argv[2]\n"
            "os.dup2(descriptor, 3)\n"
            "if descriptor != 3: os.close(descriptor)\n"
            "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1', LISTEN_FDNAMES=names)\n"
            "os.execv(sys.executable, [sys.executable, '-m', 'hookbus', 'serve', *sys.argv[3:]])\n"
        )
        self.home = home
        self.process = subprocess.Popen(
            [sys.executable, "-c", launcher, str(descriptor), names, "--home", str(home), *arguments],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=env, pass_fds=(descriptor,),
        )
        self.lines = []
        self._ready = threading.Event()
        self.socket = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if ready:
            self.wait_ready()
