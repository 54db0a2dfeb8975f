"""The matcher groups of one event of a host's settings.json, with hookbus's bridge taken
out, with entries taken out (the hooks ``--install-bridge`` moves into the home), and with
those entries put back where they were (``--uninstall-bridge``).

Pure functions on JSON values: reading and writing the files is the callers' job.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Iterable

from hookbus.hosts.install import CLAUDE_CODE, BridgedHost, is_bridge_command

#: An entry's place: (its group's index in the event's array, its index in the group's hooks).
Place = tuple[int, int]


def is_bridge_entry(entry: object, host: BridgedHost = CLAUDE_CODE) -> bool:
    """Whether ``entry`` is hookbus's: the command bridge in any spelling, or an http
    hook posting to a hookbus serve."""
    from hookbus.hosts.httpbridge import is_http_bridge

    return isinstance(entry, dict) and (is_bridge_command(entry.get("command"), host) or is_http_bridge(entry))


def summary_of(entry: Any, limit: int = 60) -> str:
    """A few words for people of what an entry runs."""
    if isinstance(entry, dict):
        kind = entry.get("type")
        text = entry.get("url" if kind == "http" else kind) if isinstance(kind, str) else None
        if isinstance(text, str):
            flat = " ".join(text.split())
            return f"{kind}: {flat if len(flat) <= limit else flat[:limit] + '...'}"
        if isinstance(kind, str):
            return f"{kind} hook"
    return "an entry that is no hook"


def hooks_of(group: object) -> list[Any] | None:
    """A matcher group's ``hooks`` array; None when ``group`` is not a group with one."""
    if isinstance(group, dict) and isinstance(group.get("hooks"), list):
        return list(group["hooks"])
    return None


def strip_bridges(groups: list[Any], host: BridgedHost = CLAUDE_CODE) -> tuple[list[Any], dict[Place, Place]]:
    """``groups`` without hookbus's entries (a group left with none is dropped; one that
    had none, an empty one too, stays as it was), and where each entry that stays went."""
    kept: list[Any] = []
    places: dict[Place, Place] = {}
    for index, group in enumerate(groups):
        entries = hooks_of(group)
        if entries is None:
            kept.append(group)
            continue
        own = [(position, entry) for position, entry in enumerate(entries) if not is_bridge_entry(entry, host)]
        if len(own) == len(entries):
            new_group = group
        elif own:
            new_group = {**group, "hooks": [entry for _, entry in own]}
        else:
            continue
        for new_position, (position, _) in enumerate(own):
            places[(index, position)] = (len(kept), new_position)
        kept.append(new_group)
    return kept, places


def without_entries(groups: list[Any], places: Iterable[Place]) -> tuple[list[Any], list[int]]:
    """``groups`` without the entries at ``places`` (a group left with none by that is
    dropped), and, for each group kept, its index in ``groups``."""
    taken: dict[int, set[int]] = {}
    for group_index, entry_index in places:
        taken.setdefault(group_index, set()).add(entry_index)
    kept: list[Any] = []
    origins: list[int] = []
    for index, group in enumerate(groups):
        entries = hooks_of(group)
        if index not in taken or entries is None:
            kept.append(group)
            origins.append(index)
            continue
        left = [entry for position, entry in enumerate(entries) if position not in taken[index]]
        if left:
            kept.append({**group, "hooks": left})
            origins.append(index)
    return kept, origins


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def put_back(current: list[Any], original: list[Any], moved: Iterable[Place]) -> list[Any]:
    """Undo taking the entries at ``moved`` out of ``original``: ``current`` (the groups as
    they are now, without the bridge) with them back.

    Where nothing changed since (``current`` is ``original`` without them), the result is
    ``original`` itself. Otherwise each group left as it was gets its entries back in
    place; a group that was taken out whole comes back after the group before it; and the
    entries of a group the user changed since come back as a group of their own, with the
    same matcher, beside it. What the user added stays where it is."""
    moved = list(moved)
    after, origins = without_entries(original, moved)
    matcher = difflib.SequenceMatcher(None, [_key(group) for group in after], [_key(group) for group in current], autojunk=False)
    # Each group of ``original`` that is still in ``current``, as it was left: where.
    found: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            found[origins[block.a + offset]] = block.b + offset
    moved_of: dict[int, list[int]] = {}
    for group_index, entry_index in moved:
        moved_of.setdefault(group_index, []).append(entry_index)
    replaced: dict[int, Any] = {}
    inserted: dict[int, list[Any]] = {}
    anchor = -1  # where in ``current`` the last group of ``original`` seen is
    for index, group in enumerate(original):
        if index in found:
            anchor = found[index]
            replaced[anchor] = group
            continue
        if index not in moved_of:
            continue  # the user took this group out: it stays out
        if index in origins:
            # Partly moved, and the user changed what was left: its moved entries alone.
            entries = hooks_of(group) or []
            group = {**group, "hooks": [entries[position] for position in sorted(moved_of[index]) if position < len(entries)]}
        inserted.setdefault(anchor, []).append(group)
    result: list[Any] = list(inserted.get(-1, []))
    for position, group in enumerate(current):
        result.append(replaced.get(position, group))
        result += inserted.get(position, [])
    return result
