"""contrib/node/hookbus-client.mjs, the Node.js client, against a real ``hookbus serve``.

Every case runs real ``node`` processes: the CLI mode (exit codes and the decision line),
and inline ES modules that import the client by file URL and print what they got as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from servekit import Served, full_accept_queue

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH: the Node.js client cannot be run")

CLIENT = Path(__file__).resolve().parent.parent / "contrib" / "node" / "hookbus-client.mjs"
DENY_REASON = "hook 'guard' denied: no bash"


def node_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment without anything that picks a home or a socket, and a HOME of its
    own so ~/.vix is never touched."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIX_HOME", "HOOKBUS_SOCKET")}
    user_home = tmp_path / "user-home"
    user_home.mkdir(exist_ok=True)
    env["HOME"] = str(user_home)
    env.update(extra)
    return env


def run_cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    return subprocess.run([NODE, str(CLIENT), *args], input=stdin, capture_output=True, text=True, env=env, timeout=30)


def run_module(env: dict[str, str], body: str) -> Any:
    """Run ``body`` as an ES module with ``connect`` and ``RemoteError`` imported from the
    client; it prints one JSON value, which is returned."""
    assert NODE is not None
    source = f"import {{ connect, RemoteError }} from {json.dumps(CLIENT.as_uri())};\n{body}"
    result = subprocess.run(
        [NODE, "--input-type=module", "-e", source], capture_output=True, text=True, env=env, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def write_guard(write_hook: Callable[..., Path]) -> None:
    """Denies every bash call; anything else matches no hook and is allowed."""
    write_hook("guard", mode="sync", blocking=True, matcher="bash", command='echo "no bash" >&2; exit 2')


BASH = json.dumps({"tool_name": "bash", "tool_input": {"command": "ls"}, "cwd": "/"})
READ = json.dumps({"tool_name": "read_file", "tool_input": {"path": "a.txt"}, "cwd": "/"})


@pytest.mark.timeout(60)
def test_cli_deny_exits_2(tmp_path: Path, home: Path, write_hook: Callable[..., Path]) -> None:
    """A deny prints the decision as one JSON line and exits 2; the home is $VIX_HOME."""
    write_guard(write_hook)
    with Served(home):
        result = run_cli(node_env(tmp_path, VIX_HOME=str(home)), "PreToolUse", stdin=BASH)

    assert (result.returncode, result.stderr) == (2, "")
    assert result.stdout.count("\n") == 1
    assert json.loads(result.stdout) == {"behavior": "deny", "reason": DENY_REASON}


@pytest.mark.timeout(60)
def test_cli_allow_exits_0(tmp_path: Path, home: Path, write_hook: Callable[..., Path]) -> None:
    """An allow exits 0; $HOOKBUS_SOCKET names the socket whatever the home."""
    write_guard(write_hook)
    with Served(home) as served:
        assert served.socket is not None
        env = node_env(tmp_path, HOOKBUS_SOCKET=served.socket, VIX_HOME=str(tmp_path / "elsewhere"))
        result = run_cli(env, "PreToolUse", stdin=READ)

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == '{"behavior":"allow"}\n'


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["PreToolUse"], "{}", "hookbus-client: no server on "),
        (["PreToolUse"], "[1]", "hookbus-client: the envelope must be a JSON object"),
        (["PreToolUse"], "{broken", "hookbus-client: the envelope is not valid JSON: "),
        (["Nope"], "{}", "hookbus-client: unknown event 'Nope'; events are PreToolUse, "),
        ([], "{}", "usage: node hookbus-client.mjs EVENT < envelope.json"),
    ],
    ids=["no-server", "not-object", "not-json", "unknown-event", "usage"],
)
def test_cli_errors_exit_1(tmp_path: Path, home: Path, args: list[str], stdin: str, message: str) -> None:
    """An error exits 1 with one line on stderr and nothing on stdout."""
    env = node_env(tmp_path, VIX_HOME=str(home))
    if args == ["Nope"]:
        with Served(home):
            result = run_cli(env, *args, stdin=stdin)
    else:
        result = run_cli(env, *args, stdin=stdin)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith(message), result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.timeout(60)
def test_concurrent_requests(tmp_path: Path, home: Path, write_hook: Callable[..., Path]) -> None:
    """Requests in flight on one connection are each answered with their own result, the
    slow one last though it was sent first."""
    write_guard(write_hook)
    write_hook("slow", mode="sync", blocking=True, matcher="slow_tool", command="sleep 1")
    body = """
const client = await connect({ home: process.env.TEST_HOME });
const order = [];
const noted = (name, promise) => promise.then((value) => { order.push(name); return value; });
const envelope = (tool) => ({ tool_name: tool, tool_input: {}, cwd: "/" });
const results = await Promise.all([
  noted("slow", client.emit("PreToolUse", envelope("slow_tool"))),
  ...[0, 1, 2, 3, 4].map((i) => noted(`deny${i}`, client.emit("PreToolUse", envelope("bash")))),
  ...[0, 1, 2, 3, 4].map((i) => noted(`allow${i}`, client.emit("PreToolUse", envelope("read_file")))),
  noted("ping", client.ping()),
]);
client.close();
console.log(JSON.stringify({ results, order }));
"""
    with Served(home):
        out = run_module(node_env(tmp_path, TEST_HOME=str(home)), body)

    deny = {"behavior": "deny", "reason": DENY_REASON}
    allow = {"behavior": "allow"}
    *emits, ping = out["results"]
    assert emits == [allow, *[deny] * 5, *[allow] * 5]
    assert set(ping) == {"version", "generation", "home", "pid"}
    assert Path(ping["home"]) == home
    assert out["order"][-1] == "slow"
    assert sorted(out["order"]) == sorted(["slow", "ping", *(f"deny{i}" for i in range(5)), *(f"allow{i}" for i in range(5))])


@pytest.mark.timeout(60)
def test_error_responses_reject_with_their_code(tmp_path: Path, home: Path, write_hook: Callable[..., Path]) -> None:
    """An error response rejects that request alone, with a RemoteError carrying its code;
    the connection goes on answering."""
    write_guard(write_hook)
    body = """
const client = await connect({ home: process.env.TEST_HOME });
const caught = (promise) => promise.then(
  (value) => ({ value }),
  (e) => ({ name: e.name, remote: e instanceof RemoteError, code: e.code, message: e.message, data: e.data ?? null }),
);
const out = {
  event: await caught(client.emit("NoSuchEvent", {})),
  method: await caught(client.call("explode", {})),
  hook: await caught(client.trigger("missing", {})),
  params: await caught(client.call("ping", { extra: 1 })),
  after: await caught(client.emit("PreToolUse", { tool_name: "bash", tool_input: {}, cwd: "/" })),
};
client.close();
console.log(JSON.stringify(out));
"""
    with Served(home):
        out = run_module(node_env(tmp_path, TEST_HOME=str(home)), body)

    expected_codes = {"event": -32602, "method": -32601, "hook": -32001, "params": -32602}
    for name, code in expected_codes.items():
        assert (out[name]["name"], out[name]["remote"], out[name]["code"]) == ("RemoteError", True, code), out[name]
    assert out["event"]["message"].startswith("unknown event 'NoSuchEvent'; events are PreToolUse")
    assert out["method"]["message"] == "method not found: 'explode'; methods are emit, trigger, ping, reload, status, explain"
    assert out["after"] == {"value": {"behavior": "deny", "reason": DENY_REASON}}


@pytest.mark.timeout(60)
def test_pending_requests_reject_when_the_connection_closes(
    tmp_path: Path, home: Path, write_hook: Callable[..., Path]
) -> None:
    """A server that dies with a request in flight rejects it with a clear Error, and
    later calls reject at once; close() rejects what is pending too."""
    write_hook("slow", mode="sync", blocking=True, matcher="slow_tool", command="sleep 2")
    body = """
const envelope = { tool_name: "slow_tool", tool_input: {}, cwd: "/" };
const message = (promise) => promise.then(() => "answered", (e) => `${e.name}: ${e.message}`);

const closing = await connect({ home: process.env.TEST_HOME });
const pending = message(closing.emit("PreToolUse", envelope));
closing.close();
const byClose = await pending;

const client = await connect({ home: process.env.TEST_HOME });
await client.ping();
const inFlight = message(client.emit("PreToolUse", envelope));
setTimeout(() => process.kill(Number(process.env.SERVER_PID), "SIGKILL"), 200);
const byServer = await inFlight;
const later = await message(client.ping());
console.log(JSON.stringify({ byClose, byServer, later }));
"""
    with Served(home) as served:
        env = node_env(tmp_path, TEST_HOME=str(home), SERVER_PID=str(served.process.pid))
        out = run_module(env, body)
        assert served.wait() == -signal.SIGKILL

    socket = home / "run" / "hookbus.sock"
    assert out["byClose"] == f"Error: the client of {socket} is closed"
    assert out["byServer"] == f"Error: the server on {socket} closed the connection before answering"
    assert out["later"] == out["byServer"]


@pytest.mark.timeout(60)
def test_long_socket_path(tmp_path: Path, write_hook: Callable[..., Path]) -> None:
    """A socket path longer than sun_path holds is reached, as the Python client does."""
    home = tmp_path.joinpath(*["deep-directory-name"] * 6, "home")
    (home / "hooks").mkdir(parents=True)
    assert len(str(home / "run" / "hookbus.sock")) > 108
    with Served(home):
        out = run_module(
            node_env(tmp_path, VIX_HOME=str(home)),
            "const c = await connect(); console.log(JSON.stringify(await c.ping())); c.close();",
        )
    assert Path(out["home"]) == home


SOCKET_CASES: list[dict[str, str]] = [
    {},
    {"VIX_HOME": "/srv/vix"},
    {"VIX_HOME": "relative/home"},
    {"VIX_HOME": "~/elsewhere"},
    {"VIX_HOME": ""},
    {"HOOKBUS_SOCKET": "/tmp/x.sock", "VIX_HOME": "/srv/vix"},
    {"HOOKBUS_SOCKET": "rel/x.sock"},
    {"HOOKBUS_SOCKET": "~/x.sock"},
    {"HOOKBUS_SOCKET": "", "VIX_HOME": "/srv/vix/"},
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overrides", SOCKET_CASES, ids=[json.dumps(case) for case in SOCKET_CASES])
def test_default_socket_is_the_python_clients(tmp_path: Path, overrides: dict[str, str]) -> None:
    """socketPath() and homeRoot() give what hookbus.serve.rendezvous gives, in the same
    environment and working directory."""
    assert NODE is not None
    env = node_env(tmp_path, **overrides)
    python = subprocess.run(
        [sys.executable, "-c", "from hookbus.serve.rendezvous import *; print(socket_path(None, home_root()))"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30,
    )
    node = subprocess.run(
        [NODE, "--input-type=module", "-e", f"import {{ socketPath }} from {json.dumps(CLIENT.as_uri())}; console.log(socketPath())"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30,
    )
    assert (python.returncode, node.returncode) == (0, 0), python.stderr + node.stderr
    assert node.stdout == python.stdout


@pytest.mark.timeout(60)
def test_answers_split_and_joined_across_chunks(tmp_path: Path) -> None:
    """Against a scripted server in the same Node process: answers written several to a
    chunk, one cut in pieces (a multi-byte character included), out of order; then an error
    with a null id and a close, which rejects what is still pending with that error."""
    body = """
import net from "node:net";
const path = process.env.TEST_SOCKET;
const pause = () => new Promise((resolve) => setTimeout(resolve, 20));
const server = net.createServer(async (peer) => {
  let seen = "";
  for await (const chunk of peer) {
    seen += chunk;
    if (seen.split("\\n").length - 1 < 4) continue;
    const ids = seen.trim().split("\\n").map((line) => JSON.parse(line).id);
    const answer = (id, result) => JSON.stringify({ jsonrpc: "2.0", id, result }) + "\\n";
    const both = answer(ids[2], "third") + answer(ids[0], { text: "caf\\u00e9 \\u2603" });
    const bytes = Buffer.from(both + answer(ids[1], "second").slice(0, 9));
    const cut = bytes.indexOf(0xe2) + 1;  // inside the snowman's three bytes
    for (const piece of [bytes.subarray(0, 3), bytes.subarray(3, cut), bytes.subarray(cut)]) {
      peer.write(piece);
      await pause();
    }
    peer.write(answer(ids[1], "second").slice(9));
    await pause();
    peer.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32005, message: "permission denied: go away" } }) + "\\n");
  }
});
await new Promise((resolve) => server.listen(path, resolve));
const client = await connect({ socket: path });
const settled = await Promise.allSettled([client.ping(), client.ping(), client.ping(), client.ping()]);
server.close();
console.log(JSON.stringify(settled.map((s) => s.status === "fulfilled" ? s.value : { code: s.reason.code, message: s.reason.message })));
"""
    socket = tmp_path / "fake.sock"
    out = run_module(node_env(tmp_path, TEST_SOCKET=str(socket)), body)

    assert out == [
        {"text": "café ☃"},
        "second",
        "third",
        {"code": -32005, "message": f"the server on {socket}: permission denied: go away"},
    ]


@pytest.mark.timeout(60)
def test_a_full_accept_queue_makes_the_client_wait(tmp_path: Path, home: Path, write_hook: Callable[..., Path]) -> None:
    """libuv connects a Unix socket without blocking, so a full queue is EAGAIN at once: the
    client tries again until its connect timeout rather than calling the server absent."""
    write_guard(write_hook)
    with Served(home) as served:
        with full_accept_queue(served, resume_after=0.5):
            result = run_cli(node_env(tmp_path, VIX_HOME=str(home)), "PreToolUse", stdin=BASH)
    assert (result.returncode, result.stderr) == (2, ""), result.stderr
    assert json.loads(result.stdout)["behavior"] == "deny"
