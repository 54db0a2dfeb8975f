#!/usr/bin/env bash
# Stop: do not let the agent stop while the work is marked unfinished. Answers Claude
# Code's {"decision": "block", "reason": "..."}, which on Stop means "keep going, with
# this as the instruction" (hookbus's dialect reads it as the decision's continue_with).
# Runs unchanged under Claude Code and under hookbus with "dialect": "claude-code".
#
# Unfinished means either (both are checked, both reasons are given):
#   - the file $CLAUDE_PROJECT_DIR/.stop-gate exists; its text (first 2,000 bytes) says
#     what is left. Delete it to let the agent stop.
#   - $CC_STOP_GATE_CHECK is set: a command (run with bash -c in the project) that exits
#     non-zero, e.g. CC_STOP_GATE_CHECK='make test'. The last 20 lines of its output go
#     into the reason. Unset or empty: nothing to check.
# Anything else: exit 0, no output (the agent stops).
#
# Loop guard: when the envelope says "stop_hook_active": true (the agent is already
# going on because of a Stop hook), let it stop, as Claude Code's documentation advises.
# A host that never sends stop_hook_active at all gets a fallback: at most
# $CC_STOP_GATE_MAX_BLOCKS (default 3) blocks in a row per session, counted in
# ${TMPDIR:-/tmp}/cc-stop-gate-$UID/; a stop that is let through resets the count.
#
# The project is $CLAUDE_PROJECT_DIR (hookbus: the envelope's project_dir, else its cwd),
# else the working directory. Needs bash (3.2 is enough), sed, grep, tail, tr.

input=$(cat)
flag='"stop_hook_active"[[:space:]]*:'
if printf '%s' "$input" | grep -q "$flag[[:space:]]*true"; then
  exit 0
fi

dir=${CLAUDE_PROJECT_DIR:-$PWD}
reasons=

marker="$dir/.stop-gate"
if [ -f "$marker" ]; then
  note=$(head -c 2000 "$marker" | tr -d '\r')
  reasons="The file $marker says the work is not finished${note:+: $note}"$'\n'"Finish it, then delete .stop-gate."
fi

check=${CC_STOP_GATE_CHECK:-}
if [ -n "$check" ]; then
  output=$(cd "$dir" && bash -c "$check" 2>&1 </dev/null)
  status=$?
  if [ "$status" -ne 0 ]; then
    failed="The check \`$check\` fails (exit status $status) in $dir: fix what it reports before stopping."
    [ -z "$output" ] || failed="$failed"$'\n'"$(printf '%s\n' "$output" | tail -n 20)"
    reasons="${reasons:+$reasons$'\n\n'}$failed"
  fi
fi

# The fallback loop guard, for a host that sends no stop_hook_active.
counter=
if ! printf '%s' "$input" | grep -q "$flag"; then
  session=$(printf '%s' "$input" | sed -n 's/.*"session_id"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' | head -n 1)
  session=$(printf '%s' "${session:-no-session}" | tr -c 'A-Za-z0-9_.-' '_' | cut -c 1-100)
  state="${TMPDIR:-/tmp}/cc-stop-gate-$(id -u)"
  if mkdir -p "$state" 2>/dev/null && chmod 700 "$state" 2>/dev/null; then
    counter="$state/$session.blocks"
  fi
fi
if [ -z "$reasons" ]; then
  [ -z "$counter" ] || rm -f "$counter"
  exit 0
fi
if [ -n "$counter" ]; then
  max=${CC_STOP_GATE_MAX_BLOCKS:-3}
  case "$max" in ''|*[!0-9]*) max=3 ;; esac
  count=$(cat "$counter" 2>/dev/null)
  case "$count" in ''|*[!0-9]*) count=0 ;; esac
  if [ "$count" -ge "$max" ]; then
    rm -f "$counter"
    echo "cc-stop-gate: let the agent stop after $max blocks in a row (no stop_hook_active in the input)" >&2
    exit 0
  fi
  printf '%s\n' "$((count + 1))" > "$counter"
fi

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
printf '{"decision":"block","reason":%s}\n' "$(json_string "$reasons")"
exit 0
