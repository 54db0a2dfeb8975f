"""A hook's fixtures: ``hooks/<id>/tests/*.json``, each an envelope and the decision
expected for it, run by ``hookbus test`` and ``hookbus.testing.run_fixtures``.

A fixture file is one object::

    {"event": "PreToolUse", "envelope": {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}},
     "expect": {"behavior": "deny", "reason": "rm -rf"}}

- ``expect`` is part of a hookbus decision: ``behavior``, ``reason`` and ``context`` (each
  matched as a substring), ``input`` (matched exactly), and the extras ``permission``,
  ``continue_with`` and ``halt`` (matched exactly). Every key given must match.
- The fixture runs its own hook alone; with ``"merged": true``, every hook of the home, and
  the merged decision is checked.
- With ``"dialect": "claude-code"``, ``event`` and ``envelope`` are Claude Code's
  (``SessionStart``, ``Write`` with ``file_path``), translated as the bridge translates them.

Fixture files decide what runs as much as hook.json does, so they are read by the same
rules: a regular file (no link, no FIFO), at most 256 KiB, owned by you or root and not
writable by group or others. Their mistakes are path-qualified, as hook.json's are.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hookbus.errors import SpecError
from hookbus.eventnames import EVENT_NAMES, unknown_event_message
from hookbus.files import decode_document, read_capped
from hookbus.permissions import loose_refusal, owner_refusal

if TYPE_CHECKING:
    from hookbus.bus import HookBus

#: Where a hook's fixtures live, in its directory.
TESTS_DIR = "tests"
#: The keys of a fixture file, and those of its ``expect``.
FIXTURE_KEYS = ("event", "envelope", "expect", "merged", "dialect", "description")
EXPECT_KEYS = ("behavior", "reason", "context", "input", "permission", "continue_with", "halt")
#: Matched as substrings; the others exactly.
SUBSTRING_KEYS = ("reason", "context")
BEHAVIORS = ("allow", "deny", "modify", "context")
DIALECTS = ("claude-code", "codex")


@attrs.frozen
class Fixture:
    hook_id: str
    #: The file, relative to the home (``hooks/guard/tests/deny.json``).
    path: str
    #: vixd's event and envelope (a Claude Code fixture's already translated).
    event: str
    envelope: dict[str, Any]
    expect: dict[str, Any]
    merged: bool = False
    description: str = ""


@attrs.frozen
class FixtureResult:
    fixture: Fixture | None
    #: The hook and the file, also when the file could not be read.
    hook_id: str
    path: str
    ok: bool
    expected: dict[str, Any] | None
    got: dict[str, Any] | None
    #: What differs (one line each), or why the fixture could not run.
    problems: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "hook": self.hook_id, "fixture": self.path, "ok": self.ok, "expected": self.expected, "got": self.got,
            "problems": list(self.problems),
        }


def fixture_files(home_root: Path, hook_id: str) -> list[Path]:
    """The fixture files of a hook, by name."""
    directory = home_root / "hooks" / hook_id / TESTS_DIR
    try:
        names = sorted(name for name in os.listdir(directory) if name.endswith(".json") and not name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [directory / name for name in names]


def load_fixture(home_root: Path, hook_id: str, path: Path) -> Fixture:
    """The fixture in ``path``; SpecError (with its location) when it is not one."""
    data, info = read_capped(path)
    refusal = owner_refusal(info) or loose_refusal(info)
    if refusal is not None:
        raise SpecError(f"{refusal}, so another user could change what it checks: fix its owner or mode", None)
    document = decode_document(data, "json")
    if not isinstance(document, dict):
        raise SpecError(f"expected an object, got {type(document).__name__}", "$")
    for key in document:
        if key not in FIXTURE_KEYS:
            raise SpecError(f"unknown field {key!r} (fields: {', '.join(FIXTURE_KEYS)})", "$")
    dialect = document.get("dialect")
    if dialect is not None and dialect not in DIALECTS:
        raise SpecError(f"unknown dialect {dialect!r}; those there are: claude-code, codex", "$.dialect")
    event = document.get("event")
    if not isinstance(event, str):
        raise SpecError("event is missing, or not a string", "$.event")
    envelope = document.get("envelope", {})
    if not isinstance(envelope, dict):
        raise SpecError("envelope must be an object", "$.envelope")
    if dialect in DIALECTS:
        event, envelope = _from_claude_code(event, envelope, dialect)
    elif event not in EVENT_NAMES:
        raise SpecError(unknown_event_message(event), "$.event")
    expect = document.get("expect")
    if not isinstance(expect, dict) or not expect:
        raise SpecError("expect must be an object with at least one of " + ", ".join(EXPECT_KEYS), "$.expect")
    for key, value in expect.items():
        where = f"$.expect.{key}"
        if key not in EXPECT_KEYS:
            raise SpecError(f"unknown field {key!r} (fields: {', '.join(EXPECT_KEYS)})", "$.expect")
        if key == "behavior" and value not in BEHAVIORS:
            raise SpecError(f"behavior must be one of {', '.join(BEHAVIORS)}, got {value!r}", where)
        if key in SUBSTRING_KEYS and not isinstance(value, str):
            raise SpecError(f"{key} must be a string (matched as a substring)", where)
        if key == "input" and not isinstance(value, dict):
            raise SpecError("input must be an object (matched exactly)", where)
    merged = document.get("merged", False)
    if not isinstance(merged, bool):
        raise SpecError("merged must be true or false", "$.merged")
    description = document.get("description", "")
    if not isinstance(description, str):
        raise SpecError("description must be a string", "$.description")
    return Fixture(hook_id, str(path.relative_to(home_root)), event, envelope, dict(expect), merged, description)


def _from_claude_code(event: str, envelope: dict[str, Any], dialect: str = "claude-code") -> tuple[str, dict[str, Any]]:
    """Claude Code's (Codex CLI's) event and envelope as the bridge turns them into vixd's."""
    from hookbus.dialects import claude_names, codex_names
    from hookbus.dialects.claude_names import envelope_to_vix

    codex = dialect == "codex"
    events = codex_names.VIX_EVENT if codex else claude_names.VIX_EVENT
    vix_event = events.get(event)
    if vix_event is None:
        known = ", ".join(sorted(events))
        host = "Codex CLI" if codex else "Claude Code"
        raise SpecError(f"{event!r} is not a {host} event hookbus takes; those are {known}", "$.event")
    names = codex_names.CODEX_TOOLS if codex else claude_names.DEFAULT_NAMES
    return vix_event, envelope_to_vix({**envelope, "hook_event_name": event}, names)


def fixture_problems(home_root: Path, hook_id: str) -> list[str]:
    """What is wrong with the fixture files of a hook, one line each (``hookbus validate``)."""
    problems = []
    for path in fixture_files(home_root, hook_id):
        try:
            load_fixture(home_root, hook_id, path)
        except SpecError as exc:
            where = f" @ {exc.location}" if exc.location else ""
            problems.append(f"{path.relative_to(home_root)}: {exc.message}{where}")
    return problems


def compare(expect: dict[str, Any], got: dict[str, Any]) -> list[str]:
    """What of ``expect`` the decision ``got`` does not match, one line each."""
    differences = []
    for key, wanted in expect.items():
        value = got.get(key, "allow" if key == "behavior" else None)
        if key in SUBSTRING_KEYS:
            matched = isinstance(value, str) and wanted in value
            how = "to contain"
        else:
            matched = value == wanted
            how = "to be"
        if not matched:
            differences.append(f"expected {key} {how} {wanted!r}, got {value!r}")
    return differences


def run_fixtures(bus: HookBus, hook_ids: list[str] | None = None) -> list[FixtureResult]:
    """Every fixture of the home's hooks (of ``hook_ids`` only, when given), run through
    ``bus.test_fire``, in hook and file order. A hook that is not loaded, or a fixture
    file that cannot be read, is a failed result saying why."""
    root = Path(bus.home.root)
    snapshot = bus.snapshot
    # A hook that did not load, and has fixtures, fails them: it would not run at all.
    broken = {problem.hook_id: str(problem) for problem in snapshot.problems if problem.hook_id is not None and not problem.kept_last_good}
    if hook_ids is not None:
        ids = hook_ids
    else:
        ids = sorted({*snapshot.hooks, *(hook_id for hook_id in broken if fixture_files(root, hook_id))})
    results = []
    for hook_id in ids:
        files = fixture_files(root, hook_id)
        if hook_id not in snapshot.hooks:
            why = broken.get(hook_id) or f"hooks/{hook_id} is not a hook of {root}"
            results.append(FixtureResult(None, hook_id, f"hooks/{hook_id}", False, None, None, (f"the hook did not load: {why}",)))
            continue
        for path in files:
            shown = str(path.relative_to(root))
            try:
                fixture = load_fixture(root, hook_id, path)
            except SpecError as exc:
                where = f" @ {exc.location}" if exc.location else ""
                results.append(FixtureResult(None, hook_id, shown, False, None, None, (f"{shown}: {exc.message}{where}",)))
                continue
            results.append(run_fixture(bus, fixture))
    return results


def run_fixture(bus: HookBus, fixture: Fixture) -> FixtureResult:
    try:
        decision = bus.test_fire(fixture.event, fixture.envelope, hook_id=None if fixture.merged else fixture.hook_id)
    except Exception as exc:  # an envelope the bus refuses, a closed bus
        return FixtureResult(fixture, fixture.hook_id, fixture.path, False, fixture.expect, None, (f"could not run: {exc}",))
    got = decision.as_dict()
    differences = compare(fixture.expect, got)
    return FixtureResult(fixture, fixture.hook_id, fixture.path, not differences, fixture.expect, got, tuple(differences))
