"""The real Claude Code, hookbus's default install, and the server killed: what still denies.

Not a benchmark: a check with the real host that prints what happened, since Claude Code is
not something ``make test`` can install. The same scenarios run twice, first with ``hookbus
serve --http`` answering, then after it was killed with SIGKILL (so its run file is left
behind, as after a crash):

- ``policy``: a fail-closed command hook (``"on_error": "deny"``) that denies ``rm -rf``;
  the model asks to run ``rm -rf victim``;
- ``broken``: a fail-closed hook whose command cannot run (exit 127); the model asks to run
  ``touch broken-ran``;
- ``guard``: the home guard (on, as by default); the model asks to write a hook into the
  home (``touch HOME/hooks/planted``);
- ``allowed``: nothing denies ``echo hi``: the tool runs (so that a deny above is a deny,
  not a broken run).

FILE is written by ``hookbus import claude-code FILE --install-bridge --http URL``: the gate
on PreToolUse. Each scenario passes when Claude Code's tool result says what hookbus decided
and the file system shows it (the victim is still there, nothing was planted).

    CLAUDE_BIN=DIR/node_modules/.bin/claude .venv/bin/python bench/claude_code_server_down.py

(``KEEP=1`` keeps the scratch folder, the home's audit log among it.)

Exit 0 when every scenario passed in both states, else 1.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from claude_code_bench import HERE, Processes, clean_env, find_claude, find_hookbus, wait_for

CLAUDE_TIMEOUT = 120.0


def write_hook(home: Path, hook_id: str, command: str) -> None:
    folder = home / "hooks" / hook_id
    folder.mkdir(parents=True)
    spec = {
        "id": hook_id, "trigger": {"event": "PreToolUse", "matcher": "bash"},
        "mode": "sync", "blocking": True, "on_error": "deny", "command": command,
    }
    (folder / "hook.json").write_text(json.dumps(spec, indent=2) + "\n")


def policy_command() -> str:
    deny = json.dumps({"behavior": "deny", "reason": "no rm -rf here"})
    return f"grep -q 'rm -rf' && echo {shlex.quote(deny)} || true"


def run_claude(claude: str, settings: Path, home: Path, cwd: Path, model_url: str, command: str) -> dict[str, Any]:
    argv = [claude, "-p", f"Run RUN<<{command}>>", "--output-format", "json", "--settings", str(settings),
            "--allowedTools", "Bash"]
    env = clean_env(
        HOME=str(home), ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY="dummy", DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    done = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CLAUDE_TIMEOUT)
    try:
        result = str(json.loads(done.stdout).get("result"))
    except (ValueError, AttributeError):
        result = f"(no JSON result; exit {done.returncode}) {done.stderr[-300:]}"
    return {"result": result, "exit": done.returncode}


def main() -> int:
    claude = find_claude()
    hookbus = find_hookbus(os.environ.get("HOOKBUS_BIN") or str(Path(sys.executable).parent / "hookbus"))
    processes = Processes()
    root = Path(tempfile.mkdtemp(prefix="claude-code-server-down-"))
    try:
        home = root / "vix"
        (home / "hooks").mkdir(parents=True)
        write_hook(home, "no-rm-rf", policy_command())
        write_hook(home, "broken", "if grep -q broken-ran; then exec /nonexistent/checker; fi")
        cwd, claude_home = root / "work", root / "claude-home"
        cwd.mkdir()
        claude_home.mkdir()
        stub_log = root / "stub.out"
        stub = processes.start([sys.executable, str(HERE / "stub_model.py"), "--port", "0"], stdout=stub_log)
        model_port = wait_for(stub_log, r"listening on (\d+)", stub, "stub model").group(1)
        model_url = f"http://127.0.0.1:{model_port}"
        serve_log = root / "serve.log"
        server = processes.start([hookbus, "serve", "--home", str(home), "--http", "127.0.0.1:0"], stdout=serve_log,
                                 env=clean_env())
        url = wait_for(serve_log, r"listening on (http://\S+)", server, "hookbus serve").group(1)
        settings = root / "settings.json"
        installed = subprocess.run(
            [hookbus, "import", "claude-code", str(settings), "--install-bridge", "--http", url, "--home", str(home)],
            env=clean_env(), capture_output=True, text=True, timeout=60,
        )
        if installed.returncode != 0:
            raise SystemExit(f"the install failed:\n{installed.stdout}{installed.stderr}")
        pre_tool = json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]
        print(f"PreToolUse hook: {pre_tool.get('command', pre_tool)}")
        planted = home / "hooks" / "planted"
        checks: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
            "policy": ("rm -rf victim", lambda ran: "is_error=True" in ran["result"] and (cwd / "victim").exists()),
            "broken": ("touch broken-ran", lambda ran: "is_error=True" in ran["result"] and not (cwd / "broken-ran").exists()),
            "guard": (f"touch {planted}", lambda ran: "is_error=True" in ran["result"] and not planted.exists()),
            "allowed": ("echo hi", lambda ran: "is_error=False result=hi" in ran["result"]),
        }
        failed = 0
        print("| server | scenario | Claude Code's tool result | passed |")
        print("|---|---|---|---|")
        for state in ("up", "killed"):
            if state == "killed":
                os.kill(server.pid, signal.SIGKILL)
                server.wait(10)
                time.sleep(0.2)
            for name, (command, passed) in checks.items():
                (cwd / "victim").mkdir(exist_ok=True)
                ran = run_claude(claude, settings, claude_home, cwd, model_url, command)
                ok = passed(ran)
                failed += not ok
                shown = " ".join(ran["result"].split())[:150].replace("|", "\\|")
                print(f"| {state} | {name}: `{command.replace(str(root), '$TMP')}` | {shown} | {'yes' if ok else 'NO'} |")
        run_file = home / "run" / "http.gate"
        print(f"\nthe killed server's run file was left behind: {'yes' if run_file.exists() else 'no'} "
              "(the gate found its process gone and ran the bridge)")
        return 1 if failed else 0
    finally:
        processes.stop_all()
        if os.environ.get("KEEP"):
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
