"""What the compaction's steps report: every activity's output model (``_Out``: attempt and ms),
the frozen snapshot (``SnapshotRef``, which carries the plan, finish and commit freeze_snapshot ran
when asked) and the record of a committed run (``committed_record``).

Why apart from the inputs (``step_inputs``): the snapshot is both every later step's input and
the carrier of their outputs, so the outputs and the snapshot sit together, below the inputs
that name the snapshot. Recorded in history: new fields optional with defaults, nothing renamed
(``contracts``' docstring); imported through ``activities.contracts``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from activities.contract_base import ActivityName, _cfg, _Out
from compactor.records import CompactionRecord


class OwnCommit(BaseModel):
    """A checkpoint an earlier execution of this workflow run committed (the head names the
    run: ``Head.checkpoint_run``), found when the run is executed again after a lost worker
    or a lost workflow task. The run reports it instead of planning again."""

    model_config = _cfg()

    checkpoint: str
    checkpoint_sha256: str | None = None
    committed_version: int = Field(default=0, description="Last seq the checkpoint was merged up to.")
    covers_end: int = 0
    summarizer: str = "structured"
    summary_tokens: int = 0
    tokens_before: int = Field(default=0, description="View tokens under the previous checkpoint at the commit.")
    tokens_after: int = Field(default=0, description="View tokens now.")
    record: CompactionRecord | None = Field(
        default=None, description="The record that execution stored, if it got that far."
    )
    record_key: str = ""


class PlanOutput(_Out):
    model_config = _cfg()

    needed: bool
    reason: str = ""
    covers_end: int = Field(default=0, description="k: the new checkpoint covers 1..k (0 = none).")
    layers: list[str] = Field(default_factory=list)
    tokens_before: int = 0
    target_tokens: int = 0
    retained_tail_tokens: int = 0
    covered_tokens: int = 0
    summary_budget: int = 0
    plan_key: str = ""


class ExternalizeOutput(_Out):
    model_config = _cfg()

    layers_key: str
    artifacts_written: int = 0
    replacements: int = 0
    freed_by_layer: dict[str, int] = Field(default_factory=dict)
    layers: list[str] = Field(default_factory=list)
    checkpoint_id: str = Field(default="", description="Deterministic id of the layer candidate.")
    covers_end: int = Field(default=0, description="Cut the summary ladder chose (k).")
    covered_tokens: int = 0
    summary_budget: int = Field(default=0, description="Tokens a summary may take.")
    tokens_after: int = 0
    retained_tail_tokens: int = 0
    mid_turn: bool = Field(default=False, description="The cut passes the latest request.")
    left_out: dict[str, int] = Field(default_factory=dict, description="Section -> items left out for space.")
    repaired: int = Field(default=0, description="Structured summary items dropped by the identifier repair.")


class LiftOutput(_Out):
    model_config = _cfg()

    state_key: str
    requests: int = 0
    constraints: int = 0
    unknown_actions: int = 0
    todos: int = 0


class SummarizeOutput(BaseModel):
    model_config = _cfg()

    output_key: str
    summary_tokens: int
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    attempts: int = 1
    dropped_rounds: int = 0


class ValidateOutput(_Out):
    model_config = _cfg()

    candidate_key: str
    checkpoint_id: str
    violations: list[str] = Field(default_factory=list, description="Blocking violations.")
    warnings: list[str] = Field(default_factory=list, description="Non-blocking (over_budget).")
    view_tokens: int = 0
    summary_tokens: int = 0
    repaired: int = Field(default=0, description="Summary items dropped by the identifier repair.")
    completed: list[str] = Field(
        default_factory=list, description="Sections a model summary was completed with from the state."
    )


class CommitOutput(_Out):
    model_config = _cfg()

    checkpoint_id: str
    committed_version: int
    checkpoint_sha256: str | None = Field(
        default=None, description="Digest of the committed checkpoint, as the head records it."
    )
    conflicts_merged: int = 0
    reconciled: list[str] = Field(default_factory=list)
    tokens_after: int = 0
    cas_attempts: int = 1


class RecordOutput(_Out):
    model_config = _cfg()

    key: str


# --- the combined steps' outputs (issue 17) ----------------------------------------------------


class FinishStructuredOutput(_Out):
    model_config = _cfg()

    lift: LiftOutput
    summarize: SummarizeOutput
    check: ValidateOutput
    summarize_ms: float = Field(default=0.0, description="Time of the summary part (lift and check carry their own ms).")


class ExternalizeFinishOutput(_Out):
    model_config = _cfg()

    externalize: ExternalizeOutput
    finish: FinishStructuredOutput | None = Field(
        default=None, description="None: no summary layer, or the view did not shrink (only externalize ran).")


class CommitRecordOutput(_Out):
    model_config = _cfg()

    commit: CommitOutput
    record: RecordOutput


# --- the snapshot: every later step's input, carrier of what freeze ran ------------------------


class SnapshotRef(_Out):
    """The frozen snapshot: head version + etag + metadata, no bodies."""

    model_config = _cfg()

    tenant: str
    session: str
    version: int = Field(description="Head version (= last seq) at the snapshot.")
    etag: str | None = Field(description="Head etag: the compare-and-swap precondition.")
    checkpoint: str | None = Field(default=None, description="Checkpoint the head pointed at.")
    checkpoint_sha256: str | None = Field(
        default=None,
        description="Digest the head recorded for that checkpoint; later steps verify it on read.",
    )
    prev_covers_end: int = Field(default=0, description="Last seq the previous checkpoint covers.")
    events: int = Field(default=0, description="Events in the log at the snapshot.")
    view_tokens: int = Field(default=0, description="Tokens of the current view.")
    tool_uses: int = 0
    pinned: int = 0
    own_commit: OwnCommit | None = Field(
        default=None, description="Set when this workflow run already committed (see OwnCommit)."
    )
    breaker_refused: str | None = Field(
        default=None,
        description="The circuit breaker refused this trigger (FreezeInput.check_breaker): the "
        "reason; nothing was read, version is 0.",
    )
    plan: PlanOutput | None = Field(
        default=None,
        description="plan_compaction's output for FreezeInput.plan_policy, its plan written under "
        "the run's work prefix; None when not asked, for an own commit, or when planning failed "
        "(the workflow then runs plan_compaction, which reports the failure).",
    )
    finished: ExternalizeFinishOutput | None = Field(
        default=None,
        description="externalize_finish's output for FreezeInput.finish_now, its work objects written "
        "under the run's work prefix; None when not asked, when the plan needs no compaction, or "
        "when a part failed or is replaced on this worker (the workflow then runs externalize_finish).",
    )
    committed: CommitRecordOutput | None = Field(
        default=None,
        description="commit_record's output for FreezeInput.commit_as (the record is "
        "``freeze_commit.record_before_commit`` of it, committed); None when not asked, when the "
        "candidate has violations, or when the commit failed (the workflow then runs commit_record).",
    )


def committed_record(record: CompactionRecord, commit: CommitOutput) -> CompactionRecord:
    """The record of a run whose commit_swap returned ``commit``: what the workflow records
    after a separate commit_swap step (its duration and attempt included), and what
    commit_record writes - both call this, so the stored and the returned record agree."""
    durations = {**record.durations_ms, str(ActivityName.COMMIT_SWAP): round(commit.ms, 3)}
    return record.model_copy(
        update={
            "status": "committed",
            "checkpoint": commit.checkpoint_id,
            "checkpoint_sha256": commit.checkpoint_sha256,
            "committed_version": commit.committed_version,
            "conflicts_merged": commit.conflicts_merged,
            "reconciled": list(commit.reconciled),
            "tokens_after": commit.tokens_after or record.tokens_after,
            "durations_ms": durations,
            "attempts": max(record.attempts, commit.attempt, 1),
        }
    )

