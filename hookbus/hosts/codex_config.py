"""Codex CLI's config.toml for ``hookbus import codex FILE --install-bridge`` (and
``--uninstall-bridge``): Codex runs a hook only when config.toml holds a ``trusted_hash``
for it, and skips it without a word otherwise. So after FILE, the trust of each bridge
entry is written there (``hookbus.hosts.codex_trust`` computes it, tomlkit edits the file
and keeps the rest of it), backed up and replaced as FILE is, and then checked: through
Codex's own app server when ``$CODEX_BIN`` names one, else by reading the file again.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TextIO

from hookbus.hosts.install import (
    CODEX,
    _foreign_link,
    _what_is,
    bridge_command,
    is_bridge_command,
    write_backup,
)
from hookbus.hosts.settingsfile import ImportFailed, make_directory, write_atomically
from hookbus.terminal import printable

if TYPE_CHECKING:
    from hookbus.hosts.codex_trust import TrustPlan


#: The largest config.toml hookbus edits (Codex's is a few kilobytes).
MAX_CONFIG_BYTES = 16 * 1024 * 1024


def read_codex_config(path: str) -> tuple[str | None, int]:
    """Codex's config.toml (None: there is none) and the mode to write it back with.
    ImportFailed for what hookbus will not edit: another user's link on the way, anything
    but a regular file of this user's, a file past MAX_CONFIG_BYTES, text that is not UTF-8."""
    from hookbus.hosts.settingsfile import read_text_file

    refusal = _foreign_link(path)
    if refusal is not None:
        raise ImportFailed([refusal])
    if not os.path.lexists(path):
        return None, 0o600
    try:
        status = os.stat(path)
    except OSError as exc:
        raise ImportFailed([f"{path}: {exc.strerror or exc}"]) from None
    if not stat.S_ISREG(status.st_mode):
        raise ImportFailed([f"{path}: {_what_is(status)}, not Codex's config file"])
    if status.st_uid != os.geteuid():
        raise ImportFailed([
            f"{path}: it belongs to another user (uid {status.st_uid}): hookbus writes Codex's trust only into a "
            "config.toml of yours; run this as its owner"
        ])
    if status.st_size > MAX_CONFIG_BYTES:
        raise ImportFailed([f"{path}: {status.st_size} bytes, more than the {MAX_CONFIG_BYTES} hookbus edits"])
    return read_text_file(path, path), stat.S_IMODE(status.st_mode) & 0o777


class CodexTrust:
    """What an install or uninstall does to Codex's config.toml: the trust of the bridge's
    entries (``codex_trust.plan_trust``), written after FILE, then checked."""

    def __init__(self, shown: str, config: str, mode: int, plan: TrustPlan, others: Sequence[str] = ()) -> None:
        self.shown = shown
        self.config = config
        self.mode = mode
        self.plan = plan
        #: The keys of bridge entries left alone (another spelling): hookbus trusts none.
        self.others = list(others)

    def lines(self) -> list[str]:
        return [f"{self.config}: {line}" for line in self.plan.lines]

    def warnings(self) -> list[str]:
        """What may keep Codex from reading FILE where its trust says it is."""
        from hookbus.hosts.codex_trust import codex_home

        source = os.path.abspath(self.shown)
        home = codex_home()
        said = [
            f"{key} runs a hookbus bridge that this install did not write (it was left alone): hookbus does not "
            "trust it for you, so Codex runs it only if you trusted it yourself"
            for key in self.others
        ]
        if source == str(home / "hooks.json") or (
            os.path.basename(source) == "hooks.json" and os.path.basename(os.path.dirname(source)) == ".codex"
        ):
            return said
        return [*said, 
            f"Codex reads hooks from {home / 'hooks.json'} and from a trusted project's .codex/hooks.json, and "
            f"trusts each by the path it reads it at: the trust written names {source}, so Codex runs the bridge "
            "only if it reads FILE at exactly that path",
        ]

    def say_dry_run(self, out: TextIO) -> None:
        if self.plan.changed:
            print(printable(f"{self.config} would change as said above; nothing else in it"), file=out)
        else:
            print(printable(f"{self.config} needs no change"), file=out)

    def write(self, out: TextIO) -> None:
        """config.toml, backed up first (as FILE is), written in one rename."""
        if not self.plan.changed:
            return
        target = Path(os.path.realpath(self.config))
        if self.plan.before is not None:
            backup = write_backup(str(target), f"{self.config}.bak")
            print(printable(f"backed up {self.config} to {backup}"), file=out)
        else:
            make_directory(target.parent, 0o700)
        write_atomically(target, self.plan.text, self.mode)
        print(printable(f"wrote {self.config}"), file=out)

    def finish(self, out: TextIO, err: TextIO, written: bool = False) -> int:
        """Write config.toml when FILE was not (``written``: it was, and so was config.toml);
        then check that Codex would run every bridge entry; the exit code."""
        if not written:
            try:
                self.write(out)
            except ImportFailed as exc:
                for message in exc.messages:
                    print(printable(message), file=err)
                print(printable(f"{self.config} was not changed"), file=err)
                return 1
            except OSError as exc:
                where = f" {exc.filename}" if exc.filename else ""
                print(printable(f"cannot write{where}: {exc.strerror or exc}; {self.config} was not changed"), file=err)
                return 1
        return check_codex_trust(self.shown, self.config, self.plan.wanted, out, err)


def plan_codex_trust(
    shown: str, before: dict[str, Any], after: dict[str, Any], command: str | None,
    home: str | os.PathLike[str] | None, program: Sequence[str],
    moved: Mapping[str, Mapping[tuple[int, int], tuple[int, int]]] | None = None,
) -> CodexTrust:
    """The trust ``--install-bridge`` (``command``: the bridge it writes) or
    ``--uninstall-bridge`` (None; ``moved``: where each of the user's entries went, by
    event, when the bridge's were taken out) leaves in Codex's config.toml for FILE."""
    from hookbus.hosts.codex_trust import codex_home, plan_trust

    config = str(codex_home() / "config.toml")
    text, mode = read_codex_config(config)
    source = os.path.abspath(shown)
    plain = bridge_command(home, CODEX, program)
    known = [plain, *([command] if command is not None else [])]

    def is_ours(entry: Mapping[str, Any]) -> bool:
        return command is not None and entry.get("type") == "command" and entry.get("command") == command

    def is_bridge(entry: Mapping[str, Any]) -> bool:
        return is_bridge_command(entry.get("command"), CODEX) or entry.get("command") in known

    def hooks_of(document: dict[str, Any]) -> dict[str, Any]:
        hooks = document.get("hooks")
        return hooks if isinstance(hooks, dict) else {}

    from hookbus.hosts.codex_trust import entries, trust_key

    plan = plan_trust(text, config, source, hooks_of(before), hooks_of(after), is_ours, is_bridge, moved)
    others = [
        trust_key(source, *position) for position, _, entry in entries(hooks_of(after))
        if command is not None and is_bridge(entry) and not is_ours(entry)
    ]
    return CodexTrust(shown, config, mode, plan, others)


def check_codex_trust(shown: str, config: str, wanted: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """Say whether Codex runs every bridge entry of FILE (``wanted``: key → hash): by
    asking ``$CODEX_BIN app-server`` when it is set, else by reading config.toml again and
    computing the hashes; 0, or 1 (loudly) when one would not run."""
    from hookbus.hosts.codex_trust import CODEX_BIN_VARIABLE, check_app_server, check_config, codex_home

    if not wanted:
        return 0
    codex = os.environ.get(CODEX_BIN_VARIABLE)
    try:
        if codex:
            directory = os.path.dirname(os.path.abspath(shown))
            home = codex_home()
            project = os.path.basename(directory) == ".codex" and os.path.abspath(directory) != str(home)
            cwd = os.path.dirname(directory) if project else os.getcwd()
            problems = check_app_server(codex, home, cwd, wanted)
            how = f"asked Codex ({codex} app-server, hooks/list)"
        else:
            text, _ = read_codex_config(config)
            problems = check_config(text, config, wanted)
            how = (
                f"read {config} again and computed each entry's hash as Codex does "
                f"(set {CODEX_BIN_VARIABLE} to a codex binary to ask Codex itself)"
            )
    except ImportFailed as exc:
        problems, how = exc.messages, "could not check"
    if problems:
        print(printable(
            f"error: Codex CLI would skip {len(problems)} of the bridge's {len(wanted)} entries in {shown}, "
            f"without a word ({how}):"
        ), file=err)
        for problem in problems:
            print(printable(f"  {problem}"), file=err)
        print(printable(
            "hookbus cannot see those events until that is fixed: run this again, or trust them in Codex "
            "(/hooks in its TUI)"
        ), file=err)
        return 1
    print(printable(f"checked: Codex CLI trusts all {len(wanted)} bridge entries of {shown}: {how}"), file=out)
    return 0
