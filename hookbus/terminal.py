"""Text that is safe to print on a terminal: no escape sequences from hooks or models.

A reason, a context or a hook's output can come from a model that read hostile input, and
a terminal obeys what it is sent: ESC and CSI sequences move the cursor, rewrite earlier
lines, set the window title or (OSC 52) the clipboard, and bidirectional overrides make
text read differently from what it is. Everything hookbus prints for people goes through
``printable``, which shows such characters as escapes instead.
"""

from __future__ import annotations

import re

#: C0 controls, DEL, C1 controls (0x9b is CSI on its own), and the invisible format and
#: direction characters of Unicode (zero-width, bidirectional embeddings, overrides and
#: isolates, line and paragraph separators, the byte order mark).
UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "") -> str:
    """``text`` with every control and direction character shown as an escape (``\\x1b``),
    except those in ``keep`` (``"\\n"`` for a message that may span lines)."""
    if UNPRINTABLE.search(text) is None:
        return text
    if keep:
        return UNPRINTABLE.sub(lambda found: found.group() if found.group() in keep else _escape(found), text)
    return UNPRINTABLE.sub(_escape, text)


def printable_json(text: str) -> str:
    """JSON text made safe to print: the same value, with C1 controls and Unicode direction
    characters written as ``\\u`` escapes (``json.dumps`` escapes only C0 controls)."""
    if UNPRINTABLE.search(text) is None:
        return text
    return UNPRINTABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
