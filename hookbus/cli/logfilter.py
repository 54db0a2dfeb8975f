"""``hookbus log``'s filters: ``--event``, ``--status``, ``--since`` and ``--shadow``.

``--since`` takes a moment, as ISO 8601 (``2026-12-01``, ``2026-12-01T09:30``,
``2026-12-01T09:30:00+02:00``; UTC unless it says otherwise, as every time hookbus shows
is), or a duration back from now, Go-style (``24h``, ``90m``, ``1h30m``).
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NamedTuple

from hookbus.cli.core import UsageError

if TYPE_CHECKING:
    from hookbus.records import RunRecord

#: What ``--status`` takes: a record's status, or ``failed``: any fire with an error (a
#: sync hook that failed open is recorded as allow, with its error).
STATUSES = ("allow", "deny", "modify", "context", "done", "error", "failed")

_DAYS = re.compile(r"[0-9]+(?:\.[0-9]*)?[dw]")
#: A moment starts with an ISO 8601 date; anything else starting with a digit is a duration.
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


class LogFilter(NamedTuple):
    event: str | None = None
    status: str | None = None
    #: The earliest ``at`` shown, in the records' own form (RFC 3339, UTC, milliseconds).
    since: str | None = None
    #: Only shadow fires whose decision is not the one enforced (``--shadow``).
    shadow: bool | None = None

    @property
    def active(self) -> bool:
        return any(value is not None for value in self)

    def keeps(self, record: RunRecord) -> bool:
        if self.event is not None and record.event != self.event:
            return False
        if self.shadow and not record.disagrees:
            return False
        if self.status is not None:
            if self.status == "failed":
                if record.error is None:
                    return False
            elif record.status != self.status:
                return False
        # Records are stamped in one form (utc_timestamp): compared as text, in time order.
        return self.since is None or record.at >= self.since

    def first_day(self) -> str | None:
        """The UTC day of ``since``: no log file of an earlier day can hold a fire after
        it (a fire is written to the file of the day it ended, never before it started)."""
        return None if self.since is None else self.since[:10]

    def describe(self) -> str:
        """`` of event Stop, status deny, since 2026-12-01T00:00:00.000Z``, for messages."""
        parts = [f"{name} {value}" for name, value in zip(("event", "status", "since"), self) if value is not None]
        if self.shadow:
            parts.append("shadow fires that disagreed with the decision enforced")
        return f" ({', '.join(parts)})" if parts else ""


def log_filter(event: str | None, status: str | None, since: str | None, now: float | None = None, shadow: bool = False) -> LogFilter:
    """The filter the options ask for; UsageError, saying how to write it, when one is not
    a valid value."""
    from hookbus.eventnames import EVENT_NAMES, unknown_event_message

    if event is not None and event not in EVENT_NAMES:
        raise UsageError(f"--event: {unknown_event_message(event)}")
    if status is not None and status not in STATUSES:
        from hookbus.errors import did_you_mean

        # "denied", "allowed", "errors": the first letters say it better than difflib does.
        same_start = [name for name in STATUSES if name[:3] == status.lower()[:3]]
        hint = f" (did you mean {same_start[0]!r}?)" if len(same_start) == 1 else did_you_mean(status.lower(), STATUSES)
        raise UsageError(
            f"--status: unknown status {status!r}{hint}; statuses are "
            f"{', '.join(STATUSES[:-1])}, and failed (any fire with an error)"
        )
    return LogFilter(event, status, None if since is None else parse_since(since, now), True if shadow else None)


def parse_since(text: str, now: float | None = None) -> str:
    """The moment ``text`` names, as a record's ``at`` is written; UsageError when it is
    neither an ISO 8601 date or date-time nor a Go-style duration."""
    from hookbus.records import utc_timestamp

    text = text.strip()
    if _DATE.match(text):
        return _moment(text)
    if text[:1].isdigit() or text[:1] == ".":
        return utc_timestamp((time.time() if now is None else now) - _duration(text))
    raise UsageError(_since_usage(text))


def _duration(text: str) -> float:
    from hookbus.durations import parse_duration

    if _DAYS.fullmatch(text):
        raise UsageError(
            f"--since {text!r}: durations go up to hours, as Go writes them: {_hours(text)}, or give a date such as 2026-12-01"
        )
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}; or give a date such as 2026-12-01, or a date and time") from None


def _hours(text: str) -> str:
    number, unit = float(text[:-1]), text[-1]
    hours = number * (24 if unit == "d" else 168)
    return f"{hours:g}h"


def _moment(text: str) -> str:
    """An ISO 8601 date or date-time (UTC unless it has an offset) as a record's ``at``:
    converted exactly, not through a float (``.123Z`` stays ``.123Z``)."""
    written = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        moment = datetime.fromisoformat(written)
    except ValueError:
        raise UsageError(_since_usage(text)) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond // 1000:03d}Z"


def _since_usage(text: str) -> str:
    return (
        f"--since {text!r}: give a date (2026-12-01), a date and time (2026-12-01T09:30, in UTC "
        "unless it ends in Z or an offset such as +02:00), or a duration back from now (24h, 90m, 1h30m)"
    )
