"""A stand-in for the Anthropic Messages API, so that a real Claude Code runs offline.

Used by ``bench/claude_code_bench.py``; also runs alone::

    python bench/stub_model.py [--port 0] [--command 'echo hi'] [--log FILE]

It listens on 127.0.0.1 only and prints ``stub_model: listening on PORT`` on stdout once
ready. Every ``POST .../v1/messages`` gets a scripted answer (a server-sent event stream when
the request asks for one, else one JSON message):

- a request without tools (Claude Code's side queries: titles, summaries): a short text;
- a request whose last user turn carries a ``tool_result``: the text
  ``done: is_error=<bool> result=<the tool's output>``, ending the turn;
- any other request (the first turn of the agent loop): one ``Bash`` tool call running
  ``--command``, or the command the prompt names as ``RUN<<COMMAND>>``.

``.../count_tokens`` answers a fixed count; any other path answers ``{}``, so that nothing
Claude Code asks for blocks. With ``--log FILE``, one JSON line is appended per agent-loop
request (those with tools): the time it arrived, how many messages it held and what was
answered, so that a driver can check a run and time the gaps between model calls.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

READY = "stub_model: listening on "
RUN_PATTERN = re.compile(r"RUN<<(.+?)>>", re.DOTALL)
USAGE = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _texts(content: object) -> list[str]:
    """The text parts of a message's content (a string, or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
    return []


def _tool_result(message: dict[str, Any]) -> tuple[str, bool] | None:
    """The output and error flag of the first tool_result in ``message``, if it has one."""
    content = message.get("content")
    if not isinstance(content, list):
        return None
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            output = block.get("content")
            if isinstance(output, list):
                output = " ".join(part.get("text", "") for part in output if isinstance(part, dict))
            return str(output or ""), bool(block.get("is_error", False))
    return None


def answer(body: dict[str, Any], default_command: str) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason the model 'says' to ``body``."""
    if not body.get("tools"):
        return [{"type": "text", "text": "stub side answer"}], "end_turn"
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    result = _tool_result(last_user)
    if result is not None:
        output, is_error = result
        return [{"type": "text", "text": f"done: is_error={is_error} result={output}"}], "end_turn"
    command = default_command
    for message in messages:
        if message.get("role") != "user":
            continue
        found = next((hit.group(1) for text in _texts(message.get("content")) if (hit := RUN_PATTERN.search(text))), None)
        if found is not None:
            command = found
            break
    call = {
        "type": "tool_use",
        "id": "toolu_" + uuid.uuid4().hex[:24],
        "name": "Bash",
        "input": {"command": command, "description": "stub model: run the command"},
    }
    return [call], "tool_use"


def _events(message_id: str, model: str, blocks: list[dict[str, Any]], stop: str) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of a streamed answer, in order."""
    start: dict[str, Any] = {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": dict(USAGE, output_tokens=1),
    }
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}))
        events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5},
    }))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


class StubModel:
    """The stub server; ``serve_forever`` on the calling thread, or ``start`` a thread."""

    def __init__(self, port: int = 0, command: str = "echo hi", log: str | None = None) -> None:
        self.command = command
        self.log_path = log
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

            def _read_json(self) -> dict[str, Any]:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    return {}
                return body if isinstance(body, dict) else {}

            def _send_json(self, payload: object) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send_json({})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                arrived = time.time()
                body = self._read_json()
                path = self.path.split("?", 1)[0]
                if path.endswith("/v1/messages/count_tokens"):
                    return self._send_json({"input_tokens": 10})
                if not path.endswith("/v1/messages"):
                    return self._send_json({})
                blocks, stop = answer(body, stub.command)
                if body.get("tools"):
                    stub.record({"t": arrived, "messages": len(body.get("messages") or []), "stop_reason": stop,
                                 "blocks": blocks})
                model = str(body.get("model") or "claude-stub")
                message_id = "msg_" + uuid.uuid4().hex[:24]
                if not body.get("stream"):
                    return self._send_json({
                        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": blocks,
                        "stop_reason": stop, "stop_sequence": None, "usage": USAGE,
                    })
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in _events(message_id, model, blocks, stop):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port: int = self.server.server_address[1]

    def record(self, entry: dict[str, Any]) -> None:
        if self.log_path is None:
            return
        with self.lock, open(self.log_path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        return thread

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: a free one, printed)")
    parser.add_argument("--command", default="echo hi", help="the Bash command of the tool call")
    parser.add_argument("--log", help="append one JSON line per agent-loop request to this file")
    args = parser.parse_args(argv)
    stub = StubModel(args.port, args.command, args.log)
    print(f"{READY}{stub.port}", flush=True)
    try:
        stub.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stub.server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
