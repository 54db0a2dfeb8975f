"""The wire protocol of ``hookbus serve``: JSON-RPC 2.0, one JSON object per line.

Standard library only: ``hookbus emit`` imports this on its way to a live server, and its
start-up is the figure it is judged by. ``docs/protocol.md`` is the user-facing contract.
"""

from __future__ import annotations

import math

from hookbus import deepjson
from hookbus.deepjson import MAX_NESTING

# The error codes, defined where the clients that import no json find them too.
from hookbus.serve.errorcodes import *  # noqa: F403
from hookbus.jsontext import json_type_name, strict_json
# The longest line either side accepts, its newline excluded (16 MiB; defined where the
# clients that import no json find it): a longer one is answered with REQUEST_TOO_LARGE
# and the connection is closed (its end cannot be found cheaply).
from hookbus.serve.rendezvous import MAX_LINE_BYTES as MAX_LINE_BYTES

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

JSONRPC_VERSION = "2.0"

#: How deep a request may be nested: an envelope's MAX_NESTING levels, under the request
#: and its params.
MAX_REQUEST_NESTING = MAX_NESTING + 2
#: The level of an envelope's own fields in a request: request, params, envelope.
_ENVELOPE_FIELDS = 3

METHODS = ("emit", "trigger", "ping", "reload", "status", "explain")

#: What ``Request.id`` is for a notification (a request without "id", which gets no answer).
NO_ID: Any = object()

_ID_TYPES = (str, int, float, type(None))
_COMPACT = (",", ":")


class Request:
    """One parsed request (a plain class: a NamedTuple would import typing).

    ``unreadable``: why the request could be read only in part (its envelope is nested
    deeper than MAX_NESTING levels); ``params`` then hold what could be read: the
    envelope's top-level fields, enough to match hooks by."""

    __slots__ = ("id", "method", "params", "unreadable")

    def __init__(self, id: Any, method: str, params: dict[str, Any], unreadable: str | None = None) -> None:
        self.id = id
        self.method = method
        self.params = params
        self.unreadable = unreadable

    @property
    def is_notification(self) -> bool:
        return self.id is NO_ID


class ProtocolError(Exception):
    """A request that cannot be run: answered with ``code`` and ``message``, under ``id``
    (null when the request's own id could not be read), unless ``id`` is NO_ID: a
    notification's errors are not answered."""

    def __init__(self, code: int, message: str, id: Any = None, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.id = id
        self.data = data

    @property
    def answered(self) -> bool:
        return self.id is not NO_ID

    def response(self) -> dict[str, Any]:
        return error_response(None if self.id is NO_ID else self.id, self.code, self.message, self.data)


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line of strict JSON: a lone surrogate (which JSON's ``\\ud800``
    can carry) escaped, NaN (which Python's parser accepts) spelled as a string."""
    return strict_json(message, separators=_COMPACT) + b"\n"


def request(id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": JSONRPC_VERSION, "method": method}
    if params is not None:
        message["params"] = params
    if id is not NO_ID:
        message["id"] = id
    return message


def result_response(id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": JSONRPC_VERSION, "id": id, "result": result}


def error_response(id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": JSONRPC_VERSION, "id": id, "error": error}


def parse_request(line: bytes) -> Request:
    """The request on ``line`` (its newline removed); ProtocolError when it is not one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(PARSE_ERROR, f"parse error: the line is not UTF-8 (byte {exc.start})") from None
    unreadable = None
    try:
        message = deepjson.loads(text, allow_nan=False, max_depth=MAX_REQUEST_NESTING)
    except deepjson.TooDeep:
        # When it is the envelope that is too deep, read what a matcher needs, its own
        # fields, and let the bus decide as it does for any envelope it cannot hand to
        # hooks: never a parse error, which a client could take for "no opinion".
        try:
            message = deepjson.shallow(text, _ENVELOPE_FIELDS, allow_nan=False)
        except ValueError as exc:
            raise ProtocolError(PARSE_ERROR, f"parse error: {exc}") from None
        params = message.get("params") if isinstance(message, dict) else None
        if not isinstance(params, dict) or not isinstance(params.get("envelope"), dict):
            raise ProtocolError(PARSE_ERROR, f"parse error: the JSON is nested too deeply (more than {MAX_REQUEST_NESTING:,} levels)") from None
        unreadable = f"the envelope is nested deeper than {MAX_NESTING:,} levels"
    except ValueError as exc:
        raise ProtocolError(PARSE_ERROR, f"parse error: {exc}") from None
    if isinstance(message, list):
        raise ProtocolError(INVALID_REQUEST, "invalid request: batches are not supported; send one request per line")
    if not isinstance(message, dict):
        raise ProtocolError(INVALID_REQUEST, f"invalid request: a request is a JSON object, not {json_type_name(message)}")
    id = message.get("id", NO_ID)
    if id is not NO_ID and (not isinstance(id, _ID_TYPES) or isinstance(id, bool)):
        raise ProtocolError(INVALID_REQUEST, f'invalid request: "id" must be a string, a number or null, not {json_type_name(id)}')
    if isinstance(id, float) and not math.isfinite(id):
        raise ProtocolError(INVALID_REQUEST, f'invalid request: "id" must be a finite number, not {id}')
    # An invalid request is answered even without an id (it is no valid notification, as
    # JSON-RPC's examples show); a valid notification's errors go unanswered.
    answer_id = None if id is NO_ID else id
    if message.get("jsonrpc") != JSONRPC_VERSION:
        raise ProtocolError(INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"', answer_id)
    method = message.get("method")
    if method is None:
        raise ProtocolError(INVALID_REQUEST, 'invalid request: "method" is missing', answer_id)
    if not isinstance(method, str):
        raise ProtocolError(INVALID_REQUEST, f'invalid request: "method" must be a string, not {json_type_name(method)}', answer_id)
    unknown = sorted(set(message) - {"jsonrpc", "id", "method", "params"})
    if unknown:
        raise ProtocolError(INVALID_REQUEST, f"invalid request: unknown member {unknown[0]!r}", answer_id)
    params = message.get("params", {})
    if isinstance(params, list):
        raise ProtocolError(INVALID_PARAMS, "invalid params: pass params by name, as an object", id)
    if not isinstance(params, dict):
        raise ProtocolError(INVALID_PARAMS, f"invalid params: params must be an object, not {json_type_name(params)}", id)
    return Request(id, method, params, unreadable)
