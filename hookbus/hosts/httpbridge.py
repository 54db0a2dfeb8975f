"""``--install-bridge --http URL``: Claude Code's ``"type": "http"`` hooks, posting to the
``POST /claude-code`` of a ``hookbus serve --http``, with no process started per call.

The trade-off, and why some events keep a command hook: when Claude Code cannot reach
the server (it is down, the token is missing, the call times out), an http hook is a
non-blocking error and the tool runs. That is what a hook that fails open would decide
anyway, but it would make a fail-closed hook (``"on_error": "deny"``) fail open. So an
event on which a fail-closed hook of the home could fire gets a command hook, the gate
(``hookbus.hosts.gate``: bash posting to the same server, the command bridge when none
answers); as do SessionStart and Setup, where Claude Code runs command hooks only, and an
event where a hook reads ``$CLAUDE_PROJECT_DIR``, which Claude Code gives to command hooks
only.

The token reaches Claude Code as ``$HOOKBUS_HTTP_TOKEN`` in its environment, named in the
hook's ``allowedEnvVars`` (Claude Code fills a header's ``$VAR`` only for those). It is
written into FILE's ``env`` only when FILE is a file no one else may read (mode 0600).
When it cannot be, no http hook is written, since Claude Code could not send its token:
the gate, which reads the token from the home's run file, takes every event.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from typing import Any
from urllib.parse import urlsplit

from hookbus.dialects import claude_names
from hookbus.hosts.lastresort import GUARD_EVENT, fail_closed_hooks, home_guard_on
from hookbus.policy.managed import managed_root
from hookbus.hosts.settingsfile import ImportFailed

#: The route every http hook posts to.
ROUTE = "/claude-code"
#: Claude Code's events that take command hooks only.
COMMAND_ONLY_EVENTS = ("SessionStart", "Setup")
#: The variable the hooks send as a header, and so list in ``allowedEnvVars``.
TOKEN_VARIABLE = "HOOKBUS_HTTP_TOKEN"
#: What Claude Code gives command hooks only: a hook that reads it keeps a command hook (the gate).
PROJECT_DIR_VARIABLE = "CLAUDE_PROJECT_DIR"
HEADERS = {"Authorization": f"Bearer ${TOKEN_VARIABLE}"}
#: Claude Code's events whose answer it obeys as an approval or a rewrite, each with what
#: that answer can do. Claude Code does not authenticate the server it posts to, so over
#: http whoever holds the port while the server is down answers them: they keep the
#: command bridge unless the user opts in (``--http-decisions``). The others (Stop,
#: SubagentStop, PreCompact) can at most block or add words of their own.
DECISION_EVENTS = {
    "PreToolUse": "its answer can let a tool call skip the permission prompt, or rewrite the call",
    "PermissionRequest": "its answer can approve the permission prompt, and rewrite the command",
    "UserPromptSubmit": "its answer adds context to the user's own prompt, as if the user had written it",
    "PostToolUse": "its answer can replace the tool's output that the model reads (updatedToolOutput)",
}
#: The flag that puts those on http all the same.
DECISIONS_FLAG = "--http-decisions"
#: How long the import waits for the server to answer its check of the token.
CHECK_SECONDS = 5.0


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


def command_events(home: str, events: tuple[str, ...], decisions: bool = False) -> dict[str, str]:
    """Claude Code's events (of ``events``) that keep a command hook (the gate), each with why.
    ``decisions``: the user opted in to post the events of DECISION_EVENTS over http."""
    kept: dict[str, str] = {}
    for event in events:
        if event in COMMAND_ONLY_EVENTS:
            kept[event] = "Claude Code runs command hooks only there"
            continue
        if event in DECISION_EVENTS and not decisions:
            kept[event] = (
                f"{DECISION_EVENTS[event]}; over http, whoever listens on the port while the server is down would be "
                f"obeyed ({DECISIONS_FLAG} posts it all the same)"
            )
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


class Layout:
    """Where ``--http`` puts what: ``url``, the http hooks' URL (None: no http hook, the
    gate on every event); ``commands``, the events on a command hook (the gate), each
    with why; ``token``, what to do about the token (None: no http hook needs one)."""

    __slots__ = ("url", "commands", "token", "note")

    def __init__(
        self, url: str | None, commands: dict[str, str], token: TokenPlan | None = None, note: str | None = None
    ) -> None:
        self.url = url
        self.commands = commands
        self.token = token
        #: What the user should know about the server the gate reaches (stderr).
        self.note = note


def plan_layout(
    shown: str, home: str, text: str, events: tuple[str, ...], *, claude: bool, decisions: bool,
    dry_run: bool, kept: dict[str, str] | None = None,
) -> Layout:
    """Where ``--http TEXT`` puts the bridge of FILE (``shown``): an http hook on the events
    where it can neither fail open nor be obeyed from a squatter (``command_events``), the
    gate on the others; the gate on every event when Claude Code could not send the token
    (FILE is readable by others, or the token is the environment's, which is never
    written), since no http hook is written whose token cannot reach the server, and for
    Gemini CLI, which has no http hooks. ``kept``: events that must be commands for a
    reason of the caller's (hooks moved out of FILE). ImportFailed when the server at the
    URL refuses the token or serves another home."""
    url = hook_url(text)
    commands = {} if not claude else {**(kept or {}), **command_events(home, events, decisions=decisions)}

    def gate_everywhere(why: str, token: TokenPlan | None = None) -> Layout:
        note = None if dry_run else _check_for_gate(url, home)
        return Layout(None, {event: commands.get(event, why) for event in events}, token, note)

    if not claude:
        return gate_everywhere("Gemini CLI has no http hooks: the gate posts to the server")
    if all(event in commands for event in events):
        return gate_everywhere("")
    unsendable = _unsendable(shown)
    if unsendable is not None:
        return gate_everywhere(f"{unsendable}; the gate reads the token itself")
    if dry_run:
        return Layout(url, commands, TokenPlan(note=f"the token goes into {shown}'s env; nothing was made or checked"))
    token = plan_token(shown, home, url)
    if token.env is None:  # no token to write: no http hook
        return gate_everywhere("no token could be written for an http hook", token)
    return Layout(url, commands, token)


def _unsendable(shown: str) -> str | None:
    """Why Claude Code could not send the token of an http hook in FILE; None: FILE can
    hold it in its ``env``."""
    if os.environ.get(TOKEN_VARIABLE):
        return (
            f"the token is ${TOKEN_VARIABLE} of this environment, which is never written into {shown}, and Claude Code "
            "may not have it: an http hook without it is refused (401) and its hooks do not run"
        )
    try:
        status = os.stat(shown)
    except FileNotFoundError:
        return None  # made 0600
    if status.st_uid == os.geteuid() and not stat.S_IMODE(status.st_mode) & 0o077:
        return None
    return (
        f"{shown} is readable by others, so it cannot keep the token an http hook sends (chmod 600 {shown} and run "
        "this again for http hooks)"
    )


def _check_for_gate(url: str, home: str) -> str | None:
    """What can be checked of the server at ``url`` for a gate, which reaches the server of
    ``home`` through its run file, wherever it listens, and sends that file's token: that
    the server there takes it and serves ``home`` (ImportFailed when not). A note when the
    home's server does not run now, or listens elsewhere."""
    from hookbus.serve.gatefile import gate_token, read_gate_file

    run, token = read_gate_file(home), gate_token(home)
    if run is None or token is None:
        return (
            f"no hookbus serve --http of {home} runs now (it writes {home}/run/http.gate): until one does, the gate runs "
            "the command bridge, in-process"
        )
    parts = urlsplit(url)
    if run["port"] != str(parts.port) or run["host"] != str(parts.hostname):
        return f"the server of {home} listens on {run['host']}:{run['port']}, not {parts.netloc}: the gate reaches it there"
    check_token(url, token, home, f"{home}/run/http.gate")
    return None


class TokenPlan:
    """What the import does about the token: ``env``, what to write into FILE's env (None:
    nothing); ``line``, what to say of it on stdout; ``note``, what the user must know or do
    (stderr). Each says only what was checked."""

    __slots__ = ("env", "line", "note")

    def __init__(self, env: dict[str, str] | None = None, line: str | None = None, note: str | None = None) -> None:
        self.env = env
        self.line = line
        self.note = note


def plan_token(shown: str, home: str, url: str) -> TokenPlan:
    """What to do about the token for FILE (``shown``), the home and the hooks' ``url``:
    the token is checked against the server there first, and never sent to a port another
    user holds. ImportFailed when the server refuses it, serves another home, or the port
    is another user's. A FILE that does not exist yet is made 0600, so it is private."""
    from hookbus.serve.httpconfig import load_token, token_path
    from hookbus.serve.listener import ensure_run_dir

    path = token_path(home)
    try:
        ensure_run_dir(home)
        token, _ = load_token(home)
    except Exception as exc:  # ServeError: the message says what to do
        return TokenPlan(note=f"the token could not be read or made: {exc}")
    checked = check_token(url, token, home, path)
    if checked is None:
        return TokenPlan(
            {TOKEN_VARIABLE: token},
            f"env: {TOKEN_VARIABLE} set to the token of {path} ({shown} is readable by you alone); not checked",
            f"the token could not be checked: no hookbus serve answers on {url}. Start `hookbus serve --http` there "
            f"without ${TOKEN_VARIABLE} in its environment (it then takes {path}), and run this again to check it",
        )
    return TokenPlan(
        {TOKEN_VARIABLE: token}, f"env: {TOKEN_VARIABLE} set to the server's token ({checked}; {shown} is readable by you alone)"
    )


def check_token(url: str, token: str, home: str, source: str) -> str | None:
    """Whether the server at ``url`` (a hook URL) takes ``token`` (from ``source``): what
    was checked, for the user; None when it cannot be told (nothing answers there).
    ImportFailed when the server refuses it or serves another home, and before a byte is
    sent when another user listens on the port (a probable squatter)."""
    import http.client
    import json

    from hookbus.serve.httpconfig import TOKEN_FILE, listener_uids, port_holder

    parts = urlsplit(url)
    host, port = str(parts.hostname), int(parts.port or 80)
    origin = f"http://{parts.netloc}"
    uids = listener_uids(host, port)
    if uids is not None and any(uid not in (os.geteuid(), 0) for uid in uids):
        raise ImportFailed([f"--http {origin}: the token was not sent there{port_holder(host, port, home)}"])
    if uids is not None and not uids:
        return None
    connection = http.client.HTTPConnection(host, port, timeout=CHECK_SECONDS)
    try:
        connection.request("GET", "/ping", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        status, body = response.status, response.read(64 * 1024)
    except (OSError, http.client.HTTPException):
        return None
    finally:
        connection.close()
    if status == 401:
        raise ImportFailed([
            f"--http {origin}: the server there refused the token of {source} (401), so every call of Claude Code's "
            f"would be refused and its http hooks would do nothing. A hookbus serve takes ${TOKEN_VARIABLE} from its "
            f"own environment when that is set, else HOME/run/{TOKEN_FILE}, read when it starts: run this with the "
            f"server's ${TOKEN_VARIABLE} in the environment, or restart the server (without ${TOKEN_VARIABLE}) so "
            f"that it reads {home}/run/{TOKEN_FILE} again"
        ])
    if status == 404 and body.startswith(b"hookbus: "):
        # An older hookbus serve: no /ping, but it answers 404 only past the token check.
        return f"checked: the server at {origin} takes it (an older hookbus serve, which does not say its home)"
    if status == 404:
        raise ImportFailed([f"--http {origin}: what answers there is not a hookbus serve --http (it has no GET /ping)"])
    if status != 200:
        return None
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict) or "hookbus" not in document:
        raise ImportFailed([f"--http {origin}: what answers there is not a hookbus serve --http (its GET /ping says no hookbus)"])
    served = document.get("home")
    try:
        same = isinstance(served, str) and os.path.samefile(served, home)
    except (OSError, ValueError):
        same = False
    if not same:
        raise ImportFailed([
            f"--http {origin}: the hookbus serve there serves {served}, not {home}: give the URL of the server of "
            f"{home}, or --home {served}"
        ])
    return f"checked: the server at {origin} takes it"
