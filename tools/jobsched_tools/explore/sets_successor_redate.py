"""``redate-across-epochs``: the build plan's unexplored rule for HC4 (docs/proposals/
successor-claim-build.md §3 HC4, §5 row S4-S7), on the product's explorer's successor world
(``successor.py``, set-up "resumed-reconciled").

A resume the reconcile pass applied before its stream record arrived is dated when the pass first
saw it (00:05:10), so 00:05, due after the person's write (00:04:30), was taken as not due; the new
head is 00:10 in the resume's epoch (3). The record, when it comes, dates the change exactly and
records 00:05 behind the head, **in the head's epoch** (00:05#3), beside the pause's cancelled head
of an older epoch at the same instant (00:05#1, no record): the keys never meet. The sets race the
record with what else writes before or at the head:

- ``redate-across-epochs``: the record, a tick that claims the head (00:10#3, claimed at 00:09:10
  and after), and a person's backfill of 00:05 (the same key, 00:05#3: ``backfill_run_id``), with a
  duplicated delivery of the record; misfire ``skip``, so the record is ``missed`` and the head is
  not relinked: the record's put alone (``_run_is_new``) stops it replacing the backfill's run
  (caught without it: ``record_overwritten``, ``I3_unreachable``). One record at 00:05 whatever
  the order, nothing lost.
- ``redate-across-epochs-run``: the record and the tick, misfire ``run_once``: 00:05 runs late, a
  run that joins the chain by relinking the head, against the head's claim (no backfill: without
  the record's redate, nothing records 00:05, ``lost_occurrence``).

- ``redate-after-retime``, ``redate-after-pause`` (w3floor): the record and a change applied from
  its own record (a retime, a pause) between the pass and the record. The change keeps the floor,
  the pass's date and digest aside (core/transitions/register.py ``kept_redate_marks``), so the
  record still records 00:05 (the resume's timing; ``missed`` once paused), behind the head the
  change left; a record that read the job item first applies the change itself and reads again
  (services/registrar.py ``_dates_floor``). With the change dropping the floor, or without the
  read again: ``lost_occurrence`` at 00:05 (tests/explore/test_successor_redate.py).

- ``redate-headless-manual``, ``redate-headless-twice`` (w9): the same set-up for an ``at()`` job
  at 00:05, which the pass applies as finished (no head: its chain's end is on the state), so the
  record's redate is ``redate_without_head_ops``: 00:05 runs late, joining the state's
  ``latest_run_id``, against a person's manual run joining the same end (without
  ``_state_unchanged``: the record's stale write moves the end back, and the two run at once:
  ``overlap``, ``I3_unreachable``), or against the record delivered again (both parts off:
  ``record_overwritten``; ``_run_is_new`` alone is redundant, tests/unit/test_head_redate.py).
"""

from __future__ import annotations

from jobsched_tools.explore.build import RESUMED_AT
from jobsched_tools.explore.model import MINUTE, SECOND, T0, ActorSet, ActorSpec, by_name
from jobsched_tools.explore.world import Budget

WINDOW_END = T0 + 11 * MINUTE  # 00:05 and 00:10 must be decided after the drive
# The headless sets' job: one occurrence, 00:05; the pass applies the resume after it (finished).
AT_FIVE = "at(2026-12-01T00:05:00)"
# Misfire ``skip``: 00:05, four minutes late, is recorded ``missed`` (no run joins the chain, so the
# head is not relinked and the records' own parts alone stop a racing backfill of the same key).
SKIP = (("misfire", {"policy": "skip"}),)


def _a(name: str, kind: str, offset_ms: int = 0, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, offset_ms, arg)


REDATE_SETS = by_name(
    ActorSet(
        "redate-across-epochs",
        (
            _a("record", "late_record", arg=RESUMED_AT),
            _a("tick", "tick"),
            _a("backfill", "backfill", arg=(RESUMED_AT, T0 + 5 * MINUTE + 20 * SECOND)),
        ),
        setup="resumed-reconciled",
        at=T0 + 9 * MINUTE + 10 * SECOND,
        window_end=WINDOW_END,
        job=SKIP,
        budget=Budget(crashes=0, dups=1),
        note="a resume's late record (00:05 into the head's epoch, beside the pause's cancelled "
        "00:05#1) against the head's claim and a backfill of 00:05 at the same key",
    ),
    ActorSet(
        "redate-across-epochs-run",
        (_a("record", "late_record", arg=RESUMED_AT), _a("tick", "tick")),
        setup="resumed-reconciled",
        at=T0 + 9 * MINUTE + 10 * SECOND,
        window_end=WINDOW_END,
        budget=Budget(crashes=0, dups=1),
        note="misfire run_once: 00:05 runs late behind the head, relinking it, as a tick claims "
        "the head; without the record's redate 00:05 is lost",
    ),
    # w3floor: a change between the pass and the late record keeps the floor the record dates.
    *(
        ActorSet(
            f"redate-after-{change}",
            (_a("record", "late_record", arg=RESUMED_AT), _a("person", "registrar", arg=change)),
            setup="resumed-reconciled",
            at=T0 + 6 * MINUTE + 30 * SECOND,
            window_end=WINDOW_END,
            budget=Budget(crashes=0, dups=1),
            note=f"a resume's late record races a {change} applied from its own record: 00:05, "
            "due after the person's write, is recorded whichever lands first",
        )
        for change in ("retime", "pause")
    ),
    # w9: the redate of a job without a head (``redate_without_head_ops``): an ``at()`` job resumed
    # at 00:04:30, applied by the pass as finished (its instant before the pass's date).
    ActorSet(
        "redate-headless-manual",
        (_a("record", "late_record", arg=RESUMED_AT), _a("manual", "manual")),
        setup="resumed-reconciled",
        schedule=AT_FIVE,
        at=T0 + 6 * MINUTE + 30 * SECOND,
        window_end=WINDOW_END,
        budget=Budget(crashes=0),
        note="the record puts 00:05 (run late) behind the state's chain end as a person's manual run "
        "joins that end: one of them links behind the other",
    ),
    ActorSet(
        "redate-headless-twice",
        (_a("record", "late_record", arg=RESUMED_AT), _a("again", "late_record", arg=RESUMED_AT)),
        setup="resumed-reconciled",
        schedule=AT_FIVE,
        at=T0 + 6 * MINUTE + 30 * SECOND,
        window_end=WINDOW_END,
        budget=Budget(crashes=0),
        note="the stream delivers the record twice (a retried batch): one record at 00:05",
    ),
)
