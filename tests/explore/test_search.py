"""The search over a world of its own: ``explore/search.py``'s ``search``, ``finish_once`` and
``play_script`` need nothing of a world but ``Explored`` and ``Checked`` (a scheduler, a
fingerprint, findings): the product's world and shape f's model both use them, and so does this
toy, two actors each reading a counter and writing it plus one."""

from __future__ import annotations

from dataclasses import dataclass, field

from jobsched_tools.explore.sched import Call, Scheduler
from jobsched_tools.explore.search import Step, Tally, finish_once, play_script, search


@dataclass(frozen=True)
class Lost:
    check: str
    key: str
    detail: str


@dataclass
class Findings:
    findings: list[Lost] = field(default_factory=list)


class Counter:
    """The world: a counter and two incrementers (a read, then a write of what was read plus one)."""

    def __init__(self) -> None:
        self.sched = Scheduler()
        self.ledger = Findings()
        self.value = 0
        self.trace: list[str] = []
        for name in ("a", "b"):
            self.sched.add(name, self._increment)

    def _increment(self) -> None:
        self.sched.point(Call("get", "get counter"))
        seen = self.value
        actor = self.sched.actor_here()
        assert actor is not None
        actor.digest.update(str(seen).encode())  # what it read decides what it writes
        self.sched.point(Call("write", "write counter"))
        self.value = seen + 1

    def fingerprint(self) -> bytes:
        actors = [(a.name, a.pc, a.done, a.digest.hexdigest()) for a in self.sched.actors]
        return repr((self.value, actors)).encode()

    def note(self, line: str) -> None:
        self.trace.append(line)

    def outcome_key(self) -> bytes:
        return str(self.value).encode()

    def find(self, check: str, key: str, detail: str) -> None:
        self.ledger.findings.append(Lost(check, key, detail))


def _explore(k: int) -> tuple[Tally[Lost], list[int]]:
    tally: Tally[Lost] = Tally("counter", k)
    terminal: dict[bytes, list[Lost]] = {}
    checked: list[int] = []  # the final values the checks ran on (once per final state)

    def check(world: Counter) -> None:
        checked.append(world.value)
        if world.value != 2:
            world.find("lost_update", "counter", f"{world.value} after 2 increments")

    def finished(world: Counter) -> list[Lost]:
        finish_once(world, terminal, lambda: check(world))
        return world.ledger.findings

    search(Counter, finished, k, tally)
    return tally, checked


def test_the_search_takes_any_world_with_a_scheduler_a_fingerprint_and_findings() -> None:
    serial, serial_checked = _explore(0)
    assert serial.schedules == 2 and serial.counts == {}  # a then b, b then a
    assert serial_checked == [2]  # one final state, checked once
    preempted, checked = _explore(1)
    assert preempted.counts["lost_update"] > 0
    assert preempted.first["lost_update"].detail == "1 after 2 increments"
    assert sorted(checked) == [1, 2]  # each final state checked once, however many schedules reach it
    assert preempted.schedules > len(checked) and preempted.states > 0
    assert preempted.pruned > 0  # states met again with no fewer preemptions are not explored again


def test_a_schedule_written_by_hand() -> None:
    world = Counter()
    script: list[Step] = [("a", "through", "get"), ("b", "rest", ""), ("a", "rest", "")]
    play_script(world, script)
    assert world.value == 1
    assert all(actor.done for actor in world.sched.actors)
