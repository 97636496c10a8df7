"""Worker telemetry without a server: span attributes, health endpoints, a dead collector."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path

from activities import metrics
from activities.contracts import RecordInput, SnapshotRef
from compactor.records import CompactionRecord
from workers.telemetry import OpsServer

ROOT = Path(__file__).resolve().parents[2]


def _record(**kw) -> CompactionRecord:
    base = dict(id="run-1", tenant="acme", session="s-1", snapshot_version=42, tokens_before=9_000,
                tokens_after=3_000, status="committed", trigger="sweep", summarizer="structured")
    return CompactionRecord(**{**base, **kw})


def test_span_attributes_of_a_record_and_a_snapshot():
    attrs = metrics.span_attributes(RecordInput(record=_record()))
    assert attrs["compactor.tenant"] == "acme" and attrs["compactor.session"] == "s-1"
    assert attrs["compactor.snapshot_version"] == 42
    assert (attrs["compactor.tokens_before"], attrs["compactor.tokens_after"]) == (9_000, 3_000)
    assert attrs["compactor.status"] == "committed" and "error.type" not in attrs
    snap = SnapshotRef(tenant="acme", session="s-2", version=7, etag="e")
    assert metrics.span_attributes(snap)["compactor.snapshot_version"] == 7
    from activities.contracts import FinishStructuredInput, LiftInput, PolicyRef, SummarizeInput, ValidateInput

    one_step = FinishStructuredInput(
        lift=LiftInput(snapshot=snap, covers_end=2, state_key="k"),
        summarize=SummarizeInput(tenant="acme", session="s-2", snapshot_version=7, covers_end=2,
                                 prev_checkpoint=None, state_key="k", budget_tokens=1, model="structured",
                                 mode="template", output_key="o"),
        check=ValidateInput(snapshot=snap, policy=PolicyRef(), plan_key="p", layers_key="l",
                            state_key="k", summary_key="o", candidate_key="c", covers_end=2))
    attrs = metrics.span_attributes(one_step)
    assert (attrs["compactor.tenant"], attrs["compactor.session"], attrs["compactor.snapshot_version"]) == (
        "acme", "s-2", 7)


def test_failed_record_carries_its_error_type():
    rec = _record(status="failed", tokens_after=9_000, error="invariant_violation: summary too long")
    assert metrics.span_attributes(RecordInput(record=rec))["error.type"] == "invariant_violation"
    assert metrics.error_type("something broke badly") == "error"


def test_llm_cost_is_priced_per_model_and_kind():
    call = {"model": "claude-haiku-4-5-20251001", "input_tokens": 1_000_000, "output_tokens": 200_000}
    assert abs(metrics.llm_cost_usd(call) - (1.0 + 0.2 * 5.0)) < 1e-9
    unknown = {"model": "some-new-model", "input_tokens": 1_000_000}
    assert metrics.llm_cost_usd(unknown) == metrics.PRICES_PER_MTOK[metrics.DEFAULT_PRICE_MODEL][0]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_healthz_and_readyz_report_what_is_wrong():
    state = {"temporal": "ok", "store": "ok"}
    srv = OpsServer("127.0.0.1", 0, lambda: dict(state))
    srv.start()
    try:
        base = "http://127.0.0.1:%d" % srv.address[1]
        assert _get(base + "/healthz")[0] == 200
        assert _get(base + "/readyz")[0] == 200
        state["store"] = "EndpointConnectionError: could not connect"
        code, body = _get(base + "/readyz")
        assert code == 503 and "EndpointConnectionError" in json.loads(body)["store"]
        assert _get(base + "/nope")[0] == 404
    finally:
        srv.stop()


def _run(endpoint: str | None) -> tuple[float, str]:
    """A short process that makes spans and exits the way the CLI does."""
    code = textwrap.dedent(f"""
        import opentelemetry.trace
        from workers.settings import Settings
        from workers.telemetry import configure_tracing, flush_tracing, quiet_exporters_for_cli
        quiet_exporters_for_cli()
        if configure_tracing(Settings(otlp_endpoint={endpoint!r}, otlp_timeout_s=10)):
            tracer = opentelemetry.trace.get_tracer("t")
            for i in range(20):
                with tracer.start_as_current_span("s%d" % i):
                    pass
        flush_tracing()
    """)
    t = time.perf_counter()
    cp = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0, cp.stderr
    return time.perf_counter() - t, cp.stderr


def test_a_dead_collector_is_never_waited_for_and_prints_nothing():
    black = socket.socket()  # accepts connections, never answers
    black.bind(("127.0.0.1", 0))
    black.listen(16)
    try:
        refused = min(_run("http://127.0.0.1:9")[0] for _ in range(2))  # refused port
        dead = [_run(f"http://127.0.0.1:{black.getsockname()[1]}") for _ in range(2)]
    finally:
        black.close()
    assert min(t for t, _ in dead) - refused < 3.0  # never waits out the 10 s export timeout
    assert all(err == "" for _, err in dead), dead
