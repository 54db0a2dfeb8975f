"""The gate (``hookbus/hosts/gate.sh``), run by a real bash against a real ``hookbus serve
--http``: it must print what the command bridge prints for the same stdin and home, exit
with its code, and fall back to the bridge, fail closed, whenever the server cannot answer
whole: down, killed mid-request, wedged, refusing the token, or not the server at all."""

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

from conftest import HookWriter
from servekit import Served, environment, wait_for

from hookbus.hosts.gate import gate_command, gate_script

pytestmark = pytest.mark.timeout(180)

BASH = {
    "session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/", "hook_event_name": "PreToolUse",
    "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "t-1",
}
DENY_RM = "grep -q 'rm -rf' && echo '{\"behavior\": \"deny\", \"reason\": \"no rm é\"}' || true"
REWRITE = (
    "grep -q rewrite-me && echo '{\"behavior\": \"modify\", \"input\": {\"command\": \"echo rewritten ☃\"}}' || true"
)


def bridge_words(home: Path, verb: str = "claude-code-hook") -> list[str]:
    return [sys.executable, "-m", "hookbus", verb, "--home", str(home)]


def gate_words(home: Path, verb: str = "claude-code-hook") -> list[str]:
    host = {"claude-code-hook": "claude-code", "gemini-cli-hook": "gemini-cli", "codex-hook": "codex"}[verb]
    return ["bash", str(gate_script()), host, str(home), "--", *bridge_words(home, verb)]


class Ran:
    def __init__(self, code: int, stdout: bytes, stderr: bytes) -> None:
        self.code = code
        self.stdout = stdout
        self.stderr = stderr

    @property
    def said(self) -> list[str]:
        """stderr's lines, less the gate's own (which say why it ran the bridge)."""
        return [line for line in self.stderr.decode("utf-8", "replace").splitlines() if not line.startswith("hookbus gate:")]

    def __repr__(self) -> str:
        return f"Ran({self.code}, {self.stdout[:400]!r}, {self.stderr[:600]!r})"


def run(words: list[str], data: bytes, *, on_socket: bool = False, env: dict[str, str] | None = None, timeout: float = 90) -> Ran:
    """``words`` with ``data`` on stdin: a pipe, or (``on_socket``) a Unix socket, as
    Claude Code gives it."""
    env = env if env is not None else environment(CLAUDE_PROJECT_DIR=None, HOOKBUS_HTTP_TOKEN=None)
    if not on_socket:
        result = subprocess.run(words, input=data, capture_output=True, timeout=timeout, env=env)
        return Ran(result.returncode, result.stdout, result.stderr)
    ours, theirs = socket.socketpair()
    with ours:
        with theirs:
            process = subprocess.Popen(words, stdin=theirs, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

        def feed() -> None:
            try:
                ours.sendall(data)
                ours.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # it stopped reading (it answered from what it read)

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        feeder.join(timeout)
    return Ran(process.returncode, stdout, stderr)


@pytest.fixture
def serve(home: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(**env: str | None) -> Served:
        served = Served(home, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None, **env))
        started.append(served)
        wait_for(lambda: (home / "run" / "http.gate").exists(), 30, "the gate's run file")
        return served

    yield start
    for served in started:
        served.stop()


def hooks(write_hook: HookWriter) -> None:
    write_hook("deny-rm", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=DENY_RM)
    write_hook("rewrite", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=REWRITE)
    write_hook("context", event="UserPromptSubmit", mode="sync", command="echo '{\"behavior\": \"context\", \"context\": \"careful ✓\"}'")
    write_hook("closed", event="PreToolUse", matcher="write_file", mode="sync", blocking=True, on_error="deny", command="exit 1")
    write_hook("stop", event="Stop", mode="sync", command="true")


def envelope(**fields: Any) -> bytes:
    return json.dumps({**BASH, **fields}, ensure_ascii=False).encode()


def deep(levels: int) -> bytes:
    return b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf x", "n": ' + b"[" * levels + b"]" * levels + b"}}"


#: Odd and ordinary stdins: each must come out of the gate as it comes out of the bridge.
CASES: dict[str, bytes] = {
    "deny": envelope(),
    "allow": envelope(tool_input={"command": "ls"}),
    "rewrite": envelope(tool_input={"command": "rewrite-me please"}),
    "non-ascii": envelope(tool_input={"command": "rm -rf é/☃/𝄞/\u202egnp.exe"}),
    "context": json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "héllo"}).encode(),
    "fail-closed": envelope(tool_name="Write", tool_input={"file_path": "/tmp/x", "content": "y"}),
    "no-counterpart": json.dumps({"session_id": "s", "hook_event_name": "SessionEnd", "reason": "other"}).encode(),
    "stop": json.dumps({"session_id": "s-stop", "hook_event_name": "Stop", "stop_hook_active": False}).encode(),
    "empty": b"",
    "not-json": b"hello",
    "not-utf8": b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf \xff"}}',
    "nul": b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf a\x00b"}}',
    "no-event": b'{"tool_name": "Bash"}',
    "nan": b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf x", "n": NaN}}',
    "nested-10000": deep(10_000),
    "64-KiB-and-more": envelope(tool_input={"command": "rm -rf " + "x" * 70_000}),
}


@pytest.mark.parametrize("on_socket", [False, True], ids=["pipe", "socket"])
def test_the_gate_prints_and_exits_as_the_bridge_does(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served], on_socket: bool
) -> None:
    hooks(write_hook)
    serve()
    for name, data in CASES.items():
        # The Stop gate remembers a session: each path gets one of its own.
        bridged = run(bridge_words(home), data.replace(b"s-stop", b"s-stop-bridge"), on_socket=on_socket)
        gated = run(gate_words(home), data.replace(b"s-stop", b"s-stop-gate"), on_socket=on_socket)
        assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout), (name, gated, bridged)
        assert gated.said == bridged.said, (name, gated, bridged)


def test_sixteen_mebibytes_go_through_the_bridge_whole(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:
    hooks(write_hook)
    serve()
    data = envelope(tool_input={"command": "rm -rf " + "é" * (8 * 1024 * 1024)})
    assert len(data) > 16 * 1024 * 1024
    bridged, gated = run(bridge_words(home), data, on_socket=True), run(gate_words(home), data, on_socket=True)
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout), (gated, bridged)
    assert b'"permissionDecision": "deny"' in gated.stdout


def test_the_gate_starts_no_python_while_the_server_answers(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:
    """The bridge it falls back to is a Python that does not exist: only the server answers."""
    hooks(write_hook)
    serve()
    words = ["bash", str(gate_script()), "claude-code", str(home), "--", "/nonexistent/python", "-m", "hookbus", "claude-code-hook"]
    gated = run(words, envelope(), on_socket=True)
    assert gated.code == 0 and b'"permissionDecision": "deny"' in gated.stdout, gated
    assert b"hook 'deny-rm' denied: no rm \\u00e9" in gated.stdout


def test_the_project_directory_reaches_the_hooks_as_through_the_bridge(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served]
) -> None:
    write_hook(
        "where", event="PreToolUse", mode="sync", blocking=True,
        command="""python3 -c 'import json,sys; e=json.load(sys.stdin); print(json.dumps({"behavior": "deny", "reason": e.get("project_dir", "none")}))'""",
    )
    serve()
    env = environment(HOOKBUS_HTTP_TOKEN=None, CLAUDE_PROJECT_DIR="/srv/proj é")
    bridged = run(bridge_words(home), envelope(), env=env)
    gated = run(gate_words(home), envelope(), env=env)
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout)
    assert b"/srv/proj \\u00e9" in gated.stdout


def test_a_variable_with_a_newline_goes_through_the_bridge(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:
    hooks(write_hook)
    serve()
    env = environment(HOOKBUS_HTTP_TOKEN=None, CLAUDE_PROJECT_DIR="/srv/a\r\nHookbus-Env-X: y")
    bridged, gated = run(bridge_words(home), envelope(), env=env), run(gate_words(home), envelope(), env=env)
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout)


# -- the server down, killed, wedged, or not the server -----------------------------------


def test_with_the_server_killed_a_fail_closed_hook_and_the_guard_still_deny(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served]
) -> None:
    hooks(write_hook)
    served = serve()
    served.stop(signal.SIGKILL)
    assert (home / "run" / "http.gate").exists()  # left behind: its process is gone
    closed = run(gate_words(home), envelope(tool_name="Write", tool_input={"file_path": "/tmp/x", "content": "y"}), on_socket=True)
    assert closed.code == 0 and b'"permissionDecision": "deny"' in closed.stdout and b"failed closed" in closed.stdout, closed
    guarded = run(gate_words(home), envelope(tool_input={"command": f"rm -rf {home}"}), on_socket=True)
    assert guarded.code == 0 and b'"permissionDecision": "deny"' in guarded.stdout, guarded
    assert b"home" in guarded.stdout


def test_a_stop_gate_with_the_server_down_does_what_the_bridge_does(home: Path, write_hook: HookWriter) -> None:
    """Exit 2 on Stop means "keep going": a gate that blocked on its own failures would loop
    while the server is down. It runs the bridge, which answers as ever."""
    write_hook("quiet", event="Stop", mode="sync", command="true")
    stop = json.dumps({"session_id": "s-loop", "hook_event_name": "Stop", "stop_hook_active": False}).encode()
    gated, bridged = run(gate_words(home), stop), run(bridge_words(home), stop)
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout) == (0, b"")
    write_hook("more", event="Stop", mode="sync", command="echo '{\"continue_with\": \"say more\"}'")
    for active in (b"false", b"true"):
        data = stop.replace(b"false", active)
        gated, bridged = run(gate_words(home), data), run(bridge_words(home), data)
        assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout), (gated, bridged)
        assert gated.code == 0


def test_a_server_killed_mid_request_is_decided_without_running_the_hooks_again(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served], tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    write_hook(
        "slow", event="PreToolUse", mode="sync", blocking=True, on_error="deny", timeout="30s",
        command=f"echo x >> {ran}; sleep 20",
    )
    served = serve()
    words = gate_words(home)
    outcome: list[Ran] = []
    gate = threading.Thread(target=lambda: outcome.append(run(words, envelope(), on_socket=True)))
    gate.start()
    wait_for(lambda: ran.exists(), 30, "the hook to start in the server")
    served.stop(signal.SIGKILL)
    gate.join(90)
    [gated] = outcome
    assert gated.code == 0, gated
    output = json.loads(gated.stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny" and "failed closed" in output["permissionDecisionReason"], gated
    assert "gave no answer after it started the hooks" in output["permissionDecisionReason"]
    assert ran.read_text() == "x\n"  # ran once, in the server; not again in-process


def test_a_wrong_token_runs_the_bridge(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:
    hooks(write_hook)
    serve()
    path = home / "run" / "http.gate"
    words = path.read_text().split()
    path.write_text(" ".join([*words[:4], "x" * 32]) + "\n")
    gated = run(gate_words(home), envelope())
    bridged = run(bridge_words(home), envelope())
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout)
    assert "refused the token" in gated.stderr.decode(), gated


class Squatter:
    """What another user's process could put on the port: it answers every request with
    ``answer``, or holds it (``answer`` None), and keeps what it was sent."""

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self.received.append(data)
            if self.answer is None:
                self.held.append(conn)
                continue
            try:
                conn.sendall(self.answer)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()
        self.thread.join(10)


def point_run_file_at(home: Path, port: int, proof: str = "the-proof-of-the-server-000", token: str = "t" * 32) -> None:
    run_dir = home / "run"
    run_dir.mkdir(mode=0o700, exist_ok=True)
    path = run_dir / "http.gate"
    path.write_text(f"{os.getpid()} 127.0.0.1 {port} {proof} {token}\n")
    path.chmod(0o600)


ALLOW_ALL = (
    b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nhookbus-exit: 0\r\nhookbus-stdout: 0\r\nhookbus-proof: guessed\r\n"
    b"connection: close\r\n\r\n"
)


@pytest.mark.parametrize(
    "answer",
    [ALLOW_ALL, b"HTTP/1.1 102 Processing\r\nhookbus-wait: 99999999\r\n\r\n", b"HTTP/1.1 500 Oops\r\nhookbus-undecided: x\r\n\r\n"],
    ids=["allow", "processing", "undecided"],
)
def test_another_process_on_the_port_is_not_obeyed(home: Path, write_hook: HookWriter, answer: bytes) -> None:
    hooks(write_hook)
    squatter = Squatter(answer)
    try:
        point_run_file_at(home, squatter.port)
        gated = run(gate_words(home), envelope(tool_name="Write", tool_input={"file_path": "/tmp/x", "content": "y"}))
    finally:
        squatter.close()
    assert gated.code == 0 and b'"permissionDecision": "deny"' in gated.stdout, gated  # decided in-process
    assert "lacks the proof" in gated.stderr.decode(), gated
    assert squatter.received  # it was asked: the proof is what it could not give


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user's takes root")
@pytest.mark.parametrize("planted", ["file", "directory", "link"])
def test_a_run_file_another_user_planted_is_not_believed(home: Path, write_hook: HookWriter, tmp_path: Path, planted: str) -> None:
    """Who writes the run file names the port and the proof: one of another user's (or a
    link, or in a directory of theirs) could make the gate obey their process."""
    hooks(write_hook)
    proof = "the-proof-the-planter-knows-0000"
    answer = ALLOW_ALL.replace(b"guessed", proof.encode())
    squatter = Squatter(answer)
    try:
        point_run_file_at(home, squatter.port, proof=proof)
        run_file = home / "run" / "http.gate"
        if planted == "file":
            os.chown(run_file, 65534, 65534)
        elif planted == "directory":
            os.chown(home / "run", 65534, 65534)
        else:
            elsewhere = tmp_path / "elsewhere.gate"
            run_file.rename(elsewhere)
            run_file.symlink_to(elsewhere)
        gated = run(gate_words(home), envelope(tool_name="Write", tool_input={"file_path": "/tmp/x", "content": "y"}))
    finally:
        squatter.close()
    assert gated.code == 0 and b'"permissionDecision": "deny"' in gated.stdout, gated  # decided in-process
    assert not squatter.received


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user's takes root")
def test_status_and_the_installer_believe_a_run_file_as_the_gate_does(home: Path, tmp_path: Path) -> None:
    from hookbus.serve.gatefile import gate_token, read_gate_file

    point_run_file_at(home, 9, token="t" * 32)
    run_file = home / "run" / "http.gate"
    assert read_gate_file(str(home)) == {"pid": str(os.getpid()), "host": "127.0.0.1", "port": "9"}
    assert gate_token(str(home)) == "t" * 32
    os.chown(run_file, 65534, 65534)
    assert read_gate_file(str(home)) is None and gate_token(str(home)) is None
    os.chown(run_file, 0, 0)
    elsewhere = tmp_path / "elsewhere.gate"
    run_file.rename(elsewhere)
    run_file.symlink_to(elsewhere)
    assert read_gate_file(str(home)) is None and gate_token(str(home)) is None


def test_arithmetic_in_a_squatters_headers_runs_nothing(home: Path, write_hook: HookWriter, tmp_path: Path) -> None:
    """bash evaluates array subscripts in arithmetic: no header value may reach it unchecked."""
    mark = tmp_path / "pwned"
    evil = f"a[$(touch {mark})]".encode()
    answer = (
        b"HTTP/1.1 102 Processing\r\nhookbus-wait: " + evil + b"\r\nhookbus-proof: the-proof-of-the-server-000\r\n\r\n"
        b"HTTP/1.1 200 OK\r\ncontent-length: " + evil + b"\r\nhookbus-exit: " + evil + b"\r\nhookbus-stdout: " + evil
        + b"\r\nhookbus-proof: the-proof-of-the-server-000\r\n\r\n"
    )
    hooks(write_hook)
    squatter = Squatter(answer)
    try:
        point_run_file_at(home, squatter.port)
        run(gate_words(home), envelope())
    finally:
        squatter.close()
    assert not mark.exists()


def test_a_wedged_server_is_given_the_start_window_then_the_bridge_runs(home: Path, write_hook: HookWriter) -> None:
    hooks(write_hook)
    squatter = Squatter(None)
    try:
        point_run_file_at(home, squatter.port)
        started = time.monotonic()
        gated = run(gate_words(home), envelope())
        waited = time.monotonic() - started
    finally:
        squatter.close()
    assert gated.code == 0 and b'"permissionDecision": "deny"' in gated.stdout, gated
    assert waited >= 2.0  # the start window: the server runs nothing it reads later


@pytest.mark.parametrize(
    "line", ["", "garbage", "1 127.0.0.1 1 p t extra", "self 127.0.0.1 1 proof tokentokentokentoken", "1 ../../x 1 p t"],
)
def test_a_run_file_that_is_not_a_live_servers_runs_the_bridge(home: Path, write_hook: HookWriter, line: str) -> None:
    hooks(write_hook)
    (home / "run").mkdir(mode=0o700)
    (home / "run" / "http.gate").write_text(line + "\n")
    gated, bridged = run(gate_words(home), envelope()), run(bridge_words(home), envelope())
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout)


@pytest.mark.parametrize(
    "variable", [("VIX_DISABLE_HOOKS", "1"), ("HOOKBUS_LOAD_PLUGINS", ""), ("LANG", "de_DE.ISO-8859-1"), ("PYTHONIOENCODING", "latin-1")],
)
def test_what_makes_the_bridge_run_otherwise_sends_the_gate_to_it(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served], variable: tuple[str, str]
) -> None:
    hooks(write_hook)
    serve()
    env = environment(HOOKBUS_HTTP_TOKEN=None, LC_ALL=None, LC_CTYPE=None, **{variable[0]: variable[1]})
    data = envelope(tool_input={"command": "rm -rf é"})
    gated, bridged = run(gate_words(home), data, env=env), run(bridge_words(home), data, env=env)
    assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout)


def test_the_server_does_not_warn_of_fail_closed_hooks_over_http_for_the_gate(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served]
) -> None:
    hooks(write_hook)
    served = serve()
    for _ in range(2):
        run(gate_words(home), envelope())
    served.stop()
    assert not [line for line in served.lines if "posts over http" in line], served.stderr


def test_status_names_the_gate_and_what_it_did(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:
    from servekit import hookbus

    hooks(write_hook)
    serve()
    run(gate_words(home), envelope())
    run(gate_words(home), b"not json")
    document = json.loads(hookbus("status", "--home", str(home), "--json").stdout)
    gate = document["http"]["gate"]
    assert gate == {
        "script": str(gate_script()), "run_file": str(home / "run" / "http.gate"), "answered": 1, "sent_to_bridge": 1,
        "hosts": {"Claude Code": 1, "Gemini CLI": 0, "Codex CLI": 0},
    }
    text = hookbus("status", "--home", str(home)).stdout
    assert (
        f"gate        bash {gate_script()}: finds this server in {home / 'run' / 'http.gate'}; 1 answered "
        "(Claude Code 1, Gemini CLI 0, Codex CLI 0), 1 sent"
    ) in text


def test_the_run_file_is_private_and_gone_when_the_server_stops(home: Path, serve: Callable[..., Served]) -> None:
    served = serve()
    path = home / "run" / "http.gate"
    assert path.stat().st_mode & 0o777 == 0o600
    served.stop()
    assert not path.exists()


# -- Gemini CLI ----------------------------------------------------------------------------

GEMINI_CASES = {
    "deny": json.dumps({
        "session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": "rm -rf build"},
    }).encode(),
    "allow": json.dumps({"session_id": "g", "hook_event_name": "BeforeTool", "tool_name": "read_file", "tool_input": {"absolute_path": "/x"}}).encode(),
    "context": json.dumps({"session_id": "g", "hook_event_name": "BeforeAgent", "prompt": "héllo"}).encode(),
    "no-counterpart": json.dumps({"session_id": "g", "hook_event_name": "BeforeModel"}).encode(),
    "not-json": b"nope",
    "nested": b'{"hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
}


@pytest.mark.parametrize("verb", ["gemini-cli-hook", "codex-hook"])
def test_the_gate_of_each_host_prints_and_exits_as_its_bridge_does(
    home: Path, write_hook: HookWriter, serve: Callable[..., Served], verb: str
) -> None:
    hooks(write_hook)
    serve()
    for name, data in {"gemini-cli-hook": GEMINI_CASES, "codex-hook": CODEX_CASES}[verb].items():
        bridged = run(bridge_words(home, verb), data, on_socket=True)
        gated = run(gate_words(home, verb), data, on_socket=True)
        assert (gated.code, gated.stdout) == (bridged.code, bridged.stdout), (name, gated, bridged)
        assert gated.said == bridged.said, (name, gated, bridged)
        if verb == "codex-hook" and name in ("deny", "nested"):
            assert gated.code == 2 and gated.stderr.strip(), (name, gated)  # Codex hears a deny by exit 2


# -- Codex CLI -----------------------------------------------------------------------------

CODEX_CASES = {
    "deny": envelope(hook_event_name="PreToolUse", turn_id="t", model="m", tool_input={"command": "rm -rf build"}),
    "rewrite": envelope(hook_event_name="PreToolUse", turn_id="t", model="m", tool_input={"command": "sudo ls"}),
    "allow": envelope(hook_event_name="PreToolUse", turn_id="t", model="m", tool_input={"command": "ls"}),
    "context": json.dumps({"session_id": "c", "hook_event_name": "UserPromptSubmit", "prompt": "héllo", "turn_id": "t"}).encode(),
    "apply-patch": json.dumps({"session_id": "c", "hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"command": "*** Begin Patch"}}).encode(),
    "no-counterpart": json.dumps({"session_id": "c", "hook_event_name": "PreModelRequest", "turn_id": "t"}).encode(),
    "not-json": b"nope",
    "nested": deep(10_000),
}


def test_post_gemini_cli_answers_what_its_bridge_prints(home: Path, write_hook: HookWriter, serve: Callable[..., Served]) -> None:
    from httpkit import HttpClient, token_of

    hooks(write_hook)
    serve()
    port = int((home / "run" / "http.gate").read_text().split()[2])
    for name, data in GEMINI_CASES.items():
        bridged = run(bridge_words(home, "gemini-cli-hook"), data)
        with HttpClient(port, token_of(home)) as http:
            answer = http.post(data, path="/gemini-cli")
        assert answer.status == 200, (name, answer)
        assert (int(answer.headers["hookbus-exit"]), answer.body) == (bridged.code, bridged.stdout), (name, answer, bridged)


def test_the_gate_command_quotes_what_it_names(tmp_path: Path) -> None:
    home = tmp_path / "a home; rm -rf ~"
    command = gate_command([sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(home)], "claude-code-hook", str(home))
    import shlex

    words = shlex.split(command)
    assert words[1] == str(gate_script()) and words[2] == "claude-code" and words[3] == str(home) and words[4] == "--"
    assert words[-1] == str(home)
