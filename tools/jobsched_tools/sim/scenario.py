"""The simulated workload: a seeded mix of jobs, handler behaviours and the chaos settings."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.core.clock import dt_to_ms, ms_to_dt
from jobsched.core.job import JobDefinition, Misfire, MisfirePolicy, OverlapPolicy, RetryPolicy

# Start instants the seed chooses from: ordinary days and days with a DST change in the zones
# the cron jobs use, so that calendar edge cases are exercised under faults too.
START_INSTANTS = (
    datetime(2026, 6, 10, 8, 0, tzinfo=UTC),
    datetime(2026, 3, 8, 3, 0, tzinfo=UTC),  # America/* spring forward at 07:00Z
    datetime(2026, 3, 28, 22, 0, tzinfo=UTC),  # Europe/* spring forward at 01:00Z
    datetime(2026, 10, 25, 0, 0, tzinfo=UTC),  # Europe/* fall back at 01:00Z
    datetime(2026, 11, 1, 2, 0, tzinfo=UTC),  # America/* fall back at 06:00Z
    datetime(2026, 12, 31, 18, 0, tzinfo=UTC),  # new year in many zones
)

ZONES = ("UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Sydney", "America/Denver")


@dataclass(frozen=True)
class FaultRates:
    """Probabilities per opportunity (per invocation, message, write or heartbeat)."""

    trigger_duplicate: float = 0.1  # EventBridge invokes the tick twice
    trigger_concurrent: float = 0.08  # a second tick runs interleaved inside the first's claim
    trigger_crash_before_send: float = 0.08  # the tick dies after claiming, before sending
    trigger_crash_mid_claim: float = 0.03  # the tick dies right after a claim lands, before it sends
    sqs_duplicate: float = 0.04  # a message is delivered twice
    sqs_reorder: float = 0.3  # a received batch is shuffled
    sqs_delay: float = 0.03  # a message is delivered late
    sqs_send_failure: float = 0.01  # SendMessageBatch rejects an entry
    sqs_request_failure: float = 0.005  # the whole SendMessageBatch fails
    worker_crash_before_start: float = 0.02
    worker_crash_after_start: float = 0.02
    worker_crash_mid_handler: float = 0.02
    worker_crash_after_effect: float = 0.02  # handler done, effect staged, commit never sent
    worker_crash_in_heartbeat: float = 0.01  # per heartbeat
    zombie_worker: float = 0.02  # pauses past its lease, then resumes and tries to commit
    # per zombie: its handler failed, so on resuming it writes a retry (or, with no attempt left, a
    # failure) with the token it held, over an attempt the run may have started since (issue 34:
    # the retry's fencing). Off by default (drawn only when set, so the fixed seeds' runs stay).
    zombie_fails: float = 0.0
    store_throttle: float = 0.005  # per store call
    # Stretches of 5-20 minutes in which provisioned capacity runs short (a spike above it, before
    # auto scaling catches up): each store call is throttled with ``squeeze_throttle`` (issue 37).
    # Off by default (drawn only when set, so the fixed seeds' runs stay as they were).
    capacity_squeezes: int = 0
    # Issue 38's per-job dead-letter queues: this share of the jobs name one, and each send of a
    # dead letter fails with ``dead_letter_send_failure`` (the queue did not answer). Off by default;
    # drawn from a generator of their own, so the fixed seeds' runs stay as they were.
    dead_letter_jobs: float = 0.0
    dead_letter_send_failure: float = 0.3
    # Of those jobs, this share name a queue SQS refuses for good (deleted, or its key refuses):
    # every send raises DeadLetterRefused, and after an hour the debt is recorded ``refused``.
    dead_letter_queue_refuses: float = 0.0
    squeeze_throttle: float = 0.6
    store_transient: float = 0.005  # per store call, before the write happens
    store_lost_response: float = 0.005  # per write: applied, then the response is lost
    worker_stall: float = 0.03  # per invocation: frozen past its lease, then goes on heartbeating
    heartbeat_races_recovery: float = 0.5  # a stalled worker's late heartbeat lands between the
    # detector's read of its lapsed lease and the recovery write
    cancel_races_recovery: float = 0.0  # cancel_other: a person's manual run starts between the
    # detector's read of a holder's lapsed lease and the recovery, and asks the holder to stop
    # (issue 34 item 3). Off by default: it would move the default run's random draws.
    clock_skew_max_ms: int = 5_000  # each actor's clock is off by up to this
    detector_overloads: int = 2  # stretches with a tiny detector_max_items
    trigger_outages: int = 2  # stretches of 20-90 minutes with no ticks
    # What people do to their jobs, per job and simulated hour (docs/design.md, "What a change
    # to a job does"): each is a put-item, update-item or delete on the job item, delivered to
    # the registrar through a simulated stream.
    operator_edit: float = 0.02  # update-item of the description only
    operator_reput: float = 0.02  # put-item of the same definition, whole (scheduler attributes gone)
    operator_retime: float = 0.02  # put-item with another schedule
    operator_pause: float = 0.015  # enabled: false, resumed 5-40 minutes later
    operator_delete: float = 0.01  # delete-item, re-created 5-40 minutes later
    operator_malformed: float = 0.015  # a broken or oversized item, fixed 2-20 minutes later
    operator_backfill: float = 0.01  # a backfill of the last minutes (also at each outage's end)
    # Input at the edge (issue 26): a job item keyed with another job's definition-snapshot key
    # (<job_id>#<digest>), and a manual run with a request id too long for its run id. Off by
    # default (drawn only when set, so the fixed seeds' runs stay as they were).
    operator_odd_input: float = 0.0
    # per tick: a person runs a job now between the tick's read of it and its claim, so the claim
    # read a stale end of the job's chain: its transaction must lose and read again (design.md).
    operator_manual_run: float = 0.05
    # per tick: a person re-times, pauses or deletes a job between the tick's read of it and its
    # claim, and the registrar applies it at once: the claim, conditional on the state's version,
    # must lose whole and read the changed job again (design.md, "Overlap").
    operator_change_mid_claim: float = 0.03
    stream_delay: float = 0.05  # per stream record: the registrar sees it 10-120 s late
    stream_duplicate: float = 0.05  # per stream record: delivered twice (a retried batch)
    # per stream record: lost for good (its retries exhausted, on to the failure queue): only the
    # detector's reconcile pass (services/reconciler.py) can apply the change (issue 26).
    stream_lost: float = 0.02
    # per stream record: late, not lost (issue 34): it arrives 3-10 minutes after the write, after
    # the reconcile pass applied its change (dated when the pass saw it), and must still date it.
    # Later records of the same job follow it (a shard keeps an item's order). Off by default
    # (drawn only when set, so the fixed seeds' runs stay as they were).
    stream_late: float = 0.0
    large_payload_jobs: float = 0.05  # fraction of jobs with a 30-60 KB payload

    OPERATOR_ACTIONS = (
        "operator_edit",
        "operator_reput",
        "operator_retime",
        "operator_pause",
        "operator_delete",
        "operator_malformed",
        "operator_backfill",
    )

    @classmethod
    def none(cls) -> FaultRates:
        return cls(**{name: 0 for name in cls.__dataclass_fields__})

    def scaled(self, factor: float) -> FaultRates:
        values: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            values[name] = min(1.0, value * factor) if isinstance(value, float) else value
        return FaultRates(**values)


# The two heavy operator-fault mixes the chaos sweeps of issue 37 ran (seeds 1-20 of each, on both
# claims), which the regression worlds in tests/sim replay: most stream records late, with people
# pausing, deleting and breaking items; and half of them late, with retimes and re-puts too.
HEAVY_OPERATOR_LATE_RECORDS = FaultRates(
    stream_late=0.9, operator_pause=0.4, operator_delete=0.4, operator_malformed=0.4
)
HEAVY_OPERATOR_EDITS = FaultRates(
    stream_late=0.5,
    operator_pause=0.4,
    operator_delete=0.2,
    operator_malformed=0.2,
    operator_retime=0.2,
    operator_reput=0.2,
)


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 1
    jobs: int = 150
    hours: float = 12.0
    store: str = "memory"  # memory | moto
    faults: FaultRates = field(default_factory=FaultRates)
    # Faults off, trigger and detector on, until every occurrence of the window has settled
    # (checked every 5 simulated minutes from 10 minutes on), at most this long.
    drain_minutes: int = 120
    lambda_timeout_seconds: int = 300
    visibility_timeout_seconds: int = 330
    workers: int = 8  # worker "hosts", each with its own skewed clock
    # A successor-shaped stack (issue 37, docs/proposals/successor-claim-build.md §4 "chaos"): the
    # runs table has the ``due`` index and the migration switch (core/claim_shape.py) is on before
    # the first job registers; the checks read heads, markers and epochs (sim/successor.py).
    successor: bool = False
    # LeaseSeconds and DispatchLeaseSeconds (a successor head's check delay follows the dispatch
    # lease, HC7); the heartbeat is at most half of it (``SchedulerConfig``'s rule).
    lease_seconds: int = 30
    # A migrating stack (issue 37 §5 "The migration", between the deploys: ports.DEPLOYED_INDEXES
    # ["migrating"], the next-run, lease and due indexes): the switch starts off, every job
    # registers and runs today's claim, and ``jobsched migrate successor-claim``'s write turns it
    # on at a seeded moment of the window while claims, runs, retries and changes are in flight;
    # the trigger and the reconcile pass convert the legacy states (sim/migration.py).
    migrate_midway: bool = False

    @property
    def ends_successor(self) -> bool:
        """The stack claims from heads by the run's end: the successor world's checks apply to
        the final tables (sim/successor.py); a migrating run's legacy part is checked per write."""
        return self.successor or self.migrate_midway


@dataclass(frozen=True)
class Behaviour:
    """How a job's simulated handler behaves."""

    duration_ms: int  # typical handler duration
    jitter_ms: int  # uniform extra duration
    fail_probability: float  # per attempt
    effect: str  # "counter" (Update ADD count) or "put" (Put with not_exists)


@dataclass(frozen=True)
class SimJob:
    definition: JobDefinition
    behaviour: Behaviour


# The deployment's handlers, as the simulated registrar knows them: another target is invalid.
KNOWN_TARGETS = frozenset({"sim.effect"})


def start_instant(rng: random.Random) -> int:
    return dt_to_ms(rng.choice(START_INSTANTS))


def build_jobs(
    rng: random.Random, count: int, start_ms: int, hours: float, large_payloads: float = 0.0
) -> list[SimJob]:
    jobs = []
    for index in range(count):
        jobs.append(_job(rng, index, start_ms, hours, large_payloads))
    return jobs


def retimed(rng: random.Random, schedule: str) -> str | None:
    """Another schedule of the same kind, as a person would change it (None: leave it)."""
    if schedule.startswith("rate("):
        return rng.choice(
            [s for s in ("rate(1 minute)", "rate(2 minutes)", "rate(5 minutes)") if s != schedule]
        )
    if schedule.startswith("cron("):
        step = rng.choice([2, 3, 5, 10, 15])
        return f"cron({rng.randrange(step)}/{step} * * * ? *)"
    return None


def malformed(rng: random.Random, item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A broken variant of a job item, of a kind people write (issue 12): what and the item."""
    kind = rng.choice(
        [
            "bad cron",
            "end beyond 9999",
            "deep payload",
            "huge integer",
            "oversized payload",
            "unknown field",
            "unknown target",
            "enabled as text",
        ]
    )
    broken = dict(item)
    if kind == "bad cron":
        broken["schedule"] = "cron(61 * * * ? *)"
    elif kind == "end beyond 9999":
        broken["end"] = "9999-12-31T23:59:59-05:00"
    elif kind == "deep payload":
        broken["payload"] = "[" * 5000 + "]" * 5000
    elif kind == "huge integer":
        broken["payload"] = '{"n": ' + "9" * 5000 + "}"
    elif kind == "oversized payload":
        broken["payload"] = '{"blob": "' + "x" * 70_000 + '"}'
    elif kind == "unknown field":
        broken["scheduel"] = broken.pop("schedule")
    elif kind == "unknown target":
        broken["target"] = "sim.nope"
    else:
        broken["enabled"] = "false"  # valid: pauses the job, stored as text
    return kind, broken


def _job(rng: random.Random, index: int, start_ms: int, hours: float, large_payloads: float) -> SimJob:
    kind = rng.choices(["rate1", "rate5", "cron", "hourly", "at"], weights=[20, 30, 30, 12, 8], k=1)[0]
    zone = "UTC"
    if kind == "rate1":
        schedule, period_s = "rate(1 minute)", 60
    elif kind == "rate5":
        schedule, period_s = "rate(5 minutes)", 300
    elif kind == "cron":
        step = rng.choice([2, 3, 5, 10, 15])
        zone = rng.choice(ZONES)
        schedule, period_s = f"cron(0/{step} * * * ? *)", step * 60
        if rng.random() < 0.3:
            schedule = f"cron({rng.randrange(step)}/{step} 0-23 ? * * *)"
    elif kind == "hourly":
        zone = rng.choice(ZONES)
        schedule, period_s = f"cron({rng.randrange(60)} * * * ? *)", 3600
    else:
        offset_ms = rng.randrange(60_000, max(120_000, int(hours * 3_600_000) - 60_000))
        when = ms_to_dt(start_ms + offset_ms).replace(microsecond=0)
        schedule, period_s = f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})", 3600
    misfire = Misfire(
        policy=rng.choice(list(MisfirePolicy)),
        grace_seconds=rng.choice([30, 60, 120, 300]),
        max_catchup=rng.choice([3, 10, 200]),
    )
    overlap = rng.choice(list(OverlapPolicy))
    retry = RetryPolicy(
        max_attempts=rng.choice([1, 2, 3, 4]),
        backoff_seconds=rng.choice([1, 5, 20]),
        max_backoff_seconds=rng.choice([60, 120]),
    )
    timeout = rng.choice([60, 120, 240])
    roll = rng.random()
    if roll < 0.15:
        duration = int(period_s * 1000 * rng.uniform(1.2, 2.5))  # longer than the period: overlap
    elif roll < 0.2:
        duration = (timeout + 30) * 1000  # runs past its timeout
    else:
        duration = rng.randrange(200, 25_000)
    duration = min(duration, 280_000)
    fail = rng.choices([0.0, 0.1, 0.3, 1.0], weights=[60, 20, 15, 5], k=1)[0]
    payload: dict[str, Any] = {"i": index}
    if rng.random() < large_payloads:
        # Large but valid (the limit is 64 KiB): the outage's settle chunks and the dispatch
        # batches must then be sized by bytes, or DynamoDB and SQS reject them.
        payload["blob"] = "x" * rng.randrange(30_000, 60_000)
    definition = JobDefinition(
        job_id=f"job-{index:04d}-{kind}",
        schedule=schedule,
        timezone=zone,
        target="sim.effect",
        payload=payload,
        retry=retry,
        timeout_seconds=timeout,
        misfire=misfire,
        overlap=overlap,
        # Issue 29, chosen by index (not by the seed's stream, so every other choice is as
        # before): a start window on one job in five, a run limit on one in eleven.
        jitter_seconds=45 if index % 5 == 1 else 0,
        max_runs=4 if index % 11 == 3 else None,
        pause_on_failure=index % 13 == 5,
        # Delete after completion: two in three one-time and limited jobs (they complete), and a
        # recurring job in seventeen (it never does: its item must stay).
        action_after_completion="delete"
        if ((kind == "at" or index % 11 == 3) and index % 3 != 1) or index % 17 == 7
        else "none",
    )
    effect = "put" if rng.random() < 0.3 else "counter"
    return SimJob(definition, Behaviour(duration, duration // 5 + 1, fail, effect))


def windows(
    rng: random.Random,
    count: int,
    start_ms: int,
    end_ms: int,
    min_len_ms: int,
    max_len_ms: int,
    avoid: list[tuple[int, int]] | None = None,
) -> list[tuple[int, int]]:
    """Up to ``count`` non-overlapping [from, to) stretches inside the window, apart (10 minutes,
    less in short simulations) from each other and from ``avoid``."""
    gap = min(10 * 60_000, (end_ms - start_ms) // 20)
    # Short simulations get shorter stretches, so that every kind still fits.
    max_len_ms = max(min_len_ms, min(max_len_ms, (end_ms - start_ms) // 5))
    taken = list(avoid or [])
    found: list[tuple[int, int]] = []
    for _ in range(count * 20):
        if len(found) >= count:
            break
        length = rng.randrange(min_len_ms, max_len_ms + 1)
        if end_ms - start_ms - length - 2 * gap <= 0:
            break
        begin = rng.randrange(start_ms + gap, end_ms - length - gap)
        candidate = (begin, begin + length)
        if all(candidate[1] + gap <= a or b + gap <= candidate[0] for a, b in taken):
            taken.append(candidate)
            found.append(candidate)
    return sorted(found)
