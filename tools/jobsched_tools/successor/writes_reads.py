"""Shape f's writes for long runs, eventually consistent reads and worker adoption (docs/proposals/
successor-model.md, "Reads, heartbeats, detectors, adoption"), in the model's write language:
pure functions, every condition a named part that ``Protocol.dropped`` removes by its tag.

Under shape f the ``due`` entry (``shard``, ``check_at``) of a started run is its lease entry, as
the product's ``lease`` entry is today. The writes are the product's (core/transitions/start.py
``start_op`` and ``heartbeat_op``, recover.py ``recover_op`` and ``recheck_op``) on that entry:

- the start sets the lease (``lease_expires_at``) and ``check_at`` to it, and names its holder;
- a heartbeat renews ``lease_expires_at`` only (an item write, no index write: 1 unit);
- the detector meets the entry at ``check_at``; a lease renewed since is re-keyed to it (the
  recheck, 1 + 2 units), a lapsed one is recovered, conditional on the lease as read;
- a recovered run is the product's ``pending`` retry: the model keeps its status ``scheduled``
  (the model's start accepts that status) and marks it with ``retry_at``, the end of its backoff,
  which the recovery's message carries (SQS ``DelaySeconds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobsched.core.writes import RUNS, Update, eq

from jobsched_tools.successor.writes import (
    DISPATCH_LEASE_MS,
    RUN_LEASE_MS,
    RUNNING,
    SCHEDULED,
    SECOND,
    Protocol,
    run_key,
    start,
)

HEARTBEAT_MS = 10 * SECOND  # at most half the lease: one lost heartbeat is tolerated
RETRY_BACKOFF_MS = 60 * SECOND  # a retry's message is delayed this long


@dataclass(frozen=True)
class ReadsProtocol(Protocol):
    """Shape f with the switches of this extension."""

    adopt_pending: bool = False  # mutant: HC3's adoption also adopts a retry (the product's `pending`)
    recheck_ahead: bool = False  # mutant: the recheck keys the entry a lease past now, not the lease


def start_leased(proto: Protocol, run_id: str, version: int, now: int, owner: str) -> Update:
    """The base model's start (its condition parts, its ``check_at`` a lease ahead), with the
    product's lease on the run: its end, its owner and its token."""
    base = start(proto, run_id, version, now)
    lease = int(base.set["check_at"])
    set_ = {**base.set, "lease_expires_at": lease, "owner": owner, "lease_token": version + 1}
    return Update(RUNS, base.key, base.condition, base.label, set=set_)


def heartbeat(proto: Protocol, run_id: str, token: int, owner: str, now: int) -> Update:
    """The lease renewed; ``check_at`` is left where it is (the detector re-keys it)."""
    return Update(
        RUNS,
        run_key(run_id),
        proto.parts(
            eq("status", RUNNING, "heartbeat.status_running: the run was committed or recovered"),
            eq("version", token, "heartbeat.version: a stale holder (recovered meanwhile, thawed)"),
            eq("owner", owner, "heartbeat.owner: only the worker holding the lease renews it"),
        ),
        f"heartbeat {run_id}",
        set={"lease_expires_at": now + RUN_LEASE_MS, "heartbeat_at": now},
    )


def recheck(proto: Protocol, run: Mapping[str, Any], now: int) -> Update:
    """The detector met the entry and found the lease renewed: look again when it runs out."""
    at = now + RUN_LEASE_MS if isinstance(proto, ReadsProtocol) and proto.recheck_ahead else None
    return Update(
        RUNS,
        run_key(str(run["run_id"])),
        proto.parts(
            eq("version", run["version"], "recheck.version: a recovery (and a new start) since the read"),
            eq("status", RUNNING, "recheck.status_running: a commit since the read"),
        ),
        f"recheck {run['run_id']}",
        set={"check_at": at if at is not None else int(run["lease_expires_at"])},
    )


def recover_leased(proto: Protocol, run: Mapping[str, Any], now: int) -> Update:
    """A running run whose lease lapsed: a retry, after its backoff (the product's ``pending``)."""
    return Update(
        RUNS,
        run_key(str(run["run_id"])),
        proto.parts(
            eq("status", RUNNING, "recover.status_running: a commit since the read"),
            eq("version", run["version"], "recover.version: a recovery (and a new start) since the read"),
            eq(
                "lease_expires_at",
                run["lease_expires_at"],
                "recover.lease_as_read: a heartbeat renewed the lease since the read",
            ),
        ),
        f"recover {run['run_id']}",
        set={
            "status": SCHEDULED,
            "version": int(run["version"]) + 1,
            "check_at": now + RETRY_BACKOFF_MS + DISPATCH_LEASE_MS,
            "retry_at": now + RETRY_BACKOFF_MS,
        },
        remove=("owner", "lease_expires_at", "lease_token"),
    )


READS_PARTS = (
    "heartbeat.status_running",
    "heartbeat.version",
    "heartbeat.owner",
    "recheck.version",
    "recheck.status_running",
    "recover.status_running",
    "recover.version",
    "recover.lease_as_read",
)
