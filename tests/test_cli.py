"""The `hookbus` command line, run as a real subprocess against a real home on disk.

Every case asserts exit codes and exact output: the CLI is what scripts and the agent
call, so its output is an interface.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import read_log, read_state
from hookbus import HookBus, RunRecord

CLI = [sys.executable, "-m", "hookbus"]

# Decides by tool_input.path, so a test can see the envelope really reached the hook.
DECIDE_BY_PATH = r"""#!/usr/bin/env bash
path=$(sed -n 's/.*"path":"\([^"]*\)".*/\1/p')
case "$path" in
  allow.txt) exit 0 ;;
  ctx.txt) echo "saw $path" ;;
  mod.txt) echo '{"behavior": "modify", "input": {"path": "safe.txt"}}' ;;
  deny.txt) echo "no $path" >&2; exit 2 ;;
esac
"""

# Says "turn N" for the envelope's "turn", so each fire's log line is told apart.
TURN_COMMAND = r"""sed -n 's/.*"turn":\([0-9]*\).*/turn \1/p'"""
INVALID_BLOCKING = 'hooks/bad/hook.json: blocking needs "mode": "sync" @ $.blocking'


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment without anything that would pick another home or disable
    hooks, or fit tables to a width ($COLUMNS), and a HOME of its own so ~/.vix is never
    touched."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIX_HOME", "VIX_DISABLE_HOOKS", "COLUMNS")}
    user_home = tmp_path / "user-home"
    user_home.mkdir(exist_ok=True)
    env["HOME"] = str(user_home)
    env.update(extra)
    return env


def run_cli(
    tmp_path: Path,
    *args: str,
    home: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    argv = [*CLI, *args]
    if home is not None:
        argv += ["--home", str(home)]
    return subprocess.run(
        argv,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env=env if env is not None else cli_env(tmp_path),
        timeout=60,
    )


def write_decider(write_hook: Any) -> None:
    write_hook(
        "decider",
        mode="sync",
        blocking=True,
        matcher="write_file",
        command='"$HOOKBUS_HOOK_DIR/decide.sh"',
        files={"decide.sh": DECIDE_BY_PATH},
    )


def envelope_for(path: str) -> str:
    return json.dumps({"tool_name": "write_file", "tool_input": {"path": path}, "cwd": "/"})


DECISIONS = [
    ("allow.txt", {"behavior": "allow"}, 0),
    ("ctx.txt", {"behavior": "context", "context": "saw ctx.txt"}, 0),
    ("mod.txt", {"behavior": "modify", "input": {"path": "safe.txt"}}, 0),
    ("deny.txt", {"behavior": "deny", "reason": "hook 'decider' denied: no deny.txt"}, 2),
]


def assert_one_json_object(stdout: str, expected: dict[str, Any]) -> None:
    """Exactly one line, one JSON object, with null keys left out."""
    assert stdout.endswith("\n")
    assert stdout.count("\n") == 1
    assert json.loads(stdout) == expected


# -- emit ---------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("path", "expected", "code"), DECISIONS, ids=[d[0] for d in DECISIONS])
def test_emit_input_file_prints_the_decision(tmp_path, home, write_hook, path, expected, code):
    """`emit --input FILE`: the decision as one JSON object, exit 2 only for deny."""
    write_decider(write_hook)
    envelope = tmp_path / "envelope.json"
    envelope.write_text(envelope_for(path))

    result = run_cli(tmp_path, "emit", "PreToolUse", "--input", str(envelope), home=home)

    assert result.returncode == code
    assert_one_json_object(result.stdout, expected)
    assert result.stderr == ""
    [entry] = read_log(home)
    assert (entry["hook_id"], entry["status"]) == ("decider", expected["behavior"])


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("path", "expected", "code"), DECISIONS, ids=[d[0] for d in DECISIONS])
def test_emit_reads_stdin_with_vix_home(tmp_path, home, write_hook, path, expected, code):
    """`emit --input -` reads the envelope from stdin; $VIX_HOME names the home when
    --home is not given."""
    write_decider(write_hook)

    result = run_cli(
        tmp_path,
        "emit",
        "PreToolUse",
        "--input",
        "-",
        stdin=envelope_for(path),
        env=cli_env(tmp_path, VIX_HOME=str(home)),
    )

    assert result.returncode == code
    assert_one_json_object(result.stdout, expected)
    assert [e["hook_id"] for e in read_log(home)] == ["decider"]


@pytest.mark.timeout(60)
def test_home_flag_beats_vix_home(tmp_path, home, write_hook):
    """--home > $VIX_HOME: an explicit flag must win over the environment."""
    write_decider(write_hook)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "hooks").mkdir(parents=True)

    result = run_cli(
        tmp_path,
        "emit",
        "PreToolUse",
        "--input",
        "-",
        home=home,
        stdin=envelope_for("deny.txt"),
        env=cli_env(tmp_path, VIX_HOME=str(elsewhere)),
    )

    assert result.returncode == 2
    assert not (elsewhere / "logs").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["Nope"], "{}", "hookbus emit: unknown event 'Nope'; events are PreToolUse, "),
        (["Stop", "--input", "-"], "[1, 2]", "hookbus emit: the envelope must be a JSON object"),
        (["Stop", "--input", "-"], '"text"', "hookbus emit: the envelope must be a JSON object"),
        (["Stop", "--input", "-"], "{broken", "hookbus emit: the envelope is not valid JSON: "),
        (["Stop", "--input", "MISSING"], "", "hookbus emit: cannot read MISSING: No such file"),
        (["Stop", "--input", "HOME"], "", "hookbus emit: cannot read HOME: Is a directory"),
    ],
    ids=["unknown-event", "array", "string", "invalid-json", "missing-file", "directory"],
)
def test_emit_usage_errors_exit_1_without_traceback(
    tmp_path, home, write_hook, args, stdin, message
):
    """Bad input is the caller's mistake: one line on stderr, exit 1, nothing fired."""
    write_hook("stopper", event="Stop", mode="sync", command="echo fired")
    substitutions = {"MISSING": str(tmp_path / "missing.json"), "HOME": str(home)}
    args = [substitutions.get(arg, arg) for arg in args]
    message = message.replace("MISSING", substitutions["MISSING"]).replace("HOME", str(home))

    result = run_cli(tmp_path, "emit", *args, home=home, stdin=stdin)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert not (home / "logs").exists()


class Background:
    """A CLI process left running while the test acts: its output is read on threads, so
    the test can wait for a line with a timeout. Leaving the block always ends the
    process (kill if still running), reaps it, and only then closes the pipes, since
    closing a pipe a reader thread is blocked on would deadlock."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [*CLI, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(tmp_path),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []
        self._threads = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put)),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._stderr.append)),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    @staticmethod
    def _pump(stream: Any, sink: Any) -> None:
        for line in stream:
            sink(line)

    def line(self, timeout: float) -> str | None:
        """The next line of stdout, or None if none came within ``timeout``."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def terminate(self, timeout: float = 30) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=timeout)

    @property
    def stderr(self) -> str:
        """Everything written to stderr; complete once the process ended."""
        for thread in self._threads:
            thread.join(10)
        return "".join(self._stderr)

    def __enter__(self) -> Background:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for thread in self._threads:
            thread.join(10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.timeout(90)
def test_emit_prints_first_then_waits_for_async_hooks(tmp_path, home, write_hook):
    """The caller gets its decision at once, yet the process does not exit before its
    async hooks finished and were recorded (else a CLI emit would lose them)."""
    hook_dir = home / "hooks" / "slow"
    write_hook(
        "slow",
        event="Stop",
        timeout="60s",
        command='while [ ! -e "$HOOKBUS_HOOK_DIR/go" ]; do sleep 0.05; done; '
        'sleep 0.5; echo done > "$HOOKBUS_HOOK_DIR/marker"',
    )
    with Background(tmp_path, "emit", "Stop", "--home", str(home)) as emit:
        try:
            first = emit.line(timeout=30)
            still_running = emit.proc.poll() is None
        finally:
            (hook_dir / "go").touch()  # let the hook finish whatever happened
        code = emit.wait(timeout=60)
        stderr = emit.stderr

    assert first == '{"behavior": "allow"}\n'
    assert still_running, "emit exited before its async hook finished"
    assert code == 0
    assert stderr == ""
    assert (hook_dir / "marker").read_text() == "done\n"
    [entry] = read_log(home)
    assert (entry["hook_id"], entry["mode"], entry["status"], entry["error"]) == (
        "slow",
        "async",
        "done",
        None,
    )
    assert read_state(home, "slow")["last_status"] == "done"


# -- validate -----------------------------------------------------------------------------


def write_good_and_bad(write_hook: Any) -> None:
    write_hook("good", mode="sync", blocking=True, command="exit 2")
    write_hook("quiet", event="Stop", command="true")
    write_hook("bad", blocking=True, command="true")


@pytest.mark.timeout(60)
def test_validate_all_valid_exits_0(tmp_path, home, write_hook):
    """A clean home validates with exit 0 and says which hooks it checked."""
    write_hook("good", mode="sync", blocking=True, command="exit 2")
    write_hook("quiet", event="Stop", command="true")

    result = run_cli(tmp_path, "validate", home=home)

    assert result.returncode == 0
    assert result.stdout == f"ok  hooks/good\nok  hooks/quiet\n2 valid hooks, no problems in {home / 'hooks'}\n"
    assert result.stderr == ""


@pytest.mark.timeout(60)
def test_validate_reports_path_qualified_problems(tmp_path, home, write_hook):
    """Any invalid hook fails validation, and the message says which file and which
    field, so the author can fix it without guessing."""
    write_good_and_bad(write_hook)
    write_hook("typo", mode="sync", blockng=True, command="true")

    result = run_cli(tmp_path, "validate", home=home)

    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert INVALID_BLOCKING in lines
    assert "hooks/typo/hook.json: unknown field 'blockng' (did you mean 'blocking'?) @ $" in lines
    assert "ok  hooks/good" in lines
    assert "ok  hooks/quiet" in lines
    assert not any("bad" in line or "typo" in line for line in lines if line.startswith("ok"))
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(60)
def test_validate_ids_restricts_to_those_hooks(tmp_path, home, write_hook):
    """`validate ID` checks only that hook: another hook's problem must not fail it."""
    write_good_and_bad(write_hook)

    good = run_cli(tmp_path, "validate", "good", home=home)
    bad = run_cli(tmp_path, "validate", "bad", home=home)

    assert (good.returncode, good.stdout) == (0, "ok  hooks/good\n")
    assert (bad.returncode, bad.stdout) == (1, INVALID_BLOCKING + "\n")


@pytest.mark.timeout(60)
def test_validate_unknown_id_exits_1(tmp_path, home, write_hook):
    """Validating a hook that does not exist is a failure, not a silent pass."""
    write_hook("good", mode="sync", blocking=True, command="exit 2")

    result = run_cli(tmp_path, "validate", "nope", home=home)

    assert result.returncode == 1
    assert result.stdout == "hooks/nope: no hook.json or hook.yaml\n"
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(120)
def test_an_unknown_event_gets_a_did_you_mean_everywhere(tmp_path, home, write_hook):
    """A misspelt event, or another host's name for one, is answered with the event meant:
    by emit (with a server running, whose quick path hands it to the full command line),
    explain, log --event and new."""
    from servekit import Served

    write_hook("stopper", event="Stop", mode="sync", command="echo fired")
    hint = "(did you mean 'ThreadStart'? SessionStart is Claude Code's, Gemini CLI's and Codex CLI's name for it)"
    with Served(home, env=cli_env(tmp_path)):
        emitted = run_cli(tmp_path, "emit", "pretooluse", home=home, stdin="{}")
        hosts = run_cli(tmp_path, "emit", "SessionStart", home=home, stdin="{}")
    explained = run_cli(tmp_path, "explain", "Stopp", home=home, stdin="{}")
    logged = run_cli(tmp_path, "log", "--event", "subagentstop", home=home)
    made = run_cli(tmp_path, "new", "x", "--event", "PostToolUs", home=home)

    assert emitted.returncode == hosts.returncode == explained.returncode == logged.returncode == made.returncode == 1
    assert emitted.stderr.startswith("hookbus emit: unknown event 'pretooluse'; events are PreToolUse, ")
    assert emitted.stderr.endswith(" (did you mean 'PreToolUse'?)\n")
    assert hosts.stderr.endswith(f" {hint}\n")
    assert explained.stderr.endswith(" (did you mean 'Stop'?)\n")
    assert logged.stderr.endswith(" (did you mean 'SubagentStop'?)\n")
    assert made.stderr.endswith(" (did you mean 'PostToolUse'?)\n")
    assert not (home / "logs").exists()
    # A hook id too: trigger, and log --hook.
    triggered = run_cli(tmp_path, "trigger", "stoper", home=home)
    assert triggered.returncode == 1
    assert triggered.stderr.startswith(f"hookbus trigger: no valid hook 'stoper' (did you mean 'stopper'?) in {home}/hooks (loaded: stopper)")
    assert run_cli(tmp_path, "log", "--hook", "stoper", home=home).stdout.endswith("(did you mean 'stopper'?)\n")
    with HookBus(home) as bus:
        with pytest.raises(ValueError, match=r"did you mean 'UserPromptSubmit'\?"):
            bus.emit("UserPromptSubmitt", {})


# -- list ---------------------------------------------------------------------------------


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The rows of `hookbus list`'s table by id (it ends at the first blank line)."""
    rows: dict[str, list[str]] = {}
    for line in stdout.split("\n\n")[0].splitlines()[1:]:
        cells = re.split(r" {2,}", line)
        rows[cells[0]] = cells
    return rows


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flag_first", [False, True], ids=["home-after-verb", "home-before-verb"])
def test_list_shows_hooks_last_status_and_skipped(tmp_path, home, write_hook, flag_first):
    """`list` is the overview: each hook's id, event, mode and how it last ended, plus
    which hooks were skipped and why."""
    write_good_and_bad(write_hook)
    fired = run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name": "bash"}')
    assert fired.returncode == 2
    [entry] = read_log(home)

    args = ["--home", str(home), "list"] if flag_first else ["list", "--home", str(home)]
    result = run_cli(tmp_path, *args)

    assert result.returncode == 0
    header = result.stdout.splitlines()[0]
    assert re.split(r" {2,}", header) == [
        "ID", "EVENT", "MATCHER", "MODE", "ACTION", "STATE", "LAST FIRE", "ERROR"
    ]  # a TIER column joins them when a managed hook is loaded (test_managed.py)
    rows = table_rows(result.stdout)
    assert set(rows) == {"good", "quiet", "bad", "hookbus:protect_home"}  # the built-in home guard too
    assert list(rows)[0] == "hookbus:protect_home"  # what the user cannot change comes first
    guard = rows["hookbus:protect_home"]
    assert guard[1] == "PreToolUse" and guard[2].startswith("write_file|edit_file|bash|") and guard[3:6] == ["sync blocking", "builtin", "enabled"]
    assert rows["good"] == [
        "good", "PreToolUse", "*", "sync blocking", "command", "enabled", f"deny {entry['at']}"
    ]
    assert rows["quiet"] == ["quiet", "Stop", "*", "async", "command", "enabled", "never"]
    assert rows["bad"][:6] == ["bad", "?", "?", "?", "?", "broken (not loaded)"]  # shown, with its error
    skipped = result.stdout.split("1 problem (skipped files, a broken file whose last good version runs, or a hook that will fail):\n")[1]
    assert skipped == f"  {INVALID_BLOCKING}\n"


# -- trigger ------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_trigger_runs_the_hook_and_prints_the_record(tmp_path, home, write_hook):
    """A manual fire runs the hook now, prints what was recorded, and is recorded as
    an async fire marked manual."""
    write_hook("ok", event="Stop", command='echo ran > "$HOOKBUS_HOOK_DIR/ran"')

    result = run_cli(tmp_path, "trigger", "ok", home=home)

    assert result.returncode == 0
    assert result.stdout.count("\n") == 1
    printed = json.loads(result.stdout)
    [entry] = read_log(home)
    assert printed == entry
    assert (printed["hook_id"], printed["event"], printed["mode"], printed["status"]) == (
        "ok",
        "Stop",
        "async",
        "done",
    )
    assert printed["manual"] is True
    assert printed["error"] is None
    assert (home / "hooks" / "ok" / "ran").read_text() == "ran\n"
    [run] = read_state(home, "ok")["recent_runs"]
    assert (run["status"], run["async"]) == ("done", True)


@pytest.mark.timeout(60)
def test_trigger_of_a_failing_hook_exits_1(tmp_path, home, write_hook):
    """The exit code tells a script whether the hook worked."""
    write_hook("broken", event="Stop", command="echo bad >&2; exit 1")

    result = run_cli(tmp_path, "trigger", "broken", home=home)

    assert result.returncode == 1
    printed = json.loads(result.stdout)
    assert (printed["status"], printed["error"], printed["manual"]) == (
        "error",
        "exited with status 1: bad",
        True,
    )
    assert read_state(home, "broken")["last_status"] == "error"


@pytest.mark.timeout(60)
def test_trigger_unknown_id_exits_1_with_a_clear_message(tmp_path, home, write_hook):
    """A typo in the id is told plainly, naming the id and what is loaded."""
    write_hook("ok", event="Stop", command="true")

    result = run_cli(tmp_path, "trigger", "nope", home=home)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("hookbus trigger: no valid hook 'nope' in ")
    assert "(loaded: ok)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (home / "logs").exists()


# -- log ----------------------------------------------------------------------------------


@pytest.fixture
def fired_home(tmp_path: Path, home: Path, write_hook: Any) -> Path:
    """A home whose log holds three fires of two hooks, made through the CLI."""
    write_hook("guard", mode="sync", blocking=True, command="echo nope >&2; exit 2")
    write_hook("noter", event="Stop", mode="sync", command="echo noted")
    for event, stdin in (("PreToolUse", '{"tool_name": "bash"}'), ("Stop", "{}"), ("Stop", "{}")):
        run_cli(tmp_path, "emit", event, home=home, stdin=stdin)
    assert len(read_log(home)) == 3
    return home


@pytest.mark.timeout(60)
def test_log_shows_every_fire(tmp_path, fired_home):
    """`log` is the human view of the audit trail: one line per fire, oldest first."""
    entries = read_log(fired_home)

    result = run_cli(tmp_path, "log", home=fired_home)

    assert result.returncode == 0
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["AT", "EVENT", "HOOK", "MODE", "STATUS", "TOOK", "SAID", "ERROR"]
    # Beside the event, the call the hook decided on (the envelope's tool_name).
    assert [line.split()[:5] for line in lines] == [
        [entries[0]["at"], "PreToolUse(bash)", "guard", "sync", "deny"],
        [entries[1]["at"], "Stop", "noter", "sync", "context"],
        [entries[2]["at"], "Stop", "noter", "sync", "context"],
    ]
    assert lines[0].endswith("  nope")
    assert lines[1].endswith("  noted")


@pytest.mark.timeout(60)
def test_log_hook_filters_and_json_is_the_raw_lines(tmp_path, fired_home):
    """`--hook` narrows to one hook; `--json` prints exactly what the log file holds."""
    entries = read_log(fired_home)

    only = run_cli(tmp_path, "log", "--hook", "noter", home=fired_home)
    raw = run_cli(tmp_path, "log", "--json", home=fired_home)
    raw_guard = run_cli(tmp_path, "log", "--json", "--hook", "guard", home=fired_home)

    assert only.returncode == raw.returncode == raw_guard.returncode == 0
    assert [line.split()[2] for line in only.stdout.splitlines()[1:]] == ["noter", "noter"]
    assert [json.loads(line) for line in raw.stdout.splitlines()] == entries
    assert [json.loads(line) for line in raw_guard.stdout.splitlines()] == entries[:1]


@pytest.mark.timeout(60)
def test_log_json_prints_the_stored_line_unchanged(tmp_path, home):
    """`--json` promises the raw JSON lines: what the recorder wrote, unchanged, so tools
    reading either agree. A duration of 1.7346 ms once came back as 1.74ms, not 1.73ms."""
    stored = RunRecord(
        at="2026-01-02T03:04:05.678Z",
        hook_id="h",
        event="Stop",
        mode="sync",
        status="allow",
        duration=0.0017346,  # a run of 1.7346 ms, as the recorder measured it
        decision={"behavior": "allow"},
    ).log_entry()
    logs = home / "logs" / "hooks"
    logs.mkdir(parents=True)
    (logs / "2026-01-02.jsonl").write_text(json.dumps(stored) + "\n")

    result = run_cli(tmp_path, "log", "--json", home=home)

    assert result.returncode == 0
    assert [json.loads(line) for line in result.stdout.splitlines()] == [stored]


@pytest.mark.timeout(90)
def test_log_follow_prints_new_fires(tmp_path, home, write_hook):
    """`log --follow` is how a user watches hooks live: after the history, a fire
    recorded while it runs must show up. (A fire landing just as it switches from the
    history to following may be missed, so the test emits until one appears.)"""
    write_hook("noter", event="Stop", mode="sync", command=TURN_COMMAND)
    with HookBus(home) as bus:
        assert bus.emit("Stop", {"turn": 0}).context == "turn 0"
    with Background(tmp_path, "log", "--follow", "--json", "--home", str(home)) as follow:
        history = follow.line(timeout=30)
        for path in (home / "logs" / "hooks").glob("*.jsonl"):
            with open(path, "ab") as handle:
                handle.write(b"[1]\n")  # a line that is JSON but not a record: skipped
        line = None
        turn = 0
        with HookBus(home) as bus:
            while line is None and turn < 15:
                turn += 1
                assert bus.emit("Stop", {"turn": turn}).context == f"turn {turn}"
                bus.read_runs("noter", 1)  # flushes the record to the file
                line = follow.line(timeout=1)
        still_following = follow.proc.poll() is None
        code = follow.terminate()
        stderr = follow.stderr

    assert history is not None
    assert json.loads(history)["decision"] == {"behavior": "context", "context": "turn 0"}
    assert line is not None, "no new fire was printed by log --follow"
    printed = json.loads(line)
    assert (printed["hook_id"], printed["event"], printed["status"]) == ("noter", "Stop", "context")
    assert printed["decision"] == {"behavior": "context", "context": f"turn {turn}"}
    assert printed in read_log(home)
    assert still_following, "log --follow stopped by itself"
    assert code == -signal.SIGTERM
    assert "Traceback" not in stderr


# -- the kill switch ----------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("switch", ["none", "settings", "env"])
def test_kill_switch_allows_and_fires_nothing(tmp_path, home, write_hook, switch):
    """With the engine switched off every event is allowed and no hook runs or is
    recorded (the "none" case shows the same home denies when hooks are on)."""
    write_hook("guard", mode="sync", blocking=True, command='touch "$HOOKBUS_HOOK_DIR/fired"; exit 2')
    write_hook("side", command='touch "$HOOKBUS_HOOK_DIR/fired"')
    env = cli_env(tmp_path)
    if switch == "settings":
        (home / "settings.json").write_text(json.dumps({"features": {"hooks": False}}))
    elif switch == "env":
        env["VIX_DISABLE_HOOKS"] = "1"

    result = run_cli(tmp_path, "emit", "PreToolUse", home=home, stdin='{"tool_name": "bash"}', env=env)

    fired = sorted(p.parent.name for p in (home / "hooks").glob("*/fired"))
    if switch == "none":
        assert result.returncode == 2
        assert json.loads(result.stdout)["behavior"] == "deny"
        assert fired == ["guard", "side"]
        assert len(read_log(home)) == 2
    else:
        assert result.returncode == 0
        assert_one_json_object(result.stdout, {"behavior": "allow"})
        assert fired == []
        assert read_log(home) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("switch", "reason"),
    [
        ("settings", 'settings.json has "features": {"hooks": false}'),
        ("env", "VIX_DISABLE_HOOKS is set in the environment"),
    ],
)
def test_kill_switch_is_shown_by_list_and_refused_by_trigger(
    tmp_path, home, write_hook, switch, reason
):
    """With the engine off, `list` says so and why, and a manual trigger runs nothing."""
    write_hook("side", event="Stop", command='touch "$HOOKBUS_HOOK_DIR/fired"')
    env = cli_env(tmp_path)
    if switch == "settings":
        (home / "settings.json").write_text(json.dumps({"features": {"hooks": False}}))
    else:
        env["VIX_DISABLE_HOOKS"] = "1"

    listed = run_cli(tmp_path, "list", home=home, env=env)
    triggered = run_cli(tmp_path, "trigger", "side", home=home, env=env)

    assert listed.returncode == 0
    assert listed.stdout.endswith(f"\nyour hooks are off (managed hooks and the home guard still run): {reason}\n")
    assert triggered.returncode == 1
    assert triggered.stdout == ""
    assert triggered.stderr == f"hookbus trigger: hooks are disabled: {reason}\n"
    assert not (home / "hooks" / "side" / "fired").exists()
    assert read_log(home) == []


# -- demo and help ------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_demo_tells_the_whole_story(tmp_path):
    """`hookbus demo` is a newcomer's first run: it must work on a bare machine and show
    each part of the contract, then clean up its throwaway home."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    result = run_cli(tmp_path, "demo", env=cli_env(tmp_path, TMPDIR=str(scratch)))

    assert result.returncode == 0
    assert "Traceback" not in result.stderr
    out = result.stdout
    assert re.search(r"PreToolUse write_file \.env\s+-> deny ", out)
    assert re.search(r"PreToolUse write_file /etc/motd\s+-> modify\s+new input \{", out)
    assert re.search(r"-> context 'This project runs its tests", out)
    assert "recursion guard" in out
    assert re.search(r"git push origin main'\s+-> deny\s+hook 'scan-before-push' denied: failed closed: the hook crashed", out)
    assert re.search(r"HOME/hooks/x/hook.json -> deny\s+hook 'hookbus:protect_home' denied: write_file targets ", out)
    assert "state.json" in out
    assert list(scratch.iterdir()) == []


#: The verbs of DESIGN.md's interface.
VERBS = ["emit", "list", "validate", "trigger", "log", "watch", "plugins", "schema", "demo", "new", "status"]


@pytest.mark.timeout(60)
def test_top_level_help(tmp_path):
    """`hookbus --help` works and lists the verbs."""
    result = run_cli(tmp_path, "--help")

    assert result.returncode == 0
    assert result.stdout.startswith("usage: hookbus ")
    for verb in VERBS:
        assert verb in result.stdout
    assert result.stderr == ""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("verb", VERBS)
def test_verb_help(tmp_path, verb):
    """Each verb of the public interface answers --help with its own usage."""
    result = run_cli(tmp_path, verb, "--help")

    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: hookbus {verb} ")
    assert result.stderr == ""
