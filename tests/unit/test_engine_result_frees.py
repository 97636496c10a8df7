"""When the engine builds its result (``compact._result``: the picked state's dump, the
compaction's peak at 300k events, issue 17, memory), nothing of it holds the plan's lists and
tables any more - the body of the events, the safe cut points, what the safe cuts' walk learnt
of the calls (a pointer or two per event each) - nor a copy of the prepared events: nothing
after reads them. The outcome is the same as the engine's holding them (the release tests, the
engine tests and ``tools/same_outputs.py``)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.policy import make_policy
from compactor.events import Event
from tests.unit.test_engine_release import _outcome
from tests.unit.test_result_dump import _generated


def _spied(monkeypatch: pytest.MonkeyPatch, events: list[Event], target: int | None) -> tuple[dict[str, Any], Any]:
    """Compact ``events``, the plan's by-products captured, and how many references each had
    when ``_result`` was entered (less this function's own and ``getrefcount``'s)."""
    seen: dict[str, Any] = {}
    refs: dict[str, int] = {}
    plan, result = engine.plan, engine._result

    def spy_plan(evs: Any, *a: Any, **kw: Any) -> Any:
        seen.update(evs=evs, safe=kw["_safe"], calls=kw["_calls"], walked=kw["_body"])
        return plan(evs, *a, **kw)

    def spy_result(*a: Any, **kw: Any) -> Any:
        refs["safe"] = sys.getrefcount(seen["safe"]) - 2
        refs["calls"] = sys.getrefcount(seen["calls"]) - 2
        refs["body"] = sys.getrefcount(seen["walked"][0]) - 2 if seen["walked"] else 0
        seen["layer_evs"] = a[5]  # (_result's evs: the layers' list)
        return result(*a, **kw)

    monkeypatch.setattr(engine, "plan", spy_plan)
    monkeypatch.setattr(engine, "_result", spy_result)
    try:
        res = engine.compact(events, make_policy("default"), target, session="s")
    finally:
        monkeypatch.undo()
    seen["refs"] = refs
    return seen, res


def _sessions() -> list[list[Event]]:
    return [evs for _, evs in synthetic_sessions(3, seed=11)] + [_generated(2000)]


@pytest.mark.parametrize("target", [2_000, 6_000])
def test_the_result_is_built_without_the_plans_lists(monkeypatch: pytest.MonkeyPatch, target: int) -> None:
    summarized = 0
    for events in _sessions():
        seen, res = _spied(monkeypatch, events, target)
        if "summary" not in res.record.layers:
            continue
        summarized += 1
        # (the walked list holds the body once: one reference, the rest let go of)
        assert seen["refs"] == {"safe": 0, "calls": 0, "body": 1}
        assert seen["layer_evs"] is seen["evs"]  # the prepared events handed on, not copied
        assert seen["calls"] and seen["safe"]  # (the walk did fill them: not an empty check)
    assert summarized >= 3


@pytest.mark.parametrize("target", [None, 2_000, 6_000])
def test_the_outcome_is_the_one_of_a_plain_compaction(monkeypatch: pytest.MonkeyPatch, target: int | None) -> None:
    """The spied compaction (the engine's own path) gives what a compaction of a copy of the
    events gives without the plan's by-products handed on (``apply_layers`` on its own)."""
    for events in _sessions():
        _, res = _spied(monkeypatch, events, target)
        policy = make_policy("default")
        evs = engine.prepare(list(events), None)
        p = engine.plan(evs, policy, target, None, _prepared=True)
        if p.noop:
            continue
        alone = engine.apply_layers(list(evs), p, policy, session="s", _prepared=True)
        got = _outcome(res)
        assert [e.model_dump(mode="json") for e in alone.view] == got[0]
        assert alone.checkpoint is not None and res.checkpoint is not None
        assert alone.checkpoint.model_dump(mode="json") == got[1]


def test_a_cleared_candidate_checked_early_and_let_go_of_is_returned_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replacement layers' candidate within its target but breaking an invariant is checked
    before the ladder lets go of its checkpoint; when every summary is bigger, it is returned:
    its checkpoint made again before the body's lists go (``checkpoint()`` reads them). The
    outcome is the one of the engine holding everything (``_RELEASE_COVERED`` off)."""
    from compactor.engine.invariants import Violation
    from compactor.engine.view import SUMMARY_PREFIX

    validate, view_tokens = engine.validate, engine.view_tokens
    head = SUMMARY_PREFIX.split("{")[0]

    def cleared_fails(**kw: Any) -> list[Violation]:
        out = validate(**kw)
        if kw["checkpoint"] is not None and not kw["checkpoint"].summary:
            out.append(Violation(code="unknown_identifier", message="forced", detail="zzz"))
        return out

    def summaries_big(view: list[Event]) -> int:
        n = view_tokens(view)
        return n + 10**7 if any(e.text.startswith(head) for e in view[:3]) else n

    monkeypatch.setattr(engine, "validate", cleared_fails)
    monkeypatch.setattr(engine, "view_tokens", summaries_big)
    events = next(iter(synthetic_sessions(1, seed=4)))[1]
    policy = make_policy("default")
    outcomes = []
    for release in (True, False):
        monkeypatch.setattr(engine, "_RELEASE_COVERED", release)
        res = engine.compact(events, policy, 20_000, session="s")  # (the cleared view: ~16.4k)
        outcomes.append(_outcome(res))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][2]["layers"][-1] != "summary" and outcomes[0][1]["replacements"]


def test_a_rung_summarized_without_a_slice_of_the_body(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ladder hands ``summarize_range`` its state and covered tokens, not a copy of the
    covered events (a pointer an event per rung, issue 17); given the same state and tokens,
    ``summarize_range`` gives the same outcome with the events as without them."""
    from compactor.engine import layers
    from compactor.lifting.lift import lift_state

    got: list[Any] = []
    real = engine.summarize_range

    def spy(covered: Any, *a: Any, **kw: Any) -> Any:
        got.append(covered)
        return real(covered, *a, **kw)

    monkeypatch.setattr(engine, "summarize_range", spy)
    events = _generated(2000)
    res = engine.compact(events, make_policy("default"), 2_000, session="s")
    monkeypatch.undo()
    assert "summary" in res.record.layers and got and all(c is None for c in got)
    covered = [e for e in engine.prepare(events, None) if e.seq <= res.checkpoint.covers.end]
    state = lift_state(covered, None)
    tokens = sum(e.tokens or 0 for e in covered)
    for budget in (300, 1_500):
        alone = layers.summarize_range(covered, None, budget)
        given = layers.summarize_range(None, None, budget, state=state, covered_tokens=alone.covered_tokens)
        assert given.model_dump() == alone.model_dump()
        assert tokens == alone.covered_tokens
    with pytest.raises(AssertionError):
        layers.summarize_range(None, None, 300, state=state)
