"""Operating a worker: /metrics after real compactions, spans with attributes at an OTLP
receiver, /healthz and /readyz, SIGTERM, and a dead collector that must not slow the CLI.

The worker runs as the operator runs it (`compactor worker` in its own process), against the
real dev server; the OTLP receiver is a tiny in-process HTTP server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from compactor.client import CompactorClient
from compactor.store import SessionLog, open_store
from tests.integration.durable_support import coding_session, new_ids, running_worker
from workers.devstack import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


class _Receiver:
    """Accepts OTLP/HTTP protobuf on /v1/traces (and /v1/metrics) and keeps the spans."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        spans: list[dict] = []
        self.spans = spans

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path == "/v1/traces":
                    req = ExportTraceServiceRequest.FromString(body)
                    for rs in req.resource_spans:
                        for ss in rs.scope_spans:
                            for sp in ss.spans:
                                attrs = {a.key: _value(a.value) for a in sp.attributes}
                                spans.append({"name": sp.name, "attrs": attrs})
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _value(v: object) -> object:
    kind = v.WhichOneof("value")  # type: ignore[attr-defined]
    return getattr(v, kind) if kind else None


def _get(url: str, timeout: float = 3.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:  # not listening yet, or a readiness check still running
        return 0, ""


def _wait(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _env(**kw: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPACTOR_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(kw)
    return env


async def test_worker_metrics_spans_health(temporal_address, tmp_path, task_queue):
    url = f"file://{tmp_path}/store"
    store = open_store(url)
    tenant, s1 = new_ids()
    s2 = s1 + "-b"
    for s in (s1, s2):
        SessionLog(store, tenant, s).append(coding_session())
    receiver = _Receiver()
    port = free_port()
    env = _env(
        TEMPORAL_ADDRESS=temporal_address,
        COMPACTOR_STORE=url,
        COMPACTOR_TASK_QUEUE=task_queue,
        COMPACTOR_LLM_TASK_QUEUE=task_queue + "-llm",
        COMPACTOR_METRICS_PORT=str(port),
        COMPACTOR_METRICS_HOST="127.0.0.1",
        COMPACTOR_OTLP_ENDPOINT=receiver.url,
        COMPACTOR_GRACEFUL_SHUTDOWN_S="5",
    )
    worker = subprocess.Popen([sys.executable, "-m", "compactor", "worker"], env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _get(base + "/readyz", 5)[0] == 200, 60, "/readyz 200")
        assert _get(base + "/healthz")[0] == 200

        from workers.settings import Settings
        from workers.worker import connect

        client = await connect(Settings(otlp_endpoint=None), temporal_address)
        cc = CompactorClient(client, store, tenant=tenant, task_queue=task_queue)
        outs = [await cc.compact(s, target_tokens=4_000) for s in (s1, s2)]
        assert [o.status for o in outs] == ["committed", "committed"]

        labels = f'status="committed",summarizer="structured",tenant="{tenant}",trigger="manual"'
        text = _wait(lambda: (t := _get(base + "/metrics")[1]) and f"compactor_compactions_total{{{labels}}} 2.0" in t and t,
                     10, "two compactions in /metrics")
        before = _sample(text, f"compactor_tokens_before_total{{{labels}}}")
        after = _sample(text, f"compactor_tokens_after_total{{{labels}}}")
        saved = _sample(text, f"compactor_tokens_saved_total{{{labels}}}")
        assert before == sum(o.record.tokens_before for o in outs)
        assert after == sum(o.record.tokens_after for o in outs)
        assert saved == before - after > 0
        assert 'compactor_step_duration_seconds_count{status="committed",step="commit_swap"} 2.0' in text
        assert "temporal_" in text  # the SDK's own runtime metrics, same endpoint

        # Spans of the worker carry the compaction's facts: commit_swap and write_record run inside
        # freeze_snapshot (FREEZE_COMMIT_PATCH), each part in a span of its own inside the step's span.
        def recorded(name):
            return [s for s in receiver.spans if s["name"] == name and s["attrs"].get("compactor.session") in (s1, s2)]
        spans = _wait(lambda: len(recorded("write_record")) == 2 and len(recorded("RunActivity:freeze_snapshot")) == 2
                      and recorded("write_record") + recorded("RunActivity:freeze_snapshot"), 15, "commit spans")
        for sp in spans:
            a = sp["attrs"]
            out = outs[0] if a["compactor.session"] == s1 else outs[1]
            assert a["compactor.tenant"] == tenant
            assert a["compactor.status"] == "committed"
            assert a["compactor.tokens_before"] == out.record.tokens_before
            assert a["compactor.tokens_after"] == out.record.tokens_after
            assert a["compactor.snapshot_version"] == out.record.snapshot_version > 0
        commits = recorded("commit_swap")
        assert len(commits) == 2 and all(c["attrs"]["compactor.snapshot_version"] > 0 for c in commits)
        freeze = [s for s in receiver.spans if s["name"] == "RunActivity:freeze_snapshot"
                  and s["attrs"].get("compactor.session") == s1]
        assert freeze and freeze[0]["attrs"]["compactor.snapshot_version"] > 0

        # SIGTERM: a graceful stop within the configured bound, nothing printed as an error.
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=20) == 0
        assert b"Traceback" not in worker.stderr.read()
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        receiver.close()


def _sample(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the scrape")


def _timed_cli(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    cp = subprocess.run([sys.executable, "-m", "compactor", *args], env=env, cwd=ROOT,
                        capture_output=True, text=True, timeout=120)
    return time.perf_counter() - t, cp


async def test_dead_collector_does_not_slow_a_command(temporal_address, tmp_path, task_queue):
    # A collector that accepts connections and never answers is the worst case (a refused
    # port fails fast anyway). `sweep --once` starts a workflow (spans to export) and waits
    # for it on an in-process worker.
    black = socket.socket()
    black.bind(("127.0.0.1", 0))
    black.listen(100)
    dead = f"http://127.0.0.1:{black.getsockname()[1]}"
    store = open_store(f"file://{tmp_path}/store")
    tenant, _ = new_ids()
    args = ["sweep", "--once", "--tenant", tenant, "--address", temporal_address]
    env = _env(COMPACTOR_TASK_QUEUE=task_queue, COMPACTOR_LLM_TASK_QUEUE=task_queue + "-llm")
    try:
        async with running_worker(temporal_address, store, task_queue):
            plain = [await asyncio.to_thread(_timed_cli, args, env) for _ in range(3)]
            # an export timeout far above the command's own time: a command that waited for
            # the collector would take it (the CLI waits at most 0.2 s for its spans)
            runs = [await asyncio.to_thread(_timed_cli, args, {**env, "COMPACTOR_OTLP_ENDPOINT": dead,
                                                               "COMPACTOR_OTLP_TIMEOUT_S": "10"})
                    for _ in range(3)]
    finally:
        black.close()
    assert all(cp.returncode == 0 for _, cp in plain + runs), [cp.stderr for _, cp in plain + runs]
    fast, slow = min(t for t, _ in plain), min(t for t, _ in runs)
    print(f"\ndead collector: best {slow:.2f}s vs {fast:.2f}s without")
    # never waits for the collector (a wait would add the 10 s timeout); how much a dead
    # collector costs is a figure for benchmarks, not a timed test on a shared machine
    assert slow - fast < 3.0, f"dead collector: {slow:.2f}s vs {fast:.2f}s"
    for _, cp in runs:
        assert "export" not in cp.stderr.lower() and "Traceback" not in cp.stderr, cp.stderr
