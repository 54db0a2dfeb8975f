"""``hookbus claude-code-hook``, ``gemini-cli-hook`` and ``codex-hook`` on the full command line:
everything ``hookbus.serve.quickpath`` does not answer on its way to a server.

The host runs the tool on anything but a deny, so nothing hookbus itself gets wrong may
come out as its allow. An envelope it cannot read whole (nested too deeply, not UTF-8, not
JSON), a server that took the request and then gave no answer, a bus that cannot start:
each is decided as the home's hooks decide a failure (``HookBus.undecided``), and when not
even that can run, by ``hookbus.hosts.lastresort``. The reason goes to stderr either way.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from hookbus.hosts.bridge import HOSTS, BridgeInputError, Host
from hookbus.hosts.hostinput import read_host_envelope
from hookbus.terminal import printable
from hookbus.cli.core import (
    Interrupts,
    ServerLost,
    UsageError,
    decide_in_process,
    decide_via_server,
    warn,
)

if TYPE_CHECKING:
    import argparse


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", metavar="PATH", help="the socket of a `hookbus serve` to use when one answers there")
    parser.add_argument("--no-server", action="store_true", help="run the hooks in this process even if a server answers")
    parser.add_argument(
        "--undecided", metavar="WHY",
        help="run no hook: decide as if each matching hook had failed for WHY, under its on_error (the gate's, after a "
        "server that may have run them gave no answer)",
    )
    parser.set_defaults(func=cmd_host_hook)


def cmd_host_hook(args: argparse.Namespace) -> int:
    """``hookbus claude-code-hook``, ``gemini-cli-hook`` and ``codex-hook`` on the full command
    line (``hookbus.serve.quickpath`` answers the common case before this is imported)."""
    return run_host_hook(args, HOSTS[args.verb])


def run_host_hook(args: argparse.Namespace, host: Host) -> int:
    reading = read_host_envelope(_stdin_bytes())
    host_envelope, salvaged = reading.envelope, reading.salvaged
    unreadable: str | None = reading.unreadable or args.undecided
    try:
        request = host.request(host_envelope, os.environ)
    except BridgeInputError as exc:
        if unreadable is None:
            raise UsageError(str(exc)) from None  # a readable envelope of no host: run by hand
        return _last_resort(args, host, None, None, unreadable)
    if request is None:
        if host.says_empty:
            print("{}", flush=True)
        return 0
    event, envelope = request
    host_event = str(host_envelope["hook_event_name"])
    if salvaged:
        # Only the event could be read: which hooks match cannot be told.
        assert unreadable is not None
        return _last_resort(args, host, host_event, event, unreadable)
    answered: list[dict[str, Any]] = []
    #: Whether each answer was a refusal the host takes by exit code (Codex CLI's exit 2).
    refused: list[bool] = []

    def answer(decision: dict[str, Any]) -> None:
        answered.append(decision)
        refused.append(_print_answer(host, host_event, event, envelope, decision))

    verb = f"hookbus {host.verb}"
    try:
        try:
            decision = decide_via_server(args, event, envelope, verb, unreadable)
        except ServerLost as exc:
            decision, unreadable = None, exc.why
        if decision is not None:
            answer(decision)
            return 2 if any(refused) else 0
        interrupts = Interrupts()
        decide_in_process(args, event, envelope, interrupts, answer, unreadable)
        return interrupts.exit_code(2 if any(refused) else 0)
    except Exception as exc:  # MemoryError, RecursionError, OSError, a plugin's bug, ...
        if answered:
            warn(f"{verb}: after the answer: {type(exc).__name__}: {exc}")
            return 0
        return _last_resort(args, host, host_event, event, f"{type(exc).__name__}: {exc}")


def _stdin_bytes() -> bytes:
    stdin = sys.stdin
    if stdin is None:
        return b""
    buffer = getattr(stdin, "buffer", None)
    if buffer is not None:
        data: bytes = buffer.read()
        return data
    return stdin.read().encode("utf-8", "surrogateescape")  # handed over as text already


def _print_answer(host: Host, host_event: str, event: str, envelope: dict[str, Any], decision: dict[str, Any]) -> bool:
    """Print the host's answer; True when the host must also hear it as exit 2 (the reason
    is then stderr's first line, as the host shows it)."""
    from hookbus.hosts.bridge import output_text

    output, notes = host.answer(host_event, event, envelope, decision)
    refusal = host.refusal(event, decision)
    if output is not None:
        sys.stdout.write(output_text(output) + "\n")
        sys.stdout.flush()
    if refusal is not None:
        print(printable(refusal, keep="\n\t"), file=sys.stderr, flush=True)  # the host reads it whole
    for note in notes:
        warn(f"hookbus {host.verb}: {note}")
    return refusal is not None


def _last_resort(args: argparse.Namespace, host: Host, host_event: str | None, event: str | None, why: str) -> int:
    """Answer without the engine: deny when a fail-closed hook of ``event`` (of any event,
    when it is unknown) exists or cannot be ruled out; no opinion otherwise."""
    from hookbus.hosts.lastresort import last_resort
    from hookbus.serve.rendezvous import home_root

    deny, reason = last_resort(home_root(args.home), event, why)
    warn(f"hookbus {host.verb}: {reason}")
    if not deny:
        # Exit 1: no opinion to both hosts, and the one they show the user (with stderr),
        # where a 0 would hide that hookbus failed.
        return 1
    if host_event is not None and event is not None:
        try:
            refused = _print_answer(host, host_event, event, {}, {"behavior": "deny", "reason": reason})
            return 2 if refused else 0
        except Exception:  # noqa: BLE001 - the exit code below still denies
            pass
    # The event is unknown (or its answer could not be written): exit 2 is a block for
    # every host event that can block, with stderr as the reason.
    print(reason, file=sys.stderr, flush=True)
    return 2
