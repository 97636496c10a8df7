"""What every payload contract of the compaction workflow shares: the names recorded in history
(the workflows', the activities'), the error types the workflow branches on, the models' config
and the fields every step output reports, and the deterministic keys of a run's work objects.

Why a module of its own: the step payloads (``step_results``, ``step_inputs``) and the workflow's
(``contracts``, which re-exports all of them) build on these; nothing here changes when a payload
gains a field. Never rename what is here: it is recorded in history.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


SummarizerName = Literal["structured", "anthropic", "anthropic-native"]

