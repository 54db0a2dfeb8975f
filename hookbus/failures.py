"""How a hook can fail, in words: for a fail-closed deny's reason, and for the line
``hookbus emit`` prints on stderr for each hook that failed. Built-in modules only: the
quick path to a server prints these lines too."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: How a hook can fail, and how a fail-closed deny's reason says it.
FAILURES: dict[str, str] = {
    "timeout": "timed out",
    "crash": "crashed",
    "killed": "was killed",
    "unparseable": "answered with something unparseable",
    "error": "failed",
    # hookbus itself could not run it (an envelope it could not read whole, a server that
    # stopped answering): the hook's own on_error decides all the same.
    "hookbus": "could not be decided by hookbus",
}


def failure_line(hook_id: str, failure: str, error: str, closed: bool) -> str:
    """``hook 'lint' failed open (timed out): timed out after 5s``."""
    how = "closed" if closed else "open"
    return f"hook {hook_id!r} failed {how} ({FAILURES.get(failure, FAILURES['error'])}): {error}"


def say_server_notes(decision: dict[str, Any], who: str, say: Callable[[str], None]) -> None:
    """Take ``problems`` and ``failed`` out of a server's emit answer (asked for with
    ``"failures": true``) and ``say`` them as an in-process emit does: the home's load
    problems as ``hookbus: ...``, each failed hook as ``WHO: hook 'x' failed open ...``."""
    problems = decision.pop("problems", None)
    for problem in problems if isinstance(problems, list) else ():
        say(f"hookbus: {problem}")
    failed = decision.pop("failed", None)
    for failure in failed if isinstance(failed, list) else ():
        if isinstance(failure, dict):
            line = failure_line(str(failure.get("hook_id")), str(failure.get("failure")), str(failure.get("error")), failure.get("closed") is True)
            say(f"{who}: {line}")
