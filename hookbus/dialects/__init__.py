"""What each agent host calls things, and how it reads a hook's answer.

Claude Code's and Gemini CLI's names for vixd's events, tools and fields (``claude_names``,
``gemini_names``), their hook output as they read it (``claude_output``), a ``"dialect":
"claude-code"`` hook's run (``claude_hooks``), and Claude Code's Stop loop guard for hosts
that do not send it (``stopguard``). The engine uses them for the ``dialect`` field and the
contracts; the host bridges (``hookbus.hosts``) for translating. Nothing here imports an
edge, and nothing here is heavy: the command line's quick path imports some of it.
"""

from __future__ import annotations
