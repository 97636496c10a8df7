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

The models live by what they are: ``contract_base`` (names recorded in history, error types,
keys), ``step_results`` (what each step reports, the frozen snapshot), ``step_inputs`` (what the
workflow asks of each step); this module holds the workflows' own payloads (the compaction's,
the sweep's) and is where every caller imports them all from.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from activities.contract_base import (  # noqa: F401  (re-exported: callers import them from here)
    LLM_HEARTBEAT,
    LLM_START_TO_CLOSE,
    SWEEP_WORKFLOW_NAME,
    WORKFLOW_NAME,
    ActivityName,
    ErrorType,
    SummarizerName,
    _cfg,
    _Out,
    checkpoint_id_for,
    params_hash,
    work_prefix,
)
from activities.defaults import DEFAULT_MODEL  # noqa: F401  (written there: the CLI reads it without pydantic)
from activities.step_inputs import (  # noqa: F401  (re-exported)
    CommitInput,
    CommitRecordInput,
    ExternalizeFinishInput,
    ExternalizeInput,
    FinishStructuredInput,
    FreezeInput,
    LiftInput,
    PlanInput,
    PolicyRef,
    RecordInput,
    SummarizeInput,
    ValidateInput,
    finish_follows,
    finish_structured_input,
)
from activities.step_results import (  # noqa: F401  (re-exported)
    CommitOutput,
    CommitRecordOutput,
    ExternalizeFinishOutput,
    ExternalizeOutput,
    FinishStructuredOutput,
    LiftOutput,
    OwnCommit,
    PlanOutput,
    RecordOutput,
    SnapshotRef,
    SummarizeOutput,
    ValidateOutput,
    committed_record,
)
from compactor.records import CompactionRecord

# --- workflow --------------------------------------------------------------------------------------


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


# --- the sweep ------------------------------------------------------------------------------------


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


# SweepInput names SweepOutput (defined after it): complete the models that hold it.
for _model in [v for v in list(globals().values())
               if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == __name__]:
    if not _model.__pydantic_complete__:
        _model.model_rebuild()
