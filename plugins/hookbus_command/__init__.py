"""The ``command`` runner: ``bash -c COMMAND`` with the envelope on stdin.

It decides by the spec's command contract (``hookbus.contract.outcome_from_command``):
exit 0 with nothing, text or a JSON decision; exit 2 to deny; anything else fails open.
"""

from __future__ import annotations

from typing import Any

from hookbus import hookimpl
from hookbus.contract import outcome_from_command
from hookbus.converter import json_type_name
from hookbus.decision import Outcome
from hookbus.errors import SpecError
from hookbus.runners import HookCall, ParseContext, RunnerRegistration, check_runnable


class CommandRunner:
    """Runs ``"command": "..."`` hooks."""

    def parse(self, key: str, value: object, context: ParseContext) -> str:
        if not isinstance(value, str):
            raise SpecError(f"expected a string (a bash command), got {json_type_name(value)}")
        if not value.strip():
            raise SpecError("the command is empty")
        check_runnable(value)
        return value

    def schema(self, key: str) -> dict[str, Any]:
        return {
            "type": "string",
            "minLength": 1,
            "description": "A shell command, run as bash -c COMMAND with the envelope JSON on stdin.",
        }

    def run(self, call: HookCall) -> Outcome:
        # subprocess and friends load on the first fire, not on every `hookbus` start-up.
        from hookbus.process import run_bash

        result = run_bash(
            call.hook.options,
            input=call.payload,
            cwd=call.working_directory(),
            env=call.environment(),
            deadline=call.deadline,
            cancel=call.cancel,
        )
        failure = result.failure(f"timed out after {call.hook.spec.timeout}", call.cancel.reason or "cancelled")
        if failure is not None:
            return Outcome.fail_open(failure, failure=result.failure_kind())
        assert result.returncode is not None
        return outcome_from_command(
            result.returncode, result.stdout, result.stderr, call.event, call.hook.spec.dialect
        )


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    register.add("command", CommandRunner())
