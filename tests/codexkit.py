"""The real Codex CLI, offline, for tests and the bench: a model stub, a throw-away
CODEX_HOME, ``codex exec`` and ``codex app-server`` runs, and hookbus installed as its hook
engine.

Nothing here is Codex itself: ``$CODEX_BIN`` names the executable (the static binary of the
npm package ``@openai/codex-linux-x64``, ``vendor/x86_64-unknown-linux-musl/bin/codex``; the
node wrapper ``node_modules/.bin/codex`` works too). Every process started here runs in a
session of its own and is killed with its whole group when it is done with.

The model is ``ModelStub``: a Responses API (``POST /v1/responses``, answered as SSE) on
127.0.0.1, in a thread of the caller. What it answers is scripted by the user's prompt:

- a request that offers no tools (a title, a summary) gets a short text;
- ``RUN<<CMD>>`` in the prompt: the model calls the shell tool (``exec_command``) with CMD
  (default ``echo hi``), ``ARGS<<{json}>>`` merged into its arguments;
- ``CALLS<<N>>``: it makes N such calls, one after another, before it answers;
- once the calls are made, it answers ``done: <the last tool output>``, which ends the turn.
  A user message after that (a Stop hook's ``<hook_prompt>``) starts the script over.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Sequence

from hookbus.dialects import codex_names
from hookbus.hosts.codex_trust import trust_hash, trust_key

#: Names the Codex executable the tests and the bench run.
CODEX_BIN_VARIABLE = "CODEX_BIN"
#: Every event Codex runs hooks on.
ALL_EVENTS = codex_names.ALL_EVENTS
#: Events whose matcher Codex ignores (and leaves out of the trust hash).
NO_MATCHER = frozenset({"UserPromptSubmit", "Stop"})
#: Events whose timeout Codex defaults to 1 s and clamps to 3 s.
SHORT_TIMEOUT = frozenset({"SessionEnd", "Interrupt"})

#: What ``codex exec`` prints on stderr for a hook run: ``hook: PreToolUse Blocked``.
HOOK_LINE = re.compile(r"^hook: (\w+)(?: (Completed|Blocked|Failed|Stopped))?\b.*$")


def codex_bin() -> str | None:
    return os.environ.get(CODEX_BIN_VARIABLE) or None


# ----------------------------------------------------------------------------- trust
def trust_entries(source: Path, hooks: dict[str, Any]) -> str:
    """The ``[hooks.state]`` tables of config.toml that trust every handler of ``hooks``
    (a hooks.json's ``hooks`` object) written in the file ``source``: by hookbus's own
    recipe (``hookbus.hosts.codex_trust``), which the app server's ``hooks/list`` checks."""
    lines: list[str] = []
    for event, groups in hooks.items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group.get("hooks") or []):
                key = trust_key(str(source), event, g, h)
                lines += [f"[hooks.state.{json.dumps(key)}]",
                          f"trusted_hash = {json.dumps(trust_hash(event, group.get('matcher'), handler))}", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the model
def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content or [] if isinstance(part, dict) and isinstance(part.get("text"), str))


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def script(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items the stub answers ``body`` (a Responses API request) with."""
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not body.get("tools"):
        return [_message("stub side answer")]
    users = [i for i, item in enumerate(items) if item.get("type", "message") == "message" and item.get("role") == "user"]
    last_user = users[-1] if users else -1
    outputs = [item for item in items[last_user + 1:] if item.get("type") in ("function_call_output", "custom_tool_call_output")]
    prompt = "\n".join(_text(items[i]) for i in users)
    command, extra, calls = "echo hi", {}, 1
    if found := re.search(r"RUN<<(.+?)>>", prompt, re.S):
        command = found.group(1)
    if found := re.search(r"ARGS<<(.+?)>>", prompt, re.S):
        extra = json.loads(found.group(1))
    if found := re.search(r"CALLS<<(\d+)>>", prompt):
        calls = int(found.group(1))
    if len(outputs) >= calls:
        output = outputs[-1].get("output") if outputs else ""
        return [_message("done: " + (output if isinstance(output, str) else json.dumps(output))[:400])]
    return [{"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20], "call_id": "call_" + uuid.uuid4().hex[:20],
             "name": "exec_command", "arguments": json.dumps({"cmd": command, **extra})}]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _StubServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(b'{"models": []}' if self.path.split("?")[0].endswith("/models") else b"{}")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if not self.path.split("?")[0].endswith("/responses") or not isinstance(body, dict):
            return self._reply(b"{}")
        try:
            items = script(body)
        except Exception as error:  # a bad marker must not make Codex retry
            items = [_message(f"stub error: {error!r}")]
        self.server.stub.record(body, items)
        events: list[dict[str, Any]] = []
        response: dict[str, Any] = {"id": "resp_" + uuid.uuid4().hex[:20], "object": "response", "model": body.get("model"), "output": []}
        events.append({"type": "response.created", "response": {**response, "status": "in_progress"}})
        for index, item in enumerate(items):
            events.append({"type": "response.output_item.added", "output_index": index, "item": {**item, "status": "in_progress"}})
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        events.append({"type": "response.completed", "response": {**response, "status": "completed", "output": items, "usage": usage}})
        stream = "".join(
            f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': n})}\n\n" for n, event in enumerate(events)
        )
        self.close_connection = True
        self._reply(stream.encode(), "text/event-stream")


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True
    stub: ModelStub


class ModelStub:
    """The Responses API stub on 127.0.0.1 (a free port), in a thread; ``requests`` keeps
    every ``/responses`` body it was sent (those that offer tools: the agent loop's)."""

    def __init__(self) -> None:
        self.server = _StubServer(("127.0.0.1", 0), _Handler)
        self.server.stub = self
        self.requests: list[dict[str, Any]] = []
        self.replies: list[list[dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def record(self, body: dict[str, Any], items: list[dict[str, Any]]) -> None:
        if body.get("tools"):
            with self._lock:
                self.requests.append(body)
                self.replies.append(items)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.replies.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)

    def __enter__(self) -> ModelStub:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def tail(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's input from the last real prompt on (not the environment context), each
    item as {type, role, text}: what the model was shown after the prompt."""
    items = body.get("input") or []
    start = max((i for i, item in enumerate(items) if item.get("role") == "user"
                 and "<environment_context>" not in _text(item) and "<hook_prompt" not in _text(item)), default=0)
    shown = []
    for item in items[start:]:
        kind = item.get("type", "message")
        if kind == "message":
            shown.append({"type": kind, "role": item.get("role"), "text": _text(item)})
        elif kind.endswith("_output"):
            output = item.get("output")
            shown.append({"type": kind, "text": output if isinstance(output, str) else json.dumps(output)})
        else:
            shown.append({"type": kind, "text": str(item.get("arguments") or item.get("input") or "")})
    return shown


# ----------------------------------------------------------------------------- Codex's home
@dataclass
class CodexLab:
    """A throw-away CODEX_HOME (``home``), working directory (``cwd``) and HOME for one
    Codex, whose model provider is ``stub_url``."""

    root: Path
    stub_url: str
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.home = self.root / "codex-home"
        self.cwd = self.root / "work"
        self.user_home = self.root / "user"
        for folder in (self.home, self.cwd, self.user_home):
            folder.mkdir(parents=True, exist_ok=True)
        top = {"model": "gpt-5.1-codex", "model_provider": "stub", "approval_policy": "never",
               "sandbox_mode": "danger-full-access", **self.settings}
        lines = [f"{key} = {json.dumps(value)}" for key, value in top.items()]
        lines += ["", "[model_providers.stub]", 'name = "stub"', f"base_url = {json.dumps(self.stub_url)}",
                  'wire_api = "responses"', 'env_key = "STUB_API_KEY"', ""]
        self.config.write_text("\n".join(lines) + "\n")

    @property
    def config(self) -> Path:
        return self.home / "config.toml"

    @property
    def hooks_file(self) -> Path:
        return self.home / "hooks.json"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment Codex runs in: the caller's, without what would point it (or a
        hookbus it runs) elsewhere."""
        env = {name: value for name, value in os.environ.items()
               if not name.startswith(("CODEX", "OPENAI", "HOOKBUS", "PYTEST", "VIX_"))}
        env.update(CODEX_HOME=str(self.home), HOME=str(self.user_home), STUB_API_KEY="dummy", NO_COLOR="1")
        env.update(extra)
        return env

    def write_hooks(self, hooks: dict[str, Any], trusted: bool = True) -> None:
        """``hooks`` (event -> groups) as the home's hooks.json, each handler trusted in
        config.toml unless ``trusted`` is false."""
        self.hooks_file.write_text(json.dumps({"hooks": hooks}, indent=1) + "\n")
        if trusted:
            with self.config.open("a") as config:
                config.write("\n" + trust_entries(self.hooks_file, hooks) + "\n")


def every_event(command: str, timeout: int = 30, events: Sequence[str] = ALL_EVENTS, matcher: str | None = None) -> dict[str, Any]:
    """One command handler on each of ``events``, as ``hookbus import codex`` writes the
    bridge: no matcher unless ``matcher`` (a matcher ``*`` keeps PreModelRequest and
    PostModelRequest hooks from running at all in 0.169.0)."""
    hooks: dict[str, Any] = {}
    for event in events:
        handler: dict[str, Any] = {"type": "command", "command": command,
                                   "timeout": min(timeout, 3) if event in SHORT_TIMEOUT else timeout}
        group: dict[str, Any] = {"hooks": [handler]}
        if matcher is not None and event not in NO_MATCHER:
            group["matcher"] = matcher
        hooks[event] = [group]
    return hooks


# ----------------------------------------------------------------------------- processes
def kill_group(process: subprocess.Popen[Any]) -> None:
    """SIGKILL ``process``'s whole group (it was started in a session of its own), then reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


@dataclass
class ExecRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool

    @property
    def hook_lines(self) -> list[str]:
        """Codex's stderr lines about hooks (``hook: PreToolUse Blocked``), and its warnings."""
        return [line for line in self.stderr.splitlines()
                if HOOK_LINE.match(line) or ("warning" in line.lower() and "hook" in line.lower())]

    def statuses(self, event: str) -> list[str]:
        """The results Codex printed for ``event``'s runs: Completed, Blocked, Failed, Stopped."""
        found = []
        for line in self.stderr.splitlines():
            match = HOOK_LINE.match(line)
            if match and match.group(1) == event and match.group(2):
                found.append(match.group(2))
        return found


def run_exec(codex: str, lab: CodexLab, prompt: str, *args: str, timeout: float = 90.0, env: dict[str, str] | None = None) -> ExecRun:
    """``codex exec --skip-git-repo-check ARGS PROMPT`` in ``lab``; killed (its group) after ``timeout``."""
    argv = [codex, "exec", "--skip-git-repo-check", *args, prompt]
    started = time.monotonic()
    process = subprocess.Popen(argv, cwd=lab.cwd, env=env or lab.env(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    timed_out = False
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(process)
        out, err = process.communicate()
    finally:
        kill_group(process)  # whatever it left in its group (a hook's children)
    return ExecRun(process.returncode, out, err, time.monotonic() - started, timed_out)


class AppServer:
    """``codex app-server`` (JSON-RPC, one JSON object a line, over stdio) in ``lab``.

    ``answer(request) -> result`` answers the server's own requests (approvals); each is
    kept in ``server_requests``. ``hook/started`` and ``hook/completed`` notifications are
    kept in ``hook_runs`` (their ``run``)."""

    def __init__(self, codex: str, lab: CodexLab, answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.lab = lab
        self.answer = answer or (lambda request: {"decision": "decline"})
        self.process = subprocess.Popen(
            [codex, "app-server"], cwd=lab.cwd, env=env or lab.env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True,
        )
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.log: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.hook_runs: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self._next = 0
        self._readers = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                self.messages.put(message)
        self.messages.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr_lines.append(line.rstrip("\n"))

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        """Send a request; the ``result`` of its answer (AssertionError on an error or a timeout)."""
        self._next += 1
        ident = self._next
        self.send({"id": ident, "method": method, "params": params})
        answer = self.pump(lambda message: message.get("id") == ident and "method" not in message, timeout, method)
        if "error" in answer:
            raise AssertionError(f"{method}: {answer['error']}")
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def pump(self, until: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> dict[str, Any]:
        """Read messages (answering the server's requests) until one satisfies ``until``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"app server: no {what} within {timeout:.0f} s; stderr {self.stderr_lines[-20:]}")
            try:
                message = self.messages.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError(f"app server exited waiting for {what}; stderr {self.stderr_lines[-20:]}")
            self.log.append(message)
            method = message.get("method")
            if method is not None and "id" in message:  # the server asks the client
                self.server_requests.append(message)
                self.send({"id": message["id"], "result": self.answer(message)})
            elif isinstance(method, str) and method.startswith("hook/"):
                run = (message.get("params") or {}).get("run")
                if isinstance(run, dict):
                    self.hook_runs.append({"method": method, **run})
            if until(message):
                return message

    def start(self) -> None:
        self.request("initialize", {"clientInfo": {"name": "hookbus-tests", "version": "0"}})
        self.send({"method": "initialized"})

    def turn(self, prompt: str, approval: str = "never", sandbox: str = "danger-full-access", timeout: float = 90.0) -> None:
        """A thread with one turn of ``prompt``, until the turn completes."""
        started = self.request("thread/start", {"cwd": str(self.lab.cwd), "approvalPolicy": approval, "sandbox": sandbox})
        thread = (started.get("thread") or {}).get("id")
        self.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": prompt}]})
        self.pump(lambda message: message.get("method") == "turn/completed", timeout, "turn/completed")

    def completed(self, event: str | None = None) -> list[dict[str, Any]]:
        """The ``hook/completed`` runs (of ``event``, named as hooks.json names it: the app
        server says ``preToolUse``)."""
        return [run for run in self.hook_runs if run["method"] == "hook/completed"
                and (event is None or str(run.get("eventName", "")).lower() == event.lower())]

    def problems(self, accept: Sequence[str] = ("completed",)) -> list[str]:
        """Every hook run whose status is not one of ``accept``: its event, status and
        Codex's entries (which say why a run "failed")."""
        return [f"{run.get('eventName')} {run.get('status')}: " + "; ".join(str(e.get("text")) for e in run.get("entries") or [])
                for run in self.completed() if run.get("status") not in accept]

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        kill_group(self.process)
        for reader in self._readers:
            reader.join(5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> AppServer:
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


# ----------------------------------------------------------------------------- hookbus
def write_hookbus_hook(home: Path, hook_id: str, event: str, command: str, matcher: str | None = None, **fields: Any) -> Path:
    """HOME/hooks/HOOK_ID/hook.json: a command hook on ``event``."""
    folder = home / "hooks" / hook_id
    folder.mkdir(parents=True, exist_ok=True)
    trigger: dict[str, Any] = {"event": event}
    if matcher is not None:
        trigger["matcher"] = matcher
    spec = {"id": hook_id, "trigger": trigger, "command": command, **fields}
    path = folder / "hook.json"
    path.write_text(json.dumps(spec, indent=2) + "\n")
    return path


def hookbus_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("CODEX", "HOOKBUS", "PYTEST", "VIX_"))}
    env.update(extra)
    return env


def has_codex_hook(hookbus: str) -> bool:
    """Whether ``hookbus`` is an executable with the ``codex-hook`` verb."""
    if not os.access(hookbus, os.X_OK):
        return False
    done = subprocess.run([hookbus, "codex-hook", "--help"], capture_output=True, text=True, timeout=60, env=hookbus_env())
    return done.returncode == 0


@dataclass
class Install:
    """How hookbus went into a Codex home: ``argv`` of the import, its output, and the exec
    flags it needs (none: the import trusts what it writes)."""

    argv: list[str]
    output: str
    exec_args: tuple[str, ...] = ()


def install_hookbus(hookbus: str, lab: CodexLab, vix_home: Path, http: str | None = None, ask_codex: str | None = None) -> Install:
    """hookbus as ``lab``'s hook engine: ``hookbus import codex HOOKS --install-bridge
    --home VIX_HOME [--http URL]``, as a user installs it. ``ask_codex``: the Codex the
    import may ask whether it trusts what it wrote (its ``CODEX_BIN``)."""
    argv = [hookbus, "import", "codex", str(lab.hooks_file), "--install-bridge", "--home", str(vix_home)]
    if http is not None:
        argv += ["--http", http]
    env = hookbus_env(CODEX_HOME=str(lab.home), **({CODEX_BIN_VARIABLE: ask_codex} if ask_codex else {}))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    if done.returncode != 0:
        raise AssertionError(f"{shlex.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return Install(argv, done.stdout + done.stderr)


class HookbusServer:
    """``hookbus serve --home HOME --http 127.0.0.1:0`` in a session of its own."""

    READY = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")

    def __init__(self, hookbus: str, home: Path, log: Path, timeout: float = 30.0) -> None:
        self.home = home
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [hookbus, "serve", "--home", str(home), "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, env=hookbus_env(), start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            found = self.READY.search(log.read_text(errors="replace"))
            if found:
                self.url = found.group(1)
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"hookbus serve did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL, as a crash: its run file stays behind."""
        kill_group(self.process)

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                pass
        kill_group(self.process)

    def __enter__(self) -> HookbusServer:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


if __name__ == "__main__":  # a quick look: python tests/codexkit.py "RUN<<echo hi>>"
    import tempfile

    codex = codex_bin() or sys.exit(f"set {CODEX_BIN_VARIABLE}")
    with tempfile.TemporaryDirectory() as scratch, ModelStub() as stub:
        lab = CodexLab(Path(scratch), stub.url)
        lab.write_hooks(every_event("cat >/dev/null"))
        ran = run_exec(codex, lab, sys.argv[1] if len(sys.argv) > 1 else "RUN<<echo hi>>")
        print(ran.returncode, ran.seconds, *ran.hook_lines, sep="\n")
        for body in stub.requests:
            print(json.dumps(tail(body))[:600])
