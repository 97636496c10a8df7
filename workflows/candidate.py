"""The compaction workflow's candidate: lift, summary (a model's, falling back to the structured
one) and validation, and the combined steps (``finish_structured``, ``externalize_finish``, the
plan and finish ``freeze_snapshot`` ran) reported as the steps they ran (``CandidateSteps``, a
base of ``compact_session.CompactSessionWorkflow``).

Why apart from the transaction: this is where a run's summarizer and its fallback are chosen
and where one activity's work is split back into the per-step durations, attempts and completed
steps the record, the status query and the step metrics name; the transaction only orders the
steps. Deterministic like the workflow.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ActivityError

from workflows.paths import LLM_FAIRNESS_PATCH
from workflows.steps import LLM_RETRY, StepRunner

with workflow.unsafe.imports_passed_through():
    from activities.contracts import (
        LLM_HEARTBEAT,
        LLM_START_TO_CLOSE,
        ActivityName,
        CompactSessionInput,
        ExternalizeFinishInput,
        ExternalizeFinishOutput,
        ExternalizeInput,
        ExternalizeOutput,
        FinishStructuredInput,
        FinishStructuredOutput,
        LiftInput,
        LiftOutput,
        PlanOutput,
        PolicyRef,
        SnapshotRef,
        SummarizeInput,
        SummarizeOutput,
        ValidateInput,
        ValidateOutput,
    )
    from compactor.records import CompactionRecord


class CandidateSteps(StepRunner):
    """The candidate's steps (``_record``: the run's record so far, the workflow's)."""

    _record: CompactionRecord

    def _summarize_input(
        self, inp: CompactSessionInput, snap: SnapshotRef, ext: ExternalizeOutput, lift: LiftOutput,
        prefix: str, mode: str, name: str,
    ) -> SummarizeInput:
        return SummarizeInput(
            tenant=inp.tenant,
            session=inp.session,
            snapshot_version=snap.version,
            covers_end=ext.covers_end,
            prev_checkpoint=snap.checkpoint,
            prev_checkpoint_sha256=snap.checkpoint_sha256,
            state_key=lift.state_key,
            budget_tokens=ext.summary_budget,
            model=inp.model if name != "structured" else "structured",
            mode=mode,  # type: ignore[arg-type]
            output_key=f"{prefix}summary-{name}.json",
            latest_full=ext.mid_turn,
        )

    async def _structured(
        self, inp: CompactSessionInput, snap: SnapshotRef, ext: ExternalizeOutput, lift: LiftOutput, prefix: str
    ) -> tuple[str, str, SummarizeOutput]:
        s_in = self._summarize_input(inp, snap, ext, lift, prefix, "template", "structured")
        out = await self._step(
            ActivityName.SUMMARIZE_STRUCTURED,
            s_in,
            SummarizeOutput,
            f"structured summary of 1..{ext.covers_end}, budget {ext.summary_budget} tokens",
        )
        return out.output_key, "structured", out

    async def _summarize(
        self, inp: CompactSessionInput, snap: SnapshotRef, ext: ExternalizeOutput, lift: LiftOutput, prefix: str
    ) -> tuple[str, str, SummarizeOutput]:
        if inp.summarizer == "structured":
            return await self._structured(inp, snap, ext, lift, prefix)
        native = inp.summarizer == "anthropic-native"
        name = ActivityName.SUMMARIZE_NATIVE if native else ActivityName.SUMMARIZE_ANTHROPIC
        s_in = self._summarize_input(
            inp, snap, ext, lift, prefix, "native" if native else "template", inp.summarizer
        )
        queue = inp.llm_task_queue or f"{workflow.info().task_queue}-llm"
        self._set(step=str(name))
        t0 = workflow.now()
        try:
            out = await workflow.execute_activity(
                str(name),
                s_in,
                result_type=SummarizeOutput,
                task_queue=queue,
                start_to_close_timeout=LLM_START_TO_CLOSE,
                heartbeat_timeout=LLM_HEARTBEAT,
                retry_policy=RetryPolicy(
                    initial_interval=LLM_RETRY.initial_interval,
                    backoff_coefficient=LLM_RETRY.backoff_coefficient,
                    maximum_interval=LLM_RETRY.maximum_interval,
                    maximum_attempts=inp.llm_attempts,
                    non_retryable_error_types=LLM_RETRY.non_retryable_error_types,
                ),
                summary=f"{inp.summarizer} summary ({inp.model}) of 1..{ext.covers_end}",
                priority=(Priority(fairness_key=inp.tenant[:64]) if self._patched(LLM_FAIRNESS_PATCH)
                          else Priority.default),
            )
        except ActivityError as err:
            cause = err.cause
            reason = f"{inp.summarizer} failed: {type(cause).__name__}: {cause}"[:500]
            workflow.logger.warning("LLM summarizer failed, falling back to structured: %s", reason)
            self._set(fallback_reason=reason)
            self._record = self._record.model_copy(update={"fallback_reason": reason})
            return await self._structured(inp, snap, ext, lift, prefix)
        self._note(str(name), t0, out.attempts, 0.0)
        self._record = self._record.model_copy(
            update={
                "llm_calls": [
                    *self._record.llm_calls,
                    {
                        "activity": str(name),
                        "model": out.model,
                        "input_tokens": out.input_tokens,
                        "output_tokens": out.output_tokens,
                        "cache_read_tokens": out.cache_read_tokens,
                        "cache_creation_tokens": out.cache_creation_tokens,
                        "attempts": out.attempts,
                        "dropped_rounds": out.dropped_rounds,
                    },
                ]
            }
        )
        return out.output_key, inp.summarizer, out

    async def _finish_structured(
        self, inp: CompactSessionInput, snap: SnapshotRef, policy: PolicyRef, plan: PlanOutput,
        ext: ExternalizeOutput, lift_in: LiftInput, prefix: str,
    ) -> tuple[str, ValidateOutput]:
        """lift_state + summarize_structured + validate_candidate as one step (ONE_STEP_PATCH),
        with the inputs the three steps take; the record keeps each part's duration."""
        # A LiftOutput stand-in: _summarize_input reads only its state_key.
        s_in = self._summarize_input(inp, snap, ext, LiftOutput(state_key=lift_in.state_key), prefix,
                                     "template", "structured")
        v_in = self._validate_input(snap, policy, plan, ext, s_in.output_key, "", prefix, "structured")
        name = ActivityName.FINISH_STRUCTURED
        out = await self._step(
            name,
            FinishStructuredInput(lift=lift_in, summarize=s_in, check=v_in),
            FinishStructuredOutput,
            f"lift, structured summary (budget {ext.summary_budget} tokens) and validation of 1..{ext.covers_end}",
        )
        self._report_finish(out, self._durations.pop(str(name)))
        self._attempts.pop(str(name), None)
        self._steps_done.remove(str(name))
        return out.summarize.output_key, out.check

    def _report_finish(self, out: FinishStructuredOutput, total: float) -> None:
        """finish_structured reported as the three steps it ran, so records and step metrics
        keep their names (``total``: the step's duration)."""
        parts = {
            str(ActivityName.LIFT_STATE): out.lift.ms,
            str(ActivityName.SUMMARIZE_STRUCTURED): out.summarize_ms,
            str(ActivityName.VALIDATE_CANDIDATE): max(out.check.ms, total - out.lift.ms - out.summarize_ms),
        }
        for step, ms in parts.items():
            self._durations[step] = round(ms, 3)
            self._attempts[step] = max(out.attempt, 1)
            self._steps_done.append(step)

    async def _externalize_finish(
        self, inp: CompactSessionInput, plan: PlanOutput, ext_in: ExternalizeInput, prefix: str,
    ) -> tuple[ExternalizeOutput, FinishStructuredOutput | None]:
        """externalize + finish_structured as one step (EXTERNALIZE_FINISH_PATCH), reported as
        the steps it ran: externalize, then (when finish ran) lift, summary and validation."""
        name = str(ActivityName.EXTERNALIZE_FINISH)
        out = await self._step(
            ActivityName.EXTERNALIZE_FINISH,
            ExternalizeFinishInput(externalize=ext_in, prefix=prefix, tenant=inp.tenant, session=inp.session,
                                   tokens_before=plan.tokens_before),
            ExternalizeFinishOutput,
            f"layers (tail {plan.covers_end + 1}..), then lift, structured summary and validation",
        )
        total = self._durations.pop(name)
        attempt = self._attempts.pop(name, 1)
        self._steps_done.remove(name)
        return self._report_externalize_finish(out, total, attempt)

    def _report_externalize_finish(
        self, out: ExternalizeFinishOutput, total: float, attempt: int,
    ) -> tuple[ExternalizeOutput, FinishStructuredOutput | None]:
        """externalize_finish's output (its own step's, or freeze_snapshot's: FREEZE_FINISH_PATCH)
        reported as the steps it ran (``total``: its duration)."""
        ext, fin = out.externalize, out.finish
        step = str(ActivityName.EXTERNALIZE)
        self._durations[step] = round(ext.ms if fin is not None else total, 3)
        self._attempts[step] = attempt
        self._steps_done.append(step)
        if fin is not None:
            self._report_finish(fin, max(total - ext.ms, 0.0))
            # where the separate steps would stand now (a failure names the step it came after)
            self._set(step=str(ActivityName.FINISH_STRUCTURED))
        else:
            self._set(step=step)
        return ext, fin

    def _planned_by_freeze(self, plan: PlanOutput, finished: ExternalizeFinishOutput | None = None) -> PlanOutput:
        """The plan freeze_snapshot made (FREEZE_PLAN_PATCH), reported as its own step: the record
        and step metrics keep plan_compaction's duration, freeze's is the rest (less the
        externalize_finish it ran, FREEZE_FINISH_PATCH: reported with the steps after the plan)."""
        freeze, step = str(ActivityName.FREEZE_SNAPSHOT), str(ActivityName.PLAN_COMPACTION)
        self._durations[step] = round(plan.ms, 3)
        rest = plan.ms + (finished.ms if finished is not None else 0.0)
        self._durations[freeze] = round(max(self._durations.get(freeze, 0.0) - rest, 0.0), 3)
        self._attempts[step] = max(plan.attempt, 1)
        self._steps_done.append(step)
        return plan

    def _validate_input(
        self, snap: SnapshotRef, policy: PolicyRef, plan: PlanOutput, ext: ExternalizeOutput,
        summary_key: str, ckpt_id: str, prefix: str, summarizer: str,
    ) -> ValidateInput:
        return ValidateInput(
            snapshot=snap,
            policy=policy,
            plan_key=plan.plan_key,
            layers_key=ext.layers_key,
            state_key=prefix + "state.json",
            summary_key=summary_key,
            checkpoint_id=ckpt_id,
            candidate_key=f"{prefix}candidate-{summarizer}.json",
            summarizer=summarizer,
            covers_end=ext.covers_end,
        )

    async def _validate(
        self, snap: SnapshotRef, policy: PolicyRef, plan: PlanOutput, ext: ExternalizeOutput,
        summary_key: str, ckpt_id: str, prefix: str, summarizer: str,
    ) -> ValidateOutput:
        return await self._step(
            ActivityName.VALIDATE_CANDIDATE,
            self._validate_input(snap, policy, plan, ext, summary_key, ckpt_id, prefix, summarizer),
            ValidateOutput,
            f"validate {summarizer} candidate (covers 1..{ext.covers_end})",
        )
