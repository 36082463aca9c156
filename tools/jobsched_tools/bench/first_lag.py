"""Start lag at the deployed defaults, first occurrences apart from steady ones (issue 16).

Real time would take hours at a one-minute tick, so this runs the real services on a manual
clock: the template's tick period (``TickRate``) and lookahead, jobs registered, retimed and
resumed at random moments, the registrar applying each write after a stream delay. An
occurrence's scheduling lag is how late its message was sent after its instant (a run sent ahead
is delivered at its instant by the SQS delay, and the worker waits out the rest); delivery and
start add what the live bench measures (``lag_ms_p99``). Measured twice in one run, side by side:
with the registrar's early claim (as deployed) and without it (a tick claims everything).
"""

from __future__ import annotations

import heapq
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jobsched.core.clock import ManualClock
from jobsched.core.config import SchedulerConfig
from jobsched.core.job import JobDefinition
from jobsched.core.run import run_id_for, run_key
from jobsched.core.writes import JOBS, STATE, Put
from jobsched.ports import OutgoingMessage, SendResult
from jobsched.services.registrar import Registrar
from jobsched.services.trigger import Trigger

from jobsched_tools.emulator.provision import load_template
from jobsched_tools.fakes.memory_queue import MemoryWorkQueue
from jobsched_tools.fakes.memory_store import MemoryStore
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

T0 = 1_796_083_200_000  # 2026-12-01T00:00:00Z
SECOND = 1000
MINUTE = 60 * SECOND
SCHEDULES = ("rate(1 minute)", "rate(2 minutes)", "cron(*/5 * * * ? *)", "cron(0/3 * * * ? *)")
# An occurrence due sooner than this after the write that created it cannot be claimed before
# the stream delivers the write: it is reported apart, not in the p99 the target is about.
MIN_NOTICE_MS = 3 * SECOND


def tick_period_ms() -> int:
    """The template's default TickRate, e.g. rate(1 minute), in milliseconds."""
    expression = str(load_template()["Parameters"]["TickRate"]["Default"])
    match = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours)\)", expression)
    if match is None:
        raise ValueError(f"TickRate {expression!r}: only rate(N minutes|hours) is modelled here")
    return int(match.group(1)) * (MINUTE if match.group(2).startswith("minute") else 60 * MINUTE)


class _SendTimes:
    """The queue, noting when each run's first message was sent."""

    def __init__(self, inner: MemoryWorkQueue, clock: ManualClock) -> None:
        self.inner = inner
        self.clock = clock
        self.first_sent: dict[str, int] = {}

    def send(self, messages: Sequence[OutgoingMessage]) -> SendResult:
        for message in messages:
            self.first_sent.setdefault(str(message.body["run_id"]), self.clock.now_ms())
        return self.inner.send(messages)


@dataclass(frozen=True)
class LagFigures:
    first_p50_ms: float
    first_p99_ms: float
    first_max_ms: float
    steady_p50_ms: float
    steady_p99_ms: float
    steady_max_ms: float
    first_occurrences: int
    steady_occurrences: int
    short_notice: int  # first occurrences due within MIN_NOTICE_MS of their write (not in p99)


def _percentile(values: list[int], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))])


def simulate(
    early_claim: bool, jobs: int = 120, minutes: int = 60, stream_delay_ms: int = 1000, seed: int = 7
) -> LagFigures:
    rng = random.Random(seed)
    cfg = SchedulerConfig()  # the deployed defaults (lookahead, grace, lookback)
    clock = ManualClock(T0)
    store = MemoryStore()
    telemetry = MemoryTelemetry()
    queue = _SendTimes(MemoryWorkQueue(clock, visibility_timeout_seconds=900), clock)
    trigger = Trigger(store, queue, telemetry, clock, cfg, parallel_queries=False)
    registrar = Registrar(
        store,
        telemetry,
        clock,
        cfg,
        queue,
        claim_now=(lambda job_id: trigger.claim_now(job_id, "registrar")) if early_claim else None,
    )
    events: list[tuple[int, int, Callable[[], None]]] = []
    order = iter(range(10**9))

    def at(when: int, action: Callable[[], None]) -> None:
        heapq.heappush(events, (when, next(order), action))

    firsts: dict[str, int] = {}  # run id of a first occurrence -> when the write that made it landed

    def write(job_id: str, schedule: str, enabled: bool = True) -> None:
        item = JobDefinition(job_id=job_id, schedule=schedule, target="noop", enabled=enabled).to_item()
        store.write([Put(JOBS, item, condition=(), label="person writes")])
        written = clock.now_ms()

        def apply() -> None:
            registrar.apply(job_id)
            state = store.get(STATE, {"job_id": job_id}) or {}
            if enabled and "next_run_at" in state:
                firsts.setdefault(run_id_for(job_id, int(state["next_run_at"])), written)

        at(written + stream_delay_ms, apply)

    end = T0 + minutes * MINUTE

    def person(job_id: str, schedule: str | None = None, enabled: bool = True) -> Callable[[], None]:
        return lambda: write(job_id, schedule or rng.choice(SCHEDULES), enabled)

    def tick() -> None:
        trigger.tick("tick")

    for index in range(jobs):
        job_id = f"j{index:04d}"
        born = T0 + rng.randrange(0, (minutes - 10) * MINUTE)
        at(born, person(job_id))
        change = born + rng.randrange(MINUTE, 8 * MINUTE)
        if index % 2:  # a retime: a new first occurrence
            at(change, person(job_id))
        else:  # a pause, then a resume
            at(change, person(job_id, "rate(1 minute)", enabled=False))
            at(change + rng.randrange(30 * SECOND, 3 * MINUTE), person(job_id, "rate(1 minute)"))
    period = tick_period_ms()
    phase = rng.randrange(0, period)
    for when in range(T0 + phase, end, period):
        at(when, tick)
    while events:
        when, _, action = heapq.heappop(events)
        clock.set(max(clock.now_ms(), when))
        action()
    return _figures(store, queue.first_sent, firsts, end)


def _figures(store: MemoryStore, sent: dict[str, int], firsts: dict[str, int], end: int) -> LagFigures:
    first: list[int] = []
    steady: list[int] = []
    short = 0
    for run_id, sent_at in sent.items():
        run: dict[str, Any] = store.get("runs", run_key(run_id)) or {}
        scheduled = int(run.get("scheduled_at", 0))
        if not scheduled or scheduled > end - 2 * MINUTE:
            continue  # claimed near the end: its neighbours are not all in
        lag = max(0, sent_at - scheduled)
        if run_id in firsts:
            if scheduled - firsts[run_id] < MIN_NOTICE_MS:
                short += 1
                continue
            first.append(lag)
        else:
            steady.append(lag)
    return LagFigures(
        _percentile(first, 50),
        _percentile(first, 99),
        float(max(first, default=0)),
        _percentile(steady, 50),
        _percentile(steady, 99),
        float(max(steady, default=0)),
        len(first),
        len(steady),
        short,
    )


def measure() -> dict[str, Any]:
    """Both variants side by side, for the bench JSON."""
    deployed, ticks_only = simulate(early_claim=True), simulate(early_claim=False)
    return {
        "lag_ms_p99_first_occurrence": deployed.first_p99_ms,
        "lag_ms_p99_steady_defaults": deployed.steady_p99_ms,
        "lag_at_defaults": {
            "tick_period_s": tick_period_ms() / SECOND,
            "lookahead_s": SchedulerConfig().lookahead_seconds,
            "stream_delay_ms": 1000,
            "with_registrar_claims": deployed.__dict__,
            "ticks_only": ticks_only.__dict__,
        },
    }
