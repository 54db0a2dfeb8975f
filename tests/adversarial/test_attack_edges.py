"""The edges under attack: ``hookbus emit`` (quick path and full command line), ``hookbus
serve``, ``hookbus.serve.client`` and the Claude Code and Gemini CLI bridges.

Promise 8: hookbus's own trouble is never a host's allow. Claude Code and Gemini CLI run a
tool on anything but exit 2 or a JSON deny, so when hookbus cannot decide (an envelope it
cannot read whole, a server that stopped, died or sheds load), it answers as the home's
hooks answer for a failure: a fail-closed hook (``"on_error": "deny"``) denies, the rest
fail open, visibly (stderr, the record, explain).

Promise 9: every bound holds, in bytes, and is the same on every path: nesting depth, line
size, the server's memory and its requests in flight.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import FULL, attack
from conftest import hook_processes, read_log, turn_off_home_guard
from hookbus.serve.client import AsyncClient, Client, NoAnswer, NotStarted
from hookbus.deepjson import MAX_NESTING
from servekit import Raw, Served, environment, wait_for

pytestmark = pytest.mark.timeout(180)

Writer = Callable[..., Path]
HOOKBUS = str(Path(sys.executable).parent / "hookbus")
EDGES = 8
BOUNDS = 9


def run(*arguments: str, stdin: str | bytes = "", env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The installed ``hookbus`` (the quick path first, as a host runs it)."""
    data = stdin.encode() if isinstance(stdin, str) else stdin
    result = subprocess.run([HOOKBUS, *arguments], input=data, capture_output=True, env=env, timeout=timeout)
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


def guard(write_hook: Writer, on_error: str = "deny", hook_id: str = "guard", event: str = "PreToolUse", matcher: str = "bash|Bash", **fields: Any) -> Path:
    """A guard that denies ``rm -rf`` by exit 2, after reading the whole envelope."""
    fields.setdefault("command", "grep -q 'rm -rf' && { echo 'no rm -rf' >&2; exit 2; }; exit 0")
    written: Path = write_hook(hook_id, event=event, matcher=matcher, mode="sync", blocking=True, on_error=on_error, **fields)
    turn_off_home_guard(written.parents[2])  # what the user's guard decides is under attack here
    return written


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def vix_envelope(extra: str) -> str:
    return '{"tool_name":"bash","tool_input":{"command":"rm -rf /","x":' + extra + "}}"


def claude_envelope(extra: str) -> str:
    return '{"hook_event_name":"PreToolUse","session_id":"s","cwd":"/tmp","tool_name":"Bash","tool_input":{"command":"rm -rf /","x":' + extra + "}}"


def gemini_envelope(extra: str) -> str:
    return '{"hook_event_name":"BeforeTool","session_id":"s","cwd":"/tmp","tool_name":"run_shell_command","tool_input":{"command":"rm -rf /","x":' + extra + "}}"


def decided(path: str, result: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """(behavior, reason) of whatever a path printed: emit's decision, Claude Code's or
    Gemini CLI's output."""
    assert "Traceback" not in result.stderr, result.stderr
    out = result.stdout.strip()
    if path.startswith("emit"):
        decision = json.loads(out)
        assert result.returncode == (2 if decision["behavior"] == "deny" else 0)
        return decision["behavior"], decision.get("reason", "")
    assert result.returncode == 0, (result.returncode, result.stderr)
    answer = json.loads(out) if out else {}
    if path.startswith("claude"):
        specific = answer.get("hookSpecificOutput", {})
        if specific.get("permissionDecision") == "deny":
            return "deny", specific["permissionDecisionReason"]
        return "allow", ""
    if answer.get("decision") == "deny":
        return "deny", answer["reason"]
    return "allow", ""


PATHS = ["emit", "emit-no-server", "claude", "claude-no-server", "gemini", "gemini-no-server"]


def through(path: str, home: Path, extra: str) -> subprocess.CompletedProcess[str]:
    verb = {"emit": ("emit", "PreToolUse"), "claude": ("claude-code-hook",), "gemini": ("gemini-cli-hook",)}[path.split("-")[0]]
    envelope = {"emit": vix_envelope, "claude": claude_envelope, "gemini": gemini_envelope}[path.split("-")[0]](extra)
    flags = ("--no-server",) if path.endswith("no-server") else ()
    return run(*verb, "--home", str(home), *flags, stdin=envelope)


# -- (1) nesting: the same depth on every path, and a deeper envelope still decided ---------


@pytest.mark.parametrize("on_error", ["deny", "allow"])
def test_every_path_accepts_the_same_nesting_and_decides_a_deeper_envelope_by_on_error(
    home: Path, write_hook: Writer, on_error: str
) -> None:
    """An envelope whose tool input a model nested deep: up to MAX_NESTING levels the guard
    runs and denies on every path; one level more, every path says hookbus could not
    decide, and the guard's on_error decides: deny when fail-closed, allow (said) else."""
    guard(write_hook, on_error)
    inside = MAX_NESTING - 2  # the envelope and its tool_input are two levels
    depths = [1_000, inside, inside + 1] + ([100_000] if FULL else [])
    outcomes: dict[tuple[str, int], tuple[str, str]] = {}
    with Served(home):
        for depth in depths:
            for path in PATHS:
                with attack(EDGES, f"{path}: a tool input nested {depth:,} deep, guard on_error {on_error}"):
                    result = through(path, home, nested(depth))
                    outcomes[path, depth] = decided(path, result)
                    behavior, reason = outcomes[path, depth]
                    if depth <= inside:
                        assert (behavior, "no rm -rf" in reason) == ("deny", True), (path, depth, result.stderr)
                    elif on_error == "deny":
                        assert behavior == "deny" and "nested deeper than 10,000 levels" in reason, (path, result)
                    else:
                        assert behavior == "allow" and "nested deeper than 10,000 levels" in result.stderr, (path, result)
    for depth in depths:  # a differential: every path agrees at every depth
        assert len({outcomes[path, depth][0] for path in PATHS}) == 1, {path: outcomes[path, depth] for path in PATHS}


def test_a_fail_open_that_hookbus_causes_is_on_stderr_in_the_record_and_in_explain(home: Path, write_hook: Writer) -> None:
    with attack(EDGES, "a too-deep envelope under a fail-open guard is visible everywhere"):
        guard(write_hook, "allow")
        envelope = vix_envelope(nested(MAX_NESTING))
        result = run("emit", "PreToolUse", "--home", str(home), stdin=envelope)
        assert (result.returncode, json.loads(result.stdout)) == (0, {"behavior": "allow"})
        assert "hook 'guard' failed open (could not be decided by hookbus): the envelope is nested deeper" in result.stderr
        [entry] = read_log(home)
        assert entry["error"] == "the envelope is nested deeper than 10,000 levels"
        assert entry["note"].startswith("not run: hookbus could not decide")
        explained = run("explain", "PreToolUse", "--home", str(home), "--json", stdin=envelope)
        [verdict] = json.loads(explained.stdout)["hooks"]
        assert verdict["matched"] and verdict["result"]["error"] == "the envelope is nested deeper than 10,000 levels"


def test_an_envelope_hookbus_cannot_read_at_all_is_decided_by_the_bridges(home: Path, write_hook: Writer) -> None:
    """Not UTF-8, not JSON: the event is read where it can be, and a fail-closed guard of
    that event denies; with no fail-closed hook, the bridge exits 1 (no opinion, shown to
    the user by both hosts) with the reason."""
    cases = {
        "not UTF-8": (b'{"hook_event_name":"EVENT","session_id":"s","tool_name":"TOOL","tool_input":{"command":"\xff"}}', "deny"),
        "not JSON, event readable": (b'{"hook_event_name": "EVENT", "tool_input": {', "deny"),
        "no event at all": (b"\x00\x01garbage", "exit 2"),
    }
    hosts = {"claude-code-hook": (b"PreToolUse", b"Bash"), "gemini-cli-hook": (b"BeforeTool", b"run_shell_command")}
    guard(write_hook, "deny", matcher="bash")
    for name, (template, expected) in cases.items():
        for verb, (event, tool) in hosts.items():
            with attack(EDGES, f"{verb}: an envelope that is {name}"):
                stdin = template.replace(b"EVENT", event).replace(b"TOOL", tool)
                result = run(verb, "--home", str(home), stdin=stdin)
                assert "Traceback" not in result.stderr
                if expected == "exit 2":
                    assert result.returncode == 2 and "hookbus could not decide" in result.stderr
                else:
                    assert result.returncode == 0 and "deny" in result.stdout, result
    import shutil

    shutil.rmtree(home / "hooks" / "guard")
    result = run("claude-code-hook", "--home", str(home), stdin=b"garbage")
    assert result.returncode == 1 and "no fail-closed hook could fire" in result.stderr


# -- (4) over the server's line limit ----------------------------------------------------


@pytest.mark.timeout(300)
def test_an_envelope_over_the_servers_line_limit_gets_the_same_decision_on_every_path(home: Path, write_hook: Writer) -> None:
    guard(write_hook, "allow", matcher="write_file|Write", command="""grep -q '"path":".env"\\|"file_path":".env"' && { echo protected >&2; exit 2; }; exit 0""")
    content = "x" * (17 * 1024 * 1024)
    vix = json.dumps({"tool_name": "write_file", "tool_input": {"path": ".env", "content": content}}, separators=(",", ":"))
    claude = json.dumps(
        {"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "Write", "tool_input": {"file_path": ".env", "content": content}},
        separators=(",", ":"),
    )
    with Served(home):
        for name, argv, stdin in (
            ("emit", ("emit", "PreToolUse"), vix),
            ("emit --no-server", ("emit", "PreToolUse", "--no-server"), vix),
            ("claude-code-hook", ("claude-code-hook",), claude),
        ):
            with attack(BOUNDS, f"{name}: a 17 MiB Write through a server"):
                result = run(*argv, "--home", str(home), stdin=stdin, timeout=240)
                assert "Traceback" not in result.stderr and "Broken pipe" not in result.stderr
                assert "protected" in result.stdout, (name, result.returncode, result.stderr)
                assert result.returncode == (0 if name == "claude-code-hook" else 2)


# -- (5, 6) a stopped, wedged or dead server ---------------------------------------------------


class SignalWhenItRuns:
    """Sends ``signum`` to the server as soon as the slow guard of ``directory`` starts one
    more run (its first command adds a line to its mark file; it then sleeps 1 s): the
    server is stopped, or killed, while the guard runs, however slowly the machine got
    there (a fixed delay could fire before the request reached the server)."""

    def __init__(self, served: Served, directory: Path, signum: int = signal.SIGSTOP, timeout: float = 30.0) -> None:
        self._served = served
        self._directory = directory
        self._signum = signum
        self._runs = runs_of(directory)
        self._deadline = time.monotonic() + timeout
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while runs_of(self._directory) <= self._runs:
            if self._done.wait(0.005) or time.monotonic() > self._deadline:
                return  # the guard never ran: the test's own checks say so
        self._served.send(self._signum)

    def join(self) -> None:
        self._done.set()
        self._thread.join()


def stopped_while_it_runs(served: Served, directory: Path) -> SignalWhenItRuns:
    return SignalWhenItRuns(served, directory)


@pytest.fixture
def slow_guard(home: Path, write_hook: Writer) -> Callable[[str], Path]:
    """A guard that takes a second in the server, and leaves a mark each time it runs."""

    def make(on_error: str) -> Path:
        return guard(
            write_hook, on_error, timeout="3s",
            command='cat >/dev/null; echo ran >> "$HOOKBUS_HOOK_DIR/ran"; sleep 1; exit 0',
        )

    return make


def runs_of(directory: Path) -> int:
    marks = directory / "ran"
    return len(marks.read_text().splitlines()) if marks.exists() else 0


#: emit by the quick path, by the full command line (an envelope with NaN is handed to it),
#: and the bridges.
STALL_PATHS = {
    "quick path": (("emit", "PreToolUse"), '{"tool_name":"bash","tool_input":{"command":"ls"}}'),
    "full command line": (("emit", "PreToolUse"), '{"tool_name":"bash","tool_input":{"command":"ls"},"n":NaN}'),
    "claude-code-hook": (("claude-code-hook",), '{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}'),
    "gemini-cli-hook": (("gemini-cli-hook",), '{"hook_event_name":"BeforeTool","session_id":"s","tool_name":"run_shell_command","tool_input":{"command":"ls"}}'),
}


@pytest.mark.parametrize("path", list(STALL_PATHS))
def test_a_server_stopped_before_it_starts_the_request_is_left_and_the_hooks_run_here(
    home: Path, slow_guard: Callable[[str], Path], path: str
) -> None:
    with attack(EDGES, f"{path}: the server is stopped (SIGSTOP) before the request"):
        directory = slow_guard("deny").parent
        argv, stdin = STALL_PATHS[path]
        with Served(home) as served:
            served.send(signal.SIGSTOP)
            try:
                started = time.monotonic()
                result = run(*argv, "--home", str(home), stdin=stdin, timeout=60)
                took = time.monotonic() - started
            finally:
                served.send(signal.SIGCONT)
        assert "did not start the request" in result.stderr and "running in-process" in result.stderr
        behavior, _ = decided(path if path.startswith(("claude", "gemini")) else "emit", result)
        assert behavior == "allow"  # the guard ran here, and allowed
        assert runs_of(directory) == 1  # here, and never in the server, which was told too late
        assert took < 30  # the start window and an in-process run, not for ever


@pytest.mark.parametrize("path", list(STALL_PATHS))
@pytest.mark.parametrize("on_error", ["deny", "allow"])
def test_a_server_stopped_while_its_hooks_run_is_decided_by_on_error_and_nothing_runs_twice(
    home: Path, slow_guard: Callable[[str], Path], path: str, on_error: str
) -> None:
    with attack(EDGES, f"{path}: the server is stopped (SIGSTOP) while a guard (on_error {on_error}) runs"):
        directory = slow_guard(on_error).parent
        argv, stdin = STALL_PATHS[path]
        with Served(home) as served:
            timer = stopped_while_it_runs(served, directory)
            try:
                started = time.monotonic()
                result = run(*argv, "--home", str(home), stdin=stdin, timeout=60)
                took = time.monotonic() - started
            finally:
                timer.join()
                served.send(signal.SIGCONT)
        assert "gave no answer in time" in result.stderr, result.stderr
        behavior, reason = decided(path if path.startswith(("claude", "gemini")) else "emit", result)
        assert behavior == on_error
        if on_error == "deny":
            assert "could not be decided by hookbus" in reason
        assert runs_of(directory) == 1  # in the server only
        assert took < 30  # the guard's 3 s timeout, the grace and the margin


@pytest.mark.parametrize("path", list(STALL_PATHS))
def test_a_server_killed_while_a_fail_closed_guard_runs_is_a_deny(home: Path, slow_guard: Callable[[str], Path], path: str) -> None:
    with attack(EDGES, f"{path}: the server is killed (SIGKILL) while a fail-closed guard runs"):
        directory = slow_guard("deny").parent
        argv, stdin = STALL_PATHS[path]
        with Served(home) as served:
            timer = SignalWhenItRuns(served, directory, signal.SIGKILL)
            try:
                result = run(*argv, "--home", str(home), stdin=stdin, timeout=60)
            finally:
                timer.join()
        behavior, reason = decided(path if path.startswith(("claude", "gemini")) else "emit", result)
        assert behavior == "deny" and "closed the connection before answering, after it had started the hooks" in reason


def test_the_python_clients_bound_their_wait_on_a_stopped_server(home: Path, slow_guard: Callable[[str], Path]) -> None:
    import asyncio

    directory = slow_guard("deny").parent
    bash = {"tool_name": "bash", "tool_input": {"command": "ls"}}
    with Served(home) as served:
        path = served.wait_ready()
        with attack(EDGES, "hookbus.serve.client: a server stopped before the request"):
            served.send(signal.SIGSTOP)
            try:
                with Client(path, home=home) as client, pytest.raises(NotStarted, match="nothing ran"):
                    client.emit("PreToolUse", bash)
            finally:
                served.send(signal.SIGCONT)
        with attack(EDGES, "hookbus.serve.client: a server stopped while its hooks run"):
            timer = stopped_while_it_runs(served, directory)
            try:
                with Client(path, home=home) as client, pytest.raises(NoAnswer, match="may have run"):
                    client.emit("PreToolUse", bash)
            finally:
                timer.join()
                served.send(signal.SIGCONT)

        async def both() -> None:
            async with await AsyncClient.connect(path, home=home) as client:
                served.send(signal.SIGSTOP)
                try:
                    with pytest.raises(NotStarted):
                        await client.emit("PreToolUse", bash)
                finally:
                    served.send(signal.SIGCONT)
            async with await AsyncClient.connect(path, home=home) as client:
                timer = stopped_while_it_runs(served, directory)
                try:
                    with pytest.raises(NoAnswer):
                        await client.emit("PreToolUse", bash)
                finally:
                    timer.join()
                    served.send(signal.SIGCONT)

        with attack(EDGES, "hookbus.serve.client.AsyncClient: a server stopped before, and while, its hooks run"):
            asyncio.run(both())


# -- (7) another client of the same user takes what the server has --------------------------


def limited_server(home: Path, **limits: int) -> Served:
    settings = "; ".join(f"server.{name} = {value}" for name, value in limits.items())
    code = f"import sys; import hookbus.serve.server as server; {settings}; from hookbus.cli.verbs import main; sys.exit(main(sys.argv[1:]))"
    return Served(home, python=("-c", code))


def test_a_client_that_fills_the_servers_requests_cannot_open_a_good_clients_guard(home: Path, write_hook: Writer) -> None:
    with attack(EDGES, "many slow hooks in flight from another client: a good client's guard still denies"):
        guard(write_hook, "deny")
        write_hook("slow", event="Stop", mode="sync", command=f"sleep {SLEEP}", timeout="20s")
        with limited_server(home, MAX_REQUESTS_RUNNING=4) as served:
            hogs = [Raw(served.wait_ready()) for _ in range(2)]
            try:
                for number, hog in enumerate(hogs):
                    for index in range(2):
                        hog.request(f"{number}-{index}", "emit", event="Stop")
                wait_for(lambda: len(hook_processes(home, "sleep")) >= 4, message="the slow hooks to run")
                result = run("emit", "PreToolUse", "--home", str(home), stdin=vix_envelope("0"))
                assert "server busy" in result.stderr and "running in-process" in result.stderr
                assert result.returncode == 2 and "no rm -rf" in json.loads(result.stdout)["reason"]
            finally:
                for hog in hogs:
                    hog.close()


#: How long the slow hooks sleep (they are counted by their home: conftest.hook_processes).
SLEEP = "7.31"


# -- (8) memory: the server's requests are bounded in bytes ------------------------------------


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_lines_that_would_parse_to_gigabytes_are_shed_without_being_parsed(home: Path, write_hook: Writer) -> None:
    with attack(BOUNDS, "three 16 MiB envelopes of [{},{},...] in flight at once"):
        write_hook("slow", event="Stop", mode="sync", command="cat >/dev/null; sleep 2", timeout="10s")
        body = ",".join(["{}"] * 5_400_000)  # 16.2 MB of text, under the 16 MiB a line may hold
        line = ('{"jsonrpc":"2.0","id":1,"method":"emit","params":{"event":"Stop","envelope":{"x":[' + body + "]}}}\n").encode()
        with Served(home) as served:
            path = served.wait_ready()
            before = rss_mib(served.process.pid)
            clients = [Raw(path, timeout=60) for _ in range(3)]
            try:
                for client in clients:
                    client.send(line)
                answers = [client.answer() for client in clients]
            finally:
                for client in clients:
                    client.close()
            assert all(answer["error"]["code"] == -32007 for answer in answers), answers
            assert "parsed" in answers[0]["error"]["message"]
            assert rss_mib(served.process.pid) - before < 200  # 3 x 16 MiB of text at most, never 1.3 GiB
            with Client(path) as client:
                assert client.ping()["pid"] == served.process.pid


def test_unfinished_lines_past_the_budget_are_shed(home: Path) -> None:
    with attack(BOUNDS, "five clients each sending 15 MiB of a line they never end"):
        with Served(home) as served:
            path = served.wait_ready()
            chunk = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (15 * 1024 * 1024)
            clients = [Raw(path, timeout=30) for _ in range(5)]
            try:
                for client in clients[:4]:
                    client.send(chunk)
                try:
                    clients[4].send(chunk)
                except OSError:
                    pass  # shed while it sent
                answer = json.loads(clients[4].line())
                assert answer["error"]["code"] == -32007 and "unfinished" in answer["error"]["message"]
                try:
                    assert clients[4].line() == b""  # and closed
                except ConnectionResetError:
                    pass  # closed with what it sent still unread: a reset says so
                assert rss_mib(served.process.pid) < 400
            finally:
                for client in clients:
                    client.close()
            with Client(path) as client:
                assert client.ping()["pid"] == served.process.pid


# -- (12-15) what a client is told, and by whom ------------------------------------------------


def test_a_home_spelled_through_a_link_and_dotdot_is_the_home_the_kernel_reads(tmp_path: Path) -> None:
    """``--home A/lnk/../h``: the kernel reads it through the link. The bus, the socket's
    path and the server's check of the home must all read it so, or another home's server
    (the one a lexical reading names, A/h) answers for it."""
    with attack(10, "--home A/lnk/../h with a server of A/h running"):
        real = tmp_path / "h"  # what the kernel reads: lnk's target is tmp_path/sub
        (real / "hooks" / "guard").mkdir(parents=True)
        (real / "hooks" / "guard" / "hook.json").write_text(
            json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "blocking": True, "command": "cat >/dev/null; echo no >&2; exit 2"})
        )
        (tmp_path / "sub").mkdir()
        other = tmp_path / "A" / "h"  # what a lexical reading says: a home with no hooks
        (other / "hooks").mkdir(parents=True)
        (tmp_path / "A" / "lnk").symlink_to(tmp_path / "sub")
        spelled = f"{tmp_path}/A/lnk/../h"
        local = run("emit", "PreToolUse", "--home", spelled, "--no-server", stdin="{}")
        with Served(other):
            served = run("emit", "PreToolUse", "--home", spelled, stdin="{}")
        assert (local.returncode, local.stdout) == (served.returncode, served.stdout) == (2, '{"behavior": "deny", "reason": "hook \'guard\' denied: no"}\n')


def test_an_empty_load_plugins_means_the_same_with_and_without_a_server(home: Path, write_hook: Writer) -> None:
    """HOOKBUS_LOAD_PLUGINS='' loads only the built-in essentials in-process (no workflow
    runner: the hook below is not loaded there). A server has its own environment, so a
    client that has the variable set runs in-process: both answers agree."""
    with attack(10, "HOOKBUS_LOAD_PLUGINS='' with a server running"):
        write_hook("veto", matcher="bash", mode="sync", blocking=True, workflow={"steps": [{"bash": "echo 'BLOCK: no'"}]})
        env = environment(HOOKBUS_LOAD_PLUGINS="")
        local = run("emit", "PreToolUse", "--home", str(home), "--no-server", env=env, stdin=vix_envelope("0"))
        with Served(home):
            served = run("emit", "PreToolUse", "--home", str(home), env=env, stdin=vix_envelope("0"))
            everything = run("emit", "PreToolUse", "--home", str(home), stdin=vix_envelope("0"))
        assert (served.returncode, served.stdout) == (local.returncode, local.stdout) == (0, '{"behavior": "allow"}\n')
        assert everything.returncode == 2  # without the variable, the workflow runner is there


def test_input_that_is_not_utf8_is_one_line_and_exit_1(home: Path, tmp_path: Path) -> None:
    with attack(EDGES, "emit --input FILE holding bytes that are not UTF-8"):
        bad = tmp_path / "bad.json"
        bad.write_bytes(b'{"tool_name": "\xff\xfe"}')
        for argv in (("emit", "PreToolUse", "--input", str(bad)), ("emit", "PreToolUse", "--no-server", "--input", str(bad))):
            result = run(*argv, "--home", str(home))
            assert result.returncode == 1 and result.stderr.count("\n") == 1
            assert "not UTF-8" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK), reason="needs root, and a system python to run a client as another user")
def test_a_client_the_server_refuses_runs_in_process(tmp_path: Path) -> None:
    """A server run by root, its socket loosened; a client of another user reaches it, is
    refused by peer credentials, and runs its hooks itself (nothing ran in the server)."""
    with attack(EDGES, "a client refused by the server's peer-credential check"):
        import shutil
        import tempfile

        shared = Path(tempfile.mkdtemp(prefix="hookbus-refused-", dir="/tmp"))
        try:
            shared.chmod(0o755)
            home = shared / "home"
            (home / "hooks" / "guard").mkdir(parents=True)
            for directory in (home, home / "hooks", home / "hooks" / "guard"):
                directory.chmod(0o755)
            spec = home / "hooks" / "guard" / "hook.json"
            spec.write_text(json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "blocking": True, "command": "cat >/dev/null; echo no >&2; exit 2"}))
            spec.chmod(0o644)
            socket_path = shared / "hookbus.sock"
            with Served(home, "--socket", str(socket_path)) as served:
                served.wait_ready()
                socket_path.chmod(0o666)
                from otheruser import python_path

                paths = python_path(65534)  # this checkout, or a copy uid 65534 can reach
                result = subprocess.run(
                    ["/usr/bin/python3", "-m", "hookbus", "emit", "PreToolUse", "--home", str(home), "--socket", str(socket_path)],
                    input='{"tool_name":"bash"}', capture_output=True, text=True, timeout=60, user=65534, group=65534,
                    extra_groups=[], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(paths), "HOME": str(shared)},
                    cwd=str(shared),
                )
            # Refused before a byte is read: the client hears "permission denied", or, when the
            # server closed first, a broken pipe on its send. Either way nothing ran there.
            assert "running in-process" in result.stderr, result.stderr
            assert any(word in result.stderr for word in ("permission denied", "Broken pipe", "reset by peer")), result.stderr
            assert result.returncode == 2 and "denied" in result.stdout
        finally:
            shutil.rmtree(shared, ignore_errors=True)


# -- a differential: through a server and in-process, over odd envelopes -------------------

ODD_ENVELOPES = {
    "empty": "",
    "not JSON": "{oops",
    "not an object": "[1, 2]",
    "NaN": '{"tool_name":"bash","tool_input":{"command":"rm -rf /","n":NaN}}',
    "a lone surrogate": '{"tool_name":"bash","tool_input":{"command":"rm -rf /\\udce9"}}',
    "a repeated key": '{"tool_name":"read_file","tool_name":"bash","tool_input":{"command":"rm -rf /"}}',
    "999 deep": vix_envelope(nested(999)),
    "1,001 deep": vix_envelope(nested(1_001)),
    "a deep key path": vix_envelope('{"a":' * 3_000 + "1" + "}" * 3_000),
    "wide": vix_envelope("[" + ",".join(["{}"] * 200_000) + "]"),
    "10,001 deep": vix_envelope(nested(MAX_NESTING - 1)),
    "recursion guard": '{"tool_name":"bash","origin":"vix","tool_input":{"command":"rm -rf /"}}',
    "a 1 MiB tool name": '{"tool_name":"' + "b" * (1 << 20) + '","tool_input":{"command":"rm -rf /"}}',
}


@pytest.mark.parametrize("name", list(ODD_ENVELOPES))
def test_an_emit_through_a_server_and_in_process_agree_on_odd_envelopes(home: Path, write_hook: Writer, name: str) -> None:
    with attack(EDGES, f"emit through a server and in-process: {name}"):
        guard(write_hook, "deny", matcher=".*")
        stdin = ODD_ENVELOPES[name]
        local = run("emit", "PreToolUse", "--home", str(home), "--no-server", stdin=stdin)
        with Served(home):
            served = run("emit", "PreToolUse", "--home", str(home), stdin=stdin)
        assert "Traceback" not in local.stderr + served.stderr
        assert (served.returncode, served.stdout) == (local.returncode, local.stdout), (local, served)
