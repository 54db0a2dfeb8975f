"""``POST /gate/claude-code``, ``/gate/gemini-cli`` and ``/gate/codex``: the gate's way to the server
(``hookbus/hosts/gate.sh``, a bash command hook that starts no Python while a server
answers), and ``POST /gemini-cli``: what ``hookbus gemini-cli-hook`` prints, over http.

The gate must print exactly what the command bridge would for the same stdin, and exit
with the same code, so the server answers it with the bridge's whole outcome: its exit
code (``hookbus-exit``), its stdout and then its stderr in the body (``hookbus-stdout``:
how many bytes of the body are stdout), computed as ``hookbus.serve.quickpath`` computes
them from a server's decision. Anything the bridge's quick path would hand to the full
command line (an envelope that is not plain UTF-8 JSON, one that names no event, NaN) is
answered ``422`` without running anything: the gate then runs the bridge itself, which is
exact by construction.

Hooks run at most once. The gate says by when the server must start (``hookbus-start-by``,
seconds since the epoch, as the socket's clients send ``start_by``); a request read later
runs nothing, and the server says ``102`` (``hookbus-wait``: how long the hooks may take)
before the first hook starts. So a gate that heard nothing in time may run the hooks
itself, and one that heard ``102`` but no answer decides without running them. Every
answer but a ``200`` or a ``500`` that says ``hookbus-undecided`` means nothing ran.

The gate also checks that what answers is this server (``hookbus-proof``, a secret of the
run file only the user can read, ``hookbus.serve.gatefile``): another user's process on the
port while the server is down cannot answer it.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Mapping

from hookbus.hosts.bridge import BridgeInputError, Host, output_text
from hookbus.serve.claudehttp import MAX_RUNNING, PARSE_INLINE_BYTES, Reply
from hookbus.serve.leanjson import LeanJSONError, dumps, loads

if TYPE_CHECKING:
    import asyncio

    from hookbus.bus import HookBus
    from hookbus.decision import Decision
    from hookbus.workers import ElasticThreads

logger = logging.getLogger("hookbus")

#: The envelope is one the bridge's quick path hands to the full command line: the gate
#: runs the bridge, which then says and decides exactly what it always does. Nothing ran.
RUN_THE_BRIDGE = 422
#: Nothing ran, and the gate runs the bridge: too late, too busy, shutting down.
NOT_RUN = 503
#: The hooks may have run and no decision came: the gate decides without running them
#: (``hookbus-undecided`` says why).
UNDECIDED = 500
#: The prefix of the headers that carry the host's variables (``hookbus-env-claude_project_dir``).
ENV_HEADER = b"hookbus-env-"
START_BY_HEADER = b"hookbus-start-by"


class Outcome:
    """What a bridge would do: its exit code, stdout and stderr lines."""

    __slots__ = ("exit_code", "stdout", "stderr")

    def __init__(self, exit_code: int = 0, stdout: str = "", stderr: list[str] | None = None) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr or []


def _printable(text: str) -> str:
    """A stderr line as the bridge's quick path writes it (``quickpath._warn``); the
    quick path is not imported, since it reaches for the full command line."""
    if text.isascii() and text.isprintable():
        return text
    from hookbus.terminal import printable

    return printable(text)


def _reason(text: str) -> str:
    """A refusal's reason as the bridges write it on stderr: its lines kept, for the host
    reads it whole (``hookbus.hosts.command``), other controls shown as escapes."""
    from hookbus.terminal import printable

    return printable(text, keep="\n\t")


def host_environ(fields: Mapping[bytes, bytes], host: Host) -> dict[str, str]:
    """The host's variables the gate forwarded (those the bridge reads from its own
    environment), as ``os.environ`` would hold them."""
    environ: dict[str, str] = {}
    for variable, _ in host.variables:
        value = fields.get(ENV_HEADER + variable.lower().encode())
        if value is not None:
            environ[variable] = os.fsdecode(value)
    return environ


class BridgeEndpoint:
    """Answers one host's bridge over http: ``gate`` (the gate's protocol, with the proof)
    or plain (``POST /gemini-cli``: the body is the bridge's stdout). ``reply`` is always
    called on the loop's thread, once per request; ``interim`` before it, at most once."""

    def __init__(
        self, bus: HookBus, threads: ElasticThreads, loop: asyncio.AbstractEventLoop, host: Host, *, gate: bool, proof: str
    ) -> None:
        self.bus = bus
        self.host = host
        self.gate = gate
        self._proof = proof.encode()
        self._threads = threads
        self._loop = loop
        self.running = 0
        self.verb = f"hookbus {host.verb}"
        #: Requests answered with the bridge's outcome; and those sent to the bridge.
        self.answered = 0
        self.sent_to_bridge = 0

    # -- what came ------------------------------------------------------------------------

    def handle(
        self, body: bytes, fields: Mapping[bytes, bytes], reply: Callable[[Reply], None], interim: Callable[[float], None]
    ) -> None:
        start_by: float | None = None
        given = fields.get(START_BY_HEADER)
        if given is not None:
            try:
                start_by = float(given)
            except ValueError:
                reply(Reply.text(400, f"hookbus-start-by: expected seconds since the epoch, got {given[:64]!r}; nothing was run"))
                return
        if start_by is not None and _time() > start_by:
            reply(self._not_run("too late: the gate stopped waiting before the server read its request"))
            return
        environ = host_environ(fields, self.host)
        if len(body) <= PARSE_INLINE_BYTES:
            self._decide(_parse(body), body, environ, start_by, reply, interim)
            return
        loop = self._loop

        def parse_and_hand_back() -> None:
            parsed = _parse(body)
            loop.call_soon_threadsafe(self._decide, parsed, body, environ, start_by, reply, interim)

        try:
            self._threads.submit(parse_and_hand_back)
        except RuntimeError as exc:
            reply(self._not_run(f"no thread could be started to read the request ({exc})"))

    def unparsed(self, head: bytes, why: str, status: int) -> Reply:
        """A request not parsed (too large, too busy): nothing ran. The gate runs the
        bridge; a plain client is told why."""
        if self.gate:
            return self._not_run(why)
        return Reply.text(status, f"{why}; nothing was run")

    # -- deciding -------------------------------------------------------------------------

    def _decide(
        self,
        parsed: dict[str, Any] | str,
        body: bytes,
        environ: dict[str, str],
        start_by: float | None,
        reply: Callable[[Reply], None],
        interim: Callable[[float], None],
    ) -> None:
        found = self._request(parsed, body, environ)
        if isinstance(found, Reply):
            reply(found)
            return
        host_event, event, envelope = found
        tier = self._other_tier()
        if tier is not None:
            reply(self._not_run(tier))
            return
        if self.running >= MAX_RUNNING:
            reply(self._not_run(f"the server is busy: {self.running} requests are running hooks, the most it runs at once"))
            return

        def started(wait: float) -> None:
            # On the loop's thread, before the first hook starts: a gate that gave up
            # meanwhile may be running the hooks itself.
            if start_by is not None and _time() > start_by:
                raise _TooLate()
            if self.gate:
                interim(wait)

        try:
            future = self.bus.submit(event, envelope, on_start=started)
        except _TooLate:
            reply(self._not_run("too late: the gate stopped waiting before the hooks could start"))
            return
        except Exception as exc:  # a bus shutting down, no thread to be had: nothing ran
            reply(self._not_run(f"{type(exc).__name__}: {exc}"))
            return
        if future.done():
            # Nothing matched, or nothing waited for: the bridge's quick path still says
            # what the server's answer carries (the home's load problems).
            reply(self._answer(host_event, event, envelope, future))
            return
        self.running += 1
        loop = self._loop

        def done(_: Future[Decision]) -> None:
            loop.call_soon_threadsafe(self._finished, host_event, event, envelope, future, reply)

        future.add_done_callback(done)

    def _request(self, parsed: dict[str, Any] | str, body: bytes, environ: dict[str, str]) -> tuple[str, str, dict[str, Any]] | Reply:
        """(the host's event, vixd's, the envelope) to run the hooks for; or the answer when
        there is none to run: the gate is sent to the bridge for anything its quick path
        would hand to the full command line, a plain client gets what that decides."""
        why: str | None = parsed if isinstance(parsed, str) else None
        request = None
        if why is None:
            assert isinstance(parsed, dict)
            try:
                request = self.host.request(parsed, environ)
            except BridgeInputError as exc:
                why = str(exc)
            else:
                if request is None:
                    return self._nothing()
                try:
                    dumps(request[1], ensure_ascii=False)
                except (LeanJSONError, UnicodeEncodeError):
                    why = "the envelope holds what the server's wire does not carry (NaN, a lone surrogate)"
        if why is None:
            assert request is not None and isinstance(parsed, dict)
            return str(parsed["hook_event_name"]), request[0], request[1]
        if self.gate:
            self.sent_to_bridge += 1
            return Reply.text(RUN_THE_BRIDGE, f"{why}: run the bridge; nothing was run")
        return self._plain_odd(body, environ)

    def _plain_odd(self, body: bytes, environ: dict[str, str]) -> tuple[str, str, dict[str, Any]] | Reply:
        """``POST /gemini-cli`` with an envelope the quick path would not take, read as the
        full command line reads it (``hookbus.hosts.command``): its hooks run when it is
        whole; else each matching hook fails under its on_error, and when not even that
        can be told, the last resort decides from the files."""
        from hookbus.hosts.hostinput import read_host_envelope

        reading = read_host_envelope(body)
        try:
            request = self.host.request(reading.envelope, environ)
        except BridgeInputError as exc:
            if reading.unreadable is None:
                return Reply.text(400, str(exc).replace("on stdin", "in the body"))
            return self._last_resort(None, None, reading.unreadable)
        if request is None:
            return self._nothing()
        event, envelope = request
        host_event = str(reading.envelope["hook_event_name"])
        if reading.unreadable is None:
            return host_event, event, envelope
        if reading.salvaged:
            return self._last_resort(host_event, event, reading.unreadable)
        try:
            decision = self.bus.undecided(event, envelope, reading.unreadable).as_dict()
            output, notes = self.host.answer(host_event, event, envelope, decision)
            refusal = self.host.refusal(event, decision)
        except Exception as exc:
            return self._last_resort(host_event, event, f"{reading.unreadable}; then {type(exc).__name__}: {exc}")
        stdout = "" if output is None else output_text(output) + "\n"
        if refusal is not None:
            return self._outcome(Outcome(2, stdout, [_reason(refusal), *notes]))
        return self._outcome(Outcome(0, stdout, notes))

    def _last_resort(self, host_event: str | None, event: str | None, why: str) -> Reply:
        """As ``hookbus.hosts.command._last_resort``: a deny when a fail-closed hook of the
        event (of any, when it is unknown) exists or cannot be ruled out; else exit 1."""
        from hookbus.hosts.lastresort import last_resort

        deny, reason = last_resort(str(self.bus.home.root), event, why)
        said = f"{self.verb}: {reason}"
        if not deny:
            return self._outcome(Outcome(1, "", [said]))
        if host_event is not None and event is not None:
            try:
                denial = {"behavior": "deny", "reason": reason}
                output, _ = self.host.answer(host_event, event, {}, denial)
                refusal = self.host.refusal(event, denial)
                if output is not None and refusal is not None:
                    return self._outcome(Outcome(2, output_text(output) + "\n", [_reason(refusal), said]))
                if output is not None:
                    return self._outcome(Outcome(0, output_text(output) + "\n", [said]))
            except Exception:  # noqa: BLE001 - the exit code below still denies
                pass
        return self._outcome(Outcome(2, "", [said, reason]))

    def _nothing(self) -> Reply:
        return self._outcome(Outcome(0, "{}\n" if self.host.says_empty else ""))

    def _finished(
        self, host_event: str, event: str, envelope: dict[str, Any], future: Future[Decision], reply: Callable[[Reply], None]
    ) -> None:
        self.running -= 1
        reply(self._answer(host_event, event, envelope, future))

    def _answer(self, host_event: str, event: str, envelope: dict[str, Any], future: Future[Decision]) -> Reply:
        """The bridge's outcome for the server's decision: as ``quickpath._answer_host``
        writes it after a server answered (its notes, the failed hooks, the load's problems)."""
        from hookbus.failures import say_server_notes
        from hookbus.serve.server import decision_with_failures

        try:
            decision = future.result()
        except Exception as exc:
            return self._undecided(f"the server failed after it may have run hooks: {type(exc).__name__}: {exc}")
        try:
            # Through the wire's JSON and back, as the quick path receives it.
            answer = loads(dumps(decision_with_failures(self.bus, decision), ensure_ascii=False))
            lines: list[str] = []
            say_server_notes(answer, self.verb, lines.append)
            output, notes = self.host.answer(host_event, event, envelope, answer)
            refusal = self.host.refusal(event, answer)
            stdout = "" if output is None else output_text(output) + "\n"
            lines = [_printable(line) for line in lines]
            if refusal is not None:
                lines.append(_reason(refusal))  # the reason Codex CLI shows, with exit 2: as quickpath says it
            lines += [_printable(f"{self.verb}: {note}") for note in notes]
        except Exception as exc:
            return self._undecided(f"the server's decision could not be written: {type(exc).__name__}: {exc}")
        return self._outcome(Outcome(0 if refusal is None else 2, stdout, lines))

    # -- answers --------------------------------------------------------------------------

    def _outcome(self, outcome: Outcome) -> Reply:
        self.answered += 1
        stdout = outcome.stdout.encode("ascii", "backslashreplace")
        headers = [(b"hookbus-exit", str(outcome.exit_code).encode())]
        if not self.gate:
            for line in outcome.stderr:
                logger.info("POST /%s: %s", self.host.verb.replace("-hook", ""), line)
            return Reply(200, stdout, b"application/json", tuple(headers))
        stderr = "".join(line + "\n" for line in outcome.stderr).encode("utf-8", "backslashreplace")
        headers += [(b"hookbus-stdout", str(len(stdout)).encode()), (b"hookbus-proof", self._proof)]
        return Reply(200, stdout + stderr, b"text/plain; charset=utf-8", tuple(headers), sized=True)

    def _not_run(self, why: str) -> Reply:
        self.sent_to_bridge += 1
        return Reply.text(NOT_RUN, f"{why}; nothing was run")

    def _undecided(self, why: str) -> Reply:
        """The hooks may have run and there is no decision: the gate decides without
        running them; a plain client gets the decision of each matching hook's on_error."""
        logger.warning("POST /%s: %s", self.host.verb, why)
        if self.gate:
            header = why.encode("ascii", "backslashreplace").replace(b"\r", b" ").replace(b"\n", b" ")[:2000]
            return Reply(UNDECIDED, f"hookbus: {why}\n".encode("utf-8", "backslashreplace"), b"text/plain; charset=utf-8",
                         ((b"hookbus-undecided", header), (b"hookbus-proof", self._proof)), sized=True)
        return Reply.text(UNDECIDED, why)

    def _other_tier(self) -> str | None:
        """Why this server may not decide for the gate: the managed tier a bridge started
        now would load is not the one this server loads (the socket's OTHER_TIER)."""
        from hookbus.policy.managed import managed_identity

        loaded = self.bus.managed_tier
        wanted = managed_identity()
        if wanted == loaded:
            return None
        return f"this server loads {loaded or 'no managed directory'}, and a bridge would load {wanted or 'none'}"


class _TooLate(Exception):
    pass


def _parse(body: bytes) -> dict[str, Any] | str:
    """The envelope as the bridge's quick path reads it; a string saying why when it would
    hand it to the full command line."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the envelope is not UTF-8 (byte {exc.start})"
    if not text.strip():
        return {}
    try:
        received = loads(text)
    except LeanJSONError:
        return "the envelope is not plain JSON"
    if received.__class__ is not dict:
        return "the envelope is not a JSON object"
    envelope: dict[str, Any] = received
    return envelope


def _time() -> float:
    import time

    return time.time()
