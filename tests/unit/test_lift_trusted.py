"""The lift's unvalidated items (issue 17) are the items validation would give.

``lifting.state``'s builders (``first_file_ref``, ``next_file_ref``, ``run_command``) replace a
validated ``FileRef(...)`` / ``Command(...)`` per tool call. Each session here is lifted twice,
once with the builders and once with the validated models in their place, at several cuts of
one pass: the states must be equal, dump to the same JSON, and every item must record the same
fields-set (what ``exclude_unset`` reads). The items share lists (one ``["read"]`` for every
first read): states taken earlier in a pass must read the same after it goes on.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from compactor.bench.scale import small_session_lines
from compactor.bench.synthetic import synthetic_sessions
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.importers import import_file
from compactor.lifting import lift, shellpair, state
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
    monkeypatch.setattr(shellpair, "first_file_ref", lambda **kw: FileRef(**kw))  # (the short path's own)
    monkeypatch.setattr(shellpair, "run_command", lambda **kw: Command(**kw))


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


def _touches() -> list[Event]:
    """Files read and changed, then touched again by other ops after each cut."""
    calls = [("Bash", {"command": "cat a.py"}), ("Edit", {"file_path": "b.py", "old_string": "x", "new_string": "y"}),
             ("Read", {"file_path": "a.py"}), ("Bash", {"command": "cat c.py"}),
             ("Write", {"file_path": "b.py", "content": "def g():\n    pass\n"}), ("Bash", {"command": "rm c.py"}),
             ("Edit", {"file_path": "d.py", "old_string": "x", "new_string": "y"}), ("Bash", {"command": "rm d.py"})]
    evs = [Event(seq=1, id="e1", role="user", blocks=[TextBlock(text="Fix a.py.")])]
    for k, (name, inp) in enumerate(calls):
        seq = len(evs) + 1
        evs.append(Event(seq=seq, id=f"e{seq}", role="assistant",
                         blocks=[TextBlock(text=f"Step {k}."), ToolUseBlock(id=f"u{k}", name=name, input=inp)]))
        evs.append(Event(seq=seq + 1, id=f"e{seq + 1}", role="user",
                         blocks=[ToolResultBlock(tool_use_id=f"u{k}", content=[TextBlock(text="x = 1\n")])]))
    return evs


def test_built_items_share_their_lists_and_an_earlier_state_stays_as_it_was() -> None:
    # (issue 17, memory: the builders keep the lists they are given - one ``["read"]`` for every
    # file's first read, one empty list - so nothing of the pass may change an item's list in place)
    a = state.first_file_ref(path="a.py", seq=3, ops=state.op_list("read"), tool_use_id=None, digest="",
                             facts=[])
    b = state.first_file_ref(path="b.py", seq=4, ops=state.op_list("read"), tool_use_id="t", digest="",
                             facts=["def f(x)"])
    assert a.ops is b.ops and a == FileRef(path="a.py", seq=3, ops=["read"], tool_use_id=None, digest="", facts=[])
    assert b == FileRef(path="b.py", seq=4, ops=["read"], tool_use_id="t", digest="", facts=["def f(x)"])
    assert state.op_list("") == [] and state.op_list("rename") == ["rename"]
    with pytest.raises(Exception):  # still frozen
        a.seq = 4  # type: ignore[misc]
    for _, events in [("files", _touches()), *_sessions()]:
        seqs = [e.seq for e in events]
        lifter = lift.Lifter(events)
        earlier = [(st, st.model_dump_json()) for st in
                   (lifter.state_at(seqs[int((len(seqs) - 1) * f)]) for f in (0.2, 0.5, 0.8))]
        lifter.state_at(seqs[-1])
        for st, dumped in earlier:
            assert st.model_dump_json() == dumped
