"""SweepSessionsWorkflow: compact every session of a tenant that is over its trigger.

Run once (``compactor sweep --once``) or from a Temporal Schedule (``compactor sweep``). Each
due session gets its own ``CompactSessionWorkflow`` (id ``compact/{tenant}/{session}``) as an
abandoned child, so a sweep never waits on, or duplicates, a running compaction; the LLM task
queue's rate limit paces the summaries.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.contracts import (
        SWEEP_WORKFLOW_NAME,
        WORKFLOW_NAME,
        ActivityName,
        CompactSessionInput,
        DueSessions,
        SweepInput,
        SweepOutput,
    )
    from activities.contracts import ErrorType
    from compactor.errors import InvalidInput
    from compactor.tenancy import check_sweep_request
    from workflows.compact_session import STORE_RETRY, workflow_id_for

# Ids and numbers are checked first (pure), so a bad sweep lists nothing; behind a patch for
# older histories.
INPUT_CHECK_PATCH = "check-input"


@workflow.defn(name=SWEEP_WORKFLOW_NAME)
class SweepSessionsWorkflow:
    @workflow.run
    async def run(self, inp: SweepInput) -> SweepOutput:
        if workflow.patched(INPUT_CHECK_PATCH):
            try:
                check_sweep_request(inp)
            except InvalidInput as exc:
                raise ApplicationError(
                    f"invalid sweep request: {exc}", type=str(ErrorType.INVALID_INPUT),
                    non_retryable=True,
                ) from None
        due = await workflow.execute_activity(
            str(ActivityName.LIST_DUE_SESSIONS),
            inp,
            result_type=DueSessions,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=STORE_RETRY,
            summary=f"list sessions of {inp.tenant} over their trigger",
        )
        started: list[str] = []
        for session in due.sessions[: inp.max_sessions]:
            child = CompactSessionInput(
                tenant=inp.tenant,
                session=session,
                policy=inp.policy.preset,
                window=inp.policy.window,
                max_output=inp.policy.max_output,
                configured=inp.policy.configured,
                target_tokens=inp.policy.target_tokens,
                summarizer=inp.summarizer,
                trigger="sweep",
            )
            try:
                await workflow.start_child_workflow(
                    WORKFLOW_NAME,
                    child,
                    id=workflow_id_for(inp.tenant, session),
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    static_summary=f"sweep: compact {inp.tenant}/{session}",
                )
                started.append(session)
            except WorkflowAlreadyStartedError:
                continue  # a compaction is already running for it
        return SweepOutput(scanned=due.scanned, started=started)
