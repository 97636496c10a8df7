"""A ladder rung's text as ``ladder_count.count_beyond`` reads it for ``count_lines``' piece cuts
(issue 17, CPU): a memo section is one part of the layout (``_MemoSpan``), its lines' starts
found from sums of the memo's length column, not a part and a length per line. Every span of
that text read through it is the span of the text ``_render`` makes of the document."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from compactor.summarize import ladder_count, structured
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo
from tests.unit.test_summary_fit import _ladder, _sessions
from tests.unit.test_summary_ladder_count import _state


def _read_through(doc: structured._Doc, monkeypatch: pytest.MonkeyPatch) -> tuple[int, Any] | None:
    """(the text's length, ``part(a, b)``) as ``count_beyond`` hands them to ``piece_cut_extra_of``."""
    seen: list[tuple[int, Any]] = []

    def spy(n: int, part: Any) -> int:
        seen.append((n, part))
        return 0

    monkeypatch.setattr(ladder_count, "piece_cut_extra_of", spy)
    got = structured._count_beyond(doc)
    monkeypatch.undo()
    return seen[0] if got is not None and seen else None


def _check(doc: structured._Doc, monkeypatch: pytest.MonkeyPatch, rng: random.Random) -> bool:
    got = _read_through(doc, monkeypatch)
    if got is None:
        return False
    n, part = got
    structured.doc_lines(doc)  # (every memo entry made its line, after the layout: ``_render`` reads them)
    text = structured._render(doc)[0]
    assert n == len(text)
    spans = [(0, n), (0, 1), (n - 1, n), (5, 5)]
    for _ in range(300):
        a = rng.randrange(n)
        spans.append((a, min(n, a + rng.choice((1, 2, 7, 40, 300, 5_000)))))
    for a, b in spans:
        assert part(a, b) == text[a:b], (a, b)
    return True


@pytest.mark.parametrize("chunk", [1, 3, 256])
def test_every_span_of_a_rung_text_is_the_rendered_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       chunk: int) -> None:
    """Growing states (lines ending in letters and in punctuation, commands run again), and the
    ladder's states of generated, fixture and corpus sessions, at budgets their lists cannot fit,
    with chunks of one line, of a few and of the default."""
    rng = random.Random(chunk)
    states = []
    for punct in (False, True):
        big = _state(700, punct)
        states += [structured.LiftedState(goal=big.goal, requests=big.requests, commands=big.commands[:k],
                                          files_read=big.files_read[:k]) for k in (200, 421, 699)]
    states += [s for events in _sessions(tmp_path, (900, 5000)) for s, _, _ in _ladder(events, (0,))[::2]]
    checked = 0
    token = begin_ladder_memo()
    try:
        for state in states:
            for budget in (40, 300, 2_000):
                with monkeypatch.context() as m:
                    m.setattr(ladder_count._MemoSpan, "CHUNK", chunk)
                    doc = structured._build(state, budget=budget)
                    checked += _check(doc, monkeypatch, rng)
    finally:
        end_ladder_memo(token)
    assert checked > 10
