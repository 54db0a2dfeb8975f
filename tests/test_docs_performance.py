"""docs/performance.md holds: the target of each figure of its table is the one `make bench`
measures against (bench/bench.py, bench/serve_bench.py, bench/http_bench.py); the commands it gives run (two
quick ones for real); and the summary of `make stress` has a row for each of the ten
promises of the security model."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docskit import DOCS, REPO, commands_of, logical_lines, section, section_blocks

DOC = DOCS / "performance.md"

pytestmark = pytest.mark.timeout(120)

#: The table's figure -> the name bench.py reports it under.
FIGURES = {
    "no-match emit": "no-match emit",
    "home guard": "home guard",
    "one sync hook": "one sync hook",
    "parallel hooks": "parallel hooks",
    "hot reload": "hot reload",
    "async fire, busy pool": "async fire",
    "async fire, paced": "async fire paced",
    "cold load": "cold load",
    "CLI emit": "CLI emit",
    "scaling": "scaling",
    "serve round trip": "serve rtt",
    "serve one sync hook": "serve one sync",
    "serve CLI emit": "serve CLI emit",
    "serve bridge": "serve bridge",
    "serve throughput": "serve throughput",
    "http round trip": "http rtt",
    "replay": "replay",
}


def bench_targets() -> dict[str, tuple[str, float]]:
    """name -> (<= or >=, target) of every report() call of the bench scripts."""
    targets = {}
    for script in ("bench.py", "serve_bench.py", "http_bench.py"):
        for node in ast.walk(ast.parse((REPO / "bench" / script).read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("report", "report_at_least"):
                if len(node.args) >= 3 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[2], ast.Constant):
                    targets[node.args[0].value] = (">=" if node.func.id == "report_at_least" else "<=", float(node.args[2].value))
    # serve_bench.py takes its reporter as a parameter: bench.py hands throughput
    # report_at_least, where higher is better.
    if "replay" in targets:
        targets["replay"] = (">=", targets["replay"][1])
    if "serve throughput" in targets:
        targets["serve throughput"] = (">=", targets["serve throughput"][1])
    return targets


#: The policy hooks' table -> policy_bench.py's TARGETS (and, for the Claude Code row,
#: claude_code_bench.py's CEL_TARGET).
POLICY_FIGURES = {"cel deny": "cel", "rego deny": "rego", "cel deny in Claude Code": "claude"}


def policy_targets() -> dict[str, float]:
    found: dict[str, float] = {}
    for node in ast.walk(ast.parse((REPO / "bench" / "policy_bench.py").read_text())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TARGETS" for t in node.targets):
            found.update(ast.literal_eval(node.value))
    for node in ast.walk(ast.parse((REPO / "bench" / "claude_code_bench.py").read_text())):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CEL_TARGET" for t in node.targets):
            found["claude"] = ast.literal_eval(node.value)
    return found


def table(heading: str = "Performance") -> dict[str, str]:
    rows = {}
    for line in section(DOC, heading).splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) == 4 and cells[0] not in ("figure", "---"):
            rows[cells[0]] = cells[2]
    return rows


def test_every_policy_figure_has_the_target_its_bench_measures_against() -> None:
    rows = table("Policy hooks")
    targets = policy_targets()
    assert set(rows) == set(POLICY_FIGURES)
    for figure, name in POLICY_FIGURES.items():
        match = re.search(r"≤ ([0-9.]+)", rows[figure])
        assert match is not None and float(match.group(1)) == targets[name], (figure, rows[figure], targets)


def test_every_figure_has_the_target_bench_measures_against() -> None:
    rows = {figure: target for figure, target in table().items() if figure not in POLICY_FIGURES}
    targets = bench_targets()
    assert set(rows) == set(FIGURES)
    assert set(targets) == set(FIGURES.values())
    for figure, name in FIGURES.items():
        direction, target = targets[name]
        match = re.search(r"([≤≥]) ([0-9.,]+)", rows[figure])
        assert match is not None, figure
        assert ("<=" if match.group(1) == "≤" else ">=") == direction, figure
        assert float(match.group(2).replace(",", "")) == target, f"{figure}: the page says {rows[figure]}, bench.py {target}"


def test_the_commands_it_gives_exist_and_the_quick_ones_run() -> None:
    [block] = section_blocks(DOC, "Performance and reliability", "sh")
    makefile = (REPO / "Makefile").read_text()
    for line in logical_lines(block):
        [command] = commands_of(line)
        if command[0] == "make":
            assert re.search(rf"^{command[1]}:", makefile, re.M), line
            continue
        assert command[0] == ".venv/bin/python", line
        script = REPO / command[1]
        assert script.is_file(), line
        arguments = command[2:]
        if script.name == "reload_latency.py":
            arguments = ["--writes", "3"]
        elif script.name == "bench.py":
            arguments = ["--only", "no-match"] if "replay" not in command else ["--only", "replay", "--replay-emits", "10"]
        done = subprocess.run([sys.executable, str(script), *arguments], cwd=REPO, capture_output=True, text=True, timeout=100)
        assert done.returncode == 0, done.stderr
        assert "target" in done.stdout


def test_bench_takes_the_figures_the_page_names() -> None:
    [block] = section_blocks(DOC, "Performance and reliability", "sh")
    help_text = subprocess.run([sys.executable, str(REPO / "bench" / "bench.py"), "--help"], capture_output=True, text=True, timeout=60).stdout
    for line in logical_lines(block):
        [command] = commands_of(line)
        if "--only" in command:
            for name in command[command.index("--only") + 1:]:
                if name.startswith("--"):
                    break  # another option: the figures' names end here
                assert name in help_text, name


def test_the_stress_summary_has_a_row_for_each_promise() -> None:
    text = section(DOC, "The figures of `make stress`")
    numbers = sorted(int(n) for n in re.findall(r"attacks held / tried, promise (\d+)", text))
    assert numbers == list(range(1, 11))
    assert "[security model](security.md)" in section(DOC, "Reliability")


def test_the_host_benches_it_names_exist_and_take_the_configs_it_names() -> None:
    """"Inside the real hosts": each script it runs is there, and each config it describes
    is one that script takes (the hosts themselves are not installed here)."""
    text = section(DOC, "Inside the real hosts")
    scripts = set(re.findall(r"\.venv/bin/python (bench/\S+\.py)", text))
    assert scripts == {
        "bench/claude_code_bench.py", "bench/claude_code_server_down.py", "bench/gemini_cli_bench.py", "bench/codex_bench.py",
    }
    for script in scripts:
        assert (REPO / script).is_file(), script
    described = set(re.findall(r"^- `([a-z-]+)`:", text, re.M))
    assert described == {"native", "default", "guard-only", "http", "bridge"}
    for script in ("claude_code_bench.py", "gemini_cli_bench.py", "codex_bench.py"):
        shown = subprocess.run([sys.executable, str(REPO / "bench" / script), "--help"], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
    claude_help = subprocess.run(
        [sys.executable, str(REPO / "bench" / "claude_code_bench.py"), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert all(config in claude_help for config in described)
