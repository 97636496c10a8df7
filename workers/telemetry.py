"""Worker telemetry: traces, metrics (Prometheus + OTLP), Temporal runtime metrics, health.

Why it is shaped this way:

* **Exporters never sit on a command's path.** Spans and metrics go out from background
  threads (batch span processor, periodic metric reader) with short timeouts; a short-lived
  CLI process waits at most ``CLI_FLUSH_S`` for its spans and then exits, so a collector that
  is down or unroutable costs a command a fraction of a second, not the exporter's retries.
  Transport errors never reach a CLI's stderr; a worker logs one line per
  ``EXPORT_ERROR_EVERY_S`` instead of a traceback per batch.
* **One scrape endpoint per worker** (``COMPACTOR_METRICS_PORT``): ``/metrics`` (compactor
  metrics from ``activities/metrics.py`` and the Temporal SDK's own runtime metrics, drained
  from a ``MetricBuffer`` into the same OpenTelemetry meter provider), ``/healthz`` (process
  alive) and ``/readyz`` (Temporal answers its health check and the store answers a HEAD).
* **Span attributes from payloads.** An activity interceptor (inside the OpenTelemetry one,
  so the current span is ``RunActivity:...``) copies tenant, session, snapshot version,
  tokens, status and error type from each activity's input and output onto the span.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from workers.settings import Settings

log = logging.getLogger(__name__)

CLI_FLUSH_S = 0.2
"""Longest a CLI command waits for its spans to leave (a dead collector must not slow it)."""
EXPORT_ERROR_EVERY_S = 300.0
READY_CHECK_S = 2.0


# --- exporter noise ------------------------------------------------------------------------------------


class _QuietExportErrors(logging.Filter):
    """Exporter transport errors: dropped in CLI processes, one line per interval in workers."""

    def __init__(self) -> None:
        super().__init__()
        self.cli = False
        self._last = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.CRITICAL:
            return True
        if self.cli:
            return False
        now = time.monotonic()
        if now - self._last < EXPORT_ERROR_EVERY_S:
            return False
        self._last = now
        record.exc_info = None
        record.exc_text = None
        record.msg = f"telemetry export failing (further errors muted for {EXPORT_ERROR_EVERY_S:.0f}s): {record.getMessage()}"
        record.args = ()
        return True


_QUIET = _QuietExportErrors()
for _name in ("opentelemetry.exporter", "opentelemetry.sdk", "opentelemetry.sdk._shared_internal"):
    logging.getLogger(_name).addFilter(_QUIET)


def quiet_exporters_for_cli() -> None:
    """In a short-lived command, exporter errors are never printed."""
    _QUIET.cli = True


# --- traces --------------------------------------------------------------------------------------------

_TRACING: dict[str, Any] = {}


def _otlp_url(endpoint: str, signal: str) -> str:
    base = endpoint.rstrip("/")
    for s in ("/v1/traces", "/v1/metrics"):
        if base.endswith(s):
            base = base[: -len(s)]
    return f"{base}/v1/{signal}"


def configure_tracing(settings: Settings) -> bool:
    """Install the replay-safe tracer provider exporting by OTLP/HTTP (once per process)."""
    if not settings.otlp_endpoint:
        return False
    if _TRACING:
        return True
    import opentelemetry.trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from temporalio.contrib.opentelemetry import create_tracer_provider

    # No shutdown at exit: its final export would block an exiting process on a dead collector.
    provider = create_tracer_provider(
        resource=Resource.create({"service.name": "compactor"}), shutdown_on_exit=False
    )
    exporter = OTLPSpanExporter(endpoint=_otlp_url(settings.otlp_endpoint, "traces"), timeout=settings.otlp_timeout_s)
    provider.add_span_processor(
        BatchSpanProcessor(exporter, schedule_delay_millis=1000, export_timeout_millis=int(settings.otlp_timeout_s * 1000))
    )
    opentelemetry.trace.set_tracer_provider(provider)
    _TRACING["provider"] = provider
    return True


def flush_tracing(wait_s: float = CLI_FLUSH_S) -> None:
    """Hand buffered spans to the exporter, waiting at most ``wait_s`` (daemon thread)."""
    provider = _TRACING.get("provider")
    if provider is None:
        return
    t = threading.Thread(target=provider.force_flush, args=(int(wait_s * 1000) or 1,), daemon=True)
    t.start()
    t.join(wait_s)


# --- metrics -------------------------------------------------------------------------------------------

_METRICS: dict[str, Any] = {}


def configure_metrics(settings: Settings, *, prometheus: bool) -> Any | None:
    """The process's meter provider: a Prometheus reader and/or an OTLP reader (once per process).

    Returns None when neither is configured (instruments stay no-ops).
    """
    if "provider" in _METRICS:
        return _METRICS["provider"]
    if not prometheus and not settings.otlp_endpoint:
        return None
    import opentelemetry.metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from temporalio.contrib.opentelemetry import ReplaySafeMeterProvider

    readers: list[Any] = []
    if prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader

        readers.append(PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False))
    if settings.otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(
            PeriodicExportingMetricReader(
                OTLPMetricExporter(endpoint=_otlp_url(settings.otlp_endpoint, "metrics"), timeout=settings.otlp_timeout_s),
                export_interval_millis=int(settings.otlp_metrics_interval_s * 1000),
                export_timeout_millis=int(settings.otlp_timeout_s * 1000),
            )
        )
    provider = MeterProvider(
        metric_readers=readers,
        resource=Resource.create({"service.name": "compactor"}),
        views=_histogram_views(),
        shutdown_on_exit=False,
    )
    opentelemetry.metrics.set_meter_provider(ReplaySafeMeterProvider(provider))
    _METRICS["provider"] = provider
    return provider


def _histogram_views() -> list[Any]:
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    from activities.metrics import HISTOGRAM_BUCKETS

    return [
        View(instrument_name=name, aggregation=ExplicitBucketHistogramAggregation(list(bounds)))
        for name, bounds in HISTOGRAM_BUCKETS.items()
    ]


@dataclass
class WorkerTelemetry:
    """What a worker process exports: build before connecting, serve while workers run.

    ``runtime`` (pass it to ``connect``) carries the Temporal SDK's own metrics into the same
    meter provider as the compactor's, so one scrape shows both.
    """

    settings: Settings
    provider: Any | None = None
    runtime: Any | None = None
    buffer: Any | None = None

    @classmethod
    def create(cls, settings: Settings) -> WorkerTelemetry:
        from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

        from activities.metrics import configure_tenant_labels, initialise
        from workers.logs import core_logging_config

        tel = cls(settings)
        tel.provider = configure_metrics(settings, prometheus=settings.metrics_port is not None)
        configure_tenant_labels(settings.tenants, settings.metrics_tenants)
        if tel.provider is not None:
            tel.buffer = MetricBuffer(10_000)
            initialise(settings.model)  # every counter at zero, under its label sets
        # The Rust core's log lines go through Python logging (workers/logs.py), not raw stderr.
        tel.runtime = Runtime(telemetry=TelemetryConfig(metrics=tel.buffer, logging=core_logging_config(settings.log_level)))
        return tel

    def serving(self, client: Any, store: Any) -> _Serving:
        """Async context: drain Temporal metrics and serve /metrics, /healthz, /readyz."""
        return _Serving(self, client, store)


class _Serving:
    def __init__(self, tel: WorkerTelemetry, client: Any, store: Any) -> None:
        self.tel, self.client, self.store = tel, client, store
        self._exporter: Any | None = None
        self.server: OpsServer | None = None
        self.stopping = False
        self._census: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Serving:
        if self.tel.buffer is not None:
            from temporalio.contrib.opentelemetry import MetricsExporter

            self._exporter = MetricsExporter(self.tel.buffer, self.tel.provider, meter_name="temporalio")
            await self._exporter.__aenter__()
        port = self.tel.settings.metrics_port
        if self.tel.provider is not None and self.store is not None:
            await asyncio.wait_for(self._count_breakers(), 10)  # the gauge is right from the first scrape
        if port is not None:
            loop = asyncio.get_running_loop()
            self.server = OpsServer(
                self.tel.settings.metrics_host, port, lambda: _ready_sync(loop, self), metrics=self.tel.provider is not None
            )
            self.server.start()
            log.info("metrics and health on http://%s:%d (/metrics /healthz /readyz)", *self.server.address)
        if self.tel.provider is not None and self.store is not None:
            self._census = asyncio.create_task(self._breaker_census(), name="compactor-breaker-census")
        return self

    def drain(self) -> None:
        """SIGTERM received: /readyz answers 503 from now on, while in-flight work finishes."""
        self.stopping = True

    async def _count_breakers(self) -> None:
        from activities.metrics import set_open_breakers
        from compactor.store.breakers import count_open_breakers

        tenants = list(self.tel.settings.tenants) or None
        try:
            counts = await asyncio.wait_for(asyncio.to_thread(count_open_breakers, self.store, tenants), 8)
            set_open_breakers(counts)
        except Exception as exc:  # noqa: BLE001 - a store outage is logged by the monitor
            log.debug("breaker census failed: %s", type(exc).__name__)

    async def _breaker_census(self) -> None:
        """Open breakers per tenant, recounted from the store every BREAKER_CENSUS_S."""
        from activities.metrics import BREAKER_CENSUS_S

        while True:  # the first count ran before the endpoint served
            await asyncio.sleep(BREAKER_CENSUS_S)
            await self._count_breakers()

    async def __aexit__(self, *exc: object) -> None:
        self.stopping = True
        if self._census is not None:
            self._census.cancel()
        if self.server is not None:
            self.server.stop()
        if self._exporter is not None:
            await self._exporter.__aexit__(None, None, None)

    async def readiness(self) -> dict[str, Any]:
        """Temporal health check and a store HEAD, concurrently, each bounded by ``READY_CHECK_S``."""

        async def temporal() -> str:
            ok = await self.client.service_client.check_health(timeout=timedelta(seconds=READY_CHECK_S))
            return "ok" if ok else "not serving"

        async def store() -> str:
            await asyncio.to_thread(probe_store, self.store, self.tel.settings)
            return "ok"

        async def bounded(check: Callable[[], Any]) -> str:
            try:
                return await asyncio.wait_for(check(), READY_CHECK_S)
            except Exception as exc:  # noqa: BLE001 - any failure is "not ready", said in the body
                return f"{type(exc).__name__}: {exc}"[:200]

        if self.stopping:  # draining: no check can make it ready again
            return {"worker": "shutting down"}
        t, st = await asyncio.gather(bounded(temporal), bounded(store))
        checks: dict[str, Any] = {"temporal": t, "store": st}
        if self.stopping:
            checks["worker"] = "shutting down"
        return checks


def probe_store(store: Any, settings: Settings) -> None:
    """One uncached round trip to the store inside the worker's tenant prefix; raises if not usable.

    A local store whose directory is gone is not ready (a HEAD of a missing key would still
    answer "absent"); on S3 a one-key listing under ``t/{tenant}/`` (what a tenant-restricted
    worker may list) meets a deleted bucket, revoked credentials or an unreachable endpoint on
    every call: nothing is remembered between probes.
    """
    import os
    from pathlib import Path

    from compactor.errors import StoreUnavailable

    root = getattr(store, "root", None)
    if root is not None:
        if not Path(root).is_dir():
            raise StoreUnavailable(f"store directory {root} does not exist")
        if not os.access(root, os.W_OK | os.X_OK):
            raise StoreUnavailable(f"store directory {root} is not writable")
    prefix = f"t/{settings.tenants[0]}/" if settings.tenants else "t/"
    lister = getattr(store, "list_children", None)
    if lister is not None:
        lister(prefix, limit=1)
    else:
        store.head(prefix + ".readyz")


def _ready_sync(loop: asyncio.AbstractEventLoop, serving: _Serving) -> dict[str, Any]:
    fut = asyncio.run_coroutine_threadsafe(serving.readiness(), loop)
    try:
        return fut.result(READY_CHECK_S + 1)
    except Exception as exc:  # noqa: BLE001 - a stuck loop is itself "not ready"
        fut.cancel()
        return {"worker": f"readiness check did not finish: {type(exc).__name__}"}


# --- HTTP: /metrics /healthz /readyz -------------------------------------------------------------------


class OpsServer:
    """A small threaded HTTP server; never touches the event loop except through ``ready``."""

    def __init__(self, host: str, port: int, ready: Callable[[], dict[str, Any]], *, metrics: bool = True) -> None:
        handler = _handler(ready, metrics)
        try:
            self._httpd = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            from compactor.errors import InvalidInput

            # A second worker on the node, or a leftover process: say which port, no traceback.
            raise InvalidInput(
                f"cannot serve metrics/health on {host}:{port}: {exc.strerror or exc}; stop what "
                "listens there or set another COMPACTOR_METRICS_PORT (0 = any free port)"
            ) from None
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="compactor-ops-http", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(ready: Callable[[], dict[str, Any]], metrics: bool) -> type[BaseHTTPRequestHandler]:
    import json

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._send(200, b"ok\n", "text/plain")
            elif path == "/readyz":
                checks = ready()
                ok = all(v == "ok" for v in checks.values()) and bool(checks)
                self._send(200 if ok else 503, (json.dumps(checks) + "\n").encode(), "application/json")
            elif path == "/metrics" and metrics:
                from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

                self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - probes every few seconds: no access log
            return

    return Handler


# --- span attributes -----------------------------------------------------------------------------------


class SpanAttributesInterceptor(Interceptor):
    """Puts tenant, session, snapshot version, tokens, status and error type on activity spans."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _SpanAttributesActivity(next)


class _SpanAttributesActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        from activities.metrics import annotate_span

        annotate_span(*input.args[:1])
        try:
            result = await self.next.execute_activity(input)
        except BaseException as exc:
            annotate_span(error=exc)
            raise
        annotate_span(result)
        return result
