"""``hookbus`` starts here: the way of ``hookbus emit`` and of the bridges to a live
``hookbus serve``, on the interpreter's built-in modules alone.

A command this path knows (``emit``, ``claude-code-hook``, ``gemini-cli-hook``, ``codex-hook``, with no
option but ``--home``, ``--socket`` and, for emit, ``--input``) goes straight to a live
server of its home. Anything else, and anything unusual on the way (no server, an envelope
that is not plain JSON, an error answer that the full command line explains), is handed to
``hookbus.cli``, which then does and says exactly what it always does, reading the same
stdin: this path only makes the common case fast. It imports ``_json`` and ``_socket``, not
``json`` and ``socket``, whose imports (re, enum, selectors) cost as much as the
interpreter's own start-up; and no argparse.
"""

from __future__ import annotations

import os
import sys

import _socket

from hookbus.serve.errorcodes import NOT_RUN, OTHER_HOME, OTHER_TIER, SHUTTING_DOWN
from hookbus.policy.managed import managed_identity
from hookbus.eventnames import EVENT_NAMES
from hookbus.serve.leanjson import LeanJSONError, dumps, loads
from hookbus.serve.rendezvous import (
    CONNECT_TIMEOUT_SECONDS,
    MAX_LINE_BYTES,
    START_WINDOW_SECONDS,
    NoAnswer,
    NoServer,
    NotStarted,
    await_response,
    connect_as,
    home_root,
    in_process_reason,
    socket_path,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

    from hookbus.hosts.bridge import Host

#: The verbs this path answers, and the options each takes (each with a value).
_VERBS = {
    "emit": ("--home", "--socket", "--input"),
    "claude-code-hook": ("--home", "--socket"),
    "gemini-cli-hook": ("--home", "--socket"),
    "codex-hook": ("--home", "--socket"),
}


def main(argv: Sequence[str] | None = None) -> int:
    """The ``hookbus`` command."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if argv is None and managed_identity():
        _confine_imports()
    try:
        handed = _served(arguments)
    except KeyboardInterrupt:
        return 130  # the hooks, if any run, are the server's: it finishes and records them
    if isinstance(handed, int):
        return handed
    from hookbus.cli import main as full_main

    if handed is _FULL:
        return full_main(arguments)
    return full_main([*arguments, "--no-server"], undecided=handed.undecided)


def _confine_imports() -> None:
    """Where a managed directory exists, nothing this process imports from now on comes
    from where the user's environment points (``$PYTHONPATH``, the working directory, the
    user's site-packages): hookbus's plugins and its dependencies are those installed."""
    from hookbus.policy.plugintrust import trusted_path

    sys.path[:] = trusted_path()


class _Handover:
    """Why the full command line takes over: it goes its own way, or runs in-process
    (``undecided``: without running the hooks, which the server may have run already)."""

    __slots__ = ("undecided",)

    def __init__(self, undecided: str | None = None) -> None:
        self.undecided = undecided


_FULL = _Handover()
_IN_PROCESS = _Handover()


class _Command:
    __slots__ = ("verb", "event", "options")

    def __init__(self, verb: str, event: str | None, options: dict[str, str]) -> None:
        self.verb = verb
        self.event = event
        self.options = options


def _parse(arguments: list[str]) -> _Command | None:
    """The command, when it is one this path answers, spelled plainly; else None."""
    options: dict[str, str] = {}
    positional: list[str] = []
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument.startswith("--"):
            name, equals, value = argument.partition("=")
            if not equals:
                if index + 1 >= len(arguments):
                    return None
                index += 1
                value = arguments[index]
                if value.startswith("-") and value != "-":
                    return None
            if name in options:
                return None
            options[name] = value
        elif argument.startswith("-") and argument != "-":
            return None  # -h, and whatever argparse should explain
        else:
            positional.append(argument)
        index += 1
    if not positional or positional[0] not in _VERBS:
        return None
    verb, rest = positional[0], positional[1:]
    if any(name not in _VERBS[verb] for name in options):
        return None
    if verb == "emit":
        if len(rest) != 1 or rest[0] not in EVENT_NAMES:
            return None
        return _Command(verb, rest[0], options)
    return None if rest else _Command(verb, None, options)


def _served(arguments: list[str]) -> int | _Handover:
    """The exit code of the command answered through a server, or why it is not."""
    command = _parse(arguments)
    if command is None or in_process_reason(os.environ) is not None:
        return _FULL
    home = home_root(command.options.get("--home"))
    path = socket_path(command.options.get("--socket"), home)
    try:
        sock = connect_as(_socket.socket, path, CONNECT_TIMEOUT_SECONDS)
    except NoServer:
        return _IN_PROCESS
    except OSError as exc:  # UntrustedPeer, ServerBusy included
        _warn(f"hookbus {command.verb}: not using the server: {exc}; running in-process")
        return _IN_PROCESS
    try:
        return _through(sock, path, home, command)
    finally:
        sock.close()


def _through(sock: _socket.socket, path: str, home: str, command: _Command) -> int | _Handover:
    text = _read_input(command.options.get("--input", "-" if command.event is None else None))
    if text is None:
        return _FULL
    if not text.strip():
        received: Any = {}
    else:
        try:
            received = loads(text)
        except LeanJSONError:
            return _FULL  # the full command line says what is wrong with it
    if received.__class__ is not dict:
        return _FULL
    if command.event is not None:
        return _emit(sock, path, home, command, received)
    from hookbus.hosts.bridge import HOSTS, BridgeInputError

    host = HOSTS[command.verb]
    try:
        request = host.request(received, os.environ)
    except BridgeInputError:
        return _FULL
    if request is None:
        if host.says_empty:
            print("{}", flush=True)
        return 0
    event, envelope = request
    decision = _decide(sock, path, home, command.verb, event, envelope)
    if not isinstance(decision, dict):
        return decision
    return _answer_host(host, received["hook_event_name"], event, envelope, decision)


def _emit(sock: _socket.socket, path: str, home: str, command: _Command, envelope: dict[str, Any]) -> int | _Handover:
    assert command.event is not None
    decision = _decide(sock, path, home, command.verb, command.event, envelope)
    if not isinstance(decision, dict):
        return decision
    try:
        line = dumps(decision, ensure_ascii=False)
    except LeanJSONError:  # nested past the C encoder: the full command line writes it
        return _Handover(f"the server on {path} sent a decision this path cannot write")
    if not line.isascii() or "\x7f" in line:
        from hookbus.terminal import printable_json  # C1 controls, direction characters

        line = printable_json(line)
    if not _print(line):
        return 0
    return 2 if decision.get("behavior") == "deny" else 0


def _answer_host(host: Host, host_event: str, event: str, envelope: dict[str, Any], decision: dict[str, Any]) -> int | _Handover:
    from hookbus.hosts.bridge import output_text

    output, notes = host.answer(host_event, event, envelope, decision)
    refusal = host.refusal(event, decision)
    if output is not None and not _print(output_text(output)):
        return 0
    if refusal is not None:  # the reason Codex CLI shows, with exit 2: its lines kept
        if not (refusal.isascii() and refusal.replace("\n", "").replace("\t", "").isprintable()):
            from hookbus.terminal import printable  # only for what needs escaping: it compiles a regex

            refusal = printable(refusal, keep="\n\t")
        print(refusal, file=sys.stderr)
    for note in notes:
        _warn(f"hookbus {host.verb}: {note}")
    return 0 if refusal is None else 2


def _decide(
    sock: _socket.socket, path: str, home: str, verb: str, event: str, envelope: dict[str, Any]
) -> dict[str, Any] | int | _Handover:
    """The server's decision; or an exit code, the failure said; or who takes over: the
    full command line in-process when nothing ran, or, when the server may have run hooks
    and gave no decision, the full command line deciding without running them (each
    matching hook failed, under its on_error)."""
    import time

    params = {
        "event": event, "envelope": envelope, "home": home, "managed": managed_identity(), "failures": True,
        "start_by": time.time() + START_WINDOW_SECONDS,
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "emit", "params": params}
    try:
        line = (dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    except (LeanJSONError, UnicodeEncodeError):
        return _FULL  # NaN or a lone surrogate: the full client writes them as strict JSON
    if len(line) > MAX_LINE_BYTES:
        _warn(f"hookbus {verb}: the envelope is {len(line):,} bytes, more than a request to the server may hold ({MAX_LINE_BYTES:,}); running in-process")
        return _IN_PROCESS
    try:
        sock.sendall(line)
    except OSError as exc:  # no newline reached it: nothing ran
        _warn(f"hookbus {verb}: not using the server on {path}: {exc}; running in-process")
        return _IN_PROCESS
    try:
        response = await_response(sock, bytearray(), path, 1, loads)
    except NotStarted as exc:
        _warn(f"hookbus {verb}: {exc}; running in-process")
        return _IN_PROCESS
    except NoAnswer as exc:
        return _Handover(str(exc))
    error = response.get("error")
    if error is None:
        result = response.get("result")
        if result.__class__ is not dict:
            return _Handover(f"the server on {path} sent no decision")
        decision: dict[str, Any] = result
        from hookbus.failures import say_server_notes

        say_server_notes(decision, f"hookbus {verb}", _warn)  # as an in-process emit says them
        return decision
    code = error.get("code") if error.__class__ is dict else None
    if code not in NOT_RUN:
        why = str(error.get("message", "")) if error.__class__ is dict else f"a malformed error: {error!r:.200}"
        return _Handover(f"the server on {path} failed after it may have run hooks: {why}")
    if code == OTHER_HOME:
        data = error.get("data")
        served = data.get("home") if data.__class__ is dict else "another home"
        _warn(f"hookbus {verb}: the server on {path} serves {served}, not {home}; running in-process")
    elif code == OTHER_TIER:
        _warn(f"hookbus {verb}: {error.get('message')} (restart the server to load the managed directory this process would); running in-process")
    elif code != SHUTTING_DOWN:
        _warn(f"hookbus {verb}: the server on {path} ran nothing: {error.get('message')}; running in-process")
    return _IN_PROCESS  # refused before anything ran: the hooks run here


def _read_input(source: str | None) -> str | None:
    """The envelope's text, as ``hookbus.cli`` reads it; None when it cannot be read (the
    full command line then says why). Stdin, once read, is handed on to it."""
    if source is None:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        source = "-"
    if source == "-":
        return _read_stdin()
    try:
        with open(source, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


def _read_stdin() -> str | None:
    """Stdin's text, decoded as ``sys.stdin`` decodes it; None when it cannot be. Either
    way, ``sys.stdin`` is left holding the same bytes, for the full command line to read
    if it takes over."""
    import io  # imported by the interpreter itself already

    stdin = sys.stdin
    raw = getattr(stdin, "buffer", None)
    if raw is None:
        text = stdin.read()
        sys.stdin = io.StringIO(text)
        return text
    data = raw.read()

    def replay() -> io.TextIOWrapper:
        return io.TextIOWrapper(io.BytesIO(data), encoding=stdin.encoding, errors=stdin.errors)

    try:
        text = replay().read()
    except ValueError:  # not in stdin's encoding
        sys.stdin = replay()
        return None
    sys.stdin = io.StringIO(text)
    return text


def _print(line: str) -> bool:
    """Print ``line``; False when stdout's reader has gone (the full command line then
    exits 0 too)."""
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return False
    return True


def _warn(text: str) -> None:
    print(_printable(text), file=sys.stderr)


def _printable(text: str) -> str:
    if text.isascii() and text.isprintable():
        return text
    from hookbus.terminal import printable

    return printable(text)
