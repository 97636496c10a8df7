"""While the summary ladder runs, the engine lets go of the replacements the candidates'
checkpoints do not show and of the replacement layers' candidate's checkpoint (issue 17,
memory: the cleared copy of nearly every event of a big session); that candidate's checkpoint
and view are made again if it is checked or chosen. The outcome is the one the engine gives
holding everything (``_RELEASE_COVERED`` off)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.invariants import Violation
from compactor.engine.layers import LAYER_CLEAR
from compactor.engine.policy import make_policy
from compactor.events import Event


def _outcome(res: engine.CompactResult) -> Any:
    record = res.record.model_dump(mode="json")
    record.pop("durations_ms")
    return ([e.model_dump(mode="json") for e in res.view],
            res.checkpoint.model_dump(mode="json") if res.checkpoint else None, record,
            {k: hashlib.sha256(v).hexdigest() for k, v in res.artifacts.items()})


def _both(monkeypatch: pytest.MonkeyPatch, events: list[Event], policy: str, target: int | None) -> tuple[Any, Any]:
    released = _outcome(engine.compact(events, make_policy(policy), target, session="s"))
    monkeypatch.setattr(engine, "_RELEASE_COVERED", False)
    held = _outcome(engine.compact(events, make_policy(policy), target, session="s"))
    monkeypatch.setattr(engine, "_RELEASE_COVERED", True)
    return released, held


def test_letting_go_of_the_covered_replacements_changes_no_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    layers: set[str] = set()
    for _, events in synthetic_sessions(3, seed=4):
        for policy in ("default", "codex"):
            for target in (None, 2_000, 6_000):
                released, held = _both(monkeypatch, events, policy, target)
                assert released == held
                layers.update(released[2]["layers"])
    assert {LAYER_CLEAR, "summary"} <= layers


def test_a_let_go_cleared_candidate_is_made_again_the_same_when_the_summary_loses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every summary candidate breaks an invariant here, so the engine checks the replacement
    layers' candidate after the ladder let go of its checkpoint, and returns it."""
    orig = engine.validate

    def summaries_fail(**kw: Any) -> list[Violation]:
        out = orig(**kw)
        if kw["checkpoint"] is not None and kw["checkpoint"].summary:
            out.append(Violation(code="unknown_identifier", message="forced", detail="zzz"))
        return out

    monkeypatch.setattr(engine, "validate", summaries_fail)
    events = next(iter(synthetic_sessions(1, seed=4)))[1]
    released, held = _both(monkeypatch, events, "default", 2_000)
    assert released == held
    assert released[2]["layers"][-1] == LAYER_CLEAR and released[1]["replacements"]
