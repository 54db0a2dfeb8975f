"""hookbus-cel: hooks whose action is a CEL expression, decided in-process in microseconds.

Once this distribution is installed, a hook.json may use the spec key ``"cel"``::

    {
      "trigger": {"event": "PreToolUse", "matcher": "bash"},
      "mode": "sync",
      "blocking": true,
      "cel": "tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': 'no rm -rf'} : null"
    }

The expression sees the whole envelope as ``envelope``, each top-level field of the envelope
by its name (``tool_input``, ``tool_name``, ``cwd``...), and ``event``, the event's name.
(``event`` and ``envelope`` are hookbus's: an envelope field of either name is
``envelope.event``.) Its value is read like a command hook's JSON decision
(:func:`hookbus.contract.outcome_from_value`): a map such as ``{'behavior': 'deny',
'reason': '...'}`` decides, ``null`` or ``{}`` is no opinion, and any other value, or an
evaluation error (a field the envelope lacks, say), is the hook's failure, decided by its
``on_error``.

The expression is compiled when the hook loads, once per generation: one that does not
compile is a load error naming ``$.cel`` and the line and column, and the last good version
keeps running.

No process is started, and the cost of one evaluation is bounded, since it holds the GIL
from start to end and could not be abandoned at a deadline:

- the engine stops any evaluation after 10,000 comprehension iterations in all (an
  evaluation error, so ``on_error`` decides);
- before it evaluates, the runner estimates what the expression could cost over this
  envelope (see :func:`estimated_cost`), and one that could take longer than the hook's
  ``timeout`` is not evaluated: the hook fails with ``timeout``;
- containers nested deeper than ``MAX_DEPTH`` levels reach the expression as the string
  ``CUT``: the engine converts values recursively, and an envelope nested thousands of
  levels deep would overflow its stack. An integer past 64 bits reaches it as a double
  (CEL's number for JSON), a lone surrogate as U+FFFD: the engine would fail the whole map
  holding either, and with it every policy reading that map.
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Any, Mapping

import attrs

from hookbus import HookCall, Outcome, ParseContext, RunnerRegistration, SpecError, hookimpl
from hookbus.contract import outcome_from_value

__all__ = [
    "CUT",
    "MAX_DEPTH",
    "MAX_ITERATIONS",
    "CelProgram",
    "CelRunner",
    "EnvelopeSize",
    "compile_expression",
    "estimated_cost",
    "hookbus_register_runners",
    "measure",
]

#: The engine's own budget: an evaluation past this many comprehension iterations, all
#: comprehensions together, stops with an error (cel-expr-python's, not settable).
MAX_ITERATIONS = 10_000
#: Containers deeper than this reach the expression as ``CUT``.
MAX_DEPTH = 128
CUT = "[hookbus: nested too deeply for CEL]"
#: How many bytes of string work the estimate assumes a second buys: ten times below what
#: this machine's measures gave (36 GB/s for a search, 2.7 GB/s for concatenation), so
#: that a slower or busier machine still keeps the timeout.
BYTES_PER_SECOND = 256 * 1024 * 1024
#: Above this, an evaluation is refused whatever the timeout: it bounds memory too (a
#: concatenation in a comprehension keeps what it builds).
MAX_COST_BYTES = 1024 * 1024 * 1024
#: The longest expression: a hook.json is 256 KiB at most anyway; this keeps messages and
#: the estimate sane.
MAX_EXPRESSION_CHARS = 64 * 1024

#: The macros that iterate (CEL's standard ones): each use may multiply the work by the
#: size of what it iterates over. Counted wherever the name is called, inside string
#: literals too: a count too high only makes the estimate more careful.
_COMPREHENSION = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(")
#: Functions that make a list of a string, whose items a comprehension may then iterate.
_LIST_OF_STRING = re.compile(r"\.\s*split\s*\(")
#: A CEL identifier (ASCII only; a field name in backticks is no top-level name).
_IDENTIFIER = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")
#: What cel-cpp says of a name that no variable holds.
_NO_SUCH_NAME = "No value with name"
#: cel-cpp's position in its messages: "<input>:1:29: ".
_POSITION = re.compile(r"<input>:(\d+):(\d+): ")


@attrs.frozen
class CelProgram:
    """A compiled expression and what its cost estimate needs to know of it."""

    source: str
    expression: Any = attrs.field(eq=False, repr=False)
    #: How many comprehensions it holds (at least its deepest nesting).
    comprehensions: int
    #: Whether it can turn a string into a list (``split``).
    splits: bool
    #: Every identifier in its text (string literals' words too): the only names it can
    #: read, so the only fields of the envelope it needs passed.
    names: frozenset[str] = frozenset()


@attrs.frozen
class EnvelopeSize:
    """What the estimate needs of an envelope, measured without recursion."""

    #: List items and map entries, all levels.
    items: int
    #: Characters of strings, keys included.
    chars: int
    #: How deep it is nested (counted up to MAX_DEPTH + 1).
    depth: int
    #: It holds what the engine cannot take as it is: an integer past 64 bits, a lone
    #: surrogate (JSON can spell both; the engine would fail on the whole map holding one).
    unfit: bool = False


def _environment() -> Any:
    """The one CEL environment: the standard library and the strings extension
    (``lowerAscii``, ``split``, ``replace``, ``trim``...), declaring no variables, since
    an envelope's fields are whatever its embedder sent; checking is left to evaluation."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        # Untyped for mypy (no py.typed), and imported here: a bus with no CEL hook does not
        # pay for loading the engine.
        from cel_expr_python import cel  # type: ignore[import-untyped]
        from cel_expr_python.ext import ext_strings  # type: ignore[import-untyped]

        _ENVIRONMENT = cel.NewEnv(extensions=[ext_strings.ExtStrings()])
    return _ENVIRONMENT


_ENVIRONMENT: Any = None


def compile_expression(source: str) -> CelProgram:
    """Compile ``source``; a SpecError (at ``$``, the value under ``"cel"``) that names the
    line and column when it does not compile."""
    if not source.strip():
        raise SpecError("the expression is empty: write one, e.g. \"tool_input.command.contains('rm -rf') ? {'behavior': 'deny', 'reason': '...'} : null\"")
    if len(source) > MAX_EXPRESSION_CHARS:
        raise SpecError(f"the expression is {len(source):,} characters long, more than {MAX_EXPRESSION_CHARS:,}")
    if "\x00" in source:
        raise SpecError("the expression holds a NUL character")
    try:
        expression = _environment().compile(source, disable_check=True)
    except RuntimeError as exc:
        raise SpecError(compile_error_message(str(exc))) from None
    return CelProgram(
        source,
        expression,
        len(_COMPREHENSION.findall(source)),
        _LIST_OF_STRING.search(source) is not None,
        frozenset(_IDENTIFIER.findall(source)),
    )


def compile_error_message(text: str) -> str:
    """cel-cpp's message, as a person reads it: ``line 1, column 29: Syntax error:
    mismatched input '<EOF>' ...`` without its status prefix and its caret drawing."""
    first = text.split("\n | ", 1)[0].strip()
    first = re.sub(r"^[A-Z_]+: (?:ERROR: )?", "", first)
    found = _POSITION.search(first)
    if found is None:
        return f"does not compile: {first}"
    rest = first[found.end():]
    return f"does not compile: line {found.group(1)}, column {found.group(2)}: {rest}"


def measure(envelope: Mapping[str, Any]) -> EnvelopeSize:
    """Count the items, characters and depth of ``envelope``, level by level, and whether it
    holds what the engine cannot take as it is (see ``_fit``)."""
    items = chars = depth = 0
    unfit = False
    level: list[Any] = [envelope]
    while level:
        depth += 1
        if depth > MAX_DEPTH + 1:
            break
        below: list[Any] = []
        for container in level:
            items += len(container)
            is_map = isinstance(container, _MAPS)
            values = container.values() if is_map else container
            if is_map:
                for key in container:
                    chars += len(key) if isinstance(key, str) else 8
                    unfit = unfit or not isinstance(key, str) or _has_surrogate(key)
            for value in values:
                if isinstance(value, str):
                    chars += len(value)
                    unfit = unfit or _has_surrogate(value)
                elif isinstance(value, _CONTAINERS):
                    below.append(value)
                elif type(value) is int:
                    unfit = unfit or not _INT64_MIN <= value <= _INT64_MAX
        level = below
    return EnvelopeSize(items, chars, depth, unfit)


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: What JSON decodes to (and the bus's read-only top level): concrete types, since an
#: isinstance check against the Mapping ABC costs a microsecond a value.
_MAPS = (dict, MappingProxyType)
_CONTAINERS = (dict, MappingProxyType, list, tuple)

_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def estimated_cost(program: CelProgram, size: EnvelopeSize) -> int:
    """An upper estimate of the string work one evaluation could do, in bytes.

    Without a comprehension, each function touches the envelope's strings a bounded number
    of times: the envelope's size. Each comprehension may repeat its body once per item of
    what it iterates over (any list or map of the envelope, or a ``split`` of any of its
    strings), and nested ones multiply, up to the engine's own iteration budget; a body may
    touch every string of the envelope.
    """
    volume = size.chars + size.items + 1
    if program.comprehensions == 0:
        return volume
    width = size.items + (size.chars if program.splits else 0) + 1
    iterations = 1
    for _ in range(program.comprehensions):
        iterations *= width
        if iterations >= MAX_ITERATIONS:
            iterations = MAX_ITERATIONS
            break
    return (iterations + 1) * volume


def _fit(value: Any, depth: int) -> Any:
    """``value`` as the engine takes it: containers below ``depth`` levels become CUT, an
    integer past 64 bits a double (what CEL makes of every JSON number), a lone surrogate
    U+FFFD. Called only on envelopes that need it; recurses MAX_DEPTH levels at most."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _has_surrogate(value) else value
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _INT64_MIN <= value <= _INT64_MAX else float(value)
    if not isinstance(value, (Mapping, list, tuple)):
        return value
    if depth <= 0:
        return CUT
    if isinstance(value, Mapping):
        return {_fit(str(key), 1): _fit(item, depth - 1) for key, item in value.items()}
    return [_fit(item, depth - 1) for item in value]


def _seconds(seconds: float) -> str:
    return f"{seconds:.3g}s"


class CelRunner:
    """Runs ``"cel": "<expression>"`` hooks, in-process."""

    #: ``explain`` shows the expression beside its value.
    shows_action = True

    def parse(self, key: str, value: object, context: ParseContext) -> CelProgram:
        if not isinstance(value, str):
            from hookbus.jsontext import json_type_name

            raise SpecError(f"expected a string holding a CEL expression, got {json_type_name(value)}")
        return compile_expression(value)

    def schema(self, key: str) -> dict[str, Any]:
        """For ``hookbus schema``."""
        return {
            "type": "string",
            "minLength": 1,
            "description": (
                "A CEL expression over the envelope (its fields by name, `envelope`, `event`) whose value "
                "decides like a command hook's JSON: a map with 'behavior', or null for no opinion."
            ),
        }

    def run(self, call: HookCall) -> Outcome:
        program: CelProgram = call.hook.options
        outcome = _evaluate(call, program, program.names)
        if outcome is _UNBOUND:
            # A name was read that was not passed (``names`` is read off the text, and only
            # a field the envelope lacks should get here): evaluated again over every field,
            # so that leaving fields out never changes what the expression decides.
            outcome = _evaluate(call, program, None)
        assert isinstance(outcome, Outcome)
        return outcome


#: ``_evaluate``'s answer when the expression read a name that was left out of its variables.
_UNBOUND = object()


def _evaluate(call: HookCall, program: CelProgram, names: frozenset[str] | None) -> object:
    """The expression's outcome over the envelope's fields in ``names`` (all when None), or
    ``_UNBOUND`` when it read a name that was left out.

    Only the fields the expression names are passed: the engine converts every variable it
    is given, whole, before it evaluates, and an envelope passed twice (as ``envelope`` and
    field by field) cost half an evaluation's time. A field it names but the envelope lacks
    is an error either way.
    """
    envelope = call.envelope
    whole = names is None or "envelope" in names
    fields = envelope if names is None else _named(envelope, names)
    allowed = min(MAX_COST_BYTES, int(max(call.remaining(), 0.0) * BYTES_PER_SECOND))
    size = measure(envelope if whole else fields)
    cost = estimated_cost(program, size)
    if cost > allowed:
        return Outcome.fail_open(
            f"not evaluated: over this envelope ({size.items:,} items, {size.chars:,} characters) the "
            f"expression's {program.comprehensions} comprehension(s) could do about {cost:,} bytes of work, "
            f"more than {allowed:,} in the time left of its timeout ({call.hook.spec.timeout}); "
            "narrow what it iterates over, or raise the timeout",
            failure="timeout",
        )
    if size.depth > MAX_DEPTH or size.unfit:
        if whole:
            envelope = _fit(envelope, MAX_DEPTH)
            fields = envelope if names is None else _named(envelope, names)
        else:
            fields = _fit(fields, MAX_DEPTH)
        if size.depth > MAX_DEPTH:
            call.note(f"containers nested deeper than {MAX_DEPTH} levels reached the expression as {CUT!r}")
    # Plain dicts: the engine does not read a mapping proxy (the bus's envelope) as a map.
    data = dict(fields)
    if whole:
        data["envelope"] = dict(envelope)  # hookbus's names win over fields of the same name
    if names is None or "event" in names:
        data["event"] = call.event
    try:
        result = program.expression.eval(data=data)
        value = result.plain_value()
        # An error's plain value is its message: only a string can be one.
        failed = isinstance(value, str) and result.type().name() == "ERROR"
    except RuntimeError as exc:  # the iteration budget, a value the engine cannot take
        return Outcome.fail_open(f"evaluation failed: {_engine_message(str(exc))}")
    if failed:
        if names is not None and _NO_SUCH_NAME in value:
            return _UNBOUND
        return Outcome.fail_open(f"evaluation failed: {_engine_message(str(value))}", failure="error")
    return outcome_from_value(value, call.event, what="the expression's value")


def _named(envelope: Mapping[str, Any], names: frozenset[str]) -> dict[str, Any]:
    """The fields of ``envelope`` among ``names``, walking the shorter of the two."""
    if len(names) < len(envelope):
        return {name: envelope[name] for name in names if name in envelope}
    return {name: value for name, value in envelope.items() if name in names}


def _engine_message(text: str) -> str:
    """``No value with name "foo" found`` without the status code around it."""
    text = re.sub(r"^[A-Z_]+: ", "", text.strip())
    text = re.sub(r"\s*\[[A-Z_]+\]$", "", text)
    if "Iteration budget exceeded" in text:
        return f"more than {MAX_ITERATIONS:,} comprehension iterations (the engine's budget)"
    return text[:500]


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    register.add("cel", CelRunner())
