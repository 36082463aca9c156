"""The workers as actors: each SQS message gets its own invocation, driven step by step (begin,
a heartbeat every ``heartbeat_seconds``, the simulated handler, finish), never through
``Worker.execute``, which would use real threads and waits; crashes, zombies and stalls land
between the steps.

A part of ``World`` (sim/world.py), mixed in over the trigger and the detector (sim/ticks.py),
whose manual run races a recovery (``_cancel_races_recovery``).
"""

from __future__ import annotations

from typing import Any

from jobsched.core.job import OverlapPolicy
from jobsched.core.run import run_key
from jobsched.core.writes import RUNS, not_exists
from jobsched.services.messages import parse_run_message
from jobsched.services.worker import FENCED_OUT, HandlerResult, Started

from jobsched_tools.sim.faults import EFFECTS
from jobsched_tools.sim.ticks import TriggerAndDetector
from jobsched_tools.sim.world_state import Invocation


class Workers(TriggerAndDetector):
    """The worker invocations."""

    def _poll(self) -> None:
        while True:
            batch = self.queue.receive(10)
            if not batch:
                return
            if len(batch) > 1 and self.roll("sqs_reorder", self.rates.sqs_reorder):
                self.rng.shuffle(batch)
            for receipt, body in batch:
                self._deliver(receipt, body)

    def _deliver(self, receipt: str, body: dict[str, Any]) -> None:
        message = parse_run_message(body)
        key = message.run_id
        if self.roll("sqs_delay", self.rates.sqs_delay, key):
            self.queue.change_visibility(receipt, self.rng.randrange(5, 120))
            return
        if self.roll("sqs_duplicate", self.rates.sqs_duplicate, key):
            self.queue.inject(body, self.rng.randrange(0, 60))
        if self.roll("worker_crash_before_start", self.rates.worker_crash_before_start, key):
            return  # never deleted: SQS delivers it again after the visibility timeout
        index = self.rng.randrange(len(self.workers))
        worker, name = self.workers[index], f"worker-{index}"
        job = self.by_id[message.job_id]
        inv = Invocation(worker, name, message, receipt, job)
        deadline = worker._clock.now_ms() + self.cfg.lambda_timeout_seconds * 1000
        self._invocations += 1
        ok, begun = self.call(name, lambda: worker.begin(message, deadline), key)
        if not ok:
            return
        if not isinstance(begun, Started):
            self.outcomes[str(begun)] += 1
            self.queue.delete(receipt)
            return
        inv.started = begun
        inv.began_at = self.clock.now_ms()
        if self.roll("worker_crash_after_start", self.rates.worker_crash_after_start, key):
            return
        self.live[key] = inv
        behaviour = job.behaviour
        duration = behaviour.duration_ms + self.rng.randrange(behaviour.jitter_ms)
        limit = min(
            job.definition.timeout_seconds * 1000,
            begun.deadline_ms - self.sched_cfg.deadline_margin_ms - begun.started_at,
        )
        inv.run_for = min(duration, limit)
        inv.timed_out = duration > limit
        if self.roll("worker_crash_mid_handler", self.rates.worker_crash_mid_handler, key):
            inv.crash_at = self.rng.randrange(inv.run_for + 1)
        elif self.roll("zombie_worker", self.rates.zombie_worker, key):
            inv.pause_at = self.rng.randrange(inv.run_for + 1)
            lease = self.sched_cfg.lease_seconds * 1000 + self.sched_cfg.clock_skew_allowance_ms
            inv.pause_for = self.rng.randrange(lease + 70_000, lease + 200_000)
        elif self.roll("worker_stall", self.rates.worker_stall, key):
            inv.stall_at = self.rng.randrange(inv.run_for + 1)
        elif self.rng.random() < self.rates.worker_crash_after_effect and self.faults_on:
            inv.crash_after_effect = True
        self._next_step(inv)

    def _next_step(self, inv: Invocation) -> None:
        hb = self.sched_cfg.heartbeat_seconds * 1000
        now = self.clock.now_ms()
        elapsed = now - inv.began_at
        targets = [elapsed + hb, inv.run_for]
        if inv.crash_at is not None:
            targets.append(inv.crash_at)
        if inv.pause_at is not None:
            targets.append(inv.pause_at)
        if inv.stall_at is not None:
            targets.append(inv.stall_at)
        self.at(inv.began_at + max(elapsed, min(targets)), lambda: self._step(inv))

    def _step(self, inv: Invocation) -> None:
        assert inv.started is not None
        started = inv.started
        key = inv.message.run_id
        elapsed = self.clock.now_ms() - inv.began_at
        if inv.crash_at is not None and elapsed >= inv.crash_at:
            self.log(inv.name, "crashed", key, "mid-handler")
            self._gone(inv)
            return
        if inv.pause_at is not None and elapsed >= inv.pause_at:
            self._gone(inv)
            self.log(inv.name, "zombie.paused", key, f"for {inv.pause_for} ms, token {started.token}")
            inv.pause_at = None
            self.at(self.clock.now_ms() + inv.pause_for, lambda: self._zombie_resume(inv))
            return
        now = self.clock.now_ms()
        if inv.stall_at is not None and elapsed >= inv.stall_at:
            # The whole invocation freezes (a long GC pause, a starved host) past its lease, then
            # goes on where it was: its first act is the heartbeat that is now late.
            inv.stall_at = None
            stall = self.sched_cfg.lease_seconds * 1000 + self.sched_cfg.clock_skew_allowance_ms
            stall += self.rng.randrange(2_000, 20_000)
            inv.stalled_until = now + stall
            inv.run_for += stall
            self.log(inv.name, "worker.stalled", key, f"for {stall} ms")
            self.at(inv.stalled_until, lambda: self._step(inv))
            return
        if inv.stalled_until is not None and now < inv.stalled_until:
            return  # frozen (an interleaved late heartbeat may have ended it early: see below)
        inv.stalled_until = None
        if elapsed >= inv.run_for:
            self._complete(inv)
            return
        if self.roll("worker_crash_in_heartbeat", self.rates.worker_crash_in_heartbeat, key):
            self.store.heartbeat_crash = self.rng.choice(["before", "after"])
        ok, alive = self._heartbeat(inv, started, key)
        self.store.heartbeat_crash = None
        if not ok:
            self._gone(inv)
            return
        if not alive:
            self._finish(inv, FENCED_OUT)
            return
        if started.context.cancelled.is_set():
            # cancel_other: a newer run asked this one to stop; the simulated handler honours
            # ctx.cancelled and returns at once (a failure: it did not finish its work).
            self.counts["cancel_other_stop"] += 1
            self._finish(inv, HandlerResult(False, "stopped: ctx.cancelled"))
            return
        self._next_step(inv)

    def _heartbeat(self, inv: Invocation, started: Started, run_id: str) -> tuple[bool, bool | None]:
        """The worker's heartbeat, and the promise it keeps: a stale holder (its run recovered,
        perhaps started again by another attempt) never renews the lease (design.md, The
        writes: heartbeat): a heartbeat lands only on its own attempt, running, at its token."""
        before = self.store.inner.get(RUNS, run_key(run_id)) or {}
        own = (before.get("status"), before.get("version"), before.get("owner")) == (
            "running",
            started.token,
            started.owner,
        )
        result = self.call(inv.name, lambda: inv.worker.heartbeat(started), run_id)
        after = self.store.inner.get(RUNS, run_key(run_id)) or {}
        if not own and after.get("heartbeat_at") != before.get("heartbeat_at"):
            self.store._violate(
                "stale_heartbeat",
                run_id,
                f"{inv.name}'s heartbeat at token {started.token} landed on the run "
                f"{before.get('status')} at version {before.get('version')}, owner {before.get('owner')}",
            )
        return result

    def _zombie_resume(self, inv: Invocation) -> None:
        """The paused worker wakes up and, believing its handler done, commits straight away
        (``zombie_fails``: its handler failed, and it writes the retry or the failure)."""
        run_id = inv.message.run_id
        if self.roll("zombie_fails", self.rates.zombie_fails, run_id):
            self.log(inv.name, "zombie.resumed", run_id, "its handler failed: retries without a heartbeat")
            self._finish(inv, HandlerResult(False, "simulated handler failure (a zombie's)"), zombie=True)
            return
        self.log(inv.name, "zombie.resumed", run_id, "commits without a heartbeat")
        self._finish(inv, self._result(inv, force_ok=True), zombie=True)

    def _result(self, inv: Invocation, force_ok: bool = False) -> HandlerResult:
        assert inv.started is not None
        if inv.timed_out and not force_ok:
            return HandlerResult(False, f"timed out after {inv.job.definition.timeout_seconds} s")
        if not force_ok and self.rng.random() < inv.job.behaviour.fail_probability:
            return HandlerResult(False, "simulated handler failure")
        context = inv.started.context
        context.staged.clear()
        if inv.job.behaviour.effect == "counter":
            context.stage_update(EFFECTS, {"pk": inv.message.run_id}, add={"count": 1})
        else:
            context.stage_put(
                EFFECTS,
                {
                    "pk": f"{inv.message.run_id}#once",
                    "run_id": inv.message.run_id,
                    "token": context.fencing_token,
                },
                condition=(not_exists("pk", "the effect is applied once per occurrence"),),
            )
        return HandlerResult(True, staged=list(context.staged))

    def _complete(self, inv: Invocation) -> None:
        result = self._result(inv)
        if inv.crash_after_effect and result.ok:
            self._gone(inv)
            self.counts["worker_crash_after_effect"] += 1
            self.log(inv.name, "fault.worker_crash_after_effect", inv.message.run_id)
            return
        self._finish(inv, result)

    def _finish(self, inv: Invocation, result: HandlerResult, zombie: bool = False) -> None:
        assert inv.started is not None
        started = inv.started
        self._gone(inv)
        ok, outcome = self.call(inv.name, lambda: inv.worker.finish(started, result), inv.message.run_id)
        if not ok:
            return
        self.outcomes[("zombie_" if zombie else "") + str(outcome)] += 1
        if zombie:
            self.log(inv.name, "zombie.outcome", inv.message.run_id, str(outcome))
        self.queue.delete(inv.receipt)  # the invocation returned: Lambda deletes the message

    def _gone(self, inv: Invocation) -> None:
        if self.live.get(inv.message.run_id) is inv:
            del self.live[inv.message.run_id]

    def _heartbeat_races_recovery(self, run_id: str) -> None:
        """Called just before the detector's recovery write: a stalled worker's late heartbeat
        may land in between (the race the recovery's lease-as-read condition stops), or a newer
        run of a ``cancel_other`` job may ask the holder to stop (``_cancel_races_recovery``)."""
        self._cancel_races_recovery(run_id)
        inv = self.live.get(run_id)
        now = self.clock.now_ms()
        if inv is None or inv.started is None or inv.stalled_until is None or now >= inv.stalled_until:
            return
        if not self.roll("heartbeat_races_recovery", self.rates.heartbeat_races_recovery, run_id):
            return
        inv.stalled_until = None
        started = inv.started
        self._heartbeat(inv, started, run_id)

    def _cancel_races_recovery(self, run_id: str) -> None:
        """A person's manual run of a ``cancel_other`` job, delivered at once: its walk finds the
        holder still running (its lease lapsed, the recovery not landed yet) and parks behind it,
        asking it to stop, between the detector's read and its write (the race the recovery's
        no-cancel-request condition stops: issue 34 item 3)."""
        if self.rates.cancel_races_recovery <= 0:
            return  # no draw: the default run's random sequence stays as it was
        holder = self.store.inner.get(RUNS, run_key(run_id))
        job = self.by_id.get(str((holder or {}).get("job_id")))
        if holder is None or job is None or holder.get("status") != "running":
            return
        if job.definition.overlap is not OverlapPolicy.CANCEL_OTHER or "cancel_requested" in holder:
            return
        if not self.roll("cancel_races_recovery", self.rates.cancel_races_recovery, run_id):
            return
        self._manual_run(job.definition.job_id)
        self._poll()
