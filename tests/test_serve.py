"""``hookbus serve`` and its clients, end to end: a real server process, real sockets, real
hooks, real signals.

- The protocol: each method, each error code, a connection usable after any error,
  notifications, answers out of order.
- The lifecycle: the lock, stale and live sockets, SIGTERM with fires in flight, SIGHUP.
- The clients: ``hookbus emit`` through a server (same output, same exit codes), the
  Python clients, hot reload seen through the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from hookbus.serve.rendezvous import reachable

from conftest import hook_processes, read_log
from hookbus.serve.client import AsyncClient, Client, NoServer, OtherHome, RemoteError
from hookbus.serve.protocol import (
    HOOK_NOT_FOUND,
    HOOKS_DISABLED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    OTHER_HOME,
    PARSE_ERROR,
    SHUTTING_DOWN,
)
from servekit import BUILT_INS, Raw, Served, environment, hookbus, imported_modules, wait_for

pytestmark = pytest.mark.timeout(90)

Writer = Callable[..., Path]
BASH = {"tool_name": "bash", "tool_input": {"command": "ls"}}


def deny_hook(write_hook: Writer, hook_id: str = "guard", reason: str = "nope") -> None:
    write_hook(hook_id, matcher="bash", mode="sync", blocking=True, command=f"echo {reason} >&2; exit 2")


# -- the protocol ---------------------------------------------------------------------


def test_each_method_answers_as_the_bus_would(home: Path, write_hook: Writer) -> None:
    deny_hook(write_hook)
    with Served(home) as served, Client(served.socket) as client:
        assert client.emit("PreToolUse", BASH) == {"behavior": "deny", "reason": "hook 'guard' denied: nope"}
        assert client.emit("PreToolUse", {"tool_name": "read_file"}) == {"behavior": "allow"}
        record = client.trigger("guard", BASH)
        assert record["hook_id"] == "guard" and record["manual"] is True
        assert record["decision"] == {"behavior": "deny", "reason": "nope"}
        ping = client.ping()
        assert ping["home"] == str(home) and ping["version"] and isinstance(ping["generation"], int)
        reloaded = client.reload()
        assert reloaded["generation"] > ping["generation"] and reloaded["hooks"] == 1
        assert reloaded["problems"] == []
    assert served.process.returncode == 0
    assert [entry["hook_id"] for entry in read_log(home)] == ["guard", "guard"]


@pytest.mark.parametrize(
    "line, code, words",
    [
        (b"{not json\n", PARSE_ERROR, "parse error"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": "\xff\xfe"}\n', PARSE_ERROR, "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", PARSE_ERROR, "nested too deeply"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n", PARSE_ERROR, "nested too deeply"),
        (b"[]\n", INVALID_REQUEST, "batches are not supported"),
        (b"42\n", INVALID_REQUEST, "a JSON object"),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}\n', INVALID_REQUEST, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "id": 1}\n', INVALID_REQUEST, '"method" is missing'),
        (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}\n', INVALID_REQUEST, '"id" must be'),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "extra": 1}\n', INVALID_REQUEST, "unknown member 'extra'"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "fire"}\n', METHOD_NOT_FOUND, "methods are emit, trigger, ping, reload"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": ["Stop"]}\n', INVALID_PARAMS, "by name"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {}}\n', INVALID_PARAMS, "'event' is missing"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "Nope"}}\n', INVALID_PARAMS, "unknown event 'Nope'; events are PreToolUse"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "pretooluse"}}\n', INVALID_PARAMS, "SubagentStop (did you mean 'PreToolUse'?)"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "explain", "params": {"event": "BeforeTool"}}\n', INVALID_PARAMS, "(did you mean 'PreToolUse'? BeforeTool is Gemini CLI's name for it)"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "Stop", "envelope": []}}\n', INVALID_PARAMS, "'envelope' must be an object"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "Stop", "evnt": 1}}\n', INVALID_PARAMS, "unknown param 'evnt'"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": 1}}\n', INVALID_PARAMS, "unknown param 'x'"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "trigger", "params": {"hook_id": "ghost"}}\n', HOOK_NOT_FOUND, "no valid hook 'ghost'"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "Stop", "envelope": {"x": NaN}}}\n', PARSE_ERROR, "NaN is not JSON"),
        (b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}\n', INVALID_REQUEST, "finite number"),
        (b'{"jsonrpc": "2.0", "method": 7}\n', INVALID_REQUEST, '"method" must be a string'),
    ],
)
def test_every_error_has_its_code_and_the_connection_stays_usable(
    home: Path, line: bytes, code: int, words: str
) -> None:
    with Served(home) as served, Raw(served.socket) as raw:
        raw.send(line)
        answer = raw.answer()
        assert answer["error"]["code"] == code, answer
        assert words in answer["error"]["message"]
        assert answer["jsonrpc"] == "2.0"
        assert raw.call(2, "ping")["result"]["home"] == str(home)


def test_trigger_while_hooks_are_off_is_hooks_disabled(home: Path, write_hook: Writer) -> None:
    deny_hook(write_hook)
    (home / "settings.json").write_text(json.dumps({"features": {"hooks": False}}))
    with Served(home) as served, Client(served.socket) as client:
        with pytest.raises(RemoteError) as raised:
            client.trigger("guard")
        assert raised.value.code == HOOKS_DISABLED
        assert client.emit("PreToolUse", BASH) == {"behavior": "allow"}


def test_notifications_run_and_get_no_answer(home: Path, write_hook: Writer) -> None:
    write_hook("note", event="Stop", mode="sync", command="exit 0")
    with Served(home) as served, Raw(served.socket) as raw:
        raw.send({"jsonrpc": "2.0", "method": "emit", "params": {"event": "Stop"}})
        # A valid notification's errors are not answered either.
        raw.send({"jsonrpc": "2.0", "method": "no-such-method"})
        raw.send({"jsonrpc": "2.0", "method": "emit", "params": ["Stop"]})
        raw.send({"jsonrpc": "2.0", "method": "emit", "params": None})
        raw.send({"jsonrpc": "2.0", "method": "emit", "params": {"event": "Nope"}})
        assert raw.call(7, "ping")["id"] == 7  # the first line back answers the ping
        wait_for(lambda: len(read_log(home)) == 1, message="the notification's fire")


def test_answers_carry_their_id_and_may_overtake_each_other(home: Path, write_hook: Writer) -> None:
    write_hook("slow", event="Stop", mode="sync", command="sleep 1")
    with Served(home) as served, Raw(served.socket) as raw:
        raw.request("slow-one", "emit", event="Stop")
        raw.request(2, "ping")
        raw.request(3, "emit", event="PreToolUse", envelope=BASH)
        first, second, third = raw.answer(), raw.answer(), raw.answer()
        assert [first["id"], second["id"]] == [2, 3]
        assert third == {"jsonrpc": "2.0", "id": "slow-one", "result": {"behavior": "allow"}}


def test_many_requests_in_flight_on_one_async_connection(home: Path, write_hook: Writer) -> None:
    write_hook("wait", event="Stop", mode="sync", command="sleep 0.5")
    deny_hook(write_hook)

    async def main(path: str) -> list[Any]:
        async with await AsyncClient.connect(path) as client:
            started = time.monotonic()
            answers = await asyncio.gather(
                *[client.emit("Stop") for _ in range(20)],
                *[client.emit("PreToolUse", BASH) for _ in range(20)],
                client.ping(),
                return_exceptions=True,
            )
            # 20 half-second hooks at once, not one after another.
            assert time.monotonic() - started < 8
            with pytest.raises(RemoteError) as raised:
                await client.emit("Nope")
            assert raised.value.code == INVALID_PARAMS
            return answers

    with Served(home) as served:
        answers = asyncio.run(main(served.wait_ready()))
    assert answers[:20] == [{"behavior": "allow"}] * 20
    assert all(answer["behavior"] == "deny" for answer in answers[20:40])
    assert answers[40]["home"] == str(home)


def test_a_client_closed_by_the_server_fails_its_requests_clearly(home: Path) -> None:
    async def main(served: Served) -> None:
        client = await AsyncClient.connect(served.wait_ready())
        try:
            served.stop()
            with pytest.raises(ConnectionError):
                await client.ping()
        finally:
            await client.close()

    with Served(home) as served:
        asyncio.run(main(served))


# -- the socket -------------------------------------------------------------------------


def test_the_socket_is_0600_in_a_0700_directory_and_removed_at_exit(home: Path) -> None:
    with Served(home) as served:
        path = Path(served.wait_ready())
        assert path == home / "run" / "hookbus.sock"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert served.process.returncode == 0
    assert not path.exists()


def test_a_loose_run_directory_is_made_private_again(home: Path) -> None:
    (home / "run").mkdir(mode=0o755)
    (home / "run").chmod(0o777)
    with Served(home):
        assert stat.S_IMODE((home / "run").stat().st_mode) == 0o700


def test_hookbus_socket_and_a_path_longer_than_sun_path(home: Path, tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "bus.sock"
    assert len(str(path)) > 108
    with Served(home, env=environment(HOOKBUS_SOCKET=str(path))) as served:
        assert served.wait_ready() == str(path)
        with Client(path) as client:
            assert client.ping()["home"] == str(home)
        result = hookbus("emit", "Stop", "--home", str(home), "--input", os.devnull, env=environment(HOOKBUS_SOCKET=str(path)))
        assert result.returncode == 0 and result.stdout == '{"behavior": "allow"}\n'
    assert not path.exists()


def test_no_server_is_a_clear_error_for_the_client(home: Path) -> None:
    with pytest.raises(NoServer, match="no server on"):
        Client(home=home)


# -- the lifecycle -----------------------------------------------------------------------


def test_a_second_server_names_the_holder_and_exits_1(home: Path) -> None:
    with Served(home) as first:
        second = hookbus("serve", "--home", str(home), timeout=30)
        assert second.returncode == 1
        assert f"pid {first.process.pid} holds" in second.stderr
        assert "Traceback" not in second.stderr
        with Client(first.socket) as client:
            assert client.ping()


def test_a_stale_socket_is_replaced(home: Path) -> None:
    (home / "run").mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX)
    with reachable(str(home / "run" / "hookbus.sock")) as address:  # a deep TMPDIR: past sun_path
        stale.bind(address)
    stale.close()  # the file stays, no one listens: what a crash leaves
    with Served(home) as served, Client(served.socket) as client:
        assert client.ping()["home"] == str(home)
    assert "replacing the stale socket" in served.stderr


def test_a_live_socket_is_never_taken(home: Path, tmp_path: Path) -> None:
    other_home = tmp_path / "other"
    (other_home / "hooks").mkdir(parents=True)
    path = str(tmp_path / "shared.sock")
    with Served(other_home, "--socket", path):
        taker = hookbus("serve", "--home", str(home), "--socket", path, timeout=30)
        assert taker.returncode == 1
        assert "a server already answers on" in taker.stderr
        with Client(path) as client:
            assert client.ping()["home"] == str(other_home)


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink", "directory"])
def test_something_else_at_the_socket_path_is_left_alone(home: Path, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "thing"
    if kind == "file":
        path.write_text("precious")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink":
        path.symlink_to(tmp_path / "elsewhere")
    else:
        path.mkdir()
    result = hookbus("serve", "--home", str(home), "--socket", str(path), timeout=30)
    assert result.returncode == 1
    assert "not a socket" in result.stderr and "Traceback" not in result.stderr
    assert os.path.lexists(path)
    if kind == "file":
        assert path.read_text() == "precious"


def test_serve_on_a_home_that_does_not_exist_says_so(tmp_path: Path) -> None:
    result = hookbus("serve", "--home", str(tmp_path / "nowhere"), timeout=30)
    assert result.returncode == 1
    assert "does not exist" in result.stderr


def test_sigterm_with_fires_in_flight_loses_none(home: Path, write_hook: Writer) -> None:
    """SIGTERM while sync and async hooks run: every request is answered, every fire is
    recorded, the socket goes, exit 0. An async hook still running when the bus's shutdown
    bound passes is killed and recorded as cancelled."""
    write_hook("slow-sync", event="Stop", mode="sync", command="sleep 1")
    write_hook("slow-async", event="Stop", mode="async", command="sleep 1")
    write_hook("endless-async", event="PostToolUse", mode="async", command="sleep 600", timeout="10m")
    with Served(home) as served:
        path = served.wait_ready()
        connections = [Raw(path) for _ in range(8)]
        try:
            for number, raw in enumerate(connections):
                raw.request(number, "emit", event="Stop")
            with Raw(path) as raw:
                assert raw.call("x", "emit", event="PostToolUse", envelope={"tool_name": "bash"})["result"] == {"behavior": "allow"}
                wait_for(lambda: bool(hook_processes(home, "sleep")), message="the hooks to start")
                served.send(signal.SIGTERM)
                wait_for(lambda: not os.path.exists(path), message="the server to stop accepting")
                raw.request("late", "ping")
                late = raw.answer()
                assert late["error"]["code"] == SHUTTING_DOWN
            answers = [raw.answer() for raw in connections]
        finally:
            for raw in connections:
                raw.close()
        assert served.wait(60) == 0
    assert [answer["result"] for answer in answers] == [{"behavior": "allow"}] * 8
    entries = read_log(home)
    by_hook: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_hook.setdefault(entry["hook_id"], []).append(entry)
    assert len(by_hook["slow-sync"]) == 8 and all(e["status"] == "allow" for e in by_hook["slow-sync"])
    assert len(by_hook["slow-async"]) == 8 and all(e["status"] == "done" for e in by_hook["slow-async"])
    assert len(by_hook["endless-async"]) == 1
    assert "cancelled at shutdown" in by_hook["endless-async"][0]["error"]
    assert not (home / "run" / "hookbus.sock").exists()


def test_a_second_sigterm_kills_the_hooks_still_running(home: Path, write_hook: Writer) -> None:
    write_hook("stuck", event="Stop", mode="sync", command="sleep 300", timeout="10m")
    with Served(home) as served, Raw(served.socket) as raw:
        raw.request(1, "emit", event="Stop")
        wait_for(lambda: bool(hook_processes(home, "sleep")), message="the hook to start")
        served.send(signal.SIGTERM)
        time.sleep(0.3)
        assert served.process.poll() is None  # it waits for the hook
        served.send(signal.SIGINT)
        assert raw.answer()["result"] == {"behavior": "allow"}  # the hook failed open
        assert served.wait(30) == 0
    [entry] = read_log(home)
    assert entry["hook_id"] == "stuck" and "interrupted by SIGINT" in entry["error"]


def test_sighup_and_the_watcher_reload_what_clients_see(home: Path, write_hook: Writer) -> None:
    with Served(home) as served, Client(served.socket) as client:
        before = client.ping()["generation"]
        assert client.emit("PreToolUse", BASH) == {"behavior": "allow"}
        deny_hook(write_hook)  # the watcher picks it up
        wait_for(lambda: client.emit("PreToolUse", BASH)["behavior"] == "deny", message="the hot reload")
        after_watch = client.ping()["generation"]
        assert after_watch > before
        served.send(signal.SIGHUP)
        wait_for(lambda: client.ping()["generation"] > after_watch, message="the SIGHUP reload")
        assert client.emit("PreToolUse", BASH)["behavior"] == "deny"


def test_a_client_that_disconnects_mid_request_still_gets_its_hooks_recorded(home: Path, write_hook: Writer) -> None:
    write_hook("slow", event="Stop", mode="sync", command="sleep 0.5")
    with Served(home) as served:
        with Raw(served.socket) as raw:
            raw.request(1, "emit", event="Stop")
            wait_for(lambda: bool(hook_processes(home, "sleep")), message="the hook to start")
        wait_for(lambda: len(read_log(home)) == 1, message="the record")
        with Client(served.socket) as client:
            assert client.ping()
    [entry] = read_log(home)
    assert (entry["status"], entry["error"]) == ("allow", None)


# -- hookbus emit through a server --------------------------------------------------------


@pytest.mark.parametrize(
    "command, envelope, code",
    [
        ("echo nope >&2; exit 2", BASH, 2),
        ("exit 0", BASH, 0),
        ('echo \'{"behavior": "modify", "input": {"command": "ls -la"}}\'', BASH, 0),
        ('echo \'{"behavior": "context", "context": "ж \\u001b[31m"}\'', BASH, 0),
        ("exit 0", {"tool_name": "read_file"}, 0),
        ('echo \'{"behavior": "modify", "input": {"n": NaN}}\'', BASH, 0),
    ],
)
def test_emit_prints_the_same_and_exits_the_same_with_or_without_a_server(
    home: Path, write_hook: Writer, command: str, envelope: dict[str, Any], code: int
) -> None:
    write_hook("hook", matcher="bash", mode="sync", blocking=True, command=command)
    arguments = ("emit", "PreToolUse", "--home", str(home), "--input", "-")
    alone = hookbus(*arguments, input=json.dumps(envelope))
    with Served(home):
        served = hookbus(*arguments, input=json.dumps(envelope))
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert alone.returncode == code


@pytest.mark.parametrize(
    "arguments, stdin",
    [
        (("emit", "Nope"), ""),
        (("emit", "Stop", "--input", "-"), "{broken"),
        (("emit", "Stop", "--input", "-"), "[1]"),
        (("emit", "Stop", "--input", "/nonexistent"), ""),
        (("emit",), ""),
    ],
)
def test_emit_errors_are_the_same_with_or_without_a_server(home: Path, arguments: tuple[str, ...], stdin: str) -> None:
    command = (*arguments[:1], "--home", str(home), *arguments[1:])
    alone = hookbus(*command, input=stdin)
    with Served(home):
        served = hookbus(*command, input=stdin)
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert alone.returncode == 1


def test_emit_runs_in_the_server_unless_told_not_to(home: Path, write_hook: Writer) -> None:
    write_hook("where", event="Stop", mode="sync", command='printf \'{"behavior": "context", "context": "%s"}\' "$WHERE"')
    arguments = ("emit", "Stop", "--home", str(home), "--input", os.devnull)
    with Served(home, env=environment(WHERE="server")):
        assert json.loads(hookbus(*arguments, env=environment(WHERE="client")).stdout)["context"] == "server"
        forced = hookbus(*arguments, "--no-server", env=environment(WHERE="client"))
        assert json.loads(forced.stdout)["context"] == "client"
        # A switch in the client's environment is not in the server's: in-process, obeyed.
        switched = hookbus(*arguments, env=environment(WHERE="client", VIX_DISABLE_HOOKS="1"))
        assert json.loads(switched.stdout) == {"behavior": "allow"}
    assert json.loads(hookbus(*arguments, env=environment(WHERE="client")).stdout)["context"] == "client"


def test_emit_never_uses_a_server_of_another_home(home: Path, tmp_path: Path, write_hook: Writer) -> None:
    deny_hook(write_hook)
    other = tmp_path / "other"
    (other / "hooks").mkdir(parents=True)
    with Served(other, "--socket", str(tmp_path / "other.sock")) as served:
        result = hookbus(
            "emit", "PreToolUse", "--home", str(home), "--input", "-",
            input=json.dumps(BASH), env=environment(HOOKBUS_SOCKET=served.wait_ready()),
        )
    assert result.returncode == 2  # this home's deny, run in-process
    assert f"serves {other}, not {home}; running in-process" in result.stderr


def test_the_server_path_of_emit_imports_only_built_in_modules(home: Path, write_hook: Writer) -> None:
    """Not pluggy, attrs or cattrs, and not even json, socket or argparse (re, enum and
    selectors cost as much as the interpreter's start-up): only _json and _socket."""
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="echo no >&2; exit 2")
    with Served(home):
        result, imported = imported_modules("-m", "hookbus", "emit", "PreToolUse", "--home", str(home), input='{"tool_name": "bash"}')
    assert result.returncode == 2 and json.loads(result.stdout)["behavior"] == "deny"
    assert "hookbus.serve.quickpath" in imported
    assert {name for name in imported if not name.startswith("hookbus.")} <= BUILT_INS | {"hookbus"}, sorted(imported)
    assert not {"hookbus.cli", "hookbus.serve.client", "hookbus.serve.protocol"} & imported


def test_a_request_that_names_another_home_is_refused_and_runs_nothing(home: Path, tmp_path: Path, write_hook: Writer) -> None:
    write_hook("witness", event="Stop", mode="sync", command="exit 0")
    other = tmp_path / "other"
    (other / "hooks").mkdir(parents=True)
    with Served(home) as served:
        with Raw(served.socket) as raw:
            refused = raw.call(1, "emit", event="Stop", home=str(other))
            assert refused["error"]["code"] == OTHER_HOME and refused["error"]["data"] == {"home": str(home)}
            assert raw.call(2, "emit", event="Stop", home=str(home / "hooks" / ".."))["result"] == {"behavior": "allow"}
            assert raw.call(3, "ping", home=7)["error"]["code"] == INVALID_PARAMS
        with Client(served.socket, home=other) as client, pytest.raises(OtherHome):
            client.emit("Stop")
    assert len(read_log(home)) == 1  # the request naming this home, only
