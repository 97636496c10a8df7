"""The record of a structured compaction, built the same way by the workflow and by
freeze_snapshot when it commits (issue 17, patch ``freeze-commits``).

Since ``freeze-commits`` a structured run that asks no approval hands freeze_snapshot the run's
first record (``FreezeInput.commit_as``): when its plan needs a compaction and the candidate
externalize_finish made validates, freeze_snapshot also runs commit_record's work (the commit,
then the record of the committed run) - one local activity per run instead of two. The record it
writes is ``committed_record(record_before_commit(...), commit)``; the workflow returns the same,
built by the same functions from what freeze_snapshot returned, so the stored and the returned
record agree. The workflow's other paths build their records with the same helpers (``with_plan``,
``with_layers``, ``with_candidate``). Pure: no I/O, deterministic (workflow code imports it).
"""

from __future__ import annotations

from activities.contracts import (
    ActivityName,
    ExternalizeFinishOutput,
    ExternalizeOutput,
    PlanOutput,
    SnapshotRef,
    ValidateOutput,
)
from compactor.records import CompactionRecord, SeqRange


def repairs(ext: ExternalizeOutput, val: ValidateOutput, summarizer: str) -> list[str]:
    """What the candidate needed instead of being abandoned: counts and section names only."""
    out: list[str] = []
    dropped = val.repaired or (ext.repaired if summarizer == "structured" else 0)
    if dropped:
        out.append(f"unknown_identifier: {dropped} summary item(s) dropped")
    added = [s for s in val.completed if s != "trimmed"]  # model_summary.TRIMMED: no section
    if added:
        out.append("completed from the lifted state: " + ", ".join(s.lower() for s in added))
    if "trimmed" in val.completed:
        out.append("model text trimmed to its budget (least-used sections first)")
    return out


def with_plan(record: CompactionRecord, plan: PlanOutput) -> CompactionRecord:
    """The record once the plan is known."""
    return record.model_copy(update={
        "tokens_before": plan.tokens_before,
        "target_tokens": plan.target_tokens,
        "retained_tail_tokens": plan.retained_tail_tokens,
    })


def with_layers(record: CompactionRecord, ext: ExternalizeOutput) -> CompactionRecord:
    """The record once the layers are applied."""
    return record.model_copy(update={
        "layers": list(ext.layers),
        "freed_by_layer": dict(ext.freed_by_layer),
        "artifacts_written": ext.artifacts_written,
        "covers": SeqRange(start=1, end=ext.covers_end),
        "retained_tail_tokens": ext.retained_tail_tokens,
        "mid_turn": ext.mid_turn,
        "left_out": dict(ext.left_out),
    })


def with_candidate(record: CompactionRecord, ext: ExternalizeOutput, val: ValidateOutput,
                   summarizer: str) -> CompactionRecord:
    """The record once the candidate is validated."""
    return record.model_copy(update={
        "summarizer": summarizer,
        "summary_tokens": val.summary_tokens,
        "violations": [*val.violations, *val.warnings],
        "repairs": repairs(ext, val, summarizer),
        "checkpoint": val.checkpoint_id,
        "tokens_after": val.view_tokens,
    })


def commit_ready(finished: ExternalizeFinishOutput | None) -> bool:
    """Whether the workflow commits right after this externalize_finish (structured summarizer, no
    approval asked): finish ran (the layers summarize and shrink the view: not an unshrinkable
    noop) and the candidate breaks no invariant."""
    return finished is not None and finished.finish is not None and not finished.finish.check.violations


def record_before_commit(base: CompactionRecord, snap: SnapshotRef) -> CompactionRecord:
    """The record of a run whose freeze_snapshot planned, ran externalize_finish and found the
    candidate valid (``commit_ready``), before the commit: ``base`` (FreezeInput.commit_as)
    completed from ``snap`` (freeze's output: ``ms`` its own time before the commit), with each
    step's duration as the workflow reports the steps freeze ran (``_planned_by_freeze``,
    ``_report_externalize_finish``)."""
    plan, finished = snap.plan, snap.finished
    assert plan is not None and finished is not None and finished.finish is not None
    ext, fin = finished.externalize, finished.finish
    rest = max(finished.ms - ext.ms, 0.0)
    durations = {
        str(ActivityName.FREEZE_SNAPSHOT): round(max(round(snap.ms, 3) - (plan.ms + finished.ms), 0.0), 3),
        str(ActivityName.PLAN_COMPACTION): round(plan.ms, 3),
        str(ActivityName.EXTERNALIZE): round(ext.ms, 3),
        str(ActivityName.LIFT_STATE): round(fin.lift.ms, 3),
        str(ActivityName.SUMMARIZE_STRUCTURED): round(fin.summarize_ms, 3),
        str(ActivityName.VALIDATE_CANDIDATE): round(max(fin.check.ms, rest - fin.lift.ms - fin.summarize_ms), 3),
    }
    attempts = max(1, snap.attempt, plan.attempt, finished.attempt, fin.attempt)
    record = with_plan(base.model_copy(update={"snapshot_version": snap.version}), plan)
    record = with_candidate(with_layers(record, ext), ext, fin.check, "structured")
    return record.model_copy(update={"durations_ms": durations, "attempts": attempts})
