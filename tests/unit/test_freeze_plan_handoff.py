"""freeze_snapshot hands what its plan learnt to the layers it runs next (``PlannedWork``), as
``engine.compact`` does inline: the same objects and outputs as the workflow's separate
externalize_finish step, on generated, synthetic, fixture and corpus sessions (first compaction
and one on top of a checkpoint), with one walk of the session for the safe cuts instead of two."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

import compactor.engine.compact as compact_mod
import compactor.engine.planning as planning_mod
from activities.contracts import (
    CommitInput,
    ExternalizeFinishInput,
    ExternalizeInput,
    FreezeInput,
    PlanInput,
    PolicyRef,
)
from activities.step_support import PlannedWork
from activities.store_activities import StoreActivities
from compactor.bench.perf import turns
from compactor.bench.synthetic import synthetic_sessions
from compactor.engine.measure import view_tokens
from compactor.store import SessionLog, open_store
from compactor.tokens import with_tokens
from tests.conftest import corpus_files, fixture_sessions

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _target(tokens: int) -> int:
    """15% of the view, as the benchmark's budget, without its 8,000-token floor: small sessions
    compact too."""
    return max(500, int(tokens * 0.15))


def _sessions() -> list[tuple[str, list[Any]]]:
    from compactor.importers import import_file

    out = [("generated", with_tokens(turns(20_000 // 440, prefix="g")))]
    out += [(f"synthetic{n}", evs) for n, (_, evs) in enumerate(synthetic_sessions(2, seed=5))]
    out += [(f"fixture{n}", evs) for n, evs in enumerate(fixture_sessions()[:4]) if evs]
    for path in corpus_files()[:4]:
        evs = import_file(path).events
        if evs:
            out.append((f"corpus:{path.name}", evs))
    return out


SESSIONS = _sessions()


async def _freeze(acts: StoreActivities, session: str, target: int, finish: bool) -> Any:
    pol = PolicyRef(target_tokens=target)
    return await acts.freeze_snapshot(FreezeInput(tenant="t1", session=session, plan_policy=pol, plan_model="m",
                                                  finish_now=NOW if finish else None))


async def _two_steps(acts: StoreActivities, session: str, target: int) -> tuple[Any, Any]:
    """freeze (plan only), then externalize_finish as its own step: what the workflow runs when
    freeze did not finish (no handoff: the layers prepare and walk the events themselves)."""
    snap = await _freeze(acts, session, target, finish=False)
    plan = snap.plan
    if plan is None or not plan.needed:
        return snap, None
    pre = plan.plan_key[: -len("plan.json")]
    ext_in = ExternalizeInput(snapshot=snap.model_copy(update={"plan": None}), policy=PolicyRef(target_tokens=target),
                              plan_key=plan.plan_key, layers_key=pre + "layers.json", now=NOW)
    return snap, await acts.externalize_finish(ExternalizeFinishInput(
        externalize=ext_in, prefix=pre, tenant="t1", session=session, tokens_before=plan.tokens_before))


def _outputs(store: Any, session: str, snap: Any, both: Any) -> tuple[Any, ...]:
    prefix = f"t/t1/s/{session}/"
    objs = {k[len(prefix):]: store.get(k)[0] for k in store.list(prefix)
            if not k[len(prefix):].startswith(("head", "ckpt/"))}
    fin = None if both is None else both.model_dump(exclude={
        "ms": True, "externalize": {"ms"},
        "finish": {"ms": True, "summarize_ms": True, "lift": {"ms"}, "check": {"ms"}}})
    return objs, snap.model_dump(exclude={"ms", "plan", "finished", "etag"}), fin


async def _run(tmp_path: Any, name: str, events: list[Any], mode: str, second: bool) -> tuple[Any, ...]:
    store = open_store(f"file://{tmp_path}/{mode}")
    log = SessionLog(store, "t1", "s1")
    log.append(events)
    target = _target(view_tokens(events))
    acts = StoreActivities(store)
    if second:  # one compaction committed (two steps, as the base tree), then more events
        snap, both = await _two_steps(acts, "s1", target)
        if both is not None and both.finish is not None and not both.finish.check.violations:
            await acts.commit_swap(CommitInput(snapshot=snap.model_copy(update={"plan": None}),
                                               policy=PolicyRef(target_tokens=target),
                                               candidate_key=both.finish.check.candidate_key))
        # (a tiny fixture has no valid first compaction: the session just grows, uncompacted)
        log.append([e.model_copy(update={"id": e.id + "-late", "seq": 0}) for e in events if e.kind != "pinned"])
        target = _target(log.view_size())
    if mode == "two":
        snap, both = await _two_steps(acts, "s1", target)
    else:
        snap = await _freeze(acts, "s1", target, finish=True)
        both = snap.finished
    return _outputs(store, "s1", snap, both)


@pytest.mark.parametrize("second", [False, True], ids=["first", "on-a-checkpoint"])
@pytest.mark.parametrize("name,events", SESSIONS, ids=[n for n, _ in SESSIONS])
async def test_freeze_with_the_plans_handoff_writes_what_the_separate_step_writes(tmp_path, name, events, second):
    """Work objects (plan, layers, state, summary, candidate), artifacts and every output the
    same, byte for byte, as freeze then externalize_finish (which plans nothing and hands nothing
    on): the checkpoint the run would commit is the one it committed before."""
    one = await _run(tmp_path, name, events, "one", second)
    two = await _run(tmp_path, name, events, "two", second)
    assert one == two
    if name == "generated" or name.startswith("synthetic"):
        assert one[2] is not None and one[2]["finish"] is not None  # (the layers and a summary ran)


async def test_freeze_walks_the_session_for_safe_cuts_once(tmp_path, monkeypatch):
    """The layers start from the plan's safe cut points and prepared events (one walk and one
    prepare of the session per compaction, as inline), not from their own."""
    walks: list[int] = []
    prepares: list[int] = []
    real_walk, real_prepare = compact_mod.safe_cut_points_both, compact_mod.prepare

    def walk(evs, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        walks.append(len(evs))
        return real_walk(evs, *a, **k)

    def prepare(evs, prev):  # noqa: ANN001, ANN202
        prepares.append(len(evs))
        return real_prepare(evs, prev)

    for mod in (compact_mod, planning_mod):  # (the plan's walk and the layers' own)
        monkeypatch.setattr(mod, "safe_cut_points_both", walk)
        monkeypatch.setattr(mod, "prepare", prepare)
    events = with_tokens(turns(20_000 // 440, prefix="g"))
    store = open_store(f"file://{tmp_path}")
    SessionLog(store, "t1", "s1").append(events)
    acts = StoreActivities(store)
    snap = await _freeze(acts, "s1", 4_000, finish=True)
    assert snap.finished is not None and snap.finished.finish is not None
    assert snap.finished.finish.check.violations == []
    assert len(walks) == 1
    assert len(prepares) == 1


def test_a_planned_work_serves_only_its_plan_and_previous_checkpoint():
    work = PlannedWork()
    assert not work.serves("", None)  # never planned
    work.plan_key, work.prev_id = "t/w/plan.json", "ck-1"
    assert work.serves("t/w/plan.json", "ck-1")
    assert not work.serves("t/x/plan.json", "ck-1")
    assert not work.serves("t/w/plan.json", None)
    assert not work.serves("t/w/plan.json", "ck-2")


async def test_externalize_with_another_sessions_planned_work_uses_its_own_events(tmp_path):
    """A PlannedWork made for another plan (another session's) is not used: the layers read and
    walk their own snapshot's events, and write what they write without it."""
    store = open_store(f"file://{tmp_path}")
    a = with_tokens(turns(20_000 // 440, prefix="a"))
    b = with_tokens(turns(12_000 // 440, prefix="b"))
    SessionLog(store, "t1", "a").append(a)
    SessionLog(store, "t1", "b").append(b)
    acts = StoreActivities(store)
    pol = PolicyRef(target_tokens=3_000)
    other = PlannedWork()
    snap_a = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="a", plan_policy=pol, plan_model="m"))
    assert snap_a.plan is not None
    acts._plan(PlanInput(snapshot=snap_a.model_copy(update={"plan": None}), policy=pol,
                         plan_key=snap_a.plan.plan_key), {"attempt": 1}, work=other)
    assert other.serves(snap_a.plan.plan_key, None)
    snap_b = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="b", plan_policy=pol, plan_model="m"))
    assert snap_b.plan is not None
    pre = snap_b.plan.plan_key[: -len("plan.json")]
    ext_in = ExternalizeInput(snapshot=snap_b.model_copy(update={"plan": None}), policy=pol,
                              plan_key=snap_b.plan.plan_key, layers_key=pre + "layers.json", now=NOW)
    with_other = acts._externalize(ext_in, {"attempt": 1}, other)
    layers_with_other = store.get(pre + "layers.json")[0]
    alone = acts._externalize(ext_in, {"attempt": 1})
    assert store.get(pre + "layers.json")[0] == layers_with_other
    assert with_other.model_dump(exclude={"ms"}) == alone.model_dump(exclude={"ms"})
    assert with_other.covers_end <= snap_b.version
