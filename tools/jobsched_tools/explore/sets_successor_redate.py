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
"""

from __future__ import annotations

from jobsched_tools.explore.build import RESUMED_AT
from jobsched_tools.explore.model import MINUTE, SECOND, T0, ActorSet, ActorSpec, by_name
from jobsched_tools.explore.world import Budget

WINDOW_END = T0 + 11 * MINUTE  # 00:05 and 00:10 must be decided after the drive
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
)
