"""StoreActivities called directly (no Temporal): the steps compose to the inline engine's
result, and commit_swap's compare-and-swap / merge / idempotency rules hold."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
import time
from datetime import datetime, timezone
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.contracts import (
    CommitInput,
    ErrorType,
    ExternalizeInput,
    FreezeInput,
    LiftInput,
    PlanInput,
    PolicyRef,
    SummarizeInput,
    ValidateInput,
)
from activities.store_activities import StoreActivities
from compactor.engine.compact import compact
from compactor.events import Event, TextBlock, ToolResultBlock
from compactor.engine.invariants import check_tool_pairing
from compactor.engine.measure import render_request
from compactor.engine.policy import make_policy
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session

TARGET = 4_000


async def _candidate(acts: StoreActivities, tenant: str, session: str):
    """Run every step up to validate; return (snapshot, policy, validate output)."""
    snap = await acts.freeze_snapshot(FreezeInput(tenant=tenant, session=session))
    pol = PolicyRef(target_tokens=TARGET)
    pre = f"t/{tenant}/s/{session}/work/test/"
    plan = await acts.plan_compaction(PlanInput(snapshot=snap, policy=pol, plan_key=pre + "plan.json"))
    assert plan.needed
    ext = await acts.externalize(ExternalizeInput(snapshot=snap, policy=pol, plan_key=plan.plan_key,
                                                  layers_key=pre + "layers.json"))
    lift = await acts.lift_state(LiftInput(snapshot=snap, covers_end=ext.covers_end, layers_key=ext.layers_key,
                                           state_key=pre + "state.json", prev_checkpoint=snap.checkpoint))
    summ = await acts.summarize_structured(SummarizeInput(
        tenant=tenant, session=session, snapshot_version=snap.version, covers_end=ext.covers_end,
        prev_checkpoint=snap.checkpoint, state_key=lift.state_key, budget_tokens=ext.summary_budget,
        model="structured", mode="template", output_key=pre + "summary.json"))
    val = await acts.validate_candidate(ValidateInput(
        snapshot=snap, policy=pol, plan_key=plan.plan_key, layers_key=ext.layers_key,
        state_key=lift.state_key, summary_key=summ.output_key, candidate_key=pre + "candidate.json",
        covers_end=ext.covers_end))
    assert val.violations == []
    return snap, pol, val


@pytest.fixture
def setup(tmp_path):
    store = open_store(f"file://{tmp_path}")
    log = SessionLog(store, "t1", "s1")
    log.append(coding_session())
    return StoreActivities(store), store, log


async def test_steps_compose_to_the_inline_result(setup):
    acts, store, log = setup
    snap, pol, val = await _candidate(acts, "t1", "s1")
    out = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    inline = compact(log.read_events(), make_policy("default"), TARGET, tenant="t1", session="s1")
    assert out.checkpoint_id == inline.checkpoint.id and out.conflicts_merged == 0
    assert [e.model_dump() for e in log.read_view()] == [e.model_dump() for e in inline.view]
    # the head and the commit's output (hence the record) hold the stored checkpoint's digest
    stored = store.get(f"t/t1/s/s1/ckpt/{out.checkpoint_id}.json")[0]
    assert out.checkpoint_sha256 == log.head().checkpoint_sha256 == hashlib.sha256(stored).hexdigest()
    # a retried commit (reply lost) finds its own swap and changes nothing
    again = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert again.checkpoint_id == out.checkpoint_id and log.head().checkpoint == out.checkpoint_id


async def test_moved_head_is_merged_and_late_result_reconciled(setup):
    acts, store, log = setup
    snap, pol, val = await _candidate(acts, "t1", "s1")
    log.append([Event(id="late", role="user", blocks=[
        ToolResultBlock(tool_use_id="toolu_efinal01", content=[TextBlock(text="ok")]),
        ToolResultBlock(tool_use_id="toolu_edeploy01", content=[TextBlock(text="deployed, exit 0")]),
    ])])
    out = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert out.conflicts_merged == 1 and out.reconciled == ["toolu_edeploy01"]
    assert out.committed_version == snap.version + 1 and out.tokens_after > 0
    view = log.read_view()
    assert view[-1].id == "late" and sum(e.id == "late" for e in view) == 1


async def test_bounded_merges_and_changed_snapshot_leave_the_head_alone(setup):
    acts, store, log = setup
    snap, pol, val = await _candidate(acts, "t1", "s1")
    log.append([Event(id="more", role="assistant", blocks=[TextBlock(text="still working")])])
    before = log.head()
    with pytest.raises(ApplicationError) as info:
        await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key,
                                           max_merges=0))
    assert info.value.type == ErrorType.CONFLICT_RETRIES_EXHAUSTED and info.value.non_retryable
    assert log.head().etag == before.etag
    # another compaction (or a rollback) committed meanwhile: this one must not overwrite it
    other = log.read_checkpoint(val.checkpoint_id).model_copy(update={"id": "ck-other"})
    log.write_checkpoint(other)
    log.set_checkpoint("ck-other", expected_etag=None)
    with pytest.raises(ApplicationError) as info:
        await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert info.value.type == ErrorType.SNAPSHOT_CHANGED
    assert log.head().checkpoint == "ck-other"


# --- exactly once per run, late results, merges that land ----------------------------------------


def _env(run: str) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_run_id=run)
    return env


async def test_a_run_executed_again_after_its_commit_reports_that_commit(setup):
    acts, store, log = setup
    run_a = _env("run-a")
    snap, pol, val = await _candidate(acts, "t1", "s1")
    out = await run_a.run(acts.commit_swap, CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert log.head().checkpoint_run == "run-a"
    log.append([Event(id="after", role="assistant", blocks=[TextBlock(text="continuing")])])
    assert log.head().checkpoint_run == "run-a"  # appends keep who committed
    # the whole workflow task re-runs: freeze finds the run's own commit instead of a new snapshot
    again = await run_a.run(acts.freeze_snapshot, FreezeInput(tenant="t1", session="s1"))
    own = again.own_commit
    assert own is not None and own.checkpoint == out.checkpoint_id == log.head().checkpoint
    assert own.checkpoint_sha256 == log.head().checkpoint_sha256 and own.record is None
    assert own.tokens_before > own.tokens_after > 0
    # a replayed commit_swap (earlier steps recorded, the swap not) succeeds on its own commit
    ckpts = store.list("t/t1/s/s1/ckpt/")
    redo = await run_a.run(acts.commit_swap, CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert redo.checkpoint_id == out.checkpoint_id and store.list("t/t1/s/s1/ckpt/") == ckpts
    # another run sees an ordinary snapshot
    other = await _env("run-b").run(acts.freeze_snapshot, FreezeInput(tenant="t1", session="s1"))
    assert other.own_commit is None


async def test_a_merged_commit_is_found_by_its_run_too(setup):
    acts, store, log = setup
    run_a = _env("run-a")
    snap, pol, val = await _candidate(acts, "t1", "s1")
    log.append([Event(id="more", role="assistant", blocks=[TextBlock(text="still working")])])
    out = await run_a.run(acts.commit_swap, CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert out.conflicts_merged == 1
    log.append([Event(id="more2", role="assistant", blocks=[TextBlock(text="and more")])])
    redo = await run_a.run(acts.commit_swap, CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert redo.checkpoint_id == out.checkpoint_id == log.head().checkpoint


async def test_a_late_result_of_a_tail_call_merges_and_the_view_stays_valid(tmp_path):
    store = open_store(f"file://{tmp_path}")
    log = SessionLog(store, "t1", "s1")
    log.append(coding_session())  # ends with a pending call toolu_efinal01
    log.append([Event(id="moved-on", role="user", blocks=[TextBlock(text="Meanwhile, which branch is this?")]),
                Event(id="reply", role="assistant", blocks=[TextBlock(text="main")])])
    acts = StoreActivities(store)
    snap, pol, val = await _candidate(acts, "t1", "s1")
    log.append([Event(id="late", role="user", blocks=[
        ToolResultBlock(tool_use_id="toolu_efinal01", content=[TextBlock(text="12 passed")])])])
    out = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert out.conflicts_merged == 1 and log.head().checkpoint == out.checkpoint_id
    view = log.read_view()
    assert check_tool_pairing(log.read_events(), view) == []
    _, messages = render_request(view)
    for i, m in enumerate(messages):
        asked = {b["id"] for b in messages[i - 1]["content"] if b["type"] == "tool_use"} if i else set()
        assert {b["tool_use_id"] for b in m["content"] if b["type"] == "tool_result"} <= asked
    assert "12 passed" in next(e for e in view if e.id == "late").text


class _SlowStore:
    """An object store whose every request takes ``delay`` seconds (a slow S3)."""

    def __init__(self, inner, delay: float) -> None:
        self._inner, self._delay = inner, delay

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name not in ("get", "put", "head", "list", "delete"):
            return attr

        def slow(*a, **kw):
            time.sleep(self._delay)
            return attr(*a, **kw)

        return slow


async def test_merges_land_under_steady_appends(tmp_path):
    # An agent appends every 20 ms on a store taking 5 ms a request (a merge used to re-run
    # the whole validation and never caught up): every compaction must land.
    store = _SlowStore(open_store(f"file://{tmp_path}"), 0.005)
    landed, merges = 0, []
    for n in range(4):
        session = f"s{n}"
        SessionLog(store, "t1", session).append(coding_session())
        acts = StoreActivities(store)
        snap, pol, val = await _candidate(acts, "t1", session)
        stop = threading.Event()

        def agent(session=session):
            log = SessionLog(store, "t1", session)
            i = 0
            while not stop.is_set():
                i += 1
                log.append([Event(id=f"a{i}", role="assistant", blocks=[TextBlock(text=f"step {i}")])])
                time.sleep(0.02)

        th = threading.Thread(target=agent)
        th.start()
        try:
            await asyncio.sleep(0.1)  # the head moved a few times since the snapshot
            out = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key,
                                                     max_merges=5))
            landed += 1
            merges.append(out.conflicts_merged)
        finally:
            stop.set()
            th.join()
        assert SessionLog(store, "t1", session).head().checkpoint == out.checkpoint_id
    assert landed == 4 and max(merges) >= 1


class _MovingHead:
    """A store on which an agent appends one event right before each of the next ``moves``
    conditional head writes of the compaction: every CAS of commit_swap loses once more."""

    def __init__(self, inner, tenant: str, session: str, moves: int) -> None:
        self._inner, self.moves = inner, moves
        self._agent = SessionLog(inner, tenant, session)
        self._n = 0

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def put(self, key, data, **kw):
        if key.endswith("head.json") and kw.get("if_match") and self.moves > 0:
            self.moves -= 1
            self._n += 1
            self._agent.append([Event(id=f"mv{self._n}", role="assistant", blocks=[TextBlock(text=f"step {self._n}")])])
        return self._inner.put(key, data, **kw)


async def test_a_compaction_lands_by_default_when_the_head_moved_more_than_five_times(tmp_path):
    # bench chaos (appends every 100 ms, S3 with faults): 6 of 53 compactions ended
    # ConflictRetriesExhausted after 5 merges in 2.5-6 s; a merge is cheap now, so the default
    # bound leaves room for a busy agent.
    inner = open_store(f"file://{tmp_path}")
    for session, max_merges in (("s1", None), ("s2", 5)):
        SessionLog(inner, "t1", session).append(coding_session())
        store = _MovingHead(inner, "t1", session, moves=8)
        acts = StoreActivities(store)
        snap, pol, val = await _candidate(acts, "t1", session)
        inp = CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key)
        if max_merges is None:
            out = await acts.commit_swap(inp)
            head = SessionLog(inner, "t1", session).head()
            assert out.conflicts_merged == 8 and head.checkpoint == out.checkpoint_id
            assert [e.id for e in SessionLog(inner, "t1", session).read_events()][-8:] == [f"mv{i}" for i in range(1, 9)]
        else:
            with pytest.raises(ApplicationError) as exc:
                await acts.commit_swap(inp.model_copy(update={"max_merges": max_merges}))
            assert exc.value.type == "ConflictRetriesExhausted"
            assert SessionLog(inner, "t1", session).head().checkpoint is None


async def test_a_re_executed_run_records_its_outcome_over_the_lost_executions_noop(tmp_path):
    # bench chaos (seed 912090744): a worker killed after it planned noop and wrote the noop
    # record; the re-executed run froze a newer snapshot and committed. The record must say
    # committed (as the result and the head do); a committed record is never replaced.
    from activities.contracts import RecordInput
    from compactor.records import CompactionRecord

    store = open_store(f"file://{tmp_path}")
    SessionLog(store, "t1", "s1").append(coding_session())
    acts = StoreActivities(store)
    base = CompactionRecord(id="run-1", tenant="t1", session="s1", workflow_id="compact/t1/s1",
                            trigger="manual", policy="default", summarizer="structured", status="noop")
    committed = base.model_copy(update={"status": "committed", "checkpoint": "ck-1"})
    await acts.write_record(RecordInput(record=base))
    await acts.write_record(RecordInput(record=committed))
    [rec] = SessionLog(store, "t1", "s1").list_records()
    assert (rec.status, rec.checkpoint) == ("committed", "ck-1") and rec.sha256
    await acts.write_record(RecordInput(record=base.model_copy(update={"status": "failed"})))
    [rec] = SessionLog(store, "t1", "s1").list_records()
    assert rec.status == "committed"


async def test_only_work_objects_skip_fsync_and_a_torn_one_fails_clearly(tmp_path, monkeypatch):
    """Per-run work objects are written without fsync (re-made by re-running their step);
    the checkpoint, head and record a commit leaves behind are still flushed. A work object
    torn by a host crash fails the run before its commit, non-retryable, session unchanged."""
    import os

    store = open_store(f"file://{tmp_path}")
    SessionLog(store, "t1", "s1").append(coding_session())
    acts = StoreActivities(store)
    synced: list[str] = []
    real_put = type(store).put

    def put(self, key, data, **kw):
        if self.fsync:
            synced.append(key)
        return real_put(self, key, data, **kw)

    monkeypatch.setattr(type(store), "put", put)
    snap, pol, val = await _candidate(acts, "t1", "s1")
    await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    assert store.fsync  # the worker's store itself is unchanged
    assert not [k for k in synced if "/work/" in k]
    assert [k for k in synced if "/ckpt/" in k] and "t/t1/s/s1/head.json" in synced

    head = SessionLog(store, "t1", "s1").head()
    key = "t/t1/s/s1/work/test2/plan.json"
    await acts.plan_compaction(PlanInput(snapshot=snap, policy=pol, plan_key=key))
    path = os.path.join(tmp_path, key)
    with open(path, "r+b") as f:
        f.truncate(10)
    with pytest.raises(ApplicationError) as err:
        await acts.externalize(ExternalizeInput(snapshot=snap, policy=pol, plan_key=key,
                                                layers_key="t/t1/s/s1/work/test2/layers.json"))
    assert err.value.type == str(ErrorType.NOT_FOUND) and err.value.non_retryable
    assert "damaged" in str(err.value) and "plan.json" in str(err.value)
    assert SessionLog(store, "t1", "s1").head() == head


async def _objects(store, prefix: str) -> dict[str, bytes]:
    return {k[len(prefix):]: store.get(k)[0] for k in store.list(prefix)}


async def _session(url: str, second: bool) -> tuple[Any, StoreActivities]:
    """A store holding session t1/s1 (``coding_session``) and its activities; with ``second``,
    one compaction committed and a later turn appended, so the next one builds on a checkpoint."""
    store = open_store(url)
    log = SessionLog(store, "t1", "s1")
    log.append(coding_session())
    acts = StoreActivities(store)
    if second:
        snap, pol, val = await _candidate(acts, "t1", "s1")
        await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
        log.append([e for e in coding_session(prefix="late", pending_last=False) if e.kind != "pinned"])
    return store, acts


async def _planned(url: str, second: bool) -> tuple[Any, StoreActivities, Any, PolicyRef, str, Any]:
    """``_session``, frozen and planned: store, activities, snapshot, policy, work prefix, plan."""
    store, acts = await _session(url, second)
    snap = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="s1"))
    pol = PolicyRef(target_tokens=TARGET)
    pre = "t/t1/s/s1/work/cmp/"
    plan = await acts.plan_compaction(PlanInput(snapshot=snap, policy=pol, plan_key=pre + "plan.json"))
    return store, acts, snap, pol, pre, plan


@pytest.mark.parametrize("second", [False, True])
async def test_finish_structured_writes_what_the_three_steps_write(tmp_path, second):
    """The one-step path (lift + structured summary + validation in one call) leaves the same
    work objects, byte for byte, and returns the same outputs as the three steps; also for a
    second compaction on top of a checkpoint."""
    from activities.contracts import FinishStructuredInput, LiftOutput

    outs = {}
    for mode in ("steps", "one"):
        store, acts, snap, pol, pre, plan = await _planned(f"file://{tmp_path}/{mode}", second)
        ext = await acts.externalize(ExternalizeInput(snapshot=snap, policy=pol, plan_key=plan.plan_key,
                                                      layers_key=pre + "layers.json"))
        assert "summary" in ext.layers
        lift_in = LiftInput(snapshot=snap, covers_end=ext.covers_end, layers_key=ext.layers_key,
                            plan_key=plan.plan_key, state_key=pre + "state.json", prev_checkpoint=snap.checkpoint)
        s_in = SummarizeInput(
            tenant="t1", session="s1", snapshot_version=snap.version, covers_end=ext.covers_end,
            prev_checkpoint=snap.checkpoint, state_key=pre + "state.json", budget_tokens=ext.summary_budget,
            model="structured", mode="template", output_key=pre + "summary-structured.json")
        v_in = ValidateInput(
            snapshot=snap, policy=pol, plan_key=plan.plan_key, layers_key=ext.layers_key,
            state_key=pre + "state.json", summary_key=s_in.output_key,
            candidate_key=pre + "candidate-structured.json", covers_end=ext.covers_end)
        if mode == "steps":
            lift = await acts.lift_state(lift_in)
            summ = await acts.summarize_structured(s_in)
            val = await acts.validate_candidate(v_in)
        else:
            fin = await acts.finish_structured(FinishStructuredInput(lift=lift_in, summarize=s_in, check=v_in))
            lift, summ, val = fin.lift, fin.summarize, fin.check
        assert isinstance(lift, LiftOutput) and val.violations == []
        outs[mode] = (await _objects(store, pre), lift.model_dump(exclude={"ms"}), summ.model_dump(),
                      val.model_dump(exclude={"ms"}))
    assert outs["one"] == outs["steps"]


@pytest.mark.parametrize("second", [False, True])
async def test_externalize_finish_writes_what_the_two_steps_write(tmp_path, second):
    """externalize + finish_structured in one call (EXTERNALIZE_FINISH_PATCH) leaves the same
    objects (work objects and artifacts), byte for byte, and returns the same outputs as the two
    steps given the inputs the workflow builds between them; also on top of a checkpoint."""
    from activities.contracts import ExternalizeFinishInput, FinishStructuredInput

    outs = {}
    for mode in ("steps", "one"):
        store, acts, snap, pol, pre, plan = await _planned(f"file://{tmp_path}/{mode}", second)
        ext_in = ExternalizeInput(snapshot=snap, policy=pol, plan_key=plan.plan_key, layers_key=pre + "layers.json")
        if mode == "steps":  # what the workflow did before the patch (_finish_structured's inputs)
            ext = await acts.externalize(ext_in)
            assert "summary" in ext.layers and ext.tokens_after < plan.tokens_before
            fin = await acts.finish_structured(FinishStructuredInput(
                lift=LiftInput(snapshot=snap, covers_end=ext.covers_end, layers_key=ext.layers_key,
                               plan_key=plan.plan_key, state_key=pre + "state.json", prev_checkpoint=snap.checkpoint),
                summarize=SummarizeInput(
                    tenant="t1", session="s1", snapshot_version=snap.version, covers_end=ext.covers_end,
                    prev_checkpoint=snap.checkpoint, prev_checkpoint_sha256=snap.checkpoint_sha256,
                    state_key=pre + "state.json", budget_tokens=ext.summary_budget, model="structured",
                    mode="template", output_key=pre + "summary-structured.json", latest_full=ext.mid_turn),
                check=ValidateInput(
                    snapshot=snap, policy=pol, plan_key=plan.plan_key, layers_key=ext.layers_key,
                    state_key=pre + "state.json", summary_key=pre + "summary-structured.json",
                    candidate_key=pre + "candidate-structured.json", covers_end=ext.covers_end)))
        else:
            both = await acts.externalize_finish(ExternalizeFinishInput(
                externalize=ext_in, prefix=pre, tenant="t1", session="s1", tokens_before=plan.tokens_before))
            ext, fin = both.externalize, both.finish
            assert fin is not None
        assert fin.check.violations == []
        objs = {k: v for k, v in (await _objects(store, "t/t1/s/s1/")).items()
                if not k.startswith(("head", "ckpt/"))}  # (the head's time and log id differ)
        assert {"work/cmp/state.json", "work/cmp/summary-structured.json", "work/cmp/candidate-structured.json"} <= set(objs)
        outs[mode] = (objs, ext.model_dump(exclude={"ms"}),
                      fin.model_dump(exclude={"ms": True, "summarize_ms": True, "lift": {"ms"}, "check": {"ms"}}))
    assert outs["one"] == outs["steps"]


async def test_externalize_finish_stops_after_layers_that_do_not_shrink_the_view(tmp_path):
    """When the layers leave the view at the plan's size or more, only externalize runs (the
    workflow then ends noop): no finish output, no state, summary or candidate written."""
    from activities.contracts import ExternalizeFinishInput

    store = open_store(f"file://{tmp_path}")
    SessionLog(store, "t1", "s1").append(coding_session())
    acts = StoreActivities(store)
    snap = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="s1"))
    pol = PolicyRef(target_tokens=TARGET)
    pre = "t/t1/s/s1/work/cmp/"
    plan = await acts.plan_compaction(PlanInput(snapshot=snap, policy=pol, plan_key=pre + "plan.json"))
    both = await acts.externalize_finish(ExternalizeFinishInput(
        externalize=ExternalizeInput(snapshot=snap, policy=pol, plan_key=plan.plan_key, layers_key=pre + "layers.json"),
        prefix=pre, tenant="t1", session="s1", tokens_before=0))  # no layer result is below 0 tokens
    assert both.finish is None and both.externalize.layers
    assert sorted(k.rsplit("/", 1)[1] for k in store.list(pre)) == ["layers.json", "plan.json"]


@pytest.mark.parametrize("second", [False, True])
async def test_work_objects_reused_in_memory_are_the_bytes_a_fresh_parse_gives(tmp_path, second):
    """The steps of one worker hand the layers document, the state and the candidate on unparsed
    (WorkDocs): what they write is what parsing each object again would write - the state and
    the candidate as a dump of the parsed models, the checkpoint as the candidate read back."""
    from activities.merge import _dumps
    from compactor.lifting.lift import LiftedState, dump_state
    from compactor.records import Checkpoint

    store, acts = await _session(f"file://{tmp_path}", second)
    snap, pol, val = await _candidate(acts, "t1", "s1")
    com = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
    pre = "t/t1/s/s1/work/test/"
    layers = json.loads(store.get(pre + "layers.json")[0])
    state = store.get(pre + "state.json")[0]
    assert state == _dumps(dump_state(LiftedState.model_validate(layers["checkpoint"]["state"])))
    cand = store.get(val.candidate_key)[0]
    assert cand == _dumps(Checkpoint.model_validate(layers["checkpoint"]).model_dump(mode="json"))
    ckpt = store.get(f"t/t1/s/s1/ckpt/{com.checkpoint_id}.json")[0]
    assert ckpt == Checkpoint.model_validate_json(cand).model_dump_json().encode()


async def test_a_work_object_rewritten_elsewhere_is_read_as_stored(setup):
    """A worker keeps the work objects it wrote parsed, but reads each one from the store first:
    an object another worker rewrote (other bytes) or removed is seen as it now is."""
    from compactor import errors

    acts, store, _ = setup
    await _candidate(acts, "t1", "s1")
    key = "t/t1/s/s1/work/test/layers.json"
    doc = acts._get_json(key)
    assert acts._get_json(key) is doc  # unchanged bytes: the same parsed document
    changed = dict(doc, summary_budget=doc["summary_budget"] + 1)
    store.put(key, json.dumps(changed).encode())
    assert acts._get_json(key)["summary_budget"] == doc["summary_budget"] + 1
    store.delete(key)
    with pytest.raises(errors.NotFound, match="missing"):
        acts._get_json(key)


async def test_freeze_that_plans_gives_plan_compactions_output_and_plan(tmp_path):
    """FreezeInput.plan_policy (workflows since the freeze-plans patch): the snapshot carries
    what plan_compaction returns and the same plan object under the run's work prefix, with
    the view counted as before; a plan that cannot be made is left to plan_compaction."""
    from activities.contracts import params_hash, work_prefix

    outs = {}
    for mode in ("two", "one"):
        store = open_store(f"file://{tmp_path}/{mode}")
        SessionLog(store, "t1", "s1").append(coding_session())
        acts = StoreActivities(store)
        pol = PolicyRef(target_tokens=TARGET)
        if mode == "two":
            snap = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="s1"))
            pre = work_prefix("t1", "s1", snap.version, params_hash(
                policy=pol.model_dump(), summarizer="structured", model="m", prev=snap.checkpoint))
            plan = await acts.plan_compaction(PlanInput(snapshot=snap, policy=pol, plan_key=pre + "plan.json"))
        else:
            snap = await acts.freeze_snapshot(FreezeInput(tenant="t1", session="s1", plan_policy=pol,
                                                          plan_model="m"))
            plan = snap.plan
            assert plan is not None and plan.needed
        outs[mode] = (snap.model_dump(exclude={"ms", "plan", "etag"}), plan.model_dump(exclude={"ms"}),
                      await _objects(store, "t/t1/s/s1/work/"))
    assert outs["one"] == outs["two"]

    broken = StoreActivities(open_store(f"file://{tmp_path}/one"))
    snap = await broken.freeze_snapshot(FreezeInput(tenant="t1", session="s1", plan_model="m",
                                                    plan_policy=PolicyRef(preset="no-such-preset")))
    assert snap.plan is None and snap.view_tokens == outs["one"][0]["view_tokens"]
    with pytest.raises(ApplicationError):
        await broken.plan_compaction(PlanInput(snapshot=snap, policy=PolicyRef(preset="no-such-preset"),
                                               plan_key="t/t1/s/s1/work/x/plan.json"))


NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.mark.parametrize("second", [False, True])
async def test_freeze_that_finishes_writes_what_freeze_then_externalize_finish_write(tmp_path, second):
    """FreezeInput.finish_now (workflows since the freeze-finishes patch): freeze_snapshot runs
    externalize_finish after its plan, with the input the workflow builds after a separate freeze;
    the same objects (work objects, artifacts, byte for byte), the same snapshot, plan and
    externalize_finish outputs as the two steps; also on top of a checkpoint."""
    from activities.contracts import ExternalizeFinishInput

    outs = {}
    for mode in ("two", "one"):
        store, acts = await _session(f"file://{tmp_path}/{mode}", second)
        pol = PolicyRef(target_tokens=TARGET)
        frozen = FreezeInput(tenant="t1", session="s1", plan_policy=pol, plan_model="m",
                             finish_now=NOW if mode == "one" else None)
        snap = await acts.freeze_snapshot(frozen)
        plan = snap.plan
        assert plan is not None and plan.needed
        if mode == "two":  # the workflow's externalize_finish step after a freeze that plans
            assert snap.finished is None
            pre = plan.plan_key[: -len("plan.json")]
            ext_in = ExternalizeInput(snapshot=snap.model_copy(update={"plan": None}), policy=pol,
                                      plan_key=plan.plan_key, layers_key=pre + "layers.json", now=NOW)
            both = await acts.externalize_finish(ExternalizeFinishInput(
                externalize=ext_in, prefix=pre, tenant="t1", session="s1", tokens_before=plan.tokens_before))
        else:
            both = snap.finished
            assert both is not None
        assert both.finish is not None and both.finish.check.violations == []
        objs = {k: v for k, v in (await _objects(store, "t/t1/s/s1/")).items()
                if not k.startswith(("head", "ckpt/"))}  # (the head's time and log id differ)
        assert any(k.endswith("/candidate-structured.json") for k in objs)
        outs[mode] = (objs, snap.model_dump(exclude={"ms", "plan", "finished", "etag"}), plan.model_dump(exclude={"ms"}),
                      both.model_dump(exclude={"ms": True, "externalize": {"ms"},
                                               "finish": {"ms": True, "summarize_ms": True, "lift": {"ms"}, "check": {"ms"}}}))
    assert outs["one"] == outs["two"]


async def test_freeze_leaves_externalize_finish_to_its_step_when_it_cannot_or_must_not_run_it(tmp_path):
    """No finish in the snapshot - the workflow then runs externalize_finish as its own step,
    which reports a failure as before - when a part fails inside freeze, when this worker's
    externalize parts are replaced, or when the plan needs no compaction."""
    store = open_store(f"file://{tmp_path}")
    SessionLog(store, "t1", "s1").append(coding_session())
    pol = PolicyRef(target_tokens=TARGET)
    frozen = FreezeInput(tenant="t1", session="s1", plan_policy=pol, finish_now=NOW)

    failing = StoreActivities(store)

    def broken(*_: Any) -> Any:
        raise OSError("the store went away")

    failing._externalize = broken  # type: ignore[method-assign]
    snap = await failing.freeze_snapshot(frozen)
    assert snap.plan is not None and snap.plan.needed and snap.finished is None

    from workers.worker import _freeze_finishes_of

    replaced, kept = StoreActivities(store), StoreActivities(store)
    _freeze_finishes_of(replaced.activities(), {"summarize_structured"})  # (build_workers' extra_activities)
    _freeze_finishes_of(kept.activities(), {"commit_swap"})
    assert kept.finishes_in_freeze and not replaced.finishes_in_freeze
    snap = await replaced.freeze_snapshot(frozen)
    assert snap.plan is not None and snap.plan.needed and snap.finished is None

    roomy = await StoreActivities(store).freeze_snapshot(
        frozen.model_copy(update={"plan_policy": PolicyRef(target_tokens=10_000_000)}))
    assert roomy.plan is not None and not roomy.plan.needed and roomy.finished is None
    assert [k for k in store.list("t/t1/s/s1/work/") if not k.endswith("/plan.json")] == []
