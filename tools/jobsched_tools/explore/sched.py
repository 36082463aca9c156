"""Cooperative scheduling of real service code: each actor runs on its own thread, but only one
runs at a time. An actor stops at every scheduling point (each store or queue call, made through
the explorer's wrappers) and waits until the controller picks it again, with an option for that
call (apply it normally, crash after it, lose its response, ...).

The services are ordinary blocking code; the threads only give each actor a stack of its own.
Nothing runs concurrently, so a schedule (the controller's sequence of picks) determines the run.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

OK = "ok"


class Crash(BaseException):
    """The actor's process dies here. A BaseException: no service's ``except Exception`` stops it."""


class Abandon(BaseException):
    """The explorer drops this schedule: every actor still waiting unwinds with this."""


@dataclass(frozen=True)
class Call:
    """An actor's next call, as the controller sees it before choosing."""

    kind: str  # start, get, query, write, update, delete, send, receive, handler
    detail: str
    options: tuple[str, ...] = (OK,)
    # Options that depend on the world when the controller picks (a receive: the queued messages).
    dynamic: Callable[[], tuple[str, ...]] | None = None

    def choices(self) -> tuple[str, ...]:
        return self.dynamic() if self.dynamic is not None else self.options


@dataclass
class Actor:
    name: str
    program: Callable[[], object]
    resume: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    thread: threading.Thread | None = None
    pending: Call | None = None
    option: str = OK
    done: bool = False
    crashed: bool = False
    error: str | None = None
    abandon: bool = False
    pc: int = 0  # calls made
    # What the actor has seen (every call's result): its local state is a function of it, so two
    # schedules reaching the same tables with the same digests are the same state.
    digest: hashlib.blake2b = field(default_factory=lambda: hashlib.blake2b(digest_size=16))

    @property
    def enabled(self) -> bool:
        return not self.done and self.pending is not None


class Scheduler:
    def __init__(self) -> None:
        self.actors: list[Actor] = []
        self._back = threading.Semaphore(0)
        self._here = threading.local()

    def add(self, name: str, program: Callable[[], object]) -> Actor:
        actor = Actor(name, program)
        self.actors.append(actor)
        return actor

    def actor_here(self) -> Actor | None:
        """The actor whose thread is calling, or None (set-up, the drive to quiescence)."""
        return getattr(self._here, "actor", None)

    def start(self) -> None:
        """Start every actor's thread; each stops at its first point ("start")."""
        for actor in self.actors:
            actor.thread = threading.Thread(target=self._body, args=(actor,), name=actor.name, daemon=True)
            actor.thread.start()
            self._back.acquire()

    def _body(self, actor: Actor) -> None:
        self._here.actor = actor
        try:
            self.point(Call("start", "start"))
            actor.program()
        except Crash:
            actor.crashed = True
        except Abandon:
            pass
        except BaseException as exc:  # reported by the world as an unexpected exception
            actor.error = f"{type(exc).__name__}: {exc}"
        finally:
            actor.done = True
            actor.pending = None
            self._back.release()

    def point(self, call: Call) -> str:
        """Called on an actor's thread before each call: wait to be picked; returns the option."""
        actor = self.actor_here()
        if actor is None:
            return OK
        if actor.abandon:
            raise Abandon
        actor.pending = call
        self._back.release()
        actor.resume.acquire()
        if actor.abandon:
            raise Abandon
        actor.pending = None
        actor.pc += 1
        return actor.option

    def step(self, actor: Actor, option: str) -> None:
        """Let ``actor`` make its pending call with ``option`` and run to its next point."""
        actor.option = option
        actor.resume.release()
        self._back.acquire()

    def close(self) -> None:
        """Unwind every actor still waiting, and join the threads."""
        for actor in self.actors:
            if not actor.done and actor.thread is not None:
                actor.abandon = True
                actor.resume.release()
                self._back.acquire()
        for actor in self.actors:
            if actor.thread is not None:
                actor.thread.join(timeout=10)
