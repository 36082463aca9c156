"""Building the services for a Lambda function (or the local stack) from Settings.

Each function uses one service, so the services are imported where they are built, not here: a
function's cold start imports its own service (its app.py names it) and none of the other four.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics

from jobsched.adapters.aws import Session, make_client, new_session
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.adapters.sqs_queue import SqsWorkQueue
from jobsched.core.config import SchedulerConfig
from jobsched.runtime.clock import SystemClock, sleep_ms
from jobsched.runtime.settings import Settings
from jobsched.runtime.telemetry import PowertoolsTelemetry, bind_run
from jobsched.targets.builtin import register_builtins
from jobsched.targets.registry import EffectTables, HandlerRegistry, RunLogger

if TYPE_CHECKING:
    from jobsched.core.clock import Clock
    from jobsched.ports import GroupInvoker, Telemetry
    from jobsched.services.dead_letters import DeadLetterSender
    from jobsched.services.detector import MissDetector
    from jobsched.services.fanout import TriggerInvocation
    from jobsched.services.operations import Operations
    from jobsched.services.outcomes import OutcomePublisher
    from jobsched.services.registrar import Registrar
    from jobsched.services.trigger import Trigger
    from jobsched.services.waking import DetectorWake
    from jobsched.services.worker import Worker

# The service (the EMF metrics' one dimension, and every log line's `service`) is the stack's name
# in AWS (template.yaml sets POWERTOOLS_SERVICE_NAME to it), so two stacks in one account and
# region never add into each other's metrics or alarms; "jobsched" where no stack sets it.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "jobsched"
NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Jobsched"
logger = Logger(service=SERVICE)
metrics = Metrics(namespace=NAMESPACE, service=SERVICE)
registry = HandlerRegistry()


@dataclass
class App:
    settings: Settings
    _group_invoker: GroupInvoker | None = None

    @cached_property
    def cfg(self) -> SchedulerConfig:
        return self.settings.scheduler_config()

    @cached_property
    def session(self) -> Session:
        """One boto3 session for the function's clients (a session per client costs a cold start
        about 40 ms a client, loading botocore's data again)."""
        return new_session()

    @cached_property
    def store(self) -> DynamoStore:
        return DynamoStore(
            make_client("dynamodb", session=self.session),
            self.settings.jobs_table,
            self.settings.state_table,
            self.settings.runs_table,
        )

    @cached_property
    def queue(self) -> SqsWorkQueue:
        return SqsWorkQueue(make_client("sqs", session=self.session), self.settings.work_queue_url)

    @cached_property
    def dead_letter_sender(self) -> DeadLetterSender:
        """The jobs' dead-letter queues (issue 38), through the SQS client of the work queue."""
        from jobsched.adapters.dead_letter_queue import SqsDeadLetterSender

        return SqsDeadLetterSender(self.queue.client)

    @cached_property
    def telemetry(self) -> Telemetry:
        return PowertoolsTelemetry(logger, metrics)

    def outcome_publisher(self) -> OutcomePublisher:
        """The outcome publisher's service: the runs stream's terminal writes onto the outcome
        bus (services/outcomes.py). The function exists only in a stack with a bus."""
        from jobsched.adapters.outcome_events import EventBridgeOutcomeSink
        from jobsched.services.outcomes import OutcomePublisher

        bus = self.settings.outcome_event_bus_name
        if not bus:
            raise ValueError("OUTCOME_EVENT_BUS_NAME is blank: the outcome publisher needs a bus to put on")
        sink = EventBridgeOutcomeSink(make_client("events", session=self.session), bus)
        return OutcomePublisher(sink, self.telemetry)

    def trigger(self) -> Trigger:
        from jobsched.services.trigger import Trigger

        clock = SystemClock()
        return Trigger(
            self.store,
            self.queue,
            self.telemetry,
            clock,
            self.cfg,
            registrar=self.inline_registrar(clock),
            # The stack's claim indexes (template.yaml's ClaimShape): a successor stack claims from
            # ``due`` alone; a migrating one reads the switch once per invocation (issue 37).
            deployed=self.settings.claim_shape,
        )

    def trigger_invocation(self) -> TriggerInvocation:
        """The trigger function's service: a fan-out tick or one shard group's tick."""
        from jobsched.services.fanout import TriggerInvocation

        return TriggerInvocation(self.trigger(), self.group_invoker, self.telemetry, self.cfg)

    def group_invoker(self) -> GroupInvoker:
        from jobsched.adapters.lambda_invoker import LambdaGroupInvoker

        if self._group_invoker is None:
            self._group_invoker = LambdaGroupInvoker(
                make_client("lambda"), self.settings.trigger_function_arn
            )
        return self._group_invoker

    def inline_registrar(self, clock: Clock) -> Registrar:
        """The registrar the trigger and the miss detector apply inline, when a job item changed
        unseen (services/loaded_job.py) and in the reconcile pass: it checks destinations against
        the stack's allow-lists as the registrar function does (services/allow_lists.py; not the
        handlers: these functions ship without the handlers layer), so that a job is judged alike
        whichever function meets its change first, and an invalid job the lists allow now is
        registered (services/reconciler.py, _revalidate). It leaves the report on the job item to
        the registrar function (least privilege: they may only read job items)."""
        from jobsched.services.registrar import Registrar

        return Registrar(
            self.store,
            self.telemetry,
            clock,
            self.cfg,
            self.queue,
            report=False,
            allow_lists=self.settings,
            deployed=self.settings.claim_shape,
        )

    def detector(self) -> MissDetector:
        from jobsched.services.detector import MissDetector

        clock = SystemClock()
        return MissDetector(
            self.store,
            self.queue,
            self.telemetry,
            clock,
            self.cfg,
            registrar=self.inline_registrar(clock),
            dead_letter_sender=self.dead_letter_sender,
            dead_letter_queues=self.settings.allowed_dead_letter_queue_arns,
            deployed=self.settings.claim_shape,
        )

    def registrar(self) -> Registrar:
        from jobsched.services.registrar import Registrar

        register_builtins(registry, self.settings)
        trigger = self.trigger()
        return Registrar(
            self.store,
            self.telemetry,
            SystemClock(),
            self.cfg,
            self.queue,
            known_targets=registry.names(),
            claim_now=lambda job_id: trigger.claim_now(job_id, "registrar"),
            detector_wake=self.detector_wake,
            allow_lists=self.settings,
            deployed=self.settings.claim_shape,
        )

    @cached_property
    def detector_wake(self) -> DetectorWake | None:
        """One per sandbox, so that its once-per-20-s limit holds across invocations."""
        from jobsched.adapters.lambda_invoker import LambdaDetectorWaker
        from jobsched.services.waking import DetectorWake

        if not self.settings.detector_function_arn:
            return None
        waker = LambdaDetectorWaker(
            make_client("lambda", session=self.session), self.settings.detector_function_arn
        )
        return DetectorWake(waker, self.telemetry, SystemClock(), self.cfg)

    def operations(self) -> Operations:
        from jobsched.services.operations import Operations

        return Operations(
            self.store,
            self.queue,
            self.telemetry,
            SystemClock(),
            self.cfg,
            allow_lists=self.settings,
            deployed=self.settings.claim_shape,
        )

    def worker(self, worker_id: str) -> Worker:
        from jobsched.services.worker import Worker

        register_builtins(registry, self.settings)
        return Worker(
            self.store,
            self.queue,
            self.telemetry,
            SystemClock(),
            self.cfg,
            registry,
            worker_id,
            logger_for=run_logger,
            sleep_ms=sleep_ms,
            # Always the stack's list, empty or not: on AWS the role is granted nothing else.
            effect_tables=EffectTables(self.settings.staged_effect_table_arns),
            dead_letter_sender=self.dead_letter_sender,
            dead_letter_queues=self.settings.allowed_dead_letter_queue_arns,
            # Worker adoption (the successor claim's HC3): it acts only on a run that its refused
            # start read ``scheduled``, which exists only on successor jobs, so on a legacy stack
            # it never fires and reads nothing (worker_overlap.OverlapSettler._adopted).
            adopt_scheduled=True,
        )


def run_logger(run_id: str) -> RunLogger:
    return bind_run(logger, run_id)


_app: App | None = None


def app() -> App:
    """One App per execution environment: clients and settings are reused across invocations."""
    global _app
    if _app is None:
        _app = App(Settings.from_env())
    return _app


def reset_app() -> None:
    """For tests and the local stack, which change the environment between runs."""
    global _app
    _app = None
