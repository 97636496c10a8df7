"""A worker bound to tenants refuses other tenants' workflow and activity inputs before they run."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.worker import ExecuteActivityInput, ExecuteWorkflowInput

from activities.breaker import BreakerCheckInput
from activities.contracts import (
    CompactSessionInput,
    PlanInput,
    PolicyRef,
    RecordInput,
    SnapshotRef,
    SweepInput,
)
from compactor.records import CompactionRecord
from workers.settings import Settings
from workers.tenant_guard import TenantGuard, tenants_in
from workers.worker import _tenant_guard


class _Next:
    def __init__(self) -> None:
        self.ran = 0

    async def execute_activity(self, input):
        self.ran += 1
        return "ran"

    async def execute_workflow(self, input):
        self.ran += 1
        return "ran"


def _snap(tenant: str) -> SnapshotRef:
    return SnapshotRef(tenant=tenant, session="s", version=3, etag="e")


def test_tenant_is_found_in_every_payload_shape():
    rec = CompactionRecord(id="r", tenant="B", session="s", workflow_id="w", trigger="t",
                           policy="default", summarizer="structured", status="running")
    assert tenants_in([CompactSessionInput(tenant="A", session="s")]) == {"A"}
    assert tenants_in([PlanInput(snapshot=_snap("B"), policy=PolicyRef(), plan_key="k")]) == {"B"}
    assert tenants_in([RecordInput(record=rec)]) == {"B"}
    assert tenants_in([SweepInput(tenant="C")]) == {"C"}
    assert tenants_in([BreakerCheckInput(tenant="D", session="s", trigger="x")]) == {"D"}
    from activities.contracts import FinishStructuredInput, LiftInput, SummarizeInput, ValidateInput

    one_step = FinishStructuredInput(
        lift=LiftInput(snapshot=_snap("E"), covers_end=2, state_key="k"),
        summarize=SummarizeInput(tenant="F", session="s", snapshot_version=3, covers_end=2,
                                 prev_checkpoint=None, state_key="k", budget_tokens=1, model="structured",
                                 mode="template", output_key="o"),
        check=ValidateInput(snapshot=_snap("E"), policy=PolicyRef(), plan_key="p", layers_key="l",
                            state_key="k", summary_key="o", candidate_key="c", covers_end=2))
    assert tenants_in([one_step]) == {"E", "F"}  # every part's tenant: a mixed one is refused
    from activities.contracts import CommitInput, CommitRecordInput, ExternalizeFinishInput, ExternalizeInput

    commit_record = CommitRecordInput(commit=CommitInput(snapshot=_snap("G"), policy=PolicyRef(), candidate_key="c"),
                                      record=rec)
    assert tenants_in([commit_record]) == {"G", "B"}
    ext_finish = ExternalizeFinishInput(
        externalize=ExternalizeInput(snapshot=_snap("H"), policy=PolicyRef(), plan_key="p", layers_key="l"),
        prefix="w/", tenant="B", session="s", tokens_before=1)
    assert tenants_in([ext_finish]) == {"H", "B"}


@pytest.mark.parametrize("arg", [
    CompactSessionInput(tenant="B", session="s"),
    PlanInput(snapshot=_snap("B"), policy=PolicyRef(), plan_key="k"),
    "no tenant at all",
])
async def test_activity_of_another_tenant_is_refused_non_retryable(arg):
    nxt = _Next()
    guard = TenantGuard(["A"]).intercept_activity(nxt)  # type: ignore[arg-type]
    with pytest.raises(ApplicationError) as exc:
        await guard.execute_activity(ExecuteActivityInput(fn=lambda x: x, args=[arg], executor=None, headers={}))
    assert exc.value.type == "TenantNotAllowed" and exc.value.non_retryable
    assert nxt.ran == 0


async def test_bound_tenants_activity_and_workflow_run():
    tg = TenantGuard(["A", "B"])
    nxt = _Next()
    act = tg.intercept_activity(nxt)  # type: ignore[arg-type]
    assert await act.execute_activity(
        ExecuteActivityInput(fn=lambda x: x, args=[_snap("B")], executor=None, headers={})) == "ran"
    wf = tg.workflow_interceptor_class(None)(nxt)  # type: ignore[arg-type]
    inp = ExecuteWorkflowInput(type=object, run_fn=lambda: None, args=[CompactSessionInput(tenant="A", session="s")], headers={})
    assert await wf.execute_workflow(inp) == "ran"
    bad = ExecuteWorkflowInput(type=object, run_fn=lambda: None, args=[SweepInput(tenant="C")], headers={})
    with pytest.raises(ApplicationError) as exc:
        await wf.execute_workflow(bad)
    assert exc.value.type == "TenantNotAllowed" and nxt.ran == 2


def test_only_a_worker_with_tenants_gets_the_guard():
    assert _tenant_guard(Settings(), "q") == []
    (guard,) = _tenant_guard(Settings(tenants=["A"]), "q-a")
    assert guard.allowed == frozenset({"A"})
