"""Secrets that must never reach a record, a log message or an error.

Whoever sends a secret (the prompt provider its API key, a runner a header token, a URL its
password) registers it here first; what is recorded or logged goes through ``redact``, so a
server that echoes the secret back (an error body quoting the ``Authorization`` header, a
model repeating its instructions) cannot put it on disk.

Rules, chosen so that masking leaves ordinary text alone (but for the cost said below):

- A secret shorter than ``MIN_SECRET_LENGTH`` (8) characters once surrounding whitespace is
  stripped is ignored: masking ``"pw"`` would mask every ``pw`` of every record. Code that
  holds such a secret must simply never put it into a message (``redact_url`` does that for
  URLs, whatever the password's length).
- Each secret is also registered in the spellings an echo of it takes: inside a JSON string
  (``\\"``, ``\\u00e9``, ``\\/``), since an error snippet is the raw reply, not its parsed
  text; and %-encoded (``quote``, ``quote(safe="")``, ``quote_plus``), as a URL or a form
  carries it.
- An echo may be cut short: OpenAI's 401 quotes the key's first characters, stars and its
  last four (``sk-proj-ab****wxyz``), and an error snippet may be cut through the key at
  either end. So a spelling's prefixes and suffixes down to ``MIN_SECRET_LENGTH``
  characters are masked too: no run of 8 or more characters at a secret's start or end
  survives (a shorter one may: the ``wxyz`` above). A run from the middle, cut at both
  ends, is not masked: finding one would cost a search for every run of every secret in
  every text. A spelling that holds whitespace (a passphrase) is masked only whole: its
  prefixes are ordinary words. The cost: a secret's first or last 8 characters are masked
  wherever they appear (the ``sk-proj-`` of OpenAI's keys, the ``password`` of
  ``password123``).
- Every occurrence becomes ``[redacted]``; overlapping matches are masked as one span, so no
  piece of any survives.
- The registry is process-wide and only grows (a rotated key stays a secret);
  ``clear_secrets`` exists for tests.
- ``redact_value`` walks JSON-like values (dicts, lists, tuples, strings; dict keys too)
  without recursion, so a value nested 100,000 deep is scrubbed whole; a container that
  contains itself is cut at the repeat with ``[cycle]``. It returns the value itself when
  nothing in it changed.

Thread-safe: registering replaces an immutable snapshot under a lock; reading takes the
current snapshot without locking, so ``redact`` (and ``redact_decision``, ``redact_outcome``,
``redact_record``) costs one attribute read when no secret is registered.

``RedactingFilter`` applies the same to log records. A filter on a *logger* only sees the
records logged on that very logger (not those propagated from its children); put it on each
logger, or on the handlers, to cover a tree.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from hookbus.decision import Decision, HookFailure, Outcome
    from hookbus.records import RunRecord

__all__ = [
    "MARKER",
    "MIN_SECRET_LENGTH",
    "RedactingFilter",
    "clear_secrets",
    "has_secrets",
    "redact",
    "redact_decision",
    "redact_outcome",
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
    """The registered secrets and how to find them; never mutated.

    ``anchors`` are the texts whose absence proves a text holds nothing to mask (each
    spelling's first and last MIN_SECRET_LENGTH characters, and the spellings masked only
    whole); ``heads`` and ``tails`` map those characters to the spellings they start or end."""

    __slots__ = ("registered", "anchors", "heads", "tails", "wholes")

    def __init__(self, registered: frozenset[str]) -> None:
        self.registered = registered
        spellings = {spelling for secret in registered for spelling in _spellings(secret)}
        cuttable = {spelling for spelling in spellings if not any(map(str.isspace, spelling))}
        #: Masked only whole, the longest first: a passphrase's prefixes are words.
        self.wholes = tuple(sorted(spellings - cuttable, key=lambda spelling: (-len(spelling), spelling)))
        self.heads: dict[str, tuple[str, ...]] = _grouped(cuttable, lambda spelling: spelling[:MIN_SECRET_LENGTH])
        self.tails: dict[str, tuple[str, ...]] = _grouped(cuttable, lambda spelling: spelling[-MIN_SECRET_LENGTH:])
        self.anchors = tuple(sorted({*self.heads, *self.tails, *self.wholes}))


def _grouped(spellings: set[str], key: Callable[[str], str]) -> dict[str, tuple[str, ...]]:
    groups: dict[str, list[str]] = {}
    for spelling in sorted(spellings):
        groups.setdefault(key(spelling), []).append(spelling)
    return {anchor: tuple(members) for anchor, members in groups.items()}


_lock = threading.Lock()
_snapshot = _Snapshot(frozenset())


def register_secret(value: str) -> None:
    """Mask ``value`` from now on in everything ``redact`` and its kin scrub: in each of the
    spellings an echo of it takes, and cut short at either end down to 8 characters.

    Ignored when it is not a string or is shorter than ``MIN_SECRET_LENGTH`` characters
    (whitespace aside)."""
    global _snapshot
    if not isinstance(value, str) or value in _snapshot.registered:  # the same key, fire after fire
        return
    if len(value.strip()) < MIN_SECRET_LENGTH:
        return
    with _lock:
        if value not in _snapshot.registered:
            _snapshot = _Snapshot(_snapshot.registered | {value})


def _spellings(value: str) -> set[str]:
    """``value`` as an echoing server may send it: as is, inside a JSON string (with or
    without ``\\u`` escapes, with or without ``\\/``), and %-encoded in a URL or a form."""
    from urllib.parse import quote, quote_plus

    spellings = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    spellings.update(spelling.replace("/", "\\/") for spelling in list(spellings))
    spellings.update((quote(value, safe=""), quote(value), quote_plus(value)))
    return spellings


def clear_secrets() -> None:
    """Forget every secret. For tests: a daemon never has a reason to unmask one."""
    global _snapshot
    with _lock:
        _snapshot = _Snapshot(frozenset())


def has_secrets() -> bool:
    """Whether any secret is registered (when none is, every scrub returns its input)."""
    return bool(_snapshot.anchors)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``[redacted]``; ``text`` itself
    (the same object) when it holds none."""
    snapshot = _snapshot
    if not snapshot.anchors or not text:
        return text
    return _redact(text, snapshot)


def _redact(text: str, snapshot: _Snapshot) -> str:
    # str.__contains__ is fast, and a few anchors per secret are enough to know that a
    # text holds nothing to mask, which is nearly always.
    if not any(anchor in text for anchor in snapshot.anchors):
        return text
    spans = [*_cut_spans(text, snapshot), *_whole_spans(text, snapshot)]
    if not spans:
        return text
    return _masked(text, spans)


def _cut_spans(text: str, snapshot: _Snapshot) -> Iterator[tuple[int, int]]:
    """Where a spelling, or a prefix or suffix of one of 8 characters or more, lies."""
    for head, spellings in snapshot.heads.items():
        start = text.find(head)
        while start >= 0:
            yield start, start + max(_common_prefix(text, start, spelling) for spelling in spellings)
            start = text.find(head, start + 1)
    for tail, spellings in snapshot.tails.items():
        start = text.find(tail)
        while start >= 0:
            end = start + MIN_SECRET_LENGTH
            yield end - max(_common_suffix(text, end, spelling) for spelling in spellings), end
            start = text.find(tail, start + 1)


def _whole_spans(text: str, snapshot: _Snapshot) -> Iterator[tuple[int, int]]:
    for whole in snapshot.wholes:
        start = text.find(whole)
        while start >= 0:
            yield start, start + len(whole)
            start = text.find(whole, start + 1)


def _common_prefix(text: str, start: int, spelling: str) -> int:
    """How many characters of ``spelling`` ``text`` holds from ``start`` (at least the 8
    of its head, which were found there)."""
    low, high = MIN_SECRET_LENGTH, len(spelling)
    while low < high:  # a binary search: startswith runs in C, a loop over characters would not
        middle = (low + high + 1) // 2
        if text.startswith(spelling[:middle], start):
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(text: str, end: int, spelling: str) -> int:
    """How many of the last characters of ``spelling`` ``text`` holds just before ``end``."""
    low, high = MIN_SECRET_LENGTH, len(spelling)
    while low < high:
        middle = (low + high + 1) // 2
        if text.endswith(spelling[-middle:], 0, end):
            low = middle
        else:
            high = middle - 1
    return low


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each span replaced by the marker; overlapping spans are one (so no
    piece of any survives), adjacent ones each get their own."""
    pieces: list[str] = []
    kept_until = 0
    span_start, span_end = -1, -1
    for start, end in sorted(spans):
        if start < span_end:  # overlaps the span being built: grow it
            span_end = max(span_end, end)
            continue
        if span_end >= 0:
            pieces += (text[kept_until:span_start], MARKER)
            kept_until = span_end
        span_start, span_end = start, end
    pieces += (text[kept_until:span_start], MARKER, text[span_end:])
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
    if not snapshot.anchors:
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
    if not snapshot.anchors:
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


#: What a Decision says in words, to the model or to the user: masked. Not its ``input``
#: (see ``redact_decision``), nor hook ids.
_DECISION_WORDS = ("reason", "context", "continue_with", "halt")
#: What an Outcome says that is a verdict, not words: left alone.
_OUTCOME_VERDICT = frozenset({"behavior", "failure", "permission"})


def redact_decision(decision: Decision) -> Decision:
    """``decision`` as it may leave hookbus: its reason, context, continue_with and halt,
    and each failed hook's error, scrubbed (a fail-closed deny's reason is made of the
    hook's stderr).

    Not its ``input``: a rewritten tool input is an instruction to run, and a masked one
    would run something other than what its hook wrote (a ``[redacted]`` written into a
    file, a command that now fails). Records and ``redact_outcome`` mask it, as reports.

    The same object when no secret is registered (one attribute read) or when nothing in
    it held one."""
    snapshot = _snapshot
    if not snapshot.anchors:
        return decision
    changes: dict[str, Any] = _scrubbed_words(decision, _DECISION_WORDS, snapshot)
    failed = tuple(_scrubbed_failure(failure, snapshot) for failure in decision.failed)
    if any(new is not old for new, old in zip(failed, decision.failed)):
        changes["failed"] = failed
    if not changes:
        return decision
    import attrs

    return attrs.evolve(decision, **changes)


def redact_outcome(outcome: Outcome) -> Outcome:
    """``outcome`` as a report of what a hook said (``hookbus explain``, records): every
    text in it scrubbed, its input too, and any field a later version adds. Its verdict
    (behavior, failure kind, permission) is left alone. The same object when no secret is
    registered or when nothing in it held one."""
    snapshot = _snapshot
    if not snapshot.anchors:
        return outcome
    import attrs

    changes: dict[str, Any] = {}
    for field in attrs.fields(type(outcome)):
        if field.name in _OUTCOME_VERDICT:
            continue
        value = getattr(outcome, field.name)
        scrubbed = _redact(value, snapshot) if isinstance(value, str) else redact_value(value)
        if scrubbed is not value:
            changes[field.name] = scrubbed
    return attrs.evolve(outcome, **changes) if changes else outcome


def _scrubbed_words(value: Decision, names: tuple[str, ...], snapshot: _Snapshot) -> dict[str, str]:
    """The fields of ``value`` among ``names`` that held a secret, scrubbed, by name."""
    changes: dict[str, str] = {}
    for name in names:
        text = getattr(value, name)
        if text is not None:
            scrubbed = _redact(text, snapshot)
            if scrubbed is not text:
                changes[name] = scrubbed
    return changes


def _scrubbed_failure(failure: HookFailure, snapshot: _Snapshot) -> HookFailure:
    error = _redact(failure.error, snapshot)
    if error is failure.error:
        return failure
    import attrs

    return attrs.evolve(failure, error=error)


# -- logging ---------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """Scrubs a log record's rendered message (``msg % args``), its exception text and its
    stack text. Never drops a record. A record whose message held a secret is left with the
    scrubbed text as ``msg`` and no ``args``; one whose traceback held a secret keeps the
    scrubbed traceback as ``exc_text`` and loses ``exc_info``, so that no handler renders
    the original again."""

    def filter(self, record: logging.LogRecord) -> bool:
        snapshot = _snapshot
        if not snapshot.anchors:
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
