"""The real Codex CLI with hookbus as its hook engine: every decision Codex can honour gets
through.

Skipped unless ``$CODEX_BIN`` names a Codex CLI (0.169.0 was the one checked): Codex is not
something ``make test`` installs. Install it anywhere, for example::

    npm install --prefix DIR @openai/codex@0.169.0
    CODEX_BIN=DIR/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex \\
        .venv/bin/python -m pytest tests/test_codex_real.py -p no:xdist

(the native binary: the node wrapper ``node_modules/.bin/codex`` works too, but leaves the
native process behind when it is killed; each run here is killed with its whole group
anyway).

Each test gets a throw-away CODEX_HOME, working directory, HOME and hookbus home. Codex's
model is ``codexkit.ModelStub`` on 127.0.0.1, which calls the shell tool with the command
the prompt names (``RUN<<cmd>>``) and then answers ``done: <tool output>``; nothing leaves
the machine. hookbus goes into the Codex home with ``hookbus import codex HOOKS.json
--install-bridge --home H`` (the bridge, ``hookbus codex-hook``, on every event, each
handler trusted in config.toml), ``--http URL`` for the gate. What Codex did is read from
its stderr (``hook: PreToolUse Blocked``), from what the model was sent next, and from
the file system; under ``codex app-server`` from its ``hook/completed`` notifications.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from hookbus.dialects.codex_names import VIX_EVENT

from codexkit import (
    CODEX_BIN_VARIABLE,
    AppServer,
    CodexLab,
    ExecRun,
    HookbusServer,
    Install,
    ModelStub,
    codex_bin,
    has_codex_hook,
    install_hookbus,
    run_exec,
    tail,
    write_hookbus_hook,
)

pytestmark = [
    pytest.mark.skipif(
        codex_bin() is None,
        reason=f"{CODEX_BIN_VARIABLE} is not set: these tests drive a real Codex CLI "
        f"(npm install @openai/codex@0.169.0; {CODEX_BIN_VARIABLE}=the codex binary)",
    ),
    pytest.mark.timeout(240),
]

#: The hookbus whose bridge Codex runs: the console script beside this Python.
HOOKBUS = str(Path(sys.executable).parent / "hookbus")

DENY_REASON = "no rm -rf here (hookbus test)"
ESCALATE = '{"sandbox_permissions": "require_escalated", "justification": "hookbus test"}'


def echo_json(decision: dict[str, Any]) -> str:
    return f"echo {shlex.quote(json.dumps(decision))}"


def deny_rm_rf_command() -> str:
    return f"grep -q 'rm -rf' && {echo_json({'behavior': 'deny', 'reason': DENY_REASON})} || true"


class Rig:
    """One Codex (its home, cwd and model stub) and one hookbus home, into which hookbus is
    installed at the first run, after the test wrote its hooks: by ``transport``, the
    command bridge alone (``bridge``: no server, the hooks run in the bridge's process) or
    the gate in front of it, with ``hookbus serve --http`` answering (``gate``)."""

    def __init__(self, codex: str, root: Path, stub: ModelStub, transport: str = "bridge") -> None:
        self.codex = codex
        self.stub = stub
        self.transport = transport
        self.lab = CodexLab(root / "codex", stub.url)
        self.vix = root / "vix"
        (self.vix / "hooks").mkdir(parents=True)
        self.install: Install | None = None
        self.server: HookbusServer | None = None

    def hook(self, hook_id: str, event: str, command: str, matcher: str | None = None, **fields: Any) -> Path:
        return write_hookbus_hook(self.vix, hook_id, event, command, matcher, **fields)

    def serve(self) -> HookbusServer:
        """``hookbus serve --http 127.0.0.1:0`` for this home (stopped when the test ends)."""
        if self.server is None:
            self.server = HookbusServer(HOOKBUS, self.vix, self.lab.root / "serve.log")
        return self.server

    def installed(self, http: str | None = None) -> Install:
        if http is None and self.transport == "gate":
            http = self.serve().url
        self.install = install_hookbus(HOOKBUS, self.lab, self.vix, http)
        if http is not None:
            pre_tool = json.loads(self.lab.hooks_file.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
            assert "gate.sh" in pre_tool, f"no gate on PreToolUse: {pre_tool}\n{self.install.output}"
        return self.install

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    def exec(self, prompt: str, timeout: float = 90.0) -> ExecRun:
        install = self.install or self.installed()
        ran = run_exec(self.codex, self.lab, prompt, *install.exec_args, timeout=timeout)
        assert not ran.timed_out, f"codex exec timed out; stderr:\n{ran.stderr[-3000:]}"
        return ran

    def app(self, answer: Any = None) -> AppServer:
        if self.install is None:
            self.installed()
        return AppServer(self.codex, self.lab, answer)

    def shown(self, index: int = -1) -> list[dict[str, Any]]:
        """What the model was sent in its request ``index`` (agent-loop requests only), from the prompt on."""
        assert self.stub.requests, "the model was never called"
        return tail(self.stub.requests[index])

    def tool_outputs(self) -> list[str]:
        return [item["text"] for body in self.stub.requests[-1:] for item in tail(body) if item["type"].endswith("_output")]


def evidence(ran: ExecRun) -> str:
    return "Codex's hook lines:\n" + "\n".join(ran.hook_lines) + f"\nstderr tail:\n{ran.stderr[-1500:]}"


def assert_none_failed(ran: ExecRun) -> None:
    failed = [line for line in ran.hook_lines if line.endswith(" Failed")]
    assert not failed, f"Codex rejected a bridge answer (it fails open on those): {failed}\n{evidence(ran)}"


@pytest.fixture(scope="module")
def codex() -> str:
    found = codex_bin()
    assert found is not None
    if not has_codex_hook(HOOKBUS):
        pytest.fail(f"{HOOKBUS} has no `codex-hook`: the bridge these tests drive")
    return found


@pytest.fixture(params=["bridge", "gate"])
def rig(codex: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """A Rig, once with the command bridge alone, once with the gate and a server."""
    with ModelStub() as stub:
        made = Rig(codex, tmp_path, stub, request.param)
        try:
            yield made
        finally:
            made.close()


@pytest.fixture
def bridge_rig(codex: str, tmp_path: Path) -> Iterator[Rig]:
    """A Rig whose test installs hookbus itself (or needs no server)."""
    with ModelStub() as stub:
        made = Rig(codex, tmp_path, stub)
        try:
            yield made
        finally:
            made.close()


# ----------------------------------------------------------------------------- install
def test_import_trusts_every_bridge_hook(bridge_rig: Rig) -> None:
    """``hookbus import codex --install-bridge`` puts the bridge on every event and trusts
    each handler: the app server's ``hooks/list`` says ``trusted`` for all of them (an
    untrusted hook is skipped by Codex without a word)."""
    bridge_rig.install = install = install_hookbus(HOOKBUS, bridge_rig.lab, bridge_rig.vix, ask_codex=bridge_rig.codex)
    hooks = json.loads(bridge_rig.lab.hooks_file.read_text())["hooks"]
    with bridge_rig.app() as app:
        listed = app.request("hooks/list", {"cwds": [str(bridge_rig.lab.cwd)]})
    entries = [hook for cwd in listed.get("data") or [] for hook in cwd.get("hooks") or []]
    assert entries, f"hooks/list found no hook: {listed}; install said {install.output}"
    untrusted = {hook.get("key"): hook.get("trustStatus") for hook in entries if hook.get("trustStatus") != "trusted"}
    assert not untrusted, f"hooks Codex does not trust: {untrusted}"
    # The ten events hookbus has; not those the bridge would answer with nothing.
    assert set(hooks) == set(VIX_EVENT), f"events without the bridge: {set(VIX_EVENT) - set(hooks)}"
    handlers = sum(len(group.get("hooks") or []) for groups in hooks.values() for group in groups)
    assert len(entries) == handlers, f"Codex lists {len(entries)} hooks, hooks.json has {handlers}"
    assert "codex-hook" in json.dumps(hooks)


def test_every_event_completes_with_no_opinion(rig: Rig) -> None:
    """hookbus hooks that allow, on each event: every bridge run Completed, none Failed,
    and the tool ran; under the app server too (its entries say why a run failed)."""
    for event in ("ThreadStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"):
        rig.hook(f"noop-{event.lower()}", event, "cat >/dev/null", mode="sync")
    ran = rig.exec("RUN<<echo hi-from-codex>>")
    assert ran.returncode == 0, evidence(ran)
    assert_none_failed(ran)
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"):
        assert ran.statuses(event) == ["Completed"], f"{event}: {ran.statuses(event)}\n{evidence(ran)}"
    assert any("hi-from-codex" in output for output in rig.tool_outputs()), rig.tool_outputs()
    rig.stub.clear()
    with rig.app() as app:
        app.turn("RUN<<echo hi-again>>")
    assert not app.problems(), app.problems()
    assert {str(run.get("eventName")) for run in app.completed()} >= {"sessionStart", "userPromptSubmit", "preToolUse", "postToolUse", "stop"}


# ----------------------------------------------------------------------------- decisions
def test_deny_blocks_rm_rf(rig: Rig) -> None:
    """A blocking hookbus hook denies ``rm -rf``: Codex does not run it (Blocked), and the
    model's next request carries the block text with hookbus's reason."""
    rig.hook("no-rm-rf", "PreToolUse", deny_rm_rf_command(), matcher="bash", mode="sync", blocking=True)
    victim = rig.lab.cwd / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("still here\n")
    ran = rig.exec("RUN<<rm -rf victim>>")
    assert victim.is_dir() and (victim / "keep.txt").exists(), f"rm -rf ran\n{evidence(ran)}"
    assert ran.statuses("PreToolUse") == ["Blocked"], evidence(ran)
    assert ran.statuses("PostToolUse") == [], "PostToolUse fired for a blocked tool"
    outputs = rig.tool_outputs()
    assert any("blocked by PreToolUse hook" in text and DENY_REASON in text for text in outputs), outputs


def test_modify_rewrites_the_command(rig: Rig) -> None:
    """A blocking hookbus hook's modify: the rewritten command ran, the original did not."""
    rewrite = {"behavior": "modify", "input": {"command": "touch rewritten-ran && echo rewritten-by-hookbus"}}
    rig.hook("rewrite", "PreToolUse", f"grep -q original-ran && {echo_json(rewrite)} || true", matcher="bash",
             mode="sync", blocking=True)
    ran = rig.exec("RUN<<touch original-ran>>")
    assert_none_failed(ran)
    assert ran.statuses("PreToolUse") == ["Completed"], evidence(ran)
    assert (rig.lab.cwd / "rewritten-ran").exists(), f"the rewritten command did not run\n{evidence(ran)}"
    assert not (rig.lab.cwd / "original-ran").exists(), "the original command ran"
    assert any("rewritten-by-hookbus" in text for text in rig.tool_outputs()), rig.tool_outputs()


def test_deny_without_a_reason_still_blocks(rig: Rig) -> None:
    """A hookbus deny with no reason (``exit 2``, nothing on stderr): Codex fails open on a
    deny without a reason, so the bridge must give one. Blocked, and the tool did not run."""
    rig.hook("silent-deny", "PreToolUse", "exit 2", matcher="bash", mode="sync", blocking=True)
    ran = rig.exec("RUN<<touch should-not-run>>")
    assert ran.statuses("PreToolUse") == ["Blocked"], evidence(ran)
    assert not (rig.lab.cwd / "should-not-run").exists(), evidence(ran)
    assert any("blocked by PreToolUse hook" in text for text in rig.tool_outputs()), rig.tool_outputs()


def test_home_guard_blocks_a_write_into_the_home(rig: Rig) -> None:
    """The built-in home guard (no hook written): a command that writes a hook into the
    hookbus home is blocked."""
    planted = rig.vix / "hooks" / "planted"
    ran = rig.exec(f"RUN<<touch {planted}>>")
    assert ran.statuses("PreToolUse") == ["Blocked"], evidence(ran)
    assert not planted.exists(), evidence(ran)
    assert any("protect_home" in text for text in rig.tool_outputs()), rig.tool_outputs()


def test_user_prompt_deny_drops_the_prompt(rig: Rig) -> None:
    """A blocking UserPromptSubmit deny: the prompt is dropped, the model never called."""
    rig.hook("no-prompt", "UserPromptSubmit", echo_json({"behavior": "deny", "reason": "PROMPT-DENIED"}), mode="sync",
             blocking=True)
    ran = rig.exec("RUN<<touch should-not-run>>")
    assert ran.statuses("UserPromptSubmit") == ["Blocked"], evidence(ran)
    assert not rig.stub.requests, [tail(body) for body in rig.stub.requests]
    assert not (rig.lab.cwd / "should-not-run").exists()


@pytest.mark.parametrize("event", ["UserPromptSubmit", "Stop"])
def test_halt_stops(rig: Rig, event: str) -> None:
    """``halt`` (Claude Code's ``continue: false``) where Codex takes it: "Stopped"; on
    UserPromptSubmit before any model call."""
    rig.hook("halt", event, echo_json({"continue": False, "stopReason": f"HALT-{event}"}), mode="sync")
    ran = rig.exec("RUN<<echo hi>>")
    assert_none_failed(ran)
    assert ran.statuses(event) == ["Stopped"], evidence(ran)
    assert len(rig.stub.requests) == (0 if event == "UserPromptSubmit" else 2), evidence(ran)


@pytest.mark.parametrize(
    ("event", "request_index"),
    [("PreToolUse", 1), ("PostToolUse", 1), ("UserPromptSubmit", 0), ("ThreadStart", 0)],
    ids=["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart"],
)
def test_context_reaches_the_model(rig: Rig, event: str, request_index: int) -> None:
    """A hookbus hook's context reaches the model's next request as a developer message:
    the tool events' with the tool's output (the second request), UserPromptSubmit's and
    SessionStart's (hookbus's ThreadStart) with the prompt (the first), and not before."""
    text = f"CTX-FROM-HOOKBUS-{event}"
    matcher = "bash" if event.endswith("ToolUse") else None
    rig.hook("context", event, echo_json({"behavior": "context", "context": text}), matcher=matcher, mode="sync")
    ran = rig.exec("RUN<<echo hi>>")
    assert_none_failed(ran)
    assert ran.statuses("SessionStart" if event == "ThreadStart" else event) == ["Completed"], evidence(ran)
    assert len(rig.stub.requests) == 2, evidence(ran)

    def developer(body: dict[str, Any]) -> list[str]:
        return [str(part.get("text")) for item in body.get("input") or [] if item.get("role") == "developer"
                for part in item.get("content") or [] if isinstance(part, dict)]

    assert text in developer(rig.stub.requests[request_index]), f"not a developer message: {rig.shown(request_index)}"
    if request_index:
        assert text not in developer(rig.stub.requests[0]), "the context came before the tool ran"
    assert any("hi" in output for output in rig.tool_outputs()), "the tool did not run"


def test_stop_continue_with_goes_on_once(rig: Rig, tmp_path: Path) -> None:
    """A Stop hook that keeps the turn going once (hookbus ``continue_with``, said the way
    Claude Code's hooks say it): Codex goes on exactly once more, with the reason as a
    ``<hook_prompt>``, then stops."""
    fired = tmp_path / "stop-fired.jsonl"
    marker = tmp_path / "kept-going-once"
    command = (
        f"cat >> {shlex.quote(str(fired))}; echo >> {shlex.quote(str(fired))}; "
        f"if [ -e {shlex.quote(str(marker))} ]; then exit 0; fi; touch {shlex.quote(str(marker))}; "
        + echo_json({"decision": "block", "reason": "KEEP-GOING-ONCE: run it again"})
    )
    rig.hook("keep-going-once", "Stop", command, mode="sync")
    ran = rig.exec("RUN<<echo hi>>", timeout=120)
    assert ran.returncode == 0, evidence(ran)
    assert_none_failed(ran)
    envelopes = [json.loads(line) for line in fired.read_text().splitlines() if line.strip()]
    assert len(envelopes) == 2, f"the Stop hook ran {len(envelopes)} times\n{evidence(ran)}"
    assert ran.statuses("Stop") == ["Blocked", "Completed"], evidence(ran)
    prompts = [item["text"] for item in rig.shown() if item["type"] == "message" and "<hook_prompt" in item["text"]]
    every = [item["text"] for body in rig.stub.requests for item in tail(body) if "<hook_prompt" in item["text"]]
    assert len(prompts) == 1 and "KEEP-GOING-ONCE" in prompts[0], rig.shown()
    assert len({*every}) == 1, every
    # the first turn: a call and its answer; once more: another call and its answer
    assert len(rig.stub.requests) == 4, [tail(body)[-1] for body in rig.stub.requests]


def test_stop_loop_is_bounded(rig: Rig) -> None:
    """A Stop hook that always says go on: Codex has no cap, hookbus's bridge stops it
    (after 8 in a row)."""
    rig.hook("always-go-on", "Stop", echo_json({"decision": "block", "reason": "ALWAYS-GO-ON"}), mode="sync")
    ran = rig.exec("RUN<<echo hi>>", timeout=150)
    assert ran.returncode == 0, evidence(ran)
    stops = ran.statuses("Stop")
    assert stops and stops[-1] == "Completed", evidence(ran)
    assert 2 <= len(stops) <= 12, f"{len(stops)} Stop runs: {stops}"


# ----------------------------------------------------------------------------- PermissionRequest
@pytest.mark.parametrize("verdict", ["deny", "approve", "ask"])
def test_permission_request_under_the_app_server(rig: Rig, verdict: str) -> None:
    """Under ``codex app-server`` (on-request, workspace-write), the model asks to run a
    command outside the sandbox: a hookbus deny rejects it without asking the user; an
    approve runs it without asking; an ask leaves it to the user (here: declined)."""
    answers: dict[str, dict[str, Any]] = {
        "deny": {"behavior": "deny", "reason": "PERMISSION-DENIED-BY-HOOKBUS"},
        "approve": {"decision": "approve"},  # hookbus's approve, in Claude Code's words
        "ask": {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "permissionDecision": "ask"}},
    }
    rig.hook("permission", "PermissionRequest", echo_json(answers[verdict]), matcher="bash", mode="sync", blocking=True)
    with rig.app(answer=lambda request: {"decision": "decline"}) as app:
        app.turn(f"RUN<<touch escalated-ran>> ARGS<<{ESCALATE}>>", approval="on-request", sandbox="workspace-write")
    runs = app.completed("PermissionRequest")
    assert [run.get("status") for run in runs] == ["blocked" if verdict == "deny" else "completed"], app.problems()
    assert not app.problems(("completed", "blocked")), app.problems()
    approvals = [request for request in app.server_requests if "requestApproval" in str(request.get("method"))]
    ran = (rig.lab.cwd / "escalated-ran").exists()
    outputs = rig.tool_outputs()
    if verdict == "deny":
        assert not approvals, f"the user was asked: {approvals}"
        assert not ran, "the command ran"
        assert any("Rejected" in text and "PERMISSION-DENIED-BY-HOOKBUS" in text for text in outputs), outputs
    elif verdict == "approve":
        assert not approvals, f"the user was asked: {approvals}"
        assert ran, f"the approved command did not run: {outputs}"
    else:
        assert len(approvals) == 1, f"the user was not asked: {app.server_requests}"
        assert not ran and any("rejected by user" in text for text in outputs), outputs


# ----------------------------------------------------------------------------- failing closed
def test_fail_closed_denies_with_the_server_killed(bridge_rig: Rig) -> None:
    """The gate (``--http URL``) with fail-closed hooks: with ``hookbus serve`` answering
    and after it was killed (SIGKILL: its run file left behind), ``rm -rf`` is denied by
    the policy hook, a hook that cannot run denies, and ``echo`` still runs."""
    rig = bridge_rig
    rig.hook("no-rm-rf", "PreToolUse", deny_rm_rf_command(), matcher="bash", mode="sync", blocking=True,
             on_error="deny")
    rig.hook("broken", "PreToolUse", "if grep -q broken-ran; then exec /nonexistent/checker; fi", matcher="bash",
             mode="sync", blocking=True, on_error="deny")
    victim = rig.lab.cwd / "victim"
    with rig.serve() as server:
        rig.installed(http=server.url)
        seen: dict[str, list[str]] = {}
        for state in ("up", "killed"):
            if state == "killed":
                server.kill()
                assert (rig.vix / "run" / "http.gate").exists(), "the killed server's run file is gone"
            victim.mkdir(exist_ok=True)
            ran = rig.exec("RUN<<rm -rf victim>>")
            assert victim.is_dir(), f"{state}: rm -rf ran\n{evidence(ran)}"
            assert ran.statuses("PreToolUse") == ["Blocked"], f"{state}\n{evidence(ran)}"
            seen[f"{state} rm -rf"] = rig.tool_outputs()
            ran = rig.exec("RUN<<touch broken-ran>>")
            assert not (rig.lab.cwd / "broken-ran").exists(), f"{state}: a failing fail-closed hook let it run\n{evidence(ran)}"
            assert ran.statuses("PreToolUse") == ["Blocked"], f"{state}\n{evidence(ran)}"
            ran = rig.exec("RUN<<echo still-runs>>")
            assert_none_failed(ran)
            assert any("still-runs" in text for text in rig.tool_outputs()), f"{state}\n{evidence(ran)}"
        assert all(any(DENY_REASON in text for text in outputs) for outputs in seen.values()), seen
