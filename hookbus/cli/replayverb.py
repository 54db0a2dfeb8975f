"""``hookbus replay [--since WHEN] [--until WHEN] [--hook ID] [--event E] [--json]``: re-run
recorded emits (settings.json ``"record_envelopes": true``) through the hooks as they are
now, and say which decisions would flip. The hooks run for real, with ``HOOKBUS_REPLAY=1``;
only sync hooks run, and nothing is recorded. Exit 0 when nothing flipped, 3 when
something did (so CI can gate a policy change), 1 on error.

The hooks run on what the emit records say, so a record another user could have written is
never replayed: the recorder refuses the files (an emit log another user owns or may write,
a link, a FIFO, such a directory on the way), each refusal is said on stderr with its fix,
the rest is replayed, and replay exits 1."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hookbus.cli.core import UsageError, json_line, open_bus, say, warn

if TYPE_CHECKING:
    import argparse

    from hookbus.bus import HookBus
    from hookbus.records import EmitRecord

#: Exit status when a decision flipped.
FLIPPED = 3


def add_parser(parser: argparse.ArgumentParser) -> None:
    when = "an ISO 8601 date or date-time (UTC unless it says), or a duration back from now: 24h, 7d"
    parser.add_argument("--since", metavar="WHEN", help=f"only emits recorded since WHEN: {when}")
    parser.add_argument("--until", metavar="WHEN", help=f"only emits recorded before WHEN: {when}")
    parser.add_argument("--hook", metavar="ID", help="only the emits in which hook ID ran")
    parser.add_argument("--event", metavar="EVENT", help="only emits of this event")
    parser.add_argument("--json", action="store_true", help='print {"replayed", "unchanged", "flipped", "skipped"} as one JSON object')
    parser.set_defaults(func=cmd_replay)


def cmd_replay(args: argparse.Namespace) -> int:
    from hookbus.cli.logfilter import log_filter, parse_since

    wanted = log_filter(args.event, None, args.since)
    until = parse_since(args.until) if args.until else None
    if wanted.since is not None and until is not None and until <= wanted.since:
        raise UsageError(f"--until {args.until} is not after --since {args.since}: no emit can be in between")
    bus = open_bus(args, read_only=True)
    try:
        recorded, refused = _read_trusted(bus, wanted.since, until)
        emits = [
            record for record in recorded
            if (wanted.event is None or record.event == wanted.event) and (args.hook is None or args.hook in record.hooks)
        ]
        for refusal in refused:
            warn(f"hookbus replay: {refusal}; its emits were not replayed")
        if not emits:
            _nothing(args, bus, refused)
            return 1 if refused else 0
        report = _replay(bus, emits)
    finally:
        bus.close()
    if refused:
        report["refused"] = list(refused)
    if args.json:
        print(json_line(report))
    else:
        _print(report)
    if refused:
        return 1
    return FLIPPED if report["flipped"] else 0


def _read_trusted(bus: HookBus, since: str | None, until: str | None) -> tuple[list[EmitRecord], tuple[str, ...]]:
    """The emit records a recorder read, and what it refused to read (files another user
    could have written), one message each."""
    from hookbus.records import RefusedRecords

    try:
        return bus.read_emits(since, until), ()
    except RefusedRecords as refused:
        return refused.records, refused.refusals


def _nothing(args: argparse.Namespace, bus: HookBus, refused: tuple[str, ...]) -> None:
    if refused:
        why = f"no emit was replayed: {len(refused)} emit {'log was' if len(refused) == 1 else 'logs were'} refused (above)"
    elif not bus.snapshot.settings.record_envelopes:
        why = 'no emit is recorded: set "record_envelopes": true in settings.json, and emits from then on are'
    elif not bus.keeps_emits:
        why = f"no emit is recorded: the recorder in use ({', '.join(bus.active_recorders) or 'none'}) keeps no emit records"
    else:
        why = "no recorded emit matches" if any((args.since, args.until, args.hook, args.event)) else "no emit is recorded yet"
    if args.json:
        report: dict[str, Any] = {"replayed": 0, "unchanged": 0, "flipped": [], "skipped": [], "note": why}
        if refused:
            report["refused"] = list(refused)
        print(json_line(report))
    else:
        say(why)


def _replay(bus: HookBus, emits: list[EmitRecord]) -> dict[str, Any]:
    from hookbus.events import EVENTS

    unchanged = 0
    flipped: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for record in emits:
        where = {"at": record.at, "event": record.event, "tool_name": record.tool_name, "thread_id": record.thread_id}
        if record.cut:
            skipped.append({**where, "why": "its envelope was recorded cut (it was over 64 KiB): it cannot be replayed whole"})
            continue
        if record.event not in EVENTS:
            skipped.append({**where, "why": f"{record.event!r} is not an event of this hookbus"})
            continue
        try:
            now, ran = bus.replay(record.event, record.envelope)
        except Exception as exc:  # an envelope the bus refuses now
            skipped.append({**where, "why": f"it could not be replayed: {type(exc).__name__}: {exc}"})
            continue
        decided = now.as_dict()
        if not _flips(record.decision, decided):
            unchanged += 1
            continue
        flipped.append({**where, "recorded": record.decision, "now": decided, "by": _by(record, now, ran)})
    return {"replayed": unchanged + len(flipped), "unchanged": unchanged, "flipped": flipped, "skipped": skipped}


def _flips(recorded: dict[str, Any], now: dict[str, Any]) -> bool:
    """A decision flips when its behavior changes, or a rewrite rewrites differently."""
    before, after = recorded.get("behavior", "allow"), now.get("behavior", "allow")
    return before != after or (after == "modify" and recorded.get("input") != now.get("input"))


def _by(record: EmitRecord, now: Any, ran: tuple[str, ...]) -> list[str]:
    """The hooks that made the difference: those whose deny or rewrite decides now; else
    the hooks that ran then and not now, or now and not then; else all that ran."""
    if now.behavior == "deny" and now.denied_by:
        return list(now.denied_by)
    if now.behavior == "modify" and now.modified_by:
        return [now.modified_by]
    changed = sorted(set(record.hooks) ^ set(ran))
    return changed or list(ran)


def _print(report: dict[str, Any]) -> None:
    for flip in report["flipped"]:
        call = f"{flip['event']}({flip['tool_name']})" if flip["tool_name"] else flip["event"]
        thread = f"  thread {flip['thread_id']}" if flip["thread_id"] else ""
        before, after = flip["recorded"].get("behavior", "allow"), flip["now"].get("behavior", "allow")
        reason = flip["now"].get("reason") or flip["recorded"].get("reason")
        say(f"FLIP  {flip['at']}  {call}{thread}  {before} -> {after}  by {', '.join(repr(hook) for hook in flip['by'])}" + (f": {reason}" if reason else ""))
    for skip in report["skipped"]:
        say(f"SKIP  {skip['at']}  {skip['event']}: {skip['why']}")
    flipped, skipped = len(report["flipped"]), len(report["skipped"])
    refused = f"; {len(report['refused'])} refused (above)" if report.get("refused") else ""
    say(f"{report['replayed']} emit{'s' if report['replayed'] != 1 else ''} replayed: {report['unchanged']} unchanged, {flipped} flipped; {skipped} skipped{refused}")
