"""hookbus-rego: hooks that decide by a Rego policy, evaluated in-process by rego-cpp.

Once this distribution is installed, a hook.json may use the spec key ``"rego"``::

    {
      "trigger": {"event": "PreToolUse", "matcher": "bash"},
      "mode": "sync",
      "blocking": true,
      "rego": {"file": "policy.rego", "query": "data.hooks.decision"}
    }

- ``file`` (required): the policy, a path relative to the hook's directory that stays in
  it (no absolute path, no ``..``, no symbolic link on the way out, none as the file). The
  loader's owner and mode checks cover every file of a hook's directory, this one too.
- ``query`` (default ``"data.hooks.decision"``): a reference into ``data``, the rule whose
  value decides. A plain reference has one value or none, never several results, and no
  ``with``: rego-cpp aborts the process on some ``with`` in a query.

The policy is read and compiled when the hook loads (``parse``, once per generation; the
watcher reloads the hook when the file changes). A policy that does not compile is a load
error at ``$.rego.file`` naming the line and column (``policy.rego:2:6: this is
unclosed``), and the last good version keeps running. So is one that calls ``print()``
(rego-cpp writes it to the process's standard output, where hookbus's bridges answer their
host), one nested deeper than ``MAX_DEPTH``, and one that nothing of can answer the query
(another package, no such rule: it would always allow).

Each fire evaluates the query with the envelope (what a command hook reads on stdin) as
``input``, its containers below ``MAX_DEPTH`` levels cut (rego-cpp would overflow its stack
on thousands of levels, and take the process down). The query's value decides like a
command hook's JSON decision (:func:`hookbus.contract.outcome_from_value`): a map with
``behavior`` (deny, modify, context, allow) decides, undefined, ``null`` or ``{}`` is no
opinion, and anything else is the hook's failure ("unparseable"), so its ``on_error``
decides. An evaluation error (a
conflict between complete rules, a builtin's error) fails the hook the same way. The value
(``UNDEFINED`` for none) goes on the outcome as its ``answer``, which ``hookbus explain``
shows.

The deadline holds: the evaluation runs on a worker thread (rego-cpp's C calls release the
GIL), and the hook gives up at its deadline or when it is cancelled. rego-cpp cannot be
stopped, so an evaluation given up on runs to its end in the background, on an interpreter
of its own that the next fires do not wait for (up to ``MAX_EVALUATIONS`` per hook).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import re
import tempfile
import threading
import time
import weakref
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Mapping

import attrs

from hookbus import HookCall, Outcome, ParseContext, RunnerRegistration, SpecError, hookimpl
from hookbus.cancel import CancelToken
from hookbus.contract import outcome_from_value
from hookbus.converter import structure
from hookbus.deepjson import CUT, MAX_NESTING, TooDeep, shallow
from hookbus.deepjson import loads as json_loads
from hookbus.errors import SpecErrors, shorten
from hookbus.files import read_capped
from hookbus.jsontext import LONE_SURROGATE
from hookbus.schema import schema_of
from hookbus.workers import ElasticThreads, clamp_wait

__all__ = [
    "DEFAULT_QUERY",
    "MAX_EVALUATIONS",
    "MAX_DEPTH",
    "MAX_POLICY_BYTES",
    "RegoOptions",
    "RegoPolicy",
    "RegoRunner",
    "UNDEFINED",
    "hookbus_register_runners",
]

DEFAULT_QUERY = "data.hooks.decision"
#: A bigger policy file is refused. rego-cpp's parser takes time that grows faster than the
#: policy (here: 10 KiB of rules 0.1 s, 90 KiB 1.3 s), and a load waits for it.
MAX_POLICY_BYTES = 128 * 1024
#: Evaluations of one hook's policy at once, each on an interpreter of its own. Those given
#: up on at their deadline count until they end; a fire that finds them all busy waits for
#: one until its own deadline.
MAX_EVALUATIONS = 8
#: The answer ``explain`` shows for a query that has no value (no rule matched).
UNDEFINED = "undefined"
#: How deep the envelope's containers and the policy's brackets may nest. rego-cpp recurses
#: once per level, in its compiler and in its evaluation, and a few thousand levels
#: overflow a thread's stack, which kills the whole process (5,000 did here, with 8 MB
#: stacks; other systems give threads less). Deeper containers of the envelope reach the
#: policy as ``hookbus.deepjson.CUT``; a deeper policy is refused.
MAX_DEPTH = 128

#: A query is a reference into data, by dotted names.
_QUERY = re.compile(r"data(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


@attrs.frozen
class RegoOptions:
    """The JSON under ``"rego"``, as the core's strict converter structures it."""

    file: str
    query: str = DEFAULT_QUERY


class RegoRunner:
    """Runs ``"rego": {...}`` hooks, in-process."""

    #: ``explain`` shows the file and the query beside the query's value.
    shows_action = True

    def parse(self, key: str, value: object, context: ParseContext) -> RegoPolicy:
        options = structure(value, RegoOptions)
        errors: list[SpecError] = []
        source: bytes | None = None
        try:
            source = _read_policy(options.file, context.hook_dir)
        except SpecError as exc:
            errors.append(exc)
        if not _QUERY.fullmatch(options.query):
            errors.append(SpecError(_query_message(options.query), "$.query"))
        if errors:
            raise SpecErrors(errors)
        assert source is not None
        return RegoPolicy.compile(options, source, context.hook_dir)

    def schema(self, key: str) -> dict[str, Any]:
        """For ``hookbus schema``: the options, as editors should complete them."""
        schema = schema_of(RegoOptions)
        properties = schema["properties"]
        properties["file"].update(
            minLength=1,
            description="The policy: a .rego file in the hook's directory, by its path from there.",
        )
        properties["query"].update(
            pattern=f"^{_QUERY.pattern}$",
            default=DEFAULT_QUERY,
            description="The rule whose value decides: a reference into data.",
        )
        schema["description"] = (
            "Evaluate a Rego policy with the envelope as input; the query's value decides like a "
            "command hook's JSON (a map with 'behavior'; undefined or null: no opinion)."
        )
        return schema

    def run(self, call: HookCall) -> Outcome:
        policy: RegoPolicy = call.hook.options
        return policy.decide(call)


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    register.add("rego", RegoRunner())


# -- the policy file --------------------------------------------------------------------------


def _read_policy(file: str, hook_dir: Path) -> bytes:
    """The bytes of the policy file, which must be a regular file inside the hook's
    directory; SpecError at ``$.file`` saying what to do otherwise."""

    def error(message: str) -> SpecError:
        return SpecError(message, "$.file")

    if not file.strip():
        raise error('name the policy file, e.g. "policy.rego"')
    if "\x00" in file:
        raise error("the file name holds a NUL character")
    shown = shorten(file)
    path = PurePosixPath(file)
    if not path.parts:
        raise error(f'{shown!r} names no file: name the policy file, e.g. "policy.rego"')
    if path.is_absolute() or file.startswith("~"):
        raise error(
            f"{shown} is not a path relative to the hook's directory: keep the policy in the hook's "
            'directory and give its path from there ("policy.rego")'
        )
    if ".." in path.parts:
        raise error(
            f"{shown} leaves the hook's directory ('..'): keep the policy in the hook's directory "
            "(copy it there) and give its path from there"
        )
    full = hook_dir.joinpath(*path.parts)
    # read_capped does not follow a link as the file itself; a directory on the way is
    # followed, so it must lead to a place inside the hook's directory.
    inside = os.path.realpath(hook_dir)
    parent = os.path.realpath(full.parent)
    if parent != inside and not parent.startswith(inside.rstrip(os.sep) + os.sep):
        raise error(
            f"{shown} leads out of the hook's directory through a symbolic link: keep the policy in "
            "the hook's directory (copy it there)"
        )
    try:
        os.lstat(full)
    except (FileNotFoundError, NotADirectoryError):
        raise error(f"{shown} does not exist in the hook's directory") from None
    except OSError as exc:
        raise error(f"{shown} cannot be read: {exc.strerror or exc}") from None
    try:
        data, _ = read_capped(full, MAX_POLICY_BYTES)
    except SpecError as exc:  # a link, not a regular file, over the cap, unreadable
        raise error(f"{shown} {exc.message}") from None
    return data


def _query_message(query: str) -> str:
    shown = shorten(query)
    return (
        f"the query must be a reference into data, such as {DEFAULT_QUERY!r}, got {shown!r}: name the "
        "rule whose value decides (compute anything else in the policy)"
    )


# -- compiling --------------------------------------------------------------------------------


@attrs.frozen(eq=False)
class RegoPolicy:
    """What ``parse`` returns: the options, and the policy compiled, ready to evaluate."""

    options: RegoOptions
    #: The policy's text as read.
    source: str = attrs.field(repr=False)
    #: The compiled policy, as rego-cpp saves it: each further interpreter loads this
    #: instead of compiling the text again (which takes long for a big policy).
    bundle: bytes = attrs.field(repr=False)
    _engines: _Engines = attrs.field(repr=False)

    @classmethod
    def compile(cls, options: RegoOptions, source: bytes, hook_dir: Path) -> RegoPolicy:
        """Compile ``source`` (the text of ``options.file``) and its query; SpecErrors at
        ``$.file`` or ``$.query`` when either does not compile. A policy compiled before for
        this hook, with the same text and query, is used again (a forced reload, a change of
        settings, re-reads every hook)."""
        key = (str(hook_dir), options.file, options.query, source)
        with _COMPILED_LOCK:
            known = _COMPILED.get(key)
        if known is not None:
            return known
        text = _decode(options, source)
        code = _code_only(text)
        _check_nesting(options, text, code)
        try:
            engine, bundle = _compile(options, source)
        except (_NativeError, _native().RegoError) as exc:  # rego-cpp failed, not the policy
            raise SpecErrors([SpecError(f"{shorten(options.file)}: {_report(str(exc))}", "$.file")]) from None
        _check_code(options, text, code)
        policy = cls(options, text, bundle, _Engines(engine))
        with _COMPILED_LOCK:
            _COMPILED[key] = policy
        return policy

    @property
    def interpreters(self) -> int:
        """How many interpreters this policy has now (at most MAX_EVALUATIONS): one per
        evaluation that ran at once with others, kept for the next fires."""
        return self._engines.count

    def decide(self, call: HookCall) -> Outcome:
        """One fire: evaluate on a worker thread, wait for it until the deadline or a cancel."""
        cancel = call.cancel
        if cancel.cancelled:
            return _cancelled(cancel)
        lease = self._engines.take(call.deadline, cancel)
        if lease is None:
            if cancel.cancelled:
                return _cancelled(cancel)
            return Outcome.fail_open(
                f"timed out after {call.hook.spec.timeout} waiting for an interpreter of {self.options.file}: "
                f"all {MAX_EVALUATIONS} are busy (an evaluation given up on at its deadline keeps its interpreter "
                "until it ends)",
                failure="timeout",
            )
        finished = threading.Event()
        try:
            job = _threads().submit(functools.partial(self._evaluate, lease, call))
        except RuntimeError as exc:  # no thread could be started
            if lease == "new":
                self._engines.forfeit()
            else:
                self._engines.give_back(lease)
            return Outcome.fail_open(f"{self.options.file} could not be evaluated: {exc}")
        job.future.add_done_callback(lambda _: finished.set())
        forget = cancel.on_cancel(finished.set)
        try:
            finished.wait(clamp_wait(call.deadline - time.monotonic()))
        finally:
            forget()
        if job.future.done():
            outcome: Outcome = job.future.result()
            return outcome
        if cancel.cancelled:
            return _cancelled(cancel)
        return Outcome.fail_open(
            f"timed out after {call.hook.spec.timeout} evaluating {self.options.file} (the evaluation runs on "
            "to its end in the background)",
            failure="timeout",
        )

    def _evaluate(self, lease: _Engine | Literal["new"], call: HookCall) -> Outcome:
        """On a worker thread: the outcome of one evaluation. The interpreter goes back to
        the pool when it is done, whether anyone still waits for it or not."""
        engine = None if lease == "new" else lease
        try:
            payload = _within_depth(call)
            if payload is not call.payload:
                call.note(f"containers nested deeper than {MAX_DEPTH} levels reached the policy as {CUT!r}")
            if engine is None:
                engine = _Engine.load(self.bundle)
            result = engine.evaluate(payload)
        except _NativeError as exc:
            return Outcome.fail_open(f"{self.options.file}: {exc}")
        finally:
            if engine is not None:
                self._engines.give_back(engine)
            else:
                self._engines.forfeit()
        return self._outcome(result, call.event)

    def _outcome(self, result: _Result, event: str) -> Outcome:
        file, query = self.options.file, self.options.query
        if result.errors:
            messages = list(dict.fromkeys(_with_code(message, code) for message, code in result.errors))
            text = "; ".join(messages[:3]) + (f" (and {len(messages) - 3} more)" if len(messages) > 3 else "")
            if any(code == "timeout_error" for _, code in result.errors):
                # rego-cpp's own budget of statements per evaluation, not settable.
                return Outcome.fail_open(f"{file}: stopped by rego-cpp's statement budget: {text}", failure="timeout")
            return Outcome.fail_open(f"{file}: evaluation failed: {text}")
        output = result.text
        if output == "undefined":  # no rule matched: no opinion
            return Outcome("allow", answer=UNDEFINED)
        try:
            document = json_loads(output)
        except TooDeep:
            message = f"{file}: the value of {query} is nested deeper than {MAX_NESTING:,} levels"
            return Outcome.fail_open(message, failure="unparseable")
        except ValueError:
            # rego-cpp puts some evaluation errors inside the result (a call of an unknown
            # function, a value that is not a term), which makes it no JSON.
            embedded = _embedded_errors(output)
            if embedded:
                return Outcome.fail_open(f"{file}: evaluation failed: {'; '.join(embedded[:3])}")
            message = f"{file}: the result of {query} is not JSON: {shorten(output, 200)}"
            return Outcome.fail_open(message, failure="unparseable")
        results = document if isinstance(document, list) else [document]
        first = results[0] if results and isinstance(results[0], dict) else {}
        expressions = first.get("expressions")
        if len(results) != 1 or not isinstance(expressions, list) or len(expressions) != 1:
            # Not from a plain reference; said, never guessed at.
            message = f"{file}: {query} gave no single value (rego-cpp's result: {shorten(output, 200)})"
            return attrs.evolve(Outcome.fail_open(message, failure="unparseable"), answer=document)
        value = expressions[0]
        if "\\u" in output and _ESCAPED_SURROGATE.search(output):
            value = _scrub_surrogates(value)
        # The value is the outcome's answer (outcome_from_value puts it there), which
        # ``explain`` writes out: only then is it turned into text.
        return outcome_from_value(value, event, what=f"the value of {query} ({file})")


_COMPILED: weakref.WeakValueDictionary[tuple[str, str, str, bytes], RegoPolicy] = weakref.WeakValueDictionary()
_COMPILED_LOCK = threading.Lock()


def _cancelled(cancel: CancelToken) -> Outcome:
    return Outcome.fail_open(cancel.reason or "cancelled", failure="killed")


def _decode(options: RegoOptions, source: bytes) -> str:
    """The policy as text, when hookbus can hand it to rego-cpp whole; SpecErrors otherwise."""
    file = shorten(options.file)
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecErrors([SpecError(f"{file} is not valid UTF-8 (byte {exc.start})", "$.file")]) from None
    if "\x00" in text:
        line, column = _line_column(text, text.index("\x00"))
        message = f"{file}:{line}:{column}: a NUL character, where rego-cpp would see the end of the policy: remove it"
        raise SpecErrors([SpecError(message, "$.file")])
    return text


def _check_nesting(options: RegoOptions, text: str, code: str) -> None:
    """SpecErrors for a policy whose brackets nest deeper than MAX_DEPTH: rego-cpp's
    compiler would overflow its stack and kill the process."""
    depth = 0
    for bracket in _BRACKET.finditer(code):
        depth += 1 if bracket.group() in "([{" else -1
        if depth > MAX_DEPTH:
            line, column = _line_column(text, bracket.start())
            message = (
                f"{shorten(options.file)}:{line}:{column}: brackets nested more than {MAX_DEPTH} levels deep, "
                "past what rego-cpp's compiler can take: flatten it"
            )
            raise SpecErrors([SpecError(message, "$.file")])


def _check_code(options: RegoOptions, text: str, code: str) -> None:
    """SpecErrors for a policy that compiles but must not run (it calls print), or that
    nothing of can answer the query (a mistyped package or rule would allow everything).
    ``code`` is ``text`` with its comments and strings blanked."""
    file = shorten(options.file)
    printing = _PRINT.search(code)
    if printing is not None:
        line, column = _line_column(text, printing.start())
        message = (
            f"{file}:{line}:{column}: print() is not allowed: rego-cpp writes it to this process's standard "
            "output, where hookbus answers its host. Remove it (`hookbus explain` shows the query's value)"
        )
        raise SpecErrors([SpecError(message, "$.file")])
    package = _PACKAGE.search(code)
    if package is None:
        raise SpecErrors([SpecError(f"{file} has no package: start it with `package hooks`", "$.file")])
    name = re.sub(r"\s+", "", package.group(1))
    if _DOTTED.fullmatch(name):
        problem = _unanswerable(options.query, name.split("."), code)
        if problem:
            raise SpecErrors([SpecError(f"{options.query} {problem}", "$.query")])


def _unanswerable(query: str, package: list[str], code: str) -> str | None:
    """Why nothing in a policy of ``package`` (whose code is ``code``) can answer ``query``
    (it would always be undefined, and so always allow), or None when something may."""
    path = query.split(".")[1:]
    shared = min(len(path), len(package))
    if path[:shared] != package[:shared]:
        dotted, wanted = ".".join(package), ".".join(path[:-1]) or path[0]
        return (
            f"reads outside the policy, which is package {dotted}: write `package {wanted}`, "
            f"or set the query to data.{dotted}.<rule>"
        )
    if len(path) <= len(package):
        return None  # the whole package, or a part of it
    rule = path[len(package)]
    if re.search(rf"^[ \t]*(?:default[ \t]+)?{re.escape(rule)}\b", code, re.MULTILINE):
        return None
    return (
        f"is always undefined: the policy defines no rule {rule!r} (an undefined query is no opinion, "
        "so the hook would always allow)"
    )


def _compile(options: RegoOptions, source: bytes) -> tuple[_Engine, bytes]:
    """An interpreter with the policy and the query compiled, and the compiled policy as
    rego-cpp saves it; SpecErrors naming the file and the line and column it has."""
    shared = _native()
    engine = _Engine()
    try:
        shared.rego_add_module(engine.handle, options.file, source.decode("utf-8"))
    except shared.RegoError as exc:
        message = _compile_message(options.file, source, _error_entries(str(exc)), str(exc))
        raise SpecErrors([SpecError(message, "$.file")]) from None
    try:
        shared.rego_set_query(engine.handle, options.query)
        bundle = shared.rego_build(engine.handle)
    except shared.RegoError as exc:
        entries = _error_entries(str(exc))
        if any(entry.source == options.file for entry in entries):
            message = _compile_message(options.file, source, entries, str(exc))
            raise SpecErrors([SpecError(message, "$.file")]) from None
        message = _compile_message(f"the query {options.query}", b"", entries, str(exc))
        raise SpecErrors([SpecError(message, "$.query")]) from None
    engine.bundle = bundle
    if not shared.rego_bundle_ok(bundle):
        found = _node_errors(shared.rego_bundle_node(bundle))
        messages = list(dict.fromkeys(f"{shorten(options.file)}: {message}" for message, _ in found))
        raise SpecErrors([SpecError("; ".join(messages[:3]) or f"{options.file} does not compile", "$.file")])
    return engine, engine.save()


@attrs.define
class _Found:
    """One error of rego-cpp's report."""

    source: str | None = None
    #: In bytes, from the start of ``source``.
    offset: int | None = None
    message: str | None = None


_BLANK = frozenset(b" \t\r\n")
_ATOM = re.compile(rb"[^\s()|]+")
_SIZED = re.compile(rb"(\d+):")
_WHERE = re.compile(rb"\|(\d+)\|(\d+)")


def _error_entries(report: str) -> list[_Found]:
    """The errors of rego-cpp's report of a failed compile: its AST printed as an
    S-expression, ``(error 11:policy.rego|19|1 (errormsg 16:this is unclosed) ...)``, where
    a string is prefixed with its length in bytes and a location is ``|offset|length`` in
    the source named before it."""
    data = report.encode("utf-8", "replace")
    found: list[_Found] = []
    kinds: list[bytes] = []
    position = 0
    while position < len(data):
        if data[position] in _BLANK:
            position += 1
            continue
        if data[position : position + 1] == b"(":
            atom = _ATOM.match(data, position + 1)
            kinds.append(atom.group() if atom else b"")
            if atom and atom.group() == b"error":
                found.append(_Found())
            position = atom.end() if atom else position + 1
            continue
        if data[position : position + 1] == b")":
            if kinds:
                kinds.pop()
            position += 1
            continue
        sized = _SIZED.match(data, position)
        if sized is not None:
            start = sized.end()
            end = start + int(sized.group(1))
            value = data[start:end].decode("utf-8", "replace")
            position = end
            where = _WHERE.match(data, position)
            if where is not None:
                position = where.end()
            parent = kinds[-1] if kinds else b""
            if found and parent == b"error":
                found[-1].source = value
                found[-1].offset = int(where.group(1)) if where else None
            elif found and parent == b"errormsg":
                found[-1].message = value
            continue
        where = _WHERE.match(data, position)
        if where is not None:  # a location in the source named above
            position = where.end()
            continue
        atom = _ATOM.match(data, position)
        position = atom.end() if atom else position + 1
    return found


def _compile_message(name: str, source: bytes, found: list[_Found], report: str) -> str:
    """``policy.rego:2:6: this is unclosed``: each distinct error once (the first three),
    where the report says where it is."""
    shown = shorten(name)
    messages: dict[str, str] = {}
    for entry in found:
        if entry.message is None or entry.message in messages:
            continue
        where = shown
        if entry.source == name and entry.offset is not None and source:
            line, column = _line_column_of_bytes(source, entry.offset)
            where = f"{shown}:{line}:{column}"
        messages[entry.message] = f"{where}: {entry.message}"
    if not messages:
        return f"{shown} does not compile: {shorten(' '.join(report.split()), 300)}"
    listed = list(messages.values())
    more = f" (and {len(listed) - 3} more)" if len(listed) > 3 else ""
    return "; ".join(listed[:3]) + more


def _line_column_of_bytes(source: bytes, offset: int) -> tuple[int, int]:
    """Line and column (in characters), from 1, of a byte offset."""
    offset = max(0, min(offset, len(source)))
    start = source.rfind(b"\n", 0, offset) + 1
    return source.count(b"\n", 0, offset) + 1, len(source[start:offset].decode("utf-8", "replace")) + 1


def _line_column(text: str, index: int) -> tuple[int, int]:
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


# -- the text of a policy ---------------------------------------------------------------------

#: Where a comment, a string or a brace starts.
_LEXEME = re.compile(r'#|\$"|\$`|"|`|\{|\}')
#: The rest of a string after its opening quote, up to and with its closing one.
_STRING_REST = re.compile(r'(?:[^"\\\n]|\\.)*"?')
#: Text of a template string up to its next interpolation or its end.
_TEMPLATE_TEXT = {'"': re.compile(r'(?:[^"\\{\n]|\\.)*'), "`": re.compile(r"[^`{]*")}
#: A call of the print builtin (``internal.print`` is what rego-cpp makes of it).
_PRINT = re.compile(r"(?<![\w.])(?:internal\s*\.\s*)?print\s*\(")
_BRACKET = re.compile(r"[\[\](){}]")
_PACKAGE = re.compile(r"^[ \t]*package[ \t]+(\S[^\n]*?)[ \t]*$", re.MULTILINE)
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def _code_only(source: str) -> str:
    """``source`` with its comments and the text of its strings blanked (each character a
    space, newlines kept), so that a search finds code only, at its own line and column.
    The expressions inside template strings (``$"...{expr}..."``) are code, and stay."""
    out = list(source)
    length = len(source)

    def blank(start: int, end: int) -> None:
        for index in range(start, end):
            if out[index] != "\n":
                out[index] = " "

    #: For each brace open in code: None, or the quote of the template string it is an
    #: interpolation of (its closing brace goes back to the string's text).
    braces: list[str | None] = []
    template: str | None = None
    position = 0
    while position < length:
        if template is not None:
            end = _end_of(_TEMPLATE_TEXT[template], source, position)
            blank(position, end)
            position = end
            if position < length and source[position] == "{":
                braces.append(template)
            template = None  # an interpolation, the closing quote, or an unclosed string's end
            position += 1
            continue
        found = _LEXEME.search(source, position)
        if found is None:
            break
        token, start = found.group(), found.start()
        if token == "#":
            end = source.find("\n", start)
            end = length if end < 0 else end
            blank(start, end)
        elif token == '"':
            end = _end_of(_STRING_REST, source, start + 1)
            blank(start + 1, max(start + 1, end - 1))
        elif token == "`":
            end = source.find("`", start + 1)
            end = length if end < 0 else end + 1
            blank(start + 1, max(start + 1, end - 1))
        elif token in ('$"', "$`"):
            template = token[1]
            end = start + 2
        elif token == "{":
            braces.append(None)
            end = start + 1
        else:  # "}"
            template = braces.pop() if braces else None
            end = start + 1
        position = end
    return "".join(out)


def _end_of(pattern: re.Pattern[str], text: str, position: int) -> int:
    """Where ``pattern`` (one that matches the empty string too) ends, from ``position``."""
    found = pattern.match(text, position)
    return found.end() if found is not None else position


# -- rego-cpp ---------------------------------------------------------------------------------


def _native() -> Any:
    """regopy's ctypes layer over rego-cpp's C API (``regopy.rego_shared``), imported on
    first use: it loads a 21 MB library, which a hookbus without rego hooks never pays for.

    Not regopy's Interpreter and Output classes: Output parses a result twice (and raises
    on the results that hold an error), only takes str (the envelope would be decoded and
    encoded again), and its ``binding()`` aborts the process for an unbound name.
    """
    global _SHARED
    if _SHARED is None:
        _load_cel_first()
        import regopy.rego_shared as shared  # type: ignore[import-untyped]

        _SHARED = shared
    return _SHARED


_SHARED: Any = None


def _load_cel_first() -> None:
    """Load cel-expr-python's library before rego-cpp's, when it is installed (hookbus-cel).

    The two libraries define some of the same C++ symbols of the standard library's
    templates (``std::regex`` internals, among others), and the dynamic linker binds such a
    symbol, process-wide, to whichever library was loaded first. With rego-cpp's first,
    cel-expr-python frees memory it did not allocate on its error path and the process
    aborts ("free(): invalid size"); with cel-expr-python's first, both work. The hook that
    loads first decides the order, so rego makes sure of it here. Loading it costs about
    40 ms, once, in a process that has both plugins installed and a Rego hook.
    """
    import importlib.util

    if importlib.util.find_spec("cel_expr_python") is not None:
        import cel_expr_python.cel  # type: ignore[import-untyped]  # noqa: F401


class _NativeError(Exception):
    """rego-cpp could not do what was asked (not an error of the policy)."""


@attrs.frozen
class _Result:
    """What one evaluation gave: the result as rego-cpp writes it, or its errors."""

    text: str = ""
    #: (message, code), such as ("complete rules must not produce multiple outputs",
    #: "eval_conflict_error").
    errors: tuple[tuple[str, str | None], ...] = ()


class _Engine:
    """One rego-cpp interpreter and its compiled policy. Not safe for two evaluations at
    once: each evaluation takes one of its own (``_Engines``)."""

    def __init__(self) -> None:
        shared = _native()
        handle = shared.rego_new()
        if not handle:
            raise _NativeError("rego-cpp could not make an interpreter")
        self.handle: int = handle
        #: The interpreter and its bundle, in a list the finalizer shares: it frees both,
        #: when the engine is collected and never at exit (a daemon thread may still be
        #: evaluating on it then).
        self._handles: list[int | None] = [handle, None]
        weakref.finalize(self, _free, shared, self._handles).atexit = False
        # At its default level, rego-cpp prints every compile error to the process's stdout,
        # where bridges answer their host. The level is the interpreter's own, set before
        # anything runs on it: the process-wide default (set_default_log_level) does not
        # reach interpreters used on other threads.
        shared.rego_set_log_level(handle, shared.LogLevel.NONE)

    @classmethod
    def load(cls, bundle: bytes) -> _Engine:
        """An interpreter with a policy compiled before (``save``). rego-cpp loads a bundle
        from a file only: a private temporary one, removed at once."""
        shared = _native()
        engine = cls()
        try:
            with tempfile.TemporaryDirectory(prefix="hookbus-rego-") as directory:
                path = os.path.join(directory, "policy.rbb")
                with open(path, "wb") as stream:
                    stream.write(bundle)
                engine.bundle = shared.rego_bundle_load_binary(engine.handle, path)
        except shared.RegoError as exc:
            raise _NativeError(f"rego-cpp could not load the compiled policy: {_report(str(exc))}") from None
        except OSError as exc:  # no room for the temporary file, say
            raise _NativeError(f"the compiled policy could not be loaded: {exc}") from None
        return engine

    @property
    def bundle(self) -> int | None:
        return self._handles[1]

    @bundle.setter
    def bundle(self, value: int) -> None:
        self._handles[1] = value

    def save(self) -> bytes:
        """The compiled policy, as rego-cpp saves a bundle (to a file only: a private
        temporary one, removed at once)."""
        shared = _native()
        try:
            with tempfile.TemporaryDirectory(prefix="hookbus-rego-") as directory:
                path = os.path.join(directory, "policy.rbb")
                shared.rego_bundle_save_binary(self.handle, path, self.bundle)
                with open(path, "rb") as stream:
                    return stream.read()
        except shared.RegoError as exc:
            raise _NativeError(f"rego-cpp could not save the compiled policy: {_report(str(exc))}") from None
        except OSError as exc:
            raise _NativeError(f"the compiled policy could not be saved: {exc}") from None

    def evaluate(self, payload: bytes) -> _Result:
        """The query's result with ``payload`` (JSON) as input. rego-cpp's calls release the
        GIL (ctypes), so other threads run meanwhile."""
        library = _native().rego
        # The bytes as they are: regopy's own function takes str, and would encode it again.
        if library.regoSetInputTerm(self.handle, payload) != 0:
            return _Result(errors=((f"the envelope is no input rego-cpp reads: {self._error()}", None),))
        output = library.regoBundleQuery(self.handle, self.bundle)
        if not output:
            return _Result(errors=((self._error() or "rego-cpp gave no result", None),))
        try:
            if not library.regoOutputOk(output):
                errors = _node_errors(library.regoOutputNode(output))
                return _Result(errors=tuple(errors) or (("unknown error", None),))
            return _Result(text=_output_text(library, output))
        finally:
            library.regoFreeOutput(output)

    def _error(self) -> str:
        shared = _native()
        try:
            return _report(str(shared.rego_get_error(self.handle)))
        except (UnicodeDecodeError, shared.RegoError):
            return ""


def _report(text: str) -> str:
    """rego-cpp's text of an error, on one line and short."""
    return shorten(" ".join(text.split()), 300)


def _free(shared: Any, handles: list[int | None]) -> None:
    handle, bundle = handles
    if bundle:
        shared.rego_free_bundle(bundle)
    if handle:
        shared.rego_free(handle)


def _output_text(library: Any, output: int) -> str:
    size = library.regoOutputJSONSize(output)
    buffer = ctypes.create_string_buffer(size)
    if library.regoOutputJSON(output, buffer, size) != 0:
        raise _NativeError("rego-cpp could not write the result")
    # A builtin can make a string of any bytes (base64.decode): no result is lost for it.
    text: str = buffer.value.decode("utf-8", errors="replace")
    return text


def _node_errors(root: int) -> list[tuple[str, str | None]]:
    """(message, code) of each error under an error node of rego-cpp (an ErrorSeq of
    Errors, each with an ErrorMessage and an ErrorCode)."""
    shared = _native()
    kinds = shared.NodeKind
    library = shared.rego
    if library.regoNodeType(root) == kinds.Error:
        errors = [root]
    else:  # the first twenty are plenty for a message
        errors = [library.regoNodeGet(root, index) for index in range(min(library.regoNodeSize(root), 20))]
    found: list[tuple[str, str | None]] = []
    for error in errors:
        if not error or library.regoNodeType(error) != kinds.Error:
            continue
        message: str | None = None
        code: str | None = None
        for index in range(library.regoNodeSize(error)):
            child = library.regoNodeGet(error, index)
            child_kind = library.regoNodeType(child)
            if child_kind == kinds.ErrorMessage:
                message = _node_value(child)
            elif child_kind == kinds.ErrorCode:
                code = _node_value(child)
        found.append((message or "unknown error", code))
    return found


def _node_value(node: int) -> str | None:
    shared = _native()
    try:
        value: str = shared.rego_node_value(node)
    except (UnicodeDecodeError, shared.RegoError):
        return None
    return value or None


_ERRORMSG = re.compile(rb"\(errormsg (\d+):")


def _embedded_errors(output: str) -> list[str]:
    """The messages of the errors rego-cpp wrote inside a result (``(errormsg 10:Not a
    term)``: the length in bytes, then the message)."""
    data = output.encode("utf-8", "replace")
    found: list[str] = []
    for match in _ERRORMSG.finditer(data):
        message = data[match.end() : match.end() + int(match.group(1))].decode("utf-8", "replace")
        if message not in found:
            found.append(message)
    return found


def _with_code(message: str, code: str | None) -> str:
    return f"{message} ({code})" if code and code not in message else message


# -- interpreters and threads -----------------------------------------------------------------


class _Engines:
    """The interpreters of one compiled policy: one per evaluation running (up to
    MAX_EVALUATIONS), kept for the next fires. The first is the one ``parse`` compiled."""

    def __init__(self, first: _Engine) -> None:
        self._idle: list[_Engine] = [first]
        self._count = 1
        self._changed = threading.Condition(threading.Lock())

    def take(self, deadline: float, cancel: CancelToken) -> _Engine | Literal["new"] | None:
        """An idle interpreter, or ``"new"`` (make one: there may be one more), or None
        when none came free by the deadline or the fire was cancelled."""
        with self._changed:
            if self._idle:
                return self._idle.pop()
            if self._count < MAX_EVALUATIONS:
                self._count += 1
                return "new"

        def wake() -> None:
            with self._changed:
                self._changed.notify_all()

        forget = cancel.on_cancel(wake)
        try:
            with self._changed:
                while True:
                    if self._idle:
                        return self._idle.pop()
                    if self._count < MAX_EVALUATIONS:
                        self._count += 1
                        return "new"
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or cancel.cancelled:
                        return None
                    self._changed.wait(clamp_wait(remaining))
        finally:
            forget()

    @property
    def count(self) -> int:
        with self._changed:
            return self._count

    def give_back(self, engine: _Engine) -> None:
        with self._changed:
            self._idle.append(engine)
            self._changed.notify()

    def forfeit(self) -> None:
        """A ``"new"`` that could not be made."""
        with self._changed:
            self._count -= 1
            self._changed.notify()


_THREADS: ElasticThreads | None = None
_THREADS_LOCK = threading.Lock()


def _threads() -> ElasticThreads:
    """The worker threads of every rego hook of the process: one per evaluation running,
    idle ones ending after 10 s (the core's ElasticThreads)."""
    global _THREADS
    with _THREADS_LOCK:
        if _THREADS is None:
            _THREADS = ElasticThreads("hookbus-rego", idle_seconds=10.0)
        return _THREADS


# -- the envelope and the value ---------------------------------------------------------------


def _within_depth(call: HookCall) -> bytes:
    """The envelope's JSON (``call.payload``) itself when its containers nest MAX_DEPTH
    levels at most; else the same JSON with every container deeper than that replaced by
    CUT."""
    payload = call.payload
    if payload.count(b"[") + payload.count(b"{") <= MAX_DEPTH:
        return payload  # the common case, at C speed: it cannot nest deeper
    # The envelope as a mapping, level by level: its containers, not the bytes of its
    # strings (a file's text, full of brackets), are what costs here.
    level: list[Any] = [call.envelope]
    for _ in range(MAX_DEPTH):
        below: list[Any] = []
        for container in level:
            for value in container.values() if isinstance(container, Mapping) else container:
                if isinstance(value, (Mapping, list, tuple)):
                    below.append(value)
        if not below:
            return payload
        level = below
    value = shallow(payload.decode("utf-8"), MAX_DEPTH)
    # ASCII: a lone surrogate (an escape the envelope may hold) stays an escape.
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _scrub_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate (a ``\\ud800`` escape with no partner, which the
    envelope may hold and the policy return) replaced by U+FFFD, as the core does for a
    command's decision: it is not text, and no record could hold it. Without recursion: the
    value may be nested as deep as the envelope."""

    def fix(item: Any) -> Any:
        if isinstance(item, str):
            return LONE_SURROGATE.sub("\ufffd", item)
        if isinstance(item, dict):
            fixed = {fix(key): element for key, element in item.items()}
            pending.append(fixed)
            return fixed
        if isinstance(item, list):
            pending.append(item)
        return item

    pending: list[Any] = []
    top = fix(value)
    while pending:
        container = pending.pop()
        if isinstance(container, dict):
            for key in container:
                container[key] = fix(container[key])
        else:
            for index, element in enumerate(container):
                container[index] = fix(element)
    return top
