"""A replacement layer's view is counted from the plan's count of the view before it, less the
tokens the layer freed (``engine.compact._DERIVE_VIEW_COUNT``, issue 17), instead of a walk of
the session: the outcome - view, checkpoint, and a record whose ``freed_by_layer`` and
``tokens_after`` hold those counts - is the one the walk gives, with late results, previous
checkpoints, pinned events and externalized results among them."""

from __future__ import annotations

from typing import Any

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.layers import LAYER_CLEAR, LAYER_EXTERNALIZE
from compactor.engine.policy import make_policy
from compactor.events import Event
from compactor.importers import import_file
from tests.conftest import corpus_files
from tests.unit.engine_fixtures import Conv
from tests.unit.test_engine_release import _outcome


def _both(monkeypatch: pytest.MonkeyPatch, events: list[Event], policy: str, target: int | None,
          prev: Any = None) -> tuple[Any, Any, engine.CompactResult]:
    res = engine.compact(events, make_policy(policy), target, prev, session="s")
    monkeypatch.setattr(engine, "_DERIVE_VIEW_COUNT", False)
    walked = _outcome(engine.compact(events, make_policy(policy), target, prev, session="s"))
    monkeypatch.setattr(engine, "_DERIVE_VIEW_COUNT", True)
    return _outcome(res), walked, res


def _late_session() -> list[Event]:
    """Tool rounds with results that arrive after the conversation moved on (shown as text)."""
    c = Conv()
    c.user("Fix the flaky tests in src/. Do not touch the CI config.")
    for i in range(40):
        c.call("Bash", {"command": f"pytest tests/test_{i}.py"}, f"{i} passed\n" * 30, text=f"Run {i}.")
        if i % 7 == 3:
            lost = c.use("Bash", {"command": f"sleep {i}"}, "Waiting.")
            c.user("ok, continue")
            c.say("Moving on while it runs.")
            c.result(lost, f"slept {i}\n" * 40)
    c.user("Now summarize what failed.")
    return c.events


def _checks(monkeypatch: pytest.MonkeyPatch, events: list[Event], policies: tuple[str, ...],
            targets: tuple[int | None, ...], layers: set[str], *, both: Any = None,
            chosen: list[list[str]] | None = None) -> None:
    """``both`` (default ``_both``) gives the outcome two ways for each policy and target, and
    for a compaction after the checkpoint made; they must be equal. ``layers``: gets the
    layers used; ``chosen``: each outcome's list of them."""
    both = both or _both
    for policy in policies:
        for target in targets:
            derived, walked, res = both(monkeypatch, events, policy, target)
            assert derived == walked
            outcomes = [derived]
            if res.checkpoint is not None and not res.checkpoint.covers.empty:
                later = [e for e in events if e.kind == "pinned" or e.seq > res.checkpoint.covers.end]
                derived2, walked2, _ = both(monkeypatch, later, policy, target, res.checkpoint)
                assert derived2 == walked2
                outcomes.append(derived2)
            for o in outcomes:
                layers.update(o[2]["layers"])
                if chosen is not None:
                    chosen.append(o[2]["layers"])


def test_the_derived_count_gives_the_walks_outcome(monkeypatch: pytest.MonkeyPatch) -> None:
    layers: set[str] = set()
    derived = 0
    for _, events in synthetic_sessions(3, seed=8):
        _checks(monkeypatch, events, ("default", "codex", "opencode"), (None, 2_000, 6_000), layers)
        shown: dict[str, int] = {}
        engine.plan(events, make_policy("default"), 2_000, None, _view=shown)
        derived += "tokens" in shown
    assert derived  # (else nothing was derived, and the comparison shows nothing)
    _checks(monkeypatch, _late_session(), ("default", "claude-code", "opencode"), (None, 1_500, 4_000), layers)
    assert {LAYER_CLEAR, LAYER_EXTERNALIZE, "summary"} <= layers


def test_a_view_with_late_results_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _late_session()
    shown: dict[str, int] = {}
    engine.plan(events, make_policy("default"), 1_500, None, _view=shown)
    assert shown == {}  # the late results' events are counted as text: no derived count
    events = [e for e in events if not (e.role == "user" and e.tool_results and e.seq > 1
                                        and "slept" in e.tool_results[0].text)]
    engine.plan(events, make_policy("default"), 1_500, None, _view=shown)
    assert shown["tokens"] > 1_500


@pytest.mark.corpus
@pytest.mark.skipif(not corpus_files(), reason="corpus not present")
def test_the_derived_count_gives_the_walks_outcome_on_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    layers: set[str] = set()
    for path in corpus_files():
        _checks(monkeypatch, import_file(path).events, ("default", "claude-code"), (None, 3_000), layers)
    assert LAYER_CLEAR in layers
