"""``hookbus status``: whether a ``hookbus serve`` serves this home, and how it is.

It asks the server's ``status`` method (its pid, socket, version, uptime, generation,
hooks, problems and plugins), and compares the server's plugins with what this
environment would load: the entry points installed now, and the environment's
HOOKBUS_DISABLE_PLUGINS and HOOKBUS_LOAD_PLUGINS. Only the entry points' metadata is read
(``hookbus.plugins.discover``); no plugin is imported, and no bus is made.

Exit 0 when a server serves the home; 3 when none does (systemd's "not running"), with a
line saying so (with ``--json``, ``{"serving": false, "home": ..., "socket": ...}``); 1 when
one is there but could not be asked (busy, stopped, another user's).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from hookbus.cli.core import json_line, say, warn

if TYPE_CHECKING:
    import argparse

#: Exit code when no server serves the home.
NOT_SERVING = 3
RESTART = "restart hookbus serve to load what is installed now"


def cmd_status(args: argparse.Namespace) -> int:
    from hookbus.serve.client import Client, NoServer, OtherHome, RemoteError, UntrustedPeer
    from hookbus.serve.rendezvous import home_root, socket_path

    home = home_root(args.home)
    path = socket_path(args.socket, home)
    try:
        client = Client(args.socket, home=home)
    except NoServer:
        return _not_serving(args, home, path, f"no hookbus serve serves {home}: nothing listens on {path}")
    except UntrustedPeer as exc:
        return _not_serving(args, home, path, f"no hookbus serve of yours serves {home}: {exc}")
    except OSError as exc:  # ServerBusy
        warn(f"hookbus status: cannot ask the server on {path}: {exc}")
        return 1
    with client:
        try:
            status: dict[str, Any] = client.status()
        except OtherHome as exc:
            served = exc.data.get("home") if isinstance(exc.data, dict) else "another home"
            return _not_serving(args, home, path, f"no hookbus serve serves {home}: the one on {path} serves {served}")
        except (RemoteError, OSError, ValueError) as exc:  # NotStarted, NoAnswer: stopped or wedged
            warn(f"hookbus status: the server on {path} did not answer: {exc}")
            return 1
    if not isinstance(status, dict):
        warn(f"hookbus status: the server on {path} sent no status")
        return 1
    if isinstance(status.get("plugins"), list):
        differences = plugin_differences(status["plugins"], os.environ)
    else:
        message = f"the server does not say which plugins it runs (it is an older hookbus serve): {RESTART}"
        differences = [{"name": None, "what": "unknown", "message": message}]
    from hookbus.policy.managed import managed_identity

    loaded, here = str(status.get("managed", "")), managed_identity()
    if loaded != here:
        message = (
            f"the server loads {f'the managed directory {loaded}' if loaded else 'no managed directory'}, and this environment "
            f"would load {f'the managed directory {here}' if here else 'none'}: it runs nothing for this environment's "
            f"clients, which decide in their own process, until it catches up (it looks every 250 ms), or "
            "for good when it ran code from where its environment pointed: restart it"
        )
        differences.insert(0, {"name": None, "what": "managed", "message": message})
    version = _this_version()
    if status.get("version") not in (None, version):
        message = f"the server runs hookbus {status.get('version')}, this environment has {version}: {RESTART}"
        differences.insert(0, {"name": "hookbus", "what": "changed", "message": message})
    if args.json:
        document = {"serving": True, "home": status.get("home") or home, "socket": status.get("socket") or path, **status}
        document["differences"] = differences
        document["restart_needed"] = any(difference["what"] != "environment" for difference in differences)
        print(json_line(document))
    else:
        _print(status, path, [str(difference["message"]) for difference in differences])
    return 0


def _not_serving(args: argparse.Namespace, home: str, path: str, message: str) -> int:
    if args.json:
        print(json_line({"serving": False, "home": home, "socket": path}))
        warn(message)
    else:
        say(message)
    return NOT_SERVING


def _this_version() -> str:
    from hookbus import __version__

    return __version__


def plugin_differences(served: Sequence[Mapping[str, Any]], environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """How the server's plugins differ from what this environment would load, as
    ``{"name", "what", "message"}``. ``what``: ``installed`` (here, since the server
    started), ``removed`` (from here), ``changed`` (another distribution or version): a
    restart of the server loads what is installed now; ``environment``: the two
    environments block it differently (HOOKBUS_DISABLE_PLUGINS, HOOKBUS_LOAD_PLUGINS)."""
    from hookbus.plugins import would_load
    from hookbus.policy.tiers import ManagedTier
    from hookbus.runners import RunnerTable

    # Chosen here as a bus here would choose them: the managed directory's rule where one
    # exists, else the selection variables.
    policy = ManagedTier.from_environment(RunnerTable()).plugin_policy(environ, read=True)
    considered = would_load(policy)
    installed = {name: entry_point for name, (entry_point, _) in considered.items()}
    theirs: dict[str, Mapping[str, Any]] = {}
    for row in served:
        name = str(row.get("name"))
        # Under a built-in plugin's name, the built-in one: another distribution's entry
        # point of that name is a failed row beside it.
        if not row.get("in_process") and (name not in theirs or theirs[name].get("status") == "failed"):
            theirs[name] = row
    found: list[dict[str, Any]] = []

    def differs(name: str, what: str, message: str) -> None:
        found.append({"name": name, "what": what, "message": message})

    for name in sorted(set(installed) | set(theirs)):
        here, there = installed.get(name), theirs.get(name)
        if there is None:
            assert here is not None
            differs(name, "installed", f"plugin {name!r} ({_release(here.distribution, here.version)}) is installed, but the server has not loaded it: {RESTART}")
        elif here is None:
            differs(name, "removed", f"plugin {name!r} ({_release(there.get('distribution'), there.get('version'))}) runs in the server, but is no longer installed here: {RESTART}")
        elif (here.distribution, here.version) != (there.get("distribution"), there.get("version")):
            differs(
                name, "changed",
                f"plugin {name!r}: the server runs {_release(there.get('distribution'), there.get('version'))}, "
                f"this environment has {_release(here.distribution, here.version)}: {RESTART}",
            )
        else:
            blocked_here = considered[name][1]
            blocked_there = there.get("detail") if there.get("status") == "blocked" else None
            if bool(blocked_here) != bool(blocked_there):
                differs(
                    name, "environment",
                    f"plugin {name!r} is {blocked_there or 'loaded'} in the server, but would be {blocked_here or 'loaded'} "
                    "here: the server's environment says otherwise (restart it in the environment you mean)",
                )
    return found


def _release(distribution: object, version: object) -> str:
    return f"{distribution or 'unknown distribution'} {version or '(no version)'}"


def _print(status: Mapping[str, Any], path: str, differences: Sequence[str]) -> None:
    from hookbus.cli.tables import Style
    from hookbus.cli.views import plugin_lines, plural
    from hookbus.durations import format_duration

    every = status.get("hooks") or []
    hooks = [row for row in every if row.get("tier") != "builtin"]
    managed = sum(1 for row in hooks if row.get("tier") == "managed")
    disabled_hooks = sum(1 for row in hooks if str(row.get("state", "")).startswith("disabled"))
    broken = sum(1 for row in hooks if str(row.get("state", "")).startswith("broken"))
    counted = plural(len(hooks), "hook")
    extra = [f"{disabled_hooks} disabled"] if disabled_hooks else []
    extra += [f"{broken} broken"] if broken else []
    extra += [f"{managed} managed"] if managed else []
    if len(every) > len(hooks):
        extra.append("and hookbus's home guard")
    uptime = status.get("uptime_seconds")
    up = format_duration(float(uptime)) if isinstance(uptime, (int, float)) else "?"
    rows = [
        ("home", str(status.get("home"))),
        ("socket", str(status.get("socket") or path)),
        ("pid", str(status.get("pid"))),
        ("version", f"hookbus {status.get('version')}"),
        ("up", f"{up} (since {status.get('started_at')})"),
        ("generation", f"{status.get('generation')} (each load of the hooks adds one)"),
        ("hooks", counted + (f" ({', '.join(extra)})" if extra else "") + ": hookbus list shows them"),
        ("recording", ", ".join(status.get("recorders") or []) or "nothing"),
    ]
    http = status.get("http")
    if isinstance(http, Mapping):
        refused = [f"{http.get('unauthorized')} without the right token", f"{http.get('forbidden')} for their Host or Origin"]
        rows.insert(2, ("http", f"{http.get('url')}/claude-code ({plural(int(http.get('connections') or 0), 'connection')}; refused: {', '.join(refused)})"))
        gate = http.get("gate")
        if isinstance(gate, Mapping):
            found = (
                f"finds this server in {gate.get('run_file')}" if gate.get("run_file")
                else "cannot find this server (no run file: it runs the command bridge on every call)"
            )
            hosts = gate.get("hosts")
            served = (
                " (" + ", ".join(f"{name} {answered}" for name, answered in hosts.items()) + ")"
                if isinstance(hosts, Mapping) and hosts else ""
            )
            rows.insert(3, (
                "gate", f"bash {gate.get('script')}: {found}; {gate.get('answered')} answered{served}, "
                f"{gate.get('sent_to_bridge')} sent to the command bridge",
            ))
    say(f"hookbus serve is serving {status.get('home')} (pid {status.get('pid')})")
    for name, value in rows:
        say(f"  {name.ljust(10)}  {value}")
    if status.get("disabled"):
        say(f"  your hooks are off (managed hooks and the home guard still run): {status.get('disabled')}")
    over_http = http.get("fail_closed_over_http") if isinstance(http, Mapping) else None
    if over_http:
        say(
            f"  warning: a fail-closed hook fires on {', '.join(map(str, over_http))}, which Claude Code posts over http "
            "(it runs the tool when it cannot reach this server): run `hookbus import claude-code FILE --install-bridge "
            "--http URL` again to keep the command bridge there"
        )
    plugins = status.get("plugins") or []
    if plugins:
        say()
        for line in plugin_lines(plugins, Style.for_stdout()):
            print(line)
    problems = [str(problem) for problem in status.get("problems") or []]
    warnings = [str(warning) for warning in status.get("warnings") or []]
    if problems:
        say()
        say(f"{plural(len(problems), 'problem')} (skipped files, a broken file whose last good version runs, or a hook that will fail):")
        for problem in problems:
            say(f"  {problem}")
    if warnings:
        say()
        for warning in warnings:
            say(f"warning: {warning}")
    if differences:
        say()
        say("the server differs from this environment:")
        for line in differences:
            say(f"  {line}")
