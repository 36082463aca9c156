"""People acting on their jobs at seeded instants: edits, re-puts, re-times, pauses, deletes,
malformed items, odd inputs and backfills, written straight to the jobs table as the console or
the AWS CLI would (the stream tells the registrar).

A part of ``World`` (sim/world.py), mixed in over the stream (sim/stream.py).
"""

from __future__ import annotations

import functools
from typing import Any

from jobsched.core.clock import ms_to_dt
from jobsched.core.run import MAX_RUN_ID_LENGTH, manual_run_id
from jobsched.core.transitions import snapshot_key
from jobsched.core.writes import JOBS, STATE, Put, Update
from jobsched.services.operations import JobNotFound

from jobsched_tools.sim.scenario import FaultRates, malformed, retimed
from jobsched_tools.sim.stream import JobStream
from jobsched_tools.sim.world_state import MINUTE


class People(JobStream):
    """The operator actions of the run."""

    def _schedule_operators(self) -> None:
        """Every operator action of the run, at seeded instants in the window (none in its first
        ten and last twenty minutes), plus backfills just before each outage ends."""
        hours = self.cfg.hours
        begin, end = self.start_ms + 10 * MINUTE, self.window_end - 20 * MINUTE
        if end <= begin:
            return
        for kind in FaultRates.OPERATOR_ACTIONS:
            expected = float(getattr(self.rates, kind)) * len(self.jobs) * hours
            count = int(expected) + (1 if self.rng.random() < expected - int(expected) else 0)
            for _ in range(count):
                when = self.rng.randrange(begin, end)
                job_id = self.rng.choice(self.jobs).definition.job_id
                self.at(when, functools.partial(self._operate, kind, job_id))
        if self.rates.operator_odd_input > 0:  # drawn only when on: the other seeds' runs stay
            expected = self.rates.operator_odd_input * len(self.jobs) * hours
            count = int(expected) + (1 if self.rng.random() < expected - int(expected) else 0)
            for _ in range(count):
                when = self.rng.randrange(begin, end)
                job_id = self.rng.choice(self.jobs).definition.job_id
                self.at(when, functools.partial(self._operate, "operator_odd_input", job_id))
        if self.rates.operator_backfill > 0:
            for _, outage_end in self.outages:
                for _ in range(8):
                    job_id = self.rng.choice(self.jobs).definition.job_id
                    when = outage_end - self.rng.randrange(10_000, 120_000)
                    self.at(when, functools.partial(self._operate, "operator_backfill", job_id))

    def _person_writes(
        self, job_id: str, item: dict[str, Any] | None, change: dict[str, Any] | None = None
    ) -> bool:
        """A person's put-item (``item``), update-item (``change``) or delete (neither), straight
        to the table as the console or the AWS CLI would; the stream tells the registrar."""
        inner = self.store.inner
        exists = inner.get(JOBS, {"job_id": job_id}) is not None
        if item is not None:
            inner.write([Put(JOBS, item, condition=(), label="person puts job")])
        elif change is not None:
            if not exists:
                return False  # the person sees the job is gone and does nothing
            inner.update(Update(JOBS, {"job_id": job_id}, (), "person updates job", set=change))
        else:
            if not exists:
                return False
            inner.delete(JOBS, {"job_id": job_id})
        self.operated.add(job_id)
        written = (self.clock.now_ms(), inner.get(JOBS, {"job_id": job_id}))
        self.person_log.setdefault(job_id, []).append((*written, self._stream_record(job_id)))
        return True

    def _operate(self, kind: str, job_id: str) -> None:
        if not self.faults_on:
            return
        person = self.person_items[job_id]
        detail = ""
        if kind == "operator_edit":
            done = self._person_writes(job_id, None, {"description": f"edited at {self.clock.now_ms()}"})
        elif kind == "operator_reput":
            done = self._person_writes(job_id, dict(person))
        elif kind == "operator_retime":
            schedule = retimed(self.rng, str(person["schedule"]))
            done = schedule is not None
            if schedule is not None:
                person["schedule"] = detail = schedule
                done = self._person_writes(job_id, dict(person))
        elif kind == "operator_pause":
            done = self._person_writes(job_id, None, {"enabled": False})
            self.at(
                self.clock.now_ms() + self.rng.randrange(5, 40) * MINUTE,
                functools.partial(self._resume, job_id),
            )
        elif kind == "operator_delete":
            done = self._person_writes(job_id, None)
            recreate = functools.partial(self._recreate, job_id)
            self.at(self.clock.now_ms() + self.rng.randrange(5, 40) * MINUTE, recreate)
        elif kind == "operator_malformed":
            detail, broken = malformed(self.rng, person)
            done = self._person_writes(job_id, broken)
            self.at(
                self.clock.now_ms() + self.rng.randrange(2, 20) * MINUTE,
                functools.partial(self._recreate, job_id),
            )
        elif kind == "operator_odd_input":
            done = self._odd_input(job_id)
        else:
            done = self._backfill(job_id)
        if done:
            self.counts[kind] += 1
            self.log("operator", kind, job_id, detail)

    def _resume(self, job_id: str) -> None:
        self._person_writes(job_id, None, {"enabled": True})

    def _recreate(self, job_id: str) -> None:
        self._person_writes(job_id, dict(self.person_items[job_id]))

    def _odd_input(self, job_id: str) -> bool:
        """A person puts a job item keyed with the job's definition-snapshot key, and asks for a
        manual run with a request id one character too long for its run id. The registrar must
        only report the item invalid (no state item, the snapshot untouched), and the trigger
        must refuse the request before writing anything (invariants: ``odd_inputs``)."""
        state = self.store.inner.get(STATE, {"job_id": job_id})
        if state is None or not state.get("def_hash"):
            return False
        key = str(snapshot_key(job_id, str(state["def_hash"]))["job_id"])
        item = {**self.person_items[job_id], "job_id": key}
        self.store.inner.write([Put(JOBS, item, condition=(), label="person puts an odd job item")])
        self.odd_keys.add(key)
        self._stream_record(key)

        too_long = "r" * (MAX_RUN_ID_LENGTH - len(manual_run_id(job_id, "")) + 1)

        def trigger() -> object:
            try:
                return self.ops.trigger(job_id, too_long)
            except (ValueError, JobNotFound):
                return None  # refused, before any write

        ok, accepted = self.call("operator", trigger, job_id)
        if ok and accepted is not None:
            self.unexpected.append(f"odd_input_accepted {job_id}: a request id too long ran {accepted}")
        return True

    def _backfill(self, job_id: str) -> bool:
        now = self.clock.now_ms()
        since = now - self.rng.randrange(2, 30) * MINUTE

        def backfill() -> object:
            try:
                return self.ops.backfill(job_id, ms_to_dt(since), ms_to_dt(now))
            except (ValueError, JobNotFound):
                return None  # the job is invalid or gone: the person reads the error

        ok, result = self.call("operator", backfill, job_id)
        if ok and result is not None:
            self.operated.add(job_id)
            return True
        return False
