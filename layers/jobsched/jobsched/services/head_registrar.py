"""The registrar's successor-claim path (shape f; issue 37, docs/proposals/successor-claim-build.md
§1 rows "change" and "first registration", §3 HC1, HC2, HC5, HC10, HC12, §5 "The migration").

``services/registrar.py`` takes this path for a job whose ``job_shape`` (core/claim_shape.py) is
``successor``; with the migration switch off no job is, and the registrar is today's.

One registration of such a job:

1. **A legacy state is converted first** (§5: a state still in ``next-run`` once the switch is
   on): ``convert_legacy`` writes core/transitions/head_convert.py's transaction, and the job is
   read again. The reconcile pass calls the same function for the states it walks.
2. **The job's items are read** (HC12): one strongly consistent Query of its occurrence keys, after
   the state was read (head_finish's order). The head is the unstarted occurrence whose successor
   key holds nothing; the end marker, if any, is its live life's. Two heads, or an active state
   with none and no end marker: read again (level-triggered).
3. **The change is planned** (core/head_change.py ``plan_head_change``) and written as one
   transaction (``head_change_ops``). A plan that meets a due head settles it first
   (``SettleFirst``: core/transitions/head_settle.py ``settle_head_ops`` with ``now`` = the
   settlement's ``until``), then reads again; each chunk is one transaction and leaves a head, so
   the rounds need no lost-race budget, only the invocation's time (``SettleIncomplete``: the
   stream record is retried and goes on from the head the last chunk left).
4. **A lost change** (``ConditionFailed``) is judged by ``after_lost_change``: a claim that landed
   first on the marker's key names the head to close now, or the life's end marker; anything else
   reads again. ``CHANGE_TRIES`` bounds the rounds; then the registrar's own reads-again, then
   the stream record's retry and the reconcile pass (level-triggered).

5. **The reconcile pass's provisional date** (``provisional``): a change the pass applied, dated
   when it first saw it, that starts a timing where none ran records ``redate_floor`` in its own
   transaction (core/transitions/head_redate.py ``with_redate_floor``); **the late record** of
   that change (HC4), when it comes, finds the plan unchanged and dates it exactly: the
   occurrences between the person's write and the pass's date are settled behind the head
   (``redate_with_head_ops``; a job without a head: ``redate_without_head_ops``), as today's
   ``Registrar._late_record`` settles them behind the job's place. A claim or a change since the
   read fails the chunk: the registrar reads again.

Gap, said here so it is not taken for a rule: HC12's read is every occurrence item of the job,
paged to the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from jobsched.core.clock import Clock, dt_to_ms, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, TransientStoreError
from jobsched.core.head import epoch_of, head_check_delay_ms, is_end_marker
from jobsched.core.head_change import (
    EPOCH,
    HEAD_AT,
    HeadChangePlan,
    ReadAgain,
    SettleFirst,
    plan_head_change,
    recorded_through,
)
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.limits import chunks_by_size, item_size
from jobsched.core.occurrences import find_head as find_occurrence_head
from jobsched.core.run import RunStatus
from jobsched.core.state import (
    JobStatus,
    Registration,
)
from jobsched.core.timing import effective_grace_ms
from jobsched.core.transitions.head_change import after_lost_change, head_change_ops
from jobsched.core.transitions.head_convert import (
    convert_legacy_ops,
    converted_head,
    head_job_of_state,
    is_legacy,
    legacy_recorded,
)
from jobsched.core.transitions.head_redate import (
    REDATE_CHUNK_RECORDS,
    redate_records,
    redate_with_head_ops,
    redate_without_head_ops,
    with_redate_floor,
)
from jobsched.core.transitions.head_settle import settle_head_ops
from jobsched.core.transitions.register import (
    REDATE_UNTIL,
    record_definition,
    redate_window,
)
from jobsched.core.writes import STATE, Item, Put, Update, WriteOp
from jobsched.ports import Store, Telemetry
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.head_operations import occurrence_items
from jobsched.services.settle import CHUNK_BYTES, MAX_PER_PASS, Settler, SettleRequest

# Rounds of one change against the claims that land first on its marker's key (each round closes
# the head the last claim made). More than a few means a claimer is racing every round: the
# registrar reads both items again, and after its own tries the stream record is retried.
CHANGE_TRIES = 4


class ReadJobAgain(Exception):
    """The reads disagree or a write lost a race that names no head to plan against: read the
    state and the job's items again (the registrar's loop)."""


class SettleIncomplete(TransientStoreError):
    """The old timing's backlog is longer than one invocation settles: the stream record is
    retried, and the next attempt goes on from the head the last chunk left."""


@dataclass(frozen=True)
class JobItems:
    """A job's runs partition as HC12's Query read it: its head (None: none), its live end marker
    (None: none), and whether more than one head was found (a write landed between pages)."""

    head: Item | None
    end_marker: Item | None
    ambiguous: bool = False


def read_job_items(store: Store, job_id: str) -> list[Item]:
    """The job's occurrence items (every epoch's timed items, markers, end markers), strongly
    consistent: HC12's Query (h/s1readers' ``OccurrenceQuery.occurrence_items``, through
    services/head_operations.py, which reads the runs table's key where a store wrapper does not
    forward it). Read after the state (head_finish.py's order)."""
    return occurrence_items(store, job_id)


def find_head(items: Iterable[Item], state: Item | None) -> JobItems:
    """The head among a job's items (core/occurrences.py ``find_head``: several read again) and
    the end marker of the state's live epoch (else the newest: ``plan_head_change`` judges whether
    it ends the live timing)."""
    listed = list(items)
    reading = find_occurrence_head(listed)
    markers = sorted((item for item in listed if is_end_marker(item)), key=epoch_of)
    live = (state or {}).get(EPOCH, (state or {}).get("version"))
    marker = next((m for m in markers if live is not None and epoch_of(m) == int(live)), None)
    if marker is None and markers:
        marker = markers[-1]
    return JobItems(reading.head, marker, ambiguous=reading.verdict == "several")


def convert_legacy(
    store: Store, cfg: SchedulerConfig, definitions: Definitions, state: Item, now: int
) -> Item | None:
    """Convert a legacy state (in ``next-run``) to the successor claim: one transaction
    (head_convert.py). The head copies the job the state follows (its ``def_hash``'s definition,
    from the job item or its snapshot), so a change waiting to be applied stays the registrar's.
    Returns the head made (None: the state was finished). A lost race raises ``ConditionFailed``:
    the state is still in ``next-run``, where the next registration or pass meets it again."""
    job_id = str(state["job_id"])
    recorded = legacy_recorded(state, read_job_items(store, job_id))
    overlap, attempts, max_runs = "skip", 3, None
    snapshot = definitions.load(job_id, str(state["def_hash"]))
    if snapshot is not None:
        try:
            definition = JobDefinition.from_item(snapshot)
            overlap, attempts = definition.overlap.value, definition.retry.max_attempts
            max_runs = definition.max_runs
        except InvalidJob:
            pass  # a snapshot this code cannot read: the head takes the defaults; the change closes it
    job = head_job_of_state(state, overlap, attempts, max_runs)
    ops = convert_legacy_ops(
        state, job, recorded, cfg.shard_count, now, check_delay_ms=head_check_delay_ms(cfg)
    )
    store.write(ops)
    head = converted_head(ops)
    return None if head is None else dict(head)


@dataclass(frozen=True)
class HeadRegistration:
    """What one successor registration did: the plan written (or found unchanged)."""

    plan: HeadChangePlan
    written: bool

    @property
    def outcome(self) -> Registration:
        return self.plan.outcome

    @property
    def status(self) -> str | None:
        """The job's status after the change, as the report on the job item says it."""
        status = self.plan.state_set.get("status") or (self.plan.state or {}).get("status")
        return None if status is None else str(status)


class HeadRegistrar:
    """The successor path of one registration (see the module's docstring)."""

    def __init__(
        self,
        store: Store,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        definitions: Definitions,
        dispatcher: Dispatcher | None,
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._definitions = definitions
        self._dispatcher = dispatcher
        self._settler = Settler(store, telemetry, cfg)  # the late record's fates (today's rule)

    def register(
        self,
        job_id: str,
        state: Item | None,
        definition: JobDefinition | None,
        digest: str | None,
        invalid_reason: str,
        changed_at: int | None,
        budget_left: Callable[[], bool],
        provisional: bool = False,
        written: str | None = None,
        image: Item | None = None,
    ) -> HeadRegistration:
        """Bring a successor job's state and head in line with its job item (as read by the
        caller with ``state``). ``provisional``, ``written`` and ``image``: the reconcile pass's
        date, a stream record's image digest and the image, as ``Registrar.apply`` takes them
        (the module's step 5).
        Raises ``ReadJobAgain`` (read both items again), ``SettleIncomplete`` (out of time while
        settling), ``ConditionFailed`` (a conversion lost)."""
        while True:
            now = self._clock.now_ms()
            if state is not None and is_legacy(state):
                # §5: converted first, then planned as any successor job (level-triggered: a lost
                # conversion leaves it in next-run for the next read).
                convert_legacy(self._store, self._cfg, self._definitions, state, now)
                self._telemetry.event("job.converted", job_id, version=int(state["version"]) + 1)
                self._telemetry.metric("LegacyStatesConverted", 1)
                state = self._store.get(STATE, {"job_id": job_id})
                continue
            items = read_job_items(self._store, job_id)
            found = find_head(items, state)
            if found.ambiguous:
                raise ReadJobAgain(f"job {job_id}: two heads read (a write landed between pages)")
            planned = self._plan(
                job_id,
                state,
                found.head,
                found.end_marker,
                definition,
                digest,
                invalid_reason,
                changed_at,
                now,
                recorded_through(items, found.head),
            )
            if isinstance(planned, SettleFirst):
                if not budget_left():
                    raise SettleIncomplete(f"job {job_id}: the old timing's backlog is not settled yet")
                self._settle_first(job_id, planned)
                continue  # the head the settle left is after the change: plan against it
            dated = (
                record_definition(state, definition, digest, written, image)
                if planned.outcome is Registration.UNCHANGED and state is not None and changed_at is not None
                else None
            )
            if dated is not None and state is not None and changed_at is not None:
                redated = self._late_record(job_id, state, found.head, dated, changed_at, now)
                return HeadRegistration(planned, written=redated)
            return self._write(
                job_id,
                state,
                planned,
                definition,
                digest,
                invalid_reason,
                changed_at,
                now,
                provisional,
                recorded_through(items, found.head),
            )

    def _plan(
        self,
        job_id: str,
        state: Item | None,
        head: Item | None,
        end_marker: Item | None,
        definition: JobDefinition | None,
        digest: str | None,
        invalid_reason: str,
        changed_at: int | None,
        now: int,
        recorded: int | None,
    ) -> HeadChangePlan | SettleFirst:
        """``recorded``: the newest instant holding a live record among the job's items as read
        (``recorded_through``): the new head comes after it (core/head_change.py)."""
        planned = plan_head_change(
            job_id,
            state,
            head,
            definition,
            digest,
            now,
            self._cfg,
            invalid_reason,
            changed_at,
            end_marker,
            recorded,
        )
        if isinstance(planned, ReadAgain):
            raise ReadJobAgain(planned.why)
        return planned

    def _write(
        self,
        job_id: str,
        state: Item | None,
        plan: HeadChangePlan,
        definition: JobDefinition | None,
        digest: str | None,
        invalid_reason: str,
        changed_at: int | None,
        now: int,
        provisional: bool,
        recorded: int | None,
    ) -> HeadRegistration:
        """Write the change; after a lost condition, plan again against what the loss showed
        (``after_lost_change``), at most ``CHANGE_TRIES`` rounds. ``recorded``: as ``_plan``
        takes it; a record made since the read moved the state's or the head's version, so the
        write fails there and is read again, never planned again from ``after_lost_change``'s head
        (that loss is on the marker's key: a claim, whose run is within the head's ``through``)."""
        for _ in range(CHANGE_TRIES):
            if not plan.writes:
                return HeadRegistration(plan, written=False)
            plan = with_redate_floor(plan, provisional, now)
            if definition is not None:
                # Kept before the state names it, as today (services/registrar.py
                # ``_switch_definition``): every run claimed under its digest finds it.
                self._definitions.save(definition)
            try:
                self._store.write(head_change_ops(plan, now, self._cfg))
            except ConditionFailed as lost:
                decision = after_lost_change(plan, lost.op.label, lost.current)
                self._telemetry.event("job.change_lost", job_id, lost=lost.op.label, why=decision.why)
                if decision.head is None and decision.end_marker is None:
                    raise ReadJobAgain(decision.why) from lost
                replanned = self._plan(
                    job_id,
                    state,
                    decision.head,
                    decision.end_marker,
                    definition,
                    digest,
                    invalid_reason,
                    changed_at,
                    now,
                    recorded,
                )
                if isinstance(replanned, SettleFirst):
                    raise ReadJobAgain("the head to close is due: settle it first") from lost
                plan = replanned
                continue
            self._retire(job_id, state, plan, now)
            return HeadRegistration(plan, written=True)
        raise ReadJobAgain(f"job {job_id}: claims landed first {CHANGE_TRIES} times")

    def _late_record(
        self,
        job_id: str,
        state: Item,
        head: Item | None,
        definition: JobDefinition,
        changed_at: int,
        now: int,
    ) -> bool:
        """The stream record of a change the reconcile pass applied first (HC4; the module's step
        5): today's ``Registrar._late_record`` rules (only with the pass's ``redate_floor``, never
        before it, not for ``max_runs`` jobs, whose count is the claims'), its records at their
        keys in the head's epoch (the state's, without a head), none at an instant that holds a
        live record already (``redate_records``: the job's items as read with the head), written
        behind the head in chunks (``_redate_chunk``). Returns whether anything was written."""
        window = redate_window(state, definition, changed_at, now)
        if window is None:
            return False
        if state.get("status") == JobStatus.ACTIVE.value and head is None:
            raise ReadJobAgain(f"job {job_id}: an active state read without a head")
        at, dated, schedule = window.at, window.dated, window.schedule
        # Up to the pass's date, and before the head (its instant and after are its timing's).
        until = min(dated, int(head["scheduled_at"]) - 1) if head is not None else dated
        instants: list[int] = []
        following = schedule.next_after(ms_to_dt(at))
        while following is not None and dt_to_ms(following) <= until and len(instants) < MAX_PER_PASS:
            instants.append(dt_to_ms(following))
            following = schedule.next_after(following)
        if not instants:
            return False
        epoch = (
            epoch_of(head) if head is not None else int(state[EPOCH] if EPOCH in state else state["version"])
        )
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
        made = self._settler.records_for(state, request, instants, now, epoch)
        records = redate_records(made, read_job_items(self._store, job_id))
        chunks = chunks_by_size(records, item_size, REDATE_CHUNK_RECORDS, CHUNK_BYTES) or [[]]
        for index, chunk in enumerate(chunks):
            dated_at = at if index == len(chunks) - 1 else None
            upto = int(chunk[-1]["scheduled_at"]) if chunk else instants[-1]
            state, head, written = self._redate_chunk(job_id, state, head, chunk, dated_at, upto, now)
            pending = [run for run in written if run["status"] == RunStatus.PENDING.value]
            if pending and self._dispatcher is not None:
                self._dispatcher.dispatch([{**run, "definition": snapshot} for run in pending])
            if len(written) > len(pending):
                self._telemetry.metric("MissedRuns", len(written) - len(pending))
        self._telemetry.event("job.redated", job_id, changed_at=at, was=dated, occurrences=len(instants))
        return True

    def _redate_chunk(
        self,
        job_id: str,
        state: Item,
        head: Item | None,
        chunk: list[Item],
        dated_at: int | None,
        upto: int,
        now: int,
    ) -> tuple[Item, Item | None, list[Item]]:
        """Write one chunk of a redate: the state and the head as it left them, and the records
        written. A record that exists already (a backfill made it since the read) is dropped and
        the chunk written again; any other lost part means the state or the head moved (a change,
        a claim, an ad-hoc run, another redate): ``ReadJobAgain`` (the plan is then unchanged, and
        the redate runs again from what it reads)."""
        kept = list(chunk)
        while True:
            if head is not None:
                ops = redate_with_head_ops(state, head, kept, dated_at, upto, now)
            else:
                ops = redate_without_head_ops(state, kept, dated_at, upto, now)
            puts = ops[1 : 1 + len(kept)]
            try:
                self._store.write(ops)
            except ConditionFailed as lost:
                if not any(op is lost.op for op in puts):
                    raise ReadJobAgain(
                        f"job {job_id}: {lost.op.label}: lost to a write since the read"
                    ) from lost
                kept = [run for run, op in zip(kept, puts, strict=True) if op is not lost.op]
                continue
            written = [dict(op.item) for op in puts if isinstance(op, Put)]
            relink = ops[1 + len(kept) :][:1]  # none when no run joins
            moved = _after(head, relink[0]) if head is not None and relink else head
            return _after(state, ops[0]), moved, written

    def _retire(self, job_id: str, state: Item | None, plan: HeadChangePlan, now: int) -> None:
        """The definition the change replaced expires after the runs still under it (as today)."""
        old = (state or {}).get("def_hash")
        new = plan.state_set.get("def_hash", old)
        if old and (new != old or plan.outcome is Registration.DELETED):
            self._definitions.retire(job_id, str(old), now)

    def _settle_first(self, job_id: str, planned: SettleFirst) -> None:
        """Settle the due head up to the change (one chunk; core/head_change.py ``SettleFirst``):
        the occurrences up to the settlement's ``until`` (the change's time), each ``missed`` with
        the stop's reason (a pause, a delete, an invalid item; w2detector's mode of the chunk) or,
        for a change that keeps the job running, as the misfire policy decides at ``now`` (today's
        registrar: late within grace, else the policy). A lost chunk (a claim or the detector's
        settle landed first) changes nothing: the caller reads again."""
        settlement = planned.settlement
        now = self._clock.now_ms()
        chunk = settle_head_ops(
            planned.head, now, self._cfg, reason=settlement.reason, until=settlement.until
        )
        try:
            self._store.write(chunk.ops)
        except ConditionFailed as lost:
            self._telemetry.event("job.settle_first_lost", job_id, lost=lost.op.label)
            return
        missed = sum(1 for item in chunk.decided if item.get("status") == RunStatus.MISSED.value)
        if missed:
            self._telemetry.metric("MissedRuns", missed)  # as the detector counts its own
        if chunk.to_dispatch and self._dispatcher is not None:
            self._dispatcher.dispatch(chunk.to_dispatch)
        self._telemetry.event(
            "job.settled_before_change",
            job_id,
            head=str(planned.head["run_id"]),
            until=planned.settlement.until,
            decided=len(chunk.decided),
            missed=missed,
            reason=planned.settlement.reason,
        )


def _after(item: Item, op: WriteOp) -> Item:
    """``item`` as the update ``op`` left it."""
    if not isinstance(op, Update):
        return item
    return {name: value for name, value in {**item, **op.set}.items() if name not in op.remove}


def head_at(plan: HeadChangePlan) -> int | None:
    """The instant of the head the change made (None: it made none)."""
    value = plan.state_set.get(HEAD_AT)
    return None if value is None else int(value)
