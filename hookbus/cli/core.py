"""What the verbs of the command line share: reading the envelope, opening the bus, running
an event in-process or through a live server, Ctrl-C and SIGTERM while hooks run, and how
errors and warnings are printed. The verbs' modules (cli, bridge, claude_import, demo) use
this; it uses none of them.
"""

from __future__ import annotations

import sys

from hookbus.terminal import printable, printable_json

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False

if TYPE_CHECKING:
    import argparse
    import contextlib
    from pathlib import Path
    from typing import Any, Callable, Iterator

    from hookbus.bus import HookBus

#: How long past the longest async timeout ``hookbus emit`` waits for its async hooks.
EMIT_DRAIN_GRACE_SECONDS = 5.0


class UsageError(Exception):
    """Bad input on the command line: printed as one line, exit 1."""


class UnreadableEnvelope(UsageError):
    """The envelope is JSON, but nested deeper than MAX_NESTING levels: ``fields`` holds
    its top-level fields (enough to match hooks by), ``why`` says what is wrong. ``emit``,
    ``explain`` and the bridges decide by the hooks' on_error (``HookBus.undecided``);
    other verbs refuse it as a usage error."""

    def __init__(self, fields: dict[str, Any], why: str) -> None:
        super().__init__(f"the envelope cannot be read whole: {why}")
        self.fields = fields
        self.why = why


class ServerLost(Exception):
    """A server took the request and gave no decision: its hooks may have run, so they
    are not run again here; the caller decides as if each had failed (``why``)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def json_line(document: Any) -> str:
    """One JSON object on one line, strict (no NaN) and safe for a terminal: C1 controls
    and direction characters escaped, as JSON already escapes C0 controls."""
    from hookbus.jsontext import strict_json

    return printable_json(strict_json(document).decode())


def say(text: str = "") -> None:
    print(printable(text))


def read_envelope(source: str | None) -> dict[str, Any]:
    """The envelope from ``source`` (a file, ``-`` for stdin, None: stdin when it is not
    a terminal). UsageError when it cannot be read, is not UTF-8 or not a JSON object;
    UnreadableEnvelope (a UsageError) when it is nested past MAX_NESTING levels."""
    if source is None:
        if sys.stdin is None or sys.stdin.isatty():
            return {}
        source = "-"
    if source == "-":
        where = "stdin"
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8", "surrogateescape")
    else:
        where = source
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise UsageError(f"cannot read {source}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"the envelope on {where} is not UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}): JSON text is UTF-8") from None
    return parse_envelope(text)


def parse_envelope(text: str) -> dict[str, Any]:
    """``read_envelope``'s reading of an envelope's text."""
    from hookbus import deepjson

    if not text.strip():
        return {}
    try:
        envelope = deepjson.loads(text)
    except deepjson.TooDeep as exc:
        fields = deepjson.shallow(text, 1)
        if not isinstance(fields, dict):
            raise UsageError("the envelope must be a JSON object") from None
        raise UnreadableEnvelope(fields, f"the envelope is {exc}") from None
    except ValueError as exc:
        raise UsageError(f"the envelope is not valid JSON: {exc}") from None
    if not isinstance(envelope, dict):
        raise UsageError("the envelope must be a JSON object")
    return envelope


def open_bus(args: argparse.Namespace, quiet: bool = False, read_only: bool = False) -> HookBus:
    """The bus of ``--home``. ``quiet``: the verb prints load problems itself.
    ``read_only``: the bus writes nothing (no load error reaches a state.json)."""
    import logging

    from hookbus.bus import HookBus

    if quiet:
        logging.getLogger("hookbus.load").setLevel(logging.ERROR)
    bus = HookBus(args.home, read_only=read_only)
    missing = home_problem(str(bus.home.root))
    if missing is not None:
        # Managed hooks and the home guard still run: only the user's hooks cannot exist.
        warn(f"hookbus {args.verb}: {missing}, so no hook of yours can fire: {MAKE_A_HOME}")
    return bus


#: How to get a home, said wherever one is missing.
MAKE_A_HOME = "make one with `hookbus new ID --event EVENT`, or name the right one with --home or $VIX_HOME"


def home_problem(root: str) -> str | None:
    """Why ``root`` is no home (it does not exist, or is not a directory); None when it is
    one. Nothing is made: a mistyped ``--home`` must not become a new, empty home."""
    import os

    if os.path.isdir(root):
        return None
    return f"the home {root} {'is not a directory' if os.path.lexists(root) else 'does not exist'}"


def require_home(args: argparse.Namespace) -> None:
    """UsageError (exit 1, one line) when the home a verb inspects does not exist: an empty
    answer about it (no hooks, nothing to validate, no fires) would hide the mistake."""
    from hookbus.homepath import home_root

    missing = home_problem(home_root(args.home))
    if missing is not None:
        raise UsageError(f"{missing}: {MAKE_A_HOME}")


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



def kept_by_a_running_bus(hook_dir: Path) -> bool:
    """Whether a bus that is running (vixd, ``hookbus serve``) keeps the last good version
    of a hook whose file is broken: it says so in the hook's state.json."""
    import json

    from hookbus.errors import KEPT_LAST_GOOD, SpecError
    from hookbus.files import read_capped

    try:
        data, _ = read_capped(hook_dir / "state.json", 1 << 20)
        state = json.loads(data)
    except (SpecError, ValueError):
        return False
    error = state.get("load_error") if isinstance(state, dict) else None
    return isinstance(error, str) and KEPT_LAST_GOOD in error


def warn_of_last_good_versions(bus: HookBus, verb: str) -> None:
    """Say which broken hooks a running bus still enforces at their last good version,
    which this process, loading the home afresh, cannot: the one way an in-process
    decision differs from a server's."""
    snapshot = bus.snapshot
    for problem in snapshot.problems:
        hook_id = problem.hook_id
        if hook_id and hook_id not in snapshot.hooks and kept_by_a_running_bus(bus.home.hook_dir(hook_id)):
            warn(
                f"{verb}: hook {hook_id!r} is broken on disk; a running bus (hookbus serve, the daemon) still "
                "enforces its last good version, which this process cannot load, so it does not run here: fix "
                f"{bus.home.relative(bus.home.hook_dir(hook_id))}"
            )


def decide_in_process(
    args: argparse.Namespace,
    event: str,
    envelope: dict[str, Any],
    interrupts: Interrupts,
    answer: Callable[[dict[str, Any]], None],
    undecided: str | None = None,
) -> dict[str, Any]:
    """Run ``event``'s hooks here, hand the decision to ``answer`` as soon as it is known,
    then wait for the async hooks (unless interrupted) and return it. ``undecided``: run
    none, and decide as if each matching hook had failed for that reason."""
    from hookbus.cli.console import log_to_stderr

    log_to_stderr()
    bus = open_bus(args)
    warn_of_last_good_versions(bus, f"hookbus {args.verb}")
    drain = max(
        (hook.timeout for hook in bus.snapshot.hooks.values() if not hook.is_sync), default=0.0
    )
    with interrupts.watching(bus):
        try:
            decided = bus.emit(event, envelope) if undecided is None else bus.undecided(event, envelope, undecided)
            decision = decided.as_dict()
            answer(decision)
            for failure in decided.failed:
                warn(f"hookbus {args.verb}: {failure.line()}")
        finally:
            # Its caller waits for this process to exit: no shadow hook may hold it.
            bus.close(timeout=0.0 if interrupts.signum else drain + EMIT_DRAIN_GRACE_SECONDS, exiting=f"hookbus {args.verb}")
    return decision


def decide_via_server(
    args: argparse.Namespace, event: str, envelope: dict[str, Any], verb: str, undecided: str | None = None
) -> dict[str, Any] | None:
    """The decision of a live ``hookbus serve`` of ``--home`` (``--socket``) for ``event``;
    None when there is none to use, or it ran nothing (refused, busy, stopped): the caller
    runs the hooks in-process. ServerLost when it may have run hooks and gave no decision.
    ``undecided``: the envelope holds only the top-level fields, for that reason."""
    if getattr(args, "no_server", False):
        return None
    asked = ask_server(
        args, "emit", verb=verb, instead="running in-process", lost=ServerLost, quiet_other_home=False,
        event=event, envelope=envelope, failures=True, undecided=undecided,
    )
    if asked is None:
        return None
    decision, path = asked
    if not isinstance(decision, dict):
        raise ServerLost(f"the server on {path} sent no decision")
    from hookbus.failures import say_server_notes

    say_server_notes(decision, verb, warn)
    return decision


def ask_server(
    args: argparse.Namespace,
    method: str,
    *,
    verb: str | None = None,
    instead: str = "reading the home in this process",
    lost: type[Exception] = UsageError,
    quiet_other_home: bool = True,
    **params: Any,
) -> tuple[Any, str] | None:
    """What a live ``hookbus serve`` of ``--home`` answers ``method`` with, and where it
    listens; None when no server serves the home, or it ran nothing (then said on stderr,
    with ``instead``: what the verb does in its place). ``lost`` (raised with the reason)
    when it may have run hooks and gave no answer. Read-only verbs ask it so that what they
    show is what the server enforces; emit and the bridges, for their decision."""
    import os

    from hookbus.serve.client import Client, NoAnswer, NoServer, OtherHome, RemoteError
    from hookbus.serve.protocol import SHUTTING_DOWN
    from hookbus.serve.rendezvous import home_root, in_process_reason

    if in_process_reason(os.environ) is not None:
        return None
    verb = verb or f"hookbus {args.verb}"
    home = home_root(args.home)
    try:
        client = Client(getattr(args, "socket", None), home=home)
    except NoServer:
        return None
    except OSError as exc:  # UntrustedPeer, ServerBusy included
        warn(f"{verb}: not using the server: {exc}; {instead}")
        return None
    with client:
        try:
            answer = getattr(client, method)(**params)
            if method == "status" and isinstance(answer, dict) and not _same_tier(answer, verb, client.path, instead):
                return None
            return answer, client.path
        except OtherHome as exc:
            if not quiet_other_home:  # $HOOKBUS_SOCKET named another home's server
                served = exc.data.get("home") if isinstance(exc.data, dict) else "another home"
                warn(f"{verb}: the server on {client.path} serves {served}, not {home}; {instead}")
            return None
        except RemoteError as exc:
            if not exc.ran_nothing:
                raise lost(f"the server on {client.path} failed after it may have run hooks: {exc}") from None
            if exc.code != SHUTTING_DOWN:
                warn(f"{verb}: the server on {client.path} ran nothing: {exc}; {instead}")
            return None
        except NoAnswer as exc:
            raise lost(str(exc)) from None
        except (OSError, ValueError) as exc:  # NotStarted included: nothing ran
            warn(f"{verb}: {exc}; {instead}")
            return None


def _same_tier(status: dict[str, Any], verb: str, path: str, instead: str) -> bool:
    """Whether the server loads the managed tier this process would (what it shows is then
    what is enforced here); said on stderr when it does not."""
    from hookbus.policy.managed import managed_identity

    loaded, here = status.get("managed", ""), managed_identity()
    if loaded == here:
        return True
    warn(
        f"{verb}: the server on {path} loads {f'the managed directory {loaded}' if loaded else 'no managed directory'}, "
        f"and this process would load {f'the managed directory {here}' if here else 'none'}; {instead}"
    )
    return False


def warn(text: str) -> None:
    print(printable(text), file=sys.stderr)
