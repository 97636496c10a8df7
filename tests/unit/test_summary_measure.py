"""The summary's text counted from its lines' counts (issue 17): the number ``count_lines`` gives
for the rendered text, and the summaries rendered so are the ones counting the text gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from compactor import tokens
from compactor.lifting.lift import Lifter
from compactor.summarize import structured
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo, render_summary
from compactor.tokens import count_lines, count_text
from tests.unit.test_summary_fit import _sessions


def _states(tmp_path: Path, sizes: tuple[int, ...]) -> list:
    """States at 3 cuts of one lifting pass of generated sessions, fixtures and the corpus."""
    states = []
    for events in _sessions(tmp_path, sizes):
        seqs = [e.seq for e in events]
        lifter = Lifter(events)
        states += [lifter.state_at(seqs[int((len(seqs) - 1) * f)]) for f in (0.3, 0.7, 1.0)]
    return states


def _assert_measured(doc: structured._Doc) -> None:
    text, sections, dropped, n = structured._measure(doc)
    assert (text, sections, dropped) == structured._render(doc)
    assert n == count_lines(text) == count_text(text)
    assert all(ln.tokens == count_text(ln.text) + 1 for ln in doc.lines if ln.tier is not None)


def test_the_count_of_every_document_the_summaries_build(tmp_path: Path) -> None:
    states = _states(tmp_path, (300, 3000))
    assert len(states) > 20
    for state in states:
        for budget in (None, 200, 3_000):
            _assert_measured(structured._build(state, budget=budget))
        _assert_measured(structured._build(state, short_requests=True, budget=500))


_PARTS = ["a", "b", " ", "\n", "\n\n", "-", "#", "`", "é", "1", "23", " \n", "\t", ")", "'s", "  ",
          "→", "🙂", "\r\n", "xxxxx", "- #12 `ls` → exit 0", "\n  - ", "\n- ", ".", ":"]


def _random_doc(rng: random.Random) -> structured._Doc:
    """Lines built from the pieces where cl100k's pre-split is delicate, some starting with
    whitespace (a detail line) or empty, ending in a letter, punctuation or a newline."""
    doc = structured._Doc()
    names = sorted(rng.sample(structured.SECTION_NAMES, rng.randint(1, 6)), key=structured.SECTION_NAMES.index)
    for name in names:
        for _ in range(rng.randint(1, 40)):
            text = "".join(rng.choice(_PARTS) for _ in range(rng.randint(0, 30)))
            doc.add(name, text, rng.choice([None, 10, 40]), rng.randint(1, 99), detail=rng.random() < 0.1)
    return doc


def test_random_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(17)
    for _ in range(300):
        _assert_measured(_random_doc(rng))
    # a text over the piece size: counted across the pieces ``count_lines`` cuts it into
    monkeypatch.setattr(tokens, "COUNT_PIECE", 700)
    for _ in range(300):
        doc = _random_doc(rng)
        text, _, _, n = structured._measure(doc)
        assert n == count_lines(text), repr(text[:200])


def test_a_document_laid_out_otherwise_is_counted_whole() -> None:
    doc = structured._Doc()
    doc.add(structured.COMMANDS, "- #3 `ls` → ok " * 60, 10, 3)
    doc.add(structured.GOAL, "(from the user, #1)\nfix it " * 60, None, 1)  # (a section out of order)
    assert structured._sum_lines(doc.lines, structured._render(doc)[0]) is None
    _assert_measured(doc)


def _renders(calls: list, whole: bool) -> list[str]:
    with pytest.MonkeyPatch.context() as mp:
        if whole:  # the text rendered and counted by ``count_lines``, as before
            mp.setattr(structured, "_sum_lines", lambda lines, text, more=False: None)
        token = begin_ladder_memo()
        try:
            return [render_summary(s, b, latest_full=lf).model_dump_json() for s, b, lf in calls]
        finally:
            end_ladder_memo(token)


def test_the_summaries_are_the_ones_counting_the_text_gives(tmp_path: Path) -> None:
    states = _states(tmp_path, (2000,))
    calls = [(s, b, lf) for s in states for b in (60, 400, 2_500, 15_000) for lf in (False, True)]
    assert _renders(calls, whole=False) == _renders(calls, whole=True)
