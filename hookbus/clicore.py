"""What the verbs of the command line share: reading the envelope, opening the bus, running
an event in-process or through a live server, Ctrl-C and SIGTERM while hooks run, and how
errors and warnings are printed. The verbs' modules (cli, bridge, claude_import, demo) use
this; it uses none of them.
"""

from __future__ import annotations

import json
import sys

from hookbus.rendezvous import IN_PROCESS_ENVIRONMENT
from hookbus.terminal import printable, printable_json

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False

if TYPE_CHECKING:
    import argparse
    import contextlib
    from typing import Any, Callable, Iterator

    from hookbus.bus import HookBus

#: How long past the longest async timeout ``hookbus emit`` waits for its async hooks.
EMIT_DRAIN_GRACE_SECONDS = 5.0


class UsageError(Exception):
    """Bad input on the command line: printed as one line, exit 1."""


def json_line(document: Any) -> str:
    """One JSON object on one line, strict (no NaN) and safe for a terminal: C1 controls
    and direction characters escaped, as JSON already escapes C0 controls."""
    from hookbus.jsontext import strict_json

    return printable_json(strict_json(document).decode())


def say(text: str = "") -> None:
    print(printable(text))


def read_envelope(source: str | None) -> dict[str, Any]:
    if source is None:
        if sys.stdin is None or sys.stdin.isatty():
            return {}
        text = sys.stdin.read()
    elif source == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {source}: {exc.strerror}") from None
    if not text.strip():
        return {}
    try:
        envelope = json.loads(text)
    except RecursionError:
        raise UsageError("the envelope is nested too deeply to read") from None
    except ValueError as exc:
        raise UsageError(f"the envelope is not valid JSON: {exc}") from None
    if not isinstance(envelope, dict):
        raise UsageError("the envelope must be a JSON object")
    return envelope


def open_bus(args: argparse.Namespace, quiet: bool = False) -> HookBus:
    """The bus of ``--home``. ``quiet``: the verb prints load problems itself."""
    import logging

    from hookbus.bus import HookBus

    if quiet:
        logging.getLogger("hookbus.load").setLevel(logging.ERROR)
    bus = HookBus(args.home)
    root = bus.home.root
    if not root.is_dir():
        warn(
            f"hookbus {args.verb}: the home {root} does not exist, so no hook can fire: create "
            f"{root}/hooks/<id>/hook.json, or name another home with --home or VIX_HOME"
        )
    return bus


class Interrupts:
    """SIGINT and SIGTERM while a verb runs hooks: the hooks' process groups are killed, each
    fire is recorded as interrupted, and the verb exits 128 + the signal's number, with no
    traceback. The handler only starts a thread: the bus takes locks that the interrupted
    (main) thread may be holding."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def watching(self, bus: HookBus) -> contextlib.AbstractContextManager[None]:
        import contextlib

        return contextlib.contextmanager(self._watching)(bus)

    def _watching(self, bus: HookBus) -> Iterator[None]:
        import signal
        import threading

        def on_signal(signum: int, frame: object) -> None:
            if self.signum is not None:
                return  # already stopping
            self.signum = signum
            reason = f"interrupted by {signal.Signals(signum).name}"
            threading.Thread(target=bus.interrupt, args=(reason,), name="hookbus-interrupt", daemon=True).start()

        previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def exit_code(self, code: int) -> int:
        return 128 + self.signum if self.signum is not None else code



def decide_in_process(
    args: argparse.Namespace,
    event: str,
    envelope: dict[str, Any],
    interrupts: Interrupts,
    answer: Callable[[dict[str, Any]], None],
) -> dict[str, Any]:
    """Run ``event``'s hooks here, hand the decision to ``answer`` as soon as it is known,
    then wait for the async hooks (unless interrupted) and return it."""
    from hookbus.console import log_to_stderr

    log_to_stderr()
    bus = open_bus(args)
    drain = max(
        (hook.timeout for hook in bus.snapshot.hooks.values() if not hook.is_sync), default=0.0
    )
    with interrupts.watching(bus):
        try:
            decided = bus.emit(event, envelope)
            decision = decided.as_dict()
            answer(decision)
            for failure in decided.failed:
                warn(f"hookbus {args.verb}: {failure.line()}")
        finally:
            bus.close(timeout=0.0 if interrupts.signum else drain + EMIT_DRAIN_GRACE_SECONDS)
    return decision


def decide_via_server(
    args: argparse.Namespace, event: str, envelope: dict[str, Any], verb: str
) -> dict[str, Any] | None:
    """The decision of a live ``hookbus serve`` of ``--home`` (``--socket``) for ``event``;
    None when there is none to use, and the caller runs the hooks in-process."""
    import os

    if getattr(args, "no_server", False) or any(os.environ.get(name) for name in IN_PROCESS_ENVIRONMENT):
        return None
    from hookbus.client import Client, NoServer, OtherHome, RemoteError
    from hookbus.failures import say_server_notes
    from hookbus.protocol import SHUTTING_DOWN
    from hookbus.rendezvous import home_root

    home = home_root(args.home)
    try:
        client = Client(args.socket, home=home)
    except NoServer:
        return None
    except OSError as exc:  # UntrustedPeer included
        warn(f"{verb}: not using the server: {exc}; running in-process")
        return None
    with client:
        try:
            decision = client.emit(event, envelope, failures=True)
            say_server_notes(decision, verb, warn)
            return decision
        except OtherHome as exc:
            served = exc.data.get("home") if isinstance(exc.data, dict) else "another home"
            warn(f"{verb}: the server on {client.path} serves {served}, not {home}; running in-process")
            return None
        except RemoteError as exc:
            if exc.code == SHUTTING_DOWN:
                return None  # refused, so not run
            raise UsageError(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"the server on {client.path} failed before answering (its hooks may have run): {exc}") from None


def warn(text: str) -> None:
    print(printable(text), file=sys.stderr)
