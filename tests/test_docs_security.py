"""docs/security.md holds: its twelve promises are there, in order, and each is attacked in
tests/adversarial/; every bound of its table is the constant the code enforces; the
refusal it quotes for a file others can write is what `hookbus validate` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docskit import DOCS, REPO, hookbus, private_dir, section, section_blocks, user_environment, write_hook

DOC = DOCS / "security.md"

pytestmark = pytest.mark.timeout(60)


def promises() -> list[tuple[int, str]]:
    text = section(DOC, "The attackers and the twelve promises")
    return [(int(number), title) for number, title in re.findall(r"^ {0,1}(\d+)\. \*\*(.+?)\*\*", text, re.M)]


def test_the_twelve_promises_are_there_in_order() -> None:
    found = promises()
    assert [number for number, _ in found] == list(range(1, 13))
    assert found[0][1].startswith("A blocking hook's deny or modify is never lost")
    assert found[9][1].startswith("What hookbus shows is what is enforced")


@pytest.mark.parametrize("number", range(1, 13))
def test_each_promise_is_attacked(number: int) -> None:
    files = [path for path in (REPO / "tests" / "adversarial").glob("test_*.py") if re.search(rf"promise {number}\b", path.read_text(), re.I)]
    assert files, f"no attack in tests/adversarial names promise {number}"


def bound(what: str) -> str:
    """The bound column of the row of the bounds table that starts with ``what``."""
    for line in section(DOC, "The bounds").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if cells and cells[0].startswith(what):
            return cells[1]
    raise AssertionError(f"the bounds table has no row {what!r}")


MiB = 1024 * 1024


def test_every_bound_is_the_one_the_code_enforces() -> None:
    from hookbus.decision import MAX_CONTEXT_CHARS
    from hookbus.deepjson import MAX_NESTING
    from hookbus.process import MAX_OUTPUT_BYTES
    from hookbus.recorders import RECORDER_FLUSH_SECONDS
    from hookbus.recording import MAX_QUEUE, MAX_QUEUE_BYTES
    from hookbus.serve import server
    from hookbus.serve.rendezvous import MAX_LINE_BYTES, START_WINDOW_SECONDS
    from hookbus.dialects.stopguard import DIGEST_BYTES, MAX_REMEMBERED
    from hookbus.workers import MAX_ASYNC_BYTES, MAX_ASYNC_JOBS

    assert bound("an envelope's nesting").startswith(f"{MAX_NESTING:,} levels")
    assert bound("a line to or from") == f"{MAX_LINE_BYTES // MiB} MiB"
    assert bound("requests running hooks") == f"{server.MAX_REQUESTS_RUNNING} over all connections, {server.MAX_IN_FLIGHT} per connection"
    assert bound("memory of a server's requests").startswith(f"{server.MEMORY_BUDGET_BYTES // MiB} MiB")
    assert bound("unfinished lines") == f"{server.BUFFER_BUDGET_BYTES // MiB} MiB over all connections"
    assert bound("a server's connections") == f"half its descriptors, less {server.DESCRIPTOR_RESERVE} kept for hooks' pipes"
    assert bound("async fires") == f"{MAX_ASYNC_JOBS:,} fires and {MAX_ASYNC_BYTES // MiB} MiB (estimated)"
    assert bound("the Stop memory").startswith(f"{MAX_REMEMBERED:,} threads, a {DIGEST_BYTES}-byte digest each")
    assert bound("a recorder's queue") == f"{MAX_QUEUE:,} items and {MAX_QUEUE_BYTES // MiB} MiB"
    assert bound("a hook's output") == f"{MAX_OUTPUT_BYTES // MiB} MiB per stream; context {MAX_CONTEXT_CHARS:,} characters"
    assert bound("a client's wait").startswith(f"{START_WINDOW_SECONDS + 0.5:g} s to start")
    assert bound("`close()`'s wait").startswith(f"{RECORDER_FLUSH_SECONDS:g} s")


def test_the_refusal_of_a_file_others_can_write_is_what_validate_prints(tmp_path: Path) -> None:
    home = private_dir(tmp_path / "home")
    spec = write_hook(home, "x", {"trigger": {"event": "Stop"}, "command": "exit 0"})
    spec.chmod(0o664)
    printed = hookbus("validate", "--home", str(home), env=user_environment(tmp_path))
    assert printed.returncode == 1
    [quoted] = section_blocks(DOC, "What may decide what runs", "text")
    assert quoted.startswith("hooks/x/hook.json: is writable by group")
    expected = quoted.strip().replace("/home/you/.vix", str(home))
    assert expected in printed.stdout.splitlines(), printed.stdout
