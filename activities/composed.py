"""Combined activities made of the registered step activities, called in order: what a worker
registers for ``finish_structured``, ``externalize_finish`` or ``commit_record`` when one of their
parts is replaced (``workers.worker``: a custom structured summarizer, a test's broken step), so
runs that take the one-step paths still call the replacement. ``StoreActivities``' own combined
steps run their parts in one thread instead (``summary_steps``, ``commit_steps``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.contracts import (
    ActivityName,
    CommitRecordInput,
    CommitRecordOutput,
    ExternalizeFinishInput,
    ExternalizeFinishOutput,
    FinishStructuredInput,
    FinishStructuredOutput,
    RecordInput,
    committed_record,
    finish_follows,
    finish_structured_input,
)
from activities.step_support import attempt_meta


def compose_finish_structured(lift: Callable[..., Any], summarize: Callable[..., Any],
                              validate: Callable[..., Any]) -> Callable[..., Any]:
    """A ``finish_structured`` activity made of three step activities, called in order.

    What a worker registers when one of the three steps is replaced (``build_workers``'
    ``extra_activities``: a custom structured summarizer, a test's broken one), so runs that
    take the one-step path still call the replacement. A failing part is named in the error.
    """

    async def part(name: str, fn: Callable[..., Any], arg: Any) -> Any:
        try:
            return await fn(arg)
        except ApplicationError as err:
            raise ApplicationError(f"{name}: {err.message}", *err.details, type=err.type,
                                   non_retryable=err.non_retryable) from err

    @activity.defn(name=ActivityName.FINISH_STRUCTURED)
    async def finish_structured(inp: FinishStructuredInput) -> FinishStructuredOutput:
        t = time.perf_counter()
        lift_out = await part(ActivityName.LIFT_STATE, lift, inp.lift)
        t1 = time.perf_counter()
        summ = await part(ActivityName.SUMMARIZE_STRUCTURED, summarize, inp.summarize)
        t2 = time.perf_counter()
        check = await part(ActivityName.VALIDATE_CANDIDATE, validate, inp.check)
        return FinishStructuredOutput(
            lift=lift_out, summarize=summ, check=check, summarize_ms=(t2 - t1) * 1000,
            ms=(time.perf_counter() - t) * 1000, attempt=attempt_meta()["attempt"],
        )

    return finish_structured


def compose_externalize_finish(externalize: Callable[..., Any], finish: Callable[..., Any]) -> Callable[..., Any]:
    """An ``externalize_finish`` activity made of the registered ``externalize`` and
    ``finish_structured`` activities, called in order (as ``compose_finish_structured``: what a
    worker registers when either, or a part of finish, is replaced)."""

    @activity.defn(name=ActivityName.EXTERNALIZE_FINISH)
    async def externalize_finish(inp: ExternalizeFinishInput) -> ExternalizeFinishOutput:
        t = time.perf_counter()
        ext = await externalize(inp.externalize)
        fin = None
        if finish_follows(inp, ext):
            fin = await finish(finish_structured_input(inp, ext))
        return ExternalizeFinishOutput(externalize=ext, finish=fin, ms=(time.perf_counter() - t) * 1000,
                                       attempt=attempt_meta()["attempt"])

    return externalize_finish


def compose_commit_record(commit_swap: Callable[..., Any], write_record: Callable[..., Any]) -> Callable[..., Any]:
    """A ``commit_record`` activity made of the registered ``commit_swap`` and ``write_record``
    activities, called in order (as ``compose_finish_structured``: what a worker registers when
    either is replaced, so runs that take the one-step path still call the replacement)."""
    from activities import metrics

    @activity.defn(name=ActivityName.COMMIT_RECORD)
    async def commit_record(inp: CommitRecordInput) -> CommitRecordOutput:
        t = time.perf_counter()
        with metrics.part_span(str(ActivityName.COMMIT_SWAP), inp.commit) as span:
            commit = await commit_swap(inp.commit)
            metrics.annotate_span(commit, span=span)
        rec_in = RecordInput(record=committed_record(inp.record, commit), count_breaker=inp.count_breaker)
        with metrics.part_span(str(ActivityName.WRITE_RECORD), rec_in):
            written = await write_record(rec_in)
        metrics.annotate_span(rec_in)
        return CommitRecordOutput(commit=commit, record=written, ms=(time.perf_counter() - t) * 1000,
                                  attempt=attempt_meta()["attempt"])

    return commit_record
