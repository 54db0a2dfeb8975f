"""hookbus-http: hooks that send their envelope to an HTTP endpoint and decide by the reply.

Once this distribution is installed, a hook.json may use the spec key ``"http"``::

    {
      "trigger": {"event": "PreToolUse", "matcher": "bash"},
      "mode": "sync",
      "blocking": true,
      "http": {
        "url": "https://policy.example.internal/vix/pre-tool-use",
        "headers": {"Authorization": "Bearer 0123456789abcdef"},
        "method": "POST",
        "timeout": "2s"
      }
    }

- ``url`` (required): an ``http://`` or ``https://`` URL with a host. Credentials go in
  ``headers``, not in the URL.
- ``headers`` (default none): strings, sent as given. ``Content-Type`` defaults to
  ``application/json``; ``Host``, ``Content-Length`` and ``Transfer-Encoding`` are the
  runner's.
- ``method`` (default ``"POST"``): ``"POST"`` or ``"PUT"``.
- ``timeout`` (optional): a Go-style duration that bounds the request below the hook's own
  ``timeout``. The hook's ``timeout`` always holds.

Each fire sends the envelope (the JSON a command hook gets on stdin, ``hook_event_name``
included) as the request body with ``Content-Type: application/json``. The body of a 2xx
reply decides, by the core's final-text contract
(:func:`hookbus.contract.outcome_from_final_text`), the same as a prompt or a workflow:

- a JSON object with a valid ``behavior`` (also inside a ```` ```json ```` fence) is that
  decision;
- otherwise, a line starting with ``BLOCK:`` denies, and the rest of that line is the reason;
- otherwise, non-empty text becomes context, and an empty body allows.

Everything else fails open: the hook says allow and records an error that names the URL
(never its query string) and, for an HTTP error, the status. That covers a non-2xx status,
a connection error, a timeout and a reply over 1 MiB. The deadline holds however slowly the
server answers, over the whole exchange (connect, TLS handshake, sending, status line,
headers, body): a watchdog shuts the socket down at the deadline, and so does the bus's
``close()`` for a hook still running at shutdown. Only the name lookup is out of its reach.

Header values and query parameters whose names say they are secrets (``Authorization``,
``X-Api-Key``, ``Cookie``, ``?token=``...) are registered with ``hookbus.redaction``: a
server that echoes them back cannot put them in a record, a log or an error.
"""

from __future__ import annotations

import re
import time
from typing import Any, Mapping
from urllib.parse import unquote_plus, urlsplit

import attrs

from hookbus import (
    HookCall,
    Outcome,
    ParseContext,
    RunnerRegistration,
    SpecError,
    hookimpl,
)
from hookbus.contract import outcome_from_final_text
from hookbus.converter import structure
from hookbus.durations import parse_duration
from hookbus.errors import SpecErrors
from hookbus.exchange import Cancelled, http_request
from hookbus.redaction import redact, redact_url, register_secret
from hookbus.schema import DURATION, schema_of

__all__ = ["MAX_RESPONSE_BYTES", "METHODS", "HttpOptions", "HttpRunner", "hookbus_register_runners"]

#: A reply body bigger than this is not used: the hook fails open.
MAX_RESPONSE_BYTES = 1024 * 1024
METHODS = ("POST", "PUT")
#: Headers http.client sets from the URL and the body; a hook may not override them.
_RUNNER_HEADERS = ("host", "content-length", "transfer-encoding")
#: An HTTP header name (RFC 9110 token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Control characters other than tab: a header value is one line.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@attrs.frozen
class HttpOptions:
    """The JSON under ``"http"``, as the core's strict converter structures it."""

    url: str
    headers: Mapping[str, str] = attrs.field(factory=dict)
    method: str = "POST"
    #: A Go-style duration, or None: bounded by the hook's timeout alone.
    timeout: str | None = None

    @property
    def where(self) -> str:
        """The URL for messages: no query string (it may carry a token), no fragment, no
        password (validation refuses one; this holds even so)."""
        parts = urlsplit(self.url)
        return redact_url(f"{parts.scheme}://{parts.netloc}{parts.path or '/'}")


class HttpRunner:
    """Runs ``"http": {...}`` hooks."""

    def parse(self, key: str, value: object, context: ParseContext) -> HttpOptions:
        # Types, unknown and missing fields: "unknown field 'ulr' @ $" (the loader reports
        # it under the key: "@ $.http"). Then what types cannot say, each at its own field.
        options = structure(value, HttpOptions)
        errors = _url_errors(options.url) + _header_errors(options.headers)
        if options.method not in METHODS:
            errors.append(
                SpecError(f'method must be "POST" or "PUT", got {options.method!r}', "$.method")
            )
        if options.timeout is not None:
            try:
                parse_duration(options.timeout)
            except ValueError as exc:
                errors.append(SpecError(str(exc), "$.timeout"))
        if errors:
            raise SpecErrors(errors)
        return options

    def schema(self, key: str) -> dict[str, Any]:
        """For ``hookbus schema``: the options, as editors should complete them."""
        schema = schema_of(HttpOptions)
        properties = schema["properties"]
        properties["url"].update(pattern="^https?://", description="Where the envelope is sent.")
        properties["method"] = {"enum": list(METHODS), "default": "POST"}
        properties["timeout"] = {"anyOf": [DURATION, {"type": "null"}]}
        schema["description"] = "POST the envelope to a URL; the reply body decides (final-text contract)."
        return schema

    def run(self, call: HookCall) -> Outcome:
        # Loaded on the first fire: `hookbus` start-up does not pay for http.client and ssl.
        import http.client

        options: HttpOptions = call.hook.options
        deadline, limit = call.deadline, call.hook.spec.timeout
        if options.timeout is not None:
            own_deadline = time.monotonic() + parse_duration(options.timeout)
            if own_deadline < deadline:
                deadline, limit = own_deadline, options.timeout
        where = options.where
        _register_secrets(options)
        headers = dict(options.headers)
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
        try:
            reply = http_request(
                options.url, options.method, call.payload, headers, deadline, call.cancel, MAX_RESPONSE_BYTES
            )
        except Cancelled:
            return Outcome.fail_open(call.cancel.reason or "cancelled")
        except TimeoutError:  # the cutoff or a socket timeout, whichever came first
            return Outcome.fail_open(f"timed out after {limit} waiting for {where}")
        except (OSError, http.client.HTTPException) as exc:
            detail = redact(str(exc) or type(exc).__name__)
            return Outcome.fail_open(f"request to {where} failed: {detail}")
        status, reason, body = reply.status, reply.reason, reply.body
        if not 200 <= status < 300:
            # Masked before it is cut: a cut through a token would leave its start.
            text = redact(body.decode("utf-8", errors="replace"))
            snippet = " ".join(text.split())[:300].rstrip()
            message = f"{where} answered HTTP {status} {redact(reason)}".rstrip()
            return Outcome.fail_open(f"{message}: {snippet}" if snippet else message)
        if len(body) > MAX_RESPONSE_BYTES:
            limit_mib = MAX_RESPONSE_BYTES // (1024 * 1024)
            return Outcome.fail_open(f"{where} answered with more than {limit_mib} MiB")
        return outcome_from_final_text(redact(body.decode("utf-8", errors="replace")), call.event)


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    register.add("http", HttpRunner())


# -- validation ------------------------------------------------------------------------------


def _url_errors(url: str) -> list[SpecError]:
    def error(message: str) -> list[SpecError]:
        return [SpecError(message, "$.url")]

    if not url.isascii() or _CONTROL.search(url) or " " in url or "\t" in url:
        return error("the URL must be ASCII without spaces: percent-encode the rest")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        got = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        return error(f"expected an http:// or https:// URL, got {got}")
    if not parts.hostname:
        return error("the URL has no host")
    if parts.username is not None or parts.password is not None:
        return error("credentials in the URL are not sent: put them in headers (Authorization)")
    try:
        parts.port
    except ValueError as exc:
        return error(f"invalid port: {exc}")
    return []


def _header_errors(headers: Mapping[str, str]) -> list[SpecError]:
    errors = []
    for name, value in headers.items():
        location = f"$.headers[{name!r}]"  # the converter's spelling of a key's path
        if not _HEADER_NAME.fullmatch(name):
            errors.append(SpecError(f"invalid header name {name!r}", location))
        elif name.lower() in _RUNNER_HEADERS:
            errors.append(SpecError(f"{name} is set by the runner: remove it", location))
        elif _CONTROL.search(value) or not _is_latin1(value):
            # The value is never echoed: it is often a secret.
            errors.append(SpecError("a header value must be one line of Latin-1 text", location))
    return errors


def _is_latin1(text: str) -> bool:
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True


# -- secrets ---------------------------------------------------------------------------------

#: A header or query parameter whose name holds one of these carries a secret: its value is
#: registered with hookbus.redaction, so that a server echoing it back (an error page
#: quoting the request, say) cannot put it in a record. Other values are not masked:
#: masking "platform" would mask that word in every record of the process.
_SECRET_NAME = re.compile(r"auth|token|key|secret|pass|cookie|session|signature|credential", re.I)


def _register_secrets(options: HttpOptions) -> None:
    """Register the secrets this hook sends (hookbus.redaction ignores the ones under 8
    characters, which are not masked: keep them out of messages some other way)."""
    for name, value in options.headers.items():
        if not _SECRET_NAME.search(name):
            continue
        register_secret(value)
        scheme, _, credentials = value.strip().partition(" ")
        register_secret(credentials.strip())  # "Bearer <token>": the token alone is echoed too
        if scheme.lower() == "basic":
            import base64
            import binascii

            try:
                decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                continue
            register_secret(decoded.partition(":")[2])  # the password
    query = urlsplit(options.url).query
    for pair in query.split("&") if query else ():
        raw_name, _, raw_value = pair.partition("=")
        if _SECRET_NAME.search(unquote_plus(raw_name)):
            register_secret(unquote_plus(raw_value))
            register_secret(raw_value)  # as the URL spells it: %-encoded


# -- the request -----------------------------------------------------------------------------

#: The longest socket timeout set. CPython hands poll() the timeout as an int of
#: milliseconds and wraps past 2**31 of them (49.7 days + 1 s becomes 1 s), and a hook
#: timeout may be up to threading.TIMEOUT_MAX (292 years).
_MAX_SOCKET_TIMEOUT = 2_000_000.0  # 23 days
#: The watchdog waits at most this long at a time, whatever its next deadline.
_MAX_WAIT = 3600.0
#: The watchdog thread ends after this long without a deadline to watch.
_IDLE_SECONDS = 0.5
