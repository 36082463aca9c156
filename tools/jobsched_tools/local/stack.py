"""The local stack: a moto server with atomic DynamoDB, the template's tables and queues, and the
real Lambda handlers running in separate OS processes (``jobsched_tools.local.proc``).

    stack = LocalStack(StackOptions(workers=3), sink=print_event)
    stack.start()          # moto, provisioning, processes
    stack.kill("worker-1") # SIGKILL, as a crashed Lambda
    stack.restart("worker-1")
    stack.stop()
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jobsched.adapters.aws import make_client
from jobsched.adapters.dynamodb_store import DynamoStore
from jobsched.adapters.sqs_queue import SqsWorkQueue
from jobsched.core.claim_shape import DeployedShape
from jobsched.core.config import SchedulerConfig
from jobsched.runtime.clock import SystemClock
from jobsched.runtime.settings import Settings
from jobsched.services.operations import Operations

from jobsched_tools.deployment import ALLOW_LIST_PARAMETERS
from jobsched_tools.emulator.claim_indexes import deploy_claim_indexes, template_shape
from jobsched_tools.emulator.credentials import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, LOCAL_REGION
from jobsched_tools.emulator.local_moto import LocalMoto, start_moto_server
from jobsched_tools.emulator.provision import Resources, load_template, provision
from jobsched_tools.fakes.memory_telemetry import MemoryTelemetry

STATE_FILE = ".jobsched-local.json"
REGION = LOCAL_REGION

# Settings that make a local stack recover in seconds rather than minutes.
LOCAL_SETTINGS = {
    "SHARD_COUNT": "4",
    "TRIGGER_GROUPS": "1",  # one trigger process claims every shard (--trigger-groups runs more)
    "LOOKAHEAD_SECONDS": "10",
    "LEASE_SECONDS": "6",
    "HEARTBEAT_SECONDS": "2",
    "DISPATCH_LEASE_SECONDS": "10",
    "CLOCK_SKEW_ALLOWANCE_MS": "500",
    "DEADLINE_MARGIN_MS": "3000",
    "TRIGGER_LOOKBACK_SECONDS": "120",
    # Locally an idle detector costs nothing, and a person's first job on a fresh stack is the
    # case its early return cannot see (docs/local.md): always sweep (DetectorIdleReturn false).
    "DETECTOR_IDLE_RETURN": "false",
}
# The detector runs as on AWS: invoked once a minute (EventBridge's finest schedule) with a 60 s
# timeout, each invocation sweeping every --detector-seconds (DETECTOR_SWEEP_SECONDS) and waking
# early for a lapsing lease.
DETECTOR_INVOCATION_SECONDS = 60
# The template's visibility timeout is six Lambda timeouts (minutes); locally a message held by a
# killed worker should come back sooner.
LOCAL_VISIBILITY_TIMEOUT = "30"

EVENTS_KEPT = 1_000

Event = dict[str, Any]
Sink = Callable[[str, Event], None]


@dataclass
class StackOptions:
    workers: int = 3
    triggers: int = 1
    # Above 1: one trigger process per shard group instead (each ticks with its group's event,
    # as the invocations a fan-out tick starts), and TRIGGER_GROUPS set to match.
    trigger_groups: int = 1
    tick_seconds: float = 5.0
    detector_seconds: float = 5.0
    registrar: bool = True
    # Outcome events (docs/operations.md): a bus, a queue subscribed to it with a rule, and the
    # outcome publisher on the runs stream, as a stack with OutcomeEventBusName has them.
    outcomes: bool = False
    port: int = 0
    prefix: str = "jobsched-local"
    settings: dict[str, str] = field(default_factory=dict)
    state_file: Path | None = None


@dataclass
class Proc:
    name: str
    role: str
    args: list[str]
    popen: subprocess.Popen[bytes] | None = None
    kills: int = 0

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None


class LocalStack:
    def __init__(self, options: StackOptions | None = None, sink: Sink | None = None) -> None:
        self.options = options or StackOptions()
        self.sink = sink
        # The latest events (all of them go to the sink): bounded, as `jobsched local` runs for hours.
        self.events: deque[tuple[str, Event]] = deque(maxlen=EVENTS_KEPT)
        self.moto: LocalMoto | None = None
        self.resources: Resources | None = None
        self.ledger_table = f"{self.options.prefix}-ledger"
        self.procs: dict[str, Proc] = {}
        self.env: dict[str, str] = {}
        self._scratch: Path | None = None  # the stream mappings' checkpoints live here
        self.outcome_events_queue_url: str | None = None  # with outcomes: every event put on the bus
        self._lock = threading.Lock()
        self.claim_shape = DeployedShape.LEGACY  # set by ``start``: the tables' claim indexes

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per moto request otherwise
        # lean: without moto_fast the server keeps every table backup of every transaction (3 GB
        # after 15 minutes at the demo's load).
        self.moto = start_moto_server(self.options.port, lean=True)
        base = {
            "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.moto.endpoint_url,
        }
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
            os.environ.setdefault(key, base[key])  # this process's own clients talk to moto too
        dynamodb = make_client("dynamodb", self.moto.endpoint_url, REGION)
        sqs = make_client("sqs", self.moto.endpoint_url, REGION)
        # The claim indexes of the shape a deploy of template.yaml gives (its ClaimShape default),
        # so the local stack and the demo run what ships; CLAIM_SHAPE (a --setting, or the
        # environment every process here inherits) chooses another.
        self.claim_shape = DeployedShape(
            self.options.settings.get("CLAIM_SHAPE")
            or os.environ.get("CLAIM_SHAPE")
            or template_shape(load_template())
        )
        with _env(base):
            self.resources = provision(dynamodb, sqs, self.options.prefix)
            tables = {"state": self.resources.state_table, "runs": self.resources.runs_table}
            deploy_claim_indexes(dynamodb, tables, self.claim_shape)
        sqs.set_queue_attributes(
            QueueUrl=self.resources.work_queue_url, Attributes={"VisibilityTimeout": LOCAL_VISIBILITY_TIMEOUT}
        )
        _ensure_ledger(dynamodb, self.ledger_table)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            **base,
            "JOBS_TABLE": self.resources.jobs_table,
            "STATE_TABLE": self.resources.state_table,
            "RUNS_TABLE": self.resources.runs_table,
            "WORK_QUEUE_URL": self.resources.work_queue_url,
            "JOBS_STREAM_ARN": self.resources.jobs_stream_arn or "",
            "REGISTRAR_FAILURE_QUEUE_URL": self.resources.registrar_failure_queue_url,
            # The demo's jobs stage their effects on the ledger table: the stack's
            # StagedEffectTableArns, as a deploy would list it (any other table is refused).
            "STAGED_EFFECT_TABLE_ARNS": f"arn:aws:dynamodb:{REGION}:*:table/{self.ledger_table}",
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_SERVICE_NAME": "jobsched",
            "POWERTOOLS_METRICS_NAMESPACE": "JobschedLocal",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
            "PYTHONWARNINGS": "ignore",
            **LOCAL_SETTINGS,
            "CLAIM_SHAPE": self.claim_shape.value,
            "DETECTOR_SWEEP_SECONDS": str(max(1, round(self.options.detector_seconds))),
            **self.options.settings,
        }
        if self.options.trigger_groups > 1:
            self.env["TRIGGER_GROUPS"] = str(self.options.trigger_groups)
        if self.options.outcomes:
            self.env.update(self._outcome_bus())
        self.settings()  # a bad setting fails here, naming the variable, not in every child
        if self.options.state_file is not None:
            self.write_state(self.options.state_file)
        o = self.options
        if o.trigger_groups > 1:
            for g in range(o.trigger_groups):
                every = ["--every", str(o.tick_seconds)]
                self.add(
                    "trigger", f"trigger-g{g}", [*every, "--group", str(g), "--groups", str(o.trigger_groups)]
                )
        else:
            for i in range(1, o.triggers + 1):
                self.add("trigger", f"trigger-{i}", ["--every", str(o.tick_seconds)])
        minute = str(DETECTOR_INVOCATION_SECONDS)
        self.add("detector", "detector-1", ["--every", minute, "--timeout", minute])
        if o.registrar and self.resources.jobs_stream_arn:
            self._scratch = Path(tempfile.mkdtemp(prefix="jobsched-local-"))
            self.add(
                "registrar",
                "registrar-1",
                [*registrar_mapping_args(), "--checkpoint", str(self._scratch / "registrar-checkpoint.json")],
            )
        for i in range(1, o.workers + 1):
            self.add("worker", f"worker-{i}", [])
        if o.outcomes and self.resources.runs_stream_arn:
            if self._scratch is None:
                self._scratch = Path(tempfile.mkdtemp(prefix="jobsched-local-"))
            self.add(
                "publisher", "publisher-1", ["--checkpoint", str(self._scratch / "publisher-checkpoint.json")]
            )

    def _outcome_bus(self) -> dict[str, str]:
        """The outcome bus and a queue a rule sends every jobsched event on it to (read it with
        ``aws sqs receive-message``): the publisher's environment."""
        assert self.moto is not None and self.resources is not None
        events = make_client("events", self.moto.endpoint_url, REGION)
        sqs = make_client("sqs", self.moto.endpoint_url, REGION)
        bus = f"{self.options.prefix}-outcomes"
        if not any(b["Name"] == bus for b in events.list_event_buses(NamePrefix=bus).get("EventBuses", [])):
            events.create_event_bus(Name=bus)
        self.outcome_events_queue_url = sqs.create_queue(QueueName=f"{self.options.prefix}-outcome-events")[
            "QueueUrl"
        ]
        arn = sqs.get_queue_attributes(QueueUrl=self.outcome_events_queue_url, AttributeNames=["QueueArn"])
        events.put_rule(
            Name="all-outcomes", EventBusName=bus, EventPattern=json.dumps({"source": ["jobsched"]})
        )
        events.put_targets(
            Rule="all-outcomes",
            EventBusName=bus,
            Targets=[{"Id": "queue", "Arn": arn["Attributes"]["QueueArn"]}],
        )
        return {"OUTCOME_EVENT_BUS_NAME": bus, "RUNS_STREAM_ARN": self.resources.runs_stream_arn or ""}

    def add(self, role: str, name: str, args: list[str]) -> Proc:
        proc = Proc(name, role, args)
        self.procs[name] = proc
        self._spawn(proc)
        return proc

    def _spawn(self, proc: Proc) -> None:
        command = [
            sys.executable,
            "-u",
            "-m",
            "jobsched_tools.local.proc",
            proc.role,
            "--name",
            proc.name,
            *proc.args,
        ]
        proc.popen = subprocess.Popen(
            command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        threading.Thread(target=self._read, args=(proc.name, proc.popen), daemon=True).start()

    def _read(self, name: str, popen: subprocess.Popen[bytes]) -> None:
        assert popen.stdout is not None
        for raw in popen.stdout:
            text = raw.decode("utf-8", "replace").rstrip()
            if not text:
                continue
            try:
                event = json.loads(text)
                if not isinstance(event, dict):
                    event = {"message": text}
            except ValueError:
                event = {"message": text, "event": "local.output"}
            if "_aws" in event:  # an EMF metrics blob
                continue
            event["proc"] = name
            self.events.append((name, event))
            if self.sink is not None:
                self.sink(name, event)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> int | None:
        proc = self.procs[name]
        if not proc.alive():
            return None
        assert proc.popen is not None
        proc.popen.send_signal(sig)
        try:
            proc.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.popen.kill()
            proc.popen.wait()
        proc.kills += 1
        return proc.pid

    def restart(self, name: str) -> None:
        proc = self.procs[name]
        if proc.alive():
            return
        self._spawn(proc)

    def stop_role(self, role: str) -> None:
        for proc in self.procs.values():
            if proc.role == role and proc.alive():
                self.kill(proc.name, signal.SIGTERM)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.alive() and proc.popen is not None:
                proc.popen.terminate()
        deadline = time.monotonic() + 3
        for proc in self.procs.values():
            if proc.popen is not None:
                try:
                    proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.popen.kill()
                    proc.popen.wait()
        if self.moto is not None:
            self.moto.stop()
        if self.options.state_file is not None and self.moto is not None:
            _remove_own_state(self.options.state_file, self.moto.endpoint_url)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ access

    def owner_proc(self, owner: str) -> str | None:
        """The process name a run's ``owner`` (``<name>-<pid>-<n>/<k>``) belongs to."""
        for name, proc in self.procs.items():
            if proc.pid is not None and owner.startswith(f"{name}-{proc.pid}-"):
                return name
        return None

    def settings(self) -> Settings:
        values: dict[str, Any] = {
            k.lower(): v for k, v in self.env.items() if k.lower() in Settings.model_fields
        }
        return Settings.model_validate(values)

    def config(self) -> SchedulerConfig:
        return self.settings().scheduler_config()

    def store(self) -> DynamoStore:
        assert self.moto is not None and self.resources is not None
        client = make_client("dynamodb", self.moto.endpoint_url, REGION)
        return DynamoStore(
            client,
            self.resources.jobs_table,
            self.resources.state_table,
            self.resources.runs_table,
            {self.ledger_table: ("pk",)},
        )

    def operations(self) -> Operations:
        assert self.moto is not None and self.resources is not None
        queue_client = SqsWorkQueue(
            make_client("sqs", self.moto.endpoint_url, REGION), self.resources.work_queue_url
        )
        settings = self.settings()
        return Operations(
            self.store(),
            queue_client,
            MemoryTelemetry(),
            SystemClock(),
            settings.scheduler_config(),
            allow_lists=settings,  # checked at registration as the local functions check them
            deployed=settings.claim_shape,
        )

    def state(self) -> dict[str, Any]:
        assert self.moto is not None and self.resources is not None
        settings = self.settings()
        return {
            "endpoint_url": self.moto.endpoint_url,
            "region": REGION,
            "aws_access_key_id": DUMMY_ACCESS_KEY_ID,
            "aws_secret_access_key": DUMMY_SECRET_ACCESS_KEY,
            "jobs_table": self.resources.jobs_table,
            "state_table": self.resources.state_table,
            "runs_table": self.resources.runs_table,
            "work_queue_url": self.resources.work_queue_url,
            "dead_letter_queue_url": self.resources.dead_letter_queue_url,
            "jobs_stream_arn": self.resources.jobs_stream_arn,
            "outcome_event_bus": self.env.get("OUTCOME_EVENT_BUS_NAME"),
            "outcome_events_queue_url": self.outcome_events_queue_url,
            "ledger_table": self.ledger_table,
            # The CLI's --local writes jobs with the stack's own shard count (see deployment.py).
            "shard_count": self.config().shard_count,
            # The stack's allow-lists: the CLI's --local and the Python API check a job's
            # destination at registration, as this stack's registrar does.
            "allow_lists": {name: list(getattr(settings, name)) for name in ALLOW_LIST_PARAMETERS.values()},
            # The tables' claim indexes: the CLI's --local claims and reads as this stack's functions do.
            "claim_shape": self.claim_shape.value,
            "settings": {
                k: v
                for k, v in self.env.items()
                if k in LOCAL_SETTINGS or k in self.options.settings or k == "CLAIM_SHAPE"
            },
            "pid": os.getpid(),
        }

    def write_state(self, path: Path) -> None:
        path.write_text(json.dumps(self.state(), indent=2) + "\n", encoding="utf-8")


# The registrar's DynamoDB stream event source mapping in template.yaml: the local stack's stream
# reader uses its batch size and retry bound.
REGISTRAR_MAPPING_ID = "RegistrarFunctionJobChanges"
PUBLISHER_MAPPING_ID = "OutcomePublisherFunctionRunChanges"


def mapping_properties(logical_id: str) -> dict[str, Any]:
    """An event source mapping's properties in template.yaml."""
    props: dict[str, Any] = load_template()["Resources"][logical_id]["Properties"]
    return props


def registrar_mapping_args() -> list[str]:
    props = mapping_properties(REGISTRAR_MAPPING_ID)
    return [
        "--batch-size",
        str(int(props.get("BatchSize", 100))),
        "--max-retries",
        str(int(props.get("MaximumRetryAttempts", 10))),
    ]


def read_state(path: Path | str = STATE_FILE) -> dict[str, Any]:
    """The state file a running ``jobsched local`` wrote (endpoint, table and queue names)."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


class StateFileInUse(RuntimeError):
    """The state file names a local stack that is running: another `jobsched local` owns it."""


def claim_state_file(path: Path) -> str | None:
    """May a new local stack write ``path``? Raises ``StateFileInUse`` when the file names a
    running stack (its process is alive and its endpoint answers); returns a note when it names
    one that is gone (the file is taken over), None when there is no file."""
    from jobsched_tools.deployment import is_listening

    try:
        state = read_state(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return f"note: {path} is not a local stack's state file; replacing it"
    pid = state.get("pid")
    endpoint = str(state.get("endpoint_url", ""))
    if isinstance(pid, int) and _process_alive(pid) and endpoint and is_listening(endpoint):
        raise StateFileInUse(
            f"{path} names a local stack that is running (pid {pid}, {endpoint}): use that one "
            "(`jobsched ... --local`), stop it first (Ctrl-C in its terminal), or start this one "
            "in another folder or with --state-file OTHER.json"
        )
    gone = f"pid {pid}, {endpoint}"
    return f"note: {path} named a local stack that is no longer running ({gone}); taking it over"


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    return True


def _remove_own_state(path: Path, endpoint: str) -> None:
    """Remove the state file at exit only if it still names this stack (this process and its
    endpoint): never another stack's."""
    try:
        state = read_state(path)
    except (OSError, ValueError):
        return
    if state.get("pid") == os.getpid() and state.get("endpoint_url") == endpoint:
        path.unlink(missing_ok=True)


def state_env(state: dict[str, Any]) -> dict[str, str]:
    """Environment variables that point jobsched (Settings, boto3) at a running local stack."""
    return {
        "AWS_ENDPOINT_URL": state["endpoint_url"],
        "AWS_DEFAULT_REGION": state["region"],
        "AWS_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY,
        "JOBS_TABLE": state["jobs_table"],
        "STATE_TABLE": state["state_table"],
        "RUNS_TABLE": state["runs_table"],
        "WORK_QUEUE_URL": state["work_queue_url"],
        **state.get("settings", {}),
    }


class _env:
    """Temporarily set environment variables (provisioning reads the region from them)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.saved: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.values.items():
            self.saved[key] = os.environ.get(key)
            os.environ[key] = value

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _ensure_ledger(client: Any, name: str) -> None:
    """The example ledger handler's table: one row per occurrence, key ``pk``."""
    with contextlib.suppress(client.exceptions.ResourceInUseException):
        client.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
