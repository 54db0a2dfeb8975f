"""hookbus.deepjson: JSON as json reads and writes it, at any depth up to MAX_NESTING."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookbus import deepjson
from hookbus.deepjson import CUT, MAX_NESTING, TooDeep, dumps_strict, loads, shallow
from hookbus.jsontext import strict_json

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text())
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4), max_leaves=30)


def nest(depth: int, inner: str = "") -> str:
    return "[" * depth + inner + "]" * depth


@given(documents)
@settings(max_examples=300)
def test_any_document_reads_and_writes_as_json_does(document: Any) -> None:
    for text in (json.dumps(document), json.dumps(document, indent=1), json.dumps(document, ensure_ascii=False)):
        assert deepjson._parse(text, json.loads, None, None)[0] == json.loads(text)
    assert dumps_strict(document, (",", ":")) == strict_json(document, separators=(",", ":")).decode()
    assert dumps_strict(document, (", ", ": ")) == strict_json(document).decode()


@given(documents)
@settings(max_examples=100)
def test_a_document_below_a_thousand_levels_still_reads_the_same(document: Any) -> None:
    text = nest(1_500, json.dumps(document))
    value = loads(text)
    for _ in range(1_500):
        [value] = value
    assert value == document


@pytest.mark.parametrize("depth", [1, 999, 1_000, 1_001, 5_000, MAX_NESTING])
def test_every_depth_up_to_the_bound_reads_and_writes(depth: int) -> None:
    text = nest(depth, '{"k":"v\\u00e9"}')[1:-1] if depth > 1 else '{"k":"v\\u00e9"}'
    value = loads(text)
    assert dumps_strict(value, (",", ":")) == text.replace("\\u00e9", "é")


@pytest.mark.parametrize("text", [nest(MAX_NESTING + 1), nest(MAX_NESTING, "{}"), '{"a":' * (MAX_NESTING + 1) + "1" + "}" * (MAX_NESTING + 1)])
def test_one_level_past_the_bound_is_too_deep_exactly(text: str) -> None:
    with pytest.raises(TooDeep, match="nested deeper than 10,000 levels"):
        loads(text)


@pytest.mark.parametrize(
    "text", ["", " ", "[1,]", '{"a" 1}', "[1 2]", '{"a":1,}', "[", '{"a":1} x', "nul", '{"a":1', "{1:2}", '[{"a" 1}]', '{"a":"\\x"}']
)
def test_what_is_not_json_is_refused_with_jsons_own_message(text: str) -> None:
    with pytest.raises(ValueError) as ours:
        deepjson._parse(text, json.loads, None, None)
    with pytest.raises(ValueError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_nan_is_read_or_refused_as_asked() -> None:
    value = loads(nest(2_000, "NaN"), allow_nan=True)
    for _ in range(2_000):
        [value] = value
    assert value != value
    with pytest.raises(ValueError, match="NaN is not JSON"):
        loads(nest(2_000, "NaN"), allow_nan=False)


def test_shallow_keeps_the_fields_a_matcher_reads_at_any_depth() -> None:
    text = '{"hook_event_name":"PreToolUse","tool_input":' + nest(200_000) + ',"tool_name":"Bash","n":1.5,"e":{}}'
    assert shallow(text, 1) == {"hook_event_name": "PreToolUse", "tool_input": CUT, "tool_name": "Bash", "n": 1.5, "e": CUT}
    assert shallow('{"a":{"b":[1,{"c":2}],"d":3}}', 2) == {"a": {"b": CUT, "d": 3}}


def test_strict_json_writes_deep_values_with_its_own_spelling() -> None:
    deep: Any = [float("nan"), "\ud800"]
    for _ in range(3_000):
        deep = [deep]
    text = strict_json(deep, separators=(",", ":"))
    assert text.endswith(b'["nan","\\ud800"]' + b"]" * 3_000)


def test_a_cycle_is_a_cycle_and_a_shared_value_is_not() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_strict(cycle, (",", ":"))
    shared = [1]
    assert dumps_strict({"a": shared, "b": shared}, (",", ":")) == '{"a":[1],"b":[1]}'


def test_writing_past_the_bound_is_too_deep() -> None:
    deep: Any = {}
    for _ in range(MAX_NESTING):
        deep = {"a": deep}
    with pytest.raises(TooDeep):
        dumps_strict(deep, (",", ":"))
