"""The worker's start when an unfinished run holds the job's turn: the run is skipped, or waits
behind the holder (``buffer_one``, ``buffer_all``, ``cancel_other``, and a backfill run behind
any run), in one conditional write; a lost write is decided again, or dropped as a duplicate
(or, with the successor claim's worker adoption on, adopted: ``_adopted``, HC3).

A mixin of ``Worker`` (services/worker.py): ``begin`` decides, this settles.
"""

from __future__ import annotations

from typing import Any

from jobsched.core.errors import ConditionFailed
from jobsched.core.job import OverlapPolicy
from jobsched.core.policies import UNFINISHED, OverlapDecision, skipped_for
from jobsched.core.run import AWAITING_START, RunMessage, RunStatus, run_key
from jobsched.core.transitions import buffer_at_start_ops, skip_at_start_ops
from jobsched.core.writes import RUNS
from jobsched.services.worker_commit import Committer, is_backfill
from jobsched.services.worker_results import Outcome


class OverlapSettler(Committer):
    """The overlap half of ``Worker``'s start (and the duplicate's drop and the adoption, which
    both halves use)."""

    _adopt_scheduled: bool

    def _settle_overlap(
        self,
        message: RunMessage,
        policy: OverlapPolicy,
        decision: OverlapDecision,
        holder: dict[str, Any],
        now: int,
        passed: list[dict[str, Any]] | None = None,
        register: bool = True,
    ) -> Outcome | RunMessage | None:
        """An unfinished run holds the job's turn: skip or wait behind it. None: decide again.
        A message: the run adopted (``_adopted``), to decide again as that message.
        ``passed``: the runs not yet due the walk passed over on its way to the holder."""
        if decision is OverlapDecision.BUFFER and is_backfill(message):
            end = self._chain.line_end(holder, message.run_id)
            if end is None:
                return None  # the line moved: decide again
            holder = end
        holder_id = str(holder["run_id"])
        reason: str | None = None
        if decision is OverlapDecision.BUFFER:
            cancel = policy is OverlapPolicy.CANCEL_OTHER
            one_waits = (OverlapPolicy.BUFFER_ONE, OverlapPolicy.CANCEL_OTHER)
            alone = policy in one_waits and not is_backfill(message)
            ops = buffer_at_start_ops(
                message.run_id,
                message.version,
                holder,
                now,
                self._cfg,
                cancel=cancel,
                register=register,
                alone=alone,
            )
            event, outcome = "run.buffered", Outcome.BUFFERED
        else:
            reason = f"overlap policy skip: {holder_id} still {holder.get('status')}"
            blocked_by = skipped_for(holder, passed[0]["run_id"] if passed else None)
            if blocked_by != holder_id:
                reason += f"; the walk goes on at {blocked_by}"
            ops = skip_at_start_ops(message.run_id, message.version, reason, blocked_by, now, self._cfg)
            event, outcome = "run.skipped", Outcome.SKIPPED
        try:
            self._store.write(ops)
        except ConditionFailed as lost:
            if lost.op is ops[0]:
                if decision is OverlapDecision.BUFFER and _waited_on(lost.current, message):
                    # A run waits behind this one already (W16): at most one waits, so this run
                    # is skipped, and its end promotes the one waiting behind it.
                    return self._settle_overlap(message, policy, OverlapDecision.SKIP, holder, now, passed)
                return self._adopted(message, lost.current) or self._drop_duplicate(message, lost.current)
            current = lost.current or {}
            if (
                policy is OverlapPolicy.BUFFER_ALL
                and current.get("status") in UNFINISHED
                and current.get("buffered_next") not in (None, message.run_id)
            ):
                # Another run waits behind this holder already (one whose own predecessor ended
                # without starting): wait unnamed, never skip; the detector re-decides it.
                return self._settle_overlap(message, policy, decision, holder, now, passed, register=False)
            return None  # the holder ended (or another run waits behind it): decide again
        self._telemetry.event(event, message.run_id, holder=holder_id, reason=reason)
        if decision is OverlapDecision.BUFFER and policy is OverlapPolicy.CANCEL_OTHER:
            self._telemetry.event("run.cancel_requested", holder_id, by=message.run_id)
        if outcome is Outcome.SKIPPED:
            self._telemetry.metric("SkippedRuns", 1)
            self._after_end(message, now)  # a run may wait behind this one
        return outcome

    def _adopted(self, message: RunMessage, refused_by: dict[str, Any] | None) -> RunMessage | None:
        """Worker adoption (the successor claim's HC3; ``adopt_scheduled``): the run refused this
        message's start (or skip, or wait) and reads, strongly consistent, ``scheduled`` at a
        newer token. Then the message is stale but the run is claimed: an ad-hoc run relinked the
        head behind itself while a trigger held an index page from before (its claim then sent
        the old version and link), or the detector redispatched it. The run is started as it now
        is: its own ``version`` and ``after_run_id``, which the returned message carries, and the
        start stays conditional on that version, so this message and the newer one start it at
        most once. Sound by H2': a message names a ``scheduled`` run only once that run is
        claimed. Never a ``pending`` run: that may be a retry whose message waits out its
        backoff, and adopting it would start the retry early (the model's mutant
        ``adopt_pending``). None: not adopted (drop the message).

        ``refused_by``: the run as the refused write's condition saw it (``ConditionFailed.current``).
        Only a run that reads ``scheduled`` there is read again: ``scheduled`` runs exist only on
        jobs of the successor claim, so on a legacy stack adoption costs no read at all."""
        if not self._adopt_scheduled:
            return None
        if refused_by is None or refused_by.get("status") != RunStatus.SCHEDULED.value:
            return None
        run = self._store.get(RUNS, run_key(message.run_id))  # strongly consistent
        if (
            run is None
            or run.get("status") != RunStatus.SCHEDULED.value
            or int(run["version"]) <= message.version
            or run.get("cancel_requested")  # cancel_other: its start is refused at any token
        ):
            return None
        adopted = message.model_copy(
            update={"version": int(run["version"]), "after_run_id": run.get("after_run_id")}
        )
        self._telemetry.event(
            "run.adopted", message.run_id, message_version=message.version, version=adopted.version
        )
        return adopted

    def _drop_duplicate(self, message: RunMessage, current: dict[str, Any] | None) -> Outcome:
        self._telemetry.event(
            "run.duplicate_dropped",
            message.run_id,
            message_version=message.version,
            current_version=current.get("version") if current else None,
            current_status=current.get("status") if current else "absent",
        )
        self._telemetry.metric("DuplicatesDropped", 1)
        return Outcome.DUPLICATE


def _waited_on(current: dict[str, Any] | None, message: RunMessage) -> bool:
    """The run is still this message's to start, and another run waits behind it."""
    return (
        current is not None
        and current.get("status") in AWAITING_START
        and current.get("version") == message.version
        and current.get("buffered_next") is not None
    )
