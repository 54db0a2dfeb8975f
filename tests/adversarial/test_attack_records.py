"""Attacks on what hookbus writes down: secrets in records, logs others can read, emit logs
another user planted for ``hookbus replay``, and a draft that changes itself while
``hookbus install`` checks it.

Promise 5 (secrets never reach a record). No prompt hook runs here, so nothing registers a
secret: the masking must come from the secrets' shapes. A tool call carries a provider's
API key, bearer and basic credentials, a password in a URL, a private key, a JWT,
``password=`` assignments and a JSON key named ``password``; hooks echo all of it back in
what they say (a deny's reason, a context, a modify's input, a failure's stderr, an async
hook's error), and the thread id carries a token too. Nothing of any secret may reach the
audit log, the emit log, state.json, hookbus-sqlite's database or hookbus-otel's spans, in
any process that records: ``HookBus.emit``, ``hookbus emit``, the Claude Code bridge, a
fresh ``hookbus serve``. And the logs are readable by their owner alone, whatever the umask.

Promise 2 (nothing another user can write is obeyed). ``hookbus replay`` runs the user's
hooks on the envelopes it reads: an emit log another user owns or may write (or a link, a
FIFO, a directory on the way) is refused, named with the fix, and replay exits 1 without
running a hook on it. ``hookbus install`` runs the draft's fixtures, whose scripts may
rewrite the copy being checked, add files, change modes, plant links, change the draft, or
keep writing in the background: what is installed is exactly what was checked, or nothing.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from attackkit import FIGURES, FOREIGN_UID, attack, needs_root, scale
from conftest import processes_with
from hookbus import HookBus
from hookbus.redaction import MARKER, clear_secrets, has_secrets
from servekit import Raw, Served, environment

Maker = Callable[..., HookBus]
HookWriter = Callable[..., Path]

HOOKBUS = str(Path(sys.executable).parent / "hookbus")
PYTHON = sys.executable

#: (what, how it appears in a tool call, what of it must never be written). None of the
#: secrets holds a character JSON escapes, so a leak shows in the files' raw bytes.
SECRETS: list[tuple[str, str, str]] = [
    ("an OpenAI key", "curl api -d sk-proj-Q7rT2vX9kL4mN8pB3cD6fG1hJ5sW0zYaE", "Q7rT2vX9kL4mN8pB3cD6fG1hJ5sW0zYaE"),
    ("an Anthropic key", "ANTHROPIC=x; echo sk-ant-api03-Zk8Lm2Np4Qr6St8Uv0Wx2Yz4Ab6Cd8Ef0Gh2Ij4Kl6Mn8", "api03-Zk8Lm2Np4Qr6St8Uv0Wx2Yz4Ab6Cd8Ef0Gh2"),
    ("a GitHub token", "git push ghp_Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2", "Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2"),
    ("a GitHub fine-grained token", "gh auth github_pat_11AAAAAAA0Bc3De5Fg7Hi9Jk1Lm3No5Pq7Rs9", "11AAAAAAA0Bc3De5Fg7Hi9Jk1Lm3No5Pq7Rs9"),
    ("a GitLab token", "glab glpat-Xy9Zw8Vu7Ts6Rq5Po4Nm3", "Xy9Zw8Vu7Ts6Rq5Po4Nm3"),
    ("a Slack token", "slack xoxb-2048204820-4096409640-Qw3Er5Ty7Ui9Op1As3", "4096409640-Qw3Er5Ty7Ui9Op1As3"),
    ("an AWS access key id", "aws --id AKIAZ7Y6X5W4V3U2T1S0", "Z7Y6X5W4V3U2T1S0"),
    ("an AWS secret key", "aws_secret_access_key=Hq8Jw3Le5Rt7Yu9Io1Pa3Sd5Fg7Hj9Kl1Zx3Cv5", "Hq8Jw3Le5Rt7Yu9Io1Pa3Sd5Fg7Hj9Kl1Zx3Cv5"),
    ("a Google API key", "maps AIzaSyD4f6H8j0L2n4P6r8T0v2X4z6B8d0F2h4J", "SyD4f6H8j0L2n4P6r8T0v2X4z6B8d0F2h4J"),
    ("a Stripe key", "stripe sk_live_51Mq2Ws4Ed6Rf8Tg0Yh2Uj4Ik6", "51Mq2Ws4Ed6Rf8Tg0Yh2Uj4Ik6"),
    ("a Hugging Face token", "hub 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", "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"),
    ("an npm token", "npm npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz", "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"),
    ("a JWT", "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJlX29mX3RoZV90b2tlbg", "c2lnbmF0dXJlX29mX3RoZV90b2tlbg"),
    ("a bearer header in curl", "curl -H 'Authorization: Bearer Be4rerT0kenV4lue99' https://api", "Be4rerT0kenV4lue99"),
    ("a basic --header", 'curl --header "Authorization: Basic ZGVwbG95OmJhc2ljUGFzczEyMw==" x', "ZGVwbG95OmJhc2ljUGFzczEyMw"),
    ("a password in a URL", "git clone https://deploy:Ur1P4ssw0rdZ@git.example.com/r.git", "Ur1P4ssw0rdZ"),
    ("a private key", "cat <<EOF\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeL\n-----END RSA PRIVATE KEY-----\nEOF",
     "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeL"),
    ("a password=", "PGPASSWORD=Pg5ecretPassw0rd psql -h db", "Pg5ecretPassw0rd"),
    ("a token in a query", "curl 'https://x/y?token=Qt0kenQueryV4lue&page=2'", "Qt0kenQueryV4lue"),
]
#: A JSON key named like a secret, in the tool input itself.
JSON_KEYED = ("a JSON key named password", "Js0nKeyedPassw0rd")
#: A thread id that is a token.
THREAD = "thread-ghp_Th7re4dT0kenXy9Zw8Vu7Ts6Rq5Po4Nm"
THREAD_SECRET = "Th7re4dT0kenXy9Zw8Vu7Ts6Rq5Po4Nm"
FORBIDDEN: list[tuple[str, str]] = [(what, secret) for what, _, secret in SECRETS] + [JSON_KEYED, ("a token as thread id", THREAD_SECRET)]
COMMAND = "\n".join(text for _, text, _ in SECRETS)
TOOL_INPUT = {"command": COMMAND, "password": JSON_KEYED[1]}
ENVELOPE = {"tool_name": "bash", "tool_input": TOOL_INPUT, "cwd": "/tmp", "thread_id": THREAD}
CLAUDE_ENVELOPE = {
    "hook_event_name": "PreToolUse", "session_id": THREAD, "cwd": "/tmp", "tool_name": "Bash", "tool_input": TOOL_INPUT,
}

#: A hook that says back all it was given: as a deny's reason, a context, a modify's input,
#: or on stderr as it fails.
ECHO = f"""#!{PYTHON}
import json, sys
mode = sys.argv[1]
envelope = json.load(sys.stdin)
tool_input = envelope.get("tool_input") or {{}}
said = str(tool_input.get("command", "")) + "\\n" + json.dumps(tool_input) + "\\nthread " + str(envelope.get("thread_id"))
if mode == "deny":
    print(json.dumps({{"behavior": "deny", "reason": said}}))
elif mode == "context":
    print(said)
elif mode == "modify":
    print(json.dumps({{"behavior": "modify", "input": dict(tool_input, command=said)}}))
else:
    sys.stderr.write(said[-400:])
    sys.exit(1)
"""


@pytest.fixture(autouse=True)
def nothing_registered() -> Iterator[None]:
    """No prompt hook runs here: nothing may be registered, in this process or another."""
    clear_secrets()
    yield
    clear_secrets()


def echoing_home(home: Path, write_hook: HookWriter, recorders: list[str]) -> Path:
    (home / "settings.json").write_text(json.dumps({"record_envelopes": True, "recorder": recorders, "protect_home": False}))
    (home / "settings.json").chmod(0o600)
    command = '"$HOOKBUS_HOOK_DIR/echo.py" '
    files = {"echo.py": ECHO}
    write_hook("says-deny", mode="sync", blocking=True, command=command + "deny", files=files)
    write_hook("says-context", mode="sync", command=command + "context", files=files)
    write_hook("says-modify", mode="sync", blocking=True, command=command + "modify", files=files)
    write_hook("says-error", mode="sync", command=command + "error", files=files)
    write_hook("says-later", mode="async", command=command + "error", files=files)
    return home


def written(home: Path) -> dict[str, str]:
    """Every file a recorder wrote in ``home``, by what it is, as text (sqlite's raw bytes)."""
    found: dict[str, str] = {}
    for kind, pattern in (("the audit log", "logs/hooks/*.jsonl"), ("the emit log", "logs/emits/*.jsonl"), ("state.json", "hooks/*/state.json")):
        texts = [path.read_text(errors="replace") for path in sorted(home.glob(pattern))]
        if texts:
            found[kind] = "\n".join(texts)
    databases = sorted(home.glob("logs/hooks.sqlite3*"))
    if databases:
        found["hookbus-sqlite's database"] = "\n".join(path.read_bytes().decode("latin-1") for path in databases)
    return found


def assert_no_secret(found: dict[str, str], process: str, expected: tuple[str, ...]) -> None:
    """Each recorder in ``expected`` wrote (masks and all), and none holds a secret."""
    assert sorted(found) == sorted(expected), f"{process}: recorded {sorted(found)}"
    for where, text in found.items():
        assert MARKER in text, f"{process}: {where} holds no mask at all"
        for what, secret in FORBIDDEN:
            with attack(5, f"{what} in {where} ({process})"):
                assert secret not in text, f"{process}: {what} in clear in {where}"


def assert_recognizable(found: dict[str, str]) -> None:
    """What is masked still says what it was."""
    text = found["the emit log"]
    for kept in ("sk-proj-[redacted]", "ghp_[redacted]", "https://deploy:[redacted]@git.example.com", "Authorization: Bearer [redacted]",
                 "-----BEGIN RSA PRIVATE KEY-----[redacted]-----END RSA PRIVATE KEY-----", "PGPASSWORD=[redacted]"):
        assert json.dumps(kept)[1:-1] in text, kept


ALL_FILES = ("the audit log", "the emit log", "state.json", "hookbus-sqlite's database")


def run(*arguments: str, stdin: dict[str, Any], home: Path, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOOKBUS, "--home", str(home), *arguments], input=json.dumps(stdin), capture_output=True, text=True,
        timeout=90, env=environment(VIX_HOME=None), umask=umask,
    )


# -- promise 5: the records ------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_an_in_process_emit_writes_no_secret_anywhere(home: Path, write_hook: HookWriter, make_bus: Maker) -> None:
    pytest.importorskip("hookbus_sqlite")
    bus = make_bus(echoing_home(home, write_hook, ["recorder", "sqlite"]))
    decision = bus.emit("PreToolUse", ENVELOPE)
    assert decision.behavior == "deny"
    assert decision.reason is not None and "Pg5ecretPassw0rd" in decision.reason, "the answer itself is the host's"
    bus.close()
    assert not has_secrets()
    found = written(home)
    assert_no_secret(found, "HookBus.emit", ALL_FILES)
    assert_recognizable(found)


@pytest.mark.timeout(90)
def test_otel_spans_hold_no_secret(home: Path, write_hook: HookWriter, make_bus: Maker) -> None:
    hookbus_otel = pytest.importorskip("hookbus_otel")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hookbus_otel.set_tracer_provider_for_hookbus(provider)
    try:
        bus = make_bus(echoing_home(home, write_hook, ["otel"]))
        bus.emit("PreToolUse", ENVELOPE)
        bus.close()
        spans = exporter.get_finished_spans()
    finally:
        hookbus_otel.set_tracer_provider_for_hookbus(None)
        provider.shutdown()
    assert {span.attributes["hookbus.hook.id"] for span in spans if span.attributes} >= {"says-deny", "says-error", "says-later"}
    exported = json.dumps([
        {"name": span.name, "attributes": dict(span.attributes or {}), "status": span.status.description} for span in spans
    ])
    assert MARKER in exported
    for what, secret in FORBIDDEN:
        with attack(5, f"{what} in hookbus-otel's spans"):
            assert secret not in exported, f"{what} in clear in a span"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("process", ["hookbus emit", "the Claude Code bridge"])
def test_a_cli_process_writes_no_secret_anywhere(process: str, home: Path, write_hook: HookWriter) -> None:
    pytest.importorskip("hookbus_sqlite")
    echoing_home(home, write_hook, ["recorder", "sqlite"])
    if process == "hookbus emit":
        result = run("emit", "PreToolUse", "--no-server", stdin=ENVELOPE, home=home)
        assert result.returncode == 2, result.stderr
    else:
        result = run("claude-code-hook", "--no-server", stdin=CLAUDE_ENVELOPE, home=home)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert_no_secret(written(home), process, ALL_FILES)


@pytest.mark.timeout(120)
def test_a_fresh_server_writes_no_secret_anywhere(home: Path, write_hook: HookWriter) -> None:
    pytest.importorskip("hookbus_sqlite")
    echoing_home(home, write_hook, ["recorder", "sqlite"])
    with Served(home, env=environment(VIX_HOME=None)) as served:
        with Raw(served.wait_ready()) as raw:
            answer = raw.call(1, "emit", event="PreToolUse", envelope=ENVELOPE)
    assert answer["result"]["behavior"] == "deny", answer
    assert_no_secret(written(home), "hookbus serve", ALL_FILES)


@pytest.mark.timeout(60)
def test_a_load_error_quoting_a_secret_is_masked_in_state_json(home: Path, write_hook: HookWriter, make_bus: Maker) -> None:
    with attack(5, "a token in a broken hook.json, quoted by its load error in state.json"):
        write_hook("broken", raw=json.dumps({"trigger": {"event": "PreToolUse", "matcher": "(ghp_Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2"}, "command": "true"}))
        make_bus().close()
        state = (home / "hooks" / "broken" / "state.json").read_text()
        assert "ghp_[redacted]" in state and "Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2" not in state


def modes(home: Path) -> dict[str, int]:
    paths = [home / "logs", home / "logs" / "hooks", home / "logs" / "emits", *home.glob("logs/*/*.jsonl"),
             *home.glob("hooks/*/state.json"), *home.glob("logs/hooks.sqlite3*")]
    return {str(path.relative_to(home)): stat.S_IMODE(os.lstat(path).st_mode) for path in paths}


@pytest.mark.timeout(120)
def test_the_logs_are_readable_by_their_owner_alone_whatever_the_umask(home: Path, write_hook: HookWriter) -> None:
    """Made under umask 0, where every file would be world-readable; and a day's log and
    logs/ left loose by an older hookbus are tightened when next opened."""
    pytest.importorskip("hookbus_sqlite")
    echoing_home(home, write_hook, ["recorder", "sqlite"])
    with attack(5, "the logs made under umask 0 are readable by others"):
        assert run("emit", "PreToolUse", "--no-server", stdin=ENVELOPE, home=home, umask=0).returncode == 2
        found = modes(home)
        assert {"logs", "logs/hooks", "logs/emits", "logs/hooks.sqlite3"} <= set(found), found
        assert any(name.startswith("logs/hooks/") for name in found) and any(name.startswith("hooks/") for name in found)
        loose = {name: f"{mode:04o}" for name, mode in found.items() if mode & 0o077}
        assert loose == {}, loose
        assert all(found[name] == 0o700 for name in ("logs", "logs/hooks", "logs/emits"))
    with attack(5, "logs left readable by others stay so"):
        for name in found:
            (home / name).chmod(0o755 if (home / name).is_dir() else 0o644)
        assert run("emit", "PreToolUse", "--no-server", stdin=ENVELOPE, home=home).returncode == 2
        again = modes(home)
        loose = {name: f"{mode:04o}" for name, mode in again.items() if mode & 0o077}
        assert loose == {}, loose


#: One of each kind of secret, on a line: what a hostile tool input repeats.
DENSE = "k=sk-proj-Q7rT2vX9kL4mN8pB3cD6fG1hJ5sW0zYaE ghp_Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2 https://u:Ur1P4ssw0rdZ@h/ token=Qt0kenQueryV4lue AKIAZ7Y6X5W4V3U2T1S0\n"


@pytest.mark.timeout(180)
def test_a_huge_hook_answer_full_of_secrets_is_masked_whole(home: Path, write_hook: HookWriter, make_bus: Maker, tmp_path: Path) -> None:
    """A hook answers a rewrite of a megabyte made of secrets, one every few dozen bytes:
    none reaches the log, and the emit still returns."""
    size = scale(256 << 10, 1000 << 10)
    body = (DENSE * (size // len(DENSE)))[:size]
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"behavior": "modify", "input": {"command": body}}))
    with attack(5, f"a {size >> 10} KiB rewrite made of secrets, in the audit log"):
        write_hook("huge", mode="sync", blocking=True, command=f"cat {answer}")
        bus = make_bus()
        decision = bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}})
        assert decision.behavior == "modify"
        bus.close()
        log = "\n".join(path.read_text() for path in (home / "logs" / "hooks").glob("*.jsonl"))
        for secret in ("Q7rT2vX9kL4mN8pB3cD6fG1hJ5sW0zYaE", "Fg7Hj2Kl5Mn8Pq1Rs4Tu7Vw0Xy3Za6Bc9De2", "Ur1P4ssw0rdZ", "Qt0kenQueryV4lue", "Z7Y6X5W4V3U2T1S0"):
            assert secret not in log


def best_of(rounds: int, action: Callable[[], object]) -> float:
    import time

    # This thread's CPU time, not the wall clock: other processes sharing the CPUs (tests
    # run on several pytest-xdist workers) would otherwise stretch one measure and not the other.
    times = []
    for _ in range(rounds):
        started = time.thread_time()
        action()
        times.append(time.thread_time() - started)
    return min(times)


@pytest.mark.timeout(300)
def test_masking_a_record_takes_time_linear_in_it() -> None:
    """Four times the secrets take about four times the time: measured against a quarter
    of the record, in the same test (a search quadratic in it would take sixteen times as
    long, a backtracking one hours)."""
    from hookbus.records import RunRecord
    from hookbus.redaction import redact_record

    size = scale(256 << 10, 2 << 20)

    def record(length: int) -> RunRecord:
        body = (DENSE * (length // len(DENSE) + 1))[:length]
        return RunRecord(at="2026-01-01T00:00:00.000Z", hook_id="h", event="PreToolUse", mode="sync", status="modify",
                         duration=0.1, decision={"behavior": "modify", "input": {"command": body, "lines": body.splitlines()}})

    quarter, whole = record(size // 4), record(size)
    with attack(5, f"masking a {size >> 10} KiB record made of secrets stays linear"):
        redact_record(record(1000))  # the patterns compiled before anything is timed
        small = best_of(5, lambda: redact_record(quarter))
        large = best_of(5, lambda: redact_record(whole))
        FIGURES[f"masking a {size >> 10} KiB record of secrets, ms"] = round(large * 1000)
        assert large < 8 * small, (small, large)
        assert "Q7rT2vX9kL4mN8pB3cD6fG1hJ5sW0zYaE" not in json.dumps(redact_record(whole).log_entry())


# -- promise 2: hookbus replay ---------------------------------------------------------------------

#: A replayed hook that keeps what it was given: what replay ran it on.
KEEPER = 'if [ "$HOOKBUS_REPLAY" = 1 ]; then cat >> "{seen}"; echo >> "{seen}"; fi'


def planted_record(command: str) -> str:
    return json.dumps({
        "at": "2026-01-02T03:04:05.000Z", "event": "PreToolUse", "hooks": ["keeper"], "decision": {"behavior": "allow"},
        "envelope": {"tool_name": "bash", "tool_input": {"command": command}},
    }) + "\n"


@pytest.fixture
def replay_home(home: Path, write_hook: HookWriter, make_bus: Maker, tmp_path: Path) -> Path:
    """A home whose own emit is recorded (logs/emits/<today>.jsonl), and a hook that keeps
    what replay runs it on in ``tmp_path/seen``."""
    (home / "settings.json").write_text(json.dumps({"record_envelopes": True}))
    (home / "settings.json").chmod(0o600)
    write_hook("keeper", mode="sync", command=KEEPER.format(seen=tmp_path / "seen"))
    bus = make_bus()
    bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "recorded by the user"}})
    bus.close()
    return home


def replay(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOOKBUS, "replay", "--home", str(home)], capture_output=True, text=True, timeout=60)


def seen(tmp_path: Path) -> str:
    path = tmp_path / "seen"
    return path.read_text() if path.exists() else ""


def plant_foreign_day(emits: Path) -> tuple[Path, str]:
    day = emits / "2026-01-02.jsonl"
    day.write_text(planted_record("planted by another user"))
    os.chown(day, FOREIGN_UID, FOREIGN_UID)
    return day, f"chown {os.geteuid()} {day}"


def plant_writable_day(emits: Path) -> tuple[Path, str]:
    day = emits / "2026-01-02.jsonl"
    day.write_text(planted_record("planted by another user"))
    day.chmod(0o666)
    return day, f"chmod go-w {day}"


def plant_writable_emits(emits: Path) -> tuple[Path, str]:
    (emits / "2026-01-02.jsonl").write_text(planted_record("planted by another user"))
    emits.chmod(0o777)
    return emits, f"chmod go-w {emits}"


def plant_writable_logs(emits: Path) -> tuple[Path, str]:
    (emits / "2026-01-02.jsonl").write_text(planted_record("planted by another user"))
    emits.parent.chmod(0o757)
    return emits.parent, f"chmod go-w {emits.parent}"


def plant_linked_day(emits: Path) -> tuple[Path, str]:
    elsewhere = emits.parent.parent.parent / "planted.jsonl"
    elsewhere.write_text(planted_record("planted by another user"))
    day = emits / "2026-01-02.jsonl"
    day.symlink_to(elsewhere)
    return day, "symbolic link"


def plant_linked_emits(emits: Path) -> tuple[Path, str]:
    elsewhere = emits.parent.parent.parent / "planted-emits"
    elsewhere.mkdir()
    (elsewhere / "2026-01-02.jsonl").write_text(planted_record("planted by another user"))
    for name in os.listdir(emits):
        os.replace(emits / name, elsewhere / name)
    emits.rmdir()
    emits.symlink_to(elsewhere)
    return emits, "symbolic link"


def plant_fifo_day(emits: Path) -> tuple[Path, str]:
    day = emits / "2026-01-02.jsonl"
    os.mkfifo(day)
    return day, "FIFO"


PLANTS = [
    pytest.param(plant_foreign_day, id="a day another user owns", marks=needs_root),
    pytest.param(plant_writable_day, id="a day others may write"),
    pytest.param(plant_writable_emits, id="logs/emits others may write"),
    pytest.param(plant_writable_logs, id="logs others may write"),
    pytest.param(plant_linked_day, id="a day that is a link"),
    pytest.param(plant_linked_emits, id="logs/emits that is a link"),
    pytest.param(plant_fifo_day, id="a day that is a FIFO"),
]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("plant", PLANTS)
def test_replay_refuses_an_emit_log_another_user_could_have_written(
    plant: Callable[[Path], tuple[Path, str]], replay_home: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with attack(2, f"replay: {request.node.callspec.id}"):
        refused, fix = plant(replay_home / "logs" / "emits")
        result = replay(replay_home)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"hookbus replay: {refused}" in result.stderr and fix in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert "planted" not in seen(tmp_path), "a hook ran on an envelope another user could have written"


@needs_root
@pytest.mark.timeout(90)
def test_replay_refuses_a_database_another_user_could_have_written(home: Path, write_hook: HookWriter, make_bus: Maker, tmp_path: Path) -> None:
    pytest.importorskip("hookbus_sqlite")
    with attack(2, "replay: hookbus-sqlite's database another user owns"):
        (home / "settings.json").write_text(json.dumps({"record_envelopes": True, "recorder": "sqlite"}))
        (home / "settings.json").chmod(0o600)
        write_hook("keeper", mode="sync", command=KEEPER.format(seen=tmp_path / "seen"))
        bus = make_bus()
        bus.emit("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "planted by another user"}})
        bus.close()
        database = home / "logs" / "hooks.sqlite3"
        os.chown(database, FOREIGN_UID, FOREIGN_UID)
        result = replay(home)
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"hookbus replay: {database}" in result.stderr and f"chown {os.geteuid()} {database}" in result.stderr, result.stderr
        assert "planted" not in seen(tmp_path)


# -- promise 2: hookbus install --------------------------------------------------------------------

GUARD = {"trigger": {"event": "PreToolUse", "matcher": "bash"}, "mode": "sync", "blocking": True, "command": '"$HOOKBUS_HOOK_DIR/check.sh"'}
CATCH_ALL = json.dumps({"trigger": {"event": "PreToolUse"}, "mode": "sync", "blocking": True, "command": "true"})
CHECK = """#!/usr/bin/env bash
{tamper}
grep -q 'rm -rf' && {{ echo 'no rm -rf' >&2; exit 2; }}
exit 0
"""
FIXTURE = json.dumps({"event": "PreToolUse", "envelope": {"tool_name": "bash", "tool_input": {"command": "rm -rf /"}}, "expect": {"behavior": "deny"}})


def draft(drafts: Path, tamper: str, mark: str) -> Path:
    """A draft whose check.sh runs ``tamper`` when its fixture runs it (``$HOOKBUS_TEST``)."""
    source = drafts / "guard"
    (source / "tests").mkdir(parents=True, mode=0o700)
    (source / "hook.json").write_text(json.dumps({**GUARD, "env": {"ATTACK_MARK": mark}}))
    (source / "check.sh").write_text(CHECK.format(tamper=f'if [ "$HOOKBUS_TEST" = 1 ]; then {tamper}; fi'))
    (source / "check.sh").chmod(0o700)
    (source / "tests" / "deny.json").write_text(FIXTURE)
    for path in (source / "hook.json", source / "tests" / "deny.json"):
        path.chmod(0o600)
    drafts.chmod(0o700)
    return source


def snapshot(directory: Path) -> dict[str, tuple[str, int, bytes]]:
    """Every entry under ``directory``: its kind, mode and content."""
    found = {}
    for path in sorted(directory.rglob("*")):
        info = os.lstat(path)
        kind = "link" if stat.S_ISLNK(info.st_mode) else "dir" if stat.S_ISDIR(info.st_mode) else "file"
        found[str(path.relative_to(directory))] = (kind, stat.S_IMODE(info.st_mode), path.read_bytes() if kind == "file" else b"")
    return found


def install(source: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOOKBUS, "install", str(source), "--home", str(home)], capture_output=True, text=True, timeout=90)


@pytest.fixture
def mark() -> Iterator[str]:
    """Marks the processes a draft's fixture starts: whatever it leaves running is ended."""
    value = uuid.uuid4().hex
    yield value
    for pid in processes_with("ATTACK_MARK", value):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


REWRITES = [
    pytest.param('printf %s \'' + CATCH_ALL + '\' > "$HOOKBUS_HOOK_DIR/hook.json"; echo "exit 0" > "$HOOKBUS_HOOK_DIR/evil.sh"',
                 "hook.json", id="its copy rewritten into a catch-all, and a file added"),
    pytest.param('chmod 0755 "$HOOKBUS_HOOK_DIR/check.sh"', "check.sh", id="a mode changed"),
    pytest.param('ln -s /etc/passwd "$HOOKBUS_HOOK_DIR/tests/link.json"', "link.json", id="a link planted"),
    pytest.param('echo x > "$HOOKBUS_HOOK_DIR/tests/late.json"', "late.json", id="a fixture added"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("tamper", "named"), REWRITES)
def test_install_refuses_a_draft_whose_fixture_changes_the_copy_being_checked(
    tamper: str, named: str, home: Path, tmp_path: Path, mark: str, request: pytest.FixtureRequest
) -> None:
    with attack(2, f"install: {request.node.callspec.id}"):
        source = draft(tmp_path / "drafts", tamper, mark)
        result = install(source, home)
        assert result.returncode == 1, result.stdout + result.stderr
        assert named in result.stderr and "nothing was installed" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert sorted(os.listdir(home / "hooks")) == [], "something was installed, or left behind"


@pytest.mark.timeout(120)
def test_install_puts_in_what_was_checked_when_a_fixture_changes_the_draft(home: Path, tmp_path: Path, mark: str) -> None:
    with attack(2, "install: a fixture rewrites the draft itself into a catch-all"):
        drafts = tmp_path / "drafts"
        tamper = f"printf %s '{CATCH_ALL}' > '{drafts}/guard/hook.json'; echo 'exit 0' > '{drafts}/guard/evil.sh'"
        source = draft(drafts, tamper, mark)
        before = snapshot(source)
        result = install(source, home)
        installed = home / "hooks" / "guard"
        if result.returncode == 0:
            got = snapshot(installed)
            assert {name: entry[2] for name, entry in got.items()} == {name: entry[2] for name, entry in before.items()}
        else:
            assert "nothing was installed" in result.stderr, result.stderr
            assert not installed.exists()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("target", ["its own copy", "every copy in the home"])
def test_a_background_writer_a_fixture_leaves_never_changes_what_is_installed(
    target: str, home: Path, tmp_path: Path, mark: str
) -> None:
    """The fixture starts a writer that outlives it and keeps rewriting hook.json: in the
    copy it ran in, or in every scratch copy of the home's hooks/ it can find. Either the
    install is refused, or what is in place is the draft as it was checked."""
    with attack(2, f"install: a writer left running by a fixture rewrites {target}"):
        where = '"$HOOKBUS_HOOK_DIR"' if target == "its own copy" else f'"$HOOKBUS_HOOK_DIR" {home}/hooks/.hookbus-install-*/hooks/*'
        loop = f"for i in $(seq 3000); do for d in {where}; do printf %s '{CATCH_ALL}' > \"$d/hook.json\" 2>/dev/null; done; sleep 0.002; done"
        # The fixture waits for the writer's first writes: it outlives the fixture, but is
        # sure to have been at work before the install goes on.
        source = draft(tmp_path / "drafts", f"( {loop} ) >/dev/null 2>&1 < /dev/null & sleep 0.2", mark)
        before = snapshot(source)
        result = install(source, home)
        installed = home / "hooks" / "guard"
        if result.returncode == 0:
            assert {name: entry[2] for name, entry in snapshot(installed).items()} == {
                name: entry[2] for name, entry in before.items()
            }, "what is installed is not what was checked"
        else:
            assert "nothing was installed" in result.stderr, result.stderr
            assert not installed.exists()
        assert "Traceback" not in result.stderr
