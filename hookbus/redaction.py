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
current snapshot without locking, so ``redact`` (and ``redact_decision``, ``redact_outcome``)
costs one attribute read when no secret is registered.

``RedactingFilter`` applies the same to log records. A filter on a *logger* only sees the
records logged on that very logger (not those propagated from its children); put it on each
logger, or on the handlers, to cover a tree.

Records are masked more widely, whether or not anything was registered (a process that has
run no prompt hook knows no key): ``mask``, ``mask_value``, ``redact_record`` and
``redact_emit_record`` also mask secrets by their shape (``SHAPES``: the API keys of common
providers, ``Authorization`` and ``Cookie`` values, a URL's password, private key blocks,
``password=``-style assignments and flags), and ``mask_value`` masks whole the value of an
object key named like a secret (``"password"``, ``"api_key"``, ``"authorization"``: see
``names_a_secret``). Each is masked as ``[redacted]`` behind the part that says what it was
(``sk-proj-[redacted]``, ``https://user:[redacted]@host``). The shapes run on RE2, in time
linear in the text (a model writes most of it), on the text's UTF-8 bytes; one pass over
all of a record's strings at once says whether any needs masking, so a record without a
secret costs that pass and nothing more. What decides (a decision's reason, its input) is
left to ``redact_decision``: the shapes mask what is kept, not what is answered.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from hookbus.decision import Decision, HookFailure, Outcome
    from hookbus.records import EmitRecord, RunRecord

__all__ = [
    "MARKER",
    "MIN_SECRET_LENGTH",
    "RedactingFilter",
    "clear_secrets",
    "has_secrets",
    "mask",
    "mask_value",
    "names_a_secret",
    "redact",
    "redact_decision",
    "redact_emit_record",
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


# -- secrets by their shape: what nobody registered ------------------------------------------

#: Words an object key or an assigned name ends with when what it holds is a secret.
_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "auth", "credential", "credentials")
#: ... and words that make one with ``key`` after them (``api_key``, ``API-KEY``, ``apikey``).
_KEY_KINDS = ("api", "access", "private", "secret", "signing", "encryption", "master", "session")
#: What an object key that names a secret ends with, lowercased: ``names_a_secret``.
SECRET_KEY_ENDINGS: tuple[str, ...] = (
    *_SECRET_WORDS,
    *(f"{kind}{joint}key" for kind in _KEY_KINDS for joint in ("", "_", "-")),
    "authorization",
    "cookie",
)
#: Longer keys are data, not names: never taken for one.
_MAX_KEY_NAME = 200
_NAME = "(?:" + "|".join((*_SECRET_WORDS[:-2], "credentials?", "(?:" + "|".join(_KEY_KINDS) + ")[_-]?key")) + ")"
#: An assigned value: quoted (a passphrase may hold spaces), JSON-escaped inside a string,
#: or bare up to a delimiter of the shell, a URL's query or JSON. Never a lone ``=``
#: (``token == x`` compares) nor what is masked already.
_VALUE = (
    r"""(?:"([^"\r\n]+)"|'([^'\r\n]+)'|\\"([^"\\\r\n]+)\\"|"""
    r"""([^\s"'\\,;&<>{}()\[\]|`=][^\s"'\\,;&<>{}()\[\]|`]*))"""
)
#: The shapes of secrets that records are masked for, whatever was registered: what each
#: is, and its RE2 pattern, in which every capturing group is what gets masked (the rest
#: of the match is kept, to say what was there). Each is looked for on its own: in one
#: pattern of them all, a shape that could still match from an earlier place (a long run of
#: name characters on its way to a ``password=``) keeps RE2 reading past every match that
#: another shape finds, which makes finding them all quadratic in the text.
SHAPES: tuple[tuple[str, str], ...] = (
    ("a private key block", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----((?s:.)*?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)"),
    ("an Authorization header's credentials", r"""(?i:\b(?:proxy-)?authorization\\?["']?[ \t]*[:=][ \t]*\\?["']?(?:(?:bearer|basic|token|digest|negotiate|bot|apikey|key)[ \t]+)?)([^\s"'\\,;]+)"""),
    ("a Cookie header's value", r"""(?i:\b(?:set-)?cookie\\?["']?[ \t]*:[ \t]*\\?["']?)([^\r\n"'\\]+)"""),
    ("a URL's password", r"""(?i:\b[a-z][a-z0-9+.-]*://[^\s/?#@:'"]*:)([^\s/?#'"]+)@"""),
    ("curl's -u USER:PASSWORD", r"""(?:^|\s)(?:-u|--user)[ \t]*["']?[^\s:"']*:([^\s"']+)"""),
    ("a secret-named assignment (password=, API_KEY:, \"token\": ...)", r"""(?i:\b[a-z0-9_.-]*""" + _NAME + r"""\\?["']?[ \t]*[:=][ \t]*)""" + _VALUE),
    ("a secret-named flag (--password VALUE)", r"""(?:^|\s)(?i:--?[a-z0-9-]*""" + _NAME + r""")[ \t]+""" + _VALUE),
    ("an OpenAI or Anthropic key", r"\b(?:sk-(?:proj|ant|svcacct|admin)-|sk-)([A-Za-z0-9_-]{20,})"),
    ("a GitHub token", r"\b(?:gh[pousr]_)([A-Za-z0-9]{20,})"),
    ("a GitHub fine-grained token", r"\bgithub_pat_([A-Za-z0-9_]{20,})"),
    ("a GitLab token", r"\bglpat-([A-Za-z0-9_-]{20,})"),
    ("a Slack token", r"\b(?:xox[abposr]|xapp)-([A-Za-z0-9-]{10,})"),
    ("an AWS access key id", r"\b(?:AKIA|ASIA)([A-Z0-9]{16})\b"),
    ("a Google API key", r"\bAIza([0-9A-Za-z_-]{35})"),
    ("a Google OAuth token", r"\bya29\.([0-9A-Za-z_-]{20,})"),
    ("a Stripe key", r"\b[rs]k_(?:live|test)_([0-9A-Za-z]{10,})"),
    ("a Hugging Face token", r"\bhf_([A-Za-z0-9]{30,})"),
    ("an npm token", r"\bnpm_([A-Za-z0-9]{36,})"),
    ("a JSON Web Token", r"\beyJ([A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*)?)"),
    ("a bearer token", r"(?:\b[Bb]earer|\bBEARER)[ \t]+([A-Za-z0-9._~+/-]{8,}=*)"),
)
#: No shape fits in fewer characters (``auth=x``).
_SHORTEST_SHAPE = 6
#: Values a secret-named assignment has that are no secret (``"secret": false``), and
#: what is masked already.
_NOT_SECRETS = frozenset({b"true", b"false", b"null", b"none", b"nil", b"undefined", MARKER.encode()})
#: A scheme before a credential, kept when the credential is masked: ``Bearer [redacted]``.
_SCHEME = re.compile(r"(?i)(?:bearer|basic|token|digest|negotiate|bot|apikey)[ \t]+(?=\S)")
#: Matches of one shape looked at in one text, at most: from the next one on, the rest of
#: the text is masked whole. No real text holds hundreds of secrets of one kind, and a
#: crafted one (``token=a`` a hundred thousand times) must not cost a second to mask.
MAX_MATCHES_PER_SHAPE = 256
#: Bytes of matches, in one text, split into what is kept and what is masked (the slower
#: part of RE2); a match past it is masked whole, its telling part too.
_SPLIT_BUDGET = 64 * 1024


class _Shapes:
    """The shapes compiled for RE2, on bytes read as Latin-1: each byte a character, so a
    UTF-8 text's non-ASCII bytes fall only inside the negated classes, and every span starts
    and ends on a character boundary. ``anywhere`` is all of them at once, without groups:
    whether a text holds any, in one pass of the DFA. Each shape then has a finder without
    groups (the DFA alone finds where each match starts and ends) and a splitter with them
    (what of a match is kept, and what is masked), compiled the first time a text holds one
    (a process that meets no secret compiles one pattern, not one per shape)."""

    def __init__(self) -> None:
        import re2

        self._re2 = re2
        self._patterns = [regex.encode("ascii") for _, regex in SHAPES]
        self.anywhere = re2.compile(b"|".join(b"(?:" + pattern + b")" for pattern in self._patterns), self._options(False))
        self._finders: list[Any] = [None] * len(SHAPES)
        self._splitters: list[Any] = [None] * len(SHAPES)
        self._which: Any = None

    def _options(self, capture: bool) -> Any:
        chosen = self._re2.Options()
        chosen.encoding = self._re2.Options.Encoding.LATIN1
        chosen.never_capture = not capture
        chosen.log_errors = False  # a DFA out of memory falls back to the NFA: no news
        return chosen

    def _finder(self, index: int) -> Any:
        finder = self._finders[index]
        if finder is None:  # two threads may both compile it: the same pattern either way
            finder = self._finders[index] = self._re2.compile(self._patterns[index], self._options(False))
        return finder

    def _splitter(self, index: int) -> Any:
        splitter = self._splitters[index]
        if splitter is None:
            splitter = self._splitters[index] = self._re2.compile(self._patterns[index], self._options(True))
        return splitter

    def holds_any(self, data: bytes) -> bool:
        return self.anywhere.search(data) is not None

    def present(self, data: bytes) -> frozenset[int]:
        """The shapes ``data`` holds, in one pass (an RE2 set): so that a long text is read
        again only by the finders of what it holds. All of them when the set cannot say
        (its DFA out of memory answers nothing, which must not read as "none")."""
        which = self._which
        if which is None:
            which = self._re2.Set.SearchSet(self._options(False))
            for pattern in self._patterns:
                which.Add(pattern)
            which.Compile()
            self._which = which
        found = which.Match(data)
        return frozenset(found) if found else frozenset(range(len(SHAPES)))

    def spans(self, data: bytes, shapes: frozenset[int] | None = None) -> tuple[list[tuple[int, int]], frozenset[int], int | None]:
        """Where the secrets of ``shapes`` (all when None) lie in ``data``, sorted, and
        those that overlap or touch joined (a secret two shapes find is masked once, and
        whole); which shapes found one; and where the first shape to have more than
        MAX_MATCHES_PER_SHAPE matches had its next one (None when none had), from which a
        span runs to the end of ``data``."""
        found: list[tuple[int, int]] = []
        seen: set[int] = set()
        cut: int | None = None
        budget = [_SPLIT_BUDGET]
        for index in sorted(self.present(data) if shapes is None else shapes):
            for count, match in enumerate(self._finder(index).finditer(data)):
                seen.add(index)
                start, end = match.span()
                if count == MAX_MATCHES_PER_SHAPE:
                    found.append((start, len(data)))
                    cut = start if cut is None else min(cut, start)
                    break
                found += self._split(index, data, start, end, budget)
        return _joined(found), frozenset(seen), cut

    def _split(self, index: int, data: bytes, start: int, end: int, budget: list[int]) -> list[tuple[int, int]]:
        """The secret parts of the match ``data[start:end]`` of shape ``index``; the whole
        match once the text's budget for splitting is spent."""
        if end - start > budget[0]:
            return [(start, end)]
        budget[0] -= end - start
        splitter = self._splitter(index)
        parts = splitter.match(data, start, end)
        if parts is None:  # cannot be: the same pattern matched there
            return [(start, end)]
        secrets = []
        for group in range(1, splitter.groups + 1):
            secret_start, secret_end = parts.span(group)
            if secret_end > secret_start and data[secret_start:secret_end].lower() not in _NOT_SECRETS:
                secrets.append((secret_start, secret_end))
        return secrets


def _joined(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    joined: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined


@functools.lru_cache(maxsize=1)
def _shapes() -> _Shapes:
    """Compiled on first use: a process that records nothing does not import RE2 for it."""
    return _Shapes()


#: Texts RE2 found to hold no shape of secret (what ``_Survey`` asks of a record's strings,
#: joined): a hook's records repeat theirs fire after fire (the same reason, the same tool
#: name), and the answer depends on the text alone, not on the secrets registered since.
_NO_SHAPE: dict[str, None] = {}
#: What ``_NO_SHAPE`` holds at most: texts this long, and this many (then it starts again).
_NO_SHAPE_TEXT_CHARS = 2048
_NO_SHAPE_TEXTS = 512


def _remember_no_shape(text: str) -> None:
    if len(text) <= _NO_SHAPE_TEXT_CHARS:
        if len(_NO_SHAPE) >= _NO_SHAPE_TEXTS:
            _NO_SHAPE.clear()  # a dict's single operations hold the GIL: threads may race here
        _NO_SHAPE[text] = None


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate (JSON's "\ud800") kept


def _masked_spans(data: bytes, spans: list[tuple[int, int]]) -> str:
    marker = MARKER.encode()
    pieces: list[bytes] = []
    kept_until = 0
    for start, end in spans:
        pieces += (data[kept_until:start], marker)
        kept_until = end
    pieces.append(data[kept_until:])
    return b"".join(pieces).decode("utf-8", "surrogatepass")


def mask(text: str) -> str:
    """``text`` as a record may keep it: every registered secret masked (``redact``), and
    every secret of a known shape (``SHAPES``). ``text`` itself when it holds none."""
    return _masked_text(text, None)


def _masked_text(text: str, shapes: frozenset[int] | None) -> str:
    """``mask`` with only ``shapes`` looked for (all when None)."""
    text = redact(text)
    if len(text) < _SHORTEST_SHAPE:
        return text
    data = _encoded(text)
    engine = _shapes()
    if shapes is None and not engine.holds_any(data):
        return text
    spans, _, _ = engine.spans(data, shapes)
    return _masked_spans(data, spans) if spans else text


def names_a_secret(key: str) -> bool:
    """Whether an object key names a secret: it ends, in any case, with one of
    ``SECRET_KEY_ENDINGS`` (``password``, ``db_password``, ``x-api-key``,
    ``Authorization``), and is no longer than a name is."""
    return len(key) <= _MAX_KEY_NAME and key.lower().endswith(SECRET_KEY_ENDINGS)


def _masked_whole(value: Any) -> Any:
    """The value of a secret-named key: a string masked whole, but for a scheme before it
    (``Bearer [redacted]``); a number masked; anything else (a flag, null) kept."""
    if isinstance(value, str):
        if not value or value == MARKER:
            return value
        scheme = _SCHEME.match(value[:32])
        return (scheme.group(0) if scheme else "") + MARKER
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return MARKER
    return value


class _Survey:
    """What of a JSON-like value's strings must be masked, found in one pass over them all:
    each string (keys too) joined by newlines, which no shape's secret crosses but a private
    key's, and RE2 asked once. Nearly always the answer is nothing, and the value is kept
    as it is, whatever its size, for the cost of that one pass."""

    __slots__ = ("strings", "secret_keys", "shapes", "to_mask", "to_drop")

    def __init__(self, value: Any) -> None:
        #: Every string, in the order met.
        self.strings: list[str] = []
        #: A key named like a secret holds a value to mask whole.
        self.secret_keys = False
        self._collect(value)
        #: The shapes the strings hold, for ``_masked_text`` to look for.
        self.shapes: frozenset[int] = frozenset()
        #: The strings to pass through ``_masked_text``.
        self.to_mask: set[str] = set()
        #: The strings a text of too many secrets reached: masked whole.
        self.to_drop: set[str] = set()
        self._find()

    @property
    def clean(self) -> bool:
        return not (self.secret_keys or self.to_mask or self.to_drop)

    def _collect(self, value: Any) -> None:
        stack = [value]
        seen: set[int] = set()
        strings = self.strings
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                strings.append(item)
            elif isinstance(item, dict):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                for key, child in item.items():
                    if isinstance(key, str):
                        strings.append(key)
                        if not self.secret_keys and names_a_secret(key):
                            self.secret_keys = True
                    stack.append(child)
            elif isinstance(item, (list, tuple)):
                if id(item) in seen:
                    continue
                seen.add(id(item))
                stack.extend(item)

    def _find(self) -> None:
        snapshot = _snapshot
        # Shorter strings hold nothing to mask: no shape, nor registered secret, is as short.
        strings = [text for text in self.strings if len(text) >= _SHORTEST_SHAPE]
        if not strings:
            return
        joined = "\n".join(strings)
        if snapshot.anchors and any(anchor in joined for anchor in snapshot.anchors):
            self.to_mask.update(text for text in strings if any(anchor in text for anchor in snapshot.anchors))
        if joined in _NO_SHAPE:
            return
        data = _encoded(joined)
        engine = _shapes()
        if not engine.holds_any(data):
            _remember_no_shape(joined)
            return
        spans, self.shapes, cut = engine.spans(data)
        self._assign(strings, spans, cut)

    def _assign(self, strings: list[str], spans: list[tuple[int, int]], cut: int | None) -> None:
        """Each string a span falls in is to be masked (each then masked for what it holds
        itself: a private key cut short runs on to the end of the joined text, not of its
        own); the strings after the one where a shape's matches ran out (``cut``) are
        masked whole."""
        import bisect

        starts = []
        offset = 0
        for text in strings:
            starts.append(offset)
            offset += len(_encoded(text)) + 1

        def holding(position: int) -> int:
            return max(0, bisect.bisect_right(starts, position) - 1)

        last_kept = len(strings) - 1 if cut is None else holding(cut)
        for start, end in spans:
            self.to_mask.update(strings[holding(start) : min(holding(max(start, end - 1)), last_kept) + 1])
        self.to_drop.update(strings[last_kept + 1 :])


# -- JSON-like values ------------------------------------------------------------------------


class _Frame:
    """One container being rebuilt by ``redact_value`` or ``mask_value``. ``whole``: it is
    the value of a secret-named key, so every string and number in it is masked whole."""

    __slots__ = ("source", "keys", "children", "built", "changed", "whole", "index")

    def __init__(self, source: dict[Any, Any] | list[Any] | tuple[Any, ...], whole: bool = False) -> None:
        self.source = source
        self.keys: list[Any] | None = None
        if isinstance(source, dict):
            self.keys = list(source)
            self.children: Iterator[Any] = iter(list(source.values()))
        else:
            self.children = iter(list(source))
        self.built: list[Any] = []
        self.changed = False
        self.whole = whole
        #: The position of the next child: its key, for a dict.
        self.index = 0

    def add(self, original: Any, scrubbed: Any) -> None:
        self.built.append(scrubbed)
        self.changed = self.changed or scrubbed is not original

    def child_is_secret(self, keyed: bool) -> bool:
        """Whether the child about to be read is the value of a key named like a secret."""
        if self.whole:
            return True
        if not keyed or self.keys is None:
            return False
        key = self.keys[self.index]
        return isinstance(key, str) and names_a_secret(key)

    def result(self, scrub: Callable[[str], str]) -> Any:
        if self.keys is not None:
            keys = [scrub(key) if isinstance(key, str) else key for key in self.keys]
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
    return _scrubbed(value, lambda text: _redact(text, snapshot), keyed=False)


def mask_value(value: Any) -> Any:
    """``value`` as a record may keep it: every string in it (dict keys too) passed through
    ``mask``, and the value of every key named like a secret (``names_a_secret``) masked
    whole, at any depth, through dicts, lists and tuples. Copied where it changes; the value
    itself comes back when nothing in it holds a secret."""
    if isinstance(value, str):
        return mask(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    survey = _Survey(value)
    if survey.clean:
        return value
    return _scrubbed(value, _scrubber(survey), keyed=True)


def _scrubber(survey: _Survey) -> Callable[[str], str]:
    shapes, to_mask, to_drop = survey.shapes, survey.to_mask, survey.to_drop

    def scrub(text: str) -> str:
        if text in to_drop:
            return MARKER
        return _masked_text(text, shapes) if text in to_mask else text

    return scrub


def _scrubbed(value: Any, scrub: Callable[[str], str], keyed: bool) -> Any:
    if isinstance(value, str):
        return scrub(value)
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
            built = frame.result(scrub)
            if not stack:
                return built
            stack[-1].add(frame.source, built)
            continue
        secret = frame.child_is_secret(keyed)
        frame.index += 1
        if isinstance(child, (dict, list, tuple)):
            if id(child) in on_path:
                frame.add(child, CYCLE_MARKER)
            else:
                on_path.add(id(child))
                stack.append(_Frame(child, secret))
        elif secret:
            frame.add(child, _masked_whole(child))
        elif isinstance(child, str):
            frame.add(child, scrub(child))
        else:
            frame.add(child, child)


def redact_record(record: RunRecord) -> RunRecord:
    """``record`` as a recorder may keep it: its error, decision (reason, context, input,
    all of it), note, thread id and tool name passed through ``mask`` (registered secrets
    and secrets of a known shape; in the decision, the values of secret-named keys too).
    The same object when nothing in it held a secret, which one pass over its strings
    tells."""
    texts = (record.error, record.note, record.thread_id, record.tool_name)
    survey = _Survey([*(text for text in texts if text is not None), record.decision])
    if survey.clean:
        return record
    scrub = _scrubber(survey)
    error, note, thread_id, tool_name = (None if text is None else scrub(text) for text in texts)
    decision = _scrubbed(record.decision, scrub, keyed=True)
    if (error, note, thread_id, tool_name, decision) == (*texts, record.decision) and decision is record.decision:
        return record
    import attrs

    return attrs.evolve(record, error=error, note=note, thread_id=thread_id, tool_name=tool_name, decision=decision)


def redact_emit_record(record: EmitRecord) -> EmitRecord:
    """``record`` as a recorder may keep it: its envelope and decision passed through
    ``mask_value``. The same object when nothing in it held a secret."""
    survey = _Survey([record.envelope, record.decision])  # one pass for both
    if survey.clean:
        return record
    scrub = _scrubber(survey)
    envelope = _scrubbed(record.envelope, scrub, keyed=True)
    decision = _scrubbed(record.decision, scrub, keyed=True)
    if envelope is record.envelope and decision is record.decision:
        return record
    import attrs

    return attrs.evolve(record, envelope=envelope, decision=decision)


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
