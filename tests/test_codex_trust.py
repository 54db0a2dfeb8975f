"""Codex CLI's hook trust (``hookbus.hosts.codex_trust``): the hash recipe against vectors
computed by hand, the keys, and config.toml edited without touching anything else."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import pytest

from hookbus.hosts.codex_trust import (
    check_config,
    codex_home,
    effective_timeout,
    parse_key,
    plan_trust,
    trust_hash,
    trust_key,
    wanted_trust,
)
from hookbus.hosts.settingsfile import ImportFailed, load_toml


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


# Each identity written out by hand: compact, keys sorted, what Codex hashes.
VECTORS = [
    ("PreToolUse", None, {"type": "command", "command": "echo hi"},
     '{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"echo hi","timeout":600,"type":"command"}]}'),
    ("PreToolUse", "^Bash$", {"type": "command", "command": "echo hi", "timeout": 5, "statusMessage": "checking"},
     '{"event_name":"pre_tool_use","hooks":[{"async":false,"command":"echo hi","statusMessage":"checking",'
     '"timeout":5,"type":"command"}],"matcher":"^Bash$"}'),
    # UserPromptSubmit and Stop take no matcher: it is left out.
    ("Stop", "ignored", {"type": "command", "command": "x", "timeout": 99999},
     '{"event_name":"stop","hooks":[{"async":false,"command":"x","timeout":99999,"type":"command"}]}'),
    ("UserPromptSubmit", "*", {"type": "command", "command": "x"},
     '{"event_name":"user_prompt_submit","hooks":[{"async":false,"command":"x","timeout":600,"type":"command"}]}'),
    # SessionEnd and Interrupt: 1 s by default, at most 3.
    ("SessionEnd", None, {"type": "command", "command": "x"},
     '{"event_name":"session_end","hooks":[{"async":false,"command":"x","timeout":1,"type":"command"}]}'),
    ("Interrupt", None, {"type": "command", "command": "x", "timeout": 600},
     '{"event_name":"interrupt","hooks":[{"async":false,"command":"x","timeout":3,"type":"command"}]}'),
    # async, an empty matcher (kept: it is set), and text that is not ASCII, kept as it is.
    ("PostToolUse", "", {"type": "command", "command": "echo é", "async": True},
     '{"event_name":"post_tool_use","hooks":[{"async":true,"command":"echo é","timeout":600,"type":"command"}],"matcher":""}'),
    ("SessionStart", "startup", {"type": "command", "command": "cat a", "timeout": 0},
     '{"event_name":"session_start","hooks":[{"async":false,"command":"cat a","timeout":1,"type":"command"}],"matcher":"startup"}'),
]


@pytest.mark.parametrize("event, matcher, handler, identity", VECTORS)
def test_the_hash_is_codexs_recipe(event: str, matcher: str | None, handler: dict[str, Any], identity: str) -> None:
    json.loads(identity)  # the vector itself is JSON
    assert trust_hash(event, matcher, handler) == sha(identity)


def test_the_real_bridge_entries_hash_as_computed_by_hand() -> None:
    command = "/usr/bin/hookbus codex-hook --home /home/me/.vix"
    for event, timeout, snake in (("PreToolUse", 600, "pre_tool_use"), ("SessionEnd", 3, "session_end"), ("Interrupt", 3, "interrupt")):
        identity = (
            f'{{"event_name":"{snake}","hooks":[{{"async":false,"command":"{command}","timeout":{timeout},'
            '"type":"command"}]}'
        )
        assert trust_hash(event, None, {"type": "command", "command": command, "timeout": timeout}) == sha(identity)


def test_what_has_no_hash() -> None:
    with pytest.raises(ValueError):
        trust_hash("Notification", None, {"type": "command", "command": "x"})
    with pytest.raises(ValueError):
        trust_hash("PreToolUse", None, {"type": "prompt", "prompt": "x"})
    with pytest.raises(ValueError):
        effective_timeout("PreToolUse", "30")
    assert effective_timeout("PreToolUse", 30.9) == 30
    assert effective_timeout("SessionEnd", 0) == 1


def test_keys_name_a_file_an_event_and_a_place() -> None:
    key = trust_key("/h/.codex/hooks.json", "PermissionRequest", 2, 1)
    assert key == "/h/.codex/hooks.json:permission_request:2:1"
    assert parse_key(key, "/h/.codex/hooks.json") == ("PermissionRequest", 2, 1)
    assert parse_key(key, "/h/.codex/other.json") is None
    assert parse_key("/h/.codex/hooks.json:nope:0:0", "/h/.codex/hooks.json") is None
    assert parse_key("/h/.codex/hooks.json:stop:a:0", "/h/.codex/hooks.json") is None


def test_codex_home_is_codex_home_or_dot_codex(monkeypatch: pytest.MonkeyPatch) -> None:
    assert str(codex_home({"CODEX_HOME": "/x/y"})) == "/x/y"
    monkeypatch.setenv("HOME", "/home/someone")
    assert str(codex_home({})) == "/home/someone/.codex"


SOURCE = "/h/.codex/hooks.json"
BRIDGE = "/usr/bin/hookbus codex-hook --home /h/.vix"


def ours(entry: Mapping[str, Any]) -> bool:
    return entry.get("command") == BRIDGE


def bridge(timeout: int = 600) -> dict[str, Any]:
    return {"type": "command", "command": BRIDGE, "timeout": timeout}


USER = {"type": "command", "command": "./guard.sh", "timeout": 5}
CONFIG = """\
# Codex, as I like it
model = "gpt-5"  # the model

[[hooks.PreToolUse]]
matcher = "Bash"

[[hooks.PreToolUse.hooks]]
type = "command"
command = "echo inline"

[hooks.state."/h/.codex/hooks.json:pre_tool_use:0:0"]
trusted_hash = "sha256:users-own"

[projects."/work/app"]
trust_level = "trusted"
"""


def test_trust_is_added_and_nothing_else_changes() -> None:
    before = {"PreToolUse": [{"matcher": "^Bash$", "hooks": [USER]}]}
    after = {"PreToolUse": [before["PreToolUse"][0], {"hooks": [bridge()]}], "SessionEnd": [{"hooks": [bridge(3)]}]}
    plan = plan_trust(CONFIG, "config.toml", SOURCE, before, after, ours, ours)
    assert plan.changed
    assert plan.wanted == {
        f"{SOURCE}:pre_tool_use:1:0": trust_hash("PreToolUse", None, bridge()),
        f"{SOURCE}:session_end:0:0": trust_hash("SessionEnd", None, bridge(3)),
    }
    # Comments, order and every other table as they were; the user's own trust too.
    assert plan.text.startswith(CONFIG.split("[projects")[0])
    assert "# Codex, as I like it" in plan.text and "# the model" in plan.text
    parsed = load_toml(plan.text, "config.toml")
    assert parsed["projects"] == {"/work/app": {"trust_level": "trusted"}}
    assert parsed["hooks"]["PreToolUse"] == [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo inline"}]}]
    assert parsed["hooks"]["state"][f"{SOURCE}:pre_tool_use:0:0"] == {"trusted_hash": "sha256:users-own"}
    assert check_config(plan.text, "config.toml", plan.wanted) == []
    # Again: nothing to do.
    again = plan_trust(plan.text, "config.toml", SOURCE, after, after, ours, ours)
    assert not again.changed and again.lines == []


def test_a_missing_config_is_made_and_an_empty_one_filled() -> None:
    after = {"Stop": [{"hooks": [bridge()]}]}
    for text in (None, ""):
        plan = plan_trust(text, "config.toml", SOURCE, {}, after, ours, ours)
        assert plan.changed
        assert load_toml(plan.text, "config.toml") == {"hooks": {"state": {f"{SOURCE}:stop:0:0": {"trusted_hash": trust_hash("Stop", None, bridge())}}}}


def test_inline_and_dotted_tables_are_written_in_kind() -> None:
    after = {"Stop": [{"hooks": [bridge()]}]}
    for text in ('hooks = {state = {}}\n', 'hooks.state."/other:stop:0:0".trusted_hash = "sha256:x"\n'):
        plan = plan_trust(text, "config.toml", SOURCE, {}, after, ours, ours)
        state = load_toml(plan.text, "config.toml")["hooks"]["state"]
        assert state[f"{SOURCE}:stop:0:0"]["trusted_hash"].startswith("sha256:")


def test_stale_bridge_trust_goes_and_the_users_own_stays() -> None:
    old = bridge()
    config = (
        f'[hooks.state."{SOURCE}:stop:1:0"]\ntrusted_hash = "{trust_hash("Stop", None, old)}"\n\n'
        f'[hooks.state."{SOURCE}:stop:0:0"]\ntrusted_hash = "{trust_hash("Stop", None, USER)}"\n\n'
        f'[hooks.state."{SOURCE}:stop:2:0"]\ntrusted_hash = "sha256:late"\nenabled = false\n'
    )
    before = {"Stop": [{"hooks": [USER]}, {"hooks": [old]}, {"hooks": [{"type": "command", "command": "late"}]}]}
    after = {"Stop": [{"hooks": [USER]}, {"hooks": [{"type": "command", "command": "late"}]}]}
    moved = {"Stop": {(0, 0): (0, 0), (2, 0): (1, 0)}}
    plan = plan_trust(config, "config.toml", SOURCE, before, after, lambda entry: False, ours, moved)
    state = load_toml(plan.text, "config.toml")["hooks"]["state"]
    assert state == {
        f"{SOURCE}:stop:0:0": {"trusted_hash": trust_hash("Stop", None, USER)},
        # The user's hook after the bridge keeps its trust (and its enabled) under its new place.
        f"{SOURCE}:stop:1:0": {"trusted_hash": "sha256:late", "enabled": False},
    }
    assert plan.wanted == {}


def test_a_bridge_moved_by_hand_is_trusted_where_it_is_now() -> None:
    old_place = f"{SOURCE}:pre_tool_use:0:0"
    config = f'[hooks.state."{old_place}"]\ntrusted_hash = "{trust_hash("PreToolUse", None, bridge())}"\n'
    hooks = {"PreToolUse": [{"hooks": [USER]}, {"hooks": [bridge()]}]}
    plan = plan_trust(config, "config.toml", SOURCE, hooks, hooks, ours, ours)
    state = load_toml(plan.text, "config.toml")["hooks"]["state"]
    assert list(state) == [f"{SOURCE}:pre_tool_use:1:0"]


def test_invalid_toml_and_odd_shapes_are_refused() -> None:
    after = {"Stop": [{"hooks": [bridge()]}]}
    for text, said in (("model = \n", "invalid TOML"), ("hooks = 3\n", "hooks is not a table"),
                       ("[hooks]\nstate = 1\n", "hooks.state is not a table")):
        with pytest.raises(ImportFailed) as caught:
            plan_trust(text, "config.toml", SOURCE, {}, after, ours, ours)
        assert said in caught.value.messages[0]


def test_the_check_says_what_is_missing_wrong_or_disabled() -> None:
    wanted = wanted_trust(SOURCE, {"Stop": [{"hooks": [bridge()]}], "PreToolUse": [{"hooks": [bridge()]}]}, ours)
    stop, pre = f"{SOURCE}:stop:0:0", f"{SOURCE}:pre_tool_use:0:0"
    text = f'[hooks.state."{stop}"]\ntrusted_hash = "sha256:other"\n\n[hooks.state."{pre}"]\ntrusted_hash = "{wanted[pre]}"\nenabled = false\n'
    problems = check_config(text, "config.toml", wanted)
    assert any(stop in problem and "not sha256:" in problem for problem in problems)
    assert any(pre in problem and "disabled" in problem for problem in problems)
    assert check_config(None, "config.toml", wanted) == ["config.toml does not exist"]
    assert "no trusted_hash" in check_config("", "config.toml", wanted)[0]
