"""The lifter finds most calls' results next to them, unindexed (issue 17, memory; ``lifting.pass_index``).

``index_events`` leaves out of its map every call made once whose first result is in the event
right after the call's (most calls of a session): a call the map does not name is answered there
(``result_event``; the lifter makes the same look-up inline). What a
user sees must not change: every call gets the event of its *first* result, as when each call
was indexed - also a call answered in its own event, one whose id was answered before it was
made, one answered twice, one answered later than the next event, a call id made twice, the
last event's call - and the lifted states are those of the full index, at every cut.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.bench.scale import small_session_lines
from compactor.bench.synthetic import synthetic_sessions
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting import lift as _lift
from compactor.lifting import shellpair
from compactor.lifting.lift import Lifter
from compactor.lifting.pass_index import index_events, result_event
from tests.conftest import corpus_files, fixture_sessions


def _ev(seq: int, role: str, *blocks) -> Event:  # type: ignore[no-untyped-def]
    return Event(seq=seq, id=f"e{seq}", role=role, blocks=[TextBlock(text=f"Step {seq}."), *blocks])


def _use(uid: str, cmd: str) -> ToolUseBlock:
    return ToolUseBlock(id=uid, name="Bash", input={"command": cmd})


def _res(uid: str, text: str) -> ToolResultBlock:
    return ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=text)])


def _edges() -> list[Event]:
    return [
        _ev(1, "user"),
        _ev(2, "user", _res("early", "Exit code 1\nerror: before its call")),  # answered before it is made
        _ev(3, "assistant", _use("early", "cat src/early.py")),
        _ev(4, "user", _res("early", "early = 1\n")),  # (next door, but not its first result)
        _ev(5, "assistant", _use("own", "cat src/own.py"), _res("own", "own = 1\n")),  # answered in its own event
        _ev(6, "assistant", _use("p", "cat src/p.py"), _use("q", "cat src/q.py")),
        _ev(7, "user", _res("q", "q = 1\n"), _res("p", "Exit code 1\ncat: src/p.py: No such file")),
        _ev(8, "user", _res("p", "p = 2\n")),  # a second result of p: the first counts
        _ev(9, "assistant", _use("twice", "cat src/t.py")),
        _ev(10, "user", _res("twice", "t = 1\n")),  # answered next door, and the id is made again below
        _ev(11, "assistant", _use("far", "cat src/far.py")),
        _ev(12, "assistant", _use("twice", "cat src/t2.py")),
        _ev(13, "user", _res("twice", "t = 2\n")),
        _ev(14, "user", _res("far", "far = 1\n")),  # answered three events later
        _ev(15, "assistant", _use("never", "cat src/never.py")),  # never answered
        _ev(16, "user", _res("ghost", "nobody asked")),  # an orphan result
        _ev(17, "assistant", _use("last", "cat src/last.py")),  # the last event's call
    ]


def _first_results(evs: list[Event]) -> dict[str, Event]:
    """Every answered id -> the event of its first result (what the index held for every call)."""
    out: dict[str, Event] = {}
    for e in evs:
        for r in e.tool_results:
            out.setdefault(r.tool_use_id, e)
    return out


def _small(tmp_path: Path, n: int) -> list[Event]:
    from compactor.importers import import_file

    f = tmp_path / "small.jsonl"
    f.write_text("".join(ln + "\n" for ln in small_session_lines(n)))
    return import_file(f).events


def _sessions(tmp_path: Path) -> list[list[Event]]:
    from compactor.importers import import_file

    out = [_edges(), _small(tmp_path, 3_000)]
    out += [sorted(evs, key=lambda e: e.seq) for _, evs in synthetic_sessions(4, seed=3)]
    out += [sorted(evs, key=lambda e: e.seq) for evs in fixture_sessions()]
    out += [import_file(p).events for p in corpus_files()]
    return [evs for evs in out if evs]


def test_every_call_gets_the_event_of_its_first_result(tmp_path: Path) -> None:
    calls = left_out = 0
    for evs in _sessions(tmp_path):
        want = _first_results(evs)
        _, _, results, _ = index_events(evs)
        assert all(want.get(k) is e for k, e in results.items())  # (what it holds is right)
        for i, e in enumerate(evs):
            for u in e.tool_uses:
                calls += 1
                left_out += u.id not in results and u.id in want
                assert result_event(evs, i, results, u.id) is want.get(u.id), (i, u.id)
    assert calls > 2_000 and left_out > calls // 2  # (most calls are found next door)


def test_the_edges_index_only_what_is_not_next_door() -> None:
    evs = _edges()
    _, _, results, repeated = index_events(evs)
    assert repeated == {"twice"}
    assert {k: (e.seq if e else None) for k, e in results.items()} == {
        "early": 2, "own": 5, "twice": 10, "far": 14, "ghost": 16, "never": None, "last": None}
    got = {u.id: result_event(evs, i, results, u.id) for i, e in enumerate(evs) for u in e.tool_uses}
    assert {k: (e.seq if e else None) for k, e in got.items()} == {
        "early": 2, "own": 5, "p": 7, "q": 7, "twice": 10, "far": 14, "never": None, "last": None}


def _full_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lifter with every call indexed, as before (the lifter then reads the map only)."""
    def full(evs):  # type: ignore[no-untyped-def]
        least, ordered, _, repeated = index_events(evs)
        return least, ordered, {**{u.id: None for e in evs for u in e.tool_uses}, **_first_results(evs)}, repeated
    monkeypatch.setattr(_lift, "index_events", full)


def _states(evs: list[Event], prev=None) -> list:  # type: ignore[no-untyped-def]
    lifter = Lifter(evs, prev)
    seqs = [e.seq for e in evs]
    cuts = sorted({seqs[len(seqs) // 4], seqs[len(seqs) // 2], seqs[(3 * len(seqs)) // 4]})
    return [lifter.state_at(c).model_dump() for c in [*cuts, cuts[0], None]]


@pytest.mark.parametrize("short_path", [True, False])
def test_the_lifted_states_are_those_of_the_full_index(tmp_path: Path, short_path: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shellpair, "ON", short_path)
    sessions = _sessions(tmp_path)
    got = [_states(evs) for evs in sessions]
    edges = sessions[0]
    prev = Lifter(edges[:11]).state_at(None)  # ("far" unknown: answered after)
    got_on_top = _states(edges, prev)
    _full_index(monkeypatch)
    assert got == [_states(evs) for evs in sessions]
    assert got_on_top == _states(edges, prev)


def test_a_generated_session_indexes_no_call(tmp_path: Path) -> None:
    """Every call of a generated session is answered in the next event: the lifter holds no map
    slot for any (was one per call: ~3.7 MB at 300k events)."""
    evs = _small(tmp_path, 10_000)
    lifter = Lifter(evs)
    state = lifter.state_at(None)
    assert len(state.commands) > 4_900 and all(c.result_seq == c.seq + 1 for c in state.commands)
    assert len(lifter._results) == 0
