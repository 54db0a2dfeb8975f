#!/usr/bin/env bash
# Deny writes to .env files (PreToolUse write_file|edit_file, sync, blocking).
#
# The envelope arrives on stdin as one line of compact JSON, so plain sed can pick out
# "path":"..." (no jq needed). In a JSON document a quote inside a string is always
# escaped (\"), so "path":"..." can only be a real key: here, tool_input.path.
#
# Denied: .env, *.env (prod.env) and .env.* (.env.local), in any directory.
# Allowed: the committed templates .env.example, .env.sample, .env.template.
# Exit 2 with the reason on stderr denies; exit 0 with no output allows.

path=$(sed -n 's/.*"path":"\([^"]*\)".*/\1/p')
name=${path##*/}

case "$name" in
  .env.example|.env.sample|.env.template) exit 0 ;;
  .env|*.env|.env.*)
    echo "writing $path could leak secrets: .env files are off limits to the agent;" \
         "put settings in a committed config file (or .env.example) instead" >&2
    exit 2
    ;;
esac
exit 0
