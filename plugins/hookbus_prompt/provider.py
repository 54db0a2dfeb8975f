"""The default prompt provider: an OpenAI-compatible chat-completions client.

Configured in settings.json::

    {"prompt_provider": {"base_url": "http://localhost:11434/v1", "model": "llama3.2",
                         "api_key_env": "OPENAI_API_KEY"}}

It POSTs ``{base_url}/chat/completions`` with the model and one user message and reads
``choices[0].message.content``. That is OpenAI, Ollama, vLLM, llama.cpp's server and
LM Studio. Built on the standard library's http.client through ``hookbus.exchange``, so
that the hook's deadline holds over the whole exchange and ``close()`` can cut a request
short.

The API key and a password in ``base_url`` (sent as HTTP Basic auth when there is no key)
are registered with ``hookbus.redaction`` before they are sent; nothing this returns or
raises holds them, even when the server echoes them back.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping
from urllib.parse import unquote, urlsplit

import attrs

from hookbus.converter import structure
from hookbus.durations import format_duration
from hookbus.errors import Problem, SpecError, SpecErrors
from hookbus.prompts import PromptError, PromptRequest
from hookbus.redaction import redact, redact_url, register_secret

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
        # Never the password: this message is logged and shown by `hookbus validate`.
        message = f"base_url must be an http:// or https:// URL, got {redact_url(config.base_url)!r}"
        raise SpecErrors([SpecError(message, f"$.{SETTING}.base_url")])
    try:
        parts.port
    except ValueError as exc:
        raise SpecErrors([SpecError(f"invalid port in base_url: {exc}", f"$.{SETTING}.base_url")]) from None
    return config


def config_problems(raw_settings: Mapping[str, Any]) -> list[Problem]:
    try:
        read_config(raw_settings)
    except SpecErrors as exc:
        return [Problem("settings.json", error.message, error.location) for error in exc.errors]
    return []


def complete(config: ProviderConfig, request: PromptRequest) -> str:
    """The model's answer to ``request.prompt``; PromptError on any failure.

    The API key and any password in ``base_url`` are registered as secrets before they are
    sent, and never appear in what this returns or raises: a server may echo them back."""
    try:
        return _complete(config, request)
    except PromptError as exc:
        message = str(exc)
        scrubbed = redact(message)
        if scrubbed is message:
            raise
        raise PromptError(scrubbed, exc.failure) from None


def _complete(config: ProviderConfig, request: PromptRequest) -> str:
    import http.client  # with ssl, 13 ms of start-up that only a prompt hook should pay

    from hookbus.exchange import Cancelled, http_request

    parts = urlsplit(config.base_url.rstrip("/") + "/chat/completions")
    where = redact_url(f"{parts.scheme}://{parts.netloc}{parts.path}")
    if request.remaining() <= 0:
        raise PromptError("timed out before the request was sent", "timeout")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.api_key_env:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise PromptError(f"the API key variable {config.api_key_env} is not set")
        register_secret(key)
        headers["Authorization"] = f"Bearer {key}"
    basic = _basic_credentials(parts.username, parts.password)
    if basic is not None and "Authorization" not in headers:  # the API key wins
        headers["Authorization"] = f"Basic {basic}"
    body = json.dumps(
        {"model": config.model, "messages": [{"role": "user", "content": request.prompt}]}
    ).encode()
    started = time.monotonic()
    try:
        reply = http_request(
            parts.geturl(), "POST", body, headers, request.deadline, request.cancel, MAX_RESPONSE_BYTES
        )
    except Cancelled:
        raise PromptError(request.cancel.reason or "cancelled", "killed") from None
    except TimeoutError:  # the deadline's cutoff, or a socket timeout: whichever came first
        waited = format_duration(time.monotonic() - started)
        raise PromptError(f"timed out after {waited} waiting for {where}", "timeout") from None
    except (OSError, http.client.HTTPException) as exc:
        detail = redact(str(exc) or type(exc).__name__)
        raise PromptError(f"cannot reach {where}: {detail}") from None
    if len(reply.body) > MAX_RESPONSE_BYTES:
        raise PromptError(f"the reply is over {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB", "unparseable")
    if reply.status != 200:
        raise PromptError(f"{where} answered HTTP {reply.status}: {_snippet(reply.body, 300)}")
    return redact(_content(reply.body, where))


def _basic_credentials(username: str | None, password: str | None) -> str | None:
    """The HTTP Basic token for the userinfo of base_url, registered as a secret (with the
    password, in both its spellings), or None when the URL has no userinfo.

    http.client is handed the host name alone and sends nothing of the userinfo: it is
    only sent because this builds the header."""
    if username is None and password is None:
        return None
    import base64

    user, secret = unquote(username or ""), unquote(password or "")
    register_secret(secret)
    register_secret(password or "")  # as written in the URL: %-encoded
    token = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
    register_secret(token)
    return token


def _snippet(data: bytes, limit: int) -> str:
    """The start of a reply for an error message, with every secret masked before it is
    cut: a cut through a key would leave its first characters unmasked."""
    return redact(data.decode("utf-8", errors="replace"))[:limit].strip()


def _content(data: bytes, where: str) -> str:
    """The text of ``choices[0].message.content``; PromptError when the reply has none that
    is the model's verdict (see ``_no_verdict``)."""
    try:
        reply = json.loads(data)
        choice = reply["choices"][0]
        message = choice["message"]
        content = message["content"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise PromptError(
            f"{where} sent a malformed reply (no choices[0].message.content): {_snippet(data, 200)}",
            "unparseable",
        ) from None
    why = _no_verdict(choice.get("finish_reason"), message.get("refusal"), content)
    if why is not None:
        # Not an empty answer, which the final-text contract reads as allow: no answer. A
        # fail-closed guard denies on it; a fail-open one allows with it recorded.
        raise PromptError(f"{where} gave no verdict: {why}")
    if not isinstance(content, str):
        raise PromptError(f"{where} sent a non-text message content ({type(content).__name__})", "unparseable")
    return content


#: How much of a model's refusal an error quotes.
REFUSAL_CHARS = 200


def _no_verdict(finish_reason: object, refusal: object, content: object) -> str | None:
    """Why a well-formed reply holds no verdict of the model's, or None when it does (empty
    text included: the model said nothing, which allows).

    A refusal (``"refusal"`` set, or ``"content": null``), a reply cut at the token limit
    (``"finish_reason": "length"``: half a JSON decision reads as context, which allows),
    and one the provider's filter cut (``"content_filter"``), whatever text got through
    before the cut."""
    if isinstance(refusal, str) and refusal.strip():
        quoted = json.dumps(redact(refusal.strip())[:REFUSAL_CHARS], ensure_ascii=False)
        return f"the model refused: {quoted}"
    if finish_reason == "content_filter":
        return 'the provider filtered the reply (finish_reason "content_filter")'
    if finish_reason == "length":
        return 'the reply was cut at the token limit (finish_reason "length")'
    if content is None:
        return "the message content is null (a refusal, or an answer that is no text)"
    return None
