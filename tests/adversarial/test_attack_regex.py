"""Attacks on the matcher: a hook's regex meets a field value the model chose.

- promise 3 (emit returns within the matched hooks' own timeouts plus a small bound): the
  matcher fields (tool_name, source, trigger, agent_type) can be model-influenced. With a
  backtracking engine, a matcher like ``(a+)+$`` against a 30-character tool name takes
  over a minute, doubling per character, while holding the GIL: the whole process freezes.
  Matching runs on RE2, linear in the value's length: catastrophic patterns, alone or
  combined with the event's other regexes into one alternation, answer hostile names of up
  to 5,000 characters well within a 2 s bound (backtracking would take longer than the
  universe has existed). What RE2 cannot run in linear time (backreferences, lookaround,
  possessive and atomic groups, conditionals), and patterns past its memory budget, are
  refused at load with a message that says why, and every other hook loads.
- Patterns RE2 would silently read differently from Python's ``re`` (``a{,3}`` is a literal
  there; ``\\10`` an octal escape) are refused instead of changing meaning under the author.
- The matchers that worked before still match the same values; a value that is not valid
  Unicode is matched, not crashed on; a long value is matched but not remembered.

The timed emits run in a child process: a backtracking match holds the GIL, so nothing in
this process (a thread, pytest-timeout's alarm) could stop it; the child is killed instead.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from attackkit import FIGURES, attack
from hookbus import HookBus
from hookbus.errors import SpecError
from hookbus.matching import compile_matcher

Maker = Callable[..., HookBus]
HookWriter = Callable[..., Path]

#: Per emit. RE2 answers these in well under a millisecond; backtracking in hours or more.
EMIT_BOUND_SECONDS = 2.0
#: Starting Python and loading the home, in a child on a busy machine: not what is measured.
LOAD_BOUND_SECONDS = 60.0

#: Near misses: each one makes a backtracking engine try every way to split the run of a's.
CATASTROPHIC = [
    pytest.param(r"(a+)+$", "a", "!", id="nested-plus"),
    pytest.param(r"(a|a)*b", "a", "", id="ambiguous-alternation"),
    pytest.param(r"(.*a){12}", "a", "b", id="repeated-dot-star"),
]
LENGTHS = (30, 1_000, 5_000)

REASON = "(hookbus matches with RE2, which runs in linear time)"

_CHILD = r"""
import json, sys, time
from hookbus import HookBus

request = json.loads(sys.stdin.readline())
with HookBus(request["home"]) as bus:
    index = bus.snapshot.index.get(request["event"])
    ready = {"combined": index is not None and index.any_regex is not None}
    print(json.dumps(ready), flush=True)
    for name in request["names"]:
        started = time.perf_counter()
        decision = bus.emit(request["event"], {"tool_name": name})
        seconds = time.perf_counter() - started
        print(json.dumps({"seconds": seconds, "context": decision.context}), flush=True)
"""


def emits_in_a_child(home: Path, names: list[str], event: str = "PreToolUse") -> tuple[bool, list[str | None]]:
    """Emit ``event`` once per tool name in a child process; whether the event's regexes were
    combined into one alternation, and each emit's context. Fails naming the first emit that
    took longer than EMIT_BOUND_SECONDS."""
    process = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None and process.stdin is not None

    def read(stream: Any) -> None:
        for line in stream:
            lines.put(line)

    reader = threading.Thread(target=read, args=(process.stdout,), daemon=True)
    reader.start()
    slowest = 0.0
    try:
        process.stdin.write(json.dumps({"home": str(home), "event": event, "names": names}) + "\n")
        process.stdin.close()
        try:
            ready = json.loads(lines.get(timeout=LOAD_BOUND_SECONDS))
        except queue.Empty:
            pytest.fail(f"the child did not load the home within {LOAD_BOUND_SECONDS:g} s")
        contexts: list[str | None] = []
        for name in names:
            try:
                result = json.loads(lines.get(timeout=EMIT_BOUND_SECONDS))
            except queue.Empty:
                pytest.fail(
                    f"emit with a {len(name):,}-character tool name ({name[:12]!r}...) did not "
                    f"return within {EMIT_BOUND_SECONDS:g} s: the matcher backtracks"
                )
            if result["context"] is None:  # a fired hook's own run is not the matcher's time
                slowest = max(slowest, result["seconds"])
            contexts.append(result["context"])
    finally:
        process.kill()
        process.wait()
        reader.join(timeout=10)
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
        process.stdout.close()
    assert "Traceback" not in stderr, stderr
    figure = "promise 3: slowest no-match emit, hostile name, us"
    FIGURES[figure] = max(FIGURES[figure], round(slowest * 1e6))
    return bool(ready["combined"]), contexts


def hostile_names(unit: str, tail: str) -> list[str]:
    return [unit * (length - len(tail)) + tail for length in LENGTHS]


# -- promise 3: catastrophic patterns, hostile names ----------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("pattern", "unit", "tail"), CATASTROPHIC)
def test_a_catastrophic_matcher_answers_hostile_names_in_linear_time(
    pattern: str, unit: str, tail: str, home: Path, write_hook: HookWriter
) -> None:
    with attack(3, f"matcher {pattern} against hostile tool names of 30-5,000 characters"):
        write_hook("evil", matcher=pattern, mode="sync", command="echo evil")
        _, contexts = emits_in_a_child(home, hostile_names(unit, tail))
        assert contexts == [None] * len(LENGTHS)  # near misses: nothing fires


@pytest.mark.timeout(240)
def test_a_catastrophic_matcher_still_matches_what_it_should(home: Path, write_hook: HookWriter) -> None:
    with attack(3, "matcher (a+)+$: a 5,000-character run of a's matches, and quickly"):
        write_hook("evil", matcher=r"(a+)+$", mode="sync", command="echo evil")
        _, contexts = emits_in_a_child(home, ["a" * 5_000, "a" * 4_999 + "!", "a"])
        assert contexts == ["evil", None, "evil"]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("pattern", "unit", "tail"), CATASTROPHIC)
def test_a_catastrophic_matcher_combined_with_other_regexes(
    pattern: str, unit: str, tail: str, home: Path, write_hook: HookWriter
) -> None:
    with attack(3, f"matcher {pattern} in the event's combined alternation, hostile names"):
        write_hook("evil", matcher=pattern, mode="sync", command="echo evil")
        write_hook("mcp", matcher="mcp__.*", mode="sync", command="echo mcp")
        write_hook("files", matcher="(read|write)_file", mode="sync", command="echo files")
        write_hook("literal", matcher="bash", mode="sync", command="echo literal")
        names = [*hostile_names(unit, tail), "mcp__github__create_issue", "write_file", "bash"]
        combined, contexts = emits_in_a_child(home, names)
        assert combined, "the regexes of the event were not combined into one alternation"
        assert contexts == [None] * len(LENGTHS) + ["mcp", "files", "literal"]


@pytest.mark.timeout(240)
def test_a_flood_of_distinct_hostile_names_misses_the_memo_every_time(
    home: Path, write_hook: HookWriter
) -> None:
    """Each distinct value is matched once, then remembered: an attacker who never repeats a
    tool name makes every emit run the regexes."""
    with attack(3, "200 distinct 5,000-character names against (a+)+$ and (.*a){12}"):
        write_hook("evil", matcher=r"(a+)+$", mode="sync", command="echo evil")
        write_hook("worse", matcher=r"(.*a){12}", mode="sync", command="echo worse")
        names = ["a" * (4_800 + number) + "!" for number in range(200)]
        combined, contexts = emits_in_a_child(home, names)
        assert combined
        assert contexts == [None] * len(names)


# -- what RE2 cannot run, refused at load -----------------------------------------------------

UNSUPPORTED = [
    pytest.param(r"(a)\1", "backreferences are not supported", id="backreference"),
    pytest.param(r"(?P<n>a)(?P=n)", "backreferences are not supported", id="named-backreference"),
    pytest.param(r"(?<n>a)\k<n>", "backreferences are not supported", id="k-backreference"),
    pytest.param(r"(x)\10", "backreferences are not supported", id="two-digit-backreference"),
    pytest.param(r"(?=mcp)\w+", "lookahead is not supported", id="lookahead"),
    pytest.param(r"(?!bash)\w+", "lookahead is not supported", id="negative-lookahead"),
    pytest.param(r"\w+(?<=_file)", "lookbehind is not supported", id="lookbehind"),
    pytest.param(r"\w+(?<!_file)", "lookbehind is not supported", id="negative-lookbehind"),
    pytest.param(r"a++b", "possessive quantifiers (++) are not supported", id="possessive"),
    pytest.param(r"(?>a+)b", "atomic groups are not supported", id="atomic-group"),
    pytest.param(r"(a)?(?(1)b|c)", "conditionals are not supported", id="conditional"),
    pytest.param(r"(a(?R)?b)", "recursion and subroutine calls are not supported", id="recursion"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("pattern", "expected"), UNSUPPORTED)
def test_what_re2_cannot_run_is_refused_at_load(
    pattern: str, expected: str, write_hook: HookWriter, make_bus: Maker
) -> None:
    with attack(3, f"matcher {pattern} (not linear-time) is refused at load; the others load"):
        write_hook("bad", matcher=pattern, mode="sync", command="echo bad")
        write_hook("regex", matcher="mcp__.*", mode="sync", command="echo regex")
        write_hook("literal", matcher="bash", mode="sync", command="echo literal")
        bus = make_bus()
        assert sorted(bus.snapshot.hooks) == ["literal", "regex"]
        [problem] = bus.problems
        text = str(problem)
        assert text.startswith(f"hooks/bad/hook.json: invalid matcher regex {pattern!r}: {expected}"), text
        assert REASON in text and text.endswith("@ $.trigger.matcher"), text
        assert bus.emit("PreToolUse", {"tool_name": "mcp__x"}).context == "regex"
        assert bus.emit("PreToolUse", {"tool_name": "bash"}).context == "literal"


@pytest.mark.timeout(120)
def test_hookbus_validate_names_the_refused_matcher(home: Path, write_hook: HookWriter) -> None:
    with attack(3, "hookbus validate: exit 1 naming the file whose matcher has a backreference"):
        write_hook("bad", matcher=r"(a)\1", command="true")
        write_hook("good", matcher="(read|write)_file", command="true")
        result = subprocess.run(
            [sys.executable, "-m", "hookbus", "validate", "--home", str(home)],
            capture_output=True,
            text=True,
            timeout=100,
            check=False,
        )
        assert result.returncode == 1, result
        output = result.stdout + result.stderr
        assert (
            r"hooks/bad/hook.json: invalid matcher regex '(a)\\1': backreferences are not supported "
            f"{REASON}: rewrite it without one @ $.trigger.matcher"
        ) in output, output
        assert "ok  hooks/good" in output and "Traceback" not in output, output


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "pattern",
    [pytest.param(".{1000}" * 100, id="dot-repeats"), pytest.param(r"\pL{1000}", id="letter-class-repeat")],
)
def test_a_pattern_past_re2s_memory_budget_is_refused_at_load(
    pattern: str, write_hook: HookWriter, make_bus: Maker
) -> None:
    with attack(3, "a matcher too big for RE2's memory budget is refused at load"):
        write_hook("huge", matcher=pattern, mode="sync", command="echo huge")
        write_hook("regex", matcher="mcp__.*", mode="sync", command="echo regex")
        bus = make_bus()
        assert sorted(bus.snapshot.hooks) == ["regex"]
        [problem] = bus.problems
        text = str(problem)
        assert text.startswith("hooks/huge/hook.json: invalid matcher regex "), text
        assert "too big for RE2's memory budget" in text and text.endswith("@ $.trigger.matcher"), text
        assert bus.emit("PreToolUse", {"tool_name": "mcp__x"}).context == "regex"


# -- what RE2 would read differently, refused rather than changed -----------------------------

MISREAD = [
    pytest.param("a{,3}", "{,3} would be read as literal text: write {0,3}", id="brace-without-minimum"),
    pytest.param("a{,}", "{,} would be read as literal text: write *", id="brace-empty"),
    pytest.param("a{01}", "{01} would be read as literal text: write {1}", id="brace-leading-zero"),
    pytest.param("a{4294967296}", "{4294967296}: repeat counts go up to 1000", id="brace-huge"),
    pytest.param("a{2,1001}", "{2,1001}: repeat counts go up to 1000", id="brace-over-1000"),
    pytest.param(r"(a{100}){11}", "repeat counts go up to 1000", id="nested-repeats-over-1000"),
    pytest.param(r"bash\Z", r"\Z is not supported", id="backslash-Z"),
]


@pytest.mark.parametrize(("pattern", "expected"), MISREAD)
def test_what_re2_would_read_differently_is_refused(pattern: str, expected: str) -> None:
    with pytest.raises(SpecError) as raised:
        compile_matcher(pattern)
    assert raised.value.location == "$.trigger.matcher"
    assert raised.value.message.startswith(f"invalid matcher regex {pattern!r}: "), raised.value.message
    assert expected in raised.value.message, raised.value.message


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("(", "missing ): a ( is never closed"),
        ("write_(file", "missing ): a ( is never closed"),
        ("a)", "unexpected ): a ) closes no group"),
        ("[", "missing ]: a [ is never closed"),
        ("*a", "nothing to repeat before *"),
        ("a**", "** repeats a repetition"),
        ("\\", "trailing \\"),
        ("a{2,1}", "invalid repetition size: {2,1}"),
        ("(?x)a b", "the flag x is not supported: RE2 knows i, m, s and U"),
        ("(?#note)bash", "comments (?#...) are not supported"),
        (r"\u00e9", r"\u is not supported: write the character itself, or \x{00e9}"),
        (r"\G", r"the escape \G is not supported"),
        ("[b-a]", "invalid character class range: b-a"),
        ("(" * 5000 + "a" + ")" * 4999, "missing ): a ( is never closed"),
        ("(?\ud800)", "not valid Unicode"),
    ],
)
def test_regex_errors_in_plain_words(pattern: str, expected: str) -> None:
    with pytest.raises(SpecError) as raised:
        compile_matcher(pattern)
    message = raised.value.message
    assert message.startswith("invalid matcher regex "), message
    assert expected in message, message
    assert len(message) < 400, "a long pattern is shortened in the message"


# -- the matchers that worked still work ------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("mcp__.*", "mcp__github__create_issue", True),
        ("mcp__.*", "xmcp__a", False),
        ("(read|write)_file", "write_file", True),
        ("(read|write)_file", "write_files", False),
        ("a|b.*", "bcd", True),
        ("a|b.*", "ab", False),
        ("[a-z_]+", "edit_file", True),
        ("[a-z_]+", "Edit", False),
        (".*", "", True),
        ("^bash$", "bash", True),
        ("(?i)bash", "BASH", True),
        ("(?P<tool>read|write)_(?P<what>file)", "read_file", True),
        (r"tool\d+", "tool42", True),
        (r"\w+-\w+", "a-b", True),
        (r"a{2,3}", "aaa", True),
        (r"a{2,3}", "aaaa", False),
        (r"a{1,}", "aaaa", True),
        ("a{x}", "a{x}", True),
        (r"\0", "\x00", True),
        (r"\101", "A", True),
        ("(?s).", "\n", True),
        (".", "\n", False),
        (".", "é", True),
        ("é+", "ééé", True),
        (".", "\U0001f600", True),
        ("auto|manual", "manual", True),
        ("write_file|edit_file", "write_file_x", False),
    ],
)
def test_matchers_that_worked_still_match(pattern: str, value: str, matches: bool) -> None:
    assert compile_matcher(pattern).matches(value) is matches


def test_a_field_value_that_is_not_valid_unicode_is_matched_not_crashed_on(
    write_hook: HookWriter, make_bus: Maker
) -> None:
    """A lone surrogate (JSON's "\\ud800") in a tool name cannot be encoded to UTF-8 as is;
    the emit must still answer, and ``.*`` still means anything."""
    write_hook("any", matcher="mcp__.*", mode="sync", command="echo any")
    write_hook("other", matcher="(read|write)_file", mode="sync", command="echo other")
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "mcp__\ud800"}).context == "any"
    assert bus.emit("PreToolUse", {"tool_name": "\udfff_file"}).behavior == "allow"


def test_group_names_repeated_across_hooks_keep_each_hooks_meaning(
    write_hook: HookWriter, make_bus: Maker
) -> None:
    write_hook("a", matcher="(?P<x>read)_file", mode="sync", command="echo a")
    write_hook("b", matcher="(?P<x>write)_(?i:FILE)", mode="sync", command="echo b")
    write_hook("c", matcher="(?i)edit", mode="sync", command="echo c")
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "read_file"}).context == "a"
    assert bus.emit("PreToolUse", {"tool_name": "write_File"}).context == "b"
    assert bus.emit("PreToolUse", {"tool_name": "EDIT"}).context == "c"
    # The (?i) of one hook does not leak into another's part of the alternation.
    assert bus.emit("PreToolUse", {"tool_name": "READ_file"}).behavior == "allow"


def test_an_unclosed_quote_does_not_swallow_the_other_regexes(write_hook: HookWriter, make_bus: Maker) -> None:
    r"""``\Q`` quotes to the end of the pattern when no ``\E`` closes it: in a combined
    alternation it would swallow the hooks after it, so matching must not rely on one."""
    write_hook("a", matcher=r"\Qa.b", mode="sync", command="echo a")
    write_hook("b", matcher="mcp__.*", mode="sync", command="echo b")
    bus = make_bus()
    assert bus.emit("PreToolUse", {"tool_name": "a.b"}).context == "a"
    assert bus.emit("PreToolUse", {"tool_name": "axb"}).behavior == "allow"
    assert bus.emit("PreToolUse", {"tool_name": "mcp__x"}).context == "b"


def test_without_google_re2_regex_hooks_are_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, write_hook: HookWriter, make_bus: Maker
) -> None:
    """A broken install (google-re2 missing, or another package's ``re2`` module in its
    place) refuses the regex hooks, saying what to install; the others load."""
    from hookbus import matching

    monkeypatch.setitem(sys.modules, "re2", None)  # makes `import re2` fail
    matching._engine.cache_clear()
    try:
        write_hook("regex", matcher="mcp__.*", mode="sync", command="echo regex")
        write_hook("literal", matcher="bash", mode="sync", command="echo literal")
        bus = make_bus()
        assert sorted(bus.snapshot.hooks) == ["literal"]
        [problem] = bus.problems
        assert str(problem) == (
            "hooks/regex/hook.json: invalid matcher regex 'mcp__.*': regex matchers need the "
            "google-re2 package, which is missing or hidden by another module named re2: "
            "pip install google-re2 @ $.trigger.matcher"
        )
        assert bus.emit("PreToolUse", {"tool_name": "bash"}).context == "literal"
    finally:
        matching._engine.cache_clear()


def test_long_field_values_are_matched_but_not_remembered(write_hook: HookWriter, make_bus: Maker) -> None:
    """4,096 remembered values of megabytes each would be gigabytes: only short values,
    which real tool names are, are kept."""
    from hookbus.registry import MEMO_VALUE_LIMIT

    write_hook("any", matcher="mcp__.*", mode="sync", command="echo any")
    bus = make_bus()
    index = bus.snapshot.index["PreToolUse"]
    long_name = "mcp__" + "x" * MEMO_VALUE_LIMIT
    assert bus.emit("PreToolUse", {"tool_name": long_name}).context == "any"
    assert bus.emit("PreToolUse", {"tool_name": long_name}).context == "any"
    assert bus.emit("PreToolUse", {"tool_name": "mcp__x"}).context == "any"
    assert list(index._memo) == ["mcp__x"]
