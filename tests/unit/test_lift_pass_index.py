"""What the lifter holds per call through the ladder (issue 17, memory; ``lifting.pass_index``).

``Lifter`` finds a call's result from the event that holds it (no ``(result, seq)`` tuple per
call), remembers only the call ids it may be asked about again (calls made more than once, the
previous state's unknown calls, the calls it leaves unknown), lists a plain shell run without
adding its id to ``_command_ids``, and keeps a plain shell run that worked as its call and seq
until a failure asks what resolved it. What a user sees must not change: each call gets its own
result (also from an event of several results, and the first of two results for one call), a
call made twice is listed once, a previous state's unknown call is resolved by its late result,
and a failure is resolved by a later plain run of the same command. The pass holds less.
"""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from compactor.bench.scale import small_session_lines
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting import shellpair
from compactor.lifting.lift import Lifter, lift_state
from compactor.lifting.pass_index import first_result, index_events, result_event


def _call(seq: int, *calls: tuple[str, str]) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="assistant",
                 blocks=[TextBlock(text=f"Step {seq}."),
                         *(ToolUseBlock(id=uid, name="Bash", input={"command": cmd}) for uid, cmd in calls)])


def _result(seq: int, *results: tuple[str, str]) -> Event:
    return Event(seq=seq, id=f"e{seq}", role="user",
                 blocks=[ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=text)]) for uid, text in results])


_FAILED = "Exit code 1\ncat: src/b.py: No such file or directory"


def _session() -> list[Event]:
    return [
        Event(seq=1, id="e1", role="user", blocks=[TextBlock(text="Fix src/a.py.")]),
        _call(2, ("a", "cat src/a.py"), ("b", "cat src/b.py")),
        _result(3, ("b", _FAILED), ("a", "def f(x):\n    return x\n")),  # two results, not in call order
        _call(4, ("c", "cat src/c.py")),
        _result(5, ("c", "c = 1\n")),
        _result(6, ("c", "Exit code 2\nerror: late")),  # a second result for c: the first one counts
        _call(7, ("a", "cat src/other.py")),  # the id of an earlier call again: folded once
        _result(8, ("a", "other = 1\n")),
        _call(9, ("m", "make build")),
        _result(10, ("m", "Exit code 2\nerror: timed out")),
        _call(11, ("m2", "make build")),  # the same command later, plain and ok: resolves the failure
        _result(12, ("m2", "built")),
        _call(13, ("late", "cat src/z.py")),  # answered two events later
        _call(14, ("d", "cat src/d.py")),
        _result(15, ("d", "d = 1\n")),
        _result(16, ("late", "z = 1\n")),
    ]


def _by_id(state):  # type: ignore[no-untyped-def]
    return {c.tool_use_id: c for c in state.commands}


@pytest.mark.parametrize("short_path", [True, False])
def test_each_call_gets_its_own_result_and_is_listed_once(short_path: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shellpair, "ON", short_path)
    state = lift_state(_session())
    cmds = _by_id(state)
    assert [c.tool_use_id for c in state.commands].count("a") == 1
    assert cmds["a"].command == "cat src/a.py" and cmds["a"].status == "ok" and cmds["a"].result_seq == 3
    assert cmds["b"].status == "failed" and cmds["b"].result_seq == 3  # (its own result, the event's first)
    assert cmds["c"].status == "ok" and cmds["c"].result_seq == 5  # (the first result of c)
    assert cmds["late"].result_seq == 16 and cmds["d"].result_seq == 15
    assert {f.path for f in state.files_read} >= {"src/a.py", "src/c.py", "src/d.py", "src/z.py"}
    assert "src/other.py" not in {f.path for f in state.files_read}  # (the repeated id: not folded)
    failed = {f.tool_use_id: f for f in state.failed_approaches}
    assert failed["m"].resolved_at == 11  # (resolved by the plain run that worked, keyed when asked)


def test_a_cut_between_a_call_and_its_result_leaves_it_unknown_then_resolved() -> None:
    events = _session()
    lifter = Lifter(events)
    at13 = lifter.state_at(13)
    assert [u.tool_use_id for u in at13.unknown_actions] == ["late"]
    assert "late" not in _by_id(at13)
    final = lifter.state_at(None)
    assert not final.unknown_actions and _by_id(final)["late"].result_seq == 16
    assert final == lift_state(events)
    # on top of a previous state that left it unknown: its late result resolves it, listed once
    prev = lift_state(events[:13])
    assert [u.tool_use_id for u in prev.unknown_actions] == ["late"]
    on_top = lift_state(events, prev)
    assert not on_top.unknown_actions
    assert [c.tool_use_id for c in on_top.commands].count("late") == 1
    assert {c.tool_use_id for c in on_top.commands} == {c.tool_use_id for c in final.commands}


def test_a_previous_unknown_call_made_again_is_folded_once() -> None:
    """A previous state's unknown call whose id comes again as a call in the new events, answered:
    the pass remembers folding it (``_watch``), so the result does not resolve it a second time."""
    events = _session()
    prev = lift_state(events[:13])
    again = [*events[:13], _call(17, ("late", "cat src/z.py")), _result(18, ("late", "z = 2\n"))]
    got = lift_state(again, prev)
    assert [c.tool_use_id for c in got.commands].count("late") == 1
    assert _by_id(got)["late"].result_seq == 18


def test_the_index_names_each_calls_first_result_event() -> None:
    events = _session()
    least, ordered, results, repeated = index_events(events)
    assert (least, ordered) == (1, True)
    assert index_events(events[::-1])[:2] == (1, False)
    assert index_events([*events[3:], *events[:3]])[:2] == (1, False)
    assert index_events([events[0], *events])[:2] == (1, True)  # (a repeated seq: still in order)
    assert index_events([]) == (None, True, {}, set())
    assert repeated == {"a"}
    # (indexed: the repeated call and the one answered two events later; the rest is found next door)
    assert {k: e.seq for k, e in results.items()} == {"a": 3, "late": 16}  # (every call is answered)
    found = {u.id: result_event(events, i, results, u.id) for i, e in enumerate(events) for u in e.tool_uses}
    assert {k: e.seq for k, e in found.items() if e is not None} == {
        "a": 3, "b": 3, "c": 5, "m": 10, "m2": 12, "late": 16, "d": 15}
    r, seq = first_result(found["a"], "a")
    assert (r.tool_use_id, r.text, seq) == ("a", "def f(x):\n    return x\n", 3)
    r, seq = first_result(found["c"], "c")
    assert (r.text, seq) == ("c = 1\n", 5)


def _small(tmp_path: Path, n: int) -> list[Event]:
    from compactor.importers import import_file

    f = tmp_path / "small.jsonl"
    f.write_text("".join(ln + "\n" for ln in small_session_lines(n)))
    return import_file(f).events


def test_a_pass_over_a_generated_session_holds_less_per_event(tmp_path: Path) -> None:
    """What a lifter and its accumulator hold after a whole pass (the state let go), per event of a
    generated session of plain shell pairs: ~365 bytes (the items, their paths and facts), not the
    ~515 of a tuple per call, a slot per call id in two sets and six slots per run that worked."""
    events = _small(tmp_path, 10_000)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        lifter = Lifter(events)
        state = lifter.state_at(None)
        assert len(state.commands) > 4_000
        del state
        gc.collect()
        held = (tracemalloc.get_traced_memory()[0] - before) / len(events)
    finally:
        tracemalloc.stop()
    assert held < 440, held  # (this tree: ~365; before: ~515)


@pytest.mark.parametrize("short_path", [True, False])
def test_a_failure_is_resolved_by_a_plain_run_alone_in_its_event_or_beside_another(
        short_path: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain run that worked is kept as its event when it is the event's one call (issue 17, memory:
    a slot instead of two), else as its call and seq: either resolves a failure of the same command,
    at the run's own seq, with the fix its parameters show."""
    monkeypatch.setattr(shellpair, "ON", short_path)
    events = [
        Event(seq=1, id="e1", role="user", blocks=[TextBlock(text="Build it.")]),
        _call(2, ("f1", "make build")),
        _result(3, ("f1", "Exit code 2\nerror: timed out")),
        _call(4, ("f2", "make test")),
        _result(5, ("f2", "Exit code 2\nerror: no rule")),
        _call(6, ("x", "cat src/x.py"), ("ok2", "make test")),  # beside another call
        _result(7, ("x", "x = 1\n"), ("ok2", "done")),
        _call(8, ("ok1", "make build")),  # alone in its event
        _result(9, ("ok1", "built")),
    ]
    failed = {f.tool_use_id: f for f in lift_state(events).failed_approaches}
    assert (failed["f1"].resolved_at, failed["f2"].resolved_at) == (8, 6)
    lifter = Lifter(events)
    assert {f.tool_use_id: f.resolved_at for f in lifter.state_at(7).failed_approaches} == {"f1": None, "f2": 6}
    if short_path:  # (no failure: the runs stay unkeyed, as kept)
        quiet = Lifter([events[0], *events[5:]])
        quiet.state_at(None)
        kinds = [type(r).__name__ for r in quiet._acc._unkeyed_ok]  # (``make test``: the general path's six)
        assert kinds[:2] == ["ToolUseBlock", "int"] and kinds[-1] == "Event" and len(kinds) == 2 + 6 + 1
