"""The one exception type the schedule engine raises."""

from __future__ import annotations


class ScheduleError(ValueError):
    """An invalid schedule expression, zone, bound or query instant.

    Subclasses ValueError so callers validating user input can catch either; the
    message always names the offending field so it can be shown to users verbatim.
    """


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters: messages echo user input, which may be huge."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
