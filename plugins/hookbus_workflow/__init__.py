"""The ``workflow_id`` and ``workflow`` runner: steps of bash or prompt, decided by final text.

- ``workflow_id`` names a workflow of ``config/workflow.json`` (or ``.yaml``); ``workflow`` is
  an inline definition with the same schema.
- Steps run in order. A bash step gets the envelope on stdin and the previous step's output
  in ``HOOKBUS_PREVIOUS_OUTPUT``; a prompt step gets its text, the previous output and the
  envelope. The output of the last step is the workflow's final text, decided by
  ``hookbus.contract.outcome_from_final_text``.
- A step that fails (non-zero exit, timeout, provider error) stops the workflow, which fails
  open with the error recorded. The hook's timeout bounds the whole workflow.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from hookbus import hookimpl
from hookbus.contract import describe_exit, outcome_from_final_text
from hookbus.converter import json_type_name
from hookbus.decision import Outcome
from hookbus.errors import Problem, SpecError
from hookbus.home import Home
from hookbus.prompts import PromptError
from hookbus.runners import HookCall, ParseContext, RunnerRegistration
from hookbus.settings import Settings

from hookbus_workflow.schema import WORKFLOW_SCHEMA, ConfigCache, Step, Workflow, parse_workflow

#: A previous step's output past this is cut in HOOKBUS_PREVIOUS_OUTPUT (the kernel caps
#: one environment string at 128 KiB).
MAX_PREVIOUS_OUTPUT_ENV = 100_000

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
        defined = ", ".join(sorted(config.workflows)) or "none"
        where = shown if config.path else f"{shown} (which does not exist)"
        raise SpecError(f"names no workflow in {where}; defined: {defined}")

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
                return Outcome.fail_open(call.cancel.reason or "cancelled", thread_id)
            step_deadline = call.deadline
            if step.timeout is not None:
                step_deadline = min(step_deadline, time.monotonic() + step.timeout)
            if time.monotonic() >= step_deadline:
                return Outcome.fail_open(f"timed out after {call.hook.spec.timeout} before {label}", thread_id)
            if step.kind == "bash":
                output, error = self._bash(call, step, previous, step_deadline)
            else:
                output, error, asked_thread = self._prompt(call, step, previous, step_deadline)
                thread_id = asked_thread or thread_id
            if error is not None:
                if call.cancel.cancelled:  # shutdown, not the step's fault
                    return Outcome.fail_open(call.cancel.reason or "cancelled", thread_id)
                return Outcome.fail_open(f"{label} failed: {error}", thread_id)
            previous = output
        return attrs.evolve(outcome_from_final_text(previous or ""), thread_id=thread_id)

    @staticmethod
    def _timeout_text(call: HookCall, step: Step, deadline: float) -> str:
        own = step.timeout is not None and deadline < call.deadline
        return f"timed out after {step.timeout_text if own else call.hook.spec.timeout}"

    def _bash(
        self, call: HookCall, step: Step, previous: str | None, deadline: float
    ) -> tuple[str, str | None]:
        from hookbus.process import run_bash  # loaded on the first bash step

        extra = {"HOOKBUS_PREVIOUS_OUTPUT": (previous or "")[:MAX_PREVIOUS_OUTPUT_ENV]}
        result = run_bash(
            step.text,
            input=call.payload,
            cwd=call.working_directory(),
            env=call.environment(extra),
            deadline=deadline,
            cancel=call.cancel,
        )
        failure = result.failure(self._timeout_text(call, step, deadline), call.cancel.reason or "cancelled")
        if failure is not None:
            return "", failure
        assert result.returncode is not None
        if result.returncode != 0:
            return "", describe_exit(result.returncode, result.stderr)
        return result.stdout.decode("utf-8", errors="replace"), None

    def _prompt(
        self, call: HookCall, step: Step, previous: str | None, deadline: float
    ) -> tuple[str, str | None, str | None]:
        try:
            answer = call.ask(step.text, previous_output=previous, deadline=deadline)
        except PromptError as exc:
            message = str(exc)
            if time.monotonic() >= deadline and "timed out" in message:
                message = self._timeout_text(call, step, deadline)
            return "", message, None
        return answer.text, None, answer.thread_id


@hookimpl
def hookbus_register_runners(register: RunnerRegistration) -> None:
    runner = WorkflowRunner()
    register.add("workflow_id", runner)
    register.add("workflow", runner)


@hookimpl
def hookbus_config_problems(home: Home, settings: Settings) -> list[Problem]:
    return configs.get(home).problems()
