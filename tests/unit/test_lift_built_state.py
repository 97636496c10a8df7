"""The lifter builds each rung's state without pydantic's validation (``state.built_state``, issue
17: ~10-20 ms a shrink-ladder rung at 300k events): the states are the ones ``LiftedState(...)``
made - equal, the same JSON, the same fields set, the same item types - and a state already
handed out does not change while the pass goes on (validation copied every list; the builder's
own lists are copied by ``_Acc.build`` now)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.lifting import lift
from compactor.lifting.state import LiftedState
from tests.unit.test_lift_trusted import _generated, _sessions  # (fixtures, corpus, synthetic; generated)


def _pass(events: list) -> list[tuple[LiftedState, str]]:
    """Each state of one pass at growing cuts, with its JSON taken when it was handed out."""
    seqs = [e.seq for e in events]
    lifter = lift.Lifter(events)
    out = []
    for f in (0.2, 0.5, 0.8, 0.95, 1.0):
        st = lifter.state_at(seqs[int((len(seqs) - 1) * f)])
        out.append((st, st.model_dump_json()))
    return out


def _shape(st: LiftedState) -> list:
    """What validation decides beyond the values: the fields set and every item's type."""
    items = [(name, [type(x) for x in v]) for name, v in st if type(v) is list]
    return [sorted(st.model_fields_set), type(st.goal), type(st.last_action), items]


def _compare(events: list, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    built = _pass(events)
    with monkeypatch.context() as m:
        m.setattr(lift, "built_state", lambda **kw: LiftedState(**kw))  # (the validated state, as before)
        validated = _pass(events)
    for (a, a_json), (b, b_json) in zip(built, validated):
        assert a_json == b_json, name
        assert a == b, name
        assert _shape(a) == _shape(b), name
        # handed out earlier, unchanged by the folds after it (its lists are its own)
        assert a.model_dump_json() == a_json, name
    lists = [id(v) for st, _ in built for _, v in st if type(v) is list]
    assert len(lists) == len(set(lists)), name  # no list shared between two rungs' states


def test_built_states_equal_the_validated_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = _sessions()
    assert len(sessions) > 4
    for name, events in sessions:
        _compare(events, monkeypatch, name)


def test_built_states_of_a_generated_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _generated(tmp_path, 3_000)
    _compare(events, monkeypatch, "small3000")
    # at cuts after a result (the ladder's), one pass: the later state holds the earlier one's items
    lifter = lift.Lifter(events)
    cuts = [e.seq for e in events if e.tool_results]
    first, last = lifter.state_at(cuts[len(cuts) // 2]), lifter.state_at(cuts[-1])
    assert lifter.passes == 1 and len(first.commands) < len(last.commands)
    assert all(a is b for a, b in zip(first.commands, last.commands))


def test_the_final_state_is_the_validated_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, events in _sessions()[:6]:
        got = lift.lift_state(events)
        with monkeypatch.context() as m:
            m.setattr(lift, "built_state", lambda **kw: LiftedState(**kw))
            want = lift.lift_state(events)
        assert got.model_dump_json() == want.model_dump_json() and _shape(got) == _shape(want), name
        # and a state loaded from its dump is equal to it (the checkpoint's round trip)
        assert lift.load_state(lift.dump_state(got)) == got, name
