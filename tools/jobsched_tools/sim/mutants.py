"""Conditions removed on purpose, to show the simulation can fail.

Each mutant takes one named condition part out of ``core/transitions/`` (it always holds), or
one rule out of ``core/policies.py``, for the length of a ``with`` block. A chaos run under a
mutant must report violations of the invariant that condition protects; ``jobsched chaos
--mutant NAME`` runs one, and tests/sim/test_chaos.py keeps a test for each.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from jobsched.core import dead_letter, policies, transitions
from jobsched.core.writes import Cond, Update, WriteOp

# What each removed condition lets through, and the invariant that must then report it.
MUTANTS: dict[str, str] = {
    "fencing": "the commit's fencing token: a zombie worker commits (fenced_out_commit)",
    "lease": "recovery's lease-as-read: a live, renewed lease is recovered (live_lease_recovered)",
    "slot": "the chain's rule that an unfinished run holds the job's turn: two runs of a skip job "
    "run at once (overlap_violated)",
    "claim": "the claim's run-is-new: a claim overwrites a backfilled run (record_overwritten)",
    "advance": "the claim's state-as-read (version): a claim made from a state read before a manual "
    "run joined the chain links its run behind the old end, beside the manual run (overlap_violated)",
    "heartbeat": "the heartbeat's token and owner: a stalled worker that wakes after its run was "
    "recovered renews the lease of the run's new holder to its own deadline, and the detector "
    "then fails the live run (stale_heartbeat)",
    "settle": "the settle's state-as-read: a catch-up chunk written over a state an ad-hoc run "
    "moved links behind the old chain end, beside the ad-hoc run (overlap_violated)",
    "walk": "a run failed without starting passes the walk to its predecessor: a later run starts "
    "while the predecessor still runs (overlap_violated)",
    "overtake": "the start's overtaken_by: an occurrence that a manual run passed over before it "
    "came due starts beside that manual run (overlap_violated)",
    "completion": "the delete after completion's every-run-ended: a finished job's item is deleted "
    "while its last run is still pending or running (deleted_before_complete)",
    "cancel": "recovery's no-cancel-request: a cancel_other holder asked to stop after the "
    "detector read it is redispatched, and its handler runs again (cancelled_run_redispatched)",
}


def _holds(why: str) -> Cond:
    # A comparison with a value no item has: true whenever the attribute is there or not.
    return Cond("ne", "version", f"mutant: {why}", -1)


def _without_fencing(_version: int) -> Cond:
    return _holds("no fencing token")


def _without_lease_check(_run: dict[str, Any]) -> Cond:
    return _holds("no lease-as-read")


def _turn_always_free(_run: dict[str, Any] | None) -> tuple[bool, str | None]:
    return False, None  # no run holds the job's turn: every start finds it free


def _claim_unchecked(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    def claim(*args: Any, **kwargs: Any) -> list[WriteOp]:
        create, *rest = original(*args, **kwargs)
        return [replace(create, condition=()), *rest]

    return claim


def _advance_unchecked(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    def claim(*args: Any, **kwargs: Any) -> list[WriteOp]:
        create, advance = original(*args, **kwargs)
        return [
            create,
            replace(advance, condition=tuple(c for c in advance.condition if c.attr != "version")),
        ]

    return claim


def _heartbeat_unchecked(original: Callable[..., Update]) -> Callable[..., Update]:
    def heartbeat(*args: Any, **kwargs: Any) -> Update:
        op = original(*args, **kwargs)
        return replace(op, condition=tuple(c for c in op.condition if c.attr not in ("version", "owner")))

    return heartbeat


def _start_unchecked(original: Callable[..., Update]) -> Callable[..., Update]:
    def start(*args: Any, **kwargs: Any) -> Update:
        op = original(*args, **kwargs)
        return replace(op, condition=tuple(c for c in op.condition if c.attr != "overtaken_by"))

    return start


def _settle_unchecked(original: Callable[..., list[WriteOp]]) -> Callable[..., list[WriteOp]]:
    def settle(*args: Any, **kwargs: Any) -> list[WriteOp]:
        state_op, *records = original(*args, **kwargs)
        kept = tuple(c for c in state_op.condition if c.attr != "version")
        return [replace(state_op, condition=kept), *records]

    return settle


def _failed_frees_the_turn(original: Callable[..., tuple[bool, str | None]]) -> Callable[..., Any]:
    def step(run: dict[str, Any] | None) -> tuple[bool, str | None]:
        if run is not None and run.get("status") == "failed":
            return False, None
        return original(run)

    return step


def _everywhere(name: str, replacement: Any) -> list[tuple[Any, str, Any]]:
    """``name`` of core/transitions/ replaced in the module that defines it and in every module of
    the runtime that imported it by name (the package's ``__init__``, the modules of the package
    that call it, a service): a function looks a name up in its own module's namespace."""
    original = next(vars(m)[name] for m in (transitions, *_transitions_modules()) if name in vars(m))
    return [
        (module, name, replacement)
        for module_name, module in sorted(sys.modules.items())
        if module_name.startswith("jobsched.") and vars(module).get(name) is original
    ]


def _service_patch(name: str) -> tuple[Any, str, Any]:
    """The mutants that replace what a service imported from the core."""
    import jobsched.services.completion as completion
    import jobsched.services.settle as settle
    import jobsched.services.worker as worker

    if name == "heartbeat":
        return (worker, "heartbeat_op", _heartbeat_unchecked(transitions.heartbeat_op))
    if name == "settle":
        return (settle, "settle_ops", _settle_unchecked(transitions.settle_ops))
    if name == "overtake":
        return (worker, "start_op", _start_unchecked(transitions.start_op))
    return (completion, "UNFINISHED", frozenset())  # completion: no run counts as not ended


@contextmanager
def mutant(name: str) -> Iterator[None]:
    """Run the block with one condition removed (see ``MUTANTS``)."""
    import jobsched.services.chain as chain

    # Loaded before the patches are chosen: ``_everywhere`` patches the claim_ops it imported.
    importlib.import_module("jobsched.services.trigger")

    patches: list[tuple[Any, str, Any]] = []
    if name == "fencing":
        patches += _everywhere("_run_token", _without_fencing)
    elif name == "lease":
        patches += _everywhere("_lease_as_read", _without_lease_check)
    elif name == "slot":
        patches.append((chain, "chain_step", _turn_always_free))
    elif name == "claim":
        patches += _everywhere("claim_ops", _claim_unchecked(transitions.claim_ops))
    elif name == "advance":
        patches += _everywhere("claim_ops", _advance_unchecked(transitions.claim_ops))
    elif name in ("heartbeat", "settle", "overtake", "completion"):
        patches.append(_service_patch(name))
    elif name == "cancel":
        patches += _everywhere("_not_asked_to_stop", lambda: _holds("no cancel-request check"))
    elif name == "walk":
        patches.append((chain, "chain_step", _failed_frees_the_turn(policies.chain_step)))
    else:
        raise ValueError(f"unknown mutant {name!r}; one of {', '.join(MUTANTS)}")
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
    try:
        for owner, attr, replacement in patches:
            setattr(owner, attr, replacement)
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)


# --- switches: every named condition part of core/transitions/, found in its source -------------
#
# A condition part is a ``Cond`` a write function of ``TRANSITIONS_MODULES`` builds: a call, in
# that function's own body, to a builder of ``core/writes.py`` (``eq``, ``not_exists``,
# ``any_of`` ...) or to one of the package's helpers that returns a ``Cond`` (``_run_token``,
# ``_state_as_read`` ..., most in ``core/transitions/conditions.py``, called by name from the
# other modules). Each has a switch, named ``<function>:<part>`` (no module: a write function's
# name is unique across the modules): ``<part>`` is the helper's name, or the attribute a
# builder compares (``*`` when the attribute is a loop's variable: every field as read), with
# ``#2`` for a second call of the same name in another statement. Switching a part off makes the
# builder or helper return a condition that always holds, when (and only when) it is called from
# that function at that part's lines: the function's other parts, and the same helper elsewhere,
# stay. The parts are read from the source, so a condition added without a catcher fails
# tests/sim/test_switches.py.
#
# ``TRANSITIONS_MODULES``: the modules of core/transitions/, read in this order (the order of
# ``condition_parts``); each one of the package must be listed (``_transitions_modules``).
TRANSITIONS_MODULES: tuple[str, ...] = (
    "jobsched.core.transitions.conditions",
    "jobsched.core.transitions.claim",
    "jobsched.core.transitions.settle",
    "jobsched.core.transitions.register",
    "jobsched.core.transitions.start",
    "jobsched.core.transitions.finish",
    "jobsched.core.transitions.recover",
    "jobsched.core.transitions.bookkeeping",
)
#
# ``SUCCESSOR_PREFIX``: the successor claim's writes (issue 37, shape f: ``head_claim``,
# ``head_settle`` ...) are built beside today's protocol and called by no service until build step
# S8 wires them, so no chaos run or explorer set can catch their parts yet. Each part's unit test
# (tests/unit/test_head_*.py) fails without it instead. S8 lists the modules above and gives their
# parts catchers; until then ``_transitions_modules`` passes over them.
SUCCESSOR_PREFIX = "head_"
# The skip lifted for the parts an explorer set on the successor world catches (issue 37; the
# product's explorer, explore/sets_successor.py ``MUTANTS``): ``switched_off`` knows them, so
# the set can run with each off; ``condition_parts`` (every part needs a catcher,
# tests/sim/test_switches.py) still passes over their modules until S8.
SUCCESSOR_SWITCHABLE: tuple[str, ...] = (
    "claim_head_op:_successor_absent",
    "relink_head_ops:_relink_successor_absent",
    "redispatch_head_op:_redispatch_status_scheduled",
    "redispatch_head_op:_redispatch_version",
    # w3overlap (issue 37): the change's and the legacy conversion's parts, caught by the overlap
    # sets (explore/sets_successor_overlap.py), edit-stale-page and convert-* (HC10, §5).
    "head_change_ops:_change_state_version",
    "head_change_ops:_head_scheduled",
    "head_change_ops:_head_version",
    "head_change_ops:_change_marker_absent",
    "head_change_ops:_change_new_head_free",
    # (w3chaos: chaos --migrate-midway catches these two as well, sim/migration.py;
    # tests/sim/test_chaos_migrating.py)
    "_state_op:_state_unchanged",
    "convert_legacy_ops:_run_is_new",
    # Misfire, max_runs and backfill (w3mis): explore/sets_successor_mis.py ``CATCHERS``, or
    # ``UNCAUGHT`` with the reason no set catches the part alone (``PAIRS``: with its partners).
    "finish_life_ops:_state_as_read",
    "finish_life_ops:_end_marker_written",
    "backfill_with_head_ops:_backfill_record_absent",
    "adhoc_run_with_head_ops:_adhoc_run_absent",
    "settle_head_ops:_settle_successor_absent",
    "settle_head_ops:_missed_absent",
    "settle_head_ops:_next_head_absent",
    "_closed_end_key:_settle_successor_absent",
    "_decide_head:_head_scheduled",
    "_decide_head:_head_version",
    # w3reads (issue 37): the reads / heartbeats / detectors / adoption extension's parts,
    # explore/sets_successor_reads.py (CATCHERS, or a reason in UNCAUGHT backed by PAIRS).
    "recheck_claimed_op:_run_token",
    "recheck_claimed_op:_run_status",
    "redispatch_head_op:_lease_as_read",
    "redispatch_head_op:_not_asked_to_stop",
    "relink_head_ops:_head_scheduled",
    "relink_head_ops:_head_version",
    # w3redate: explore/sets_successor_redate.py ``redate-across-epochs`` (HC4's late-record redate).
    "redate_with_head_ops:_run_is_new",
    # w3floor: tests/functional/test_redate_successor.py (a retime between the late record's
    # read and its redate: without the part the retime's ``changed_at`` is written over).
    "redate_with_head_ops:_state_unchanged",
    # w9: the redate of a job without a head (a finished at() job): explore/sets_successor_redate.py
    # ``redate-headless-manual`` (CATCHERS), or a reason backed by a pair (HEADLESS_REASONS).
    "redate_without_head_ops:_state_unchanged",
    "redate_without_head_ops:_run_is_new",
)
#
# ``MORE_MODULES``: the other core modules whose write functions build condition parts, read and
# switched the same way (their own ``-> Cond`` helpers, the builders of writes.py). A switch name
# is unique across them (``condition_parts`` refuses a clash).
MORE_MODULES: tuple[ModuleType, ...] = (dead_letter,)  # issue 38: settling a dead letter's debt

BUILDERS = frozenset({"Cond", "exists", "not_exists", "eq", "ne", "lt", "le", "gt", "ge", "is_in", "any_of"})


@dataclass(frozen=True)
class Part:
    """One named condition part: where it is built, and from what."""

    function: str  # the write function whose body builds it
    name: str  # the helper's name, or the attribute a builder compares (``*``: a loop's)
    callees: tuple[str, ...]  # the names called (helpers that return a Cond, builders of writes.py)
    lines: tuple[tuple[int, int], ...]  # the call sites (first line, last line) in its module's source
    why: str  # the part's why, as written (a helper's: its own why)
    module: ModuleType  # the module that defines the function, whose source builds it

    @property
    def switch(self) -> str:
        return f"{self.function}:{self.name}"


def _transitions_modules() -> tuple[ModuleType, ...]:
    """``TRANSITIONS_MODULES``, imported; a module of core/transitions/ left out of it is an error
    (its parts would have no switch, and no test would say so)."""
    package = transitions.__name__
    unread = sorted(
        f"{package}.{module.name}"
        for module in pkgutil.iter_modules(transitions.__path__)
        if f"{package}.{module.name}" not in TRANSITIONS_MODULES
        and not module.name.startswith(SUCCESSOR_PREFIX)
    )
    if unread:
        raise RuntimeError(f"modules of core/transitions/ not in TRANSITIONS_MODULES: {', '.join(unread)}")
    return tuple(importlib.import_module(name) for name in TRANSITIONS_MODULES)


def successor_modules() -> tuple[ModuleType, ...]:
    """The successor claim's modules of core/transitions/ (``SUCCESSOR_PREFIX``), by name."""
    package = transitions.__name__
    names = sorted(
        f"{package}.{module.name}"
        for module in pkgutil.iter_modules(transitions.__path__)
        if module.name.startswith(SUCCESSOR_PREFIX)
    )
    return tuple(importlib.import_module(name) for name in names)


def successor_parts() -> dict[str, Part]:
    """``SUCCESSOR_SWITCHABLE``'s parts, read from the successor modules of core/transitions/
    (with conditions.py, whose helpers they call)."""
    conditions = importlib.import_module(TRANSITIONS_MODULES[0])
    parts = _module_parts((conditions, *successor_modules()))
    return {name: parts[name] for name in SUCCESSOR_SWITCHABLE}


def _source(module: ModuleType) -> ast.Module:
    return ast.parse(Path(inspect.getfile(module)).read_text())


def _callee(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


_WHY_ARG = {"any_of": 0, "exists": 1, "not_exists": 1, "Cond": 2}  # the others: (attr, value, why)


def _literal_why(node: ast.Call, function: ast.FunctionDef, helpers: dict[str, str]) -> str:
    callee = _callee(node) or ""
    if callee in helpers:
        given = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        return str(given[0].value) if given else helpers[callee]
    index = _WHY_ARG.get(callee, 2)
    why: ast.expr | None = node.args[index] if len(node.args) > index else None
    if isinstance(why, ast.Name):  # ``why = "..."`` earlier in the function
        name = why.id
        for statement in ast.walk(function):
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in statement.targets
            ):
                why = statement.value
                break
    if why is None:
        return ""
    try:
        return str(ast.literal_eval(why))
    except ValueError:
        return ast.unparse(why)


def _helper_whys(tree: ast.Module) -> dict[str, str]:
    """The module's helpers that return a ``Cond`` (``-> Cond``), each with its first why."""
    found: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef)
            and isinstance(node.returns, ast.Name)
            and node.returns.id == "Cond"
        ):
            strings = [
                c.value
                for c in ast.walk(node)
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and len(c.value) > 20
            ]
            found[node.name] = strings[0] if strings else node.name
    return found


def _part_calls(function: ast.FunctionDef, callables: frozenset[str]) -> list[list[ast.Call]]:
    """The Cond-building calls in ``function``'s body, in source order, outermost only (an
    ``any_of``'s alternatives are part of it); the two branches of a conditional expression
    that are both such calls (a part's two forms) come as one group."""
    groups: list[list[ast.Call]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.IfExp):
            branches = [b for b in (node.body, node.orelse) if _callee(b) in callables]
            if len(branches) == 2:
                groups.append([b for b in branches if isinstance(b, ast.Call)])
                return
        if isinstance(node, ast.Call) and _callee(node) in callables:
            groups.append([node])
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in function.body:
        visit(statement)
    return groups


def _part_name(call: ast.Call, helpers: dict[str, str]) -> str:
    callee = _callee(call) or ""
    if callee in helpers or callee == "any_of":
        return callee
    attr = call.args[0] if call.args else None
    return str(attr.value) if isinstance(attr, ast.Constant) else "*"


def condition_parts(successor: bool = False) -> dict[str, Part]:
    """Every named condition part of core/transitions/ and of ``MORE_MODULES``, by switch name,
    read from their sources. ``successor``: with the successor claim's modules too (``head_*``,
    ``SUCCESSOR_PREFIX``), for a successor-shaped chaos run (tests/sim/test_chaos_successor.py)."""
    modules = _transitions_modules()
    if successor:
        modules += successor_modules()
    parts = _module_parts(modules)
    for module in MORE_MODULES:
        more = _module_parts((module,))
        if clash := sorted(set(more) & set(parts)):
            raise ValueError(f"{module.__name__} builds parts named as others already: {clash}")
        parts.update(more)
    return parts


def _module_parts(modules: tuple[ModuleType, ...]) -> dict[str, Part]:
    """The parts of ``modules``, whose ``-> Cond`` helpers are shared: a helper is called by name
    from any of them that imported it (core/transitions/conditions.py's, from the others)."""
    sources = [(module, _source(module)) for module in modules]
    helpers = {name: why for _, tree in sources for name, why in _helper_whys(tree).items()}
    parts: dict[str, Part] = {}
    for module, tree in sources:
        for function in tree.body:
            if not isinstance(function, ast.FunctionDef) or function.name in helpers:
                continue
            for part in _function_parts(function, helpers, module):
                if part.switch in parts:
                    raise ValueError(f"{part.switch}: two modules define {part.function}")
                parts[part.switch] = part
    return parts


def _function_parts(function: ast.FunctionDef, helpers: dict[str, str], module: ModuleType) -> list[Part]:
    """The condition parts ``function``'s body builds, in source order."""
    # Calls of one name in one statement (a loop's, an if's two forms of one part) are one part.
    statements: dict[tuple[str, int], list[ast.Call]] = {}
    for group in _part_calls(function, BUILDERS | frozenset(helpers)):
        name = _part_name(group[0], helpers)
        top = next(s for s in function.body if s.lineno <= group[0].lineno <= (s.end_lineno or s.lineno))
        statements.setdefault((name, top.lineno), []).extend(group)
    seen: dict[str, int] = {}
    parts: list[Part] = []
    for (name, _), calls in statements.items():
        seen[name] = seen.get(name, 0) + 1
        parts.append(
            Part(
                function.name,
                name if seen[name] == 1 else f"{name}#{seen[name]}",
                tuple(dict.fromkeys(_callee(c) or "" for c in calls)),
                tuple((c.lineno, c.end_lineno or c.lineno) for c in calls),
                _literal_why(calls[0], function, helpers),
                module,
            )
        )
    return parts


def _codes(code: CodeType) -> set[CodeType]:
    """A function's code and that of its comprehensions (frames of their own)."""
    found = {code}
    for const in code.co_consts:
        if isinstance(const, CodeType):
            found |= _codes(const)
    return found


# Where a switched-off part is built: its function's code objects, and the part's lines there.
Site = tuple[set[CodeType], tuple[tuple[int, int], ...]]


@contextmanager
def switched_off(*switches: str, successor: bool = False) -> Iterator[None]:
    """Run the block with condition parts of core/transitions/ or ``MORE_MODULES`` off
    (``condition_parts``): each, built at its lines by its function, is a condition that always
    holds, whoever calls the function (a service, or a write of another module, as recover_op
    calls finish_ops): its builder or helper is replaced in the namespace the function looks it
    up in, that of the module defining it (``Part.module``), and the replacement tells its
    callers apart by their frame (the function's code, at the part's lines). Several parts at
    once (a redundant set: tests/sim/test_switches.py ``PAIRS``) are switched off by one
    replacement per helper or builder, so two parts built by the same one (two ``eq`` parts) are
    both off: nesting ``switched_off`` would hand the inner part's call to the outer replacement
    from the replacement's own frame, not the write function's, and leave it on."""
    parts = condition_parts(successor)
    if not successor and any(switch in SUCCESSOR_SWITCHABLE for switch in switches):
        parts.update(successor_parts())
    for switch in switches:
        if switch not in parts:
            raise ValueError(f"unknown condition part {switch!r}; one of {', '.join(sorted(parts))}")
    off = _holds(f"switched off: {', '.join(switches)}")
    sites: dict[tuple[Any, str], list[Site]] = {}
    for switch in switches:
        part = parts[switch]
        codes = _codes(getattr(part.module, part.function).__code__)
        for callee in part.callees:
            sites.setdefault((part.module, callee), []).append((codes, part.lines))

    def replacing(original: Callable[..., Any], where: list[Site]) -> Callable[..., Any]:
        def replacement(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            if any(
                caller.f_code in codes and any(first <= caller.f_lineno <= last for first, last in lines)
                for codes, lines in where
            ):
                return off
            return original(*args, **kwargs)

        return replacement

    saved = {key: getattr(key[0], key[1]) for key in sites}
    try:
        for (module, name), original in saved.items():
            setattr(module, name, replacing(original, sites[(module, name)]))
        yield
    finally:
        for (module, name), original in saved.items():
            setattr(module, name, original)
