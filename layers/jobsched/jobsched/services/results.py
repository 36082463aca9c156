"""Counters that a service run returns: summed across parallel claimers or successive sweeps."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, Self, cast


class Counters:
    """Mixin for dataclasses of counts (int), flags (bool) and samples (list).

    ``merge`` sums counts, ors flags and extends samples, except the fields named in ``LATEST``,
    which take the other's value (a backlog is the latest one seen, not a sum). ``summary``
    leaves out the samples, which go to metrics rather than to the one-line event.
    """

    LATEST: ClassVar[frozenset[str]] = frozenset()

    def summary(self) -> dict[str, Any]:
        values = {f.name: getattr(self, f.name) for f in fields(cast(Any, self))}
        return {name: value for name, value in values.items() if not isinstance(value, list)}

    def merge(self, other: Self) -> None:
        for f in fields(cast(Any, other)):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name in self.LATEST:
                setattr(self, f.name, theirs)
            elif isinstance(theirs, list):
                mine.extend(theirs)
            elif isinstance(theirs, bool):
                setattr(self, f.name, mine or theirs)
            else:
                setattr(self, f.name, mine + theirs)
