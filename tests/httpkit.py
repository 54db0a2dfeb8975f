"""A plain HTTP/1.1 client for tests of ``hookbus serve --http``: raw sockets, so tests see
exactly what the listener sends and can send what no polite client would."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

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
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host_header or f'{self.host}:{self.port}'}"]
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
