"""Importing schedules from other schedulers (``jobsched import``)."""
