"""Codex CLI's hook trust: which command hooks of a hooks.json Codex runs, and the
``[hooks.state]`` entries of its config.toml that say so.

Codex CLI (0.169) runs a hook that is not managed only when the user's
``$CODEX_HOME/config.toml`` (``~/.codex`` by default) trusts it::

    [hooks.state."/home/me/.codex/hooks.json:pre_tool_use:0:0"]
    trusted_hash = "sha256:..."

The key is the absolute path of the file the hook is in, the event in snake case, the
matcher group's index in the event's array and the hook's index in the group; the hash is
SHA-256 over the compact, key-sorted JSON (non-ASCII kept as it is) of
``{"event_name": SNAKE, "matcher": M, "hooks": [{"type": "command", "command": C,
"timeout": T, "async": B, "statusMessage": S}]}``, with the matcher left out when the group
has none (and always on UserPromptSubmit and Stop, which take none), the status message
left out when there is none, and T the timeout Codex applies: 600 s by default, except on
SessionEnd and Interrupt (1 s by default, at most 3). A hook Codex finds no matching entry
for is skipped without a word, which is why ``--install-bridge`` writes them, and checks.

``plan_trust`` makes a config.toml's new text, kept as it was but for those entries
(``tomlkit`` keeps comments, order and every other table); ``check_config`` and
``check_app_server`` say whether Codex would run each bridge entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from hookbus.hosts.settingsfile import ImportFailed, load_toml

#: Codex CLI's events as its trust keys spell them.
SNAKE_EVENT: dict[str, str] = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
    "Interrupt": "interrupt",
    "PreModelRequest": "pre_model_request",
    "PostModelRequest": "post_model_request",
}
EVENT_OF_SNAKE = {snake: event for event, snake in SNAKE_EVENT.items()}
#: Events whose matcher Codex ignores, and leaves out of the hash.
MATCHERLESS_EVENTS: tuple[str, ...] = ("UserPromptSubmit", "Stop")
#: Events Codex gives a short time: 1 s by default, never more than 3 s.
SHORT_EVENTS: tuple[str, ...] = ("SessionEnd", "Interrupt")
DEFAULT_TIMEOUT = 600
SHORT_DEFAULT_TIMEOUT = 1
SHORT_MAX_TIMEOUT = 3
#: The variable that names Codex's home, and where it is without it.
CODEX_HOME_VARIABLE = "CODEX_HOME"
#: The variable naming a Codex binary to ask (``codex app-server``) whether it trusts the bridge.
CODEX_BIN_VARIABLE = "CODEX_BIN"

#: An entry's place in a hooks document: (Codex event, group index, hook index).
Position = tuple[str, int, int]


def effective_timeout(event: str, timeout: object) -> int:
    """The timeout (seconds) Codex gives a hook whose entry says ``timeout`` on ``event``."""
    short = event in SHORT_EVENTS
    if timeout is None:
        seconds = SHORT_DEFAULT_TIMEOUT if short else DEFAULT_TIMEOUT
    elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"a timeout must be a number of seconds, not {timeout!r:.40}")
    else:
        seconds = int(timeout)
    seconds = max(1, seconds)
    return min(seconds, SHORT_MAX_TIMEOUT) if short else seconds


def trust_hash(event: str, matcher: str | None, handler: Mapping[str, Any]) -> str:
    """``sha256:<hex>``: the hash Codex trusts the command ``handler`` of a group with
    ``matcher`` (None: the group has none) on ``event`` (Codex's name) by. ValueError when
    the handler is no command hook Codex could run."""
    snake = SNAKE_EVENT.get(event)
    if snake is None:
        raise ValueError(f"{event!r:.40} is no event of Codex CLI")
    command = handler.get("command")
    if handler.get("type") != "command" or not isinstance(command, str):
        raise ValueError("only a command hook has a trust hash")
    normal: dict[str, Any] = {
        "type": "command",
        "command": command,
        "timeout": effective_timeout(event, handler.get("timeout")),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normal["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": snake, "hooks": [normal]}
    if matcher is not None and event not in MATCHERLESS_EVENTS:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def trust_key(source: str, event: str, group: int, entry: int) -> str:
    """The ``[hooks.state]`` key of the hook at ``group``/``entry`` of ``event`` in the
    file ``source`` (an absolute path)."""
    return f"{source}:{SNAKE_EVENT[event]}:{group}:{entry}"


def parse_key(key: str, source: str) -> Position | None:
    """The position a ``[hooks.state]`` key names in ``source``; None for another file's
    key, or one that names no position."""
    prefix = source + ":"
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split(":")
    if len(parts) != 3 or parts[0] not in EVENT_OF_SNAKE or not all(part.isdigit() for part in parts[1:]):
        return None
    return EVENT_OF_SNAKE[parts[0]], int(parts[1]), int(parts[2])


def codex_home(environ: Mapping[str, str] | None = None) -> Path:
    """Codex's home: ``$CODEX_HOME``, else ``~/.codex``."""
    environ = os.environ if environ is None else environ
    named = environ.get(CODEX_HOME_VARIABLE)
    return Path(os.path.abspath(os.path.expanduser(named))) if named else Path(os.path.expanduser("~/.codex"))


def entries(hooks: Mapping[str, Any]) -> Iterator[tuple[Position, str | None, dict[str, Any]]]:
    """Every hook entry of a hooks document's ``hooks`` object, on Codex's events: its
    position, its group's matcher (None: none, or not a string) and the entry."""
    for event, groups in hooks.items():
        if event not in SNAKE_EVENT or not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            matcher = group.get("matcher")
            for entry_index, entry in enumerate(group["hooks"]):
                if isinstance(entry, dict):
                    yield (event, group_index, entry_index), matcher if isinstance(matcher, str) else None, entry


def hash_of(event: str, matcher: str | None, entry: Mapping[str, Any]) -> str | None:
    """``trust_hash``, or None for an entry that has none."""
    try:
        return trust_hash(event, matcher, entry)
    except ValueError:
        return None


def wanted_trust(source: str, hooks: Mapping[str, Any], is_ours: Callable[[Mapping[str, Any]], bool]) -> dict[str, str]:
    """Key → hash of every entry of ``hooks`` (FILE's, at ``source``) that ``is_ours``."""
    wanted: dict[str, str] = {}
    for (event, group, index), matcher, entry in entries(hooks):
        if is_ours(entry):
            found = hash_of(event, matcher, entry)
            if found is not None:
                wanted[trust_key(source, event, group, index)] = found
    return wanted


@dataclass
class TrustPlan:
    """What becomes of config.toml: its new text, and a line per change."""

    #: The text config.toml had (None: there was none).
    before: str | None
    text: str
    #: Key → hash that must be there for every bridge entry.
    wanted: dict[str, str]
    lines: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.before is None or self.text != self.before


def _state_table(document: Any, shown: str) -> Any:
    """config.toml's ``hooks.state`` table, made when missing (a table like the others of the
    file: an inline one in an inline ``hooks``)."""
    import tomlkit
    from tomlkit.items import InlineTable

    hooks = document.get("hooks")
    if hooks is None:
        hooks = tomlkit.table(is_super_table=True)
        document["hooks"] = hooks
    if not isinstance(hooks, dict):
        raise ImportFailed([f"{shown}: hooks is not a table, where Codex keeps its hooks' trust (hooks.state): fix it first"])
    state = hooks.get("state")
    if state is None:
        state = tomlkit.inline_table() if isinstance(hooks, InlineTable) else tomlkit.table(is_super_table=True)
        hooks["state"] = state
    if not isinstance(state, dict):
        raise ImportFailed([f"{shown}: hooks.state is not a table, where Codex keeps its hooks' trust: fix it first"])
    return state


def plan_trust(
    config_text: str | None,
    shown_config: str,
    source: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    is_ours: Callable[[Mapping[str, Any]], bool],
    is_bridge: Callable[[Mapping[str, Any]], bool],
    moved: Mapping[str, Mapping[tuple[int, int], tuple[int, int]]] | None = None,
) -> TrustPlan:
    """config.toml's new text (``config_text``; None: there is none) once the hooks of FILE
    (``source``, absolute) go from ``before`` to ``after`` (their ``hooks`` objects).

    - Every entry of ``after`` that ``is_ours`` (the bridge hookbus writes) gets
      ``trusted_hash``; the rest of its table, ``enabled = false`` say, is kept.
    - A key of ``source`` whose hash is that of a bridge entry (``is_bridge``, of
      ``before`` or ``after``, on its event) is taken out when its position in ``after``
      no longer holds that entry.
    - ``moved`` (event → old place → new place, from ``--uninstall-bridge``): the user's
      own entries whose place changed keep their trust under their new key.
    - Every other key, the user's own, is left alone.

    ImportFailed when config.toml is not valid TOML, or not what the change can be made
    in; the text is then left as it was."""
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    current = load_toml(config_text, shown_config) if config_text is not None else {}
    try:
        document = tomlkit.parse(config_text or "")
    except TOMLKitError as exc:  # tomllib took it: a disagreement of parsers, said as is
        raise ImportFailed([f"{shown_config}: hookbus cannot edit it: {exc}"]) from None
    wanted = wanted_trust(source, after, is_ours)
    bridge_hashes: dict[str, set[str]] = {}
    after_hashes: dict[Position, str | None] = {}
    for hooks, mark in ((before, False), (after, True)):
        for position, matcher, entry in entries(hooks):
            found = hash_of(position[0], matcher, entry)
            if mark:
                after_hashes[position] = found
            if found is not None and is_bridge(entry):
                bridge_hashes.setdefault(position[0], set()).add(found)
    state_now = ((current.get("hooks") or {}).get("state") or {}) if isinstance(current.get("hooks"), dict) else {}
    if not isinstance(state_now, dict):
        state_now = {}
    lines: list[str] = []
    drop: list[str] = []
    renames: dict[str, str] = {}
    for key, value in state_now.items():
        named = parse_key(key, source)
        if named is None or key in wanted:
            continue
        trusted = value.get("trusted_hash") if isinstance(value, dict) else None
        event, group, index = position = named
        if trusted in bridge_hashes.get(event, ()) and after_hashes.get(position) != trusted:
            drop.append(key)
            continue
        new_place = (moved or {}).get(event, {}).get((group, index))
        if new_place is not None and new_place != (group, index):
            renames[key] = trust_key(source, event, *new_place)
    if not wanted and not drop and not renames:
        return TrustPlan(config_text, config_text or "", wanted, lines)
    state = _state_table(document, shown_config)
    try:
        import tomlkit.items

        def new_table(values: Mapping[str, Any]) -> Any:
            table: Any = tomlkit.inline_table() if isinstance(state, tomlkit.items.InlineTable) else tomlkit.table()
            for name, item in values.items():
                table[name] = item
            if not isinstance(table, tomlkit.items.InlineTable):
                table.add(tomlkit.nl())  # a blank line before whatever table follows
            return table

        for key in drop:
            value = state_now[key]
            rest = {name: item for name, item in value.items() if name != "trusted_hash"} if isinstance(value, dict) else {}
            if rest:
                del state[key]["trusted_hash"]
            else:
                del state[key]
            lines.append(f"take out the trust of {key}: it no longer holds hookbus's bridge")
        saved = {key: dict(state_now[key]) for key in renames if isinstance(state_now[key], dict)}
        for key in renames:
            del state[key]
        for old, new in renames.items():
            if new in state:
                del state[new]
            state[new] = new_table(saved.get(old, {}))
            lines.append(f"move the trust of your hook at {old} to {new}: the bridge before it went")
        for key, digest in wanted.items():
            entry = state.get(key)
            if isinstance(entry, dict) and entry.get("trusted_hash") == digest:
                continue
            if isinstance(entry, dict):
                entry["trusted_hash"] = digest
            else:
                if entry is not None:
                    del state[key]
                state[key] = new_table({"trusted_hash": digest})
            lines.append(f"trust {key} ({digest[:19]}...)")
        text = tomlkit.dumps(document)
    except (TOMLKitError, ValueError, KeyError, TypeError):  # a shape tomlkit cannot edit
        raise ImportFailed([_by_hand(shown_config, wanted)]) from None
    _check_edit(current, load_toml(text, shown_config), source, wanted, drop, renames, shown_config)
    return TrustPlan(config_text, text, wanted, lines)


def _check_edit(
    before: dict[str, Any], after: dict[str, Any], source: str, wanted: Mapping[str, str],
    drop: list[str], renames: Mapping[str, str], shown: str,
) -> None:
    """That the edited config.toml holds what it held, but for the trust entries changed:
    a guard on the TOML library, which must never change a setting of the user's."""
    expected = json.loads(json.dumps(before, default=str))
    hooks = expected.setdefault("hooks", {})
    state = hooks.setdefault("state", {})
    for key in drop:
        rest = {name: item for name, item in state[key].items() if name != "trusted_hash"}
        if rest:
            state[key] = rest
        else:
            del state[key]
    moving = {key: state.pop(key) for key in renames}
    for old, new in renames.items():
        state[new] = moving[old]
    for key, digest in wanted.items():
        entry = state.get(key)
        state[key] = {**(entry if isinstance(entry, dict) else {}), "trusted_hash": digest}
    got = json.loads(json.dumps(after, default=str))
    if _without_empty_state(got) != _without_empty_state(expected):
        raise ImportFailed([_by_hand(shown, wanted)])


def _by_hand(shown: str, wanted: Mapping[str, str]) -> str:
    """The message for a config.toml hookbus cannot edit safely: what to add by hand."""
    lines = [f"[hooks.state.{json.dumps(key)}]\ntrusted_hash = {json.dumps(digest)}" for key, digest in wanted.items()]
    return (
        f"{shown}: hookbus could not edit it without changing something else, so it left it alone; add these "
        "entries yourself:\n" + "\n".join(lines)
    )


def _without_empty_state(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` without an empty ``hooks.state``, and a ``hooks`` it leaves empty."""
    hooks = document.get("hooks")
    if isinstance(hooks, dict):
        hooks = {name: value for name, value in hooks.items() if not (name == "state" and value == {})}
        document = {**document, "hooks": hooks} if hooks else {k: v for k, v in document.items() if k != "hooks"}
    return document
def check_config(config_text: str | None, shown_config: str, wanted: Mapping[str, str]) -> list[str]:
    """Why Codex would not run each bridge entry, by config.toml's text (read again):
    [] when every entry of ``wanted`` is trusted there, and enabled."""
    if config_text is None:
        return [f"{shown_config} does not exist"]
    try:
        document = load_toml(config_text, shown_config)
    except ImportFailed as exc:
        return exc.messages
    hooks = document.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    state = state if isinstance(state, dict) else {}
    problems = []
    for key, digest in wanted.items():
        entry = state.get(key)
        if not isinstance(entry, dict) or entry.get("trusted_hash") is None:
            problems.append(f"{key}: no trusted_hash in {shown_config}")
        elif entry.get("trusted_hash") != digest:
            problems.append(f"{key}: {shown_config} trusts {entry.get('trusted_hash')}, not {digest}")
        elif entry.get("enabled") is False:
            problems.append(f"{key}: disabled in {shown_config} (enabled = false)")
    return problems


#: How long ``check_app_server`` waits on Codex, in seconds.
APP_SERVER_TIMEOUT = 60.0


def check_app_server(codex: str, home: Path, cwd: str, wanted: Mapping[str, str], timeout: float = APP_SERVER_TIMEOUT) -> list[str]:
    """Why Codex would not run each bridge entry, by Codex's own word: ``codex
    app-server`` (JSON-RPC over stdio) asked ``hooks/list`` for ``cwd``, with
    ``CODEX_HOME`` set to ``home``. [] when it lists every key of ``wanted`` as
    ``trusted``. ImportFailed when it could not be asked."""
    environment = {**os.environ, CODEX_HOME_VARIABLE: str(home)}
    try:
        process = subprocess.Popen(
            [codex, "app-server"], cwd=cwd, env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )
    except OSError as exc:
        raise ImportFailed([f"${CODEX_BIN_VARIABLE} ({codex}): cannot run it: {exc.strerror or exc}"]) from None
    deadline = time.monotonic() + timeout
    try:
        assert process.stdin is not None and process.stdout is not None
        reader = _Lines(process.stdout.fileno())

        def send(message: dict[str, Any]) -> None:
            assert process.stdin is not None
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()

        def answer(ident: int) -> dict[str, Any]:
            while True:
                line = reader.next_line(deadline)
                if line is None:
                    raise ImportFailed([f"{codex} app-server did not answer within {timeout:g} s, or stopped"])
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and message.get("id") == ident and "method" not in message:
                    return message

        send({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "hookbus", "version": "0"}}})
        started = answer(1)
        if "error" in started:
            raise ImportFailed([f"{codex} app-server refused to start: {json.dumps(started['error'])[:300]}"])
        send({"method": "initialized"})
        send({"id": 2, "method": "hooks/list", "params": {"cwds": [cwd]}})
        listed = answer(2)
    except (OSError, ValueError) as exc:
        raise ImportFailed([f"{codex} app-server: {exc}"]) from None
    finally:
        _stop(process)
    result = listed.get("result")
    if not isinstance(result, dict):
        raise ImportFailed([f"{codex} app-server could not list the hooks: {json.dumps(listed.get('error'))[:300]}"])
    statuses: dict[str, str] = {}
    for layer in result.get("data") or []:
        for hook in (layer.get("hooks") or []) if isinstance(layer, dict) else []:
            if isinstance(hook, dict) and isinstance(hook.get("key"), str):
                statuses[hook["key"]] = str(hook.get("trustStatus"))
    problems = []
    for key in wanted:
        status = statuses.get(key)
        if status is None:
            problems.append(f"{key}: Codex does not list it (it does not read that file from {cwd})")
        elif status != "trusted":
            problems.append(f"{key}: Codex says {status}")
    return problems


class _Lines:
    """The lines of a pipe, each read before a deadline."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self.buffer = b""
        self.closed = False

    def next_line(self, deadline: float) -> str | None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.descriptor, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if self.closed or left <= 0 or not selector.select(left):
                    return None
                chunk = os.read(self.descriptor, 65536)
                if not chunk:
                    self.closed = True
                    if not self.buffer:
                        return None
                    self.buffer += b"\n"
                self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """End the app server this module started, and its process group."""
    for stream in (process.stdin, process.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except OSError:
        pass
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        process.wait()
