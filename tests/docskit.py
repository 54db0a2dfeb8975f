"""What the tests of the documents share: the pages, their fenced blocks and sections, their
links and GitHub's anchors, the `hookbus` command lines in their shell blocks, and homes to
run their examples in.

Every page has a test module that runs its examples (tests/test_readme.py,
tests/test_docs_<page>.py); tests/test_docs_examples.py and tests/test_docs_links.py check
what every page must hold to.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, NamedTuple

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
CONTRIBUTING = REPO / "CONTRIBUTING.md"
DOCS = REPO / "docs"
#: The venv's bin, where `hookbus` is: the install step of the README, done.
BIN = Path(sys.executable).parent

_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(?P<text>.*?)[ \t#]*$")
_LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\[\]]*\])*\]\((?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def pages() -> list[Path]:
    """The documents whose examples are tested: the README, CONTRIBUTING.md, docs/*.md."""
    return [README, CONTRIBUTING, *sorted(DOCS.glob("*.md"))]


def name_of(path: Path) -> str:
    return str(path.relative_to(REPO))


class Block(NamedTuple):
    """A fenced block: its info string's first word, its body (the fence's indent removed),
    the line its body starts on, and the heading it sits under."""

    info: str
    body: str
    line: int
    heading: str


def split_fences(text: str) -> tuple[list[tuple[str, str, int]], list[tuple[str, int]]]:
    """(fenced blocks as (info string, body, first line number), prose lines with their
    numbers). Indented fences (inside list items) count, as GitHub renders them."""
    blocks: list[tuple[str, str, int]] = []
    prose: list[tuple[str, int]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        opening = _FENCE.match(line.lstrip()) if line.strip() else None
        if opening is None:
            prose.append((line, index + 1))
            index += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").strip()
        indent = len(line) - len(line.lstrip())
        body: list[str] = []
        index += 1
        start = index + 1
        while index < len(lines):
            stripped = lines[index].strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                index += 1
                break
            line_text = lines[index]
            body.append(line_text[indent:] if not indent or line_text[:indent].isspace() else line_text.lstrip())
            index += 1
        blocks.append((info, "\n".join(body), start))
    return blocks, prose


def blocks(path: Path) -> list[Block]:
    found, prose = split_fences(path.read_text(encoding="utf-8"))
    headings = [(number, match.group("text")) for line, number in prose if (match := _HEADING.match(line))]
    result = []
    for info, body, start in found:
        heading = ""
        for number, text in headings:
            if number < start:
                heading = text
        result.append(Block(info.split()[0] if info.split() else "", body, start, heading))
    return result


def blocks_of(path: Path, info: str) -> list[Block]:
    return [block for block in blocks(path) if block.info == info]


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (exact heading text, any level), up to the next heading of
    the same level or higher."""
    lines = path.read_text(encoding="utf-8").splitlines()
    _, prose = split_fences(path.read_text(encoding="utf-8"))
    numbers = {number for _, number in prose}
    start = level = None
    for index, line in enumerate(lines):
        match = _HEADING.match(line) if index + 1 in numbers else None
        if match is None:
            continue
        depth = len(match.group(1))
        if start is None and match.group("text") == heading:
            start, level = index + 1, depth
        elif start is not None and level is not None and depth <= level:
            return "\n".join(lines[start:index])
    assert start is not None, f"{name_of(path)} has no heading {heading!r}"
    return "\n".join(lines[start:])


def section_blocks(path: Path, heading: str, info: str) -> list[str]:
    """The bodies of the ``info`` blocks under ``heading`` (subsections included)."""
    found, _ = split_fences(section(path, heading))
    return [body for block_info, body, _ in found if block_info.split()[:1] == [info]]


# -- links and anchors --------------------------------------------------------------------------


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text lowercased, punctuation other than
    '-' and '_' dropped, each space made a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    _, prose = split_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    anchors: set[str] = set()
    for line, _ in prose:
        match = _HEADING.match(line)
        if match is None:
            continue
        slug = github_slug(match.group("text"))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link in the prose of ``path`` (not in code)."""
    _, prose = split_fences(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for line, number in prose:
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            found.append((number, match.group("target").strip("<>")))
    return found


# -- shell blocks ---------------------------------------------------------------------------------


def logical_lines(script: str) -> list[str]:
    """The lines of a shell block with backslash continuations joined, blank lines dropped."""
    joined: list[str] = []
    pending = ""
    for line in script.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    if pending:
        joined.append(pending)
    return [line for line in joined if line.strip()]


def commands_of(line: str) -> list[list[str]]:
    """The simple commands of one logical line: words split as the shell would (comments
    dropped), cut at |, &&, ||, ; and &."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    redirect = False
    for word in lexer:
        if redirect:  # the file of a redirection: no word of the command
            redirect = False
        elif word and set(word) <= set("<>&") and set(word) & set("<>"):
            if commands[-1] and commands[-1][-1].isdigit():  # 2> file
                commands[-1].pop()
            redirect = True
        elif word and set(word) <= set("|&;"):
            commands.append([])
        else:
            commands[-1].append(word)
    return [command for command in commands if command]


def hookbus_argv(command: list[str]) -> list[str] | None:
    """The arguments after `hookbus` when ``command`` runs hookbus (after any NAME=value
    assignments: `hookbus`, `.venv/bin/hookbus`, `python -m hookbus`), else None."""
    words = list(command)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)
    if not words:
        return None
    if words[0] == "hookbus" or words[0].endswith("/hookbus"):
        return words[1:]
    if len(words) > 2 and words[0].endswith(("python", "python3")) and words[1:3] == ["-m", "hookbus"]:
        return words[3:]
    return None


def hookbus_command_lines(script: str) -> list[list[str]]:
    """Every hookbus invocation in a shell block, as its arguments."""
    found = []
    for line in logical_lines(script):
        if line.lstrip().startswith("#"):
            continue
        for command in commands_of(line):
            argv = hookbus_argv(command)
            if argv is not None:
                found.append(argv)
    return found


# -- homes and runs -------------------------------------------------------------------------------


def private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def private_file(path: Path, text: str, mode: int = 0o600) -> Path:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    path.chmod(mode)
    return path


def write_hook(home: Path, hook_id: str, spec: dict[str, Any], files: dict[str, str] | None = None) -> Path:
    """``home/hooks/<hook_id>/hook.json`` (modes the trust rules accept), with ``files``
    beside it as executable scripts."""
    directory = private_dir(private_dir(home / "hooks") / hook_id)
    for name, text in (files or {}).items():
        private_file(directory / name, text, 0o700)
    return private_file(directory / "hook.json", json.dumps(spec, indent=2) + "\n")


def user_environment(home_dir: Path, **overrides: str | None) -> dict[str, str]:
    """A user's environment on a fresh machine: HOME is ``home_dir``, no VIX_HOME or other
    hookbus variable, the venv's bin (standing in for the install step) first on PATH."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("VIX_", "HOOKBUS_", "PYTEST", "COV_")) and key not in ("NO_COLOR", "COLUMNS")
    }
    env.update(HOME=str(home_dir), PATH=f"{BIN}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin", NO_COLOR="1")
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def bash(line: str, env: dict[str, str], cwd: Path, input: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """One logical line of a shell block, as a user types it."""
    return subprocess.run(
        ["bash", "-c", line], env=env, cwd=cwd, input=input, capture_output=True, text=True, timeout=timeout,
    )


def hookbus(*arguments: str, env: dict[str, str] | None = None, input: str | None = None, cwd: Path | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookbus", *arguments], env=env, input=input, cwd=cwd,
        capture_output=True, text=True, timeout=timeout,
    )


def run_python(code: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )


def json_documents(path: Path) -> Iterator[tuple[int, Any]]:
    for block in blocks_of(path, "json"):
        yield block.line, json.loads(block.body)


def is_hook_spec(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("trigger"), dict)


def is_decision(document: Any) -> bool:
    return isinstance(document, dict) and "behavior" in document


def install_hooks_md_hook(home: Path, hook_id: str) -> Path:
    """docs/hooks.md's hook ``hook_id`` in ``home``, with the script the page shows beside it
    (the first ```sh block after the spec) when its command runs `script.sh`."""
    page = DOCS / "hooks.md"
    for line, document in json_documents(page):
        if is_hook_spec(document) and document.get("id") == hook_id:
            files = {}
            if '"$HOOKBUS_HOOK_DIR/script.sh"' in str(document.get("command", "")):
                files["script.sh"] = next(block.body for block in blocks(page) if block.info == "sh" and block.line > line)
            return write_hook(home, hook_id, document, files)
    raise AssertionError(f"docs/hooks.md has no hook {hook_id!r}")
