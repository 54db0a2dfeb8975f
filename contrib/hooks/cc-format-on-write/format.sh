#!/usr/bin/env bash
# PostToolUse, matcher "Write|Edit": format the file just written with the formatter that
# fits it, when one is installed, and tell the model (Claude Code's additionalContext)
# that the file on disk changed, so it re-reads it before its next edit.
# Runs unchanged under Claude Code and under hookbus with "dialect": "claude-code".
#
#   .py                               ruff format, else black -q
#   .go                               gofmt -w
#   .js .jsx .ts .tsx .mjs .cjs .json
#   .css .scss .less .yaml .yml .vue
#   .graphql .md                      prettier --write (an installed one: never npx)
#
# Says nothing (exit 0, no output) when no formatter fits or is installed, when the file
# is missing, or when it was already formatted. A formatter that fails (a syntax error,
# say) is reported as context too: this hook never gets in the way. PostToolUse cannot
# block anyway.
#
# Reads tool_input.file_path with python3 when installed, else with sed; a relative path
# is taken from the working directory (the envelope's cwd under hookbus; Claude Code's
# paths are absolute). Needs bash (3.2 is enough), sed, cksum and tail.

input=$(cat)
read_path_sed() {
  # tool_response may name a path too: only what follows "tool_input" is read.
  printf '%s' "$input" | sed -e 's/.*"tool_input"[[:space:]]*:[[:space:]]*{//' \
    -e 's/"tool_response".*//' \
    -n -e 's/.*"file_path"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' | head -n 1
}
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
print(path if isinstance(path, str) else "")' 2>/dev/null) || path=$(read_path_sed)
else
  path=$(read_path_sed)
fi
[ -n "$path" ] && [ -f "$path" ] || exit 0

have() { command -v "$1" >/dev/null 2>&1; }
tool=
case "$path" in
  *.py)
    if have ruff; then tool="ruff format"; set -- ruff format
    elif have black; then tool=black; set -- black -q
    fi ;;
  *.go)
    if have gofmt; then tool=gofmt; set -- gofmt -w; fi ;;
  *.js|*.jsx|*.ts|*.tsx|*.mjs|*.cjs|*.json|*.css|*.scss|*.less|*.yaml|*.yml|*.vue|*.graphql|*.md)
    if have prettier; then tool=prettier; set -- prettier --write; fi ;;
esac
[ -n "$tool" ] || exit 0
case "$path" in -*) path=./$path ;; esac     # never taken for an option

# A JSON string of $1, in bash alone (no python3 or jq needed to answer).
json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  s=$(printf '%s' "$s" | tr -d '\000-\010\013\014\016-\037')
  printf '"%s"' "$s"
}
say() {
  printf '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":%s}}\n' \
    "$(json_string "$1")"
}

before=$(cksum < "$path")
if ! output=$("$@" "$path" 2>&1 </dev/null); then
  message="$tool could not format $path"
  [ -z "$output" ] || message="$message:"$'\n'"$(printf '%s\n' "$output" | tail -n 5)"
  say "$message"
  exit 0
fi
after=$(cksum < "$path")
[ "$before" = "$after" ] && exit 0           # already formatted: nothing to say
say "formatted $path with $tool: the file on disk changed, re-read it before editing it again"
