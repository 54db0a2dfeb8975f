"""Issue 20's papercuts: ``"$schema"`` in a hook spec, an SPDX license, the demo's wording,
and a hook's own state.json writes never counting as a change of the hook."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import jsonschema
import pytest

from conftest import atomic_write, read_state, wait_until
from hookbus import HookBus
from servekit import Raw, Served, wait_for

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "contrib" / "schema" / "hook.schema.json"
#: What the README tells users to write: from hooks/<id>/hook.json, the home's own copy of
#: `hookbus schema`, HOME/hook.schema.json (outside hooks/, where it would read as a
#: misplaced spec).
RELATIVE_SCHEMA = "../../hook.schema.json"

Maker = Callable[..., HookBus]
Writer = Callable[..., Path]
pytestmark = pytest.mark.timeout(120)


def hookbus(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments],
        capture_output=True, text=True, timeout=60, env=env,
    )


# -- 1. "$schema" ------------------------------------------------------------------------


def test_a_hook_naming_the_homes_schema_by_a_relative_path_loads_and_validates(home: Path) -> None:
    """The README's recipe, end to end: `hookbus schema > HOME/hook.schema.json`, then
    "$schema": "../../hook.schema.json" in hooks/<id>/hook.json. The path resolves, from
    the file's directory as an editor resolves it, to that schema; the schema accepts the
    file; the bus loads it; `hookbus validate` finds nothing wrong."""
    schema_text = hookbus("schema")
    assert schema_text.returncode == 0, schema_text.stderr
    (home / "hook.schema.json").write_text(schema_text.stdout)
    directory = home / "hooks" / "guard"
    directory.mkdir()
    spec: dict[str, Any] = {"$schema": RELATIVE_SCHEMA, "trigger": {"event": "Stop"}, "mode": "sync", "command": "echo guarded"}
    (directory / "hook.json").write_text(json.dumps(spec, indent=2) + "\n")

    # VS Code resolves a "$schema" starting with "." against the document's own location.
    resolved = (directory / spec["$schema"]).resolve()
    assert resolved == (home / "hook.schema.json").resolve()
    schema = json.loads(resolved.read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(spec)) == []

    with HookBus(home) as bus:
        assert bus.problems == ()
        assert bus.emit("Stop", {}).context == "guarded"
    checked = hookbus("validate", "--home", str(home))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A schema file in the home is no hook, and nothing about it is reported.
    assert "hook.schema.json" not in checked.stdout + checked.stderr


def test_schema_in_hook_yaml_loads(write_hook: Writer, make_bus: Maker) -> None:
    """hook.yaml may carry the key too (JetBrains IDEs read it), or the YAML language
    server's modeline, which is a comment and so never the bus's business."""
    write_hook(
        "y",
        name="hook.yaml",
        raw=f"# yaml-language-server: $schema={RELATIVE_SCHEMA}\n"
        f"$schema: {RELATIVE_SCHEMA}\ntrigger: {{event: Stop}}\nmode: sync\ncommand: echo from-yaml\n",
    )
    bus = make_bus()
    assert bus.problems == ()
    assert bus.emit("Stop", {}).context == "from-yaml"


@pytest.mark.parametrize(
    ("spec", "message", "location"),
    [
        (
            {"$schema": 5},
            "expected a string, got an integer: the path or URL of the JSON Schema, for editors",
            "$.$schema",
        ),
        ({"$schema": None}, "expected a string, got null", "$.$schema"),
        ({"$schema": {"$ref": "x"}}, "expected a string, got an object", "$.$schema"),
        # Only the top level names a schema; anywhere else it is the unknown field it was.
        ({"trigger": {"event": "Stop", "$schema": "x"}}, "unknown field '$schema'", "$.trigger"),
        ({"schema": "x"}, "unknown field 'schema' (did you mean '$schema'?)", "$"),
        ({"blockng": True}, "unknown field 'blockng' (did you mean 'blocking'?)", "$"),
    ],
    ids=["integer", "null", "object", "in-trigger", "without-dollar", "unknown-still-refused"],
)
def test_schema_is_a_string_at_the_top_and_nothing_else_gets_looser(
    write_hook: Writer, make_bus: Maker, spec: dict[str, Any], message: str, location: str
) -> None:
    document = {"trigger": {"event": "Stop"}, "mode": "sync", "command": "echo x", **spec}
    write_hook("x", raw=json.dumps(document))
    bus = make_bus()
    assert "x" not in bus.snapshot.hooks
    found = [problem for problem in bus.problems if message in problem.message]
    assert found, [str(problem) for problem in bus.problems]
    assert found[0].location == location
    assert found[0].path == "hooks/x/hook.json"


def test_the_published_schema_allows_schema_as_a_string_only() -> None:
    published = json.loads(PUBLISHED.read_text())
    validator = jsonschema.Draft202012Validator(published)
    good = {"$schema": RELATIVE_SCHEMA, "trigger": {"event": "Stop"}, "command": "true"}
    assert list(validator.iter_errors(good)) == []
    assert [error.message for error in validator.iter_errors({**good, "$schema": 5})] == [
        "5 is not of type 'string'"
    ]
    assert any(
        "'blockng' was unexpected" in error.message for error in validator.iter_errors({**good, "blockng": True})
    )


# -- 2. an SPDX license ------------------------------------------------------------------

DISTRIBUTIONS = [ROOT, *sorted(ROOT.glob("contrib/hookbus-*"))]


@pytest.mark.parametrize("directory", DISTRIBUTIONS, ids=[path.name for path in DISTRIBUTIONS])
def test_each_distribution_has_an_spdx_license_and_a_setuptools_that_takes_one(directory: Path) -> None:
    """A `license` table makes setuptools >= 77 print a deprecation banner on every build
    (`make demo`'s install among them); the SPDX string needs setuptools >= 77 (PEP 639),
    which older ones refuse."""
    tomllib = pytest.importorskip("tomllib")  # the standard library's from Python 3.11
    project = tomllib.loads((directory / "pyproject.toml").read_text())
    assert project["project"]["license"] == "MIT"
    requires = project["build-system"]["requires"]
    setuptools = [requirement for requirement in requires if requirement.startswith("setuptools")]
    assert len(setuptools) == 1, requires
    floor = re.fullmatch(r"setuptools>=([0-9]+)(?:\.[0-9]+)*", setuptools[0].replace(" ", ""))
    assert floor is not None and int(floor.group(1)) >= 77, setuptools


def test_the_installed_metadata_carries_the_license_expression() -> None:
    """What the build made of it: core metadata 2.4's License-Expression, from the very
    setuptools pip built this environment's install with."""
    import importlib.metadata

    metadata = importlib.metadata.metadata("hookbus")
    assert metadata["License-Expression"] == "MIT"
    assert metadata["License"] is None


# -- 3. the demo -------------------------------------------------------------------------


def test_the_demo_says_each_thing_once(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = hookbus("demo", env={**os.environ, "TMPDIR": str(scratch)})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    doubled = [match.group(0) for match in re.finditer(r"\b(\w+)\s+\1\b", out, re.IGNORECASE)]
    assert doubled == []
    assert "-> context 'This project runs its tests with: make test'" in out
    assert "-> modify  new input {" in out
    # The prompt is shortened at a word, never in the middle of one.
    assert "UserPromptSubmit 'Add a config file...'" in out
    # Step 10 is as wide as steps 1 to 9: every arrow in one column.
    steps = [line for line in out.splitlines() if re.match(r"\s+\d+\. ", line)]
    assert len(steps) == 11
    assert len({line.index(" -> ") for line in steps}) == 1, steps
    assert list(scratch.iterdir()) == []


def test_the_demos_detail_names_each_part_once() -> None:
    from hookbus.cli.demo import _detail, _shortened

    assert _detail("context", None, None, "notes") == "'notes'"
    assert _detail("allow", None, None, "notes") == "context 'notes'"
    assert _detail("modify", "why", {"path": "x"}, None) == 'why  new input {"path": "x"}'
    assert _detail("allow", None, None, None) == ""
    assert _shortened("Add a config file for the API key", 20) == "Add a config file..."
    assert _shortened("short", 20) == "short"
    assert _shortened("a" * 30, 20) == "a" * 20 + "..."


# -- 4. state.json is no change of its hook ----------------------------------------------

#: The stand-in for an inotify queue overflow: the watch never reports these hooks, so only
#: the periodic sweep can see them.
UNREPORTED = ("canary", "unseen")


def _without_unreported(real: Callable[..., Any]) -> Callable[..., Any]:
    def classify(home: Any, paths: Any) -> Any:
        return real(home, [path for path in paths if not any(f"{os.sep}{name}" in path for name in UNREPORTED)])

    return classify


def _move_in_canary(home: Path, name: str, text: str) -> None:
    """A whole hook directory made elsewhere and renamed into hooks/: it appears at once."""
    staging = home / f"staging-{name}"
    staging.mkdir()
    (staging / "hook.json").write_text(
        json.dumps({"trigger": {"event": "SubagentStop"}, "mode": "sync", "command": f"echo {text}"})
    )
    os.rename(staging, home / "hooks" / name)


def _spec(text: str) -> str:
    return json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "command": f"echo {text}"})


def test_fires_and_their_state_writes_reload_nothing_in_a_watching_bus(
    home: Path, make_bus: Maker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each fire replaces the hook's state.json (a temp file renamed over it), which changes
    the hook directory's times. Neither the watch nor the sweep takes that for a change: no
    reload, no new generation, no "reloaded" line. A canary that only the sweep can see
    proves the sweep ran after the writes (and still finds real changes)."""
    import hookbus.watch

    caplog.set_level(logging.INFO, logger="hookbus.load")  # the loader describes every reload
    bus = make_bus(watch=True)
    (home / "hooks" / "h").mkdir()
    atomic_write(home / "hooks" / "h" / "hook.json", _spec("fired"))
    wait_until(bus, lambda: "h" in bus.snapshot.hooks)
    hook = bus.snapshot.hooks["h"]
    for _ in range(5):
        assert bus.emit("Stop", {}).context == "fired"
    bus.read_runs("h")  # flushes the recorder: every state.json write is done
    assert len(read_state(home, "h")["recent_runs"]) == 5
    generation = bus.generation
    caplog.clear()

    monkeypatch.setattr(hookbus.watch, "classify", _without_unreported(hookbus.watch.classify))
    monkeypatch.setattr(hookbus.watch, "SWEEP_SECONDS", 0.0)  # a sweep on every wake-up
    _move_in_canary(home, "canary", "one")
    wait_until(bus, lambda: "canary" in bus.snapshot.hooks)
    assert bus.generation == generation + 1  # the canary's, and nothing else
    assert bus.snapshot.hooks["h"] is hook  # never re-read

    # More fires between sweeps: still nothing, until the next real change.
    for _ in range(3):
        assert bus.emit("Stop", {}).context == "fired"
    bus.read_runs("h")
    _move_in_canary(home, "unseen", "two")
    wait_until(bus, lambda: "unseen" in bus.snapshot.hooks)
    assert bus.generation == generation + 2
    assert bus.snapshot.hooks["h"] is hook
    lines = [record.getMessage() for record in caplog.records]
    assert not [line for line in lines if "hooks/h" in line], lines
    assert "loaded hooks/canary: SubagentStop sync, command" in lines


def test_the_sweep_still_sees_a_file_beside_the_spec_replaced_by_rename(
    home: Path, make_bus: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the directory's times in its signature, the sweep compares the entries
    themselves (name and inode): a script swapped for one that others may write, unreported
    by the watch, is still caught, and the hook refused."""
    import hookbus.watch

    directory = home / "hooks" / "unseen"
    directory.mkdir()
    (directory / "run.sh").write_text("echo safe\n")
    (directory / "run.sh").chmod(0o755)
    atomic_write(directory / "hook.json", json.dumps({"trigger": {"event": "Stop"}, "mode": "sync", "command": 'bash "$HOOKBUS_HOOK_DIR/run.sh"'}))
    bus = make_bus(watch=True)
    assert bus.emit("Stop", {}).context == "safe"
    monkeypatch.setattr(hookbus.watch, "classify", _without_unreported(hookbus.watch.classify))
    monkeypatch.setattr(hookbus.watch, "SWEEP_SECONDS", 0.0)
    replacement = directory / ".run.sh.new"
    replacement.write_text("echo replaced\n")
    replacement.chmod(0o777)  # others may write it: a hook that runs it must not load
    os.rename(replacement, directory / "run.sh")
    wait_until(bus, lambda: "unseen" not in bus.snapshot.hooks)
    assert any(problem.hook_id == "unseen" and "run.sh" in problem.path for problem in bus.problems), bus.problems


#: `hookbus serve` with a sweep on every wake-up and the watch blind to the canaries.
SERVE_WITH_EAGER_SWEEPS = f"""
import os, sys
import hookbus.watch as watch
watch.SWEEP_SECONDS = 0.0
real = watch.classify
def classify(home, paths):
    return real(home, [path for path in paths if not any(os.sep + name in path for name in {UNREPORTED!r})])
watch.classify = classify
from hookbus.cli.verbs import main
sys.exit(main(sys.argv[1:]))
"""


def test_hookbus_serve_logs_no_reload_for_a_hook_that_fired(home: Path) -> None:
    (home / "hooks" / "h").mkdir()
    atomic_write(home / "hooks" / "h" / "hook.json", _spec("served"))
    with Served(home, python=("-c", SERVE_WITH_EAGER_SWEEPS)) as served:
        with Raw(served.wait_ready()) as raw:
            for number in range(5):
                answer = raw.call(number, "emit", event="Stop", envelope={})
                assert answer["result"] == {"behavior": "context", "context": "served"}, answer

            def five_runs_recorded() -> bool:
                try:
                    return len(read_state(home, "h")["recent_runs"]) == 5
                except (OSError, ValueError):
                    return False

            wait_for(five_runs_recorded, 30, "state.json with five runs")
            generation = raw.call("g", "ping")["result"]["generation"]
            _move_in_canary(home, "canary", "one")
            wait_for(lambda: any("loaded hooks/canary" in line for line in served.lines), 30, "the sweep to load the canary")
            assert raw.call("g2", "ping")["result"]["generation"] == generation + 1
    # hooks/h: its load at start, and never again.
    assert [line for line in served.lines if "hooks/h" in line] == ["hookbus: loaded hooks/h: Stop sync, command"], served.stderr
    assert not [line for line in served.lines if "reloaded" in line], served.stderr
    # A sweep on every wake-up, and only the one that found the canary says anything.
    assert [line for line in served.lines if "sweep" in line] == [
        f"hookbus: the periodic sweep of {home / 'hooks'} found changes"
    ], served.stderr
    assert "Traceback" not in served.stderr
