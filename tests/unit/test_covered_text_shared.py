"""The validator's index shares its whole-session tables (issue 17, memory; ``engine.covered_text``).

When a body of the events is all of them (nothing pinned, nothing before its end: the engine's
usual first compaction), the ids of the answered calls are the keys of the calls' last results
and the body's seqs are the events' seqs, one table each instead of two held through the ladder.
Whatever the body, ``answered`` must hold exactly the ids a result in the events answers, and
``body_seqs`` / ``range_facts`` the seqs they held.
"""

from __future__ import annotations

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.boundary import body, safe_cut_points_both
from compactor.engine.covered_text import CoveredText
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from tests.conftest import corpus_files, fixture_sessions


def _sessions() -> list[list[Event]]:
    from compactor.importers import import_file

    out = [sorted(evs, key=lambda e: e.seq) for _, evs in synthetic_sessions(4, seed=5)]
    out += [sorted(evs, key=lambda e: e.seq) for evs in fixture_sessions()]
    out += [import_file(p).events for p in corpus_files()[:4]]
    return [evs for evs in out if evs]


def _pinned(evs: list[Event]) -> list[Event]:
    """``evs`` with a call answered by a pinned event only (a result no body holds)."""
    seq = evs[-1].seq + 1
    return [*evs, Event(seq=seq, id="pin-call", role="assistant",
                        blocks=[ToolUseBlock(id="pinned-call", name="Bash", input={"command": "ls"})]),
            Event(seq=seq + 1, id="pin-result", kind="pinned", role="user",
                  blocks=[ToolResultBlock(tool_use_id="pinned-call", content=[TextBlock(text="x")])])]


def _check(index: CoveredText, evs: list[Event], prev_end: int) -> None:
    want = {r.tool_use_id for e in evs for r in e.tool_results}
    answered = index.answered()
    assert all(i in answered for i in want)
    probes = [u.id for e in evs for u in e.tool_uses] + ["never-called", "toolu_0000deadbeef"]
    assert {p for p in probes if p in answered} == {p for p in probes if p in want}
    assert index.body_seqs(prev_end) == [e.seq for e in body(evs, prev_end)]
    facts = index.range_facts()
    if facts is not None:
        assert facts[1] == [e.seq for e in evs]


def test_answered_and_the_seqs_are_the_events_whatever_the_body() -> None:
    compared = shared = 0
    for events in _sessions():
        for evs in (events, _pinned(events)):
            ends = [0, evs[len(evs) // 2].seq]
            for prev_end in ends:
                for order in ("seqs first", "walk first", "plan's calls"):
                    index = CoveredText(evs, body=(prev_end, body(evs, prev_end)))
                    if order == "plan's calls":
                        calls: dict = {}
                        safe_cut_points_both(evs, prev_end, body_events=index.body(prev_end), calls=calls)
                        index.take_calls(prev_end, calls)
                    if order == "seqs first":
                        index.body_seqs(prev_end)
                    _check(index, evs, prev_end)
                    whole = len(body(evs, prev_end)) == len(evs)
                    if whole:  # (one table of each: the answered ids are the last results' keys)
                        shared += 1
                        assert type(index.answered()) is dict
                        facts = index.range_facts()
                        assert facts is None or facts[1] is index.body_seqs(prev_end)
                    else:
                        assert type(index.answered()) is set
                    compared += 1
                # and an index without a body given: the walk's own set
                plain = CoveredText(evs)
                _check(plain, evs, 0)
    assert compared > 50 and shared > 5, (compared, shared)


def test_a_call_id_is_found_once_its_results_copy_is_left_out() -> None:
    """The pieces hold a call's id once (the call's; its result's, the same text, left out after the
    call): every id, a part of one, and a result's id whose call is not in the events still occur."""
    from compactor.engine.invariants import check_identifiers
    from compactor.records import Checkpoint, SeqRange

    evs = [Event(seq=1, id="u", role="user", blocks=[TextBlock(text="Fix src/a.py.")])]
    for k in range(2, 40, 2):
        uid = f"toolu_{k:08d}abc"
        evs.append(Event(seq=k, id=f"c{k}", role="assistant",
                         blocks=[ToolUseBlock(id=uid, name="Bash", input={"command": f"cat m{k}.py"})]))
        evs.append(Event(seq=k + 1, id=f"r{k}", role="user",
                         blocks=[ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=f"v{k} = 1\n")])]))
    evs.append(Event(seq=50, id="orphan", role="user",
                     blocks=[ToolResultBlock(tool_use_id="toolu_orphan_77", content=[TextBlock(text="x")])]))
    index = CoveredText(evs, body=(0, body(evs, 0)))
    for probe in ("toolu_00000002abc", "toolu_00000038abc", "00000020ab", "toolu_orphan_77", "orphan_7"):
        assert index.occurs(probe) is True, probe
    assert index.occurs("toolu_00000039abc") is False
    ck = Checkpoint(id="c", tenant="t", session="s", covers=SeqRange(start=1, end=20),
                    summary="- toolu_00000004abc\n- toolu_orphan_77\n- toolu_00000099abc")
    assert check_identifiers(evs, ck, None, index) == check_identifiers(evs, ck, None)
