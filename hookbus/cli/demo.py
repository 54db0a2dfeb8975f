"""``hookbus demo``: the whole story on a throwaway home, in one screen.

It writes the spec's example hooks (and a few more) into a temporary home, plays one
agent-loop turn through a HookBus, and prints each decision, a state.json and the log.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hookbus.bus import HookBus
from hookbus.chat_stub import StubChatServer
from hookbus.cli.tables import Style
from hookbus.cli.views import record_line
from hookbus.home import Home

_BLOCK_ENV_SCRIPT = r"""#!/usr/bin/env bash
# Deny writes to .env files. The envelope arrives on stdin as compact JSON.
path=$(sed -n 's/.*"path":"\([^"]*\)".*/\1/p')
case "$path" in
  *.env|.env) echo "writing $path could leak secrets; put settings in config.toml" >&2; exit 2 ;;
esac
exit 0
"""

_SANDBOX_SCRIPT = r"""import json, sys
# Rewrite writes under /etc/ into ./sandbox/: a modify decision replaces the tool's input.
envelope = json.load(sys.stdin)
tool_input = envelope.get("tool_input", {})
path = tool_input.get("path", "")
if path.startswith("/etc/"):
    print(json.dumps({"behavior": "modify", "input": {**tool_input, "path": "sandbox" + path}}))
"""


def _hooks(python: str) -> dict[str, dict[str, Any]]:
    return {
        "block-env-writes": {
            "id": "block-env-writes",
            "name": "Block .env writes",
            "enabled": True,
            "trigger": {"event": "PreToolUse", "matcher": "write_file|edit_file"},
            "mode": "sync",
            "blocking": True,
            "command": '"$HOOKBUS_HOOK_DIR/script.sh"',
            "timeout": "5s",
            "created_by": "agent:demo",
        },
        "sandbox-etc": {
            "id": "sandbox-etc",
            "trigger": {"event": "PreToolUse", "matcher": "write_file"},
            "mode": "sync",
            "blocking": True,
            "command": f'{shlex.quote(python)} "$HOOKBUS_HOOK_DIR/rewrite.py"',
        },
        "project-notes": {
            "id": "project-notes",
            "trigger": {"event": "ThreadStart", "matcher": "startup"},
            "mode": "sync",
            "command": "echo 'This project runs its tests with: make test'",
        },
        "prompt-style": {
            "id": "prompt-style",
            "trigger": {"event": "UserPromptSubmit"},
            "mode": "sync",
            "command": """echo '{"behavior": "context", "context": "The user prefers short answers."}'""",
        },
        "format-after-write": {
            "id": "format-after-write",
            "trigger": {"event": "PostToolUse", "matcher": "write_file|edit_file"},
            "mode": "sync",
            "command": "echo \"formatted $(sed -n 's/.*\"path\":\"\\([^\"]*\\)\".*/\\1/p')\"",
        },
        "turn-counter": {
            "id": "turn-counter",
            "trigger": {"event": "Stop"},
            "command": 'n=$(cat "$HOOKBUS_HOOK_DIR/turns" 2>/dev/null || echo 0); '
            'echo $((n + 1)) > "$HOOKBUS_HOOK_DIR/turns"',
        },
        "subagent-done": {
            "id": "subagent-done",
            "enabled": True,
            "mode": "async",
            "trigger": {"event": "SubagentStop"},
            "command": "printf '%s finished\\n' \"$(sed -n 's/.*\"agent_type\":\"\\([^\"]*\\)\".*/\\1/p')\" "
            '>> "$HOOKBUS_HOME/subagents.log"',
        },
        "no-rm-rf": {
            "id": "no-rm-rf",
            "trigger": {"event": "PreToolUse", "matcher": "bash"},
            "mode": "sync",
            "blocking": True,
            "workflow_id": "fast-veto",
        },
        "scan-before-push": {
            "id": "scan-before-push",
            "name": "Scan for secrets before a push; fail closed",
            "trigger": {"event": "PreToolUse", "matcher": "bash"},
            "mode": "sync",
            "blocking": True,
            "on_error": "deny",
            "timeout": "2s",
            # The scanner is not installed here: the guard fails, and fails closed.
            "command": "grep -q 'git push' || exit 0; secret-scanner --staged",
        },
        "reviewer": {
            "id": "reviewer",
            "trigger": {"event": "PostToolUse", "matcher": "write_file"},
            "mode": "sync",
            "prompt": "In one sentence, review this file write.",
        },
        "broken": {
            "id": "broken",
            "trigger": {"event": "PostToolUse"},
            "blocking": True,
            "command": "true",
        },
    }


_WORKFLOWS = {
    "fast-veto": {
        "description": "a single bash step: veto rm -rf before it runs",
        "steps": [{"bash": "grep -q 'rm -rf' && echo 'BLOCK: rm -rf is not allowed here' || true"}],
    }
}


def _stub_model(request: dict[str, Any]) -> str:
    """The demo's stand-in for an LLM: a fixed review, so the story needs no network."""
    return "Stub model review: the write stays inside sandbox/, fine."


def write_demo_home(root: Path, prompt_base_url: str | None = None) -> Home:
    """Write the demo's hooks, workflow config and settings under ``root``."""
    home = Home(root)
    home.config_dir.mkdir(parents=True)
    (home.config_dir / "workflow.json").write_text(json.dumps(_WORKFLOWS, indent=2) + "\n")
    if prompt_base_url:
        provider = {"base_url": prompt_base_url, "model": "demo-stub"}
        home.settings_path.write_text(json.dumps({"prompt_provider": provider}, indent=2) + "\n")
    for hook_id, spec in _hooks(sys.executable).items():
        directory = home.hook_dir(hook_id)
        directory.mkdir(parents=True, mode=0o755)
        (directory / "hook.json").write_text(json.dumps(spec, indent=2) + "\n")
    script = home.hook_dir("block-env-writes") / "script.sh"
    script.write_text(_BLOCK_ENV_SCRIPT)
    script.chmod(0o755)
    (home.hook_dir("sandbox-etc") / "rewrite.py").write_text(_SANDBOX_SCRIPT)
    return home


_STEPS: list[tuple[str, dict[str, Any]]] = [
    ("ThreadStart", {"source": "startup"}),
    ("UserPromptSubmit", {"prompt": "Add a config file for the API key"}),
    ("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": ".env", "content": "KEY=1"}}),
    ("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "/etc/motd", "content": "hi"}}),
    ("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}}),
    ("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "git push origin main"}}),
    # The agent plants a hook in the home: the built-in home guard denies it.
    ("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": "{home}/hooks/x/hook.json", "content": "{}"}}),
    ("PostToolUse", {"tool_name": "write_file", "tool_input": {"path": "sandbox/etc/motd"}}),
    ("Stop", {}),
    ("SubagentStop", {"agent_type": "reviewer", "agent_id": "a1"}),
    ("PreToolUse", {"tool_name": "write_file", "tool_input": {"path": ".env"}, "origin": "vix"}),
]


def _in_home(envelope: dict[str, Any], home: Path) -> dict[str, Any]:
    """A step's envelope with ``{home}`` in its path made the demo's home."""
    tool_input = envelope.get("tool_input")
    if isinstance(tool_input, dict) and "{home}" in str(tool_input.get("path", "")):
        return {**envelope, "tool_input": {**tool_input, "path": tool_input["path"].replace("{home}", str(home))}}
    return envelope


def _describe(event: str, envelope: dict[str, Any]) -> str:
    parts = [event]
    for key in ("tool_name", "source", "agent_type"):
        if key in envelope:
            parts.append(str(envelope[key]))
    if "tool_input" in envelope:
        tool_input = envelope["tool_input"]
        parts.append(str(tool_input.get("path") or repr(tool_input.get("command"))))
    if "prompt" in envelope:
        parts.append(repr(_shortened(envelope["prompt"], 20)))
    if envelope.get("origin") == "vix":
        parts.append("(origin vix)")
    return " ".join(parts)


def _shortened(text: str, width: int) -> str:
    """``text``, or its first words that fit in ``width`` and "...": never half a word."""
    if len(text) <= width:
        return text
    return (text[:width].rsplit(" ", 1)[0] if " " in text[:width] else text[:width]) + "..."


def _detail(behavior: str, reason: str | None, new_input: Any, context: str | None) -> str:
    """What a decision says beyond its behavior: the behavior is printed already, so a
    context decision's text goes unlabelled ("context 'text'", not "context context: ...")."""
    parts = [reason] if reason else []
    if new_input is not None:
        parts.append(f"new input {json.dumps(new_input)}")
    if context:
        parts.append(repr(context) if behavior == "context" else f"context {context!r}")
    return "  ".join(parts)


def _print_state(state: dict[str, Any]) -> None:
    """state.json as it is, one run per line."""
    runs = state.get("recent_runs", [])
    head = {key: value for key, value in state.items() if key != "recent_runs"}
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in head.items()]
    lines.append('  "recent_runs": [\n' + ",\n".join(f"    {json.dumps(run)}" for run in runs) + "\n  ]")
    print("{\n" + ",\n".join(lines) + "\n}")


def run_demo(keep: bool = False) -> int:
    root = Path(tempfile.mkdtemp(prefix="hookbus-demo-"))
    try:
        with StubChatServer(_stub_model) as stub:
            home = write_demo_home(root, stub.base_url)
            # The agent works in a project beside the home: its calls that write into the
            # home are the home guard's to deny.
            project = root.parent / f"{root.name}-project"
            project.mkdir(mode=0o700)
            common = {"thread_id": "t-demo", "cwd": str(project), "model": "demo/model", "origin": "user",
                      "vix_bin": "vix", "socket_path": "/tmp/vixd.sock"}
            print(
                f"hookbus demo: {len(_hooks(''))} example hooks in a throwaway home, {root};\n"
                f"prompt hooks are answered by a stub model on {stub.base_url}\n"
            )
            logging.getLogger("hookbus").setLevel(logging.ERROR)  # problems are printed below
            with HookBus(root) as bus:
                skipped = sorted({problem.hook_id or problem.path for problem in bus.problems})
                reasons = "the reason" if len(bus.problems) == 1 else "the reasons"
                print(f"loaded {len(bus.snapshot.hooks)} hooks; skipped {len(skipped)}, with {reasons}:")
                for problem in bus.problems:
                    print(f"  {problem}")
                print("\none agent turn, event by event:")
                for number, (event, envelope) in enumerate(_STEPS, start=1):
                    described = _describe(event, envelope).replace("{home}", "HOME")
                    decision = bus.emit(event, {**common, **_in_home(envelope, root)})
                    detail = _detail(decision.behavior, decision.reason, decision.input, decision.context)
                    if envelope.get("origin") == "vix":
                        detail = "recursion guard: no hook fires in a vix-initiated thread"
                    elif decision.behavior == "allow" and not detail:
                        detail = "(async hooks run in the background)"
                    # Numbers right-aligned: step 10 keeps the arrows in one column.
                    print(f"  {number:>2}. {described:<44} -> {decision.behavior:<7} {detail}")
            # close() waited for the async hooks and flushed every record.
            print(f"\nsubagents.log (written by the async hook subagent-done): "
                  f"{(root / 'subagents.log').read_text().strip()!r}")
            state_path = home.hook_dir("block-env-writes") / "state.json"
            print(f"\n{home.relative(state_path)} (the recorder keeps its last fire and last 10 runs):")
            _print_state(json.loads(state_path.read_text()))
            logs = sorted(home.logs_dir.glob("*.jsonl"))
            print(f"\n{home.relative(logs[-1])} (one line per fire; `hookbus log` shows it like this):")
            with HookBus(root) as reader:
                for record in reader.read_runs():
                    print(f"  {record_line(record, Style(False))}")
            print("\nTry it on your own home: hookbus validate, hookbus list, hookbus emit, hookbus explain (why a hook fired or not), hookbus log.")
            if keep:
                print(f"kept the demo home: hookbus list --home {root}")
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(root.parent / f"{root.name}-project", ignore_errors=True)
    return 0
