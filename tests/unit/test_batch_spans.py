"""The validator's batch check reads the plan's merged call spans (``boundary.safe_cut_points_both``
``calls["blocked"]``, kept by ``CoveredText.take_calls``): a cut in no span splits nothing, so
the calls' list is not built for it (issue 17: every rung of the ladder cuts at a safe point).
At every cut of generated, synthetic, fixture and corpus sessions - those splitting a call from
its result (parallel batches, a call answered twice, a call id used twice) too - the splits are
those found without the spans."""

from __future__ import annotations

from pathlib import Path

from compactor.bench.scale import write_session
from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.boundary import body, safe_cut_points_both
from compactor.engine.covered_text import CoveredText
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.importers import import_file
from tests.conftest import corpus_files


def _ev(seq: int, role: str, *blocks: object) -> Event:
    return Event(seq=seq, id=f"e{seq}", kind="message", role=role, blocks=list(blocks))  # type: ignore[arg-type]


def _tricky() -> list[Event]:
    """A parallel batch, a call answered twice, a call id used twice, a call never answered."""
    use = lambda i: ToolUseBlock(id=i, name="bash", input={"command": i})  # noqa: E731
    res = lambda i: ToolResultBlock(tool_use_id=i, content=[TextBlock(text="ok " + i)])  # noqa: E731
    return [
        _ev(1, "user", TextBlock(text="go")),
        _ev(2, "assistant", use("toolu_a1"), use("toolu_a2")),
        _ev(3, "user", res("toolu_a1")),
        _ev(4, "user", res("toolu_a2")),
        _ev(5, "assistant", use("toolu_b1")),
        _ev(6, "user", res("toolu_b1")),
        _ev(7, "assistant", use("toolu_b1")),  # the same id again
        _ev(8, "user", res("toolu_b1")),
        _ev(9, "user", res("toolu_b1")),  # answered twice
        _ev(10, "assistant", use("toolu_c1")),  # never answered
        _ev(11, "assistant", TextBlock(text="done")),
    ]


def _sessions(tmp: Path) -> list[list[Event]]:
    small = tmp / "small.jsonl"
    write_session(small, 600)
    out = [_tricky()]
    out += [evs for _, evs in synthetic_sessions(3, seed=9)]
    out += [import_file(p).events for p in [small, *sorted(Path("tests/fixtures").rglob("*.jsonl"))[:6],
                                            *corpus_files()[:4]]]
    return out


def test_batch_splits_with_the_plans_spans_are_the_splits_without(tmp_path: Path) -> None:
    cuts = split_cuts = skipped = 0
    for events in _sessions(tmp_path):
        evs = sorted(events, key=lambda e: e.seq)
        if not evs:
            continue
        for prev_end in (0, evs[len(evs) // 3].seq):
            planned_body, calls = body(evs, prev_end), {}
            safe = safe_cut_points_both(evs, prev_end, body_events=planned_body, calls=calls)
            if not planned_body:
                continue
            planned = CoveredText(evs, body=(prev_end, planned_body))
            planned.take_calls(prev_end, calls)
            assert ("blocked", prev_end) in planned._memo and "blocked" not in calls
            plain = CoveredText(evs, body=(prev_end, body(evs, prev_end)))
            # the safe cuts first: none splits a call, and none needs the calls' list
            for end in safe[False]:
                if end > prev_end:
                    assert planned.batch_splits(end, prev_end) == [] == plain.batch_splits(end, prev_end)
                    skipped += 1
            assert ("calls", prev_end) not in planned._memo
            for end in sorted({e.seq for e in evs} | {prev_end + 1}):
                if end <= prev_end:
                    continue
                want = plain.batch_splits(end, prev_end)
                assert planned.batch_splits(end, prev_end) == want, (end, prev_end)
                cuts += 1
                split_cuts += bool(want)
    assert cuts > 1_000 and split_cuts > 100 and skipped > 100


def test_a_cut_at_a_calls_own_seq_is_inside_its_span() -> None:
    evs = _tricky()
    planned_body, calls = body(evs, 0), {}
    safe_cut_points_both(evs, 0, body_events=planned_body, calls=calls)
    planned = CoveredText(evs, body=(0, planned_body))
    planned.take_calls(0, calls)
    assert [(e.seq, first) for e, _, first in planned.batch_splits(2, 0)] == [(2, "toolu_a1")]
    assert [(e.seq, first) for e, _, first in planned.batch_splits(3, 0)] == [(2, "toolu_a2")]
    assert [(e.seq, first) for e, _, first in planned.batch_splits(7, 0)] == [(5, "toolu_b1"), (7, "toolu_b1")]
    assert planned.batch_splits(4, 0) == [] and planned.batch_splits(9, 0) == []
