"""The summary's drop loop renders only the lines it keeps (issue 17): the same summaries as
rendering the whole document after each batch."""

from __future__ import annotations

import random
from operator import attrgetter
from pathlib import Path

import pytest

from compactor.bench.scale import write_session
from compactor.importers import import_file
from compactor.lifting.lift import Lifter
from compactor.summarize import structured
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo, render_summary
from compactor.tokens import count_lines
from tests.conftest import corpus_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _reference_fit(doc, budget, tokens, rendered, beyond=None):
    """The drop loop as it was: every batch renders and counts the whole document, the lines
    dropped lowest tier, then oldest, then first in the document first (a document the ladder
    memo counted without its text, ``beyond``: rendered and counted whole here)."""
    candidates = sorted((ln for ln in structured.doc_lines(doc) if ln.tier is not None), key=attrgetter("tier", "seq", "order"))
    if rendered is None:
        rendered = structured._render(doc)
        tokens = count_lines(rendered[0])
    text, sections, dropped = rendered
    for ln in candidates:
        ln.tokens = structured.count_text(ln.text) + 1
    idx = 0
    while tokens > budget and idx < len(candidates):
        surplus, freed = tokens - budget, 0
        while idx < len(candidates) and freed < surplus:
            candidates[idx].dropped = doc.mark
            freed += candidates[idx].tokens
            idx += 1
        text, sections, dropped = structured._render(doc)
        tokens = count_lines(text)
    # (the essential lines left out, as ``_left_out_weight`` summed them from every line's mark)
    doc.left_out = sum(ln.tier for ln in doc.lines if ln.dropped == doc.mark and ln.tier is not None
                       and ln.tier >= structured.ESSENTIAL_TIER)
    return text, sections, dropped, tokens


def _renders(calls: list, monkeypatch: pytest.MonkeyPatch | None, memo: bool = True) -> list[str]:
    with pytest.MonkeyPatch.context() as mp:
        if monkeypatch is not None:
            mp.setattr(structured, "_fit", _reference_fit)
        token = begin_ladder_memo() if memo else None
        try:
            return [render_summary(s, b, latest_full=lf).model_dump_json() for s, b, lf in calls]
        finally:
            if token is not None:
                end_ladder_memo(token)


def _ladder(events: list, budgets: tuple[int, ...]) -> list:
    seqs = [e.seq for e in events]
    lifter = Lifter(events)
    states = [lifter.state_at(seqs[int((len(seqs) - 1) * f)]) for f in (0.5, 0.7, 0.85, 1.0)]
    return [(s, b, lf) for s in states for b in budgets for lf in (False, True)]


def _sessions(tmp_path: Path, sizes: tuple[int, ...]) -> list[list]:
    files = []
    for n in sizes:
        path = tmp_path / f"small{n}.jsonl"
        write_session(path, n)
        files.append(path)
    files += [*sorted((FIXTURES / "claude-code").glob("*.jsonl"))[:6], *corpus_files()]
    return [import_file(p).events for p in files]


def test_the_summaries_are_the_ones_the_whole_document_gives(tmp_path: Path) -> None:
    for events in _sessions(tmp_path, (600, 4000)):
        calls = _ladder(events, (60, 300, 2_000, 12_000))
        assert _renders(calls, None) == _renders(calls, pytest.MonkeyPatch())
        assert _renders(calls, None, memo=False) == _renders(calls, pytest.MonkeyPatch())


def test_random_budgets_and_cuts(tmp_path: Path) -> None:
    rng = random.Random(17)
    for events in _sessions(tmp_path, (1500,)):
        seqs = [e.seq for e in events]
        lifter = Lifter(events)
        cuts = sorted(rng.sample(seqs, min(6, len(seqs))))
        calls = [(lifter.state_at(c), rng.randint(20, 15_000), rng.random() < 0.5) for c in cuts]
        assert _renders(calls, None) == _renders(calls, pytest.MonkeyPatch())
