"""The registrar: makes job items written by people schedulable, or marks them invalid.

It always acts on the job item and the state item as they are now (consistent reads), never on a
stream image's view of the past, so replayed, duplicated and reordered stream records are
harmless. A record whose items already agree (its own report write, a replay) changes nothing,
so its writes cannot start a loop. The rules for each kind of change are ``plan_registration``'s
(core/state.py); the old timing's occurrences that came due before a change are settled first
(services/settle.py), so that no edit, pause or delete drops one silently.

Once the stack's migration switch is on (core/claim_shape.py; issue 37), a job under the successor
claim takes services/head_registrar.py's path instead: one change transaction on its state and its
head, a legacy state converted first. With the switch off (the default) this module is today's,
plus one read of the switch per ``apply`` (none for a state that records its epoch).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any

from jobsched.core.claim_shape import (
    CLAIM_SHAPE_ATTRIBUTE,
    ClaimShape,
    DeployedShape,
    job_shape,
    stack_shape,
)
from jobsched.core.clock import Clock, dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.head_change import EPOCH
from jobsched.core.job import InvalidJob, JobDefinition, bound_reasons, definition_digest, is_job_id
from jobsched.core.limits import RequestTooLarge, chunks_by_size, item_size
from jobsched.core.run import RunStatus
from jobsched.core.state import (
    INDEX_ATTRIBUTES,
    JobStatus,
    Registration,
    RegistrationPlan,
    plan_registration,
    state_misfire,
    state_schedule,
)
from jobsched.core.timing import effective_grace_ms
from jobsched.core.transitions import (
    BOOKKEEPING_KEY,
    REDATE_FLOOR,
    redate_ops,
    register_ops,
    sized_report_ops,
)
from jobsched.core.transitions.head_convert import is_legacy
from jobsched.core.transitions.register import (
    REDATE_AFTER,
    REDATE_HASH,
    REDATE_UNTIL,
    kept_redate_marks,
    record_definition,
    redate_window,
)
from jobsched.core.writes import JOBS, STATE, Item, Update
from jobsched.ports import Store, Telemetry, WorkQueue, read_attributes
from jobsched.services.allow_lists import AllowLists, allow_list_problems
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.head_registrar import HeadRegistrar, ReadJobAgain, head_at
from jobsched.services.settle import CHUNK_BYTES, CHUNK_RECORDS, MAX_PER_PASS, Settler, SettleRequest
from jobsched.services.waking import DetectorWake

TRIES = 4

# A reason the registrar gives when a stack's allow-list refuses a job's destination
# (services/allow_lists.py): a built-in target's (targets/builtin.py ``destination_problems``:
# "target: NAME: WHAT ARN is not allowed: add it to the stack's AllowedX parameter ...", or
# "target: aws_sdk: ec2:StopInstances is not allowed: ... AllowedSdkActions parameter ...") or its
# dead-letter queue's (services/dead_letters.py ``dead_letter_problems``). The stack can change
# such a refusal without a write to the job item, so the reconcile pass looks at these again.
ALLOW_LIST_REASON = re.compile(
    r"^(target: [a-z][a-z0-9_.-]*|dead_letter_queue_arn): .* is not allowed: add it to the stack's "
    r"Allowed[A-Za-z]+ parameter"
)


def refused_only_by_allow_lists(job: Item, state: Item | None) -> bool:
    """The job is invalid, as its state says, and its report on the job item (of the same
    definition) gives only allow-list reasons (``ALLOW_LIST_REASON``): nothing but the stack's
    lists keeps it invalid. A report that lacks its reasons (too large for the item) or names any
    other reason is not one: the stack's lists alone cannot make that job valid."""
    if state is None or state.get("status") != JobStatus.INVALID.value:
        return False
    if job.get("status") != JobStatus.INVALID.value or job.get("def_hash") != state.get("def_hash"):
        return False
    reasons = job.get("invalid_reasons")
    if not isinstance(reasons, list) or not reasons:
        return False
    return all(isinstance(reason, str) and ALLOW_LIST_REASON.match(reason) for reason in reasons)


class _LostRace(Exception):
    """Another writer moved the state while this attempt settled: read both items again."""


class RegistrationIncomplete(TransientStoreError):
    """The old timing's backlog is longer than one invocation settles; the stream record is
    retried and the next attempt continues from where this one left the job."""


class Registrar:
    def __init__(
        self,
        store: Store,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        queue: WorkQueue | None = None,
        known_targets: Collection[str] | None = None,
        report: bool = True,
        claim_now: Callable[[str], object] | None = None,
        detector_wake: DetectorWake | None = None,
        allow_lists: AllowLists | None = None,
        deployed: DeployedShape = DeployedShape.MIGRATING,
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._deployed = deployed  # the stack's claim indexes (template.yaml's ClaimShape)
        self._settler = Settler(store, telemetry, cfg)
        self._definitions = Definitions(store, cfg)
        self._dispatcher = (
            Dispatcher(queue, telemetry, clock, self._definitions) if queue is not None else None
        )
        # The handlers this deployment ships (the worker's registry): a target naming none of
        # them is invalid at registration, instead of failing every attempt of every run.
        self._known_targets = frozenset(known_targets) if known_targets is not None else None
        # The stack's allow-lists: a job whose destination or dead-letter queue they do not name
        # is invalid at registration, with the parameter and the value to add
        # (services/allow_lists.py, the one check every registration path makes). None: not
        # checked, for tests and simulations; the handlers and the sender refuse it in any case.
        self._allow_lists = allow_lists
        # The trigger and the miss detector apply the registrar inline when a job item changed
        # unseen; they leave the report on the job item to the registrar function (least
        # privilege: they may only read job items).
        self._report_enabled = report
        # The registrar function claims what a tick would not reach in time (Trigger.claim_now);
        # the inline registrars of the trigger and the detector leave that to their caller.
        self._claim_now = claim_now
        # A lease this registrar makes outside a tick (a first claim, late runs) wakes an idle
        # miss detector (services/waking.py); None: nothing to wake (the detector always sweeps).
        self._wake = detector_wake
        # The successor claim's path (issue 37), for jobs whose ``job_shape`` says so.
        self._heads = HeadRegistrar(store, telemetry, clock, cfg, self._definitions, self._dispatcher)
        # The stack's claim: a legacy or successor stack's from its indexes alone; a migrating
        # stack's switch once read (``_stack_shape``).
        self._stack: ClaimShape | None = (
            None if deployed is DeployedShape.MIGRATING else stack_shape(None, deployed)
        )

    def on_stream_record(
        self,
        event_name: str,  # noqa: ARG002 - the same act for every kind of record (see below)
        job_id: str,
        new_image: dict[str, Any] | None,
        changed_at: int | None = None,
    ) -> Registration:
        """Any record (INSERT, MODIFY, REMOVE, replayed or not) leads to the same act: bring the
        job's state in line with its job item as it is now. ``changed_at``: when the record was
        made (its ``ApproximateCreationDateTime``, ms), the time the change is planned from.
        ``new_image``: the item the record's write left; the job item is read as it is now, and
        the image only tells whether this record is of the write the reconcile pass applied
        before it arrived (``_late_record``)."""
        written = definition_digest(new_image) if new_image is not None else None
        return self.apply(job_id, changed_at=changed_at, written=written, image=new_image)

    def apply(
        self,
        job_id: str,
        deadline_ms: int | None = None,
        changed_at: int | None = None,
        provisional: bool = False,
        written: str | None = None,
        report: bool | None = None,
        image: Item | None = None,
    ) -> Registration:
        """Bring the job's state in line with its job item. ``changed_at``: when the person made
        the change (None: now), so that occurrences due between the change and this call are
        run late or recorded, not dropped (core/state.py ``change_time`` bounds it).
        ``provisional``: the reconcile pass's date (when it first saw the change): the person
        wrote it earlier, and the change's own record, if it comes late rather than never, dates
        it again. ``written``/``image``: the digest of the item a stream record's write left, and
        that item (``record_definition``). ``report``:
        write the outcome on the job item, or not, whatever this registrar does otherwise (the
        reconcile pass reports a job the stack's allow-lists allow now: no stream record comes)."""
        if not is_job_id(job_id):
            return self._report_only(job_id)
        applied: Registration | None = None
        for _ in range(TRIES):
            job = self._store.get(JOBS, {"job_id": job_id})
            state = self._store.get(STATE, {"job_id": job_id})
            try:
                stack = None
                if state is None or EPOCH not in state or any(a in state for a in INDEX_ATTRIBUTES):
                    stack = self._stack_shape()
                if _successor(state, stack):
                    outcome = self._register_successor(
                        job_id, job, state, deadline_ms, changed_at, report, provisional, written, image
                    )
                else:
                    outcome = self._register(
                        job_id, job, state, deadline_ms, changed_at, provisional, written, report, image
                    )
            except (ConditionFailed, _LostRace, ReadJobAgain):
                continue  # changed under us: read both again
            if outcome is Registration.UNCHANGED or not _dates_floor(state, written):
                return applied if applied is not None and outcome is Registration.UNCHANGED else outcome
            # This record is of the write the pass applied provisionally, and it carried the job to
            # a later item first (the change kept the floor): read again, so it dates the floor.
            applied = outcome
        self._telemetry.event("job.registration_conflict", job_id)
        return Registration.CONFLICT

    def _stack_shape(self) -> ClaimShape:
        """The stack's claim, for a state that does not decide its own (none, or legacy): a legacy
        or successor stack's from its indexes, with no read; a migrating stack's switch (core/
        claim_shape.py) from one strongly consistent GetItem of the bookkeeping item's
        ``claim_shape`` alone, the first time this registrar needs it: a registrar lives one
        invocation (functions/registrar/app.py; the trigger's and the detector's inline ones), so
        a switch set meanwhile is read by the next. A converted state needs no read at all."""
        if self._stack is None:
            switch = read_attributes(self._store, STATE, dict(BOOKKEEPING_KEY), (CLAIM_SHAPE_ATTRIBUTE,))
            self._stack = stack_shape(switch, self._deployed)
        return self._stack

    def _report_only(self, job_id: str) -> Registration:
        """A job item keyed with no job id (``is_job_id``) is invalid, and gets no state item:
        the state table's other keys (definition snapshots) are never read or written as a job's
        state. Only its report is written, with the reasons."""
        job = self._store.get(JOBS, {"job_id": job_id})
        if job is None:
            return Registration.ABSENT
        _, reasons = self._parse(job)
        digest = definition_digest(job)
        plan = RegistrationPlan(Registration.INVALID, {"status": JobStatus.INVALID.value})
        if not (self._report_enabled and self._report(job, plan, reasons, digest, self._clock.now_ms())):
            return Registration.UNCHANGED
        self._telemetry.event("job.invalid", job_id[:500], def_hash=digest, reasons=reasons)
        self._telemetry.metric("InvalidJobs", 1)
        return Registration.INVALID

    # --- one attempt ---------------------------------------------------------------------------

    def _register(
        self,
        job_id: str,
        job: Item | None,
        state: Item | None,
        deadline_ms: int | None,
        changed_at: int | None = None,
        provisional: bool = False,
        written: str | None = None,
        report: bool | None = None,
        image: Item | None = None,
    ) -> Registration:
        now = self._clock.now_ms()
        definition, reasons = self._parse(job)
        digest = definition_digest(job) if job is not None else None
        plan = plan_registration(
            state,
            definition,
            digest,
            now,
            self._cfg.shard_count,
            "; ".join(reasons or [])[:200],
            changed_at,
        )
        if plan.outcome is Registration.ABSENT:
            return Registration.ABSENT
        changed = plan.changes(state)
        stale = changed and changed_at is not None and not _record_of_the_item(written, digest)
        if stale:
            # The record is of an earlier write than the item it finds: the change applied now was
            # made after the record's time, so that time would withdraw the occurrences that came
            # due between the two writes (a pause dated before the person paused). Dated now, as
            # the reconcile pass dates a change it first sees: provisional, so that the later
            # write's own record dates a start (``_with_floor``).
            plan = plan_registration(
                state, definition, digest, now, self._cfg.shard_count, "; ".join(reasons or [])[:200], None
            )
        if changed:
            plan = _with_floor(plan, state, provisional or stale, now)
            self._switch_definition(job_id, state, plan, definition, now, deadline_ms)
        elif state is not None and changed_at is not None:
            dated = record_definition(state, definition, digest, written, image)
            if dated is not None:
                changed = self._late_record(job_id, state, dated, changed_at, now)
        reported = (
            (self._report_enabled if report is None else report)
            and job is not None
            and digest is not None
            and self._report(job, plan, reasons, digest, now)
        )
        if not (changed or reported):
            return Registration.UNCHANGED
        self._telemetry.event(
            f"job.{plan.outcome.value}",
            job_id,
            next_run_at=plan.set.get("next_run_at"),
            def_hash=digest,
            reasons=reasons,
        )
        if plan.outcome is Registration.INVALID:
            self._telemetry.metric("InvalidJobs", 1)
        if changed and "next_run_at" in plan.set:
            self._claim_early(job_id)
        return plan.outcome

    def _claim_early(self, job_id: str) -> None:
        """A new, changed or resumed timing: its first occurrence may come due before the next
        tick. Claiming it is a tick's claim, so a failure here only leaves it to the tick (or the
        miss detector): it is logged, never raised into the stream record."""
        if self._claim_now is None:
            return
        try:
            claimed = self._claim_now(job_id)
            if self._wake is not None and getattr(claimed, "claimed", True):
                self._wake.lease_made(job_id)
        except Exception as exc:  # the registration itself has landed
            self._telemetry.event("claim.early_failed", job_id, error=f"{type(exc).__name__}: {exc}"[:300])

    def _register_successor(
        self,
        job_id: str,
        job: Item | None,
        state: Item | None,
        deadline_ms: int | None,
        changed_at: int | None,
        report: bool | None,
        provisional: bool = False,
        written: str | None = None,
        image: Item | None = None,
    ) -> Registration:
        """A job under the successor claim (core/claim_shape.py ``job_shape``; issue 37, build plan
        §1 "change", HC1, HC2, HC4, HC5, HC10, HC12): its change is one transaction on the state
        and its head (services/head_registrar.py), the pass's provisional date and a late record's
        redate as today's. The report on the job item is today's."""
        now = self._clock.now_ms()
        definition, reasons = self._parse(job)
        digest = definition_digest(job) if job is not None else None
        done = self._heads.register(
            job_id,
            state,
            definition,
            digest,
            "; ".join(reasons or [])[:200],
            changed_at,
            lambda: self._budget(deadline_ms)(0),
            provisional=provisional,
            written=written,
            image=image,
        )
        if done.outcome is Registration.ABSENT:
            return Registration.ABSENT
        plan = RegistrationPlan(done.outcome, {"status": done.status} if done.status else {})
        reported = (
            (self._report_enabled if report is None else report)
            and job is not None
            and digest is not None
            and self._report(job, plan, reasons, digest, now)
        )
        if not (done.written or reported):
            return Registration.UNCHANGED
        self._telemetry.event(
            f"job.{done.outcome.value}",
            job_id,
            head_at=head_at(done.plan),
            epoch=done.plan.epoch if done.written else None,
            def_hash=digest,
            reasons=reasons,
        )
        if done.outcome is Registration.INVALID:
            self._telemetry.metric("InvalidJobs", 1)
        if done.written and head_at(done.plan) is not None:
            # The change made a new head (HC1): claimed at once as today's first occurrences are
            # (design.md, "First occurrences"), through the trigger's successor claim.
            self._claim_early(job_id)
        return done.outcome

    @property
    def checks_allow_lists(self) -> bool:
        """Whether this registrar checks destinations (the targets' and the dead-letter queues')
        against the stack's allow-lists."""
        return self._allow_lists is not None

    def valid_now(self, job: Item) -> bool:
        """Whether ``job`` (a job item as read) is a valid definition under this registrar's
        checks as they are now: no store call."""
        definition, _ = self._parse(job)
        return definition is not None

    def _parse(self, job: Item | None) -> tuple[JobDefinition | None, list[str] | None]:
        if job is None:
            return None, None
        """The job's definition, or every reason it is invalid at once: the item's own (fields,
        schedule, zone), its target's handler, and its destination's allow-list."""
        definition: JobDefinition | None = None
        reasons: list[str] = []
        try:
            definition = JobDefinition.from_item(job)
        except InvalidJob as exc:
            reasons += exc.reasons
        target = definition.target if definition is not None else job.get("target")
        if self._known_targets is not None and isinstance(target, str) and target not in self._known_targets:
            known = ", ".join(sorted(self._known_targets)) or "none"
            reasons.append(f"target: no handler named {target!r} in this deployment (it has: {known})")
        if definition is not None and self._allow_lists is not None:
            reasons += allow_list_problems(definition, self._allow_lists)
        if reasons:
            return None, bound_reasons(reasons)
        return definition, None

    def _switch_definition(
        self,
        job_id: str,
        state: Item | None,
        plan: RegistrationPlan,
        definition: JobDefinition | None,
        now: int,
        deadline_ms: int | None,
    ) -> None:
        """Apply the plan, keeping the definition runs will be claimed under before the state
        names it, and letting the one it replaces expire after the runs still under it."""
        old_hash = state.get("def_hash") if state is not None else None
        new_hash = plan.set.get("def_hash", old_hash)
        if definition is not None:  # (also the same digest: a re-created job revives its snapshot)
            self._definitions.save(definition)
        self._apply_plan(job_id, state, plan, definition, new_hash, now, deadline_ms)
        if old_hash and (new_hash != old_hash or plan.outcome is Registration.DELETED):
            self._definitions.retire(job_id, str(old_hash), now)

    def _apply_plan(
        self,
        job_id: str,
        state: Item | None,
        plan: RegistrationPlan,
        definition: JobDefinition | None,
        digest: str | None,
        now: int,
        deadline_ms: int | None,
    ) -> None:
        if plan.settle is None or state is None:
            self._register_state(state, job_id, plan, now)
            return
        # The old timing's occurrences that came due before this change get their records first,
        # and the change is written with the last of them: no occurrence is dropped unseen.
        misfire = state_misfire(state)
        request = SettleRequest(
            schedule=state_schedule(state),
            misfire=misfire,
            snapshot=definition.to_item() if definition is not None else None,
            def_hash=str(digest or state.get("def_hash") or ""),
            overdue_before=now - effective_grace_ms(misfire.grace_seconds, self._cfg),
            late_until=plan.settle.until,
            reason=plan.settle.reason,
            switch=({**plan.set, **_dated(plan), "registered_at": now}, plan.remove),
        )
        settled = self._settler.settle(state, request, now, self._budget(deadline_ms))
        if settled.missed:
            # Counted as the detector counts its own: the MissedRuns alarm sees every record.
            self._telemetry.metric("MissedRuns", len(settled.missed))
        if settled.to_dispatch and self._dispatcher is not None:
            self._dispatcher.dispatch(settled.to_dispatch)
            if self._wake is not None:
                self._wake.lease_made(job_id)
        if settled.lost_race:
            raise _LostRace(f"job {job_id}: the state moved while the old timing was settled")
        if not settled.complete:
            raise RegistrationIncomplete(
                f"job {job_id}: settled {len(settled.records)} occurrences, more remain"
            )
        if not settled.switched:
            self._register_state(settled.state, job_id, plan, now)

    def _late_record(
        self, job_id: str, state: Item, definition: JobDefinition, changed_at: int, now: int
    ) -> bool:
        """The stream record of a change the reconcile pass applied first (issue 34, item 4): the
        pass dated it when it first saw it (``REDATE_FLOOR`` on the state says so), so the new
        timing's occurrences between the person's write and that date were taken as not due. The
        record dates the change exactly: they are settled now, behind the job's place, as a change
        settles what came due before the registrar saw it (late runs within grace, else the
        misfire policy). Only for the write the pass applied (``record_definition``: the record's
        image against the item and the state, or the digest a later change kept aside), never
        before the floor (the previous registration's read, or the last record), and not for
        ``max_runs`` jobs (their count is the claims'): ``redate_window``. Returns whether
        anything was written."""
        window = redate_window(state, definition, changed_at, now)
        if window is None:
            return False
        at, dated, schedule = window.at, window.dated, window.schedule
        instants: list[int] = []
        following = schedule.next_after(ms_to_dt(at))
        while following is not None and dt_to_ms(following) <= dated and len(instants) < MAX_PER_PASS:
            instants.append(dt_to_ms(following))
            following = schedule.next_after(following)
        if not instants:
            return False
        misfire = window.misfire
        snapshot = definition.to_item()
        if REDATE_UNTIL in state:
            self._definitions.save(definition)  # the runs' definition, superseded since: kept
        request = SettleRequest(
            schedule=schedule,
            misfire=misfire,
            snapshot=snapshot,
            def_hash=window.applied,
            overdue_before=now - effective_grace_ms(misfire.grace_seconds, self._cfg),
            late_until=dated,
            reason=window.reason,
        )
        records = self._settler.records_for(state, request, instants, now)
        chunks = chunks_by_size(records, item_size, CHUNK_RECORDS, CHUNK_BYTES)
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            upto = int(chunk[-1]["scheduled_at"])
            kept = list(chunk)
            while True:
                ops = redate_ops(state, kept, at if last else None, upto, now)
                try:
                    self._store.write(ops)
                    break
                except ConditionFailed as lost:
                    if lost.op is ops[0]:
                        raise _LostRace(
                            f"job {job_id}: the state moved while a late record dated it"
                        ) from lost
                    kept = [run for run, op in zip(kept, ops[1:], strict=True) if op is not lost.op]
            state = {**state, "version": int(state["version"]) + 1}
            pending = [run for run in kept if run["status"] == RunStatus.PENDING.value]
            if pending:
                state["latest_run_id"] = pending[-1]["run_id"]
                if self._dispatcher is not None:
                    self._dispatcher.dispatch([{**run, "definition": snapshot} for run in pending])
            missed = len(kept) - len(pending)
            if missed:
                self._telemetry.metric("MissedRuns", missed)
        self._telemetry.event("job.redated", job_id, changed_at=at, was=dated, occurrences=len(instants))
        return True

    def _register_state(self, state: Item | None, job_id: str, plan: RegistrationPlan, now: int) -> None:
        """Write the plan to the state: one conditional write on the version read. A claim
        that landed first moved the version, so this fails and the change is planned again
        from the state the claim left (its run runs as claimed, inside the chain)."""
        self._store.update(register_ops(state, job_id, {**plan.set, **_dated(plan)}, plan.remove, now))

    def _budget(self, deadline_ms: int | None) -> Callable[[int], bool]:
        def left(_written: int) -> bool:
            return deadline_ms is None or self._clock.now_ms() < deadline_ms - self._cfg.deadline_margin_ms

        return left

    def _report(
        self, job: Item, plan: RegistrationPlan, reasons: list[str] | None, digest: str, now: int
    ) -> bool:
        """Write the outcome on the job item where it differs from what it says. Returns whether
        a write was made."""
        status = str(plan.set.get("status") or JobStatus.DELETED.value)
        # Sized to the item (core/transitions/register.py): the largest report that fits, first; a store
        # that refuses one for its size gets the next.
        refused: RequestTooLarge | None = None
        for op in sized_report_ops(job, status, reasons, digest, now):
            if _says(job, op):
                return False
            try:
                self._store.update(op)
            except ConditionFailed:
                return False  # deleted meanwhile: its REMOVE record brings the deletion
            except RequestTooLarge as exc:
                refused = exc
                continue
            if reasons and "invalid_reasons" not in op.set:  # the status alone fitted
                self._telemetry.event(
                    "job.report_too_large",
                    str(job["job_id"])[:500],
                    error=f"only the status fits on the job item ({item_size(job)} bytes)",
                    reasons=reasons,
                )
            return True
        # Nothing fits on the item: the reasons go to the log, and the record is not failed (a
        # retry cannot make the item smaller).
        error = str(refused) if refused else f"the job item is {item_size(job)} bytes: no report fits in it"
        self._telemetry.event("job.report_too_large", str(job["job_id"])[:500], error=error, reasons=reasons)
        return False


def _successor(state: Item | None, stack: ClaimShape | None) -> bool:
    """Whether this registration takes the successor claim's path: a job whose ``job_shape`` is
    ``successor``, or a legacy state once the switch is on (it is converted first, §5). ``stack``
    is None only when the state alone decides (it records an epoch and is in no index)."""
    if stack is ClaimShape.SUCCESSOR and state is not None and is_legacy(state):
        return True
    return job_shape(state, stack or ClaimShape.SUCCESSOR) is ClaimShape.SUCCESSOR


def _record_of_the_item(written: str | None, digest: str | None) -> bool:
    """Whether a stream record may date the job item as it is now: it carries no image (a test's
    or a REMOVE's record, dated as before), or its write left the item's digest. A record of an
    earlier write (the person wrote the item again before the record arrived) dates nothing later
    than itself: the later write's change was made after it (chaos seed 16 of the heavy operator
    world with late records: a pause dated by the record of an earlier re-put withdrew an
    occurrence due before the pause)."""
    return written is None or written == digest


def _dates_floor(state: Item | None, written: str | None) -> bool:
    """Whether a stream record whose write left an item of digest ``written`` is of the write the
    pass applied provisionally (``REDATE_FLOOR`` on the state as read): it dates that change."""
    if state is None or written is None or REDATE_FLOOR not in state:
        return False
    return written == state.get(REDATE_HASH, state.get("def_hash"))


def _says(job: Item, report: Update) -> bool:
    """The job item says what the report would write already (its time apart)."""
    return all(
        job.get(name) == value for name, value in report.set.items() if name != "registered_at"
    ) and not any(name in job for name in report.remove)


def _with_floor(plan: RegistrationPlan, state: Item | None, provisional: bool, now: int) -> RegistrationPlan:
    """The plan, with the reconcile pass's mark that its date is provisional (``REDATE_FLOOR``:
    the earliest the change can have been made; ``REDATE_AFTER``: the registration read it came
    after), for a change that starts a timing where none ran (a new, resumed, fixed or re-created
    job: the old timing settled nothing). Any other registration keeps a floor the state has
    until its record dates it or is known lost (``kept_redate_marks``): dropping it lost the
    occurrences between the person's write and the pass's date."""
    starts = state is None or state.get("status") != JobStatus.ACTIVE.value
    if provisional and starts and plan.outcome in (Registration.SCHEDULED, Registration.FINISHED):
        before = state or {}
        read = int(before.get("registered_at") or 0)
        floor = max(read, int(before.get("last_scheduled_at") or 0))
        aside = tuple(name for name in (REDATE_UNTIL, REDATE_HASH) if name in before)
        return replace(
            plan, set={**plan.set, REDATE_FLOOR: floor, REDATE_AFTER: read}, remove=(*plan.remove, *aside)
        )
    kept, lost = kept_redate_marks(state, now)
    return replace(plan, set={**plan.set, **kept}, remove=(*plan.remove, *lost))


def _dated(plan: RegistrationPlan) -> dict[str, int]:
    """The state's ``changed_at``: when the change this write applies took effect (a late
    stream record's, or a lost one's, is earlier than the write). People read it with
    ``jobsched show``; the chaos checker ends a job's stretch there."""
    return {"changed_at": plan.changed_at} if plan.changed_at is not None else {}
