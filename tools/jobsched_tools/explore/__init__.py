"""An exhaustive interleaving explorer over the real services (issue 25).

``scenarios``: the job, its set-up and the actor sets; ``sched``: cooperative threads, one
scheduling point per store or queue call; ``world``: the wrappers, the ledger, the drive to
quiescence and the checks; ``search``: every schedule with at most k preemptions, depth first
with replay. ``python -m jobsched_tools.explore --help``.
"""
