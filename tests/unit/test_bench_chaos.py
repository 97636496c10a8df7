"""The chaos harness's own checks: they must catch what they claim to catch."""

from __future__ import annotations

import random

from compactor.bench.chaos import plan_trials
from compactor.bench.chaos_world import Agent, chaos_session, log_problems, request_problems
from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.tokens import with_tokens
from compactor.engine.view import build_view


def _seq(events):
    return [e.with_(seq=i) for i, e in enumerate(events, 1)]


def _use(eid, uid):
    return Event(id=eid, role="assistant", blocks=[ToolUseBlock(id=uid, name="Bash", input={"command": "ls"})])


def _res(eid, uid):
    return Event(id=eid, role="user", blocks=[ToolResultBlock(tool_use_id=uid, content=[TextBlock(text="ok")])])


def _text(eid, role, text="hi"):
    return Event(id=eid, role=role, blocks=[TextBlock(text=text)])


def test_a_session_with_an_agent_appending_late_results_renders_valid_requests():
    rng = random.Random(3)
    events = chaos_session(rng, "p")
    agent = Agent(rng, "p")
    for _ in range(60):
        events += agent.step()
    events.append(agent.deploy_result())
    assert agent.late >= 2  # results for calls the agent had moved on from
    view = build_view(_seq(with_tokens(events)), None)
    assert request_problems(view) == []


def test_an_orphan_tool_result_is_reported():
    # A result whose call is two messages back, handed to the API as is (no place_results).
    raw = _seq([_text("u", "user"), _use("a", "toolu_1"), _text("t", "assistant", "moving on"),
                _text("u2", "user"), _text("a2", "assistant"), _res("late", "toolu_1")])
    problems = request_problems(raw)
    assert any("toolu_1" in p and "answers no call" in p for p in problems)
    # the view shows it as text where it arrived: valid
    assert request_problems(build_view(raw, None)) == []


def test_a_call_answered_twice_is_reported():
    twice = _seq([_text("u", "user"), _use("a", "toolu_1"), _res("r1", "toolu_1"), _res("r2", "toolu_1")])
    assert any("answered 2 times" in p for p in request_problems(twice))


def test_log_problems_counts_lost_duplicated_and_reordered_events():
    evs = _seq([_text(i, "user") for i in ["a", "b", "b", "d", "c"]])
    lp = log_problems(evs, ["a", "b", "c", "d", "e"], unconfirmed=set())
    assert lp["lost"] == ["e"] and lp["duplicated"] == ["b"] and lp["out_of_order"]
    ok = log_problems(_seq([_text(i, "user") for i in "abc"]), ["a", "b", "c"], set())
    assert ok == {"lost": [], "duplicated": [], "out_of_order": False, "seq_gap": False, "foreign": []}
    gap = [e.with_(seq=e.seq * 2) for e in _seq([_text("a", "user"), _text("b", "user")])]
    assert log_problems(gap, ["a", "b"], set())["seq_gap"]


def test_the_mix_has_every_kind_and_kill_point():
    specs = plan_trials(60, seed=1, s3=True)
    assert {s.kind for s in specs} == {"kill", "append", "s3"}
    assert {s.kill for s in specs if s.kind != "s3"} == {"random", "in-commit", "after-commit"}
    assert all(s.kill is None for s in specs if s.kind == "s3")
    assert {s.kind for s in plan_trials(10, seed=1, s3=False)} == {"kill", "append"}
