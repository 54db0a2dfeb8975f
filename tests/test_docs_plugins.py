"""docs/plugins.md's examples run: the echo runner, installed as the page says to publish
it (a distribution with an entry point of the `hookbus` group), is listed by `hookbus
plugins`, offered by `hookbus schema`, refuses a mistake with the message the page quotes,
and decides; its test, as the page writes it, passes under pytest; the recorder is
contrib/examples/jsonl_recorder.py, whole; the hookspec table is hookbus/hookspecs.py's; and
the environment chooses plugins as the page says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from docskit import DOCS, REPO, hookbus, private_dir, section, section_blocks, user_environment, write_hook

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

DOC = DOCS / "plugins.md"

pytestmark = pytest.mark.timeout(120)


def runner_code() -> str:
    [code] = section_blocks(DOC, "A runner in 30 lines", "python")[:1]
    return code


@pytest.fixture
def installed(tmp_path: Path) -> dict[str, str]:
    """hookbus-echo, installed as pip would leave it: the module, and its dist-info with the
    entry point the page's pyproject.toml declares. The environment to run hookbus with."""
    site = private_dir(tmp_path / "site")
    (site / "hookbus_echo.py").write_text(runner_code())
    [toml] = section_blocks(DOC, "A runner in 30 lines", "toml")
    entry_points = {"echo": "hookbus_echo"}
    if tomllib is not None:
        project = tomllib.loads(toml)["project"]
        entry_points = project["entry-points"]["hookbus"]
        assert project["name"] == "hookbus-echo" and all(module.startswith("hookbus_") for module in entry_points.values())
    dist = private_dir(site / "hookbus_echo-0.1.0.dist-info")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hookbus-echo\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[hookbus]\n" + "".join(f"{name} = {value}\n" for name, value in entry_points.items()))
    return user_environment(tmp_path, PYTHONPATH=str(site))


def test_the_runner_installed_is_listed_offered_checked_and_run(tmp_path: Path, installed: dict[str, str]) -> None:
    listed = hookbus("plugins", env=installed).stdout
    assert any(line.split()[:3] == ["echo", "hookbus-echo", "0.1.0"] for line in listed.splitlines()), listed
    schema = json.loads(hookbus("schema", env=installed).stdout)
    assert "echo" in schema["properties"]
    home = private_dir(tmp_path / "home")
    write_hook(home, "h", {"trigger": {"event": "Stop"}, "mode": "sync", "echo": {"text": "hi"}})
    write_hook(home, "bad", {"trigger": {"event": "Stop"}, "mode": "sync", "echo": {"txt": "hi"}})
    checked = hookbus("validate", "--home", str(home), env=installed).stdout
    assert "ok  hooks/h" in checked
    quoted = "unknown field 'txt' (did you mean 'text'?) @ $.echo"
    assert f"hooks/bad/hook.json: {quoted}" in checked and f"`{quoted}`" in " ".join(section(DOC, "A runner in 30 lines").split())
    (home / "hooks" / "bad" / "hook.json").unlink()
    decided = hookbus("emit", "Stop", "--home", str(home), "--no-server", input="{}", env=installed)
    assert json.loads(decided.stdout) == {"behavior": "context", "context": "hi"}


def test_its_test_passes_as_the_page_writes_it(tmp_path: Path, installed: dict[str, str]) -> None:
    code = next(block for block in section_blocks(DOC, "A runner in 30 lines", "python") if "def test_echo" in block)
    work = private_dir(tmp_path / "work")
    (work / "test_echo.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_echo.py"],
        cwd=work, env=installed, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_recorder_is_the_whole_of_the_contrib_example() -> None:
    [code] = section_blocks(DOC, "A recorder in 30 lines", "python")
    assert code.strip() == (REPO / "contrib" / "examples" / "jsonl_recorder.py").read_text().strip()


def test_the_hookspec_table_is_the_contract() -> None:
    import hookbus.hookspecs as hookspecs

    names = {name for name in dir(hookspecs) if name.startswith("hookbus_") and callable(getattr(hookspecs, name))}
    table = section(DOC, "The hookspecs")
    listed = {word for word in __import__("re").findall(r"`(hookbus_[a-z_]+)\(", table)}
    assert listed == names


def plugin_statuses(env: dict[str, str], home: Path) -> dict[str, str]:
    printed = hookbus("plugins", "--home", str(home), env=env).stdout
    lines = printed.splitlines()
    start = lines[0].index("STATUS")
    end = lines[0].index("PROVIDES")
    return {line.split()[0]: line[start:end].strip() for line in lines[1:] if line.strip() and not line.startswith("recording")}


def test_the_environment_chooses_plugins(tmp_path: Path) -> None:
    text = " ".join(section(DOC, "Choosing plugins").split())
    assert "`HOOKBUS_DISABLE_PLUGINS=prompt,http`" in text and "`HOOKBUS_LOAD_PLUGINS=http`" in text
    blocked = plugin_statuses(user_environment(tmp_path, HOOKBUS_DISABLE_PLUGINS="prompt,http"), tmp_path)
    assert blocked["prompt"] == blocked["http"] == "blocked by HOOKBUS_DISABLE_PLUGINS"
    assert blocked["command"] == "loaded"
    only = plugin_statuses(user_environment(tmp_path, HOOKBUS_LOAD_PLUGINS="http"), tmp_path)
    assert {name for name, status in only.items() if status == "loaded"} == {"command", "resolver", "recorder", "http"}
    essential = plugin_statuses(user_environment(tmp_path, HOOKBUS_LOAD_PLUGINS=""), tmp_path)
    assert {name for name, status in essential.items() if status == "loaded"} == {"command", "resolver", "recorder"}


def test_a_misspelled_recorder_falls_back_to_the_built_in_one(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    private_dir(home / "hooks")
    (home / "settings.json").write_text('{"recorder": "sqllite"}')
    (home / "settings.json").chmod(0o600)
    printed = hookbus("validate", "--home", str(home), env=user_environment(tmp_path)).stdout
    assert "settings.json: recorder 'sqllite' is not installed or is blocked" in printed
    assert "recording with 'recorder' instead" in printed
    assert "(a typo: `\"sqllite\"`)" in " ".join(section(DOC, "Swapping the recorder").split())
