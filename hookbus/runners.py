"""What an action runner is, what it receives for one fire (a ``HookCall`` of a loaded
``Hook``), and how runners claim spec keys: ``parse_hook`` makes a Hook of a hook.json
document, its action parsed by the runner that claimed its key.

The loaded Hook lives here, beside the runner it holds and the call its runner gets, so
that ``hookbus.spec`` (the document's model and checks) needs nothing of runners."""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol

import attrs

from hookbus.cancel import CancelToken as CancelToken  # re-exported: runners take it from here
from hookbus.durations import parse_duration
from hookbus.errors import PluginError, SpecError, SpecErrors, reroot, shorten
from hookbus.errors import check_runnable as check_runnable  # re-exported: runners call it from parse
from hookbus.jsontext import json_type_name
from hookbus.spec import (
    SCHEMA_KEY,
    SPEC_FIELD_SET,
    SPEC_FIELDS,
    HookSpec,
    build_spec,
    check_spec_fields,
    unknown_field_errors,
)

if TYPE_CHECKING:
    from hookbus.decision import Outcome
    from hookbus.home import Home
    from hookbus.matching import Matcher
    from hookbus.prompts import PromptRequest, PromptResult
    from hookbus.records import Tier
    from hookbus.settings import Settings

    PromptSender = Callable[[PromptRequest], PromptResult]


#: Who provides the action keys users are likely to write, for "no runner" messages.
KNOWN_PROVIDERS: dict[str, str] = {
    "command": "the built-in plugin 'command' (module hookbus_command)",
    "workflow": "the built-in plugin 'workflow' (module hookbus_workflow)",
    "workflow_id": "the built-in plugin 'workflow' (module hookbus_workflow)",
    "prompt": "the built-in plugin 'prompt' (module hookbus_prompt)",
    "http": "the plugin 'http' (pip install hookbus-http)",
    "cel": "the plugin 'cel' (pip install hookbus-cel)",
    "rego": "the plugin 'rego' (pip install hookbus-rego)",
}
#: Keys that are mutually exclusive spellings of one action, with a message of their own.
EXCLUSIVE_PAIRS: tuple[tuple[str, str], ...] = (("workflow_id", "workflow"),)


#: ``$NAME`` or ``${NAME}``, as os.path.expandvars reads them.
_VARIABLE = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)


def expand_variables(text: str, variables: Mapping[str, str]) -> str:
    """``text`` with ``$NAME`` and ``${NAME}`` replaced from ``variables``; a name that is
    not there is left as written, as os.path.expandvars leaves it."""

    def replace(found: re.Match[str]) -> str:
        name = found.group(1)
        return variables.get(name[1:-1] if name.startswith("{") else name, found.group())

    return _VARIABLE.sub(replace, text)


_NOT_IN_ENVIRONMENT = re.compile("[\x00\ud800-\udfff]")


def _environment_safe(value: str) -> str:
    """``value`` as an environment variable can hold it: one that ends at a NUL character
    or holds a lone surrogate (from a step's output, say) would make the spawn fail."""
    if _NOT_IN_ENVIRONMENT.search(value) is None:
        return value
    return _NOT_IN_ENVIRONMENT.sub(lambda found: "" if found.group() == "\x00" else "\ufffd", value)


def unusable_directory(path: str) -> str | None:
    """Why a process of this one's user could not run in ``path`` (``"cannot be entered
    (Permission denied)"``), or None when it can. Root enters any directory, and so passes."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except PermissionError:
        return "cannot be entered (Permission denied)"
    except OSError as exc:
        return f"cannot be used ({exc.strerror or exc})"
    except ValueError:  # a NUL character or a lone surrogate: no path at all
        return "cannot be used (it is no valid path)"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    # As the user the process runs as (a setuid embedder's real user is someone else).
    if not os.access(path, os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        return "cannot be entered (Permission denied)"
    return None


@attrs.frozen
class ParseContext:
    """What a runner may look at while validating its options."""

    home: Home
    hook_dir: Path
    settings: Settings


class Runner(Protocol):
    """Runs the action of hooks whose spec uses one of the keys it registered."""

    def parse(self, key: str, value: object, context: ParseContext) -> object:
        """Validate ``value`` (the JSON under ``key``) and return the options ``run`` gets.

        Raise ``SpecError`` with a location relative to the value (``"$.url"``); the
        loader reports it under the key (``"$.http.url"``).
        """
        ...

    def run(self, call: HookCall) -> Outcome:
        """Run one fire and say what it decided. Never raise for a failing action:
        return ``Outcome.fail_open(error)``. Honour ``call.deadline`` and ``call.cancel``:
        when several sync hooks run, the bus stops waiting for a runner one second past its
        deadline, but a lone sync hook runs on the emitting thread, so only the runner
        itself can keep its deadline there.
        """
        ...

    # Optional: ``def schema(self, key: str) -> dict`` returns the JSON Schema of the value
    # under ``key`` for ``hookbus schema`` (``hookbus.schema.schema_of(OptionsClass)``).
    # Optional: ``shows_action = True`` lets ``hookbus explain`` show the action as written
    # (a policy, not a secret), beside the ``Outcome.answer`` the runner gives.


@attrs.frozen
class Hook:
    """A loaded hook: its spec, where it lives, and what a load could precompute."""

    spec: HookSpec
    directory: Path
    source: Path
    matcher: Matcher
    #: Seconds, from ``spec.timeout``.
    timeout: float
    runner: Runner = attrs.field(eq=False, repr=False)
    runner_plugin: str = ""
    #: What the runner's ``parse`` returned.
    options: Any = attrs.field(default=None, eq=False)
    #: Whose hook this is: "user" (the home), "managed" (the organization's managed
    #: directory) or "builtin" (hookbus's own home guard).
    tier: Tier = "user"

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def event(self) -> str:
        return self.spec.trigger.event

    #: ``spec.mode == "sync"``, kept as a plain attribute for the emit path.
    is_sync: bool = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "is_sync", self.spec.mode == "sync")


@attrs.frozen
class HookCall:
    """One fire of one hook, as its runner receives it."""

    hook: Hook
    event: str
    #: The embedder's fields, untouched, plus ``hook_event_name``.
    envelope: Mapping[str, Any]
    #: ``envelope`` as JSON plus a newline: what goes on stdin. Encoded once for all the
    #: sync hooks of an emit; each async hook encodes its own, on its worker thread.
    payload: bytes
    #: ``time.monotonic()`` by which the run must be over.
    deadline: float
    home: Home
    cancel: CancelToken = attrs.field(factory=CancelToken)
    #: The settings in effect when the event was emitted.
    settings: Settings | None = None
    #: How the bus answers prompts (``hookbus_run_prompt``); use ``ask``.
    prompt_sender: PromptSender | None = attrs.field(default=None, repr=False)
    #: Variables for the hook's process beyond the bus's own: its spec's ``env``, and
    #: CLAUDE_PROJECT_DIR and friends for a ``claude-code`` dialect hook.
    hook_env: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: What the run did that its spec did not say, and why (``note``): the run's record
    #: carries them as its note.
    notes: list[str] = attrs.field(factory=list, repr=False, eq=False)

    def note(self, text: str) -> None:
        """Say, in the run's record, what the run did that its spec did not ask for (where
        it ran, say). Said once, however often a runner says it (a workflow's every step)."""
        if text not in self.notes:
            self.notes.append(text)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def ask(
        self, text: str, previous_output: str | None = None, deadline: float | None = None
    ) -> PromptResult:
        """Evaluate a prompt: ``text``, then ``previous_output``, then the envelope JSON.

        Raises ``PromptError`` (no provider, HTTP error, timeout, malformed answer).
        """
        from hookbus.prompts import PromptError, PromptRequest, compose_prompt
        from hookbus.settings import Settings

        if self.prompt_sender is None:
            raise PromptError("this bus cannot send prompts")
        envelope_json = self.payload.decode("utf-8", errors="replace")
        request = PromptRequest(
            prompt=compose_prompt(text, envelope_json, previous_output),
            hook_id=self.hook.id,
            event=self.event,
            envelope=self.envelope,
            deadline=self.deadline if deadline is None else min(deadline, self.deadline),
            settings=self.settings or Settings(),
            mode=self.hook.spec.mode,
            cancel=self.cancel,
        )
        return self.prompt_sender(request)

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The process environment plus HOOKBUS_HOOK_ID, HOOKBUS_HOOK_DIR, HOOKBUS_EVENT and
        HOOKBUS_HOME, ``hook_env``, and ``extra`` (made fit for an environment: no NUL, no
        lone surrogate)."""
        env = dict(os.environ)
        env["HOOKBUS_HOOK_ID"] = self.hook.id
        env["HOOKBUS_HOOK_DIR"] = str(self.hook.directory)
        env["HOOKBUS_EVENT"] = self.event
        env["HOOKBUS_HOME"] = str(self.home.root)
        if self.hook_env:
            env.update((name, _environment_safe(value)) for name, value in self.hook_env.items())
        if extra:
            env.update((name, _environment_safe(value)) for name, value in extra.items())
        return env

    def working_directory(self) -> Path:
        """The spec's cwd: ``""`` is the envelope's cwd if it exists and this process's user
        may enter it, else the hook's directory (and the run's note says why); ``$VARS``
        (from the hook's own environment, so ``$HOOKBUS_HOOK_DIR`` too) and ``~`` are
        expanded; a relative path is taken from the hook's directory.

        A cwd of the spec's own is used as it is: one that cannot be entered fails the run,
        saying so, since running the hook anywhere else is not what its author asked for.
        """
        configured = self.hook.spec.cwd
        if not configured:
            envelope_cwd = self.envelope.get("cwd")
            if isinstance(envelope_cwd, str) and envelope_cwd:
                # Not the spawn's failure: the hook did not ask for this directory, and the
                # agent's (chmod 000, another user's home) must not keep its guard from running.
                problem = unusable_directory(envelope_cwd)
                if problem is None:
                    return Path(envelope_cwd)
                self.note(f"ran in the hook's directory: the envelope's cwd {shorten(envelope_cwd, 300)} {problem}")
            return self.hook.directory
        if "$" in configured:
            # Not os.path.expandvars: it reads the daemon's environment, which has none of
            # the HOOKBUS_ variables the command itself can use.
            configured = expand_variables(configured, self.environment())
        expanded = Path(os.path.expanduser(configured))
        return expanded if expanded.is_absolute() else self.hook.directory / expanded


@attrs.frozen
class RunnerEntry:
    key: str
    runner: Runner
    plugin: str


class RunnerTable:
    """Every spec key some plugin registered, and which plugin did."""

    def __init__(self) -> None:
        self._entries: dict[str, RunnerEntry] = {}

    def registration_for(self, plugin: str) -> RunnerRegistration:
        return RunnerRegistration(self, plugin)

    def _add(self, key: str, runner: Runner, plugin: str) -> None:
        existing = self._entries.get(key)
        if existing is not None and existing.plugin != plugin:
            raise PluginError(
                f"spec key {key!r} is claimed by two plugins: {existing.plugin!r} and "
                f"{plugin!r}; block one with HOOKBUS_DISABLE_PLUGINS"
            )
        self._entries[key] = RunnerEntry(key, runner, plugin)

    def get(self, key: str) -> RunnerEntry | None:
        return self._entries.get(key)

    def replace(self, other: RunnerTable) -> None:
        """Take ``other``'s entries in place of these (the plugins changed): whoever holds
        this table sees them at their next load."""
        self._entries = dict(other._entries)

    def keys(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entries(self) -> tuple[RunnerEntry, ...]:
        return tuple(self._entries.values())


class RunnerRegistration:
    """The ``register`` object a plugin's ``hookbus_register_runners`` receives."""

    def __init__(self, table: RunnerTable, plugin: str) -> None:
        self._table = table
        self.plugin = plugin

    def add(self, key: str, runner: Runner) -> None:
        """Make ``"<key>": ...`` in a hook spec run through ``runner``."""
        if not key or not isinstance(key, str):
            raise PluginError(f"plugin {self.plugin!r} registered an empty runner key")
        if key in SPEC_FIELDS:
            raise PluginError(
                f"plugin {self.plugin!r} cannot register runner key {key!r}: it is a hook field"
            )
        self._table._add(key, runner, self.plugin)

def parse_hook(
    document: Any,
    *,
    source: Path,
    runners: RunnerTable,
    context: ParseContext,
) -> Hook:
    """Validate a decoded hook document into a Hook; SpecErrors lists everything wrong."""
    directory = context.hook_dir
    directory_name = directory.name
    if not isinstance(document, dict):
        raise SpecErrors(
            [SpecError(f"expected an object at the top level, got {json_type_name(document)}")]
        )
    base: dict[str, Any] = {}
    candidates: list[str] = []
    unknown: list[str] = []
    schema_errors: list[SpecError] = []
    for key, value in document.items():
        if key in SPEC_FIELD_SET:
            base[key] = value
        elif key == SCHEMA_KEY:
            if not isinstance(value, str):
                message = (
                    f"expected a string, got {json_type_name(value)}: the path or URL of the "
                    'JSON Schema, for editors (e.g. "../../hook.schema.json", written by '
                    "`hookbus schema > HOME/hook.schema.json`), or leave it out"
                )
                schema_errors.append(SpecError(message, f"$.{SCHEMA_KEY}"))
        elif runners.get(key) is not None or key in KNOWN_PROVIDERS:
            candidates.append(key)
        else:
            unknown.append(key)
    action_key, errors = _check_actions(candidates, runners)
    errors += schema_errors
    if unknown:
        known = (*SPEC_FIELDS, SCHEMA_KEY, *runners.keys())
        errors += unknown_field_errors(unknown, known, "$", plugin_hint=not candidates)
    fields, matcher, problems = check_spec_fields(base, directory_name, context.settings.raw)
    errors += problems
    options: Any = None
    entry = runners.get(action_key) if action_key else None
    if entry is not None and action_key is not None:
        try:
            options = entry.runner.parse(action_key, document[action_key], context)
        except SpecErrors as exc:
            errors += [SpecError(e.message, reroot(e.location, f"$.{action_key}")) for e in exc.errors]
        except SpecError as exc:
            errors.append(SpecError(exc.message, reroot(exc.location, f"$.{action_key}")))
    if errors:
        raise SpecErrors(errors)
    # Each of these is None only when an error about it was added above.
    assert fields is not None and entry is not None and action_key is not None and matcher is not None
    spec = build_spec(fields, directory_name, action_key, document[action_key])
    return Hook(
        spec=spec,
        directory=directory,
        source=source,
        matcher=matcher,
        timeout=parse_duration(spec.timeout),
        runner=entry.runner,
        runner_plugin=entry.plugin,
        options=options,
    )


def _check_actions(
    candidates: list[str], runners: RunnerTable
) -> tuple[str | None, list[SpecError]]:
    """The one action key among ``candidates``, or the errors that say why there isn't one."""
    for first, second in EXCLUSIVE_PAIRS:
        if first in candidates and second in candidates:
            message = f"{first} and {second} are mutually exclusive: keep one"
            return None, [SpecError(message, f"$.{second}")]
    if len(candidates) > 1:
        names = ", ".join(candidates)
        return None, [SpecError(f"more than one action ({names}): a hook runs exactly one", "$")]
    if not candidates:
        keys = list(dict.fromkeys(["command", "workflow_id", "workflow", "prompt", *runners.keys()]))
        return None, [SpecError(f"no action: set exactly one of {', '.join(keys)}", "$")]
    key = candidates[0]
    if runners.get(key) is None:
        provider = KNOWN_PROVIDERS[key]
        message = (
            f"no runner for {key!r}: it is provided by {provider}, which is not installed "
            "or is disabled (see `hookbus plugins`)"
        )
        return None, [SpecError(message, f"$.{key}")]
    return key, []
