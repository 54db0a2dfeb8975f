"""What is recorded for one fire of one hook, and its JSON form (state.json and the log)."""

from __future__ import annotations

import time
from typing import Any, Literal, Mapping, Sequence

import attrs

from hookbus.durations import format_duration

#: sync: what the hook said (a failed one says allow and carries error); async: done | error.
Status = Literal["allow", "deny", "modify", "context", "done", "error"]
#: Whose hook fired: the user's (in the home), the organization's (the managed directory),
#: or hookbus's own (the built-in home guard).
Tier = Literal["user", "managed", "builtin"]
TIERS: tuple[str, ...] = ("user", "managed", "builtin")
CANCELLED_AT_SHUTDOWN = "cancelled at shutdown"
#: A tool name longer than this is recorded cut, with ``…``: it comes from the model, and
#: is repeated in every record of the emit (a real one is a few dozen characters).
MAX_TOOL_NAME = 200


def utc_timestamp(epoch: float | None = None) -> str:
    """RFC 3339 in UTC with milliseconds: ``2026-11-29T18:14:06.123Z``."""
    global _last_second
    moment = time.time() if epoch is None else epoch
    seconds = int(moment)
    # Every fire stamps a record: the date and time of a second are formatted once, not
    # once a fire (strftime was a twentieth of an in-process hook's emit).
    cached = _last_second
    if cached[0] == seconds:
        whole = cached[1]
    else:
        whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _last_second = (seconds, whole)
    return f"{whole}.{int((moment - seconds) * 1000):03d}Z"


#: The last second ``utc_timestamp`` formatted, and its text: one tuple, swapped whole, so
#: threads racing on it each read a consistent pair.
_last_second: tuple[int, str] = (-1, "")


def _to_microseconds(seconds: float) -> float:
    """A duration as the audit log stores it (``duration_ms`` to three decimals): so a
    record handed back by ``bus.trigger`` equals the one ``bus.read_runs`` reads later."""
    return round(float(seconds), 6)


@attrs.frozen
class RunRecord:
    """One fire of one hook, as every recorder receives it."""

    at: str
    hook_id: str
    event: str
    #: "sync" or "async"; a manual trigger is "async".
    mode: str
    status: Status
    #: Seconds the run took, to the microsecond (as stored).
    duration: float = attrs.field(converter=_to_microseconds)
    error: str | None = None
    thread_id: str | None = None
    #: The hook's own decision: behavior, reason, input, context (null keys left out).
    decision: dict[str, Any] | None = None
    #: Why the hook's decision did not take effect, when it did not (superseded, non-blocking).
    note: str | None = None
    #: True for ``bus.trigger`` / ``hookbus trigger``.
    manual: bool = False
    #: The envelope's ``tool_name`` when it held one (a string): which call the hook
    #: decided on. ``envelope_tool_name`` makes it from an envelope.
    tool_name: str | None = None
    #: A shadow hook's fire: its decision did not enter the merge. ``enforced`` is the
    #: behavior that the enforcing hooks decided, to compare it with.
    shadow: bool = False
    enforced: str | None = None
    #: Whose hook it is (``Tier``): written to the log only when it is not the user's.
    tier: Tier = "user"

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    def log_entry(self) -> dict[str, Any]:
        """The JSON line of the audit log."""
        # The rendered duration derives from the stored milliseconds, so reading a line back
        # and writing it again gives the same line.
        duration_ms = round(self.duration * 1000, 3)
        entry: dict[str, Any] = {
            "at": self.at,
            "hook_id": self.hook_id,
            "event": self.event,
            "mode": self.mode,
            "status": self.status,
            "error": self.error,
            "duration": format_duration(duration_ms / 1000),
            "duration_ms": duration_ms,
        }
        for key in ("tool_name", "thread_id", "decision", "note"):
            value = getattr(self, key)
            if value is not None:
                entry[key] = value
        if self.manual:
            entry["manual"] = True
        if self.shadow:
            entry["shadow"] = True
            entry["enforced"] = self.enforced
        if self.tier != "user":
            entry["tier"] = self.tier
        return entry

    @property
    def disagrees(self) -> bool:
        """A shadow fire whose own behavior is not the one enforced (a failure counts as
        what it decided: its decision, else allow). One that said nothing (hookbus cut it
        short, or ran it not: no decision) has nothing to compare."""
        if not self.shadow or self.decision is None:
            return False
        behavior = (self.decision or {}).get("behavior", "allow")
        return bool(behavior != (self.enforced or "allow"))

    def state_run(self) -> dict[str, Any]:
        """The entry in state.json's ``recent_runs``, with the fields the spec lists, and
        ``tool_name`` when the envelope had one."""
        run = {
            "at": self.at,
            "status": self.status,
            "async": self.is_async,
            "event": self.event,
            "error": self.error,
            "thread_id": self.thread_id,
            "duration": format_duration(self.duration),
        }
        if self.tool_name is not None:
            run["tool_name"] = self.tool_name
        if self.shadow:
            run["shadow"] = True
        return run

    @classmethod
    def from_log_entry(cls, entry: object) -> RunRecord:
        """Read back a log line; ValueError when it is not one."""
        if not isinstance(entry, dict):
            raise ValueError(f"not an object but {type(entry).__name__}")
        try:
            duration_ms = entry.get("duration_ms", 0.0)
            return cls(
                at=str(entry["at"]),
                hook_id=str(entry["hook_id"]),
                event=str(entry["event"]),
                mode=str(entry["mode"]),
                status=entry["status"],
                duration=float(duration_ms) / 1000,
                error=entry.get("error"),
                thread_id=entry.get("thread_id"),
                decision=entry.get("decision"),
                note=entry.get("note"),
                manual=bool(entry.get("manual", False)),
                tool_name=_text_or_none(entry.get("tool_name")),
                shadow=entry.get("shadow") is True,
                enforced=_text_or_none(entry.get("enforced")),
                tier=_tier(entry.get("tier")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a run record: {exc}") from None


def _tier(value: object) -> Tier:
    if value is None:
        return "user"
    if value in TIERS:
        return value  # type: ignore[return-value]
    raise ValueError(f"tier {value!r} is none of {', '.join(TIERS)}")


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def envelope_tool_name(envelope: Mapping[str, Any]) -> str | None:
    """What a record keeps of the envelope's ``tool_name``: the string, cut to
    MAX_TOOL_NAME characters; None when there is none, or it is not a string."""
    name = envelope.get("tool_name")
    if not isinstance(name, str):
        return None
    return name if len(name) <= MAX_TOOL_NAME else name[: MAX_TOOL_NAME - 1] + "…"


#: What an emit record keeps of an envelope, at most, as JSON: past it, only the envelope's
#: top-level fields that are not containers (enough to see which call it was), marked cut,
#: and replay skips it.
MAX_EMIT_ENVELOPE_BYTES = 64 * 1024


@attrs.frozen
class EmitRecord:
    """One emit that ran sync hooks, as ``hookbus replay`` needs it (``record_envelopes``)."""

    at: str
    event: str
    #: The envelope, masked like every record on its way to a recorder; cut when it was
    #: too big (``cut``).
    envelope: dict[str, Any]
    #: The merged decision, as the contract spells it.
    decision: dict[str, Any]
    #: The sync hooks that ran, by id (shadow hooks aside).
    hooks: tuple[str, ...]
    cut: bool = False

    def log_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "at": self.at, "event": self.event, "hooks": list(self.hooks), "decision": self.decision,
            "envelope": self.envelope,
        }
        if self.cut:
            entry["cut"] = True
        return entry

    @classmethod
    def from_log_entry(cls, entry: object) -> EmitRecord:
        """Read back a line; ValueError when it is not one."""
        if not isinstance(entry, dict):
            raise ValueError(f"not an object but {type(entry).__name__}")
        envelope, decision, hooks = entry.get("envelope"), entry.get("decision"), entry.get("hooks")
        if not isinstance(envelope, dict) or not isinstance(decision, dict) or not isinstance(hooks, list):
            raise ValueError("not an emit record: envelope, decision or hooks missing")
        try:
            return cls(str(entry["at"]), str(entry["event"]), envelope, decision, tuple(str(hook) for hook in hooks), entry.get("cut") is True)
        except KeyError as exc:
            raise ValueError(f"not an emit record: {exc} missing") from None

    @property
    def tool_name(self) -> str | None:
        return envelope_tool_name(self.envelope)

    @property
    def thread_id(self) -> str | None:
        value = self.envelope.get("thread_id")
        return value if isinstance(value, str) else None


def emit_record(event: str, envelope: Mapping[str, Any], decision: dict[str, Any], hooks: Sequence[str], at: str | None = None) -> EmitRecord:
    """The emit record of an emit: its envelope, past MAX_EMIT_ENVELOPE_BYTES cut to its
    top-level fields that are not containers. Cut before it is masked, so that masking
    costs at most what is kept: the recorders mask it on its way to them
    (``hookbus.redaction.redact_emit_record``), as every record."""
    from hookbus.jsontext import strict_json

    kept = dict(envelope)
    cut = False
    try:
        too_big = len(strict_json(kept)) > MAX_EMIT_ENVELOPE_BYTES
    except ValueError:  # nested past what is written
        too_big = True
    if too_big:
        kept = {key: value for key, value in kept.items() if not isinstance(value, (dict, list)) and len(str(value)) <= 1024}
        cut = True
    return EmitRecord(at or utc_timestamp(), event, kept, dict(decision), tuple(hooks), cut)


class RefusedRecords(Exception):
    """A recorder read records but refused some of them: files another user could have
    written (owned by them, writable by group or others, a link, a FIFO), whose records
    must not be acted on (``hookbus replay`` runs your hooks on them). ``records`` are those
    it read and trusts; ``refusals`` say, one per refused file, which and how to fix it."""

    def __init__(self, records: Sequence[EmitRecord], refusals: Sequence[str]) -> None:
        super().__init__("; ".join(refusals))
        self.records = list(records)
        self.refusals = tuple(refusals)
