"""Payload contracts of the compaction workflow and its activities.

Why this module looks the way it does:

* Every model here is recorded in Temporal history and must decode with code deployed later
  (replays, workers of the next release picking up a running workflow). So these are durable
  contracts: new fields are optional with defaults, nothing is renamed or removed, and
  ``extra="ignore"`` lets an older worker read a payload a newer starter wrote.
* Payloads carry references (tenant, session, version, etag, store keys, counts), never
  conversation bodies: bodies live in object storage and grow without bound, history does not.
  Activities read and write the bodies under the keys named here.
* Intermediate work objects live under a deterministic prefix (:func:`work_prefix`) derived
  from the snapshot and the parameters, so every activity is idempotent: a retry (or a second
  worker after a crash) overwrites the same keys instead of creating new ones.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.defaults import DEFAULT_MODEL  # noqa: F401  (written there: the CLI reads it without pydantic)
from compactor.records import CompactionRecord

# Time limits of the model-call activities: the workflow schedules them with these, and the
# activities keep their client timeout below the start-to-close.
LLM_START_TO_CLOSE = timedelta(minutes=5)
LLM_HEARTBEAT = timedelta(seconds=30)

# --- names recorded in history: never rename ---------------------------------------------------

WORKFLOW_NAME = "CompactSessionWorkflow"
SWEEP_WORKFLOW_NAME = "SweepSessionsWorkflow"


class ActivityName(StrEnum):
    FREEZE_SNAPSHOT = "freeze_snapshot"
    PLAN_COMPACTION = "plan_compaction"
    EXTERNALIZE = "externalize"
    LIFT_STATE = "lift_state"
    SUMMARIZE_STRUCTURED = "summarize_structured"
    SUMMARIZE_ANTHROPIC = "summarize_anthropic"
    SUMMARIZE_NATIVE = "summarize_native"
    VALIDATE_CANDIDATE = "validate_candidate"
    FINISH_STRUCTURED = "finish_structured"
    EXTERNALIZE_FINISH = "externalize_finish"
    COMMIT_RECORD = "commit_record"
    COMMIT_SWAP = "commit_swap"
    WRITE_RECORD = "write_record"
    LIST_DUE_SESSIONS = "list_due_sessions"


class ErrorType(StrEnum):
    """``ApplicationError.type`` values. Tests and the workflow branch on these, not on text."""

    INVALID_INPUT = "InvalidInput"
    """Bad ids, policy or parameters: the request can never succeed as given."""
    NOT_FOUND = "NotFound"
    """A referenced session, checkpoint or work object does not exist."""
    INVARIANT_VIOLATION = "InvariantViolation"
    """The candidate view breaks an invariant (DESIGN §7); the session is left untouched."""
    SUMMARIZER_FAILED = "SummarizerFailed"
    """A summarizer could not produce a usable summary (non-retryable provider answer)."""
    CONFLICT_RETRIES_EXHAUSTED = "ConflictRetriesExhausted"
    """The head kept moving during commit_swap beyond the bounded number of merges."""
    INTEGRITY = "IntegrityError"
    """Stored bytes do not match their hash."""
    SNAPSHOT_CHANGED = "SnapshotChanged"
    """The checkpoint the snapshot was based on is no longer the head's (rollback meanwhile)."""
    NOT_APPROVED = "NotApproved"
    """A held compaction was rejected by an operator or not approved in time."""
    TENANT_NOT_ALLOWED = "TenantNotAllowed"
    """A worker bound to other tenants (``COMPACTOR_TENANTS``) refused the input."""


def _cfg() -> ConfigDict:
    return ConfigDict(extra="ignore", frozen=True)


class _Out(BaseModel):
    """Fields every store-activity output reports, for the record and the status query."""

    model_config = _cfg()

    attempt: int = Field(default=1, description="activity.info().attempt that produced it.")
    ms: float = Field(default=0.0, description="Time the activity spent, in milliseconds.")


# --- deterministic keys --------------------------------------------------------------------------


def params_hash(**params: Any) -> str:
    """Short stable hash of the parameters that shape a compaction's work objects."""
    raw = json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def work_prefix(tenant: str, session: str, snapshot_version: int, phash: str) -> str:
    """Prefix of one compaction attempt's intermediate objects (same inputs -> same keys)."""
    return f"t/{tenant}/s/{session}/work/{snapshot_version:012d}-{phash}/"


def checkpoint_id_for(snapshot_version: int, phash: str, merge: int = 0) -> str:
    """Deterministic checkpoint id; a merge after a moved head gets a suffix."""
    base = f"c{snapshot_version:012d}-{phash}"
    return base if merge == 0 else f"{base}-m{merge}"


# --- workflow --------------------------------------------------------------------------------------

SummarizerName = Literal["structured", "anthropic", "anthropic-native"]


class CompactSessionInput(BaseModel):
    """Start a compaction of one session (workflow id ``compact/{tenant}/{session}``)."""

    model_config = _cfg()

    tenant: str = Field(description="Tenant id ([A-Za-z0-9._-]{1,128}).")
    session: str = Field(description="Session id ([A-Za-z0-9._-]{1,128}).")
    policy: str = Field(default="default", description="Policy preset (policy.PRESETS).")
    window: int = Field(default=200_000, description="Model context window in tokens.")
    max_output: int = Field(default=32_000, description="Model max output tokens.")
    configured: int | None = Field(default=None, description="Configured auto-compact limit.")
    target_tokens: int | None = Field(
        default=None, description="Target view size; None = the policy's own target."
    )
    summarizer: SummarizerName = Field(
        default="structured",
        description="structured (deterministic, offline), anthropic (template via the "
        "Messages API) or anthropic-native (the API's own compaction block).",
    )
    model: str = Field(default=DEFAULT_MODEL, description="Model for LLM summarizers.")
    llm_task_queue: str | None = Field(
        default=None, description="Task queue of the LLM activities; None = '<queue>-llm'."
    )
    trigger: str = Field(default="manual", description="Why this compaction was requested.")
    pause_before_commit: bool = Field(
        default=False,
        description="Hold between validate and commit_swap until the `resume` signal "
        "(operator approval of the swap).",
    )
    approval_timeout_s: int | None = Field(
        default=3600,
        description="With pause_before_commit: fail (session untouched) when neither `resume` "
        "nor `reject` arrives within this many seconds; None waits forever.",
    )
    max_merges: int = Field(
        default=20, ge=0,
        description="Bound on merge-and-retry in commit_swap. A merge costs O(events appended "
        "since the snapshot); 5 let 11% of compactions fail under appends every 100 ms on a "
        "faulty S3 (bench chaos), 20 leaves room for a busy agent.",
    )
    local_steps: bool = Field(
        default=True,
        description="Run the cheap store-bound steps as local activities (fewer round trips).",
    )
    llm_attempts: int = Field(default=3, ge=1, description="Attempts for the LLM summarizer.")
    paths: int = Field(
        default=0, ge=0,
        description="The workflow's newest path this client knows (WORKFLOW_PATHS, set by "
        "CompactorClient): a worker that has it takes it without a patch marker. 0: the patch "
        "markers decide, as before (a worker records the newest patch it has).",
    )


# CompactSessionInput.paths of this code: the path of the ``freeze-commits`` patch.
WORKFLOW_PATHS = 8


class CompactSessionOutput(BaseModel):
    model_config = _cfg()

    status: Literal["committed", "noop", "failed"] = "committed"
    checkpoint: str | None = None
    record_key: str | None = None
    record: CompactionRecord


class CompactStatus(BaseModel):
    """Answer of the ``status`` query."""

    model_config = _cfg()

    step: str = "starting"
    attempts: dict[str, int] = Field(default_factory=dict)
    waiting_for_resume: bool = False
    summarizer: str = "structured"
    fallback_reason: str | None = None
    snapshot_version: int | None = None
    checkpoint: str | None = None
    completed_steps: list[str] = Field(default_factory=list)


# --- activities ------------------------------------------------------------------------------------


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


class PolicyRef(BaseModel):
    """Everything ``policy.make_policy`` needs, plus the target."""

    model_config = _cfg()

    preset: str = "default"
    window: int = 200_000
    max_output: int = 32_000
    configured: int | None = None
    target_tokens: int | None = None


class PlanInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    plan_key: str = Field(description="Where the full plan JSON is written.")


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


class ExternalizeInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    plan_key: str
    layers_key: str = Field(description="Where the layer result (replacements) is written.")
    now: datetime | None = Field(default=None, description="created_at of the checkpoint (workflow time).")


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


class LiftInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    covers_end: int
    prev_checkpoint: str | None = None
    plan_key: str = ""
    layers_key: str = ""
    state_key: str


class LiftOutput(_Out):
    model_config = _cfg()

    state_key: str
    requests: int = 0
    constraints: int = 0
    unknown_actions: int = 0
    todos: int = 0


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


class CommitInput(BaseModel):
    model_config = _cfg()

    snapshot: SnapshotRef
    policy: PolicyRef
    candidate_key: str
    max_merges: int = 20


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


class RecordOutput(_Out):
    model_config = _cfg()

    key: str


class SweepInput(BaseModel):
    """One sweep over a tenant's sessions: compact every session over its trigger.

    The sweep pages through the sessions (``page_size`` per activity) and continues as new
    every ``pages_per_run`` pages, carrying the cursor and the totals, so its history stays
    small for any number of sessions.
    """

    model_config = _cfg()

    tenant: str = "default"
    policy: PolicyRef = Field(default_factory=PolicyRef)
    summarizer: SummarizerName = "structured"
    max_sessions: int = Field(default=1000, description="Compactions started by the whole sweep, at most.")
    page_size: int | None = Field(
        default=None, description="Sessions read per activity; None: every session in one (legacy)."
    )
    pages_per_run: int = Field(default=20, ge=1, description="Pages before continue-as-new.")
    cursor: str | None = Field(default=None, description="Last session id of the previous page.")
    carried: SweepOutput | None = Field(default=None, description="Totals of earlier runs.")


class SkippedSession(BaseModel):
    model_config = _cfg()

    session: str
    error: str = Field(description="Error type and message; the sweep went on without it.")


class DueSessions(_Out):
    model_config = _cfg()

    sessions: list[str] = Field(default_factory=list)
    scanned: int = 0
    next_cursor: str | None = Field(default=None, description="None: no more pages.")
    skipped: list[SkippedSession] = Field(default_factory=list)
    unshrinkable: int = Field(default=0, description="Over the trigger, but marked noop and not grown.")
    objects_read: int = Field(default=0, description="Store reads (GET) this page cost.")


MAX_REPORTED = 1000  # ids listed in a sweep's output; counts are always complete


class SweepOutput(BaseModel):
    model_config = _cfg()

    scanned: int = 0
    started: list[str] = Field(default_factory=list)
    started_count: int = 0
    skipped: list[SkippedSession] = Field(default_factory=list)
    skipped_count: int = 0
    unshrinkable: int = 0
    pages: int = 0
    runs: int = Field(default=1, description="Workflow runs (continue-as-new) the sweep took.")


# --- the structured candidate in one step (issue 17) ---------------------------------------------


class FinishStructuredInput(BaseModel):
    """lift_state + summarize_structured + validate_candidate as one local activity: the three
    inputs the separate steps take, run in that order by one worker (each still writes its
    work object, so the objects a run leaves are the same)."""

    model_config = _cfg()

    lift: LiftInput
    summarize: SummarizeInput
    check: ValidateInput


class FinishStructuredOutput(_Out):
    model_config = _cfg()

    lift: LiftOutput
    summarize: SummarizeOutput
    check: ValidateOutput
    summarize_ms: float = Field(default=0.0, description="Time of the summary part (lift and check carry their own ms).")


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


class ExternalizeFinishOutput(_Out):
    model_config = _cfg()

    externalize: ExternalizeOutput
    finish: FinishStructuredOutput | None = Field(
        default=None, description="None: no summary layer, or the view did not shrink (only externalize ran).")


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


# --- the commit and its record in one step (issue 17) ----------------------------------------


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


class CommitRecordOutput(_Out):
    model_config = _cfg()

    commit: CommitOutput
    record: RecordOutput


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


# SnapshotRef names PlanOutput and ExternalizeFinishOutput (defined after it): complete the models
# that hold either.
for _model in [v for v in list(globals().values())
               if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == __name__]:
    if not _model.__pydantic_complete__:
        _model.model_rebuild()
