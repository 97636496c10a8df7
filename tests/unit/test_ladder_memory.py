"""What the summary ladder lets go of while it runs (issue 17, memory: 300k events in 500 MB)
changes no outcome: the artifacts only the released replacements showed (their bytes and
sha256 are made again with them when the replacement layers' candidate is checked or chosen),
and the validator's words seeded with the events' own call ids give the full search's verdict."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from compactor.bench.synthetic import synthetic_sessions
from compactor.engine import compact as engine
from compactor.engine.covered_text import CoveredText
from compactor.engine.layers import LAYER_CLEAR
from compactor.engine.policy import make_policy
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock


def _outcome(res: engine.CompactResult) -> Any:
    record = res.record.model_dump(mode="json")
    record.pop("durations_ms")
    return ([e.model_dump(mode="json") for e in res.view],
            res.checkpoint.model_dump(mode="json") if res.checkpoint else None, record,
            [(k, hashlib.sha256(v).hexdigest()) for k, v in res.artifacts.items()])


def _summary_checks(monkeypatch: pytest.MonkeyPatch, events: list[Event], target: int) -> tuple[Any, list[Any]]:
    """The outcome, and per summary candidate validated: (the artifacts it was checked against,
    those its checkpoint lists)."""
    seen: list[tuple[set[str], set[str]]] = []
    orig = engine.validate

    def spy(**kw: Any) -> Any:
        ck = kw["checkpoint"]
        if ck is not None and ck.summary:
            seen.append((set(kw["artifacts"] or ()), set(ck.artifacts)))
        return orig(**kw)

    monkeypatch.setattr(engine, "validate", spy)
    out = _outcome(engine.compact(events, make_policy("default"), target, session="s"))
    monkeypatch.setattr(engine, "validate", orig)
    return out, seen


def test_the_ladder_holds_only_the_artifacts_its_candidates_can_show(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = 0
    for _, events in synthetic_sessions(3, seed=4):
        released, seen = _summary_checks(monkeypatch, events, 2_000)
        monkeypatch.setattr(engine, "_RELEASE_COVERED", False)
        held, seen_held = _summary_checks(monkeypatch, events, 2_000)
        monkeypatch.setattr(engine, "_RELEASE_COVERED", True)
        assert released == held  # the same view, checkpoint, record and artifacts, in order
        if LAYER_CLEAR not in released[2]["layers"] or not seen:
            continue
        # the first rung (the shortest cut) is checked against what its checkpoint shows, no more;
        # the later ones (longer cuts) against that or less, none against a cleared event's copy
        # the summary covers - which the engine holding everything does hold
        first = seen[0][0]
        assert first == seen[0][1]
        assert all(listed <= arts <= first for arts, listed in seen)
        assert len(seen_held[0][0]) > len(first)
        checked += 1
    assert checked


def test_a_released_cleared_candidate_keeps_its_artifacts_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every summary candidate loses: the cleared candidate, let go of during the ladder, is
    made again with its artifacts, in the order the layers wrote them."""
    from compactor.engine.invariants import Violation

    repair = engine.repair_candidate

    def summaries_lose(*a: Any, **kw: Any) -> Any:  # (every summary candidate breaks an invariant)
        ckpt, view, n, vio, repaired = repair(*a, **kw)
        if ckpt.summary:
            vio = [*vio, Violation(code="unknown_identifier", message="forced", detail="zzz")]
        return ckpt, view, n, vio, repaired

    monkeypatch.setattr(engine, "repair_candidate", summaries_lose)
    events = next(iter(synthetic_sessions(1, seed=4)))[1]
    released = _outcome(engine.compact(events, make_policy("default"), 2_000, session="s"))
    monkeypatch.setattr(engine, "_RELEASE_COVERED", False)
    held = _outcome(engine.compact(events, make_policy("default"), 2_000, session="s"))
    assert released == held
    assert released[2]["layers"][-1] == LAYER_CLEAR and released[3]


def _call(seq: int, use_id: str, command: str, out: str) -> list[Event]:
    return [Event(seq=seq, id=f"a{seq}", kind="message", role="assistant",
                  blocks=[TextBlock(text=f"running {command}"),
                          ToolUseBlock(id=use_id, name="Bash", input={"command": command})]),
            Event(seq=seq + 1, id=f"r{seq}", kind="message", role="user",
                  blocks=[ToolResultBlock(tool_use_id=use_id, content=[TextBlock(text=out)])])]


def test_the_words_seeded_with_the_call_ids_give_the_full_searchs_verdict() -> None:
    ids = ["toolu_01abcdef", "call 7 with spaces", "fc_x", "toolu_01abcdef_2"]
    evs = [e for k, i in enumerate(ids) for e in _call(2 * k + 1, i, f"cat src/m{k}.py", f"ok {k}")]
    texts = [b.text for e in evs for b in e.blocks if isinstance(b, TextBlock)]
    texts += [u.id for e in evs for u in e.tool_uses] + [r.tool_use_id for e in evs for r in e.tool_results]
    texts += [u.input["command"] for e in evs for u in e.tool_uses] + ["Bash"]
    asked = [*ids, "call 7", "7 with", "spaces", "toolu_01abc", "src/m1.py", "cat src/m2.py",
             "toolu_01abcdef_3", "call 8", "with  spaces", "fc_y", "m3.py"]
    index = CoveredText(evs)
    for ident in asked:
        want = any(ident in t for t in texts)
        assert index.occurs_in_calls(ident) is want, ident
        assert index.occurs(ident) is want, ident
