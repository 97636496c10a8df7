"""Tenant binding on a real Temporal dev server and a real S3 endpoint (moto)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.contracts import WORKFLOW_NAME, CompactSessionInput, CompactSessionOutput
from compactor.client import CompactorClient, workflow_id_for
from compactor.errors import InvalidId, TenantNotAllowed
from compactor.store import SessionLog
from compactor.store.s3 import S3Store
from tests.integration.durable_support import coding_session, new_ids, running_worker

pytestmark = pytest.mark.integration


@pytest.fixture
def store(s3_endpoint, s3_bucket):
    return S3Store(s3_bucket, "compactor", endpoint_url=s3_endpoint)


def _cause(exc: WorkflowFailureError) -> ApplicationError:
    cause = exc.cause
    assert isinstance(cause, ApplicationError), cause
    return cause


async def _workflows(client, query: str) -> list:
    return [wf async for wf in client.list_workflows(query)]


@pytest.mark.parametrize("sandbox", [False, True])
async def test_bound_worker_refuses_another_tenants_workflow_with_nothing_written(
    temporal_address, store, task_queue, sandbox
):
    tenant_a, session = new_ids()
    tenant_b, _ = new_ids()
    for t in (tenant_a, tenant_b):
        SessionLog(store, t, session).append(coding_session())
    before_b = store.list(f"t/{tenant_b}/")
    async with running_worker(temporal_address, store, task_queue, tenants=[tenant_a],
                              workflow_sandbox=sandbox) as client:
        # A caller that skips our client (any SDK, same namespace) names tenant B.
        with pytest.raises(WorkflowFailureError) as exc:
            await client.execute_workflow(
                WORKFLOW_NAME,
                CompactSessionInput(tenant=tenant_b, session=session, target_tokens=4_000),
                id=workflow_id_for(tenant_b, session),
                task_queue=task_queue,
                result_type=CompactSessionOutput,
            )
        cause = _cause(exc.value)
        assert cause.type == "TenantNotAllowed" and cause.non_retryable
        assert store.list(f"t/{tenant_b}/") == before_b  # no work objects, record or breaker

        # The worker's own tenant compacts as usual.
        out = await CompactorClient(client, store, tenant=tenant_a, task_queue=task_queue).compact(
            session, target_tokens=4_000)
        assert out.status == "committed"


async def test_invalid_ids_are_refused_before_any_workflow_exists(temporal_address, store, task_queue):
    tenant, session = new_ids()
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        with pytest.raises(InvalidId):
            await cc.start_compaction("../../tB/s/s1")
        with pytest.raises(TenantNotAllowed):
            await cc.start_compaction(session, tenant="other")
        bad_id = workflow_id_for(tenant, "../../tB/s/s1")
        assert await _workflows(client, f"WorkflowId = '{bad_id}'") == []
        assert await _workflows(client, f"CompactorTenant = '{tenant}'") == []

        # Past the client (started by hand), the workflow's first step refuses it, non-retryable,
        # before any activity runs.
        with pytest.raises(WorkflowFailureError) as exc:
            await client.execute_workflow(
                WORKFLOW_NAME, CompactSessionInput(tenant=tenant, session="../../tB/s/s1"),
                id=f"compact/{tenant}/bad", task_queue=task_queue, result_type=CompactSessionOutput)
        assert _cause(exc.value).type == "InvalidInput"
        history = await client.get_workflow_handle(f"compact/{tenant}/bad").fetch_history()
        names = {e.WhichOneof("attributes") for e in history.events}
        assert not any("activity" in (n or "") for n in names)
        markers = {e.marker_recorded_event_attributes.marker_name for e in history.events
                   if e.HasField("marker_recorded_event_attributes")}
        assert "core_local_activity" not in markers
        assert store.list(f"t/{tenant}/") == []


async def test_history_and_listing_are_scoped_to_the_bound_tenants(temporal_address, store, task_queue):
    tenant_a, session = new_ids()
    tenant_b, _ = new_ids()
    for t in (tenant_a, tenant_b):
        SessionLog(store, t, session).append(coding_session(rounds=4))
    async with running_worker(temporal_address, store, task_queue) as client:
        for t in (tenant_a, tenant_b):
            await CompactorClient(client, store, tenant=t, task_queue=task_queue).compact(session)
        cc = CompactorClient(client, store, tenant=tenant_a, task_queue=task_queue)
        history = await cc.history(workflow_id_for(tenant_a, session))
        assert history.events
        with pytest.raises(TenantNotAllowed):
            await cc.history(workflow_id_for(tenant_b, session))
        assert [r.tenant for r in await cc.records(session)] == [tenant_a]
        both = CompactorClient(client, store, tenants=[tenant_a, tenant_b], task_queue=task_queue)
        for _ in range(50):  # visibility is eventually consistent
            listed = {wf.id for wf in await both.compactions()}
            if len(listed) == 2:
                break
            await asyncio.sleep(0.2)
        assert listed == {workflow_id_for(tenant_a, session), workflow_id_for(tenant_b, session)}
        assert {wf.id for wf in await cc.compactions()} == {workflow_id_for(tenant_a, session)}
