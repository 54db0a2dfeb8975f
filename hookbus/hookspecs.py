"""The plugin contract. Each hookspec's docstring is its contract; all arguments are keywords."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

import pluggy

if TYPE_CHECKING:
    from hookbus.decision import Decision, HookResult
    from hookbus.errors import Problem
    from hookbus.home import Home
    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.settings import Settings
    from hookbus.records import EmitRecord, RunRecord
    from hookbus.runners import RunnerRegistration

hookspec = pluggy.HookspecMarker("hookbus")
hookimpl = pluggy.HookimplMarker("hookbus")


class HookBus(Protocol):
    """The ``bus`` argument: the ``hookbus.HookBus`` that calls the hook. Only its home is
    named here, so that the contract does not import the bus that loads it; an
    implementation may annotate ``bus: hookbus.HookBus`` and use all of it."""

    @property
    def home(self) -> Home: ...


@hookspec
def hookbus_register_runners(register: RunnerRegistration) -> None:
    """Register the action runners this plugin provides, one spec key each.

    ``register.add("command", CommandRunner())`` makes ``"command": ...`` in a hook.json
    run through that runner. A key claimed by two plugins is an error naming both.
    """


@hookspec(firstresult=True)
def hookbus_resolve(event: str, results: Sequence[HookResult]) -> Decision | None:
    """Merge the outcomes of the sync hooks of one event into one Decision.

    ``results`` are in hook-id order. Outcomes of non-blocking hooks arrive already
    reduced to what they may do (context or allow). The first non-None answer wins;
    the built-in resolver is ``trylast`` so a stricter policy plugin goes first.
    """


@hookspec
def hookbus_record(bus: HookBus, record: RunRecord) -> None:
    """Store one fire. Called for every recorder; one that raises is reported and skipped.

    Called on the emitting thread for sync hooks (after they all ran), on the worker thread
    for async ones, and on the caller's for ``trigger``: do the slow part in the background.
    """


@hookspec
def hookbus_record_load_errors(bus: HookBus, errors: Mapping[str, str | None]) -> None:
    """Hooks whose spec stopped loading (id -> the error) or loads again (id -> None).

    Only changes are passed. The built-in recorder keeps the error in the hook's
    state.json (``last_error`` and ``load_error``) until the file loads again.
    """


@hookspec(firstresult=True)
def hookbus_read_runs(
    bus: HookBus, hook_id: str | None, limit: int | None
) -> list[RunRecord] | None:
    """Recorded fires, oldest first, of one hook (or all when ``hook_id`` is None).

    ``limit`` keeps only the most recent ones. Implemented by the active recorder so
    ``hookbus log`` and ``hookbus list`` work whatever backend holds the records.
    """


@hookspec
def hookbus_record_emit(bus: HookBus, record: EmitRecord) -> None:
    """Store one emit record (settings.json ``"record_envelopes": true``): the envelope of an
    emit that ran sync hooks (redacted, capped), its decision and the hooks that ran.
    Optional: a recorder without it keeps none, and ``hookbus replay`` says so."""


@hookspec(firstresult=True)
def hookbus_read_emits(bus: HookBus, since: str | None, until: str | None) -> list[EmitRecord] | None:
    """The emit records with ``since <= at < until`` (either None: no bound), oldest first.
    Raise ``hookbus.records.RefusedRecords`` (with the records it did read) when some could
    not be trusted (files another user could have written): ``hookbus replay`` names them
    and acts on none of them."""


@hookspec(firstresult=True)
def hookbus_check_input(
    event: str, envelope: Mapping[str, Any], new_input: dict[str, Any]
) -> str | None:
    """The embedder's deny_list for rewritten tool input: a reason to deny it, or None.

    Called when hooks rewrite ``tool_input`` (PreToolUse, PermissionRequest); a reason
    turns the decision into deny.
    """


@hookspec(firstresult=True)
def hookbus_run_prompt(request: PromptRequest) -> PromptResult | None:
    """Evaluate a prompt and return its final text (and the thread it ran in, if any).

    Return None to let the next provider answer; raise ``PromptError`` to fail the hook
    open with that message. The built-in OpenAI-compatible provider is ``trylast``, so an
    embedder's implementation (isolated threads) goes first. Honour ``request.deadline``.
    """


@hookspec
def hookbus_config_problems(home: Home, settings: Settings) -> list[Problem] | None:
    """Problems in configuration this plugin owns (config/workflow.json, a settings key),
    checked on every load and shown by ``hookbus validate`` and ``hookbus list``."""


@hookspec
def hookbus_startup(bus: HookBus) -> None:
    """The bus is open: acquire what this plugin needs for it."""


@hookspec
def hookbus_shutdown(bus: HookBus) -> None:
    """The bus is closing, after its async hooks ended: flush and release (recorders drain)."""
