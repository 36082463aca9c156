"""The worker's wait for the exact second (issue 18, part 4), replayed on a manual clock: sends
rounded to the nearest second wait at most half a second and start at most half a second late."""

from __future__ import annotations

from jobsched.core.timing import SEND_LATE_TOLERANCE_MS, send_delay_seconds
from jobsched_tools.bench import units, worker_wait


def test_sends_round_to_the_nearest_second() -> None:
    assert send_delay_seconds(10_400, 0) == 10  # arrives 0.4 s early: the worker waits
    assert send_delay_seconds(10_600, 0) == 11  # arrives 0.4 s late: the worker starts at once
    assert send_delay_seconds(400, 0) == 0
    assert send_delay_seconds(-5_000, 0) == 0
    assert send_delay_seconds(2_000_000, 0) == 900


def test_the_wait_per_batch_is_a_quarter_of_rounding_down_and_lateness_stays_within_half_a_second() -> None:
    figures = worker_wait.measure()
    # Rounding down waited 0.5 s per batch on average and up to 0.999 s.
    assert figures["worker_wait_s_per_batch"] <= 0.13
    assert figures["worker_wait_ms_max"] < 500
    # The price of it: lateness, at most the tolerance, which leaves half of the 1 s lag target.
    assert figures["send_lateness_ms_max"] <= SEND_LATE_TOLERANCE_MS <= 500


def test_the_wait_is_priced_per_run() -> None:
    prices, _ = units.load_prices()
    at_batch_10 = worker_wait.priced(0.5, prices, 512, 10)
    at_batch_1 = worker_wait.priced(0.5, prices, 512, 1)
    assert abs(at_batch_1 - 10 * at_batch_10) < 0.001
    assert 0.3 < at_batch_10 < 0.4  # 0.05 s x 0.5 GB x $0.0000133334 per GB-s, per million
