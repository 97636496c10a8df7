"""Durable view == inline view on every transcript of the dev corpus (skipped without it)."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowFailureError

from compactor.cli.outcome import default_target
from compactor.client import CompactorClient
from compactor.engine.compact import compact
from compactor.importers import import_file
from compactor.engine.measure import view_tokens
from compactor.engine.policy import make_policy
from compactor.store import SessionLog, open_store
from tests.conftest import corpus_files
from tests.integration.durable_support import new_ids, running_worker

pytestmark = [pytest.mark.integration, pytest.mark.corpus]


async def test_durable_equals_inline_on_corpus(corpus_dir, temporal_address, tmp_path, task_queue):
    files = corpus_files()
    store = open_store(f"file://{tmp_path}/store")
    tenant, _ = new_ids()
    checked = 0
    async with running_worker(temporal_address, store, task_queue, with_llm=False) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        for n, path in enumerate(files):
            events = import_file(path).events
            if not events:
                continue
            session = f"c{n}"
            log = SessionLog(store, tenant, session)
            log.append(events)
            target = default_target(view_tokens(events))
            inline = compact(log.read_events(), make_policy("default"), target,
                             tenant=tenant, session=session)
            if inline.record.status == "failed":
                # the durable path refuses the same candidate and leaves the session as it was
                with pytest.raises(WorkflowFailureError):
                    await cc.compact(session, target_tokens=target)
                assert log.head().checkpoint is None, path.name
                continue
            out = await cc.compact(session, target_tokens=target)
            assert out.status == inline.record.status, path.name
            assert out.checkpoint == (inline.checkpoint.id if out.status == "committed" else None), path.name
            durable_view = [e.model_dump(mode="json") for e in log.read_view()]
            assert durable_view == [e.model_dump(mode="json") for e in inline.view], path.name
            checked += 1
    assert checked == len(files)
