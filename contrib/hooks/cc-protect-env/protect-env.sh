#!/usr/bin/env bash
# PreToolUse, matcher "Write|Edit": refuse to write .env files, the Claude Code way:
# exit 2, the reason on stderr (Claude Code feeds it to the model; hookbus denies with it).
# Runs unchanged under Claude Code and under hookbus with "dialect": "claude-code".
#
# Denied: .env, .env.* (.env.local, .env.production) and *.env (prod.env), in any
# directory, in any letter case (.ENV is the same file on macOS).
# Allowed: the committed templates .env.example, .env.sample, .env.template, and
# everything else (.envrc, environment.ts, env/). Reading .env is not this hook's business.
#
# Reads tool_input.file_path with python3 when it is installed, else with sed (Claude
# Code and hookbus both send compact JSON, in which "file_path":"..." can only be the
# key itself: a quote inside a JSON string is always escaped). Needs bash (3.2 is
# enough), sed and tr.

input=$(cat)
path=
if command -v python3 >/dev/null 2>&1; then
  path=$(printf '%s' "$input" | python3 -c '
import json, sys
try:
    envelope = json.load(sys.stdin)
except ValueError:
    sys.exit(1)
tool_input = envelope.get("tool_input") if isinstance(envelope, dict) else None
path = tool_input.get("file_path") if isinstance(tool_input, dict) else None
print(path if isinstance(path, str) else "")' 2>/dev/null) || path=$(
    printf '%s' "$input" | sed -n 's/.*"file_path"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' | head -n 1)
else
  path=$(printf '%s' "$input" | sed -n 's/.*"file_path"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' | head -n 1)
fi
[ -n "$path" ] || exit 0

name=$(printf '%s' "${path##*/}" | tr '[:upper:]' '[:lower:]')
case "$name" in
  .env.example|.env.sample|.env.template) exit 0 ;;
  .env|.env.*|*.env)
    echo "Blocked writing $path: .env files hold secrets and are off limits to the agent." \
         "Put new variable names (with placeholder values) in .env.example and ask the user" \
         "to set the real values." >&2
    exit 2
    ;;
esac
exit 0
