"""Eager workflow start (docs/bench-perf.md, round sixteen, `durable17`).

A client with its own worker on the task queue (``compactor compact``'s embedded worker, ``bench
perf``) gets the run's first workflow task in the start response; a client without one (the
worker on another connection) starts the run as before. Either way the compaction is the same:
the view equals the inline engine's, and the history replays.
"""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from compactor.client import CompactorClient
from compactor.engine.compact import compact
from compactor.engine.policy import make_policy
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session, new_ids, running_worker
from workflows.compact_session import CompactSessionWorkflow

pytestmark = pytest.mark.integration

TARGET = 2_500


def _eager(handle) -> bool:  # noqa: ANN001
    # temporalio (1.35) marks a handle whose start response carried the first workflow task.
    return getattr(handle, "__temporal_eagerly_started")


async def _compact_and_check(cc: CompactorClient, store, tenant: str, session: str) -> tuple[bool, object]:
    log = SessionLog(store, tenant, session)
    log.append(coding_session(rounds=12))
    inline = compact(log.read_events(), make_policy("default"), TARGET, tenant=tenant, session=session)
    handle = await cc.start_compaction(session, target_tokens=TARGET)
    out = await handle.result()
    assert out.status == inline.record.status == "committed"
    assert out.checkpoint == inline.checkpoint.id
    view = [e.model_dump(mode="json") for e in log.read_view()]
    assert view == [e.model_dump(mode="json") for e in inline.view]
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[CompactSessionWorkflow], data_converter=pydantic_data_converter)
    await replayer.replay_workflow(WorkflowHistory.from_json(handle.id, history.to_json()))
    return _eager(handle), history


async def test_a_client_with_its_own_worker_starts_eagerly(temporal_address, tmp_path, task_queue):
    store = open_store(f"file://{tmp_path}/store")
    tenant, session = new_ids()
    async with running_worker(temporal_address, store, task_queue, with_llm=False) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        eager, history = await _compact_and_check(cc, store, tenant, session)
        assert eager, "the start response did not carry the first workflow task"
        # the first workflow task was started by the start itself: no poll matched it
        kinds = [ev.WhichOneof("attributes") for ev in history.events[:3]]
        assert kinds == ["workflow_execution_started_event_attributes",
                         "workflow_task_scheduled_event_attributes",
                         "workflow_task_started_event_attributes"]
        # a second compaction of another session on the same client: eager again
        eager2, _ = await _compact_and_check(cc, store, tenant, session + "b")
        assert eager2


async def test_a_client_without_a_worker_starts_as_before(temporal_address, tmp_path, task_queue):
    from workers.settings import Settings
    from workers.worker import _store_s3_client, connect

    store = open_store(f"file://{tmp_path}/store")
    tenant, session = new_ids()
    async with running_worker(temporal_address, store, task_queue, with_llm=False):
        # another connection, no worker on it: the core must not ask for the task (nobody here
        # would run it until the workflow task timed out)
        other = await connect(Settings(store=store.url, task_queue=task_queue), temporal_address,
                              s3_client=_store_s3_client(store))
        cc = CompactorClient(other, store, tenant=tenant, task_queue=task_queue)
        eager, _ = await _compact_and_check(cc, store, tenant, session)
        assert not eager
