# hookbus's gate: a host's command hook that starts no Python while `hookbus serve --http`
# answers. It posts the host's stdin to the server's POST /gate/HOST and prints what the
# command bridge would print, exiting with its code. On anything but a whole answer of the
# server's own, it runs the command bridge instead, which decides in-process: a fail-closed
# hook and the home guard still deny when the server is down. See docs/gate.md.
#
#   bash gate.sh HOST HOME -- BRIDGE...
#
# HOST is claude-code or gemini-cli; HOME the hookbus home; BRIDGE the command bridge's
# words (/path/hookbus claude-code-hook --home HOME). Only bash's builtins run on the way
# to the server: no process is started (bash >= 4.2; an older one runs the bridge).
#
# The server is found through HOME/run/http.gate ("PID HOST PORT PROOF TOKEN", 0600, made
# by the server). The gate posts only while PID is a live process of this user's, and
# believes an answer only when it carries PROOF, which no client sends: another user's
# process on the port while the server is down is never obeyed.

gate_host=$1 gate_home=$2
if [[ $3 != -- || -z $4 ]]; then
  echo "hookbus gate: usage: bash gate.sh HOST HOME -- BRIDGE... (run \`hookbus import ... --install-bridge\` again)" >&2
  exit 1
fi
shift 3

# The command bridge, with stdin as it came (or, after a server that may have run the hooks
# gave no answer, deciding without running them: --no-server --undecided WHY).
gate_bridge() {
  if [[ ${gate_saved_lc_all+set} ]]; then LC_ALL=$gate_saved_lc_all; else unset LC_ALL; fi
  if [[ $gate_read ]]; then
    { printf '%s' "$gate_body"; [[ $gate_read == nul ]] && { printf '\0'; exec cat; }; [[ $gate_read == long ]] && exec cat; } | "$@"
    exit $?
  fi
  exec "$@"
}

# bash 4.2 has read -N and printf %(..)T; older ones (macOS's 3.2) run the bridge.
if (( BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 2) )); then
  gate_bridge "$@"
fi
# What makes the bridge run in-process, or read stdin otherwise than the server does.
if [[ ${VIX_DISABLE_HOOKS-}${HOOKBUS_DISABLE_PLUGINS-}${HOOKBUS_MANAGED_DIR-} || ${HOOKBUS_LOAD_PLUGINS+set}${HOOKBUS_SOCKET+set} || ${PYTHONIOENCODING+set}${PYTHONUTF8+set}${PYTHONCOERCECLOCALE+set} ]]; then
  gate_bridge "$@"
fi
case ${LC_ALL:-${LC_CTYPE:-${LANG-}}} in
  ''|C|POSIX|C.*|*[Uu][Tt][Ff]-8*|*[Uu][Tt][Ff]8*) ;;
  *) gate_bridge "$@" ;;  # Python would decode stdin in another charset
esac
# The server: a live process of this user's, the proof, the token.
IFS=' ' read -r gate_pid gate_address gate_port gate_proof gate_token gate_rest 2>/dev/null < "$gate_home/run/http.gate"
if [[ -n $gate_rest || ! $gate_pid =~ ^[0-9]+$ || ! $gate_port =~ ^[0-9]+$ || ! $gate_address =~ ^[0-9A-Fa-f:.]+$ || ! $gate_token =~ ^[!-~]+$ || ! -O /proc/$gate_pid ]]; then
  gate_bridge "$@"
fi
# What the bridge reads from its environment goes along as headers (one line each).
gate_env=
case $gate_host in
  claude-code) gate_route=/gate/claude-code gate_vars="CLAUDE_PROJECT_DIR CLAUDE_ENV_FILE" ;;
  gemini-cli) gate_route=/gate/gemini-cli gate_vars="GEMINI_PROJECT_DIR CLAUDE_PROJECT_DIR" ;;
  *) gate_bridge "$@" ;;
esac

# Bytes, not characters, from here on: Content-Length counts bytes.
if [[ ${LC_ALL+set} ]]; then gate_saved_lc_all=$LC_ALL; fi
LC_ALL=C
for gate_var in $gate_vars; do
  if [[ ${!gate_var+set} ]]; then
    gate_value=${!gate_var}
    [[ $gate_value == *[$'\001'-$'\037'$'\177']* ]] && gate_bridge "$@"
    gate_env+="Hookbus-Env-$gate_var: $gate_value"$'\r\n'
  fi
done

# stdin whole: a host may give it as a socket, where $(</dev/stdin) fails; read takes it a
# byte at a time. A NUL (which no bash variable holds) or more than 64 KiB: the bridge.
gate_body= gate_read=
IFS= read -r -d '' -n 65536 gate_body
if (( $? == 0 )); then
  if (( ${#gate_body} < 65536 )); then gate_read=nul; else gate_read=long; fi
  gate_bridge "$@"
fi
gate_read=whole

{ exec 3<>"/dev/tcp/$gate_address/$gate_port"; } 2>/dev/null || gate_bridge "$@"

# The server must start the hooks by then, or run nothing (it says 102 when it starts).
if [[ ${EPOCHREALTIME-} ]]; then gate_now=$EPOCHREALTIME; else printf -v gate_now '%(%s)T' -1; fi
gate_start_by=$(( ${gate_now%.*} + 2 )).${gate_now#*.}
[[ $gate_now == *.* ]] || gate_start_by=$(( gate_now + 2 ))
printf 'POST %s HTTP/1.1\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\nHookbus-Start-By: %s\r\n%s\r\n%s' \
  "$gate_route" "$gate_address" "$gate_port" "$gate_token" "${#gate_body}" "$gate_start_by" "$gate_env" "$gate_body" >&3 2>/dev/null

# The answer: its status line within the start window (2 s and a grace), then its headers.
gate_status= gate_wait=2.5
gate_answer() {  # read one status line and its headers
  gate_status= gate_exit= gate_stdout= gate_length= gate_said_proof= gate_undecided= gate_wait_said=
  local line name
  IFS= read -r -t "$gate_wait" -u 3 line || return 1
  [[ $line == HTTP/1.1\ [0-9][0-9][0-9]* ]] || return 1
  gate_status=${line:9:3}
  while IFS= read -r -t 5 -u 3 line; do
    line=${line%$'\r'}
    [[ -z $line ]] && return 0
    name=${line%%:*} name=${name,,}
    case $name in  # (every value is checked before bash computes with it)
      content-length) gate_length=${line#*: } ;;
      hookbus-exit) gate_exit=${line#*: } ;;
      hookbus-stdout) gate_stdout=${line#*: } ;;
      hookbus-proof) gate_said_proof=${line#*: } ;;
      hookbus-undecided) gate_undecided=${line#*: } ;;
      hookbus-wait) gate_wait_said=${line#*: } ;;
    esac
  done
  return 1
}

gate_lost="the server at $gate_address:$gate_port"
gate_ours() {  # the answer is the server's of the run file; else nothing of this home's ran
  [[ $gate_said_proof == "$gate_proof" ]] && return 0
  echo "hookbus gate: what answers on $gate_address:$gate_port is not the server of $gate_home (its answer lacks the proof of $gate_home/run/http.gate); running the bridge" >&2
  gate_bridge "$@"
}
if ! gate_answer; then
  # Nothing heard in the start window: the server runs nothing it reads that late.
  [[ $gate_status ]] || gate_bridge "$@"
  gate_ours "$@"
  gate_bridge "$@" --no-server --undecided "$gate_lost sent a broken answer"
fi
if [[ $gate_status == 102 ]]; then
  gate_ours "$@"
  # The hooks started: their answer may take as long as they may, and a margin.
  [[ $gate_wait_said =~ ^[0-9]{1,9}(\.[0-9]*)?$ ]] || gate_wait_said=0
  gate_wait=$(( 10#${gate_wait_said%.*} + 3 ))
  gate_answer || gate_bridge "$@" --no-server --undecided "$gate_lost gave no answer after it started the hooks"
fi
case $gate_status in
  200) gate_ours "$@" ;;
  500) gate_ours "$@"
    gate_bridge "$@" --no-server --undecided "$gate_lost failed after it may have run hooks: ${gate_undecided:-no reason given}" ;;
  401) echo "hookbus gate: $gate_lost refused the token of $gate_home/run/http.gate (401); running the bridge" >&2
    gate_bridge "$@" ;;
  *) gate_bridge "$@" ;;  # refused before anything ran (too late, busy, an envelope for the bridge)
esac
if [[ ! $gate_length =~ ^[0-9]{1,9}$ || ! $gate_stdout =~ ^[0-9]{1,9}$ || ! $gate_exit =~ ^[0-9]{1,3}$ ]] || (( 10#$gate_stdout > 10#$gate_length )); then
  gate_bridge "$@" --no-server --undecided "$gate_lost sent an answer without its outcome"
fi
gate_out=
gate_length=$(( 10#$gate_length )) gate_stdout=$(( 10#$gate_stdout ))
if (( gate_length > 0 )) && ! IFS= read -r -N "$gate_length" -t 5 -u 3 gate_out || (( ${#gate_out} != gate_length )); then
  gate_bridge "$@" --no-server --undecided "$gate_lost sent an answer cut short"
fi
exec 3<&-
printf '%s' "${gate_out:0:gate_stdout}"
(( gate_length > gate_stdout )) && printf '%s' "${gate_out:gate_stdout}" >&2
exit "$gate_exit"
