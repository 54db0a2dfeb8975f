"""Fires that change nothing: what a fixture (``hookbus test``, ``HookBus.test_fire``) and
a replay (``hookbus replay``, ``HookBus.replay``) run.

The home's sync hooks run for real, on a dispatcher of their own whose hooks get
``HOOKBUS_TEST=1`` (or ``HOOKBUS_REPLAY=1``) in their environment; nothing is recorded, no
state.json changes, the Stop memory is neither read nor changed, and async hooks do not run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from hookbus.cancel import CancelToken
from hookbus.decision import ALLOW, Decision
from hookbus.dialects.stopguard import StopMemory
from hookbus.dispatch import Dispatcher
from hookbus.envelope import encode_envelope

if TYPE_CHECKING:
    from hookbus.home import Home
    from hookbus.merge import Merged, Run
    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.records import RunRecord
    from hookbus.runners import Hook
    from hookbus.settings import Settings

#: ``matching(event, envelope)``: the hooks of an emit and their settings, as the bus finds them.
Matching = Callable[[str, Mapping[str, Any]], "tuple[Sequence[Hook], Settings] | None"]


class QuietFires:
    """Runs test and replay fires for one bus; a dispatcher per variable, made on the first."""

    def __init__(
        self, home: Home, send_prompt: Callable[[PromptRequest], PromptResult], decide: Callable[[str, Mapping[str, Any], Sequence[Run]], Merged],
        matching: Matching,
    ) -> None:
        self._home = home
        self._matching = matching
        self._send_prompt = send_prompt
        self._decide = decide
        self._dispatchers: dict[str, Dispatcher] = {}

    def fire(self, event: str, envelope: Mapping[str, Any], hook_id: str | None, variable: str) -> tuple[Decision, tuple[str, ...]]:
        """The decision the sync hooks that match ``envelope`` (only ``hook_id``, when
        given) reach, and the ids of those that ran; ``variable`` (``HOOKBUS_TEST``) is set
        to 1 for them. A hook that does not match does not run: the decision is then allow.
        Alone, a shadow hook's own decision is what its fixture checks; merged, it stays out
        as it does from a real emit."""
        matched = self._matching(event, envelope)
        if matched is None:
            return ALLOW, ()
        hooks, settings = matched
        chosen = [hook for hook in hooks if hook.is_sync and (hook.id == hook_id if hook_id is not None else not hook.spec.shadow)]
        if not chosen:
            return ALLOW, ()
        full, payload = encode_envelope(event, envelope)
        dispatcher = self._dispatchers.get(variable)
        if dispatcher is None:
            dispatcher = self._dispatchers[variable] = Dispatcher(
                self._home, 1, _kept_nowhere, self._send_prompt, StopMemory(), {variable: "1"}
            )
        runs = dispatcher.run_sync(chosen, event, full, payload, settings, CancelToken())
        # The home guard runs on every guarded call: it is named only when it denied.
        ran = tuple(hook.id for hook, outcome, _, _ in runs if hook.tier != "builtin" or outcome.behavior != "allow")
        return self._decide(event, envelope, runs).decision, ran

    def close(self, deadline: float) -> None:
        """Let the threads of the fires go (``HookBus.close``)."""
        for dispatcher in self._dispatchers.values():
            dispatcher.close(deadline)


def _kept_nowhere(record: RunRecord) -> RunRecord:
    """A quiet fire's records: kept nowhere."""
    return record
