"""What ``hookbus list``, ``log`` and ``explain`` print for people: lines built from data,
with headers and columns (``hookbus.tables``). The verbs choose the data; this lays it out.

Errors are kept apart from what a hook said (its reason or context): they are different
questions ("did my hook work?" and "what did it decide?").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Mapping

from hookbus.tables import Style, cut, table
from hookbus.terminal import printable

if TYPE_CHECKING:
    from hookbus.errors import Problem
    from hookbus.explain import Explanation, HookVerdict
    from hookbus.records import RunRecord
    from hookbus.registry import Snapshot

#: How much of an error or a reason a column shows.
ERROR_WIDTH = 60
SAID_WIDTH = 50


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 hook``, ``2 hooks``, ``no hooks``."""
    if count == 0:
        return f"no {words or word + 's'}"
    return f"{count} {word if count == 1 else words or word + 's'}"


def hook_lines(
    snapshot: Snapshot,
    last_runs: Mapping[str, RunRecord | None],
    kept_elsewhere: Mapping[str, bool],
    style: Style,
) -> list[str]:
    """``hookbus list``: one row per hook of the home, broken ones included."""
    kept_here = {p.hook_id: p for p in snapshot.problems if p.kept_last_good and p.hook_id}
    rows: list[tuple[str, ...]] = []
    for hook in snapshot.hooks.values():
        spec = hook.spec
        state = "enabled" if spec.enabled else "disabled"
        error = ""
        if hook.id in kept_here:
            state += " (last good version)"
            error = kept_here[hook.id].message
        last = last_runs.get(hook.id)
        rows.append((
            hook.id, spec.trigger.event, spec.trigger.matcher or "*", spec.mode + (" blocking" if spec.blocking else ""),
            spec.action_key, state, f"{last.status} {last.at}" if last else "never", error or (last.error or "" if last else ""),
        ))
    for problem in _broken(snapshot):
        hook_id = problem.hook_id or problem.path
        state = "broken (last good version)" if kept_elsewhere.get(hook_id) else "broken (not loaded)"
        rows.append((hook_id, "?", "?", "?", "?", state, "-", problem.message))
    rows.sort(key=lambda row: row[0])
    headers = ("ID", "EVENT", "MATCHER", "MODE", "ACTION", "STATE", "LAST FIRE", "ERROR")
    return table(rows, headers, style, widths=(None, None, 30, None, None, None, None, ERROR_WIDTH))


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


#: ``hookbus log``'s columns and their widths (the last is cut, not padded): fixed, so that
#: lines printed as fires happen (``--follow``) line up with those printed before.
LOG_COLUMNS = (("AT", 24), ("EVENT", 17), ("HOOK", 20), ("MODE", 6), ("STATUS", 11), ("TOOK", 8), ("SAID", SAID_WIDTH), ("ERROR", ERROR_WIDTH))


def log_header(style: Style) -> str:
    return "  ".join(style(name.ljust(width) if index < len(LOG_COLUMNS) - 1 else name, "bold") for index, (name, width) in enumerate(LOG_COLUMNS)).rstrip()


def record_line(record: RunRecord, style: Style) -> str:
    """One fire, in ``LOG_COLUMNS``."""
    from hookbus.durations import format_duration

    values = (
        record.at, record.event, record.hook_id, "manual" if record.manual else record.mode, record.status,
        format_duration(record.duration), said(record), record.error or "",
    )
    cells = []
    for index, (value, (_, width)) in enumerate(zip(values, LOG_COLUMNS)):
        cell = cut(printable(value), width)
        padded = cell.rjust(width) if index == 5 else cell.ljust(width)
        if index == 4:
            padded = style.status(cell) + padded[len(cell):]
        cells.append(padded)
    return "  ".join(cells).rstrip()


def explain_lines(explanation: Explanation, home: str, style: Style) -> list[str]:
    """``hookbus explain``: the envelope, each hook's verdict, the merge, the decision."""
    tested = f", {explanation.field} = {explanation.value!r}" if explanation.field else ""
    lines = [printable(f"{explanation.event}{tested}   ({plural(len(explanation.hooks), 'hook')} in {home})"), ""]
    if explanation.guard:
        lines += [printable(explanation.guard), ""]
    rows = [_verdict_row(verdict, explanation.dry_run) for verdict in explanation.hooks]
    if rows:
        lines += table(rows, ("HOOK", "VERDICT", "WHY", "SAID", "ERROR"), style, widths=(None, None, 70, SAID_WIDTH, ERROR_WIDTH), status_column=1)
    else:
        lines.append(f"no hooks in {home}/hooks")
    lines.append("")
    if explanation.dry_run:
        lines.append("dry run: nothing ran; the hooks marked matched, async or not blocking would run")
        return lines
    for line in explanation.merge:
        lines.append(printable(f"merge: {line}"))
    if explanation.decision is not None:
        from hookbus.jsontext import strict_json

        lines.append(printable("decision: " + strict_json(explanation.decision.as_dict()).decode()))
    return lines


def _verdict_row(verdict: HookVerdict, dry_run: bool) -> tuple[str, ...]:
    why = verdict.detail.split(": ", 1)[1] if ": " in verdict.detail and not verdict.runs else verdict.detail
    if verdict.status == "load error":
        why = "its file does not load (see ERROR; `hookbus validate` says more)"
    run = verdict.run
    if run is None:
        said_text = "(would run)" if dry_run and verdict.runs else ("(submitted)" if verdict.status == "async" and not dry_run else "")
        return verdict.hook_id, verdict.status, why, said_text, verdict.load_error or ""
    outcome = run.outcome
    text: str = outcome.behavior
    detail = outcome.reason or outcome.context or ""
    if outcome.input is not None:
        detail = json.dumps(outcome.input, ensure_ascii=False)
    if detail:
        text += f": {cut(detail, SAID_WIDTH)}"
    text += f" ({run.duration * 1000:.0f} ms)"
    if run.note:
        text += f" [{run.note}]"
    return verdict.hook_id, verdict.status, why, text, outcome.error or ""
