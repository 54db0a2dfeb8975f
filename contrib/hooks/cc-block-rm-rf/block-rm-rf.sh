#!/usr/bin/env bash
# PreToolUse, matcher "Bash": deny a recursive rm of a place no agent should wipe.
# Written for Claude Code's hook contract; runs unchanged under hookbus with
# "dialect": "claude-code" (and under Claude Code itself).
#
# Denied: rm with -r, -R or --recursive (with or without -f), in any simple command of
# the line (after ;, &&, ||, |, &, a newline, inside $(...), `...`, bash -c '...' or eval,
# behind sudo, env, command, nohup, time, timeout, nice, xargs), when an operand is
#   - the filesystem root:  /  //  /.  /*  (and a top-level system directory: /usr, /etc, ...)
#   - a home directory:     ~  ~/  ~/*  ~alice  $HOME  ${HOME}  "$HOME"/*  ~/..  (or the
#                           real $HOME, or a parent of it, spelled out: /home, /Users/ada)
#   - an escape upwards:    ..  ../  ../*  ../sibling  a/../..  (anything outside the
#                           working directory, reached through ..)
#   - everything here:      *  ./*  .*  .  ./
#   - an empty-variable trap: $DIR/  $DIR/*  ${DIR}/*  (these become / when DIR is empty
#                           or unset; ${DIR:?}/* is fine, it aborts instead)
# and rm --no-preserve-root, always.
# Allowed: every other rm, e.g. rm -rf build, rm -rf ./dist/*, rm -rf /tmp/scratch,
# rm -rf ~/project/node_modules, rm -f notes.txt.
#
# A guardrail, not a boundary: a script file, find -delete, a variable set earlier
# (D=/; rm -rf $D), cd .. && rm -rf x, or another language go around it. Quotes are
# not tracked (rm -rf '*' is refused too), and text in a heredoc is read as commands.
#
# Output: Claude Code's JSON, {"hookSpecificOutput": {"permissionDecision": "deny",
# "permissionDecisionReason": ...}} on stdout, exit 0. Anything else: exit 0, no output.
# Needs python3 (shlex splits the command as a shell would); without it the command is
# not checked and the hook says so on stderr with exit 1 (a non-blocking error: allowed).

if ! command -v python3 >/dev/null 2>&1; then
  echo "cc-block-rm-rf: python3 is not installed, so this command was not checked" >&2
  exit 1
fi

read -r -d '' program <<'PY'
import json
import os
import posixpath
import re
import shlex
import sys

WRAPPERS = {"sudo", "doas", "env", "command", "builtin", "exec", "nohup", "time", "nice",
            "ionice", "timeout", "xargs", "then", "do", "else", "elif", "if", "while",
            "until", "!", "{"}
#: The options of those wrappers that take a value (sudo -u root, nice -n 5, ...).
VALUED = {
    "sudo": {"-u", "-g", "-h", "-p", "-r", "-t", "-U", "-C", "-D", "-T", "--user", "--group",
             "--host", "--prompt", "--role", "--type", "--other-user", "--chdir"},
    "doas": {"-u", "-C"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir", "--split-string"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "xargs": {"-I", "-L", "-P", "-d", "-n", "-s", "-E", "-a", "--max-args", "--max-procs",
              "--delimiter", "--arg-file", "--max-lines", "--max-chars"},
}
SHELLS = {"bash", "sh", "zsh", "dash", "ksh"}
SYSTEM = {"/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt",
          "/proc", "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "/Users", "/System",
          "/Library", "/Applications", "/Volumes", "/private"}
HOME_MARK = "/\x00home/\x00user"  # stands for a home directory while normalizing
WILDCARD = re.compile(r"[.*?]*\*[.*?]*")
HOME_PREFIX = re.compile(r"(~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\})(?=/|$)")
VAR_PREFIX = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)(?=/)")


def tokens(command):
    text = command.replace("\\\n", " ").replace("\n", " ; ").replace("`", " ; ")
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        return list(lexer)
    except ValueError:  # unbalanced quotes: a rougher split
        return re.findall(r"[;&|()<>]+|[^\s;&|()<>]+", text.replace('"', " ").replace("'", " "))


def simple_commands(command):
    """Each simple command of the line, as its words (redirections left out)."""
    words, skip = [], False
    for token in tokens(command):
        if skip:
            skip = False
        elif token and all(c in ";&|()<>" for c in token):
            if "<" in token or ">" in token:
                skip = True  # the file a redirection names is no operand
            else:
                if words:
                    yield words
                words = []
        else:
            words.append(token)
    if words:
        yield words


def unwrap(words):
    """The words without leading assignments and wrappers (sudo -u x, env A=1, ...)."""
    i = 0
    while i < len(words):
        word = words[i]
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word, re.S):
            i += 1
        elif posixpath.basename(word) in WRAPPERS:
            wrapper = posixpath.basename(word)
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in VALUED.get(wrapper, ()) else 1
            if wrapper == "timeout" and i < len(words):
                i += 1  # the duration
        else:
            break
    return words[i:]


def judge(path):
    """What deleting ``path`` recursively would wipe, when that is too much; else None."""
    if not path or re.match(r"\$\{[A-Za-z_][A-Za-z0-9_]*:[?]", path):
        return None  # ${DIR:?}/...: the shell stops when DIR is empty
    home = HOME_PREFIX.match(path)
    var = VAR_PREFIX.match(path)
    if home:
        base, rest = HOME_MARK, path[home.end():]
    elif var and var.group(1).strip("{}") != "HOME":
        base, rest = "", path[var.end():]
    elif "$" in path or path.startswith("~"):
        return None  # another variable or expansion: cannot tell
    elif path.startswith("/"):
        base, rest = "", path
    else:
        base, rest = ".", "/" + path
    parts = rest.split("/")
    globbed = False
    while len(parts) > 1 and (parts[-1] == "" or WILDCARD.fullmatch(parts[-1])):
        globbed = globbed or parts[-1] != ""
        parts.pop()
    every = "everything in " if globbed else ""
    if base == HOME_MARK:
        whose = ("your home directory" if home.group(1) in ("~", "$HOME", "${HOME}")
                 else f"the home directory {home.group(1)}")
        norm = posixpath.normpath(HOME_MARK + "/".join(parts))
        if norm == HOME_MARK:
            return f"{every}{whose}"
        if HOME_MARK.startswith(norm.rstrip("/") + "/"):
            return f"{every}a parent of {whose}"
        return None
    if base == ".":
        norm = posixpath.normpath("." + "/".join(parts))
        if norm == ".":
            return f"{every}the working directory" if globbed else "the working directory itself"
        if norm == ".." or norm.startswith("../"):
            return f"{every}{norm}, outside the working directory"
        return None
    norm = "/" + posixpath.normpath("/" + "/".join(parts)).lstrip("/")
    if var:
        if norm != "/":
            return None
        name = var.group(1).strip("{}")
        return f"{every}/ when {name} is empty or unset (${{{name}:?}}/ makes the shell stop instead)"
    if norm == "/":
        return f"{every}the filesystem root"
    real_home = os.environ.get("HOME", "").rstrip("/")
    if real_home and norm == real_home:
        return f"{every}your home directory"
    if real_home and real_home.startswith(norm + "/"):
        return f"{every}{norm}, a parent of your home directory"
    if norm in SYSTEM:
        return f"{every}the system directory {norm}"
    return None


def check(command, depth=0):
    for words in simple_commands(command):
        words = unwrap(words)
        if not words:
            continue
        name = posixpath.basename(words[0])
        if depth < 3 and name in SHELLS and "-c" in words[1:-1]:
            found = check(words[words.index("-c") + 1], depth + 1)
            if found:
                return found
            continue
        if depth < 3 and name == "eval":
            found = check(" ".join(words[1:]), depth + 1)
            if found:
                return found
            continue
        if name != "rm":
            continue
        recursive, operands, options_done = False, [], False
        for word in words[1:]:
            if options_done or word == "-" or not word.startswith("-"):
                operands.append(word)
            elif word == "--":
                options_done = True
            elif word == "--no-preserve-root":
                return " ".join(words), "--no-preserve-root lets rm delete the filesystem root"
            elif word == "--recursive" or (not word.startswith("--") and ("r" in word or "R" in word)):
                recursive = True
        if not recursive:
            continue
        for operand in operands:
            what = judge(operand)
            if what:
                return " ".join(words), f"it would delete {what}"
    return None


def main():
    try:
        envelope = json.load(sys.stdin)
    except ValueError as exc:
        print(f"cc-block-rm-rf: the hook input is not JSON ({exc})", file=sys.stderr)
        return 1
    tool_input = envelope.get("tool_input") if isinstance(envelope, dict) else None
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if not isinstance(command, str):
        return 0
    found = check(command)
    if not found:
        return 0
    words, why = found
    if len(words) > 120:
        words = words[:117] + "..."
    reason = (f"Blocked `{words}`: {why}. Delete only the specific paths you mean, inside "
              "the project (for example rm -rf ./build), or ask the user to run it.")
    print(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }}))
    return 0


sys.exit(main())
PY

exec python3 -c "$program"
