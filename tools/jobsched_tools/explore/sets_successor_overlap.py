"""The successor model's overlap and walk extension (tools/jobsched_tools/successor/sets_overlap.py,
``overlap.py``, ``writes_overlap.py``, ``invariants_overlap.py``) on the product's explorer, on its
successor world (``successor.py``); with the plan's unexplored ``edit-stale-page`` (HC10) and the
legacy conversion on a migrating stack (§5, deploy 1), which the model does not have.

**Overlap** (``OVERLAP``): each of the model's base sets under each policy it names
(``<base>-<policy>``), with the real worker's walk (services/chain.py, W1-W16) on shape f's chain
(the head's ``after_run_id`` is the chain's end; an ad-hoc run relinks the head). The model's
``oworker`` with a pattern is the product's ``worker_of`` (the first fresh message of a kind:
``scheduled`` for an occurrence, ``manual`` for an ad-hoc run); its ``finisher`` of a dead holder is
left out (as in the product's ``waiting-race-*``: the holder's lease lapses instead). What the
model's ``invariants_overlap.py`` checks is checked here by the world the sets run in, not written
again: two runs executing at once (``overlap``, the world's ``exec_start``); more than one run
waiting (``more_than_one_waits``); a run waiting for itself through others (``waits_cycle``,
core/invariants.py, in ``successor.STILL_APPLY``: the walk without W4 is caught by it; without W12,
the walk meeting its own run, the product is equivalent: ``WALK_UNCAUGHT``); a finished run that
never walked (``finished_without_walk``); a skip under ``buffer_all`` (``skipped_under_buffer_all``);
a skip naming no holder (``skipped_without_holder``), or one its walk did not read unfinished
(``skip_holder_not_walked``: the walk without W9, meeting a run twice); a wait nobody owes a promotion
(``wait_behind_ended``, I9); a stale start (I4', core/head_invariants.py); and after the drive a run
left waiting (``unfinished_after_drive``).

**The change** (``CHANGES``): ``edit-stale-page`` (HC10: an edit that keeps the timing is a change:
the head closed with its marker, a new head at the same instant in the new epoch, while a claimer
holds a page of the head from before), and the sets that reach the change transaction's parts
(core/transitions/head_change.py) one at a time.

**The conversion** (``CONVERSIONS``): a job registered before the switch (a legacy state in
``next-run``) on a migrating stack, switched on; today's trigger (old code, still deployed beside
the new: ``old_tick``) claims it as the new code converts it (core/transitions/head_convert.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from jobsched.core.policies import MAX_CHAIN_STEPS, WALK_EXHAUSTED, chain_step, not_yet_due, waits_for_walker
from jobsched.core.run import RunStatus, run_key
from jobsched.core.writes import RUNS, Item
from jobsched.services.chain import Chain
from jobsched.services.messages import parse_run_message
from jobsched.services.trigger import Trigger
from jobsched.services.worker import HandlerResult, Started

from jobsched_tools.explore import successor
from jobsched_tools.explore.drive import Services
from jobsched_tools.explore.model import JOB_ID, NEW, SECOND, ActorSet, ActorSpec, by_name
from jobsched_tools.explore.sets_successor import MINUTE, WINDOW_END, at, retime
from jobsched_tools.explore.world import Budget, World

ALL_WALKING = ("skip", "buffer_one", "buffer_all", "cancel_other")


def _a(name: str, kind: str, offset_ms: int = 0, arg: object = None) -> ActorSpec:
    return ActorSpec(name, kind, offset_ms, arg)


SCHEDULED = ("scheduled", True)  # ``worker_of``: the first fresh message of an occurrence, succeeding
MANUAL = ("manual", True)


# --- set-ups (serial, on the setup's services) ------------------------------------------------------


def _begin(world: successor.SuccessorWorld, drive: Services, kind: str) -> Started | None:
    """The first queued message of ``kind`` taken and begun by the setup's worker (which walks)."""
    fresh = [seq for seq, body, _ in world.mq.queued() if body.get("kind") == kind]
    taken = world.mq.take(fresh[0]) if fresh else None
    assert taken is not None, f"no {kind} message queued: {world.mq.queued()}"
    begun = drive.worker.begin(parse_run_message(taken[1]), world.clock.now_ms() + 900_000)
    world.mq.delete(taken[0])
    world.after_write([])
    return begun if isinstance(begun, Started) else None


def _claim_then_manual(world: successor.SuccessorWorld, drive: Services) -> None:
    """00:05 claimed at 00:04 (its message queued); a manual run made at 00:04:30."""
    world.clock.set(at(4))
    drive.trigger.tick("setup")
    world.clock.set(at(4, 30))
    drive.ops.trigger(JOB_ID, request_id="setup")
    world.after_write([])


def _overtaker_running(world: successor.SuccessorWorld, drive: Services) -> None:
    """The model's ``overtaker_running``: 00:05 claimed; the manual run made at 00:04:30 starts
    then, passing over 00:05 (not yet due: W3, marked overtaken), and its worker dies (its lease
    lapses at 00:05:00)."""
    _claim_then_manual(world, drive)
    _begin(world, drive, "manual")


def _overtaken_ended(world: successor.SuccessorWorld, drive: Services) -> None:
    """The model's ``overtaken_ended``: as ``overtaker-running``, and the manual run ends."""
    _claim_then_manual(world, drive)
    begun = _begin(world, drive, "manual")
    if begun is not None:  # (a mutant's walk may skip it instead)
        drive.worker.finish(begun, HandlerResult(True))
        world.after_write([])


def _manual_waiting(world: successor.SuccessorWorld, drive: Services) -> None:
    """The model's ``manual_waiting`` as the product's (build.py ``manual-waiting``): at 00:05 the
    manual run's worker finds 00:05 due and not started, and parks the manual run behind it."""
    _claim_then_manual(world, drive)
    world.clock.set(at(5))
    _begin(world, drive, "manual")


def _held_due(world: successor.SuccessorWorld, drive: Services) -> None:
    """The model's ``held_due`` as the product's (build.py ``held-due``): a manual run made at
    00:03:50 starts at 00:03:55 and holds the turn (its worker died); 00:05, claimed at 00:04,
    comes due behind it; a second manual run made at 00:04:30 is behind 00:05."""
    world.clock.set(at(3, 50))
    drive.ops.trigger(JOB_ID, request_id="first")
    world.clock.set(at(3, 55))
    _begin(world, drive, "manual")
    _claim_then_manual(world, drive)


successor.SETUP_STEPS.update(
    {
        "overtaker-running": _overtaker_running,
        "overtaken-ended": _overtaken_ended,
        "manual-waiting": _manual_waiting,
        "held-due": _held_due,
        "legacy": lambda world, _drive: successor.switch_on(world),
    }
)
successor.BEFORE_SWITCH.add("legacy")


# --- old code beside the new (a migrating stack: deploy 1's functions not all replaced yet) ----------


def old_tick(world: World, svc: Services, spec: ActorSpec) -> None:
    """Today's trigger, which reads no switch (runtime/wiring.py before deploy 1): it claims a
    legacy state through ``next-run`` as it always did, beside the new code's conversion."""
    Trigger(
        world.store,
        world.queue,
        world.telemetry,
        svc.clock,
        world.cfg,
        parallel_queries=False,
        claim_concurrency=1,
        claimer_id=spec.name,
        read_claim_shape=False,
    ).tick(spec.name)


successor.SUCCESSOR_PROGRAMS["old_tick"] = old_tick


# --- the sets ---------------------------------------------------------------------------------------


def _set(
    name: str,
    actors: tuple[ActorSpec, ...],
    when: int = at(4),
    setup: str = "registered",
    budget: Budget | None = None,
    note: str = "",
    overlap: str = "skip",
) -> ActorSet:
    return ActorSet(
        name,
        actors,
        setup=setup,
        at=when,
        window_end=WINDOW_END,
        budget=budget if budget is not None else Budget(crashes=0),
        note=note,
        overlap=overlap,
    )


# Each base set, the policies the model explores it under.
_BASE: tuple[tuple[ActorSet, tuple[str, ...]], ...] = (
    (
        _set(
            "ovl-overtake",
            (
                _a("manual", "manual"),
                _a("workerM", "worker_of", arg=MANUAL),
                _a("workerS", "worker_of", 30 * SECOND, SCHEDULED),
            ),
            when=at(4, 30),
            setup="claimed",
            note="a manual run (00:04:30) passes over 00:05, claimed and not yet due, and marks it "
            "overtaken in its start; 00:05's worker at 00:05 starts it, or meets the mark (W1, W3)",
        ),
        ALL_WALKING,
    ),
    (
        _set(
            "ovl-overtake-long",
            (
                _a("workerS", "worker_of", arg=SCHEDULED),
                _a("tick", "tick", 4 * MINUTE),
                _a("workerT", "worker_of", 5 * MINUTE, SCHEDULED),
            ),
            when=at(5),
            setup="overtaken-ended",
            note="a manual run overtook 00:05 and ended; 00:05 runs as 00:10 (claimed at 00:09, "
            "behind it) walks: it reaches the manual run only through 00:05 (W8)",
        ),
        ("skip", "buffer_one", "cancel_other"),
    ),
    (
        _set(
            "ovl-overtaker-recovered",
            (
                _a("workerS", "worker_of", arg=SCHEDULED),
                _a("detector", "detector"),
                _a("workerM", "worker_of", arg=MANUAL),
            ),
            when=at(5, 10),
            setup="overtaker-running",
            note="a manual run overtook 00:05 and its worker died; the detector recovers it as "
            "00:05 comes due: the overtaker walks again and meets the run it overtook (W4, I8)",
        ),
        ("skip", "buffer_one", "cancel_other"),
    ),
    (
        _set(
            "ovl-manual-worker-tick",
            (_a("manual", "manual"), _a("tick", "tick"), _a("worker", "worker", MINUTE, 2)),
            note="the product's manual-worker-tick: an ad-hoc relink, a claim and a worker taking both "
            "messages at 00:05",
        ),
        ALL_WALKING,
    ),
    (
        _set(
            "ovl-manual-worker-tick-dup",
            (_a("manual", "manual"), _a("tick", "tick"), _a("worker", "worker", MINUTE, 2)),
            budget=Budget(crashes=1, dups=1),
            note="the same, one message delivered twice (a skip and a wait keep the run's token)",
        ),
        ("skip",),
    ),
    (
        _set(
            "ovl-retime-walk",
            (
                _a("workerS", "worker_of", arg=SCHEDULED),
                _a("registrar", "change", arg=retime(NEW)),
                _a("tick", "tick"),
                _a("workerN", "worker_of", MINUTE, SCHEDULED),
            ),
            when=at(5),
            setup="claimed",
            note="00:05 runs as a retime to 3 minutes closes the head 00:10 (its marker at 00:15) "
            "and heads 00:06, linked to the closed head's link (00:05); 00:06 is claimed and walks",
        ),
        ("buffer_one", "cancel_other"),
    ),
    (
        _set(
            "ovl-stale-page",
            (_a("tick", "tick"), _a("manual", "manual"), _a("worker", "worker", MINUTE, 2)),
            budget=Budget(crashes=0, stale=1),
            note="a claimer's page from before an ad-hoc relink: the claim's message carries the "
            "link before the relink; its token fences it out (I4') before its walk can matter",
        ),
        ("skip", "buffer_one"),
    ),
    (
        _set(
            "ovl-waiting-race",
            (_a("workerS", "worker_of", arg=SCHEDULED), _a("workerM", "worker_of", arg=MANUAL)),
            when=at(5, 1),
            setup="held-due",
            note="the product's waiting-race: a manual run holds the turn; 00:05 due behind it, a "
            "second manual run behind 00:05; both workers walk and wait at once",
        ),
        ALL_WALKING,
    ),
    (
        _set(
            "ovl-promoters",
            (
                _a("workerS", "beating_worker"),
                _a("detector", "detector", 40 * SECOND),
                _a("workerP", "worker_of", 40 * SECOND, MANUAL),
            ),
            when=at(5, 5),
            setup="manual-waiting",
            note="the product's promoters: the manual run waits behind 00:05; 00:05 ends and its "
            "worker promotes it as the detector finds its lease lapsed and promotes it; a worker "
            "starts it",
        ),
        ("buffer_one", "buffer_all", "cancel_other"),
    ),
)

OVERLAP: dict[str, ActorSet] = by_name(
    *(
        replace(base, name=f"{base.name}-{policy}", overlap=policy)
        for base, policies in _BASE
        for policy in policies
    )
)

# W3 with one clock: the explorer judges a skip behind a run not due yet with the actors' offsets as
# clock skew (``successor.explore``'s ``skew_ms``), so ``ovl-overtake`` (00:05's worker 30 s on)
# allows a minute; here no actor is offset, and the allowance is the stack's (2 s).
WALK = by_name(
    _set(
        "overtake-not-due",
        (_a("manual", "manual"), _a("workerM", "worker_of", arg=MANUAL)),
        when=at(4, 30),
        setup="claimed",
        note="a manual run at 00:04:30 passes over 00:05, claimed and not yet due (W3); 00:05 runs "
        "in the drive, after it",
    ),
)

CHANGES: dict[str, ActorSet] = by_name(
    _set(
        "edit-stale-page",
        (_a("tick", "tick"), _a("registrar", "change", arg="edit")),
        budget=Budget(crashes=1, stale=1),
        note="HC10: an edit that keeps the timing closes 00:05#1 (its marker at 00:10#1) and heads "
        "00:05#2, while a claimer holds a page of 00:05#1 from before",
    ),
    _set(
        "edit-claim-race",
        (_a("tick", "tick"), _a("registrar", "change", arg="edit")),
        note="HC10 without faults: a claimer that read the job before the edit claims 00:05#1 "
        "between the change's read and its write (two preemptions: the claimer's and the change's)",
    ),
    _set(
        "settle-edit",
        (_a("detector", "detector"), _a("registrar", "change", -130 * SECOND, "edit")),
        when=at(6, 10),
        note="00:05#1 unclaimed 70 s past: the detector settles it (its record, its successor) "
        "as an edit whose registrar's clock reads 00:04 (it reads the head not due) closes it: both "
        "decide the head and write its successor key",
    ),
)

CONVERSIONS: dict[str, ActorSet] = by_name(
    _set(
        "convert-old-claim",
        (_a("old", "old_tick"), _a("tick", "tick")),
        setup="legacy",
        budget=Budget(crashes=1),
        note="a legacy state (00:05 next) on a migrating stack switched on: today's trigger claims "
        "00:05 in next-run as the new trigger converts the state (its first head at 00:05)",
    ),
)

SETS: dict[str, ActorSet] = {**OVERLAP, **WALK, **CHANGES, **CONVERSIONS}


Catch = tuple[str, int, str]  # a catcher: (set, k, the check it reports)


# --- the walk's rules, each removed alone (the model's ``overlap.WALK_RULES``) ---------------------------
#
# The walk (services/chain.py ``Chain.holder``) decides from reads, not from a condition part, so its
# rules are no switches: each mutant is the walk with one rule taken out, and ``WALK_CATCHERS`` names
# the overlap set that catches it on the successor stack, with the check it reports (the world's: a
# run waiting for itself through others, ``waits_cycle``; two runs executing at once, ``overlap``; a
# skip naming a run its walk did not read unfinished, ``skip_holder_not_walked``).
WALK_RULES: dict[str, str] = {
    "W3": "a claimed run not yet due holds no turn for a run starting before it: passed over, marked",
    "W4": "a run the walker overtook, not started since, waits for it: passed over",
    "W9": "a run met twice (skipped for the overtaker the walk came from): go on before it",
    "W12": "the walk reaching the walker itself (through a skip naming it): its own turn, it runs",
}


def _holder_without(rule: str) -> Callable[..., tuple[Item | None, list[Item]]]:
    """``Chain.holder`` with ``rule`` taken out (its code, rule by rule; a mutant, not a check)."""

    def holder(
        chain: Chain, after_run_id: str | None, now: int, overtake: bool = True, walker: str | None = None
    ) -> tuple[Item | None, list[Item]]:
        run_id, passed, seen = after_run_id, list[Item](), set[str]()
        for _ in range(MAX_CHAIN_STEPS):
            if run_id is None:
                return None, passed
            seen.add(run_id)
            run = chain._store.get(RUNS, run_key(run_id))
            if rule != "W12" and walker is not None and run_id == walker:
                return run, passed
            if rule != "W3" and overtake and run is not None and not_yet_due(run, now):
                passed.append(run)
                run_id = run.get("after_run_id")
                continue
            if rule != "W4" and run is not None and waits_for_walker(run, walker):
                run_id = run.get("after_run_id")
                continue
            holds, run_id = chain_step(run)
            if holds:
                return run, passed
            if rule != "W9" and run is not None and run_id in seen:
                run_id = run.get("after_run_id")
        if run_id is None:
            return None, passed
        return {"run_id": run_id, "status": RunStatus.BUFFERED.value, WALK_EXHAUSTED: True}, passed

    return holder


# Each rule, the set that catches the walk without it (k, the check reported); or why none does.
WALK_CATCHERS: dict[str, Catch] = {
    "W3": ("overtake-not-due", 0, "manual_skipped_behind_future"),
    "W4": ("ovl-overtaker-recovered-buffer_one", 0, "waits_cycle"),
    # The walk loops between the ended overtaker (W8) and 00:05, skipped for it, to its bound (W11),
    # and 00:10 is skipped for the overtaker, which it read ended, after reading two runs.
    "W9": ("ovl-overtaker-recovered-skip", 0, "skip_holder_not_walked"),
}
WALK_UNCAUGHT: dict[str, str] = {
    "W12": "equivalent on the product: without it the walk still returns the walker, which is "
    "unfinished (W5), as its holder, and decide_overlap runs a run that holds its own turn "
    "(ovl-overtaker-recovered-*: the recovered overtaker meets 00:05, skipped for it, and runs)",
}


@contextmanager
def walk_without(rule: str) -> Iterator[None]:
    """The block's walks without ``rule`` (``WALK_RULES``)."""
    if rule not in WALK_RULES:
        raise ValueError(f"unknown walk rule {rule!r}; one of {', '.join(WALK_RULES)}")
    original = Chain.holder
    Chain.holder = _holder_without(rule)  # type: ignore[method-assign]
    try:
        yield
    finally:
        Chain.holder = original  # type: ignore[method-assign]


# --- the condition parts these sets catch (sim/mutants.py ``SUCCESSOR_SWITCHABLE``, w3overlap's block) --
#
# As tests/sim/test_switches.py keeps today's: each part, the set that catches it switched off alone
# (this module's or ``sets_successor.SETS``), at k preemptions, and the check it reports; a part no
# set catches alone has its reason, and the parts that stop its race together are switched off
# together and caught (``PAIRS``); each reason is backed by a unit test too (its module's test).
CATCHERS: dict[str, Catch] = {
    # Two changes of a paused job (no head: the state is all they share) read one version: the
    # resume heads 00:05 and the retime 00:06, each at the epoch both named.
    "head_change_ops:_change_state_version": ("paused-resume-retime", 1, "H1_one_head"),
    # An ad-hoc run relinks the head between the change's read and its write: the new head takes the
    # link as read, and the ad-hoc run leaves the chain.
    "head_change_ops:_head_version": ("manual-retime", 1, "I3_unreachable"),
    # HC10: a claim of 00:05#1 (its job read before the edit) lands between the change's read and
    # its write; the marker is put over the claim's 00:10#1, and the claimed run is cancelled.
    "head_change_ops:_change_marker_absent": ("edit-claim-race", 2, "record_overwritten"),
    # Today's trigger claims 00:05 (legacy key, the state's version moved) as the new code converts
    # the state it read before: the first head is 00:05 again, and 00:05 runs twice.
    "_state_op:_state_unchanged": ("convert-old-claim", 1, "I1prime_one_live_record"),
}

REASONS: dict[str, str] = {
    "head_change_ops:_head_scheduled": "redundant: a head leaves scheduled only by a write that moves "
    "its version too (the settle's decision of a due head, a start, another change's close), and all "
    "but a change's close write its successor key too (head_change_ops:_head_version and "
    "_change_marker_absent stop them; another change's close, the state's version); a late-run settle "
    "leaves the head scheduled at a new version, so the pair below is caught by those two alone "
    "(tests/unit/test_head_change.py test_a_close_needs_the_head_still_scheduled)",
    "head_change_ops:_change_new_head_free": "redundant: a new epoch's keys are written only by the change "
    "that makes the epoch, and two changes naming one epoch read one state version, so "
    "_change_state_version stops the second first (build plan HC1; tests/unit/test_head_change.py "
    "test_new_head_free_is_caught_only_with_the_state_version_removed)",
    "convert_legacy_ops:_run_is_new": "redundant: the first head's epoch is the state's version + 1, a key "
    "only a conversion of that state version writes, and the conversion moves the version: "
    "_state_op:_state_unchanged stops a second one first (tests/unit/test_head_convert.py "
    "test_the_first_heads_put_never_replaces_an_item)",
}

PAIRS: dict[tuple[str, ...], Catch] = {
    # The second change's new head is put over the first's (same epoch, same instant).
    ("head_change_ops:_change_state_version", "head_change_ops:_change_new_head_free"): (
        "paused-resume-retime",
        1,
        "record_overwritten",
    ),
    (
        "head_change_ops:_head_scheduled",
        "head_change_ops:_head_version",
        "head_change_ops:_change_marker_absent",
    ): ("settle-edit", 2, "record_overwritten"),
    ("_state_op:_state_unchanged", "convert_legacy_ops:_run_is_new"): (
        "convert-old-claim",
        1,
        "I1prime_one_live_record",
    ),
}
