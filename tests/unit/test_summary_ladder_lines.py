"""The ladder memo's lines without their texts (issue 17, ``ladder_lines``): a big rung makes
the texts of the lines it keeps only, its count read around its piece cuts, with the summaries
and counts the whole texts give."""

from __future__ import annotations

import random
from itertools import accumulate
from pathlib import Path

import pytest

from compactor import tokens
from compactor.lifting.lift import LiftedState
from compactor.lifting.state import Command, FileRef
from compactor.summarize import document, structured
from compactor.summarize.ladder_lines import LazyLine, Line
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo, render_summary
from compactor.tokens import count_text
from compactor.summarize import piece_cuts
from compactor.summarize.piece_cuts import piece_cut_extra, piece_cut_extra_of
from tests.unit.test_summary_fit import _ladder, _renders, _sessions
from tests.unit.test_summary_ladder_count import _state

_GET_TEXT = Line.text.__get__


def _made(lines: list) -> int:
    """How many of the memo's lines hold their text."""
    return sum(type(_GET_TEXT(ln)) is str for ln in lines if isinstance(ln, LazyLine))


def _reference(text: str) -> int | None:
    """``piece_cut_extra`` as it was, on the whole text: its ``_pieces``, each cut's line found
    in the text itself."""
    if len(text) <= tokens.COUNT_PIECE:
        return 0
    extra = 0
    cuts = list(accumulate(len(piece) for piece in tokens._pieces(text)))[:-1]
    prev = 0
    for n, pos in enumerate(cuts):
        start = pos
        while True:
            j = text.rfind("\n", 0, start)
            if j < 0 or not text[j + 1].isspace():
                start = j + 1
                break
            start = j
        m = tokens._LINE_CUT.search(text, pos + 1)
        end = m.start() if m is not None else len(text)
        if start < prev or (n + 1 < len(cuts) and end > cuts[n + 1]):
            return None
        prev = pos
        if start != pos:
            extra += count_text(text[start:pos]) + count_text(text[pos:end]) - count_text(text[start:end])
    return extra


def _text(rnd: random.Random) -> str:
    words = ["- #12 `ls -la` → exit 0", "ok.", "  facts: def f(x)", "\n", "\n\n", "  ", "## Head\n", "x" * 50,
             "a b c", "é→", "\t", "(1 passed).", "-" * 300, "y" * 5_000, "z" * 1_000, "\n " * 40]
    return "".join(rnd.choice(words) for _ in range(rnd.randint(1, 400)))


@pytest.mark.parametrize("piece", [40, 700, 5_000, 9_000])
def test_the_count_read_around_the_piece_cuts_is_the_whole_texts(monkeypatch: pytest.MonkeyPatch, piece: int) -> None:
    """``piece_cut_extra_of`` of a text read by parts (a span around each cut, grown as far as
    a line goes) is ``piece_cut_extra`` of the text: lines over a piece (None), lines over the
    span it reads first, a cut in a run of indented lines."""
    monkeypatch.setattr(tokens, "COUNT_PIECE", piece)
    rnd = random.Random(piece)
    asked: list[int] = []
    for _ in range(300):
        text = _text(rnd)

        def part(a: int, b: int, text: str = text) -> str:
            asked.append(b - a)
            return text[a:b]

        assert piece_cut_extra_of(len(text), part) == piece_cut_extra(text) == _reference(text)
        for pos in rnd.sample(range(1, len(text)), min(20, len(text) - 1)):  # (the pieces' cuts, alone)
            floor = max(0, pos - rnd.choice((1, 100, 3_000, 5_000)))
            assert piece_cuts._cut_of(part, pos, floor) == tokens._cut(text, pos, floor)
    assert asked and max(asked) > 4 * piece_cuts._SPAN  # (a span grown past the first one)


def test_a_big_rung_makes_the_texts_of_the_lines_it_keeps_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A state of ~1.4k commands and files read at budgets that keep a few of them, its text cut
    into pieces: the rungs give the summaries the whole documents give, and the memo holds the
    texts of the lines kept (and the few read around a piece cut), not of every line."""
    monkeypatch.setattr(tokens, "COUNT_PIECE", 5_000)
    big = _state(1_400, True)
    states = [LiftedState(goal=big.goal, requests=big.requests, commands=big.commands[:k],
                          files_read=big.files_read[:k]) for k in (900, 1_200, 1_399)]
    for budget in (120, 400):
        token = begin_ladder_memo()
        try:
            out = []
            most = 0
            for s in states:
                r = render_summary(s, budget)
                out.append(r.model_dump_json())
                memo = document._LADDER_MEMO.get()
                assert memo is not None
                lines = [ln for ln in (*memo.cmd_lines, *memo.read_lines) if ln is not None]
                # the lines shown, and those in the ~256 characters read on either side of each
                # of the rung's piece cuts (its text is ~60 KB: ~12 cuts)
                chars = sum(memo.cmd_lengths) + sum(memo.read_lengths)
                most += sum(map(len, r.sections.values())) + 20 * (chars // 5_000 + 1)
                assert 0 < _made(lines) <= most
                assert len(lines) > 4 * _made(lines)
                # and the line objects made: those, and those ranked apart from their section's
                # most (round seventeen: the others' entries are their items)
                objects = sum(isinstance(ln, LazyLine) for ln in lines)
                apart = len(memo.commands.raised) + len(memo.reads.raised)
                assert objects <= most + apart and 4 * objects < len(lines), (objects, most, apart, len(lines))
        finally:
            end_ladder_memo(token)
        assert out == [render_summary(s, budget).model_dump_json() for s in states]  # (no memo)


def test_a_memo_line_reads_as_the_line_it_was_built_as(tmp_path: Path) -> None:
    """Every memo line's text, made when read, is the text it was sized by (a rung that fits
    reads them all: the summaries are the ones without the memo)."""
    for events in _sessions(tmp_path, (900,))[:3]:
        calls = _ladder(events, (300, 20_000))
        assert _renders(calls, None) == _renders(calls, None, memo=False)
    state = _state(30, True)
    long = state.commands[5].model_copy(update={"command": "python -c 'print(1)' " + "x" * 150})
    for c in [*state.commands, long]:  # (a long one: cut at 90 with its answer shown, else 200)
        for key in (2, 3, 6, 7):
            text = document._command_text(c, key, True)
            line = document._CommandLine(structured.COMMANDS, c, key, len(text), 10, c.seq, 0, 0)
            assert line.length == len(text) and line.text == text
            made = document._command_line(7, c, key, None, 0)  # (sized anew: another document's key)
            assert (made.text, made.length, made.order & 0xFFFFFFFF) == (text, len(text), 7)
            assert made.tokens == document.line_sizes(text)[0]
    for f in state.files_read:
        for facts in ("", "  defines: f"):
            text = document._read_text(f, facts)
            line = document._ReadLine(structured.FILES_READ, f, facts, len(text), 20, f.seq, 0, 0)
            assert line.length == len(text) and line.text == text
            made = document._read_line(3, f, facts, None, 0)
            assert (made.text, made.length, made.tokens) == (text, len(text), document.line_sizes(text)[0])


def test_a_document_reads_its_own_lines_after_another_document_of_its_rung_rebuilt_them() -> None:
    """A rung builds its document with a budget, then without (every answer a gist, every file
    its facts): the memo's lines of those commands and files are rebuilt with other keys. The
    first document's entries that are items (its plain lines, round seventeen) are then read as
    that document built them, not as the memo now holds them."""
    cmds = [Command(seq=2 * i, command=f"curl -s https://api.example.com/items/{i}", status="ok", exit_code=0,
                    detail=f"got: 200, items {' '.join(f'name{j}' for j in range(12))} ({i})") for i in range(1, 80)]
    files = [FileRef(path=f"src/pkg/mod_{i}.py", seq=2 * i + 1, ops=["read"],
                     facts=[f"def f{i}(x): return {i}", f"CONST_{i} = {i}"]) for i in range(1, 80)]
    s = LiftedState(commands=cmds, files_read=files)
    token = begin_ladder_memo()
    try:
        budgeted = structured._build(s, budget=300)
        whole = structured._build(s)
        got = [(ln.section, ln.text, ln.tier, ln.order) for ln in structured.doc_lines(budgeted)]
        again = [(ln.section, ln.text, ln.tier, ln.order) for ln in structured.doc_lines(whole)]
    finally:
        end_ladder_memo(token)
    fresh = [(ln.section, ln.text, ln.tier, ln.order) for ln in structured._build(s, budget=300).lines]
    assert got == fresh
    assert again == [(ln.section, ln.text, ln.tier, ln.order) for ln in structured._build(s).lines]
    assert sum(a != b for a, b in zip(got, again)) > 50  # (the keys differ: gists and facts)
