"""Sweep pages, the head's token count, start decisions and one token measure everywhere."""

from __future__ import annotations

import asyncio

import pytest

from activities.contracts import PolicyRef, SweepInput
from activities.store_activities import StoreActivities
from compactor.engine.compact import compact
from compactor.engine.planning import plan
from compactor.errors import PolicyError
from compactor.events import Event, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from compactor.engine.measure import view_tokens
from compactor.engine.policy import PRESETS, make_policy, should_compact, start_decision
from compactor.store import LocalStore, SessionLog, list_sessions_page


def _turns(n: int, prefix: str = "e", words: int = 300) -> list[Event]:
    out = [Event(id=f"{prefix}-sys", kind="pinned", role="system", blocks=[TextBlock(text="Be careful.")]),
           Event(id=f"{prefix}-req", role="user", blocks=[TextBlock(text="Fix the parser. Do not touch tests.")])]
    for i in range(n):
        uid = f"toolu_{prefix}{i:04d}"
        out.append(Event(id=f"{prefix}-a{i}", role="assistant", blocks=[
            ThinkingBlock(thinking="let me think about module %d " % i * 40),
            TextBlock(text=f"Reading module {i}."),
            ToolUseBlock(id=uid, name="Bash", input={"command": f"cat src/m{i}.py"}),
        ]))
        out.append(Event(id=f"{prefix}-r{i}", role="user", blocks=[
            ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=" ".join(f"w{j}" for j in range(words)))])]))
    out.append(Event(id=f"{prefix}-last", role="user", blocks=[TextBlock(text="Now run the tests.")]))
    return [e.with_(seq=n) for n, e in enumerate(out, 1)]


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path / "store", fsync=False)


def test_token_counts_agree_across_head_plan_record_and_view(store):
    log = SessionLog(store, "t", "s")
    evs = _turns(30)
    log.append(evs[:20])
    log.append(evs[20:])
    view = log.read_view()
    n = view_tokens(view)
    assert log.head().view_tokens == n
    stored = log.read_events()
    policy = make_policy("default", window=24_000, max_output=4_000)
    assert plan(stored, policy, 3_000, None).tokens_before == n
    res = compact(stored, policy, 3_000, tenant="t", session="s")
    assert res.record.tokens_before == n
    assert res.record.tokens_after == view_tokens(res.view)
    thinking_free = [e.with_(blocks=[b for b in e.blocks if not isinstance(b, ThinkingBlock)], tokens=None)
                     for e in stored]
    assert view_tokens(thinking_free) == n


def test_sweep_pages_cover_every_session_once_and_skip_a_corrupt_one(store):
    for i in range(10):
        SessionLog(store, "t", f"s{i}").append(_turns(40 if i in (1, 7) else 1, prefix=f"x{i}"))
    store.put("t/t/s/s4/head.json", b"{broken")
    acts = StoreActivities(store)
    inp = SweepInput(tenant="t", policy=PolicyRef(window=24_000, max_output=4_000), page_size=3)
    seen, due, skipped, cursor = [], [], [], None
    while True:
        out = asyncio.run(acts.list_due_sessions(inp.model_copy(update={"cursor": cursor})))
        due += out.sessions
        skipped += [s.session for s in out.skipped]
        seen.append(out.scanned)
        assert out.objects_read <= out.scanned  # one head per session
        cursor = out.next_cursor
        if cursor is None:
            break
    assert sum(seen) == 10 and len(seen) == 4
    assert due == ["s1", "s7"] and skipped == ["s4"]


def test_session_pages_follow_key_order():
    st_names = ["abc", "abc-x", "abc.y", "abc0", "b"]

    class Fake:
        url = "mem://"

        def list(self, prefix):
            return sorted(f"{prefix}{n}/head.json" for n in st_names)

    page, nxt = list_sessions_page(Fake(), "t", None, 2)
    rest, end = list_sessions_page(Fake(), "t", nxt, 10)
    assert page + rest == ["abc-x", "abc.y", "abc", "abc0", "b"] and end is None


def test_noop_mark_holds_until_the_view_grows(store):
    log = SessionLog(store, "t", "s")
    log.append(_turns(3))
    v = log.head()
    assert log.mark_noop(v.version, 0).noop_view_tokens == v.view_tokens
    log.append([Event(id="more", role="assistant", blocks=[TextBlock(text="ok")])])
    head = log.head()
    assert head.noop_view_tokens == v.view_tokens  # appends keep the mark
    assert log.mark_noop(v.version, 0) is None  # a stale version marks nothing
    policy = make_policy("default", window=24_000, max_output=4_000)
    grown = head.view_tokens + 10_000
    assert start_decision(policy, "hard", head.view_tokens, target_tokens=1,
                          noop_view_tokens=head.noop_view_tokens) == "unshrinkable"
    assert start_decision(policy, "hard", grown, target_tokens=1, noop_view_tokens=head.noop_view_tokens) == "start"


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("window", [24_000, 40_000, 200_000])
def test_soft_trigger_never_starts_a_run_that_ends_noop(preset, window):
    """At the soft threshold the run's default target is below the view: the plan compacts."""
    try:
        policy = make_policy(preset, window=window, max_output=4_000)
    except PolicyError:
        pytest.skip(f"{preset} has no usable context at W={window}")
    assert policy.post_compact_tokens < policy.soft_tokens
    need = should_compact(policy, policy.soft_tokens)
    assert need in ("soft", "hard")
    assert start_decision(policy, need, policy.soft_tokens) == "start"
    # a caller's own target at or above the view: nothing is started
    assert start_decision(policy, need, policy.soft_tokens, target_tokens=policy.soft_tokens) == "within_target"


def test_plan_at_the_soft_threshold_is_not_noop():
    policy = make_policy("default", window=40_000, max_output=4_000)
    evs = _turns(60, words=200)
    n = view_tokens(evs)
    assert n >= policy.soft_tokens
    assert not plan(evs, policy, None, None).noop


class _FakeTemporal:
    def __init__(self) -> None:
        self.started: list[str] = []

    async def start_workflow(self, *a, **kw):  # pragma: no cover - must not be reached
        self.started.append(kw["id"])
        raise AssertionError("no compaction may start")


def test_ensure_budget_starts_nothing_for_a_marked_session(store):
    from compactor.client import CompactorClient

    log = SessionLog(store, "t", "s")
    log.append(_turns(60, words=200))
    head = log.head()
    log.mark_noop(head.version, 0)
    temporal = _FakeTemporal()
    cc = CompactorClient(temporal, store, tenant="t")  # type: ignore[arg-type]
    r = asyncio.run(cc.ensure_budget("s", 24_000, max_output=4_000))
    assert r.need == "hard" and r.action == "none" and r.reason == "unshrinkable"
    assert temporal.started == []
