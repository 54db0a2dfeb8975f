"""``--install-bridge --http URL``: Claude Code's ``"type": "http"`` hooks, posting to the
``POST /claude-code`` of a ``hookbus serve --http``, with no process started per call.

The trade-off, and why some events keep the command bridge: when Claude Code cannot reach
the server (it is down, the token is missing, the call times out), an http hook is a
non-blocking error and the tool runs. That is what a hook that fails open would decide
anyway, but it would make a fail-closed hook (``"on_error": "deny"``) fail open. So an
event on which a fail-closed hook of the home could fire keeps the command bridge, which
decides in-process when no server answers; as do SessionStart and Setup, where Claude Code
runs command hooks only, and an event where a hook reads ``$CLAUDE_PROJECT_DIR``, which
Claude Code gives to command hooks only.

The token reaches Claude Code as ``$HOOKBUS_HTTP_TOKEN`` in its environment, named in the
hook's ``allowedEnvVars`` (Claude Code fills a header's ``$VAR`` only for those). It is
written into FILE's ``env`` only when FILE is a file no one else may read (mode 0600);
otherwise the user is told how to export it.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from typing import Any
from urllib.parse import urlsplit

from hookbus import claude_names
from hookbus.hosts.lastresort import GUARD_EVENT, fail_closed_hooks, home_guard_on
from hookbus.policy.managed import managed_root
from hookbus.hosts.settingsfile import ImportFailed

#: The route every http hook posts to.
ROUTE = "/claude-code"
#: Claude Code's events that take command hooks only.
COMMAND_ONLY_EVENTS = ("SessionStart", "Setup")
#: The variable the hooks send as a header, and so list in ``allowedEnvVars``.
TOKEN_VARIABLE = "HOOKBUS_HTTP_TOKEN"
#: What Claude Code gives command hooks only: a hook that reads it keeps the command bridge.
PROJECT_DIR_VARIABLE = "CLAUDE_PROJECT_DIR"
HEADERS = {"Authorization": f"Bearer ${TOKEN_VARIABLE}"}


def hook_url(text: str) -> str:
    """The URL the hooks post to, from what ``hookbus serve`` printed
    (``http://127.0.0.1:PORT``; ``/claude-code`` may be given too). ImportFailed for a URL
    that is not http on a loopback address with a port."""
    parts = urlsplit(text.strip())
    where = f"--http {text}"
    if parts.scheme != "http":
        raise ImportFailed([f"{where}: expected http://127.0.0.1:PORT, the address `hookbus serve --http` printed"])
    try:
        port = parts.port
        address = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        raise ImportFailed([f"{where}: expected http://127.0.0.1:PORT, with the IP address and port `hookbus serve --http` printed"]) from None
    if not address.is_loopback or not port:
        raise ImportFailed([f"{where}: the server listens on a loopback address and a port, such as http://127.0.0.1:8787"])
    if parts.path.rstrip("/") not in ("", ROUTE) or parts.query or parts.fragment or parts.username or parts.password:
        raise ImportFailed([f"{where}: give the server's address alone (http://HOST:PORT); the hooks post to its {ROUTE}"])
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{host}:{port}{ROUTE}"


def http_entry(url: str, timeout: int) -> dict[str, Any]:
    return {
        "type": "http",
        "url": url,
        "headers": dict(HEADERS),
        "allowedEnvVars": [TOKEN_VARIABLE],
        "timeout": timeout,
    }


def is_http_bridge(entry: object) -> bool:
    """Whether ``entry`` (a hook of a settings file) posts to a hookbus ``/claude-code`` on
    loopback: one this installer wrote, at any port."""
    if not isinstance(entry, dict) or entry.get("type") != "http" or not isinstance(entry.get("url"), str):
        return False
    try:
        return bool(hook_url(entry["url"]) == entry["url"])
    except ImportFailed:
        return False


def command_events(home: str, events: tuple[str, ...]) -> dict[str, str]:
    """Claude Code's events (of ``events``) that keep the command bridge, each with why."""
    kept: dict[str, str] = {}
    for event in events:
        if event in COMMAND_ONLY_EVENTS:
            kept[event] = "Claude Code runs command hooks only there"
            continue
        vix_event = claude_names.VIX_EVENT.get(event)
        if vix_event is None:
            continue
        hooks = fail_closed_hooks(home, vix_event)
        managed = fail_closed_hooks(managed_root()[0], vix_event)
        if hooks is not None:
            hooks = None if managed is None else hooks + [f"managed:{hook}" for hook in managed]
        if vix_event == GUARD_EVENT and home_guard_on(home):
            kept[event] = (
                'hookbus\'s home guard ("protect_home") is fail-closed there, and an http hook Claude Code cannot '
                'deliver lets the tool run; "protect_home": false in settings.json lets the http hook take it'
            )
            continue
        readers = hooks_mentioning(home, vix_event, PROJECT_DIR_VARIABLE)
        if readers:
            listed = ", ".join(repr(hook) for hook in readers[:3]) + (", ..." if len(readers) > 3 else "")
            kept[event] = f"hook(s) {listed} use ${PROJECT_DIR_VARIABLE}, which Claude Code gives to command hooks only"
        elif hooks is None:
            kept[event] = f"{home}/hooks cannot be read, so a fail-closed hook cannot be ruled out"
        elif hooks:
            listed = ", ".join(repr(hook) for hook in hooks[:3]) + (", ..." if len(hooks) > 3 else "")
            kept[event] = (
                f"fail-closed hook(s) {listed} fire there, and an http hook Claude Code cannot deliver lets the "
                "tool run; the command bridge decides in-process when no server answers"
            )
    return kept


def hooks_mentioning(home: str, event: str, word: str) -> list[str]:
    """The ids of the home's hooks on ``event`` whose hook file mentions ``word`` (a YAML
    one, or one that cannot be parsed, whatever its event)."""
    import json

    found = []
    hooks_dir = os.path.join(home, "hooks")
    try:
        names = sorted(os.listdir(hooks_dir))
    except OSError:
        return []
    for name in names:
        for spec_name in ("hook.json", "hook.yaml"):
            try:
                with open(os.path.join(hooks_dir, name, spec_name), "rb") as handle:
                    text = handle.read(256 * 1024).decode("utf-8", "replace")
            except OSError:
                continue
            if word not in text:
                break
            try:
                spec = json.loads(text) if spec_name == "hook.json" else None
            except ValueError:
                spec = None
            trigger = spec.get("trigger") if isinstance(spec, dict) else None
            if not isinstance(trigger, dict) or trigger.get("event") == event:
                found.append(name)
            break
    return found


def token_for_file(shown: str, home: str) -> tuple[dict[str, str] | None, str | None]:
    """What to write into FILE's ``env`` for the token (None: nothing), and, when nothing,
    what the user must do instead (None: nothing either). A FILE that does not exist yet is
    made 0600, so it is private."""
    if os.environ.get(TOKEN_VARIABLE):
        return None, (
            f"the server takes its token from ${TOKEN_VARIABLE}: Claude Code must have the same one in its environment"
        )
    try:
        status = os.stat(shown)
        private = status.st_uid == os.geteuid() and not stat.S_IMODE(status.st_mode) & 0o077
    except FileNotFoundError:
        private = True
    from hookbus.serve.httpconfig import token_path

    path = token_path(home)
    if not private:
        return None, (
            f"Claude Code must have ${TOKEN_VARIABLE} in its environment, or every call is refused (401) and its "
            f"hooks do not run: export {TOKEN_VARIABLE}=\"$(cat {path})\" where you start it, or make {shown} "
            f"readable by you alone (chmod 600 {shown}) and run this again to keep the token in its env"
        )
    from hookbus.serve.httpconfig import load_token
    from hookbus.serve.listener import ensure_run_dir

    try:
        ensure_run_dir(home)
        token, _ = load_token(home)
    except Exception as exc:  # ServeError: the message says what to do
        return None, f"the token could not be read or made: {exc}"
    return {TOKEN_VARIABLE: token}, None
