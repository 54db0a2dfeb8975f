"""``hookbus serve`` under attack: promise 7, the server admits only you and root, and no
client can hurt another.

- Another user who reaches the socket (a loosened mode, a shared directory) is refused
  before a byte is read; a server run by another user is never sent anything.
- A client that never reads, one that fills its in-flight budget with slow hooks, one
  that sends a line past 16 MiB or drips one, one that opens hundreds of connections or
  exhausts the server's descriptors: the others are still answered.
- Files in the way (a FIFO where the lock goes, a link where the run directory goes, a
  directory others can write) stop the server with a message, never a hang.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import FIGURES, FOREIGN_UID, attack, needs_root, scale
from conftest import hook_processes, read_log
from hookbus.serve.client import Client, RemoteError, UntrustedPeer
from hookbus.serve.protocol import MAX_LINE_BYTES, PERMISSION_DENIED, REQUEST_TOO_LARGE, SERVER_BUSY
from hookbus.serve.rendezvous import reachable
from servekit import Raw, Served, full_accept_queue, hookbus, wait_for

pytestmark = pytest.mark.timeout(120)

Writer = Callable[..., Path]
BASH = {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}}
NOBODY = 65534
#: A Python any user can run (the venv's may live under a private directory).
SYSTEM_PYTHON = next((path for path in ("/usr/bin/python3", "/bin/python3") if os.access(path, os.X_OK)), None)
needs_foreign_python = pytest.mark.skipif(
    os.geteuid() != 0 or SYSTEM_PYTHON is None, reason="needs root and a system python3 to run a client as another uid"
)


def deny_hook(write_hook: Writer) -> None:
    write_hook("guard", matcher="bash", mode="sync", blocking=True, command="echo no >&2; exit 2")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory any user can enter, as /tmp or a project directory might be."""
    path = Path(tempfile.mkdtemp(prefix="hookbus-shared-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# -- who may connect ------------------------------------------------------------------------


@needs_foreign_python
def test_another_user_who_reaches_the_socket_is_refused_before_a_byte_is_read(
    home: Path, write_hook: Writer, shared_dir: Path
) -> None:
    with attack(7, "uid 65534 connects to a socket made world-writable"):
        write_hook("witness", event="Stop", mode="sync", command="exit 0")
        path = shared_dir / "bus.sock"
        with Served(home, "--socket", str(path)) as served:
            path.chmod(0o666)  # the mode no longer keeps anyone out: the credentials must
            client = (
                "import socket, sys\n"
                "s = socket.socket(socket.AF_UNIX)\n"
                "s.connect(sys.argv[1])\n"
                "s.sendall(b'{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"emit\", \"params\": {\"event\": \"Stop\"}}\\n')\n"
                "data = b''\n"
                "while True:\n"
                "    chunk = s.recv(65536)\n"
                "    if not chunk: break\n"
                "    data += chunk\n"
                "sys.stdout.write(data.decode())\n"
            )
            result = subprocess.run(
                [SYSTEM_PYTHON or "python3", "-c", client, str(path)],
                user=NOBODY, group=NOBODY, capture_output=True, text=True, timeout=30,
            )
            # The refusal may or may not reach it (the socket closes with its request
            # unread): either the PERMISSION_DENIED line or nothing, never an answer.
            if result.stdout:
                answer = json.loads(result.stdout.splitlines()[0])
                assert answer["error"]["code"] == PERMISSION_DENIED, answer
            assert '"result"' not in result.stdout
            with Client(path) as me:  # its owner still gets in
                assert me.emit("Stop") == {"behavior": "allow"}
            assert "refused a connection from uid 65534" in served.stderr
        assert [entry["hook_id"] for entry in read_log(home)] == ["witness"]  # ours, not theirs


@needs_foreign_python
def test_a_server_run_by_another_user_is_never_sent_an_envelope(
    home: Path, write_hook: Writer, shared_dir: Path
) -> None:
    with attack(7, "another user's process listens on HOOKBUS_SOCKET"):
        deny_hook(write_hook)
        shared_dir.chmod(0o777)
        path = shared_dir / "impostor.sock"
        impostor = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
            "print('ready', flush=True)\n"
            "received = 0\n"
            "while True:\n"
            "    c, _ = s.accept()\n"
            "    c.settimeout(2)\n"
            "    try:\n"
            "        received += len(c.recv(65536))\n"
            "        c.sendall(b'{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {\"behavior\": \"allow\", \"home\": \"x\"}}\\n' * 4)\n"
            "    except OSError:\n"
            "        pass\n"
            "    c.close()\n"
            "    print('received', received, flush=True)\n"
        )
        process = subprocess.Popen(
            [SYSTEM_PYTHON or "python3", "-c", impostor, str(path)],
            user=NOBODY, group=NOBODY, stdout=subprocess.PIPE, text=True,
        )
        try:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
            with pytest.raises(UntrustedPeer, match="runs as uid 65534"):
                Client(path)
            env = {**os.environ, "HOOKBUS_SOCKET": str(path)}
            result = hookbus("emit", "PreToolUse", "--home", str(home), "--input", "-", input=json.dumps(BASH), env=env)
            assert result.returncode == 2, result  # our own hook denied, in-process
            assert "runs as uid 65534" in result.stderr and "running in-process" in result.stderr
        finally:
            process.kill()
            out, _ = process.communicate(timeout=30)
        assert "received" in out  # it was connected to, twice ...
        assert all(line == "received 0" for line in out.splitlines() if line.startswith("received"))  # ... and sent nothing


# -- bad clients never hurt good ones ---------------------------------------------------------


def test_a_client_that_never_reads_cannot_block_the_others(home: Path, write_hook: Writer) -> None:
    with attack(7, "a client floods pings and never reads an answer"):
        deny_hook(write_hook)
        with Served(home) as served:
            pid = served.process.pid
            before = rss_kib(pid)
            flooder = socket.socket(socket.AF_UNIX)
            with reachable(served.wait_ready()) as address:
                flooder.connect(address)
            flooder.setblocking(False)
            ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n' * 1000
            sent = 0
            try:
                deadline = time.monotonic() + 10
                stalled = 0
                while time.monotonic() < deadline and stalled < 50:
                    try:
                        sent += flooder.send(ping)
                        stalled = 0
                    except BlockingIOError:
                        stalled += 1  # the server stopped reading it: what we want
                        time.sleep(0.01)
                with Client(served.socket) as good:
                    for _ in range(50):
                        assert good.emit("PreToolUse", BASH)["behavior"] == "deny"
                grown = rss_kib(pid) - before
            finally:
                flooder.close()
            FIGURES["promise 7: server memory growth under a non-reading flood (KiB)"] = grown
            assert stalled >= 50, "the server kept reading a client that never read"
            assert grown < 64 * 1024, f"the server grew by {grown} KiB for one client"


def test_a_pool_filled_by_one_clients_slow_hooks_does_not_delay_anothers_deny(
    home: Path, write_hook: Writer
) -> None:
    with attack(7, "one connection keeps 200 slow hooks in flight while another emits"):
        write_hook("slow", event="Stop", mode="sync", command="sleep 3")
        deny_hook(write_hook)
        with Served(home) as served, Raw(served.socket) as hog, Client(served.socket) as good:
            # One write: past its budget the server stops reading the hog, and separate small
            # writes would block this test instead (the backpressure working as meant).
            hog.send(b"".join(
                json.dumps({"jsonrpc": "2.0", "id": number, "method": "emit", "params": {"event": "Stop"}}).encode() + b"\n"
                for number in range(200)
            ))
            wait_for(lambda: bool(hook_processes(home, "sleep")), message="the slow hooks to start")
            for _ in range(20):
                assert good.emit("PreToolUse", BASH)["behavior"] == "deny"
            running = len(hook_processes(home, "sleep"))
            hog.sock.settimeout(0.05)
            with pytest.raises(TimeoutError):
                hog.line()  # the good client was answered while the hog's hooks still ran
            hog.sock.settimeout(60)
            answers = [hog.answer() for _ in range(200)]
        assert sorted(answer["id"] for answer in answers) == list(range(200))
        # One connection never runs more than its budget of hooks at once.
        FIGURES["promise 7: slow hooks one connection ran at once (of 200 sent)"] = running
        assert running <= 64


def test_a_line_past_16_mib_is_refused_and_closed_and_others_carry_on(home: Path) -> None:
    with attack(7, "a 16 MiB + 1 line"):
        with Served(home) as served, Raw(served.socket) as big, Client(served.socket) as good:
            payload = b"{" + b" " * MAX_LINE_BYTES  # no newline, past the cap
            try:
                big.sock.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # it was closed on us mid-send: also a refusal
            answer = big.line()
            if answer:
                assert json.loads(answer)["error"]["code"] == REQUEST_TOO_LARGE
                assert big.line() == b""  # and closed
            assert good.ping()["home"] == str(home)


@pytest.mark.parametrize("past", [1, 1_000, 100_000])
def test_a_line_past_16_mib_is_refused_even_when_its_newline_comes_with_it(home: Path, past: int) -> None:
    with attack(7, f"a line 16 MiB + {past} bytes, newline included"):
        with Served(home) as served, Raw(served.socket) as big, Client(served.socket) as good:
            head = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}, "pad": "'
            line = head + b"x" * (MAX_LINE_BYTES + past - len(head) - 2) + b'"}\n'
            try:
                big.sock.sendall(line)
            except (BrokenPipeError, ConnectionResetError):
                pass
            answer = big.line()
            assert answer, "the connection was closed without an answer"
            assert json.loads(answer)["error"]["code"] == REQUEST_TOO_LARGE
            assert good.ping()["home"] == str(home)


def test_a_line_just_under_16_mib_is_served(home: Path, write_hook: Writer) -> None:
    with attack(7, "a 15 MiB envelope, sent in small chunks"):
        write_hook("size", event="Stop", mode="sync", command="wc -c >/dev/null; exit 0")
        with Served(home) as served, Raw(served.socket) as raw:
            text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "Stop", "envelope": {"blob": "x" * (15 << 20)}}}).encode() + b"\n"
            for start in range(0, len(text), 4096):  # dripped: the search for \n stays linear
                raw.sock.sendall(text[start:start + 4096])
            assert raw.answer() == {"jsonrpc": "2.0", "id": 1, "result": {"behavior": "allow"}}


def test_a_client_that_drips_a_line_does_not_hold_up_others(home: Path) -> None:
    with attack(7, "a client sends one byte every 10 ms"):
        with Served(home) as served, Raw(served.socket) as drip, Client(served.socket) as good:
            message = b'{"jsonrpc": "2.0", "id": "drip", "method": "ping"}\n'
            for index, byte in enumerate(message):
                drip.sock.sendall(bytes([byte]))
                if index % 10 == 0:
                    assert good.ping()["home"] == str(home)
                time.sleep(0.01)
            assert drip.answer()["id"] == "drip"


def test_256_concurrent_connections_are_all_answered(home: Path, write_hook: Writer) -> None:
    count = 256
    with attack(7, f"{count} connections at once, each running a hook"):
        write_hook("quick", event="Stop", mode="sync", command="exit 0")
        with Served(home) as served:
            connections = [Raw(served.wait_ready()) for _ in range(count)]
            try:
                for number, raw in enumerate(connections):
                    raw.request(number, "emit", event="Stop")
                answers = [raw.answer() for raw in connections]
            finally:
                for raw in connections:
                    raw.close()
        assert [answer["id"] for answer in answers] == list(range(count))
        assert len(read_log(home)) == count


def test_connection_churn_leaks_no_descriptor(home: Path) -> None:
    cycles = scale(300, 3000)
    with attack(7, f"{cycles} connections opened and dropped, some mid-request"):
        with Served(home) as served:
            path = served.wait_ready()
            with Client(path) as warm:
                warm.ping()
            before = fd_count(served.process.pid)
            for number in range(cycles):
                with Raw(path) as raw:
                    if number % 3 == 0:
                        raw.send(b'{"jsonrpc": "2.0", "id": 1, "method": "pi')  # cut mid-line
                    elif number % 3 == 1:
                        raw.request(1, "ping")
            with Client(path) as after:
                assert after.ping()
            wait_for(lambda: fd_count(served.process.pid) <= before, message="descriptors to be released")


def test_more_clients_than_the_server_has_descriptors_are_shed_and_it_recovers(home: Path) -> None:
    with attack(7, "more clients than the server has descriptors"):
        limit = (
            "-c",
            "import resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (96, 96)); "
            "from hookbus.cli.verbs import main; sys.exit(main(sys.argv[1:]))",
        )
        with Served(home, python=limit) as served:
            path = served.wait_ready()
            hogs: list[socket.socket] = []
            try:
                for _ in range(200):
                    sock = socket.socket(socket.AF_UNIX)
                    with reachable(path) as address:
                        sock.connect(address)  # queued by the kernel even when not accepted
                    hogs.append(sock)
                # Past its connection limit (half its descriptors, a reserve aside, so that
                # hooks can still start), each new one is told so and closed, never left
                # to the EMFILE of a good client's hook.
                last = hogs[-1]
                last.settimeout(30)
                answer = json.loads(last.makefile("rb").readline())
                assert answer["error"]["code"] == SERVER_BUSY and "connections" in answer["error"]["message"]
                wait_for(lambda: "shedding load" in served.stderr, message="the shedding to be reported")
                assert served.stderr.count("shedding load") == 1  # reported once, not per client
                assert "cannot accept a connection" not in served.stderr
            finally:
                for sock in hogs:
                    sock.close()
            def answers() -> bool:
                try:
                    with Client(path, timeout=5) as client:
                        return bool(client.ping())
                except (OSError, RemoteError):  # "server busy" until it has seen the hogs go
                    return False
            wait_for(answers, timeout=30, message="the server to recover")
        assert served.process.returncode == 0


def test_a_client_that_half_closes_still_gets_its_answers(home: Path, write_hook: Writer) -> None:
    with attack(7, "a client shuts its sending side right after its requests"):
        write_hook("slow", event="Stop", mode="sync", command="sleep 0.3")
        with Served(home) as served, Raw(served.socket) as raw:
            raw.request(1, "emit", event="Stop")
            raw.request(2, "ping")
            raw.sock.shutdown(socket.SHUT_WR)
            assert {raw.answer()["id"], raw.answer()["id"]} == {1, 2}
            assert raw.line() == b""  # then the server closes: `nc -N` and socat do not hang


# -- files in the way -------------------------------------------------------------------------


def test_a_fifo_where_the_lock_goes_stops_serve_with_a_message(home: Path) -> None:
    with attack(7, "a FIFO at run/serve.lock"):
        (home / "run").mkdir(mode=0o700)
        os.mkfifo(home / "run" / "serve.lock")
        result = hookbus("serve", "--home", str(home), timeout=30)
        assert result.returncode == 1
        assert "not a regular file" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_something_else_where_the_run_directory_goes(home: Path, tmp_path: Path, kind: str) -> None:
    with attack(7, f"a {kind} at run/"):
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        if kind == "symlink":
            (home / "run").symlink_to(elsewhere)
        else:
            (home / "run").write_text("")
        result = hookbus("serve", "--home", str(home), timeout=30)
        assert result.returncode == 1
        assert "is not a directory" in result.stderr
        assert list(elsewhere.iterdir()) == []  # nothing made through the link


@needs_root
def test_a_run_directory_owned_by_another_user_is_refused(home: Path) -> None:
    with attack(7, "run/ made by another user"):
        (home / "run").mkdir(mode=0o700)
        os.chown(home / "run", FOREIGN_UID, FOREIGN_UID)
        result = hookbus("serve", "--home", str(home), timeout=30)
        assert result.returncode == 1
        assert f"belongs to uid {FOREIGN_UID}" in result.stderr


def test_a_socket_directory_others_can_write_is_refused(home: Path, tmp_path: Path) -> None:
    with attack(7, "--socket in a directory others can write (not sticky)"):
        loose = tmp_path / "loose"
        loose.mkdir()
        loose.chmod(0o777)
        result = hookbus("serve", "--home", str(home), "--socket", str(loose / "bus.sock"), timeout=30)
        assert result.returncode == 1
        assert "writable by others" in result.stderr and "chmod go-w" in result.stderr


def test_a_crash_leaves_a_socket_the_next_server_replaces(home: Path, write_hook: Writer) -> None:
    with attack(7, "SIGKILL, then serve again"):
        deny_hook(write_hook)
        first = Served(home)
        first.stop(signal.SIGKILL)
        assert (home / "run" / "hookbus.sock").exists()  # what the crash left
        # Meanwhile, emit must not fail on the dead socket: it runs in-process.
        result = hookbus("emit", "PreToolUse", "--home", str(home), "--input", "-", input=json.dumps(BASH))
        assert result.returncode == 2 and result.stderr == ""
        with Served(home) as second, Client(second.socket) as client:
            assert client.emit("PreToolUse", BASH)["behavior"] == "deny"


def test_an_envelope_of_hostile_shapes_is_answered_not_crashed_on(home: Path, write_hook: Writer) -> None:
    with attack(7, "lone surrogates, huge ids, NaN, deep but legal nesting"):
        write_hook("echo", event="Stop", mode="sync", command="cat >/dev/null; exit 0")
        with Served(home) as served, Raw(served.socket) as raw:
            raw.send(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "emit", "params": {"event": "Stop", "envelope": {"x": "\\udfff"}}}\n')
            assert raw.answer()["result"] == {"behavior": "allow"}
            big_id = "i" * 1_000_000
            assert raw.call(big_id, "ping")["id"] == big_id
            raw.send(b'{"jsonrpc": "2.0", "id": 3, "method": "emit", "params": {"event": "Stop", "envelope": {"n": NaN}}}\n')
            assert raw.answer()["error"]["code"] == -32700  # Python reads NaN; JSON has none
            raw.send(b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}\n')
            assert raw.answer()["error"]["code"] == -32700
            nested: Any = {}
            for _ in range(500):
                nested = {"n": nested}
            assert raw.call(4, "emit", event="Stop", envelope=nested)["result"] == {"behavior": "allow"}
            assert raw.call(5, "ping")["result"]["home"] == str(home)


def test_a_full_accept_queue_makes_a_client_wait_not_fail(home: Path) -> None:
    with attack(7, "the accept queue filled while the server is stopped, then resumed"):
        with Served(home) as served:
            with full_accept_queue(served, resume_after=0.5):
                with Client(served.socket) as client:  # waits for room, as a blocking connect would
                    assert client.ping()["generation"] >= 0


def test_a_queue_that_stays_full_is_a_clear_error(home: Path) -> None:
    from hookbus.serve.rendezvous import ServerBusy, connect

    with attack(7, "the accept queue stays full past the client's connect timeout"):
        with Served(home) as served:
            with full_accept_queue(served):
                started = time.monotonic()
                with pytest.raises(ServerBusy, match="accepted no connection in 0.3 s") as raised:
                    connect(served.wait_ready(), 0.3)
                assert time.monotonic() - started >= 0.25  # it waited, it did not give up at once
                assert served.wait_ready() in str(raised.value)
            with Client(served.wait_ready()) as client:
                assert client.ping()


def test_an_async_client_waits_for_a_full_queue_without_blocking_its_loop(home: Path) -> None:
    import asyncio

    from hookbus.serve.client import AsyncClient

    async def connect_while_ticking(path: str) -> tuple[Any, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        try:
            client = await AsyncClient.connect(path)
            async with client:
                return await client.ping(), ticks
        finally:
            ticker.cancel()

    with attack(7, "an async client meets a full accept queue"):
        with Served(home) as served:
            with full_accept_queue(served, resume_after=0.5):
                pong, ticks = asyncio.run(connect_while_ticking(served.wait_ready()))
        assert pong["generation"] >= 0
        assert ticks >= 10  # the loop ran on while the connect waited about half a second


def test_hookbus_emit_facing_a_full_queue_still_decides(home: Path, write_hook: Writer) -> None:
    deny_hook(write_hook)
    with attack(7, "hookbus emit meets an accept queue that stays full"):
        with Served(home) as served:
            with full_accept_queue(served):
                result = hookbus("emit", "PreToolUse", "--home", str(home), "--input", "-", input=json.dumps(BASH))
        assert result.returncode == 2, result.stderr
        assert json.loads(result.stdout)["behavior"] == "deny"
        assert "accepted no connection in 5 s" in result.stderr
        assert "running in-process" in result.stderr
