"""``hookbus import claude-code FILE``: Claude Code's hooks as hookbus hooks.

FILE is a Claude Code settings.json, or a plugin's ``hooks/hooks.json`` (the same
``{"hooks": {...}}`` shape, maybe with a ``description``). Each command or prompt entry of
its ``hooks`` block becomes one hook directory, ``HOME/hooks/<id>/hook.json``, with
``"dialect": "claude-code"``: the hook sees Claude Code's envelope, tool names and
environment, and its output is read as Claude Code reads it, so the command runs unchanged.

    {"hooks": {"PreToolUse": [{"matcher": "Bash",
                               "hooks": [{"type": "command", "command": "...", "timeout": 30}]}]}}

becomes ``{"trigger": {"event": "PreToolUse", "matcher": "Bash"}, "mode": "sync",
"blocking": true, "timeout": "30s", "dialect": "claude-code", "command": "..."}``.

- Events: SessionStart is ThreadStart; PreToolUse, PostToolUse, UserPromptSubmit,
  PermissionRequest, Stop, SubagentStart, SubagentStop, PreCompact and PostCompact keep
  their names. Claude's other events (SessionEnd, Notification, ...) have no counterpart:
  they are listed and skipped.
- Matchers: Claude matches a word or a ``A|B`` list of words exactly, ``*`` or nothing
  everything, and anything else as an unanchored regex. hookbus anchors its regexes, so a
  word list is kept as it is, ``*`` is left out, and a regex X becomes ``.*(?:X).*``.
  UserPromptSubmit and Stop have no matcher in hookbus; one written there is dropped.
- Timeouts are seconds in Claude (``30`` is ``"30s"``, ``1.5`` is ``"1500ms"``); a command
  without one gets Claude's default, 60 s, a prompt 30 s.
- A plugin's hooks get ``"env": {"CLAUDE_PLUGIN_ROOT": ROOT}``: ``--plugin-root``, else the
  directory above ``hooks/`` when it holds ``.claude-plugin/``.

It is all or nothing: a file with a malformed entry, or an entry hookbus would refuse once
converted (each hook is checked by hookbus's own parser before anything is written),
writes nothing and exits 1. A hook directory that exists already is refused (unless
``--force``), or left alone when it holds exactly what the import would write.

``--install-bridge`` does the opposite wiring (``hookbus.hosts.install``): it merges into
FILE (a Claude settings.json, or with ``gemini-cli`` a Gemini CLI one) hooks that send
every event to ``hookbus claude-code-hook`` (``gemini-cli-hook``), which runs the home's
hooks and answers the host. For Claude Code it first moves FILE's own hooks into the home
(``plan_migration``: this import, lenient, on the entries of the events the bridge carries;
``hookbus.hosts.migrate`` writes them), so that none runs twice. ``--uninstall-bridge``
(``hookbus.hosts.uninstall``) undoes both.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TextIO

from hookbus.hosts.install import CLAUDE_CODE, CODEX, GEMINI_CLI, BridgedHost, install_bridge, is_bridge_command
from hookbus.hosts.migrate import Migration, Move, build_migration
from hookbus.hosts.uninstall import uninstall_bridge
from hookbus.dialects import codex_names
from hookbus.dialects.claude_names import VIX_EVENT
from hookbus.errors import did_you_mean, shorten
from hookbus.events import EVENTS
from hookbus.jsontext import json_type_name
from hookbus.serve.rendezvous import home_root
from hookbus.hosts.settingsfile import ImportFailed, key_path, make_directory, read_json_file, write_atomically
from hookbus.terminal import printable

if TYPE_CHECKING:
    import argparse

    from hookbus.errors import SpecError
    from hookbus.home import Home

#: Where an imported hook says it came from: ``import:claude-code:<absolute path>``.
CREATED_BY_PREFIX = "import:claude-code:"
DIALECT = "claude-code"
#: The longest id the import derives (before a ``-2`` suffix, which stays within it).
MAX_ID_LENGTH = 48
#: Claude Code's default timeouts, in seconds, for each hook type.
DEFAULT_TIMEOUTS: dict[str, int] = {"command": 60, "prompt": 30}
#: Claude Code's hook types that hookbus has no runner for: such entries are skipped.
UNSUPPORTED_TYPES: tuple[str, ...] = ("agent", "http")
#: Claude Code's events that hookbus has no counterpart for (those it knows of; any other
#: name is skipped too, with a hint when it looks like a misspelling).
CLAUDE_ONLY_EVENTS: tuple[str, ...] = (
    "SessionEnd", "Notification", "PostToolUseFailure", "Setup", "StopFailure",
    "TeammateIdle", "TaskCompleted", "ConfigChange", "WorktreeCreate", "WorktreeRemove",
)
#: Entry keys Claude Code uses for display only: dropped without a word.
_COSMETIC_KEYS = frozenset({"statusMessage"})


@dataclass(frozen=True)
class Source:
    """Whose hooks a file holds: what the import reads in it, and writes for it."""

    #: ``hookbus import NAME``, and the hooks' dialect.
    name: str
    #: For people: "Claude Code", "Codex CLI"; and "Claude", "Codex" (``Claude's SessionStart``).
    host: str
    short: str
    #: The host's event → vixd's.
    events: dict[str, str]
    #: The host's events hookbus has no counterpart for (skipped without a hint).
    only_events: tuple[str, ...]
    #: The hook types hookbus imports, with the host's default timeout (seconds) of each.
    timeouts: dict[str, int]
    #: The host's hook types skipped, each with why.
    skipped_types: dict[str, str]
    #: The bridge the host runs hookbus through (never imported: hookbus would call itself).
    bridge: BridgedHost
    #: Whether the file may be a plugin's, with CLAUDE_PLUGIN_ROOT and the project's dir.
    claude: bool

    @property
    def created_by_prefix(self) -> str:
        return f"import:{self.name}:"


CLAUDE = Source(
    DIALECT, "Claude Code", "Claude", VIX_EVENT, CLAUDE_ONLY_EVENTS, DEFAULT_TIMEOUTS,
    {kind: f"hookbus has no runner for {kind!r} hooks" for kind in UNSUPPORTED_TYPES}, CLAUDE_CODE, True,
)
#: Codex CLI's hooks.json, or config.toml's [hooks] tables: Claude's shape, with Codex's
#: events and defaults; only command hooks run in Codex (0.169), so only those come.
CODEX_SOURCE = Source(
    "codex", "Codex CLI", "Codex", codex_names.VIX_EVENT, ("PreModelRequest", "PostModelRequest", "Interrupt", "SessionEnd"),
    {"command": 600},
    {
        "prompt": "Codex CLI does not run prompt hooks (it skips them), so neither does the import",
        "agent": "Codex CLI does not run agent hooks (it skips them), so neither does the import",
        "mcp_tool": "hookbus has no runner for Codex's 'mcp_tool' hooks",
        "http": "Codex CLI has no http hooks (one makes it refuse the whole file)",
    },
    CODEX, False,
)
SOURCES = {source.name: source for source in (CLAUDE, CODEX_SOURCE)}

#: A matcher Claude Code compares with tool names exactly, word by word.
_WORD_LIST = re.compile(r"[A-Za-z0-9_|]+")
#: ``$NAME`` and ``${NAME}``: left out of the words an id is made from.
_VARIABLE = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
#: ``$CLAUDE_PROJECT_DIR`` or ``${CLAUDE_PROJECT_DIR}`` in a command.
_PROJECT_DIR = re.compile(r"\$\{?CLAUDE_PROJECT_DIR\b")
#: Endings of the scripts a hook runs, which make a relative word a path to run.
_SCRIPT_SUFFIXES = (".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php")
#: Words after which the next word is a program: a relative one there runs from the cwd.
_BEFORE_A_PROGRAM = frozenset({"&&", "||", ";", "|", "then", "do", "exec", "command", "env", "nice", "time", "sudo"})
#: What a relative path to a script does not hold (a sed script, a regex, a glob does).
_NOT_A_PATH = re.compile(r"[*?\[\]{}()|\\^'\"$`=<>:]")



@dataclass
class PlannedHook:
    """One hook the import makes, and what it does with its directory."""

    hook_id: str
    #: The entry's place in FILE: ``$.hooks.PreToolUse[0].hooks[1]``.
    location: str
    claude_event: str
    event: str
    #: The matcher written into hook.json; None when it is left out (all).
    matcher: str | None
    document: dict[str, Any]
    #: "create", "overwrite", "unchanged" (it holds this already) or "refused" (it exists).
    action: str = "create"
    #: Why it was refused, or what changed in translation, for people.
    notes: list[str] = field(default_factory=list)
    #: Where the entry is in FILE: its group's index in the event's array, and its own in
    #: the group's ``hooks``.
    group_index: int = -1
    entry_index: int = -1

    @property
    def kind(self) -> str:
        return "prompt" if "prompt" in self.document else "command"


@dataclass
class Plan:
    """What an import of one file does."""

    #: FILE as given (for messages) and its absolute path (for ``created_by``).
    shown: str
    source: str
    home: Path
    plugin_root: str | None
    hooks: list[PlannedHook] = field(default_factory=list)
    #: Whose hooks FILE holds.
    origin: Source = field(default_factory=lambda: CLAUDE)
    #: Events with no hookbus counterpart, each with how many hooks it holds (and a hint).
    skipped_events: list[tuple[str, int, str]] = field(default_factory=list)
    #: Entries left out, and why: ``(location, reason)`` (a type hookbus has no runner
    #: for; the bridge itself, which would call hookbus from hookbus).
    skipped_entries: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: What a lenient plan (``plan_import(..., lenient=True)``) left out that a strict one
    #: refuses the whole file for: ``(location, message)``.
    problems: list[tuple[str, str]] = field(default_factory=list)

    @property
    def refused(self) -> list[PlannedHook]:
        return [hook for hook in self.hooks if hook.action == "refused"]


# -- reading the file --------------------------------------------------------------------


# -- translating -------------------------------------------------------------------------


def translate_matcher(event: str, matcher: str | None) -> tuple[str | None, str | None]:
    """hookbus's matcher for Claude's ``matcher`` on (hookbus's) ``event``, and a note when
    something changed in meaning or was dropped. None: leave the matcher out (all)."""
    info = EVENTS.get(event)
    if matcher is None or matcher in ("", "*"):
        return None, None
    if info is not None and info.matcher_field is None:
        return None, f"matcher {shorten(matcher)!r} dropped: {event} has no matcher in hookbus"
    if _WORD_LIST.fullmatch(matcher):
        words = [word for word in matcher.split("|") if word]
        # Claude compares each word with the whole name; hookbus anchors: the same test.
        return "|".join(words), None
    # Claude searches for the regex anywhere in the name; hookbus matches the whole name.
    return f".*(?:{matcher}).*", None


def format_timeout(seconds: int | float) -> str:
    """Claude's timeout (seconds) as a Go duration: 30 → ``30s``, 1.5 → ``1500ms``."""
    exact = Decimal(repr(seconds)) if isinstance(seconds, float) else Decimal(seconds)
    if exact == exact.to_integral_value():
        return f"{int(exact)}s"
    millis = exact * 1000
    if millis == millis.to_integral_value():
        return f"{int(millis)}ms"
    return f"{format(millis.normalize(), 'f')}ms"


def _slug(text: str, limit: int) -> str:
    """Lowercase letters, digits and single dashes, at most ``limit`` long, cut between
    words when a word boundary is not too far back."""
    slug = _NOT_SLUG.sub("-", text.lower()).strip("-")
    if len(slug) <= limit:
        return slug
    cut = slug[:limit]
    if slug[limit] != "-" and cut.rfind("-") > limit // 2:
        cut = cut[: cut.rfind("-")]
    return cut.rstrip("-")


def _words_of(command: str) -> str:
    """What a command's id is made from: its words, without variables, with each path cut
    to its last part (``"$CLAUDE_PROJECT_DIR"/.claude/hooks/lint.sh`` is ``lint.sh``)."""
    text = _VARIABLE.sub("", command)
    try:
        tokens = shlex.split(text)
    except ValueError:  # an unbalanced quote: words are enough for a name
        tokens = text.split()
    words = [os.path.basename(token.rstrip("/")) if "/" in token else token for token in tokens]
    return " ".join(words)


def base_id(claude_event: str, matcher: str | None, kind: str, text: str) -> str:
    """The id a hook gets before collisions: event, matcher and a slug of its action."""
    parts = [_slug(claude_event, 24)]
    if matcher:
        parts.append(_slug(matcher, 20))
    parts.append(_slug(_words_of(text) if kind == "command" else text, MAX_ID_LENGTH) or kind)
    return _slug("-".join(part for part in parts if part), MAX_ID_LENGTH) or kind


def unique_id(base: str, taken: set[str]) -> str:
    """``base``, or ``base-2``, ``base-3``... (still within the length) if it is taken."""
    if base not in taken:
        return base
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = base[: MAX_ID_LENGTH - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
        number += 1


def _summary(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def find_plugin_root(source: str) -> str | None:
    """The plugin a hooks.json belongs to: the directory above the one holding it, when that
    directory holds ``.claude-plugin/`` (``<plugin>/hooks/hooks.json``)."""
    candidate = os.path.dirname(os.path.dirname(source))
    return candidate if os.path.isdir(os.path.join(candidate, ".claude-plugin")) else None


def relative_paths(command: str) -> list[str]:
    """The words of ``command`` that look like paths relative to the working directory:
    ``./hooks/x.sh``, ``.claude/hooks/x.sh``, a relative program (``hooks/run``), or a
    relative script it hands an interpreter (``python3 scripts/audit.py``). A heuristic, for
    a warning: a sed script or a regex (``s/a/b/``) is not one."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: words are enough for a warning
        words = command.split()
    found: list[str] = []
    for index, word in enumerate(words):
        if "/" not in word or word.startswith(("/", "~", "-")) or _NOT_A_PATH.search(word):
            continue
        program = index == 0 or words[index - 1] in _BEFORE_A_PROGRAM
        if word.startswith(".") or program or word.endswith(_SCRIPT_SUFFIXES):
            found.append(word)
    return list(dict.fromkeys(found))


def cwd_warnings(command: str) -> list[str]:
    """What an imported command depends on that Claude Code fixes and hookbus takes from
    the envelope: the project (``$CLAUDE_PROJECT_DIR``) and the working directory (Claude
    Code runs a hook in the project's root; hookbus in the envelope's cwd). What the user
    should check, for each."""
    warnings = []
    if _PROJECT_DIR.search(command):
        warnings.append(
            "the command uses $CLAUDE_PROJECT_DIR, which hookbus sets to the envelope's project_dir, "
            "else its cwd (Claude Code: always the project's root): check that the events this home gets "
            "carry project_dir, or a cwd that is the project"
        )
    paths = relative_paths(command)
    if paths:
        shown = ", ".join(repr(path) for path in paths)
        warnings.append(
            f"the command runs {shown}, relative to the working directory, which under hookbus is "
            "the envelope's cwd (else the hook's own directory), not the project's root as in Claude Code: "
            'check that the events\' cwd is the project, or write "$CLAUDE_PROJECT_DIR"/ or an absolute path before it'
        )
    return warnings


# -- planning ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    """An entry of FILE the reader found importable, and where it is."""

    claude_event: str
    location: str
    #: The group's matcher, as written (None: it has none).
    matcher: str | None
    entry: dict[str, Any]
    group_location: str
    group_index: int
    entry_index: int


class _Reader:
    """Walks FILE's hooks block, collecting every malformation with where it is."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.errors: list[str] = []

    def error(self, message: str, location: str) -> None:
        self.errors.append(f"{self.plan.shown}: {message} @ {location}")
        self.plan.problems.append((location, message))

    def warn(self, message: str, location: str) -> None:
        self.plan.warnings.append(f"{self.plan.shown}: {message} @ {location}")

    def read(self, document: Any) -> list[_Entry]:
        """Each importable entry."""
        if not isinstance(document, dict):
            self.error(f"expected an object at the top level, got {json_type_name(document)}", "$")
            return []
        hooks = document.get("hooks")
        if hooks is None:
            self.error('no "hooks" object: expected {"hooks": {"PreToolUse": [...], ...}}', "$")
            return []
        if not isinstance(hooks, dict):
            self.error(f"expected an object of events, got {json_type_name(hooks)}", "$.hooks")
            return []
        entries: list[_Entry] = []
        for claude_event, groups in hooks.items():
            where = key_path("$.hooks", claude_event)
            if not isinstance(groups, list):
                self.error(f"expected an array of matcher groups, got {json_type_name(groups)}", where)
                continue
            origin = self.plan.origin
            if claude_event not in origin.events:
                count = sum(
                    len(group["hooks"]) for group in groups
                    if isinstance(group, dict) and isinstance(group.get("hooks"), list)
                )
                hint = "" if claude_event in origin.only_events else did_you_mean(claude_event, origin.events)
                self.plan.skipped_events.append((claude_event, count, hint))
                continue
            for index, group in enumerate(groups):
                entries += self._group(claude_event, group, f"{where}[{index}]", index)
        return entries

    def _group(self, claude_event: str, group: Any, where: str, group_index: int) -> list[_Entry]:
        if not isinstance(group, dict):
            self.error(f'expected a matcher group ({{"matcher": ..., "hooks": [...]}}), got {json_type_name(group)}', where)
            return []
        matcher = group.get("matcher")
        errors = len(self.errors)
        if matcher is not None and not isinstance(matcher, str):
            self.error(f"expected a string, got {json_type_name(matcher)}", f"{where}.matcher")
        elif isinstance(matcher, str) and _WORD_LIST.fullmatch(matcher) and not matcher.strip("|"):
            self.error("this matcher names no tool: write \"*\" for all", f"{where}.matcher")
        for key in group:
            if key not in ("matcher", "hooks"):
                self.warn(f"unknown field {key!r} ignored", where)
        if "hooks" not in group:
            self.error('no "hooks" array', where)
            return []
        hooks = group["hooks"]
        if not isinstance(hooks, list):
            self.error(f"expected an array of hooks, got {json_type_name(hooks)}", f"{where}.hooks")
            return []
        entries = []
        for index, entry in enumerate(hooks):
            location = f"{where}.hooks[{index}]"
            if self._entry_ok(entry, location):
                entries.append(_Entry(claude_event, location, matcher, entry, where, group_index, index))
        # A broken matcher is reported once, and its entries are still checked.
        return entries if len(self.errors) == errors else []

    def _entry_ok(self, entry: Any, where: str) -> bool:
        if not isinstance(entry, dict):
            self.error(f'expected a hook ({{"type": "command", "command": ...}}), got {json_type_name(entry)}', where)
            return False
        kind = entry.get("type")
        origin = self.plan.origin
        kinds = tuple(origin.timeouts)
        expected = " or ".join(f'"{name}"' for name in kinds)
        if not isinstance(kind, str):
            shown = "nothing" if kind is None else json_type_name(kind)
            self.error(f"expected {expected}, got {shown}", f"{where}.type")
            return False
        if kind in origin.skipped_types:
            self.plan.skipped_entries.append((where, origin.skipped_types[kind]))
            return False
        if kind not in kinds:
            self.error(
                f"unknown hook type {shorten(kind)!r}{did_you_mean(kind, (*kinds, *origin.skipped_types))}: "
                f"expected {expected}",
                f"{where}.type",
            )
            return False
        ok = True
        text = entry.get(kind)
        if not isinstance(text, str):
            shown = "nothing" if text is None else json_type_name(text)
            self.error(f"expected a string, got {shown}", f"{where}.{kind}")
            ok = False
        elif not text.strip():
            self.error(f"the {kind} is empty", f"{where}.{kind}")
            ok = False
        elif kind == "command" and is_bridge_command(text, origin.bridge):
            self.plan.skipped_entries.append((where, "it is the bridge to hookbus itself (--install-bridge)"))
            return False
        timeout = entry.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout)
        ):
            self.error(f"expected a number of seconds, got {json_type_name(timeout)}", f"{where}.timeout")
            ok = False
        elif timeout is not None and timeout <= 0:
            self.error(f"the timeout must be more than 0 seconds, got {timeout}", f"{where}.timeout")
            ok = False
        background = entry.get("async")
        if background is not None and not isinstance(background, bool):
            self.error(f"expected true or false, got {json_type_name(background)}", f"{where}.async")
            ok = False
        allowed = {"type", kind, "timeout", "async"} if kind == "command" else {"type", kind, "timeout"}
        for key in entry:
            if key not in allowed and key not in _COSMETIC_KEYS:
                self.warn(f"field {key!r} has no hookbus counterpart and is ignored", where)
        return ok


def _hook_document(
    plan: Plan,
    hook_id: str,
    claude_event: str,
    event: str,
    source_matcher: str | None,
    matcher: str | None,
    entry: dict[str, Any],
) -> dict[str, Any]:
    kind: str = entry["type"]
    text: str = entry[kind]
    background = entry.get("async") is True
    shown_matcher = f" {source_matcher}" if source_matcher not in (None, "", "*") else ""
    trigger: dict[str, Any] = {"event": event}
    if matcher is not None:
        trigger["matcher"] = matcher
    document: dict[str, Any] = {
        "id": hook_id,
        "name": f"{claude_event}{shown_matcher}: {_summary(text)}",
        "created_by": plan.origin.created_by_prefix + plan.source,
        "trigger": trigger,
        "mode": "async" if background else "sync",
    }
    info = EVENTS[event]
    if info.can_block and not background:
        document["blocking"] = True
    timeout = entry.get("timeout")
    document["timeout"] = format_timeout(plan.origin.timeouts[kind] if timeout is None else timeout)
    document["dialect"] = plan.origin.name
    if plan.plugin_root is not None:
        document["env"] = {"CLAUDE_PLUGIN_ROOT": plan.plugin_root}
    document[kind] = text
    return document


def _existing_action(directory: Path, document: dict[str, Any], force: bool) -> tuple[str, str | None]:
    """What to do with a hook directory: create it, or, when it exists, leave it (it holds
    this hook already), overwrite it (``force``) or refuse."""
    try:
        is_directory = directory.is_dir() and not directory.is_symlink()
    except OSError:
        is_directory = False
    if not os.path.lexists(directory):
        return "create", None
    if not is_directory:
        return "refused", f"{directory} exists and is not a directory: move it away"
    try:
        with open(directory / "hook.json", "rb") as handle:
            if json.loads(handle.read()) == document and not (directory / "hook.yaml").exists():
                return "unchanged", None
    except (OSError, ValueError, RecursionError):
        pass
    if force:
        return "overwrite", None
    return "refused", f"hooks/{directory.name} exists already: --force overwrites it"


def _validator(home: Home) -> Callable[[str, dict[str, Any]], list[SpecError]]:
    """Checks a hook document as the loader would, in its directory of ``home``."""
    from hookbus.errors import SpecError, SpecErrors
    from hookbus.plugins import build_plugin_manager, build_runner_table
    from hookbus.runners import ParseContext
    from hookbus.settings import Settings, load_settings
    from hookbus.runners import parse_hook

    manager, _ = build_plugin_manager()
    runners = build_runner_table(manager)
    # Its tool map (claude_code.tools) is what the matcher is checked against.
    settings = load_settings(home)[0] or Settings()

    def check(hook_id: str, document: dict[str, Any]) -> list[SpecError]:
        directory = home.hook_dir(hook_id)
        context = ParseContext(home=home, hook_dir=directory, settings=settings)
        try:
            parse_hook(document, source=directory / "hook.json", runners=runners, context=context)
        except SpecErrors as exc:
            return list(exc.errors)
        except SpecError as exc:
            return [exc]
        return []

    return check


def _source_location(spec_location: str | None, entry: str, group: str) -> str:
    """Where in FILE a problem hookbus found at ``spec_location`` of hook.json comes from."""
    if spec_location and spec_location.startswith("$.trigger.matcher"):
        return f"{group}.matcher"
    for key in ("command", "prompt", "timeout"):
        if spec_location and spec_location.startswith(f"$.{key}"):
            return f"{entry}.{key}"
    return entry


def plan_import(
    file: str,
    home: str | os.PathLike[str] | None = None,
    *,
    plugin_root: str | None = None,
    force: bool = False,
    document: dict[str, Any] | None = None,
    lenient: bool = False,
    origin: Source | None = None,
) -> Plan:
    """What importing ``file`` into ``home`` does; ImportFailed when it cannot (nothing
    may be written then), with every reason.

    ``document``: FILE's content, read already (``--install-bridge`` reads it once, and
    writes back what it read). ``lenient``: an entry hookbus cannot import is left out of
    the plan and said in ``plan.problems`` instead of refusing the file; the others keep the
    ids a strict import gives them, so that both write the same hooks."""
    from hookbus.home import Home

    shown = os.fspath(file)
    source = os.path.abspath(shown)
    root = Home(Path(home_root(home)))
    if plugin_root is not None:
        if not os.path.isdir(plugin_root):
            raise ImportFailed([f"--plugin-root {plugin_root}: not a directory"])
        plugin_root = os.path.abspath(plugin_root)
    origin = origin or CLAUDE
    plan = Plan(shown=shown, source=source, home=root.root, plugin_root=plugin_root, origin=origin)
    content: Any = document if document is not None else read_hooks_file(source, shown, origin)
    if plan.plugin_root is None and origin.claude:
        plan.plugin_root = find_plugin_root(source)
    reader = _Reader(plan)
    entries = reader.read(content)
    if reader.errors and not lenient:
        raise ImportFailed(reader.errors)
    check = _validator(root)
    errors: list[str] = []
    taken: set[str] = set()
    for found in entries:
        claude_event, location, source_matcher, entry, group = (
            found.claude_event, found.location, found.matcher, found.entry, found.group_location
        )
        event = origin.events[claude_event]
        kind: str = entry["type"]
        matcher, note = translate_matcher(event, source_matcher)
        hook_id = unique_id(base_id(claude_event, source_matcher if matcher else None, kind, entry[kind]), taken)
        taken.add(hook_id)
        document = _hook_document(plan, hook_id, claude_event, event, source_matcher, matcher, entry)
        hook = PlannedHook(
            hook_id, location, claude_event, event, matcher, document,
            group_index=found.group_index, entry_index=found.entry_index,
        )
        if note:
            hook.notes.append(note)
        if document["mode"] == "async":
            hook.notes.append('"async": true: it runs in the background, and cannot decide')
        if kind == "prompt" and "$ARGUMENTS" in entry[kind]:
            hook.notes.append("$ARGUMENTS is not replaced: hookbus appends the envelope's JSON to the prompt")
        if kind == "command" and "CLAUDE_PLUGIN_ROOT" in entry[kind] and plan.plugin_root is None and origin.claude:
            plan.warnings.append(
                f"{shown}: the command uses CLAUDE_PLUGIN_ROOT, but no plugin root is known "
                f"(pass --plugin-root DIR): it will be the hook's directory @ {location}.command"
            )
        if kind == "command" and origin.claude:  # Codex runs a hook in the session's cwd, as hookbus does
            plan.warnings += [f"{shown}: {warning} @ {location}.command" for warning in cwd_warnings(entry[kind])]
        problems = check(hook_id, document)
        for problem in problems:
            where = _source_location(problem.location, location, group)
            errors.append(f"{shown}: hookbus would refuse this hook: {problem.message} @ {where}")
            plan.problems.append((where, f"hookbus would refuse this hook: {problem.message}"))
        if problems and lenient:
            continue
        hook.action, reason = _existing_action(root.hook_dir(hook_id), document, force)
        if reason:
            hook.notes.append(reason)
        plan.hooks.append(hook)
    if errors and not lenient:
        raise ImportFailed(errors)
    return plan


def read_hooks_file(source: str, shown: str, origin: Source) -> Any:
    """FILE's document: JSON, or for Codex CLI a config.toml (by its name), whose
    ``[hooks]`` tables hold its hooks beside their trust (``hooks.state``, left out)."""
    if origin is CLAUDE or not shown.endswith(".toml"):
        return read_json_file(source, shown)
    from hookbus.hosts.settingsfile import load_toml, read_text_file

    document = load_toml(read_text_file(source, shown), shown)
    hooks = document.get("hooks")
    if isinstance(hooks, dict):
        # Not an event: where Codex keeps which hooks it trusts.
        document = {**document, "hooks": {name: value for name, value in hooks.items() if name != "state"}}
    return document


def why_not_imported(plan: Plan, location: str, group_location: str) -> str:
    """Why a lenient ``plan`` left out the entry at ``location`` (of the group at
    ``group_location``), for people."""
    for where, reason in plan.skipped_entries:
        if where == location:
            return reason
    said = [
        message for where, message in plan.problems
        if where == location or where.startswith((location + ".", location + "["))
        or where == group_location or where.startswith(group_location + ".matcher")
    ]
    if said:
        return "hookbus cannot import it: " + "; ".join(dict.fromkeys(said))
    return "hookbus cannot import it"


def plan_migration(document: dict[str, Any], file: str, home: str | os.PathLike[str] | None = None) -> Migration:
    """What ``--install-bridge`` moves out of FILE's ``document`` into the home: every
    entry the import can translate on an event the bridge carries, with the id and content
    ``hookbus import claude-code FILE`` gives it. ImportFailed when one cannot be written
    (another hook holds its id), saying how to fix it."""
    plan = plan_import(file, home, document=document, lenient=True)
    moves = [
        Move(
            hook.claude_event, hook.group_index, hook.entry_index, hook.location, hook.hook_id,
            hook.document, hook_text(hook.document), exists=hook.action == "unchanged",
        )
        for hook in plan.hooks if hook.claude_event in CLAUDE_CODE.events
    ]
    return build_migration(
        document, file, plan.home, moves, lambda location, group: why_not_imported(plan, location, group), plan.warnings
    )


# -- writing -----------------------------------------------------------------------------


def hook_text(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def apply_plan(plan: Plan) -> list[PlannedHook]:
    """Write every hook the plan creates or overwrites; the hooks written."""
    hooks_dir = plan.home / "hooks"
    written: list[PlannedHook] = []
    for hook in plan.hooks:
        if hook.action not in ("create", "overwrite"):
            continue
        directory = hooks_dir / hook.hook_id
        make_directory(directory, 0o755)
        write_atomically(directory / "hook.json", hook_text(hook.document))
        stale = directory / "hook.yaml"  # a directory holds one spec: the new one
        if os.path.lexists(stale):
            os.unlink(stale)
        written.append(hook)
    return written


# -- the command -------------------------------------------------------------------------


_PAST = {"create": "created", "overwrite": "overwrote", "unchanged": "unchanged", "refused": "refused"}


def _print_plan(plan: Plan, dry_run: bool, out: TextIO, err: TextIO) -> None:
    def say(text: str, stream: TextIO = out) -> None:
        print(printable(text), file=stream)

    header = "would import" if dry_run else "importing"
    say(f"{header} {plan.source} into {plan.home / 'hooks'}")
    if plan.plugin_root is not None:
        say(f"plugin root (CLAUDE_PLUGIN_ROOT): {plan.plugin_root}")
    if plan.hooks:
        rows = [
            (
                hook.action if dry_run else _PAST[hook.action],
                hook.hook_id,
                hook.event if hook.event == hook.claude_event else f"{hook.event} ({plan.origin.short}'s {hook.claude_event})",
                f"matcher {hook.matcher}" if hook.matcher is not None else "matcher (all)",
                hook.kind,
            )
            for hook in plan.hooks
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        for row, hook in zip(rows, plan.hooks):
            cells = [cell.ljust(width) for cell, width in zip(row, widths)]
            say("  " + "  ".join([*cells, row[-1]]))
            for note in hook.notes:
                say(f"      {note}")
    for name, count, hint in plan.skipped_events:
        noun = "hook" if count == 1 else "hooks"
        say(f"skipped event {name} ({count} {noun}): hookbus has no counterpart{hint}")
    for location, reason in plan.skipped_entries:
        say(f"skipped {location}: {reason}")
    for warning in plan.warnings:
        say(f"warning: {warning}", err)


def run_import(
    file: str,
    home: str | os.PathLike[str] | None = None,
    *,
    dry_run: bool = False,
    force: bool = False,
    plugin_root: str | None = None,
    origin: Source | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """``hookbus import claude-code|codex FILE``: print the plan, write it unless
    ``dry_run``; the exit code (0, or 1 when something could not be imported)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        plan = plan_import(file, home, plugin_root=plugin_root, force=force, origin=origin)
    except ImportFailed as exc:
        for message in exc.messages:
            print(printable(message), file=err)
        print("nothing was imported", file=err)
        return 1
    _print_plan(plan, dry_run, out, err)
    if not plan.hooks:
        print(printable(f"{plan.shown}: no hook to import"), file=err)
        return 1
    if dry_run:
        print("dry run: nothing was written", file=out)
    else:
        try:
            written = apply_plan(plan)
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            print(printable(f"cannot write{where}: {exc.strerror or exc}"), file=err)
            return 1
        for hook in written:
            print(printable(f"wrote {plan.home / 'hooks' / hook.hook_id / 'hook.json'}"), file=out)
        _warn_unsafe_home(plan.home, err)
    refused = plan.refused
    if refused:
        ids = ", ".join(hook.hook_id for hook in refused)
        print(printable(f"refused (exist already; --force overwrites them): {ids}"), file=err)
        return 1
    return 0


def _warn_unsafe_home(home: Path, err: TextIO) -> None:
    from hookbus.trust import path_refusal

    unsafe = path_refusal(home)
    if unsafe is not None:
        where, why = unsafe
        print(printable(f"warning: {where}: {why}; hookbus loads nothing from {home} until that is fixed"), file=err)


# -- the command line ---------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from hookbus.cli.core import UsageError

    host = {"gemini-cli": GEMINI_CLI, "codex": CODEX}.get(args.source, CLAUDE_CODE)
    if args.source == "codex" and args.plugin_root is not None:
        raise UsageError("--plugin-root is Claude Code's (CLAUDE_PLUGIN_ROOT): Codex CLI has no plugins")
    if args.source == "codex" and args.http_decisions:
        raise UsageError("--http-decisions is Claude Code's: Codex CLI has no http hooks, so --http puts the gate on every event")
    if args.uninstall_bridge:
        if args.install_bridge:
            raise UsageError("--install-bridge and --uninstall-bridge: give one")
        if args.force or args.plugin_root is not None or args.http is not None or args.http_decisions:
            raise UsageError("--force, --plugin-root, --http and --http-decisions do not apply to --uninstall-bridge")
        return uninstall_bridge(args.file, args.home, host=host, dry_run=args.dry_run)
    if args.install_bridge:
        if args.force or args.plugin_root is not None:
            raise UsageError("--force and --plugin-root do not apply to --install-bridge")
        file: str = args.file
        home: str | None = args.home

        def moves(document: dict[str, Any]) -> Migration:
            return plan_migration(document, file, home)

        trust = None
        if host is CODEX:
            from hookbus.hosts.codex_config import plan_codex_trust

            trust = plan_codex_trust
        return install_bridge(
            args.file, args.home, host=host, dry_run=args.dry_run, http=args.http, http_decisions=args.http_decisions,
            moves=moves if host is CLAUDE_CODE else None, trust=trust,
        )
    if args.http is not None:
        raise UsageError("--http goes with --install-bridge: it makes the bridge http hooks and the gate")
    if args.http_decisions:
        raise UsageError("--http-decisions goes with --install-bridge --http: it puts more of the bridge's events on http")
    if args.source == "codex":
        return run_import(args.file, args.home, dry_run=args.dry_run, force=args.force, origin=CODEX_SOURCE)
    if args.source == "gemini-cli":
        raise UsageError(
            "hookbus imports Claude Code's hooks only; for Gemini CLI, "
            "`hookbus import gemini-cli FILE --install-bridge` sends its events to hookbus "
            "(--uninstall-bridge takes that out again)"
        )
    return run_import(
        args.file, args.home, dry_run=args.dry_run, force=args.force, plugin_root=args.plugin_root
    )


def add_parser(parser: argparse.ArgumentParser) -> None:
    """``hookbus import claude-code FILE [--dry-run] [--force] [--plugin-root DIR]
    [--install-bridge [--http URL [--http-decisions]] | --uninstall-bridge]``, ``hookbus
    import codex FILE [--dry-run] [--force] [--install-bridge [--http URL] |
    --uninstall-bridge]``, ``hookbus import gemini-cli FILE --install-bridge|--uninstall-bridge
    [--dry-run]`` (``--home`` comes from the common options)."""
    parser.add_argument(
        "source", choices=("claude-code", "codex", "gemini-cli"), metavar="FORMAT",
        help="what FILE is: claude-code, codex, or gemini-cli (with --install-bridge only)",
    )
    parser.add_argument(
        "file", metavar="FILE",
        help="a Claude Code settings.json, or a plugin's hooks/hooks.json; a Codex CLI hooks.json or config.toml "
        "(--install-bridge: a hooks.json); a Gemini CLI settings.json",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; write nothing")
    parser.add_argument("--force", action="store_true", help="overwrite hook directories that exist already")
    parser.add_argument(
        "--plugin-root", metavar="DIR",
        help="the plugin FILE belongs to, for CLAUDE_PLUGIN_ROOT (default: the directory above "
        "hooks/ when it holds .claude-plugin/)",
    )
    parser.add_argument(
        "--install-bridge", action="store_true",
        help="instead, make FILE (the host's settings.json) send every event to `hookbus claude-code-hook` "
        "(gemini-cli: `hookbus gemini-cli-hook`). claude-code: FILE's own hooks move into the home, so each runs "
        "once, through hookbus; those on events the bridge does not carry (SessionEnd, Notification...) or that "
        "hookbus cannot import stay in FILE, each said. FILE is backed up first, to FILE.bak or, when that "
        "exists, to a FILE.bak.N of its own. codex: FILE is a hooks.json ($CODEX_HOME/hooks.json, or a trusted "
        "project's .codex/hooks.json) whose own hooks stay; the bridge is trusted in $CODEX_HOME/config.toml (backed "
        "up the same way), without which Codex skips it silently, and that is checked (through `$CODEX_BIN "
        "app-server` when CODEX_BIN is set): exit 1 when Codex would not run it",
    )
    parser.add_argument(
        "--uninstall-bridge", action="store_true",
        help="undo --install-bridge: take hookbus's entries (and the token it wrote) out of FILE, put back the "
        "hooks it moved, exactly as they were, and remove the hooks it made in the home that are unchanged since. "
        "gemini-cli: the bridge's entries only; codex: the bridge's entries, and their trust in $CODEX_HOME/config.toml",
    )
    parser.add_argument(
        "--http", metavar="URL",
        help="with --install-bridge, claude-code: http hooks posting to the `hookbus serve --http` at URL "
        "(http://127.0.0.1:PORT, as it printed), no process per call, with the server's token, checked against it "
        "first; SessionStart, events where a fail-closed hook could fire, and those whose answer approves or rewrites "
        "(PreToolUse, PermissionRequest, UserPromptSubmit, PostToolUse) get the gate, a bash command hook that posts "
        "to the server and runs the command bridge when none answers; every event gets the gate when FILE cannot keep "
        "the token (others may read it). gemini-cli, codex: the gate on every event",
    )
    parser.add_argument(
        "--http-decisions", action="store_true",
        help="with --http: post PreToolUse, PermissionRequest, UserPromptSubmit and PostToolUse over http too. The risk: "
        "Claude Code does not authenticate the server, so whoever listens on the port while the server is down gets "
        "the token and those envelopes, and its answers approve permission prompts and rewrite commands, prompts' "
        "context and tool output; hold the port with systemd (contrib/systemd/hookbus.socket) if you use it",
    )
    parser.set_defaults(func=cmd_import)
