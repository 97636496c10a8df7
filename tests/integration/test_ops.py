"""Operator commands on a real dev server: inspect, rollback, history timeline, replay, sweep."""

from __future__ import annotations

import json

import pytest

from activities.contracts import (
    SWEEP_WORKFLOW_NAME,
    CompactSessionOutput,
    PolicyRef,
    SweepInput,
    SweepOutput,
)
from compactor.cli import main
from compactor.cli.history import render_timeline, timeline
from compactor.client import CompactorClient
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session, new_ids, running_worker

pytestmark = pytest.mark.integration


async def test_inspect_rollback_history_replay(temporal_address, tmp_path, task_queue, capsys):
    url = f"file://{tmp_path}/store"
    store = open_store(url)
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        out = await cc.compact(session, target_tokens=4_000)
        history = await client.get_workflow_handle(f"compact/{tenant}/{session}").fetch_history()

    steps = timeline(history)
    names = [s["step"] for s in steps]
    # lift_state + summarize_structured + validate_candidate run as one step with the
    # structured summarizer (workflows/compact_session.ONE_STEP_PATCH), freeze_snapshot plans too
    # (FREEZE_PLAN_PATCH), externalize + that step are one (EXTERNALIZE_FINISH_PATCH), and so are
    # commit_swap + write_record (COMMIT_RECORD_PATCH), freeze_snapshot runs externalize_finish
    # (FREEZE_FINISH_PATCH) and commit_record (FREEZE_COMMIT_PATCH) too; the record keeps the parts.
    assert [n for n in names if n != "workflow"] == ["freeze_snapshot"]
    assert {"plan_compaction", "externalize", "lift_state", "summarize_structured", "validate_candidate",
            "commit_swap"} <= set(out.record.durations_ms)
    freeze = next(s for s in steps if s["step"] == "freeze_snapshot")
    assert freeze["outcome"] == "completed" and freeze["attempts"] == 1 and freeze["ms"] >= 0
    assert "commit and record" in freeze["summary"]
    assert "workflow" in render_timeline(history)

    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    from workflows.compact_session import CompactSessionWorkflow

    await Replayer(workflows=[CompactSessionWorkflow],
                   data_converter=pydantic_data_converter).replay_workflow(history)

    base = ["--store", url, "--tenant", tenant]
    assert main(["inspect", session, "--json", *base]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["head"]["checkpoint"] == out.checkpoint
    assert [r["status"] for r in doc["records"]] == ["committed"]

    view_before = log.read_view()
    assert main(["rollback", session, "--to", "none", *base]) == 0
    assert log.head().checkpoint is None
    assert len(log.read_view()) == log.head().version > len(view_before)  # full log back
    assert main(["rollback", session, "--to", out.checkpoint, *base]) == 0
    assert [e.model_dump() for e in log.read_view()] == [e.model_dump() for e in view_before]
    assert main(["rollback", session, "--to", "ck-doesnotexist", *base]) != 0
    statuses = [r.status for r in log.list_records()]
    assert statuses.count("rolled_back") == 2


async def test_sweep_compacts_only_sessions_over_trigger(temporal_address, tmp_path, task_queue):
    store = open_store(f"file://{tmp_path}/store")
    tenant, big = new_ids()
    small = big + "-small"
    SessionLog(store, tenant, big).append(coding_session(rounds=30))
    SessionLog(store, tenant, small).append(coding_session(rounds=2))
    async with running_worker(temporal_address, store, task_queue) as client:
        out = await client.execute_workflow(
            SWEEP_WORKFLOW_NAME,
            SweepInput(tenant=tenant, policy=PolicyRef(preset="codex", window=12_000, max_output=2_000)),
            id=f"sweep/{tenant}", task_queue=task_queue, result_type=SweepOutput,
        )
        assert out.scanned == 2 and out.started == [big]
        res = await client.get_workflow_handle(
            f"compact/{tenant}/{big}", result_type=CompactSessionOutput).result()
    assert res.status == "committed"
    assert SessionLog(store, tenant, small).head().checkpoint is None
