"""What a host sent, read as far as it can be: the command bridge's stdin and the body of
``POST /claude-code`` are read by the same rules, so that both decide alike.

An envelope that is not UTF-8, not JSON, no object, or nested too deeply is not refused:
the host would take a refusal for "no opinion" and run the tool. What can be read of it is
kept (its top-level fields, enough to match hooks by; else its event's name alone), with
the reason it cannot be read whole, and the caller decides by the hooks' ``on_error``.
"""

from __future__ import annotations

import re
from typing import Any

from hookbus import deepjson

#: Where an envelope that is no JSON object may still say its event.
_EVENT_NAME = re.compile(r'"hook_event_name"\s*:\s*"([A-Za-z]{1,64})"')


class HostInput:
    """One envelope as read: ``envelope`` (whole, or what could be read of it),
    ``unreadable`` (why it is not whole; None when it is) and ``salvaged`` (only the event's
    name could be read, so which hooks match cannot be told)."""

    __slots__ = ("envelope", "unreadable", "salvaged")

    def __init__(self, envelope: dict[str, Any], unreadable: str | None = None, salvaged: bool = False) -> None:
        self.envelope = envelope
        self.unreadable = unreadable
        self.salvaged = salvaged


def read_host_envelope(data: bytes) -> HostInput:
    """``data`` read as a host's envelope; never raises for what a host may send."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _salvage(data, f"the envelope is not UTF-8 (byte {exc.start})")
    if not text.strip():
        return HostInput({})
    try:
        envelope = deepjson.loads(text)
    except deepjson.TooDeep as exc:
        fields = deepjson.shallow(text, 1)
        if not isinstance(fields, dict):
            return _salvage(data, "the envelope must be a JSON object")
        return HostInput(fields, f"the envelope is {exc}")
    except ValueError as exc:
        return _salvage(data, f"the envelope is not valid JSON: {exc}")
    if not isinstance(envelope, dict):
        return _salvage(data, "the envelope must be a JSON object")
    return HostInput(envelope)


def _salvage(data: bytes, why: str) -> HostInput:
    """What can still be read of an envelope that is not UTF-8 or not JSON: its top-level
    fields, when it is JSON once undecodable bytes are replaced (matchable as it is); else
    its event name alone (no hook can be matched)."""
    text = data.decode("utf-8", "replace")
    try:
        fields = deepjson.shallow(text, 1)
    except ValueError:
        fields = None
    if isinstance(fields, dict):
        return HostInput(fields, why)
    return HostInput(salvage_event(text), why, salvaged=True)


def salvage_event(text: str) -> dict[str, Any]:
    """``{"hook_event_name": NAME}`` when ``text`` (any part of an envelope) names its
    event; else {}."""
    found = _EVENT_NAME.search(text)
    return {"hook_event_name": found.group(1)} if found else {}
