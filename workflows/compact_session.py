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
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Callable, TypeVar

from temporalio import workflow
from temporalio.common import Priority, RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

from workflows.paths import (
    APPROVAL_TIMEOUT_PATCH,
    BREAKER_PATCH,
    EXACTLY_ONCE_PATCH,
    FREEZE_FAILURE_PATCH,
    INPUT_CHECK_PATCH,
    LLM_FAIRNESS_PATCH,
    LOCAL_COMMIT_PATCH,
    ONE_STEP_PATCH,
    UNSHRINKABLE_PATCH,
    path_level,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from activities.contracts import (
        LLM_HEARTBEAT,
        LLM_START_TO_CLOSE,
        WORKFLOW_NAME,
        ActivityName,
        CommitInput,
        CommitOutput,
        CommitRecordInput,
        CommitRecordOutput,
        CompactSessionInput,
        CompactSessionOutput,
        CompactStatus,
        ErrorType,
        ExternalizeFinishInput,
        ExternalizeFinishOutput,
        ExternalizeInput,
        ExternalizeOutput,
        FinishStructuredInput,
        FinishStructuredOutput,
        FreezeInput,
        LiftInput,
        LiftOutput,
        PlanInput,
        PlanOutput,
        PolicyRef,
        RecordInput,
        RecordOutput,
        SnapshotRef,
        SummarizeInput,
        SummarizeOutput,
        ValidateInput,
        ValidateOutput,
        committed_record,
        params_hash,
        work_prefix,
    )
    from activities.freeze_commit import record_before_commit, with_candidate, with_layers, with_plan
    from activities.breaker import (
        CHECK_BREAKER,
        RECORD_BREAKER,
        BreakerCheckInput,
        BreakerCheckOutput,
        BreakerRecordInput,
        BreakerRecordOutput,
    )
    from compactor.errors import InvalidInput
    from compactor.records import CompactionRecord, SeqRange
    from compactor.tenancy import check_compaction_request

M = TypeVar("M", bound=BaseModel)

# --- search attributes (registered by workers.devstack and `compactor dev`) ---------------------
SA_TENANT = SearchAttributeKey.for_keyword("CompactorTenant")
SA_SESSION = SearchAttributeKey.for_keyword("CompactorSession")
SA_STATUS = SearchAttributeKey.for_keyword("CompactorStatus")
SA_TOKENS_BEFORE = SearchAttributeKey.for_int("CompactorTokensBefore")
SA_TOKENS_AFTER = SearchAttributeKey.for_int("CompactorTokensAfter")

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




def _short(summarizer: str) -> str:
    return {"anthropic": "llm", "anthropic-native": "native"}.get(summarizer, summarizer)


def workflow_id_for(tenant: str, session: str) -> str:
    return f"compact/{tenant}/{session}"


@workflow.defn(name=WORKFLOW_NAME)
class CompactSessionWorkflow:
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

    def _patched(self, patch_id: str) -> bool:
        """``workflow.patched`` of a patch older than STEPS_PATCH (implied by it: no marker)."""
        return self._v3 or workflow.patched(patch_id)

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

    async def _report_own_commit(
        self, record: CompactionRecord, snap: SnapshotRef, started: Any
    ) -> CompactSessionOutput:
        """The outcome an earlier execution of this run committed: its stored record when it
        got that far (not written again: the first one stands), else one built from the head
        and the checkpoint."""
        own = snap.own_commit
        assert own is not None
        self._set(checkpoint=own.checkpoint)
        stored = own.record
        if stored is not None and stored.status == "committed" and stored.checkpoint == own.checkpoint:
            workflow.upsert_search_attributes([
                SA_TOKENS_BEFORE.value_set(stored.tokens_before),
                SA_STATUS.value_set(stored.status),
                SA_TOKENS_AFTER.value_set(stored.tokens_after),
            ])
            if self._patched(BREAKER_PATCH) and not self._breaker_refused:
                await self._breaker_record(stored)
            self._set(step="done")
            return CompactSessionOutput(
                status="committed", checkpoint=own.checkpoint, record_key=own.record_key, record=stored
            )
        self._upsert_tokens_before(own.tokens_before)
        committed = record.model_copy(
            update={
                "status": "committed",
                "checkpoint": own.checkpoint,
                "checkpoint_sha256": own.checkpoint_sha256,
                "committed_version": own.committed_version,
                "covers": SeqRange(start=1, end=own.covers_end),
                "summarizer": own.summarizer,
                "summary_tokens": own.summary_tokens,
                "tokens_before": own.tokens_before,
                "tokens_after": own.tokens_after,
            }
        )
        return await self._finish(committed, own.checkpoint, started)

    def _failure(self, err: Exception) -> ApplicationError:
        """The workflow's own failure: the step, the error type, its message."""
        cause = err.cause if isinstance(err, ActivityError) else err
        etype = getattr(cause, "type", None) or type(cause).__name__
        message = f"compaction failed at {self._status.step}: {cause}; the session is unchanged"
        details = list(getattr(cause, "details", ()) or ())
        return ApplicationError(message, *details, type=etype, non_retryable=True)

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

    async def _commit_record(
        self, snap: SnapshotRef, policy: PolicyRef, val: ValidateOutput, ext: ExternalizeOutput,
        record: CompactionRecord,
    ) -> CompactSessionOutput:
        """commit_swap + write_record as one step (COMMIT_RECORD_PATCH), reported as the two steps
        it ran. The activity writes ``committed_record(before, commit)``; the run returns the same
        record, built here from the same inputs (nothing of it crosses the history twice)."""
        by_freeze = self._committed_by_freeze(val)
        if by_freeze is not None:  # FREEZE_COMMIT_PATCH: freeze_snapshot committed and recorded
            before, out = by_freeze
            total, attempt = out.ms, out.attempt
            self._durations = dict(before.durations_ms)
        else:
            before = record.model_copy(
                update={"durations_ms": dict(self._durations), "attempts": max([1, *self._attempts.values()])}
            )
            name = str(ActivityName.COMMIT_RECORD)
            out = await self._step(
                ActivityName.COMMIT_RECORD,
                CommitRecordInput(
                    commit=CommitInput(snapshot=snap, policy=policy, candidate_key=val.candidate_key,
                                       max_merges=self._inp.max_merges),
                    record=before,
                    count_breaker=not self._breaker_refused,
                ),
                CommitRecordOutput,
                f"swap head v{snap.version} -> checkpoint {val.checkpoint_id} (covers 1..{ext.covers_end}), "
                f"then record it",
            )
            total = self._durations.pop(name)
            attempt = self._attempts.pop(name, 1)
            self._steps_done.remove(name)
        commit = out.commit
        committed = committed_record(before, commit)
        for step, ms in ((ActivityName.COMMIT_SWAP, commit.ms),
                         (ActivityName.WRITE_RECORD, max(out.record.ms, total - commit.ms))):
            self._durations[str(step)] = round(ms, 3)
            self._attempts[str(step)] = max(attempt, 1)
            self._steps_done.append(str(step))
        self._set(checkpoint=commit.checkpoint_id)
        workflow.upsert_search_attributes(
            [
                *([SA_TOKENS_BEFORE.value_set(self._tokens_before)] if self._tokens_before is not None else []),
                SA_STATUS.value_set(committed.status),
                SA_TOKENS_AFTER.value_set(committed.tokens_after),
            ]
        )
        self._set(step="done")
        return CompactSessionOutput(
            status="committed", checkpoint=commit.checkpoint_id, record_key=out.record.key, record=committed
        )

    def _committed_by_freeze(self, val: ValidateOutput) -> tuple[CompactionRecord, CommitRecordOutput] | None:
        """The commit freeze_snapshot made of this candidate (FREEZE_COMMIT_PATCH), with the record
        it wrote before the commit's part (``freeze_commit.record_before_commit``, built again)."""
        if self._frozen is None:
            return None
        base, frozen = self._frozen
        fin = frozen.finished.finish if frozen.finished is not None else None
        if frozen.committed is None or fin is None or fin.check.candidate_key != val.candidate_key:
            return None
        return record_before_commit(base, frozen), frozen.committed

    # --- summarize with fallback ------------------------------------------------------------------
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

    # --- helpers --------------------------------------------------------------------------------
    async def _finish(
        self, record: CompactionRecord, checkpoint: str | None, started: Any, *, mark_noop: bool = False
    ) -> CompactSessionOutput:
        record = record.model_copy(
            update={
                "durations_ms": dict(self._durations),
                "attempts": max([1, *self._attempts.values()]),
            }
        )
        workflow.upsert_search_attributes(
            [
                *([SA_TOKENS_BEFORE.value_set(self._tokens_before)] if self._tokens_before is not None else []),
                SA_STATUS.value_set(record.status),
                SA_TOKENS_AFTER.value_set(record.tokens_after),
            ]
        )
        rec = await self._step(
            ActivityName.WRITE_RECORD,
            RecordInput(record=record, mark_noop=mark_noop, count_breaker=not self._breaker_refused)
            if self._v3 else RecordInput(record=record, mark_noop=mark_noop),
            RecordOutput,
            f"record {record.status} for {record.tenant}/{record.session}",
        )
        if not self._v3 and workflow.patched(BREAKER_PATCH) and not self._breaker_refused:
            await self._breaker_record(record)
        self._set(step="done")
        status = record.status if record.status in ("committed", "noop", "failed") else "failed"
        return CompactSessionOutput(
            status=status,  # type: ignore[arg-type]
            checkpoint=checkpoint,
            record_key=rec.key,
            record=record,
        )

    async def _breaker_check(self, inp: CompactSessionInput) -> BreakerCheckOutput:
        """May this trigger run? Fails open: a breaker that cannot be read never blocks."""
        try:
            return await workflow.execute_local_activity(
                CHECK_BREAKER,
                BreakerCheckInput(tenant=inp.tenant, session=inp.session, trigger=inp.trigger),
                result_type=BreakerCheckOutput,
                start_to_close_timeout=BREAKER_TIMEOUT,
                retry_policy=STORE_RETRY,
                summary=f"circuit breaker of {inp.tenant}/{inp.session} ({inp.trigger})",
            )
        except (ActivityError, ApplicationError) as err:  # local: raised unwrapped
            workflow.logger.warning("circuit breaker unreadable, proceeding: %s", getattr(err, "cause", None) or err)
            return BreakerCheckOutput()

    async def _breaker_record(self, record: CompactionRecord) -> None:
        """Count this run (committed/noop = ok, failed = one more failure)."""
        try:
            await workflow.execute_local_activity(
                RECORD_BREAKER,
                BreakerRecordInput(
                    tenant=record.tenant,
                    session=record.session,
                    ok=record.status in ("committed", "noop"),
                    trigger=record.trigger,
                    run_id=record.id,
                    error=record.error,
                ),
                result_type=BreakerRecordOutput,
                start_to_close_timeout=BREAKER_TIMEOUT,
                retry_policy=STORE_RETRY,
                summary=f"circuit breaker: {record.status}",
            )
        except (ActivityError, ApplicationError) as err:  # local: raised unwrapped
            workflow.logger.warning("circuit breaker not updated: %s", getattr(err, "cause", None) or err)

    def _upsert_tokens_before(self, tokens: int) -> None:
        """CompactorTokensBefore: its own upsert before STEPS_PATCH; since, part of the final
        upsert (a run is one workflow task: the server saw them together anyway; one history
        event and one visibility write fewer)."""
        if self._v3:
            self._tokens_before = tokens
        else:
            workflow.upsert_search_attributes([SA_TOKENS_BEFORE.value_set(tokens)])

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
