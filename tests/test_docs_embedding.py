"""docs/embedding.md's examples run as written, on a user's ~/.vix: the emit example refuses
a write to .env (docs/hooks.md's block-env-writes), the asyncio example decides, and the
daemon's deny_list and prompt provider print what the page shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from docskit import DOCS, install_hooks_md_hook, private_dir, run_python, section_blocks, user_environment, write_hook

DOC = DOCS / "embedding.md"

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def user(tmp_path: Path) -> Path:
    user = private_dir(tmp_path / "ana")
    install_hooks_md_hook(private_dir(user / ".vix"), "block-env-writes")
    return user


def test_emit_refuses_a_write_to_env(user: Path) -> None:
    [code] = section_blocks(DOC, "Emit", "python")
    done = run_python(code, env=user_environment(user))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "refused: hook 'block-env-writes' denied: writing .env could leak secrets\n"


def test_from_asyncio(user: Path) -> None:
    [code] = section_blocks(DOC, "From asyncio", "python")
    done = run_python(code, env=user_environment(user))
    assert (done.returncode, done.stdout) == (0, "allow\n"), done.stderr


def test_the_daemons_plugins_decide_as_shown(tmp_path: Path) -> None:
    user = private_dir(tmp_path / "ana")
    home = private_dir(user / ".vix")
    for spec in section_blocks(DOC, "Plugins of the embedder", "json"):
        document = json.loads(spec)
        write_hook(home, document["id"], document)
    [code] = section_blocks(DOC, "Plugins of the embedder", "python")
    [shown] = section_blocks(DOC, "Plugins of the embedder", "text")
    done = run_python(code, env=user_environment(user))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == shown.strip()
