"""What the model's world keeps besides its tables: the findings of a schedule and the ledger of
what happened (starts, recoveries, commits, claims, races, the job's history). Its own module so
that the invariants can name it without importing the world, which imports them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    check: str
    key: str
    detail: str
    trace: tuple[str, ...]

    def headline(self) -> str:
        return f"{self.check} {self.key}: {self.detail}"


@dataclass
class Ledger:
    findings: list[Finding] = field(default_factory=list)
    seen: set[tuple[str, str]] = field(default_factory=set)
    starts: Counter[str] = field(default_factory=Counter)  # successful starts per run
    recoveries: Counter[str] = field(default_factory=Counter)  # the detector's recoveries per run
    commits: Counter[str] = field(default_factory=Counter)  # successful commits per run
    claimed: set[str] = field(default_factory=set)  # the runs a claim's put made claimed
    races: Counter[str] = field(default_factory=Counter)  # the condition parts that failed, by tag
    # The job's history: (instant, status, timing) at the set-up and at each applied change.
    history: list[tuple[int, str, tuple[int, int]]] = field(default_factory=list)
