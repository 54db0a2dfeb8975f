"""A stand-in for the Gemini API (``v1beta`` ``generateContent``), so that a real Gemini CLI
runs offline.

Used by ``bench/gemini_cli_bench.py``; also runs alone::

    python bench/stub_gemini_model.py [--port 0] [--command 'echo hi'] [--log FILE]

It listens on 127.0.0.1 only and prints ``stub_gemini_model: listening on PORT`` on stdout
once ready. Every ``POST .../models/MODEL:generateContent`` and
``...:streamGenerateContent`` (server-sent events with ``?alt=sse``, else a JSON array) gets
a scripted answer:

- a request without tools (Gemini CLI's side calls: the model router, the next-speaker
  check, titles): JSON text, one object holding every property the request's response
  schema names (a string property gets a word that suits what it is named, a number 1, a
  boolean false), or when it names none the fields those side calls read;
- a request whose last user turn carries a ``functionResponse``: the text
  ``done: result=<the tool's output>`` (the ``Output:`` line of Gemini CLI's shell tool
  report), ending the turn;
- any other request (the first turn of the agent loop): one ``run_shell_command`` call
  running ``--command``, or the command the prompt names as ``RUN<<COMMAND>>``.

``...:countTokens`` answers a fixed count, ``...:embedContent`` a short vector; any other
path answers ``{}``, so that nothing Gemini CLI asks for blocks. With ``--log FILE``, one
JSON line is appended per ``generateContent`` request: the time it arrived, the path,
whether it had tools, how many turns it held and what was answered, so that a driver can
check a run.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

READY = "stub_gemini_model: listening on "
RUN_PATTERN = re.compile(r"RUN<<(.+?)>>", re.DOTALL)
OUTPUT_LINE = re.compile(r"^Output: (.*)$", re.MULTILINE)
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
#: What a side call's string property is given, by (a part of) its name; others get "stub".
SIDE_WORDS = (("model_choice", "flash"), ("next_speaker", "user"), ("speaker", "user"), ("choice", "flash"))
#: The side answer when the request names no schema: what Gemini CLI's router and
#: next-speaker check read.
SIDE_DEFAULT = {"reasoning": "stub", "model_choice": "flash", "next_speaker": "user"}


def _parts(turn: object) -> list[dict[str, Any]]:
    if not isinstance(turn, dict):
        return []
    parts = turn.get("parts")
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def _has_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    return isinstance(tools, list) and any(
        isinstance(tool, dict) and tool.get("functionDeclarations") for tool in tools
    )


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema the request wants its answer in, if it names one."""
    config = body.get("generationConfig")
    if not isinstance(config, dict):
        return None
    for key in ("responseJsonSchema", "responseSchema"):
        schema = config.get(key)
        if isinstance(schema, dict):
            return schema
    return None


def _value_for(name: str, schema: object) -> object:
    kind = str(schema.get("type", "string")).lower() if isinstance(schema, dict) else "string"
    word = next((word for part, word in SIDE_WORDS if part in name), "stub")
    choices = schema.get("enum") if isinstance(schema, dict) else None
    if isinstance(choices, list) and choices:
        return word if word in choices else choices[0]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return word


def side_answer(body: dict[str, Any]) -> str:
    """The JSON text of a tool-less side call."""
    schema = _schema(body)
    properties = schema.get("properties") if schema else None
    if not isinstance(properties, dict) or not properties:
        return json.dumps(SIDE_DEFAULT)
    return json.dumps({name: _value_for(str(name), spec) for name, spec in properties.items()})


def _tool_output(response: object) -> str:
    """What a ``functionResponse.response`` says the tool printed: the ``Output:`` line of
    run_shell_command's report (``<untrusted_context>\\nOutput: hi\\nProcess Group PGID:
    ...``) when it has one, else the whole text."""
    text = json.dumps(response)
    if isinstance(response, dict):
        text = next((value for key in ("output", "llmContent", "result", "error") if isinstance(value := response.get(key), str)), text)
    found = OUTPUT_LINE.search(text)
    return found.group(1) if found else text


def answer(body: dict[str, Any], default_command: str) -> list[dict[str, Any]]:
    """The parts the model 'says' to ``body``."""
    if not _has_tools(body):
        return [{"text": side_answer(body)}]
    contents = [turn for turn in body.get("contents") or [] if isinstance(turn, dict)]
    last_user = next((turn for turn in reversed(contents) if turn.get("role") == "user"), {})
    responses = [part["functionResponse"] for part in _parts(last_user) if isinstance(part.get("functionResponse"), dict)]
    if responses:
        return [{"text": f"done: result={_tool_output(responses[0].get('response')).strip()}"}]
    command = default_command
    for turn in contents:
        if turn.get("role") != "user":
            continue
        found = next(
            (hit.group(1) for part in _parts(turn) if isinstance(part.get("text"), str) and (hit := RUN_PATTERN.search(part["text"]))),
            None,
        )
        if found is not None:
            command = found
            break
    return [{"functionCall": {"name": "run_shell_command", "args": {"command": command, "description": "stub model: run the command"}}}]


def reply(parts: list[dict[str, Any]], model: str) -> dict[str, Any]:
    """A ``GenerateContentResponse`` carrying ``parts``."""
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": dict(USAGE),
        "modelVersion": model,
    }


class StubGeminiModel:
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

            def _send(self, data: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send_json(self, payload: object) -> None:
                self._send(json.dumps(payload).encode(), "application/json")

            def do_GET(self) -> None:
                self._send_json({})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                arrived = time.time()
                body = self._read_json()
                path, _, query = self.path.partition("?")
                method = path.rsplit(":", 1)[-1] if ":" in path.rsplit("/", 1)[-1] else ""
                if method == "countTokens":
                    return self._send_json({"totalTokens": 10})
                if method in ("embedContent", "batchEmbedContents"):
                    return self._send_json({"embedding": {"values": [0.0] * 8}, "embeddings": []})
                if method not in ("generateContent", "streamGenerateContent"):
                    return self._send_json({})
                model = path.rsplit("/", 1)[-1].split(":", 1)[0] or "gemini-stub"
                parts = answer(body, stub.command)
                stub.record({
                    "t": arrived, "method": method, "tools": _has_tools(body),
                    "contents": len(body.get("contents") or []), "parts": parts,
                })
                message = reply(parts, model)
                if method == "generateContent":
                    return self._send_json(message)
                if "alt=sse" in query:
                    return self._send(f"data: {json.dumps(message)}\r\n\r\n".encode(), "text/event-stream")
                return self._send_json([message])

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
    parser.add_argument("--command", default="echo hi", help="the shell command of the tool call")
    parser.add_argument("--log", help="append one JSON line per generateContent request to this file")
    args = parser.parse_args(argv)
    stub = StubGeminiModel(args.port, args.command, args.log)
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
