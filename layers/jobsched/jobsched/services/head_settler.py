"""Settling an overdue head under the successor claim: chunk after chunk, until a head is left or
the life's end marker is written (docs/proposals/successor-claim-build.md §1 row "settle chunk",
§2 "misfire and catch-up", HC9; model: ``model_mis.settle``).

``services/settle.py``'s ``Settler`` does this for a legacy state; this is its counterpart for a
head (``core/transitions/head_settle.py`` ``settle_head_ops``). Two callers:

- the miss detector, for a head no claim took within its grace (HC7's judgement ``SETTLE``): the
  occurrences up to now meet the job's misfire policy, the latest within grace run late;
- the registrar, for a change that meets a due head (core/head_change.py ``SettleFirst``): the
  occurrences up to the change's time (``until``), under the policy, or every one ``missed`` with
  the stop's ``reason`` (a pause, an invalid item, a delete, a reached ``max_runs``).

Each chunk is one transaction with no state item, conditional on the head's status and version
(``settle.head_scheduled``, ``settle.head_version``) and on N's successor key being free
(``settle.successor_absent``): a late claim that landed first (HC9), a change, a relink or another
settler fails it, and the settle stops there (``lost_race``; the caller reads again next time).
The next chunk settles the head the last one wrote, as written: the chunk's conditions fence it.
Every chunk leaves a head or the end marker (H1), so a settle cut off between chunks leaves an
overdue head for the next pass (level-triggered). The head must be read strongly before the first
chunk: the ``due`` index does not project ``status`` or ``version``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError
from jobsched.core.run import RunKind, RunStatus
from jobsched.core.transitions.head_settle import settle_head_ops
from jobsched.core.writes import Item
from jobsched.ports import Store, Telemetry


@dataclass
class HeadSettled:
    decided: list[Item] = field(default_factory=list)  # every occurrence decided, oldest first
    to_dispatch: list[Item] = field(default_factory=list)  # the runs made, to send (after the write)
    chunks: int = 0  # transactions written
    head: Item | None = None  # the head the last chunk left (None: the end marker, or nothing written)
    ended: bool = False  # the last chunk wrote the life's end marker
    complete: bool = False  # nothing is left to settle up to the bound: a head after it, or the end
    lost_race: bool = False  # a chunk's condition failed: a claim, a change or another settler won
    interrupted: bool = False  # a chunk's write failed otherwise (throttled, unknown): next time

    @property
    def missed(self) -> list[Item]:
        return [run for run in self.decided if run.get("status") == RunStatus.MISSED.value]


class HeadSettler:
    def __init__(self, store: Store, telemetry: Telemetry, cfg: SchedulerConfig) -> None:
        self._store = store
        self._telemetry = telemetry
        self._cfg = cfg

    def settle(
        self,
        head: Mapping[str, Any],
        now: int,
        budget_left: Callable[[int], bool],
        *,
        degraded: bool = False,
        reason: str | None = None,
        until: int | None = None,
        definition: Item | None = None,
    ) -> HeadSettled:
        """Settle ``head`` (as read strongly) chunk after chunk. ``budget_left(occurrences decided
        so far)`` is asked before every chunk but the first: out of budget, the head the last
        chunk left is overdue, and the next pass settles it. ``degraded``: the detector's overload
        flag (``run_all`` coalesced to ``run_once``). ``reason``/``until``: the registrar's settle
        before a change (``settle_head_ops``). ``definition``: what each run's message carries
        (a run without it has it read back when sent, services/dispatch.py)."""
        done = HeadSettled()
        current: Mapping[str, Any] = head
        while True:
            if done.chunks and not budget_left(len(done.decided)):
                return done
            chunk = settle_head_ops(current, now, self._cfg, degraded=degraded, reason=reason, until=until)
            try:
                self._store.write(chunk.ops)
            except ConditionFailed as lost:
                # HC9: a late claim of the head took its successor key first (it runs as claimed),
                # or a change, a relink or another settler moved the head: read again next time.
                self._telemetry.event("settle.lost", str(current["run_id"]), failed=lost.label)
                done.lost_race = True
                return done
            except StoreError:
                done.interrupted = True  # the head is still overdue (or settled): the next pass
                return done
            done.chunks += 1
            done.decided += chunk.decided
            done.to_dispatch += [
                run if definition is None else {**run, "definition": definition} for run in chunk.to_dispatch
            ]
            report_decided(self._telemetry, chunk.decided)
            done.head = chunk.next_head
            done.ended = chunk.end_marker is not None
            if not chunk.more or chunk.next_head is None:
                done.complete = True
                return done
            current = chunk.next_head


def report_decided(telemetry: Telemetry, decided: list[Item]) -> None:
    """One event per occurrence a settle decided, as today's settle reports its records."""
    for run in decided:
        if run.get("status") == RunStatus.MISSED.value:
            telemetry.event(
                "run.missed", run["run_id"], scheduled_at=run["scheduled_at"], reason=run.get("reason")
            )
        elif run.get("kind") == RunKind.CATCHUP.value:
            telemetry.event("run.catchup", run["run_id"], scheduled_at=run["scheduled_at"])
        else:
            telemetry.event("run.late", run["run_id"], scheduled_at=run["scheduled_at"])
