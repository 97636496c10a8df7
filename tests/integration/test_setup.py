"""`compactor setup` on a stock Temporal dev server (no search attributes registered), as a
platform team's cluster is: before it, worker/compact/ensure_budget name the command; it runs
twice (the second changes nothing); then a worker, `compact` and `ensure_budget` succeed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compactor.client import CompactorClient
from compactor.errors import SetupRequired
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session, new_ids, process_env

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stock_temporal():
    """A `temporal server start-dev` with no --search-attribute: nothing of ours registered."""
    from workers.devstack import start_temporal

    proc = start_temporal(search_attributes=False)
    yield proc.address
    proc.stop()


def _cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compactor", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _one_line_naming_setup(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr
    errors = [ln for ln in lines if ln.startswith("compactor: error:")]
    assert len(errors) == 1 and "compactor setup" in errors[0] and re.search(r"search attributes? Compactor", errors[0]), p.stderr


async def test_setup_on_a_stock_server_then_worker_compact_and_ensure_budget(stock_temporal, tmp_path, task_queue):
    url = f"file://{tmp_path}/store"
    store = open_store(url)
    tenant, session = new_ids()
    other = tenant + "b"
    SessionLog(store, tenant, session).append(coding_session(rounds=30))
    SessionLog(store, other, "s-other").append(coding_session(rounds=2))
    env = process_env(TEMPORAL_ADDRESS=stock_temporal, COMPACTOR_STORE=url, COMPACTOR_TASK_QUEUE=task_queue,
               COMPACTOR_LLM_TASK_QUEUE=task_queue + "-llm", COMPACTOR_SWEEP_EVERY="1h")

    # Before setup: each entry point names the command, in one line, exit 2.
    _one_line_naming_setup(_cli("worker", env=env, timeout=60))
    _one_line_naming_setup(_cli("compact", session, "--tenant", tenant, "--local-worker", env=env))
    from workers.settings import Settings
    from workers.worker import connect

    client = await connect(Settings(), stock_temporal)
    cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue, policy="codex")
    with pytest.raises(SetupRequired) as err:
        await cc.ensure_budget(session, window=12_000, max_output=2_000)
    assert "compactor setup" in str(err.value)
    assert all(name in str(err.value) for name in ("CompactorTenant", "CompactorSession", "CompactorStatus",
                                                  "CompactorTokensBefore", "CompactorTokensAfter"))
    assert SessionLog(store, tenant, session).head().checkpoint is None  # nothing changed

    first = _cli("setup", "--json", env=env)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert doc["changed"] is True
    assert sorted(doc["search_attributes"]["added"]) == sorted(
        ["CompactorTenant", "CompactorSession", "CompactorStatus", "CompactorTokensBefore", "CompactorTokensAfter"])
    # no tenant configured: every tenant in the store gets its own schedule
    assert {(s["tenant"], s["action"]) for s in doc["schedules"]} == {(tenant, "created"), (other, "created")}

    second = _cli("setup", env=env)
    assert second.returncode == 0, second.stderr
    assert "nothing to change" in second.stdout
    assert "created" not in second.stdout and "updated" not in second.stdout and "registered" not in second.stdout
    again = json.loads(_cli("setup", "--json", env=env).stdout)
    assert again["changed"] is False and again["search_attributes"]["added"] == []
    assert {s["action"] for s in again["schedules"]} == {"unchanged"}

    # A changed setting updates the schedule in place (and only that tenant's, with --tenant).
    third = json.loads(_cli("setup", "--json", "--tenant", tenant, env={**env, "COMPACTOR_SWEEP_EVERY": "2h"}).stdout)
    assert [(s["tenant"], s["action"], s["changed"]) for s in third["schedules"]] == [(tenant, "updated", ["interval"])]
    desc = await client.get_schedule_handle(f"compactor-sweep-{tenant}").describe()
    assert [i.every.total_seconds() for i in desc.schedule.spec.intervals] == [7200]

    worker = subprocess.Popen([sys.executable, "-m", "compactor", "worker"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        out = _cli("compact", session, "--tenant", tenant, "--policy", "codex", "--window", "12000",
                   "--max-output", "2000", "--json", env=env)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["status"] == "committed"

        budget_session = session + "-b"
        SessionLog(store, tenant, budget_session).append(coding_session(rounds=30))
        res = await cc.ensure_budget(budget_session, window=12_000, max_output=2_000)
        assert res.action in ("started", "waited") and res.workflow_id
        from activities.contracts import CompactSessionOutput

        final = await client.get_workflow_handle(res.workflow_id, result_type=CompactSessionOutput).result()
        assert final.status == "committed"
        listed = await cc.compactions(tenant=tenant)  # the search attributes filter for real
        assert len(listed) == 2
    finally:
        worker.terminate()
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    assert "Traceback" not in (worker.stderr.read() if worker.stderr else "")


def test_setup_names_a_missing_namespace(stock_temporal, tmp_path):
    env = process_env(TEMPORAL_ADDRESS=stock_temporal, COMPACTOR_STORE=f"file://{tmp_path}/store")
    p = _cli("setup", "--namespace", "no-such-ns", env=env)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "no-such-ns" in p.stderr and "does not exist" in p.stderr
    jp = _cli("setup", "--namespace", "no-such-ns", "--json", env=env)
    assert jp.returncode == 2 and json.loads(jp.stdout)["error"]["code"] == "not_found"


def test_a_connection_failure_is_one_line_naming_the_address(tmp_path):
    from workers.devstack import free_port

    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    env = process_env(COMPACTOR_STORE=f"file://{tmp_path}/store")
    t0 = time.monotonic()
    for cmd in (["setup", "--address", address], ["worker", "--address", address]):
        p = _cli(*cmd, env=env, timeout=90)
        assert p.returncode == 1, (cmd, p.returncode, p.stderr)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) <= 2 and lines[-1].startswith("compactor: error: cannot reach Temporal at " + address), p.stderr
        assert "tonic" not in p.stderr and "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 80
