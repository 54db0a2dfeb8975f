#!/usr/bin/env bash
# Count finished turns (Stop events) in a file beside this script and, once every
# $NOTIFY_EVERY turns, drop a one-message conversation into the Threads tab with
# `vix thread create`. The bookkeeping costs nothing, the user hears from us only now and
# then, and no LLM tokens are spent: the message is literal text.
#
# Async hooks can run side by side, so the counter is updated under a lock (a directory:
# mkdir is atomic everywhere, no flock needed). Delete the `turns` file to start over.

every=${NOTIFY_EVERY:-10}
case "$every" in ''|*[!0-9]*|0) every=10 ;; esac
here=${HOOKBUS_HOOK_DIR:-$(cd "$(dirname "$0")" && pwd)}
counter="$here/turns"
lock="$here/turns.lock"

# The spec's way to call back into the daemon that fired us: vix_bin and socket_path
# come from the envelope (one line of compact JSON on stdin).
ctx=$(cat)
vix_bin=$(printf '%s' "$ctx" | sed -n 's/.*"vix_bin":"\([^"]*\)".*/\1/p')
sock=$(printf '%s' "$ctx" | sed -n 's/.*"socket_path":"\([^"]*\)".*/\1/p')
cwd=$(printf '%s' "$ctx" | sed -n 's/.*"cwd":"\([^"]*\)".*/\1/p')
thread=$(printf '%s' "$ctx" | sed -n 's/.*"thread_id":"\([^"]*\)".*/\1/p')

# --- count, under the lock ---------------------------------------------------------------
tries=0
until mkdir "$lock" 2>/dev/null; do
  tries=$((tries + 1))
  if [ "$tries" -ge 200 ]; then
    # 10 s without getting the lock: its holder was killed (by a timeout); break it.
    rmdir "$lock" 2>/dev/null
    tries=0
  fi
  sleep 0.05
done
trap 'rmdir "$lock" 2>/dev/null' EXIT
count=$(cat "$counter" 2>/dev/null)
case "$count" in ''|*[!0-9]*) count=0 ;; esac
count=$((count + 1))
printf '%s\n' "$count" > "$counter.new" && mv -f "$counter.new" "$counter"
rmdir "$lock" 2>/dev/null
trap - EXIT

[ $((count % every)) -eq 0 ] || exit 0

# --- notify ------------------------------------------------------------------------------
# Values taken from the envelope are still JSON-escaped; one with a backslash or a quote
# is not used as is. cwd must be an existing directory: else $HOME.
case "$cwd" in *\\*|*\"*) cwd= ;; esac
[ -n "$cwd" ] && [ -d "$cwd" ] || cwd=$HOME
case "$thread" in *\\*|*\"*) thread= ;; esac
json_escape() { local s=${1//\\/\\\\}; printf '%s' "${s//\"/\\\"}"; }
cwd_json=$(json_escape "$cwd")
latest=${thread:+ The latest was in thread $thread.}

# As the spec shows; --socket-path only when the envelope names a socket.
args=(thread create)
[ -n "$sock" ] && args+=(--socket-path "$sock")
"${vix_bin:-vix}" "${args[@]}" <<JSON
{ "message": "Checkpoint: the agent has finished $count turns ($every since the last note).$latest A good moment to review what changed in $cwd_json.",
  "cwd": "$cwd_json", "title": "Turn checkpoint: $count turns" }
JSON
