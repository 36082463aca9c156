"""The handler names this checkout ships: the built-ins and ``layers/handlers/job_handlers.py``,
the layer ``sam deploy`` packages for the worker and the registrar. The CLI and the Python API
check a job's ``target`` against them at registration, with the registrar's own check, so
`jobsched register` says what the registrar will say."""

from __future__ import annotations

import importlib
import sys
from typing import Any


class _NoDestinations:
    """Allow-lists for naming the built-ins only: nothing here runs a handler."""

    allowed_queue_arns: list[str] = []
    allowed_event_bus_arns: list[str] = []
    allowed_function_arns: list[str] = []
    allowed_state_machine_arns: list[str] = []
    allowed_task_definition_arns: list[str] = []
    allowed_task_role_arns: list[str] = []
    allowed_sdk_actions: list[str] = []
    allowed_topic_arns: list[str] = []
    allowed_stream_arns: list[str] = []
    allowed_dead_letter_queue_arns: list[str] = []


def checkout_targets() -> list[str] | None:
    """The names, or None when this checkout's handlers layer cannot be found (then only the
    registrar function checks targets)."""
    from jobsched.targets.builtin import register_builtins
    from jobsched.targets.registry import HandlerRegistry

    module = _job_handlers()
    if module is None:
        return None
    from jobsched.runtime.wiring import registry

    builtins = HandlerRegistry()  # not the runtime's registry: its built-ins keep their allow-lists
    register_builtins(builtins, _NoDestinations())
    return sorted({*builtins.names(), *registry.names()})


def _job_handlers() -> Any:
    try:
        return importlib.import_module("job_handlers")
    except ModuleNotFoundError:
        pass
    from jobsched_tools.emulator.provision import find_template

    try:
        folder = find_template().parent / "layers" / "handlers"
    except FileNotFoundError:
        return None
    if not (folder / "job_handlers.py").is_file():
        return None
    sys.path.append(str(folder))
    return importlib.import_module("job_handlers")
