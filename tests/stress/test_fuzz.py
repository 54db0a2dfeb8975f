"""Fuzzed hook specs and fuzzed decision outputs.

Specs. Every byte prefix of each valid example (contrib/hooks/*/hook.json and the spec's own
examples, as hook.json and as a hook.yaml form), then documents hypothesis generates: valid
ones (they load, every field round-trips) and mutations (values of the wrong JSON type,
unknown fields, nesting up to 10,000 deep, NaN/Infinity, duplicate keys, invalid UTF-8,
files over the 256 KiB cap, random bytes, broken semantics). Whatever the file holds,
loading never raises; a hook is either absent, with problems that start with its path, or
exactly what its file says (never a part of it); a hook whose file turns bad keeps its last
good version whole; the valid hooks next to the bad ones still fire; and ``hookbus
validate`` names every bad file, without a traceback.

Decisions. Any bytes into ``outcome_from_command`` (exit codes -9, 0, 1, 2, 126, 127 and
random ones) and any text into ``outcome_from_final_text`` give an Outcome: one of the four
behaviors, a modify with an object, reasons and contexts capped at 10,000 characters plus
the marker, or allow with a recorded error. Real command hooks printing those bytes get that
outcome recorded.

The library bugs this fuzzing found are kept at the end of the file as regression tests,
each with its minimal reproduction: integers over 4,300 digits, non-string YAML keys, null
``id``/``timeout``, non-ASCII digits in durations, lone surrogates, regexes nested thousands
deep or with huge repeat counts, NUL bytes in commands, timeouts over ~292 years, NaN in a
decision, non-UTF-8 directory names and truncated YAML.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from hookbus import HookBus
from hookbus.dialects.claude_output import FOREIGN_KEYS
from hookbus.contract import outcome_from_command, outcome_from_final_text, outcome_from_text
from hookbus.decision import BEHAVIORS, Outcome
from hookbus.events import EVENT_NAMES, EVENTS
from hookbus.errors import SpecError
from hookbus.files import MAX_SPEC_BYTES
from hookbus.loader import failing_problems
from hookbus.matching import compile_matcher
from hookbus.runners import KNOWN_PROVIDERS
from stresskit import FIGURES, scale

# Hypothesis keeps caches (constants, unicode tables) even without a database: keep them in a
# temporary directory, removed at exit, so the suite leaves nothing behind.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="hookbus-fuzz-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)
atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)

ROOT = Path(__file__).resolve().parents[2]
CAP = MAX_SPEC_BYTES
CONTEXT_CAP = 10_000
TIMEOUT = scale(180, 1800)

SETTINGS = settings(
    database=None,  # leave nothing behind
    derandomize=True,  # the same examples on every run, in CI too
    deadline=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)


def sized(fast: int, full: int) -> settings:
    return settings(SETTINGS, max_examples=scale(fast, full))


# -- the contract, written out independently of the loader ------------------------------------

FIELDS = ("id", "name", "enabled", "trigger", "mode", "blocking", "cwd", "timeout", "created_by", "dialect", "env")
STRING_FIELDS = ("id", "name", "mode", "cwd", "timeout", "created_by")
BOOL_FIELDS = ("enabled", "blocking")
GENERATED_ACTIONS = ("command", "prompt", "workflow")
# Go-style durations, ASCII digits only (the published schema's digits).
DURATION = re.compile(r"(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|ms|s|m|h))+")
DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)")
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_DURATION_SECONDS = 9223372036.0  # 2562047h47m16s, about 292 years: Go's limit, to the second


@functools.cache
def runner_keys() -> frozenset[str]:
    """The action keys the installed runner plugins provide."""
    with tempfile.TemporaryDirectory(prefix="hookbus-fuzz-") as directory:
        (Path(directory) / "hooks").mkdir()
        with quiet(), HookBus(directory) as bus:
            return frozenset(bus.runners.keys())


@functools.cache
def reserved_keys() -> frozenset[str]:
    """Every key that means something somewhere in a spec: generated unknown keys avoid them."""
    nested = {"event", "matcher", "steps", "description", "bash", "prompt", "name", "timeout"}
    return frozenset(FIELDS) | frozenset(KNOWN_PROVIDERS) | runner_keys() | nested


def duration_ok(value: object) -> bool:
    if type(value) is not str or not DURATION.fullmatch(value):
        return False
    seconds = sum(float(n) * UNIT_SECONDS[u] for n, u in DURATION_PART.findall(value))
    return 0 < seconds <= MAX_DURATION_SECONDS


def workflow_ok(value: object) -> bool:
    if type(value) is not dict or not set(value) <= {"steps", "description"}:
        return False
    if "description" in value and type(value["description"]) is not str:
        return False
    steps = value.get("steps")
    if type(steps) is not list or not steps:
        return False
    for step in steps:
        if type(step) is not dict or not set(step) <= {"bash", "prompt", "name", "timeout"}:
            return False
        kinds = [kind for kind in ("bash", "prompt") if kind in step]
        if len(kinds) != 1:
            return False
        text = step[kinds[0]]
        if type(text) is not str or not text.strip():
            return False
        if kinds[0] == "bash" and "\x00" in text:
            return False
        if "name" in step and type(step["name"]) is not str:
            return False
        if "timeout" in step and not duration_ok(step["timeout"]):
            return False
    return True


def oracle_valid(doc: Any, hook_id: str) -> bool:
    """Whether the contract (the spec, the published schema) calls this document a valid
    hook in directory ``hook_id`` of a home without config/workflow.json."""
    if type(doc) is not dict:
        return False
    actions = []
    for key in doc:
        if key in FIELDS:
            continue
        if key in runner_keys() or key in KNOWN_PROVIDERS:
            actions.append(key)
            continue
        return False  # an unknown field
    if len(actions) != 1:
        return False
    action = actions[0]
    if action == "workflow_id":
        return False  # names a workflow, and this home defines none
    assert action in GENERATED_ACTIONS, f"the oracle does not judge {action!r}"
    trigger = doc.get("trigger")
    if type(trigger) is not dict or not set(trigger) <= {"event", "matcher"}:
        return False
    event, matcher = trigger.get("event"), trigger.get("matcher", "")
    if type(event) is not str or event not in EVENTS or type(matcher) is not str:
        return False
    if EVENTS[event].matcher_field is None:
        if matcher not in ("", "*"):
            return False
    elif matcher not in ("", "*"):
        # Which regexes hookbus accepts (RE2's syntax, less what RE2 would read differently
        # from Python's re) is tested on its own in tests/adversarial/test_attack_regex.py.
        try:
            compile_matcher(matcher)
        except SpecError:
            return False
    if any(field in doc and type(doc[field]) is not str for field in STRING_FIELDS):
        return False
    if any(field in doc and type(doc[field]) is not bool for field in BOOL_FIELDS):
        return False
    if "id" in doc and doc["id"] != hook_id:
        return False
    mode = doc.get("mode", "async")
    if mode not in ("sync", "async"):
        return False
    if doc.get("blocking") is True and (mode != "sync" or not EVENTS[event].can_block):
        return False
    if "timeout" in doc and not duration_ok(doc["timeout"]):
        return False
    if "\x00" in doc.get("cwd", ""):
        return False
    if "dialect" in doc and doc["dialect"] != "claude-code":
        return False
    if "env" in doc and not env_ok(doc["env"]):
        return False
    value = doc[action]
    if action == "workflow":
        return workflow_ok(value)
    return type(value) is str and bool(value.strip()) and (action != "command" or "\x00" not in value)


def env_ok(env: Any) -> bool:
    """The spec's ``env``: an object of variable names (no "=", no NUL) to strings (no NUL)."""
    return type(env) is dict and all(
        name and "=" not in name and "\x00" not in name and type(value) is str and "\x00" not in value
        for name, value in env.items()
    )


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _StrictYAML(yaml.SafeLoader):
    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        try:
            if len(set(keys)) != len(keys):
                raise yaml.constructor.ConstructorError(None, None, "duplicate key", node.start_mark)
        except TypeError:
            pass  # SafeLoader reports unhashable keys itself
        return super().construct_mapping(node, deep=deep)


def decode_strictly(data: bytes, kind: str) -> tuple[bool, Any]:
    """(True, document) when ``data`` is a document the contract can read at all: UTF-8
    under the cap, no duplicate keys, no NaN, string keys only, no lone surrogate, and a
    hook.yaml ends with a newline (a YAML document cut at a line's middle may parse)."""
    if len(data) > CAP:
        return False, None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False, None
    if kind == "yaml" and text and not text.endswith("\n"):
        return False, None
    try:
        if kind == "json":
            doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
        else:
            doc = yaml.load(text, Loader=_StrictYAML)  # noqa: S506 - a SafeLoader subclass
    except (ValueError, RecursionError, yaml.YAMLError):
        return False, None
    if _nonstring_keys(doc, set()) or _has_surrogate(doc):
        return False, None
    return True, doc


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= char <= "\udfff" for char in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


# -- homes, files and checks -----------------------------------------------------------------

ANCHOR_ID = "anchor"
ANCHOR_EVENT = "UserPromptSubmit"
ANCHOR_SPEC = json.dumps({"trigger": {"event": ANCHOR_EVENT}, "mode": "sync", "command": "echo anchor"}).encode()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Skipped files are logged as warnings: thousands of them here. Errors still show."""
    logger = logging.getLogger("hookbus")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def fuzz_home() -> Iterator[Path]:
    """A throwaway home (hypothesis examples cannot share pytest's tmp_path)."""
    with tempfile.TemporaryDirectory(prefix="hookbus-fuzz-") as directory:
        home = Path(directory) / "home"
        (home / "hooks").mkdir(parents=True)
        yield home


def make_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    return home


def write_file(home: Path, hook_id: str, name: str, data: bytes) -> Path:
    directory = home / "hooks" / hook_id
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    temp = directory / f".{name}.tmp"
    temp.write_bytes(data)
    os.replace(temp, path)
    return path


def write_anchor(home: Path) -> None:
    write_file(home, ANCHOR_ID, "hook.json", ANCHOR_SPEC)


def assert_anchor_fires(bus: HookBus) -> None:
    """The valid hook next to the bad ones fires (only it listens to ANCHOR_EVENT)."""
    decision = bus.emit(ANCHOR_EVENT, {"prompt": "fuzz"})
    assert decision.behavior == "context" and decision.context == "anchor", decision


def assert_anchor_runs(bus: HookBus) -> None:
    """The anchor fires, run by id: for homes where generated valid hooks share its event."""
    record = bus.trigger(ANCHOR_ID, {"prompt": "fuzz"})
    assert record.error is None and record.decision == {"behavior": "context", "context": "anchor"}, record


LEAK = re.compile(
    r"Traceback|File \"[^\"]*\", line \d+|<class '|<module|object at 0x"
    r"|\b[A-Z][A-Za-z0-9]*(?:Error|Exception)\b|\bcattrs\b"
)


def assert_clean(message: str, source: str = "") -> None:
    """No traceback, no exception type name (unless the user's own file says it), and
    printable as UTF-8 (``hookbus validate`` prints it, recorders write it)."""
    try:
        message.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AssertionError(f"cannot be printed or recorded as UTF-8: {message!r}") from exc
    leaked = [match.group() for match in LEAK.finditer(message) if match.group() not in source]
    assert not leaked, f"{leaked} leaked into {message!r}"


def path_prefixes(hook_id: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return (*(f"hooks/{hook_id}/{name}: " for name in names), f"hooks/{hook_id}: ")


def assert_skipped(bus: HookBus, hook_id: str, names: tuple[str, ...], source: str = "") -> None:
    """Absent, with at least one problem, each naming the file and saying nothing internal."""
    assert hook_id not in bus.snapshot.hooks, f"hooks/{hook_id} was registered"
    mine = [problem for problem in bus.problems if problem.hook_id == hook_id]
    assert mine, f"no problem names hooks/{hook_id}: {[str(p) for p in bus.problems]}"
    for problem in mine:
        text = str(problem)
        assert text.startswith(path_prefixes(hook_id, names)), text
        assert not problem.kept_last_good
        assert_clean(text, source)


def assert_kept(bus: HookBus, hook_id: str, kept: Any, names: tuple[str, ...], source: str = "") -> None:
    """The last good version stays in effect, whole, and the problems say so."""
    assert bus.snapshot.hooks.get(hook_id) is kept, f"hooks/{hook_id} is not its last good version"
    mine = [problem for problem in bus.problems if problem.hook_id == hook_id]
    assert mine, f"no problem names hooks/{hook_id}"
    for problem in mine:
        text = str(problem)
        assert text.startswith(path_prefixes(hook_id, names)), text
        assert problem.kept_last_good and text.endswith("(its last good version stays in effect)"), text
        assert_clean(text, source)


def assert_loaded_as(bus: HookBus, hook_id: str, doc: dict[str, Any], name: str) -> None:
    """The hook is exactly its document: every field as written, defaults for the rest."""
    hook = bus.snapshot.hooks[hook_id]
    spec = hook.spec
    action = next(key for key in doc if key not in FIELDS)
    mode = doc.get("mode", "async")
    expected = {
        "id": hook_id,
        "event": doc["trigger"]["event"],
        "matcher": doc["trigger"].get("matcher", ""),
        "action_key": action,
        "action": doc[action],
        "name": doc.get("name", ""),
        "enabled": doc.get("enabled", True),
        "mode": mode,
        "blocking": doc.get("blocking", False),
        "cwd": doc.get("cwd", ""),
        "timeout": doc.get("timeout") or ("5s" if mode == "sync" else "10m"),
        "created_by": doc.get("created_by", ""),
    }
    actual = {
        "id": spec.id,
        "event": spec.trigger.event,
        "matcher": spec.trigger.matcher,
        "action_key": spec.action_key,
        "action": spec.action,
        "name": spec.name,
        "enabled": spec.enabled,
        "mode": spec.mode,
        "blocking": spec.blocking,
        "cwd": spec.cwd,
        "timeout": spec.timeout,
        "created_by": spec.created_by,
    }
    assert actual == expected
    assert {k: type(v) for k, v in actual.items()} == {k: type(v) for k, v in expected.items()}
    assert hook.source.name == name and hook.directory.name == hook_id
    assert hook.timeout > 0 and hook.is_sync == (mode == "sync")
    # Loaded whole: no problem of its file. (The example's scripts are not copied, so a
    # problem of a script it runs, which the loader reports and keeps it loaded for, may be.)
    will_fail = failing_problems(bus.snapshot).get(hook_id, ())
    assert not [problem for problem in bus.problems if problem.hook_id == hook_id and problem not in will_fail]


def to_yaml(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


def instantiate(doc: Any, hook_id: str) -> Any:
    """The document as written into directory ``hook_id`` (``@@ID@@`` is the directory name)."""
    return json.loads(json.dumps(doc).replace("@@ID@@", hook_id))


# -- every byte prefix of each valid example --------------------------------------------------

SPEC_EXAMPLES = {
    "spec/block-env-writes": b"""{
  "id": "block-env-writes",
  "name": "Block .env writes",
  "enabled": true,
  "trigger": { "event": "PreToolUse", "matcher": "write_file|edit_file" },
  "mode": "sync",
  "blocking": true,
  "command": "$HOME/.vix/hooks/block-env-writes/script.sh",
  "cwd": "",
  "timeout": "5s",
  "created_by": "agent:<your-thread-id>"
}
""",
    "spec/protect": rb"""{
  "id": "protect", "enabled": true, "mode": "sync", "blocking": true,
  "trigger": { "event": "PreToolUse", "matcher": "write_file|edit_file|delete_file" },
  "command": "p=$(jq -r .tool_input.path); case \"$p\" in *.env|*/secrets/*) echo \"protected: $p\" >&2; exit 2;; esac; exit 0"
}
""",
    "spec/subagent-done": rb"""{
  "id": "subagent-done", "enabled": true, "mode": "async",
  "trigger": { "event": "SubagentStop" },
  "command": "printf '%s finished\\n' \"$(jq -r .agent_type)\" >> ~/.vix/subagents.log"
}
""",
}


def _examples() -> list[tuple[str, str, bytes]]:
    found: dict[bytes, tuple[str, str, bytes]] = {}
    for path in sorted((ROOT / "contrib" / "hooks").glob("*/hook.json")):
        data = path.read_bytes()
        found.setdefault(data, (f"contrib/{path.parent.name}", path.parent.name, data))
    for label, data in SPEC_EXAMPLES.items():
        found.setdefault(data, (label, json.loads(data)["id"], data))
    return list(found.values())


EXAMPLES = _examples()


def check_prefix(bus: HookBus, hook_id: str, name: str, prefix: bytes, kind: str, complete: int) -> tuple[bool, Any]:
    loaded = hook_id in bus.snapshot.hooks
    decodable, doc = decode_strictly(prefix, kind)
    valid = decodable and oracle_valid(doc, hook_id)
    assert loaded == valid, f"prefix of {len(prefix)} bytes: loaded={loaded}, valid={valid}"
    if kind == "json":
        # JSON cannot be complete before its closing brace: only the whole file loads.
        assert loaded == (len(prefix) >= complete), f"prefix of {len(prefix)} bytes loaded"
    if loaded:
        assert_loaded_as(bus, hook_id, doc, name)
    else:
        assert_skipped(bus, hook_id, (name,), prefix.decode("utf-8", "replace"))
    assert ANCHOR_ID in bus.snapshot.hooks
    assert not [problem for problem in bus.problems if problem.hook_id != hook_id]
    return loaded, doc


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("kind", ["json", "yaml"])
@pytest.mark.parametrize(("hook_id", "data"), [pytest.param(h, d, id=label) for label, h, d in EXAMPLES])
def test_every_byte_prefix_of_a_valid_example(kind: str, hook_id: str, data: bytes, tmp_path: Path) -> None:
    """A hook file caught half-written: each prefix is skipped whole, or (only a complete
    document can) loads as exactly what it says; the anchor next to it keeps firing."""
    full = json.loads(data)
    assert oracle_valid(full, hook_id), "the example itself is valid"
    if kind == "yaml":
        data = to_yaml(full).encode()
        assert yaml.safe_load(data) == full
    name = f"hook.{kind}"
    home = make_home(tmp_path)
    write_anchor(home)
    complete = len(data.rstrip())
    fresh_every, emit_every = scale(400, 25), scale(250, 10)
    with quiet():
        bus: HookBus | None = None
        try:
            for size in range(len(data) + 1):
                prefix = data[:size]
                write_file(home, hook_id, name, prefix)
                if bus is None:
                    bus = HookBus(home)
                else:
                    bus.reload()
                FIGURES["specs fuzzed"] += 1
                loaded, _ = check_prefix(bus, hook_id, name, prefix, kind, complete)
                if size % fresh_every == 0:
                    with HookBus(home) as fresh:
                        assert check_prefix(fresh, hook_id, name, prefix, kind, complete)[0] == loaded
                    FIGURES["specs fuzzed"] += 1
                if size % emit_every == 0:
                    assert_anchor_fires(bus)
                if loaded and size < len(data):
                    # Forget it, so the next prefix is judged on its own, not against a last good.
                    (home / "hooks" / hook_id / name).unlink()
                    bus.reload()
                    assert hook_id not in bus.snapshot.hooks
            assert_loaded_as(bus, hook_id, full, name)  # type: ignore[union-attr]
            assert_anchor_fires(bus)  # type: ignore[arg-type]
        finally:
            if bus is not None:
                bus.close()


# -- generated documents ----------------------------------------------------------------------

SAFE_TEXT = st.characters(codec="utf-8", exclude_characters="\x00`")  # no lone surrogates, no NUL
text_values = st.text(alphabet=SAFE_TEXT, max_size=40)
short_keys = st.text(alphabet=SAFE_TEXT, max_size=8)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=SAFE_TEXT, max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(short_keys, children, max_size=3),
    max_leaves=10,
)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=-(10**4000), max_value=10**4000),  # huge, under Python's 4,300-digit limit
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 1e308, -1e308, 5e-324, 2**63, -(2**63) - 1, 10**4299]),
)
TYPED_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "bool": st.booleans(),
    "number": numbers,
    "str": text_values,
    "list": st.lists(json_values, max_size=3),
    "dict": st.dictionaries(short_keys, json_values, max_size=3),
}


def wrong_type(allowed: str) -> st.SearchStrategy[Any]:
    """A value of any JSON type but ``allowed`` (null included: it never means "absent")."""
    return st.one_of([strategy for kind, strategy in TYPED_VALUES.items() if kind != allowed])


UNITS = ["ns", "us", "µs", "ms", "s", "m", "h"]


@st.composite
def durations(draw: st.DrawFn) -> str:
    parts = draw(
        st.lists(
            st.tuples(st.integers(0, 99_999), st.sampled_from(["", ".", ".5", ".25"]), st.sampled_from(UNITS)),
            min_size=1,
            max_size=3,
        )
    )
    number, fraction, unit = parts[0]
    parts[0] = (max(number, 1), fraction, unit)  # longer than zero
    return "".join(f"{n}{f}{u}" for n, f, u in parts)


GOOD_MATCHERS = ["", "*", "bash", "write_file|edit_file", "mcp__.*", "(read|write)_file", "[a-z_]+", ".*", "auto|manual"]
matchers = st.one_of(
    st.sampled_from(GOOD_MATCHERS),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,12}(\|[A-Za-z0-9_-]{1,8}){0,3}", fullmatch=True),
)
# Harmless to run, whatever the text: generated hooks that load must never do anything.
safe_commands = text_values.map(lambda text: ": " + shlex.quote(text))
prompts = st.text(alphabet=SAFE_TEXT, min_size=1, max_size=60).filter(lambda text: bool(text.strip()))


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    step: dict[str, Any] = {"bash": draw(safe_commands)} if draw(st.booleans()) else {"prompt": draw(prompts)}
    if draw(st.booleans()):
        step["name"] = draw(text_values)
    if draw(st.booleans()):
        step["timeout"] = draw(durations())
    return step


@st.composite
def workflows(draw: st.DrawFn) -> dict[str, Any]:
    workflow: dict[str, Any] = {"steps": draw(st.lists(steps(), min_size=1, max_size=3))}
    if draw(st.booleans()):
        workflow["description"] = draw(text_values)
    return workflow


ACTION_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "command": safe_commands,
    "prompt": prompts,
    "workflow": workflows(),
}


@st.composite
def valid_docs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid hook document; ``"id": "@@ID@@"`` stands for its directory name."""
    event = draw(st.sampled_from(EVENT_NAMES))
    info = EVENTS[event]
    trigger: dict[str, Any] = {"event": event}
    if draw(st.booleans()):
        trigger["matcher"] = draw(matchers if info.matcher_field else st.sampled_from(["", "*"]))
        if draw(st.booleans()):
            trigger = {"matcher": trigger["matcher"], "event": event}
    doc: dict[str, Any] = {"trigger": trigger}
    mode = draw(st.sampled_from([None, "sync", "async"]))
    if mode is not None:
        doc["mode"] = mode
    blocking = draw(st.sampled_from([None, False, True] if mode == "sync" and info.can_block else [None, False]))
    if blocking is not None:
        doc["blocking"] = blocking
    optional: dict[str, st.SearchStrategy[Any]] = {
        "id": st.just("@@ID@@"),
        "name": text_values,
        "enabled": st.booleans(),
        "cwd": text_values,
        "created_by": text_values,
        "timeout": durations(),
    }
    for field, strategy in optional.items():
        if draw(st.booleans()):
            doc[field] = draw(strategy)
    action = draw(st.sampled_from(GENERATED_ACTIONS))
    doc[action] = draw(ACTION_VALUES[action])
    return dict(draw(st.permutations(list(doc.items()))))


BAD_UTF8 = [
    b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98",
]
BAD_REGEXES = ["(", "write_(file", "[", "a{2,1}", "*a", "+", "(x)\\1", "\\", "(?<", "a**", "(?=a)a", "a++", "a{,3}"]
BAD_TIMEOUTS = ["", " ", "5", "5 seconds", "-1s", "1x", "1h 30m", "0s", "0.0ms", "0h0m", "s", "5S", " 5s", "5s ", "1.2.3s"]
SPEC_KEYS_OF = {
    "id": "str", "name": "str", "mode": "str", "cwd": "str", "timeout": "str", "created_by": "str", "dialect": "str", "env": "dict",
    "event": "str", "matcher": "str", "command": "str", "prompt": "str", "description": "str",
    "bash": "str", "enabled": "bool", "blocking": "bool", "trigger": "dict", "workflow": "dict",
    "steps": "list", 0: "dict",
}


@dataclass(frozen=True)
class Case:
    """One generated file: a document template, raw texts for its ``@@RAWn@@`` placeholders,
    and a final touch on the bytes (a duplicate key, invalid UTF-8, padding, nesting)."""

    label: str
    kind: str  # "json" or "yaml"
    doc: Any = None
    raws: tuple[str, ...] = ()
    post: tuple[Any, ...] = ()
    data: bytes | None = None
    #: False: must be skipped; None: the oracle decides from the bytes.
    expect: bool | None = False
    #: JSON with \uXXXX escapes only (lone surrogates can be written no other way).
    ascii: bool = False

    @property
    def name(self) -> str:
        return f"hook.{self.kind}"

    def _text(self) -> str:
        if self.kind == "json" or (self.post and self.post[0] == "wrap"):
            return json.dumps(self.doc, ensure_ascii=self.ascii)
        return to_yaml(self.doc)

    def _quoted(self, token: str) -> str:
        return json.dumps(token) if self.kind == "json" or (self.post and self.post[0] == "wrap") else f"'{token}'"

    def renders(self) -> bool:
        if self.data is not None:
            return True
        text = self._text()
        return all(self._quoted(f"@@RAW{i}@@") in text for i in range(len(self.raws)))

    def render(self, hook_id: str) -> bytes:
        if self.data is not None:
            return self.data
        text = self._text()
        op = self.post[0] if self.post else None
        if op == "dup":
            key, value = self.post[1], self.post[2]
            if self.kind == "json":
                text = "{" + f"{json.dumps(key)}: {value}, " + text[1:]
            else:
                text = f"{json.dumps(key)}: {value}\n" + text
        for index, raw in enumerate(self.raws):
            quoted = self._quoted(f"@@RAW{index}@@")
            assert quoted in text, (quoted, text[:200])
            text = text.replace(quoted, raw)
        data = text.replace("@@ID@@", hook_id).encode()
        if op == "utf8":
            at = int(self.post[1] * len(data))
            data = data[:at] + self.post[2] + data[at:]
        elif op == "pad":
            data += b" " * max(0, CAP + 1 + self.post[1] - len(data))
        elif op == "wrap":
            data = b"[" * self.post[1] + data + b"]" * self.post[1]
        return data

    def __repr__(self) -> str:  # what hypothesis prints for a failing example
        shown = self.data[:80] if self.data is not None else json.dumps(self.doc)[:300]
        return f"Case({self.label!r}, {self.kind}, {shown!r}, raws={[r[:40] for r in self.raws]}, post={self.post!r:.80})"


def paths_of(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    paths: list[tuple[Any, ...]] = [(field,) for field in FIELDS] + [("trigger", "event"), ("trigger", "matcher")]
    action = next(key for key in doc if key not in FIELDS)
    paths.append((action,))
    if action == "workflow":
        kind = "bash" if "bash" in doc["workflow"]["steps"][0] else "prompt"
        paths += [("workflow", "steps"), ("workflow", "description"), ("workflow", "steps", 0), ("workflow", "steps", 0, kind)]
    return paths


def set_path(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def yaml_or_json(draw: st.DrawFn, doc: Any) -> str:
    """The kind to write ``doc`` as: YAML a third of the time, when YAML round-trips it."""
    if draw(st.integers(0, 2)) == 0:
        try:
            if yaml.safe_load(to_yaml(doc)) == doc:
                return "yaml"
        except (yaml.YAMLError, RecursionError):
            pass
    return "json"


def m_wrong_type(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    path = draw(st.sampled_from(paths_of(doc)))
    allowed = SPEC_KEYS_OF[path[-1]]
    set_path(doc, path, draw(wrong_type(allowed)))
    return Case(f"wrong type at {path}", yaml_or_json(draw, doc), doc)


def m_unknown_field(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    key = draw(st.text(alphabet=SAFE_TEXT, max_size=15).filter(lambda k: k not in reserved_keys() and "@@" not in k))
    value = draw(json_values)
    places: list[Any] = [doc]
    if isinstance(doc["trigger"], dict):
        places.append(doc["trigger"])
    if "workflow" in doc:
        places += [doc["workflow"], doc["workflow"]["steps"][0]]
    draw(st.sampled_from(places))[key] = value
    return Case("unknown field", yaml_or_json(draw, doc), doc)


def nested(depth: int, shape: str) -> str:
    if shape == "list":
        return "[" * depth + "]" * depth
    if shape == "dict":
        return '{"a":' * depth + "1" + "}" * depth
    return '[{"a":' * depth + "0" + "}]" * depth


def m_deep(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    depth = draw(st.sampled_from([1, 2, 64, 500, 990, 1000, 1500, 3000, 10_000]))
    shape = draw(st.sampled_from(["list", "dict", "mixed"]))
    where = draw(st.sampled_from(["field", "unknown", "top"]))
    kind = draw(st.sampled_from(["json", "json", "yaml"]))
    if where == "top":
        return Case(f"document inside {depth} arrays", kind, doc, post=("wrap", depth))
    if where == "unknown":
        doc["deep"] = "@@RAW0@@"
    else:
        set_path(doc, draw(st.sampled_from(paths_of(doc))), "@@RAW0@@")
    return Case(f"{depth} nested {shape} at {where}", kind, doc, raws=(nested(depth, shape),))


def m_nan(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "[1, NaN]", '{"x": -Infinity}', "1e400", "-1e400"]))
    if draw(st.booleans()):
        doc["extra"] = "@@RAW0@@"
    else:
        set_path(doc, draw(st.sampled_from(paths_of(doc))), "@@RAW0@@")
    return Case(f"{literal} literal", "json", doc, raws=(literal,))


def m_duplicate(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    kind = yaml_or_json(draw, doc)
    if draw(st.booleans()) and isinstance(doc["trigger"], dict):
        trigger = doc["trigger"]
        key = draw(st.sampled_from(sorted(trigger)))
        value = trigger[key] if draw(st.booleans()) else draw(json_values)
        doc["trigger"] = "@@RAW0@@"
        raw = "{" + f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}, " + json.dumps(trigger, ensure_ascii=False)[1:]
        return Case(f"duplicate trigger key {key!r}", kind, doc, raws=(raw,))
    key = draw(st.sampled_from(sorted(doc)))
    value = doc[key] if draw(st.booleans()) else draw(json_values)
    return Case(f"duplicate key {key!r}", kind, doc, post=("dup", key, json.dumps(value, ensure_ascii=False)))


def m_utf8(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    where = draw(st.floats(min_value=0.0, max_value=1.0))
    return Case("invalid UTF-8", yaml_or_json(draw, doc), doc, post=("utf8", where, draw(st.sampled_from(BAD_UTF8))))


def m_oversize(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    extra = draw(st.integers(0, 5000))
    kind = yaml_or_json(draw, doc)
    if draw(st.booleans()):
        return Case(f"padded to {CAP + 1 + extra} bytes", kind, doc, post=("pad", extra))
    doc["name"] = "@@RAW0@@"
    return Case(f"a name of {CAP + extra} characters", kind, doc, raws=(json.dumps("x" * (CAP + extra)),))


def m_semantic(draw: st.DrawFn) -> Case:
    doc = draw(valid_docs())
    action = next(key for key in doc if key not in FIELDS)
    what = draw(
        st.sampled_from(
            [
                "unknown event", "matcher without a matcher field", "invalid regex", "bad mode",
                "blocking without sync", "blocking on an event that cannot block", "bad timeout",
                "id differs", "blank action", "no action", "two actions", "workflow_id", "bad workflow",
            ]
        )
    )
    if what == "unknown event":
        doc["trigger"]["event"] = draw(st.text(alphabet=SAFE_TEXT, max_size=20).filter(lambda e: e not in EVENTS))
    elif what == "matcher without a matcher field":
        doc["trigger"] = {"event": draw(st.sampled_from(["UserPromptSubmit", "Stop"])), "matcher": draw(
            st.text(alphabet=SAFE_TEXT, min_size=1, max_size=10).filter(lambda m: m not in ("", "*")))}
        doc.pop("blocking", None)
    elif what == "invalid regex":
        doc["trigger"] = {"event": "PreToolUse", "matcher": draw(st.sampled_from(BAD_REGEXES))}
    elif what == "bad mode":
        doc["mode"] = draw(st.text(alphabet=SAFE_TEXT, max_size=10).filter(lambda m: m not in ("sync", "async")))
    elif what == "blocking without sync":
        doc["mode"] = "async"
        doc["blocking"] = True
    elif what == "blocking on an event that cannot block":
        doc["trigger"] = {"event": draw(st.sampled_from([e for e in EVENT_NAMES if not EVENTS[e].can_block]))}
        doc["mode"] = "sync"
        doc["blocking"] = True
    elif what == "bad timeout":
        doc["timeout"] = draw(st.sampled_from(BAD_TIMEOUTS))
    elif what == "id differs":
        doc["id"] = draw(st.sampled_from(["@@ID@@-renamed", "", "anchor", "x/../y"]))
    elif what == "blank action":
        if action == "workflow":
            doc["workflow"]["steps"][0] = {"bash": draw(st.sampled_from(["", " ", "\n\t", "\u3000"]))}
        else:
            doc[action] = draw(st.sampled_from(["", " ", "\n\t", "\u3000"]))
    elif what == "no action":
        del doc[action]
    elif what == "two actions":
        other = draw(st.sampled_from([key for key in (*GENERATED_ACTIONS, "workflow_id") if key != action]))
        doc[other] = draw(ACTION_VALUES.get(other, st.just("fast-veto")))
    elif what == "workflow_id":
        del doc[action]
        doc["workflow_id"] = draw(st.sampled_from(["fast-veto", "x", ""]))
    else:
        del doc[action]
        doc["workflow"] = draw(
            st.sampled_from(
                [
                    {"steps": []}, {}, {"steps": [{}]}, {"steps": [{"bash": "true", "prompt": "p"}]},
                    {"steps": [{"bsh": "true"}]}, {"steps": [{"bash": "true", "timeout": "0s"}]},
                    {"steps": [{"bash": "true"}], "extra": 1}, {"steps": [{"bash": "true", "name": 5}]},
                    {"steps": "bash"}, {"steps": [{"bash": "true"}], "description": None},
                ]
            )
        )
    return Case(what, yaml_or_json(draw, doc), doc)


lone_surrogates = st.builds(
    lambda before, code, after: f"{before}{chr(code)}{after}",
    text_values, st.integers(0xD800, 0xDFFF), text_values,
)


def m_surrogate(draw: st.DrawFn) -> Case:
    """A lone surrogate (a legal JSON escape) in a key or a value: refused wherever it is."""
    doc = draw(valid_docs())
    text = draw(lone_surrogates)
    where = draw(st.sampled_from(
        ["unknown key", "unknown trigger key", "event", "mode", "timeout", "id", "created_by type", "matcher", "name", "command"]
    ))
    if where == "unknown key":
        doc[text] = draw(json_values)
    elif where == "unknown trigger key":
        doc["trigger"][text] = "x"
    elif where == "event":
        doc["trigger"]["event"] = text
    elif where in ("mode", "timeout"):
        doc[where] = text
    elif where == "id":
        doc["id"] = "@@ID@@" + text
    elif where == "matcher":
        doc["trigger"] = {"event": "PreToolUse", "matcher": text}
    elif where == "name":
        doc["name"] = text
    elif where == "command":
        for action in GENERATED_ACTIONS:
            doc.pop(action, None)
        doc["command"] = text
    else:
        doc["created_by"] = [text]
    return Case(f"lone surrogate in the {where}", "json", doc, ascii=True)


def m_top_level(draw: st.DrawFn) -> Case:
    value = draw(json_values.filter(lambda v: not isinstance(v, dict)))
    return Case("not an object at the top level", yaml_or_json(draw, value), value)


def _nonstring_keys(value: Any, seen: set[int]) -> bool:
    if id(value) in seen:
        return False
    seen.add(id(value))
    if isinstance(value, dict):
        return any(not isinstance(k, str) for k in value) or any(_nonstring_keys(v, seen) for v in value.values())
    if isinstance(value, list):
        return any(_nonstring_keys(v, seen) for v in value)
    return False


def m_random(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["json", "yaml"]))
    data = draw(
        st.one_of(
            st.binary(max_size=300),
            st.text(max_size=200).map(str.encode),
            st.builds(lambda d, n: json.dumps(d).encode()[:n], json_values, st.integers(0, 200)),
        )
    )
    return Case("random bytes", kind, data=data, expect=None)


MUTATIONS: list[Callable[[st.DrawFn], Case]] = [
    m_wrong_type, m_unknown_field, m_deep, m_nan, m_duplicate, m_utf8, m_oversize, m_semantic,
    m_top_level, m_random, m_deep, m_semantic, m_wrong_type, m_semantic, m_random, m_surrogate,
]


@st.composite
def bad_cases(draw: st.DrawFn) -> Case:
    case = draw(st.sampled_from(MUTATIONS))(draw)
    if not case.renders():  # YAML chose a quoting we cannot substitute into: write JSON
        case = Case(case.label, "json", case.doc, case.raws, case.post, case.data, case.expect, case.ascii)
    return case


def expectation(case: Case, data: bytes, hook_id: str) -> tuple[bool, Any]:
    """(valid, document) for the bytes actually written."""
    if case.expect is False:
        return False, None
    decodable, doc = decode_strictly(data, case.kind)
    return decodable and oracle_valid(doc, hook_id), doc


KEEP = {
    "json": json.dumps({"trigger": {"event": "Stop"}, "command": ": keep"}).encode(),
    "yaml": b"trigger: {event: Stop}\ncommand: ': keep'\n",
}


@pytest.mark.timeout(TIMEOUT)
@sized(15, 150)
@given(cases=st.lists(bad_cases(), min_size=1, max_size=scale(40, 60)))
def test_mutated_specs_are_skipped_whole_and_the_rest_fire(cases: list[Case]) -> None:
    """Each generated bad file: a hook that had a good version keeps it, whole; a fresh
    load skips it with path-qualified problems; the anchor fires throughout."""
    with quiet(), fuzz_home() as home:
        write_anchor(home)
        ids = {f"b{index:03d}": case for index, case in enumerate(cases)}
        for hook_id, case in ids.items():
            write_file(home, hook_id, case.name, KEEP[case.kind])
        written = {hook_id: case.render(hook_id) for hook_id, case in ids.items()}
        judged = {hook_id: expectation(case, written[hook_id], hook_id) for hook_id, case in ids.items()}
        sources = {hook_id: data.decode("utf-8", "replace") for hook_id, data in written.items()}

        def check(bus: HookBus, last_good: dict[str, Any] | None) -> None:
            for hook_id, case in ids.items():
                valid, doc = judged[hook_id]
                if valid:
                    assert_loaded_as(bus, hook_id, doc, case.name)
                elif last_good is not None:
                    assert_kept(bus, hook_id, last_good[hook_id], (case.name,), sources[hook_id])
                else:
                    assert_skipped(bus, hook_id, (case.name,), sources[hook_id])
            assert not [p for p in bus.problems if p.hook_id not in ids], [str(p) for p in bus.problems]

        with HookBus(home) as bus:
            assert bus.problems == ()
            last_good = {hook_id: bus.snapshot.hooks[hook_id] for hook_id in ids}
            for hook_id, case in ids.items():
                write_file(home, hook_id, case.name, written[hook_id])
            bus.reload()
            check(bus, last_good)
            assert_anchor_fires(bus)
        with HookBus(home) as bus:
            check(bus, None)
            bus.reload()
            check(bus, None)
            assert_anchor_fires(bus)
    FIGURES["specs fuzzed"] += 3 * len(cases)


@pytest.mark.timeout(TIMEOUT)
@sized(10, 100)
@given(docs=st.lists(valid_docs(), min_size=1, max_size=scale(30, 60)), data=st.data())
def test_generated_valid_specs_load_and_round_trip(docs: list[dict[str, Any]], data: st.DataObject) -> None:
    with quiet(), fuzz_home() as home:
        write_anchor(home)
        written = {}
        for index, doc in enumerate(docs):
            hook_id = f"v{index:03d}"
            kind = data.draw(st.sampled_from(["json", "yaml"]))
            case = Case("valid", kind, doc, expect=True)
            if kind == "yaml" and yaml.safe_load(to_yaml(doc)) != doc:
                case = Case("valid", "json", doc, expect=True)
            write_file(home, hook_id, case.name, case.render(hook_id))
            written[hook_id] = (instantiate(doc, hook_id), case.name)
        with HookBus(home) as bus:
            assert bus.problems == (), [str(p) for p in bus.problems]
            assert set(bus.snapshot.hooks) == {ANCHOR_ID, *written}
            for hook_id, (doc, name) in written.items():
                assert_loaded_as(bus, hook_id, doc, name)
            assert_anchor_runs(bus)
    FIGURES["specs fuzzed"] += len(docs)


@st.composite
def mixed_docs(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A valid document with up to three random edits: as often valid as not, and the
    oracle says which."""
    doc = draw(valid_docs())
    for _ in range(draw(st.integers(0, 3))):
        op = draw(
            st.sampled_from(
                ["set", "delete", "add action", "unknown", "event", "mode", "blocking", "matcher", "timeout", "id", "blank"]
            )
        )
        trigger = doc.get("trigger")
        if op == "set":
            field = draw(st.sampled_from([*FIELDS, *GENERATED_ACTIONS]))
            doc[field] = draw(json_values.filter(lambda v: v is not None) if field in ("id", "timeout") else json_values)
        elif op == "delete" and doc:
            del doc[draw(st.sampled_from(sorted(doc)))]
        elif op == "add action":
            key = draw(st.sampled_from([*GENERATED_ACTIONS, "workflow_id"]))
            doc[key] = draw(ACTION_VALUES.get(key, text_values))
        elif op == "unknown":
            doc[draw(short_keys.filter(lambda k: k not in reserved_keys()))] = draw(json_values)
        elif op == "event" and isinstance(trigger, dict):
            trigger["event"] = draw(st.sampled_from([*EVENT_NAMES, "pretooluse", "Nope", ""]))
        elif op == "mode":
            doc["mode"] = draw(st.sampled_from(["sync", "async", "SYNC", "", "blocking"]))
        elif op == "blocking":
            doc["blocking"] = draw(st.booleans())
        elif op == "matcher" and isinstance(trigger, dict):
            trigger["matcher"] = draw(
                st.one_of(st.sampled_from(GOOD_MATCHERS + BAD_REGEXES), st.text(alphabet="ab|()*+?[]{}.\\^$-_01", max_size=8))
            )
        elif op == "timeout":
            doc["timeout"] = draw(st.one_of(durations(), st.sampled_from(BAD_TIMEOUTS)))
        elif op == "id":
            doc["id"] = draw(st.sampled_from(["@@ID@@", "someone-else", ""]))
        elif op == "blank" and "command" in doc:
            doc["command"] = draw(st.sampled_from(["", " ", "\t\n"]))
    # Whatever loads must be harmless to run.
    if isinstance(doc.get("command"), str) and doc["command"].strip() and not doc["command"].startswith(": "):
        doc["command"] = ": " + shlex.quote(doc["command"])
    return doc, yaml_or_json(draw, doc)


@pytest.mark.timeout(TIMEOUT)
@sized(15, 150)
@given(docs=st.lists(mixed_docs(), min_size=1, max_size=scale(40, 80)))
def test_any_generated_spec_is_absent_or_exactly_valid(docs: list[tuple[dict[str, Any], str]]) -> None:
    with quiet(), fuzz_home() as home:
        write_anchor(home)
        expected = {}
        for index, (doc, kind) in enumerate(docs):
            hook_id = f"m{index:03d}"
            case = Case("mixed", kind, doc, expect=None)
            data = case.render(hook_id)
            write_file(home, hook_id, case.name, data)
            instance = instantiate(doc, hook_id)
            expected[hook_id] = (oracle_valid(instance, hook_id), instance, case.name, data.decode())
        with HookBus(home) as bus:
            for _ in range(2):  # the first load, then a reload over the same files
                for hook_id, (valid, doc, name, source) in expected.items():
                    if valid:
                        assert_loaded_as(bus, hook_id, doc, name)
                    else:
                        assert_skipped(bus, hook_id, (name,), source)
                bus.reload()
            assert_anchor_runs(bus)
    FIGURES["specs fuzzed"] += 2 * len(docs)


# -- fixed hard cases, in process and through `hookbus validate` ------------------------------

BASE: dict[str, Any] = {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True, "command": "true"}
DEEP = 10_000


def j(**changes: Any) -> bytes:
    spec = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        if value is ...:
            spec.pop(key, None)
        else:
            spec[key] = value
    return json.dumps(spec).encode()


def _alias_bomb() -> bytes:
    lines = [b"trigger: {event: Stop}", b"command: x", b'a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 10)}]".encode())
    return b"\n".join(lines) + b"\n"


FIXED_BAD: list[tuple[str, str, bytes]] = [
    ("empty file", "json", b""),
    ("only whitespace", "json", b" \n\t\r\n"),
    ("null", "json", b"null"),
    ("array at the top", "json", b"[1, 2]"),
    ("string at the top", "json", b'"hook"'),
    ("1e400 at the top", "json", b"1e400"),
    ("truncated", "json", j()[:-1]),
    ("trailing garbage", "json", j() + b" x"),
    ("two documents", "json", j() + j()),
    ("UTF-8 byte order mark", "json", b"\xef\xbb\xbf" + j()),
    ("UTF-16", "json", j().decode().encode("utf-16")),
    ("invalid UTF-8 in a string", "json", j(name="@").replace(b"@", b"\xff")),
    ("overlong UTF-8", "json", j(name="@").replace(b"@", b"\xc0\xaf")),
    ("UTF-8-encoded surrogate", "json", j(name="@").replace(b"@", b"\xed\xa0\x80")),
    ("truncated UTF-8 at the end", "json", j() + b"\xe2\x82"),
    ("NaN", "json", j(timeout="@").replace(b'"@"', b"NaN")),
    ("Infinity", "json", j(name="@").replace(b'"@"', b"Infinity")),
    ("-Infinity in an unknown field", "json", j(extra="@").replace(b'"@"', b"[-Infinity]")),
    ("1e400", "json", j(name="@").replace(b'"@"', b"1e400")),
    ("a 4,000-digit integer", "json", j(enabled="@").replace(b'"@"', b"9" * 4000)),
    ("duplicate key", "json", b'{"command": "true", ' + j()[1:]),
    ("duplicate key in the trigger", "json", j(trigger="@").replace(b'"@"', b'{"event": "Stop", "event": "Stop"}')),
    ("10,000 nested arrays", "json", b"[" * DEEP + b"]" * DEEP),
    ("10,000 nested objects", "json", b'{"a":' * DEEP + b"1" + b"}" * DEEP),
    ("10,000 nested arrays in a field", "json", j(name="@").replace(b'"@"', b"[" * DEEP + b"]" * DEEP)),
    ("10,000 nested objects as the action", "json", j(command="@").replace(b'"@"', b'{"a":' * DEEP + b"1" + b"}" * DEEP)),
    ("500 nested objects as a workflow", "json", j(command=..., workflow="@").replace(b'"@"', b'{"steps":' * 500 + b"[]" + b"}" * 500)),
    ("over the cap (padding)", "json", j() + b" " * (CAP + 1 - len(j()))),
    ("over the cap (a long name)", "json", j(name="x" * CAP)),
    ("enabled as a string", "json", j(enabled="false")),
    ("blocking as 1", "json", j(blocking=1)),
    ("mode null", "json", j(mode=None)),
    ("trigger as a string", "json", j(trigger="PreToolUse")),
    ("event as a number", "json", j(trigger={"event": 5})),
    ("matcher as a list", "json", j(trigger={"event": "PreToolUse", "matcher": ["bash"]})),
    ("command as a list", "json", j(command=["ls"])),
    ("timeout as a number", "json", j(timeout=5)),
    ("name as an object", "json", j(name={})),
    ("cwd as false", "json", j(cwd=False)),
    ("created_by as a float", "json", j(created_by=1.5)),
    ("id as a number", "json", j(id=7)),
    ("unknown field", "json", j(blockng=True)),
    ("unknown trigger field", "json", j(trigger={"event": "PreToolUse", "matchr": "x"})),
    ("unknown event", "json", j(trigger={"event": "PreToolUse2"})),
    ("invalid regex", "json", j(trigger={"event": "PreToolUse", "matcher": "write_(file"})),
    ("matcher on Stop", "json", j(blocking=False, trigger={"event": "Stop", "matcher": "x"})),
    ("no action", "json", j(command=...)),
    ("two actions", "json", j(prompt="check")),
    ("blocking without sync", "json", j(mode="async")),
    ("blocking on PostToolUse", "json", j(trigger={"event": "PostToolUse"})),
    ("bad timeout", "json", j(timeout="5 seconds")),
    ("zero timeout", "json", j(timeout="0s")),
    ("id differs", "json", j(id="someone-else")),
    ("blank command", "json", j(command=" \n\t")),
    ("workflow_id naming nothing", "json", j(command=..., workflow_id="nope")),
    ("workflow with a bad step", "json", j(command=..., workflow={"steps": [{"bsh": "x"}]})),
    ("workflow without steps", "json", j(command=..., workflow={"steps": []})),
    ("every byte value", "json", bytes(range(256))),
    ("YAML syntax error", "yaml", b"trigger: [unclosed\n"),
    ("YAML duplicate key", "yaml", b"trigger: {event: Stop}\ncommand: a\ncommand: b\n"),
    ("YAML tab indentation", "yaml", b"trigger:\n\tevent: Stop\ncommand: x\n"),
    ("YAML python tag", "yaml", b"!!python/object/apply:os.system ['true']\n"),
    ("YAML two documents", "yaml", b"trigger: {event: Stop}\n---\ncommand: x\n"),
    ("YAML list at the top", "yaml", b"- trigger\n- command\n"),
    ("YAML empty", "yaml", b""),
    ("YAML 10,000 nested lists", "yaml", b"[" * DEEP + b"]" * DEEP),
    ("YAML 10,000 nested mappings in a field", "yaml", b"trigger: {event: Stop}\ncommand: x\nname: " + b"{a: " * DEEP + b"1" + b"}" * DEEP + b"\n"),
    ("YAML recursive alias", "yaml", b"trigger: {event: Stop}\ncommand: x\nloop: &a [*a]\n"),
    ("YAML recursive alias as the trigger", "yaml", b"trigger: &t {event: Stop, self: *t}\ncommand: x\n"),
    ("YAML alias bomb", "yaml", _alias_bomb()),
    ("YAML .nan timeout", "yaml", b"trigger: {event: Stop}\ncommand: x\ntimeout: .nan\n"),
    ("YAML date as the command", "yaml", b"trigger: {event: Stop}\ncommand: 2020-01-01\n"),
    ("YAML binary as the command", "yaml", b"trigger: {event: Stop}\ncommand: !!binary aGVsbG8=\n"),
    ("YAML unhashable key", "yaml", b"trigger: {event: Stop}\ncommand: x\n? [a]\n: b\n"),
    ("YAML invalid UTF-8", "yaml", b"trigger: {event: Stop}\ncommand: \xff\n"),
    ("YAML over the cap", "yaml", b"trigger: {event: Stop}\ncommand: x\n#" + b"#" * CAP + b"\n"),
    ("YAML 4,000-digit integer", "yaml", b"trigger: {event: Stop}\ncommand: x\nenabled: " + b"9" * 4000 + b"\n"),
    ("both hook.json and hook.yaml", "both", j()),
    ("hook.json is a symbolic link", "symlink", j()),
    ("hook.json is a directory", "dir", b""),
    ("hook.json is a FIFO", "fifo", b""),
]


def write_fixed(home: Path, hook_id: str, kind: str, data: bytes) -> tuple[str, ...]:
    """Write one FIXED_BAD case; the file names its problems may name."""
    directory = home / "hooks" / hook_id
    if kind in ("json", "yaml"):
        write_file(home, hook_id, f"hook.{kind}", data)
        return (f"hook.{kind}",)
    directory.mkdir(parents=True)
    if kind == "both":
        write_file(home, hook_id, "hook.json", data)
        write_file(home, hook_id, "hook.yaml", to_yaml(json.loads(data)).encode())
        return ()
    if kind == "symlink":
        outside = home.parent / f"outside-{hook_id}.json"
        outside.write_bytes(data)
        os.symlink(outside, directory / "hook.json")
    elif kind == "dir":
        (directory / "hook.json").mkdir()
    else:
        os.mkfifo(directory / "hook.json")
    return ("hook.json",)


GOOD_YAML = b"trigger:\n  event: PreToolUse\n  matcher: bash\nmode: sync\ncommand: ': fine'\n"


def write_fixed_home(home: Path) -> dict[str, tuple[str, ...]]:
    write_anchor(home)
    write_file(home, "good-yaml", "hook.yaml", GOOD_YAML)
    return {f"f{index:03d}": write_fixed(home, f"f{index:03d}", kind, data) for index, (_, kind, data) in enumerate(FIXED_BAD)}


def all_sources(home: Path) -> str:
    """Everything the users wrote, for telling echoed user text from leaks."""
    texts = []
    for path in (home / "hooks").glob("*/hook.*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts)


@pytest.mark.timeout(TIMEOUT)
def test_fixed_hard_cases_are_skipped_and_the_rest_fire(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    names = write_fixed_home(home)
    source = all_sources(home)
    with quiet(), HookBus(home) as bus:
        for _ in range(2):
            assert set(bus.snapshot.hooks) == {ANCHOR_ID, "good-yaml"}
            for (label, _, _), (hook_id, file_names) in zip(FIXED_BAD, names.items()):
                try:
                    assert_skipped(bus, hook_id, file_names, source)
                except AssertionError as exc:
                    raise AssertionError(f"{label}: {exc}") from exc
            assert_anchor_fires(bus)
            assert bus.emit("PreToolUse", {"tool_name": "bash"}).behavior == "allow"
            bus.reload()
    FIGURES["specs fuzzed"] += 2 * len(FIXED_BAD)


def run_validate(home: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "validate", "--home", str(home)],
        capture_output=True,
        timeout=120,
        check=False,
    )


def assert_validate_names(
    result: subprocess.CompletedProcess[bytes], bad: dict[str, tuple[str, ...]], good: list[str], source: str
) -> None:
    stdout = result.stdout.decode("utf-8")
    stderr = result.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stdout and "Traceback" not in stderr, stderr[-3000:]
    assert result.returncode == 1, (result.returncode, stdout[-2000:], stderr[-2000:])
    lines = stdout.splitlines()
    for hook_id, names in bad.items():
        assert any(line.startswith(path_prefixes(hook_id, names)) for line in lines), f"hooks/{hook_id} not named"
        assert f"ok  hooks/{hook_id}" not in lines
    for hook_id in good:
        assert f"ok  hooks/{hook_id}" in lines
    for line in lines:
        assert_clean(line, source)


@pytest.mark.timeout(TIMEOUT)
def test_validate_names_every_fixed_bad_file(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    names = write_fixed_home(home)
    assert_validate_names(run_validate(home), names, [ANCHOR_ID, "good-yaml"], all_sources(home))
    FIGURES["specs fuzzed"] += len(FIXED_BAD)


@pytest.mark.timeout(TIMEOUT)
@sized(3, 20)
@given(cases=st.lists(bad_cases(), min_size=1, max_size=scale(25, 50)))
def test_validate_names_every_generated_bad_file(cases: list[Case]) -> None:
    with fuzz_home() as home:
        write_anchor(home)
        bad = {}
        for index, case in enumerate(cases):
            hook_id = f"g{index:03d}"
            data = case.render(hook_id)
            if expectation(case, data, hook_id)[0]:
                continue  # random bytes that happen to be a valid hook: not a bad file
            write_file(home, hook_id, case.name, data)
            bad[hook_id] = (case.name,)
        assert_validate_names(run_validate(home), bad, [ANCHOR_ID], all_sources(home))
    FIGURES["specs fuzzed"] += len(cases)


@pytest.mark.timeout(TIMEOUT)
def test_a_valid_spec_of_exactly_the_cap_loads_and_one_byte_more_does_not(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    write_anchor(home)
    for hook_id, size in (("at-cap", CAP), ("over-cap", CAP + 1)):
        spec = {"trigger": {"event": "Stop"}, "command": ": sized", "name": ""}
        spec["name"] = "x" * (size - len(json.dumps(spec)))
        data = json.dumps(spec).encode()
        assert len(data) == size
        write_file(home, hook_id, "hook.json", data)
    with quiet(), HookBus(home) as bus:
        assert bus.snapshot.hooks["at-cap"].spec.name == "x" * (CAP - len(json.dumps(
            {"trigger": {"event": "Stop"}, "command": ": sized", "name": ""})))
        assert_skipped(bus, "over-cap", ("hook.json",))
        assert "over the 256 KiB limit" in str([p for p in bus.problems if p.hook_id == "over-cap"][0])
        assert_anchor_fires(bus)
    FIGURES["specs fuzzed"] += 2


# -- the decision parsers ---------------------------------------------------------------------

MARKER = re.compile(r"\n\[hookbus: truncated (\d+) more characters\]\Z")


def capped(text: str) -> str:
    if len(text) <= CONTEXT_CAP:
        return text
    return f"{text[:CONTEXT_CAP]}\n[hookbus: truncated {len(text) - CONTEXT_CAP} more characters]"


def assert_capped(text: str) -> None:
    marker = MARKER.search(text)
    if marker is not None and marker.start() == CONTEXT_CAP:
        assert int(marker.group(1)) > 0
    else:
        assert len(text) <= CONTEXT_CAP, len(text)


def assert_outcome(outcome: object) -> None:
    """A decision, or allow with a recorded error; never anything else."""
    assert type(outcome) is Outcome, outcome
    assert outcome.behavior in BEHAVIORS
    if outcome.behavior == "modify":
        assert type(outcome.input) is dict
    else:
        assert outcome.input is None
    if outcome.behavior != "deny":
        assert outcome.reason is None
    if outcome.behavior != "context":
        assert outcome.context is None
    else:
        assert type(outcome.context) is str and outcome.context.strip()
    for text in (outcome.reason, outcome.context):
        if text is not None:
            assert type(text) is str
            assert_capped(text)
    if outcome.error is not None:
        assert outcome.behavior == "allow"
        assert type(outcome.error) is str and outcome.error.strip()
        assert "Traceback" not in outcome.error
    assert outcome.thread_id is None


def claude_shaped(decision: dict[str, Any]) -> bool:
    """Claude Code's (or Gemini CLI's) output: judged in tests/test_claude_compat.py, shape
    by shape, not by this oracle."""
    return "behavior" not in decision and any(key in decision for key in FOREIGN_KEYS)


def expected_from_object(decision: dict[str, Any]) -> Outcome | None:
    """The spec's JSON decision; None when it is not a valid one. ``{}`` says nothing: allow."""
    if not decision:
        return Outcome("allow")
    behavior = decision.get("behavior")
    if type(behavior) is not str or behavior not in BEHAVIORS:
        return None
    if behavior == "deny":
        reason = decision.get("reason")
        if reason is not None and type(reason) is not str:
            return None
        reason = reason.strip() if reason else ""
        return Outcome("deny", reason=capped(reason) if reason else None)
    if behavior == "modify":
        new_input = decision.get("input")
        return Outcome("modify", input=new_input) if type(new_input) is dict else None
    if behavior == "context":
        context = decision.get("context")
        if type(context) is not str or not context.strip():
            return None
        return Outcome("context", context=capped(context.strip()))
    return Outcome("allow")


def json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if type(value) is dict else None


def decoded(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()


def assert_command_contract(returncode: int, stdout: bytes, stderr: bytes, outcome: Outcome) -> None:
    """The command rows of the spec, one by one."""
    assert_outcome(outcome)
    if returncode == 0:
        text = decoded(stdout)
        decision = json_object(text) if text else None
        if not text:
            assert outcome == Outcome("allow")
        elif decision is None:
            assert outcome == Outcome("context", context=capped(text))
        elif not claude_shaped(decision):
            expected = expected_from_object(decision)
            if expected is not None:
                assert outcome == expected
            else:  # an invalid JSON decision fails open, recorded
                assert outcome.behavior == "allow" and outcome.error, outcome
    elif returncode == 2:
        reason = decoded(stderr) or decoded(stdout)
        assert outcome == Outcome("deny", reason=capped(reason) if reason else None)
    else:
        assert outcome.behavior == "allow" and outcome.error
        head = "killed by " if returncode < 0 else f"exited with status {returncode}"
        assert outcome.error.startswith(head), outcome.error[:200]
        tail = decoded(stderr)[-500:]
        assert outcome.error.endswith(tail), outcome.error[-200:]
        assert len(outcome.error) <= 200 + len(tail)


def first_block(text: str) -> str | None:
    for line in text.split("\n"):
        stripped = line.lstrip(" \t")
        if stripped.startswith("BLOCK:"):
            return stripped[len("BLOCK:"):]
    return None


def text_fallback(text: str) -> Outcome:
    """Final text that is no decision: a BLOCK: line denies, anything else is context."""
    if not text:
        return Outcome("allow")
    block = first_block(text)
    if block is not None:
        reason = block.strip()
        return Outcome("deny", reason=capped(reason) if reason else None)
    return Outcome("context", context=capped(text))


huge_text = st.builds(
    lambda count, unit: unit * count,
    st.integers(CONTEXT_CAP - 3, 3 * CONTEXT_CAP),
    st.sampled_from(["a", "é", "\U0001f642", "ab ", "x\n", " "]),
)
any_text = st.one_of(text_values, text_values, huge_text, st.sampled_from(["", "  ", "\n", "\t x \r\n"]), json_values)
any_input = st.one_of(st.dictionaries(short_keys, json_values, max_size=4), json_values)


@st.composite
def decision_objects(draw: st.DrawFn) -> dict[str, Any]:
    """JSON objects with random behaviors and random field types (most of them invalid)."""
    decision: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        decision["behavior"] = draw(
            st.one_of(st.sampled_from(BEHAVIORS), st.sampled_from(["Deny", "block", "", "ALLOW", "modify "]), json_values)
        )
    for key, strategy in (("reason", any_text), ("input", any_input), ("context", any_text)):
        if draw(st.booleans()):
            decision[key] = draw(strategy)
    decision.update(
        draw(st.dictionaries(short_keys.filter(lambda k: k not in ("behavior", "reason", "input", "context")), json_values, max_size=2))
    )
    return dict(draw(st.permutations(list(decision.items()))))


@st.composite
def decision_texts(draw: st.DrawFn) -> str:
    text = json.dumps(draw(decision_objects()), ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    around = st.sampled_from(["", " ", "\n", "\r\n", "\t\n "])
    return draw(around) + text + draw(around)


prose_line = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="`{\r\n"), max_size=50)
prose = st.lists(prose_line, max_size=5).map("\n".join)
block_line = st.builds(
    lambda indent, reason: f"{indent}BLOCK:{reason}",
    st.sampled_from(["", " ", "\t", "  \t"]),
    st.one_of(prose_line, huge_text.map(lambda t: t.replace("\n", " "))),
)
return_codes = st.one_of(st.sampled_from([-9, 0, 1, 2, 126, 127]), st.integers(-300, 300), st.integers(-(2**63), 2**63))
any_stdout = st.one_of(
    st.binary(max_size=2048),
    st.text(max_size=500).map(str.encode),
    decision_texts().map(str.encode),
    prose.map(str.encode),
    huge_text.map(str.encode),
    st.builds(lambda text, n: text.encode()[:n], decision_texts(), st.integers(0, 400)),
)
any_stderr = st.one_of(
    st.just(b""),
    st.binary(max_size=1024),
    st.text(max_size=200).map(str.encode),
    st.just(b"bash: /x/hook.sh: /usr/bin/nope: bad interpreter: No such file or directory\n"),
    huge_text.map(str.encode),
)


@pytest.mark.timeout(TIMEOUT)
@sized(400, 5000)
@given(returncode=return_codes, stdout=any_stdout, stderr=any_stderr)
def test_command_output_of_any_bytes_is_a_decision_or_a_recorded_error(
    returncode: int, stdout: bytes, stderr: bytes
) -> None:
    outcome = outcome_from_command(returncode, stdout, stderr)
    FIGURES["decision outputs fuzzed"] += 1
    assert_command_contract(returncode, stdout, stderr, outcome)


@pytest.mark.timeout(TIMEOUT)
@sized(300, 4000)
@given(text=st.one_of(st.text(max_size=2000), st.binary(max_size=2000).map(lambda b: b.decode("utf-8", "replace")),
                      huge_text, decision_texts(), prose))
def test_any_text_is_a_decision(text: str) -> None:
    """Final text (workflows, prompts) and exit-0 stdout, as text: never an exception."""
    final = outcome_from_final_text(text)
    assert_outcome(final)
    # Text is always some decision (allow, deny, context, modify), but for a JSON object
    # that cannot be read as one (a repeated key, NaN): that is unparseable, under on_error.
    assert final.error is None or final.failure == "unparseable", final
    assert_outcome(outcome_from_text(text))
    FIGURES["decision outputs fuzzed"] += 2


@st.composite
def final_texts(draw: st.DrawFn) -> tuple[str, Outcome]:
    """Structured final text and what the contract makes of it."""
    shape = draw(st.sampled_from(["prose", "block", "json", "fenced", "two fences"]))
    if shape in ("prose", "block"):
        lines = draw(st.lists(prose_line, max_size=5))
        if shape == "block":
            lines.insert(draw(st.integers(0, len(lines))), draw(block_line))
        text = "\n".join(lines)
        return text, text_fallback(text.strip())
    decision = draw(decision_objects())
    assume(not claude_shaped(decision))
    body = json.dumps(decision, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2])))
    expected = expected_from_object(decision)
    if shape == "json":
        text = draw(st.sampled_from(["", " ", "\r\n"])) + body + draw(st.sampled_from(["", "\n", " \r\n"]))
        return text, expected or text_fallback(text.strip())
    tag = draw(st.sampled_from(["json", "", "JSON", "js-on_1"]))
    before, after = draw(prose), draw(prose)
    fence = f"```{tag}\n{body}\n```"
    if shape == "two fences":
        fence += f"\n{fence}"
        expected = None
    text = (f"{before}\n" if before else "") + fence + (f"\n{after}" if after else "")
    return text, expected or text_fallback(text.strip())


@pytest.mark.timeout(TIMEOUT)
@sized(400, 5000)
@given(case=final_texts())
def test_structured_final_text_decides_by_the_contract(case: tuple[str, Outcome]) -> None:
    text, expected = case
    outcome = outcome_from_final_text(text)
    FIGURES["decision outputs fuzzed"] += 1
    assert_outcome(outcome)
    assert outcome == expected


DECISION_EXAMPLES = [
    b'{ "behavior": "deny",    "reason": "Destructive command blocked." }',
    b'{ "behavior": "modify",  "input": { "path": "safe.txt" } }',
    b'{ "behavior": "context", "context": "Note shown to the model." }',
    b'{ "behavior": "allow" }',
    b'```json\n{"behavior": "deny", "reason": "fenced"}\n```\n',
    b"Looks risky.\nBLOCK: force-pushing rewrites shared history\n",
    '{"behavior": "context", "context": "caf\u00e9 \U0001f642"}'.encode(),
]


@pytest.mark.timeout(TIMEOUT)
@pytest.mark.parametrize("example", DECISION_EXAMPLES, ids=lambda e: e[:24].decode("utf-8", "replace"))
def test_every_byte_prefix_of_a_decision(example: bytes) -> None:
    for size in range(len(example) + 1):
        prefix = example[:size]
        for returncode, stdout, stderr in ((0, prefix, b""), (2, b"", prefix), (2, prefix, b""), (1, b"", prefix), (-9, prefix, prefix)):
            assert_command_contract(returncode, stdout, stderr, outcome_from_command(returncode, stdout, stderr))
        assert_outcome(outcome_from_final_text(prefix.decode("utf-8", "replace")))
        FIGURES["decision outputs fuzzed"] += 6


def read_records(home: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted((home / "logs" / "hooks").glob("*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines()]
    return records


def write_printing_hook(home: Path, hook_id: str, returncode: int, stdout: bytes, stderr: bytes, event: str = "PreToolUse") -> None:
    """A real command hook that prints these bytes and exits with this code (-9: SIGKILL)."""
    directory = home / "hooks" / hook_id
    directory.mkdir(parents=True)
    (directory / "out.bin").write_bytes(stdout)
    (directory / "err.bin").write_bytes(stderr)
    end = "kill -9 $$" if returncode == -9 else f"exit {returncode}"
    command = f'cat "$HOOKBUS_HOOK_DIR/out.bin"; cat "$HOOKBUS_HOOK_DIR/err.bin" >&2; {end}'
    spec = {"trigger": {"event": event}, "mode": "sync", "blocking": EVENTS[event].can_block, "command": command}
    write_file(home, hook_id, "hook.json", json.dumps(spec).encode())


@pytest.mark.timeout(TIMEOUT)
@sized(6, 40)
@given(runs=st.lists(
    st.tuples(st.one_of(st.sampled_from([0, 0, 1, 2, 2, 126, 127, -9]), st.integers(0, 255)), any_stdout, any_stderr),
    min_size=1, max_size=6,
))
def test_real_command_hooks_record_a_decision_or_an_error(runs: list[tuple[int, bytes, bytes]]) -> None:
    with quiet(), fuzz_home() as home:
        for index, (returncode, stdout, stderr) in enumerate(runs):
            write_printing_hook(home, f"c{index}", returncode, stdout, stderr)
        with HookBus(home) as bus:
            assert len(bus.snapshot.hooks) == len(runs) and bus.problems == ()
            decision = bus.emit("PreToolUse", {"tool_name": "fuzz", "tool_input": {}})
        records = read_records(home)
    predicted = {f"c{index}": outcome_from_command(*run) for index, run in enumerate(runs)}
    for hook_id, outcome in predicted.items():
        assert_outcome(outcome)
        mine = [record for record in records if record["hook_id"] == hook_id]
        assert len(mine) == 1, (hook_id, records)
        record = mine[0]
        assert (record["status"], record["error"], record["decision"]) == (
            outcome.behavior, outcome.error, outcome.as_dict()
        )
    assert decision.behavior in BEHAVIORS
    if any(outcome.behavior == "deny" for outcome in predicted.values()):
        assert decision.behavior == "deny"
    FIGURES["decision outputs fuzzed"] += len(runs)


# -- regressions: library bugs this fuzzing found, each with its minimal reproduction --------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("name", "data"),
    [
        pytest.param(
            "hook.json", b'{"trigger": {"event": "Stop"}, "command": "true", "name": ' + b"1" * 4301 + b"}",
            id="json-int-over-4300-digits",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop}\ncommand: 'true'\nname: " + b"1" * 4301 + b"\n",
            id="yaml-int-over-4300-digits",
        ),
        pytest.param(
            "hook.json", json.dumps({"trigger": {"event": "PreToolUse", "matcher": "a{4294967296}"}, "command": "true"}).encode(),
            id="matcher-huge-repeat",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop}\ncommand: 'true'\n1: x\n", id="yaml-int-key",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop}\ncommand: 'true'\non: push\n", id="yaml-on-key",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop}\ncommand: 'true'\n~: x\n", id="yaml-null-key",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop, 3: x}\ncommand: 'true'\n", id="yaml-int-key-in-trigger",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop}\nworkflow: {steps: [{5: x}]}\n", id="yaml-int-key-in-step",
        ),
        pytest.param(
            "hook.yaml", b"trigger: {event: Stop}\nworkflow: {steps: [{bash: x}], 7: y}\n", id="yaml-int-key-in-workflow",
        ),
    ],
)
def test_regression_specs_that_crash_the_load(name: str, data: bytes, tmp_path: Path) -> None:
    """Was: HookBus() raised ValueError (digits), RecursionError or OverflowError (regexes) or
    TypeError (non-string YAML keys, which difflib choked on) instead of skipping the file."""
    home = make_home(tmp_path)
    write_anchor(home)
    write_file(home, "x", name, data)
    with quiet(), HookBus(home) as bus:
        assert_skipped(bus, "x", (name,), data.decode("utf-8", "replace"))
        assert_anchor_fires(bus)


@pytest.mark.timeout(60)
def test_regression_a_matcher_nested_5000_deep_loads(tmp_path: Path) -> None:
    """Was: HookBus() raised RecursionError from Python's re. RE2 parses deep nesting without
    running out of stack, so the pattern (groups around nothing) is valid: it matches "" only."""
    home = make_home(tmp_path)
    write_anchor(home)
    spec = {"trigger": {"event": "PreToolUse", "matcher": "(" * 5000 + ")" * 5000}, "mode": "sync", "command": "echo deep"}
    write_file(home, "x", "hook.json", json.dumps(spec).encode())
    with quiet(), HookBus(home) as bus:
        assert "x" in bus.snapshot.hooks and bus.problems == ()
        assert bus.emit("PreToolUse", {"tool_name": ""}).context == "deep"
        assert bus.emit("PreToolUse", {"tool_name": "x"}).behavior == "allow"
        assert_anchor_fires(bus)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"id": None}, id="id-null"),
        pytest.param({"timeout": None}, id="timeout-null"),
        pytest.param({"timeout": "\u0665s"}, id="timeout-arabic-indic-digit"),
        pytest.param({"timeout": "\uff15s"}, id="timeout-fullwidth-digit"),
    ],
)
def test_regression_loader_accepts_what_the_contract_refuses(changes: dict[str, Any], tmp_path: Path) -> None:
    """Was: null for id and timeout was taken as absent, and Python's \\d took non-ASCII
    digits in durations; the published schema refuses both."""
    home = make_home(tmp_path)
    write_file(home, "x", "hook.json", json.dumps({"trigger": {"event": "Stop"}, "command": "true", **changes}).encode())
    with quiet(), HookBus(home) as bus:
        assert_skipped(bus, "x", ("hook.json",))


@pytest.mark.timeout(60)
def test_regression_validate_survives_a_lone_surrogate_in_a_matcher(tmp_path: Path) -> None:
    """Was: the surrogate reached the regex error message raw, and `hookbus validate` died
    with UnicodeEncodeError. Now a lone surrogate is refused where the file is decoded."""
    home = make_home(tmp_path)
    write_anchor(home)
    write_file(home, "x", "hook.json", b'{"trigger": {"event": "PreToolUse", "matcher": "(?\\ud800)"}, "command": "true"}')
    assert_validate_names(run_validate(home), {"x": ("hook.json",)}, [ANCHOR_ID], "")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"command": "echo a\u0000b"}, id="nul-in-command"),
        pytest.param({"command": "echo \ud800"}, id="lone-surrogate-in-command"),
        pytest.param({"timeout": "9999999999h"}, id="timeout-of-a-million-years"),
        pytest.param({"timeout": "9" * 400 + "h"}, id="timeout-infinite"),
    ],
)
def test_regression_a_loaded_hook_runs_without_internal_errors(changes: dict[str, Any], tmp_path: Path) -> None:
    """Was: these specs loaded, and every fire failed inside the runner with "runner
    'command' raised ValueError/UnicodeEncodeError/OverflowError" and a traceback."""
    home = make_home(tmp_path)
    spec = {"trigger": {"event": "Stop"}, "mode": "sync", "command": "echo hi", **changes}
    write_file(home, "x", "hook.json", json.dumps(spec).encode())
    with quiet(), HookBus(home) as bus:
        if "x" not in bus.snapshot.hooks:  # refusing it at load is a fine answer
            assert_skipped(bus, "x", ("hook.json",))
            return
        bus.emit("Stop", {})
    (record,) = [r for r in read_records(home) if r["hook_id"] == "x"]
    assert_clean(record["error"] or "")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "stdout",
    [
        pytest.param(b'{"behavior": "deny", "reason": "no", "n": ' + b"1" * 4301 + b"}", id="int-over-4300-digits"),
        pytest.param(b'{"behavior": "deny", "reason": "no", "n": ' + b"[" * 5000 + b"]" * 5000 + b"}", id="nested-5000-deep"),
    ],
)
def test_regression_an_unparseable_json_decision_is_not_context(stdout: bytes) -> None:
    """Was: a JSON decision past Python's limits dropped the deny and put the raw JSON into
    the model's context. Now it fails open with the reason recorded."""
    outcome = outcome_from_command(0, stdout, b"")
    assert outcome.behavior == "deny" or (outcome.behavior == "allow" and outcome.error), outcome.behavior


@pytest.mark.timeout(60)
def test_regression_a_lone_surrogate_in_a_decision_is_still_recorded(tmp_path: Path) -> None:
    """Was: the Decision held text that is not UTF-8, and the fire was missing from the audit
    log (its write failed). Now the surrogate becomes U+FFFD, as undecodable bytes do."""
    home = make_home(tmp_path)
    write_printing_hook(home, "x", 0, b'{"behavior": "context", "context": "a\\ud800b"}', b"")
    with quiet(), HookBus(home) as bus:
        decision = bus.emit("PreToolUse", {"tool_name": "t", "tool_input": {}})
        decision.context.encode("utf-8")  # type: ignore[union-attr]
    assert [r["status"] for r in read_records(home) if r["hook_id"] == "x"] == ["context"]


@pytest.mark.timeout(60)
def test_regression_the_audit_log_stays_json_after_a_nan_decision(tmp_path: Path) -> None:
    """Was: NaN was accepted in a decision and written to the audit log as `NaN`, not JSON.
    Now the command contract refuses it (the fire fails open, recorded), and a third-party
    runner's Outcome that holds NaN anyway is recorded as strict JSON."""
    from hookbus import HookCall, ParseContext, RunnerRegistration, hookimpl

    class NaNRunner:
        def parse(self, key: str, value: object, context: ParseContext) -> object:
            return value

        def run(self, call: HookCall) -> Outcome:
            return Outcome("modify", input={"score": float("nan")})

    class NaNPlugin:
        @hookimpl
        def hookbus_register_runners(self, register: RunnerRegistration) -> None:
            register.add("nan", NaNRunner())

    home = make_home(tmp_path)
    write_printing_hook(home, "x", 0, b'{"behavior": "modify", "input": {"path": NaN}}', b"")
    write_file(home, "y", "hook.json", json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "nan": 1}).encode())
    with quiet(), HookBus(home, plugins=[NaNPlugin()]) as bus:
        bus.emit("PreToolUse", {"tool_name": "t", "tool_input": {}})
    lines = [line for path in (home / "logs" / "hooks").glob("*.jsonl") for line in path.read_text().splitlines()]
    records = {entry["hook_id"]: entry for entry in (json.loads(line, parse_constant=_no_constants) for line in lines)}
    assert records["x"]["status"] == "allow" and "NaN is not valid JSON" in records["x"]["error"]
    assert records["y"]["decision"] == {"behavior": "modify", "input": {"score": "nan"}}


@pytest.mark.timeout(60)
def test_regression_a_hook_in_a_non_utf8_directory_is_recorded_or_refused(tmp_path: Path) -> None:
    """Was: it loaded and fired, but no fire was recorded (the id could not be written)."""
    home = make_home(tmp_path)
    raw_dir = os.fsencode(home / "hooks") + b"/\xffx"
    os.mkdir(raw_dir)
    with open(raw_dir + b"/hook.json", "wb") as handle:
        handle.write(json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "command": "echo hi"}).encode())
    hook_id = os.fsdecode(b"\xffx")
    with quiet(), HookBus(home) as bus:
        if hook_id not in bus.snapshot.hooks:
            assert [p for p in bus.problems if p.hook_id == hook_id]
            return
        bus.emit("Stop", {})
    assert [r for r in read_records(home) if r["hook_id"] == hook_id]


@pytest.mark.timeout(60)
def test_regression_a_truncated_hook_yaml_is_not_registered(tmp_path: Path) -> None:
    """Was: a hook.yaml cut half-way (a write in progress) can be a complete YAML document,
    and loaded as another hook; now a hook.yaml must end with a newline."""
    home = make_home(tmp_path)
    full = b"trigger:\n  event: Stop\nmode: sync\ncommand: echo one two three\n"
    write_file(home, "x", "hook.yaml", full[: full.index(b" two")])
    with quiet(), HookBus(home) as bus:
        assert "x" not in bus.snapshot.hooks, bus.snapshot.hooks["x"].spec.action
