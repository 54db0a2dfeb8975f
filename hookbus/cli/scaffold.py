"""``hookbus new``: a working hook to start from, in ``HOME/hooks/ID/`` (or, with ``--dir
DIR``, in ``DIR/ID/``: a draft outside the home, for ``hookbus install DIR/ID`` once read).

It writes a valid ``hook.json``; for a command hook, the script it runs (``check.sh``: it
reads the envelope on stdin with sed, so jq is not needed, and shows how to deny, exit 2
with the reason on stderr); and ``envelope.json``, a sample envelope of the event that the
hook acts on, so that ``hookbus emit EVENT --input HOME/hooks/ID/envelope.json`` shows it
at work at once. Then it loads the home as ``hookbus validate`` does and says whether the
new hook is valid, with the commands to run next. A draft in DIR is loaded the way ``hookbus
install`` loads it: copied into a scratch home with the home's settings.

What it writes obeys hookbus's trust rules (nothing writable by group or others):
directories 0700, hook.json and envelope.json 0600, the script 0700. Each file is written
to a temporary name and renamed into place, hook.json last, so that a watching bus (``hookbus
serve``, the daemon) never loads a hook whose script is not there yet.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from hookbus.cli.core import UsageError, open_bus, say, warn
from hookbus.eventnames import EVENT_NAMES, unknown_event_message
from hookbus.terminal import UNPRINTABLE

if TYPE_CHECKING:
    import argparse

    from hookbus.events import EventInfo
    from hookbus.home import Home
    from hookbus.matching import Matcher

#: cel and rego are plugins' (hookbus-cel, hookbus-rego): the hook is made either way, and
#: its validation says when the plugin is missing.
KINDS = ("command", "workflow", "prompt", "cel", "rego")
SCRIPT_NAME = "check.sh"
ENVELOPE_NAME = "envelope.json"
#: The sample fixture, in the hook's tests/ (``hookbus test``).
FIXTURE_DIR = "tests"
FIXTURE_NAME = "sample.json"
#: The longest file name most file systems take (NAME_MAX), in bytes.
MAX_ID_BYTES = 255
#: A prompt hook waits for a model: 5 s, the sync default, is seldom enough.
PROMPT_TIMEOUT = "30s"

#: What the sample envelope's matcher field holds, first one the matcher accepts.
SAMPLE_VALUES = {
    "tool_name": ("bash", "write_file", "edit_file", "read_file"),
    "source": ("startup", "resume"),
    "trigger": ("manual", "auto"),
    "agent_type": ("general", "explore", "review"),
}


def _event(name: str) -> EventInfo:
    from hookbus.events import EVENTS  # attrs: not for building the parser (KINDS)

    return EVENTS[name]


class File(NamedTuple):
    name: str
    content: str
    mode: int
    #: What it is, for the summary ``new`` prints.
    about: str


def id_problem(hook_id: str) -> str | None:
    """Why ``hook_id`` cannot be a hook's id (hookbus's rules: one directory name, valid
    UTF-8, printable, not a name the loader passes over), or None."""
    if not hook_id:
        return "an id cannot be empty"
    if hook_id in (".", "..") or "/" in hook_id or "\x00" in hook_id:
        return "an id is one directory name: no '/', and not '.' or '..'"
    try:
        size = len(hook_id.encode("utf-8"))
    except UnicodeEncodeError:
        return "it is not valid UTF-8, and an id must be (it names the hook in records and on terminals)"
    if UNPRINTABLE.search(hook_id):
        return "it holds a control or direction character, and an id must be printable text"
    from hookbus.files import is_ignored_name

    if is_ignored_name(hook_id):
        return (
            "hookbus passes over a directory named like a hidden file or an editor's temporary "
            "(starting with '.', ending in '~', '.swp', '.swx' or '.tmp', or '#...#'), so it would never load"
        )
    if size > MAX_ID_BYTES:
        return f"it is {size} bytes long, more than a directory name may be ({MAX_ID_BYTES})"
    return None


def cmd_new(args: argparse.Namespace) -> int:
    from hookbus.home import Home

    event: str = args.event
    if event not in EVENT_NAMES:
        raise UsageError(unknown_event_message(event))
    hook_id: str = args.id
    problem = id_problem(hook_id)
    if problem is not None:
        from hookbus.errors import shorten

        raise UsageError(f"cannot make a hook with the id {shorten(repr(hook_id))}: {problem}")
    field = _event(event).matcher_field
    source, matcher = _matcher(event, field, args.matcher)
    home = Home.resolve(args.home)
    # The hook's parents: the home and hooks/, or the staging directory of a draft.
    parents = (home.root, home.hooks_dir) if args.dir is None else (Path(args.dir),)
    hook_dir = parents[-1] / hook_id
    existed = _check_place(hook_dir, hook_id, args.force)
    sample, mismatch = _sample_value(field, matcher)
    files = _files(hook_id, event, args.kind, source, field, sample)
    make_directories(*parents, hook_dir)
    fixture = _fixture(event, args.kind, mismatch, files)
    if fixture is not None:
        # Before hook.json: a watching bus loads the hook with its fixture there.
        make_directories(*parents, hook_dir, hook_dir / FIXTURE_DIR)
        _write(hook_dir / FIXTURE_DIR, fixture)
    for file in files:
        _write(hook_dir, file)
    listed = files + ([fixture._replace(name=f"{FIXTURE_DIR}/{fixture.name}")] if fixture is not None else [])
    say(f"{'replaced' if existed else 'made'} hook {hook_id!r} in {hook_dir}:")
    width = max(len(file.name) for file in listed)
    for file in sorted(listed, key=lambda file: file.name != "hook.json"):  # the spec first
        say(f"  {file.name.ljust(width)}  {file.about}")
    valid, has_provider = _validate(args, hook_id) if args.dir is None else _validate_draft(home, hook_dir, hook_id)
    if args.dir is None:
        _next_steps(args, hook_dir, hook_id, event, args.kind, _expected(event, args.kind, mismatch), valid)
    else:
        _next_steps_of_a_draft(args, hook_dir, home.hook_dir(hook_id), event, args.kind, _expected(event, args.kind, mismatch))
    if mismatch:
        warn(
            f"hookbus new: the sample envelope's {field} {sample!r} does not match the matcher {source!r}: "
            f"set a {field} it matches in {hook_dir / ENVELOPE_NAME}, or the hook will not fire on it"
        )
    if args.kind == "prompt" and not has_provider:
        _say_about_the_provider(home.settings_path)
    return 0 if valid else 1


def _fixture(event: str, kind: str, mismatch: bool, files: list[File]) -> File | None:
    """``tests/sample.json``: the sample envelope and what the new hook decides for it, for
    ``hookbus test``. None for a prompt hook, whose answer is the model's."""
    if kind == "prompt":
        return None
    envelope = json.loads(next(file.content for file in files if file.name == ENVELOPE_NAME))
    behavior = "allow" if mismatch else "deny" if _event(event).can_block else "context"
    document = {
        "description": "made by hookbus new: the sample envelope, and what the hook decides for it",
        "event": event, "envelope": envelope, "expect": {"behavior": behavior},
    }
    return File(FIXTURE_NAME, json.dumps(document, indent=2, ensure_ascii=False) + "\n", 0o600, f"a fixture: the sample, expected to be {behavior} (hookbus test)")


def _matcher(event: str, field: str | None, given: str | None) -> tuple[str | None, Matcher | None]:
    """The matcher the hook gets (None: none at all) and its compiled form. Not given: for
    a tool event ``bash``, the tool the example acts on; for another event, none."""
    from hookbus.errors import SpecError
    from hookbus.matching import compile_matcher

    if field is None:
        if given not in (None, "", "*"):
            raise UsageError(f"{event} has no matcher field, so a hook of it takes no --matcher: leave it out")
        return None, None
    source = given if given is not None else ("bash" if field == "tool_name" else None)
    if source is None:
        return None, None
    try:
        # Compiled as the loader compiles it (RE2), so what is refused here is refused there.
        return source, compile_matcher(source)
    except SpecError as exc:
        raise UsageError(f"--matcher: {exc.message}") from None


def _sample_value(field: str | None, matcher: Matcher | None) -> tuple[str | None, bool]:
    """The value the sample envelope gives the matcher field, and whether it fails to match
    (a regex none of the usual values satisfy)."""
    if field is None:
        return None, False
    candidates = list(SAMPLE_VALUES.get(field, ("example",)))
    if matcher is not None and matcher.names is not None:
        # A list of names: the first one written, as the user wrote them.
        candidates = [name for name in matcher.source.split("|") if name] + candidates
    for candidate in candidates:
        if matcher is None or matcher.matches(candidate):
            return candidate, False
    return candidates[0], True


def _check_place(hook_dir: Path, hook_id: str, force: bool) -> bool:
    """Whether a hook of that id is there already (then ``force`` must be given); a
    UsageError when something else is, or when it is and ``force`` is not given."""
    try:
        info = os.lstat(hook_dir)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise UsageError(f"cannot use {hook_dir}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise UsageError(f"{hook_dir} exists and is {kind}: move it away to make hook {hook_id!r} there")
    if not force:
        raise UsageError(
            f"hook {hook_id!r} exists already ({hook_dir}): choose another id, or pass --force to "
            f"overwrite its hook.json, {SCRIPT_NAME}, {ENVELOPE_NAME} and {FIXTURE_DIR}/{FIXTURE_NAME} (its other files are kept)"
        )
    return True


def make_directories(root: Path, *inside: Path) -> None:
    """``root`` (the home, or a draft's staging directory), then each of ``inside`` in turn
    (``hooks/``, the hook's directory), each made 0700 when it is missing."""
    for directory in (root, *inside):
        try:
            if directory == root:
                os.makedirs(directory, 0o700)  # its parents as the umask says
            else:
                os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # what exists keeps its mode: the validation says if it is loose
        except OSError as exc:
            raise UsageError(f"cannot make {directory}: {exc.strerror}") from None
        os.chmod(directory, 0o700)  # whatever the umask left of it


def _write(hook_dir: Path, file: File) -> None:
    """Write ``file`` into ``hook_dir`` with exactly its mode, atomically (a temporary
    file, then a rename): a link or anything else already at its name is replaced, never
    written through."""
    temporary = f".{file.name}.{os.getpid()}.tmp"
    directory = os.open(hook_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            descriptor = os.open(temporary, flags, file.mode, dir_fd=directory)
        except FileExistsError:  # left by a run that was killed
            os.unlink(temporary, dir_fd=directory)
            descriptor = os.open(temporary, flags, file.mode, dir_fd=directory)
        try:
            os.fchmod(descriptor, file.mode)
            with os.fdopen(descriptor, "w", encoding="utf-8", closefd=False) as handle:
                handle.write(file.content)
                handle.flush()
                os.fsync(descriptor)
        finally:
            os.close(descriptor)
        try:
            os.replace(temporary, file.name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError as exc:
            os.unlink(temporary, dir_fd=directory)
            raise UsageError(f"cannot write {hook_dir / file.name}: {exc.strerror}") from None
    except OSError as exc:
        raise UsageError(f"cannot write {hook_dir / file.name}: {exc.strerror}") from None
    finally:
        os.close(directory)


# -- what is written ---------------------------------------------------------------------


def _files(hook_id: str, event: str, kind: str, matcher: str | None, field: str | None, sample: str | None) -> list[File]:
    """The hook's files, hook.json last (the order they are written in)."""
    can_block = _event(event).can_block
    trigger: dict[str, Any] = {"event": event}
    if matcher is not None:
        trigger["matcher"] = matcher
    spec: dict[str, Any] = {"id": hook_id, "trigger": trigger, "mode": "sync"}
    if can_block:
        spec["blocking"] = True
    files: list[File] = []
    mode = "sync blocking" if can_block else "sync (it may add context; this event cannot block)"
    when = f"{event}" + (f", matcher {matcher}" if matcher is not None else "")
    if kind == "command":
        spec["command"] = f'"$HOOKBUS_HOOK_DIR/{SCRIPT_NAME}"'
        spec["timeout"] = "5s"
        script, about = _script(hook_id, event, sample)
        files.append(File(SCRIPT_NAME, script, 0o700, about))
        action = f"runs {SCRIPT_NAME}"
    elif kind == "workflow":
        step, about = _workflow_step(event, field, sample)
        spec["workflow"] = {"description": about, "steps": [{"name": "check", "bash": step}]}
        spec["timeout"] = "5s"
        action = f"a workflow of one bash step that {about}"
    elif kind in ("cel", "rego"):
        from hookbus.cli import policykinds

        case = policykinds.case_of(event, sample)
        action = policykinds.about(case, event, field)
        if kind == "cel":
            spec["cel"] = policykinds.cel_expression(case, event, field)
            action = f"a CEL expression that {action}"
        else:
            spec["rego"] = policykinds.rego_action()
            policy = policykinds.rego_policy(case, event, field)
            files.append(File(policykinds.POLICY_NAME, policy, 0o600, f"the Rego policy: {action}"))
            action = f"queries {policykinds.POLICY_NAME}, a Rego policy that {action}"
        spec["timeout"] = "5s"
    else:
        spec["prompt"] = _prompt(event)
        spec["timeout"] = PROMPT_TIMEOUT
        action = "asks the prompt provider's model (settings.json prompt_provider)"
    spec["created_by"] = "hookbus new"
    files.append(File(ENVELOPE_NAME, json.dumps(_envelope(event, field, sample), indent=2, ensure_ascii=False) + "\n", 0o600, _envelope_about(event, field, sample)))
    files.append(File("hook.json", json.dumps(spec, indent=2, ensure_ascii=False) + "\n", 0o600, f"{when}, {mode}: {action}"))
    return files


_HEADER = """\
#!/usr/bin/env bash
# Hook {hook_id!r} of {event}, made by `hookbus new`: edit it to do what you need.
#
# The envelope arrives on stdin as one line of compact JSON (envelope.json beside this
# script is a sample), so sed can read a field, "name":"value", without jq. What the
# script does is the hook's answer:
#   exit 0, no output         allow
#   exit 0, plain text        allow, and the text is added as context for the model
#   exit 0, a JSON object     that decision: {{"behavior": "deny", "reason": "..."}}, or
#                             "modify" with "input", "context" with "context", "allow"
#   exit 2                    deny: the reason is what it printed on stderr
#   any other exit, a timeout the hook failed: it fails open (allow), the error recorded
{note}set -u
envelope=$(cat)

# A string field of the envelope, by name, JSON escapes kept (the last one, if several).
field() {{
  printf '%s\\n' "$envelope" | sed -nE "s/.*\\"$1\\":\\"(([^\\"\\\\\\\\]|\\\\\\\\.)*)\\".*/\\1/p"
}}

"""

_BODIES = {
    "tool": (
        "denies a bash command that runs rm -rf: the reason on stderr, then exit 2",
        """\
# Deny rm -rf (rm -fr, rm -Rf, ...) in the bash tool's command: the reason goes to
# stderr, and exit 2 denies. The matcher in hook.json chooses the tools this runs for.
command=$(field command)
if printf '%s\\n' "$command" | grep -Eq '(^|[^[:alnum:]_-])rm[[:space:]]+-[[:alnum:]]*([rR][[:alnum:]]*f|f[[:alnum:]]*[rR])'; then
  echo "rm -rf is not allowed here: $command" >&2
  exit 2
fi
exit 0
""",
    ),
    "file": (
        "denies writing a .env file (secrets): the reason on stderr, then exit 2",
        """\
# Deny a write to a .env file, where secrets live: the reason goes to stderr, and exit 2
# denies. The matcher in hook.json chooses the tools this runs for.
path=$(field path)
case "${path##*/}" in
  .env|*.env|.env.*)
    echo "writing $path could leak secrets" >&2
    exit 2
    ;;
esac
exit 0
""",
    ),
    "UserPromptSubmit": (
        "denies a prompt that holds what looks like an API key: the reason on stderr, then exit 2",
        """\
# Deny a prompt that holds what looks like an API key (sk-..., ghp_..., AKIA...) before
# it reaches the model: the reason goes to stderr, and exit 2 denies.
prompt=$(field prompt)
if printf '%s\\n' "$prompt" | grep -Eq '(sk-[[:alnum:]_-]{20,}|ghp_[[:alnum:]]{20,}|AKIA[[:upper:][:digit:]]{16})'; then
  echo "the prompt holds what looks like an API key: take it out and send the prompt again" >&2
  exit 2
fi
exit 0
""",
    ),
    "PostToolUse": (
        "adds a note for the model when a tool call failed (PostToolUse cannot deny)",
        """\
# PostToolUse cannot deny or rewrite (the tool has run): what the script prints is added
# as context. Here, a note when the call failed.
tool=$(field tool_name)
if printf '%s\\n' "$envelope" | grep -q '"is_error":true'; then
  echo "The $tool call failed: read its output before relying on what it did."
fi
exit 0
""",
    ),
}

_OTHER_BODY = (
    "adds a line of context ({event} cannot deny)",
    """\
# {event} cannot deny or rewrite: what the script prints is added as context, and
# nothing printed means allow. Here, one line naming what happened.
{reading}
exit 0
""",
)


def _script(hook_id: str, event: str, sample: str | None) -> tuple[str, str]:
    key = event
    if event in ("PreToolUse", "PermissionRequest"):
        key = "tool" if sample == "bash" else "file"
    about, body = _BODIES.get(key) or _OTHER_BODY
    field = _event(event).matcher_field
    if key not in _BODIES:
        about = about.format(event=event)
        if field is not None:
            reading = f'{field}=$(field {field})\necho "{event}: {field} $' + "{" + field + "}" + '."'
        else:
            reading = f'cwd=$(field cwd)\necho "{event} in $' + "{cwd:-an unknown directory}" + '."'
        body = body.format(event=event, reading=reading)
    can_block = _event(event).can_block
    note = "" if can_block else f"# ({event} cannot block: a deny from it is recorded, not applied.)\n"
    return _HEADER.format(hook_id=hook_id, event=event, note=note) + body, about


def _workflow_step(event: str, field: str | None, sample: str | None) -> tuple[str, str]:
    """A bash step (it reads the envelope on stdin; its output is the final text: a line
    ``BLOCK: why`` denies) and what it does. ``|| true``: a step that exits non-zero
    stops the workflow, which then fails open."""
    if event in ("PreToolUse", "PermissionRequest") and sample == "bash":
        return (
            "grep -Eq 'rm[[:space:]]+-[[:alnum:]]*([rR][[:alnum:]]*f|f[[:alnum:]]*[rR])' "
            "&& echo 'BLOCK: rm -rf is not allowed here' || true",
            "denies a call whose input runs rm -rf (BLOCK: in its output)",
        )
    if event in ("PreToolUse", "PermissionRequest"):
        return (
            "grep -Eq '\"path\":\"([^\"]*/)?(\\.env|[^\"/]*\\.env|\\.env\\.[^\"/]*)\"' "
            "&& echo 'BLOCK: writing a .env file could leak secrets' || true",
            "denies writing a .env file (BLOCK: in its output)",
        )
    if event == "UserPromptSubmit":
        return (
            "grep -Eq 'sk-[[:alnum:]_-]{20,}' && echo 'BLOCK: the prompt holds what looks like an API key' || true",
            "denies a prompt holding what looks like an API key (BLOCK: in its output)",
        )
    name = field or "cwd"
    return (
        f"sed -nE 's/.*\"{name}\":\"([^\"]*)\".*/{event}: {name} \\1./p'",
        f"adds a line of context naming the {name}",
    )


def _prompt(event: str) -> str:
    if event in ("PreToolUse", "PermissionRequest"):
        return (
            "You check a tool call that an AI coding agent is about to make; the call is the JSON below. "
            "If it would delete files (rm -rf, say) or write outside its working directory (cwd), answer "
            'with {"behavior": "deny", "reason": "<why, in one sentence>"}; otherwise answer with '
            '{"behavior": "allow"}. Answer with that JSON object alone.'
        )
    if event == "UserPromptSubmit":
        return (
            "You check a prompt that a user is about to send to an AI agent; it is the JSON below. If it "
            'holds a secret (an API key, a password), answer with {"behavior": "deny", "reason": "<what '
            'it holds>"}; otherwise answer with {"behavior": "allow"}. Answer with that JSON object alone.'
        )
    return (
        f"An AI coding agent reached {event}; the event is the JSON below. If there is something it "
        "should keep in mind now, say it in one sentence; otherwise answer with "
        '{"behavior": "allow"} alone.'
    )


def _envelope(event: str, field: str | None, sample: str | None) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "thread_id": "thr_example", "hook_event_name": event, "cwd": os.getcwd(), "origin": "user",
    }
    if field is not None:
        envelope[field] = sample
    if field == "tool_name":
        bash = sample == "bash"
        if event == "PostToolUse":
            envelope["tool_input"] = {"command": "make test"} if bash else {"path": "notes.txt", "content": "hello\n"}
            envelope["tool_response"] = "2 tests failed" if bash else "cannot write notes.txt: read-only file system"
            envelope["is_error"] = True
        else:
            envelope["tool_input"] = {"command": "rm -rf build"} if bash else {"path": ".env", "content": "API_KEY=example\n"}
    elif event == "UserPromptSubmit":
        envelope["prompt"] = "deploy it with the key sk-EXAMPLE0123456789abcdefXYZ"
    elif event == "PostCompact":
        envelope.update(summarized_turns=12, from_tokens=150000)
    elif event == "SubagentStart":
        envelope.update(agent_id="agt_example", prompt="Find where the settings are read.")
    elif event == "SubagentStop":
        envelope.update(agent_id="agt_example", result="The settings are read in settings.py.", is_error=False)
    return envelope


def _envelope_about(event: str, field: str | None, sample: str | None) -> str:
    if field == "tool_name":
        if event == "PostToolUse":
            return f"a sample {event} envelope: a {sample} call that failed"
        what = "of `rm -rf build`" if sample == "bash" else "writing .env"
        return f"a sample {event} envelope: a {sample} call {what}"
    if event == "UserPromptSubmit":
        return f"a sample {event} envelope: a prompt holding a (fake) API key"
    if field is not None:
        return f"a sample {event} envelope ({field} {sample})"
    return f"a sample {event} envelope"


# -- after writing ---------------------------------------------------------------------------


def _validate(args: argparse.Namespace, hook_id: str) -> tuple[bool, bool]:
    """Load the home as ``hookbus validate ID`` does, and say whether the new hook is valid:
    its problems, and those of the home that keep it from loading. Returns that, and
    whether settings.json names a prompt provider."""
    from hookbus.cli.staged import hook_problems

    with open_bus(args, quiet=True, read_only=True) as bus:
        valid, problems, warnings = hook_problems(bus, hook_id)
        has_provider = bool(bus.snapshot.settings.raw.get("prompt_provider"))
    for warning in warnings:
        say(f"warning: {warning}")
    if valid:
        say(f"ok  hooks/{hook_id}: valid (hookbus validate {shlex.quote(hook_id)} says the same)")
        return True, has_provider
    for problem in problems:
        say(problem)
    say(f"hook {hook_id!r} is not valid yet: fix what is said above, then validate it again (below)")
    return False, has_provider


def _validate_draft(home: Home, hook_dir: Path, hook_id: str) -> tuple[bool, bool]:
    """``_validate`` of a draft outside the home, loaded as ``hookbus install`` loads it: a
    copy in a scratch home with the home's settings.json and config/. The scratch home is
    in the system's temporary directory: whoever drafts may not write into the home."""
    from hookbus.cli.staged import Refusal, Review, copy_hook, review, scratch_home, shown_as

    with scratch_home(home, None, "hookbus-new-") as root:
        try:
            copy_hook(hook_dir, root / "hooks" / hook_id)
        except Refusal as exc:
            verdict = Review(False, (f"{exc} (hookbus install refuses it until then)",), (), False)
        except OSError as exc:
            raise UsageError(f"cannot check {hook_dir}: copying it to {root} failed: {exc.strerror or exc}") from None
        else:
            verdict = review(root, hook_id, run_tests=False)
        lines = [shown_as(line, root, hook_id, hook_dir, home) for line in (*verdict.warnings, *verdict.problems)]
    for line in lines[: len(verdict.warnings)]:
        say(f"warning: {line}")
    if verdict.valid:
        say(f"ok  {hook_dir}: valid as a hook of {home.root} (hookbus install checks it again)")
        return True, verdict.has_provider
    for line in lines[len(verdict.warnings):]:
        say(line)
    say(f"hook {hook_id!r} is not valid yet: fix what is said above; hookbus install refuses it until then")
    return False, verdict.has_provider


def _expected(event: str, kind: str, mismatch: bool) -> str:
    """What ``hookbus emit`` of the sample envelope decides, in words."""
    if mismatch:
        return "the decision: allow, since the sample does not match the matcher (edit envelope.json)"
    if kind == "prompt":
        return "the decision, the model's (with no prompt provider: allow, and the hook's error on stderr)"
    if _event(event).can_block:
        return "the decision: a deny of the sample (exit 2)"
    return "the decision: the hook's context for the sample (exit 0)"


def _edited(kind: str) -> str:
    """The file of the new hook that says what it does."""
    from hookbus.cli.policykinds import POLICY_NAME

    return {"command": SCRIPT_NAME, "rego": POLICY_NAME}.get(kind, "hook.json")


def _next_steps(
    args: argparse.Namespace, hook_dir: Path, hook_id: str, event: str, kind: str, outcome: str, valid: bool
) -> None:
    home = ["--home", str(args.home)] if args.home else []
    envelope = str(hook_dir / ENVELOPE_NAME)

    def command(*words: str) -> str:
        return shlex.join(["hookbus", *words, *home])

    lines = [
        (command("emit", event, "--input", envelope), outcome),
        (command("explain", event, "--input", envelope), "why it fired or not, what it said, how it merged"),
        (command("log", "--hook", hook_id), "its fires, as they were recorded"),
    ]
    if not valid:
        lines.insert(0, (command("validate", hook_id), "what is wrong, once more"))
    say()
    say("next, try it:" if valid else "next:")
    for text, why in lines:
        say(f"  # {why}")
        say(f"  {text}")
    edit = hook_dir / _edited(kind)
    say(f"then edit {edit} to do what you need (hookbus validate checks it again).")


def _next_steps_of_a_draft(
    args: argparse.Namespace, hook_dir: Path, installed: Path, event: str, kind: str, outcome: str
) -> None:
    """A draft is read before it goes in: once installed it runs at every event it matches,
    outside any agent's sandbox."""
    home = ["--home", str(args.home)] if args.home else []
    edit = hook_dir / _edited(kind)
    say()
    say(f"next: edit {edit} to do what you need.")
    say(f"review every file of {hook_dir}: once installed, it runs at each {event} it matches, as you, outside any sandbox.")
    say("then:")
    say(f"  # check it as the home loads it, run its fixtures, and copy it into {installed.parent}")
    say(f"  {shlex.join(['hookbus', 'install', str(hook_dir), *home])}")
    say(f"  # then try it; {outcome}")
    say(f"  {shlex.join(['hookbus', 'emit', event, '--input', str(installed / ENVELOPE_NAME), *home])}")


def _say_about_the_provider(settings_path: Path) -> None:
    """A prompt hook needs a provider: the embedder's (vixd runs prompts in its threads),
    else settings.json's prompt_provider. Without either it fails open at every fire, and
    nothing at load can tell (the embedder's is known only when it runs)."""
    say()
    say(
        "note: settings.json sets no prompt_provider. Unless the embedder answers prompts (vixd does), "
        "this hook fails open at every fire with 'no prompt provider configured'; hookbus validate "
        f"cannot check for one. For a local model (Ollama), put this in {settings_path}:"
    )
    say('  {"prompt_provider": {"base_url": "http://localhost:11434/v1", "model": "llama3.2"}}')
