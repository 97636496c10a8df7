"""The task queues' backlog as a worker metric, for the autoscaler.

Workers spend most of a compaction waiting on model calls, so CPU says little about load; the
number of tasks waiting in a queue does. Each worker polls ``DescribeTaskQueue`` with
``report_stats`` (Temporal's ``approximate_backlog_count``) every ``BACKLOG_POLL_S`` for its
queues and exports the gauge ``compactor_task_queue_backlog{task_queue, type}`` (type =
``workflow`` | ``activity``) on its ``/metrics``. Every replica reports the same numbers: the
HPA's adapter rule takes ``max`` (infra/k8s, docs/deploy.md).

Why poll in the worker rather than run a separate exporter: the worker already holds the
Temporal credentials (mTLS, API key) and the namespace; a poll is one cheap frontend call per
queue and type. A failed poll keeps the last value and is retried at the next interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

log = logging.getLogger(__name__)

BACKLOG_POLL_S = 15.0
METRIC = "compactor_task_queue_backlog"


class BacklogGauge:
    """Polls the backlog of ``queues`` and serves it to an OpenTelemetry observable gauge."""

    def __init__(self, client: Any, namespace: str, queues: list[str], *, interval_s: float = BACKLOG_POLL_S) -> None:
        self.client, self.namespace, self.queues = client, namespace, list(dict.fromkeys(queues))
        self.interval_s = interval_s
        # Exists at zero from the start: an alert or the HPA sees the series before any load.
        self.values: dict[tuple[str, str], int] = {(q, t): 0 for q in self.queues for t in ("workflow", "activity")}
        self._task: asyncio.Task | None = None
        self._failing = False

    async def poll_once(self) -> None:
        from temporalio.api.enums.v1 import TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

        kinds = {"workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY}
        for q in self.queues:
            for name, kind in kinds.items():
                resp = await self.client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
                    namespace=self.namespace, task_queue=TaskQueue(name=q), task_queue_type=kind, report_stats=True,
                ))
                self.values[(q, name)] = int(resp.stats.approximate_backlog_count)

    async def _loop(self) -> None:
        while True:
            try:
                await self.poll_once()
                if self._failing:
                    log.info("task queue backlog poll recovered")
                self._failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the gauge keeps its last value
                if not self._failing:
                    log.warning("task queue backlog poll failing (keeping last values): %s", type(exc).__name__)
                self._failing = True
            await asyncio.sleep(self.interval_s)

    def observe(self, _options: Any = None) -> list[Any]:
        from opentelemetry.metrics import Observation

        return [Observation(v, {"task_queue": q, "type": t}) for (q, t), v in sorted(self.values.items())]

    async def __aenter__(self) -> BacklogGauge:
        import opentelemetry.metrics

        opentelemetry.metrics.get_meter("compactor.backlog").create_observable_gauge(
            METRIC, callbacks=[self.observe],
            description="Temporal's approximate backlog count of the worker's task queues (tasks waiting).",
        )
        self._task = asyncio.create_task(self._loop(), name="compactor-backlog")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
