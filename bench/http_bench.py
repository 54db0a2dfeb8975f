"""``hookbus serve --http`` benchmarks, each a ratio against a baseline measured in the same run.

Registered in bench.py (``--only http-rtt http-one-sync``); also runs alone::

    .venv/bin/python bench/http_bench.py [--quick]      # both figures (--quick: a smoke run)

Every figure runs a real ``hookbus serve --http 127.0.0.1:0`` process (``python -m hookbus
serve``, stock plugins) on a temp home, with the token it made in HOME/run/http.token.
The client is the bench process: a raw blocking socket (TCP_NODELAY) that sends the same
pre-built request bytes (with Content-Length) over one keep-alive connection and reads
each answer to the end of its headers and its Content-Length; the same code, the same
bytes (but for the Host and Authorization headers) for every server, so that the ratio is
the servers' own cost. Sides are warmed up first, then measured taking turns (the order
rotated every slice), so that a noisy neighbour hits them alike.

- http rtt: a no-match ``POST /claude-code`` (Claude Code's envelope of a Bash call; the
  home's one hook is on PreToolUse with matcher ``write_file``) through serve vs through a
  bare h11 server on the same loop (``EchoHttp``: an asyncio Protocol, a process too, that
  answers every request with the 200 and the empty body serve answers, same headers).
  Beside it, informative: the same server's Unix socket (the same request as a JSON-RPC
  ``emit`` line from a raw client, vs serve_bench's bare JSON-lines server, and through
  ``hookbus.serve.client.Client``), and each server's CPU time a request.
- http one sync (informative, no target): the same request with one matching sync ``exit 0``
  command hook (a real bash a call) vs the h11 echo and vs ``subprocess.run(["bash", "-c",
  "exit 0"])`` in the bench process; the same server's Unix socket beside it.

This file is also its own helper processes (standard library and h11 only at import time)::

    python bench/http_bench.py echo               # the baseline server: prints "ready PORT"
    python bench/http_bench.py profile DIR        # where serve's time goes on the no-match
                                                  # http path: cProfile on every thread
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import h11

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve_bench  # noqa: E402
from serve_bench import LineClient, Reporter, Running, interleaved, median_ratio, per_call, write_hooks  # noqa: E402

SOCKET_READY = "hookbus serve: listening on "
HTTP_READY = "hookbus serve: listening on http://"
ECHO_READY = "ready "
#: The variable that would give serve another token than its file's: kept out of its env.
TOKEN_VARIABLE = "HOOKBUS_HTTP_TOKEN"

#: Claude Code's envelope of a Bash call, as its http hook posts it.
CLAUDE_BODY = json.dumps(
    {
        "session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "x",
    },
    separators=(",", ":"),
).encode()
#: The same call as the bridge hands it to the bus (hookbus.dialects.claude_names.envelope_to_vix),
#: as one JSON-RPC emit line for the Unix socket.
VIX_ENVELOPE: dict[str, Any] = {
    "session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp", "tool_name": "bash",
    "tool_input": {"command": "ls"}, "tool_use_id": "x", "thread_id": "s",
}
EMIT_LINE = (
    json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "emit", "params": {"event": "PreToolUse", "envelope": VIX_ENVELOPE}},
        separators=(",", ":"),
    ).encode()
    + b"\n"
)
#: What serve answers a request with nothing to say, and so what the echo answers too.
ANSWER_HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"0"), (b"keep-alive", b"timeout=60")]

#: The homes: one hook on the request's event that does not match it, or one that does.
NO_MATCH_HOOK = {"trigger": {"event": "PreToolUse", "matcher": "write_file"}, "mode": "sync", "command": "exit 0"}
MATCH_HOOK = {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "command": "exit 0"}


class Sizes:
    """How much each figure measures: ``rounds`` of ``slices`` x ``calls`` requests a side
    (the no-match figure), ``sync_calls`` a side a round (the one sync hook)."""

    def __init__(self, rounds: int, calls: int, slices: int, sync_calls: int) -> None:
        self.rounds, self.calls, self.slices, self.sync_calls = rounds, calls, slices, sync_calls


def sizes(rounds: int, quick: bool = False) -> Sizes:
    return Sizes(2, 200, 2, 20) if quick else Sizes(rounds, 500, 4, 150)


# -- processes ------------------------------------------------------------------------------


class Served(Running):
    """A ``hookbus serve --http`` process: its socket's path, its HTTP port and token."""

    def __init__(self, path: str, pid: int, port: int, token: str) -> None:
        super().__init__(path, pid)
        self.port = port
        self.token = token


@contextlib.contextmanager
def http_serve(home: Path, env: dict[str, str], wrapper: Sequence[str] = ()) -> Iterator[Served]:
    """A real ``python -m hookbus serve --home HOME --http 127.0.0.1:0`` (under ``wrapper``,
    e.g. serve_bench's profiled-serve) while the block runs; stopped with SIGTERM however
    the block ends. Its stderr goes to a file beside the home."""
    log = home.parent / f"{home.name}.serve.log"
    argv = [sys.executable, *(wrapper or ["-m", "hookbus"]), "serve", "--home", str(home), "--http", "127.0.0.1:0"]
    server_env = {name: value for name, value in env.items() if name != TOKEN_VARIABLE}
    with open(log, "w") as stderr:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=server_env)
    try:
        address = serve_bench._wait_for_line(log, HTTP_READY, process)
        path = serve_bench._wait_for_line(log, SOCKET_READY, process)  # the first such line: the socket's
        host, _, port = address.rpartition(":")
        if host != "127.0.0.1":
            raise RuntimeError(f"hookbus serve listens on {address}, not on 127.0.0.1")
        token = (home / "run" / "http.token").read_text().strip()
        yield Served(path, process.pid, int(port), token)
    finally:
        code = serve_bench.stop_process(process)
        if code != 0:
            print(f"  (hookbus serve exited {code}: {log.read_text(errors='replace')[-500:]})", file=sys.stderr)


@contextlib.contextmanager
def echo_http_server(work: Path, env: dict[str, str]) -> Iterator[Served]:
    """The baseline: ``python http_bench.py echo``, stopped with SIGTERM however the block
    ends."""
    log = work / "echo-http.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            [sys.executable, __file__, "echo"], stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env
        )
    try:
        port = int(serve_bench._wait_for_line(log, ECHO_READY, process))
        yield Served("", process.pid, port, "")
    finally:
        serve_bench.stop_process(process)


# -- the baseline server --------------------------------------------------------------------


class EchoHttp(asyncio.Protocol):
    """h11 on an asyncio Protocol, as serve's listener is, and nothing else: every request
    is read to its end and answered with a 200, an empty body and serve's headers."""

    def __init__(self) -> None:
        self._transport: asyncio.Transport | None = None
        self._h11 = h11.Connection(h11.SERVER)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        connection = self._h11
        connection.receive_data(data)
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.EndOfMessage):
                assert self._transport is not None
                answer = connection.send(h11.Response(status_code=200, headers=ANSWER_HEADERS, reason="OK")) or b""
                answer += connection.send(h11.EndOfMessage()) or b""
                self._transport.write(answer)
                connection.start_next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                assert self._transport is not None
                self._transport.close()
                return


def echo_main() -> int:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(EchoHttp, "127.0.0.1", 0)
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        print(f"{ECHO_READY}{server.sockets[0].getsockname()[1]}", flush=True)
        await stop.wait()
        server.close()

    asyncio.run(run())
    return 0


# -- the client -----------------------------------------------------------------------------


def http_request(port: int, token: str, body: bytes = CLAUDE_BODY) -> bytes:
    """``POST /claude-code`` as Claude Code's http hook sends it, encoded once."""
    head = (
        f"POST /claude-code HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("ascii") + body


class HttpClient:
    """A plain blocking client over one keep-alive connection: the request's bytes out, the
    answer read to the end of its headers and of its Content-Length."""

    def __init__(self, port: int, request: bytes) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port))
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request = request
        self._buffer = bytearray()

    def call(self) -> bytes:
        """One round trip; the answer's body. RuntimeError for any status but 200."""
        sock = self.socket
        sock.sendall(self.request)
        buffer = self._buffer
        while True:
            end = buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            self._receive()
        head = bytes(buffer[:end]).lower()
        if not head.startswith(b"http/1.1 200 "):
            raise RuntimeError(f"unexpected answer: {bytes(buffer[:end])!r}")
        at = head.find(b"\r\ncontent-length:")
        length = 0
        if at >= 0:
            stop = head.find(b"\r\n", at + 2)
            length = int(head[at + 17:stop if stop >= 0 else len(head)])
        total = end + 4 + length
        while len(buffer) < total:
            self._receive()
        body = bytes(buffer[end + 4:total])
        del buffer[:total]
        return body

    def _receive(self) -> None:
        chunk = self.socket.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection before answering")
        self._buffer += chunk

    def close(self) -> None:
        self.socket.close()


def check_empty(client: HttpClient) -> None:
    """One call, its answer checked: nothing to say is a 200 with an empty body."""
    body = client.call()
    if body:
        raise RuntimeError(f"expected an empty 200, got the body {body!r}")


def check_allowed(client: LineClient) -> None:
    answer = json.loads(client.call(EMIT_LINE))
    if answer.get("result") != {"behavior": "allow"}:
        raise RuntimeError(f"unexpected answer to the emit: {answer!r}")


# -- the figures ----------------------------------------------------------------------------


def timed(server: Running | None, calls: int, call: Callable[[], Any]) -> Callable[[], tuple[float, float]]:
    """Per call: the wall time of ``calls`` calls, and ``server``'s CPU time (0 without one)."""

    def measure() -> tuple[float, float]:
        cpu = server.cpu_seconds() if server is not None else 0.0
        wall = per_call(call, calls)
        return wall, ((server.cpu_seconds() - cpu) / calls if server is not None else 0.0)

    return measure


def note(name: str, value: float, unit: str, detail: str) -> None:
    """An informative figure: printed as report() prints one, with no target and not counted."""
    shown = f"{value:.2f}{unit}"
    print(f"{name:<16} {shown:>9}  {'(informative, no target)':<24}  {detail}", flush=True)


def walls_and_cpus(measured: list[list[tuple[float, float]]]) -> list[tuple[list[float], list[float]]]:
    return [([wall for wall, _ in side], [cpu for _, cpu in side]) for side in measured]


def us(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e6:.1f} us"


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:.3f} ms"


def http_rtt(work: Path, report: Reporter, rounds: int, quick: bool = False) -> None:
    from hookbus.serve.client import Client

    size = sizes(rounds, quick)
    home = work / "http-rtt"
    write_hooks(home, {"no-match": dict(NO_MATCH_HOOK)})
    client_env, server_env = serve_bench.environments()
    with contextlib.ExitStack() as stack:
        serve = stack.enter_context(http_serve(home, server_env))
        echo = stack.enter_context(echo_http_server(work, client_env))
        lines = stack.enter_context(serve_bench.echo_server(work / "echo-lines.sock", client_env))
        ours = HttpClient(serve.port, http_request(serve.port, serve.token))
        stack.callback(ours.close)
        theirs = HttpClient(echo.port, http_request(echo.port, "x" * len(serve.token)))
        stack.callback(theirs.close)
        socket_ours = LineClient(serve.path)
        stack.callback(socket_ours.close)
        socket_theirs = LineClient(lines.path)
        stack.callback(socket_theirs.close)
        client = stack.enter_context(Client(serve.path))
        check_empty(ours)
        check_empty(theirs)
        check_allowed(socket_ours)
        check_allowed(socket_theirs)
        if client.emit("PreToolUse", VIX_ENVELOPE) != {"behavior": "allow"}:
            raise RuntimeError("the no-match emit through Client did not allow")
        calls = size.calls
        sides = [
            timed(serve, calls, ours.call),
            timed(echo, calls, theirs.call),
            timed(serve, calls, lambda: socket_ours.call(EMIT_LINE)),
            timed(lines, calls, lambda: socket_theirs.call(EMIT_LINE)),
            timed(serve, calls, lambda: client.emit("PreToolUse", VIX_ENVELOPE)),
        ]
        interleaved(1, sides, size.slices)  # warm-up
        measured = interleaved(size.rounds, sides, size.slices)
    (http_wall, http_cpu), (echo_wall, echo_cpu), (sock_wall, sock_cpu), (lines_wall, lines_cpu), (client_wall, _) = (
        walls_and_cpus(measured)
    )
    report(
        "http rtt", median_ratio(http_wall, echo_wall), 1.5, "x",
        f"no-match POST /claude-code through `hookbus serve --http` {us(http_wall)} vs a bare h11 asyncio server "
        f"{us(echo_wall)} a round trip; server CPU a request {us(http_cpu)} vs {us(echo_cpu)} "
        f"({median_ratio(http_cpu, echo_cpu):.2f}x). One raw keep-alive client in the bench process, the same "
        f"{len(ours.request)}-byte request (but for Host and token), {size.slices} x {calls} calls a side a round, taking turns; "
        f"1 hook (PreToolUse, matcher write_file)",
    )
    note(
        "  socket rtt", median_ratio(sock_wall, lines_wall), "x",
        f"the same no-match emit as a JSON-RPC line on the same server's Unix socket {us(sock_wall)} vs "
        f"serve_bench's bare JSON-lines server {us(lines_wall)}; server CPU {us(sock_cpu)} vs {us(lines_cpu)}",
    )
    note(
        "  http/socket", median_ratio(http_wall, sock_wall), "x",
        f"the same server, the same no-match: http {us(http_wall)} vs Unix socket {us(sock_wall)} a round trip; "
        f"server CPU {us(http_cpu)} vs {us(sock_cpu)} ({median_ratio(http_cpu, sock_cpu):.2f}x); "
        f"through hookbus.serve.client.Client.emit {us(client_wall)}",
    )


def http_one_sync(work: Path, report: Reporter, rounds: int, quick: bool = False) -> None:
    """Informative only (``report`` is not called): one matching sync ``exit 0`` hook."""
    size = sizes(rounds, quick)
    home = work / "http-one-sync"
    write_hooks(home, {"match": dict(MATCH_HOOK)})
    client_env, server_env = serve_bench.environments()
    payload = CLAUDE_BODY

    def spawn() -> None:
        subprocess.run(["bash", "-c", "exit 0"], input=payload, capture_output=True)

    with contextlib.ExitStack() as stack:
        serve = stack.enter_context(http_serve(home, server_env))
        echo = stack.enter_context(echo_http_server(work, client_env))
        ours = HttpClient(serve.port, http_request(serve.port, serve.token))
        stack.callback(ours.close)
        theirs = HttpClient(echo.port, http_request(echo.port, "x" * len(serve.token)))
        stack.callback(theirs.close)
        socket_ours = LineClient(serve.path)
        stack.callback(socket_ours.close)
        check_empty(ours)
        check_empty(theirs)
        check_allowed(socket_ours)
        calls = size.sync_calls
        sides = [
            timed(serve, calls, ours.call),
            timed(echo, calls, theirs.call),
            timed(None, calls, spawn),
            timed(serve, calls, lambda: socket_ours.call(EMIT_LINE)),
        ]
        interleaved(1, sides, 1)  # warm-up
        measured = interleaved(size.rounds, sides, 1)
    (http_wall, http_cpu), (echo_wall, _), (spawn_wall, _), (sock_wall, sock_cpu) = walls_and_cpus(measured)
    note(
        "http one sync", median_ratio(http_wall, echo_wall), "x",
        f"POST /claude-code with one matching sync `exit 0` hook (a bash a call) {ms(http_wall)} vs the bare h11 "
        f"server {us(echo_wall)}; vs subprocess.run(['bash', '-c', 'exit 0']) in the bench process {ms(spawn_wall)} "
        f"({median_ratio(http_wall, spawn_wall):.2f}x); the same emit on the Unix socket {ms(sock_wall)} "
        f"({median_ratio(http_wall, sock_wall):.2f}x http/socket); server CPU a request {ms(http_cpu)} http, "
        f"{ms(sock_cpu)} socket. {calls} calls a side a round, taking turns",
    )


# -- alone ----------------------------------------------------------------------------------

RESULTS: list[tuple[str, bool]] = []


def report(name: str, value: float, target: float, unit: str, detail: str) -> None:
    """bench.py's report(), for this script run alone."""
    met = value <= target
    RESULTS.append((name, met))
    shown = f"{value:.2f}{unit}"
    print(f"{name:<16} {shown:>9}  target <= {target:g}{unit:<3} {'met ' if met else 'MISS'}  {detail}", flush=True)


def bench_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="hookbus serve --http benchmarks (ratios against same-run baselines)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds of few requests")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (medians over them); default 5")
    args = parser.parse_args(argv)
    size = sizes(args.rounds, args.quick)
    print(
        f"hookbus http bench on {os.cpu_count()} cores, Python {sys.version.split()[0]}, h11 {importlib.metadata.version('h11')}, "
        f"{size.rounds} rounds of {size.slices} x {size.calls} no-match requests a side, medians"
        + (" (--quick: a smoke run, not figures)" if args.quick else "")
    )
    # SIGTERM unwinds like Ctrl-C: the servers are stopped and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="hookbus-http-bench-") as temp:
        http_rtt(Path(temp), report, args.rounds, args.quick)
        http_one_sync(Path(temp), report, args.rounds, args.quick)
    missed = [name for name, met in RESULTS if not met]
    print(f"\n{len(RESULTS) - len(missed)} of {len(RESULTS)} targets met" + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 0


# -- profiling ------------------------------------------------------------------------------


def profile_main(work: str, calls: int = 30_000) -> int:
    """Serve a one-hook home under cProfile (every thread, serve_bench's profiled-serve)
    while ``calls`` no-match POST /claude-code run against it; print where its time goes."""
    import pstats

    root = Path(work)
    home = root / "profiled-http"
    write_hooks(home, {"no-match": dict(NO_MATCH_HOOK)})
    output = root / "serve-http.prof"
    _, server_env = serve_bench.environments()
    with http_serve(home, server_env, [serve_bench.__file__, "profiled-serve", str(output)]) as server:
        client = HttpClient(server.port, http_request(server.port, server.token))
        try:
            check_empty(client)
            elapsed = per_call(client.call, calls)
        finally:
            client.close()
        print(f"{elapsed * 1e6:.1f} us a no-match POST /claude-code ({calls} calls), under cProfile")
    stats = pstats.Stats(str(output))
    stats.sort_stats("tottime").print_stats(35)
    stats.sort_stats("cumulative").print_stats(60)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["echo"]:
        return echo_main()
    if len(argv) in (2, 3) and argv[0] == "profile":
        return profile_main(argv[1], *(int(argument) for argument in argv[2:]))
    return bench_main(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
