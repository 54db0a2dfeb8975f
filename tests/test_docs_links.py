"""No link leaves the repository: every link of README.md, CONTRIBUTING.md and docs/*.md
resolves to a file of the repository, and every anchor to a heading of the file it points
into (GitHub's slugs). Every other markdown file of the repository (contrib's READMEs) may
link to the web, but its relative links stay inside the repository and resolve."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from docskit import REPO, README, anchors_of, github_slug, links, name_of, pages

LINKS = [(page, line, target) for page in pages() for line, target in links(page)]


def test_every_page_is_checked() -> None:
    names = {name_of(page) for page in pages()}
    assert {"README.md", "CONTRIBUTING.md", "docs/hooks.md", "docs/protocol.md"} <= names
    assert len(LINKS) > 100


@pytest.mark.parametrize(
    ("page", "line", "target"), LINKS, ids=[f"{name_of(page)}:{line}:{target}" for page, line, target in LINKS]
)
def test_every_link_resolves_inside_the_repository(page: Path, line: int, target: str) -> None:
    where = f"{name_of(page)}:{line}: {target}"
    assert not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE), f"{where}: links outside the repository"
    assert not target.startswith("/"), f"{where}: an absolute path is not in a clone"
    path_part, _, anchor = target.partition("#")
    path = (page.parent / unquote(path_part)).resolve() if path_part else page
    assert path == REPO or REPO in path.parents, f"{where}: points outside the repository"
    assert path.exists(), f"{where}: {path.relative_to(REPO)} does not exist"
    if anchor:
        assert path.suffix == ".md", f"{where}: an anchor into a file that is not markdown"
        assert unquote(anchor) in anchors_of(path), f"{where}: no heading of {path.relative_to(REPO)} has this anchor"


def test_the_other_documents_link_only_inside_the_repository_when_they_link_relatively() -> None:
    documents = [
        path for path in REPO.rglob("*.md")
        if not {".venv", "build", ".pytest_cache", "node_modules"} & set(path.parts) and ".egg-info" not in str(path)
    ]
    assert README in documents
    for document in documents:
        for line, target in links(document):
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                continue  # a web address (outside the pages above), or an anchor of the same page
            path = (document.parent / unquote(target.split("#", 1)[0])).resolve()
            assert path.is_relative_to(REPO), f"{name_of(document)}:{line} links outside the repository: {target}"
            assert path.exists(), f"{name_of(document)}:{line} links to {target}, which does not exist"


def test_slugs_follow_github() -> None:
    assert github_slug('Failing closed: `"on_error": "deny"`') == "failing-closed-on_error-deny"
    assert github_slug("The final-text contract (workflows and prompts)") == "the-final-text-contract-workflows-and-prompts"
    assert github_slug("Serving: one bus for every process, in any language") == "serving-one-bus-for-every-process-in-any-language"
    assert github_slug("3. Use hookbus as Claude Code's hook engine") == "3-use-hookbus-as-claude-codes-hook-engine"
    assert github_slug("`hookbus status`") == "hookbus-status"
    assert github_slug("hook.json") == "hookjson"
