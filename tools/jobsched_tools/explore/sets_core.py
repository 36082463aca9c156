"""The actor sets of the races issue 25 explored (``CORE``, ``MORE``), issue 29's overlap
policies (``WAITING``), issue 34's walk around an overtake (``OVERTAKES``) and the explorer's own
toy protocols (``TOYS``).
"""

from __future__ import annotations

from jobsched_tools.explore.model import MINUTE, SECOND, T0, ActorSet, actor_spec, by_name
from jobsched_tools.explore.programs import counted_twice
from jobsched_tools.explore.world import Budget

CORE: dict[str, ActorSet] = by_name(
    ActorSet("tick-retime", (actor_spec("tick", "tick"), actor_spec("registrar", "registrar", arg="retime"))),
    ActorSet("tick-manual", (actor_spec("tick", "tick"), actor_spec("manual", "manual"))),
    ActorSet(
        "detector-worker",
        (actor_spec("worker", "worker"), actor_spec("detector", "detector")),
        setup="claimed",
        at=T0 + 5 * MINUTE + 33 * SECOND,
        note="the 00:05 run's dispatch lease lapsed as its message arrives",
    ),
    ActorSet("tick-tick-crash", (actor_spec("tickA", "tick"), actor_spec("tickB", "tick"))),
    ActorSet("pause-tick", (actor_spec("registrar", "registrar", arg="pause"), actor_spec("tick", "tick"))),
    ActorSet(
        "manual-retime", (actor_spec("manual", "manual"), actor_spec("registrar", "registrar", arg="retime"))
    ),
)

MORE: dict[str, ActorSet] = by_name(
    ActorSet(
        "tick-retime-detector",
        (
            actor_spec("tick", "tick"),
            actor_spec("registrar", "registrar", arg="retime"),
            actor_spec("detector", "detector"),
        ),
    ),
    ActorSet("delete-tick", (actor_spec("registrar", "registrar", arg="delete"), actor_spec("tick", "tick"))),
    ActorSet(
        "backfill-tick",
        (
            actor_spec("backfill", "backfill", arg=(T0, T0 + 5 * MINUTE + 20 * SECOND)),
            actor_spec("tick", "tick"),
        ),
        at=T0 + 5 * MINUTE + 20 * SECOND,
        note="00:05 came due unclaimed; a backfill of (00:00, 00:05:20] races the late tick",
    ),
    ActorSet(
        "tick-retime-skewed",
        (actor_spec("tick", "tick", offset_ms=3_000), actor_spec("registrar", "registrar", arg="retime")),
        at=T0 + 3 * MINUTE + 27 * SECOND + 500,
        note="the trigger's clock 3 s ahead reaches 00:05 while the registrar's window does not",
    ),
    ActorSet(
        "workers",
        (actor_spec("workerA", "worker"), actor_spec("workerB", "worker")),
        setup="claimed-manual",
        at=T0 + 5 * MINUTE,
        note="00:05's run and a manual run queued behind it reach two workers at once",
    ),
    ActorSet(
        "manual-detector",
        (actor_spec("manual", "manual"), actor_spec("detector", "detector")),
        at=T0 + 7 * MINUTE,
        note="00:05 came due unclaimed (no tick) and is overdue: the detector settles it "
        "while a person's manual run joins the chain",
    ),
    ActorSet(
        "manual-worker-tick",
        (actor_spec("manual", "manual"), actor_spec("tick", "tick"), actor_spec("worker", "worker", arg=2)),
        budget=Budget(crashes=0, reorder=True),
    ),
    ActorSet(
        "completion-delete",
        (
            actor_spec("worker", "worker"),
            actor_spec("detector", "detector"),
            actor_spec("registrar", "registrar", arg="pause"),
        ),
        setup="claimed",
        at=T0 + 5 * MINUTE + SECOND,
        schedule="at(2026-12-01T00:05:00)",
        after_completion="delete",
        note="a one-time job that deletes itself after completion: its run, the reconcile pass's "
        "delete and a person's pause, in any order",
    ),
)

# Issue 29's overlap policies: the same races under buffer_all (every run waits its turn, in
# chain order) and cancel_other (the wait asks the holder to stop).
WAITING: dict[str, ActorSet] = by_name(
    *(
        s
        for overlap in ("buffer_all", "cancel_other")
        for s in (
            ActorSet(
                f"workers-{overlap}",
                (actor_spec("workerA", "worker"), actor_spec("workerB", "worker")),
                setup="claimed-manual",
                at=T0 + 5 * MINUTE,
                overlap=overlap,
                budget=Budget(crashes=1, reorder=True),
                note="00:05's run and a manual run behind it reach two workers at once, in any order",
            ),
            ActorSet(
                f"manual-worker-tick-{overlap}",
                (
                    actor_spec("manual", "manual"),
                    actor_spec("tick", "tick"),
                    actor_spec("worker", "worker", arg=2),
                ),
                overlap=overlap,
                budget=Budget(crashes=0, reorder=True),
            ),
            ActorSet(
                f"detector-worker-{overlap}",
                (actor_spec("worker", "worker"), actor_spec("detector", "detector")),
                setup="claimed-manual",
                at=T0 + 5 * MINUTE + 33 * SECOND,
                overlap=overlap,
                note="00:05's dispatch lease lapsed as its message arrives; a manual run queued behind",
            ),
        )
    )
)

# Issue 34, item 12: the walk's rules around an overtake, with runs that wait and runs that last.
OVERTAKES: dict[str, ActorSet] = by_name(
    ActorSet(
        "backfill-retry-buffer-one",
        (
            actor_spec("backfill", "backfill", arg=(T0 - SECOND, T0)),
            actor_spec("workerB", "worker_of", arg=("backfill", False)),
            actor_spec("workerS", "worker_of", offset_ms=2 * SECOND, arg=("scheduled", True)),
        ),
        setup="claimed",
        at=T0 + 4 * MINUTE + 59 * SECOND,
        overlap="buffer_one",
        note="a backfill of 00:00 overtakes 00:05 (claimed, not yet due) and fails; 00:05, due to "
        "its worker 2 s ahead, waits behind it; the backfill's retry must not wait behind 00:05",
    ),
    ActorSet(
        "overtake-long-run",
        (actor_spec("manual", "manual"), actor_spec("worker", "worker_of", arg=("manual", True))),
        setup="claimed",
        at=T0 + 4 * MINUTE + 30 * SECOND,
        window_end=T0 + 11 * MINUTE,
        handler_ms=6 * MINUTE,
        note="a manual run overtakes 00:05 and ends; 00:05 then runs 6 minutes, past 00:10, "
        "whose walk reaches it only through the manual run (which overtook it)",
    ),
    ActorSet(
        "manuals-skewed",
        (actor_spec("manualA", "manual"), actor_spec("manualB", "manual", offset_ms=SECOND)),
        setup="claimed",
        at=T0 + 4 * MINUTE + 30 * SECOND,
        budget=Budget(crashes=0),
        note="two people trigger manual runs at 00:04:30, one's clock 1 s ahead; 00:05 claimed: "
        "both overtake it, and the one behind is skipped behind the other, which runs (its "
        "instant 1 s ahead of the skip's clock: due all the same)",
    ),
    # W9 (the walk meeting a run twice), the successor explorer's ``ovl-overtaker-recovered-skip``
    # on today's path: 00:10's walk goes from the ended overtaker (W8) to 00:05, skipped for it,
    # whose skip names the overtaker again; W9 goes on before 00:05.
    ActorSet(
        "overtaker-recovered-skip",
        (
            actor_spec("workerS", "worker_of", arg=("scheduled", True)),
            actor_spec("detector", "detector"),
            actor_spec("workerM", "worker_of", arg=("manual", True)),
        ),
        setup="overtaker-running",
        at=T0 + 5 * MINUTE + 10 * SECOND,
        window_end=T0 + 10 * MINUTE,
        budget=Budget(crashes=0),
        note="a manual run overtook 00:05 and its worker died; the detector recovers it as 00:05 "
        "comes due: 00:05 is skipped for it, or waits for nothing; the overtaker runs and ends, "
        "and 00:10 walks through it to 00:05 and back",
    ),
)

# The explorer's own tests: a broken toy protocol it must catch, and its fix it must pass.
TOYS: dict[str, ActorSet] = by_name(
    ActorSet(
        "toy-lost-update",
        (actor_spec("toyA", "toy_increment"), actor_spec("toyB", "toy_increment")),
        budget=Budget(crashes=0),
        check=counted_twice,
    ),
    ActorSet(
        "toy-compare-and-set",
        (actor_spec("toyA", "toy_compare_and_set"), actor_spec("toyB", "toy_compare_and_set")),
        budget=Budget(crashes=0),
        check=counted_twice,
    ),
)

# Issue 34: the newer actors together (the reconcile pass, delete after completion, the waiting
