"""The successor claim (shape f; docs/proposals/successor-claim-build.md §0 "The claim, exactly", §1
row "claim"; model: ``writes.claim``, ``writes_mis.claim``): claiming a job's head N is one
``PutItem`` at N's successor key, N's ``next_key``. Nothing is written on N or on the job's state.

- N's ``next_key`` is an occurrence of N's epoch: the put is N+1, the job's next head, linked
  behind N (``after_run_id`` = N), ``through`` = N's instant, ``runs_before`` one more where the
  life counts its runs (``max_runs``), ``claimed_by`` and ``claimed_at`` (HC7's clock for N's
  dispatch lease).
- N's ``next_key`` is its life's end marker (an ``at()`` job, an ``end`` reached, ``max_runs``
  reached by N's run; HC5): the put is the end marker, and no claim can follow.

Its one condition part is ``_successor_absent`` (model: ``claim.successor_absent``). Once the put
lands, N is a claimed run: the claimer sends N's message (``claimed_run_message``). When the put
fails, the successor exists, and ``after_failed_claim`` says whether it is the claimer's own
(a retried tick: send N's message again; the worker's start is fenced on N's version, so a
second message starts N at most once) or anyone else's (another claimer, a settle, a change's
closure marker: send nothing). One item, no transaction: 1 write unit and 1 ``due`` index entry.

Pure, and called by no service yet (build step S8 wires it behind a migration switch).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.head import (
    HeadJob,
    counts_runs,
    ends_life,
    head_check_delay_ms,
    head_item,
    is_closure_marker,
    next_key,
)
from jobsched.core.run import RunMessage, RunStatus, parse_run_id
from jobsched.core.transitions.conditions import _successor_absent, retention_expiry
from jobsched.core.writes import RUNS, Item, Put


def claimed_runs(head: Mapping[str, Any]) -> int:
    """The life's scheduled runs once N is claimed: ``runs_before`` + 1 where the life counts its
    runs (``max_runs`` set), else ``runs_before`` as it is (uncounted, as today's claim)."""
    before = int(head.get("runs_before") or 0)
    return before + 1 if counts_runs(head) else before


def successor_item(head: Mapping[str, Any], now: int, claimer: str, cfg: SchedulerConfig) -> Item:
    """What the claim of ``head`` puts at its ``next_key``: the next head, or the end marker."""
    if ends_life(head):
        return end_marker_item(head, now, claimer, cfg)
    item = head_item(
        HeadJob.of_head(head),
        int(head["next_at"]),
        int(head["epoch"]),
        through=int(head["scheduled_at"]),
        shard_count=cfg.shard_count,
        check_delay_ms=head_check_delay_ms(cfg),
        runs_before=claimed_runs(head),
        after_run_id=str(head["run_id"]),
        claimed_by=claimer,
        claimed_at=now,
    )
    if item["run_id"] != next_key(head):
        # The head's timing names another next occurrence than the one it was made with: a head
        # written by another release's schedule code. Never put a head off the successor key.
        raise ValueError(f"{head['run_id']}: next_key {next_key(head)} is not {item['run_id']}")
    return item


def end_marker_item(head: Mapping[str, Any], now: int, claimer: str, cfg: SchedulerConfig) -> Item:
    """The end marker the claim of a life's last head puts (HC5, ``RunStatus.END``): it fills the
    only key a further claim could use, and carries what the finish write copies to the state:
    the last run (``last_run_id``, ``last_run_at``, and ``after_run_id``, the chain's end) and the
    life's count (``runs_claimed``, where counted). Not a run, not in the ``due`` index. It
    expires with the history (the retention outlives any claimer of its epoch, HC14)."""
    marker: Item = {
        "job_id": head["job_id"],
        "run_id": next_key(head),
        "status": RunStatus.END.value,
        "version": 1,
        "epoch": int(head["epoch"]),
        "last_run_id": head["run_id"],
        "last_run_at": int(head["scheduled_at"]),
        "after_run_id": head["run_id"],
        "claimed_by": claimer,
        "claimed_at": now,
        "expires_at": retention_expiry(now, cfg),
    }
    if counts_runs(head):
        marker["runs_claimed"] = claimed_runs(head)
        marker["max_runs"] = int(head["max_runs"])
    return marker


def claim_head_op(head: Mapping[str, Any], now: int, claimer: str, cfg: SchedulerConfig) -> Put:
    """The claim of ``head`` (as its ``due`` entry or a read shows it): one conditional put of its
    successor (module docstring). ``claimer``: a name unique to the claiming tick, so that a retry
    of the same tick knows its own claim (``after_failed_claim``)."""
    item = successor_item(head, now, claimer, cfg)
    label = "claim head (end)" if ends_life(head) else "claim head"
    return Put(RUNS, item, condition=(_successor_absent(),), label=label)


class ClaimRace(StrEnum):
    """What a claimer does once its put failed, from the item at the successor key."""

    OURS = "ours"  # our own claim (a retried tick): send N's message
    TAKEN = "taken"  # another claimer's claim or end marker: N is claimed; send nothing
    SETTLED = "settled"  # a settle decided N (HC9): N runs or is missed as it decided; send nothing
    CLOSED = "closed"  # a change's closure marker: N is closed; send nothing
    ABSENT = "absent"  # nothing there (the read was stale): read again before anything else


def after_failed_claim(
    head: Mapping[str, Any], successor: Mapping[str, Any] | None, claimer: str
) -> ClaimRace:
    """The claimer's judgement after ``claim.successor_absent`` failed, from the successor key as
    read (strongly consistent). Only ``OURS`` sends: the item is a claim (``after_run_id`` N)
    made by this claimer. HC9: a settle that won the key leaves a record or a head not claimed by
    us, and N's fate is the settle's."""
    if successor is None:
        return ClaimRace.ABSENT
    if is_closure_marker(successor):
        return ClaimRace.CLOSED
    made_by_claim = successor.get("after_run_id") == head["run_id"] and "claimed_by" in successor
    if made_by_claim and successor.get("claimed_by") == claimer:
        return ClaimRace.OURS
    if made_by_claim:
        return ClaimRace.TAKEN
    return ClaimRace.SETTLED


def claimed_run_message(run: Mapping[str, Any], definition: Mapping[str, Any]) -> RunMessage:
    """The message of a claimed run N, from N's item as the claim read it: N's version (the
    start's fence), N's ``after_run_id`` (where the start's walk begins), its kind and instant.
    ``definition``: the definition loaded for N's ``def_hash`` (a claim sends only a definition
    whose digest is the head's, HC10)."""
    kind = parse_run_id(str(run["run_id"])).kind
    if kind != "timed":
        raise ValueError(f"{run['run_id']}: not an occurrence (a {kind} id)")
    return RunMessage.from_run_item({**run, "definition": dict(definition)})
