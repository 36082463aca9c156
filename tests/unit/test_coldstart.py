"""runtime/coldstart.py in this process (not a Lambda): the collector is paused for the imports and
restored as it was, even when an import fails, and nothing is frozen. The Lambda case (frozen) is
checked in a fresh interpreter, tests/bench/test_cold_import.py."""

from __future__ import annotations

import gc

import pytest
from jobsched.runtime import coldstart


def test_the_collector_is_paused_inside_and_resumed_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(coldstart.LAMBDA_MARKER, raising=False)
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    with coldstart.init_imports():
        assert not gc.isenabled()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_a_failed_import_still_resumes_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(coldstart.LAMBDA_MARKER, raising=False)
    with pytest.raises(ModuleNotFoundError), coldstart.init_imports():
        import jobsched_no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(coldstart.LAMBDA_MARKER, raising=False)
    gc.disable()
    try:
        with coldstart.init_imports():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
