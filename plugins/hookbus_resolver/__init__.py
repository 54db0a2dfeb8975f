"""The built-in resolver: deny > modify > context > allow.

- Context from every hook is joined in hook-id order, whichever behavior wins.
- Several denies: the reason lists each, prefixed by the hook that denied.
- Several modifies: the first in hook-id order wins; the others are superseded, and the
  log says so for each of them.
- The extras, beside the behavior: permission ask > approve, and none once denied;
  continue_with and halt joined from every hook that said them, in hook-id order, and no
  continue_with once a hook halts (the turn ends: there is nothing to go on with).
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs

from hookbus import hookimpl
from hookbus.decision import ALLOW, Decision, HookResult, deny_line


def resolve(results: Sequence[HookResult]) -> Decision:
    ordered = sorted(results, key=lambda result: result.hook_id)
    decision = _resolve_behavior(ordered)
    if not any(r.outcome.permission or r.outcome.continue_with or r.outcome.halt for r in ordered):
        return decision
    return attrs.evolve(decision, **_extras(ordered, denied=decision.behavior == "deny"))


def _resolve_behavior(ordered: Sequence[HookResult]) -> Decision:
    contexts = [r.outcome.context for r in ordered if r.outcome.context]
    context = "\n\n".join(contexts) if contexts else None
    denies = [r for r in ordered if r.outcome.behavior == "deny"]
    if denies:
        return Decision(
            "deny",
            reason="\n".join(deny_line(r) for r in denies),
            context=context,
            denied_by=tuple(r.hook_id for r in denies),
        )
    modifies = [r for r in ordered if r.outcome.behavior == "modify"]
    if modifies:
        winner = modifies[0]
        return Decision(
            "modify", input=winner.outcome.input, context=context, modified_by=winner.hook_id
        )
    if context is not None:
        return Decision("context", context=context)
    return ALLOW


def _extras(ordered: Sequence[HookResult], denied: bool) -> dict[str, Any]:
    permissions = {r.outcome.permission for r in ordered}
    permission = None if denied else "ask" if "ask" in permissions else "approve" if "approve" in permissions else None
    extras: dict[str, Any] = {"permission": permission}
    if permission == "ask":
        reasons = [r.outcome.reason for r in ordered if r.outcome.permission == "ask" and r.outcome.reason]
        extras["reason"] = "\n".join(reasons) or None
    for name in ("continue_with", "halt"):
        said = [getattr(r.outcome, name) for r in ordered if getattr(r.outcome, name)]
        extras[name] = "\n\n".join(said) or None
    if extras["halt"] is not None:
        extras["continue_with"] = None
    return extras


@hookimpl(trylast=True)
def hookbus_resolve(event: str, results: Sequence[HookResult]) -> Decision:
    return resolve(results)
