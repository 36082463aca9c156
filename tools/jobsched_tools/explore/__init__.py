"""An exhaustive interleaving explorer over the real services (issue 25).

``sched``: cooperative threads, one scheduling point per store or queue call; ``search``: every
schedule with at most k preemptions, depth first with replay; ``world``: one world's store,
queue, clock, ledger and checks at every write, and the wrappers that make each call a
scheduling point; ``drive``: the services and the drive to quiescence; ``checks``: the checks
after it; ``model``, ``programs``, ``build``, ``sets_core``, ``sets_promises``: the job, the
actors, the set-ups and the actor sets, gathered in ``scenarios``. ``python -m
jobsched_tools.explore --help``.
"""
