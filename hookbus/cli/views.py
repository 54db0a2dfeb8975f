"""What ``hookbus list``, ``log`` and ``explain`` print for people: lines built from data,
with headers and columns (``hookbus.cli.tables``). The verbs choose the data; this lays it out.

Errors are kept apart from what a hook said (its reason or context): they are different
questions ("did my hook work?" and "what did it decide?").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from hookbus.cli.tables import Style, cut, fit, table
from hookbus.loader import failing_problems
from hookbus.terminal import printable

if TYPE_CHECKING:
    from hookbus.errors import Problem
    from hookbus.plugins import PluginInfo
    from hookbus.records import RunRecord
    from hookbus.registry import Snapshot

#: A hook's state when it is loaded but a script it runs is broken: each fire fails (and its
#: on_error decides).
WILL_FAIL = "broken (will fail)"
#: How much of an error or a reason a column shows.
ERROR_WIDTH = 60
SAID_WIDTH = 50


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 hook``, ``2 hooks``, ``no hooks``."""
    if count == 0:
        return f"no {words or word + 's'}"
    return f"{count} {word if count == 1 else words or word + 's'}"


def hook_rows(
    snapshot: Snapshot,
    last_runs: Mapping[str, RunRecord | None],
    kept_elsewhere: Mapping[str, bool],
) -> list[dict[str, Any]]:
    """``hookbus list``'s data, one object per hook of the home, broken ones included, as
    JSON (what ``hookbus serve`` answers its ``status`` method with): ``id``, ``tier``
    (``user``, ``managed``, or ``builtin`` for the home guard), ``event``,
    ``matcher``, ``mode``, ``action``, ``state``, ``last_fire`` (``{"status", "at",
    "error"}`` or null) and ``error``. ``kept_elsewhere``: broken hooks whose last good
    version a running bus keeps, as their state.json says."""
    kept_here = {p.hook_id: p for p in snapshot.problems if p.kept_last_good and p.hook_id}
    failing = failing_problems(snapshot)
    rows: list[dict[str, Any]] = []
    for hook in snapshot.every_hook.values():
        spec = hook.spec
        state = "enabled" if spec.enabled else "disabled"
        error = None
        if hook.id in kept_here:
            state += " (last good version)"
            error = kept_here[hook.id].message
        if hook.id in failing:
            # Loaded (its on_error decides each fire), but every fire fails: not "enabled".
            state = WILL_FAIL if state == "enabled" else state
            error = error or "; ".join(problem.message for problem in failing[hook.id])
        last = last_runs.get(hook.id)
        rows.append({
            "id": hook.id, "tier": hook.tier, "event": spec.trigger.event, "matcher": spec.trigger.matcher or "*",
            "mode": _mode(spec.mode, spec.blocking, spec.shadow), "action": spec.action_key, "state": state,
            "last_fire": None if last is None else {"status": last.status, "at": last.at, "error": last.error},
            "error": error,
        })
    for problem in _broken(snapshot):
        hook_id = problem.hook_id or problem.path
        state = "broken (last good version)" if kept_elsewhere.get(hook_id) else "broken (not loaded)"
        rows.append({
            "id": hook_id, "tier": problem.tier, "event": None, "matcher": None, "mode": None, "action": None, "state": state,
            "last_fire": None, "error": problem.message,
        })
    rows.sort(key=lambda row: (_TIER_ORDER.get(str(row["tier"]), 0), str(row["id"])))
    return rows


def _mode(mode: str, blocking: bool, shadow: bool) -> str:
    """``hookbus list``'s MODE: what is enforced first. A shadow hook enforces nothing, so
    it says ``shadow``, and then the mode it would have once promoted."""
    enforced = mode + (" blocking" if blocking else "")
    return f"shadow ({enforced})" if shadow else enforced


#: ``hookbus list`` shows what the user cannot change first: the home guard, managed hooks.
_TIER_ORDER = {"builtin": 0, "managed": 1, "user": 2}


def hook_lines(rows: list[dict[str, Any]], style: Style) -> list[str]:
    """``hookbus list``: ``hook_rows`` (of this process, or of a server) as a table. The TIER
    column is there when a managed hook is: the home guard alone says what it is by its
    id (``hookbus:protect_home``) and its action (``builtin``), and a column that says
    ``user`` on every other line would cost every user width."""
    tiered = any(row.get("tier") == "managed" for row in rows)
    cells: list[tuple[str, ...]] = []
    for row in rows:
        last = row.get("last_fire")
        broken = row.get("event") is None
        cells.append((
            str(row["id"]), *((str(row.get("tier") or "user"),) if tiered else ()), str(row.get("event") or "?"), str(row.get("matcher") or "?"), str(row.get("mode") or "?"),
            str(row.get("action") or "?"), str(row.get("state")),
            "-" if broken else (f"{last['status']} {last['at']}" if last else "never"),
            str(row.get("error") or (last.get("error") or "" if last else "")),
        ))
    headers = ("ID", *(("TIER",) if tiered else ()), "EVENT", "MATCHER", "MODE", "ACTION", "STATE", "LAST FIRE", "ERROR")
    widths = (None, *((None,) if tiered else ()), None, 30, None, None, None, None, ERROR_WIDTH)
    return table(cells, headers, style, widths=widths, keep=(0,))


def _broken(snapshot: Snapshot) -> list[Problem]:
    """Problems of hooks that did not load at all (no version of them is in the snapshot)."""
    return [p for p in snapshot.problems if p.hook_id is not None and p.hook_id not in snapshot.hooks]


def said(record: RunRecord) -> str:
    """What a hook said in one fire, on one line: its reason, context or rewritten input,
    and the bus's note on it."""
    decision = record.decision or {}
    text = decision.get("reason") or decision.get("context") or ""
    if decision.get("input") is not None:
        text = json.dumps(decision["input"], ensure_ascii=False)
    if record.note:
        text = f"{text} [{record.note}]" if text else f"[{record.note}]"
    return text


#: ``hookbus log``'s columns, the most each shows (the last is cut, not padded), and the
#: narrowest each is cut to when lines must fit the terminal. AT, MODE, STATUS and TOOK are
#: never cut, nor the event's name in EVENT (which adds the call's tool: ``PreToolUse(bash)``).
LOG_COLUMNS = (
    ("AT", 24, 24), ("EVENT", 30, 17), ("HOOK", 20, 12), ("MODE", 6, 6), ("STATUS", 7, 7),
    ("TOOK", 8, 8), ("SAID", SAID_WIDTH, 12), ("ERROR", ERROR_WIDTH, 12),
)
#: The columns right-aligned (TOOK) and coloured by status (STATUS).
_TOOK, _STATUS = 5, 4


def log_widths(style: Style, records: Sequence[RunRecord] | None = None) -> list[int]:
    """The widths of ``LOG_COLUMNS`` on a line at most ``style.width`` wide. Given the
    ``records`` to show, each column is as wide as what it shows (up to its most);
    without, as wide as its most: lines printed as fires happen (``--follow``) then line
    up with those printed before."""
    sizes = [width for _, width, _ in LOG_COLUMNS]
    if records is not None:
        rows = [_log_values(record) for record in records]
        sizes = [
            min(most, max([len(name), *(len(_shown(row[index])) for row in rows)]))
            for index, (name, most, _) in enumerate(LOG_COLUMNS)
        ]
    return fit(sizes, style.width, [floor for _, _, floor in LOG_COLUMNS])


def _shown(value: str) -> str:
    return " ".join(printable(value).split())


def log_header(style: Style, widths: Sequence[int] | None = None) -> str:
    widths = log_widths(style) if widths is None else widths
    last = len(LOG_COLUMNS) - 1
    return "  ".join(
        style(name.ljust(width) if index < last else name, "bold") for index, ((name, _, _), width) in enumerate(zip(LOG_COLUMNS, widths))
    ).rstrip()


def _log_values(record: RunRecord) -> tuple[str, ...]:
    from hookbus.durations import format_duration

    # The tool beside the event, as one word: which call a hook decided on, and a line
    # still splits into the same columns with or without one.
    event = f"{record.event}({record.tool_name})" if record.tool_name else record.event
    hook = record.hook_id if record.tier == "user" else f"{record.hook_id} [{record.tier}]"
    return (
        record.at, event, hook, "manual" if record.manual else "shadow" if record.shadow else record.mode,
        record.status, format_duration(record.duration), said(record), record.error or "",
    )


def record_line(record: RunRecord, style: Style, widths: Sequence[int] | None = None) -> str:
    """One fire, in ``LOG_COLUMNS`` (of ``log_widths``). The last column takes what room
    the line has left, when its width is known."""
    widths = list(log_widths(style) if widths is None else widths)
    if style.width is not None:
        widths[-1] = max(widths[-1], style.width - sum(widths[:-1]) - 2 * (len(widths) - 1))
    cells = []
    for index, (value, width) in enumerate(zip(_log_values(record), widths)):
        cell = cut(printable(value), width)
        padded = cell.rjust(width) if index == _TOOK else cell.ljust(width)
        if index == _STATUS:
            padded = style.status(cell) + padded[len(cell):]
        cells.append(padded)
    return "  ".join(cells).rstrip()


def explain_lines(explanation: Mapping[str, Any], home: str, style: Style) -> list[str]:
    """``hookbus explain``: the envelope, each hook's verdict, the merge, the decision, from
    ``Explanation.as_json()`` (of this process, or of a server)."""
    hooks = explanation.get("hooks") or []
    field = explanation.get("field")
    tested = f", {field} = {explanation.get('value')!r}" if field else ""
    builtin = sum(1 for verdict in hooks if verdict.get("tier") == "builtin")
    guard = ", and hookbus's home guard" if builtin else ""
    lines = [printable(f"{explanation.get('event')}{tested}   ({plural(len(hooks) - builtin, 'hook')} in {home}{guard})"), ""]
    if explanation.get("guard"):
        lines += [printable(str(explanation["guard"])), ""]
    dry_run = bool(explanation.get("dry_run"))
    rows = [_verdict_row(verdict, dry_run) for verdict in hooks]
    if rows:
        lines += table(
            rows, ("HOOK", "VERDICT", "WHY", "SAID", "ERROR"), style,
            widths=(None, None, 70, SAID_WIDTH, ERROR_WIDTH), status_column=1, keep=(0, 1),
        )
    else:
        lines.append(f"no hooks in {home}/hooks")
    lines.append("")
    if dry_run:
        lines.append("dry run: nothing ran; the hooks marked matched, async, not blocking or shadow would run")
        return lines
    answers = [_answer_line(verdict) for verdict in hooks if _has_answer(verdict)]
    if answers:
        lines += [*answers, ""]
    for line in explanation.get("merge") or []:
        lines.append(printable(f"merge: {line}"))
    if explanation.get("decision") is not None:
        from hookbus.jsontext import strict_json

        lines.append(printable("decision: " + strict_json(explanation["decision"]).decode()))
    return lines


def _verdict_row(verdict: Mapping[str, Any], dry_run: bool) -> tuple[str, ...]:
    detail = str(verdict.get("detail") or "")
    runs = bool(verdict.get("matched"))
    status = str(verdict.get("status"))
    load_error = str(verdict.get("load_error") or "")
    why = detail.split(": ", 1)[1] if ": " in detail and not runs else detail
    if status == "load error":
        why = "its file does not load (see ERROR; `hookbus validate` says more)"
    result = verdict.get("result")
    if not isinstance(result, Mapping):
        said_text = "(would run)" if dry_run and runs else ("(submitted)" if status == "async" and not dry_run else "")
        return _verdict_id(verdict), status, why, said_text, load_error
    decision = result.get("decision") or {}
    text = str(decision.get("behavior"))
    said_now = decision.get("reason") or decision.get("context") or ""
    if decision.get("input") is not None:
        said_now = json.dumps(decision["input"], ensure_ascii=False)
    if said_now:
        text += f": {cut(str(said_now), SAID_WIDTH)}"
    duration = result.get("duration_ms")
    text += f" ({duration:.0f} ms)" if isinstance(duration, (int, float)) else ""
    if result.get("note"):
        text += f" [{result['note']}]"
    return _verdict_id(verdict), status, why, text, str(result.get("error") or "")


def _has_answer(verdict: Mapping[str, Any]) -> bool:
    """A data action that ran and answered: a value, or null (no answer and no error)."""
    result = verdict.get("result")
    if not isinstance(result, Mapping) or not verdict.get("action"):
        return False
    return result.get("answer") is not None or not result.get("error")


def _answer_line(verdict: Mapping[str, Any]) -> str:
    """``nrm: cel tool_input.command.contains('rm') ? ... = {"behavior": "deny"}``: what a
    data action (a CEL expression, a Rego query) evaluated to, beside what it was."""
    action = verdict.get("action") or {}
    written = " ".join(f"{key} {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}" for key, value in action.items())
    answer = verdict["result"].get("answer")
    return printable(f"{_verdict_id(verdict)}: {cut(written, 300)} = {'null' if answer is None else answer}")


def _verdict_id(verdict: Mapping[str, Any]) -> str:
    tier = verdict.get("tier") or "user"
    return str(verdict.get("id")) if tier == "user" else f"{verdict.get('id')} [{tier}]"


#: ``plugin_rows``'s status, and what ``hookbus plugins`` shows for it.
PLUGIN_STATUSES = ("loaded", "unselected", "blocked", "failed")
UNSELECTED_TEXT = 'loaded (recorder not selected: settings.json "recorder")'


def plugin_rows(infos: Sequence[PluginInfo], active_recorders: Sequence[str]) -> list[dict[str, Any]]:
    """Every plugin of a bus as JSON (``hookbus plugins --json``, and ``hookbus serve``'s
    ``status``): ``name`` (its entry point's), ``module``, ``distribution`` and
    ``version`` (null for one handed in by the embedder), ``in_process``, ``status``
    (``loaded``; ``unselected``: a recorder that settings.json's ``recorder`` leaves out;
    ``blocked``: by HOOKBUS_DISABLE_PLUGINS or HOOKBUS_LOAD_PLUGINS; ``failed``: it did not
    load), ``detail`` (why, for the last two) and ``provides``."""
    rows = []
    for info in infos:
        detail = info.error or info.blocked
        if info.error:
            status = "failed"
        elif info.blocked:
            status = "blocked"
        elif "recorder" in info.provides and info.name not in active_recorders:
            status = "unselected"
        else:
            status = "loaded"
        rows.append({
            "name": info.name, "module": info.module, "distribution": info.distribution, "version": info.version,
            "in_process": info.in_process, "status": status, "detail": detail, "provides": list(info.provides),
        })
    return rows


def plugin_status_text(row: Mapping[str, Any]) -> str:
    """The STATUS column of ``hookbus plugins`` for one of ``plugin_rows``."""
    status, detail = row.get("status"), row.get("detail")
    if status == "failed":
        return f"failed: {detail}"
    if status == "blocked":
        return str(detail or "blocked")
    if status == "unselected":
        return UNSELECTED_TEXT
    return str(status)


def plugin_lines(rows: Sequence[Mapping[str, Any]], style: Style) -> list[str]:
    """``hookbus plugins`` (and ``hookbus status``): ``plugin_rows`` as a table."""
    cells = [
        (
            str(row.get("name")), str(row.get("distribution") or "(in process)"), str(row.get("version") or "-"),
            plugin_status_text(row), ", ".join(row.get("provides") or ()) or "-",
        )
        for row in rows
    ]
    return table(cells, ("NAME", "DISTRIBUTION", "VERSION", "STATUS", "PROVIDES"), style, keep=(0,))
