"""The ``workflow_id`` and ``workflow`` runner: steps of bash or prompt, decided by final text.

- ``workflow_id`` names a workflow of ``config/workflow.json`` (or ``.yaml``); ``workflow`` is
  an inline definition with the same schema.
- Steps run in order. A bash step gets the envelope on stdin and the previous step's output
  in ``HOOKBUS_PREVIOUS_OUTPUT``, cut so that the step can always start (below); a prompt
  step gets its text, the previous output and the envelope. The output of the last step is
  the workflow's final text, decided by ``hookbus.contract.outcome_from_final_text``.
- A step that fails (non-zero exit, timeout, provider error) stops the workflow, which fails
  open with the error recorded. The hook's timeout bounds the whole workflow.

``HOOKBUS_PREVIOUS_OUTPUT`` is cut by UTF-8 bytes, at a character boundary, to the smaller of
``MAX_PREVIOUS_OUTPUT_BYTES`` and what exec has room for. The kernel refuses to start a
program (E2BIG) when one environment string (``NAME=value`` and its NUL) is over
MAX_ARG_STRLEN, 128 KiB with 4 KiB pages and never less; or when all the strings of argv and
the environment, with a pointer each, are over the limit set by the stack size: a quarter of
RLIMIT_STACK, at most 6 MiB, at least 128 KiB. A step that cannot start fails, and the
workflow fails open: a deny its later step would give is lost.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from hookbus import hookimpl
from hookbus.contract import describe_exit, outcome_from_final_text
from hookbus.converter import json_type_name
from hookbus.decision import Failure, Outcome
from hookbus.errors import Problem, SpecError, did_you_mean, shorten
from hookbus.home import Home
from hookbus.prompts import PromptError
from hookbus.runners import HookCall, ParseContext, RunnerRegistration
from hookbus.settings import Settings

from hookbus_workflow.schema import WORKFLOW_SCHEMA, ConfigCache, Step, Workflow, parse_workflow

PREVIOUS_OUTPUT = "HOOKBUS_PREVIOUS_OUTPUT"
#: UTF-8 bytes of a previous step's output past this are cut from HOOKBUS_PREVIOUS_OUTPUT:
#: far enough under the kernel's 131,072 for ``NAME=value`` and its NUL.
MAX_PREVIOUS_OUTPUT_BYTES = 100_000

#: Left over for what the step's own commands add when bash runs them (``_``, ``SHLVL``, ``PWD``
#: and their argv), so that the variable does not use up the room they need.
_EXEC_HEADROOM = 16 * 1024

configs = ConfigCache()


class WorkflowRunner:
    """Runs ``"workflow_id": NAME`` and ``"workflow": {...}`` hooks."""

    def parse(self, key: str, value: object, context: ParseContext) -> Workflow:
        if key == "workflow":
            return parse_workflow(value)
        if not isinstance(value, str) or not value:
            raise SpecError(f"expected a workflow name, got {json_type_name(value)}")
        config = configs.get(context.home)
        workflow = config.workflows.get(value)
        if workflow is not None:
            return workflow
        shown = config.path or "config/workflow.json"
        if value in config.invalid:
            first = config.invalid[value][0]
            raise SpecError(f"workflow {value!r} in {shown} is invalid: {first}")
        if config.file_errors:
            raise SpecError(f"{shown} cannot be used: {config.file_errors[0]}")
        defined = ", ".join(repr(shorten(name)) for name in sorted(config.workflows)) or "none"
        where = shown if config.path else f"{shown} (which does not exist)"
        hint = did_you_mean(value, config.workflows)
        raise SpecError(f"{key} {shorten(value)!r} names no workflow in {where}; defined: {defined}{hint}")

    def schema(self, key: str) -> dict[str, Any]:
        if key == "workflow":
            return {**WORKFLOW_SCHEMA, "description": "An inline workflow: steps of bash or prompt."}
        return {"type": "string", "minLength": 1, "description": "A workflow of config/workflow.json."}

    def run(self, call: HookCall) -> Outcome:
        workflow: Workflow = call.hook.options
        previous: str | None = None
        thread_id: str | None = None
        count = len(workflow.steps)
        for index, step in enumerate(workflow.steps):
            label = step.label(index, count)
            if call.cancel.cancelled:
                return Outcome.fail_open(call.cancel.reason or "cancelled", thread_id, "killed")
            step_deadline = call.deadline
            if step.timeout is not None:
                step_deadline = min(step_deadline, time.monotonic() + step.timeout)
            if time.monotonic() >= step_deadline:
                message = f"timed out after {call.hook.spec.timeout} before {label}"
                return Outcome.fail_open(message, thread_id, "timeout")
            if step.kind == "bash":
                output, error, kind = self._bash(call, step, previous, step_deadline)
            else:
                output, error, kind, asked_thread = self._prompt(call, step, previous, step_deadline)
                thread_id = asked_thread or thread_id
            if error is not None:
                if call.cancel.cancelled:  # shutdown, not the step's fault
                    return Outcome.fail_open(call.cancel.reason or "cancelled", thread_id, "killed")
                return Outcome.fail_open(f"{label} failed: {error}", thread_id, kind)
            previous = output
        return attrs.evolve(outcome_from_final_text(previous or "", call.event), thread_id=thread_id)

    @staticmethod
    def _timeout_text(call: HookCall, step: Step, deadline: float) -> str:
        own = step.timeout is not None and deadline < call.deadline
        return f"timed out after {step.timeout_text if own else call.hook.spec.timeout}"

    def _bash(
        self, call: HookCall, step: Step, previous: str | None, deadline: float
    ) -> tuple[str, str | None, Failure]:
        """The step's output, or why it failed and how (its failure kind)."""
        from hookbus.process import BASH, exec_room, run_bash  # loaded on the first bash step

        base = call.environment()
        room = exec_room(base, [BASH, "-c", step.text]) - len(PREVIOUS_OUTPUT) - 2 - _EXEC_HEADROOM
        cut = cut_utf8(previous or "", min(MAX_PREVIOUS_OUTPUT_BYTES, room))
        result = run_bash(
            step.text,
            input=call.payload,
            cwd=call.working_directory(),
            env=call.environment({PREVIOUS_OUTPUT: cut}),
            deadline=deadline,
            cancel=call.cancel,
        )
        failure = result.failure(self._timeout_text(call, step, deadline), call.cancel.reason or "cancelled")
        if failure is not None:
            return "", failure, result.failure_kind()
        assert result.returncode is not None
        if result.returncode != 0:
            kind: Failure = "killed" if result.returncode < 0 else "crash"
            return "", describe_exit(result.returncode, result.stderr), kind
        return result.stdout.decode("utf-8", errors="replace"), None, "error"

    def _prompt(
        self, call: HookCall, step: Step, previous: str | None, deadline: float
    ) -> tuple[str, str | None, Failure, str | None]:
        """The step's output, or why it failed and how; and the thread it ran in."""
        try:
            answer = call.ask(step.text, previous_output=previous, deadline=deadline)
        except PromptError as exc:
            message = str(exc)
            if time.monotonic() >= deadline and exc.failure == "timeout":
                message = self._timeout_text(call, step, deadline)
            return "", message, exc.failure, None
        return answer.text, None, "error", answer.thread_id


def cut_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that is at most ``limit`` bytes of UTF-8, never
    splitting a character. A lone surrogate counts as the 3 bytes of the U+FFFD it becomes
    in an environment, a NUL as the byte it would be (it is dropped), so the result never
    grows past ``limit`` on its way there."""
    if limit <= 0:
        return ""
    if len(text) <= limit // 4:  # 4 bytes a character at most: no need to encode
        return text
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    end = limit
    while end > 0 and encoded[end] & 0xC0 == 0x80:  # a continuation byte: back to the start
        end -= 1
    return encoded[:end].decode("utf-8", "surrogatepass")


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    runner = WorkflowRunner()
    register.add("workflow_id", runner)
    register.add("workflow", runner)


@hookimpl
def hookbus_config_problems(home: Home, settings: Settings) -> list[Problem]:
    return configs.get(home).problems()
