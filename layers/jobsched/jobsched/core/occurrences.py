"""A job's runs partition read as occurrences (the successor claim, issue 37; build plan
docs/proposals/successor-claim-build.md, §0, §4 and HC12).

Under the successor claim an instant may hold several items: a run or record of one epoch beside
a cancelled head or a closure marker of another (§0, "One live record per instant"), and a job's
life may end in an end marker (``<job>@end:<instant>#<epoch>``). Readers group a job's items by
instant and show each instant's live record once; this module says which item that is, which
items are no record at all, whether a ``scheduled`` run is claimed, and which item is the head.

What is not a record:
- a closure marker (status ``closed``) and an end marker (status ``end``): bookkeeping of a
  change and of a finite job's last claim;
- a cancelled head: a ``cancelled`` item at an epoch key (epoch 1 or more), which a change closed
  before its instant, so the occurrence was not due under its timing. A ``cancelled`` item at a
  legacy key (epoch 0) is a record written by releases before issue 25 (a change's fence at an
  occurrence it withdrew, ``RunStatus.CANCELLED``): history, shown as today.

Everything else is a live record (a run, a ``missed`` or ``skipped`` record, a ``scheduled`` head
or claimed run), and an instant holds at most one (I1'). Nothing in today's services writes the
new items yet; on today's data every item is a live record and every instant holds one item, so a
reader that goes through here shows what it showed before.

Pure: no store, no clock. A store reads the items (``OccurrenceQuery`` in ports.py, with
``occurrence_key_range`` below) and a caller hands them here in any order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from jobsched.core.head import MARKER_STATUSES, is_cancelled_head, is_marker, is_record
from jobsched.core.run import RunIdParts, RunStatus, parse_run_id

Item = dict[str, Any]
# What is a marker, a cancelled head or a record is the head's vocabulary (core/head.py); this
# module re-exports it for the readers.
__all__ = ["MARKER_STATUSES", "is_cancelled_head", "is_marker", "is_record"]


def occurrence_key_range(job_id: str) -> tuple[str, str]:
    """The sort-key bounds (inclusive, as DynamoDB's ``BETWEEN``) of HC12's Query: every timed id
    (``<job>@<instant>`` and ``<job>@<instant>#<epoch>``, whose instant starts with a digit) and
    every end marker (``<job>@end:...``), but no manual run (``<job>@manual:...``).

    The plan writes the range as ``<job>@0`` to ``<job>@9``. Two reasons it ends at ``<job>@end;``
    here (``;`` is the character after ``:``, so ``end:`` ids are inside and ``manual:`` ids, with
    ``m`` after ``e``, are not): the last claim of a finite job puts its end marker at the head's
    ``next_key`` (HC5), so a read without end markers would take that claimed run for a head; and
    the reconcile pass finds a finished job's end marker by this very read (HC5). It also keeps the
    instants of years 9000-9999, which ``<job>@9`` would cut off. Nothing else sorts between the
    digits and ``end:``: every run id is timed, ``end:`` or ``manual:`` (``parse_run_id``)."""
    return f"{job_id}@0", f"{job_id}@end;"


def _parts(item: Mapping[str, Any]) -> RunIdParts | None:
    """The item's run id, parsed; None for an id that does not parse (kept as a record of its own:
    no reader drops an item it cannot read)."""
    try:
        return parse_run_id(str(item.get("run_id", "")))
    except ValueError:
        return None


class Claim(StrEnum):
    """What a ``scheduled`` run's successor (its ``next_key``) says of it (§0, §4 describe)."""

    # The successor exists (a run, a record, a cancelled head or the end marker): the claim put it,
    # and the claim sends the run's message after its put, so the run is claimed and dispatched.
    CLAIMED = "claimed, dispatched"
    # The successor is absent: the job's head, its next occurrence, which no claim has taken yet.
    NEXT = "next (not claimed)"
    # The successor is a closure marker: a change closed this head. The change closes the head in
    # the same transaction, so a read sees this only if it overlapped that transaction (a Query is
    # read-committed per item, not a snapshot): read again.
    CLOSED = "closed by a change (read again)"


def claim_of(item: Mapping[str, Any], items_by_id: Mapping[str, Mapping[str, Any]]) -> Claim | None:
    """For a ``scheduled`` item, whether it is claimed, judged from ``items_by_id`` (its job's
    items, which must include the key range its ``next_key`` lies in: ``occurrence_key_range``
    covers a timed successor and the end marker). None for any other item, and for a ``scheduled``
    item without a ``next_key`` (not a shape-f head)."""
    if item.get("status") != RunStatus.SCHEDULED.value or not item.get("next_key"):
        return None
    successor = items_by_id.get(str(item["next_key"]))
    if successor is None:
        return Claim.NEXT
    if successor.get("status") == RunStatus.CLOSED.value:
        return Claim.CLOSED
    return Claim.CLAIMED


OccurrenceKind = Literal["timed", "manual", "end", "other"]


@dataclass(frozen=True)
class Occurrence:
    """One instant of a job (or one manual run, or one item whose id does not parse): every item
    at it, of every epoch, and its live records. ``live`` holds one record on a sound partition
    (I1'); a reader shows each, so a breach is seen, not hidden."""

    kind: OccurrenceKind
    instant_ms: int | None
    items: tuple[Item, ...]
    live: tuple[Item, ...]

    @property
    def epochs(self) -> frozenset[int]:
        """The epochs of the items at this instant (legacy ids: 0)."""
        return frozenset(parts.epoch for item in self.items if (parts := _parts(item)) is not None)

    @property
    def shows_epoch(self) -> bool:
        """Whether a reader shows the epoch of this instant's record: only where the instant holds
        items of two epochs (a cancelled head or a marker beside the record of a later change)."""
        return self.kind == "timed" and len(self.epochs) > 1


def _group_key(item: Mapping[str, Any]) -> tuple[OccurrenceKind, Any]:
    parts = _parts(item)
    if parts is None:
        return ("other", str(item.get("run_id", "")))
    if parts.kind == "timed":
        return ("timed", parts.instant_ms)
    # A manual run is its own occurrence (a request, not an instant); an end marker is its own.
    return (parts.kind, str(item["run_id"]))


def occurrences(items: Iterable[Mapping[str, Any]]) -> list[Occurrence]:
    """The items of one job's runs partition (any order: a Query's, either direction), grouped by
    instant. Timed instants come in time order; manual runs, end markers and unreadable ids follow,
    in id order (a reader sorts its lines itself)."""
    groups: dict[tuple[OccurrenceKind, Any], list[Item]] = {}
    for item in items:
        groups.setdefault(_group_key(item), []).append(dict(item))
    found = []
    for (kind, key), group in groups.items():
        group.sort(key=lambda item: str(item.get("run_id", "")))
        found.append(
            Occurrence(
                kind=kind,
                instant_ms=key if kind == "timed" else None,
                items=tuple(group),
                live=tuple(item for item in group if is_record(item)),
            )
        )
    timed = sorted((o for o in found if o.kind == "timed"), key=lambda o: o.instant_ms or 0)
    rest = sorted((o for o in found if o.kind != "timed"), key=lambda o: str(o.items[0].get("run_id", "")))
    return [*timed, *rest]


# What ``records`` adds to a record it returns (never stored): the epoch to show beside its
# instant, only where the instant holds items of two epochs; and, for a ``scheduled`` run, what
# its successor says (``Claim``'s text).
SHOWN_EPOCH = "shown_epoch"
CLAIM = "claim"


def _shown(occurrence: Occurrence, by_id: Mapping[str, Mapping[str, Any]]) -> list[Item]:
    """The live records of one occurrence as a reader shows them (copies, with ``SHOWN_EPOCH`` and
    ``CLAIM`` where they apply)."""
    shown = []
    for live in occurrence.live:
        record = dict(live)
        if occurrence.shows_epoch and (parts := _parts(record)) is not None:
            record[SHOWN_EPOCH] = parts.epoch
        claim = claim_of(record, by_id)
        if claim is not None:
            record[CLAIM] = claim.value
        shown.append(record)
    return shown


def records(items: Iterable[Mapping[str, Any]]) -> list[Item]:
    """The live records of a job's items, one per instant on a sound partition (markers and
    cancelled heads left out), in the order of ``occurrences``. Each is a copy, with ``SHOWN_EPOCH``
    and ``CLAIM`` added where they apply (on today's data, neither ever does: the items come back
    as they were stored). ``items`` must hold the job's whole partition, or at least the successor
    of each ``scheduled`` run (``claim_of``)."""
    listed = [dict(item) for item in items]
    by_id = {str(item.get("run_id", "")): item for item in listed}
    return [record for occurrence in occurrences(listed) for record in _shown(occurrence, by_id)]


def live_record_at(items: Iterable[Mapping[str, Any]], instant_ms: int) -> Item | None:
    """The live record of one instant (an instant given alone, without its epoch), as ``records``
    shows it, or None when the instant holds none. ``ValueError`` when it holds two (I1' broken:
    say so, pick neither)."""
    listed = [dict(item) for item in items]
    by_id = {str(item.get("run_id", "")): item for item in listed}
    for occurrence in occurrences(listed):
        if occurrence.kind == "timed" and occurrence.instant_ms == instant_ms:
            shown = _shown(occurrence, by_id)
            if len(shown) > 1:
                ids = ", ".join(str(item["run_id"]) for item in shown)
                raise ValueError(
                    f"the instant holds {len(shown)} live records ({ids}): name one by its run id"
                )
            return shown[0] if shown else None
    return None


@dataclass(frozen=True)
class HeadReading:
    """HC12: a job's head, as one read of its occurrence items found it. ``candidates``: every timed
    ``scheduled`` item whose successor is absent from the items. A sound partition of an active
    job has exactly one; of a paused, finished or deleted job, none. Several, or none where the
    caller expects one, mean the read overlapped a change's transaction (a Query is read-committed
    per item: it can see a change's new head and not yet its closed old one, or the reverse): the
    caller reads again (level-triggered), it never picks one."""

    candidates: tuple[Item, ...]

    @property
    def head(self) -> Item | None:
        """The head when exactly one item is a candidate, else None."""
        return self.candidates[0] if len(self.candidates) == 1 else None

    @property
    def verdict(self) -> Literal["one", "none", "several"]:
        return "one" if len(self.candidates) == 1 else "none" if not self.candidates else "several"

    def describe(self) -> str:
        if self.verdict == "one":
            return f"head {self.candidates[0]['run_id']}"
        if self.verdict == "none":
            return "no head (paused, finished or deleted; or a change was under way: read again)"
        ids = ", ".join(str(item["run_id"]) for item in self.candidates)
        return f"{len(self.candidates)} heads ({ids}): a change was under way; read again"


def find_head(items: Iterable[Mapping[str, Any]]) -> HeadReading:
    """HC12's head among one job's items as ``OccurrenceQuery.occurrence_items`` reads them (the
    whole ``occurrence_key_range``: a claimed run's successor and the end marker are in it). A
    ``scheduled`` item at a manual id (an ad-hoc run) is never a head."""
    listed = [dict(item) for item in items]
    by_id = {str(item.get("run_id", "")): item for item in listed}
    candidates = []
    for item in listed:
        parts = _parts(item)
        if parts is None or parts.kind != "timed":
            continue
        if claim_of(item, by_id) is Claim.NEXT:
            candidates.append(item)
    candidates.sort(key=lambda item: str(item["run_id"]))
    return HeadReading(tuple(candidates))
