"""Write units of a proposed protocol, metered: docs/proposals/due-entry-on-runs.md.

Not the product. The product's units are metered by running its services (``write_units.py``);
this replays the writes the proposal would make for one short run, on the same MeteringStore
(DynamoDB's capacity rules), with the proposal's one index in place of the template's two. It is
here so that the proposal's figure is reproduced, not asserted: ``python -m
jobsched_tools.bench.due_entry_proposal``.

The proposal: the claim of occurrence N creates N+1's run as ``scheduled``, whose index entry
(its instant) is the job's due entry until it is claimed and its lease entry until it ends. A
claim then changes no index key, and each run enters and leaves one index once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jobsched_tools.bench.due_entry_replay import replay_due_entry


@dataclass(frozen=True)
class ProposalUnits:
    state_advance: bool
    atomic: bool
    write_units_per_run: float
    write_units_per_heartbeat: float
    by_step: dict[str, float]
    by_table: dict[str, float]

    def as_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


def measure(state_advance: bool = True, runs: int = 20, atomic: bool = False) -> ProposalUnits:
    """``runs`` jobs, each with occurrence 1 scheduled: claim it (creating occurrence 2), start
    it, heartbeat once, commit it; the units per run. ``atomic``: the claim's writes as one
    transaction, as the product's claim has been since issue 25 (every item in it charged twice).
    The replay is the cost study's (``due_entry_replay.replay_due_entry``, issue 37), with the claim
    taking the scheduled run as the proposal does, on the proposal's keys-only index."""
    replayed = replay_due_entry(state_advance=state_advance, take=True, atomic=atomic, runs=runs)
    return ProposalUnits(
        state_advance,
        atomic,
        replayed.write_units_per_run,
        replayed.write_units_per_heartbeat,
        replayed.by_step,
        {name: units / runs for name, units in sorted(replayed.store.write_units.items())},
    )


if __name__ == "__main__":
    shapes = [(advance, atomic) for atomic in (False, True) for advance in (True, False)]
    print(json.dumps([measure(advance, atomic=atomic).as_json() for advance, atomic in shapes], indent=2))
