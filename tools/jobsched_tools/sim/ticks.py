"""The trigger and the miss detector as actors: a tick every minute (duplicated, interleaved inside
another's claim, crashing before its send or mid-claim, silent in an outage) and a detector run
every minute at :30 (overloaded in its stretches).

A part of ``World`` (sim/world.py), mixed in over the people (sim/people.py), who may act inside
a tick's claim.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from jobsched.services.operations import JobNotFound

from jobsched_tools.sim.people import People
from jobsched_tools.sim.world_state import MINUTE


class TriggerAndDetector(People):
    """The ticks and the detector runs."""

    def _tick(self) -> None:
        minute = self.clock.now_ms() // MINUTE
        self.at((minute + 1) * MINUTE + self.rng.randrange(2000), self._tick)
        if self._in(self.outages):
            return
        invocations = 2 if self.roll("trigger_duplicate", self.rates.trigger_duplicate) else 1
        for n in range(invocations):
            trigger = self.triggers[n]
            name = f"trigger-{'AB'[n]}"
            if self.roll("trigger_concurrent", self.rates.trigger_concurrent):
                self.store.interleave = lambda: self._interleaved_tick(minute)
            inside_claim: list[Callable[[str], None]] = []
            if self.roll("operator_manual_run", self.rates.operator_manual_run):
                inside_claim.append(self._manual_run)
            if self.roll("operator_change_mid_claim", self.rates.operator_change_mid_claim):
                inside_claim.append(self._change_mid_claim)
            if inside_claim:
                self.store.before_create = functools.partial(_each, tuple(inside_claim))
            crash = self.faults_on and self.rng.random() < self.rates.trigger_crash_before_send
            self.queue.crash_next_send = crash
            self.store.crash_after_create = (
                self.faults_on and self.rng.random() < self.rates.trigger_crash_mid_claim
            )
            self.call(name, functools.partial(trigger.tick, f"tick-{minute}-{n}"), f"tick-{minute}")
            self.queue.crash_next_send = False
            self.store.crash_after_create = False
            self.store.interleave = None
            self.store.before_create = None

    def _interleaved_tick(self, minute: int) -> None:
        crash, self.queue.crash_next_send = self.queue.crash_next_send, False
        trigger = self.triggers[1]
        self.call("trigger-C", lambda: trigger.tick(f"tick-{minute}-concurrent"), f"tick-{minute}")
        self.queue.crash_next_send = crash

    def _manual_run(self, job_id: str) -> None:
        """A person's `jobsched trigger`, landing inside a tick's claim of the same job."""
        request = f"person-{self.clock.now_ms()}"

        def run_now() -> object:
            try:
                return self.ops.trigger(job_id, request)
            except (ValueError, JobNotFound):
                return None  # the job is invalid or gone: the person reads the error

        ok, result = self.call("operator", run_now, job_id)
        if ok and result is not None:
            self.operated.add(job_id)
            self.log("operator", "operator_manual_run", job_id, str(result))

    def _change_mid_claim(self, job_id: str) -> None:
        """A person's change of the job a tick is claiming, applied by the registrar (a fast
        stream) after the tick read the job and before its claim makes the run."""
        self._operate(self.rng.choice(("operator_retime", "operator_pause", "operator_delete")), job_id)
        deliver = functools.partial(self.registrar.on_stream_record, "MODIFY", job_id, None)
        self.call("registrar", deliver, job_id)

    def _change_after_crash(self, job_id: str) -> None:
        """Half the time, a person changes the job whose claimer died after its claim and before
        sending it: the claimed run is in the chain, and runs once (the detector sends it)."""
        if self.rng.random() < 0.5:
            kind = self.rng.choice(("operator_retime", "operator_pause", "operator_delete"))
            when = self.clock.now_ms() + self.rng.randrange(1_000, 20_000)
            self.at(when, functools.partial(self._operate, kind, job_id))

    def _detect(self) -> None:
        minute = self.clock.now_ms() // MINUTE
        self.at((minute + 1) * MINUTE + 30_000 + self.rng.randrange(2000), self._detect)
        overloaded = self._in(self.overloads)
        detector = self.overloaded_detector if overloaded else self.detector
        began, faults = self.clock.now_ms(), sum(self.counts.values())
        ok, result = self.call("detector", lambda: detector.run(f"detect-{minute}"), f"detect-{minute}")
        if ok and result is not None:
            self.leases_recovered += result.leases_recovered
            clean = not (overloaded or result.job_errors or result.stopped_early or result.degraded)
            if clean and sum(self.counts.values()) == faults:
                self.clean_detector_runs.append(began)


def _each(actions: tuple[Callable[[str], None], ...], job_id: str) -> None:
    for action in actions:
        action(job_id)
