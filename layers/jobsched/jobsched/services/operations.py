"""The operations API (Python), used by the CLI: register, list, show, runs, pause, resume,
trigger, backfill, delete. It writes definitions the way a person would and then applies the
registrar directly, so a change takes effect at once even where no stream consumer runs."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from jobsched.core.claim_shape import DeployedShape
from jobsched.core.clock import Clock, dt_to_ms, iso_z, ms_to_dt
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed
from jobsched.core.job import (
    DEFINITION_FIELDS,
    STATE_FIELDS,
    InvalidJob,
    JobDefinition,
    is_job_id,
    read_enabled,
)
from jobsched.core.occurrences import live_record_at, records
from jobsched.core.run import NOT_RUN, RunKind, check_request_id, manual_run_id, run_id_for, run_key
from jobsched.core.state import JobStatus, Registration
from jobsched.core.transitions import adhoc_run_ops, link_runs, new_run_item, rerun_missed_ops
from jobsched.core.writes import JOBS, RUNS, STATE, Cond, Item, Update, eq, exists, not_exists
from jobsched.ports import Store, Telemetry, WorkQueue
from jobsched.services.allow_lists import AllowLists
from jobsched.services.definitions import Definitions
from jobsched.services.dispatch import Dispatcher
from jobsched.services.head_operations import (
    HeadJoins,
    head_view,
    is_pending_unstarted,
    is_successor_job,
    read_job,
)
from jobsched.services.paging import query_all, scan_all
from jobsched.services.registrar import Registrar
from jobsched.services.waking import DetectorWake, WakeSender

MAX_BACKFILL = 1000
# How far inside the run records' retention a backfill must stay. A record expires
# HistoryRetentionDays after it was finished, and it is finished at or after its occurrence's
# instant (give or take the clock skew, and the lookahead of a legacy `cancelled` fence): a day
# covers those with room to spare.
BACKFILL_HORIZON_MARGIN_MS = 24 * 3600 * 1000
# Tries to link an ad-hoc run to its job's chain while claims move the chain's end.
CHAIN_TRIES = 5
# What `show` and `list` add to the job item from its state item.
STATE_VIEW = ("status", "next_run_at", "sched_shard", "last_scheduled_at", "latest_run_id")


class JobNotFound(LookupError):
    pass


@dataclass(frozen=True)
class BackfillResult:
    created: list[str]  # runs created for occurrences that had no record
    rerun: list[str]  # occurrences recorded as missed (or cancelled), now run
    already_existed: list[str]  # occurrences that ran (or are running) already: left alone
    # Every occurrence of the range, in order, and what the backfill did with it: "created",
    # "rerun (was missed)", or "ran already: <the record's status>".
    outcomes: dict[str, str] = field(default_factory=dict)


class TriggeredRun(str):
    """The manual run's id; ``already_requested`` when a run with this request id existed
    before, so this request dispatched nothing."""

    already_requested: bool

    def __new__(cls, run_id: str, already_requested: bool = False) -> TriggeredRun:
        run = super().__new__(cls, run_id)
        run.already_requested = already_requested
        return run


@dataclass
class GroupOperation:
    """What ``set_enabled_where`` did: each job's registration outcome, and whether more jobs
    matched than the operation's limit (run it again, or raise ``--max``)."""

    jobs: dict[str, str] = field(default_factory=dict)
    more: bool = False


class Operations:
    def __init__(
        self,
        store: Store,
        queue: WorkQueue,
        telemetry: Telemetry,
        clock: Clock,
        cfg: SchedulerConfig,
        known_targets: Collection[str] | None = None,
        wake_detector: WakeSender | None = None,
        allow_lists: AllowLists | None = None,
        deployed: DeployedShape = DeployedShape.MIGRATING,
    ) -> None:
        """``known_targets``: the handlers the deployment ships, and ``allow_lists``: the stack's
        allow-lists, checked at registration as the registrar function checks them
        (services/allow_lists.py; None: not checked here, only by the registrar function).
        ``wake_detector``: sends the miss detector an invocation when a manual run or a backfill
        makes a lease (services/waking.py); None: nothing to wake. ``deployed``: the stack's claim
        indexes (template.yaml's ClaimShape), which decide the claim a new job's registration takes."""
        self._store = store
        self._telemetry = telemetry
        self._clock = clock
        self._cfg = cfg
        self._registrar = Registrar(
            store,
            telemetry,
            clock,
            cfg,
            queue,
            known_targets=known_targets,
            allow_lists=allow_lists,
            deployed=deployed,
        )
        self._dispatcher = Dispatcher(queue, telemetry, clock, Definitions(store, cfg))
        self._heads = HeadJoins(store, telemetry, cfg)
        self._wake = DetectorWake(wake_detector, telemetry, clock, cfg)

    def register(self, definition: JobDefinition | Mapping[str, Any]) -> Registration:
        """Create or replace a job's definition, keeping its scheduler state and history.

        A job item (a mapping: what ``jobsched register`` reads) that is not a valid definition is
        written as given and marked invalid by the registrar step with every reason at once (its
        fields', its target's handler's and its destination's), as the same item written with
        put-item is. Only an item without a valid ``job_id`` is refused (``InvalidJob``, nothing
        written): there is no job to mark."""
        job_id, fields = _definition_fields(definition)
        current = self._store.get(JOBS, {"job_id": job_id})
        absent = tuple(name for name in DEFINITION_FIELDS if name not in fields)
        why = "someone else changed the definition since we read it: re-run to apply on top of theirs"
        condition: tuple[Cond, ...]
        if current is None:
            condition = (not_exists("job_id", why),)
        else:
            condition = tuple(
                eq(name, current[name], why) if name in current else not_exists(name, why)
                for name in ("schedule", "timezone", "target", "enabled", "payload")
            )
        self._store.update(
            Update(
                JOBS,
                {"job_id": job_id},
                condition=condition,
                label="write definition",
                set={k: v for k, v in fields.items() if k != "job_id"},
                remove=absent,
            )
        )
        outcome = self._registrar.apply(job_id)
        if outcome is Registration.UNCHANGED and _rewrites(current, fields):
            # Our write changed the job, and the registrar function applied it first (from the
            # write's stream record): say what the registration now is, not that nothing changed.
            outcome = self._registration_now(job_id)
        return outcome

    def _registration_now(self, job_id: str) -> Registration:
        state = self._store.get(STATE, {"job_id": job_id})
        status = state.get("status") if state is not None else None
        return STATUS_REGISTRATION.get(str(status), Registration.UNCHANGED)

    def set_enabled(self, job_id: str, enabled: bool) -> Registration:
        try:
            self._store.update(
                Update(
                    JOBS,
                    {"job_id": job_id},
                    condition=(exists("job_id", "pausing a job that does not exist must not create it"),),
                    label="pause" if not enabled else "resume",
                    set={"enabled": enabled},
                    # A resume clears why jobsched paused it (pause_on_failure).
                    remove=("paused_reason", "paused_at") if enabled else (),
                )
            )
        except ConditionFailed as exc:
            raise JobNotFound(job_id) from exc
        return self._registrar.apply(job_id)

    def delete(self, job_id: str) -> Registration:
        """Stop the job; its runs stay as history (until their retention ends) and in-flight runs
        finish under the definition they were claimed with."""
        current = self._store.get(JOBS, {"job_id": job_id})
        if current is None:
            raise JobNotFound(job_id)
        why = "someone changed the job since we read it: deleting now would discard a change unseen"
        try:
            self._store.delete(
                JOBS,
                {"job_id": job_id},
                condition=(
                    eq("version", current["version"], why)
                    if "version" in current
                    else not_exists("version", why),
                    eq("schedule", current.get("schedule"), why),
                ),
                label="delete job",
            )
        except ConditionFailed as exc:
            raise ValueError(
                f"job {job_id} changed while it was being deleted; look again and retry"
            ) from exc
        return self._registrar.apply(job_id)

    def get(self, job_id: str) -> dict[str, Any]:
        """The job item with its scheduler state (status, next run, chain end) merged in."""
        item = self._store.get(JOBS, {"job_id": job_id})
        if item is None:
            raise JobNotFound(job_id)
        return self._view(item)

    def _view(self, item: Item) -> dict[str, Any]:
        """``_view`` of the job item; a successor job's position from its head (head_view)."""
        state = self._store.get(STATE, {"job_id": item["job_id"]}, consistent=False)
        view = _view(item, state)
        if is_successor_job(state):
            read = read_job(self._store, str(item["job_id"]), state=state)
            view = {k: v for k, v in view.items() if k not in STATE_VIEW or k == "status"}
            view.update(head_view(read))
        return view

    def list_jobs(self, limit: int = 1000) -> list[dict[str, Any]]:
        items = sorted(itertools.islice(scan_all(self._store, JOBS), limit), key=lambda item: item["job_id"])
        return [self._view(item) for item in items]

    def select(
        self,
        group: str | None = None,
        tags: dict[str, str] | None = None,
        limit: int = 1000,
        not_enabled: bool | None = None,
    ) -> list[Item]:
        """The job items in ``group`` carrying every tag of ``tags`` (issue 29), at most ``limit``:
        a paged scan of the jobs table, filtered here (a job item's group and tags are a
        person's attributes, not an index's), stopping at the limit."""
        wanted = tags or {}
        found: list[Item] = []
        for item in scan_all(self._store, JOBS):
            if group is not None and item.get("group") != group:
                continue
            tags_here = item.get("tags")
            have: dict[str, Any] = tags_here if isinstance(tags_here, dict) else {}
            if any(have.get(key) != value for key, value in wanted.items()):
                continue
            if not_enabled is not None and read_enabled(item) is not_enabled:
                # Already as asked, read as the registrar reads it ("off", 0, "no" are paused):
                # a group operation run again goes on from here, and counts only what it changes.
                continue
            found.append(item)
            if len(found) >= limit:
                break
        return sorted(found, key=lambda item: str(item["job_id"]))

    def set_enabled_where(
        self, enabled: bool, group: str | None = None, tags: dict[str, str] | None = None, limit: int = 100
    ) -> GroupOperation:
        """Pause or resume every job of a group (and/or with the tags), one bounded operation:
        at most ``limit`` jobs, each through the ordinary per-job ``set_enabled``. Reports what
        it did per job, and whether more jobs matched than it handled."""
        if group is None and not tags:
            raise ValueError("name a --group or at least one --tag: a group operation never means every job")
        matched = self.select(group, tags, limit + 1, not_enabled=enabled)
        done = GroupOperation(more=len(matched) > limit)
        for item in matched[:limit]:
            job_id = str(item["job_id"])
            try:
                done.jobs[job_id] = self.set_enabled(job_id, enabled).value
            except JobNotFound:
                done.jobs[job_id] = "deleted meanwhile"
        return done

    def runs(self, job_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The job's most recent runs, newest first: its partition of the runs table (keyed by job
        and run), read page by page and ordered by ``scheduled_at`` (the run id's order is not
        time's: manual runs' ids sort after every scheduled one). One run per instant: its live
        record (``core.occurrences.records``). Under the successor claim (issue 37) an instant
        may also hold a cancelled head or a closure marker of another epoch, and a finished life
        an end marker: none is a run, none is listed. A listed run carries ``shown_epoch`` where
        its instant holds items of two epochs, and a ``scheduled`` one ``claim`` ("claimed,
        dispatched" or "next (not claimed)", from its successor). On today's data every item is
        its instant's run, and comes back as stored."""
        items = query_all(self._store, "runs-of-job", job_id)
        runs = records(items)
        return sorted(runs, key=lambda run: (run["scheduled_at"], run["run_id"]), reverse=True)[:limit]

    def run_at(self, job_id: str, at: datetime) -> dict[str, Any] | None:
        """The job's run at one instant, given alone (without an epoch): the instant's live record,
        as ``runs`` lists it, or None. ``ValueError`` if the instant holds two (I1' broken). A run
        id is taken whole by ``get_run``."""
        return live_record_at(query_all(self._store, "runs-of-job", job_id), dt_to_ms(at))

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        """The item at this run id, taken whole (its epoch included): no other item of its instant."""
        return self._store.get(RUNS, run_key(run_id))

    def trigger(self, job_id: str, request_id: str | None = None) -> TriggeredRun:
        """Run the job now, outside its schedule. A repeated request id runs it once. A request id
        is printable ASCII without spaces, short enough for its run id (``check_request_id``):
        refused before anything is written."""
        request_id = request_id if request_id is not None else uuid.uuid4().hex[:12]
        check_request_id(job_id, request_id)
        definition = self._definition(job_id)
        now = self._clock.now_ms()
        run_id = manual_run_id(job_id, request_id)
        run = new_run_item(
            job_id,
            run_id,
            now,
            definition.to_item(),
            definition.definition_hash(),
            RunKind.MANUAL,
            now,
            self._cfg,
        )
        existing, successor = self._create_adhoc_shaped(run)
        if existing is not None:
            if successor and is_pending_unstarted(existing):
                # A retried request whose earlier try landed and whose send may have been lost
                # (§1's ad-hoc row, ``adhoc.run_absent``): send its message again; the start is
                # fenced on the run's version, so it starts at most once.
                self._dispatcher.dispatch([existing])
            return TriggeredRun(run_id, already_requested=True)  # this request ran already
        self._telemetry.event("run.triggered", run_id, job_id=job_id)
        self._dispatcher.dispatch([{**run, "definition": definition.to_item()}])
        self._wake.lease_made(run_id)
        return TriggeredRun(run_id)

    def backfill(self, job_id: str, start: datetime, end: datetime) -> BackfillResult:
        """Run the occurrences in (start, end], each at most once ever: the range must lie after
        the retention horizon (``backfill_horizon``), within which every occurrence that ran
        still has its record. An occurrence with no record
        gets a run; one recorded as missed (or as ``cancelled``, a legacy fence) is run (its
        record becomes the run, conditional on it still being as read, so a repeated or
        concurrent backfill runs it once); one that ran or is running is left alone. The runs
        run one after another: a backfill run whose turn is held waits behind the holder, never
        skipped (``decide_overlap``), unless the job allows overlap. The result says, for each
        occurrence, what was done. Only the past: the scheduler itself runs future occurrences."""
        now = self._clock.now_ms()
        if dt_to_ms(end) > now:
            raise ValueError(
                f"backfill covers past occurrences only: --to {end.isoformat()} is in the future "
                "(the scheduler runs those itself)"
            )
        horizon = self.backfill_horizon(now)
        if dt_to_ms(start) < horizon:
            raise ValueError(
                f"backfill reaches back to {start.isoformat()}, before the retention horizon "
                f"{iso_z(horizon)}: run records expire after HistoryRetentionDays "
                f"({self._cfg.history_retention_days} days), so an occurrence older than that may "
                "have run and lost its record, and would run again. Backfill from the horizon on"
            )
        # The job item's definition (no view of the job: a definition ignores the state's
        # attributes a view merges in), and one strong read of the state, which decides the path.
        definition = _parsed(job_id, self._store.get(JOBS, {"job_id": job_id}))
        state = self._store.get(STATE, {"job_id": job_id})
        schedule = definition.compiled_schedule()
        occurrences = list(schedule.occurrences(start, end, limit=MAX_BACKFILL + 1))
        if len(occurrences) > MAX_BACKFILL:
            raise ValueError(f"the range holds more than {MAX_BACKFILL} occurrences; split it")
        snapshot, digest = definition.to_item(), definition.definition_hash()
        # A job of the successor claim joins each run through its head, and the whole range is
        # checked against the head before anything is written (HC11: head_operations.py).
        successor = is_successor_job(state)
        if successor:
            instants = [dt_to_ms(occurrence) for occurrence in occurrences]
            self._heads.backfill_plan(job_id, instants, now, state=state)
        created: list[str] = []
        rerun: list[str] = []
        existed: list[str] = []
        outcomes: dict[str, str] = {}
        runs: list[Item] = []
        for occurrence in occurrences:
            at = dt_to_ms(occurrence)
            run = new_run_item(
                job_id, run_id_for(job_id, at), at, snapshot, digest, RunKind.BACKFILL, now, self._cfg
            )
            # Backfilled runs start now, not at their (past) instant.
            run["retry_at"] = now
            run["lease_expires_at"] = now + self._cfg.dispatch_lease_seconds * 1000
            if successor:
                outcome, was, run_id = self._heads.backfill_one(run, snapshot, digest, now)
            else:
                (outcome, was), run_id = self._backfill_one(run, snapshot, digest, now), run["run_id"]
            if outcome is None:
                existed.append(run_id)
                outcomes[run_id] = f"ran already: {was}"
                continue
            (created if was is None else rerun).append(run_id)
            outcomes[run_id] = "created" if was is None else f"rerun (was {was})"
            runs.append({**outcome, "definition": snapshot})
        self._dispatcher.dispatch(runs)
        if runs:
            self._wake.lease_made(job_id)
        self._telemetry.event(
            "job.backfilled", job_id, created=len(created), rerun=len(rerun), existed=len(existed)
        )
        return BackfillResult(created, rerun, existed, outcomes)

    def backfill_horizon(self, now: int) -> int:
        """The oldest instant a backfill may start from: every occurrence after it that ran still
        has its record (``BACKFILL_HORIZON_MARGIN_MS`` inside the retention)."""
        return now - self._cfg.history_retention_days * 86_400_000 + BACKFILL_HORIZON_MARGIN_MS

    def _backfill_one(
        self, run: Item, snapshot: Item, digest: str, now: int
    ) -> tuple[Item | None, str | None]:
        """The run to dispatch for one occurrence (None when it needs none), and the status of
        the record that was there (None: it had none)."""
        existing = self._create_adhoc(run)
        if existing is None:
            return run, None
        was = str(existing.get("status"))
        if was not in NOT_RUN:
            return None, was
        for _ in range(CHAIN_TRIES):
            state = self._store.get(STATE, {"job_id": run["job_id"]})
            ops = rerun_missed_ops(existing, snapshot, digest, now, self._cfg, state)
            try:
                self._store.write(ops)
            except ConditionFailed as lost:
                if lost.op is ops[0]:
                    current = lost.current or {}
                    return None, str(current.get("status"))  # another backfill re-ran it first
                continue  # the chain moved on: link to its new end
            self._telemetry.event("run.rerun", run["run_id"], was=was)
            return self._store.get(RUNS, run_key(run["run_id"])), was
        raise ValueError(f"{run['run_id']}: the job's chain kept moving; try again")

    def _create_adhoc(self, run: Item) -> Item | None:
        """Create a manual or backfill run at the end of its job's chain. None when created (the
        run item is linked in place); else the record that was there already."""
        return self._create_adhoc_shaped(run)[0]

    def _create_adhoc_shaped(self, run: Item) -> tuple[Item | None, bool]:
        """``_create_adhoc``, and whether the job is of the successor claim (its run joined
        through its head: services/head_operations.py)."""
        for _ in range(CHAIN_TRIES):
            state = self._store.get(STATE, {"job_id": run["job_id"]})
            if is_successor_job(state):
                return self._heads.create_adhoc(run, self._clock.now_ms()), True
            run.pop("after_run_id", None)
            link_runs(state.get("latest_run_id") if state else None, [run])
            ops = adhoc_run_ops(run, state)
            try:
                self._store.write(ops)
            except ConditionFailed as lost:
                if lost.op is ops[0]:
                    return lost.current or self._store.get(RUNS, run_key(run["run_id"])) or {}, False
                continue  # the chain moved on (a claim, another manual run): link to its new end
            return None, False
        raise ValueError(f"{run['run_id']}: the job's chain kept moving; try again")

    def _definition(self, job_id: str) -> JobDefinition:
        return _parsed(job_id, self.get(job_id))


def _parsed(job_id: str, item: Item | None) -> JobDefinition:
    """The definition of a job item (or a view of it): ``JobNotFound`` without one, a clear
    ``ValueError`` when it is invalid."""
    if item is None:
        raise JobNotFound(job_id)
    try:
        return JobDefinition.from_item(item)
    except InvalidJob as exc:
        raise ValueError(f"job {job_id} is invalid: {'; '.join(exc.reasons)}") from exc


# What a registration is, by the status it left on the job's state item.
STATUS_REGISTRATION = {
    JobStatus.ACTIVE.value: Registration.SCHEDULED,
    JobStatus.PAUSED.value: Registration.PAUSED,
    JobStatus.INVALID.value: Registration.INVALID,
    JobStatus.FINISHED.value: Registration.FINISHED,
    JobStatus.DELETED.value: Registration.DELETED,
}


def _definition_fields(definition: JobDefinition | Mapping[str, Any]) -> tuple[str, Item]:
    """The job id and the attributes ``register`` writes: a definition's canonical item, a valid
    job item's too, an invalid one's as given (without the scheduler's own attributes)."""
    if isinstance(definition, JobDefinition):
        return definition.job_id, definition.to_item()
    try:
        parsed = JobDefinition.from_item(definition)
    except InvalidJob:
        job_id = definition.get("job_id")
        if not is_job_id(job_id):
            raise
        fields = {k: _storable(v) for k, v in definition.items() if k not in STATE_FIELDS and v is not None}
        return str(job_id), fields
    return parsed.job_id, parsed.to_item()


def _storable(value: Any) -> Any:
    """A JSON value as DynamoDB stores it: a float as an int when whole, else a Decimal (not a
    number: as text). The registrar reads it back and gives its reasons."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        return int(value) if value.is_integer() else Decimal(repr(value))
    if isinstance(value, dict):
        return {str(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


def _rewrites(current: Item | None, fields: Item) -> bool:
    """Whether writing ``fields`` (a whole definition) over the job item ``current`` changes it."""
    if current is None:
        return True
    return any(current.get(name) != fields.get(name) for name in {*DEFINITION_FIELDS, *fields})


def _view(item: Item, state: Item | None) -> dict[str, Any]:
    view = {k: v for k, v in item.items() if k not in STATE_VIEW or k == "status"}
    if state is not None:
        view.update({name: state[name] for name in STATE_VIEW if name in state})
    else:
        view["status"] = item.get("status", "unregistered")
    return view


def describe_time(ms: int | None) -> str:
    return "-" if ms is None else ms_to_dt(int(ms)).strftime("%Y-%m-%d %H:%M:%S UTC")
