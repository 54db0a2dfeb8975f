"""``hookbus serve --http``: Claude Code's http hook on POST /claude-code, against a real
server process, with a raw HTTP client. Every security rule has its attack here: no token,
a wrong token, a foreign Host, an Origin header, an oversized body, oversized headers, a
non-loopback bind, a token file others could read."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conftest import HookWriter, turn_off_home_guard
from httpkit import HttpClient, http_address, token_of
from servekit import Served, environment, hookbus, wait_for

pytestmark = pytest.mark.timeout(120)

BASH = {
    "session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/", "hook_event_name": "PreToolUse",
    # Not `rm -rf /`: the home guard denies a command that would remove the home (inside /).
    "tool_name": "Bash", "tool_input": {"command": "rm -rf build"}, "tool_use_id": "t-1",
}
DENY_RM = "grep -q 'rm -rf' && echo '{\"behavior\": \"deny\", \"reason\": \"no rm\"}' || true"


@pytest.fixture
def serve(home: Path) -> Iterator[Callable[[], Served]]:
    """Starts the server when called: after the test has written its hooks."""
    started: list[Served] = []

    def start() -> Served:
        started.append(Served(home, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None)))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def served(serve: Callable[[], Served]) -> Served:
    return serve()


def client(served: Served, token: str | None = "", **options: Any) -> HttpClient:
    host, port = http_address(served)
    return HttpClient(port, token_of(served.home) if token == "" else token, host=host, **options)


def bridge(home: Path, envelope: dict[str, Any] | bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
    data = envelope if isinstance(envelope, bytes) else json.dumps(envelope).encode()
    return subprocess.run(
        [sys.executable, "-m", "hookbus", "claude-code-hook", "--home", str(home), *extra],
        input=data, capture_output=True, timeout=60, env=environment(CLAUDE_PROJECT_DIR=None),
    )


def marker_hook(write_hook: HookWriter, home: Path) -> Path:
    """A hook that leaves a file behind when it runs."""
    marker = home / "ran"
    write_hook("marker", event="PreToolUse", mode="sync", command=f"touch {marker}")
    return marker


def test_it_announces_the_http_url_after_the_socket(served: Served) -> None:
    host, port = http_address(served)
    ready = [line for line in served.lines if line.startswith("hookbus serve: listening on ")]
    assert ready == [f"hookbus serve: listening on {served.socket}", f"hookbus serve: listening on http://127.0.0.1:{port}"]
    assert port > 0 and host == "127.0.0.1"
    token_file = served.home / "run" / "http.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and len(token_of(served.home)) >= 16


def test_a_deny_is_the_bridges_answer_byte_for_byte(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    write_hook("guard", event="PreToolUse", matcher="bash", mode="sync", blocking=True, command=DENY_RM)
    served = serve()
    with client(served) as http:
        answer = http.post(BASH)
    assert answer.status == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json()["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert answer.body == bridge(home, BASH).stdout == bridge(home, BASH, "--no-server").stdout


def test_no_opinion_is_an_empty_200_and_keep_alive_holds(home: Path, served: Served) -> None:
    with client(served) as http:
        answers = [http.post({**BASH, "tool_input": {"command": f"ls {n}"}}) for n in range(3)]
    assert [(a.status, a.body) for a in answers] == [(200, b"")] * 3
    assert all(a.headers.get("keep-alive") == "timeout=60" and "connection" not in a.headers for a in answers)


def test_pipelined_requests_are_each_answered_in_order(home: Path, served: Served) -> None:
    """Many requests in one write: no recursion, no lost answer."""
    with client(served) as http:
        http.sock.sendall(b"".join(http.request_bytes(json.dumps({**BASH, "tool_use_id": str(n)}).encode()) for n in range(2000)))
        answers = [http.read_answer() for _ in range(2000)]
    assert {(a.status, a.body) for a in answers} == {(200, b"")}


@pytest.mark.parametrize("token", [None, "wrong-token-of-enough-length"])
def test_a_request_without_the_token_gets_401_runs_nothing_and_is_counted(
    write_hook: HookWriter, home: Path, serve: Callable[[], Served], token: str | None
) -> None:
    marker = marker_hook(write_hook, home)
    served = serve()
    with client(served, token) as http:
        answer = http.post(BASH)
        assert http.closed_by_server()
    assert answer.status == 401 and answer.headers["connection"] == "close"
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert b"bearer token" in answer.body and b"nothing was run" in answer.body
    assert not marker.exists()
    status = json.loads(hookbus("status", "--home", str(home), "--json").stdout)
    assert status["http"]["unauthorized"] == 1 and status["http"]["url"].startswith("http://127.0.0.1:")
    with client(served) as http:  # the right token still works
        assert http.post(BASH).status == 200
    assert marker.exists()


@pytest.mark.parametrize(
    "headers, host_header",
    [
        ({"Origin": "http://127.0.0.1"}, None),
        ({"Origin": "null"}, None),
        ({}, "evil.example:80"),
        ({}, "localhost"),
        ({}, "127.0.0.1"),  # no port: not the listener's own
        ({"Host": "127.0.0.1:1"}, None),  # a second Host header
    ],
)
def test_a_foreign_host_or_an_origin_gets_403_and_runs_nothing(
    write_hook: HookWriter, home: Path, serve: Callable[[], Served], headers: dict[str, str], host_header: str | None
) -> None:
    marker = marker_hook(write_hook, home)
    served = serve()
    with client(served) as http:
        answer = http.post(BASH, headers=headers, host_header=host_header)
    assert answer.status in (400, 403), answer  # h11 itself refuses two Host headers
    assert not marker.exists()


def test_a_wrong_route_or_method_is_refused(served: Served) -> None:
    with client(served) as http:
        assert http.post(BASH, path="/other").status == 404
    with client(served) as http:
        answer = http.post(b"", method="GET")
    assert answer.status == 405 and answer.headers["allow"] == "POST"
    with client(served, None) as http:  # unauthenticated probes learn nothing about routes
        assert http.post(BASH, path="/other").status == 401


def _oversized(http: HttpClient) -> Any:
    body = json.dumps({**BASH, "tool_input": {"command": "x" * (17 << 20)}}).encode()
    request = http.request_bytes(body)
    http.sock.sendall(request[: 256 * 1024])  # the rest never needs to be sent
    return http.read_answer()


def test_an_oversized_body_gets_413_when_no_fail_closed_hook_could_fire(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    marker = marker_hook(write_hook, home)
    turn_off_home_guard(home)  # a fail-closed hook of PreToolUse of its own
    served = serve()
    with client(served) as http:
        answer = _oversized(http)
    assert answer.status == 413 and b"no fail-closed hook" in answer.body
    assert not marker.exists()


def test_an_oversized_body_is_denied_when_a_fail_closed_hook_could_fire(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    write_hook("guard", event="PreToolUse", matcher="write_file", mode="sync", blocking=True, on_error="deny", command="true")
    served = serve()
    with client(served) as http:
        answer = _oversized(http)
    assert answer.status == 200
    specific = answer.json()["hookSpecificOutput"]
    assert specific["permissionDecision"] == "deny" and "fail-closed" in specific["permissionDecisionReason"]


def test_oversized_headers_get_431(served: Served) -> None:
    with client(served) as http:
        answer = http.post(BASH, headers={"X-Padding": "a" * (64 * 1024)})
    assert answer.status == 431


@pytest.mark.parametrize(
    "address, message",
    [
        ("0.0.0.0:0", "0.0.0.0 is not a loopback address"),
        ("10.1.2.3:8080", "10.1.2.3 is not a loopback address"),
        ("[::]:0", ":: is not a loopback address"),
        ("localhost:8080", "'localhost' is not an IP address; use 127.0.0.1"),
        ("127.0.0.1:99999", "the port must be a number from 0 to 65535"),
        ("127.0.0.1", "expected HOST:PORT"),
    ],
)
def test_a_bind_that_is_not_loopback_is_refused(home: Path, address: str, message: str) -> None:
    result = hookbus("serve", "--home", str(home), "--http", address, timeout=30)
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (home / "run" / "hookbus.sock").exists()


def test_a_port_in_use_is_a_clear_error(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = hookbus("serve", "--home", str(home), "--http", f"127.0.0.1:{port}", timeout=30)
    assert result.returncode == 1 and f"cannot listen on http://127.0.0.1:{port}" in result.stderr


def test_the_token_comes_from_the_environment_when_set(home: Path) -> None:
    token = "a-token-from-the-environment-0123"
    with Served(home, "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=token)) as served:
        with client(served, token) as http:
            assert http.post(BASH).status == 200
        with client(served, token[:-1] + "4") as http:
            assert http.post(BASH).status == 401
    assert not (home / "run" / "http.token").exists()
    short = hookbus("serve", "--home", str(home), "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN="short"))
    assert short.returncode == 1 and "at least 16 printable ASCII characters" in short.stderr


@pytest.mark.parametrize("attack", ["loose", "link", "other-owner"])
def test_a_token_file_others_could_know_is_refused(home: Path, tmp_path: Path, attack: str) -> None:
    run = home / "run"
    run.mkdir(mode=0o700)
    token_file = run / "http.token"
    if attack == "loose":
        token_file.write_text("a-token-anyone-may-read-0123456\n")
        token_file.chmod(0o644)
        expected = "may be read by others (mode 0644)"
    elif attack == "link":
        target = tmp_path / "planted"
        target.write_text("a-token-someone-planted-0123456\n")
        target.chmod(0o600)
        token_file.symlink_to(target)
        expected = "cannot read the token file"
    else:
        if os.geteuid() != 0:
            pytest.skip("needs root to give the file to another user")
        token_file.write_text("a-token-another-user-made-0123456\n")
        token_file.chmod(0o600)
        os.chown(token_file, 65534, 65534)
        expected = "belongs to uid 65534"
    result = hookbus("serve", "--home", str(home), "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None), timeout=30)
    assert result.returncode == 1 and expected in result.stderr and "hookbus makes a new one" in result.stderr, result.stderr


def test_the_stop_memory_holds_over_http(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    """A gate that keeps the agent going once: the second stop sees stop_hook_active."""
    gate = 'if grep -Eq \'"stop_hook_active": ?true\'; then exit 0; fi; echo \'{"decision": "block", "reason": "go on"}\''
    write_hook("gate", event="Stop", mode="sync", dialect="claude-code", command=gate)
    served = serve()
    stop = {"session_id": "s-stop", "transcript_path": "/t", "cwd": "/", "hook_event_name": "Stop"}
    with client(served) as http:
        first, second = http.post(stop), http.post(stop)
    assert first.json() == {"decision": "block", "reason": "go on"}
    assert (second.status, second.body) == (200, b"")


def test_an_event_hookbus_has_no_counterpart_of_is_an_empty_200(served: Served) -> None:
    with client(served) as http:
        answer = http.post({"session_id": "s", "hook_event_name": "SessionEnd", "reason": "other"})
    assert (answer.status, answer.body) == (200, b"")


def test_a_body_that_names_no_event_is_a_400(served: Served) -> None:
    with client(served) as http:
        answer = http.post({"session_id": "s"})
    assert answer.status == 400 and b'no "hook_event_name"' in answer.body and b"in the body" in answer.body


@pytest.mark.parametrize("fail_closed", [False, True])
def test_a_body_that_is_not_json_decides_by_on_error(write_hook: HookWriter, home: Path, serve: Callable[[], Served], fail_closed: bool) -> None:
    write_hook("guard", event="PreToolUse", mode="sync", blocking=True, on_error="deny" if fail_closed else "allow", command="true")
    turn_off_home_guard(home)  # fail-closed itself: tests/test_home_guard.py
    served = serve()
    body = b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", broken'
    with client(served) as http:
        answer = http.post(body)
    bridged = bridge(home, body, "--no-server")
    if fail_closed:
        assert answer.status == 200 and answer.json()["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert answer.body == bridged.stdout
    else:
        assert answer.status == 500 and b"fails open" in answer.body
        assert bridged.returncode == 1 and bridged.stdout == b""


def test_sigterm_answers_the_request_running_then_exits_0(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    import signal
    import threading

    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, command="sleep 1; echo '{\"behavior\": \"deny\", \"reason\": \"slow no\"}'")
    served = serve()
    answers: list[Any] = []
    with client(served) as http:
        asking = threading.Thread(target=lambda: answers.append(http.post(BASH)))
        asking.start()
        wait_for_running(served)
        served.send(signal.SIGTERM)
        asking.join(30)
    assert answers and answers[0].json()["hookSpecificOutput"]["permissionDecisionReason"] == "hook 'slow' denied: slow no"
    assert served.wait(30) == 0


def wait_for_running(served: Served) -> None:

    def running() -> bool:
        result = hookbus("status", "--home", str(served.home), "--json")
        return result.returncode == 0 and json.loads(result.stdout)["http"]["running"] == 1

    wait_for(running, 20, "the request to run")


def test_status_shows_the_http_listener(served: Served) -> None:
    host, port = http_address(served)
    shown = hookbus("status", "--home", str(served.home))
    assert shown.returncode == 0
    assert f"http        http://127.0.0.1:{port}/claude-code (no connections; refused: 0 without the right token, 0 for their Host or Origin)" in shown.stdout


#: Pipelined requests sent while no answer is read. Here the sender blocked after about
#: 12,600 of them (4.5 MB: the kernel's buffers of both ends, and the listener's 256 KiB of
#: answers), so the fast size is twice that, and `make stress` (HOOKBUS_STRESS=1) sends
#: 50,000 for machines with larger socket buffers. Each request costs the server about half
#: a millisecond: 50,000 took 28-35 s of the suite.
PIPELINED = 50_000 if os.environ.get("HOOKBUS_STRESS") == "1" else 25_000


def test_a_client_that_does_not_read_its_answers_is_not_read_from(served: Served) -> None:
    """Requests pipelined while nothing is read: the server stops reading once its answers
    back up (the sender blocks), and every answer still comes, in order."""
    import threading

    count = PIPELINED
    with client(served) as http:
        request = http.request_bytes(json.dumps(BASH).encode())
        sent = threading.Event()

        def send() -> None:
            for _ in range(count // 1000):
                http.sock.sendall(request * 1000)
            sent.set()

        sender = threading.Thread(target=send)
        sender.start()
        assert not sent.wait(3), "the server read everything while no answer was taken"
        answers = [http.read_answer() for _ in range(count)]
        sender.join(60)
    assert sent.is_set() and {(a.status, a.body) for a in answers} == {(200, b"")}


def test_a_client_that_expects_100_continue_gets_it_after_the_checks(served: Served) -> None:
    body = json.dumps(BASH).encode()
    with client(served) as http:
        request = http.request_bytes(body, headers={"Expect": "100-continue"})
        http.sock.sendall(request[: len(request) - len(body)])
        interim = http.read_answer()
        http.sock.sendall(body)
        final = http.read_answer()
    assert interim.status == 100 and (final.status, final.body) == (200, b"")
    with client(served, None) as http:  # without the token: refused, no 100
        request = http.request_bytes(body, headers={"Expect": "100-continue"})
        http.sock.sendall(request[: len(request) - len(body)])
        assert http.read_answer().status == 401


def test_a_fail_closed_hook_on_an_event_posted_over_http_is_warned_of(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    """Added after the import: the import kept PreToolUse on http then, so the server says
    (once) that Claude Code fails open there when it cannot reach it."""
    write_hook("guard", event="PreToolUse", matcher="write_file", mode="sync", blocking=True, on_error="deny", command="true")
    served = serve()
    with client(served) as http:
        for _ in range(2):
            assert http.post(BASH).status == 200
    warning = "a fail-closed hook fires on PreToolUse, which Claude Code posts over http"
    # the server's stderr is read by a thread of the test: the line may land after the answer
    wait_for(lambda: any(warning in line for line in served.lines), 30, "the warning")
    assert len([line for line in served.lines if warning in line]) == 1, served.stderr
    status = json.loads(hookbus("status", "--home", str(home), "--json").stdout)
    assert status["http"]["fail_closed_over_http"] == ["PreToolUse"]
    assert "warning: a fail-closed hook fires on PreToolUse" in hookbus("status", "--home", str(home)).stdout


def test_the_status_result_with_http_is_the_documented_one(served: Served) -> None:
    from jsonschema import Draft202012Validator

    document = json.loads((Path(__file__).resolve().parent.parent / "docs" / "protocol.schema.json").read_text())
    validator = Draft202012Validator({"$schema": document["$schema"], "$defs": document["$defs"], "$ref": "#/$defs/statusResult"})
    result = json.loads(hookbus("status", "--home", str(served.home), "--json").stdout)
    for key in ("serving", "differences", "restart_needed"):  # the verb's own, not the method's
        result.pop(key)
    validator.validate(result)
    assert result["http"]["url"] == "http://127.0.0.1:%d" % http_address(served)[1]


def test_a_token_file_cut_short_is_refused_with_the_fix(home: Path) -> None:
    run = home / "run"
    run.mkdir(mode=0o700)
    (run / "http.token").write_text("")
    (run / "http.token").chmod(0o600)
    result = hookbus("serve", "--home", str(home), "--http", "127.0.0.1:0", env=environment(HOOKBUS_HTTP_TOKEN=None), timeout=30)
    assert result.returncode == 1 and "http.token must be at least 16" in result.stderr and "remove it, and hookbus makes a new one" in result.stderr


def test_a_full_disk_while_making_the_token_leaves_no_file(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hookbus.serve import httpconfig
    from hookbus.serve.listener import ServeError, ensure_run_dir

    ensure_run_dir(str(home))
    real_write = os.write

    def full(fd: int, data: bytes) -> int:  # a full disk cannot be made here without mounting one
        raise OSError(28, "No space left on device")

    monkeypatch.delenv("HOOKBUS_HTTP_TOKEN", raising=False)
    monkeypatch.setattr(httpconfig.os, "write", full)
    with pytest.raises(ServeError, match="cannot write the token file .*No space left on device"):
        httpconfig.load_token(str(home))
    monkeypatch.setattr(httpconfig.os, "write", real_write)
    assert not (home / "run" / "http.token").exists()
    token, source = httpconfig.load_token(str(home))
    assert len(token) >= 16 and source.endswith("http.token")


def test_a_client_that_shuts_its_sending_side_still_gets_the_answer(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    write_hook("slow", event="PreToolUse", mode="sync", blocking=True, command="sleep 0.5; echo '{\"behavior\": \"deny\", \"reason\": \"late no\"}'")
    served = serve()
    with client(served) as http:
        http.sock.sendall(http.request_bytes(json.dumps(BASH).encode()))
        http.sock.shutdown(socket.SHUT_WR)
        answer = http.read_answer()
        assert http.closed_by_server()
    assert answer.json()["hookSpecificOutput"]["permissionDecisionReason"] == "hook 'slow' denied: late no"


def test_fail_closed_over_http_goes_away_with_the_hook(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    """What status shows is what is in effect: once the fail-closed hook is removed (or
    disabled), PreToolUse is no longer reported as failing open over http."""
    import shutil


    spec = write_hook("guard", event="PreToolUse", matcher="write_file", mode="sync", blocking=True, on_error="deny", command="true")
    turn_off_home_guard(home)  # the home guard is fail-closed on PreToolUse too
    served = serve()
    with client(served) as http:
        assert http.post(BASH).status == 200

    def reported() -> Any:
        return json.loads(hookbus("status", "--home", str(home), "--json").stdout)["http"]["fail_closed_over_http"]

    assert reported() == ["PreToolUse"]
    document = json.loads(spec.read_text())
    spec.write_text(json.dumps({**document, "enabled": False}))
    wait_for(lambda: reported() == [], 20, "the disabled hook to leave status")
    spec.write_text(json.dumps(document))
    wait_for(lambda: reported() == ["PreToolUse"], 20, "the hook to come back")
    shutil.rmtree(spec.parent)
    wait_for(lambda: reported() == [], 20, "the removed hook to leave status")
    assert "warning: a fail-closed hook fires" not in hookbus("status", "--home", str(home)).stdout


def test_an_event_the_import_keeps_off_http_is_still_answered_right(write_hook: HookWriter, home: Path, serve: Callable[[], Served]) -> None:
    """PermissionRequest stays on the command bridge unless --http-decisions; posted here all
    the same, its approval and rewrite are the bridge's, byte for byte."""
    rewrite = 'echo \'{"behavior": "modify", "input": {"command": "ls -l"}, "permission": "approve"}\''
    write_hook("approve", event="PermissionRequest", mode="sync", blocking=True, command=rewrite)
    served = serve()
    envelope = {**BASH, "hook_event_name": "PermissionRequest", "tool_input": {"command": "ls"}}
    with client(served) as http:
        answer = http.post(envelope)
    decision = answer.json()["hookSpecificOutput"]["decision"]
    assert decision == {"behavior": "allow", "updatedInput": {"command": "ls -l"}}
    assert answer.body == bridge(home, envelope).stdout == bridge(home, envelope, "--no-server").stdout


def test_a_port_in_use_says_who_holds_it(home: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = hookbus("serve", "--home", str(home), "--http", f"127.0.0.1:{port}", timeout=30)
    assert result.returncode == 1 and "a process of yours listens on 127.0.0.1" in result.stderr, result.stderr


@pytest.mark.parametrize("case", ["other-address", "udp", "not-listening"])
def test_a_socket_from_systemd_that_is_not_the_http_one_is_refused(home: Path, case: str) -> None:
    from httpkit import Activated

    kind = socket.SOCK_DGRAM if case == "udp" else socket.SOCK_STREAM
    with socket.socket(socket.AF_INET, kind) as passed:
        passed.bind(("127.0.0.1", 0))
        if case != "not-listening" and kind == socket.SOCK_STREAM:
            passed.listen()
        port = passed.getsockname()[1]
        extra = ("--http", f"127.0.0.1:{port + 1 if port < 65535 else port - 1}") if case == "other-address" else ()
        served = Activated(home, passed, *extra, env=environment(HOOKBUS_HTTP_TOKEN=None), ready=False)
        code = served.wait(60)
    expected = {
        "other-address": "make the .socket unit's ListenStream= and --http name the same address",
        "udp": "is not a TCP socket",
        "not-listening": "is not listening",
    }[case]
    assert code == 1 and expected in served.stderr and "Traceback" not in served.stderr, served.stderr


def test_activation_meant_for_another_process_is_ignored(home: Path) -> None:
    """LISTEN_PID names another process (a parent's activation): not ours to take, and
    the variables are not passed on."""
    env = environment(HOOKBUS_HTTP_TOKEN=None, LISTEN_PID="1", LISTEN_FDS="1", LISTEN_FDNAMES="http")
    with Served(home, "--http", "127.0.0.1:0", env=env) as served:
        host, port = http_address(served)
        with client(served) as http:
            assert http.post(BASH).status == 200
