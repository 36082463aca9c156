"""Every state change jobsched makes, as conditional writes with named parts.

Each function returns the write operations for one transition. Each condition part carries, in
its ``why``, the race it stops; together they are the argument that an occurrence runs once.
The services decide *when* a transition happens; this package decides *what* it writes and
under which conditions. The job's scheduler state lives on its state item (``core/state.py``),
never on the job item people write, so a person's put-item or delete cannot undo it.

One module per group of rows of docs/design.md's table of writes, by actor:

- ``conditions``: the named condition parts the writes share, the dispatch lease, the expiry;
- ``claim``: the claim and the advance past a recorded occurrence (trigger, registrar);
- ``settle``: the settle chunk, the ad-hoc run and the rerun of a missed occurrence;
- ``register``: register, redate, the report, the pause on failure, the delete after completion;
- ``start``: start, overtake, heartbeat, skip and buffer at the start, promote (worker);
- ``finish``: the commit and the retry (worker);
- ``recover``: recover, recheck, recheck buffered (miss detector);
- ``bookkeeping``: the detector's bookkeeping item and the definition snapshots.

The public names are re-exported here: ``from jobsched.core.transitions import claim_ops``.
"""

from jobsched.core.transitions.bookkeeping import (
    BOOKKEEPING_KEY,
    bookkeeping_op,
    retire_definition_op,
    save_definition_op,
    snapshot_key,
)
from jobsched.core.transitions.claim import advance_op, claim_ops, new_run_item, runs_claimed
from jobsched.core.transitions.conditions import LEASE_ATTRIBUTES, RunItem, StateItem, retention_expiry
from jobsched.core.transitions.finish import finish_ops, retry_op
from jobsched.core.transitions.recover import (
    MAX_REDISPATCHES,
    cancelled_error,
    recheck_buffered_ops,
    recheck_op,
    recover_op,
)
from jobsched.core.transitions.register import (
    REDATE_FLOOR,
    definition_as_read,
    delete_after_completion_ops,
    pause_on_failure_op,
    redate_ops,
    register_ops,
    report_op,
    sized_report_ops,
)
from jobsched.core.transitions.settle import adhoc_run_ops, link_runs, rerun_missed_ops, settle_ops
from jobsched.core.transitions.start import (
    buffer_at_start_ops,
    heartbeat_op,
    overtake_op,
    promote_op,
    skip_at_start_ops,
    start_op,
)

__all__ = [
    "BOOKKEEPING_KEY",
    "LEASE_ATTRIBUTES",
    "MAX_REDISPATCHES",
    "REDATE_FLOOR",
    "RunItem",
    "StateItem",
    "adhoc_run_ops",
    "advance_op",
    "bookkeeping_op",
    "buffer_at_start_ops",
    "cancelled_error",
    "claim_ops",
    "definition_as_read",
    "delete_after_completion_ops",
    "finish_ops",
    "heartbeat_op",
    "link_runs",
    "new_run_item",
    "overtake_op",
    "pause_on_failure_op",
    "promote_op",
    "recheck_buffered_ops",
    "recheck_op",
    "recover_op",
    "redate_ops",
    "register_ops",
    "report_op",
    "rerun_missed_ops",
    "retention_expiry",
    "retire_definition_op",
    "retry_op",
    "runs_claimed",
    "save_definition_op",
    "settle_ops",
    "sized_report_ops",
    "skip_at_start_ops",
    "snapshot_key",
    "start_op",
]
