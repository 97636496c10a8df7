"""One lifting pass per compaction: ``Lifter`` extends one accumulator over the shrink ladder's
cuts, and the engine's views, checkpoints and records are the same as with a fresh lift per
candidate (the code path before ``Lifter``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from compactor.bench.scale import small_session_lines
from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.boundary import body, safe_cut_points
from compactor.engine.compact import compact
from compactor.engine.measure import render_request, view_tokens
from compactor.engine.policy import make_policy
from compactor.events import Event
from compactor.lifting import lift
from compactor.lifting.lift import Lifter, lift_state
from tests.conftest import corpus_files


def _sessions() -> list[tuple[str, list[Event]]]:
    return list(synthetic_sessions(4, seed=3))


def _small(tmp_path: Path, n: int) -> list[Event]:
    from compactor.importers import import_file

    f = tmp_path / "small.jsonl"
    f.write_text("".join(ln + "\n" for ln in small_session_lines(n)))
    return import_file(f).events


def _fresh(events: list[Event], cut: int, prev: lift.LiftedState | None = None) -> lift.LiftedState:
    return lift_state([e for e in events if e.seq <= cut], prev)


@pytest.mark.parametrize("order", ["ascending", "descending", "shuffled"])
def test_state_at_each_cut_is_the_lift_of_that_prefix(order: str) -> None:
    for name, events in _sessions()[:2]:
        evs = body(events)
        # every 7th seq: safe cuts and cuts between a call and its result (a result the cut
        # leaves out makes the call unknown at that cut, and not at a later one)
        cuts = sorted({e.seq for e in evs[::7]} | {evs[-1].seq})
        if order == "descending":
            cuts.reverse()
        elif order == "shuffled":
            random.Random(1).shuffle(cuts)
        lifter = Lifter(evs)
        for cut in cuts:
            assert lifter.state_at(cut) == _fresh(evs, cut), (name, cut)
        if order == "ascending":
            # safe cuts only: one pass over the whole ladder, however many cuts
            safe = Lifter(evs)
            for cut in safe_cut_points(evs)[::5]:
                assert safe.state_at(cut) == _fresh(evs, cut)
            assert safe.passes == 1


def test_state_at_on_top_of_a_previous_state() -> None:
    _, events = _sessions()[0]
    evs = body(events)
    mid = evs[len(evs) // 2].seq
    prev = _fresh(evs, mid)
    rest = [e for e in evs if e.seq > mid]
    lifter = Lifter(rest, prev)
    for cut in [e.seq for e in rest[::5]]:
        assert lifter.state_at(cut) == lift_state([e for e in rest if e.seq <= cut], prev)


def test_a_snapshot_does_not_close_the_turn_in_progress() -> None:
    """The turn's closing report is taken when the next request arrives; a snapshot between
    two assistant messages of the same turn must not keep the first one."""
    _, events = _sessions()[1]
    evs = body(events)
    lifter = Lifter(evs)
    for e in evs:
        if e.role == "assistant":
            lifter.state_at(e.seq)
    assert lifter.state_at(evs[-1].seq) == _fresh(evs, evs[-1].seq)


def _outcome(res) -> tuple:
    rec = res.record.model_dump(mode="json")
    rec.pop("durations_ms")
    ck = res.checkpoint.model_dump(mode="json") if res.checkpoint else None
    return render_request(res.view), ck, rec


def _fresh_lift_per_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine as it was before ``Lifter``: each candidate lifts its covered range anew."""
    orig = Lifter.state_at

    def state_at(self: Lifter, cut: int | None, *, final: bool = False) -> lift.LiftedState:
        fresh = Lifter([e for e in self._evs if cut is None or e.seq <= cut], self._prev)
        return orig(fresh, None, final=True)

    monkeypatch.setattr(Lifter, "state_at", state_at)


def _both_paths(events: list[Event], monkeypatch: pytest.MonkeyPatch, policies=("default", "codex"),
                ratios=(0.4, 0.15, 0.05), old_path=None) -> int:
    """Compactions (and a second one on top) with the engine as it is and as ``old_path``
    (default: a fresh lift per candidate) makes it; their outcomes must be identical."""
    old_path = old_path or _fresh_lift_per_candidate
    compared = 0
    total = view_tokens(events)
    for preset in policies:
        policy = make_policy(preset)
        for ratio in ratios:
            target = max(1_000, int(total * ratio))
            new = compact(events, policy, target, session="s")
            with monkeypatch.context() as m:
                old_path(m)
                old = compact(events, policy, target, session="s")
            assert _outcome(new) == _outcome(old), (preset, ratio)
            compared += 1
            if new.checkpoint is not None:  # the next compaction, on top of this one
                end = new.checkpoint.covers.end
                more = [e for e in events if e.seq > end or e.kind == "pinned"]
                t2 = max(800, int(target * 0.6))
                new2 = compact(more, policy, t2, new.checkpoint, session="s")
                with monkeypatch.context() as m:
                    old_path(m)
                    old2 = compact(more, policy, t2, new.checkpoint, session="s")
                assert _outcome(new2) == _outcome(old2), (preset, ratio, "second")
    return compared


def test_engine_views_are_the_same_with_one_pass_synthetic(monkeypatch: pytest.MonkeyPatch) -> None:
    for _, events in _sessions():
        assert _both_paths(events, monkeypatch)


def test_engine_views_are_the_same_with_one_pass_small_events(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert _both_paths(_small(tmp_path, 1_500), monkeypatch, policies=("default",), ratios=(0.15,))


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_engine_views_are_the_same_with_one_pass_corpus(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compactor.importers import import_file

    assert _both_paths(import_file(path).events, monkeypatch, policies=("default",), ratios=(0.15, 0.05))


def test_the_ladder_lifts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction that tries several summary candidates makes one lifting pass for all."""
    lifters: list[Lifter] = []
    orig = Lifter.__init__

    def init(self: Lifter, *a, **k) -> None:
        orig(self, *a, **k)
        lifters.append(self)

    monkeypatch.setattr(Lifter, "__init__", init)
    several = 0
    for _, events in _sessions():
        for target in (3_000, 1_000):
            lifters.clear()
            res = compact(events, make_policy("default"), target, session="s")
            if res.record.status == "committed" and "summary" in res.record.layers:
                assert len(lifters) == 1
                assert lifters[0].passes == 1
                several += _candidates(events, target) > 1
    assert several, "no session tried more than one summary candidate"


def _candidates(events: list[Event], target: int) -> int:
    from compactor.engine.compact import apply_layers
    from compactor.engine.planning import plan

    policy = make_policy("default")
    return apply_layers(events, plan(events, policy, target, None), policy).candidates


def _without_shared_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine as it was before issue 17's second round: every candidate searched the whole
    session for its checks (no ``CoveredText``) and was validated at once (no lazy verdict)."""
    from compactor.engine import compact as engine
    from compactor.engine.candidates import Candidate

    monkeypatch.setattr(engine, "CoveredText", lambda events, **kw: None)
    monkeypatch.setattr(Candidate, "fits", property(lambda self: not self.violations))


def test_views_are_byte_identical_with_checks_shared_across_candidates(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Validation that reuses what earlier candidates learned (identifier index, answered
    calls, artifact refs, a lazy verdict for the cleared view) gives the same views,
    checkpoints and records as checking every candidate from scratch."""
    sessions = [events for _, events in _sessions()] + [_small(tmp_path, 1_500)]
    assert sum(_both_paths(ev, monkeypatch, old_path=_without_shared_work) for ev in sessions) >= 30


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_views_are_byte_identical_with_checks_shared_corpus(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compactor.importers import import_file

    assert _both_paths(import_file(path).events, monkeypatch, ratios=(0.15, 0.05), old_path=_without_shared_work)


def _plain_render(monkeypatch: pytest.MonkeyPatch) -> None:
    """The structured summary rendered as before issue 17's third round: the whole state
    rendered and counted first, every full text tokenized whole."""
    from compactor.summarize import structured
    from compactor.tokens import count_text

    monkeypatch.setattr(structured, "_min_tokens", lambda doc, sections, limit=None: 0)
    monkeypatch.setattr(structured, "count_lines", count_text)


def _before_round_three(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain render, and the shrink ladder computing its safe cut points again instead of
    taking plan's."""
    from compactor.engine import compact as engine

    _plain_render(monkeypatch)
    orig = engine.plan
    monkeypatch.setattr(engine, "plan", lambda *a, _safe=None, **k: orig(*a, **k))


def test_views_are_byte_identical_with_the_summary_rendered_in_proportion(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Skipping the render of a state whose lists alone exceed the budget, counting the
    summary line by line and handing plan's safe cut points to the ladder give the same
    views, checkpoints and records."""
    sessions = [events for _, events in _sessions()] + [_small(tmp_path, 1_500)]
    assert sum(_both_paths(ev, monkeypatch, old_path=_before_round_three) for ev in sessions) >= 30


def test_the_summary_of_a_long_session_is_the_same_rendered_in_proportion(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from compactor.summarize.structured import render_summary

    state = lift_state(_small(tmp_path, 4_000))
    assert len(state.commands) > 1_500
    for budget in (200, 1_000, 2_500, 6_000, 40_000, 200_000):
        for latest_full in (False, True):
            new = render_summary(state, budget, latest_full=latest_full)
            with monkeypatch.context() as m:
                _plain_render(m)
                old = render_summary(state, budget, latest_full=latest_full)
            assert new == old, budget


def _whole_state_per_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine as it was before issue 17's fifth round: every ladder candidate's checkpoint
    held its whole lifted state (a JSON dump of every command and file per candidate)."""
    from compactor.engine import compact as engine

    monkeypatch.setattr(engine, "_CHECKED_STATE", None)


def test_views_are_byte_identical_with_the_whole_state_dumped_for_the_picked_candidate_only(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Candidates checked with the few state fields the checks read, and the whole state
    dumped once for the one picked, give the same views, checkpoints (state included) and
    records as a whole state per candidate."""
    sessions = [events for _, events in _sessions()] + [_small(tmp_path, 1_500)]
    assert sum(_both_paths(ev, monkeypatch, old_path=_whole_state_per_candidate) for ev in sessions) >= 30
    res = compact(sessions[0], make_policy("default"), 1_000, session="s")
    assert res.checkpoint is not None and set(res.checkpoint.state) == set(lift.LiftedState.model_fields)
