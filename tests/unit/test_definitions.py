"""What Temporal knows the workflows and activities by stays the same whichever module the code
lives in (session 20 split the workflow and activity modules): the workflow's name, its signals
and query, its payload types, every activity's name and payload types - recorded in history and
used by running workflows and clients. And the workflow modules import what they share with the
worker (contracts, domain) through the sandbox's pass-through, so a sandboxed run sees the same
classes as the worker that decodes its payloads.
"""

from __future__ import annotations

import ast
from pathlib import Path

from temporalio import activity, workflow

from activities import contracts as c
from activities.breaker import BreakerActivities
from activities.composed import compose_commit_record, compose_externalize_finish, compose_finish_structured
from activities.store_activities import StoreActivities
from workflows.compact_session import CompactSessionWorkflow
from workflows.sweep import SweepSessionsWorkflow

ROOT = Path(__file__).resolve().parents[2]


def test_the_workflows_keep_their_names_signals_queries_and_payloads():
    d = workflow._Definition.must_from_class(CompactSessionWorkflow)
    assert (d.name, sorted(d.signals), sorted(d.queries), sorted(d.updates)) == (
        "CompactSessionWorkflow", ["reject", "resume"], ["status"], [])
    assert (d.arg_types, d.ret_type) == ([c.CompactSessionInput], c.CompactSessionOutput)
    s = workflow._Definition.must_from_class(SweepSessionsWorkflow)
    assert (s.name, s.arg_types, s.ret_type) == ("SweepSessionsWorkflow", [c.SweepInput], c.SweepOutput)


def test_the_activities_keep_their_names_and_payloads(tmp_path):
    from compactor.store import open_store

    acts = StoreActivities(open_store(f"file://{tmp_path}")).activities()
    defs = [activity._Definition.must_from_callable(a) for a in acts]
    assert [(str(d.name), d.arg_types, d.ret_type) for d in defs] == [
        ("freeze_snapshot", [c.FreezeInput], c.SnapshotRef),
        ("plan_compaction", [c.PlanInput], c.PlanOutput),
        ("externalize", [c.ExternalizeInput], c.ExternalizeOutput),
        ("lift_state", [c.LiftInput], c.LiftOutput),
        ("summarize_structured", [c.SummarizeInput], c.SummarizeOutput),
        ("validate_candidate", [c.ValidateInput], c.ValidateOutput),
        ("finish_structured", [c.FinishStructuredInput], c.FinishStructuredOutput),
        ("externalize_finish", [c.ExternalizeFinishInput], c.ExternalizeFinishOutput),
        ("commit_swap", [c.CommitInput], c.CommitOutput),
        ("write_record", [c.RecordInput], c.RecordOutput),
        ("commit_record", [c.CommitRecordInput], c.CommitRecordOutput),
        ("list_due_sessions", [c.SweepInput], c.DueSessions),
    ]
    composed = [compose_finish_structured(*[None] * 3), compose_externalize_finish(None, None),
                compose_commit_record(None, None)]
    assert [str(activity._Definition.must_from_callable(a).name) for a in composed] == [
        "finish_structured", "externalize_finish", "commit_record"]
    breaker = [activity._Definition.must_from_callable(a).name
               for a in (BreakerActivities.check_breaker, BreakerActivities.record_breaker)]
    assert breaker == ["check_breaker", "record_breaker"]


# Imported by workflow modules outside the pass-through block: the sandbox's own or stateless.
_SANDBOX_OWN = ("__future__", "asyncio", "datetime", "typing", "temporalio", "workflows")


def test_workflow_modules_pass_the_shared_modules_through_the_sandbox():
    """Every import of a workflow module other than the standard library's basics, temporalio's
    and the workflows' own sits in ``workflow.unsafe.imports_passed_through()``: imported
    again in the sandbox, a contract would be a class of its own there."""
    bad = []
    for path in sorted((ROOT / "workflows").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            bad += [f"{path.name}: {n}" for n in names if n.split(".")[0] not in _SANDBOX_OWN]
    assert not bad, f"imports outside workflow.unsafe.imports_passed_through(): {bad}"


def test_the_split_modules_stay_within_the_house_limit():
    """No module of workflows/, activities/ or workers/ over ~600 lines (STYLE: new machinery
    goes in a module of its own)."""
    over = sorted(f"{p.relative_to(ROOT)}: {n}" for pkg in ("workflows", "activities", "workers")
                  for p in (ROOT / pkg).glob("*.py") if (n := len(p.read_text().splitlines())) > 620)
    assert not over, over
