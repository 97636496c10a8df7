"""How the compaction workflow runs one step: its time limit, retry policy, local or not, and
its report in the status query and the record (``StepRunner``, a base of
``compact_session.CompactSessionWorkflow``).

Why apart from the workflow's transaction: these are the settings every step shares (and the
sweep's listing reuses: ``STORE_RETRY``, ``check_input``, ``workflow_id_for``), reviewed on their
own when a limit or a retry changes. Deterministic like the workflow: ``workflow.now()``,
``workflow.patched`` and the execute calls only.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.paths import LOCAL_COMMIT_PATCH

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from activities.contracts import ActivityName, CompactSessionInput, CompactStatus, ErrorType
    from compactor.errors import InvalidInput
    from compactor.tenancy import check_compaction_request

M = TypeVar("M", bound=BaseModel)

# --- retry policies ------------------------------------------------------------------------------
_NON_RETRYABLE = [
    ErrorType.INVALID_INPUT,
    ErrorType.NOT_FOUND,
    ErrorType.INVARIANT_VIOLATION,
    ErrorType.INTEGRITY,
    ErrorType.SNAPSHOT_CHANGED,
    ErrorType.CONFLICT_RETRIES_EXHAUSTED,
    ErrorType.SUMMARIZER_FAILED,
]

# Object-store blips (throttling, 5xx, a killed worker) heal in seconds; bad input never does.
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=8,
    non_retryable_error_types=[str(t) for t in _NON_RETRYABLE],
)

# Provider 429/5xx recover within seconds; bounded so a dead provider falls back to structured.
LLM_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
    non_retryable_error_types=[str(ErrorType.INVALID_INPUT), str(ErrorType.SUMMARIZER_FAILED)],
)

# Per-step time limits: generous for a worst-case 1M-token session on a slow store.
STEP_TIMEOUT = {
    ActivityName.FREEZE_SNAPSHOT: timedelta(seconds=60),
    ActivityName.PLAN_COMPACTION: timedelta(seconds=120),
    ActivityName.EXTERNALIZE: timedelta(seconds=180),
    ActivityName.LIFT_STATE: timedelta(seconds=120),
    ActivityName.SUMMARIZE_STRUCTURED: timedelta(seconds=120),
    ActivityName.VALIDATE_CANDIDATE: timedelta(seconds=120),
    ActivityName.FINISH_STRUCTURED: timedelta(seconds=240),
    ActivityName.EXTERNALIZE_FINISH: timedelta(seconds=420),
    ActivityName.COMMIT_SWAP: timedelta(seconds=120),
    ActivityName.WRITE_RECORD: timedelta(seconds=30),
    ActivityName.COMMIT_RECORD: timedelta(seconds=150),
}
# Store activities heartbeat every second while they work: a killed worker is noticed fast.
STORE_HEARTBEAT = timedelta(seconds=5)
# The circuit breaker's own steps (BREAKER_PATCH; compactor/breaker.py).
BREAKER_TIMEOUT = timedelta(seconds=30)

# Steps that may run as local activities (cheap, store-bound, idempotent).
_LOCAL_OK = {
    ActivityName.FREEZE_SNAPSHOT,
    ActivityName.PLAN_COMPACTION,
    ActivityName.EXTERNALIZE,
    ActivityName.LIFT_STATE,
    ActivityName.SUMMARIZE_STRUCTURED,
    ActivityName.VALIDATE_CANDIDATE,
    ActivityName.FINISH_STRUCTURED,
    ActivityName.EXTERNALIZE_FINISH,
    ActivityName.COMMIT_RECORD,  # (only asked for since COMMIT_RECORD_PATCH, which implies LOCAL_COMMIT_PATCH)
}
# Local too since LOCAL_COMMIT_PATCH.
_LOCAL_SINCE_PATCH = {ActivityName.COMMIT_SWAP, ActivityName.WRITE_RECORD}


def check_input(inp: Any, checker: Callable[[Any], None] = check_compaction_request,
                what: str = "compaction") -> None:
    """Raise the non-retryable InvalidInput failure for a request that can never succeed
    (``checker``: the pure check of ``compactor.tenancy`` for this kind of request)."""
    try:
        checker(inp)
    except InvalidInput as exc:
        raise ApplicationError(
            f"invalid {what} request: {exc}", type=str(ErrorType.INVALID_INPUT), non_retryable=True
        ) from None


def workflow_id_for(tenant: str, session: str) -> str:
    return f"compact/{tenant}/{session}"


class StepRunner:
    """The workflow's step calls and their bookkeeping (status, durations, attempts, steps done).
    The attributes are the workflow's, set in its ``__init__`` and ``run``."""

    _inp: CompactSessionInput
    _status: CompactStatus
    _steps_done: list[str]
    _attempts: dict[str, int]
    _durations: dict[str, float]
    _v3: bool
    _v7: bool
    _v8: bool

    def _patched(self, patch_id: str) -> bool:
        """``workflow.patched`` of a patch older than STEPS_PATCH (implied by it: no marker)."""
        return self._v3 or workflow.patched(patch_id)

    def _failure(self, err: Exception) -> ApplicationError:
        """The workflow's own failure: the step, the error type, its message."""
        cause = err.cause if isinstance(err, ActivityError) else err
        etype = getattr(cause, "type", None) or type(cause).__name__
        message = f"compaction failed at {self._status.step}: {cause}; the session is unchanged"
        details = list(getattr(cause, "details", ()) or ())
        return ApplicationError(message, *details, type=etype, non_retryable=True)

    def _set(self, **changes: Any) -> None:
        self._status = self._status.model_copy(update=changes)

    def _note(self, step: str, t0: Any, attempt: int, ms: float) -> None:
        elapsed = (workflow.now() - t0).total_seconds() * 1000.0
        self._durations[step] = round(max(ms, elapsed), 3)
        self._attempts[step] = max(attempt, 1)
        self._steps_done.append(step)

    def _freeze_finishes(self, inp: CompactSessionInput) -> bool:
        """Whether freeze_snapshot is asked to run externalize_finish too (FREEZE_FINISH_PATCH)."""
        return self._v7 and inp.summarizer == "structured"

    def _freeze_commits(self, inp: CompactSessionInput) -> bool:
        """Whether freeze_snapshot is asked to commit too (FREEZE_COMMIT_PATCH): no approval asked."""
        return self._v8 and inp.summarizer == "structured" and not inp.pause_before_commit

    async def _step(self, name: ActivityName, arg: BaseModel, out: type[M], summary: str,
                    timeout: timedelta | None = None) -> M:
        self._set(step=str(name))
        t0 = workflow.now()
        timeout = timeout or STEP_TIMEOUT[name]
        local = self._inp.local_steps and (
            name in _LOCAL_OK
            or (name in _LOCAL_SINCE_PATCH and self._patched(LOCAL_COMMIT_PATCH))
        )
        if local:
            result = await workflow.execute_local_activity(
                str(name),
                arg,
                result_type=out,
                start_to_close_timeout=timeout,
                retry_policy=STORE_RETRY,
                summary=summary,
            )
        else:
            result = await workflow.execute_activity(
                str(name),
                arg,
                result_type=out,
                start_to_close_timeout=timeout,
                heartbeat_timeout=STORE_HEARTBEAT,
                retry_policy=STORE_RETRY,
                summary=summary,
            )
        self._note(str(name), t0, getattr(result, "attempt", 1), getattr(result, "ms", 0.0))
        return result
