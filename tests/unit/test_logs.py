"""Worker log lines (workers/logs.py) and the facts metrics put on them (activities/metrics.py)."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from activities import metrics
from compactor.errors import IntegrityError
from compactor.records import CompactionRecord
from workers.logs import ConnectivityMonitor, configure_logging, describe_exception, resolve_format

MARKER = "QX-conversation-text-4417"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def logged():
    buf = io.StringIO()
    handler = configure_logging("json", "INFO", buf)
    yield buf
    logging.getLogger().removeHandler(handler)


def _docs(buf: io.StringIO) -> list[dict]:
    return [json.loads(x) for x in buf.getvalue().splitlines() if x.strip()]


def test_auto_format_is_text_on_a_tty_and_json_elsewhere():
    assert resolve_format("auto", _Tty()) == "text"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("JSON", _Tty()) == "json"


def test_outcome_line_carries_the_run_facts_and_no_text(logged):
    rec = CompactionRecord(
        id="run-1", tenant="acme", session="s1", workflow_id="compact/acme/s1", status="committed",
        tokens_before=9_000, tokens_after=2_000, durations_ms={"plan_compaction": 5.0, "commit_swap": 7.5},
        summarizer="structured", trigger="sweep",
        fallback_reason=f"validation: constraint_dropped (seq 12); summary_incomplete: {MARKER}",
        llm_calls=[{"model": "claude-sonnet-5-5", "input_tokens": 1_000_000, "output_tokens": 0}],
    )
    metrics.record_compaction(rec)
    [doc] = [d for d in _docs(logged) if d.get("event") == "compaction"]
    assert doc["level"] == "info" and doc["logger"] == "compactor.events"
    assert (doc["workflow_id"], doc["tenant"], doc["session"], doc["status"]) == ("compact/acme/s1", "acme", "s1", "committed")
    assert (doc["tokens_before"], doc["tokens_after"], doc["duration_ms"]) == (9_000, 2_000, 12.5)
    assert doc["fallback_reason"] == "validation: constraint_dropped,summary_incomplete:"
    assert doc["cost_usd"] == pytest.approx(2.0)  # claude-sonnet-5-5 input at $2 / MTok
    assert MARKER not in logged.getvalue()


def test_failed_outcome_is_a_warning_with_its_error_type(logged):
    rec = CompactionRecord(id="r2", tenant="acme", session="s2", status="failed",
                           error=f"IntegrityError: segment differs near '{MARKER}'")
    metrics.record_compaction(rec)
    [doc] = [d for d in _docs(logged) if d.get("event") == "compaction"]
    assert doc["level"] == "warning" and doc["error_type"] == "IntegrityError"
    assert MARKER not in logged.getvalue()


def test_an_exception_is_logged_by_type_and_frames_unless_its_text_is_ours(logged):
    def boom() -> None:
        raise ValueError(f"could not parse line: {MARKER}")

    try:
        boom()
    except ValueError:
        logging.getLogger("x").exception("activity failed")
    try:
        raise IntegrityError("segment t/a/s/s1/log/1-2.jsonl does not match its sha256", key="k")
    except IntegrityError:
        logging.getLogger("x").warning("store", exc_info=True)
    first, second = _docs(logged)
    assert first["error_type"] == "ValueError" and "error" not in first
    assert any("boom" in f for f in first["stack"])
    assert second["error"].startswith("segment t/a/s/s1")
    assert MARKER not in logged.getvalue()
    assert describe_exception(OSError("connection refused"))["error"] == "connection refused"


def test_text_format_is_one_line_with_fields():
    buf = _Tty()
    handler = configure_logging("auto", "INFO", buf)
    try:
        metrics.record_breaker("opened", tenant="acme", session="s 1", consecutive_failures=3, trigger="sweep")
    finally:
        logging.getLogger().removeHandler(handler)
    [line] = buf.getvalue().splitlines()
    assert "WARNING compactor.events circuit breaker opened for acme/s 1" in line
    assert 'session="s 1"' in line and "consecutive_failures=3" in line


def test_http_client_debug_lines_stay_off_at_debug():
    buf = io.StringIO()
    handler = configure_logging("json", "DEBUG", buf)
    try:
        logging.getLogger("anthropic._base_client").debug("Request options: %s", {"messages": MARKER})
        logging.getLogger("compactor.x").debug("kept")
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(logging.WARNING)
    assert MARKER not in buf.getvalue() and "kept" in buf.getvalue()


async def test_an_outage_and_its_recovery_are_one_line_each(logged):
    up = {"ok": False}

    async def probe() -> None:
        if not up["ok"]:
            raise ConnectionRefusedError("connection refused")

    mon = ConnectivityMonitor({"temporal": probe}, every_s=0.01)
    for _ in range(5):
        await mon.probe_once()
    logging.getLogger("temporalio.worker._worker").warning("poll failed")  # counted, not printed
    up["ok"] = True
    for _ in range(3):
        await mon.probe_once()
    events = [d["event"] for d in _docs(logged) if "event" in d]
    assert events == ["temporal_unavailable", "temporal_recovered"]
    rec = _docs(logged)[-1]
    assert rec["suppressed_sdk_lines"] == 1 and rec["outage_s"] >= 0
    assert "poll failed" not in logged.getvalue()
    await asyncio.sleep(0)


def test_tenant_label_is_bounded():
    labels = metrics.TenantLabels()
    labels.configure((), limit=2)
    assert [labels.label(t) for t in ("a", "b", "c", "a", "")] == ["a", "b", "other", "a", "other"]
    assert labels.known() == ["a", "b", "other"]
    labels.configure(("x",), limit=2)
    assert [labels.label(t) for t in ("a", "x")] == ["other", "x"]


def test_prices_cover_the_default_model_longest_prefix_first():
    from activities.contracts import DEFAULT_MODEL

    assert metrics.DEFAULT_PRICE_MODEL == DEFAULT_MODEL == "claude-sonnet-5-5"
    assert metrics._price("claude-sonnet-5-5-20261001") == metrics.PRICES_PER_MTOK["claude-sonnet-5-5"]
    assert metrics._price("claude-sonnet-4-5") == metrics.PRICES_PER_MTOK["claude-sonnet-4-5"]


def test_bad_log_settings_are_refused_by_name():
    from pydantic import ValidationError

    from workers.settings import Settings

    assert (Settings(log_format="JSON").log_format, Settings(log_level="debug").log_level) == ("json", "DEBUG")
    for kw, name in (({"log_format": "xml"}, "COMPACTOR_LOG_FORMAT"), ({"log_level": "loud"}, "COMPACTOR_LOG_LEVEL")):
        with pytest.raises(ValidationError, match=name):
            Settings(**kw)


def test_the_drain_line_names_the_model_call_workers_longer_grace(logged):
    """SIGTERM's line gives the bound each worker really waits: the model-call worker's grace
    (at least one model call) is longer than COMPACTOR_GRACEFUL_SHUTDOWN_S, and said so."""
    from workers.logs import log_drain_started
    from workers.settings import Settings
    from workers.worker import _operations_options, model_call_grace_s

    settings = Settings(graceful_shutdown_s=45)
    llm_grace = _operations_options(settings, model_calls=True)["graceful_shutdown_timeout"].total_seconds()
    assert model_call_grace_s(settings) == llm_grace > 45
    log_drain_started(45, "SIGTERM", model_call_grace_s(settings))
    log_drain_started(45, "SIGTERM", 0.0)  # no model-call worker: nothing more to say
    longer, plain = _docs(logged)
    assert longer["grace_s"] == 45 and longer["model_call_grace_s"] == llm_grace
    assert f"model calls {llm_grace:.0f} s" in longer["msg"]
    assert "model_call_grace_s" not in plain and "model calls" not in plain["msg"]
