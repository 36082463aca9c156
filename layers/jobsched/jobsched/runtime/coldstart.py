"""A function's cold start without the cyclic garbage collector's passes over its own imports.

Importing a function (boto3, pydantic, Powertools, jobsched) allocates a few hundred thousand
objects that live as long as the execution environment: modules, classes, functions, botocore's
and pydantic's tables. While they are imported, CPython's collector runs every 700 allocations and
walks them again and again (100-odd young collections, about ten older ones and, for the worker
and the registrar, a full one): 15-40 ms of a function's import (docs/benchmarks.md, "Cold start
per function"). None of it frees anything that matters: what an import leaves is kept.

So ``init_imports()`` turns the collector off while the function's module imports, and on a
Lambda (``AWS_LAMBDA_FUNCTION_NAME``, which the runtime sets) moves every object then alive to the
permanent generation with ``gc.freeze()`` before turning it back on: later collections, the first
invocation's included, never walk them again. This removes the work, it does not defer it (a
collector merely turned back on would walk all of them at its next passes). The cost: the
reference cycles an import leaves unreachable are never collected, once per execution environment
(the worker's import: about 1,200 objects, 1.0 MiB of its 27 MiB, measured with tracemalloc).

Elsewhere (tests, the local stack, which load the functions' modules into a long-lived process)
the collector is only paused for the import and then resumed as it was: freezing a test process's
objects would keep its later garbage cycles alive.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

# Set by the Lambda runtime in every execution environment (reserved environment variables).
LAMBDA_MARKER = "AWS_LAMBDA_FUNCTION_NAME"


@contextmanager
def init_imports() -> Iterator[None]:
    """Around a function's module-level imports (functions/*/app.py): the collector paused, then,
    on a Lambda, what they made frozen. Restores the collector's state even if an import fails."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if os.environ.get(LAMBDA_MARKER):
            gc.freeze()
        if was_enabled:
            gc.enable()
