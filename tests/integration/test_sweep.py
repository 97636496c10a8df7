"""Sweeps and failure accounting end to end: a real Temporal dev server and a real S3 endpoint.

A corrupt session is skipped and reported; an unshrinkable session is compacted once (one
noop record, no checkpoint) however often the sweep runs; a failure at freeze_snapshot ends
with status failed, a record and a breaker count.
"""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import WorkflowFailureError

from activities.breaker import load_breaker
from activities.contracts import SWEEP_WORKFLOW_NAME, PolicyRef, SweepInput, SweepOutput
from compactor.client import CompactorClient, workflow_id_for
from compactor.events import Event, TextBlock
from compactor.store import SessionLog
from compactor.store.s3 import S3Store
from tests.integration.durable_support import coding_session, new_ids, running_worker

pytestmark = pytest.mark.integration

POLICY = PolicyRef(window=24_000, max_output=4_000)  # default preset: soft 5,250, hard 17,000


@pytest.fixture
def store(s3_endpoint, s3_bucket):
    return S3Store(s3_bucket, "compactor", endpoint_url=s3_endpoint)


async def _sweep(client, tenant: str, task_queue: str, **kw) -> SweepOutput:
    return await client.execute_workflow(
        SWEEP_WORKFLOW_NAME, SweepInput(tenant=tenant, policy=POLICY, **kw),
        id=f"sweep/{tenant}/{uuid.uuid4().hex[:6]}", task_queue=task_queue, result_type=SweepOutput,
    )


def _unshrinkable(log: SessionLog) -> None:
    """Over the trigger with nothing a compaction may remove: pinned instructions and the
    latest request only."""
    rules = " ".join(f"Rule {i}: keep the module boundaries of package p{i} stable." for i in range(1100))
    log.append([
        Event(id="sys", kind="pinned", role="system", blocks=[TextBlock(text=rules)]),
        Event(id="req", role="user", blocks=[TextBlock(text="Refactor the parser.")]),
    ])


async def test_corrupt_session_is_skipped_and_reported(temporal_address, store, task_queue):
    tenant, _ = new_ids()
    for i in range(10):
        SessionLog(store, tenant, f"s{i}").append(coding_session(rounds=30 if i < 2 else 2, pending_last=False))
    store.put(f"t/{tenant}/s/s5/head.json", b"{not a head")
    async with running_worker(temporal_address, store, task_queue) as client:
        out = await _sweep(client, tenant, task_queue, page_size=3)
        for s in out.started:
            handle = client.get_workflow_handle(workflow_id_for(tenant, s))
            await handle.result()
            # started by the sweep without search attributes: the run upserts its tenant and session
            sa = (await handle.describe()).search_attributes
            assert sa.get("CompactorTenant") == [tenant] and sa.get("CompactorSession") == [s]
            # the sweep asks for the newest path (CompactSessionInput.paths): no patch marker, and
            # the one step that commits (freeze_snapshot)
            markers = [e.marker_recorded_event_attributes.marker_name for e in (await handle.fetch_history()).events
                       if e.HasField("marker_recorded_event_attributes")]
            assert markers == ["core_local_activity"]
    assert out.scanned == 10 and out.pages == 4
    assert [k.session for k in out.skipped] == ["s5"] and out.skipped_count == 1
    assert "IntegrityError" in out.skipped[0].error
    assert sorted(out.started) == ["s0", "s1"]


async def test_three_sweeps_over_an_unshrinkable_session_write_one_record(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    _unshrinkable(log)
    async with running_worker(temporal_address, store, task_queue) as client:
        outs = []
        for _ in range(3):
            out = await _sweep(client, tenant, task_queue)
            for s in out.started:
                await client.get_workflow_handle(workflow_id_for(tenant, s)).result()
            outs.append(out)
    assert [o.started_count for o in outs] == [1, 0, 0]
    assert [o.unshrinkable for o in outs] == [0, 1, 1]
    records = log.list_records()
    assert [r.status for r in records] == ["noop"]
    assert records[0].tokens_after == records[0].tokens_before
    assert log.head().checkpoint is None and log.list_checkpoints() == []
    assert log.head().noop_view_tokens == log.head().view_tokens


async def test_ensure_budget_does_not_wait_on_an_unshrinkable_session(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    _unshrinkable(log)
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        first = await cc.ensure_budget(session, window=20_000, max_output=4_000)
        assert first.need == "hard" and first.action == "waited" and first.result.status == "noop"
        again = await cc.ensure_budget(session, window=20_000, max_output=4_000)
    assert again.need == "hard" and again.action == "none" and again.reason == "unshrinkable"
    assert len(log.list_records()) == 1


async def test_failure_at_freeze_snapshot_is_failed_recorded_and_counted(temporal_address, store, task_queue):
    tenant, session = new_ids()
    SessionLog(store, tenant, session).append(coding_session(rounds=3))
    store.put(f"t/{tenant}/s/{session}/head.json", b"{not a head")
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        with pytest.raises(WorkflowFailureError):
            await cc.compact(session, target_tokens=1_000, trigger="sweep")
        desc = await client.get_workflow_handle(workflow_id_for(tenant, session)).describe()
    status = desc.search_attributes.get("CompactorStatus")
    assert status == ["failed"]
    records = [k for k in store.list(f"t/{tenant}/s/{session}/records/")]
    assert len(records) == 1
    rec = SessionLog(store, tenant, session).read_record(records[0])
    assert rec.status == "failed" and "freeze_snapshot" in (rec.error or "")
    state, _ = load_breaker(store, tenant, session)
    assert state is not None and state.consecutive_failures == 1
