"""The trigger's successor claim (shape f; issue 37; docs/proposals/successor-claim-build.md §0
"The claim, exactly" and "The `due` index", §4 row "trigger"; model: the ``tick`` actor of
tools/jobsched_tools/successor/model.py).

With the stack's migration switch on (``core/claim_shape.py``, read once per tick from the
detector's bookkeeping item), a tick also pages the runs table's ``due`` index, shard by shard of
its group, over ``check_at`` in ``[now - lookback, now + lookahead]`` shifted by the stack's
check delay (``head_check_delay_ms``: a head's ``check_at`` is its instant plus the dispatch lease
it was written under). Of what it reads it keeps the entries that may be unclaimed heads
(``is_head_entry``: a timed kind, a ``next_key``, an epoch, ``check_at`` at most the longest delay
past the instant) whose instant is in the window; every other entry is a run's lease, the
detector's. For each, in order:

1. the successor key (``next_key``) is read (one eventually consistent GetItem): present, the head
   is claimed (or closed, or settled) and nothing is sent, unless the claim there is this tick's
   own (``after_failed_claim``: OURS, a tick retried after its put landed);
2. an overdue head is left to the detector, as today's trigger leaves an overdue occurrence;
3. the definition is the job item's, and only when its digest is the head's ``def_hash`` (HC10:
   the claim sends the definition it loaded only when it is the head's). Otherwise the job item
   changed unseen: it is applied inline, as today's trigger does (the registrar's change closes
   the head and heads the new timing with the new digest, HC10), and the new head is claimed in
   this tick if due. With no new head (a pause, an invalid item) the head is skipped with a
   counted, logged reason (``deferred``, ``claim.deferred``);
4. the claim, one conditional put of the successor (``claim_head_op``). When it fails, the
   successor is read strongly and ``after_failed_claim`` decides: only OURS sends. A settle's
   record there (HC9) or a change's marker (HC10) sends nothing;
5. only once the put has landed is the head's message sent (a record before its message, H2 prime).

The claims of one job chain in memory: the head a claim just made is claimed in the same tick when
it is due in the window too (a job every 10 s, a 90 s lookahead), without reading its successor
first (the put's condition decides). A head met twice in one tick (the index shows a head this
tick made) is claimed by one claimer only (``TakenHeads``).

A legacy state met in ``next-run`` while the switch is on is converted (``convert_legacy_ops``, one
transaction, §5) and its new head is claimed in the same tick. The registrar's first claim of a
successor job (``claim_now``) finds the job's head by reading its occurrence items (HC12's Query
of its occurrence keys, the store's ``occurrence_items``: its manual runs are not read).

Per-item isolation as today's claims: one head's or job's error (a bug, a throttle, a transient
error after its retries) is counted and logged, and the tick goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from jobsched.core.claim_shape import CLAIM_SHAPE_ATTRIBUTE, ClaimShape, DeployedShape, stack_shape
from jobsched.core.config import SchedulerConfig
from jobsched.core.errors import ConditionFailed, StoreError, Throttled, TransientStoreError
from jobsched.core.head import (
    ends_life,
    head_check_at,
    head_check_delay_ms,
    is_head_entry,
    next_key,
)
from jobsched.core.job import InvalidJob, JobDefinition
from jobsched.core.occurrences import find_head as find_occurrence_head
from jobsched.core.run import run_key
from jobsched.core.state import JobStatus, state_misfire
from jobsched.core.timing import is_overdue
from jobsched.core.transitions.bookkeeping import BOOKKEEPING_KEY
from jobsched.core.transitions.head_claim import (
    ClaimRace,
    after_failed_claim,
    claim_head_op,
    claimed_run_message,
)
from jobsched.core.transitions.head_convert import (
    convert_legacy_ops,
    converted_head,
    head_job_of_state,
    is_legacy,
)
from jobsched.core.transitions.head_finish import finish_life_ops, reads_as_finished
from jobsched.core.writes import JOBS, RUNS, STATE, Item
from jobsched.ports import Store, Telemetry, read_attributes
from jobsched.services.head_registrar import find_head, read_job_items
from jobsched.services.loaded_job import load_job
from jobsched.services.paging import merge_oldest_first, shard_pages


class _Budget(Protocol):
    def take(self) -> bool: ...


class _Tick(Protocol):
    """What a claim reads of its tick (trigger.py ``_Tick``)."""

    @property
    def invocation_id(self) -> str: ...
    @property
    def now(self) -> int: ...
    @property
    def window_to(self) -> int: ...
    @property
    def budget(self) -> _Budget: ...
    @property
    def taken(self) -> TakenHeads: ...
    def out_of_time(self) -> bool: ...


class TickResult(Protocol):
    """What a claim counts (trigger.py ``TickResult``; trigger.py imports this module)."""

    claimed: int
    conflicts: int
    deferred: int
    throttled: int
    transient: int
    job_errors: int
    backlog: int
    stopped_early: bool
    lag_ms: list[int]


# Attempts of one head's claim after a transient store error, as today's claims (trigger.py).
TRANSIENT_TRIES = 3


class TakenHeads:
    """The heads a tick has taken to claim. A head this tick made (a chained claim) may show in a
    later page of the same tick's ``due`` query, or a converted state's head in the ``due`` pass:
    one claimer only claims and sends it, so a tick sends each claimed run once."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._lock = threading.Lock()

    def take(self, run_id: str) -> bool:
        with self._lock:
            if run_id in self._taken:
                return False
            self._taken.add(run_id)
            return True


@dataclass(frozen=True)
class _Definition:
    """A job's definition as loaded for its heads: the snapshot a message carries and its digest.
    (Not its ``max_runs``: the head carries it, and the ``due`` index projects it, so the claim
    decides from the entry alone whether its run is the life's last: ports.py ``DUE_PROJECTED``.)"""

    snapshot: Item
    digest: str


@dataclass
class _Definitions:
    """One chain's definitions, loaded once per job, and the jobs whose change it applied inline."""

    loaded: dict[str, _Definition | None] = field(default_factory=dict)
    repaired: set[str] = field(default_factory=set)


class HeadClaims:
    """The successor claim path of ``Trigger`` (module docstring)."""

    def __init__(
        self,
        store: Store,
        telemetry: Telemetry,
        cfg: SchedulerConfig,
        claimer_id: str,
        repair: Callable[[str], object],
        deployed: DeployedShape = DeployedShape.MIGRATING,
    ) -> None:
        self._store = store
        self._telemetry = telemetry
        self._cfg = cfg
        self._claimer_id = claimer_id
        self._repair = repair
        self._deployed = deployed
        # Only a migrating stack's switch is read: legacy and successor decide it alone.
        self._shape: ClaimShape | None = (
            None if deployed is DeployedShape.MIGRATING else stack_shape(None, deployed)
        )

    # --- the switch and the due pages ----------------------------------------------------------

    def stack_shape(self, invocation_id: str) -> ClaimShape:
        """The stack's claim: a legacy or successor stack's from its indexes alone, with no read; a
        migrating stack's switch from one strongly consistent GetItem of the bookkeeping item's
        ``claim_shape`` alone (``read_attributes``), kept for this object's life. The
        trigger function builds its services per Lambda invocation (runtime/wiring.py
        ``trigger_invocation``), so that is one read per invocation, and a flip of the switch
        takes effect at the next invocation; a long-lived Trigger (a benchmark, a simulation)
        reads it once. Unread (a store error), the tick claims as today and the next tick reads
        again: a legacy claim stays correct under the switch (a legacy state is claimed by today's
        transaction until it is converted)."""
        if self._shape is None:
            try:
                switch = read_attributes(self._store, STATE, dict(BOOKKEEPING_KEY), (CLAIM_SHAPE_ATTRIBUTE,))
                self._shape = stack_shape(switch, self._deployed)
            except StoreError as exc:
                self._telemetry.event("claim_shape.unread", invocation_id, error=str(exc)[:300])
                return ClaimShape.LEGACY
        return self._shape

    def due_heads(
        self,
        window_from: int,
        window_to: int,
        on_error: Callable[[StoreError], None],
        parallel: bool,
        page_size: int,
        shards: Sequence[int] | None,
    ) -> Iterator[Item]:
        """The shards' head entries whose instant is in the window, oldest first; each shard is
        paged lazily. A failing shard's page is reported to ``on_error`` and ends that shard.
        The pages span the window shifted by the stack's check delay; a head written under an
        older ``DispatchLeaseSeconds`` keeps its own ``check_at`` (``head_check_delay_ms``), so
        the instant decides: one written with a shorter delay is met before its instant enters
        the window and waits for it, one written with a longer delay enters the pages that much
        later (a lease lowered by 25 s: claimed 65 s ahead, not 90)."""
        firsts = shard_pages(
            self._store,
            "due",
            self._cfg.shard_count,
            head_check_at(window_from, self._cfg),
            head_check_at(window_to, self._cfg),
            on_error,
            parallel,
            page_size,
            shards,
        )
        return (
            entry
            for entry in merge_oldest_first("due", firsts)
            if is_head_entry(entry) and window_from <= int(entry["scheduled_at"]) <= window_to
        )

    # --- one head, one legacy state, one job ---------------------------------------------------

    def claim_entry(self, entry: Item, tick: _Tick, result: TickResult) -> list[Item]:
        """Claim the head of one ``due`` entry and the heads it chains onto; the messages to send."""
        if not tick.taken.take(str(entry["run_id"])):
            return []
        return self._claim_chain(entry, tick, result, read_first=True, known=None)

    def convert_and_claim(self, state: Item, tick: _Tick, result: TickResult) -> list[Item]:
        """A legacy state met in ``next-run`` with the switch on: convert it (§5, one transaction)
        and claim its new head in the same tick."""
        job_id = str(state["job_id"])
        try:
            return self._convert_and_claim(state, tick, result)
        except Throttled:
            result.throttled += 1  # still legacy: the next tick meets it again
        except TransientStoreError as exc:
            result.transient += 1
            self._telemetry.event("convert.transient", job_id, error=str(exc)[:300])
        except Exception as exc:  # one job's bug must not stop the others
            self._job_error(job_id, exc, result)
        return []

    def claim_job_now(self, job_id: str, tick: _Tick, result: TickResult) -> list[Item]:
        """The registrar's first claim of a successor job (``Trigger.claim_now``): find the job's
        head (HC12: one strongly consistent Query of its runs partition; the head is the unstarted
        occurrence whose successor key holds nothing) and claim it if it is due in the window."""
        try:
            head = self._find_head(job_id)
        except StoreError as exc:
            self._telemetry.event("claim.transient", job_id, error=str(exc)[:300])
            return []  # the next tick claims it
        if (
            head is None
            or int(head["scheduled_at"]) > tick.window_to
            or not tick.taken.take(str(head["run_id"]))
        ):
            return []
        return self._claim_chain(head, tick, result, read_first=False, known=None)

    def _finish_life(self, job_id: str, tick: _Tick) -> None:
        """HC5: the claim that put its life's end marker follows it with the finish write (the
        state ``active`` -> ``finished``, with the marker's count and chain end), in head_finish.py's
        order: the state first (strongly), then the job's items (HC12). A change that landed
        meanwhile (a raise of ``max_runs``) fails it; a lost one is the reconcile pass's to repair
        (services/head_reconciler.py), level-triggered. The message is already collected: a
        failure here never unsends the claim."""
        state = self._store.get(STATE, {"job_id": job_id})
        if state is None or state.get("status") != JobStatus.ACTIVE.value:
            return
        found = find_head(read_job_items(self._store, job_id), state)
        if found.ambiguous or found.end_marker is None:
            return
        if not reads_as_finished(state, found.head, found.end_marker):
            return
        try:
            self._store.write(finish_life_ops(state, found.end_marker, tick.now))
        except ConditionFailed:
            return  # a change or the reconcile pass moved the state first
        self._telemetry.event(
            "job.finished", job_id, end_marker=str(found.end_marker["run_id"]), actor="trigger"
        )

    def _find_head(self, job_id: str) -> Item | None:
        """HC12: the job's head, from one strongly consistent Query of its occurrence keys (the
        store's ``occurrence_items``: every epoch's timed items and markers, no manual run): the
        unstarted occurrence whose successor key holds nothing. None when there is none (paused,
        finished) or the read is torn (two: a write landed between its pages); level-triggered,
        the tick then finds the head in the ``due`` index."""
        return find_occurrence_head(read_job_items(self._store, job_id)).head

    # --- the chain of one job's claims ---------------------------------------------------------

    def _claim_chain(
        self, head: Item, tick: _Tick, result: TickResult, read_first: bool, known: _Definition | None
    ) -> list[Item]:
        """Claim ``head``, then each head a claim made while it is due in the window. Isolated: an
        error ends this job's chain for this tick, counted and logged."""
        runs: list[Item] = []
        definitions = _Definitions()
        if known is not None:
            definitions.loaded[str(head["job_id"])] = known
        current: Item | None = head
        while current is not None:
            current = self._claim_isolated(current, tick, result, runs, definitions, read_first)
            read_first = False  # a head this claim made: its put's condition decides
            if current is None:
                break
            if int(current["scheduled_at"]) > tick.window_to or not tick.taken.take(str(current["run_id"])):
                break
        return runs

    def _claim_isolated(
        self,
        head: Item,
        tick: _Tick,
        result: TickResult,
        runs: list[Item],
        definitions: _Definitions,
        read_first: bool,
    ) -> Item | None:
        job_id = str(head.get("job_id"))
        for attempt in range(TRANSIENT_TRIES):
            try:
                # After an unknown outcome, read the successor first: a put that did land is this
                # tick's own (OURS), and is counted and sent once.
                return self._claim_one(head, tick, result, runs, definitions, read_first or attempt > 0)
            except Throttled:
                result.throttled += 1  # the head stays in the index; the next tick claims it
                return None
            except TransientStoreError as exc:
                result.transient += 1
                self._telemetry.event("claim.transient", job_id, attempt=attempt + 1, error=str(exc)[:300])
            except Exception as exc:  # one job's bug must not stop the others
                self._job_error(job_id, exc, result)
                return None
        return None

    def _claim_one(
        self,
        head: Item,
        tick: _Tick,
        result: TickResult,
        runs: list[Item],
        definitions: _Definitions,
        read_first: bool,
    ) -> Item | None:
        """Claim one head; returns the head its claim made (to chain onto), or None."""
        claimer = f"{self._claimer_id}/{tick.invocation_id}"
        grace = state_misfire(head).grace_seconds
        if read_first:
            # Eventually consistent (§4): a stale read that misses the successor only costs the
            # put, whose condition fails and whose judgement reads strongly.
            successor = self._store.get(RUNS, run_key(next_key(head)), consistent=False)
            if successor is not None:
                if after_failed_claim(head, successor, claimer) is not ClaimRace.OURS:
                    return None  # claimed, settled (HC9) or closed (HC10): not ours to send
                # This tick's own claim, whose put landed unanswered: count and send it once.
                if not any(run["run_id"] == head["run_id"] for run in runs):
                    self._count_claim(head, tick, result)
                self._send(head, self._definition(head, definitions), runs)
                return None if ends_life(head) else successor
        if is_overdue(int(head["scheduled_at"]), tick.now, grace, self._cfg):
            return None  # the detector settles it, under the job's misfire policy
        if tick.out_of_time() or not tick.budget.take():
            result.stopped_early = True
            result.backlog += 1
            return None
        definition = self._definition(head, definitions)
        if definition is None:
            return self._apply_change(head, definitions, result)
        put = claim_head_op(head, tick.now, claimer, self._cfg)
        try:
            self._store.write([put])
        except (ConditionFailed, TransientStoreError) as lost:
            race = after_failed_claim(head, self._store.get(RUNS, run_key(next_key(head))), claimer)
            if race is ClaimRace.ABSENT and isinstance(lost, TransientStoreError):
                raise  # nothing landed: claimed again (_claim_isolated)
            if race is not ClaimRace.OURS:
                # Another claimer's claim, a settle's record (HC9), a change's marker (HC10):
                # N is decided elsewhere, and only the claim that made N+1 sends N's message.
                result.conflicts += 1
                self._telemetry.event("claim.lost", str(head["run_id"]), job_id=head["job_id"], to=race.value)
                return None
        self._count_claim(head, tick, result)
        self._send(head, definition, runs)
        if ends_life(head):
            self._finish_life(str(head["job_id"]), tick)
            return None
        return dict(put.item)

    def _convert_and_claim(self, state: Item, tick: _Tick, result: TickResult) -> list[Item]:
        job_id = str(state["job_id"])
        # The page's state lacks what the head takes from it (``registered_at``, ``runs_claimed``):
        # read it whole, once in the job's life.
        fresh = self._store.get(STATE, {"job_id": job_id})
        if fresh is None or not is_legacy(fresh):
            return []  # converted or changed meanwhile: the due pass or the next tick has it
        job = load_job(self._store, fresh, self._repair)
        if job is None:
            result.deferred += 1
            self._telemetry.event("claim.deferred", job_id, reason="job item changed")
            return []
        definition = job.definition
        head_job = head_job_of_state(
            fresh, definition.overlap.value, definition.retry.max_attempts, definition.max_runs
        )
        recorded = self._legacy_recorded(fresh, head_job.next_after)
        ops = convert_legacy_ops(
            fresh,
            head_job,
            recorded,
            self._cfg.shard_count,
            tick.now,
            check_delay_ms=head_check_delay_ms(self._cfg),
        )
        try:
            self._store.write(ops)
        except ConditionFailed:
            # An old-code claim, a settle or a change moved the state: the next tick meets it
            # again, in next-run or as a head.
            result.conflicts += 1
            self._telemetry.event("convert.lost", job_id)
            return []
        head = converted_head(ops)
        self._telemetry.event("job.converted", job_id, head=head["run_id"] if head else None)
        if head is None or int(head["scheduled_at"]) > tick.window_to:
            return []
        if not tick.taken.take(str(head["run_id"])):
            return []
        known = _Definition(job.snapshot, job.def_hash)
        return self._claim_chain(head, tick, result, read_first=False, known=known)

    def _legacy_recorded(self, state: Item, next_after: Callable[[int], int | None]) -> set[int]:
        """The instants from the state's ``next_run_at`` on whose legacy key holds a record (a
        backfill's), read one GetItem a key until the first free one: what the conversion passes
        over. Almost always one read that finds nothing."""
        recorded: set[int] = set()
        at: int | None = int(state["next_run_at"])
        while at is not None:
            legacy = {"job_id": state["job_id"], "run_id": f"{state['job_id']}@{at}"}
            if self._store.get(RUNS, legacy) is None:
                break
            recorded.add(at)
            at = next_after(at)
        return recorded

    # --- definitions, counting, sending --------------------------------------------------------

    def _definition(self, head: Item, definitions: _Definitions) -> _Definition | None:
        """The job item's definition when its digest is the head's ``def_hash`` (HC10), loaded once
        per job a chain; else None."""
        job_id = str(head["job_id"])
        if job_id not in definitions.loaded:
            definitions.loaded[job_id] = self._load_definition(job_id)
        found = definitions.loaded[job_id]
        return found if found is not None and found.digest == head.get("def_hash") else None

    def _apply_change(self, head: Item, definitions: _Definitions, result: TickResult) -> Item | None:
        """The job item no longer matches the head (an edit, a deletion, an invalid item not yet
        applied): apply it inline, as today's trigger does (``load_job``'s ``repair``): the
        registrar's change closes this head with its marker and makes the new timing's head with
        the new digest (HC10), which this chain then claims if it is due (a lagging or failed
        stream delivery never leaves a job stuck). Once per job a chain; with no new head (a pause,
        an invalid item, a deletion) or a second mismatch, the head is skipped, counted and logged."""
        job_id = str(head["job_id"])
        found = definitions.loaded.get(job_id)
        reason = "job item gone or invalid" if found is None else "job item changed"
        if job_id not in definitions.repaired:
            definitions.repaired.add(job_id)
            self._repair(job_id)
            definitions.loaded.pop(job_id, None)
            fresh = self._find_head(job_id)
            if fresh is not None and fresh["run_id"] != head["run_id"]:
                self._telemetry.event(
                    "claim.job_changed", str(head["run_id"]), job_id=job_id, head=fresh["run_id"]
                )
                return fresh
        result.deferred += 1
        self._telemetry.event("claim.deferred", str(head["run_id"]), job_id=job_id, reason=reason)
        return None

    def _load_definition(self, job_id: str) -> _Definition | None:
        item = self._store.get(JOBS, {"job_id": job_id})
        if item is None:
            return None
        try:
            definition = JobDefinition.from_item(item)
        except InvalidJob:
            return None
        return _Definition(definition.to_item(), definition.definition_hash())

    def _send(self, head: Item, definition: _Definition | None, runs: list[Item]) -> None:
        """N's message, from N as the claim read it, with the definition of N's digest. Sent by the
        tick's sender after this returns, so after the put landed (H2 prime)."""
        if definition is None or any(run["run_id"] == head["run_id"] for run in runs):
            return
        version = head.get("head_version", head.get("version"))
        message = claimed_run_message({**head, "version": version, "attempt": 1}, definition.snapshot)
        runs.append(message.as_run_item())

    def _count_claim(self, head: Item, tick: _Tick, result: TickResult) -> None:
        result.claimed += 1
        lag = tick.now - int(head["scheduled_at"])
        result.lag_ms.append(max(0, lag))
        self._telemetry.event(
            "run.claimed",
            head["run_id"],
            job_id=head["job_id"],
            scheduled_at=head["scheduled_at"],
            lag_ms=lag,
        )

    def _job_error(self, job_id: str, exc: Exception, result: TickResult) -> None:
        result.job_errors += 1
        self._telemetry.event(
            "job.error", job_id, actor="trigger", error=f"{type(exc).__name__}: {exc}"[:500]
        )
