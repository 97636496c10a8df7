"""A worker process killed mid-compaction; another worker finishes it (real dev server + S3)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from activities.store_activities import StoreActivities
from compactor.client import CompactorClient
from compactor.store import SessionLog
from compactor.store.s3 import S3Store
from tests.integration.durable_support import coding_session, new_ids, running_worker

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


async def _readline(proc: subprocess.Popen, want: str, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        line = await asyncio.wait_for(loop.run_in_executor(None, proc.stdout.readline), timeout)
        if not line and proc.poll() is not None:
            raise AssertionError(f"worker exited ({proc.returncode}) before printing {want!r}")
        if line.strip() == want:
            return
    raise AssertionError(f"worker never printed {want!r}")


def _session(s3_endpoint: str, s3_bucket: str) -> tuple[S3Store, str, str, SessionLog, list]:
    """A coding session in the S3 store: (store, tenant, session, its log, its events)."""
    store = S3Store(s3_bucket, "compactor", endpoint_url=s3_endpoint)
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    events = coding_session()
    log.append(events)
    return store, tenant, session, log, events


async def test_worker_killed_in_commit_swap_second_worker_finishes(
    temporal_address, s3_endpoint, s3_bucket, task_queue
):
    store, tenant, session, log, events = _session(s3_endpoint, s3_bucket)
    before = log.head()
    env = dict(os.environ, AWS_ENDPOINT_URL=s3_endpoint, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactor.testing.chaos_worker", temporal_address,
         f"s3://{s3_bucket}/compactor", task_queue, "in"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        await _readline(proc, "ready")
        from workers.settings import Settings
        from workers.worker import connect

        client = await connect(Settings(store=store.url), temporal_address, s3_client=store.client)
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        handle = await cc.start_compaction(session, target_tokens=4_000)
        await _readline(proc, "in-commit-swap")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # The dead worker wrote the checkpoint but never swapped: the session is unchanged.
    assert log.head().etag == before.etag and log.head().checkpoint is None
    assert len(log.list_checkpoints()) == 1

    async with running_worker(temporal_address, store, task_queue, with_llm=False):
        out = await asyncio.wait_for(handle.result(), timeout=90)
    assert out.status == "committed"
    head = log.head()
    assert head.checkpoint == out.checkpoint
    # exactly one checkpoint, committed once; no event lost or duplicated
    assert [c.id for c in log.list_checkpoints()] == [out.checkpoint]
    assert [e.id for e in log.read_events()] == [e.id for e in events]
    assert head.version == len(events)
    [rec] = log.list_records()
    assert rec.status == "committed"
    # The server saw the first worker's task time out and handed the run to the second one.
    from temporalio.api.enums.v1 import EventType

    history = await handle.fetch_history()
    lost = {EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT}
    assert any(e.event_type in lost for e in history.events)


async def test_worker_killed_after_commit_swap_the_run_reports_its_commit(
    temporal_address, s3_endpoint, s3_bucket, task_queue
):
    # The swap lands, then the worker dies before its workflow task is recorded: the task runs
    # again from its last recorded point against the new head. The run must report the commit
    # it made (not noop, not SnapshotChanged) and never commit a second checkpoint.
    from workflows.compact_session import SA_STATUS

    store, tenant, session, log, events = _session(s3_endpoint, s3_bucket)
    env = dict(os.environ, AWS_ENDPOINT_URL=s3_endpoint, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactor.testing.chaos_worker", temporal_address,
         f"s3://{s3_bucket}/compactor", task_queue, "after"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        await _readline(proc, "ready")
        from workers.settings import Settings
        from workers.worker import connect

        client = await connect(Settings(store=store.url), temporal_address, s3_client=store.client)
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        handle = await cc.start_compaction(session, target_tokens=4_000)
        await _readline(proc, "after-commit-swap")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    committed = log.head()
    assert committed.checkpoint is not None and committed.checkpoint_run is not None
    # the agent keeps appending before the run is picked up again
    log.append([e.model_copy(update={"id": e.id + "-later", "seq": 0}) for e in events[-3:-1]])

    async with running_worker(temporal_address, store, task_queue, with_llm=False):
        out = await asyncio.wait_for(handle.result(), timeout=90)
    head = log.head()
    assert out.status == "committed" and out.checkpoint == head.checkpoint == committed.checkpoint
    assert out.record.checkpoint == head.checkpoint and out.record.checkpoint_sha256 == head.checkpoint_sha256
    assert [c.id for c in log.list_checkpoints()] == [head.checkpoint]
    [rec] = log.list_records()
    assert rec.status == "committed" and rec.checkpoint == head.checkpoint and rec.id == committed.checkpoint_run
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(SA_STATUS) == "committed"
    assert [e.id for e in log.read_events()][: len(events)] == [e.id for e in events]
    from tests.integration.durable_support import save_history

    await save_history(client, handle.id, "compact-crash-after-commit")


class _RecordLostOnce(StoreActivities):
    """commit_record whose first record write fails after the head was swapped (the store call
    lost with its worker, a blip): the step is retried by the worker."""

    lost = 0

    def _write_record(self, inp, meta):  # noqa: ANN001, ANN202
        if not self.lost:
            self.lost += 1
            raise OSError("the record's write was lost after the commit")
        return super()._write_record(inp, meta)


@pytest.mark.parametrize("step", ["commit_record", "freeze_snapshot"])
async def test_a_commit_whose_record_was_lost_reports_that_commit(
    temporal_address, s3_endpoint, s3_bucket, task_queue, step
):
    # commit_record: commit_swap + write_record are one step (COMMIT_RECORD_PATCH): its retry finds
    # the run's own commit on the head (commit_swap's own-commit path), commits nothing twice,
    # records it. freeze_snapshot: it commits too (FREEZE_COMMIT_PATCH); its record's write is lost
    # after the head was swapped: freeze reports no commit, the workflow runs commit_record, which
    # finds the run's own commit on the head the same way and records it.
    from compactor.cli.history import timeline

    store, tenant, session, log, events = _session(s3_endpoint, s3_bucket)
    acts = _RecordLostOnce(store)
    async with running_worker(temporal_address, store, task_queue, extra_activities=[getattr(acts, step)]) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        out = await cc.compact(session, target_tokens=4_000)
        history = await client.get_workflow_handle(f"compact/{tenant}/{session}").fetch_history()
    assert acts.lost == 1
    head = log.head()
    assert out.status == "committed" and out.checkpoint == head.checkpoint and head.checkpoint_run == out.record.id
    assert [c.id for c in log.list_checkpoints()] == [out.checkpoint]
    assert head.version == len(events)
    [rec] = log.list_records()
    assert rec.model_dump(exclude={"sha256"}) == out.record.model_dump(exclude={"sha256"})
    steps = {s["step"]: s for s in timeline(history) if s["step"] != "workflow"}
    if step == "commit_record":
        assert steps["commit_record"]["attempts"] == 2 and steps["commit_record"]["outcome"] == "completed"
    else:
        assert list(steps) == ["freeze_snapshot", "commit_record"]
        assert steps["commit_record"]["attempts"] == 1 and steps["commit_record"]["outcome"] == "completed"
