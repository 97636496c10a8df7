"""The model summarizer in this process: ``compact FILE --inline --summarizer anthropic``.

The same code as the durable path, in the same order: the layer candidate from
``engine.compact`` (what ``externalize`` stores), the budget from
``engine.model_summary.summary_budget``, the request and call from
``activities.llm.LlmActivities.template_summary`` (prompt, streaming, shrinking, answer
checks), the swap-in and completion from ``engine.model_summary.with_summary``, then
``invariants.validate`` and the identifier repair. A failed call or a rejected answer falls back
to the structured summary, and the record says so (``summarizer: structured`` and
``fallback_reason``), as the workflow does: a record never names a summarizer whose text the
view does not show.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from compactor.engine.compact import CompactResult, repair_candidate
from compactor.engine.planning import prepare
from compactor.engine.invariants import validate
from compactor.engine.measure import view_tokens
from compactor.engine.model_summary import completion_note, covered_events, over_budget, summary_budget, with_summary
from compactor.engine.policy import Policy
from compactor.engine.view import build_view
from compactor.events import Event
from compactor.tokens import count_event

SOFT = {"over_budget"}
"""As ``activities.merge.SOFT_VIOLATIONS``: the budget alone never blocks a commit."""


def _fallback(result: CompactResult, reason: str) -> CompactResult:
    rec = result.record.model_copy(update={"summarizer": "structured", "fallback_reason": reason[:500]})
    return result.model_copy(update={"record": rec})


def summarize_inline(
    events: Sequence[Event],
    result: CompactResult,
    policy: Policy,
    llm: Any,
    *,
    model: str | None = None,
    summarizer: str = "anthropic",
) -> CompactResult:
    """``result`` (the structured compaction of ``events``) with the model's summary swapped in,
    or unchanged with the fallback reason recorded."""
    ckpt = result.checkpoint
    if ckpt is None or ckpt.covers.empty or "summary" not in result.record.layers:
        return result  # nothing summarized: no model call to make
    evs = prepare(events, None)
    covered = covered_events(evs, ckpt)
    rec = result.record
    budget = summary_budget(policy, target_tokens=rec.target_tokens, tokens_after=rec.tokens_after,
                            summary_tokens=rec.summary_tokens,
                            covered_tokens=sum(count_event(e) for e in covered))
    from temporalio.exceptions import ApplicationError

    try:
        text, sections, usage = asyncio.run(llm.template_summary(
            ckpt.state, covered, covers_end=ckpt.covers.end, budget_tokens=budget, model=model,
            latest_full=rec.mid_turn))
    except ApplicationError as e:
        return _fallback(result, f"{summarizer} failed: {e.type or 'ApplicationError'}: {e.message}")
    cand, completed = with_summary(ckpt, text, summarizer=summarizer, budget=budget, mid_turn=rec.mid_turn,
                                   sections=sections, checkpoint_id=f"{ckpt.id}-llm")
    view = build_view(evs, cand)
    n = view_tokens(view)
    vio = validate(events=evs, checkpoint=cand, view=view, target_tokens=rec.target_tokens,
                   artifacts=result.artifacts)
    cand, view, n, vio, repaired = repair_candidate(evs, cand, view, n, vio, rec.target_tokens,
                                                    result.artifacts, None)
    hard = [str(v) for v in vio if v.code not in SOFT]
    if (too_big := over_budget(n, rec.target_tokens, rec.tokens_after)) is not None:
        hard.append(too_big)
    if hard:
        return _fallback(result, "validation: " + "; ".join(hard))
    repairs = [f"unknown_identifier: {repaired} summary item(s) dropped"] if repaired else []
    error = f"view is {n:,} tokens, over the target {rec.target_tokens:,}" if vio else None
    new = rec.model_copy(update={
        "summarizer": summarizer,
        "checkpoint": cand.id,
        "summary_tokens": cand.summary_tokens,
        "tokens_after": n,
        "violations": [str(v) for v in vio],
        "repairs": [*repairs, *completion_note(completed)],
        "error": error,
        "llm_calls": [{"activity": "summarize_anthropic", "model": model or llm.settings.model,
                       "input_tokens": usage.get("input_tokens", 0),
                       "output_tokens": usage.get("output_tokens", 0),
                       "cache_read_tokens": usage.get("cache_read_tokens", 0),
                       "cache_creation_tokens": usage.get("cache_creation_tokens", 0),
                       "attempts": 1, "dropped_rounds": usage.get("dropped_rounds", 0)}],
    })
    return CompactResult(view=view, checkpoint=cand, record=new, artifacts=result.artifacts)


def make_llm(settings: Any) -> Any:
    """The LLM activities' class over a client made as the worker makes it (``InvalidInput``
    when no API key is configured)."""
    from activities.llm import AnthropicSettings, LlmActivities, make_anthropic_client

    return LlmActivities(make_anthropic_client(settings), None, AnthropicSettings.from_settings(settings))


__all__ = ["make_llm", "summarize_inline"]
