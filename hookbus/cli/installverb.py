"""``hookbus install PATH [--id ID] [--force] [--skip-tests]``: copy a hook drafted outside the
home into ``HOME/hooks/ID``, once it holds to what the home would hold it to.

This is how a hook an agent drafted gets in: hookbus's guard denies the agent writes into the
home (a hook there runs at the next event, outside the agent's sandbox), so it drafts into a
directory of its own (``hookbus new ID --dir DIR``), the user reads it, and this copies it.

1. Nothing is written until every one of ``CHECKS`` passes: the id (PATH's name, or --id)
   is one a hook can have; PATH is not in the home's hooks directory; every staged file may
   become part of a hook (``staged.survey``: no link, FIFO or device, nothing another user
   owns or may write, at most 1,000 entries and 16 MiB); ``hooks/ID`` is free, or --force.
2. The hook is copied into a scratch home inside ``HOME/hooks/`` under a name the loader
   passes over (``.hookbus-install-*.tmp``), what the copy holds is taken down
   (``staged.manifest_of``: every path, kind, mode and digest), and it is loaded there as
   the home would load it, which runs none of its code.
3. Its fixtures (unless --skip-tests) run the hook's code, which can write wherever you
   can: they run from a second copy, in a scratch home of the system's temporary
   directory, which is compared with what was taken down after each fixture. A fixture
   that changed the hook's own files checked something else than what would be installed:
   refused.
4. The checked copy is compared with what was taken down, renamed into place (so a
   watching bus sees the whole hook at once or none of it; with --force the old one is
   renamed aside first), and compared again where it now is: a process the fixtures left
   running may have found it. A difference at either point puts back what was there and
   refuses, naming what changed. A refusal removes the scratch homes, and the hook in
   place is untouched.

Exit 0 when the hook is in place; 1 when it was refused, saying why on stderr.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import attrs

from hookbus.cli.core import UsageError, say, warn
from hookbus.cli.staged import Refusal, copy_hook, review, scratch_home, shown_as, survey, sync_directory

if TYPE_CHECKING:
    import argparse

    from hookbus.cli.staged import Copied, Manifest, Review
    from hookbus.home import Home

#: The scratch home's name in ``HOME/hooks/``: hidden and ``.tmp``, so the loader, the
#: watcher and ``hookbus validate`` pass over it (``hookbus.files.is_ignored_name``).
SCRATCH_PREFIX = ".hookbus-install-"
#: Added to the scratch home's name, the name the hook replaced by --force is renamed to
#: until it is removed: hidden, so passed over too.
PREVIOUS_SUFFIX = ".previous"
#: The scratch home the fixtures run in, in the system's temporary directory.
TESTED_PREFIX = "hookbus-install-tests-"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="the hook's directory, outside the home (hookbus new ID --dir DIR makes DIR/ID)")
    parser.add_argument("--id", metavar="ID", help="install it as hooks/ID (default: PATH's name)")
    parser.add_argument("--force", action="store_true", help="replace hooks/ID if it exists: its files, state.json included, are removed")
    parser.add_argument("--skip-tests", action="store_true", help="install it without running its fixtures (tests/*.json)")
    parser.set_defaults(func=cmd_install)


@attrs.frozen
class Request:
    """One install: what each check looks at."""

    #: PATH as given, for messages.
    source: Path
    hook_id: str
    #: The id came from --id, not from PATH's name.
    named: bool
    home: Home
    force: bool

    @property
    def target(self) -> Path:
        return self.home.hook_dir(self.hook_id)


def _valid_id(request: Request) -> str | None:
    from hookbus.cli.scaffold import id_problem
    from hookbus.errors import shorten

    problem = id_problem(request.hook_id)
    if problem is None:
        return None
    fix = "" if request.named else f" (PATH's name): pass --id ID to install it under another"
    return f"cannot install a hook with the id {shorten(repr(request.hook_id))}{fix}: {problem}"


def _hooks_dir_in_place(request: Request) -> str | None:
    hooks_dir = request.home.hooks_dir
    if os.path.islink(hooks_dir):
        return f"{hooks_dir} is a symbolic link, and hookbus loads no hook through one: move the directory in place"
    return None


def _outside_the_hooks_dir(request: Request) -> str | None:
    """A hook in the hooks directory is live already, and copying one over another, or the
    hooks directory into itself, is no install."""
    source = Path(os.path.realpath(request.source))
    hooks_dir = Path(os.path.realpath(request.home.hooks_dir))
    if source == hooks_dir or hooks_dir in source.parents:
        return (
            f"{request.source} is in the home's hooks directory ({request.home.hooks_dir}), where hooks run as they are: "
            "install copies a hook drafted elsewhere (make one with `hookbus new ID --dir DIR`)"
        )
    if source in hooks_dir.parents:
        return f"{request.source} holds the home's hooks directory: name the directory of the one hook to install"
    return None


def _staged_files(request: Request) -> str | None:
    try:
        survey(request.source)
    except Refusal as exc:
        return str(exc)
    return None


def _target_free(request: Request) -> str | None:
    target = request.target
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot use {target}: {exc.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        return f"{target} exists and is {kind}: move it away to install hook {request.hook_id!r} there"
    if not request.force:
        return (
            f"hook {request.hook_id!r} exists already ({target}): pass --force to replace it (its files and "
            "state.json are removed), or --id ID to install this one under another id"
        )
    return None


def _not_taken_by_the_organization(request: Request) -> str | None:
    """An id of the managed tier (or the home guard's) would be refused at load: say so now."""
    from hookbus.policy.guardhook import GUARD_ID
    from hookbus.policy.managed import managed_root

    if request.hook_id == GUARD_ID:
        return f"the id {GUARD_ID!r} is hookbus's home guard's: pass --id ID to install this hook under another"
    managed = Path(managed_root()[0]) / "hooks" / request.hook_id
    if os.path.lexists(managed):
        return (
            f"a managed hook has the id {request.hook_id!r} ({managed}), and a hook of yours cannot replace it: "
            "pass --id ID to install this one under another"
        )
    return None


#: What refuses an install before anything is written, in this order: each returns why not
#: (naming the file and saying how to fix it), or None. A new rule is one more function here.
CHECKS: tuple[Callable[[Request], str | None], ...] = (
    _valid_id, _not_taken_by_the_organization, _hooks_dir_in_place, _outside_the_hooks_dir, _staged_files, _target_free,
)


def cmd_install(args: argparse.Namespace) -> int:
    from hookbus.cli.views import plural
    from hookbus.home import Home

    source = Path(args.path)
    named = args.id is not None
    hook_id: str = args.id if named else Path(os.path.abspath(source)).name
    request = Request(source, hook_id, named, Home.resolve(args.home), args.force)
    for check in CHECKS:
        refusal = check(request)
        if refusal is not None:
            raise UsageError(refusal)
    replacing = os.path.isdir(request.target)
    made = _make_hooks_dir(request.home)
    try:
        copied = _install(request, run_tests=not args.skip_tests, replacing=replacing)
    except BaseException:
        _remove_empty(made)
        raise
    say(f"installed hooks/{hook_id} from {source} ({plural(copied.files, 'file')})")
    return 0


def _make_hooks_dir(home: Home) -> list[Path]:
    """The home and its hooks/, made 0700 when missing (as ``hookbus new`` makes them);
    those it made."""
    from hookbus.cli.scaffold import make_directories

    missing = [directory for directory in (home.root, home.hooks_dir) if not os.path.lexists(directory)]
    make_directories(home.root, home.hooks_dir)
    return missing


def _remove_empty(directories: list[Path]) -> None:
    """Undo ``_make_hooks_dir``: a refused install leaves no empty home behind."""
    for directory in reversed(directories):
        try:
            os.rmdir(directory)
        except OSError:
            return


def _install(request: Request, *, run_tests: bool, replacing: bool) -> Copied:
    from hookbus.cli.staged import manifest_of

    home, hook_id, source = request.home, request.hook_id, request.source
    with scratch_home(home, home.hooks_dir, SCRATCH_PREFIX) as root:
        copy = root / "hooks" / hook_id
        copied = _copy(request, copy, replacing)
        manifest = manifest_of(copy)
        verdict = review(root, hook_id, run_tests=False)
        roots = [root]
        if run_tests and verdict.valid:
            verdict, tested_in = _tested(request, copy, manifest, verdict)
            roots.append(tested_in)
        _judge(verdict, request, roots)
        _unchanged(request, copy, manifest, "before it was moved into place")
        _move_into_place(request, copy, home.hooks_dir / f"{root.name}{PREVIOUS_SUFFIX}", replacing, manifest)
    return copied


def _copy(request: Request, copy: Path, replacing: bool) -> Copied:
    try:
        return copy_hook(request.source, copy)
    except Refusal as exc:
        raise UsageError(f"{exc}; nothing was installed") from None
    except OSError as exc:
        raise UsageError(
            f"cannot copy {request.source} into {request.home.hooks_dir}: {exc.strerror or exc}; nothing was installed"
            + (f", and hooks/{request.hook_id} is as it was" if replacing else "")
        ) from None


def _tested(request: Request, copy: Path, manifest: Manifest, verdict: Review) -> tuple[Review, Path]:
    """``verdict`` with the results of the hook's fixtures, run from a copy of ``copy`` in a
    scratch home of the system's temporary directory (and that scratch home, gone, which
    what they said may name): their code never learns where the copy to be installed is,
    and what they change of the hook's own files is seen."""
    from hookbus.cli.staged import differences, manifest_of

    with scratch_home(request.home, None, TESTED_PREFIX) as root:
        runs_from = root / "hooks" / request.hook_id
        try:
            copy_hook(copy, runs_from)
        except (Refusal, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise UsageError(f"cannot copy {request.source} to run its fixtures in {root}: {why}; nothing was installed") from None
        changes = differences(manifest, manifest_of(runs_from))
        if changes:  # a process writing into the scratch home as it was made
            raise UsageError(_changed(request, "as it was copied to run its fixtures", changes))
        tried = review(root, request.hook_id, run_tests=True, manifest=manifest)
    return attrs.evolve(verdict, results=tried.results, merged=tried.merged, changed_by=tried.changed_by, changes=tried.changes), root


def _unchanged(request: Request, copy: Path, manifest: Manifest, when: str) -> None:
    """UsageError naming what changed when ``copy`` no longer holds what ``manifest`` says."""
    from hookbus.cli.staged import differences, manifest_of

    changes = differences(manifest, manifest_of(copy, in_place=copy == request.target))
    if changes:
        raise UsageError(_changed(request, when, changes))


def _changed(request: Request, when: str, changes: list[str]) -> str:
    from hookbus.cli.staged import said_briefly

    return (
        f"the checked copy of {request.source} changed {when} ({said_briefly(changes)}): another process is writing "
        "into it (one its fixtures left running?), so what was checked is not what would be installed, and nothing "
        "was installed"
    )


def _judge(verdict: Review, request: Request, roots: list[Path]) -> None:
    """Print what the load and the fixtures said (of the copies in the scratch homes
    ``roots``); UsageError when the hook must not go in."""

    def shown(line: str) -> str:
        for root in roots:
            line = shown_as(line, root, request.hook_id, request.source, request.home)
        return line

    for warning in verdict.warnings:
        say(f"warning: {shown(warning)}")
    if not verdict.valid:
        for problem in verdict.problems:
            warn(f"hookbus install: {shown(problem)}")
        raise UsageError(
            f"{request.source} is not a valid hook (above: what the home would say of it), so nothing was "
            "installed: fix it where it is, then install it again"
        )
    failed = [result for result in verdict.results if not result.ok]
    from hookbus.cli.fixtureverb import result_lines

    for result in verdict.results:
        for line in result_lines(result, shown):
            (say if result.ok else warn)(line)
    for path in verdict.merged:
        say(f'SKIP  {shown(path)}: "merged": true tests it with the whole home; run `hookbus test {request.hook_id}` once it is in')
    if verdict.changed_by is not None:
        from hookbus.cli.staged import said_briefly

        raise UsageError(
            f"running {shown(verdict.changed_by)} changed the hook's own files ({said_briefly(verdict.changes)}), so what "
            "its fixtures checked is not what would be installed, and nothing was installed: a hook keeps what it writes "
            "outside its directory (or writes nothing when HOOKBUS_TEST=1, as its fixtures run)"
        )
    if failed:
        raise UsageError(
            f"{len(failed)} of {len(verdict.results)} fixtures of {request.source} failed, so nothing was installed: "
            "fix the hook or its tests/, or pass --skip-tests to install it anyway"
        )


def _move_into_place(request: Request, copy: Path, aside: Path, replacing: bool, manifest: Manifest) -> None:
    """Rename the checked copy to ``hooks/ID``. The hook there (with --force) is renamed
    aside first, to a name the loader passes over, and removed once the new one is in and
    found to hold still what was checked; if the new one cannot go in, or changed on its
    way, it is taken out again and the old one goes back."""
    from hookbus.cli.staged import remove_tree

    target = request.target
    try:
        if replacing:
            os.rename(target, aside)
        try:
            os.rename(copy, target)
        except OSError:
            if replacing:
                os.rename(aside, target)
            raise
    except OSError as exc:
        kept = f"; the hook that was there is in {aside}" if replacing and os.path.lexists(aside) else ""
        raise UsageError(f"cannot move the hook into {target}: {exc.strerror or exc}; nothing was installed{kept}") from None
    try:
        _unchanged(request, target, manifest, "as it was moved into place")
    except UsageError:
        _take_out(target, copy, aside, replacing)
        raise
    try:
        sync_directory(target.parent)
    except OSError:
        pass  # it is in place; only whether the rename outlives a crash is at stake
    if replacing and not remove_tree(aside):
        warn(f"hookbus install: could not remove the hook replaced, renamed aside to {aside}: remove it by hand")


def _take_out(target: Path, copy: Path, aside: Path, replacing: bool) -> None:
    """Undo the rename of a copy that changed on its way in: back to where it was checked
    (inside the scratch home, removed with it), and the old hook back in place."""
    try:
        os.rename(target, copy)
        if replacing:
            os.rename(aside, target)
    except OSError as exc:
        warn(f"hookbus install: could not take the changed copy out of {target} ({exc.strerror or exc}): remove it by hand")
