"""Shutdown and readiness of a real `compactor worker` process (issue 16 item 8).

- /readyz re-checks the store every time: a local store whose directory is deleted is not
  ready, and is ready again when it is back;
- on SIGTERM /readyz answers 503 at once, while a model call in flight (longer than
  COMPACTOR_GRACEFUL_SHUTDOWN_S) still finishes: the summary is not cancelled and re-run;
- a worker whose S3 endpoint ignores conditional writes refuses to start, in one line.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from activities.contracts import CompactSessionOutput
from compactor.client import CompactorClient
from compactor.store import SessionLog, open_store
from compactor.testing import FakeAnthropic, Fault
from tests.integration.durable_support import coding_session, new_ids, process_env, running_worker, wait_for
from workers.devstack import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=8) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
    except OSError:
        return 0, {}


async def test_readiness_follows_the_store_and_drains_on_sigterm_without_cancelling_a_model_call(
        temporal_address, tmp_path, task_queue):
    root = tmp_path / "store"
    root.mkdir()
    url = f"file://{root}"
    port = free_port()
    with FakeAnthropic() as fake:
        env = process_env(TEMPORAL_ADDRESS=temporal_address, COMPACTOR_STORE=url, COMPACTOR_TASK_QUEUE=task_queue,
                   COMPACTOR_LLM_TASK_QUEUE=task_queue + "-llm", COMPACTOR_METRICS_PORT=str(port),
                   COMPACTOR_METRICS_HOST="127.0.0.1", COMPACTOR_GRACEFUL_SHUTDOWN_S="1",
                   COMPACTOR_LLM_RATE_LIMIT="100", ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url)
        worker = subprocess.Popen([sys.executable, "-m", "compactor", "worker"], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ready = f"http://127.0.0.1:{port}/readyz"
        try:
            wait_for(lambda: _get(ready)[0] == 200, 60, "/readyz 200")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=8) as r:
                metrics = r.read().decode()
            for q in (task_queue, task_queue + "-llm"):  # the autoscaler's metric, at zero from the start
                assert f'compactor_task_queue_backlog{{task_queue="{q}",type="activity"}} 0' in metrics, metrics[-2000:]
            # The store directory disappears (a volume unmounted, a path mistyped in a rollout).
            shutil.rmtree(root)
            code, body = wait_for(lambda: (r := _get(ready))[0] == 503 and r, 15, "/readyz 503 without the store")
            assert "does not exist" in body["store"] and body["temporal"] == "ok"
            root.mkdir()
            wait_for(lambda: _get(ready)[0] == 200, 15, "/readyz 200 with the store back")

            store = open_store(url)
            tenant, session = new_ids()
            SessionLog(store, tenant, session).append(coding_session(rounds=20))
            from workers.settings import Settings
            from workers.worker import connect

            client = await connect(Settings(), temporal_address)
            cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue,
                                 llm_task_queue=task_queue + "-llm", summarizer="anthropic", model="claude-test")
            fake.push(Fault.delay(6))  # the summary takes 6 s: longer than the 1 s grace setting
            handle = await cc.start_compaction(session, target_tokens=3_000)
            wait_for(lambda: fake.calls(), 60, "the model call to start")
            worker.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            code, body = wait_for(lambda: (r := _get(ready))[0] == 503 and r, 5, "/readyz 503 while draining")
            assert body["worker"] == "shutting down"  # a check begun before the signal may add its results
            assert worker.poll() is None  # still finishing the model call
            assert worker.wait(60) == 0
            assert time.monotonic() - t0 >= 3  # it waited for the call, not for the 1 s setting
            assert "Traceback" not in worker.stderr.read()
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        # The finished summary was reported; another worker completes the run with it.
        async with running_worker(temporal_address, store, task_queue, anthropic_api_key="sk-test"):
            out = await client.get_workflow_handle(handle.id, result_type=CompactSessionOutput).result()
        assert out.status == "committed"
        assert len(fake.calls()) == 1  # not cancelled and re-run


def test_a_worker_refuses_an_s3_endpoint_that_ignores_conditional_writes(s3_endpoint, s3_bucket):
    from compactor.testing.s3_fault_proxy import S3FaultProxy

    with S3FaultProxy(s3_endpoint, drop_headers=("If-None-Match", "If-Match")) as proxy:
        env = process_env(TEMPORAL_ADDRESS="127.0.0.1:1", COMPACTOR_STORE=f"s3://{s3_bucket}/p",
                   AWS_ENDPOINT_URL=proxy.url)
        p = subprocess.run([sys.executable, "-m", "compactor", "worker"], env=env, cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("compactor: error:")]
    assert len(errors) == 1 and "does not honour conditional writes" in errors[0], p.stderr


def test_the_conditional_write_probe_passes_on_a_real_s3_inside_the_tenant_prefix(s3_endpoint, s3_bucket, monkeypatch):
    from workers.settings import Settings
    from workers.worker import PROBE_KEY, check_conditional_writes

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    store = open_store(f"s3://{s3_bucket}/p")
    settings = Settings(tenants="acme")
    for _ in range(2):  # a restart finds the key of the previous start: still accepted
        check_conditional_writes(store, settings)
    assert store.list("") == [f"t/acme/{PROBE_KEY}"]


async def test_the_backlog_gauge_counts_tasks_waiting_for_a_worker(temporal_address, task_queue):
    from activities.contracts import WORKFLOW_NAME, CompactSessionInput
    from workers.backlog import BacklogGauge
    from workers.settings import Settings
    from workers.worker import connect

    client = await connect(Settings(), temporal_address)
    gauge = BacklogGauge(client, "default", [task_queue])
    await gauge.poll_once()
    assert gauge.values[(task_queue, "workflow")] == 0
    for i in range(3):  # no worker polls this queue: the tasks wait
        await client.start_workflow(WORKFLOW_NAME, CompactSessionInput(tenant="t", session=f"s{i}"),
                                    id=f"backlog-{task_queue}-{i}", task_queue=task_queue)

    async def counted() -> int:
        await gauge.poll_once()
        return gauge.values[(task_queue, "workflow")]

    deadline = time.monotonic() + 30
    while (n := await counted()) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
    assert n == 3
    obs = {(o.attributes["task_queue"], o.attributes["type"]): o.value for o in gauge.observe()}
    assert obs[(task_queue, "workflow")] == 3 and obs[(task_queue, "activity")] == 0
    for i in range(3):
        await client.get_workflow_handle(f"backlog-{task_queue}-{i}").terminate("test done")


def test_store_readiness_is_rechecked_on_s3_inside_the_tenant_prefix(s3_endpoint, s3_bucket, monkeypatch):
    import boto3

    from compactor.errors import BucketNotFound
    from workers.settings import Settings
    from workers.telemetry import probe_store

    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    store = open_store(f"s3://{s3_bucket}/p")
    settings = Settings(tenants="acme")
    SessionLog(store, "acme", "s1").append(coding_session(rounds=1))
    probe_store(store, settings)
    store.head("t/acme/s/s1/head.json")  # the store has now seen the bucket once
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    for o in s3.list_objects_v2(Bucket=s3_bucket).get("Contents", []):
        s3.delete_object(Bucket=s3_bucket, Key=o["Key"])
    s3.delete_bucket(Bucket=s3_bucket)
    with pytest.raises(BucketNotFound):  # not remembered from the first probe
        probe_store(store, settings)
