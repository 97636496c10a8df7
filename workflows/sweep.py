"""SweepSessionsWorkflow: compact every session of a tenant that is over its trigger.

Run once (``compactor sweep --once``) or from a Temporal Schedule (``compactor sweep``). Each
due session gets its own ``CompactSessionWorkflow`` (id ``compact/{tenant}/{session}``) as an
abandoned child, so a sweep never waits on, or duplicates, a running compaction; the LLM task
queue's rate limit paces the summaries.

Why it pages: a tenant may hold 100,000+ sessions. Each ``list_due_sessions`` call reads one
page (one small head object per session: the head carries the view's token count), and the
run continues as new every ``pages_per_run`` pages with the cursor and the totals, so neither
an activity nor the history grows with the tenant. A session that cannot be read is reported
in ``skipped`` and the sweep goes on; so does one whose child cannot be started.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from activities.contracts import (
        SWEEP_WORKFLOW_NAME,
        WORKFLOW_NAME,
        ActivityName,
        CompactSessionInput,
        MAX_REPORTED,
        DueSessions,
        SkippedSession,
        SweepInput,
        SweepOutput,
        WORKFLOW_PATHS,
    )
    from compactor.tenancy import check_sweep_request
    from workflows.steps import STORE_RETRY, check_input, workflow_id_for
    from workflows.paths import INPUT_CHECK_PATCH



PAGED_PATCH = "sweep-pages"
DEFAULT_PAGE_SIZE = 500


@workflow.defn(name=SWEEP_WORKFLOW_NAME)
class SweepSessionsWorkflow:
    @workflow.run
    async def run(self, inp: SweepInput) -> SweepOutput:
        # Ids and numbers are checked first (pure), so a bad sweep lists nothing.
        if workflow.patched(INPUT_CHECK_PATCH):
            check_input(inp, check_sweep_request, "sweep")
        if not workflow.patched(PAGED_PATCH):
            return await self._legacy(inp)
        total = (inp.carried or SweepOutput()).model_copy(update={"runs": (inp.carried.runs + 1) if inp.carried else 1})
        cursor = inp.cursor
        page_size = inp.page_size or DEFAULT_PAGE_SIZE
        for _ in range(inp.pages_per_run):
            page = inp.model_copy(update={"cursor": cursor, "page_size": page_size, "carried": None})
            due = await workflow.execute_activity(
                str(ActivityName.LIST_DUE_SESSIONS),
                page,
                result_type=DueSessions,
                start_to_close_timeout=timedelta(minutes=5),
                retry_policy=STORE_RETRY,
                summary=f"sessions of {inp.tenant} after {cursor or 'the start'} over their trigger",
            )
            started, failed = await self._start(inp, due.sessions[: max(0, inp.max_sessions - total.started_count)])
            skipped = [*due.skipped, *failed]
            total = total.model_copy(update={
                "scanned": total.scanned + due.scanned,
                "started": (total.started + started)[:MAX_REPORTED],
                "started_count": total.started_count + len(started),
                "skipped": (total.skipped + skipped)[:MAX_REPORTED],
                "skipped_count": total.skipped_count + len(skipped),
                "unshrinkable": total.unshrinkable + due.unshrinkable,
                "pages": total.pages + 1,
            })
            cursor = due.next_cursor
            if cursor is None or total.started_count >= inp.max_sessions:
                return total
        workflow.continue_as_new(inp.model_copy(update={"cursor": cursor, "carried": total}))

    async def _start(self, inp: SweepInput, sessions: list[str]) -> tuple[list[str], list[SkippedSession]]:
        started: list[str] = []
        failed: list[SkippedSession] = []
        for session in sessions:
            try:
                if await self._start_one(inp, session):
                    started.append(session)
            except Exception as exc:  # noqa: BLE001 - one session never fails the sweep
                failed.append(SkippedSession(session=session, error=f"{type(exc).__name__}: {exc}"[:500]))
        return started, failed

    async def _start_one(self, inp: SweepInput, session: str) -> bool:
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
            # the newest path of the compaction this worker runs, without a patch marker (a child's
            # input is not compared on replay: older sweep histories replay)
            paths=WORKFLOW_PATHS,
        )
        try:
            await workflow.start_child_workflow(
                WORKFLOW_NAME,
                child,
                id=workflow_id_for(inp.tenant, session),
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"sweep: compact {inp.tenant}/{session}",
            )
        except WorkflowAlreadyStartedError:
            return False  # a compaction is already running for it
        return True

    async def _legacy(self, inp: SweepInput) -> SweepOutput:
        """The single-page sweep of histories recorded before PAGED_PATCH."""
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
            if await self._start_one(inp, session):
                started.append(session)
        return SweepOutput(scanned=due.scanned, started=started)
