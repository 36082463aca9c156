"""emulator/moto_fast.py's patches for one block of a test on in-process moto. A helper module, not
a test module: tests import it.

moto backs up every table a ``TransactWriteItems`` names with ``copy.deepcopy`` (its items and its
stream records), and answers a ``Query`` by testing every item of the table, so a scenario's
transactions and queries cost time in proportion to everything written before them: the IAM
contract's two recordings spent about half their minutes copying tables. moto_fast backs up the
named items instead and reads a Query's partition, and changes nothing moto answers
(tests/local/test_moto_lean.py holds it to that). ``moto_fast.apply()`` is for a whole process;
here whatever it sets on moto's classes and modules is put back after the block, so that the tests
after it run on moto as it comes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def _patchable() -> tuple[Any, ...]:
    """Where moto_fast sets its patches: moto's DynamoDB, DynamoDB Streams and base models, and
    moto_fast's own ``_applied``."""
    from jobsched_tools.emulator import moto_fast
    from moto.core.common_models import BaseModel
    from moto.dynamodb import models
    from moto.dynamodb.models.table import GlobalSecondaryIndex, Table
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend

    return (
        moto_fast,
        models,
        models.DynamoDBBackend,
        Table,
        GlobalSecondaryIndex,
        BaseModel,
        DynamoDBStreamsBackend,
    )


@contextlib.contextmanager
def fast_transactions() -> Iterator[None]:
    from jobsched_tools.emulator import moto_fast

    saved = [(target, dict(vars(target))) for target in _patchable()]
    try:
        moto_fast.apply()
        yield
    finally:
        for target, before in saved:
            now = vars(target)
            for name in [name for name in now if name not in before]:
                delattr(target, name)
            for name, value in before.items():
                if now.get(name) is not value:
                    setattr(target, name, value)
