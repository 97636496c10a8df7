"""Worker logs: one line per event on stderr, JSON or text, never conversation text.

Why it is shaped this way:

* **stdlib ``logging`` only.** Every line, ours and Temporal's (the Python SDK's loggers and
  the Rust core's, forwarded by the runtime into ``temporalio.core``), goes through the one
  handler :func:`configure_logging` installs on the root logger, so a platform's log shipper
  parses one format. ``COMPACTOR_LOG_FORMAT=json`` writes one JSON object per line; ``text``
  writes ``time level logger message key=value...``; ``auto`` (default) is text on a TTY and
  JSON otherwise (a container's stderr is not a TTY, so pods log JSON without setting it).
* **Facts as fields.** An event is logged with ``extra={"fields": {...}}`` (see :func:`event`):
  the JSON line carries them as top-level keys (``event``, ``workflow_id``, ``tenant``,
  ``session``, ``status``, ``tokens_before`` ...) and the text line as ``key=value``.
* **No conversation text, by construction.** What we log are ids, counts, statuses, error
  types and step names. An exception attached to a record (``exc_info``) is rendered as its
  type, the message only for kinds whose text we write ourselves or that describe transport
  (``CompactorError``, Temporal failures, ``OSError``, botocore), and the stack as
  ``file:line function`` frames, never source lines or locals: an unexpected exception's
  message may quote the session (a provider error echoing the request, a parse error quoting
  a line), and that is the one text a log must not carry.
* **One line per outage, not per poll.** :class:`ConnectivityMonitor` probes Temporal and the
  store every few seconds and logs a transition once (``temporal_unavailable`` ...
  ``temporal_recovered`` with the outage's length); while Temporal is down, the SDK's own
  per-poll warnings are counted instead of printed, and the recovery line says how many.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from typing import IO, Any

LOG_FORMATS = ("auto", "json", "text")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
PROBE_EVERY_S = 5.0
"""How often the connectivity monitor probes Temporal and the store."""
PROBE_TIMEOUT_S = 3.0

EVENTS = logging.getLogger("compactor.events")
"""The logger of the worker's event lines (outcomes, breakers, outages, drains)."""

# Exception kinds whose message is ours or transport-level, never conversation text.
_SAFE_EXC_MODULES = ("compactor.", "temporalio.", "botocore.", "boto3.", "urllib3.", "httpx", "httpcore")
_TEMPORAL_KEYS = (
    "workflow_id", "workflow_run_id", "run_id", "workflow_type", "activity_id", "activity_type",
    "attempt", "task_queue", "namespace",
)


def event(logger: logging.Logger, level: int, name: str, message: str, **fields: Any) -> None:
    """Log one event line: ``message`` for people, ``fields`` (ids, counts) for machines."""
    logger.log(level, message, extra={"fields": {"event": name, **fields}})


# --- rendering -------------------------------------------------------------------------------------


def _safe_message(exc: BaseException) -> bool:
    mod = type(exc).__module__ or ""
    if isinstance(exc, (OSError, TimeoutError, asyncio.TimeoutError)):
        return True
    return mod.startswith(_SAFE_EXC_MODULES)


def describe_exception(exc: BaseException) -> dict[str, Any]:
    """Type, message (safe kinds only) and stack frames of an exception and its causes."""
    out: dict[str, Any] = {"error_type": type(exc).__name__}
    if _safe_message(exc):
        out["error"] = str(exc)[:500]
    frames = [f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)]
    if frames:
        out["stack"] = frames[-12:]
    causes = []
    cur = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while cur is not None and len(causes) < 5:
        causes.append(type(cur).__name__)
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    if causes:
        out["caused_by"] = causes
    return out


def _temporal_fields(record: logging.LogRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in ("temporal_workflow", "temporal_activity"):
        info = getattr(record, attr, None)
        if isinstance(info, dict):
            for k in _TEMPORAL_KEYS:
                if k in info and info[k] is not None:
                    out.setdefault(k, info[k])
    return out


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = dict(_temporal_fields(record))
    extra = getattr(record, "fields", None)
    if isinstance(extra, dict):
        fields.update(extra)
    if record.exc_info and record.exc_info[1] is not None:
        fields.update(describe_exception(record.exc_info[1]))
    return fields


def _message(record: logging.LogRecord) -> str:
    msg = record.getMessage()
    # The SDK's adapters append the whole info dict to the message; it is in the fields.
    if getattr(record, "temporal_activity", None) is not None or getattr(record, "temporal_workflow", None) is not None:
        cut = msg.rfind(" ({'")
        if cut > 0 and msg.endswith("})"):
            msg = msg[:cut]
    return msg


def _timestamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": _message(record),
        }
        for k, v in _fields(record).items():
            doc.setdefault(k, v)
        return json.dumps(doc, ensure_ascii=False, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``2026-01-01T00:00:00.000Z WARNING logger message key=value ...`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname, record.name, _message(record)]
        for k, v in _fields(record).items():
            if k == "event":
                continue
            if isinstance(v, (list, tuple)):
                v = ",".join(map(str, v))
            text = str(v)
            parts.append(f"{k}={json.dumps(text) if (' ' in text or not text) else text}")
        return " ".join(parts).replace("\n", "\\n")


# --- configuration ---------------------------------------------------------------------------------


class _PollNoise(logging.Filter):
    """While Temporal is known to be down, its per-poll warnings are counted, not printed."""

    def __init__(self) -> None:
        super().__init__()
        self.temporal_down = False
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if self.temporal_down and record.name.startswith("temporalio") and record.levelno < logging.CRITICAL:
            self.suppressed += 1
            return False
        return True


POLL_NOISE = _PollNoise()
_HANDLER: dict[str, logging.Handler] = {}


def resolve_format(fmt: str, stream: IO[str]) -> str:
    """``auto`` -> text on a TTY, json otherwise."""
    fmt = (fmt or "auto").lower()
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return "text" if callable(isatty) and isatty() else "json"
    return fmt


def configure_logging(fmt: str = "auto", level: str = "INFO", stream: IO[str] | None = None) -> logging.Handler:
    """Install the process's one log handler on the root logger (replacing an earlier one)."""
    stream = stream or sys.stderr
    root = logging.getLogger()
    old = _HANDLER.pop("handler", None)
    if old is not None:
        root.removeHandler(old)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if resolve_format(fmt, stream) == "json" else TextFormatter())
    handler.addFilter(POLL_NOISE)
    root.addHandler(handler)
    root.setLevel(getattr(logging, (level or "INFO").upper(), logging.INFO))
    # HTTP client libraries stay at WARNING whatever the level: at DEBUG the anthropic client
    # logs whole request options (the conversation) and the transports log bodies.
    for name in ("botocore", "boto3", "urllib3", "httpx", "httpx2", "httpcore", "httpcore2", "anthropic", "s3transfer"):
        logging.getLogger(name).setLevel(max(root.level, logging.WARNING))
    _HANDLER["handler"] = handler
    return handler


def configure_from_settings(settings: Any, stream: IO[str] | None = None) -> logging.Handler:
    return configure_logging(settings.log_format, settings.log_level, stream)


def core_logging_config(level: str = "INFO") -> Any:
    """The Temporal runtime's logging: the Rust core's lines forwarded into ``temporalio.core``."""
    from temporalio.runtime import LogForwardingConfig, LoggingConfig, TelemetryFilter

    core = "WARN" if (level or "INFO").upper() not in ("DEBUG",) else "INFO"
    return LoggingConfig(
        filter=TelemetryFilter(core_level=core, other_level="ERROR"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )


# --- outages ---------------------------------------------------------------------------------------


class ConnectivityMonitor:
    """Probes Temporal and the store; logs each outage and each recovery once.

    A worker that loses Temporal for 50 s logs ``temporal_unavailable`` when the first probe
    fails and ``temporal_recovered`` (with ``outage_s``) when one succeeds again; nothing in
    between. The same for the store (a HEAD inside the worker's tenant prefix).
    """

    def __init__(
        self,
        checks: dict[str, Callable[[], Any]],
        *,
        every_s: float = PROBE_EVERY_S,
        timeout_s: float = PROBE_TIMEOUT_S,
        logger: logging.Logger = EVENTS,
    ) -> None:
        self.checks = checks
        self.every_s = every_s
        self.timeout_s = timeout_s
        self.logger = logger
        self.down_since: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def for_worker(cls, client: Any, store: Any, tenant_prefix: str = "t/", **kw: Any) -> ConnectivityMonitor:
        from datetime import timedelta

        async def temporal() -> None:
            ok = await client.service_client.check_health(timeout=timedelta(seconds=PROBE_TIMEOUT_S))
            if not ok:
                raise RuntimeError("health check: not serving")

        async def object_store() -> None:
            await asyncio.to_thread(store.head, f"{tenant_prefix}.probe")

        return cls({"temporal": temporal, "store": object_store}, **kw)

    async def probe_once(self) -> None:
        results = await asyncio.gather(*(self._probe(name, fn) for name, fn in self.checks.items()))
        for name, err in zip(self.checks, results):
            self._transition(name, err)

    async def _probe(self, name: str, fn: Callable[[], Any]) -> BaseException | None:
        try:
            await asyncio.wait_for(fn(), self.timeout_s)
            return None
        except Exception as exc:  # noqa: BLE001 - any failure is an outage, said once
            return exc

    def _transition(self, name: str, err: BaseException | None) -> None:
        now = time.monotonic()
        if err is not None and name not in self.down_since:
            self.down_since[name] = now
            if name == "temporal":
                POLL_NOISE.temporal_down, POLL_NOISE.suppressed = True, 0
            event(self.logger, logging.ERROR, f"{name}_unavailable", f"{name} unreachable",
                  dependency=name, **describe_exception(err))
        elif err is None and name in self.down_since:
            outage = now - self.down_since.pop(name)
            extra: dict[str, Any] = {}
            if name == "temporal":
                POLL_NOISE.temporal_down = False
                extra["suppressed_sdk_lines"] = POLL_NOISE.suppressed
            event(self.logger, logging.WARNING, f"{name}_recovered",
                  f"{name} reachable again after {outage:.1f} s", dependency=name,
                  outage_s=round(outage, 1), **extra)

    async def run(self) -> None:
        while True:
            await self.probe_once()
            await asyncio.sleep(self.every_s)

    async def __aenter__(self) -> ConnectivityMonitor:
        self._task = asyncio.create_task(self.run(), name="compactor-connectivity")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
        POLL_NOISE.temporal_down = False


# --- lifecycle -------------------------------------------------------------------------------------


def log_worker_started(task_queues: list[str]) -> None:
    event(EVENTS, logging.INFO, "worker_started", f"polling {', '.join(task_queues)}", task_queues=task_queues)


# --- drain -----------------------------------------------------------------------------------------


def log_drain_started(grace_s: float, signal_name: str = "SIGTERM", model_call_grace_s: float = 0.0) -> float:
    """``model_call_grace_s``: the model-call worker's longer bound (at least one model call)."""
    longer = model_call_grace_s > grace_s
    event(EVENTS, logging.WARNING, "drain_started",
          f"{signal_name}: stopped polling, in-flight activities have {grace_s:.0f} s to finish"
          + (f" (model calls {model_call_grace_s:.0f} s)" if longer else ""),
          signal=signal_name, grace_s=grace_s, **({"model_call_grace_s": model_call_grace_s} if longer else {}))
    return time.monotonic()


def log_drain_finished(started: float) -> None:
    took = time.monotonic() - started
    event(EVENTS, logging.WARNING, "drain_finished", f"worker drained in {took:.1f} s", drain_s=round(took, 1))
