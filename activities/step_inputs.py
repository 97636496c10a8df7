"""What the compaction workflow asks of each step: every activity's input model (each names the
frozen snapshot, ``step_results.SnapshotRef``, and most the policy, ``PolicyRef``), and the
finish input the workflow derives after externalize (``finish_structured_input``), which
externalize_finish derives the same way.

Recorded in history: new fields optional with defaults, nothing renamed (``contracts``'
docstring); imported through ``activities.contracts``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from activities.contract_base import _cfg
from activities.step_results import ExternalizeOutput, SnapshotRef
from compactor.records import CompactionRecord


class PolicyRef(BaseModel):
    """Everything ``policy.make_policy`` needs, plus the target."""

    model_config = _cfg()

    preset: str = "default"
    window: int = 200_000
    max_output: int = 32_000
    configured: int | None = None
    target_tokens: int | None = None


class FreezeInput(BaseModel):
    model_config = _cfg()

    tenant: str
    session: str
    check_breaker: bool = Field(
        default=False,
        description="Check the session's circuit breaker for ``trigger`` first (one local "
        "activity instead of two; workflows since the ``breaker-in-steps`` patch).",
    )
    trigger: str = "manual"
    plan_policy: PolicyRef | None = Field(
        default=None,
        description="Plan the compaction too, with this policy (SnapshotRef.plan; workflows since "
        "the ``freeze-plans`` patch): one local activity instead of two, the view counted once.",
    )
    plan_summarizer: str = Field(default="structured", description="For the work prefix's params hash.")
    plan_model: str = Field(default="", description="For the work prefix's params hash.")
    finish_now: datetime | None = Field(
        default=None,
        description="With plan_policy (structured summarizer): when the plan needs a compaction, run "
        "externalize_finish too, with this ``now`` (the run's start time), under the run's work "
        "prefix (SnapshotRef.finished; workflows since the ``freeze-finishes`` patch): one local "
        "activity instead of two.",
    )
    commit_as: CompactionRecord | None = Field(
        default=None,
        description="With finish_now: when the structured candidate validates, commit it and write "
        "the record of the committed run, this record completed (``freeze_commit``); "
        "SnapshotRef.committed; workflows since the ``freeze-commits`` patch, no approval asked.",
    )
    max_merges: int = Field(default=20, description="For the commit (CommitInput.max_merges).")


class PlanInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    plan_key: str = Field(description="Where the full plan JSON is written.")


class ExternalizeInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    plan_key: str
    layers_key: str = Field(description="Where the layer result (replacements) is written.")
    now: datetime | None = Field(default=None, description="created_at of the checkpoint (workflow time).")


class LiftInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    covers_end: int
    prev_checkpoint: str | None = None
    plan_key: str = ""
    layers_key: str = ""
    state_key: str


class SummarizeInput(BaseModel):
    """Input of every summarizer activity (structured, anthropic template, anthropic native).

    The activity reads the LiftedState JSON at ``state_key`` and the covered events
    (``prev_checkpoint``'s end + 1 .. ``covers_end``) from the store, and writes
    ``{"summary": str, "sections": {...}, "native": dict | null}`` JSON to ``output_key``.
    """

    model_config = _cfg()

    tenant: str
    session: str
    snapshot_version: int
    covers_end: int
    prev_checkpoint: str | None
    prev_checkpoint_sha256: str | None = Field(
        default=None, description="Digest the head recorded for prev_checkpoint (verified on read)."
    )
    state_key: str
    budget_tokens: int
    model: str
    mode: Literal["template", "native"]
    output_key: str
    latest_full: bool = Field(
        default=False, description="The cut passes the latest request (mid-turn): the view quotes it "
        "in full after the summary, so the model's budget leaves room for it.",
    )


class ValidateInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    plan_key: str
    layers_key: str
    state_key: str
    summary_key: str
    checkpoint_id: str = Field(default="", description="'' = the layer candidate's id.")
    candidate_key: str = Field(description="Where the candidate Checkpoint JSON is written.")
    summarizer: str = "structured"
    covers_end: int


class CommitInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    candidate_key: str
    max_merges: int = 20


class RecordInput(BaseModel):
    model_config = _cfg()

    record: CompactionRecord
    mark_noop: bool = Field(
        default=False,
        description="The run could not shrink the view: note it on the head (noop_view_tokens) "
        "so sweeps and ensure_budget wait until the view has grown.",
    )
    count_breaker: bool = Field(
        default=False,
        description="Also count the run on the session's circuit breaker (what record_breaker "
        "does; workflows since the ``breaker-in-steps`` patch). Never fails the record.",
    )


# --- the combined steps' inputs (issue 17) -----------------------------------------------------


class FinishStructuredInput(BaseModel):
    """lift_state + summarize_structured + validate_candidate as one local activity: the three
    inputs the separate steps take, run in that order by one worker (each still writes its
    work object, so the objects a run leaves are the same)."""

    model_config = _cfg()

    lift: LiftInput
    summarize: SummarizeInput
    check: ValidateInput


class ExternalizeFinishInput(BaseModel):
    """externalize + finish_structured as one local activity (structured summarizer): the
    externalize input, and what the workflow derives the finish inputs from besides
    externalize's output (``finish_structured_input``)."""

    model_config = _cfg()

    externalize: ExternalizeInput
    prefix: str = Field(description="The run's work prefix (contracts.work_prefix).")
    tenant: str
    session: str
    tokens_before: int = Field(description="The plan's view size: layers that do not shrink below it end noop.")


def finish_follows(inp: ExternalizeFinishInput, ext: ExternalizeOutput) -> bool:
    """Whether finish_structured follows externalize: the layers summarize and shrink the view
    (else the workflow goes on as after externalize alone: noop, or validation without a summary)."""
    return bool(ext.layers) and ext.tokens_after < inp.tokens_before and "summary" in ext.layers


def finish_structured_input(inp: ExternalizeFinishInput, ext: ExternalizeOutput) -> FinishStructuredInput:
    """The finish_structured input the workflow builds after externalize (structured summarizer):
    lift, structured summary and validation of the layer candidate, under the run's work prefix."""
    e, prefix = inp.externalize, inp.prefix
    snap = e.snapshot
    state_key = prefix + "state.json"
    summary_key = f"{prefix}summary-structured.json"
    return FinishStructuredInput(
        lift=LiftInput(snapshot=snap, covers_end=ext.covers_end, prev_checkpoint=snap.checkpoint,
                       plan_key=e.plan_key, layers_key=ext.layers_key, state_key=state_key),
        summarize=SummarizeInput(
            tenant=inp.tenant, session=inp.session, snapshot_version=snap.version, covers_end=ext.covers_end,
            prev_checkpoint=snap.checkpoint, prev_checkpoint_sha256=snap.checkpoint_sha256, state_key=state_key,
            budget_tokens=ext.summary_budget, model="structured", mode="template", output_key=summary_key,
            latest_full=ext.mid_turn),
        check=ValidateInput(
            snapshot=snap, policy=e.policy, plan_key=e.plan_key, layers_key=ext.layers_key, state_key=state_key,
            summary_key=summary_key, checkpoint_id="", candidate_key=f"{prefix}candidate-structured.json",
            summarizer="structured", covers_end=ext.covers_end),
    )


class CommitRecordInput(BaseModel):
    """commit_swap + write_record as one local activity: the commit, then the record of the
    committed run (``committed_record`` of ``record`` and the commit's output), written and
    counted on the breaker by the same worker. A retry whose commit went through takes
    commit_swap's own-commit path, then writes the record."""

    model_config = _cfg()

    commit: CommitInput
    record: CompactionRecord = Field(
        description="The run's record before the commit (durations and attempts of the steps so far).")
    count_breaker: bool = True

