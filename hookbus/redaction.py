"""Secrets that must never reach a record, a log message or an error.

Whoever sends a secret (the prompt provider its API key, a runner a header token, a URL its
password) registers it here first; what is recorded or logged goes through ``redact``, so a
server that echoes the secret back (an error body quoting the ``Authorization`` header, a
model repeating its instructions) cannot put it on disk.

Rules, chosen so that masking never mangles ordinary text:

- A secret shorter than ``MIN_SECRET_LENGTH`` (8) characters once surrounding whitespace is
  stripped is ignored: masking ``"pw"`` would mask every ``pw`` of every record. Code that
  holds such a secret must simply never put it into a message (``redact_url`` does that for
  URLs, whatever the password's length).
- Each secret is also registered in the forms a JSON echo of it takes (``\\"``, ``\\u00e9``,
  ``\\/``), since an error snippet is the raw reply, not its parsed text.
- Every occurrence becomes ``[redacted]``; overlapping secrets are masked as one span, so no
  piece of either survives.
- The registry is process-wide and only grows (a rotated key stays a secret);
  ``clear_secrets`` exists for tests.
- ``redact_value`` walks JSON-like values (dicts, lists, tuples, strings; dict keys too)
  without recursion, so a value nested 100,000 deep is scrubbed whole; a container that
  contains itself is cut at the repeat with ``[cycle]``. It returns the value itself when
  nothing in it changed.

Thread-safe: registering replaces an immutable snapshot under a lock; reading takes the
current snapshot without locking, so ``redact`` costs one attribute read when no secret is
registered.

``RedactingFilter`` applies the same to log records. A filter on a *logger* only sees the
records logged on that very logger (not those propagated from its children); put it on each
logger, or on the handlers, to cover a tree.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from hookbus.records import RunRecord

__all__ = [
    "MARKER",
    "MIN_SECRET_LENGTH",
    "RedactingFilter",
    "clear_secrets",
    "has_secrets",
    "redact",
    "redact_record",
    "redact_url",
    "redact_value",
    "register_secret",
]

#: What a secret becomes.
MARKER = "[redacted]"
#: What a container that holds itself becomes, below its first occurrence.
CYCLE_MARKER = "[cycle]"
#: Shorter secrets are not registered: masking them would mask ordinary words.
MIN_SECRET_LENGTH = 8


class _Snapshot:
    """The registered secrets and the pattern that finds them; never mutated."""

    __slots__ = ("secrets", "pattern")

    def __init__(self, secrets: frozenset[str]) -> None:
        self.secrets = secrets
        self.pattern: re.Pattern[str] | None = None
        if secrets:
            # A lookahead, so that every start position is tried and overlapping secrets are
            # both found; the longest first, so that each position reports its longest match.
            ordered = sorted(secrets, key=lambda secret: (-len(secret), secret))
            self.pattern = re.compile("(?=(" + "|".join(map(re.escape, ordered)) + "))")


_lock = threading.Lock()
_snapshot = _Snapshot(frozenset())


def register_secret(value: str) -> None:
    """Mask ``value`` from now on in everything ``redact`` and its kin scrub.

    Ignored when it is not a string or is shorter than ``MIN_SECRET_LENGTH`` characters
    (whitespace aside)."""
    global _snapshot
    if not isinstance(value, str) or value in _snapshot.secrets:  # the same key, fire after fire
        return
    if len(value.strip()) < MIN_SECRET_LENGTH:
        return
    forms = _forms(value)
    with _lock:
        if not forms <= _snapshot.secrets:
            _snapshot = _Snapshot(_snapshot.secrets | forms)


def _forms(value: str) -> frozenset[str]:
    """``value`` and how it reads inside a JSON string (as an echoing server may send it)."""
    escaped = json.dumps(value)[1:-1]
    forms = {value, escaped, json.dumps(value, ensure_ascii=False)[1:-1]}
    forms.update(form.replace("/", "\\/") for form in list(forms))
    return frozenset(forms)


def clear_secrets() -> None:
    """Forget every secret. For tests: a daemon never has a reason to unmask one."""
    global _snapshot
    with _lock:
        _snapshot = _Snapshot(frozenset())


def has_secrets() -> bool:
    """Whether any secret is registered (when none is, every scrub returns its input)."""
    return _snapshot.pattern is not None


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``[redacted]``; ``text`` itself
    (the same object) when it holds none."""
    snapshot = _snapshot
    if snapshot.pattern is None or not text:
        return text
    return _redact(text, snapshot)


def _redact(text: str, snapshot: _Snapshot) -> str:
    # str.__contains__ is far faster than the pattern: find out first whether there is work.
    if not any(secret in text for secret in snapshot.secrets):
        return text
    assert snapshot.pattern is not None
    pieces: list[str] = []
    kept_until = 0
    span_start, span_end = -1, -1
    for match in snapshot.pattern.finditer(text):
        start = match.start()
        end = start + len(match.group(1))
        if start < span_end:  # overlaps the span being built: grow it
            span_end = max(span_end, end)
            continue
        if span_end >= 0:
            pieces += (text[kept_until:span_start], MARKER)
            kept_until = span_end
        span_start, span_end = start, end
    if span_end >= 0:
        pieces += (text[kept_until:span_start], MARKER)
        kept_until = span_end
    pieces.append(text[kept_until:])
    return "".join(pieces)


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo replaced: ``http://me:[redacted]@host/v1``.
    The user, host, port, path and query are kept; a URL without a password is returned
    as is. Pure string work, so it never raises on a malformed URL."""
    scheme_end = url.find("//")
    if scheme_end < 0:
        return url
    authority_start = scheme_end + 2
    authority_end = len(url)
    for delimiter in "/?#":
        found = url.find(delimiter, authority_start)
        if found >= 0:
            authority_end = min(authority_end, found)
    userinfo, at, hostport = url[authority_start:authority_end].rpartition("@")
    if not at:
        return url
    user, colon, password = userinfo.partition(":")
    if not colon:
        return url
    return f"{url[:authority_start]}{user}:{MARKER}@{hostport}{url[authority_end:]}"


# -- JSON-like values ------------------------------------------------------------------------


class _Frame:
    """One container being rebuilt by ``redact_value``."""

    __slots__ = ("source", "keys", "children", "built", "changed")

    def __init__(self, source: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> None:
        self.source = source
        self.keys: list[Any] | None = None
        if isinstance(source, dict):
            self.keys = list(source)
            self.children: Iterator[Any] = iter(list(source.values()))
        else:
            self.children = iter(list(source))
        self.built: list[Any] = []
        self.changed = False

    def add(self, original: Any, scrubbed: Any) -> None:
        self.built.append(scrubbed)
        self.changed = self.changed or scrubbed is not original

    def result(self, snapshot: _Snapshot) -> Any:
        if self.keys is not None:
            keys = [_redact(key, snapshot) if isinstance(key, str) else key for key in self.keys]
            if not self.changed and all(new is old for new, old in zip(keys, self.keys)):
                return self.source
            return dict(zip(keys, self.built))
        if not self.changed:
            return self.source
        return tuple(self.built) if isinstance(self.source, tuple) else self.built


_DONE = object()


def redact_value(value: Any) -> Any:
    """``value`` with every string in it (dict keys too) redacted, through dicts, lists and
    tuples at any depth. Containers that change are copied (a dict subclass becomes a
    dict); the value itself comes back when nothing in it holds a secret."""
    snapshot = _snapshot
    if snapshot.pattern is None:
        return value
    if isinstance(value, str):
        return _redact(value, snapshot)
    if not isinstance(value, (dict, list, tuple)):
        return value
    # An explicit stack, not recursion: a hostile runner's decision may be nested deeper
    # than the interpreter's recursion limit.
    stack = [_Frame(value)]
    on_path = {id(value)}
    while True:
        frame = stack[-1]
        child = next(frame.children, _DONE)
        if child is _DONE:
            stack.pop()
            on_path.discard(id(frame.source))
            built = frame.result(snapshot)
            if not stack:
                return built
            stack[-1].add(frame.source, built)
        elif isinstance(child, str):
            frame.add(child, _redact(child, snapshot))
        elif isinstance(child, (dict, list, tuple)):
            if id(child) in on_path:
                frame.add(child, CYCLE_MARKER)
            else:
                on_path.add(id(child))
                stack.append(_Frame(child))
        else:
            frame.add(child, child)


def redact_record(record: RunRecord) -> RunRecord:
    """``record`` with its error, decision (reason, context, input), note and thread id
    scrubbed. The same object when no secret is registered (the cost on every fire is one
    attribute read) or when nothing in it held one."""
    snapshot = _snapshot
    if snapshot.pattern is None:
        return record
    error = _redact_optional(record.error, snapshot)
    note = _redact_optional(record.note, snapshot)
    thread_id = _redact_optional(record.thread_id, snapshot)
    decision = redact_value(record.decision)
    if (
        error is record.error
        and note is record.note
        and thread_id is record.thread_id
        and decision is record.decision
    ):
        return record
    import attrs

    return attrs.evolve(record, error=error, note=note, thread_id=thread_id, decision=decision)


def _redact_optional(text: str | None, snapshot: _Snapshot) -> str | None:
    return text if text is None else _redact(text, snapshot)


# -- logging ---------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """Scrubs a log record's rendered message (``msg % args``), its exception text and its
    stack text. Never drops a record. A record whose message held a secret is left with the
    scrubbed text as ``msg`` and no ``args``; one whose traceback held a secret keeps the
    scrubbed traceback as ``exc_text`` and loses ``exc_info``, so that no handler renders
    the original again."""

    def filter(self, record: logging.LogRecord) -> bool:
        snapshot = _snapshot
        if snapshot.pattern is None:
            return True
        try:
            message = record.getMessage()
        except Exception:  # msg and args do not fit: logging prints both raw, so scrub both
            message = f"{record.msg} {record.args!r}"
            scrubbed = _redact(message, snapshot)
            if scrubbed is not message:
                record.msg, record.args = scrubbed, None
        else:
            scrubbed = _redact(message, snapshot)
            if scrubbed is not message:
                record.msg, record.args = scrubbed, None
        if (record.exc_info and record.exc_info[0] is not None) or record.exc_text:
            text = record.exc_text
            if not text and record.exc_info:
                text = logging.Formatter().formatException(record.exc_info)
            if text:
                scrubbed = _redact(text, snapshot)
                if scrubbed is not text:
                    record.exc_text, record.exc_info = scrubbed, None
        if record.stack_info:
            record.stack_info = _redact(record.stack_info, snapshot)
        return True


_log_redaction_installed = False


def install_log_redaction() -> None:
    """Mask registered secrets in whatever hookbus logs. A filter on a logger sees only what
    is logged on that very logger, so each of hookbus's gets one. Idempotent."""
    global _log_redaction_installed
    if _log_redaction_installed:
        return
    for name in ("hookbus", "hookbus.load"):
        logging.getLogger(name).addFilter(RedactingFilter())
    _log_redaction_installed = True
