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
server answers: a timer shuts the socket down at the deadline, and so does the bus's
``close()`` for a hook still running at shutdown.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping
from urllib.parse import urlsplit

import attrs

from hookbus import (
    CancelToken,
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
from hookbus.schema import DURATION, schema_of

if TYPE_CHECKING:
    import http.client

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
        """The URL for messages: no query string (it may carry a token), no fragment."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"


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
        try:
            status, reason, body = _exchange(options, call.payload, deadline, call.cancel)
        except _Cancelled:
            return Outcome.fail_open(call.cancel.reason or "cancelled")
        except TimeoutError:  # the cutoff timer or a socket timeout, whichever came first
            return Outcome.fail_open(f"timed out after {limit} waiting for {where}")
        except (OSError, http.client.HTTPException) as exc:
            detail = str(exc) or type(exc).__name__
            return Outcome.fail_open(f"request to {where} failed: {detail}")
        if not 200 <= status < 300:
            snippet = " ".join(body[:300].decode("utf-8", errors="replace").split())
            message = f"{where} answered HTTP {status} {reason}".rstrip()
            return Outcome.fail_open(f"{message}: {snippet}" if snippet else message)
        if len(body) > MAX_RESPONSE_BYTES:
            limit_mib = MAX_RESPONSE_BYTES // (1024 * 1024)
            return Outcome.fail_open(f"{where} answered with more than {limit_mib} MiB")
        return outcome_from_final_text(body.decode("utf-8", errors="replace"))


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


# -- the request -----------------------------------------------------------------------------


class _Cancelled(Exception):
    """The hook was cancelled (the bus is closing) while its request was in flight."""


class _Cutoff:
    """Shuts the request's socket down at the deadline or on cancel.

    A socket timeout bounds each read on its own, so a server that drips a byte now and then
    could stretch a request without end; shutting the socket down ends every pending and
    future read at once, whatever phase the request is in.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._disarmed = False
        self.reason: str | None = None

    def attach(self, sock: socket.socket | None) -> None:
        """The connected socket. Hold it here: http.client lets go of ``connection.sock``
        when the reply says the connection closes after it, and then only the response
        still has the socket."""
        with self._lock:
            self._sock = sock
        self.check()  # it fired while connecting, before there was a socket to shut down

    def fire(self, reason: str) -> None:
        with self._lock:
            if self._disarmed or self.reason is not None:
                return
            self.reason = reason
            if self._sock is not None:
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def check(self) -> None:
        """Raise if the cutoff fired: whatever the request saw after it is not the reply."""
        if self.reason == "cancel":
            raise _Cancelled
        if self.reason == "deadline":
            raise TimeoutError

    def disarm(self) -> None:
        with self._lock:
            self._disarmed = True
            self._sock = None


def _exchange(
    options: HttpOptions, payload: bytes, deadline: float, cancel: CancelToken
) -> tuple[int, str, bytes]:
    """Send ``payload`` and return the status, its reason phrase and the body, read up to
    one byte past ``MAX_RESPONSE_BYTES``. Raises TimeoutError at the deadline, _Cancelled
    on cancel, OSError or HTTPException when the request fails."""
    import http.client

    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError
    parts = urlsplit(options.url)
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(parts.hostname or "", parts.port, timeout=remaining)
    headers = dict(options.headers)
    if not any(name.lower() == "content-type" for name in headers):
        headers["Content-Type"] = "application/json"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    cutoff = _Cutoff()
    timer = threading.Timer(remaining, cutoff.fire, ("deadline",))
    timer.name = "hookbus-http-deadline"
    timer.daemon = True
    timer.start()
    forget = cancel.on_cancel(lambda: cutoff.fire("cancel"))
    response: http.client.HTTPResponse | None = None
    try:
        cutoff.check()  # cancelled already
        connection.connect()
        cutoff.attach(connection.sock)
        connection.request(options.method, target, body=payload, headers=headers)
        response = connection.getresponse()
        body = response.read(MAX_RESPONSE_BYTES + 1)
        cutoff.check()  # an end of file the cutoff caused is not the end of the body
        if response.length and len(body) <= MAX_RESPONSE_BYTES:  # Content-Length unmet
            raise http.client.IncompleteRead(body, response.length)
        return response.status, response.reason, body
    except (OSError, http.client.HTTPException):
        cutoff.check()
        raise
    finally:
        cutoff.disarm()
        timer.cancel()
        forget()
        if response is not None:
            response.close()  # it holds a reference to the socket of its own
        connection.close()
