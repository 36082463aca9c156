"""Schedule engine: parse EventBridge-style schedule expressions and compute occurrences.

Pure: no I/O, no environment, no clock. Callers pass the current time in.
"""

from .errors import ScheduleError
from .schedule import HORIZON_END, Schedule, parse_schedule
from .zones import load_zone

# The names the rest of jobsched imports from the package.
__all__ = ["HORIZON_END", "Schedule", "ScheduleError", "load_zone", "parse_schedule"]
