"""The protocol's invariants as code (issue 25): pure checks over the tables as they are.

``check`` takes the state and runs tables (items, as the store holds them) and, optionally, the
work queue's messages, and returns every violation, each naming its invariant and the job or
run. ``Tokens`` carries the fencing tokens seen by earlier checks, so a caller that checks after
every write (the explorer, the chaos simulation) also learns whether a token went down.

The invariants (docs/design.md):

- ``one_record_per_occurrence``: a record's key is its occurrence's (``job@instant`` for every
  kind but manual), and no two records of a job stand for one scheduled instant;
- ``token_decreased``: a run's ``version`` (its fencing token) never goes down;
- ``unreachable_run``: every pending, running or buffered run is reachable from its job's chain
  end (the state's ``latest_run_id``, following ``after_run_id``), so a start's walk sees it;
- ``stale_message_link``: a queued message that can still start its run (its version is the
  run's, the run is pending) carries the run's current link (``after_run_id``);
- ``finished_without_walk``: a finished run that never started (no ``first_started_at``) and
  has a predecessor passes the walk on (``core/policies.chain_step``); ending it there frees
  the turn while the predecessor may still run;
- ``record_beyond_position``: no scheduled or catch-up record lies beyond the state's position
  (after ``last_scheduled_at``, or at or after an active state's ``next_run_at``), except a
  change's ``cancelled`` fence; and an active state's ``next_run_at`` is after its
  ``last_scheduled_at``;
- ``skipped_under_buffer_all``: a run under ``buffer_all`` is never skipped for overlap: it
  waits its turn (issue 29);
- ``waits_cycle``: the waits-for relation is acyclic (issue 34). An unfinished run waits for the
  run it is buffered behind (``buffered``, ``blocked_by``), and, until it starts, for the run
  that overtook it (``overtaken_by``: its start is refused while that run is unfinished). A run
  that waits, directly or through others, for a run that waits for it never starts: nothing
  promotes a buffered run before its holder ends (``waits_for``).

One invariant is of a write, not of the tables (``owed_promotion``, checked on each run a write
changed, with its image before): I9, a named wait is owed its promotion (issue 34). A run its
holder names (``buffered_next``) starts to wait only behind an unfinished holder
(``wait_behind_ended``), and stays named while it waits behind it (``wait_unnamed``): so the
holder's end promotes it at once (README, ``cancel_other``: "the new run starts when it
ended"), not the miss detector a dispatch lease later. The tables alone cannot tell: between a
holder's end and its promoter's write, a named run waits behind an ended holder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobsched.core.policies import UNFINISHED, chain_step
from jobsched.core.run import RunKind, RunStatus, run_id_for

Item = Mapping[str, Any]

ONE_RECORD = "one_record_per_occurrence"
TOKEN_DECREASED = "token_decreased"
UNREACHABLE = "unreachable_run"
STALE_MESSAGE = "stale_message_link"
NO_WALK = "finished_without_walk"
BEYOND_POSITION = "record_beyond_position"
SKIPPED_BUFFER_ALL = "skipped_under_buffer_all"
WAITS_ACYCLIC = "waits_cycle"
WAIT_BEHIND_ENDED = "wait_behind_ended"
WAIT_UNNAMED = "wait_unnamed"
ALL = (
    ONE_RECORD,
    TOKEN_DECREASED,
    UNREACHABLE,
    STALE_MESSAGE,
    NO_WALK,
    BEYOND_POSITION,
    SKIPPED_BUFFER_ALL,
    WAITS_ACYCLIC,
)

# Runs that ran or were decided at their start: finished. A missed or cancelled record never
# joins the chain (it holds no turn and links nothing).
ENDED = frozenset({RunStatus.SUCCEEDED.value, RunStatus.FAILED.value, RunStatus.SKIPPED.value})
SCHEDULED_KINDS = frozenset({RunKind.SCHEDULED.value, RunKind.CATCHUP.value})
# Bound on a chain walk here (the chain of a small world is short; a cycle must not hang us).
WALK_BOUND = 10_000


@dataclass(frozen=True)
class Violation:
    invariant: str
    key: str  # the job or run id
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant} {self.key}: {self.detail}"


@dataclass
class Tokens:
    """The last fencing token seen per run, across checks."""

    seen: dict[str, int] = field(default_factory=dict)


def check(
    states: Iterable[Item],
    runs: Iterable[Item],
    messages: Iterable[Item] | None = None,
    tokens: Tokens | None = None,
    only: Iterable[str] | None = None,
) -> list[Violation]:
    """Every violation in the tables. ``states``: the state table's job states (definition
    snapshots, whose key holds ``#``, are skipped); ``runs``: run items; ``messages``: queued
    message bodies (``RunMessage`` fields); ``tokens``: updated in place; ``only``: the
    invariants to check (default all)."""
    wanted = frozenset(only) if only is not None else frozenset(ALL)
    by_job: dict[str, dict[str, Item]] = {}
    by_id: dict[str, Item] = {}
    for run in runs:
        by_job.setdefault(str(run.get("job_id")), {})[str(run["run_id"])] = run
        by_id[str(run["run_id"])] = run
    job_states = {str(s["job_id"]): s for s in states if "#" not in str(s.get("job_id"))}
    found: list[Violation] = []
    if ONE_RECORD in wanted:
        found += _one_record(by_job)
    if TOKEN_DECREASED in wanted and tokens is not None:
        found += _tokens(by_id, tokens)
    if UNREACHABLE in wanted:
        found += _reachable(job_states, by_job)
    if STALE_MESSAGE in wanted and messages is not None:
        found += _messages(messages, by_id)
    if NO_WALK in wanted:
        found += _walked(by_id)
    if BEYOND_POSITION in wanted:
        found += _position(job_states, by_job)
    if SKIPPED_BUFFER_ALL in wanted:
        found += [
            Violation(SKIPPED_BUFFER_ALL, run_id, f"skipped behind {run.get('blocked_by')}")
            for run_id, run in sorted(by_id.items())
            if run.get("overlap") == "buffer_all" and run.get("status") == RunStatus.SKIPPED.value
        ]
    if WAITS_ACYCLIC in wanted:
        found += _acyclic(by_id)
    return found


def waits_for(run: Item, runs: Mapping[str, Item]) -> list[str]:
    """The unfinished runs ``run`` waits for: the one it is buffered behind, and the one that
    overtook it (until its start clears the mark, which it can only do once that run ended)."""
    if run.get("status") not in UNFINISHED:
        return []
    edges = []
    if run.get("status") == RunStatus.BUFFERED.value and run.get("blocked_by"):
        edges.append(str(run["blocked_by"]))
    if run.get("overtaken_by") and str(run["overtaken_by"]) not in edges:
        edges.append(str(run["overtaken_by"]))
    return [other for other in edges if runs.get(other, {}).get("status") in UNFINISHED]


def waits_cycles(runs: Mapping[str, Item], starts: Iterable[str] | None = None) -> list[list[str]]:
    """The cycles of the waits-for relation (``waits_for``) reachable from ``starts`` (default:
    every run), each as the run ids on it in waiting order (depth first, colouring the runs)."""
    finished: set[str] = set()
    on_path: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(runs) if starts is None else starts:
        if start in finished or start not in runs:
            continue
        path = [start]
        on_path.add(start)
        stack = [iter(waits_for(runs[start], runs))]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                finished.add(path[-1])
                on_path.discard(path.pop())
                stack.pop()
            elif following in on_path:
                cycles.append(path[path.index(following) :])
            elif following not in finished and following in runs:
                path.append(following)
                on_path.add(following)
                stack.append(iter(waits_for(runs[following], runs)))
    return cycles


def _acyclic(by_id: Mapping[str, Item]) -> list[Violation]:
    return [
        Violation(WAITS_ACYCLIC, cycle[0], "waits for " + " -> ".join([*cycle[1:], cycle[0]]))
        for cycle in waits_cycles(by_id)
    ]


def _one_record(by_job: Mapping[str, Mapping[str, Item]]) -> list[Violation]:
    found: list[Violation] = []
    for job_id, runs in by_job.items():
        instants: dict[int, str] = {}
        for run_id, run in runs.items():
            if not run_id.startswith(f"{job_id}@"):
                found.append(Violation(ONE_RECORD, run_id, f"keyed under job {job_id}"))
            if run.get("kind") == RunKind.MANUAL.value:
                continue
            at = int(run["scheduled_at"])
            if run_id != run_id_for(job_id, at):
                found.append(
                    Violation(ONE_RECORD, run_id, f"not its occurrence's key ({run_id_for(job_id, at)})")
                )
            elif at in instants:
                found.append(
                    Violation(ONE_RECORD, run_id, f"a second record of its instant ({instants[at]})")
                )
            instants.setdefault(at, run_id)
    return found


def _tokens(by_id: Mapping[str, Item], tokens: Tokens) -> list[Violation]:
    found: list[Violation] = []
    for run_id, run in by_id.items():
        version = int(run.get("version") or 0)
        before = tokens.seen.get(run_id)
        if before is not None and version < before:
            found.append(Violation(TOKEN_DECREASED, run_id, f"version {before} -> {version}"))
        tokens.seen[run_id] = max(version, before or 0)
    return found


def chain_of(end: str | None, runs: Mapping[str, Item]) -> list[str]:
    """The run ids reachable from ``end`` along ``after_run_id`` (the chain's links)."""
    seen: list[str] = []
    run_id = end
    while run_id is not None and run_id not in seen and len(seen) < WALK_BOUND:
        seen.append(run_id)
        run = runs.get(run_id)
        run_id = None if run is None else run.get("after_run_id")
    return seen


def _reachable(states: Mapping[str, Item], by_job: Mapping[str, Mapping[str, Item]]) -> list[Violation]:
    found: list[Violation] = []
    for job_id, state in states.items():
        runs = by_job.get(job_id, {})
        chain = set(chain_of(state.get("latest_run_id"), runs))
        for run_id, run in sorted(runs.items()):
            if run.get("status") in UNFINISHED and run_id not in chain:
                found.append(
                    Violation(
                        UNREACHABLE,
                        run_id,
                        f"{run.get('status')} but not in the chain from {state.get('latest_run_id')}",
                    )
                )
    return found


def _messages(messages: Iterable[Item], by_id: Mapping[str, Item]) -> list[Violation]:
    found: list[Violation] = []
    for body in messages:
        run = by_id.get(str(body.get("run_id")))
        if run is None or run.get("status") != RunStatus.PENDING.value:
            continue  # starts nothing
        if int(body.get("version") or 0) != int(run.get("version") or 0):
            continue  # a stale token: its start fails
        if body.get("after_run_id") != run.get("after_run_id"):
            found.append(
                Violation(
                    STALE_MESSAGE,
                    str(run["run_id"]),
                    f"message links {body.get('after_run_id')}, the run {run.get('after_run_id')}",
                )
            )
    return found


def _walked(by_id: Mapping[str, Item]) -> list[Violation]:
    found: list[Violation] = []
    for run_id, run in sorted(by_id.items()):
        if run.get("status") not in ENDED or run.get("first_started_at") is not None:
            continue
        if run.get("after_run_id") is None:
            continue  # nothing before it: ending the walk frees nothing held
        _, passes_to = chain_step(run)
        if passes_to is None:
            found.append(
                Violation(
                    NO_WALK,
                    run_id,
                    f"{run.get('status')} without starting, and the walk ends at it "
                    f"(its predecessor {run.get('after_run_id')} is never read)",
                )
            )
    return found


def _position(states: Mapping[str, Item], by_job: Mapping[str, Mapping[str, Item]]) -> list[Violation]:
    found: list[Violation] = []
    for job_id, state in states.items():
        last = state.get("last_scheduled_at")
        next_at = state.get("next_run_at") if state.get("status") == "active" else None
        if next_at is not None and last is not None and int(next_at) <= int(last):
            found.append(
                Violation(BEYOND_POSITION, job_id, f"next_run_at {next_at} <= last_scheduled_at {last}")
            )
        for run_id, run in sorted(by_job.get(job_id, {}).items()):
            if run.get("kind") not in SCHEDULED_KINDS or run.get("status") == RunStatus.CANCELLED.value:
                continue
            at = int(run["scheduled_at"])
            if last is None or at > int(last):
                found.append(Violation(BEYOND_POSITION, run_id, f"after last_scheduled_at {last}"))
            elif next_at is not None and at >= int(next_at):
                found.append(Violation(BEYOND_POSITION, run_id, f"at or after next_run_at {next_at}"))
    return found


def owed_promotion(before: Item | None, after: Item, read: Callable[[str], Item | None]) -> list[Violation]:
    """I9 on one run a write changed (``before``, ``after``: its images; ``read``: a run by id, as
    the write left it). A wait this write made that its holder names must be behind an
    unfinished holder; a holder whose ``buffered_next`` this write moved must not leave the run
    it named waiting behind it unnamed."""
    found: list[Violation] = []
    run_id = str(after["run_id"])
    newly_waits = after.get("status") == RunStatus.BUFFERED.value and (before or {}).get(
        "version"
    ) != after.get("version")
    if newly_waits and after.get("blocked_by"):
        holder = read(str(after["blocked_by"]))
        if (
            holder is not None
            and holder.get("buffered_next") == run_id
            and holder.get("status") not in UNFINISHED
        ):
            found.append(
                Violation(
                    WAIT_BEHIND_ENDED,
                    run_id,
                    f"named by {holder['run_id']}, which had ended ({holder.get('status')})",
                )
            )
    named = (before or {}).get("buffered_next")
    if named is not None and after.get("buffered_next") != named:
        waiting = read(str(named)) or {}
        if waiting.get("status") == RunStatus.BUFFERED.value and waiting.get("blocked_by") == run_id:
            found.append(
                Violation(
                    WAIT_UNNAMED,
                    str(named),
                    f"waits behind {run_id}, which now names {after.get('buffered_next')}",
                )
            )
    return found
