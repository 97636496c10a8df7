"""The shrink ladder's line memo (issue 17): the rungs' summaries are the ones rendered without it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from compactor.bench.scale import write_session
from compactor.importers import import_file
from compactor.lifting.lift import Lifter
from compactor.lifting.state import Command
from compactor.summarize import document, sections, structured
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo, render_summary
from tests.conftest import corpus_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _ladder(events: list, budgets: tuple[int, ...]) -> list:
    """Growing cuts of one lifting pass (their states share items, as the ladder's do)."""
    seqs = [e.seq for e in events]
    lifter = Lifter(events)
    states = [lifter.state_at(seqs[int((len(seqs) - 1) * f)]) for f in (0.5, 0.7, 0.85, 1.0)]
    return [(s, b) for s in states for b in budgets]


def _renders(calls: list, memo: bool) -> list[str]:
    token = begin_ladder_memo() if memo else None
    try:
        return [render_summary(s, b).model_dump_json() for s, b in calls]
    finally:
        if token is not None:
            end_ladder_memo(token)


def _sessions(tmp_path: Path) -> list[list]:
    path = tmp_path / "small.jsonl"
    write_session(path, 3000)
    files = [path, *sorted((FIXTURES / "claude-code").glob("*.jsonl"))[:4], *corpus_files()]
    return [import_file(p).events for p in files]


def test_the_rungs_render_the_same_with_the_line_memo(tmp_path: Path) -> None:
    for events in _sessions(tmp_path):
        calls = _ladder(events, (300, 2_000, 12_000))
        assert _renders(calls, memo=True) == _renders(calls, memo=False)


def test_a_command_run_again_in_a_later_rung_gets_its_new_count() -> None:
    first = Command(seq=1, command="make build", status="ok", exit_code=0)
    again = Command(seq=3, command="make build", status="ok", exit_code=0)
    other = Command(seq=2, command="ls", status="ok", exit_code=0)
    from compactor.lifting.lift import LiftedState

    early = LiftedState(commands=[first, other])
    late = LiftedState(commands=[first, other, again])
    token = begin_ladder_memo()
    try:
        r1 = render_summary(early, 10_000)
        r2 = render_summary(late, 10_000)
    finally:
        end_ladder_memo(token)
    assert "×2" in r2.sections[structured.COMMANDS][-1] and "×2" not in " ".join(r1.sections[structured.COMMANDS])
    assert r2 == render_summary(late, 10_000)


def test_the_memo_is_gone_after_the_ladder() -> None:
    token = begin_ladder_memo()
    end_ladder_memo(token)
    assert document._LADDER_MEMO.get() is None


@pytest.mark.parametrize("budget", [200, 5_000])
def test_a_memo_left_from_other_states_changes_nothing(tmp_path: Path, budget: int) -> None:
    path = tmp_path / "s.jsonl"
    write_session(path, 600)
    events = import_file(path).events
    calls = [(s, budget) for s, _ in _ladder(events, (budget,))]
    token = begin_ladder_memo()
    try:
        _renders(_ladder(import_file(path).events, (budget,)), memo=False)  # other objects, same texts
        with_memo = [render_summary(s, b).model_dump_json() for s, b in calls]
    finally:
        end_ladder_memo(token)
    assert with_memo == _renders(calls, memo=False)


def test_a_command_newest_in_one_rung_and_older_in_the_next_keeps_its_place_by_the_rung() -> None:
    """The memo keeps a command's own tier; being one of the newest that worked is the rung's:
    the two lines the early rung keeps longer are ordinary ok runs in the later one."""
    from compactor.lifting.lift import LiftedState

    cmds = [Command(seq=i, command=f"step {i}", status="ok", exit_code=0) for i in range(1, 9)]
    early, late = LiftedState(commands=cmds[:2]), LiftedState(commands=cmds)
    token = begin_ladder_memo()
    try:
        tiers = [[ln.tier for ln in structured.doc_lines(structured._build(s, budget=5_000))] for s in (early, late)]
    finally:
        end_ladder_memo(token)
    assert tiers == [[ln.tier for ln in structured.doc_lines(structured._build(s, budget=5_000))] for s in (early, late)]
    assert tiers[0] == [sections._TIER_COMMAND_RECENT_OK] * 2
    assert tiers[1][:2] == [sections._TIER_COMMAND_OK] * 2


def test_a_file_read_whose_facts_leave_the_share_in_a_later_rung_loses_them_there() -> None:
    """A read file's line is memoized with its facts: when newer files take the read share in a
    later rung, the same item's line is rebuilt without them (and sized again)."""
    from compactor.lifting.lift import LiftedState
    from compactor.lifting.state import FileRef

    files = [FileRef(path=f"src/m{i}.py", seq=i, ops=["read"], facts=[f"def f{i}(value_{i}, other_{i}): return {i}"])
             for i in range(1, 40)]
    early, late = LiftedState(files_read=files[:2]), LiftedState(files_read=files)
    token = begin_ladder_memo()
    try:
        got = [render_summary(s, 400) for s in (early, late, early)]
    finally:
        end_ladder_memo(token)
    assert got == [render_summary(s, 400) for s in (early, late, early)]
    first = "- src/m1.py"
    assert any(x.startswith(first + "\n") for x in got[0].sections[structured.FILES_READ])
    assert first in got[1].sections.get(structured.FILES_READ, []) or got[1].dropped.get(structured.FILES_READ)
    assert not any(x.startswith(first + "\n") for x in got[1].sections.get(structured.FILES_READ, []))


def test_the_memo_sizes_its_lines_as_the_text_counts_them(tmp_path: Path) -> None:
    """Every line built from the memo carries the count ``_measure`` would give it."""
    path = tmp_path / "s.jsonl"
    write_session(path, 2000)
    token = begin_ladder_memo()
    try:
        for s, b in _ladder(import_file(path).events, (5_000,)):
            for ln in structured.doc_lines(structured._build(s, budget=b)):
                if ln.tokens:
                    assert ln.tokens == structured.count_text(ln.text) + 1
    finally:
        end_ladder_memo(token)


def test_kept_lines_render_as_new_ones_in_any_order_of_rungs_and_budgets(tmp_path: Path) -> None:
    """The memo's line objects go into later rungs' documents (issue 17): a line one rung
    dropped, or ranked as one of its newest commands, or sized, is shown, ranked and sized as
    a fresh line would be by any later rung, budget or latest_full (random order, fixed seed)."""
    rng = random.Random(11)
    for events in _sessions(tmp_path):
        calls = [(s, b) for s, b in _ladder(events, (120, 900, 5_000, 40_000))]
        order = [*calls, *rng.sample(calls, len(calls))]
        flags = [rng.random() < 0.5 for _ in order]
        token = begin_ladder_memo()
        try:
            kept = [render_summary(s, b, latest_full=lf).model_dump_json() for (s, b), lf in zip(order, flags)]
        finally:
            end_ladder_memo(token)
        assert kept == [render_summary(s, b, latest_full=lf).model_dump_json() for (s, b), lf in zip(order, flags)]


def test_a_later_rung_puts_the_same_line_objects_in_its_document(tmp_path: Path) -> None:
    """What the test above exercises: the later rung's command and file-read lines are the
    earlier rung's objects, dropped there and shown here, in the document's order."""
    path = tmp_path / "s.jsonl"
    write_session(path, 2000)
    (early, _), (late, _) = _ladder(import_file(path).events, (0,))[:2]
    token = begin_ladder_memo()
    try:
        first = structured._build(early, budget=300)
        text, sections, dropped, tokens = structured._measure(first)
        structured._fit(first, 300, tokens, (text, sections, dropped))
        second = structured._build(late, budget=300)
    finally:
        end_ladder_memo(token)
    ids = {id(ln) for ln in first.lines if ln.section in (structured.COMMANDS, structured.FILES_READ)}
    shared = [ln for ln in structured.doc_lines(second) if id(ln) in ids]
    assert len(shared) > 100 and any(ln.dropped == first.mark for ln in shared)
    assert structured._render(second) == structured._render(structured._build(late, budget=300))
    assert sorted(second.lines, key=lambda ln: ln.order) == second.lines


def test_a_fetch_run_again_in_a_later_rung_takes_the_answers_share_once() -> None:
    """The commands' scans are extended from the previous rung's (issue 17): a fetch whose
    answer the earlier rung counted and that ran again later is counted at its new run only,
    so the answers' share keeps room for the other answers as a fresh scan does."""
    from compactor.lifting.lift import LiftedState

    url = "curl -s https://docs.example.org/api/v2/reference/endpoints/" + "/".join(["section"] * 8)
    old = Command(seq=1, command=url, status="ok", exit_code=0, detail="got: 200, title Reference")
    other = Command(seq=2, command=url.replace("reference", "guides"), status="ok", exit_code=0,
                    detail="got: 200, " + " ".join(f"item{i}" for i in range(40)))
    again = Command(seq=3, command=url, status="ok", exit_code=0,
                    detail="got: 200, " + " ".join(f"entry{i}" for i in range(40)))
    # (ok runs that make the summary go over budget, so the answers get a share: 10% of it)
    filler = [Command(seq=10 + i, command=f"ls -la build/output/dir{i}/assets/images", status="ok", exit_code=0)
              for i in range(200)]
    early = LiftedState(commands=[*filler, old, other])
    late = LiftedState(commands=[*filler, old, other, again])
    budgets = range(1_000, 4_000, 100)
    token = begin_ladder_memo()
    try:
        got = [render_summary(s, b) for b in budgets for s in (early, late)]
    finally:
        end_ladder_memo(token)
    assert got == [render_summary(s, b) for b in budgets for s in (early, late)]
    # (an answer within the share: its command cut short, the answer is the point)
    both = [r for r in got[1::2] if all(any(x.startswith(f"- #{c.seq} {document._code(c.command, 90)} →")
                                            for x in r.sections[structured.COMMANDS]) for c in (other, again))]
    assert both  # (budgets whose share holds the later rung's two answers)


def test_each_rung_is_counted_as_its_text_counts_with_the_lines_counts_the_memo_kept(tmp_path: Path) -> None:
    """A rung's count is summed from its lines' counts (``_measure``), which the memo's lines
    carry from rung to rung:
    every rung's count is ``count_lines`` of its text, its text and sections are ``_render``'s,
    in growing and then random order, at budgets that keep all, some or few of the lines."""
    from compactor.tokens import count_lines

    rng = random.Random(5)
    for events in _sessions(tmp_path):
        calls = _ladder(events, (None, 300, 5_000))
        token = begin_ladder_memo()
        try:
            for s, b in [*calls, *rng.sample(calls, len(calls))]:
                doc = structured._build(s, budget=b)
                text, sections, dropped, n = structured._measure(doc)
                assert (text, sections, dropped) == structured._render(doc)
                assert n == count_lines(text)
        finally:
            end_ladder_memo(token)


def test_a_section_with_a_line_that_cannot_follow_a_cut_is_counted_line_by_line() -> None:
    """A line starting with whitespace joins the line before it in one count: its section is
    not summed from the lines' own counts alone."""
    from compactor.tokens import count_lines

    doc = structured._Doc()
    for i in range(60):
        doc.add(structured.COMMANDS, f"- #{i} `make step{i}` → ok.", 10, i)
        if i % 7 == 0:
            doc.add(structured.COMMANDS, "   indented detail, !", 10, i, detail=True)
    doc.add(structured.LATEST, "(from the user, #99)\nfinish it", None, 99)
    text, _, _, n = structured._measure(doc)
    assert n == count_lines(text) and len(text) > structured.SHORT_TEXT
