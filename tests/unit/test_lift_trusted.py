"""The lift's unvalidated items (issue 17) are the items validation would give.

``lifting.state``'s builders (``first_file_ref``, ``next_file_ref``, ``run_command``) replace a
validated ``FileRef(...)`` / ``Command(...)`` per tool call. Each session here is lifted twice,
once with the builders and once with the validated models in their place, at several cuts of
one pass: the states must be equal, dump to the same JSON, and every item must record the same
fields-set (what ``exclude_unset`` reads) and hold lists of its own.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from compactor.bench.scale import small_session_lines
from compactor.bench.synthetic import synthetic_sessions
from compactor.importers import import_file
from compactor.lifting import lift, state
from compactor.lifting.state import Command, FileRef
from tests.conftest import corpus_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@functools.lru_cache(maxsize=1)
def _sessions() -> tuple[tuple[str, list], ...]:
    out: list[tuple[str, list]] = []
    files = [p for p in sorted(FIXTURES.rglob("*")) if p.is_file() and p.suffix in (".jsonl", ".json")]
    for path in files + corpus_files():
        try:
            events = import_file(path).events
        except Exception:  # noqa: BLE001 - a fixture of another format (a bad-input case): not a transcript
            continue
        if events:
            out.append((path.name, events))
    out += [(name, list(evs)) for name, evs in synthetic_sessions(4, seed=5)]
    return tuple(out)


def _generated(tmp_path: Path, n: int) -> list:
    path = tmp_path / "small.jsonl"
    path.write_text("\n".join(small_session_lines(n)) + "\n")
    return import_file(path).events


def _states(events: list) -> list[state.LiftedState]:
    seqs = [e.seq for e in events]
    lifter = lift.Lifter(events)
    return [lifter.state_at(seqs[int((len(seqs) - 1) * f)]) for f in (0.3, 0.7, 1.0)]


def _validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lift, "first_file_ref", lambda **kw: FileRef(**kw))
    monkeypatch.setattr(lift, "next_file_ref", lambda **kw: FileRef(**kw))
    monkeypatch.setattr(lift, "run_command", lambda **kw: Command(**kw))


def _same(fast: state.LiftedState, slow: state.LiftedState) -> None:
    assert fast == slow
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)
    for a, b in zip([*fast.files_read, *fast.files_changed, *fast.commands],
                    [*slow.files_read, *slow.files_changed, *slow.commands], strict=True):
        assert type(a) is type(b)
        assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__
        assert a.__pydantic_extra__ == b.__pydantic_extra__ and a.__pydantic_private__ == b.__pydantic_private__


def test_the_lift_with_unvalidated_items_equals_the_validated_lift(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = _sessions()
    fast = [_states(evs) for _, evs in sessions]
    _validated(monkeypatch)
    slow = [_states(evs) for _, evs in sessions]
    n_items = 0
    for (name, _), f_states, s_states in zip(sessions, fast, slow):
        for f, s in zip(f_states, s_states):
            _same(f, s)
            n_items += len(f.files_read) + len(f.files_changed) + len(f.commands)
    assert n_items > 100  # (the sessions do call tools: the builders ran)


def test_a_generated_session_lifts_to_the_validated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _generated(tmp_path, 600)
    fast = _states(events)
    _validated(monkeypatch)
    slow = _states(events)
    for f, s in zip(fast, slow):
        _same(f, s)
    assert fast[-1].commands and fast[-1].files_read


def test_built_items_hold_their_own_lists() -> None:
    ops, facts = ["read"], ["def f(x)"]
    ref = state.first_file_ref(path="a.py", seq=3, ops=ops, tool_use_id=None, digest="", facts=facts)
    ops.append("edit")
    facts.clear()
    assert ref == FileRef(path="a.py", seq=3, ops=["read"], tool_use_id=None, digest="", facts=["def f(x)"])
    again = state.next_file_ref(path="a.py", seq=5, ops=ref.ops, count=2, tool_use_id="t", digest="d",
                                facts=ref.facts, note="n")
    assert again.ops is not ref.ops and again.facts is not ref.facts
    assert again == FileRef(path="a.py", seq=5, ops=["read"], count=2, tool_use_id="t", digest="d",
                            facts=["def f(x)"], note="n")
    with pytest.raises(Exception):  # still frozen
        ref.seq = 4  # type: ignore[misc]
