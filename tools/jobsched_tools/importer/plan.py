"""What importing one schedule yields: a ``PlannedImport`` (its job, or the reasons it is not
imported, and the notes a person should read), and ``Refused``, the reason a field gives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobsched.core.job import JobDefinition


@dataclass
class PlannedImport:
    source: str  # GROUP/NAME
    job: JobDefinition | None = None
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "job_id": self.job.job_id if self.job else None,
            "job": self.job.to_item() if self.job else None,
            "importable": self.job is not None,
            "blockers": self.blockers,
            "notes": self.notes,
        }


class Refused(ValueError):
    """A get-schedule field jobsched cannot read: the schedule is not imported, with this reason."""
