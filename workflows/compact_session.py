"""CompactSessionWorkflow: one session's compaction as a retryable transaction (DESIGN §5).

Why it is shaped this way:

* The workflow id is ``compact/{tenant}/{session}``, so at most one compaction runs per
  session; a duplicate request attaches to the running one (the client starts with the
  USE_EXISTING id-conflict policy).
* Only references cross the history (versions, etags, store keys, counts). Activities read
  and write the bodies under deterministic keys, so any step can be retried by any worker.
* Nothing before ``commit_swap`` touches the session's head: a failure anywhere before it
  leaves the session exactly as it was. ``commit_swap`` itself is a compare-and-swap that
  merges events appended after the snapshot instead of overwriting them.
* The cheap store-bound steps can run as local activities (``local_steps``): they then cost
  no extra round trips to the server, which is what keeps the durable path close to inline.
  The LLM summarizers never do: they run on their own rate-limited task queue.

This module holds the transaction: the run's path (``workflows.paths``), the operator's query
and signals, and the order of the steps. How a step is called and reported is
``workflows.steps``; the candidate's steps (summary, fallback, validation, the combined steps
reported as their parts) ``workflows.candidate``; the ways a run ends (commit, record, breaker,
search attributes) ``workflows.outcome``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.candidate import CandidateSteps
from workflows.outcome import (  # noqa: F401  (SA_*: imported from here by tests and bench chaos)
    SA_SESSION,
    SA_STATUS,
    SA_TENANT,
    SA_TOKENS_AFTER,
    SA_TOKENS_BEFORE,
    RunOutcome,
)
from workflows.paths import (
    APPROVAL_TIMEOUT_PATCH,
    BREAKER_PATCH,
    EXACTLY_ONCE_PATCH,
    FREEZE_FAILURE_PATCH,
    INPUT_CHECK_PATCH,
    ONE_STEP_PATCH,
    UNSHRINKABLE_PATCH,
    path_level,
)
from workflows.steps import (  # noqa: F401  (STORE_RETRY, workflow_id_for: the sweep's, and callers')
    STEP_TIMEOUT,
    STORE_RETRY,
    check_input,
    workflow_id_for,
)

with workflow.unsafe.imports_passed_through():
    from activities.contracts import (
        WORKFLOW_NAME,
        ActivityName,
        CommitInput,
        CommitOutput,
        CompactSessionInput,
        CompactSessionOutput,
        CompactStatus,
        ErrorType,
        ExternalizeFinishOutput,
        ExternalizeInput,
        ExternalizeOutput,
        FinishStructuredOutput,
        FreezeInput,
        LiftInput,
        LiftOutput,
        PlanInput,
        PlanOutput,
        PolicyRef,
        SnapshotRef,
        ValidateOutput,
        committed_record,
        params_hash,
        work_prefix,
    )
    from activities.freeze_commit import with_candidate, with_layers, with_plan
    from compactor.records import CompactionRecord


def _short(summarizer: str) -> str:
    return {"anthropic": "llm", "anthropic-native": "native"}.get(summarizer, summarizer)


@workflow.defn(name=WORKFLOW_NAME)
class CompactSessionWorkflow(CandidateSteps, RunOutcome):
    def __init__(self) -> None:
        self._status = CompactStatus()
        self._resume = False
        self._rejected: str | None = None
        self._steps_done: list[str] = []
        self._attempts: dict[str, int] = {}
        self._durations: dict[str, float] = {}
        self._breaker_refused = False
        self._v3 = False  # STEPS_PATCH: set once, at the start of the run
        self._v4 = False  # FREEZE_PLAN_PATCH (implies STEPS_PATCH)
        self._v5 = False  # EXTERNALIZE_FINISH_PATCH (implies FREEZE_PLAN_PATCH)
        self._v6 = False  # COMMIT_RECORD_PATCH (implies EXTERNALIZE_FINISH_PATCH)
        self._v7 = False  # FREEZE_FINISH_PATCH (implies COMMIT_RECORD_PATCH)
        self._v8 = False  # FREEZE_COMMIT_PATCH (implies FREEZE_FINISH_PATCH)
        self._frozen: tuple[CompactionRecord, SnapshotRef] | None = None  # v8: freeze committed
        self._tokens_before: int | None = None  # v3: upserted with the final status, one command

    def _choose_path(self, inp: CompactSessionInput) -> None:
        """The run's path (``_v3``..``_v8``): ``workflows.paths.path_level``."""
        level = path_level(inp.paths)
        self._v3, self._v4, self._v5, self._v6, self._v7, self._v8 = (
            level >= 3, level >= 4, level >= 5, level >= 6, level >= 7, level >= 8)

    # --- operator interface --------------------------------------------------------------------
    @workflow.query(name="status")
    def status(self) -> CompactStatus:
        return self._status.model_copy(
            update={"attempts": dict(self._attempts), "completed_steps": list(self._steps_done)}
        )

    @workflow.signal(name="resume")
    def resume(self) -> None:
        """Approve the swap of a compaction started with ``pause_before_commit``."""
        self._resume = True

    @workflow.signal(name="reject")
    def reject(self, reason: str = "rejected by an operator") -> None:
        """Refuse the swap of a held compaction: it ends failed, the session untouched."""
        self._rejected = reason or "rejected by an operator"

    # --- the transaction -------------------------------------------------------------------------
    @workflow.run
    async def run(self, inp: CompactSessionInput) -> CompactSessionOutput:
        self._inp = inp
        self._choose_path(inp)
        if self._patched(INPUT_CHECK_PATCH):
            check_input(inp)
        self._set(summarizer=inp.summarizer)
        info = workflow.info()
        # The execution start time (in history): re-executions after a lost worker agree on it,
        # so the checkpoint bytes (created_at) are identical and create-only writes re-find them.
        started = info.workflow_start_time
        start_attrs = [(SA_TENANT, inp.tenant), (SA_SESSION, inp.session), (SA_STATUS, "running")]
        # FREEZE_FINISH_PATCH: not upserted again when the run started with them (the client sets
        # all three): one history event and one visibility write fewer per run.
        if not (self._v7 and all(info.typed_search_attributes.get(k) == v for k, v in start_attrs)):
            workflow.upsert_search_attributes([k.value_set(v) for k, v in start_attrs])
        policy = PolicyRef(
            preset=inp.policy,
            window=inp.window,
            max_output=inp.max_output,
            configured=inp.configured,
            target_tokens=inp.target_tokens,
        )
        record = CompactionRecord(
            id=info.run_id,
            tenant=inp.tenant,
            session=inp.session,
            workflow_id=info.workflow_id,
            trigger=inp.trigger,
            policy=inp.policy,
            summarizer=inp.summarizer,
            status="running",
            created_at=started,
        )
        if not self._v3 and workflow.patched(BREAKER_PATCH):  # v3: checked by freeze_snapshot
            gate = await self._breaker_check(inp)
            if not gate.allowed:
                self._breaker_refused = True
                refused = record.model_copy(update={"status": "noop", "error": gate.reason})
                return await self._finish(refused, None, started)

        self._record = record
        try:
            snap = await self._step(
                ActivityName.FREEZE_SNAPSHOT,
                (FreezeInput(tenant=inp.tenant, session=inp.session, check_breaker=True, trigger=inp.trigger,
                             **({"plan_policy": policy, "plan_summarizer": inp.summarizer, "plan_model": inp.model}
                                if self._v4 else {}),
                             **({"finish_now": started} if self._freeze_finishes(inp) else {}),
                             **({"commit_as": record, "max_merges": inp.max_merges}
                                if self._freeze_commits(inp) else {}))
                 if self._v3 else FreezeInput(tenant=inp.tenant, session=inp.session)),
                SnapshotRef,
                f"freeze {inp.tenant}/{inp.session}" + (", then plan, layers, lift, structured summary and "
                                                        "validation" if self._freeze_finishes(inp) else "")
                + (", then commit and record" if self._freeze_commits(inp) else ""),
                timeout=STEP_TIMEOUT[ActivityName.FREEZE_SNAPSHOT] + STEP_TIMEOUT[ActivityName.EXTERNALIZE_FINISH]
                + (STEP_TIMEOUT[ActivityName.COMMIT_RECORD] if self._freeze_commits(inp) else timedelta(0))
                if self._freeze_finishes(inp) else None,
            )
        except (ActivityError, ApplicationError) as err:
            # Local activities raise the activity's ApplicationError itself, others wrap it.
            failure = self._failure(err)
            if self._patched(FREEZE_FAILURE_PATCH):
                workflow.upsert_search_attributes([SA_STATUS.value_set("failed")])
                # No such session / bad ids: nothing exists to record a compaction against (and
                # nothing is written); any other failure gets its record and breaker count.
                if failure.type not in (str(ErrorType.NOT_FOUND), str(ErrorType.INVALID_INPUT)):
                    failed = record.model_copy(update={"status": "failed", "error": f"{failure.type}: {failure.message}"})
                    try:
                        await self._finish(failed, None, started)
                    except (ActivityError, ApplicationError) as rec_err:
                        workflow.logger.warning("no record for a failed freeze: %s", rec_err)
            raise failure from err
        if snap.breaker_refused is not None:
            self._breaker_refused = True
            refused = record.model_copy(update={"status": "noop", "error": snap.breaker_refused})
            return await self._finish(refused, None, started)
        self._set(snapshot_version=snap.version)
        # Asked only when there is an own commit, so other histories carry no marker.
        if snap.own_commit is not None and self._patched(EXACTLY_ONCE_PATCH):
            return await self._report_own_commit(record, snap, started)
        phash = params_hash(
            policy=policy.model_dump(),
            summarizer=inp.summarizer,
            model=inp.model,
            prev=snap.checkpoint,
        )
        prefix = work_prefix(inp.tenant, inp.session, snap.version, phash)
        record = record.model_copy(update={"snapshot_version": snap.version})

        self._record = record
        if snap.committed is not None:
            self._frozen = (record, snap)
        planned, finished = snap.plan, snap.finished
        snap = snap.model_copy(update={"plan": None, "finished": None, "committed": None})
        try:
            if planned is not None and planned.plan_key == prefix + "plan.json":
                plan = self._planned_by_freeze(planned, finished)
            else:
                plan = await self._step(
                    ActivityName.PLAN_COMPACTION,
                    PlanInput(snapshot=snap, policy=policy, plan_key=prefix + "plan.json"),
                    PlanOutput,
                    f"plan v{snap.version}: {snap.view_tokens} view tokens, policy {inp.policy}",
                )
        except (ActivityError, ApplicationError) as err:
            failure = self._failure(err)
            await self._finish(self._record.model_copy(
                update={"status": "failed", "error": f"{failure.type}: {failure.message}",
                        "tokens_after": self._record.tokens_before}), None, started)
            raise failure from err
        record = with_plan(record, plan)
        self._upsert_tokens_before(plan.tokens_before)
        if not plan.needed:
            record = record.model_copy(
                update={"status": "noop", "error": plan.reason or None, "tokens_after": plan.tokens_before}
            )
            return await self._finish(record, None, started)

        self._record = record
        if finished is not None and finished.externalize.layers_key != prefix + "layers.json":
            finished = None  # (not this run's work prefix: never, but then the step runs)
        try:
            return await self._compact(inp, snap, policy, plan, prefix, phash, record, finished)
        except (ActivityError, ApplicationError) as err:
            failure = self._failure(err)
            # Nothing changed: a failed run reports the view as it was, not the rejected
            # candidate's size (savings queries must not count failures).
            failed = self._record.model_copy(
                update={"status": "failed", "error": f"{failure.type}: {failure.message}",
                        "tokens_after": self._record.tokens_before}
            )
            await self._finish(failed, None, started)
            raise failure from err

    async def _compact(
        self,
        inp: CompactSessionInput,
        snap: SnapshotRef,
        policy: PolicyRef,
        plan: PlanOutput,
        prefix: str,
        phash: str,
        record: CompactionRecord,
        by_freeze: ExternalizeFinishOutput | None = None,
    ) -> CompactSessionOutput:
        self._record = record
        started = record.created_at
        ext_in = ExternalizeInput(
            snapshot=snap,
            policy=policy,
            plan_key=plan.plan_key,
            layers_key=prefix + "layers.json",
            now=started,
        )
        finished: FinishStructuredOutput | None = None
        if by_freeze is not None:
            ext, finished = self._report_externalize_finish(by_freeze, by_freeze.ms, by_freeze.attempt)
        elif self._v5 and inp.summarizer == "structured":
            ext, finished = await self._externalize_finish(inp, plan, ext_in, prefix)
        else:
            ext = await self._step(
                ActivityName.EXTERNALIZE,
                ext_in,
                ExternalizeOutput,
                f"layers: externalize/clear tool results, choose the cut (tail {plan.covers_end + 1}..)",
            )
        record = self._record = with_layers(record, ext)
        if (not ext.layers or ext.tokens_after >= plan.tokens_before) and self._patched(UNSHRINKABLE_PATCH):
            noop = record.model_copy(update={
                "status": "noop", "tokens_after": plan.tokens_before, "checkpoint": None,
                "covers": None, "layers": [], "freed_by_layer": {},
                "error": f"nothing to compact: no layer shrinks the view below {plan.tokens_before:,} "
                         f"tokens (pinned events, the latest request and pending calls stay verbatim); "
                         f"not compacted again until it grows",
            })
            return await self._finish(noop, None, started, mark_noop=True)
        summarizer = "structured"
        summary_key = ""
        ckpt_id = ""
        one_step: ValidateOutput | None = None
        if "summary" in ext.layers:
            lift_in = LiftInput(
                snapshot=snap,
                covers_end=ext.covers_end,
                prev_checkpoint=snap.checkpoint,
                plan_key=plan.plan_key,
                layers_key=ext.layers_key,
                state_key=prefix + "state.json",
            )
            if finished is not None:
                summary_key, one_step = finished.summarize.output_key, finished.check
            elif inp.summarizer == "structured" and self._patched(ONE_STEP_PATCH):
                summary_key, one_step = await self._finish_structured(inp, snap, policy, plan, ext, lift_in, prefix)
            else:
                lift = await self._step(
                    ActivityName.LIFT_STATE,
                    lift_in,
                    LiftOutput,
                    f"lift state of 1..{ext.covers_end} ({ext.covered_tokens} tokens)",
                )
                summary_key, summarizer, _ = await self._summarize(inp, snap, ext, lift, prefix)
                if summarizer != "structured":
                    ckpt_id = f"{ext.checkpoint_id}-{_short(summarizer)}-{workflow.info().run_id[:8]}"
        if one_step is not None:
            val = one_step
        else:
            val = await self._validate(snap, policy, plan, ext, summary_key, ckpt_id, prefix, summarizer)
        if val.violations and summarizer != "structured":
            reason = "validation: " + "; ".join(val.violations)[:500]
            workflow.logger.warning("%s summary rejected, falling back: %s", summarizer, reason)
            summary_key, summarizer, _ = await self._structured(inp, snap, ext, lift, prefix)
            self._set(fallback_reason=reason)
            self._record = self._record.model_copy(update={"fallback_reason": reason})
            val = await self._validate(snap, policy, plan, ext, summary_key, "", prefix, summarizer)
        record = self._record = with_candidate(self._record, ext, val, summarizer)
        if val.violations:
            raise ApplicationError(
                f"candidate checkpoint breaks {len(val.violations)} invariant(s); the session "
                f"is unchanged: " + "; ".join(val.violations),
                {"violations": list(val.violations)},
                type=ErrorType.INVARIANT_VIOLATION,
                non_retryable=True,
            )

        if inp.pause_before_commit:
            self._set(step="waiting_for_resume", waiting_for_resume=True)
            decided = lambda: self._resume or self._rejected is not None  # noqa: E731
            if self._patched(APPROVAL_TIMEOUT_PATCH) and inp.approval_timeout_s:
                try:
                    await workflow.wait_condition(decided, timeout=timedelta(seconds=inp.approval_timeout_s))
                except asyncio.TimeoutError:
                    self._rejected = f"no approval within {inp.approval_timeout_s}s"
            else:
                await workflow.wait_condition(decided)
            self._set(waiting_for_resume=False)
            if self._rejected is not None:
                raise ApplicationError(
                    f"swap not approved: {self._rejected}; the session is unchanged",
                    type=ErrorType.NOT_APPROVED,
                    non_retryable=True,
                )

        if self._v6:
            return await self._commit_record(snap, policy, val, ext, record)
        commit = await self._step(
            ActivityName.COMMIT_SWAP,
            CommitInput(
                snapshot=snap, policy=policy, candidate_key=val.candidate_key, max_merges=inp.max_merges
            ),
            CommitOutput,
            f"swap head v{snap.version} -> checkpoint {val.checkpoint_id} (covers 1..{ext.covers_end})",
        )
        # (record.tokens_after is val.view_tokens; _finish sets the durations and attempts)
        record = committed_record(record, commit)
        self._set(checkpoint=commit.checkpoint_id)
        return await self._finish(record, commit.checkpoint_id, started)
