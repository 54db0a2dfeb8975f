#!/usr/bin/env bash
# After write_file / edit_file: run the formatter that fits the file, if one is installed,
# and tell the model when the file on disk changed (so it re-reads before editing again).
#
#   .py                          ruff format, else black
#   .go                          gofmt -w
#   .js .jsx .ts .tsx .mjs .cjs
#   .json .css .scss .less
#   .yaml .yml .vue .graphql     prettier --write (an installed prettier; never npx)
#
# Anything else, a missing file, or no formatter installed: exit 0 with no output (allow).
# A formatter that fails (say, on a syntax error) is reported as context, never as an
# error: this hook must not get in the way. PostToolUse cannot block anyway.

ctx=$(cat)

# tool_input.path. python3 parses the JSON properly; without it (or if it fails), sed reads
# the compact envelope from tool_input on, with tool_response cut off (it may name a path).
if ! command -v python3 >/dev/null 2>&1 || ! path=$(printf '%s' "$ctx" | python3 -c '
import json, sys
try:
    tool_input = json.load(sys.stdin).get("tool_input") or {}
except ValueError:
    tool_input = {}
path = tool_input.get("path") if isinstance(tool_input, dict) else None
print(path if isinstance(path, str) else "")' 2>/dev/null); then
  path=$(printf '%s' "$ctx" | sed -e 's/.*"tool_input":{//' -e 's/"tool_response":.*//' \
    -n -e 's/.*"path":"\([^"]*\)".*/\1/p')
fi
[ -n "$path" ] && [ -f "$path" ] || exit 0   # relative paths: the hook runs in the envelope's cwd

have() { command -v "$1" >/dev/null 2>&1; }
tool=
case "$path" in
  *.py)
    if have ruff; then tool="ruff format"; set -- ruff format
    elif have black; then tool=black; set -- black --quiet
    fi ;;
  *.go)
    if have gofmt; then tool=gofmt; set -- gofmt -w; fi ;;
  *.js|*.jsx|*.ts|*.tsx|*.mjs|*.cjs|*.json|*.css|*.scss|*.less|*.yaml|*.yml|*.vue|*.graphql)
    if have prettier; then tool=prettier; set -- prettier --write; fi ;;
esac
[ -n "$tool" ] || exit 0
case "$path" in -*) path=./$path ;; esac     # never taken for an option

before=$(cksum < "$path")
if ! output=$("$@" "$path" 2>&1); then
  echo "$tool could not format $path${output:+:}"
  [ -z "$output" ] || printf '%s\n' "$output" | tail -n 5
  exit 0
fi
after=$(cksum < "$path")
[ "$before" = "$after" ] && exit 0           # already formatted: nothing to say
echo "formatted $path with $tool: the file on disk changed, re-read it before editing it again"
