"""``engine.compact`` runs with the cyclic collector paused (issue 17) and gives it back: on
after a compaction, after one that raised, and left off when the caller had turned it off."""

from __future__ import annotations

import gc

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.layers import LAYER_CLEAR
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


def _transcript(tmp_path, n: int = 300):
    from compactor.bench.scale import write_session

    path = tmp_path / "small.jsonl"
    write_session(path, n)
    return path


def test_an_import_runs_with_the_collector_off_and_gives_it_back(tmp_path) -> None:
    from compactor.importers import import_file

    seen: list[bool] = []
    got: list = []

    def sink(batch):
        seen.append(gc.isenabled())
        got.extend(batch)

    assert gc.isenabled()
    res = import_file(_transcript(tmp_path), sink=sink)
    assert len(got) == res.stats["events"] == 300
    assert seen and not any(seen)
    assert gc.isenabled()


def test_the_collector_comes_back_after_a_failed_import(tmp_path) -> None:
    from compactor.importers import import_file

    def sink(batch):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        import_file(_transcript(tmp_path), sink=sink)
    assert gc.isenabled()
    from compactor.errors import ParseError

    deep = tmp_path / "deep.jsonl"  # nested past the depth limit: the parse stops with an error
    deep.write_text('{"type": "user", "uuid": "u1", "message": ' + "[" * 300 + "]" * 300 + "}\n")
    with pytest.raises(ParseError):
        import_file(deep, format="claude-code")
    assert gc.isenabled()


def _alive_events() -> int:
    from compactor.events import Event

    return sum(1 for o in gc.get_objects() if type(o) is Event)


@pytest.mark.parametrize("target", [2_000, 4_000])
def test_a_compaction_leaves_no_cycle_that_holds_the_session(tmp_path, target) -> None:
    """With the collector paused, what a reference cycle holds stays until the collector runs
    again: the lazily checked candidate's callbacks once referred to it strongly, a cycle that
    held every event of the session (and the first collection after the pause walked them
    all: 0.27 s of CPU at 100k events, issue 17). Reference counting alone frees them now."""
    from compactor.importers import import_file

    events: list = []
    import_file(_transcript(tmp_path, 400), sink=events.extend, count=True)
    gc.collect()
    gc.disable()
    try:
        before = _alive_events()
        res = engine.compact(events, make_policy("default"), target, session="s")
        assert LAYER_CLEAR in res.record.layers  # the replacement layers' lazy candidate was made
        del res
        events.clear()
        assert _alive_events() <= before - 400
    finally:
        gc.enable()
