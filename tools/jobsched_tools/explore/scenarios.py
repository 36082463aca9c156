"""The explored worlds: one job, its set-up, and the actor sets (issue 25's core sets and more).

The modules: ``model`` (the job, ``ActorSpec``, ``ActorSet``), ``programs`` (what each kind of
actor does), ``build`` (the set-ups, and ``build``), ``sets_core`` and ``sets_promises`` (the
actor sets by family). This module gathers them: ``ACTOR_SETS`` is every set by name.

To add an actor: write a program (a function of the world, the actor's services and its spec,
run on the actor's own thread; every store and queue call it makes through ``world.store`` /
``world.queue`` is a scheduling point), register it in ``PROGRAMS``, and use its kind in an
``ActorSet``.
"""

from __future__ import annotations

from jobsched_tools.explore.build import RESUME_SEEN_AT, RESUMED_AT, SETUP_STEPS, SETUPS, build
from jobsched_tools.explore.model import (
    CFG,
    JOB_ID,
    MINUTE,
    NEW,
    OLD,
    SECOND,
    T0,
    ActorSet,
    ActorSpec,
    actor_spec,
    by_name,
    job_item,
)
from jobsched_tools.explore.programs import PROGRAMS
from jobsched_tools.explore.sets_core import CORE, MORE, OVERTAKES, TOYS, WAITING
from jobsched_tools.explore.sets_promises import DEAD_LETTER_QUEUE, FAILING, FENCES, PROMISES

ACTOR_SETS: dict[str, ActorSet] = {**CORE, **MORE, **WAITING, **OVERTAKES, **PROMISES, **TOYS, **FENCES}

__all__ = [
    "ACTOR_SETS",
    "CFG",
    "CORE",
    "DEAD_LETTER_QUEUE",
    "FAILING",
    "FENCES",
    "JOB_ID",
    "MINUTE",
    "MORE",
    "NEW",
    "OLD",
    "OVERTAKES",
    "PROGRAMS",
    "PROMISES",
    "RESUMED_AT",
    "RESUME_SEEN_AT",
    "SECOND",
    "SETUPS",
    "SETUP_STEPS",
    "T0",
    "TOYS",
    "WAITING",
    "ActorSet",
    "ActorSpec",
    "actor_spec",
    "build",
    "by_name",
    "job_item",
]
