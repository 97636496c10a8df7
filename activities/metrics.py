"""Compactor metrics and span attributes, recorded where the facts are known: in activities.

Why here and why this way:

* **Activities, never workflow code.** A workflow's code re-runs on every replay; the facts
  of a run (status, tokens, step durations, LLM usage) are all in the CompactionRecord that
  ``write_record`` persists, so that activity records them exactly once per run (a retried
  ``write_record`` whose first attempt already stored the record does not count it again).
* **OpenTelemetry API only.** Instruments come from the global meter provider; until a worker
  installs one (``workers/telemetry.py``: Prometheus scrape endpoint and/or OTLP), every call
  is a no-op, so tests and the inline engine pay nothing.
* **Names are a contract** with the Grafana dashboard (``infra/grafana/compactor.json``) and
  the README; the Prometheus names are the OTel names with dots as underscores, plus
  ``_total`` on counters and ``_seconds`` on the duration histograms.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace

METER = "compactor"

# Histogram buckets (seconds): steps take milliseconds (structured) to minutes (LLM calls);
# sweep lag is bounded by the sweep interval when sweeps keep up (minutes to hours).
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
LAG_BUCKETS_S = (1, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400)
HISTOGRAM_BUCKETS = {
    "compactor.step.duration": DURATION_BUCKETS_S,
    "compactor.compaction.duration": DURATION_BUCKETS_S,
    "compactor.sweep.lag": LAG_BUCKETS_S,
}

# USD per million tokens (input, output, cache read, cache write), Anthropic list prices; an
# estimate for dashboards, not a bill. Unknown models are priced as the default model.
PRICES_PER_MTOK: dict[str, tuple[float, float, float, float]] = {
    "claude-opus-4-1": (15.0, 75.0, 1.50, 18.75),
    "claude-opus-4-5": (5.0, 25.0, 0.50, 6.25),
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4": (3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25),
}
DEFAULT_PRICE_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class Instruments:
    """Every compactor instrument (created once per meter provider)."""

    compactions: Any
    compactions_started: Any
    tokens_before: Any
    tokens_after: Any
    tokens_saved: Any
    compaction_duration: Any
    step_duration: Any
    llm_tokens: Any
    llm_cost: Any
    merges: Any
    fallbacks: Any
    breakers_open: Any
    breaker_transitions: Any
    breaker_refused: Any
    sweep_scanned: Any
    sweep_due: Any
    sweep_failed: Any
    sweep_lag: Any


@functools.cache
def instruments() -> Instruments:
    """The instruments on the global meter provider (a proxy until a worker sets one)."""
    m = metrics.get_meter(METER)
    return Instruments(
        compactions=m.create_counter(
            "compactor.compactions", description="Finished compaction runs by status, trigger, summarizer."
        ),
        compactions_started=m.create_counter(
            "compactor.compactions.started", description="Compaction runs started, by trigger."
        ),
        tokens_before=m.create_counter("compactor.tokens.before", description="View tokens before compaction."),
        tokens_after=m.create_counter("compactor.tokens.after", description="View tokens after compaction."),
        tokens_saved=m.create_counter(
            "compactor.tokens.saved", description="Tokens removed from views (0 for noop and failed runs)."
        ),
        compaction_duration=m.create_histogram(
            "compactor.compaction.duration", unit="s", description="Wall time of a compaction run (sum of steps)."
        ),
        step_duration=m.create_histogram(
            "compactor.step.duration", unit="s", description="Duration of one compaction step."
        ),
        llm_tokens=m.create_counter(
            "compactor.llm.tokens", description="Tokens of LLM summarizer calls by model and kind."
        ),
        llm_cost=m.create_counter(
            "compactor.llm.cost_usd", description="Estimated USD of LLM summarizer calls (list prices)."
        ),
        merges=m.create_counter(
            "compactor.merges", description="Events appended during a compaction and merged at commit."
        ),
        fallbacks=m.create_counter(
            "compactor.fallbacks", description="LLM summaries that fell back to the structured summarizer."
        ),
        breakers_open=m.create_up_down_counter(
            "compactor.breakers.open",
            description="Circuit breakers opened minus closed, as seen by this worker (sum over workers).",
        ),
        breaker_transitions=m.create_counter(
            "compactor.breaker.transitions", description="Circuit breaker transitions (opened, closed)."
        ),
        breaker_refused=m.create_counter(
            "compactor.breaker.refused", description="Automatic compactions refused by an open breaker."
        ),
        sweep_scanned=m.create_counter("compactor.sweep.scanned", description="Sessions a sweep looked at."),
        sweep_due=m.create_counter("compactor.sweep.due", description="Sessions a sweep found over their trigger."),
        sweep_failed=m.create_counter(
            "compactor.sweep.failed", description="Sessions a sweep skipped because they could not be read."
        ),
        sweep_lag=m.create_histogram(
            "compactor.sweep.lag",
            unit="s",
            description="For each due session a sweep finds: seconds since its last append (a sweep "
            "that keeps up finds sessions within one sweep interval).",
        ),
    )


# --- compaction runs ---------------------------------------------------------------------------------


def error_type(error: str | None) -> str | None:
    """The typed kind of a record's error (``"Type: message"``), else None."""
    if not error:
        return None
    head, sep, _ = error.partition(":")
    return head.strip() if sep and head.strip() and " " not in head.strip() else "error"


def llm_cost_usd(call: Mapping[str, Any]) -> float:
    """Estimated USD of one LLM call of a record's ``llm_calls``."""
    model = str(call.get("model") or DEFAULT_PRICE_MODEL)
    price = next((p for name, p in PRICES_PER_MTOK.items() if model.startswith(name)), None)
    p_in, p_out, p_read, p_write = price or PRICES_PER_MTOK[DEFAULT_PRICE_MODEL]
    return (
        int(call.get("input_tokens") or 0) * p_in
        + int(call.get("output_tokens") or 0) * p_out
        + int(call.get("cache_read_tokens") or 0) * p_read
        + int(call.get("cache_creation_tokens") or 0) * p_write
    ) / 1e6


def record_compaction(record: Any) -> None:
    """Count one finished run from its CompactionRecord (status, tokens, steps, LLM use)."""
    ins = instruments()
    labels = {"status": record.status, "trigger": record.trigger, "summarizer": record.summarizer}
    ins.compactions.add(1, labels)
    ins.tokens_before.add(max(record.tokens_before, 0), labels)
    ins.tokens_after.add(max(record.tokens_after, 0), labels)
    saved = record.tokens_before - record.tokens_after if record.status == "committed" else 0
    ins.tokens_saved.add(max(saved, 0), labels)
    steps = {k: v for k, v in (record.durations_ms or {}).items() if v is not None}
    for step, ms in steps.items():
        ins.step_duration.record(ms / 1000.0, {"step": step, "status": record.status})
    if steps:
        ins.compaction_duration.record(sum(steps.values()) / 1000.0, labels)
    for call in record.llm_calls or []:
        model = str(call.get("model") or "unknown")
        for kind in ("input", "output", "cache_read", "cache_creation"):
            n = int(call.get(f"{kind}_tokens") or 0)
            if n:
                ins.llm_tokens.add(n, {"model": model, "kind": kind})
        ins.llm_cost.add(llm_cost_usd(call), {"model": model})
    if record.conflicts_merged:
        ins.merges.add(record.conflicts_merged, {"trigger": record.trigger})
    if record.fallback_reason:
        ins.fallbacks.add(1, {"summarizer": record.summarizer})


def record_started(trigger: str) -> None:
    instruments().compactions_started.add(1, {"trigger": trigger})


def record_breaker(transition: str | None, *, refused: bool = False, trigger: str = "") -> None:
    """A breaker transition (``opened``/``closed``) or a refused automatic run."""
    ins = instruments()
    if refused:
        ins.breaker_refused.add(1, {"trigger": trigger})
    if transition == "opened":
        ins.breakers_open.add(1)
    elif transition == "closed":
        ins.breakers_open.add(-1)
    if transition in ("opened", "closed"):
        ins.breaker_transitions.add(1, {"transition": transition})


def record_sweep(*, scanned: int, due: int, failed: int, lags_s: list[float]) -> None:
    """One sweep listing: sessions scanned, due, skipped as unreadable, and due sessions' lag."""
    ins = instruments()
    ins.sweep_scanned.add(scanned)
    ins.sweep_due.add(due)
    ins.sweep_failed.add(failed)
    for lag in lags_s:
        ins.sweep_lag.record(max(lag, 0.0))


# --- span attributes ---------------------------------------------------------------------------------

_RECORD_ATTRS = {
    "tenant": "compactor.tenant",
    "session": "compactor.session",
    "snapshot_version": "compactor.snapshot_version",
    "tokens_before": "compactor.tokens_before",
    "tokens_after": "compactor.tokens_after",
    "status": "compactor.status",
    "trigger": "compactor.trigger",
    "summarizer": "compactor.summarizer",
}


def span_attributes(obj: Any) -> dict[str, Any]:
    """Tenant, session, snapshot version, tokens, status of an activity's input or output.

    Looks at the object, its ``snapshot`` (SnapshotRef) and its ``record`` (CompactionRecord);
    counts and ids only, never conversation text.
    """
    from activities.contracts import SnapshotRef

    attrs: dict[str, Any] = {}
    for part in (obj, getattr(obj, "snapshot", None), getattr(obj, "record", None)):
        if part is None:
            continue
        for field, key in _RECORD_ATTRS.items():
            v = getattr(part, field, None)
            if isinstance(v, (str, int)) and not isinstance(v, bool) and key not in attrs:
                attrs[key] = v
        if isinstance(part, SnapshotRef):
            attrs.setdefault("compactor.snapshot_version", part.version)
    rec = getattr(obj, "record", None)
    et = error_type(getattr(rec, "error", None)) if getattr(rec, "status", None) == "failed" else None
    if et:
        attrs["error.type"] = et
    return attrs


def annotate_span(*objs: Any, error: BaseException | None = None) -> None:
    """Set :func:`span_attributes` of ``objs`` (and the error's type) on the current span."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    for obj in objs:
        if obj is not None:
            span.set_attributes(span_attributes(obj))
    if error is not None:
        span.set_attribute("error.type", str(getattr(error, "type", None) or type(error).__name__))
