"""The collector paused during a step's engine work (activities.step_support.engine_work)."""

from __future__ import annotations

import gc

from activities import step_support
from activities.step_support import engine_work


def test_the_collector_is_off_during_engine_work_and_back_on_after():
    assert gc.isenabled()
    with engine_work():
        assert not gc.isenabled()
        with engine_work():  # overlapping steps share the pause
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_worker_that_is_never_idle_still_collects(monkeypatch):
    """Pauses that overlap without end: the step that ends a chain held for MAX_GC_HOLD_S runs a
    full collection while the others still hold the pause; nothing collects before that."""
    full: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(seen)
    try:
        monkeypatch.setattr(step_support, "MAX_GC_HOLD_S", 3600.0)
        first = engine_work()
        first.__enter__()
        with engine_work():
            pass
        assert not full and not gc.isenabled()  # held for less than the bound
        monkeypatch.setattr(step_support, "MAX_GC_HOLD_S", 0.0)
        with engine_work():
            pass
        assert full and not gc.isenabled()  # collected, the first step still holds the pause
        first.__exit__(None, None, None)
    finally:
        gc.callbacks.remove(seen)
    assert gc.isenabled()
