"""core/occurrences.py: a job's runs partition read as occurrences under the successor claim
(issue 37; build plan §0, §4, HC12), on hand-written partitions: markers, cancelled heads of an
epoch, two epochs at one instant, an end marker."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from jobsched.core.clock import dt_to_ms
from jobsched.core.occurrences import (
    CLAIM,
    SHOWN_EPOCH,
    Claim,
    claim_of,
    find_head,
    is_cancelled_head,
    is_record,
    live_record_at,
    occurrence_key_range,
    occurrences,
    records,
)
from jobsched.core.run import end_run_id, manual_run_id, run_id_for

JOB = "j"


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def at(hhmm: str) -> int:
    return dt_to_ms(parse_instant(f"2026-12-05T{hhmm}:00Z"))


def item(
    when: str, status: str, epoch: int | None = None, next_at: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A run item at ``when`` (``HH:MM``) in ``epoch`` (None: a legacy id); a timed item of an epoch
    names its successor in the same epoch, as a head does (§0)."""
    found: dict[str, Any] = {
        "job_id": JOB,
        "run_id": run_id_for(JOB, at(when), epoch),
        "status": status,
        "scheduled_at": at(when),
        "kind": "scheduled",
        "version": 1,
        **extra,
    }
    if next_at is not None:
        found["next_key"] = run_id_for(JOB, at(next_at), epoch)
    return found


def marker(when: str, epoch: int) -> dict[str, Any]:
    """A closure marker as the model writes it: no ``scheduled_at``, no kind."""
    return {
        "job_id": JOB,
        "run_id": run_id_for(JOB, at(when), epoch),
        "status": "closed",
        "closes_epoch": epoch,
        "closed_by": epoch + 1,
        "version": 1,
    }


def retimed_partition() -> list[dict[str, Any]]:
    """HC1's example: every 5 minutes (epoch 1) becomes every 10 (epoch 2) before 00:10. The change
    cancelled the head 00:10#1, put its marker at 00:15#1 and headed 00:10#2; 00:10#2 ran, 00:20#2
    is claimed (its successor 00:30#2 exists) and 00:30#2 is the head. Before them, legacy records
    (epoch 0) of the release before epochs, one a legacy ``cancelled`` fence, and a manual run."""
    return [
        item("00:00", "succeeded", attempt=1),
        item("00:01", "cancelled", reason="withdrawn by a change"),
        item("00:05", "succeeded", 1, "00:10", attempt=1),
        item("00:10", "cancelled", 1, "00:15"),
        marker("00:15", 1),
        item("00:10", "succeeded", 2, "00:20", attempt=1),
        item("00:20", "scheduled", 2, "00:30", claimed_by="t1"),
        item("00:30", "scheduled", 2, "00:40", claimed_by="t1"),
        {
            "job_id": JOB,
            "run_id": manual_run_id(JOB, "r1"),
            "status": "succeeded",
            "scheduled_at": at("00:12"),
            "kind": "manual",
        },
    ]


def by_id(items: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {str(i["run_id"]): i for i in items}


def test_records_show_one_line_per_instant_and_hide_markers_and_cancelled_heads() -> None:
    shown = records(retimed_partition())
    assert [r["run_id"] for r in shown] == [
        "j@2026-12-05T00:00:00Z",
        "j@2026-12-05T00:01:00Z",  # a legacy cancelled record (epoch 0) stays history
        "j@2026-12-05T00:05:00Z#1",
        "j@2026-12-05T00:10:00Z#2",  # not the cancelled head 00:10#1
        "j@2026-12-05T00:20:00Z#2",
        "j@2026-12-05T00:30:00Z#2",
        "j@manual:r1",
    ]  # 00:15 holds only a marker: no line


def test_the_epoch_is_shown_only_where_an_instant_holds_two() -> None:
    shown = by_id(records(retimed_partition()))
    assert shown["j@2026-12-05T00:10:00Z#2"][SHOWN_EPOCH] == 2
    assert [run_id for run_id, r in shown.items() if SHOWN_EPOCH in r] == ["j@2026-12-05T00:10:00Z#2"]
    by_instant = {o.instant_ms: o for o in occurrences(retimed_partition())}
    assert by_instant[at("00:10")].epochs == {1, 2} and by_instant[at("00:10")].shows_epoch
    assert not by_instant[at("00:15")].live and not by_instant[at("00:15")].shows_epoch


def test_a_scheduled_run_is_claimed_when_its_successor_exists_else_next() -> None:
    shown = by_id(records(retimed_partition()))
    assert shown["j@2026-12-05T00:20:00Z#2"][CLAIM] == "claimed, dispatched"
    assert shown["j@2026-12-05T00:30:00Z#2"][CLAIM] == "next (not claimed)"
    assert [run_id for run_id, r in shown.items() if CLAIM in r] == [
        "j@2026-12-05T00:20:00Z#2",
        "j@2026-12-05T00:30:00Z#2",
    ]


def test_epochs_are_compared_as_numbers_not_as_id_text() -> None:
    """Within an instant ids sort as text: ``#10`` before ``#9``. The live record is the one that
    is not a cancelled head, whichever sorts first."""
    items = [
        item("00:10", "cancelled", 9, "00:15"),
        item("00:10", "succeeded", 10, "00:20"),
        marker("00:15", 9),
    ]
    assert [r["run_id"] for r in records(items)] == ["j@2026-12-05T00:10:00Z#10"]
    assert records(items)[0][SHOWN_EPOCH] == 10
    (occurrence, _) = occurrences(items)
    assert occurrence.epochs == {9, 10}


def test_the_input_order_does_not_matter() -> None:
    """A Query newest first or oldest first gives the same occurrences."""
    items = retimed_partition()
    assert records(items) == records(list(reversed(items)))
    assert find_head(items) == find_head(list(reversed(items)))


def test_today_s_data_comes_back_as_stored() -> None:
    """Legacy ids only, no markers: every item is a record, nothing is added to it."""
    items = [
        item("00:00", "succeeded"),
        item("00:01", "cancelled"),
        item("00:02", "missed"),
        item("00:03", "pending"),
    ]
    assert records(items) == items


def test_a_cancelled_item_is_a_head_only_at_an_epoch_key() -> None:
    assert is_cancelled_head(item("00:10", "cancelled", 1))
    assert not is_cancelled_head(item("00:10", "cancelled"))  # legacy: a record
    assert not is_cancelled_head(item("00:10", "missed", 1))
    assert is_record(item("00:10", "cancelled")) and not is_record(item("00:10", "cancelled", 1))
    assert not is_record(marker("00:15", 1))


def test_an_instant_alone_finds_its_live_record() -> None:
    items = retimed_partition()
    assert live_record_at(items, at("00:10"))["run_id"] == "j@2026-12-05T00:10:00Z#2"  # type: ignore[index]
    assert live_record_at(items, at("00:00"))["run_id"] == "j@2026-12-05T00:00:00Z"  # type: ignore[index]
    assert live_record_at(items, at("00:15")) is None  # a marker only
    assert live_record_at(items, at("00:45")) is None  # nothing
    with pytest.raises(ValueError, match="2 live records"):
        live_record_at([*items, item("00:10", "failed", 3)], at("00:10"))


def test_find_head_is_the_timed_scheduled_item_whose_successor_is_absent() -> None:
    reading = find_head(retimed_partition())
    assert reading.verdict == "one" and reading.head is not None
    assert reading.head["run_id"] == "j@2026-12-05T00:30:00Z#2"


def test_find_head_says_several_or_none_and_picks_neither() -> None:
    """A read that overlapped a change's transaction (read-committed per item) can see its new
    head beside the old one, or neither: the caller reads again."""
    items = retimed_partition()
    several = find_head([*items, item("00:40", "scheduled", 3, "00:50")])
    assert several.verdict == "several" and several.head is None
    assert "read again" in several.describe() and "00:40:00Z#3" in several.describe()
    paused = [i for i in items if i["run_id"] != "j@2026-12-05T00:30:00Z#2"]
    paused += [item("00:30", "cancelled", 2, "00:40"), marker("00:40", 2)]  # a pause closed the head
    none = find_head(paused)
    assert none.verdict == "none" and none.head is None and "no head" in none.describe()
    assert find_head([]).verdict == "none"


def test_a_closed_successor_makes_no_head_and_reads_as_closed() -> None:
    items = [item("00:05", "scheduled", 1, "00:10"), marker("00:10", 1)]
    assert claim_of(items[0], by_id(items)) is Claim.CLOSED
    assert find_head(items).verdict == "none"


def test_an_end_marker_successor_means_claimed_and_no_head() -> None:
    """HC5: the last claim of a finite job puts the end marker at the last run's ``next_key``."""
    last = item("01:00", "scheduled", 3)
    last["next_key"] = end_run_id(JOB, at("01:00"), 3)
    end = {"job_id": JOB, "run_id": end_run_id(JOB, at("01:00"), 3), "status": "end", "runs_claimed": 4}
    shown = records([last, end])
    assert [r["run_id"] for r in shown] == [last["run_id"]] and shown[0][CLAIM] == "claimed, dispatched"
    assert find_head([last, end]).verdict == "none"
    assert find_head([last]).head == last  # without its end marker the read would take it for the head


def test_a_manual_scheduled_run_is_never_a_head() -> None:
    adhoc = {"job_id": JOB, "run_id": manual_run_id(JOB, "m"), "status": "scheduled", "next_key": "j@x"}
    assert find_head([adhoc]).verdict == "none"


def test_an_id_that_does_not_parse_stays_a_record_of_its_own() -> None:
    odd = {"job_id": JOB, "run_id": "j@not-an-instant", "status": "succeeded", "scheduled_at": 1}
    assert records([odd]) == [odd]


def test_the_key_range_holds_timed_ids_and_end_markers_but_no_manual_run() -> None:
    low, high = occurrence_key_range(JOB)
    inside = [
        run_id_for(JOB, at("00:10")),
        run_id_for(JOB, at("00:10"), 12),
        run_id_for(JOB, dt_to_ms(parse_instant("9999-12-31T23:59:00Z")), 1),
        end_run_id(JOB, at("00:10"), 3),
    ]
    outside = [manual_run_id(JOB, "r1"), manual_run_id(JOB, "0"), "j0@2026-12-05T00:00:00Z"]
    assert all(low <= run_id <= high for run_id in inside)
    assert not any(low <= run_id <= high for run_id in outside)
