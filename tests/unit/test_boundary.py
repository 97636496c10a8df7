from compactor.engine.boundary import (
    abandoned_tool_uses,
    body,
    choose_cut,
    pending_tool_uses,
    safe_cut_points,
    safe_cut_points_both,
    tail_start,
)
from compactor.events import TextBlock
from compactor.engine.policy import make_policy
from compactor.tokens import count_event, with_tokens
from tests.unit.engine_fixtures import Conv, long_session

POLICY = make_policy("default")


def _first_after(events, k):
    return next(e for e in events if e.seq > k and e.kind != "pinned")


def test_never_separates_a_tool_use_from_its_result():
    c = Conv()
    c.user("go")
    tid = c.call("Bash", {"command": "ls"}, "a.py")
    c.user("next")
    safe = safe_cut_points(c.events)
    assert c.seq_of(tid) not in safe  # cutting right after the call would orphan its result
    assert c.seq_of(tid) + 1 in safe


def test_never_splits_a_parallel_batch():
    c = Conv()
    c.user("go")
    ids = c.batch([("Read", {"file_path": "a.py"}, "A"), ("Read", {"file_path": "b.py"}, "B"),
                   ("Read", {"file_path": "c.py"}, "C")])
    c.say("read all three")
    c.user("thanks")
    first = c.seq_of(ids[0])
    safe = safe_cut_points(c.events)
    assert not any(first <= k < first + 3 for k in safe)
    assert first + 3 in safe


def test_no_cut_at_or_after_a_pending_call():
    c = Conv()
    c.user("go")
    c.call("Bash", {"command": "ls"}, "a.py")
    c.say("now building")
    c.user("and hurry")
    pending = c.use("Bash", {"command": "make"})
    seq = c.seq_of(pending)
    assert pending_tool_uses(c.events) == {pending: seq}
    assert max(safe_cut_points(c.events, keep_latest_request=False)) < seq


def test_abandoned_call_may_be_covered():
    c = Conv()
    c.user("go")
    lost = c.use("Bash", {"command": "deploy.sh"})  # the agent moved on without a result
    c.say("the deploy did not report back; moving on")
    c.call("Bash", {"command": "ls"}, "a.py")
    c.user("status?")
    assert lost in abandoned_tool_uses(c.events)
    assert c.seq_of(lost) in safe_cut_points(c.events)


def test_cut_stays_before_the_latest_request():
    c = long_session(rounds=5)
    req = max(e.seq for e in c.events if e.is_user_request)
    assert max(safe_cut_points(c.events)) < req
    assert max(safe_cut_points(c.events, keep_latest_request=False)) > req


def test_pinned_events_are_not_cut_points_and_do_not_count():
    c = Conv()
    c.user("go")
    c.add("system", [TextBlock(text="x " * 5000)], kind="pinned")  # big pinned in the middle
    c.call("Bash", {"command": "ls"}, "a.py")
    c.user("more")
    safe = safe_cut_points(c.events)
    pinned = [e.seq for e in c.events if e.kind == "pinned"]
    assert not set(pinned) & set(safe)
    evs = with_tokens(c.events)
    # the big pinned event does not make the tail "full"
    assert tail_start(evs, 100) < 4


def test_first_event_after_any_safe_cut_can_follow_the_summary():
    c = long_session(rounds=6)
    c.batch([("Read", {"file_path": "a.py"}, "A"), ("Read", {"file_path": "b.py"}, "B")])
    c.user("last")
    for k in safe_cut_points(c.events):
        nxt = _first_after(c.events, k)
        assert not nxt.tool_results, f"cut {k} leaves a tool_result first"


def test_choose_cut_keeps_the_tail_within_budget_on_whole_pairs():
    c = long_session(rounds=20)
    evs = with_tokens(c.events)
    budget = 2_000
    k = choose_cut(evs, POLICY, budget, tail_min=0, min_text_messages=0)
    tail = [e for e in evs if e.seq > k and e.kind != "pinned"]
    assert 0 < sum(count_event(e) for e in tail) <= budget
    assert k in safe_cut_points(evs)


def test_choose_cut_grows_the_tail_to_min_text_messages():
    c = long_session(rounds=20, out_lines=5)
    evs = with_tokens(c.events)
    small = choose_cut(evs, POLICY, 50, tail_min=0, tail_max=10_000, min_text_messages=0)
    grown = choose_cut(evs, POLICY, 50, tail_min=0, tail_max=10_000, min_text_messages=8)
    assert grown < small
    texts = [e for e in evs if e.seq > grown and e.text.strip() and e.kind != "pinned"]
    assert len(texts) >= 8


def test_choose_cut_is_zero_when_everything_fits():
    c = long_session(rounds=2, out_lines=1)
    assert choose_cut(with_tokens(c.events), POLICY, 1_000_000) == 0


def test_opencode_cuts_on_a_user_message():
    c = long_session(rounds=20)
    evs = with_tokens(c.events)
    oc = make_policy("opencode")
    k = choose_cut(evs, oc, 2_000, keep_latest_request=False)
    nxt = _first_after(evs, k)
    assert nxt.role == "user" and not nxt.tool_results


def test_cut_respects_a_previous_checkpoint():
    c = long_session(rounds=10)
    assert min(safe_cut_points(c.events, prev_end=12)) > 12


def _naive_safe_cut_points(events, prev_end=0, keep_latest_request=True):
    """The definition, walked the slow way (the module's docstring)."""
    from compactor.engine.boundary import body, latest_request

    evs = body(events, prev_end)
    use_seq = {}
    for e in evs:
        for u in e.tool_uses:
            use_seq.setdefault(u.id, e.seq)
    last = {}
    for e in evs:
        for r in e.tool_results:
            if r.tool_use_id in use_seq:
                last[r.tool_use_id] = max(last.get(r.tool_use_id, 0), e.seq)
    pending = pending_tool_uses(events, prev_end)
    limit = evs[-1].seq if evs else 0
    if pending:
        limit = min(limit, min(pending.values()) - 1)
    req = latest_request(events, prev_end) if keep_latest_request else None
    if req is not None:
        limit = min(limit, req.seq - 1)
    return [e.seq for e in evs if e.seq <= limit
            and not any(use_seq[i] <= e.seq < t for i, t in last.items())]


def test_safe_cut_points_match_the_definition_on_random_sessions():
    """One walk (``safe_cut_points``) gives the cut points of the definition walked the slow
    way, with late results (a call answered after the conversation moved on), batches,
    abandoned and pending calls, pinned events, with and without a previous cut."""
    import random

    from tests.unit.engine_fixtures import random_session

    rng = random.Random(5)
    for trial in range(80):
        c = random_session(rng)
        if rng.random() < 0.5:  # a call answered only later
            tid = c.use("Bash", {"command": "slow"})
            c.user("meanwhile, continue")
            c.say("ok")
            c.result(tid, "finally")
        events = with_tokens(c.events)
        for keep in (True, False):
            for prev_end in (0, 3):
                assert safe_cut_points(events, prev_end, keep_latest_request=keep) == \
                    _naive_safe_cut_points(events, prev_end, keep), (trial, keep, prev_end)
        for prev_end in (0, 3):  # both lists in one walk (the engine's plan and ladder)
            naive = {keep: _naive_safe_cut_points(events, prev_end, keep) for keep in (True, False)}
            assert safe_cut_points_both(events, prev_end) == naive
            # the caller's body list (plan's) in place of the function's own walk
            assert safe_cut_points_both(events, prev_end, body_events=body(events, prev_end)) == naive
