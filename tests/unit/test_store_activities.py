"""StoreActivities called directly (no Temporal): the steps compose to the inline engine's
result, and commit_swap's compare-and-swap / merge / idempotency rules hold."""

from __future__ import annotations

import hashlib

import pytest
from temporalio.exceptions import ApplicationError

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
from compactor.engine import compact
from compactor.events import Event, TextBlock, ToolResultBlock
from compactor.policy import make_policy
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
