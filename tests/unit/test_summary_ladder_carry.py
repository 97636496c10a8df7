"""A ladder rung whose lists extend the previous rung's carries its commands and files-read
sections (issue 17, ``ladder_carry``): only the new items are made, and the few lines whose
rank or line may change (the newest commands that worked, the failed runs the errors section
tells, an answer's gist, a file's facts). Rung by rung, the document's lines and the rendered
summaries are the ones built without the memo."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactor.lifting.lift import LiftedState
from compactor.lifting.state import Command, FailedApproach, FileRef, Request
from compactor.summarize import document, ladder_carry, sections, structured
from compactor.summarize.structured import begin_ladder_memo, end_ladder_memo
from tests.unit.test_summary_fit import _ladder, _renders, _sessions


def _big(n: int) -> tuple[list[Command], list[FileRef], list[FailedApproach], list[FileRef]]:
    """``n`` commands (ok, failed with a tool call id, fetches that answered ``got: ...``,
    installs, cut answers) and files read (a quarter with facts, a few later changed), and
    the failures of some failed runs (told in full under Errors)."""
    cmds, files, failures = [], [], []
    for i in range(1, n):
        kind = i % 13
        status = "failed" if kind in (3, 7) else "ok"
        detail = (f"got: {{'items': ['a{i}', 'b{i}'], 'total': {i}}}" if kind in (1, 5) else
                  f"partial: the first {i} rows" if kind == 9 else "")
        command = f"pip install pkg{i}" if kind == 11 else f"curl -s https://api.example.com/q?id={i}" if kind in (1, 5, 9) \
            else f"pytest tests/test_{i}.py -k case"
        cmds.append(Command(seq=3 * i, command=command, tool_use_id=f"toolu_{i}", status=status,
                            exit_code=1 if status == "failed" else 0, detail=detail))
        files.append(FileRef(path=f"src/pkg/mod_{i}.py", seq=3 * i + 1, ops=["read"],
                             facts=[f"def f{i}(x): return {i}", f"LIMIT_{i} = {i}"] if i % 4 == 0 else []))
        if status == "failed" and i % 2:
            failures.append(FailedApproach(seq=3 * i, what=command, tool_use_id=f"toolu_{i}",
                                           error="AssertionError", cause=f"assert {i} == {i + 1}"))
    changed = [FileRef(path=f"src/pkg/mod_{i}.py", seq=3 * n + i, ops=["edit"]) for i in (8, 40)]
    return cmds, files, failures, changed


def _states(n: int, cuts: tuple[int, ...], again: int | None = None) -> list[LiftedState]:
    """Growing states (the ladder's shape: each list extends the previous one's), the failures
    and changed files of each cut; ``again``: the last cut runs that command once more."""
    cmds, files, failures, changed = _big(n)
    goal = Request(seq=0, text="Task: make the tests pass. Do not edit the tests.", tokens=12)
    out = []
    for k, cut in enumerate(cuts):
        c = cmds[:cut]
        if again is not None and k == len(cuts) - 1:
            c = [*c, cmds[again].model_copy(update={"seq": 3 * cut + 2})]
        out.append(LiftedState(goal=goal, requests=[goal], commands=c, files_read=files[:cut],
                               failed_approaches=[fa for fa in failures if fa.seq < 3 * cut],
                               files_changed=[f for f in changed if f.seq < 3 * n + cut // 20]))
    return out


def _spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often each rung's sections were carried (not made whole again)."""
    seen = {"commands": 0, "reads": 0}
    extend_commands, extend_reads = ladder_carry.extend_commands, ladder_carry.extend_reads

    def commands(*a):
        out = extend_commands(*a)
        seen["commands"] += out is not None
        return out

    def reads(*a):
        out = extend_reads(*a)
        seen["reads"] += out is not None
        return out

    monkeypatch.setattr(document, "extend_commands", commands)
    monkeypatch.setattr(document, "extend_reads", reads)
    return seen


def _lines(doc: structured._Doc) -> list[tuple]:
    return [(ln.section, ln.text, ln.tier, ln.seq, ln.order, ln.detail) for ln in structured.doc_lines(doc)]


@pytest.mark.parametrize("again", [None, 150])
def test_each_rung_builds_the_lines_it_builds_without_the_memo(monkeypatch: pytest.MonkeyPatch,
                                                                again: int | None) -> None:
    """Rung by rung (budgets that change the answers shown with their gist, failures that come
    into view, files whose facts leave the share as newer ones take it, changed files that
    take a file out of the files read, a command run again), the carried document's lines,
    tiers and places are the ones built without the memo, and so are its summaries."""
    seen = _spy(monkeypatch)
    states = _states(900, (300, 301, 420, 600, 601, 899), again)
    budgets = (200, 2_000, 600, 12_000, 300, 1_200)
    token = begin_ladder_memo()
    try:
        built = [_lines(structured._build(s, budget=b)) for s, b in zip(states, budgets)]
        built.append(_lines(structured._build(states[-1])))  # (no budget: every answer its gist)
    finally:
        end_ladder_memo(token)
    assert built == [_lines(structured._build(s, budget=b)) for s, b in zip(states, budgets)] + [
        _lines(structured._build(states[-1]))]
    assert seen["commands"] >= 4 - (again is not None) and seen["reads"] >= 4  # (the path under test)
    calls = [(s, b, lf) for s, b in zip(states, budgets) for lf in (False, True)]
    assert _renders(calls, None) == _renders(calls, None, memo=False)


def test_retiered_lines_are_carried_with_their_new_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    """The carried section of a later rung re-ranks the previous rung's newest ok commands and
    the failed runs a new failure line tells in full: without that the tiers differ."""
    states = _states(400, (100, 200, 399))
    token = begin_ladder_memo()
    try:
        # (read as each rung builds it: a line object is the next rung's too, its tier set again)
        tiers = [[ln.tier for ln in structured.doc_lines(structured._build(s, budget=500)) if ln.section == structured.COMMANDS]
                 for s in states]
    finally:
        end_ladder_memo(token)
    fresh = [[ln.tier for ln in structured.doc_lines(structured._build(s, budget=500)) if ln.section == structured.COMMANDS]
             for s in states]
    assert tiers == fresh
    assert sections._TIER_COMMAND_RECENT_OK in tiers[0] and sections._TIER_COMMAND_EXPLAINED in tiers[2]


def test_sessions_ladders_with_the_carry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated, fixture and corpus sessions' ladders: the same summaries with the memo (and
    its carry) as without, and the carry taken."""
    seen = _spy(monkeypatch)
    for events in _sessions(tmp_path, (900, 5000)):
        calls = _ladder(events, (40, 300, 2_000))
        assert _renders(calls, None) == _renders(calls, None, memo=False)
    assert seen["commands"] > 10 and seen["reads"] > 10


def test_the_first_batch_from_the_lines_ranked_above_the_plain_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_fit``'s first batch looks at the memo sections' lines ranked above a plain ok command
    or file read (and the other sections' lines) first: where it drops one of those, the plain
    lines are all dropped; where it keeps them all (few failures, fetches or facts), it sorts
    every line. Both give the summaries built without the memo."""
    outcomes: list[bool] = []
    real = structured.top_batch

    def spy(*a):
        out = real(*a)
        outcomes.append(out is None)
        return out

    monkeypatch.setattr(structured, "top_batch", spy)
    cmds, files, failures, changed = _big(900)
    plain = [c.model_copy(update={"status": "ok", "exit_code": 0, "detail": "", "command": f"make t{c.seq}"})
             for c in cmds]
    bare = [f.model_copy(update={"facts": []}) for f in files]
    goal = Request(seq=0, text="Task: make the tests pass. Do not edit the tests.", tokens=12)
    states = [LiftedState(goal=goal, requests=[goal], commands=c[:k], files_read=f[:k],
                          failed_approaches=[fa for fa in fails if fa.seq < 3 * k])
              for c, f, fails in ((cmds, files, failures), (plain, bare, [])) for k in (500, 700, 899)]
    calls = [(s, b, False) for s in states for b in (150, 900, 1_500)]
    assert _renders(calls, None) == _renders(calls, None, memo=False)
    assert True in outcomes and False in outcomes
