# hookbus's gate: a host's command hook that starts no Python while `hookbus serve --http`
# answers. It posts the host's stdin to the server's POST /gate/HOST and prints what the
# command bridge would print, exiting with its code. On anything but a whole answer of the
# server's own, it runs the command bridge instead, which decides in-process: a fail-closed
# hook and the home guard still deny when the server is down. See docs/gate.md.
#
#   bash gate.sh HOST HOME -- BRIDGE...
#
# HOST is claude-code, gemini-cli or codex; HOME the hookbus home; BRIDGE the command bridge's
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
# Bytes, not characters, from here on: Content-Length counts bytes, and a pattern's range
# is one of bytes. (Patterns, not regular expressions: bash compiles a regex at each test.)
if [[ ${LC_ALL+set} ]]; then gate_saved_lc_all=$LC_ALL; fi
LC_ALL=C
# The server: a live process of this user's, the proof, the token, from a run file that is
# this user's in a directory of this user's (another user can make neither; a file or a
# link of theirs would name their own port and proof).
if [[ ! -O $gate_home/run || -L $gate_home/run || ! -O $gate_home/run/http.gate || -L $gate_home/run/http.gate ]]; then
  gate_bridge "$@"
fi
IFS=' ' read -r gate_pid gate_address gate_port gate_proof gate_token gate_rest 2>/dev/null < "$gate_home/run/http.gate"
if [[ -n $gate_rest || -z $gate_pid || -z $gate_port || -z $gate_address || -z $gate_proof || -z $gate_token
      || $gate_pid$gate_port == *[!0-9]* || $gate_address == *[!0-9A-Fa-f:.]* || $gate_token == *[![:graph:]]* || ! -O /proc/$gate_pid ]]; then
  gate_bridge "$@"
fi
# What the bridge reads from its environment goes along as headers (one line each).
gate_env=
case $gate_host in
  claude-code) gate_route=/gate/claude-code gate_vars="CLAUDE_PROJECT_DIR CLAUDE_ENV_FILE" ;;
  gemini-cli) gate_route=/gate/gemini-cli gate_vars="GEMINI_PROJECT_DIR CLAUDE_PROJECT_DIR" ;;
  codex) gate_route=/gate/codex gate_vars= ;;
  *) gate_bridge "$@" ;;
esac

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

# The answer. Each read builtin with a timeout costs an alarm, and each byte a read(2): the
# status line is read alone (within the start window, 2 s and a grace); its reason phrase
# says how many bytes follow it, which are read in one call.
gate_lost="the server at $gate_address:$gate_port"
gate_field() {  # gate_value: the value of header $1 (lower case) in gate_headers
  local rest=${gate_headers#*$'\n'"$1": }
  [[ $rest != "$gate_headers" ]] || return 1
  gate_value=${rest%%$'\r'*}
}
gate_ours() {  # the answer is the server's of the run file; else nothing of this home's ran
  gate_field hookbus-proof && [[ $gate_value == "$gate_proof" ]] && return 0
  echo "hookbus gate: what answers on $gate_address:$gate_port is not the server of $gate_home (its answer lacks the proof of $gate_home/run/http.gate); running the bridge" >&2
  gate_bridge "$@"
}
gate_after_status() {  # gate_rest: what follows the status line, within $1 seconds
  gate_rest=
  if [[ ${#gate_line} == 23 && $gate_line == "HTTP/1.1 "[0-9][0-9][0-9]" "[0-9]*$'\r' && ${gate_line:13:9} != *[!0-9]* ]]; then
    gate_size=$(( 10#${gate_line:13:9} ))
    (( gate_size == 0 )) || IFS= read -r -d '' -N "$gate_size" -t "$1" -u 3 gate_rest
  else  # not the server's (the proof will tell): to the end of the connection
    IFS= read -r -d '' -N 67108864 -t "$1" -u 3 gate_rest
  fi
  (( $? > 128 )) && gate_rest=  # timed out: cut short
  gate_headers=$'\n'${gate_rest%%$'\r\n\r\n'*}$'\r\n'
}
gate_line=
IFS= read -r -t 2.5 -u 3 gate_line
# Nothing heard in the start window: the server runs nothing it reads that late.
[[ $gate_line == HTTP/1.1\ [0-9][0-9][0-9]* ]] || gate_bridge "$@"
gate_status=${gate_line:9:3}
if [[ $gate_status == 102 ]]; then
  # The hooks started: the answer may take as long as they may, and a margin.
  gate_after_status 5
  gate_ours "$@"
  gate_wait=0
  gate_field hookbus-wait && [[ $gate_value != *[!0-9.]* ]] && gate_value=${gate_value%.*} \
    && [[ -n $gate_value && ${#gate_value} -le 9 && $gate_value != *[!0-9]* ]] && gate_wait=$gate_value
  gate_line=
  IFS= read -r -t "$(( 10#$gate_wait + 3 ))" -u 3 gate_line
  [[ $gate_line == HTTP/1.1\ [0-9][0-9][0-9]* ]] || gate_bridge "$@" --no-server --undecided "$gate_lost gave no answer after it started the hooks"
  gate_status=${gate_line:9:3}
fi
gate_after_status 10
exec 3<&-
gate_out=${gate_rest#*$'\r\n\r\n'}
case $gate_status in
  200) gate_ours "$@" ;;
  500) gate_ours "$@"
    gate_field hookbus-undecided || gate_value="no reason given"
    gate_bridge "$@" --no-server --undecided "$gate_lost failed after it may have run hooks: $gate_value" ;;
  401) echo "hookbus gate: $gate_lost refused the token of $gate_home/run/http.gate (401); running the bridge" >&2
    gate_bridge "$@" ;;
  *) gate_bridge "$@" ;;  # refused before anything ran (too late, busy, an envelope for the bridge)
esac
# Every value is checked before bash computes with it (arithmetic evaluates subscripts).
gate_length= gate_stdout= gate_exit=
gate_field content-length && gate_length=$gate_value
gate_field hookbus-stdout && gate_stdout=$gate_value
gate_field hookbus-exit && gate_exit=$gate_value
if [[ $gate_rest != *$'\r\n\r\n'* || -z $gate_length || -z $gate_stdout || -z $gate_exit || ${#gate_length} -gt 9 || ${#gate_stdout} -gt 9
      || ${#gate_exit} -gt 3 || $gate_length$gate_stdout$gate_exit == *[!0-9]* ]] \
    || (( 10#$gate_stdout > 10#$gate_length || ${#gate_out} != 10#$gate_length )); then
  gate_bridge "$@" --no-server --undecided "$gate_lost sent an answer cut short"
fi
gate_stdout=$(( 10#$gate_stdout ))
printf '%s' "${gate_out:0:gate_stdout}"
(( ${#gate_out} > gate_stdout )) && printf '%s' "${gate_out:gate_stdout}" >&2
exit "$gate_exit"
