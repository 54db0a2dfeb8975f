"""The ``hookbus`` command line. Every verb that reads a home takes ``--home DIR`` (else
$VIX_HOME, else ~/.vix); ``schema`` and ``demo`` read none.

Exit codes: 0 success (emit: allow, context, modify), 2 emit denied, 1 usage or config error
(a home that does not exist, for the verbs that inspect one), or (trigger) the hook failed,
or (validate, new) a hook is not valid; 3 (status) no server serves the home; 130 or 143
when SIGINT or SIGTERM interrupted emit or trigger. ``--json``
(list, validate, plugins, status, explain; log: JSON Lines) changes what is printed, never
the exit code.
Everything printed for people goes through ``hookbus.terminal.printable``: reasons and
outputs may come from a model, and a terminal obeys the escape sequences in them.
"""

from __future__ import annotations

import argparse
import json
import sys

from hookbus.cli.core import (
    EMIT_DRAIN_GRACE_SECONDS,
    Interrupts,
    ServerLost,
    UnreadableEnvelope,
    UsageError,
    decide_in_process,
    decide_via_server,
    ask_server,
    json_line,
    kept_by_a_running_bus,
    open_bus,
    read_envelope,
    require_home,
    say,
)
from hookbus.terminal import printable

#: typing is not imported at run time on ``hookbus emit``'s way to a server (it costs ms).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn, Sequence

    from pathlib import Path

    from hookbus.bus import HookBus
    from hookbus.cli.logfilter import LogFilter
    from hookbus.records import RunRecord
    from hookbus.registry import Snapshot
    from hookbus.runners import Hook

#: How many of the latest records each poll of `log --follow` looks at, on other backends.
FOLLOW_WINDOW = 500


class _Parser(argparse.ArgumentParser):
    """argparse exits 2 on a usage error, and 2 means "denied" to whoever runs
    ``hookbus emit``: usage errors exit 1, as the help says."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument, and its own asks shutil for the
        # terminal's width: importing shutil (with bz2 and lzma) costs every `hookbus emit`
        # milliseconds. The width is found as shutil would find it, without shutil.
        return argparse.HelpFormatter(prog=self.prog, width=_terminal_columns() - 2)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")


def _terminal_columns() -> int:
    """$COLUMNS, else the width of the terminal on stdout, else 80 (shutil's rules)."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    stream = sys.__stdout__
    try:
        return (os.get_terminal_size(stream.fileno()).columns if stream else 0) or 80
    except (AttributeError, ValueError, OSError):
        return 80


def cmd_emit(args: argparse.Namespace) -> int:
    from hookbus.eventnames import EVENT_NAMES, unknown_event_message

    if args.event not in EVENT_NAMES:
        raise UsageError(unknown_event_message(args.event))
    undecided: str | None = args.undecided
    try:
        envelope = read_envelope(args.input)
    except UnreadableEnvelope as exc:
        # Valid JSON a host may really send: decided by the hooks' on_error, not refused.
        envelope, undecided = exc.fields, exc.why
    try:
        decision = decide_via_server(args, args.event, envelope, "hookbus emit", undecided)
    except ServerLost as exc:
        decision, undecided = None, exc.why
    if decision is not None:
        _print_decision(decision)
        return 2 if decision.get("behavior") == "deny" else 0
    interrupts = Interrupts()
    decision = decide_in_process(args, args.event, envelope, interrupts, _print_decision, undecided)
    return interrupts.exit_code(2 if decision.get("behavior") == "deny" else 0)


def _print_decision(decision: dict[str, Any]) -> None:
    print(json_line(decision))
    sys.stdout.flush()


def _last_run(bus: HookBus, hook_id: str) -> RunRecord | None:
    runs = bus.read_runs(hook_id, limit=1)
    return runs[-1] if runs else None


def cmd_list(args: argparse.Namespace) -> int:
    """The hooks of the home: as a server that serves it enforces them (asked over its
    socket), else as this process loads them. Writes nothing."""
    from hookbus.cli.tables import Style
    from hookbus.cli.views import hook_lines, hook_rows, plural

    asked = ask_server(args, "status")
    server: dict[str, Any] | None = None
    if asked is not None:
        status, path = asked
        rows, problems = status.get("hooks") or [], [str(problem) for problem in status.get("problems") or []]
        warnings = [str(warning) for warning in status.get("warnings") or []]
        home, disabled, generation = str(status.get("home")), status.get("disabled"), status.get("generation")
        server = {"socket": path, "pid": status.get("pid")}
        source = f"as enforced by the hookbus serve on {path} (pid {status.get('pid')}), generation {generation}"
    else:
        with open_bus(args, quiet=True, read_only=True) as bus:
            snapshot = bus.snapshot
            broken = {problem.hook_id for problem in snapshot.problems if problem.hook_id and problem.hook_id not in snapshot.hooks}
            last_runs = {hook_id: _last_run(bus, hook_id) for hook_id in snapshot.every_hook}
            kept = {hook_id: kept_by_a_running_bus(bus.home.hook_dir(hook_id)) for hook_id in broken}
            rows = hook_rows(snapshot, last_runs, kept)
            problems = [str(problem) for problem in snapshot.problems]
            warnings = list(snapshot.warnings)
            home, disabled, generation = str(bus.home.root), snapshot.settings.disabled_reason, snapshot.generation
        source = "as loaded by this process (no hookbus serve answers for this home)"
    if args.json:
        print(json_line({
            "home": home, "source": "server" if server else "process", "server": server, "generation": generation,
            "hooks": rows, "problems": problems, "warnings": warnings, "disabled": disabled,
        }))
        return 0
    if rows:
        for line in hook_lines(rows, Style.for_stdout()):
            print(line)
    else:
        say(f"no hooks in {home}/hooks")
    print()
    say(source)
    if disabled:
        say(f"your hooks are off (managed hooks and the home guard still run): {disabled}")
    if problems:
        print()
        say(f"{plural(len(problems), 'problem')} (skipped files, a broken file whose last good version runs, or a hook that will fail):")
        for problem in problems:
            say(f"  {problem}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from hookbus.cli.layout import layout_findings
    from hookbus.cli.scripts import script_findings
    from hookbus.cli.views import plural

    lines: list[str] = []  # what the text prints, in order
    with open_bus(args, quiet=True, read_only=True) as bus:
        snapshot = bus.snapshot
        wanted = set(args.ids)
        problems = [
            problem
            for problem in snapshot.problems
            if not wanted or problem.hook_id in wanted
        ]
        failed = bool(problems)
        missing = [hook_id for hook_id in sorted(wanted) if hook_id not in snapshot.hooks and not any(p.hook_id == hook_id for p in problems)]
        unknown = [f"hooks/{hook_id}: no hook.json or hook.yaml" for hook_id in missing]
        failed = failed or bool(missing)
        lines += unknown
        lines += [str(problem) for problem in problems]
        warnings = list(snapshot.warnings)
        lines += [f"warning: {warning}" for warning in warnings]
        findings = [line for line in layout_findings(bus.home.hooks_dir) if not wanted or line.split(":", 1)[0].split("/", 1)[-1] in wanted]
        layout = list(findings)
        lines += findings
        broken = {problem.hook_id for problem in problems}
        kept = {problem.hook_id for problem in problems if problem.kept_last_good}
        # A script that a fire would find broken is a load problem already (the loader
        # checks it); what is left is a script that runs from outside the hook's directory,
        # where nothing is checked, and the hook's fixture files.
        from hookbus.policy.fixtures import fixture_problems

        said = {str(problem) for problem in problems}
        scripts = {
            hook_id: [line for line in script_findings(hook, bus.home.root, snapshot.settings.strict_modes) if line not in said]
            + (fixture_problems(bus.home.root, hook_id) if hook.tier == "user" else [])
            for hook_id, hook in snapshot.hooks.items()
            if (not wanted or hook_id in wanted) and hook_id not in kept and hook.tier != "builtin"
        }
        for finding in (line for found in scripts.values() for line in found):
            lines.append(finding)
            findings.append(finding)
        valid = [hook_id for hook_id, found in scripts.items() if not found and hook_id not in broken]
        lines += [f"ok  {_shown_hook(snapshot.hooks[hook_id])}" for hook_id in valid]
        if not wanted:
            if not snapshot.hooks and not problems and not findings:
                lines.append(f"no hooks in {bus.home.hooks_dir}: nothing to validate")
            else:
                summary = f"{plural(len(valid), 'valid hook')}, {plural(len(problems) + len(findings), 'problem')}"
                lines.append(f"{summary} in {bus.home.hooks_dir}")
        home = str(bus.home.root)
    ok = not (failed or findings)
    if args.json:
        every = unknown + [str(problem) for problem in problems] + findings
        ids = sorted({*scripts, *(p.hook_id for p in problems if p.hook_id is not None), *missing})
        hooks = []
        for hook_id in ids:
            own = [f"hooks/{hook_id}: no hook.json or hook.yaml"] if hook_id in missing else []
            own += [str(problem) for problem in problems if problem.hook_id == hook_id]
            own += [finding for finding in layout if _about_hook(finding, hook_id)]  # a misnamed spec
            own += scripts.get(hook_id, [])
            own_warnings = [warning for warning in warnings if _about_hook(warning, hook_id)]
            hooks.append({"id": hook_id, "ok": not own, "problems": own, "warnings": own_warnings})
        print(json_line({"ok": ok, "home": home, "hooks": hooks, "problems": every, "warnings": warnings}))
    else:
        for line in lines:
            say(line)
    return 0 if ok else 1


def _shown_hook(hook: Hook) -> str:
    """A hook as validate names it: ``hooks/ID`` in the home; a managed one by its path."""
    return f"hooks/{hook.id}" if hook.tier == "user" else f"{hook.directory} (managed)"


def _about_hook(line: str, hook_id: str) -> bool:
    """Whether a problem or warning line is about hook ``hook_id`` (it names its files)."""
    return line.startswith((f"hooks/{hook_id}/", f"hooks/{hook_id} ", f"hooks/{hook_id}:"))


def cmd_explain(args: argparse.Namespace) -> int:
    """Why each hook fires or not, as a server that serves the home decides (asked over
    its socket), else as this process does."""
    from hookbus.eventnames import EVENT_NAMES, unknown_event_message
    from hookbus.cli.tables import Style
    from hookbus.cli.views import explain_lines

    if args.event not in EVENT_NAMES:
        raise UsageError(unknown_event_message(args.event))
    undecided: str | None = None
    try:
        envelope = read_envelope(args.input)
    except UnreadableEnvelope as exc:
        envelope, undecided = exc.fields, exc.why
    interrupts = Interrupts()
    asked = ask_server(args, "explain", event=args.event, envelope=envelope, dry_run=args.dry_run, undecided=undecided)
    if asked is not None:
        explanation, path = asked
        home = str(explanation.pop("home", None) or args.home or "")
        source = f"as decided by the hookbus serve on {path}"
    else:
        bus = open_bus(args, quiet=True, read_only=args.dry_run)
        drain = max((hook.timeout for hook in bus.snapshot.hooks.values() if not hook.is_sync), default=0.0)
        with interrupts.watching(bus):
            try:
                explanation = bus.explain(args.event, envelope, dry_run=args.dry_run, undecided=undecided).as_json()
            finally:
                bus.close(timeout=0.0 if interrupts.signum else drain + EMIT_DRAIN_GRACE_SECONDS)
        home = str(bus.home.root)
        source = "as decided by this process (no hookbus serve answers for this home)"
    if args.json:
        print(json_line({**explanation, "home": home, "source": source}))
    else:
        for line in explain_lines(explanation, home, Style.for_stdout()):
            print(line)
        say(source)
    return interrupts.exit_code(0)


def cmd_trigger(args: argparse.Namespace) -> int:
    envelope = read_envelope(args.input)
    interrupts = Interrupts()
    bus = open_bus(args)
    if args.id not in bus.snapshot.hooks:
        from hookbus.errors import did_you_mean

        hint = did_you_mean(args.id, bus.snapshot.hooks)
        if hint:  # else the bus says it all: what is loaded, and where to look
            bus.close()
            known = ", ".join(bus.snapshot.hooks)
            raise UsageError(
                f"no valid hook {args.id!r}{hint} in {bus.home.hooks_dir} (loaded: {known}); `hookbus validate` says why a hook is skipped"
            )
    with interrupts.watching(bus):
        try:
            record = bus.trigger(args.id, envelope)
        finally:
            bus.close(timeout=0.0 if interrupts.signum else None)
    print(json_line(record.log_entry()))
    return interrupts.exit_code(0 if record.status == "done" else 1)


def cmd_log(args: argparse.Namespace) -> int:
    from hookbus.cli.logfilter import log_filter
    from hookbus.cli.tables import Style
    from hookbus.cli.views import log_header, log_widths, record_line

    wanted = log_filter(args.event, args.status, args.since, shadow=args.shadow)
    if args.limit is not None and args.limit < 0:
        raise UsageError(f"--limit {args.limit}: give a number of fires, 0 or more")
    style = Style.for_stdout()
    header = [not args.json]
    widths: list[int] = []

    def show(record: RunRecord) -> None:
        if not wanted.keeps(record):
            return
        if header[0]:
            print(log_header(style, widths))
            header[0] = False
        line = json_line(record.log_entry()) if args.json else record_line(record, style, widths)
        print(line, flush=True)

    with open_bus(args, quiet=True, read_only=True) as bus:
        # Sizes are taken before the history is read, so a fire landing in between is
        # printed by the follow loop rather than lost; `shown` keeps it from printing twice.
        offsets = _log_sizes(bus) if args.follow else {}
        history = _history(bus, args.hook, args.limit, wanted)
        # Columns as wide as the history needs; as wide as they go when following, so
        # that what comes later lines up.
        widths[:] = log_widths(style, None if args.follow else history)
        for record in history:
            show(record)
        if not history and not args.json and not args.follow:
            which = f" of hook {args.hook!r}" if args.hook else ""
            hint = ""
            if args.hook and args.hook not in bus.snapshot.every_hook:
                from hookbus.errors import did_you_mean

                hint = did_you_mean(args.hook, bus.snapshot.every_hook)
            say(f"no fires{which}{wanted.describe()} recorded in {bus.home.root}{hint}")
        if args.follow:
            shown = {_identity(record) for record in history}
            if bus.active_recorders[:1] == ("recorder",):
                _follow(bus, args.hook, offsets, shown, show)
            else:
                _follow_any(bus, args.hook, shown, show)
    return 0


def _history(bus: HookBus, hook_id: str | None, limit: int | None, wanted: LogFilter) -> list[RunRecord]:
    """The recorded fires the filter keeps, the last ``limit`` of them, oldest first."""
    if not wanted.active:
        return bus.read_runs(hook_id, limit)
    if bus.active_recorders[:1] == ("recorder",):
        # The built-in log: the days before --since need not be read at all.
        from hookbus_recorder.logfile import read_records

        records = read_records(bus.home.logs_dir, hook_id, None, wanted.first_day())
    else:
        records = bus.read_runs(hook_id, None)
    kept = [record for record in records if wanted.keeps(record)]
    return kept if limit is None else kept[len(kept) - limit:] if limit else []


def _follow_any(
    bus: HookBus, hook_id: str | None, shown: set[str], show: Callable[[RunRecord], None]
) -> None:
    """Follow through ``hookbus_read_runs``, for recorders other than the JSONL one: poll the
    latest records and print those not printed yet."""
    import time

    try:
        while True:
            time.sleep(0.2)
            for record in bus.read_runs(hook_id, FOLLOW_WINDOW):
                identity = _identity(record)
                if identity not in shown:
                    shown.add(identity)
                    show(record)
    except KeyboardInterrupt:
        return


def _identity(record: RunRecord) -> str:
    return json.dumps(record.log_entry(), sort_keys=True)


def _log_sizes(bus: HookBus) -> dict[str, int]:
    """The size of each day's log now: regular files only, never followed through a link."""
    import os
    import stat

    sizes = {}
    for path in bus.home.logs_dir.glob("*.jsonl"):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            sizes[str(path)] = info.st_size
    return sizes


def _follow(
    bus: HookBus,
    hook_id: str | None,
    offsets: dict[str, int],
    shown: set[str],
    show: Callable[[RunRecord], None],
) -> None:
    """Print records as they are appended to today's log, until interrupted."""
    import time
    from datetime import datetime, timezone

    from hookbus_recorder.logfile import MAX_LINE_BYTES, open_log_for_reading

    from hookbus.records import RunRecord

    try:
        while True:
            path = bus.home.logs_dir / f"{datetime.now(timezone.utc):%Y-%m-%d}.jsonl"
            offset = offsets.get(str(path), 0)
            # Never through a link, never blocking on a FIFO, never more than a line's cap.
            handle = open_log_for_reading(path)
            data = b""
            if handle is not None:
                with handle:
                    handle.seek(offset)
                    data = handle.read(MAX_LINE_BYTES)
            complete = data[: data.rfind(b"\n") + 1]
            if not complete and len(data) >= MAX_LINE_BYTES:
                complete = data  # a line longer than any record: skip it rather than stall
            offsets[str(path)] = offset + len(complete)
            for raw in complete.splitlines():
                try:
                    record = RunRecord.from_log_entry(json.loads(raw))
                except ValueError:
                    continue
                identity = _identity(record)
                if identity in shown:
                    shown.discard(identity)
                    continue
                if hook_id is None or record.hook_id == hook_id:
                    show(record)
            time.sleep(0.2)
    except KeyboardInterrupt:
        return


def cmd_plugins(args: argparse.Namespace) -> int:
    """Every plugin: entry-point name, distribution and version, what it provides, status."""
    from hookbus.cli.tables import Style
    from hookbus.cli.views import plugin_lines, plugin_rows

    with open_bus(args, quiet=True, read_only=True) as bus:
        rows = plugin_rows(bus.plugin_infos, bus.active_recorders)
        recorders = list(bus.active_recorders)
    if args.json:
        print(json_line({"plugins": rows, "recorders": recorders}))
        return 0
    for line in plugin_lines(rows, Style.for_stdout()):
        print(line)
    print()
    say(f"recording with: {', '.join(recorders) or 'nothing'}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    """The JSON Schema of hook.json, with the action keys of the installed runners."""
    from hookbus.plugins import build_plugin_manager, build_runner_table
    from hookbus.schema import hook_schema

    manager, _ = build_plugin_manager()
    print(json.dumps(hook_schema(build_runner_table(manager)), indent=2, ensure_ascii=False))
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Run a watching bus in the foreground, printing each load, reload, skip and error."""
    import signal
    import threading

    from hookbus.bus import HookBus

    from hookbus.cli.console import log_everything_to
    from hookbus.cli.views import plural

    log_everything_to(sys.stdout)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    bus = HookBus(args.home, watch=True)
    try:
        snapshot = bus.snapshot
        print(
            printable(
                f"watching {bus.home.root} ({plural(len(snapshot.hooks), 'hook')} loaded, "
                f"{plural(len(snapshot.problems), 'problem')}); Ctrl-C to stop"
            ),
            flush=True,
        )
        while not stop.wait(0.5):
            bus.wait_for_reload(timeout=0)  # notices and restarts a dead watcher
    finally:
        bus.close()
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import logging

    from hookbus.serve.run import serve

    logging.getLogger("hookbus").setLevel(logging.INFO)  # reloads and refusals, for the journal
    return serve(args.home, args.socket, http=args.http)


def cmd_new(args: argparse.Namespace) -> int:
    from hookbus.cli.scaffold import cmd_new as new

    return new(args)


def cmd_status(args: argparse.Namespace) -> int:
    from hookbus.cli.status import cmd_status as status

    return status(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from hookbus.cli.demo import run_demo

    return run_demo(keep=args.keep)


_INPUT_HELP = "the JSON envelope (default: stdin if piped)"


_SOCKET_HELP = "the server's socket (default: $HOOKBUS_SOCKET, else HOME/run/hookbus.sock)"


def _add_emit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", help="PreToolUse, UserPromptSubmit, Stop, ...")
    parser.add_argument("--input", metavar="FILE|-", help=_INPUT_HELP)
    parser.add_argument("--socket", metavar="PATH", help=_SOCKET_HELP + "; used when a server answers there")
    parser.add_argument("--no-server", action="store_true", help="run in this process even if a server answers")
    parser.set_defaults(func=cmd_emit)


def _add_host_hook(parser: argparse.ArgumentParser) -> None:
    from hookbus.hosts.command import add_parser

    add_parser(parser)


def _add_import(parser: argparse.ArgumentParser) -> None:
    from hookbus.hosts.claude_import import add_parser

    add_parser(parser)


def _add_replay(parser: argparse.ArgumentParser) -> None:
    from hookbus.cli.replayverb import add_parser

    add_parser(parser)


def _add_test(parser: argparse.ArgumentParser) -> None:
    from hookbus.cli.fixtureverb import add_parser

    add_parser(parser)


def _add_install(parser: argparse.ArgumentParser) -> None:
    from hookbus.cli.installverb import add_parser

    add_parser(parser)


def _add_serve(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", metavar="PATH", help=_SOCKET_HELP)
    parser.add_argument(
        "--http", metavar="127.0.0.1:PORT",
        help="also answer Claude Code's http hooks on POST /claude-code at this loopback address (PORT 0: a free "
        "one); every request needs the bearer token of $HOOKBUS_HTTP_TOKEN or HOME/run/http.token. Under systemd "
        "socket activation (contrib/systemd/hookbus.socket, which holds the port across restarts) the socket passed "
        "is taken, and must be on this address; see docs/claude-code.md",
    )
    parser.set_defaults(func=cmd_serve)


def _add_explain(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", help="PreToolUse, UserPromptSubmit, Stop, ...")
    parser.add_argument("--input", metavar="FILE|-", help=_INPUT_HELP)
    parser.add_argument("--dry-run", action="store_true", help="only match: run no hook")
    parser.add_argument("--json", action="store_true", help="print the explanation as one JSON object")
    parser.set_defaults(func=cmd_explain)


def _add_validate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", metavar="ID", help="only these hooks (default: all)")
    parser.add_argument("--json", action="store_true", help="print the verdict as one JSON object (the exit code is the same)")
    parser.set_defaults(func=cmd_validate)


def _add_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the hooks as one JSON object")
    parser.set_defaults(func=cmd_list)


def _add_plugins(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the plugins as one JSON object")
    parser.set_defaults(func=cmd_plugins)


def _add_status(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--socket", metavar="PATH", help=_SOCKET_HELP)
    parser.add_argument("--json", action="store_true", help="print the server's status as one JSON object")
    parser.set_defaults(func=cmd_status)


def _add_new(parser: argparse.ArgumentParser) -> None:
    from hookbus.cli.scaffold import KINDS

    parser.add_argument("id", metavar="ID", help="the hook's id: the name of its directory in HOME/hooks")
    parser.add_argument("--event", required=True, metavar="EVENT", help="PreToolUse, UserPromptSubmit, Stop, ...")
    parser.add_argument(
        "--matcher", metavar="RE",
        help="the regex the event's field must match (RE2; '' or '*': all). Default: bash on a tool event "
        "(the example acts on bash commands), none on the others",
    )
    parser.add_argument("--kind", choices=KINDS, default="command", help="the hook's action (default: command, a script)")
    parser.add_argument("--force", action="store_true", help="overwrite the hook's hook.json, script and envelope.json if it exists")
    parser.add_argument(
        "--dir", metavar="DIR",
        help="make it in DIR/ID instead of HOME/hooks/ID: a draft outside the home, to review and then `hookbus install DIR/ID`",
    )
    parser.set_defaults(func=cmd_new)


def _add_trigger(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the hook's id (its directory name)")
    parser.add_argument("--input", metavar="FILE|-", help=_INPUT_HELP)
    parser.set_defaults(func=cmd_trigger)


def _add_log(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hook", metavar="ID", help="only this hook")
    parser.add_argument("--limit", type=int, metavar="N", help="only the last N fires")
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new fires")
    parser.add_argument("--event", metavar="EVENT", help="only fires of this event")
    parser.add_argument(
        "--status", metavar="STATUS",
        help="only fires with this status: allow, deny, modify, context, done, error; or failed (any fire with an error)",
    )
    parser.add_argument(
        "--since", metavar="WHEN",
        help="only fires since WHEN: a date (2026-12-01), a date and time (2026-12-01T09:30, UTC unless it "
        "says +02:00 or Z) or a duration back from now (24h, 90m)",
    )
    parser.add_argument(
        "--shadow", action="store_true",
        help="only the fires of shadow hooks (\"shadow\": true) whose decision differs from the one enforced",
    )
    parser.add_argument("--json", action="store_true", help="print each record as one JSON object per line (the audit log's fields)")
    parser.set_defaults(func=cmd_log)


def _add_demo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", action="store_true", help="keep the throwaway home and print its path")
    parser.set_defaults(func=cmd_demo)


def _defaults(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.ArgumentParser], None]:
    return lambda parser: parser.set_defaults(func=func)


#: verb -> (help, description, how to add its arguments).
VERBS: dict[str, tuple[str, str | None, Callable[[argparse.ArgumentParser], None]]] = {
    "emit": (
        "fire an event and print the decision (exit 2 on deny)",
        "Fire EVENT with the envelope from --input (a file, or - for stdin) and print the "
        "decision as one JSON object: behavior (allow, deny, modify, context), and when a "
        "hook said them reason, input, context, and the extras permission (approve, ask), "
        "continue_with (Stop: go on with this) and halt (end the turn). Exit 0 for allow, "
        "context and modify, 2 for deny, 1 for "
        "a usage or config error, 130 or 143 when SIGINT or SIGTERM stopped it (the hooks are "
        "killed and their fires recorded as interrupted). On stderr: one line for each sync "
        "hook that failed (timed out, crashed, answered nothing readable), and the home's "
        "load problems. Async hooks finish before it exits. "
        "When a `hookbus serve` of the same home answers on the socket, the server runs the "
        "hooks (same output, same exit codes; async hooks finish there); --no-server runs "
        "them here, as does a server that runs nothing (busy, stopped, refusing). A server "
        "that stops answering after it started the hooks, and an envelope nested deeper than "
        "10,000 levels, are decided without running them: each matching hook fails under its "
        "on_error.",
        _add_emit,
    ),
    "explain": (
        "say why each hook fires or not for an envelope, what each said, and the decision",
        "For EVENT and the envelope from --input (a file, or - for stdin): every hook of the "
        "home, whether it matched and if not why (kill switch, recursion guard, load error, "
        "disabled, another event, or the matcher with the field and value it was tried on); "
        "for those that ran, what each said, its duration and error; how the resolver merged "
        "them; and the decision. The matched hooks run as for emit, and their fires are "
        "recorded; --dry-run only matches. --json prints it all as one object. Exit 0, or "
        "1 on a usage or config error.",
        _add_explain,
    ),
    "new": (
        "make a working hook to start from: hook.json, a script, a sample envelope",
        "Make HOME/hooks/ID (with --dir, DIR/ID: a draft to review, then `hookbus install DIR/ID`): a valid hook.json for EVENT (sync, and blocking when the event can "
        "block), the action of --kind (command: check.sh, a script that reads the envelope and "
        "shows how to deny, exit 2 with the reason on stderr; workflow: one bash step; prompt: "
        "a prompt for the provider's model; cel: a CEL expression, with the hookbus-cel plugin; rego: "
        "policy.rego, with the hookbus-rego plugin), and envelope.json, a sample envelope of EVENT for "
        "`hookbus emit EVENT --input HOME/hooks/ID/envelope.json`. Then it validates the hook "
        "and prints the commands to try it. An existing ID is refused unless --force. Exit 0 "
        "when the hook is valid; 1 on a usage error, or when it was made but does not load "
        "(the home is writable by others, say: it says what to fix). With --dir DIR it makes DIR/ID "
        "instead, a draft outside the home (where an agent may write) to review and then `hookbus install`.",
        _add_new,
    ),
    "install": (
        "copy a hook drafted outside the home (hookbus new --dir) into HOME/hooks, once it is valid",
        "Copy the hook directory PATH into HOME/hooks/ID (ID: PATH's name, or --id). Refused, with "
        "nothing written, when a file of PATH is a symbolic link, a FIFO or a device, owned by another "
        "user or writable by group or others; when PATH holds more than 1,000 files or 16 MiB, or is "
        "in the home's hooks directory; when hooks/ID exists (unless --force). The copy is loaded as "
        "the home would load it and refused when it is not valid, or when one of its fixtures "
        "(tests/*.json) fails (unless --skip-tests); then it is renamed into place, so a watching bus "
        "sees all of it or none. Exit 0 when it is installed, 1 when it was refused.",
        _add_install,
    ),
    "list": ("show hooks, their state and last fire", None, _add_list),
    "replay": (
        "re-run recorded emits through the hooks as they are now; exit 3 if a decision flips",
        "Re-run the emits recorded with settings.json \"record_envelopes\": true (--since, --until, --hook, "
        "--event narrow them) through the sync hooks as they are now, and say which decisions flip: when, "
        "event, tool, thread, the recorded decision and the new one, and which hook made the difference. The "
        "hooks run for real, with HOOKBUS_REPLAY=1; async hooks do not run; nothing is recorded. Exit 0 when "
        "nothing flipped, 3 when something did, 1 on error.",
        _add_replay,
    ),
    "test": (
        "run the hooks' fixtures (hooks/ID/tests/*.json); exit 1 if any fails",
        "Run each fixture of the hooks (every hook's, or those of ID ...): the envelope it gives, through its "
        "own hook alone (the whole home with \"merged\": true), and compare the decision with the one it "
        "expects. Nothing is recorded and no state.json changes; the hooks see HOOKBUS_TEST=1. One line per "
        "fixture, PASS or FAIL with what differs, then a summary. Exit 0 when all pass (or there is none), 1 "
        "when one fails or cannot run.",
        _add_test,
    ),
    "validate": ("check hook specs; exit 1 if any is invalid", None, _add_validate),
    "status": (
        "say whether a hookbus serve serves this home: pid, socket, uptime, plugins (exit 3 if none)",
        "Ask the hookbus serve of this home (on --socket, $HOOKBUS_SOCKET or HOME/run/hookbus.sock) "
        "for its status: pid, socket, version, uptime, generation, hooks, problems, and its "
        "plugins, compared with what this environment would load (a plugin installed after the "
        "server started: restart it). Exit 0 when a server serves the home; 3 when none does "
        "(one line says why; with --json also {\"serving\": false, \"home\": ..., \"socket\": ...}); "
        "1 when one is there but does not answer, or the home does not exist.",
        _add_status,
    ),
    "trigger": (
        "fire one hook now (recorded as an async fire)",
        "Fire hook ID now, whatever its trigger, and print its record as one JSON object. Exit "
        "0 when it ran without error, 1 when it failed or on a usage error, 130 or 143 when "
        "SIGINT or SIGTERM stopped it.",
        _add_trigger,
    ),
    "log": ("show recorded fires", None, _add_log),
    "plugins": (
        "list plugins: name, distribution, version, status and what each provides",
        None,
        _add_plugins,
    ),
    "schema": (
        "print the JSON Schema (draft 2020-12) of hook.json, installed runners included",
        None,
        _defaults(cmd_schema),
    ),
    "watch": (
        "hot-reload the hooks in the foreground, printing every load, skip and error",
        "Run the bus with its watcher and print one line for each load, reload, removal, "
        "skip and error, with the reason. Ctrl-C stops it.",
        _defaults(cmd_watch),
    ),
    "serve": (
        "serve this home's hooks on a Unix socket (JSON-RPC 2.0, one object per line)",
        "Hold one watching bus and answer emit, trigger, ping, reload, status and explain requests on a Unix "
        "socket, for any process of this user (or root), in any language; see "
        "docs/protocol.md. Prints 'hookbus serve: listening on PATH' on stderr when ready. "
        "SIGTERM or SIGINT: stop accepting, finish what is running, record every fire, "
        "remove the socket and exit 0 (a second one kills the hooks still running). SIGHUP: "
        "reload. Exit 1 if it cannot start, another server holding this home included.",
        _add_serve,
    ),
    "claude-code-hook": (
        "be Claude Code's hook engine: one command for every Claude Code event",
        "Read Claude Code's hook envelope on stdin, run this home's hooks for the matching "
        "event (SessionStart is ThreadStart; Bash, Write, file_path... become bash, "
        "write_file, path...), through a `hookbus serve` when one answers, and print the "
        "merged decision as Claude Code's hook output (exit 0). Events with no counterpart "
        "print nothing. When hookbus cannot decide (an envelope it cannot read whole, a server "
        "that stops answering, a bus that cannot start), each hook that could match fails "
        "under its own on_error: a fail-closed one denies. Exit 1 only when none could have "
        "(Claude Code then goes on, and shows stderr).",
        _add_host_hook,
    ),
    "gemini-cli-hook": (
        "be Gemini CLI's hook engine: one command for every Gemini CLI event",
        "Read Gemini CLI's hook envelope on stdin, run this home's hooks for the matching "
        "event (BeforeTool is PreToolUse, AfterTool PostToolUse, BeforeAgent "
        "UserPromptSubmit, AfterAgent Stop, SessionStart ThreadStart, PreCompress "
        "PreCompact; run_shell_command, replace, file_path... become bash, edit_file, "
        "path...), through a `hookbus serve` when one answers, and print the merged decision "
        "as Gemini CLI's hook output (exit 0; {} when there is nothing to say, and for events "
        "with no counterpart). When hookbus cannot decide, each hook that could match fails "
        "under its own on_error: a fail-closed one denies. Exit 1 only when none could have "
        "(Gemini CLI then goes on, and shows stderr).",
        _add_host_hook,
    ),
    "codex-hook": (
        "be Codex CLI's hook engine: one command for every Codex CLI event",
        "Read Codex CLI's hook envelope on stdin, run this home's hooks for the matching "
        "event (SessionStart is ThreadStart, Bash is bash), through a `hookbus serve` when one "
        "answers, and print the merged decision in the only forms Codex CLI honours, which "
        "fails open on anything else: a deny is permissionDecision deny (or decision block) with "
        "a reason AND exit 2 with the reason on stderr; an ask on PreToolUse is a deny saying the "
        "user's approval was needed; a rewrite is allow with the whole updatedInput; approve and "
        "allow print nothing. A Stop kept going more than 8 times in a row stops. Events with no "
        "counterpart (PreModelRequest, PostModelRequest, Interrupt, SessionEnd) print nothing. "
        "When hookbus cannot decide, each hook that could match fails under its own on_error: a "
        "fail-closed one denies. Exit 1 only when none could have (Codex CLI then goes on).",
        _add_host_hook,
    ),
    "import": (
        "turn Claude Code's or Codex CLI's hooks into hooks of this home",
        "Turn each command or prompt hook of FILE's \"hooks\" block (a Claude Code settings.json, "
        "or a plugin's hooks/hooks.json) into HOME/hooks/<id>/hook.json with \"dialect\": "
        "\"claude-code\", so it runs unchanged; `hookbus import codex FILE` does the same for "
        "the command hooks of a Codex CLI hooks.json or config.toml, with \"dialect\": \"codex\". "
        "Events hookbus has no counterpart for are listed "
        "and skipped. All or nothing: a malformed entry writes nothing (exit 1). Existing hook "
        "directories are refused unless --force. --install-bridge instead makes FILE (a Claude "
        "settings.json) send every event to `hookbus claude-code-hook`; `hookbus import "
        "gemini-cli FILE --install-bridge` makes a Gemini CLI settings.json send its events to "
        "`hookbus gemini-cli-hook`, and `hookbus import codex FILE --install-bridge` a Codex CLI "
        "hooks.json to `hookbus codex-hook`, trusted in Codex's config.toml.",
        _add_import,
    ),
    "demo": ("play an agent loop against example hooks in a throwaway home", None, _add_demo),
}


#: Verbs that read no home: schema depends on the installed plugins, demo makes its own.
_HOMELESS_VERBS = ("schema", "demo")
#: Verbs about a home, which refuse one that does not exist (exit 1): what they would say
#: of it (no hooks, nothing to validate, no fires, no server) would hide a mistyped --home.
#: serve too: its socket goes in the home, and a server of nothing helps no one. The others
#: go on: emit and the bridges decide (a missing home must never break the host; they say
#: it on stderr), plugins shows the installation, and new, install and import make the home.
_INSPECTING_VERBS = ("validate", "list", "log", "explain", "test", "replay", "status", "trigger", "watch", "serve")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that verb's (argparse is slow to build all of them)."""
    common = _Parser(add_help=False)
    common.add_argument(
        "--home",
        default=argparse.SUPPRESS,
        help="the home directory (default: $VIX_HOME, else ~/.vix)",
    )
    parser = _Parser(
        prog="hookbus",
        description="Lifecycle hooks for an agent daemon: hooks on disk, one decision, every fire recorded.",
        parents=[common],
    )
    from hookbus import __version__

    parser.add_argument("--version", action="version", version=f"hookbus {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, (help_text, description, add_arguments) in VERBS.items():
        if only is not None and verb != only:
            continue
        parents = [] if verb in _HOMELESS_VERBS else [common]
        add_arguments(
            verbs.add_parser(verb, parents=parents, help=help_text, description=description)
        )
    return parser


def _verb_of(arguments: list[str]) -> str | None:
    """The verb, when the arguments name one plainly: then only its parser is built. None
    (build them all) for top-level help or anything unusual, so argparse explains it."""
    for index, argument in enumerate(arguments):
        if argument in ("-h", "--help"):
            return None
        if argument in VERBS and (index == 0 or arguments[index - 1] != "--home"):
            return argument
    return None


def main(argv: Sequence[str] | None = None, *, undecided: str | None = None) -> int:
    """The full command line. ``undecided``: ``hookbus.serve.quickpath`` hands over an event whose
    server may have run its hooks and gave no decision; they are not run again, and the
    decision is made as if each had failed for that reason."""
    try:
        return _main(argv, undecided)
    except KeyboardInterrupt:
        # Ctrl-C before hooks ran (loading, say), or in a verb that runs none: nothing to
        # record or kill, and no traceback to show.
        return 130


def _main(argv: Sequence[str] | None, undecided: str | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_verb_of(arguments))
    args = parser.parse_args(arguments)
    if not hasattr(args, "home"):
        args.home = None
    # From quickpath, or from the gate (--undecided, after a server that may have run the hooks).
    args.undecided = undecided if undecided is not None else getattr(args, "undecided", None)
    if args.verb not in ("emit", "claude-code-hook", "gemini-cli-hook", "codex-hook"):  # they log only in-process: a server is faster
        from hookbus.cli.console import log_to_stderr

        log_to_stderr()
    try:
        if args.verb in _INSPECTING_VERBS:
            require_home(args)
        result = args.func(args)
        assert isinstance(result, int)
        return result
    except UsageError as exc:
        return _failed(args.verb, exc)
    except BrokenPipeError:
        return 0
    except Exception as exc:
        # Not imported on emit's way to a server, and then nothing could have raised one.
        errors = sys.modules.get("hookbus.errors")
        if errors is not None and isinstance(exc, errors.HookBusError):
            return _failed(args.verb, exc)
        raise


def _failed(verb: str, exc: Exception) -> int:
    print(printable(f"hookbus {verb}: {exc}"), file=sys.stderr)
    return 1
