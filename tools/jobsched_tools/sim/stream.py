"""The jobs table's stream, simulated: every write to a job item becomes a record that reaches the
registrar after a short lag, in order, retried in order when the registrar fails, and dropped
after the event source mapping's retries; some arrive late, some are lost or delivered twice.

A part of ``World`` (sim/world.py), mixed in over its state (sim/world_state.py).
"""

from __future__ import annotations

import functools

from jobsched.core.job import definition_digest
from jobsched.core.writes import JOBS

from jobsched_tools.sim.world_state import MINUTE, StreamRecord, WorldState

STREAM_RETRIES = 10  # the registrar's event source mapping's MaximumRetryAttempts (template.yaml)


class JobStream(WorldState):
    """The stream and the registrar it feeds."""

    def _stream_record(self, job_id: str) -> int | None:
        """A write to a job item: its stream record reaches the registrar after a short lag,
        with the write's time rounded down to the second (``ApproximateCreationDateTime``) and
        the item the write left (``NewImage``). Returns when it is due there (None: lost)."""
        now = self.clock.now_ms()
        image = self.store.inner.get(JOBS, {"job_id": job_id})
        digest = definition_digest(image) if image is not None else None
        self.item_history.setdefault(job_id, []).append((now, digest))
        if self.roll("stream_lost", self.rates.stream_lost, job_id):
            return None  # the registrar never sees it: the reconcile pass must (registration_converged)
        lag = self.rng.randrange(200, 2_000)
        if self.roll("stream_delay", self.rates.stream_delay, job_id):
            lag = self.rng.randrange(10_000, 120_000)
        record = StreamRecord(now + lag, job_id, now // 1000 * 1000, image)
        waiting = self.late_stream.get(job_id)
        if waiting or self.roll("stream_late", self.rates.stream_late, job_id):
            # Late (its shard is behind): after the reconcile pass, and before any later record of
            # the same job.
            due = max(now + self.rng.randrange(3 * MINUTE, 10 * MINUTE), waiting[-1].due if waiting else 0)
            self.late_stream.setdefault(job_id, []).append(record._replace(due=due))
            self.at(due, functools.partial(self._late_poll, job_id))
            return due
        self.stream.append(record)
        self.at(record.due, self._registrar_poll)
        return record.due

    def _late_poll(self, job_id: str) -> None:
        """A late job's records, in order, each retried until it lands (a failed record holds the
        ones behind it, as on a shard)."""
        waiting = self.late_stream.get(job_id, [])
        while waiting and waiting[0].due <= self.clock.now_ms():
            record = waiting[0]
            deliver = functools.partial(
                self.registrar.on_stream_record, "MODIFY", job_id, record.image, record.created
            )
            ok, _ = self.call("registrar", deliver, job_id)
            if not ok:
                self.at(self.clock.now_ms() + 5_000, functools.partial(self._late_poll, job_id))
                return
            waiting.pop(0)
        if not waiting:
            self.late_stream.pop(job_id, None)

    def _registrar_poll(self) -> None:
        """The event source mapping: records in order; a failed one is retried, in order, before
        any later one (a shard's iterator does not move past it)."""
        while self.stream and self.stream[0].due <= self.clock.now_ms():
            due, job_id, created, image = self.stream[0]
            deliver = functools.partial(self.registrar.on_stream_record, "MODIFY", job_id, image, created)
            ok, _ = self.call("registrar", deliver, job_id)
            if not ok:
                self.stream_failures += 1
                if self.stream_failures <= STREAM_RETRIES:
                    self.at(self.clock.now_ms() + 5_000, self._registrar_poll)
                    return
                # The mapping's MaximumRetryAttempts: the record goes to the failure queue and the
                # job's change is not applied; the reconcile pass must apply it (converged). In a
                # capacity squeeze that is the expected degradation; elsewhere only a bug gets
                # here (store faults are rare).
                if self._in(self.store.squeezes):
                    self.counts["stream_failed_in_squeeze"] += 1
                    # Lost for good, as a record ``stream_lost`` drops: the reconcile pass applies
                    # the change under the date it first sees it, the only date it has (the
                    # invariants' ``after_writes`` holds no write to its person's date then).
                    self._lost_for_good(job_id, due)
                else:
                    self.unexpected.append(
                        f"registration_dropped {job_id}: registrar failed {STREAM_RETRIES + 1} times"
                    )
            self.stream_failures = 0
            self.stream.pop(0)
            if self.roll("stream_duplicate", self.rates.stream_duplicate, job_id):
                self.stream.insert(0, StreamRecord(self.clock.now_ms() + 1_000, job_id, created, image))
                self.at(self.clock.now_ms() + 1_000, self._registrar_poll)
                return

    def _lost_for_good(self, job_id: str, due: int) -> None:
        """The person's write whose record was due at ``due`` reached no registrar."""
        writes = self.person_log.get(job_id, [])
        for index, (at, item, delivered) in enumerate(writes):
            if delivered == due:
                writes[index] = (at, item, None)
