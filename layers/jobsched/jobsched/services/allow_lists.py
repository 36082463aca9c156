"""The stack's allow-lists at registration: one function, ``allow_list_problems``, that every path
a job is registered by applies (the registrar function on the stream, the trigger's and the miss
detector's inline registrar, the reconcile pass, the Python API, ``jobsched register``,
``jobsched import`` and its ``--dry-run``), so that a job whose destination or dead-letter queue
the stack does not allow is ``invalid`` whichever path met it first, with the same reasons.

Each reason names the parameter and the value to add; the handlers (and the dead-letter sender)
check the same lists again when a run calls out, since a list may shrink after registration.
"""

from __future__ import annotations

from jobsched.core.job import JobDefinition
from jobsched.services.dead_letters import dead_letter_problems
from jobsched.targets.builtin import AllowLists, destination_problems

__all__ = ["AllowLists", "allow_list_problems"]


def allow_list_problems(definition: JobDefinition, allow: AllowLists) -> list[str]:
    """Why the stack's lists refuse ``definition``: its built-in target's destination
    (targets/builtin.py ``DESTINATION_CHECKS``: queues, event buses, functions, state machines,
    ECS task definitions and roles, SDK actions, SNS topics, Kinesis streams), then its
    ``dead_letter_queue_arn`` (``AllowedDeadLetterQueueArns``). Empty: the lists allow it."""
    return destination_problems(definition.target, definition.payload, allow) + dead_letter_problems(
        definition.dead_letter_queue_arn, allow.allowed_dead_letter_queue_arns
    )
