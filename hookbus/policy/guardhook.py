"""The built-in home guard as a hook: a sync, blocking, fail-closed PreToolUse hook of
tier ``builtin`` that denies an agent's tool call writing into the hookbus home or the
managed directory (``hookbus.policy.homeguard`` decides which calls do).

It is a hook like any other where people look (``list``, ``explain``, ``test``,
``replay``), so that what denied a call is never a mystery; it runs in the bus's own
process, on the emitting thread, and only its denies are recorded (an allow, on every
guarded tool call, would be a log line that says nothing).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from hookbus.decision import Outcome
from hookbus.matching import compile_matcher
from hookbus.policy.homeguard import HomeGuard, ProtectedPlace
from hookbus.records import utc_timestamp
from hookbus.spec import HookSpec, Trigger
from hookbus.runners import Hook

if TYPE_CHECKING:
    from hookbus.home import Home
    from hookbus.merge import Run
    from hookbus.runners import HookCall, ParseContext
    from hookbus.settings import Settings

#: The guard's hook id: no hook directory of the user's may take it (the loader refuses it).
GUARD_ID = "hookbus:protect_home"
#: The key that turns it off, in the user's settings.json.
SETTING = "protect_home"
GUARD_TIMEOUT_SECONDS = 5.0


class HomeGuardRunner:
    """Runs the guard's check for one call: deny, with a reason that says what the call
    would have done, what the guard protects, and how to turn it off."""

    def __init__(self, guard: HomeGuard, how_to_turn_off: str) -> None:
        self.guard = guard
        self.how_to_turn_off = how_to_turn_off

    def parse(self, key: str, value: object, context: ParseContext) -> object:
        return value

    def run(self, call: HookCall) -> Outcome:
        return self.decide(call.envelope)

    def decide(self, envelope: Mapping[str, Any]) -> Outcome:
        try:
            found = self.guard.check(envelope)
        except Exception as exc:  # the guard's own bug must not let the call through
            found = f"the call could not be checked ({type(exc).__name__}: {exc})"
        if found is None:
            return Outcome()
        reason = f"{found}: a hook written there runs on the next event, outside the agent's sandbox. {self.how_to_turn_off}"
        return Outcome("deny", reason=reason)


def run_inline(hook: Hook, envelope: Mapping[str, Any]) -> Run:
    """The guard's run (``hook`` is ``guard_hook``'s), on the emitting thread: microseconds,
    where a thread of its own would cost more than the check. Its start is written out only
    for a deny: an allow is never recorded (``Merged.records``), and the guard runs on
    every guarded call."""
    wall, started = time.time(), time.perf_counter()
    runner = hook.runner
    assert isinstance(runner, HomeGuardRunner)
    outcome = runner.decide(envelope)
    duration = time.perf_counter() - started
    return hook, outcome, utc_timestamp(wall) if outcome.behavior != "allow" else "", duration


def places(home: Home, managed_root: str | None) -> list[ProtectedPlace]:
    """What the guard protects: the home, with the spellings a shell reads as it, and the
    managed directory when there is one."""
    root = str(home.root)
    spellings: list[str] = []
    user_home = os.path.expanduser("~")
    if user_home not in ("", "~", "/") and (root == user_home or root.startswith(user_home + os.sep)):
        rest = root[len(user_home):]
        spellings += [f"~{rest}", f"$HOME{rest}", f"${{HOME}}{rest}"]
    found = [ProtectedPlace("the hookbus home", root, ("VIX_HOME",), tuple(spellings))]
    if managed_root is not None:
        found.append(ProtectedPlace("the managed directory", managed_root, ("HOOKBUS_MANAGED_DIR",)))
    return found


def guard_hook(home: Home, managed_root: str | None, settings: Settings) -> Hook | None:
    """The guard's hook, or None when settings.json turns it off."""
    if not settings.protect_home:
        return None
    if SETTING in settings.managed_keys:
        how = (
            f'The organization\'s managed settings.json sets "{SETTING}": true, so it stays on; '
            "stage a hook outside the home and copy it in with `hookbus install DIR`."
        )
    else:
        how = (
            f'To let agents write there, set "{SETTING}": false in {home.settings_path} (an agent '
            "cannot: that file is inside the home); or have it stage the hook outside the home, "
            "and copy it in with `hookbus install DIR` once reviewed."
        )
    runner = HomeGuardRunner(HomeGuard(places(home, managed_root)), how)
    # vixd's names first: what a user reads in `hookbus list`; Claude Code's native ones after.
    vix_names = [name for name in ("write_file", "edit_file", "bash") if name in HomeGuard.TOOLS]
    matcher = "|".join([*vix_names, *sorted(HomeGuard.TOOLS - set(vix_names))])
    spec = HookSpec(
        id=GUARD_ID,
        trigger=Trigger("PreToolUse", matcher),
        action_key="builtin",
        action=SETTING,
        name="hookbus's home guard: denies tool calls that write into the home or the managed directory",
        mode="sync",
        blocking=True,
        timeout="5s",
        created_by="hookbus",
        on_error="deny",
    )
    return Hook(
        spec=spec,
        directory=Path(home.root),
        source=Path(home.settings_path),
        matcher=compile_matcher(matcher),
        timeout=GUARD_TIMEOUT_SECONDS,
        runner=runner,
        runner_plugin="hookbus",
        tier="builtin",
    )
