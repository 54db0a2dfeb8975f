"""The error codes of ``hookbus serve``'s protocol (JSON-RPC 2.0's, and hookbus's own).

It imports nothing: ``hookbus.serve.quickpath``, which must not import json, reads them here;
``hookbus.serve.protocol`` re-exports them. ``docs/protocol.md`` is the user-facing contract.
"""

from __future__ import annotations

__all__ = [
    "PARSE_ERROR",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "INTERNAL_ERROR",
    "HOOKBUS_ERROR",
    "HOOK_NOT_FOUND",
    "HOOKS_DISABLED",
    "SHUTTING_DOWN",
    "REQUEST_TOO_LARGE",
    "PERMISSION_DENIED",
    "OTHER_HOME",
    "SERVER_BUSY",
    "TOO_LATE",
    "OTHER_TIER",
    "ERROR_NAMES",
    "NOT_RUN",
]

# JSON-RPC 2.0's own codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# hookbus's own, in the range JSON-RPC leaves to servers (-32000 to -32099).
#: Any other error hookbus raises on purpose (a HookBusError); the message says what.
HOOKBUS_ERROR = -32000
#: ``trigger`` named a hook that is not loaded.
HOOK_NOT_FOUND = -32001
#: ``trigger`` while every hook is off (settings.json or VIX_DISABLE_HOOKS).
HOOKS_DISABLED = -32002
#: The server is stopping: it takes no new requests.
SHUTTING_DOWN = -32003
#: A line longer than MAX_LINE_BYTES; the connection is closed after this answer.
REQUEST_TOO_LARGE = -32004
#: The peer is neither the server's user nor root; sent once, before the connection closes.
PERMISSION_DENIED = -32005
#: The request's "home" param names another home than the one the server serves; nothing ran.
OTHER_HOME = -32006
#: The server sheds the request: too many requests, connections, or bytes in flight, or
#: no thread to run it on. Nothing ran; run the hooks elsewhere (in-process) or retry.
SERVER_BUSY = -32007
#: The request reached the server after its "start_by": the client had stopped waiting,
#: so nothing was run.
TOO_LATE = -32008
#: The request's "managed" param names another managed tier than the one the server loads
#: (a managed directory appeared since it started, or it was started with another
#: ``$HOOKBUS_MANAGED_DIR``); nothing ran: the client decides with the tier it would load.
OTHER_TIER = -32009

ERROR_NAMES = {
    PARSE_ERROR: "parse error",
    INVALID_REQUEST: "invalid request",
    METHOD_NOT_FOUND: "method not found",
    INVALID_PARAMS: "invalid params",
    INTERNAL_ERROR: "internal error",
    HOOKBUS_ERROR: "hookbus error",
    HOOK_NOT_FOUND: "hook not found",
    HOOKS_DISABLED: "hooks disabled",
    SHUTTING_DOWN: "shutting down",
    REQUEST_TOO_LARGE: "request too large",
    PERMISSION_DENIED: "permission denied",
    OTHER_HOME: "other home",
    SERVER_BUSY: "server busy",
    TOO_LATE: "too late",
    OTHER_TIER: "other managed tier",
}

#: The errors that answer a request before anything of it ran: a client may run the hooks
#: itself instead. After any other (an internal error, a HookBusError), its hooks may have
#: run.
NOT_RUN = frozenset(
    (
        PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, HOOK_NOT_FOUND, HOOKS_DISABLED,
        SHUTTING_DOWN, REQUEST_TOO_LARGE, PERMISSION_DENIED, OTHER_HOME, SERVER_BUSY, TOO_LATE, OTHER_TIER,
    )
)
