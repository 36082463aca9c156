"""EventBridge Scheduler names as jobsched ids: a schedule's job id (``job_id_for``: deterministic
and one-to-one) and its job's group (``group_for``)."""

from __future__ import annotations

import hashlib
import re

from jobsched.core.job import is_job_id

from jobsched_tools.importer.plan import Refused

MAX_JOB_ID_CHARS = 128  # core/job/fields.py JOB_ID_PATTERN

DEFAULT_GROUP = "default"

# --- names ----------------------------------------------------------------------------------------
# EventBridge Scheduler's schedule and group names (CreateSchedule's Name and GroupName, and
# CreateScheduleGroup's Name): 1-64 characters of [0-9a-zA-Z-_.], so they may start with "-", "_"
# or "." and a group and a name together reach 129 characters as GROUP:NAME
# (https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateSchedule.html,
# https://docs.aws.amazon.com/scheduler/latest/APIReference/API_CreateScheduleGroup.html; the
# same constraints are in botocore's scheduler model). A job id is 1-128 of [A-Za-z0-9_.:-]
# starting with a letter or digit (core/job/fields.py JOB_ID_PATTERN).
EVENTBRIDGE_NAME = re.compile(r"^[0-9a-zA-Z_.-]{1,64}$")
# What marks a job id (or group) that is not the schedule's readable name: "::" is in no readable
# id, as ":" is in no EventBridge name and neither part is empty.
ESCAPE = "eb::"
_DIGEST_HEX = 16


def job_id_for(group: str, name: str) -> str:
    """The job id of the schedule ``name`` in ``group``: deterministic and one-to-one, every pair
    of EventBridge names giving a valid job id of its own.

    - ``NAME`` in the default group, else ``GROUP:NAME`` (readable: no ``::``), when that is a
      valid job id;
    - else, when it is too long (a 64-character group with a 64-character name: 129 characters)
      and starts with a letter or digit: ``GROUPNAME``, the two run together (128 characters, no
      ``:``; a colon-free readable id is a default-group name, at most 64 characters);
    - else ``eb::`` and the readable form (``eb::_nightly``, ``eb::_billing:run``), when that
      fits in 128 characters: the one ``::`` is at the start;
    - else (a group starting with ``-``, ``_`` or ``.`` whose name and group are at least 124
      characters together) ``eb::``, the readable form cut, ``::`` and 16 hex digits of the
      SHA-256 of ``GROUP/NAME``: two ``::``, unique up to a 64-bit digest.

    Raises ``Refused`` for names EventBridge Scheduler does not accept."""
    group, name = eventbridge_name(group, "GroupName"), eventbridge_name(name, "Name")
    readable = name if group == DEFAULT_GROUP else f"{group}:{name}"
    if is_job_id(readable):
        return readable
    if readable[0].isalnum() and group != DEFAULT_GROUP:
        return group + name  # only a 129-character GROUP:NAME reaches here
    if len(ESCAPE) + len(readable) <= MAX_JOB_ID_CHARS:
        return ESCAPE + readable
    digest = hashlib.sha256(f"{group}/{name}".encode()).hexdigest()[:_DIGEST_HEX]
    keep = MAX_JOB_ID_CHARS - len(ESCAPE) - 2 - _DIGEST_HEX
    return f"{ESCAPE}{readable[:keep]}::{digest}"


def eventbridge_name(value: object, what: str) -> str:
    """``value`` when it is a name EventBridge Scheduler accepts, else ``Refused``."""
    if not isinstance(value, str) or not EVENTBRIDGE_NAME.fullmatch(value):
        rule = "1-64 of 0-9 a-z A-Z - _ ."
        raise Refused(f"{what} {value!r:.80} is not an EventBridge Scheduler name ({rule})")
    return value


def group_for(group: str) -> str:
    """The job's ``group``: the schedule group's name, or ``eb::`` and it when it starts with
    ``-``, ``_`` or ``.`` (a jobsched group starts with a letter or digit)."""
    return group if group[:1].isalnum() else ESCAPE + group
