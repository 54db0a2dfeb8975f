"""Records as JSON text that every reader can parse, whatever a runner put in them."""

from __future__ import annotations

import json
import math
from typing import Any


def encode_json(document: Any, indent: int | None = None) -> bytes:
    """``document`` as UTF-8 JSON and a newline.

    A third-party runner's outcome may hold NaN (which ``json.dumps`` would write as the
    non-JSON ``NaN``) or a lone surrogate (which UTF-8 cannot hold): such a record is still
    written, as strict JSON with the odd values spelled out, rather than lost.
    """
    try:
        text = json.dumps(document, ensure_ascii=False, allow_nan=False, indent=indent, default=str)
        return (text + "\n").encode()
    except (ValueError, UnicodeEncodeError):
        text = json.dumps(
            _finite(document), ensure_ascii=True, allow_nan=False, indent=indent, default=str
        )
        return (text + "\n").encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
