"""The alert rules read what a live worker exports; counters exist at zero from start; the
open-breakers gauge comes from the store and survives a restart; the tenant label is bounded.

The worker runs as operators run it (`compactor worker`, its own process, real dev server,
the fake Messages API for the model summarizer).
"""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest

from activities.breaker import BreakerActivities, BreakerRecordInput
from activities.contracts import SWEEP_WORKFLOW_NAME, PolicyRef, SweepInput, SweepOutput
from compactor.client import CompactorClient
from compactor.store import SessionLog, open_store
from compactor.testing import FakeAnthropic
from tests.integration.durable_support import coding_session
from tests.integration.test_telemetry import _wait as wait
from tests.integration.test_worker_logs import start_worker, stop, worker_env
from tests.unit.test_alerts import alert_metric_names
from workers.devstack import free_port

pytestmark = pytest.mark.integration


def scrape(port: int) -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as r:
            return r.read().decode()
    except OSError:
        return ""


def names(text: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", text, flags=re.M)}


def value(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " ") and not labels:
            return float(line.rsplit(" ", 1)[1])
        if not line.startswith(name + "{"):
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_alert_metrics_exist_live_from_zero_and_breakers_come_from_the_store(
    temporal_address, tmp_path, task_queue
):
    store_dir = tmp_path / "store"
    url = f"file://{store_dir}"
    store = open_store(url)
    acme, beta = "acme" + uuid.uuid4().hex[:4], "beta" + uuid.uuid4().hex[:4]
    # An open breaker before any worker runs: three failed automatic runs of beta/stuck.
    acts = BreakerActivities(store)
    for i in range(3):
        await acts.record_breaker(BreakerRecordInput(tenant=beta, session="stuck", ok=False, trigger="sweep",
                                                     run_id=f"r{i}", error="IntegrityError: x"))
    port = free_port()
    with FakeAnthropic() as fake:
        env = worker_env(
            TEMPORAL_ADDRESS=temporal_address, COMPACTOR_STORE=url, COMPACTOR_TASK_QUEUE=task_queue,
            COMPACTOR_LLM_TASK_QUEUE=f"{task_queue}-llm", COMPACTOR_LLM_RATE_LIMIT="100",
            COMPACTOR_METRICS_PORT=str(port), COMPACTOR_METRICS_HOST="127.0.0.1",
            COMPACTOR_TENANTS=f"{acme},{beta}", COMPACTOR_TENANT=acme,
            ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=fake.base_url, COMPACTOR_GRACEFUL_SHUTDOWN_S="5",
        )
        proc, err = start_worker(env)
        try:
            fresh = wait(lambda: "compactor_breakers_open" in (t := scrape(port)) and t, 60, "a first scrape")
            # From start, at zero: every failure counter under the labels it will be counted with.
            for tenant in (acme, beta, "other"):
                assert value(fresh, "compactor_compactions_total", status="failed", tenant=tenant,
                             trigger="sweep", summarizer="structured") == 0.0, tenant
            assert value(fresh, "compactor_llm_errors_total", error_type="ProviderRateLimited") == 0.0
            assert value(fresh, "compactor_breaker_transitions_total", transition="opened") == 0.0
            assert value(fresh, "compactor_sweep_failed_total") == 0.0
            # The breaker opened before this worker existed is counted, from the store.
            assert value(fresh, "compactor_breakers_open", tenant=beta) == 1.0
            assert value(fresh, "compactor_breakers_open", tenant=acme) == 0.0
            counters = {n for n in alert_metric_names() if n.startswith("compactor_") and not n.endswith("_bucket")}
            assert counters <= names(fresh), sorted(counters - names(fresh))

            # Work that makes the histograms and Temporal's schedule-to-start metrics appear.
            from workers.settings import Settings
            from workers.worker import connect

            client = await connect(Settings(store=url), temporal_address)
            cc = CompactorClient(client, store, tenant=acme, task_queue=task_queue,
                                 llm_task_queue=f"{task_queue}-llm")
            SessionLog(store, acme, "s1").append(coding_session(rounds=30, pending_last=False))
            out = await cc.compact("s1", target_tokens=4_000, summarizer="anthropic")
            assert out.status == "committed"
            SessionLog(store, acme, "s2").append(coding_session(rounds=30, pending_last=False))
            sweep = await client.execute_workflow(
                SWEEP_WORKFLOW_NAME, SweepInput(tenant=acme, policy=PolicyRef(window=24_000, max_output=4_000)),
                id=f"sweep/{acme}/{uuid.uuid4().hex[:6]}", task_queue=task_queue, result_type=SweepOutput,
            )
            assert sweep.started == ["s2"]
            await client.get_workflow_handle(f"compact/{acme}/s2").result()
            text = wait(lambda: (t := scrape(port)) and alert_metric_names() <= names(t) and t, 30,
                        "every metric of the alert rules in the scrape")
            assert value(text, "compactor_compactions_total", status="committed", tenant=acme,
                         trigger="manual", summarizer="anthropic") == 1.0
            assert value(text, "compactor_llm_cost_usd_total", tenant=acme) > 0
        finally:
            rc = stop(proc)
        assert rc == 0, err.lines[-20:]

        # A restart cannot make the gauge drift: it is recounted from the store.
        proc, err = start_worker(env)
        try:
            again = wait(lambda: "compactor_breakers_open" in (t := scrape(port)) and t, 60, "a scrape after restart")
            assert value(again, "compactor_breakers_open", tenant=beta) == 1.0
            err.wait(lambda: err.events("worker_started"), 60, "the worker to start")
        finally:
            rc = stop(proc)
        assert rc == 0, err.lines[-20:]
    await asyncio.sleep(0)
