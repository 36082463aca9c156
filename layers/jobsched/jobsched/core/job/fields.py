"""The job item's format: the fields a person writes and those jobsched writes, with their
patterns and limits (docs/data-model.md). Plain values only: what reads and checks an item is in
``parse`` and ``model``."""

from __future__ import annotations

import re
from typing import Any

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
TARGET_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
_JOB_ID = re.compile(JOB_ID_PATTERN)


def is_job_id(value: object) -> bool:
    """Whether a job item's key is a job id. Only a job id has a state item: the state table's
    other keys (definition snapshots, ``<job_id>#<digest>``) contain ``#``, which a job id
    cannot, so no job item, whatever a person keys it with, can reach them."""
    return isinstance(value, str) and _JOB_ID.match(value) is not None


# The payload travels in the run record (a DynamoDB item, 400 KB maximum) and to the handler;
# and, in the run message's definition snapshot, through SQS (256 KiB). 64 KiB keeps every item
# and every message far below both services' limits with room for the other attributes.
MAX_PAYLOAD_BYTES = 64 * 1024
# Retries are delivered as delayed SQS messages, and SQS delays stop at 15 minutes.
MAX_BACKOFF_SECONDS = 900
# The worker Lambda's own timeout (template parameter) must exceed this.
MAX_TIMEOUT_SECONDS = 840
# DynamoDB's own limit for nested attributes, applied to the payload whether it is written as a map
# or as JSON text, and checked before anything recursive (json, pydantic) sees the value.
MAX_PAYLOAD_DEPTH = 32
# The JSON parser's own limit (pydantic-core's jiter), which is also Python's default limit for
# converting an int to and from text: a longer integer would fail in any Python handler too.
MAX_PAYLOAD_NUMBER_DIGITS = 4300
# Reasons are written back into the item (400 KB at most in all) and shown to people: a few short
# lines, never an echo of a huge input.
MAX_REASONS = 20
MAX_REASON_CHARS = 300
# A run may start up to this long after its instant (``jitter_seconds``). The claim sends it with
# an SQS delay to that start, and SQS delays stop at 900 s: the lookahead (90 s by default, at most
# 300 s recommended) plus the window must fit, so the window stops at 10 minutes. (EventBridge
# Scheduler's flexible windows go up to 1,440 minutes; a run that late is a different schedule.)
MAX_JITTER_SECONDS = 600
# Groups and tags (``jobsched list/pause/resume --group G --tag k=v``), sized as EventBridge
# Scheduler's and AWS's tags are: 50 tags, keys up to 128 characters, values up to 256.
GROUP_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$"
MAX_TAGS = 50
MAX_TAG_KEY_CHARS = 128
MAX_TAG_VALUE_CHARS = 256
# ``max_event_age_seconds``: EventBridge Scheduler's MaximumEventAgeInSeconds bounds, 60 s to 24 h.
MIN_EVENT_AGE_SECONDS = 60
MAX_EVENT_AGE_SECONDS = 86_400
# ``dead_letter_queue_arn``: an SQS queue's ARN (names are 1-80 characters of A-Z a-z 0-9 - _, a
# FIFO queue's ending in .fifo), as EventBridge Scheduler's DeadLetterConfig.Arn.
DEAD_LETTER_QUEUE_ARN_PATTERN = r"^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$"

DEFINITION_FIELDS = (
    "job_id",
    "schedule",
    "timezone",
    "start",
    "end",
    "target",
    "payload",
    "retry",
    "timeout_seconds",
    "misfire",
    "overlap",
    "enabled",
    "description",
    "jitter_seconds",
    "pause_on_failure",
    "max_runs",
    "action_after_completion",
    "group",
    "tags",
    "max_event_age_seconds",
    "dead_letter_queue_arn",
)
# The definition fields added by issue 29: written into the item form (and so into the digest)
# only when set, so a job that uses none of them keeps the digest it had before they existed.
OPTIONAL_FIELDS: dict[str, Any] = {
    "jitter_seconds": 0,
    "pause_on_failure": False,
    "max_runs": None,
    "action_after_completion": "none",
    "group": None,
    "tags": {},
    # Issue 38, as EventBridge Scheduler's RetryPolicy.MaximumEventAgeInSeconds and DeadLetterConfig.
    "max_event_age_seconds": None,
    "dead_letter_queue_arn": None,
}
# Attributes jobsched itself writes on a job item (docs/data-model.md). Any other attribute is
# neither definition nor state: most likely a misspelled field, reported instead of ignored.
STATE_FIELDS = frozenset(
    {
        "version",
        "status",
        "def_hash",
        "invalid_reasons",
        "next_run_at",
        "sched_shard",
        "latest_run_id",
        "catchups",
        "last_scheduled_at",
        "updated_at",
        "registered_at",
        # Why jobsched paused the job (``pause_on_failure``, services/pausing.py); removed by a
        # resume.
        "paused_reason",
        "paused_at",
    }
)
