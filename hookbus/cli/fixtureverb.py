"""``hookbus test [ID ...] [--json]``: run the hooks' fixtures (``hooks/<id>/tests/*.json``)
and say which pass. Exit 0 when every one passes (or there is none), 1 when one fails or
cannot run. The fires are tests, not traffic: nothing is recorded, no state.json changes,
and the hooks see ``HOOKBUS_TEST=1`` (``hookbus.policy.fixtures``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookbus.cli.core import json_line, open_bus, say

if TYPE_CHECKING:
    import argparse
    from typing import Callable

    from hookbus.policy.fixtures import FixtureResult


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("ids", nargs="*", metavar="ID", help="only these hooks' fixtures (default: every hook's)")
    parser.add_argument("--json", action="store_true", help='print {"passed", "failed", "results"} as one JSON object')
    parser.set_defaults(func=cmd_test)


def cmd_test(args: argparse.Namespace) -> int:
    from hookbus.policy.fixtures import run_fixtures

    # Read-only: a test writes nothing, not even a broken hook's load error into its
    # state.json (test fires go around the recorders by themselves).
    bus = open_bus(args, read_only=True)
    try:
        results = run_fixtures(bus, list(args.ids) or None)
    finally:
        bus.close()
    passed = sum(1 for result in results if result.ok)
    failed = len(results) - passed
    if args.json:
        print(json_line({"passed": passed, "failed": failed, "results": [result.as_json() for result in results]}))
    else:
        _print(results, passed, failed)
    return 1 if failed else 0


def result_lines(result: FixtureResult, shown: Callable[[str], str] = str) -> list[str]:
    """One fixture's result as ``hookbus test`` prints it: PASS, or FAIL with each problem
    and the decision the hooks reached. ``shown`` rewrites the paths (install's scratch home
    shown as the draft's directory)."""
    if result.ok:
        return [f"PASS  {shown(result.path)}"]
    lines = [f"FAIL  {shown(result.path)}", *(f"      {shown(problem)}" for problem in result.problems)]
    if result.got is not None:
        lines.append(f"      the decision: {json_line(result.got)}")
    return lines


def _print(results: list[FixtureResult], passed: int, failed: int) -> None:
    if not results:
        say("no fixtures: write hooks/ID/tests/NAME.json, an envelope and the decision expected for it (docs/hooks.md#testing-a-hook)")
        return
    for result in results:
        for line in result_lines(result):
            say(line)
    say(f"{len(results)} fixture{'s' if len(results) != 1 else ''}: {passed} passed, {failed} failed")
