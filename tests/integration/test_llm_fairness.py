"""One busy tenant cannot starve another of model calls.

The LLM task queue is a shared backlog behind one fleet-wide rate limit. Tenant A queues ten
model summaries; then tenant B asks for one and A for an eleventh; then the LLM worker starts
(one call at a time). Each model call
carries its tenant as Temporal's fairness key (dev server with ``matching.enableFairness``):
B's call is dispatched next (the test's server gives each task queue one partition, so the
order is the fairness scheduler's and not the partitions' timing), ahead of A's eleventh, which
waits behind A's own backlog. Without the key the queue is first come, first served and B would wait for all of A's.
The order is read from the requests the fake Messages API received.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from compactor.client import CompactorClient
from compactor.events import Event, TextBlock
from compactor.store import SessionLog, open_store
from compactor.testing import FakeAnthropic
from tests.integration.durable_support import coding_session

pytestmark = pytest.mark.integration
BUSY = 10


@pytest.fixture(scope="module")
def one_partition_temporal():
    """A dev server whose task queues have one partition. The shared server's default of 4
    partitions dispatches unevenly on a loaded machine (one partition's backlog drains ahead of
    another's), so B's place in the order depended on where its task landed: seen last of 12
    once in a full CI run. Within one partition the order is the fairness scheduler's alone."""
    from workers.devstack import start_temporal

    proc = start_temporal(dynamic_config={"matching.numTaskqueueReadPartitions": "1",
                                          "matching.numTaskqueueWritePartitions": "1"})
    yield proc.address
    proc.stop()


def _session(store, tenant: str, session: str) -> None:
    evs = coding_session(rounds=20, pending_last=False)
    evs.insert(2, Event(id="who", role="user", blocks=[TextBlock(text=f"Ticket owner: fairness-{tenant}-{session}.")]))
    SessionLog(store, tenant, session).append(evs)


async def test_a_busy_tenant_does_not_delay_another_tenants_model_call(one_partition_temporal, tmp_path,
                                                                        task_queue, monkeypatch):
    temporal_address = one_partition_temporal
    from workers.settings import Settings
    from workers.worker import build_workers, connect

    busy, quiet = "busy" + uuid.uuid4().hex[:4], "quiet" + uuid.uuid4().hex[:4]
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        # One call at a time, so the order the fake sees is the order Temporal dispatched.
        settings = Settings(store=f"file://{tmp_path}/store", task_queue=task_queue,
                            llm_task_queue=f"{task_queue}-llm", llm_rate_limit=100.0, llm_concurrency=1)
        store = open_store(settings.store)
        for i in range(BUSY + 1):
            _session(store, busy, f"s{i}")
        _session(store, quiet, "s0")
        client = await connect(settings, temporal_address)
        ccs = {t: CompactorClient(client, store, tenant=t, task_queue=task_queue, llm_task_queue=f"{task_queue}-llm",
                                  summarizer="anthropic") for t in (busy, quiet)}
        main, llm = build_workers(client, settings, store)
        async with main:
            # The backlog a busy fleet has: A's calls queued first, then B's and one more of A's.
            handles = [await ccs[busy].start_compaction(f"s{i}", target_tokens=3_000) for i in range(BUSY)]
            await _at_model_step(handles)
            handles += [await ccs[quiet].start_compaction("s0", target_tokens=3_000),
                        await ccs[busy].start_compaction(f"s{BUSY}", target_tokens=3_000)]
            await _at_model_step(handles[-2:])
            await asyncio.sleep(1.0)  # the last schedule commands reach the server
            async with llm:
                outs = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 180)
    assert all(o.status == "committed" and o.record.summarizer == "anthropic" for o in outs)

    calls = _calls(fake)

    def who(req) -> str:
        body = json.dumps(req.body)
        return next((f"{t}/s{i}" for t in (busy, quiet) for i in range(BUSY + 1) if f"fairness-{t}-s{i}." in body), "?")

    order = [who(r) for r in calls]
    assert sorted(order) == sorted([f"{busy}/s{i}" for i in range(BUSY + 1)] + [f"{quiet}/s0"]), order
    b = order.index(f"{quiet}/s0")
    # B overtook A's backlog: first come, first served puts it behind all BUSY of A's earlier
    # calls (index BUSY, 11th). With the tenant as fairness key and one partition it went 2nd in
    # every run (quiet and loaded machine alike); 3rd is allowed for a call of A's dispatched
    # before B's task reached the queue.
    assert b < 3, order

def _calls(fake: FakeAnthropic) -> list:
    return [r for r in list(fake.requests) if r.method == "POST" and r.path.startswith("/v1/messages")
            and "count_tokens" not in r.path]


async def _at_model_step(handles: list) -> None:
    """Until every run is at (or past) its model call: its task is queued on the LLM queue."""
    from activities.contracts import CompactStatus

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    pending = list(handles)
    while pending:
        assert loop.time() < deadline, "runs never reached the model step"
        still = []
        for h in pending:
            st = await h.query("status", result_type=CompactStatus)
            if st.step != "summarize_anthropic" and "summarize_anthropic" not in st.completed_steps:
                still.append(h)
        pending = still
        if pending:
            await asyncio.sleep(0.1)
