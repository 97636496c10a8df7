"""The engine's plan hands what its walk for the safe cuts learnt of the calls (the last result
of each call, where the calls are) to the validator's index (``CoveredText.take_calls``), and
the ladder reads the index's prefix sums (issue 17). The outcome is the one of the path that
shares nothing - ``plan`` then ``apply_layers`` called on their own, as the durable workflow
calls them - on generated, fixture and corpus sessions. (The engine's cuts never split a call,
so a wrong call fact changes no outcome here: ``test_covered_text`` checks them at every 5th
cut.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compactor.bench.scale import write_session
from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.covered_text import CoveredText
from compactor.engine.policy import make_policy
from compactor.events import Event
from compactor.importers import import_file
from tests.conftest import corpus_files


def _sessions(tmp: Path) -> list[list[Event]]:
    small = tmp / "small.jsonl"
    write_session(small, 1_500)
    out = [evs for _, evs in synthetic_sessions(3, seed=5)]
    out += [import_file(p).events for p in [small, *corpus_files()[:4]]]
    return out


def _chosen(view: list[Event], ckpt: Any, violations: list[Any]) -> Any:
    return ([e.model_dump(mode="json") for e in view], ckpt.model_dump(mode="json") if ckpt else None,
            [str(v) for v in violations])


def test_shared_walks_change_no_outcome(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[bool] = []
    take = CoveredText.take_calls

    def spy(self: CoveredText, prev_end: int, calls: dict[str, Any] | None) -> None:
        take(self, prev_end, calls)
        taken.append(("call_facts", prev_end) in self._memo)

    monkeypatch.setattr(CoveredText, "take_calls", spy)
    compared = 0
    for events in _sessions(tmp_path):
        for name, target in (("default", None), ("default", 3_000), ("codex", 6_000)):
            policy = make_policy(name)
            got = engine.compact(events, policy, target, session="s")
            if got.checkpoint is None:
                continue  # a no-op: nothing chosen to compare
            p = engine.plan(events, policy, target, None)
            alone = engine.apply_layers(events, p, policy, session="s")
            assert _chosen(got.view, got.checkpoint, got.record.violations) == \
                _chosen(alone.view, alone.checkpoint, alone.violations), name
            compared += 1
    assert compared >= 8 and any(taken) and not all(taken)  # shared by compact, not by the split path
