"""Each rung of the summary ladder counts the view of its cut with an empty summary (the
"frame": what is left of the target for the summary). That view is found by bisection of the
validator index's seqs (``compact._indexed_view``), as the candidate's own view is, instead of
two walks of the session per rung (issue 17). It must be ``build_view``'s very view: the
pinned events the cut passes (at the start or in the middle of the session), the summary
event and the tail, every event the same object; and the compaction's outcome the one it
gives with ``build_view`` walking the events (also for the compaction after its checkpoint)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from compactor.bench.scale import write_session
from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.policy import make_policy
from compactor.engine.view import build_view
from compactor.events import Event
from compactor.importers import import_file
from tests.conftest import corpus_files, fixture_sessions
from tests.unit.engine_fixtures import random_session
from tests.unit.test_engine_counts import _checks
from tests.unit.test_engine_release import _outcome


def _checked_views(monkeypatch: pytest.MonkeyPatch, seen: list[int]) -> None:
    """``_indexed_view`` answers as before, each view compared with ``build_view``'s."""
    indexed = engine._indexed_view

    def check(evs: Any, ckpt: Any, index: Any) -> list[Event]:
        got = indexed(evs, ckpt, index)
        want = build_view(evs, ckpt)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if g.kind == "compaction":  # (the summary event: made anew each time)
                assert g.model_dump() == w.model_dump()
            else:
                assert g is w or g.model_dump() == w.model_dump()
        seen.append(int(not ckpt.summary))  # (1: a frame, its summary empty)
        return got

    monkeypatch.setattr(engine, "_indexed_view", check)


def _walked(monkeypatch: pytest.MonkeyPatch, events: list[Event], policy: str, target: int | None,
            prev: Any = None) -> tuple[Any, Any, engine.CompactResult]:
    """The outcome with the index (each view checked), and with ``build_view`` walking."""
    seen: list[int] = []
    _checked_views(monkeypatch, seen)
    res = engine.compact(events, make_policy(policy), target, prev, session="s")
    monkeypatch.setattr(engine, "_indexed_view", lambda evs, ckpt, index: build_view(evs, ckpt))
    walked = _outcome(engine.compact(events, make_policy(policy), target, prev, session="s"))
    monkeypatch.undo()
    _FRAMES.append(sum(seen))
    return _outcome(res), walked, res


_FRAMES: list[int] = []


def _check(monkeypatch: pytest.MonkeyPatch, events: list[Event], targets: tuple[int | None, ...]) -> None:
    _checks(monkeypatch, events, ("default", "codex"), targets, set(), both=_walked)


def test_the_frames_are_build_views_on_generated_sessions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _FRAMES.clear()
    rng = random.Random(16)
    for _ in range(12):  # pinned events at the start and in the middle, pending and abandoned calls
        _check(monkeypatch, random_session(rng).events, (None, 300, 1_500))
    for _, events in synthetic_sessions(3, seed=16):
        _check(monkeypatch, events, (None, 2_000, 6_000))
    path = tmp_path / "small.jsonl"
    write_session(path, 3_000)
    _check(monkeypatch, import_file(path).events, (None, 20_000))
    assert sum(_FRAMES) > 50  # the ladder ran: frames were made and checked


def test_the_frames_are_build_views_on_fixture_sessions(monkeypatch: pytest.MonkeyPatch) -> None:
    for events in fixture_sessions():
        _check(monkeypatch, events, (None, 2_000))


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="corpus not present")
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_the_frames_are_build_views_on_corpus_sessions(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    _check(monkeypatch, import_file(path).events, (None, 8_000))
