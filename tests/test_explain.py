"""``hookbus explain`` and ``HookBus.explain``: for one envelope, every hook of the home, why
it did or did not fire, what the ones that ran said, how they merged, and the decision.

Every reason a hook can fail to fire has a test, through the library and the command line.
"""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import atomic_write, read_log, wait_until
from hookbus import HookBus
from hookbus.errors import EnvelopeError, UnknownEventError
from hookbus.explain import ASYNC, DISABLED, KILL_SWITCH, LOAD_ERROR, MATCHED, MATCHER, NOT_BLOCKING, OTHER_EVENT, RECURSION_GUARD

pytestmark = pytest.mark.timeout(60)

Writer = Callable[..., Path]
WRITE = {"tool_name": "write_file", "tool_input": {"path": ".env"}}


def verdicts(bus: HookBus, envelope: dict[str, Any] = WRITE, event: str = "PreToolUse", dry_run: bool = True) -> dict[str, Any]:
    return {verdict.hook_id: verdict for verdict in bus.explain(event, envelope, dry_run=dry_run).hooks}


def explain_cli(home: Path, *arguments: str, input: str = json.dumps(WRITE), env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "explain", "PreToolUse", "--home", str(home), *arguments],
        input=input, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {}), "NO_COLOR": "1"},
    )


# -- every reason a hook does not fire --------------------------------------------------------


def test_the_matcher_says_the_field_and_the_value_it_was_tried_on(make_bus: Callable[..., HookBus], write_hook: Writer) -> None:
    write_hook("bash-only", matcher="bash", mode="sync", command="exit 0")
    verdict = verdicts(make_bus())["bash-only"]
    assert (verdict.status, verdict.runs) == (MATCHER, False)
    assert verdict.detail == "matcher 'bash' did not match tool_name 'write_file'"
    missing = verdicts(make_bus(), {"tool_input": {}})["bash-only"]
    assert missing.detail == "matcher 'bash' did not match no tool_name in the envelope"


def test_another_event(make_bus: Callable[..., HookBus], write_hook: Writer) -> None:
    write_hook("after", event="PostToolUse", command="exit 0")
    verdict = verdicts(make_bus())["after"]
    assert (verdict.status, verdict.detail) == (OTHER_EVENT, "other event: it is a PostToolUse hook")


def test_disabled(make_bus: Callable[..., HookBus], write_hook: Writer) -> None:
    write_hook("off", enabled=False, command="exit 0")
    assert verdicts(make_bus())["off"].status == DISABLED


def test_a_file_that_does_not_load(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path) -> None:
    write_hook("typo", command="exit 0", blockng=True)
    verdict = verdicts(make_bus())["typo"]
    assert verdict.status == LOAD_ERROR and "unknown field 'blockng'" in (verdict.load_error or "")


def test_a_file_kept_at_its_last_good_version_still_matches_and_says_so(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path) -> None:
    path = write_hook("guard", matcher="write_file", mode="sync", blocking=True, command="exit 2")
    bus = make_bus(watch=True)
    generation = bus.generation
    atomic_write(path, '{"trigger": ')
    wait_until(bus, lambda: bus.generation > generation and any(p.kept_last_good for p in bus.problems))
    verdict = verdicts(bus)["guard"]
    assert verdict.status == MATCHED
    assert "last good version is in effect" in verdict.detail and verdict.load_error


def test_the_kill_switch_in_settings_and_in_the_environment(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_hook("guard", mode="sync", blocking=True, command="exit 2")
    (home / "settings.json").write_text(json.dumps({"features": {"hooks": False}}))
    explanation = make_bus().explain("PreToolUse", WRITE)
    assert explanation.guard and explanation.guard.startswith(f"{KILL_SWITCH}: settings.json")
    assert explanation.hooks[0].status == KILL_SWITCH
    assert explanation.decision is not None and explanation.decision.behavior == "allow"
    (home / "settings.json").unlink()
    monkeypatch.setenv("VIX_DISABLE_HOOKS", "1")
    assert "VIX_DISABLE_HOOKS" in (make_bus().explain("PreToolUse", WRITE, dry_run=True).guard or "")


def test_the_recursion_guard(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path) -> None:
    write_hook("guard", mode="sync", blocking=True, command='touch "$HOOKBUS_HOOK_DIR/ran"; exit 2')
    explanation = make_bus().explain("PreToolUse", {**WRITE, "origin": "vix"})
    assert explanation.hooks[0].status == RECURSION_GUARD and "origin" in (explanation.guard or "")
    assert explanation.decision is not None and explanation.decision.behavior == "allow"
    assert not (home / "hooks" / "guard" / "ran").exists()


def test_matched_hooks_say_how_they_take_part(make_bus: Callable[..., HookBus], write_hook: Writer) -> None:
    write_hook("a-blocking", mode="sync", blocking=True, command="exit 0")
    write_hook("b-sync", mode="sync", command="exit 0")
    write_hook("c-async", command="exit 0")
    found = verdicts(make_bus())
    assert [found[name].status for name in ("a-blocking", "b-sync", "c-async")] == [MATCHED, NOT_BLOCKING, ASYNC]
    assert "cannot change the decision" in found["c-async"].detail
    stop = verdicts(make_bus(), {}, event="PostToolUse")
    assert stop["a-blocking"].status == OTHER_EVENT



def test_a_shadow_hook_is_said_to_run_and_be_recorded_and_never_to_enforce(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path) -> None:
    """Issue 28, item 21: explain called a shadow hook "blocking: it can deny or rewrite"
    (and a non-blocking one "it can add context"); it enforces nothing, not even context."""
    from hookbus.explain import SHADOW

    deny = """cat >/dev/null; echo '{"behavior": "deny", "reason": "too strict"}'"""
    write_hook("a-shadow", mode="sync", blocking=True, shadow=True, command=deny)
    write_hook("b-shadow", mode="sync", shadow=True, command="cat >/dev/null; echo careful")
    for verdict in (verdicts(make_bus())[name] for name in ("a-shadow", "b-shadow")):
        assert (verdict.status, verdict.runs, verdict.blocking, verdict.shadow) == (SHADOW, True, False, True)
        assert "never enforces" in verdict.detail and "recorded" in verdict.detail
        assert "can deny" not in verdict.detail and "can add context" not in verdict.detail
    explained = json.loads(explain_cli(home, "--json").stdout)
    hooks = {hook["id"]: hook for hook in explained["hooks"]}
    for name in ("a-shadow", "b-shadow"):
        assert (hooks[name]["status"], hooks[name]["blocking"], hooks[name]["shadow"], hooks[name]["matched"]) == ("shadow", False, True, True)
    assert hooks["hookbus:protect_home"]["shadow"] is False
    assert hooks["a-shadow"]["result"]["decision"] == {"behavior": "deny", "reason": "too strict"}
    assert explained["decision"] == {"behavior": "allow"}
    text = explain_cli(home).stdout
    assert re.search(r"a-shadow +shadow +matched; shadow: never enforces; it runs and is recorded", text), text
    for line in text.splitlines():
        if "-shadow" in line:
            assert "can deny" not in line and "can add context" not in line and "blocking" not in line, line
    dry = explain_cli(home, "--dry-run").stdout
    assert "async, not blocking or shadow would run" in dry
    listed = json.loads(subprocess.run(
        [sys.executable, "-m", "hookbus", "list", "--home", str(home), "--json"], capture_output=True, text=True, timeout=60,
    ).stdout)
    modes = {row["id"]: row["mode"] for row in listed["hooks"]}
    assert (modes["a-shadow"], modes["b-shadow"]) == ("shadow (sync blocking)", "shadow (sync)")


# -- what ran, and how it merged ---------------------------------------------------------------


def test_what_each_hook_said_and_how_the_decision_came_out(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path) -> None:
    write_hook("a-deny", matcher="write_file", mode="sync", blocking=True, command='cat >/dev/null; echo "no .env" >&2; exit 2')
    write_hook("b-modify", matcher="write_file", mode="sync", blocking=True, command="""cat >/dev/null; echo '{"behavior": "modify", "input": {"path": "x"}}'""")
    write_hook("c-context", matcher="write_file", mode="sync", command="cat >/dev/null; echo careful")
    write_hook("d-slow", matcher="write_file", mode="sync", timeout="200ms", command="sleep 5")
    explanation = make_bus().explain("PreToolUse", WRITE)
    results = {verdict.hook_id: verdict.run for verdict in explanation.hooks}
    assert results["a-deny"] is not None and results["a-deny"].outcome.behavior == "deny"
    assert results["c-context"] is not None and results["c-context"].outcome.context == "careful"
    assert results["d-slow"] is not None and results["d-slow"].outcome.error == "timed out after 200ms"
    assert explanation.decision is not None and explanation.decision.behavior == "deny"
    assert explanation.merge[0] == "deny wins: denied by 'a-deny'"
    assert "'b-modify': superseded by deny" in explanation.merge
    assert "'d-slow' failed open: timed out after 200ms" in explanation.merge
    assert "context from 'c-context'" in explanation.merge
    assert len(read_log(home)) == 4  # the fires are real and recorded


def test_the_input_check_is_explained(make_bus: Callable[..., HookBus], write_hook: Writer) -> None:
    class DenyList:
        from hookbus import hookimpl

        @hookimpl
        def hookbus_check_input(self, event: str, envelope: Any, new_input: Any) -> str | None:
            return "paths outside the project are refused"

    write_hook("rewrite", mode="sync", blocking=True, command="""cat >/dev/null; echo '{"behavior": "modify", "input": {"path": "/etc/passwd"}}'""")
    explanation = make_bus(plugins=[DenyList()]).explain("PreToolUse", WRITE)
    assert explanation.decision is not None and explanation.decision.behavior == "deny"
    assert any("denied by the input check: paths outside the project are refused" in line for line in explanation.merge)


def test_a_dry_run_runs_nothing(make_bus: Callable[..., HookBus], write_hook: Writer, home: Path) -> None:
    write_hook("guard", mode="sync", blocking=True, command='touch "$HOOKBUS_HOOK_DIR/ran"; exit 2')
    write_hook("later", command='touch "$HOOKBUS_HOOK_DIR/ran"')
    explanation = make_bus().explain("PreToolUse", WRITE, dry_run=True)
    assert explanation.decision is None and explanation.dry_run
    assert [verdict.run for verdict in explanation.hooks] == [None, None, None]  # the home guard's too
    assert not list(home.glob("hooks/*/ran")) and read_log(home) == []


def test_the_decision_is_the_one_emit_makes(make_bus: Callable[..., HookBus], write_hook: Writer) -> None:
    write_hook("a", mode="sync", blocking=True, command="cat >/dev/null; echo no >&2; exit 2")
    write_hook("b", mode="sync", command="cat >/dev/null; echo context")
    bus = make_bus()
    explained = bus.explain("PreToolUse", WRITE).decision
    assert explained is not None and explained.as_dict() == bus.emit("PreToolUse", WRITE).as_dict()


def test_bad_input_is_refused_as_emit_refuses_it(make_bus: Callable[..., HookBus]) -> None:
    bus = make_bus()
    with pytest.raises(UnknownEventError):
        bus.explain("PreTooluse", {})
    with pytest.raises(EnvelopeError):
        bus.explain("PreToolUse", [])  # type: ignore[arg-type]


# -- the command line ------------------------------------------------------------------------


def test_the_cli_prints_every_hook_and_the_decision(write_hook: Writer, home: Path) -> None:
    write_hook("guard", matcher="write_file", mode="sync", blocking=True, command='cat >/dev/null; echo "protected" >&2; exit 2')
    write_hook("bash-only", matcher="bash", mode="sync", command="exit 0")
    write_hook("typo", command="exit 0", blockng=True)
    result = explain_cli(home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("PreToolUse, tool_name = 'write_file'") and f"3 hooks in {home}, and hookbus's home guard" in lines[0]
    table = "\n".join(lines)
    assert "HOOK" in table and "VERDICT" in table and "WHY" in table
    assert re.search(r"bash-only +matcher", table) and "did not match tool_name 'write_file'" in table
    assert re.search(r"typo +load error", table) and "unknown field 'blockng'" in table
    assert re.search(r"hookbus:protect_home \[builtin\] +matched +matched; the home guard: it denies a call", table)
    assert "deny: protected" in table
    assert "merge: deny wins: denied by 'guard'" in lines
    assert lines[-2] == """decision: {"behavior": "deny", "reason": "hook 'guard' denied: protected"}"""
    assert lines[-1] == "as decided by this process (no hookbus serve answers for this home)"
    assert "\x1b" not in result.stdout  # NO_COLOR


def test_the_cli_json_and_dry_run(write_hook: Writer, home: Path) -> None:
    write_hook("guard", matcher="write_file", mode="sync", blocking=True, command='touch "$HOOKBUS_HOOK_DIR/ran"; exit 2')
    result = explain_cli(home, "--dry-run", "--json")
    document = json.loads(result.stdout)
    assert document["dry_run"] is True and document["decision"] is None
    assert document["field"] == "tool_name" and document["value"] == "write_file"
    (hook,) = [hook for hook in document["hooks"] if hook["tier"] == "user"]
    assert (hook["id"], hook["matched"], hook["status"], hook["result"]) == ("guard", True, "matched", None)
    assert not (home / "hooks" / "guard" / "ran").exists()
    text = explain_cli(home, "--dry-run")
    assert "dry run: nothing ran" in text.stdout and "(would run)" in text.stdout


def test_the_cli_on_an_empty_home_and_a_bad_event(home: Path) -> None:
    result = explain_cli(home)
    assert result.returncode == 0 and f"no hooks in {home}, and hookbus's home guard" in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "hookbus", "explain", "PreTooluse", "--home", str(home)],
        input="{}", capture_output=True, text=True, timeout=60,
    )
    assert bad.returncode == 1 and "unknown event 'PreTooluse'" in bad.stderr and "Traceback" not in bad.stderr
