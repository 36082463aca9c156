"""Every registration path a deployment runs checks the stack's allow-lists (services/allow_lists.py).

A job is registered by a ``Registrar`` (the registrar function's, the trigger's and the miss
detector's inline one, the reconcile pass's) or through ``Operations`` (the Python API, ``jobsched
register`` and ``import``, the local stack). Each may be built without the lists, for tests and
simulations; the code that builds them for a deployment must always pass them: the Lambda wiring,
the Python API (which the CLI uses) and the local stack. So this reads that code and fails on any
``Registrar(...)`` or ``Operations(...)`` built without ``allow_lists``, and any ``Trigger(...)`` or
``MissDetector(...)`` built without its ``registrar`` (whose default checks no list)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOYED = (
    ROOT / "layers" / "jobsched" / "jobsched" / "runtime" / "wiring.py",
    ROOT / "tools" / "jobsched_tools" / "api.py",
    ROOT / "tools" / "jobsched_tools" / "local" / "stack.py",
)
# The callable, and the keyword it must be given. ``kind`` is the Python API's Operations class (or
# its subclass with datetimes), built in one place (api.py ``_build``).
REQUIRED = {
    "Registrar": "allow_lists",
    "Operations": "allow_lists",
    "kind": "allow_lists",
    "Trigger": "registrar",
    "MissDetector": "registrar",
}


def unchecked_builds(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        needed = REQUIRED.get(node.func.id)
        if needed is not None and needed not in {keyword.arg for keyword in node.keywords}:
            found.append(f"{name}:{node.lineno}: {node.func.id}(...) without {needed}=")
    return found


def test_the_deployment_builds_every_registration_path_with_the_allow_lists() -> None:
    builds = {path.name: path.read_text() for path in DEPLOYED}
    assert all("Registrar(" in text or "Operations(" in text or "kind(" in text for text in builds.values())
    assert [problem for name, text in builds.items() for problem in unchecked_builds(text, name)] == []


def test_the_check_sees_a_path_built_without_the_lists() -> None:
    source = (
        "Trigger(store, queue, telemetry, clock, cfg)\n"
        "Registrar(store, telemetry, clock, cfg, report=False, allow_lists=settings)\n"
        "Operations(store, queue, telemetry, clock, cfg)\n"
    )
    assert unchecked_builds(source, "x.py") == [
        "x.py:1: Trigger(...) without registrar=",
        "x.py:3: Operations(...) without allow_lists=",
    ]
