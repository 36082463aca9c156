"""Staged effects' allow-list (targets/registry.py EffectTables): the stack's
StagedEffectTableArns, which is also the worker's IAM grant on those tables."""

from __future__ import annotations

import pytest
from jobsched.core.writes import Put, Update
from jobsched.targets.registry import EffectNotAllowed, EffectTables, RunContext

LEDGER = "arn:aws:dynamodb:us-east-1:123456789012:table/ledger"


class _Log:
    def info(self, *actor_spec: object, **_k: object) -> None: ...
    def warning(self, *actor_spec: object, **_k: object) -> None: ...
    def error(self, *actor_spec: object, **_k: object) -> None: ...


def context(tables: EffectTables | None) -> RunContext:
    return RunContext("j", "j@1", {}, 1, 1, 2, "j@1", _Log(), effect_tables=tables)


@pytest.mark.parametrize(
    ("allowed", "table", "ok"),
    [
        ([LEDGER], "ledger", True),  # by name: the transaction runs in the worker's own region
        ([LEDGER], LEDGER, True),  # by ARN (DynamoDB takes either as TableName)
        ([LEDGER], "ledger2", False),
        ([LEDGER], "other", False),
        (["arn:aws:dynamodb:us-east-1:123456789012:table/app-*"], "app-orders", True),  # IAM wildcard
        (["arn:aws:dynamodb:us-east-1:123456789012:table/app-*"], "billing", False),
        ([], "ledger", False),  # the parameter unset: nothing, as the role is granted nothing
    ],
)
def test_a_table_is_allowed_by_its_name_or_arn(allowed: list[str], table: str, ok: bool) -> None:
    assert EffectTables(allowed).allows(table) is ok


def test_staging_on_a_table_not_listed_fails_naming_the_table_and_the_parameter() -> None:
    ctx = context(EffectTables([LEDGER]))
    with pytest.raises(EffectNotAllowed, match=r"'invoices'.*StagedEffectTableArns"):
        ctx.stage_put("invoices", {"pk": "a"})
    with pytest.raises(EffectNotAllowed, match=r"'invoices'.*StagedEffectTableArns"):
        ctx.stage_update("invoices", {"pk": "a"}, add={"n": 1})
    with pytest.raises(EffectNotAllowed, match="empty: no table is allowed"):
        context(EffectTables([])).stage_put("ledger", {"pk": "a"})
    assert ctx.staged == []


def test_allowed_or_unrestricted_effects_are_staged() -> None:
    ctx = context(EffectTables([LEDGER]))
    ctx.stage_put("ledger", {"pk": "a"})
    ctx.stage_update("ledger", {"pk": "b"}, add={"n": 1})
    assert [type(op) for op in ctx.staged] == [Put, Update]
    free = context(None)  # the pure service layer in tests: any table
    free.stage_put("anything", {"pk": "a"})
    assert len(free.staged) == 1
