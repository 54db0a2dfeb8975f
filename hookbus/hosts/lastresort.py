"""The answer of a host bridge when hookbus cannot decide at all, not even in-process.

A bridge that cannot read the envelope (so it does not know the event), or whose own bus
cannot start (no memory, no descriptors), must still not turn that into the host's allow:
Claude Code and Gemini CLI run the tool on anything but a deny. It answers as the home's
hooks would answer for a failure: a deny when a hook that could fire is fail-closed
(``"on_error": "deny"``), else no opinion, with the reason on stderr either way.

Which hooks are fail-closed is read from their files alone, with as little as can fail:
the standard library's json, one file open at a time. When even that cannot be read, the
answer is deny: a fail-closed hook cannot be ruled out.
"""

from __future__ import annotations

import json
import os

from hookbus.policy.managed import managed_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Spec files read at most (the loader's own cap): one bigger is taken as fail-closed.
_MAX_SPEC_BYTES = 256 * 1024
#: The events a hook's deny can take effect on, and so the only ones a fail-closed hook has.
BLOCKING_EVENTS = ("PreToolUse", "UserPromptSubmit", "PermissionRequest")
#: The event of the home guard (hookbus.policy.guardhook), a fail-closed hook of its own.
GUARD_EVENT = "PreToolUse"


def fail_closed_hooks(home: str, event: str | None) -> list[str] | None:
    """The ids of the home's hooks that are fail-closed and fire on ``event`` (on any event
    when None), judged from their files: a file that cannot be read or parsed, or a YAML
    one that mentions ``on_error`` and ``deny``, counts as one. None when the hooks
    directory itself cannot be listed."""
    if event is not None and event not in BLOCKING_EVENTS:
        return []
    hooks_dir = os.path.join(home, "hooks")
    try:
        names = sorted(os.listdir(hooks_dir))
    except FileNotFoundError:
        return []
    except OSError:
        return None
    found = []
    for name in names:
        if name.startswith("."):
            continue
        verdict = _fails_closed(os.path.join(hooks_dir, name), event)
        if verdict:
            found.append(name)
    return found


def _fails_closed(directory: str, event: str | None) -> bool:
    for spec_name in ("hook.json", "hook.yaml"):
        path = os.path.join(directory, spec_name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError:
            return True  # there, but unreadable: cannot be ruled out
        try:
            data = os.read(fd, _MAX_SPEC_BYTES + 1)
        except OSError:
            return True
        finally:
            os.close(fd)
        if len(data) > _MAX_SPEC_BYTES:
            return True
        text = data.decode("utf-8", "replace")
        if spec_name == "hook.yaml":
            return "on_error" in text and "deny" in text
        try:
            spec: Any = json.loads(text)
        except ValueError:
            return "on_error" in text and "deny" in text
        if not isinstance(spec, dict) or spec.get("on_error") != "deny" or spec.get("enabled") is False or spec.get("shadow") is True:
            return False  # a shadow hook never enforces
        trigger = spec.get("trigger")
        hook_event = trigger.get("event") if isinstance(trigger, dict) else None
        return event is None or hook_event == event
    return False


def guard_event(event: str | None) -> bool:
    """Whether the home guard could fire on ``event`` (None: an event not known)."""
    return event is None or event == GUARD_EVENT


def home_guard_on(home: str) -> bool:
    """Whether the home guard is on, from the settings files alone: the managed
    settings.json's ``protect_home`` wins, then the user's; on when neither says, or when a
    file that exists cannot be read (it cannot be ruled out)."""
    for path in (os.path.join(managed_root()[0], "settings.json"), os.path.join(home, "settings.json")):
        try:
            with open(path, "rb") as file:
                data = file.read(_MAX_SPEC_BYTES + 1)
            settings: Any = json.loads(data)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return True
        if isinstance(settings, dict) and "protect_home" in settings:
            return settings["protect_home"] is not False
    return True


def last_resort(home: str, event: str | None, why: str) -> tuple[bool, str]:
    """Whether to deny, and the reason to give, when hookbus could not decide (``why``): the
    home's and the managed directory's fail-closed hooks, and the home guard, deny."""
    if guard_event(event) and home_guard_on(home):
        return True, (
            f"hookbus could not decide ({why}), so its home guard could not check whether the call writes "
            'into the hookbus home; denied to be safe ("protect_home": false in settings.json turns the guard off)'
        )
    hooks = fail_closed_hooks(home, event)
    managed = fail_closed_hooks(managed_root()[0], event)
    if hooks is None or managed is None:
        return True, f"hookbus could not decide ({why}), nor read {home}/hooks to rule out a fail-closed hook; denied to be safe"
    hooks += [f"managed:{hook}" for hook in managed]
    if hooks:
        listed = ", ".join(repr(hook) for hook in hooks[:5]) + (", ..." if len(hooks) > 5 else "")
        return True, f"hookbus could not decide ({why}); fail-closed hook(s) {listed} deny for a failure"
    return False, f"hookbus could not decide ({why}); no fail-closed hook could fire, so it fails open"
