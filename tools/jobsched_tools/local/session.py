"""A bounded session on the local stack: register jobs whose schedules cover a window, run the
window while a fault policy kills processes, drain, and measure from the records."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.job import JobDefinition

from jobsched_tools.local.measure import Crash, Report, measure, unfinished_runs, unsettled_jobs
from jobsched_tools.local.stack import Event, LocalStack, StackOptions


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class SessionOptions:
    seconds: float = 60.0
    lead_seconds: float = 6.0
    drain_seconds: float = 60.0
    stack: StackOptions = field(default_factory=StackOptions)


JobFactory = Callable[[str, int, int], list[JobDefinition]]  # (ledger table, from ms, to ms)


class Session:
    def __init__(
        self,
        options: SessionOptions,
        jobs: JobFactory,
        on_event: Callable[[Session, str, Event], None] | None = None,
        on_step: Callable[[Session], None] | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.options = options
        self.jobs = jobs
        self.on_event = on_event
        self.on_step = on_step
        self.say = say
        self.stack = LocalStack(options.stack, sink=self._sink)
        self.events: list[Event] = []
        self.crashes: list[Crash] = []
        self.definitions: list[JobDefinition] = []
        self.registered_at: dict[str, int] = {}
        self.window_from_ms = 0
        self.window_to_ms = 0
        self.phase = "starting"
        self._lock = threading.Lock()

    def _sink(self, name: str, event: Event) -> None:
        with self._lock:
            self.events.append(event)
            if self.on_event is not None:
                self.on_event(self, name, event)

    def kill(self, name: str, run_id: str | None = None) -> Crash | None:
        pid = self.stack.procs[name].pid
        at = now_ms()
        if self.stack.kill(name) is None:
            return None
        crash = Crash(name, pid, run_id, at)
        self.crashes.append(crash)
        return crash

    def _wait_ready(self, timeout_s: float) -> None:
        """Until every process has loaded its handler (a Lambda cold start takes a second or two
        here), so that the window's first occurrences are not measured against start-up."""
        until = time.monotonic() + timeout_s
        while time.monotonic() < until:
            with self._lock:
                ready = {e.get("proc") for e in self.events if e.get("event") == "local.ready"}
            if all(name in ready for name in self.stack.procs):
                return
            time.sleep(0.2)

    def run(self) -> Report:
        stack = self.stack
        stack.start()
        try:
            self._wait_ready(60.0)
            ops = stack.operations()
            self.window_from_ms = (now_ms() // 1000 + int(self.options.lead_seconds)) * 1000
            self.window_to_ms = self.window_from_ms + int(self.options.seconds * 1000)
            assert stack.ledger_table
            self.definitions = self.jobs(stack.ledger_table, self.window_from_ms, self.window_to_ms)
            for definition in self.definitions:
                outcome = ops.register(definition)
                self.registered_at[definition.job_id] = now_ms()
                d = definition
                self.say(f"registered {d.job_id:<16} {d.schedule:<28} {d.timezone:<18} -> {outcome.value}")
                if self.registered_at[d.job_id] > self.window_from_ms:
                    self.say("  (registered after the window opened: due from then on, not before)")
            self.phase = "window"
            while now_ms() < self.window_to_ms:
                if self.on_step is not None:
                    self.on_step(self)
                time.sleep(0.25)
            self.phase = "drain"
            self.say("window over: draining (waiting until no run is pending or running)")
            store = stack.store()
            job_ids = [d.job_id for d in self.definitions]
            drain_until = time.monotonic() + self.options.drain_seconds
            settle_until = time.monotonic() + 3
            while time.monotonic() < drain_until:
                if self.on_step is not None:
                    self.on_step(self)
                if (
                    time.monotonic() > settle_until
                    and unsettled_jobs(store, job_ids) == 0
                    and unfinished_runs(store, job_ids) == 0
                ):
                    break
                time.sleep(1)
            self.phase = "measure"
            with self._lock:
                events = list(self.events)
            return measure(
                store,
                self.definitions,
                self.window_from_ms,
                self.window_to_ms,
                events,
                self.crashes,
                stack.ledger_table,
                self.registered_at,
            )
        finally:
            stack.stop()


def event_name(event: dict[str, Any]) -> str:
    return str(event.get("event") or event.get("message") or "")
