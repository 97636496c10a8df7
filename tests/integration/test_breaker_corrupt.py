"""A corrupt breaker.json on a real worker: one warning line, no activity failure (so no worker
traceback), the compaction runs, and the file is left for the operator."""

from __future__ import annotations

import logging

import pytest

from compactor.client import CompactorClient
from compactor.store import SessionLog
from compactor.store.s3 import S3Store
from tests.integration.durable_support import coding_session, new_ids, running_worker

pytestmark = pytest.mark.integration


@pytest.fixture
def store(s3_endpoint, s3_bucket):
    return S3Store(s3_bucket, "compactor", endpoint_url=s3_endpoint)


async def test_a_corrupt_breaker_is_one_warning_line(temporal_address, store, task_queue, caplog):
    tenant, session = new_ids()
    SessionLog(store, tenant, session).append(coding_session())
    key = f"t/{tenant}/s/{session}/breaker.json"
    store.put(key, b'{"tenant": truncated')
    with caplog.at_level(logging.DEBUG):
        async with running_worker(temporal_address, store, task_queue) as client:
            cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
            out = await cc.compact(session, target_tokens=4_000, trigger="sweep")
    assert out.status == "committed"
    mine = [r for r in caplog.records if "breaker" in r.getMessage().lower() and r.levelno >= logging.WARNING]
    assert len(mine) == 1 and "breaker.json" in mine[0].getMessage() and mine[0].exc_info is None
    assert not [r for r in caplog.records if "Completing activity as failed" in r.getMessage()]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.exc_info]
    assert store.get(key)[0] == b'{"tenant": truncated'
