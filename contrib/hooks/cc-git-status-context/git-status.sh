#!/usr/bin/env bash
# UserPromptSubmit: give the model the project's git branch and `git status --short`
# before it reads the prompt. Plain stdout at exit 0 is context on UserPromptSubmit, for
# Claude Code and for hookbus's "dialect": "claude-code" alike; so this prints text.
#
# The project is $CLAUDE_PROJECT_DIR (both set it; hookbus takes the envelope's
# project_dir, else its cwd), else the working directory. Outside a git work tree, or
# without git: no output at all. At most $CC_GIT_STATUS_MAX_LINES (default 20) status
# lines, then a count of the rest. git runs with --no-optional-locks, so the status never
# takes the index lock from under a git command the agent is running.
# Needs bash and git.

cat >/dev/null                         # the envelope: nothing in it is needed
command -v git >/dev/null 2>&1 || exit 0
dir=${CLAUDE_PROJECT_DIR:-$PWD}
cd "$dir" 2>/dev/null || exit 0
[ "$(git rev-parse --is-inside-work-tree 2>/dev/null)" = true ] || exit 0

max=${CC_GIT_STATUS_MAX_LINES:-20}
case "$max" in ''|*[!0-9]*) max=20 ;; esac

if branch=$(git symbolic-ref --short -q HEAD 2>/dev/null); then
  where="on branch $branch"
  git rev-parse -q --verify HEAD >/dev/null 2>&1 || where="$where (no commits yet)"
else
  where="detached HEAD at $(git rev-parse --short HEAD 2>/dev/null)"
fi
status=$(git --no-optional-locks status --short 2>/dev/null) || exit 0

echo "git: $dir is $where."
if [ -z "$status" ]; then
  echo "git status --short: clean (nothing to commit)."
  exit 0
fi
total=$(printf '%s\n' "$status" | wc -l | tr -d ' ')
echo "git status --short ($total changed path$([ "$total" = 1 ] || echo s)):"
printf '%s\n' "$status" | head -n "$max"
[ "$total" -le "$max" ] || echo "... and $((total - max)) more (run git status to see them all)"
exit 0
