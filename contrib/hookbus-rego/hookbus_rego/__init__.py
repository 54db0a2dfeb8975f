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

import functools
import json
import os
import re
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
from hookbus.schema import schema_of
from hookbus.workers import clamp_wait
from hookbus_rego.limits import MAX_DEPTH, MAX_EVALUATIONS, MAX_POLICY_BYTES
from hookbus_rego.native import (
    _embedded_errors,
    _Engine,
    _Engines,
    _native,
    _NativeError,
    _node_errors,
    _report,
    _Result,
    _threads,
    _with_code,
)
from hookbus_rego.policytext import _check_code, _check_nesting, _code_only, _compile_message, _decode, _error_entries

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
#: The answer ``explain`` shows for a query that has no value (no rule matched).
UNDEFINED = "undefined"

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
        # outcome_from_value replaces lone surrogates (the envelope may hold them, and the
        # policy hand them back) and keeps the value as the outcome's answer for ``explain``.
        return outcome_from_value(expressions[0], event, what=f"the value of {query} ({file})")


_COMPILED: weakref.WeakValueDictionary[tuple[str, str, str, bytes], RegoPolicy] = weakref.WeakValueDictionary()
_COMPILED_LOCK = threading.Lock()


def _cancelled(cancel: CancelToken) -> Outcome:
    return Outcome.fail_open(cancel.reason or "cancelled", failure="killed")


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
