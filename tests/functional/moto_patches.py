"""emulator/moto_fast.py's patches for one block of a test on in-process moto. A helper module, not
a test module: tests import it.

moto backs up every table a ``TransactWriteItems`` names with ``copy.deepcopy`` (its items and its
stream records), so a scenario's transactions cost time in proportion to everything written
before them: the IAM contract's two recordings spent about half their minutes copying tables.
moto_fast backs up the named items instead and changes nothing moto answers
(tests/local/test_moto_lean.py holds it to that: a cancelled transaction still leaves nothing
behind, in its table or its stream). ``moto_fast.apply()`` is for a whole process; here what it
replaces is put back after the block, so that the tests after it run on moto as it comes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def fast_transactions() -> Iterator[None]:
    from jobsched_tools.emulator import moto_fast
    from moto.core.common_models import BaseModel
    from moto.dynamodb import models
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend

    patched = (
        (models, "copy"),
        (models.DynamoDBBackend, "transact_write_items"),
        (BaseModel, "__new__"),
        (DynamoDBStreamsBackend, "get_shard_iterator"),
        (moto_fast, "_applied"),
    )
    with pytest.MonkeyPatch.context() as patch:
        for target, name in patched:
            # monkeypatch keeps what the class itself holds (a staticmethod stays one) and puts
            # it back when the block ends; the value set here is the same until apply() runs.
            patch.setattr(target, name, getattr(target, name))
        moto_fast.apply()
        yield
