"""The names the bridges and the claude-code dialect give things: the env file a dialect hook
gets on ThreadStart (one per exact thread id), with real files written by real hooks."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable

import pytest

from conftest import HookWriter
from hookbus import HookBus
from hookbus.dialects.claude_names import dialect_environment

MakeBus = Callable[..., HookBus]

#: Ids that a name cut to 100 characters, or with "/" made "_", cannot tell apart.
CLASHING = [
    "team/alice", "team_alice", "team alice", "team\\alice", "TEAM/ALICE",
    "x" * 100 + "-first", "x" * 100 + "-second",
    "../../etc/passwd", ".hidden", "..", ".", "", "\ud800lone", "é", "e\u0301",
]


def test_each_thread_gets_its_own_env_file(make_bus: MakeBus, write_hook: HookWriter, home: Path) -> None:
    # What the hook writes names its thread; it appends, so a shared file shows both.
    write_hook(
        "cc", event="ThreadStart", mode="sync", dialect="claude-code",
        command='''sed -n 's/.*"session_id": *"\\(.*\\)".*/\\1/p' >> "$CLAUDE_ENV_FILE"; echo "$CLAUDE_ENV_FILE" > "$HOOKBUS_HOOK_DIR/last"''',
    )
    bus = make_bus()
    paths: dict[str, Path] = {}
    for thread in CLASHING:
        bus.emit("ThreadStart", {"thread_id": thread, "source": "startup"})
        paths[thread] = Path((home / "hooks" / "cc" / "last").read_text().strip())
    assert len(set(paths.values())) == len(CLASHING), "two threads share an env file"
    directory = home / "run" / "claude-env"
    for thread, path in paths.items():
        assert path.parent == directory, (thread, path)  # one component: no way out of the directory
        assert not path.name.startswith(".") and len(path.name) <= 80, path.name
        assert path.read_text().count("\n") == 1, f"{thread!r}: another thread wrote into {path.name}"
    readable = paths["team/alice"].name
    assert readable.startswith("team_alice-") and readable.endswith(".sh")  # still tells a person whose it is
    assert sorted(p.name for p in directory.iterdir()) == sorted(p.name for p in paths.values())


@pytest.mark.parametrize(("one", "other"), [(None, "no-thread"), ("a" * 5000, "a" * 5001), ("team/alice", "team_alice")])
def test_ids_that_print_alike_get_different_files(home: Path, one: object, other: object) -> None:
    names = []
    for thread in (one, other):
        envelope = {} if thread is None else {"thread_id": thread}
        path = dialect_environment("ThreadStart", envelope, str(home / "hooks" / "x"), str(home))["CLAUDE_ENV_FILE"]
        assert os.path.dirname(path) == str(home / "run" / "claude-env")
        names.append(os.path.basename(path))
    assert names[0] != names[1]
    # The same id always gets the same file: a hook's later ThreadStart (resume) finds it.
    again = dialect_environment("ThreadStart", {"thread_id": other}, str(home), str(home))["CLAUDE_ENV_FILE"]
    assert os.path.basename(again) == names[1]
    # An embedder finds the file from the id alone: a readable prefix and SHA-256 of the id.
    digest = hashlib.sha256(str(other).encode()).hexdigest()[:24]
    assert names[1] == f"{str(other)[:40]}-{digest}.sh"
