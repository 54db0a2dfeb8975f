"""The envelope as every hook of an emit receives it, checked and encoded once."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping

from hookbus.deepjson import TooDeep
from hookbus.errors import EnvelopeError, EnvelopeTooDeep
from hookbus.jsontext import strict_json


def encode_envelope(event: str, envelope: Mapping[str, Any]) -> tuple[Mapping[str, Any], bytes]:
    """The envelope hooks receive: the embedder's fields untouched, plus hook_event_name.

    Compact separators, so ``"vix_bin":"..."`` greps the way the spec's examples expect.
    EnvelopeTooDeep when it is nested deeper than MAX_NESTING levels; EnvelopeError when it
    cannot be JSON at all: holding itself, or holding a value that cannot be written.
    """
    full = dict(envelope)
    full["hook_event_name"] = event
    try:
        payload = strict_json(full, separators=(",", ":")) + b"\n"
    except TooDeep as exc:
        raise EnvelopeTooDeep(f"the envelope is {exc}") from None
    except (ValueError, TypeError) as exc:  # a circular reference, a value str() refuses
        raise EnvelopeError(f"the {event} envelope cannot be encoded as JSON: {exc}") from None
    return MappingProxyType(full), payload


def check_envelope(envelope: object) -> Mapping[str, Any]:
    """``envelope`` when it is a mapping (None is an empty one); EnvelopeError otherwise."""
    if envelope is None:
        return {}
    if isinstance(envelope, Mapping):
        return envelope
    raise EnvelopeError(f"the envelope must be a mapping (a dict of its fields), not {type(envelope).__name__}")
