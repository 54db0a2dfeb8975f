"""A real ``hookbus serve`` process for tests: started, waited for, stopped, its stderr kept."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from hookbus.serve.rendezvous import reachable

READY = "hookbus serve: listening on "


class Served:
    """A running ``python -m hookbus serve``; every stderr line is kept in ``lines``."""

    def __init__(
        self,
        home: Path,
        *arguments: str,
        env: dict[str, str] | None = None,
        ready: bool = True,
        python: tuple[str, ...] = ("-m", "hookbus"),
    ) -> None:
        """``python``: what runs hookbus (``-c CODE`` to set limits first, say)."""
        self.home = home
        self.process = subprocess.Popen(
            [sys.executable, *python, "serve", "--home", str(home), *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        self.socket: str | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if ready:
            self.wait_ready()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            line = line.rstrip("\n")
            self.lines.append(line)
            if line.startswith(READY) and self.socket is None:
                self.socket = line[len(READY):]
                self._ready.set()
        self._ready.set()  # it ended: whoever waits must stop waiting

    def wait_ready(self, timeout: float = 30.0) -> str:
        if not self._ready.wait(timeout) or self.socket is None:
            self.stop(signal.SIGKILL)
            raise AssertionError(f"hookbus serve did not get ready: {self.stderr}")
        return self.socket

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def send(self, signum: int) -> None:
        self.process.send_signal(signum)

    def wait(self, timeout: float = 60.0) -> int:
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        if self.process.stderr is not None:
            self.process.stderr.close()
        return code

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.wait(timeout)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


def hookbus(*arguments: str, input: str | None = None, env: dict[str, str] | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``python -m hookbus ARGUMENTS``, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments],
        input=input, capture_output=True, text=True, env=env, timeout=timeout,
    )


def wait_for(predicate: Any, timeout: float = 10.0, message: str = "condition") -> None:
    """Poll ``predicate`` until it is true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        time.sleep(0.02)


def environment(**overrides: str | None) -> dict[str, str]:
    """This process's environment with ``overrides`` (None removes a variable)."""
    env = dict(os.environ)
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _not_json(constant: str) -> Any:
    raise AssertionError(f"the server sent {constant}, which is not JSON")


class Raw:
    """A plain Unix socket to a server: bytes out, parsed lines in. No client library, so
    tests see exactly what the server sends."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        import socket

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Blocking, as a plain client's is: it waits while the server's accept queue is full.
            # Through reachable(): a home under a deep TMPDIR makes a path past sun_path.
            with reachable(path) as address:
                self.sock.connect(address)
            self.sock.settimeout(timeout)
        except BaseException:
            self.sock.close()
            raise
        self._buffer = b""

    def send(self, data: bytes | dict[str, Any] | str) -> None:
        import json

        if isinstance(data, dict):
            data = json.dumps(data) + "\n"
        if isinstance(data, str):
            data = data.encode()
        self.sock.sendall(data)

    def request(self, id: Any, method: str, **params: Any) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params:
            message["params"] = params
        self.send(message)

    def line(self) -> bytes:
        """The next line; b"" when the server closed the connection."""
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                rest, self._buffer = self._buffer, b""
                return rest
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def answer(self) -> Any:
        import json

        line = self.line()
        assert line, "the server closed the connection"
        return json.loads(line, parse_constant=_not_json)

    def call(self, id: Any, method: str, **params: Any) -> Any:
        self.request(id, method, **params)
        return self.answer()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


@contextlib.contextmanager
def full_accept_queue(served: Served, resume_after: float | None = None) -> Iterator[None]:
    """The server stopped (SIGSTOP) with the kernel's queue of connections it has not
    accepted filled to the brim; it resumes on leaving, or ``resume_after`` seconds in."""
    import socket

    path = served.wait_ready()
    served.process.send_signal(signal.SIGSTOP)
    queued: list[socket.socket] = []
    timer = None if resume_after is None else threading.Timer(resume_after, served.process.send_signal, (signal.SIGCONT,))
    try:
        while True:
            sock = socket.socket(socket.AF_UNIX)
            queued.append(sock)
            sock.setblocking(False)
            try:
                with reachable(path) as address:
                    sock.connect(address)
            except BlockingIOError:
                break
        assert len(queued) > 128, "the queue did not fill: is the server stopped?"
        if timer is not None:
            timer.start()
        yield
    finally:
        if timer is not None:
            timer.cancel()
        served.process.send_signal(signal.SIGCONT)
        for sock in queued:
            sock.close()



#: What a client of a server may import beyond what a bare ``python -c pass`` does: hookbus's
#: own light modules and the C cores of json, socket and struct.
BUILT_INS = frozenset({"_json", "_socket", "_struct", "__future__"})


def imported_modules(*arguments: str, input: str = "") -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """The result of ``python -X importtime ARGUMENTS``, and every module it imported that
    ``python -c pass`` does not."""

    def modules(argv: list[str], stdin: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        result = subprocess.run([sys.executable, "-X", "importtime", *argv], input=stdin, capture_output=True, text=True, timeout=60)
        names = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
        return result, names

    result, ours = modules(list(arguments), input)
    _, bare = modules(["-c", "pass"], "")
    if arguments[:1] == ("-m",):
        bare.add("runpy")  # what -m itself imports
    return result, ours - bare
