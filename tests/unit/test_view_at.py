"""``build_view(events, ckpt, at=(seqs, pinned positions))`` - the tail found by bisection over
events in seq order (the engine's summary candidates, issue 17) - builds the view the walk
builds: on random sessions with pinned events among the covered ones, late results, repeated
seqs and checkpoints covering any prefix, with and without replacements."""

from __future__ import annotations

import random

from compactor.engine import compact as engine
from compactor.engine.covered_text import CoveredText
from compactor.engine.layers import clear_old_tool_results
from compactor.engine.policy import make_policy
from compactor.engine.view import build_view
from compactor.events import Event
from compactor.records import Checkpoint, SeqRange
from tests.unit.engine_fixtures import random_session
from tests.unit.test_engine_counts import _late_session


def _dump(view: list[Event]) -> list[dict]:
    return [e.model_dump(mode="json") for e in view]


def _checkpoint(end: int, replacements: dict | None = None) -> Checkpoint:
    return Checkpoint(id="ck-x", tenant="t", session="s", covers=SeqRange(start=1, end=end),
                      summary="The summary.", summary_tokens=3, replacements=replacements or {})


def _at(events: list[Event]) -> tuple[list[int], list[int]]:
    facts = CoveredText(events).range_facts()
    assert facts is not None
    return facts[1], facts[3]


def test_the_bisected_view_is_the_walked_one() -> None:
    rng = random.Random(17)
    sessions = [random_session(rng).events for _ in range(25)] + [_late_session()]
    twice = sessions[0][:10] + [sessions[0][9]] + sessions[0][10:]  # a repeated seq
    sessions.append(twice)
    pinned_covered = 0
    for events in sessions:
        at = _at(events)
        last = max(e.seq for e in events)
        repl = clear_old_tool_results([e for e in events if e.kind != "pinned"], make_policy("default"),
                                      keep=2).replacements
        for end in sorted({0, 1, 2, last // 3, last // 2, last - 1, last, *rng.sample(range(last + 1), 5)}):
            for replacements in ({}, {s: b for s, b in repl.items() if s > end}):
                ckpt = _checkpoint(end, replacements)
                assert _dump(build_view(events, ckpt, at=at)) == _dump(build_view(events, ckpt))
            pinned_covered += any(e.kind == "pinned" and 1 < e.seq <= end for e in events)
    assert pinned_covered  # (else the pinned events' part shows nothing)


def test_the_engines_candidates_are_unchanged() -> None:
    """A compaction's outcome with the bisected views is the one with the walked views."""
    rng = random.Random(5)
    for events in [random_session(rng).events for _ in range(6)] + [_late_session()]:
        for target in (1_500, 5_000):
            got = engine.compact(events, make_policy("default"), target, session="s")
            walked = engine.build_view
            try:
                engine.build_view = lambda evs, ckpt, at=None: walked(evs, ckpt)  # type: ignore[assignment]
                want = engine.compact(events, make_policy("default"), target, session="s")
            finally:
                engine.build_view = walked  # type: ignore[assignment]
            assert _dump(got.view) == _dump(want.view)
            assert got.record.model_dump(exclude={"durations_ms"}) == want.record.model_dump(exclude={"durations_ms"})
