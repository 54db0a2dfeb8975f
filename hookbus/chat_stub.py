"""A chat-completions server on 127.0.0.1, for the demo and for testing prompt hooks.

    with StubChatServer(lambda request: "BLOCK: not today") as server:
        settings = {"prompt_provider": {"base_url": server.base_url, "model": "stub"}}
        ...
        server.requests[0]["body"]["messages"][0]["content"]   # what the hook sent

``reply`` gets each request (its JSON body, headers and path) and returns the text the
model says, or a ``StubReply`` for an HTTP error, a malformed body or a hang.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import attrs


@attrs.frozen
class StubReply:
    """Anything but a well-formed answer."""

    status: int = 200
    #: Sent as is (the text is not wrapped in a chat-completions reply).
    raw_body: bytes | None = None
    #: Never answer: the request hangs until the server is closed.
    hang: bool = False
    #: The message content, wrapped as chat completions does (with ``status``).
    text: str | None = None


Reply = Callable[[dict[str, Any]], "str | StubReply"]


class StubChatServer:
    """Answers ``POST .../chat/completions`` on 127.0.0.1 (a free port) and records requests."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="hookbus-chat-stub", daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> StubChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: demos and tests print what matters themselves

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                request = {"path": self.path, "headers": dict(self.headers), "body": body}
                stub.requests.append(request)
                answer = stub.reply(request)
                if isinstance(answer, str):
                    answer = StubReply(text=answer)
                if answer.hang:
                    stub._closing.wait()
                    return
                data = answer.raw_body
                if data is None:
                    message = {"role": "assistant", "content": answer.text or ""}
                    data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
