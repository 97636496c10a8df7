"""A ladder rung that cannot fit is counted without its text (issue 17, ``ladder_count``): its
first batch is found from the top and the lines it drops are never sized. The summaries are
the ones the whole document, rendered and counted, gives."""

from __future__ import annotations

from operator import attrgetter
from pathlib import Path

import pytest

from compactor import tokens
from compactor.lifting.lift import LiftedState
from compactor.lifting.state import Command, FileRef, Request
from compactor.summarize import structured
from compactor.summarize.ladder_count import first_batch
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo
from compactor.tokens import count_lines, count_text
from tests.unit.test_summary_fit import _ladder, _renders, _sessions


def _counted_without_text(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The rungs counted by ``_count_beyond`` (its results, None left out)."""
    seen: list[int] = []
    real = structured._count_beyond

    def spy(doc: structured._Doc) -> int | None:
        n = real(doc)
        if n is not None:
            seen.append(n)
        return n

    monkeypatch.setattr(structured, "_count_beyond", spy)
    return seen


def test_rungs_that_cannot_fit_give_the_summaries_of_the_whole_document(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated, fixture and corpus sessions at budgets their lists cannot fit: the ladder's
    summaries (with the memo) are the ones rendered without it (each document whole)."""
    seen = _counted_without_text(monkeypatch)
    for events in _sessions(tmp_path, (900, 5000)):
        calls = _ladder(events, (40, 300, 2_000))
        assert _renders(calls, None) == _renders(calls, None, memo=False)
    assert len(seen) > 20  # (the path under test was taken)


def _state(n: int, punct: bool) -> LiftedState:
    """``n`` commands and files read: with ``punct``, lines ending in punctuation (each counts
    its newline with it: a correction), a few commands run again (their lines move)."""
    cmds = [Command(seq=2 * i, command=f"pytest tests/test_{i % (n // 3 if punct else n)}.py",
                    status="failed" if i % 11 == 0 else "ok", exit_code=1 if i % 11 == 0 else 0,
                    detail=(f"{i} passed (in {i % 7}.{i % 10}s)." if punct and i % 3 else ""))
            for i in range(1, n)]
    files = [FileRef(path=f"src/pkg/mod_{i}.py" + ("~" if punct and i % 5 == 0 else ""), seq=2 * i + 1,
                     ops=["read"], facts=[f"def f{i}(x): return {i}"] if i % 4 == 0 else [])
             for i in range(1, n)]
    goal = Request(seq=0, text="Task: make the tests pass. Do not edit the tests.", tokens=12)
    return LiftedState(goal=goal, requests=[goal], commands=cmds, files_read=files)


@pytest.mark.parametrize("punct", [False, True])
@pytest.mark.parametrize("piece", [None, 700, 5_000])
def test_long_texts_and_lines_ending_in_punctuation(monkeypatch: pytest.MonkeyPatch, punct: bool,
                                                   piece: int | None) -> None:
    """Growing states (the ladder's shape) whose lines end in punctuation, and whose text
    ``count_lines`` cuts into pieces (a small piece size): the same summaries as without the
    memo, at budgets that keep few, some and most of the lines."""
    if piece is not None:
        monkeypatch.setattr(tokens, "COUNT_PIECE", piece)
    seen = _counted_without_text(monkeypatch)
    big = _state(700, punct)
    states = [LiftedState(goal=big.goal, requests=big.requests, commands=big.commands[:k],
                          files_read=big.files_read[:k]) for k in (200, 420, 421, 699)]
    calls = [(s, b, False) for s in states for b in (30, 250, 600, 900, 1_500)]
    assert _renders(calls, None) == _renders(calls, None, memo=False)
    assert seen


def _assert_first_batch(state: LiftedState, budget: int) -> bool:
    """The document's count is its candidates' sizes plus ``_count_beyond``'s number, and the
    first batch found from the top is the one the drop from the bottom takes (by the text's
    exact count); False: not a document counted so."""
    doc = structured._build(state, budget=budget)
    beyond = structured._count_beyond(doc)
    if beyond is None or structured._min_tokens(doc, structured._FIXED_SECTIONS, budget) <= budget:
        return False
    candidates = sorted((ln for ln in structured.doc_lines(doc) if ln.tier is not None), key=attrgetter("tier", "seq", "order"))
    sizes = [count_text(ln.text) + 1 for ln in candidates]
    total = count_lines(structured._render(doc)[0])
    assert total == sum(sizes) + beyond
    surplus, freed, idx = total - budget, 0, 0
    while idx < len(candidates) and freed < surplus:
        freed += sizes[idx]
        idx += 1
    assert first_batch(candidates, budget - beyond) == idx
    assert all(ln.tokens in (0, s) for ln, s in zip(candidates, sizes))  # (sized as the text counts them)
    return True


@pytest.mark.parametrize("piece", [None, 700])
def test_the_first_batch_is_the_one_the_drop_from_the_bottom_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  piece: int | None) -> None:
    if piece is not None:
        monkeypatch.setattr(tokens, "COUNT_PIECE", piece)
    states = [s for events in _sessions(tmp_path, (900, 5000)) for s, _, _ in _ladder(events, (0,))[::2]]
    states += [_state(700, punct) for punct in (False, True)]
    token = begin_ladder_memo()
    try:
        checked = sum(_assert_first_batch(s, b) for s in states for b in (40, 300, 900, 2_000))
    finally:
        end_ladder_memo(token)
    assert checked > 20
