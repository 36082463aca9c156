"""The actor sets of issue 34's promises (``PROMISES``: the reconcile pass, delete after
completion, the waiting policies' recovery, max_runs, pause on failure, late stream records,
issue 38's dead letters) and of the fencing parts' races (``FENCES``); each promise's checker
able to fail (tests/sim/test_switches.py).
"""

from __future__ import annotations

from jobsched_tools.explore.build import RESUMED_AT
from jobsched_tools.explore.model import MINUTE, SECOND, T0, ActorSet, actor_spec, by_name
from jobsched_tools.explore.world import Budget

# Issue 34: the newer actors together (the reconcile pass, delete after completion, the waiting
# policies' recovery, max_runs), each promise's checker able to fail (tests/sim/test_switches.py).
PROMISES: dict[str, ActorSet] = by_name(
    ActorSet(
        "reconcile-stream-tick",
        (
            actor_spec("detector", "detector"),
            actor_spec("stream", "stream", arg=T0 + 2 * MINUTE + 30 * SECOND),
            actor_spec("tick", "tick"),
        ),
        setup="edited-unapplied",
        note="a re-time's stream record comes late, as the reconcile pass applies the change and "
        "a tick claims",
    ),
    ActorSet(
        "reconcile-edit-tick",
        (
            actor_spec("detector", "detector"),
            actor_spec("registrar", "registrar", arg="retime:rate(4 minutes)"),
            actor_spec("tick", "tick"),
        ),
        setup="edited-unapplied",
        note="a second edit (and its record) after a lost one, as the reconcile pass applies the "
        "first and a tick claims",
    ),
    ActorSet(
        "completion-manual",
        (actor_spec("worker", "worker"), actor_spec("detector", "detector"), actor_spec("manual", "manual")),
        setup="claimed",
        at=T0 + 5 * MINUTE + SECOND,
        schedule="at(2026-12-01T00:05:00)",
        after_completion="delete",
        note="a one-time job that deletes itself after completion: its run, the reconcile pass's "
        "delete and a person's manual run, in any order",
    ),
    *(
        ActorSet(
            f"holder-dead-{overlap}",
            (
                actor_spec("detector", "detector"),
                actor_spec("workerA", "worker"),
                actor_spec("workerB", "worker"),
            ),
            setup="held-dead",
            at=T0 + 5 * MINUTE + 40 * SECOND,
            overlap=overlap,
            budget=Budget(crashes=1, reorder=True),
            note="00:05's worker died while it ran; the manual run waits behind it (cancel_other: "
            "and asked it to stop); its lease lapsed: the detector recovers it as two workers take "
            "what is sent",
        )
        for overlap in ("cancel_other", "buffer_all")
    ),
    ActorSet(
        "max-runs-backfill",
        (
            actor_spec("backfill", "backfill", arg=(T0, T0 + 5 * MINUTE + 20 * SECOND)),
            actor_spec("tick", "tick"),
            actor_spec("manual", "manual"),
        ),
        at=T0 + 5 * MINUTE + 20 * SECOND,
        job=(("max_runs", 2),),
        note="a job limited to 2 scheduled runs: 00:05 came due unclaimed; a backfill of it, a "
        "late tick and a manual run",
    ),
)

# pause_on_failure: a run failing for good (one attempt) pauses the job, racing a person's write.
FAILING = (("pause_on_failure", True), ("retry", {"max_attempts": 1}))
PROMISES.update(
    by_name(
        *(
            ActorSet(
                f"pause-{change}",
                (actor_spec("worker", "failing_worker"), actor_spec("person", "person", arg=change)),
                setup="claimed",
                at=T0 + 5 * MINUTE,
                job=FAILING,
                budget=Budget(crashes=0),
                note="00:05's run fails for good and pauses the job, as a person edits or deletes it",
            )
            for change in ("edit", "edit-map", "delete")
        ),
        ActorSet(
            "backfills-missed",
            (
                actor_spec("backfillA", "backfill", arg=(T0, T0 + 7 * MINUTE)),
                actor_spec("worker", "worker"),
                actor_spec("backfillB", "backfill", arg=(T0, T0 + 7 * MINUTE)),
            ),
            setup="missed",
            at=T0 + 7 * MINUTE + 30 * SECOND,
            window_end=T0 + 7 * MINUTE,
            job=(("misfire", {"policy": "skip"}),),
            budget=Budget(crashes=0),
            note="00:05 was recorded missed; two people backfill it at once while a worker takes "
            "what is sent (operations.md: each missed record becomes its run, at most once)",
        ),
        *(
            ActorSet(
                name,
                (actor_spec("registrar", "registrar", arg="reput"), actor_spec("tick", "tick")),
                setup="ran-deleted",
                at=T0 + 7 * MINUTE,
                window_end=T0 + 12 * MINUTE,
                job=job,
                budget=Budget(crashes=0),
                note="a job ran 00:05 and was deleted; registered again, it starts a new life "
                "(operations.md: to bring a deleted job back, register it again)",
            )
            for name, job in (("reregister", ()), ("max-runs-reregister", (("max_runs", 1),)))
        ),
        ActorSet(
            "tick-retime-earlier",
            (actor_spec("tick", "tick"), actor_spec("registrar", "registrar", arg="retime:rate(2 minutes)")),
            at=T0 + 3 * MINUTE + 40 * SECOND,
            budget=Budget(crashes=0),
            note="a tick claims 00:05 at 00:03:40 as a person re-times the job to every 2 minutes: "
            "the new timing's first occurrence (00:04) comes before the claimed one",
        ),
        ActorSet(
            "bulk-pause-tick",
            (actor_spec("bulk", "bulk", arg="pause"), actor_spec("tick", "tick")),
            job=(("group", "g"),),
            note="a person pauses the job's group (a bulk operation) as a tick claims",
        ),
        ActorSet(
            "report-delete",
            (
                actor_spec("stream", "stream", arg=T0 + 2 * MINUTE + 30 * SECOND),
                actor_spec("person", "person", arg="delete"),
            ),
            setup="edited-unapplied",
            budget=Budget(crashes=0),
            note="a late record's registration writes its report as the person deletes the job",
        ),
    )
)

# Issue 34: the last condition parts no set reached (tests/sim/test_switches.py): a late stream
# record's redate racing a claim and a backfill, and a stale message walking a recovered run.
PROMISES.update(
    by_name(
        ActorSet(
            "redate-tick",
            (actor_spec("record", "late_record", arg=RESUMED_AT), actor_spec("tick", "tick")),
            setup="resumed-reconciled",
            at=T0 + 9 * MINUTE + 10 * SECOND,
            window_end=T0 + 11 * MINUTE,
            budget=Budget(crashes=0),
            note="a resume's stream record comes after the reconcile pass applied it, as a tick "
            "claims 00:10: the record settles 00:05 (due after the person's write) behind the "
            "chain's end as the tick left it",
        ),
        ActorSet(
            "redate-backfill",
            (
                actor_spec("backfill", "backfill", arg=(RESUMED_AT, T0 + 5 * MINUTE + 20 * SECOND)),
                actor_spec("record", "late_record", arg=RESUMED_AT),
            ),
            setup="resumed-reconciled",
            at=T0 + 7 * MINUTE,
            window_end=T0 + 11 * MINUTE,
            budget=Budget(crashes=0),
            note="a person backfills 00:05 (the reconcile pass dated the resume after it) as the "
            "resume's late record settles it: one record, one run",
        ),
        ActorSet(
            "redate-reconcile-tick",
            (
                actor_spec("detector", "detector"),
                actor_spec("record", "late_record", arg=RESUMED_AT),
                actor_spec("tick", "tick"),
            ),
            setup="resumed-suspected",
            at=T0 + 8 * MINUTE + 40 * SECOND,
            window_end=T0 + 11 * MINUTE,
            budget=Budget(crashes=0),
            note="a resume's stream record comes late, as the reconcile pass applies the resume "
            "and a tick claims 00:10: 00:05, due after the person's write, runs or is recorded "
            "whichever of the record and the pass applies the change first (issue 34 item 4)",
        ),
        *(
            ActorSet(
                f"waiting-race-{overlap}",
                (
                    actor_spec("workerS", "worker_of", arg=("scheduled", True)),
                    actor_spec("workerM", "worker_of", arg=("manual", True)),
                ),
                setup="held-due",
                at=T0 + 5 * MINUTE + SECOND,
                overlap=overlap,
                budget=Budget(crashes=0),
                note="a manual run holds the turn; 00:05 comes due behind it and a second manual "
                "run behind 00:05: each one's worker walks and waits (cancel_other: and asks its "
                "holder to stop) at once",
            )
            for overlap in ("cancel_other", "buffer_one")
        ),
        ActorSet(
            "stale-message-recovered",
            (actor_spec("detector", "detector"), actor_spec("worker", "worker")),
            setup="recovered-waiting",
            at=T0 + 6 * MINUTE + 10 * SECOND,
            overlap="buffer_one",
            budget=Budget(crashes=0, reorder=True),
            note="a manual run behind 00:05 (its worker died) waits for a worker; the detector "
            "redispatches it again as a worker takes any of its messages, the first one stale",
        ),
    )
)

# Issue 38: a run failed for good owes its job's own dead-letter queue its outcome, written in the
# failure's own write; its worker pays it, and the detector's lease sweep pays what is still owed
# (the worker died, or its send failed). Two payers, either's send unanswered or its actor dead.
DEAD_LETTER_QUEUE = "arn:aws:sqs:us-east-1:123456789012:explored-dead-letters"
PROMISES.update(
    by_name(
        ActorSet(
            "dead-letter-payers",
            (
                actor_spec("worker", "failing_worker"),
                actor_spec("detector", "detector", offset_ms=40 * SECOND),
            ),
            setup="claimed",
            at=T0 + 5 * MINUTE,
            job=(("retry", {"max_attempts": 1}), ("dead_letter_queue_arn", DEAD_LETTER_QUEUE)),
            budget=Budget(crashes=1, unanswered=1),
            note="00:05's run fails for good, owing its dead letter; its worker pays it as the "
            "detector, 40 s on (past the debt's check_at), pays what it finds owed",
        ),
    )
)

# Issue 34: the races the fencing parts of the retry, the promotion and the overtake stop, reached
# (tests/sim/test_switches.py switches the parts off).
FENCES: dict[str, ActorSet] = by_name(
    ActorSet(
        "zombie-retry",
        (
            actor_spec("zombie", "zombie_worker"),
            actor_spec("detector", "detector", offset_ms=40 * SECOND),
            actor_spec("worker", "worker", offset_ms=40 * SECOND),
        ),
        setup="claimed",
        at=T0 + 5 * MINUTE,
        budget=Budget(crashes=0),
        note="00:05's handler fails and its worker freezes before the retry write; its lease "
        "lapses, the detector (40 s on) recovers the run and another worker starts it; the "
        "frozen worker then writes its retry with the token it held",
    ),
    ActorSet(
        "promoters-buffer_one",
        (
            actor_spec("workerS", "beating_worker"),
            actor_spec("detector", "detector", offset_ms=40 * SECOND),
            actor_spec("workerP", "worker_of", offset_ms=40 * SECOND, arg=("manual", True)),
        ),
        setup="manual-waiting",
        at=T0 + 5 * MINUTE + 5 * SECOND,
        overlap="buffer_one",
        budget=Budget(crashes=0),
        note="the manual run waits behind 00:05; 00:05 runs and ends, and its worker, having "
        "read the waiting run, is slow to promote it; the waiting run's lease lapses and the "
        "detector (40 s on) promotes it, and another worker starts it: two promoters at once",
    ),
    ActorSet(
        "overtake-recovered",
        (
            actor_spec("manual", "manual"),
            actor_spec("worker", "worker_of", arg=("manual", True)),
            actor_spec("detector", "detector", offset_ms=42 * SECOND),
        ),
        setup="claimed",
        at=T0 + 4 * MINUTE + 50 * SECOND,
        budget=Budget(crashes=0),
        note="a manual run's worker passes over 00:05 (not yet due) as a detector 42 s on finds "
        "00:05's dispatch lease lapsed and recovers it (pending, a new token): the overtake's "
        "mark then lands on, or is refused by, a run whose token moved",
    ),
)

# Issue 34: redundant condition parts switched off together (tests/sim/test_switches.py PAIRS).
PROMISES.update(
    by_name(
        ActorSet(
            "pause-detector",
            (actor_spec("registrar", "registrar", arg="pause"), actor_spec("detector", "detector")),
            at=T0 + 7 * MINUTE,
            note="00:05 came due unclaimed and is overdue: the detector settles it as a person "
            "pauses the job (whose registration records it missed)",
        ),
    )
)

# Issue 34: the detector's bookkeeping (``bookkeeping_op:version``) while a lowered ShardCount's
# dropped shard drains: two overlapping invocations, one of which finds a canary's lease there.
PROMISES.update(
    by_name(
        ActorSet(
            "drain-detectors",
            (actor_spec("detectorB", "detector"), actor_spec("detectorA", "detector", offset_ms=40 * SECOND)),
            setup="canary-running",
            at=T0 + 5 * MINUTE + 20 * SECOND,
            budget=Budget(crashes=0),
            note="ShardCount lowered 2 -> 1, shard 1 found empty since an hour before 00:06; a canary "
            "worker of the old version started 00:05 there and died. A detector at 00:05:20 finds its "
            "lease (the hold restarts) as one 40 s on, past the hold as it read it, recovers the run "
            "onto shard 0 and finds shard 1 empty",
        ),
    )
)

# A skip's holder (promises.md row 8, ``skipped_without_holder``): the manual run's worker walks
# to 00:05, running; 00:05's worker commits; the detector redispatches the manual run, whose
# dispatch lease lapsed meanwhile (a new token). The stale skip must not land on the new token
# (``skip_at_start_ops:_run_token``): it would record the run skipped for a run that had ended
# before the redispatch, and refuse the new message's start.
PROMISES.update(
    by_name(
        ActorSet(
            "workers-detector-skip",
            (
                actor_spec("workerA", "worker"),
                actor_spec("workerB", "worker"),
                actor_spec("detector", "detector"),
            ),
            setup="claimed-manual",
            at=T0 + 5 * MINUTE + 33 * SECOND,
            budget=Budget(crashes=0),
            note="00:05 and a manual run behind it, both dispatch leases lapsed as their messages "
            "reach two workers and the detector",
        ),
    )
)

# w3floor: a change applied between the reconcile pass and the late stream record of the write the
# pass applied (a retime, a pause, each from its own record) keeps the pass's provisional date
# (``redate_floor``, core/transitions/register.py ``kept_redate_marks``) until the record dates it:
# 00:05, due after the resume (00:04:30) and before the pass's date (00:05:10), runs or is
# recorded whichever comes first (dropped by the change: ``lost_occurrence``). The record may also
# read the job item first and apply the change itself: it then reads again and dates the floor.
PROMISES.update(
    by_name(
        *(
            ActorSet(
                f"redate-after-{change}",
                (
                    actor_spec("record", "late_record", arg=RESUMED_AT),
                    actor_spec("person", "registrar", arg=change),
                ),
                setup="resumed-reconciled",
                at=T0 + 6 * MINUTE + 30 * SECOND,
                window_end=T0 + 11 * MINUTE,
                budget=Budget(crashes=0, dups=1),
                note=f"a resume's late stream record (after the reconcile pass applied it) races a "
                f"{change} applied from its own record: 00:05, due after the person's write, is "
                "recorded whichever lands first",
            )
            for change in ("retime", "pause")
        ),
    )
)
