"""The bridges: hookbus as the hook engine of Claude Code (``hookbus claude-code-hook``),
of Gemini CLI (``hookbus gemini-cli-hook``) and of Codex CLI (``hookbus codex-hook``).

The host runs one command for every event (``hookbus import claude-code|gemini-cli FILE
--install-bridge`` writes its settings). The bridge reads the host's envelope on stdin and
turns it into vixd's: event, tool and field names (SessionStart or Gemini's BeforeTool
become ThreadStart and PreToolUse, ``Bash`` or ``run_shell_command`` become ``bash``,
``file_path`` becomes ``path``), ``session_id`` becomes ``thread_id``, and the project
directory and env file the host hands its hooks in their environment go into the envelope
as ``project_dir`` and ``env_file`` (a server runs hooks in its own environment). It runs
the home's hooks, through ``hookbus serve`` when one answers, and writes the merged decision
back the way the host obeys it.

Exit 0 with the host's JSON on stdout (for Claude Code nothing, for Gemini CLI ``{}``, when
there is nothing to say). What hookbus itself cannot decide is decided as the hooks' own
on_error says (``hookbus.hosts.command``, the command line's part); a bare exit 1, which both
hosts take for "no opinion", is left for a readable envelope that names no event, and for
a failure no fail-closed hook could have caught. Built-in modules only:
``hookbus.serve.quickpath`` uses this on its way to a server.
"""

from __future__ import annotations

from hookbus.dialects import claude_names, codex_names, gemini_names
from hookbus.dialects.claude_names import DEFAULT_NAMES, ToolNames, envelope_to_vix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    Renderer = Callable[[str, str, "dict[str, Any]", ToolNames, "str | None"], "dict[str, Any]"]


def output_text(output: dict[str, Any]) -> str:
    """The host's JSON as every path writes it (stdout of the bridges, the body of ``POST
    /claude-code``), byte for byte alike: ASCII, with ``\\uXXXX`` escapes, so that neither
    a terminal nor a host's decoder can mistake it; NaN and lone surrogates as strict JSON
    writes them, and nesting past the C encoder without recursion."""
    from hookbus.serve.leanjson import LeanJSONError, dumps

    try:
        return dumps(output)
    except LeanJSONError:
        from hookbus.jsontext import strict_json

        return _ascii(strict_json(output).decode())


def _ascii(text: str) -> str:
    """JSON text with every non-ASCII character escaped as ``json.dumps`` escapes it."""
    if text.isascii():
        return text
    out = []
    for char in text:
        code = ord(char)
        if code < 0x80:
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
    return "".join(out)


class BridgeInputError(ValueError):
    """The envelope on stdin is not one a host sends."""


class Host:
    """One agent CLI the bridge speaks for: its names, and how it hears a decision."""

    __slots__ = ("name", "verb", "events", "names", "variables", "render", "context_events", "hears_permission", "says_empty")

    def __init__(
        self,
        name: str,
        verb: str,
        events: Mapping[str, str],
        names: ToolNames,
        variables: tuple[tuple[str, str], ...],
        render: Renderer,
        context_events: tuple[str, ...],
        hears_permission: bool,
        says_empty: bool,
    ) -> None:
        self.name = name
        self.verb = verb
        #: The host's event → vixd's.
        self.events = dict(events)
        self.names = names
        #: (the host's variable, the envelope field it becomes); the first one set wins.
        self.variables = variables
        self.render = render
        #: vixd's events on which the host passes context to the model.
        self.context_events = context_events
        #: Whether the host can be told to skip, or to force, its permission prompt.
        self.hears_permission = hears_permission
        #: Whether "no opinion" is written as ``{}`` rather than as nothing.
        self.says_empty = says_empty

    def request(self, host_envelope: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, dict[str, Any]] | None:
        """vixd's event and envelope for the host's; None for an event vixd has no
        counterpart of (SessionEnd, Notification, ...). BridgeInputError when it names no
        event at all."""
        host_event = host_envelope.get("hook_event_name")
        if not isinstance(host_event, str) or not host_event:
            raise BridgeInputError(f'the envelope on stdin has no "hook_event_name": run it as a {self.name} hook')
        event = self.events.get(host_event)
        if event is None:
            return None
        envelope = envelope_to_vix(host_envelope, self.names)
        for variable, field in self.variables:
            value = environ.get(variable)
            if value and field not in envelope:
                envelope[field] = value
        return event, envelope

    def answer(self, host_event: str, event: str, envelope: Mapping[str, Any], decision: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """What to print for ``decision`` (None: nothing), and what the host has no way to
        hear, for stderr."""
        tool = envelope.get("tool_name")
        output = self.render(host_event, event, decision, self.names, tool if isinstance(tool, str) else None)
        return (output if output or self.says_empty else None), self._unsaid(event, decision)

    def refusal(self, event: str, decision: dict[str, Any]) -> str | None:
        """What to say on stderr, exiting 2, beside the JSON: for a host that takes a block
        only so (Codex CLI); None for the others, which read the JSON alone."""
        return None

    def _unsaid(self, event: str, decision: dict[str, Any]) -> list[str]:
        notes = []
        if event == "UserPromptSubmit" and decision.get("behavior") == "modify":
            notes.append(f"a hook rewrote the prompt, which {self.name} cannot take; the prompt is unchanged")
        if decision.get("context") and event not in self.context_events:
            notes.append(f"a hook added context on {event}, where {self.name} passes none to the model; it is dropped")
        if decision.get("permission") and not self.hears_permission:
            notes.append(f"a hook said {decision['permission']!r} to the permission prompt, which {self.name} cannot take")
        return notes


def claude_output(host_event: str, event: str, decision: dict[str, Any], names: ToolNames, tool: str | None) -> dict[str, Any]:
    """What Claude Code obeys for vixd's ``decision`` on (vixd's) ``event``; {} for nothing.

    ``tool`` is vixd's name of the tool, to put a rewritten input back in Claude's fields."""
    behavior = decision.get("behavior")
    reason = decision.get("reason")
    permission = decision.get("permission")
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    new_input = decision.get("input") if behavior == "modify" else None
    if new_input is not None and tool is not None:
        new_input = names.input_to_host(tool, new_input)
    if event == "PreToolUse":
        if behavior == "deny":
            specific.update(permissionDecision="deny", permissionDecisionReason=reason or "denied by a hook")
        elif permission is not None:
            specific["permissionDecision"] = "allow" if permission == "approve" else "ask"
            if reason:
                specific["permissionDecisionReason"] = reason
        if new_input is not None:
            specific["updatedInput"] = new_input
    elif event == "PermissionRequest":
        if behavior == "deny":
            specific["decision"] = {"behavior": "deny", "message": reason or "denied by a hook"}
        elif permission == "approve" or new_input is not None:
            specific["decision"] = {"behavior": "allow"}
            if new_input is not None:
                specific["decision"]["updatedInput"] = new_input
    elif event == "UserPromptSubmit" and behavior == "deny":
        out.update(decision="block", reason=reason or "blocked by a hook")
    elif event in ("Stop", "SubagentStop") and decision.get("continue_with"):
        out.update(decision="block", reason=decision["continue_with"])
    return _finish(out, specific, host_event, event, decision, claude_names.CONTEXT_EVENTS)


def gemini_output(host_event: str, event: str, decision: dict[str, Any], names: ToolNames, tool: str | None) -> dict[str, Any]:
    """What Gemini CLI obeys for vixd's ``decision`` on (vixd's) ``event``; {} for nothing.

    A deny is ``decision: deny`` with its reason (on AfterAgent, vixd's Stop, that is "do
    not stop: take this as the next prompt", so ``continue_with`` says it there). A
    ``permission: ask`` on BeforeTool is ``decision: ask``: Gemini CLI then waits for the
    user's confirmation, even in yolo mode (with ``-p``, the tool does not run). ``approve``
    has no counterpart (the host reports it on stderr). A rewrite is
    ``hookSpecificOutput.tool_input``, which replaces the tool's arguments whole (a field it
    leaves out is gone), so it is vixd's ``input`` as it is, a whole replacement already,
    with only the field names made Gemini's (``path`` is ``file_path``)."""
    behavior = decision.get("behavior")
    reason = decision.get("reason")
    out: dict[str, Any] = {}
    specific: dict[str, Any] = {}
    if event in ("PreToolUse", "UserPromptSubmit") and behavior == "deny":
        out.update(decision="deny", reason=reason or "denied by a hook")
    elif event == "PreToolUse":
        if decision.get("permission") == "ask":
            out.update(decision="ask", reason=reason or "a hook asks you to confirm this call")
        if behavior == "modify" and decision.get("input") is not None:
            new_input = decision["input"]
            specific["tool_input"] = names.input_to_host(tool, new_input) if tool is not None else new_input
    elif event == "Stop" and decision.get("continue_with"):
        out.update(decision="deny", reason=decision["continue_with"])
    return _finish(out, specific, host_event, event, decision, gemini_names.CONTEXT_EVENTS)


def _finish(
    out: dict[str, Any], specific: dict[str, Any], host_event: str, event: str, decision: dict[str, Any], context_events: tuple[str, ...]
) -> dict[str, Any]:
    """What both hosts spell alike: context where the host takes it, ``halt`` as
    ``continue: false``, and the event's own part under ``hookSpecificOutput``."""
    if decision.get("context") and event in context_events:
        specific["additionalContext"] = decision["context"]
    if decision.get("halt"):
        out.update({"continue": False, "stopReason": decision["halt"]})
    if specific:
        out["hookSpecificOutput"] = {"hookEventName": host_event, **specific}
    return out



CLAUDE_CODE = Host(
    name="Claude Code",
    verb="claude-code-hook",
    events=claude_names.VIX_EVENT,
    # The default map only: settings.json's claude_code.tools is read by the bus, which
    # checks who could have written it; a bridge on its way to a server reads no settings.
    names=DEFAULT_NAMES,
    variables=(("CLAUDE_PROJECT_DIR", "project_dir"), ("CLAUDE_ENV_FILE", "env_file")),
    render=claude_output,
    context_events=claude_names.CONTEXT_EVENTS,
    hears_permission=True,
    says_empty=False,
)


class GeminiHost(Host):
    """Gemini CLI (0.61.0), where it differs from what a Host assumes of its host."""

    __slots__ = ()

    def request(self, host_envelope: Mapping[str, Any], environ: Mapping[str, str]) -> tuple[str, dict[str, Any]] | None:
        """As ``Host.request``; but on AfterAgent, ``stop_hook_active`` is hookbus's. Gemini
        CLI sends false on every AfterAgent, even after a hook kept the agent going, and a
        gate that trusted it would keep the agent going until Gemini's loop detector stops
        it. So the envelope says ``true`` when the last AfterAgent of the session was
        answered "go on" (``hookbus.dialects.stopguard``'s memory on disk, which every hook sees,
        native or dialect, in-process or through a server), and no flag otherwise, as
        where the bus keeps one (a gate that finds none may count its own blocks, as
        contrib's cc-stop-gate does). A true from Gemini CLI is kept."""
        request = super().request(host_envelope, environ)
        if request is None or request[0] != "Stop":
            return request
        envelope = request[1]
        if envelope.get("stop_hook_active") is not True:
            from hookbus.dialects.stopguard import remembered_stop

            envelope.pop("stop_hook_active", None)
            if remembered_stop(environ, "Stop", envelope):
                envelope["stop_hook_active"] = True
        return request

    def answer(self, host_event: str, event: str, envelope: Mapping[str, Any], decision: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """As ``Host.answer``; and on AfterAgent, remember whether the agent was told to go
        on, for the next AfterAgent of the session (``request``)."""
        output, notes = super().answer(host_event, event, envelope, decision)
        if event == "Stop":
            import os

            from hookbus.dialects.stopguard import remember_stop

            continued = bool(decision.get("continue_with"))
            why = remember_stop(os.environ, "Stop", envelope, continued)
            if why is not None:
                notes.append(
                    f"cannot remember that the agent was told to go on ({why}): its next AfterAgent will not "
                    "say stop_hook_active: true"
                )
        return output, notes

    def _unsaid(self, event: str, decision: dict[str, Any]) -> list[str]:
        # Gemini CLI takes "ask" (gemini_output says it as decision: ask) but has no
        # "approve": only that one is reported as lost.
        if decision.get("permission") == "ask" and event == "PreToolUse":
            decision = {key: value for key, value in decision.items() if key != "permission"}
        return super()._unsaid(event, decision)


GEMINI_CLI = GeminiHost(
    name="Gemini CLI",
    verb="gemini-cli-hook",
    events=gemini_names.VIX_EVENT,
    names=gemini_names.GEMINI_TOOLS,
    # Gemini CLI sets CLAUDE_PROJECT_DIR too, as an alias.
    variables=(("GEMINI_PROJECT_DIR", "project_dir"), ("CLAUDE_PROJECT_DIR", "project_dir")),
    render=gemini_output,
    context_events=gemini_names.CONTEXT_EVENTS,
    # It can be told to ask (decision: ask), not to skip its prompt: GeminiHost._unsaid
    # reports an approve.
    hears_permission=False,
    # Gemini CLI parses stdout at exit 0 as JSON: say "nothing" in JSON.
    says_empty=True,
)


class CodexHost(Host):
    """Codex CLI (0.169.0), where it differs from what a Host assumes of its host: a deny is
    said twice (the JSON and exit 2, ``codexoutput.refusal``), and it puts no bound on Stop
    hooks that keep the turn going, so this bridge does (``MAX_STOP_ROUNDS``)."""

    __slots__ = ()

    #: Stops of one session in a row that the bridge lets hooks answer "go on": at the next,
    #: the turn stops (said on stderr). Codex itself ran 1,585 rounds of a hook that always
    #: blocked, for 13 minutes, until it was killed.
    MAX_STOP_ROUNDS = 8

    def answer(self, host_event: str, event: str, envelope: Mapping[str, Any], decision: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """As ``Host.answer``; a Stop that would go on past MAX_STOP_ROUNDS in a row stops."""
        notes: list[str] = []
        if event in ("Stop", "SubagentStop"):
            decision, notes = self._bounded_stop(event, envelope, decision)
        output, unsaid = super().answer(host_event, event, envelope, decision)
        return output, [*notes, *unsaid]

    def _bounded_stop(self, event: str, envelope: Mapping[str, Any], decision: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        import os

        from hookbus.dialects.stopguard import remember_stop, remembered_rounds

        notes = []
        rounds = remembered_rounds(os.environ, event, envelope) + 1 if decision.get("continue_with") else 0
        if rounds > self.MAX_STOP_ROUNDS:
            notes.append(
                f"hooks kept the turn going {self.MAX_STOP_ROUNDS} times in a row, the most this bridge allows (Codex "
                "CLI sets no bound): this time the turn stops"
            )
            decision, rounds = {**decision, "continue_with": None}, 0
        why = remember_stop(os.environ, event, envelope, rounds > 0, rounds)
        if why is not None:
            notes.append(f"cannot count the stops kept going in a row ({why}): a Stop hook that always says go on is not bounded")
        return decision, notes

    def refusal(self, event: str, decision: dict[str, Any]) -> str | None:
        from hookbus.hosts.codexoutput import refusal

        return refusal(event, decision)

    def _unsaid(self, event: str, decision: dict[str, Any]) -> list[str]:
        from hookbus.hosts.codexoutput import as_codex

        decision = as_codex(event, decision)
        if decision.get("behavior") == "deny" or event == "PermissionRequest":
            # A deny is heard whole; PermissionRequest's approve is its allow.
            decision = {key: value for key, value in decision.items() if key not in ("permission", "context")}
        notes = super()._unsaid(event, decision)
        if decision.get("halt") and event not in codex_names.HALT_EVENTS:
            notes.append(f"a hook said to end the session on {event}, where {self.name} cannot take it; the session goes on")
        return notes


def _codex_output(host_event: str, event: str, decision: dict[str, Any], names: ToolNames, tool: str | None) -> dict[str, Any]:
    from hookbus.hosts.codexoutput import codex_output

    return codex_output(host_event, event, decision, names, tool)


CODEX_CLI = CodexHost(
    name="Codex CLI",
    verb="codex-hook",
    events=codex_names.VIX_EVENT,
    names=codex_names.CODEX_TOOLS,
    # Codex hands its hooks no variables of its own: the envelope's cwd is the project.
    variables=(),
    render=_codex_output,
    context_events=codex_names.CONTEXT_EVENTS,
    # PermissionRequest's allow and deny only; on PreToolUse an approve has no counterpart.
    hears_permission=False,
    # Codex takes exit 0 with nothing printed for "nothing to say".
    says_empty=False,
)
HOSTS = {host.verb: host for host in (CLAUDE_CODE, GEMINI_CLI, CODEX_CLI)}
