"""``engine.compact`` runs with the cyclic collector paused (issue 17) and gives it back: on
after a compaction, after one that raised, and left off when the caller had turned it off."""

from __future__ import annotations

import gc

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.policy import make_policy


def _events():
    return next(iter(synthetic_sessions(1, seed=3)))[1]


def test_the_collector_is_off_during_a_compaction_and_back_on_after(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    orig = engine.apply_layers

    def spy(*a, **k):
        seen.append(gc.isenabled())
        return orig(*a, **k)

    monkeypatch.setattr(engine, "apply_layers", spy)
    assert gc.isenabled()
    res = engine.compact(_events(), make_policy("default"), 2_000, session="s")
    assert res.record.status == "committed"
    assert seen == [False]
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failed_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a, **k):
        raise RuntimeError("store down")

    monkeypatch.setattr(engine, "apply_layers", boom)
    with pytest.raises(RuntimeError):
        engine.compact(_events(), make_policy("default"), 2_000, session="s")
    assert gc.isenabled()


def test_a_caller_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        engine.compact(_events(), make_policy("default"), 2_000, session="s")
        assert not gc.isenabled()
    finally:
        gc.enable()
