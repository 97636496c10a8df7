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
* **At zero from the start.** :func:`initialise` adds 0 to every counter under every label
  set it will be counted with (statuses, triggers, summarizers, the bounded tenant labels), so
  a ``rate()`` or ``increase()`` alert sees the first failure of a fresh worker. Histograms
  appear with their first observation (an OpenTelemetry histogram has no zero point).
* **A bounded tenant label** on compaction, token and cost metrics (:class:`TenantLabels`):
  the configured tenants (``COMPACTOR_TENANTS``), or the first ``COMPACTOR_METRICS_TENANTS``
  tenants a worker sees, then ``other``.
* **Open breakers from the store, not from events.** ``compactor_breakers_open`` is the count
  of each tenant's ``breakers-open.json`` index (kept by ``activities/breaker.py``), read by the
  worker every ``BREAKER_CENSUS_S``; every worker reports the same fleet-wide number (use
  ``max()``), and a restart cannot make it drift.
* **One log line per outcome** (``compactor.events``): ids, counts, status, error type and
  fallback reason; never conversation text.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace

from activities.contracts import DEFAULT_MODEL

METER = "compactor"
EVENTS = logging.getLogger("compactor.events")
# Printed where a worker installed its handler (workers/logs.py); silent in CLI processes that
# run a worker in-process, whose output is the command's own.
EVENTS.addHandler(logging.NullHandler())
BREAKER_CENSUS_S = 60.0
"""How often a worker recounts open breakers from the store (the gauge's staleness bound)."""

# Label values every counter is initialised with (counted values outside these still count).
STATUSES = ("committed", "noop", "failed")
TRIGGERS = ("manual", "cli", "sweep", "budget:soft", "budget:hard")
SUMMARIZERS = ("structured", "anthropic", "anthropic-native")
LLM_KINDS = ("input", "output", "cache_read", "cache_creation")
LLM_ERROR_TYPES = (
    "ProviderRateLimited", "ProviderOverloaded", "ProviderUnavailable", "ProviderTimeout",
    "ProviderConnection", "ProviderStreamIncomplete", "SummarizerFailed",
)
OTHER_TENANT = "other"

# Histogram buckets (seconds): steps take milliseconds (structured) to minutes (LLM calls);
# sweep lag is bounded by the sweep interval when sweeps keep up (minutes to hours).
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
LAG_BUCKETS_S = (1, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400)
HISTOGRAM_BUCKETS = {
    "compactor.step.duration": DURATION_BUCKETS_S,
    "compactor.compaction.duration": DURATION_BUCKETS_S,
    "compactor.sweep.lag": LAG_BUCKETS_S,
}

# USD per million tokens (input, output, cache read, 5-minute cache write), Anthropic list
# prices (platform.claude.com model pages); an estimate for dashboards and `compactor report`,
# not a bill. Longest matching prefix wins; unknown models are priced as the default model.
PRICES_PER_MTOK: dict[str, tuple[float, float, float, float]] = {
    "claude-sonnet-5-5": (2.0, 10.0, 0.20, 2.50),
    "claude-sonnet-5": (2.0, 10.0, 0.20, 2.50),
    "claude-opus-4-1": (15.0, 75.0, 1.50, 18.75),
    "claude-opus-4-5": (5.0, 25.0, 0.50, 6.25),
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4": (3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25),
}
DEFAULT_PRICE_MODEL = DEFAULT_MODEL


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
    llm_errors: Any


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
        breakers_open=m.create_observable_gauge(
            "compactor.breakers.open",
            callbacks=[_observe_open_breakers],
            description="Sessions whose circuit breaker is open, by tenant, counted from the store's "
            "breakers-open index (fleet-wide: every worker reports the same number; use max()).",
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
        llm_errors=m.create_counter(
            "compactor.llm.errors", description="Failed model calls (each attempt), by error type."
        ),
    )


# --- tenant labels and zero initialisation -------------------------------------------------------------


class TenantLabels:
    """The bounded ``tenant`` label: configured tenants, or the first ``limit`` seen, then ``other``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fixed: tuple[str, ...] = ()
        self.limit = 20
        self.seen: list[str] = []
        self.on_new: Any = None

    def configure(self, tenants: Iterable[str] = (), limit: int = 20) -> None:
        with self._lock:
            self.fixed, self.limit, self.seen = tuple(tenants), limit, []

    def known(self) -> list[str]:
        """Every label value in use so far (``other`` included)."""
        return [*(self.fixed or self.seen), OTHER_TENANT]

    def label(self, tenant: str | None) -> str:
        t = str(tenant or "")
        if self.fixed:
            return t if t in self.fixed else OTHER_TENANT
        with self._lock:
            if t in self.seen:
                return t
            if not t or len(self.seen) >= self.limit:
                return OTHER_TENANT
            self.seen.append(t)
        if self.on_new is not None:
            self.on_new(t)
        return t


TENANTS = TenantLabels()


def configure_tenant_labels(tenants: Iterable[str] = (), limit: int = 20) -> None:
    TENANTS.configure(tenants, limit)


def initialise(model: str = DEFAULT_MODEL) -> None:
    """Every counter at zero under the label sets it is counted with (call once the meter
    provider is installed; the tenants configured, or ``other``, now; each further tenant the
    first time it is seen)."""
    ins = instruments()
    for c in (ins.breaker_transitions,):
        for transition in ("opened", "closed"):
            c.add(0, {"transition": transition})
    for trigger in TRIGGERS:
        ins.breaker_refused.add(0, {"trigger": trigger})
        ins.merges.add(0, {"trigger": trigger})
    for summarizer in SUMMARIZERS:
        ins.fallbacks.add(0, {"summarizer": summarizer})
    for etype in LLM_ERROR_TYPES:
        ins.llm_errors.add(0, {"model": model, "error_type": etype})
    for c in (ins.sweep_scanned, ins.sweep_due, ins.sweep_failed):
        c.add(0)
    for tenant in TENANTS.known():
        _initialise_tenant(tenant, model)
    TENANTS.on_new = lambda t: _initialise_tenant(t, model)


def _initialise_tenant(tenant: str, model: str = DEFAULT_MODEL) -> None:
    ins = instruments()
    for trigger in TRIGGERS:
        ins.compactions_started.add(0, {"trigger": trigger, "tenant": tenant})
        for status in STATUSES:
            for summarizer in SUMMARIZERS:
                labels = {"status": status, "trigger": trigger, "summarizer": summarizer, "tenant": tenant}
                for c in (ins.compactions, ins.tokens_before, ins.tokens_after, ins.tokens_saved):
                    c.add(0, labels)
    for kind in LLM_KINDS:
        ins.llm_tokens.add(0, {"model": model, "kind": kind, "tenant": tenant})
    ins.llm_cost.add(0, {"model": model, "tenant": tenant})


# --- open breakers (counted from the store) ------------------------------------------------------------

_OPEN_BREAKERS: dict[str, int] = {}
_OPEN_LOCK = threading.Lock()


def set_open_breakers(by_tenant: Mapping[str, int]) -> None:
    """The latest census of open breakers (tenant -> sessions), as read from the store."""
    folded: dict[str, int] = {t: 0 for t in TENANTS.known()}
    for tenant, n in by_tenant.items():
        label = TENANTS.label(tenant)
        folded[label] = folded.get(label, 0) + int(n)
    with _OPEN_LOCK:
        _OPEN_BREAKERS.clear()
        _OPEN_BREAKERS.update(folded)


def _observe_open_breakers(options: Any = None) -> Iterable[Any]:
    from opentelemetry.metrics import Observation

    with _OPEN_LOCK:
        current = dict(_OPEN_BREAKERS) or {t: 0 for t in TENANTS.known()}
    return [Observation(n, {"tenant": t}) for t, n in sorted(current.items())]


# --- compaction runs ---------------------------------------------------------------------------------


def error_type(error: str | None) -> str | None:
    """The typed kind of a record's error (``"Type: message"``), else None."""
    if not error:
        return None
    head, sep, _ = error.partition(":")
    return head.strip() if sep and head.strip() and " " not in head.strip() else "error"


def _price(model: str) -> tuple[float, float, float, float]:
    for name in sorted(PRICES_PER_MTOK, key=len, reverse=True):
        if model.startswith(name):
            return PRICES_PER_MTOK[name]
    return PRICES_PER_MTOK[DEFAULT_PRICE_MODEL]


def llm_cost_usd(call: Mapping[str, Any]) -> float:
    """Estimated USD of one LLM call of a record's ``llm_calls``."""
    p_in, p_out, p_read, p_write = _price(str(call.get("model") or DEFAULT_PRICE_MODEL))
    return (
        int(call.get("input_tokens") or 0) * p_in
        + int(call.get("output_tokens") or 0) * p_out
        + int(call.get("cache_read_tokens") or 0) * p_read
        + int(call.get("cache_creation_tokens") or 0) * p_write
    ) / 1e6


def record_compaction(record: Any) -> None:
    """Count one finished run from its CompactionRecord (status, tokens, steps, LLM use) and
    log its outcome line."""
    ins = instruments()
    tenant = TENANTS.label(record.tenant)
    labels = {"status": record.status, "trigger": record.trigger, "summarizer": record.summarizer}
    tlabels = {**labels, "tenant": tenant}
    ins.compactions.add(1, tlabels)
    ins.tokens_before.add(max(record.tokens_before, 0), tlabels)
    ins.tokens_after.add(max(record.tokens_after, 0), tlabels)
    saved = record.tokens_before - record.tokens_after if record.status == "committed" else 0
    ins.tokens_saved.add(max(saved, 0), tlabels)
    steps = {k: v for k, v in (record.durations_ms or {}).items() if v is not None}
    for step, ms in steps.items():
        ins.step_duration.record(ms / 1000.0, {"step": step, "status": record.status})
    if steps:
        ins.compaction_duration.record(sum(steps.values()) / 1000.0, labels)
    cost = 0.0
    for call in record.llm_calls or []:
        model = str(call.get("model") or "unknown")
        for kind in LLM_KINDS:
            n = int(call.get(f"{kind}_tokens") or 0)
            if n:
                ins.llm_tokens.add(n, {"model": model, "kind": kind, "tenant": tenant})
        usd = llm_cost_usd(call)
        cost += usd
        ins.llm_cost.add(usd, {"model": model, "tenant": tenant})
    if record.conflicts_merged:
        ins.merges.add(record.conflicts_merged, {"trigger": record.trigger})
    if record.fallback_reason:
        ins.fallbacks.add(1, {"summarizer": record.summarizer})
    log_outcome(record, duration_ms=sum(steps.values()) if steps else None, cost_usd=cost)


def outcome_fields(record: Any, *, duration_ms: float | None = None, cost_usd: float = 0.0) -> dict[str, Any]:
    """What the outcome line says: ids, counts, status, error type and fallback reason (the
    reason names a check or a provider status, as in history); never conversation text."""
    fields: dict[str, Any] = {
        "workflow_id": record.workflow_id,
        "run_id": record.id,
        "tenant": record.tenant,
        "session": record.session,
        "status": record.status,
        "trigger": record.trigger,
        "summarizer": record.summarizer,
        "tokens_before": record.tokens_before,
        "tokens_after": record.tokens_after,
        "snapshot_version": record.snapshot_version,
    }
    if duration_ms is not None:
        fields["duration_ms"] = round(duration_ms, 1)
    if record.checkpoint:
        fields["checkpoint"] = record.checkpoint
    if record.conflicts_merged:
        fields["merges"] = record.conflicts_merged
    if record.llm_calls:
        fields["llm_calls"] = len(record.llm_calls)
        fields["cost_usd"] = round(cost_usd, 6)
    if record.fallback_reason:
        fields["fallback_reason"] = _safe_reason(record.fallback_reason)
    if record.status == "failed":
        fields["error_type"] = error_type(record.error) or "error"
    if record.violations:
        fields["violations"] = [str(v).split(" ", 1)[0] for v in record.violations][:20]
    return fields


def _safe_reason(reason: str) -> str:
    """A fallback reason by kind: the failed checks (``validation: constraint_dropped``) or the
    summarizer and error type (``anthropic failed: ApplicationError``), not its message."""
    reason = reason.strip()
    if reason.startswith("validation:"):
        checks = [p.strip().split(" ", 1)[0] for p in reason[len("validation:"):].split(";") if p.strip()]
        return "validation: " + ",".join(dict.fromkeys(checks))[:200]
    head, _, rest = reason.partition(": ")
    if head.endswith(" failed"):
        return f"{head}: {rest.split(':', 1)[0].strip()}"[:120] if rest else head[:120]
    return head[:80] if head and len(head.split()) <= 3 else "fallback"


def log_outcome(record: Any, *, duration_ms: float | None = None, cost_usd: float = 0.0) -> None:
    fields = outcome_fields(record, duration_ms=duration_ms, cost_usd=cost_usd)
    level = logging.WARNING if record.status == "failed" else logging.INFO
    msg = f"compaction {record.status}: {record.tenant}/{record.session} {record.tokens_before} -> {record.tokens_after} tokens"
    if record.status == "failed":
        msg += f" ({fields['error_type']})"
    EVENTS.log(level, msg, extra={"fields": {"event": "compaction", **fields}})


def record_started(trigger: str, tenant: str | None = None) -> None:
    instruments().compactions_started.add(1, {"trigger": trigger, "tenant": TENANTS.label(tenant)})


def record_breaker(
    transition: str | None, *, refused: bool = False, trigger: str = "", tenant: str | None = None,
    session: str | None = None, consecutive_failures: int | None = None,
) -> None:
    """A breaker transition (``opened``/``closed``) or a refused automatic run; transitions
    and refusals are logged with the session's ids."""
    ins = instruments()
    fields = {"tenant": tenant, "session": session, "trigger": trigger or None,
              "consecutive_failures": consecutive_failures}
    fields = {k: v for k, v in fields.items() if v is not None}
    if refused:
        ins.breaker_refused.add(1, {"trigger": trigger})
        EVENTS.info("automatic compaction refused: circuit breaker open for %s/%s", tenant, session,
                    extra={"fields": {"event": "breaker_refused", **fields}})
    if transition in ("opened", "closed"):
        ins.breaker_transitions.add(1, {"transition": transition})
        EVENTS.warning("circuit breaker %s for %s/%s", transition, tenant, session,
                       extra={"fields": {"event": f"breaker_{transition}", **fields}})


def record_llm_error(error_type: str, model: str = DEFAULT_MODEL) -> None:
    """One failed model call attempt (its ``ApplicationError.type``)."""
    instruments().llm_errors.add(1, {"model": model, "error_type": error_type})


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
    check = getattr(obj, "check", None)  # finish_structured: the validation part's in/output
    for part in (obj, getattr(obj, "snapshot", None), getattr(obj, "record", None), check,
                 getattr(check, "snapshot", None)):
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


def annotate_span(*objs: Any, error: BaseException | None = None, span: Any = None) -> None:
    """Set :func:`span_attributes` of ``objs`` (and the error's type) on ``span`` (default: the
    current span)."""
    span = span if span is not None else trace.get_current_span()
    if not span.is_recording():
        return
    for obj in objs:
        if obj is not None:
            span.set_attributes(span_attributes(obj))
    if error is not None:
        span.set_attribute("error.type", str(getattr(error, "type", None) or type(error).__name__))


@contextlib.contextmanager
def part_span(name: str, *objs: Any) -> Iterator[Any]:
    """A child span ``name`` of the current (activity) span for one part of a step that runs
    several (``commit_record``: ``commit_swap`` then ``write_record``), with the attributes of
    ``objs`` - what that part's own activity span carried when it was a step of its own. No
    span when the current one is not recording (no tracing configured)."""
    if not trace.get_current_span().is_recording():
        yield trace.INVALID_SPAN
        return
    with trace.get_tracer("compactor").start_as_current_span(name) as span:
        annotate_span(*objs, span=span)
        try:
            yield span
        except BaseException as exc:
            annotate_span(error=exc, span=span)
            raise
