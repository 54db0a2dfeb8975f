"""hookbus as the hook engine of other agent CLIs: the Claude Code and Gemini CLI bridges
(``bridge``, and ``command``: their full command line), what to answer when hookbus cannot
decide at all (``lastresort``), installing a bridge into a host's settings (``install``,
``settingsfile``) and importing Claude Code's hooks (``claude_import``).

An edge of the engine: it imports hookbus's core, and nothing of the core imports it. What
the engine itself needs of the hosts' names (the ``claude-code`` dialect, the output
shapes hooks may print) lives in the core: ``claude_names``, ``gemini_names``,
``claude_output``, ``dialect``.
"""

from __future__ import annotations
