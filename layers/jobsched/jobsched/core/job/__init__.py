"""The job definition: the job queue's data shape, validated at every boundary.

A job item in the jobs table has two kinds of attributes:

- **definition** attributes, written by people (console, ``aws dynamodb put-item``, the CLI, the
  Python API) and validated here: ``job_id``, ``schedule``, ``timezone``, ``start``, ``end``,
  ``target``, ``payload``, ``retry``, ``timeout_seconds``, ``misfire``, ``overlap``, ``enabled``;
- **scheduler state** attributes, written only by jobsched (``JobState`` in ``core/state.py``).

``to_item``/``from_item`` convert a definition to and from its item form losslessly.

``from_item`` is a boundary that anyone with write access to the table feeds, so it is total: for
any item DynamoDB can hold it returns a definition or raises ``InvalidJob`` with bounded reasons,
never another exception, and never works for long. ``definition_digest`` is total too.

The package, lowest module first (each imports only the ones before it):

- ``fields``: the item's format, its fields with their patterns and limits;
- ``parse``: reading an item's values as DynamoDB gives them, and the reasons a person can act on;
- ``model``: the policies and ``JobDefinition``, with what a definition derives (its item form,
  its hash, its compiled schedule);
- ``digest``: ``definition_digest``, the digest of any item, valid or not.

Callers import from the package: ``from jobsched.core.job import JobDefinition``.
"""

from jobsched.core.job.digest import definition_digest
from jobsched.core.job.fields import (
    DEAD_LETTER_QUEUE_ARN_PATTERN,
    DEFINITION_FIELDS,
    GROUP_PATTERN,
    JOB_ID_PATTERN,
    MAX_BACKOFF_SECONDS,
    MAX_EVENT_AGE_SECONDS,
    MAX_JITTER_SECONDS,
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    MAX_PAYLOAD_NUMBER_DIGITS,
    MAX_REASON_CHARS,
    MAX_REASONS,
    MAX_TAG_KEY_CHARS,
    MAX_TAG_VALUE_CHARS,
    MAX_TAGS,
    MAX_TIMEOUT_SECONDS,
    MIN_EVENT_AGE_SECONDS,
    OPTIONAL_FIELDS,
    STATE_FIELDS,
    TARGET_PATTERN,
    is_job_id,
)
from jobsched.core.job.model import (
    WAITING_POLICIES,
    ActionAfterCompletion,
    JobDefinition,
    Misfire,
    MisfirePolicy,
    OverlapPolicy,
    RetryPolicy,
)
from jobsched.core.job.parse import (
    InvalidJob,
    bound_reasons,
    enabled_value,
    nesting_depth,
    plain_values,
    read_enabled,
    readable_reasons,
)

__all__ = [
    "DEAD_LETTER_QUEUE_ARN_PATTERN",
    "DEFINITION_FIELDS",
    "GROUP_PATTERN",
    "JOB_ID_PATTERN",
    "MAX_BACKOFF_SECONDS",
    "MAX_EVENT_AGE_SECONDS",
    "MAX_JITTER_SECONDS",
    "MAX_PAYLOAD_BYTES",
    "MAX_PAYLOAD_DEPTH",
    "MAX_PAYLOAD_NUMBER_DIGITS",
    "MAX_REASONS",
    "MAX_REASON_CHARS",
    "MAX_TAGS",
    "MAX_TAG_KEY_CHARS",
    "MAX_TAG_VALUE_CHARS",
    "MAX_TIMEOUT_SECONDS",
    "MIN_EVENT_AGE_SECONDS",
    "OPTIONAL_FIELDS",
    "STATE_FIELDS",
    "TARGET_PATTERN",
    "WAITING_POLICIES",
    "ActionAfterCompletion",
    "InvalidJob",
    "JobDefinition",
    "Misfire",
    "MisfirePolicy",
    "OverlapPolicy",
    "RetryPolicy",
    "bound_reasons",
    "definition_digest",
    "enabled_value",
    "is_job_id",
    "nesting_depth",
    "plain_values",
    "read_enabled",
    "readable_reasons",
]
