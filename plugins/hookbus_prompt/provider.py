"""The default prompt provider: an OpenAI-compatible chat-completions client.

Configured in settings.json::

    {"prompt_provider": {"base_url": "http://localhost:11434/v1", "model": "llama3.2",
                         "api_key_env": "OPENAI_API_KEY"}}

It POSTs ``{base_url}/chat/completions`` with the model and one user message and reads
``choices[0].message.content``. That is OpenAI, Ollama, vLLM, llama.cpp's server and
LM Studio. Built on the standard library's http.client, so that the hook's deadline holds
on every read and ``close()`` can cut a request short.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urlsplit

import attrs

from hookbus.converter import structure
from hookbus.durations import format_duration
from hookbus.errors import Problem, SpecError, SpecErrors
from hookbus.prompts import PromptError, PromptRequest

if TYPE_CHECKING:
    import socket
    from http.client import HTTPResponse

SETTING = "prompt_provider"
#: A reply bigger than this is refused.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


@attrs.frozen
class ProviderConfig:
    base_url: str
    model: str
    #: The environment variable holding the API key; the key itself is never logged.
    api_key_env: str | None = None


def read_config(raw_settings: Mapping[str, Any]) -> ProviderConfig | None:
    """The provider settings, None when there are none; SpecErrors when they are invalid."""
    if SETTING not in raw_settings:
        return None
    config = structure(raw_settings[SETTING], ProviderConfig, f"$.{SETTING}")
    parts = urlsplit(config.base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        message = f"base_url must be an http:// or https:// URL, got {config.base_url!r}"
        raise SpecErrors([SpecError(message, f"$.{SETTING}.base_url")])
    return config


def config_problems(raw_settings: Mapping[str, Any]) -> list[Problem]:
    try:
        read_config(raw_settings)
    except SpecErrors as exc:
        return [Problem("settings.json", error.message, error.location) for error in exc.errors]
    return []


def complete(config: ProviderConfig, request: PromptRequest) -> str:
    """The model's answer to ``request.prompt``; PromptError on any failure."""
    import http.client  # with ssl, 13 ms of start-up that only a prompt hook should pay
    import socket

    parts = urlsplit(config.base_url.rstrip("/") + "/chat/completions")
    remaining = request.remaining()
    if remaining <= 0:
        raise PromptError("timed out before the request was sent")
    connection_type = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_type(parts.hostname or "", parts.port, timeout=remaining)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise PromptError(f"the API key variable {config.api_key_env} is not set")
        headers["Authorization"] = f"Bearer {key}"
    body = json.dumps(
        {"model": config.model, "messages": [{"role": "user", "content": request.prompt}]}
    ).encode()
    where = f"{parts.scheme}://{parts.netloc}{parts.path}"

    # The socket is kept from the connect on: http.client forgets it once a reply that
    # closes the connection has its headers, yet cancelling and timing out need it still.
    sockets: list[socket.socket] = []

    def interrupt() -> None:  # close() is shutting down: unblock the read
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    forget = request.cancel.on_cancel(interrupt)
    started = time.monotonic()
    response: HTTPResponse | None = None
    try:
        connection.connect()
        assert connection.sock is not None
        sockets.append(connection.sock)
        if request.cancel.cancelled:
            raise PromptError(request.cancel.reason or "cancelled")
        connection.request("POST", parts.path + (f"?{parts.query}" if parts.query else ""), body, headers)
        response = connection.getresponse()
        data = _read(response, sockets[0], request)
        status = response.status
        if request.cancel.cancelled:  # the shutdown ended the read early
            raise PromptError(request.cancel.reason or "cancelled")
    except (TimeoutError, socket.timeout):
        waited = format_duration(time.monotonic() - started)
        raise PromptError(f"timed out after {waited} waiting for {where}") from None
    except (OSError, http.client.HTTPException) as exc:
        if request.cancel.cancelled:
            raise PromptError(request.cancel.reason or "cancelled") from None
        raise PromptError(f"cannot reach {where}: {exc}") from None
    finally:
        forget()
        if response is not None:
            response.close()  # it holds a reference to the socket of its own
        connection.close()
    if status != 200:
        snippet = data[:300].decode("utf-8", errors="replace").strip()
        raise PromptError(f"{where} answered HTTP {status}: {snippet}")
    return _content(data, where)


def _read(response: HTTPResponse, sock: socket.socket, request: PromptRequest) -> bytes:
    """The body, read under the request's deadline (a slow drip cannot stretch it)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = request.remaining()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        chunk = response.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise PromptError(f"the reply is over {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB")
        chunks.append(chunk)


def _content(data: bytes, where: str) -> str:
    try:
        reply = json.loads(data)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        snippet = data[:200].decode("utf-8", errors="replace").strip()
        raise PromptError(
            f"{where} sent a malformed reply (no choices[0].message.content): {snippet}"
        ) from None
    if content is None:
        return ""
    if not isinstance(content, str):
        raise PromptError(f"{where} sent a non-text message content ({type(content).__name__})")
    return content
