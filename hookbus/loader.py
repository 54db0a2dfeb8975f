"""Loading hook directories incrementally, keeping each hook's last good version.

The loader remembers every hook directory it has seen. A reload re-reads only the
directories it is told about (or, on a rescan, those whose stat changed) and keeps the
last valid version of a hook whose file has become invalid, until the file is valid again.
A hook whose spec is valid but whose script a fire would find broken (missing, not
executable, a bad ``#!`` line: ``hookbus.policy.scripts``) is loaded all the same, so
that its ``on_error`` decides each of its fires (a fail-closed guard must not vanish), and
the script's problem is among the snapshot's problems, as ``failing_problems`` tells them.
It is not thread-safe: the bus calls it under its reload lock.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Literal

import attrs

from hookbus.dialects.claude_names import ToolNames
from hookbus.errors import Problem, SpecError, SpecErrors
from hookbus.files import LoadError, SpecFile, decode_document, is_ignored_name, is_part_of_hook, read_spec_file
from hookbus.home import Home
from hookbus.permissions import check_permissions
from hookbus.policy.scripts import check_scripts
from hookbus.registry import SPEC_NAMES, Snapshot
from hookbus.settings import Settings, load_settings
from hookbus.runners import Hook, ParseContext, RunnerTable, parse_hook
from hookbus.terminal import UNPRINTABLE, printable
from hookbus.trust import STATE_FILES, Findings, entry_refusals, path_refusal

if TYPE_CHECKING:
    from hookbus.records import Tier

ChangeKind = Literal["loaded", "reloaded", "removed", "skipped", "kept", "warning", "settings"]


@attrs.frozen
class LoadEvent:
    """One thing a load did, as ``hookbus watch`` prints it."""

    kind: ChangeKind
    subject: str
    detail: str = ""

    def __str__(self) -> str:
        if self.kind == "warning":
            return f"warning: {self.subject}"
        return f"{self.kind} {self.subject}" + (f": {self.detail}" if self.detail else "")


#: What a rescan compares to know whether a hook directory changed since it was read: the
#: directory's identity, owner and mode; the lstat of each spec file name; and the name and
#: inode of every entry that is part of the hook (``is_part_of_hook``). Not the directory's
#: times: the recorder replaces state.json after every fire, which changes them, and a
#: hook's own state is no change of the hook.
Signature = tuple[tuple[int, ...], tuple[tuple[str, int], ...]]


@attrs.frozen
class HookState:
    """What the loader knows of one hook directory."""

    #: The directory and its entries when last read.
    signature: Signature
    #: The hook in effect: the file's current version, or its last good one.
    hook: Hook | None
    #: Why the file as it is on disk is not in effect.
    problems: tuple[Problem, ...] = ()
    warnings: tuple[str, ...] = ()
    #: Why the hook in effect will fail when it fires: a script it runs is broken.
    failing: tuple[Problem, ...] = ()

    @property
    def error_text(self) -> str | None:
        return "; ".join(str(problem) for problem in (*self.problems, *self.failing)) or None


def _is_text(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_ABSENT = (0, 0, 0, 0, 0, 0)
_ABSENT_DIRECTORY = (0, 0, 0)
#: Entries of a hook directory its file check passes over: hookbus's own state.json, and
#: the spec file, which is checked on the fstat of what was read.
_NOT_CHECKED_AGAIN = (*STATE_FILES, *(name for name, _ in SPEC_NAMES))


def _stat_part(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode, info.st_uid)


def _directory_part(info: os.stat_result) -> tuple[int, ...]:
    # Who may change it and which directory it is; its times change with every entry
    # made or renamed in it, state.json included, and the entries are compared one by one.
    return (info.st_ino, info.st_mode, info.st_uid)


def _entries_part(entries: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(entry for entry in entries if is_part_of_hook(entry[0])))


def _signature(directory: str) -> Signature:
    """The signature of a hook directory as it is now: a rescan re-reads the directory
    only when this differs from the one taken when it was read."""
    try:
        parts = list(_directory_part(os.lstat(directory)))
    except OSError:
        parts = list(_ABSENT_DIRECTORY)
    for path in (os.path.join(directory, name) for name, _ in SPEC_NAMES):
        try:
            parts += _stat_part(os.lstat(path))
        except OSError:
            parts += _ABSENT
    try:
        with os.scandir(directory) as scanned:
            entries = _entries_part((entry.name, entry.inode()) for entry in scanned)
    except OSError:
        entries = ()
    return tuple(parts), entries


def _signature_of(spec: SpecFile) -> Signature:
    """The same signature, from the fstat and the listing of what was read: no extra
    system calls."""
    parts = list(_directory_part(spec.dir_stat))
    for _, kind in SPEC_NAMES:
        parts += _stat_part(spec.file_stat) if kind == spec.kind else _ABSENT
    return tuple(parts), _entries_part(spec.entries)


class HookLoader:
    """Turns the hooks directory into Snapshots, one reload at a time."""

    def __init__(self, home: Home, runners: RunnerTable, disabled_by_env: bool = False, tier: Tier = "user") -> None:
        self.home = home
        self.runners = runners
        self.disabled_by_env = disabled_by_env
        #: "user" for the home; "managed" for the organization's managed directory, whose
        #: every file root must own (and whose paths are shown whole, not home-relative).
        self.tier: Tier = tier
        self.root_only = tier == "managed"
        self.settings = Settings(disabled_by_env=disabled_by_env)
        #: The settings hooks are parsed under (strict modes, plugins' options): this
        #: loader's own, or those in effect once the managed settings.json has its say.
        self.in_effect: Settings | None = None
        #: The settings of the last settings.json that could be trusted (or its absence):
        #: what stays in effect while settings.json is broken or others could write it.
        self.trusted_settings = self.settings
        self.settings_problems: list[Problem] = []
        #: Why nothing in the home may be obeyed (it, or a directory above it, is open to
        #: other users); None when it is safe.
        self.home_problem: Problem | None = None
        #: Problems plugins found in configuration they own (``hookbus_config_problems``).
        self.config_problems: list[Problem] = []
        self.root_problem: Problem | None = None
        self.root_warning: str | None = None
        self.states: dict[str, HookState] = {}
        #: Describe every load and reload (``hookbus watch``), not only problems.
        self.verbose = False

    # -- what is loaded -----------------------------------------------------------------

    def snapshot(self, generation: int) -> Snapshot:
        hooks, problems, warnings = self.parts()
        return Snapshot.build(hooks, self.settings, problems, generation, warnings)

    def parts(self) -> tuple[dict[str, Hook], list[Problem], list[str]]:
        """What this loader has in effect: the hooks by id, the problems, the warnings."""
        hooks = {hook_id: state.hook for hook_id, state in self.states.items() if state.hook}
        problems = [*self.settings_problems, *self.config_problems]
        if self.home_problem is not None:
            problems.insert(0, self.home_problem)
        if self.root_problem is not None:
            problems.append(self.root_problem)
        warnings = [self.root_warning] if self.root_warning else []
        warnings += ToolNames.from_settings(self.settings.raw)[1]
        for state in self.states.values():
            problems += state.problems
            problems += state.failing
            warnings += state.warnings
        return hooks, problems, warnings

    def shown(self, path: Path) -> str:
        """``path`` as messages show it: home-relative for the home; whole for the managed
        directory, so that nobody takes its files for theirs."""
        return str(path) if self.root_only else self.home.relative(path)

    def load_errors(self) -> dict[str, str | None]:
        """Each hook's current load error (None when its file loads)."""
        return {hook_id: state.error_text for hook_id, state in self.states.items()}

    def outcome(self) -> tuple[object, ...]:
        """What the loads so far decided, to compare before and after a rescan: each hook
        directory's state (a directory re-read gets a new one, with a new signature) and
        the problems of the home and of the hooks directory."""
        return (self.home_problem, self.root_problem, self.root_warning, tuple(self.states.items()))

    # -- loading ------------------------------------------------------------------------

    def check_home(self) -> list[LoadEvent]:
        """Whether the home may be obeyed at all: it and every directory above it. Checked
        on every full load; the watcher polls the same directories for changes."""
        unsafe = path_refusal(self.home.root, self.root_only)
        if unsafe is None:
            self.home_problem = None
            return []
        where, why = unsafe
        place = "the managed directory" if self.root_only else "the home"
        message = f"{why}; nothing in {place} {self.home.root} is used until that is fixed"
        self.home_problem = Problem(str(where), message)
        return [LoadEvent("skipped", str(self.home_problem))]

    def load_settings(self) -> list[LoadEvent]:
        before = self.settings
        if self.home_problem is not None:
            loaded, self.settings_problems = None, []  # the home's problem says why
        else:
            loaded, self.settings_problems = load_settings(self.home, self.disabled_by_env, self.root_only)
        if loaded is not None:
            self.trusted_settings = loaded
        self.settings = self.trusted_settings
        events = [LoadEvent("skipped", str(problem)) for problem in self.settings_problems]
        if before.hooks_enabled != self.settings.hooks_enabled:
            state = "off: " + (self.settings.disabled_reason or "") if not self.settings.hooks_enabled else "on"
            events.append(LoadEvent("settings", "hooks", state))
        return events

    def scan(self, force: bool = False) -> list[LoadEvent]:
        """Look at every hook directory; re-read those whose stat changed (all if ``force``)."""
        events: list[LoadEvent] = []
        names = self._list_hook_dirs(events)
        root = str(self.home.hooks_dir)
        for gone in set(self.states) - set(names):
            events += self._set(gone, None)
        for name in names:
            state = self.states.get(name)
            if force or state is None or state.signature != _signature(os.path.join(root, name)):
                events += self._set(name, self._load(name))
        return events

    def reload(self, hook_ids: Iterable[str]) -> list[LoadEvent]:
        """Re-read these hook directories (created, changed, renamed or deleted)."""
        events: list[LoadEvent] = []
        if self.home_problem is not None:
            return events  # nothing loads from an unsafe home
        for hook_id in sorted(set(hook_ids)):
            if is_ignored_name(hook_id):
                continue
            events += self._set(hook_id, self._load(hook_id))
        return events

    def _list_hook_dirs(self, events: list[LoadEvent]) -> list[str]:
        root = self.home.hooks_dir
        self.root_problem = None
        self.root_warning = None
        if self.home_problem is not None:
            return []
        try:
            info = os.lstat(root)
            if stat.S_ISLNK(info.st_mode):
                message = "is a symbolic link, which is not followed: move the directory in place"
                self.root_problem = Problem(self.shown(root), f"{message}; no hook is loaded from it")
                events.append(LoadEvent("skipped", str(self.root_problem)))
                return []
            names = sorted(os.listdir(root))
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.root_problem = Problem(self.shown(root), f"cannot read the hooks directory: {exc.strerror}")
            events.append(LoadEvent("skipped", str(self.root_problem)))
            return []
        refusal, warning = check_permissions(root, info, self._strict_modes(), root_only=self.root_only)
        if refusal:
            self.root_problem = Problem(self.shown(root), f"{refusal}; no hook is loaded from it")
            events.append(LoadEvent("skipped", str(self.root_problem)))
            return []
        if warning:
            self.root_warning = f"hooks {warning}"
            events.append(LoadEvent("warning", self.root_warning))
        return [name for name in names if not is_ignored_name(name)]

    def _load(self, hook_id: str) -> HookState | None:
        """The state of one directory as it is on disk; None when it holds no hook."""
        directory = self.home.hook_dir(hook_id)
        previous = self.states.get(hook_id)
        if not _is_text(hook_id):
            # os.listdir hands back undecodable bytes as lone surrogates: such an id could
            # never be written to the audit log, state.json or a terminal.
            shown = hook_id.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            message = "the directory name is not valid UTF-8, and a hook id must be: rename it"
            problem = Problem(f"hooks/{shown}", message, None, hook_id)
            return HookState(_signature(str(directory)), None, (problem,))
        if UNPRINTABLE.search(hook_id):
            # Such an id would reach terminals (hookbus list, log) and one-line records.
            message = (
                "the directory name holds a control or direction character, and a hook id "
                "must be printable text: rename it"
            )
            problem = Problem(f"hooks/{printable(hook_id)}", message, None, hook_id)
            return HookState(_signature(str(directory)), None, (problem,))
        strict_modes = self._strict_modes()
        root_only = self.root_only

        def check_files(dir_fd: int, listing: list[str]) -> tuple[Findings, Findings]:
            # The spec file is checked on the fstat of what was read, below.
            return entry_refusals(dir_fd, directory, strict_modes, skip=_NOT_CHECKED_AGAIN, names=listing, root_only=root_only)

        try:
            spec = read_spec_file(directory, SPEC_NAMES, inspect=check_files)
        except LoadError as exc:
            problem = Problem(self.shown(exc.path), exc.message, None, hook_id)
            return self._failed(_signature(str(directory)), previous, [problem])
        if spec is None:
            return None
        signature = _signature_of(spec)
        warnings: list[str] = []
        refusals: list[Problem] = []
        for path, info in ((directory, spec.dir_stat), (spec.path, spec.file_stat)):
            refusal, warning = check_permissions(path, info, strict_modes, root_only=root_only)
            if refusal:
                refusals.append(Problem(self.shown(path), refusal, None, hook_id))
            if warning:
                warnings.append(f"{self.shown(path)} {warning}")
        file_refusals, file_warnings = spec.inspected
        refusals += [Problem(self.shown(path), refusal, None, hook_id) for path, refusal in file_refusals]
        warnings += [f"{self.shown(path)} {warning}" for path, warning in file_warnings]
        if refusals:
            # Not kept as last good: its scripts may be in a directory others can now change.
            return HookState(signature, None, tuple(refusals))
        try:
            hook = self._parse(spec)
        except SpecError as exc:
            errors = exc.errors if isinstance(exc, SpecErrors) else [exc]
            shown = self.shown(spec.path)
            return self._failed(
                signature, previous, [Problem(shown, e.message, e.location, hook_id) for e in errors]
            )
        return HookState(signature, hook, (), tuple(warnings), self._failing(hook))

    def _failing(self, hook: Hook) -> tuple[Problem, ...]:
        """Why ``hook`` will fail when it fires: each script it runs from its directory that
        is missing, cannot be run or read, or names no interpreter that runs. (A script that
        runs from outside the directory is ``hookbus validate``'s to mention.)"""
        shown = self.shown(hook.source)
        try:
            findings = check_scripts(hook, self.home.root, self._strict_modes(), root_only=self.root_only)
        except (OSError, ValueError) as exc:  # a path the OS refuses to look at: say so, not crash the load
            return (Problem(shown, f"the scripts it runs cannot be checked: {exc}", None, hook.id),)
        return tuple(Problem(shown, finding.message, None, hook.id) for finding in findings if finding.fails)

    def _parse(self, spec: SpecFile) -> Hook:
        document = decode_document(spec.data, spec.kind)
        context = ParseContext(home=self.home, hook_dir=spec.path.parent, settings=self.in_effect or self.settings)
        hook = parse_hook(document, source=spec.path, runners=self.runners, context=context)
        return hook if self.tier == "user" else attrs.evolve(hook, tier=self.tier)

    def _strict_modes(self) -> bool:
        # The managed directory is always checked strictly: nobody's setting relaxes it.
        return True if self.root_only else (self.in_effect or self.settings).strict_modes

    def clear(self) -> list[LoadEvent]:
        """Forget every hook (the managed tier keeps the user's out: ``managed_only``)."""
        events: list[LoadEvent] = []
        for hook_id in sorted(self.states):
            events += self._set(hook_id, None)
        self.root_problem = None
        self.root_warning = None
        return events

    def _failed(
        self, signature: Signature, previous: HookState | None, problems: list[Problem]
    ) -> HookState:
        """Keep the last good version in effect, if there is one (its scripts checked as
        they are now)."""
        kept = previous.hook if previous is not None else None
        if kept is None:
            return HookState(signature, None, tuple(problems))
        problems = [attrs.evolve(problem, kept_last_good=True) for problem in problems]
        return HookState(signature, kept, tuple(problems), failing=self._failing(kept))

    def _set(self, hook_id: str, state: HookState | None) -> list[LoadEvent]:
        previous = self.states.get(hook_id)
        shown = self.shown(self.home.hook_dir(hook_id)) if self.root_only else f"hooks/{hook_id}"
        if state is None:
            if previous is None:
                return []
            del self.states[hook_id]
            return [LoadEvent("removed", shown)]
        self.states[hook_id] = state
        events = [LoadEvent("warning", warning) for warning in state.warnings]
        # Loaded, but a fire will fail: a warning, never "loaded", in serve's log and watch.
        events += [LoadEvent("warning", str(problem)) for problem in state.failing]
        if state.problems:
            kind: ChangeKind = "kept" if state.hook is not None else "skipped"
            return events + [LoadEvent(kind, str(problem)) for problem in state.problems]
        assert state.hook is not None
        if not self.verbose or state.failing:
            return events
        spec = state.hook.spec
        mode = f"{spec.mode}{' blocking' if spec.blocking else ''}"
        detail = f"{spec.trigger.event} {f'shadow ({mode})' if spec.shadow else mode}, {spec.action_key}"
        if not spec.enabled:
            detail += ", disabled"
        changed = previous is None or previous.hook is None or previous.problems or previous.failing
        return events + [LoadEvent("loaded" if changed else "reloaded", shown, detail)]


def failing_problems(snapshot: Snapshot) -> dict[str, tuple[Problem, ...]]:
    """The problems of each hook of ``snapshot`` that is in effect and will fail when it
    fires (a script it runs is broken), by hook id: what ``list`` shows as ``broken (will
    fail)`` and ``explain`` as "it will fail". Told apart from the other problems that
    name a loaded hook: a broken file whose last good version runs (``kept_last_good``),
    and a user hook refused for a managed one's id (another tier)."""
    failing: dict[str, tuple[Problem, ...]] = {}
    for problem in snapshot.problems:
        hook = snapshot.hooks.get(problem.hook_id) if problem.hook_id is not None else None
        if hook is not None and not problem.kept_last_good and problem.tier == hook.tier:
            failing[hook.id] = (*failing.get(hook.id, ()), problem)
    return failing
