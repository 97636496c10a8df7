"""CompactSessionWorkflow end to end on a real Temporal dev server and a real S3 endpoint (moto).

Each test runs its own worker on its own task queue, with its own tenant/session ids.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from temporalio import activity

from activities.contracts import (
    CompactSessionOutput,
    CompactStatus,
    ErrorType,
    SummarizeInput,
    SummarizeOutput,
)
from compactor.client import CompactorClient, workflow_id_for
from compactor.engine.compact import compact
from compactor.events import Event, TextBlock, ToolResultBlock
from compactor.lifting.lift import LiftedState
from compactor.engine.measure import view_tokens as estimate_context_tokens
from compactor.engine.policy import make_policy
from compactor.store import SessionLog
from compactor.store.s3 import S3Store
from tests.integration.durable_support import (
    coding_session,
    new_ids,
    running_worker,
    save_history,
)

pytestmark = pytest.mark.integration

SAMPLE = "compactor/samples/demo-session.claude.jsonl"


@pytest.fixture
def store(s3_endpoint, s3_bucket):
    return S3Store(s3_bucket, "compactor", endpoint_url=s3_endpoint)


def _dump(view: list[Event]) -> list[dict]:
    return [e.model_dump(mode="json") for e in view]


async def _status(client, wf_id: str) -> CompactStatus:
    return await client.get_workflow_handle(wf_id).query("status", result_type=CompactStatus)


async def _wait_paused(client, wf_id: str, timeout: float = 30.0) -> CompactStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = await _status(client, wf_id)
        if st.waiting_for_resume:
            return st
        await asyncio.sleep(0.1)
    raise AssertionError(f"workflow {wf_id} never paused before commit (last: {st})")


@pytest.mark.parametrize("source", ["sample", "synthetic"])
async def test_durable_view_equals_inline_view(temporal_address, store, task_queue, source):
    from compactor.importers import import_file

    tenant, session = new_ids()
    if source == "sample":
        events = import_file(SAMPLE).events
        target = 3_000  # forces the summary layer on the bundled sample
    else:
        events = coding_session()
        target = 4_000
    log = SessionLog(store, tenant, session)
    log.append(events)
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        out: CompactSessionOutput = await cc.compact(session, target_tokens=target)
        await save_history(client, workflow_id_for(tenant, session), f"compact-{source}")
        durable_view = await cc.view(session)

    assert out.status == "committed"
    assert "summary" in out.record.layers
    assert out.record.tokens_after < out.record.tokens_before
    stored = log.read_events()
    inline = compact(stored, make_policy("default"), target, tenant=tenant, session=session)
    assert inline.checkpoint is not None and out.checkpoint == inline.checkpoint.id
    assert _dump(durable_view) == _dump(inline.view)
    # The record is persisted beside the session, with per-step durations.
    [rec] = log.list_records()
    assert rec.status == "committed" and rec.checkpoint == out.checkpoint
    for step in ("freeze_snapshot", "plan_compaction", "externalize", "lift_state",
                 "summarize_structured", "validate_candidate", "commit_swap"):
        assert step in rec.durations_ms
    # Search attributes are set for operators.
    desc = await client.get_workflow_handle(workflow_id_for(tenant, session)).describe()
    sa = {k.name: v for k, v in ((p.key, p.value) for p in desc.typed_search_attributes)}
    assert sa["CompactorTenant"] == tenant and sa["CompactorStatus"] == "committed"
    assert sa["CompactorTokensAfter"] == out.record.tokens_after


async def test_merge_events_appended_mid_compaction(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    v0 = log.head().version
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        handle = await cc.start_compaction(session, target_tokens=4_000, pause_before_commit=True)
        await _wait_paused(client, handle.id)
        # The agent keeps going: the pending call's result, then the late result of the
        # abandoned deploy (an action the lifted state marked unknown), then a new turn.
        appended = [
            Event(id="late-1", role="user", blocks=[
                ToolResultBlock(tool_use_id="toolu_efinal01", content=[TextBlock(text="12 passed")]),
                ToolResultBlock(tool_use_id="toolu_edeploy01",
                                content=[TextBlock(text="deployed to staging, exit 0")]),
            ]),
            Event(id="late-2", role="assistant", blocks=[TextBlock(text="All 12 tests pass.")]),
        ]
        log.append(appended)
        assert log.head().checkpoint is None  # nothing swapped while held
        await handle.signal("resume")
        out = await handle.result()
        await save_history(client, handle.id, "compact-merge")
    assert out.status == "committed"
    assert out.record.conflicts_merged == 1
    assert out.record.reconciled == ["toolu_edeploy01"]
    head = log.head()
    assert head.version == v0 + 2 and head.checkpoint == out.checkpoint
    view = log.read_view()
    ckpt = log.current_checkpoint()
    seqs = [e.seq for e in view if e.seq > ckpt.covers.end]
    # every event after the checkpoint exactly once, in order, including the appended ones
    assert seqs == list(range(ckpt.covers.end + 1, head.version + 1))
    state = LiftedState.model_validate(ckpt.state)
    assert "toolu_edeploy01" not in {u.tool_use_id for u in state.unknown_actions}
    assert any(c.tool_use_id == "toolu_edeploy01" for c in state.commands)
    assert "toolu_edeploy01" not in ckpt.summary or "unknown" not in ckpt.summary.split("toolu_edeploy01")[0][-80:]


async def test_failing_summarizer_leaves_session_untouched(temporal_address, store, task_queue):
    @activity.defn(name="summarize_structured")
    async def broken(inp: SummarizeInput) -> SummarizeOutput:
        raise ApplicationError("summarizer model file is corrupt", type=ErrorType.SUMMARIZER_FAILED,
                               non_retryable=True)

    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    before = log.head()
    async with running_worker(temporal_address, store, task_queue, extra_activities=[broken]) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as info:
            await cc.compact(session, target_tokens=4_000)
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == ErrorType.SUMMARIZER_FAILED
    assert "summarize_structured" in cause.message and "corrupt" in cause.message
    after = log.head()
    assert after.etag == before.etag and after.checkpoint is None
    assert log.list_checkpoints() == []
    [rec] = log.list_records()
    assert rec.status == "failed" and "corrupt" in (rec.error or "")


async def test_invalid_summary_is_rejected_by_validator(temporal_address, store, task_queue):
    """A summary that drops the user's constraints fails validation; nothing is swapped."""
    @activity.defn(name="summarize_structured")
    async def careless(inp: SummarizeInput) -> SummarizeOutput:
        store.put(inp.output_key, b'{"summary": "Everything is done.", "sections": {}, "native": null}')
        return SummarizeOutput(output_key=inp.output_key, summary_tokens=4, model="careless")

    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    before = log.head()
    async with running_worker(temporal_address, store, task_queue, extra_activities=[careless]) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as info:
            await cc.compact(session, target_tokens=4_000)
        await save_history(client, workflow_id_for(tenant, session), "compact-invalid-summary")
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == ErrorType.INVARIANT_VIOLATION
    assert "constraint_dropped" in cause.message
    assert log.head().etag == before.etag and log.head().checkpoint is None


async def test_llm_summarizer_unavailable_falls_back_to_structured(
    temporal_address, store, task_queue, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue,
                             llm_task_queue=task_queue + "-llm", summarizer="anthropic")
        out = await cc.compact(session, target_tokens=4_000)
        await save_history(client, workflow_id_for(tenant, session), "compact-llm-fallback")
    assert out.status == "committed"
    assert out.record.summarizer == "structured"
    assert out.record.fallback_reason and "anthropic" in out.record.fallback_reason


async def test_two_concurrent_requests_make_one_compaction(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        h1, h2 = await asyncio.gather(
            cc.start_compaction(session, target_tokens=4_000),
            cc.start_compaction(session, target_tokens=4_000),
        )
        assert h1.id == h2.id and h1.result_run_id == h2.result_run_id
        r1, r2 = await asyncio.gather(h1.result(), h2.result())
    assert r1 == r2 and r1.status == "committed"
    assert len(log.list_checkpoints()) == 1
    assert len(log.list_records()) == 1


async def test_noop_when_view_fits(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session(rounds=3))
    before = log.head()
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        out = await cc.compact(session, target_tokens=100_000)
        await save_history(client, workflow_id_for(tenant, session), "compact-noop")
    assert out.status == "noop" and out.checkpoint is None
    assert log.head().etag == before.etag


async def test_ensure_budget_soft_returns_at_once_hard_waits(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session(rounds=30, pending_last=False))
    tokens = estimate_context_tokens(log.read_view())
    assert tokens > 13_000
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        # Far below the trigger: nothing happens.
        r = await cc.ensure_budget(session, window=64_000, max_output=4_000)
        assert r.action == "none" and r.tokens == tokens and r.workflow_id is None
        # Past the soft trigger: a background compaction starts, the current view comes back.
        r = await cc.ensure_budget(session, window=24_000, max_output=4_000)
        assert r.need == "soft" and r.action == "started" and r.tokens == tokens
        first = await client.get_workflow_handle(r.workflow_id, result_type=CompactSessionOutput).result()
        assert first.status == "committed"
        assert estimate_context_tokens(log.read_view()) < tokens
        # The session grows past the hard limit: the next call waits for the compaction.
        log.append(coding_session(rounds=30, pending_last=False, prefix="g"))
        grown = estimate_context_tokens(log.read_view())
        r = await cc.ensure_budget(session, window=20_000, max_output=4_000)
        assert r.need == "hard" and r.action == "waited"
        assert r.result.status == "committed" and r.result.checkpoint != first.checkpoint
        assert r.tokens < grown


async def test_large_payloads_go_to_s3_external_storage(temporal_address, store, task_queue):
    """With the S3 driver wired, payloads at or over the threshold live in the bucket and
    history holds only a claim; threshold 0 offloads every payload."""
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    async with running_worker(temporal_address, store, task_queue, payload_threshold=0) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        out = await cc.compact(session, target_tokens=4_000)
        history = await client.get_workflow_handle(workflow_id_for(tenant, session)).fetch_history()
    assert out.status == "committed" and log.head().checkpoint == out.checkpoint
    keys = store.client.list_objects_v2(Bucket=store.bucket, Prefix="v0/").get("Contents", [])
    assert keys, "no payload was stored in S3"
    started = history.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    assert b"tenant" not in started.data  # the input itself is a claim, not the payload


async def test_held_swap_rejected_or_timed_out_leaves_session_untouched(temporal_address, store, task_queue):
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    before = log.head()
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        handle = await cc.start_compaction(session, target_tokens=4_000, pause_before_commit=True)
        await _wait_paused(client, handle.id)
        await handle.signal("reject", "summary reviewed: too lossy")
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        assert info.value.cause.type == ErrorType.NOT_APPROVED
        assert "too lossy" in info.value.cause.message
        await save_history(client, handle.id, "compact-held-rejected")
        handle = await cc.start_compaction(session, target_tokens=4_000, pause_before_commit=True,
                                           approval_timeout_s=1)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        assert info.value.cause.type == ErrorType.NOT_APPROVED
    assert log.head().etag == before.etag and log.list_checkpoints() == []
    assert [r.status for r in log.list_records()] == ["failed", "failed"]
    # an operator's "no" is not a failing compaction: the circuit breaker counts neither
    state = await cc.breaker(session)
    assert state.consecutive_failures == 0 and not state.open


async def test_unknown_session_fails_with_not_found_and_writes_nothing(temporal_address, store, task_queue):
    tenant, session = new_ids()
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as info:
            await cc.compact(session)
    assert info.value.cause.type == ErrorType.NOT_FOUND
    assert "freeze_snapshot" in info.value.cause.message and "no events" in info.value.cause.message
    assert store.list(f"t/{tenant}/") == []


def _markers(history) -> tuple[list[str], list[str]]:
    """(local activities, patch ids) recorded in a history, in order."""
    from compactor.cli.history import timeline

    steps = [s["step"] for s in timeline(history) if s["step"] != "workflow"]
    patches = []
    for ev in history.events:
        if ev.HasField("marker_recorded_event_attributes"):
            m = ev.marker_recorded_event_attributes
            if m.marker_name == "core_patch":
                patches.append(json.loads(m.details["patch-data"].payloads[0].data)["id"])
    return steps, patches


async def test_breaker_is_checked_by_freeze_and_counted_by_the_record(temporal_address, store, task_queue):
    """A committing run makes one step and one patch marker (workflows/compact_session.
    FREEZE_COMMIT_PATCH, which implies FREEZE_FINISH_PATCH, COMMIT_RECORD_PATCH,
    EXTERNALIZE_FINISH_PATCH, FREEZE_PLAN_PATCH and STEPS_PATCH; freeze_snapshot plans, runs
    externalize and finish_structured, then commit_swap and write_record; the record keeps every
    part's duration): the breaker is still checked before anything is read and counted after the record - three
    failed automatic runs open it, the fourth is refused with the session untouched, a manual
    run goes through and closes it."""
    tenant, session = new_ids()
    log = SessionLog(store, tenant, session)
    log.append(coding_session())
    head_key = f"t/{tenant}/s/{session}/head.json"
    good, _ = store.get(head_key)
    async with running_worker(temporal_address, store, task_queue) as client:
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        store.put(head_key, b"{not a head")
        for _ in range(3):
            with pytest.raises(WorkflowFailureError):
                await cc.compact(session, target_tokens=4_000, trigger="sweep")
        state = await cc.breaker(session)
        assert state.open and state.consecutive_failures == 3
        refused = await cc.compact(session, target_tokens=4_000, trigger="sweep")
        assert refused.status == "noop" and "breaker" in (refused.record.error or "")
        assert store.get(head_key)[0] == b"{not a head"
        assert len(log.list_records()) == 4
        steps, patches = _markers(await client.get_workflow_handle(workflow_id_for(tenant, session)).fetch_history())
        # (the client asks for the newest path: CompactSessionInput.paths, no patch marker)
        assert steps == ["freeze_snapshot", "write_record"] and patches == []

        store.put(head_key, good)
        out = await cc.compact(session, target_tokens=4_000)  # manual: runs through an open breaker
        assert out.status == "committed"
        steps, patches = _markers(await client.get_workflow_handle(workflow_id_for(tenant, session)).fetch_history())
        assert steps == ["freeze_snapshot"]
        assert patches == []
        assert list(out.record.durations_ms) == ["freeze_snapshot", "plan_compaction", "externalize", "lift_state",
                                                 "summarize_structured", "validate_candidate", "commit_swap"]
        # the record the run returns is the one freeze_snapshot stored
        [stored] = [r for r in log.list_records() if r.id == out.record.id]
        assert stored.model_dump(exclude={"sha256"}) == out.record.model_dump(exclude={"sha256"})
        handle = client.get_workflow_handle(workflow_id_for(tenant, session))
        upserts = [sorted(e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)
                   for e in (await handle.fetch_history()).events
                   if e.HasField("upsert_workflow_search_attributes_event_attributes")]
        # the outcome at the end ("running", tenant and session were set by the client's start: not
        # upserted again; no patch marker, so no TemporalChangeVersion of the SDK's)
        assert upserts == [["CompactorStatus", "CompactorTokensAfter", "CompactorTokensBefore"]]
        sa = (await handle.describe()).search_attributes
        assert sa.get("CompactorTokensBefore") == [out.record.tokens_before] and sa.get("CompactorStatus") == ["committed"]
        state = await cc.breaker(session)
        assert not state.open and state.consecutive_failures == 0


async def test_a_client_that_does_not_ask_for_the_newest_path_gets_it_through_its_patch_marker(
    temporal_address, store, task_queue
):
    """An input without ``paths`` (a client older than FREEZE_COMMIT_PATCH's) takes the same path
    through the patch marker, as before: the same one step, the same checkpoint and record as a run
    the client starts (which records no marker). Both histories replay; so does the marker's with
    ``paths`` in its input (a worker older than ``paths`` ran a new client's run); the markerless
    one with ``paths`` taken out does not (the markers then decide, and there is none)."""
    from activities.contracts import WORKFLOW_PATHS, CompactSessionInput, CompactSessionOutput
    from workflows.compact_session import CompactSessionWorkflow

    results = {}
    async with running_worker(temporal_address, store, task_queue) as client:
        for paths in (0, WORKFLOW_PATHS):
            tenant, session = new_ids()
            SessionLog(store, tenant, session).append(coding_session())
            if paths:
                out = await CompactorClient(client, store, tenant=tenant, task_queue=task_queue).compact(
                    session, target_tokens=4_000)
            else:
                out = await client.execute_workflow(
                    CompactSessionWorkflow.run, CompactSessionInput(tenant=tenant, session=session, target_tokens=4_000),
                    id=workflow_id_for(tenant, session), task_queue=task_queue, result_type=CompactSessionOutput)
            history = await client.get_workflow_handle(workflow_id_for(tenant, session)).fetch_history()
            steps, patches = _markers(history)
            results[paths] = (out, steps, patches, history)
    old, new = results[0], results[WORKFLOW_PATHS]
    assert old[1] == new[1] == ["freeze_snapshot"]
    assert old[2] == ["freeze-commits"] and new[2] == []
    assert old[0].status == new[0].status == "committed"
    assert old[0].checkpoint == new[0].checkpoint  # (the same events: the same deterministic id)
    same = {"id", "tenant", "session", "workflow_id", "created_at", "durations_ms", "sha256", "checkpoint_sha256"}
    assert old[0].record.model_dump(exclude=same) == new[0].record.model_dump(exclude=same)
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    replayer = Replayer(workflows=[CompactSessionWorkflow], data_converter=pydantic_data_converter)
    for _, _, _, history in (old, new):
        await replayer.replay_workflow(history)

    def with_paths(history, paths):
        [payload] = history.events[0].workflow_execution_started_event_attributes.input.payloads
        doc = json.loads(payload.data)
        payload.data = json.dumps({**doc, "paths": paths}).encode()
        return history

    await replayer.replay_workflow(with_paths(old[3], WORKFLOW_PATHS))
    with pytest.raises(Exception, match="[Nn]ondetermin"):
        await replayer.replay_workflow(with_paths(new[3], 0))
