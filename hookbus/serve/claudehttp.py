"""``POST /claude-code``: Claude Code's http hook, answered by the server's own bus.

The body is what Claude Code gives a command hook on stdin, and the answer is what
``hookbus claude-code-hook`` would print for it: the same translation (``hookbus.hosts.
bridge``), the same reading of odd input (``hookbus.hosts.hostinput``), the same stop
memory (the bus's), the same bytes. An http hook has no exit code, so everything is said
in the JSON: a deny is ``permissionDecision: deny`` or ``decision: block``.

Claude Code runs the tool on any answer that is not a 2xx, so hookbus's own trouble is
never a bare error here either. What it cannot decide (an envelope it cannot read whole,
hooks it cannot start, a bus shutting down) is decided as each matching hook's
``on_error`` says (``HookBus.undecided``), and when not even that can run, as
``hookbus.hosts.lastresort`` says from the files: a deny when a fail-closed hook could
fire. Only what no fail-closed hook could have caught is answered with an error status,
which Claude Code shows as a non-blocking error. A request the listener will not parse (too
large, or the server too busy to take it) is decided from its event alone (``unparsed``):
a deny when a fail-closed hook in effect, the home guard among them, fires on that event.

What ``hookbus status`` shows of it is what is in effect now: the events Claude Code posted
here on which a fail-closed hook is in effect (``fail_closed_posted``), recomputed when the
hooks change.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from hookbus.decision import ALLOW
from hookbus.hosts.bridge import CLAUDE_CODE, BridgeInputError, output_text
from hookbus.hosts.hostinput import HostInput, read_host_envelope, salvage_event
from hookbus.hosts.httpbridge import DECISION_EVENTS
from hookbus.hosts.lastresort import BLOCKING_EVENTS, last_resort

if TYPE_CHECKING:
    from hookbus.bus import HookBus
    from hookbus.decision import Decision
    from hookbus.runners import Hook
    from hookbus.registry import EventIndex
    from hookbus.workers import ElasticThreads

logger = logging.getLogger("hookbus")

#: Bodies longer than this are read on a thread, so that the loop answers others meanwhile.
PARSE_INLINE_BYTES = 64 * 1024
#: Requests running hooks at once, over every http connection; past it, the answer is what
#: the hooks' on_error says for "server busy" (Claude Code cannot run them itself).
MAX_RUNNING = 256
#: Notes for the server's log (what Claude Code cannot hear) said at most this many times.
MAX_NOTES_SAID = 64


class Reply:
    """An HTTP answer: status, body, its type, and headers of its own."""

    __slots__ = ("status", "body", "content_type", "headers", "sized")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        content_type: bytes = b"application/json",
        headers: tuple[tuple[bytes, bytes], ...] = (),
        sized: bool = False,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers
        #: The reason phrase is how many bytes follow the status line (the gate's: it reads
        #: them in one call, where reading to the connection's end waits for the close).
        self.sized = sized

    @classmethod
    def text(cls, status: int, message: str) -> Reply:
        return cls(status, f"hookbus: {message}\n".encode("utf-8", "backslashreplace"), b"text/plain; charset=utf-8")


#: Nothing to say: Claude Code reads an empty 2xx as success, with no output.
NOTHING = Reply(200)


class ClaudeCodeEndpoint:
    """Answers ``POST /claude-code`` from ``bus``; ``reply`` is always called on the loop's
    thread, once per request."""

    def __init__(self, bus: HookBus, threads: ElasticThreads, loop: asyncio.AbstractEventLoop) -> None:
        self.bus = bus
        self._threads = threads
        self._loop = loop
        self.running = 0
        self._notes_said: set[str] = set()
        self.host = CLAUDE_CODE
        #: The events with a fail-closed hook in effect, as of a generation of the hooks.
        self._fail_closed: tuple[int, frozenset[str]] = (-1, frozenset())
        #: The events Claude Code posted here (its name: vixd's), for status.
        self._posted: dict[str, str] = {}
        #: Those on which the server warned of a fail-closed hook; one leaves when its hook
        #: does, so that it is warned of again if one comes back.
        self._warned: set[str] = set()

    # -- what Claude Code sent ------------------------------------------------------------

    def handle(self, body: bytes, reply: Callable[[Reply], None]) -> None:
        # Claude Code gives an http hook none of the variables a command hook gets
        # (CLAUDE_PROJECT_DIR is not in its own environment): the envelope is all there is.
        environ: dict[str, str] = {}
        if len(body) <= PARSE_INLINE_BYTES:
            self._decide(read_host_envelope(body), environ, reply)
            return
        loop = self._loop

        def read_and_hand_back() -> None:
            reading = read_host_envelope(body)
            loop.call_soon_threadsafe(self._decide, reading, environ, reply)

        try:
            self._threads.submit(read_and_hand_back)
        except RuntimeError as exc:
            reply(self._failed(None, None, f"no thread could be started to read the request ({exc})", salvage_event(_head(body))))

    def unparsed(self, head: bytes, why: str, status: int) -> Reply:
        """The answer to a request that is not parsed (a body too large to take, a server
        too busy to take it), of which ``head`` is the start: a deny in Claude Code's shape
        when a fail-closed hook in effect, the home guard among them, fires on its event
        (on any event that can block, when its event cannot be read), whatever its matcher;
        else ``status`` (Claude Code goes on), since no hook that could deny was skipped."""
        fields = salvage_event(_head(head))
        host_event = fields.get("hook_event_name")
        event = self.host.events.get(host_event) if isinstance(host_event, str) else None
        if host_event is not None and event is None:
            return NOTHING  # an event hookbus has no counterpart of: no hook runs on it
        if not self.fail_closed_could_fire(event):
            logger.warning("POST /claude-code: %s; no fail-closed hook could fire on it (%s)", why, host_event or "event unknown")
            return Reply.text(status, f"{why}; nothing was run, and no fail-closed hook could fire on it")
        reason = f"hookbus could not decide ({why}); a fail-closed hook could fire on it, so it is denied"
        logger.warning("POST /claude-code: %s", reason)
        return self._deny(host_event if event is not None else None, event, reason)

    def fail_closed_could_fire(self, event: str | None) -> bool:
        """Whether a fail-closed hook in effect fires on ``event`` (on any event that can
        block, when None), whatever its matcher."""
        events = self.fail_closed_events()
        return bool(events & set(BLOCKING_EVENTS)) if event is None else event in events

    def fail_closed_events(self) -> frozenset[str]:
        """vixd's events with a fail-closed hook in effect now: enabled, not a shadow, under
        the kill switch as it is, the home guard among them (while it is on)."""
        snapshot = self.bus.snapshot
        generation, events = self._fail_closed
        if generation != snapshot.generation:
            events = frozenset(
                event for event, index in snapshot.index.items()
                if any(hook.spec.on_error == "deny" and not hook.spec.shadow for hook in _hooks_of(index))
            )
            self._fail_closed = snapshot.generation, events
        return events

    def fail_closed_posted(self) -> list[str]:
        """The events Claude Code posted here on which a fail-closed hook is in effect now:
        if this server is down, Claude Code runs the tool there."""
        events = self.fail_closed_events()
        return sorted(host_event for host_event, event in self._posted.items() if event in events)

    def ping(self) -> Reply:
        """What ``GET /ping`` answers a client with the token: this server, and its home."""
        import os

        from hookbus import __version__

        document = {"hookbus": __version__, "home": str(self.bus.home.root), "pid": os.getpid()}
        return Reply(200, (output_text(document) + "\n").encode())

    def _check_fail_closed(self, host_event: str, event: str) -> None:
        if host_event not in self._posted and len(self._posted) < MAX_NOTES_SAID:
            self._posted[host_event] = event
            if host_event in DECISION_EVENTS:
                logger.info(
                    "POST /claude-code: Claude Code posts %s here, whose answer can approve or rewrite a call: while this "
                    "server is down, whoever listens on its port is obeyed there (docs/security.md, The http listener)",
                    host_event,
                )
        if event not in self.fail_closed_events():
            self._warned.discard(host_event)
        elif host_event not in self._warned:
            self._warned.add(host_event)
            logger.warning(
                "POST /claude-code: a fail-closed hook fires on %s, which Claude Code posts over http: when it cannot "
                "reach this server it runs the tool. Run `hookbus import claude-code FILE --install-bridge --http URL` "
                "again, and %s keeps the command bridge, which decides in-process",
                host_event, host_event,
            )

    def _decide(self, reading: HostInput, environ: dict[str, str], reply: Callable[[Reply], None]) -> None:
        try:
            request = self.host.request(reading.envelope, environ)
        except BridgeInputError as exc:
            if reading.unreadable is None:
                reply(Reply.text(400, str(exc).replace("on stdin", "in the body")))
            else:
                reply(self._last_resort(None, None, reading.unreadable))
            return
        if request is None:
            reply(NOTHING)
            return
        event, envelope = request
        host_event = str(reading.envelope["hook_event_name"])
        self._check_fail_closed(host_event, event)
        if reading.salvaged:
            assert reading.unreadable is not None
            reply(self._last_resort(host_event, event, reading.unreadable))
            return
        if reading.unreadable is not None:
            reply(self._failed(host_event, event, reading.unreadable, envelope))
            return
        if self.running >= MAX_RUNNING:
            why = f"the server is busy: {self.running} http requests are running hooks, the most it runs at once"
            reply(self._failed(host_event, event, why, envelope))
            return
        try:
            future = self.bus.submit(event, envelope)
        except Exception as exc:  # a bus shutting down, an envelope it refuses, no memory
            reply(self._failed(host_event, event, f"{type(exc).__name__}: {exc}", envelope))
            return
        if future.done():
            # Nothing matched (the bus's one shared allow): nothing to say, nothing to render.
            nothing = future.exception() is None and future.result() is ALLOW
            reply(NOTHING if nothing else self._answer(host_event, event, envelope, future))
            return
        self.running += 1
        loop = self._loop

        def done(_: Future[Decision]) -> None:
            loop.call_soon_threadsafe(self._finished, host_event, event, envelope, future, reply)

        future.add_done_callback(done)

    def _finished(
        self, host_event: str, event: str, envelope: dict[str, Any], future: Future[Decision], reply: Callable[[Reply], None]
    ) -> None:
        self.running -= 1
        reply(self._answer(host_event, event, envelope, future))

    # -- what it is told ------------------------------------------------------------------

    def _answer(self, host_event: str, event: str, envelope: dict[str, Any], future: Future[Decision]) -> Reply:
        try:
            decision = future.result().as_dict()
        except Exception as exc:
            return self._failed(host_event, event, f"{type(exc).__name__}: {exc}", envelope)
        try:
            return self._render(host_event, event, envelope, decision)
        except Exception as exc:
            return self._last_resort(host_event, event, f"the decision could not be written: {type(exc).__name__}: {exc}")

    def _render(self, host_event: str, event: str, envelope: Mapping[str, Any], decision: dict[str, Any]) -> Reply:
        output, notes = self.host.answer(host_event, event, envelope, decision)
        for note in notes:
            self._note(note)
        if output is None:
            return NOTHING
        return Reply(200, (output_text(output) + "\n").encode())

    def _failed(self, host_event: str | None, event: str | None, why: str, envelope: Mapping[str, Any]) -> Reply:
        """The decision when the hooks cannot run: each matching hook failed, under its
        on_error; from the files alone when not even that can be decided."""
        if host_event is None or event is None:
            return self._last_resort(None, None, why)
        logger.warning("POST /claude-code: hookbus could not decide %s: %s", event, why)
        try:
            decision = self.bus.undecided(event, envelope, why).as_dict()
            return self._render(host_event, event, envelope, decision)
        except Exception as exc:
            return self._last_resort(host_event, event, f"{why}; then {type(exc).__name__}: {exc}")

    def _last_resort(self, host_event: str | None, event: str | None, why: str) -> Reply:
        deny, reason = last_resort(str(self.bus.home.root), event, why)
        logger.warning("POST /claude-code: %s", reason)
        if not deny:
            return Reply.text(500, reason)
        return self._deny(host_event, event, reason)

    def _deny(self, host_event: str | None, event: str | None, reason: str) -> Reply:
        if host_event is not None and event is not None:
            try:
                return self._render(host_event, event, {}, {"behavior": "deny", "reason": reason})
            except Exception:  # noqa: BLE001 - the top-level block below still denies
                pass
        # The event is unknown: a top-level block stops every event that can be stopped.
        return Reply(200, (output_text({"decision": "block", "reason": reason}) + "\n").encode())

    def _note(self, note: str) -> None:
        if note not in self._notes_said and len(self._notes_said) < MAX_NOTES_SAID:
            self._notes_said.add(note)
            logger.info("POST /claude-code: %s", note)


def _hooks_of(index: EventIndex) -> Iterator[Hook]:
    """Every hook of an event's index (a hook may be listed under several names)."""
    yield from index.match_all
    yield from index.regex
    for hooks in index.by_name.values():
        yield from hooks


def _head(data: bytes) -> str:
    return data[:PARSE_INLINE_BYTES].decode("utf-8", "replace")
