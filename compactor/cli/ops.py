"""Operator commands: dev, worker, inspect, rollback, verify, history, replay, sweep.

Commands that talk to Temporal use ``TEMPORAL_ADDRESS`` (or ``--address``); ``compactor dev``
prints the address to export. Store commands use ``--store`` / ``COMPACTOR_STORE``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from compactor.cli.common import add_store_args, table
from compactor.errors import InvalidInput


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dev", help="run the embedded stack (Temporal dev server + UI + worker)")
    p.add_argument("--port", type=int, default=7233, help="Temporal frontend port (default %(default)s)")
    p.add_argument("--ui-port", type=int, default=8233, help="Temporal UI port (default %(default)s)")
    p.add_argument("--db", default=None, help="persist the dev server's state in this SQLite file")
    add_store_args(p)
    p.set_defaults(func=cmd_dev)

    p = sub.add_parser("worker", help="run a worker against TEMPORAL_ADDRESS until interrupted")
    p.add_argument("--address", default=None, help="Temporal address (default TEMPORAL_ADDRESS)")
    p.add_argument("--task-queue", default=None, help="task queue (default COMPACTOR_TASK_QUEUE)")
    add_store_args(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("inspect", help="a session's head, checkpoints and compaction records")
    p.add_argument("session")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_store_args(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("rollback", help="point a session at an earlier checkpoint (or none)")
    p.add_argument("session")
    p.add_argument("--to", required=True, metavar="CHECKPOINT|none")
    add_store_args(p)
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser(
        "verify",
        help="check a session's stored objects for damage or tampering",
        description="Check the head (version, segments, checkpoint digest and range), every "
        "segment's sha256 and seqs, every checkpoint and record, and the artifacts the current "
        "checkpoint references. Exit 0 when clean, 1 when problems are found.",
    )
    p.add_argument("session", nargs="?", help="session id (or --all)")
    p.add_argument("--all", action="store_true", help="every session of the tenant")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_store_args(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("breaker", help="a session's circuit breaker for automatic compaction (show or --clear)")
    p.add_argument("session")
    p.add_argument("--clear", action="store_true", help="close it: automatic compaction resumes")
    add_store_args(p)
    p.set_defaults(func=cmd_breaker)

    p = sub.add_parser("history", help="step timeline of a compaction workflow")
    p.add_argument("workflow_id", metavar="WORKFLOW_ID")
    p.add_argument("--run-id", default=None)
    p.add_argument("--json", action="store_true", help="dump the history as Temporal's JSON")
    p.add_argument("--address", default=None)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("replay", help="replay a workflow history against this code (determinism)")
    p.add_argument("source", metavar="WORKFLOW_ID|HISTORY.json")
    p.add_argument("--address", default=None)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("sweep", help="compact every session over its trigger (once or on a schedule)")
    p.add_argument("--once", action="store_true", help="run one sweep now and wait for it")
    p.add_argument("--every", default="10m", help="schedule interval, e.g. 30s, 10m, 1h (default %(default)s)")
    p.add_argument("--delete", action="store_true", help="delete the tenant's sweep schedule")
    p.add_argument("--policy", default="default")
    p.add_argument("--window", type=int, default=200_000)
    p.add_argument("--max-output", type=int, default=32_000)
    p.add_argument("--address", default=None)
    add_store_args(p)
    p.set_defaults(func=cmd_sweep)


# --- helpers -------------------------------------------------------------------------------------


def run_and_exit(coro: Any) -> int:
    """Run a command that holds a Temporal client, then leave the process at once.

    The SDK's core runtime threads can call into Python while the interpreter finalizes and
    abort it (exit 134) after the command already succeeded; short-lived CLI processes that
    used a client therefore flush and ``os._exit`` with the command's own status.
    """
    import os

    from compactor.errors import CompactorError
    from workers.telemetry import flush_tracing, quiet_exporters_for_cli

    quiet_exporters_for_cli()  # a collector that is down is not this command's business
    try:
        rc = int(asyncio.run(coro) or 0)
    except CompactorError as exc:
        print(f"compactor: error: {exc}", file=sys.stderr)
        rc = exc.exit_code
    except KeyboardInterrupt:
        rc = 130
    except Exception as exc:  # RPC errors (unknown workflow id, server down): say what failed
        print(f"compactor: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        rc = 1
    try:
        flush_tracing()
    except Exception as exc:  # noqa: BLE001 - telemetry must never change the exit status
        print(f"compactor: could not export traces: {exc}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _settings(args: argparse.Namespace, **extra: Any) -> Any:
    from workers.settings import Settings

    s = Settings()
    upd: dict[str, Any] = {}
    if getattr(args, "store", None):
        upd["store"] = args.store
    if getattr(args, "tenant", None):
        upd["tenant"] = args.tenant
    if getattr(args, "address", None):
        upd["temporal_address"] = args.address
    if getattr(args, "task_queue", None):
        upd["task_queue"] = args.task_queue
        upd["llm_task_queue"] = args.task_queue + "-llm"
    upd.update(extra)
    return s.model_copy(update=upd)


async def _client(settings: Any) -> Any:
    from workers.worker import connect

    if not settings.temporal_address:
        raise InvalidInput(
            "no Temporal address: set TEMPORAL_ADDRESS (e.g. the one `compactor dev` prints) "
            "or pass --address"
        )
    return await connect(settings)


def _log(args: argparse.Namespace) -> Any:
    from compactor.store import SessionLog, open_store

    return SessionLog(open_store(args.store), args.tenant, args.session)


# --- dev / worker --------------------------------------------------------------------------------


def cmd_dev(args: argparse.Namespace) -> int:
    return asyncio.run(_dev(args))


async def _dev(args: argparse.Namespace) -> int:
    from compactor.store import open_store
    from workers.devstack import start_temporal
    from workers.telemetry import WorkerTelemetry
    from workers.worker import _store_s3_client, build_workers, connect

    settings = _settings(args)
    server = await asyncio.to_thread(
        start_temporal, args.port, args.ui_port, False, args.db, None, 90.0
    )
    try:
        store = open_store(settings.store)
        tel = WorkerTelemetry.create(settings)
        client = await connect(settings, server.address, s3_client=_store_s3_client(store), runtime=tel.runtime)
        workers = build_workers(client, settings, store)
        print(f"Temporal   {server.address}   (export TEMPORAL_ADDRESS={server.address})")
        print(f"UI         http://127.0.0.1:{args.ui_port}")
        print(f"store      {store.url}")
        print(f"queues     {', '.join(w.config()['task_queue'] for w in workers)}")
        if settings.metrics_port is not None:
            print(f"metrics    http://127.0.0.1:{settings.metrics_port}/metrics   (/healthz /readyz)")
        print("worker running; Ctrl-C to stop", flush=True)
        async with tel.serving(client, store):
            await _serve_until_signal(workers)
    finally:
        await asyncio.to_thread(server.stop)
    return 0


async def _serve_until_signal(workers: list[Any]) -> None:
    """Run workers until SIGINT/SIGTERM, then shut them down gracefully."""
    import contextlib
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with contextlib.AsyncExitStack() as stack:
        for w in workers:
            await stack.enter_async_context(w)
        await stop.wait()
        print("stopping ...", flush=True)


def cmd_worker(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if not settings.temporal_address:
        raise InvalidInput("no Temporal address: set TEMPORAL_ADDRESS or pass --address")
    print(f"worker: {settings.temporal_address} namespace {settings.temporal_namespace}, "
          f"queues {settings.task_queue} / {settings.llm_task_queue}, store {settings.store}", flush=True)
    asyncio.run(_worker(settings))
    return 0


async def _worker(settings: Any) -> None:
    from compactor.store import open_store
    from workers.telemetry import WorkerTelemetry
    from workers.worker import _store_s3_client, build_workers, connect

    store = open_store(settings.store)
    tel = WorkerTelemetry.create(settings)
    client = await connect(settings, s3_client=_store_s3_client(store), runtime=tel.runtime)
    async with tel.serving(client, store):
        await _serve_until_signal(build_workers(client, settings, store))


# --- inspect / rollback --------------------------------------------------------------------------


def cmd_inspect(args: argparse.Namespace) -> int:
    log = _log(args)
    head = log.head()
    if head.version == 0:
        raise InvalidInput(f"session {args.tenant}/{args.session} has no events in {args.store}")
    recs = log.list_records()  # each verified against its self-digest
    # Checkpoints are verified against the digests the head and the records hold.
    digests = {r.checkpoint: r.checkpoint_sha256 for r in recs if r.checkpoint and r.checkpoint_sha256}
    if head.checkpoint and head.checkpoint_sha256:
        digests[head.checkpoint] = head.checkpoint_sha256
    ckpts = log.list_checkpoints(digests)
    log.current_checkpoint(head)  # its range must lie inside the version
    if args.json:
        print(json.dumps({
            "head": head.model_dump(mode="json", exclude={"segments"}),
            "segments": len(head.segments),
            "checkpoints": [c.model_dump(mode="json", include={
                "id", "covers", "based_on", "summarizer", "summary_tokens", "snapshot_version",
                "created_at", "artifacts"}) for c in ckpts],
            "records": [r.model_dump(mode="json") for r in recs],
        }, indent=2))
        return 0
    print(f"session    {args.tenant}/{args.session}  version {head.version}  "
          f"segments {len(head.segments)}  checkpoint {head.checkpoint or 'none'}")
    if ckpts:
        print("\ncheckpoints")
        print(table([[("* " if c.id == head.checkpoint else "  ") + c.id,
                      f"1-{c.covers.end}" if not c.covers.empty else "-", c.snapshot_version,
                      c.summary_tokens, c.summarizer, c.based_on or "-",
                      c.created_at.isoformat(timespec="seconds") if c.created_at else "-"] for c in ckpts],
                    ["id", "covers", "snapshot", "summary tok", "summarizer", "based on", "created"]))
    if recs:
        print("\nrecords")
        print(table([[r.workflow_id or r.id, r.status, f"1-{r.covers.end}" if r.covers else "-",
                      r.tokens_before, r.tokens_after, ",".join(r.layers) or "-", r.conflicts_merged,
                      r.attempts, f"{sum(v for k, v in r.durations_ms.items() if k != 'total'):.0f}",
                      (r.error or r.fallback_reason or "")[:60]] for r in recs],
                    ["workflow", "status", "covers", "before", "after", "layers", "merged",
                     "attempts", "ms", "note"]))
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from compactor.records import CompactionRecord

    log = _log(args)
    head = log.head()
    target = None if args.to.lower() == "none" else args.to
    digest = None
    if target is not None:
        log.read_checkpoint(target)  # NotFound names the checkpoint
        # The digest its compaction record (or the head) holds; the head gets it after the
        # stored bytes are checked against it. Legacy checkpoints have none recorded.
        digest = log.recorded_checkpoint_sha256(target, head)
    if head.checkpoint == target:
        print(f"{args.tenant}/{args.session} already at checkpoint {target or 'none'}")
        return 0
    new = log.set_checkpoint(target, expected_etag=head.etag, sha256=digest)
    now = datetime.now(timezone.utc)
    log.write_record(CompactionRecord(
        id=f"rollback-{now.strftime('%Y%m%dT%H%M%S%f')}", tenant=args.tenant, session=args.session,
        trigger="rollback", checkpoint=target, checkpoint_sha256=new.checkpoint_sha256,
        snapshot_version=head.version, committed_version=new.version, status="rolled_back",
        error=f"rolled back from {head.checkpoint or 'none'} to {target or 'none'}", created_at=now,
    ))
    print(f"{args.tenant}/{args.session}: checkpoint {head.checkpoint or 'none'} -> {target or 'none'} "
          f"(version {new.version}; nothing deleted)")
    if target is not None and digest is None:
        print(f"note: no digest was recorded for checkpoint {target} (written before checkpoints "
              f"were verified); its current bytes are now the reference")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from compactor.store import SessionLog, list_sessions, open_store
    from compactor.store.verify import render, verify_session

    if bool(args.session) == bool(args.all):
        raise InvalidInput("give a session id or --all (not both)")
    store = open_store(args.store)
    sessions = list_sessions(store, args.tenant) if args.all else [args.session]
    reports = [verify_session(SessionLog(store, args.tenant, s)) for s in sessions]
    if args.json:
        print(json.dumps([dict(r.model_dump(mode="json"), ok=r.ok) for r in reports], indent=2))
    elif reports:
        print(render(reports))
    else:
        print(f"no sessions for tenant {args.tenant} in {store.url}")
    return 0 if all(r.ok for r in reports) else 1


def cmd_breaker(args: argparse.Namespace) -> int:
    import getpass

    from activities.breaker import clear_breaker, load_breaker
    from compactor.store import open_store

    store = open_store(args.store)
    name = f"{args.tenant}/{args.session}"
    if args.clear:
        st = clear_breaker(store, args.tenant, args.session, by=f"operator {getpass.getuser()}")
        print(f"{name}: breaker closed (by {st.cleared_by}); automatic compaction resumes")
        return 0
    st, _ = load_breaker(store, args.tenant, args.session)
    if st is None:
        print(f"{name}: breaker closed (no failed compactions recorded)")
        return 0
    state = "OPEN: automatic compaction paused" if st.open else "closed"
    print(f"{name}: breaker {state}; {st.consecutive_failures} consecutive failure(s)")
    if st.last_error:
        print(f"  last error: {st.last_error}")
    if st.cleared_by:
        print(f"  last cleared by {st.cleared_by} at {st.cleared_at}")
    for o in st.history[-5:]:
        print(f"  {o.at}  {'ok    ' if o.ok else 'FAILED'}  {o.trigger}  {o.error or ''}".rstrip())
    if st.open:
        print(f"  clear with: compactor breaker {args.session} --clear (or request a manual compaction)")
    return 0


# --- history / replay ----------------------------------------------------------------------------


def cmd_history(args: argparse.Namespace) -> int:
    return run_and_exit(_history(args))


async def _fetch_history(settings: Any, workflow_id: str, run_id: str | None = None) -> Any:
    """A workflow's history; with COMPACTOR_TENANTS, only a bound tenant's (id, then its
    CompactorTenant search attribute)."""
    from temporalio.common import SearchAttributeKey

    from compactor.cli.common import check_workflow_id, cli_scope

    check_workflow_id(workflow_id)  # before any RPC
    client = await _client(settings)
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    if cli_scope().bound:
        desc = await handle.describe()
        attr = desc.typed_search_attributes.get(SearchAttributeKey.for_keyword("CompactorTenant"))
        if attr is not None:
            cli_scope().check(attr)
    return await handle.fetch_history()


async def _history(args: argparse.Namespace) -> int:
    history = await _fetch_history(_settings(args), args.workflow_id, args.run_id)
    if args.json:
        print(history.to_json())
        return 0
    print(render_timeline(history))
    return 0


def timeline(history: Any) -> list[dict[str, Any]]:
    """Steps of a workflow history: name, kind, attempts, duration, outcome, summary."""
    from temporalio.api.enums.v1 import EventType
    from temporalio.converter import PayloadConverter

    conv = PayloadConverter.default
    steps: dict[int, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    t0 = None
    for ev in history.events:
        ts = ev.event_time.ToDatetime()
        t0 = t0 or ts
        et = ev.event_type
        if et == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            a = ev.activity_task_scheduled_event_attributes
            summary = _summary(conv, ev)
            step = {"step": a.activity_type.name, "kind": "activity", "queue": a.task_queue.name,
                    "at_ms": (ts - t0).total_seconds() * 1000, "start": ts, "attempts": 1,
                    "outcome": "scheduled", "summary": summary, "ms": None}
            steps[ev.event_id] = step
            out.append(step)
        elif et == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = ev.activity_task_started_event_attributes
            s = steps.get(a.scheduled_event_id)
            if s:
                s["attempts"] = a.attempt
                if a.HasField("last_failure"):
                    s["last_failure"] = a.last_failure.message
        elif et in (EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
                    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT):
            attrs = (ev.activity_task_completed_event_attributes
                     if et == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
                     else ev.activity_task_failed_event_attributes
                     if et == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                     else ev.activity_task_timed_out_event_attributes)
            s = steps.get(attrs.scheduled_event_id)
            if s:
                s["ms"] = (ts - s["start"]).total_seconds() * 1000
                s["outcome"] = {EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
                                EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed"}.get(et, "timed out")
                if et != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    s["failure"] = attrs.failure.message or attrs.failure.cause.message
        elif et == EventType.EVENT_TYPE_MARKER_RECORDED:
            m = ev.marker_recorded_event_attributes
            if m.marker_name != "core_local_activity":
                continue
            data: dict[str, Any] = {}
            if "data" in m.details and m.details["data"].payloads:
                try:
                    data = conv.from_payload(m.details["data"].payloads[0], dict)
                except Exception:
                    data = {}
            ms = None
            if "result" in m.details and m.details["result"].payloads:
                try:  # our store activities report the time they spent
                    ms = conv.from_payload(m.details["result"].payloads[0], dict).get("ms")
                except Exception:
                    ms = None
            failed = m.HasField("failure")
            step = {"step": data.get("activity_type", "local activity"), "kind": "local",
                    "at_ms": (ts - t0).total_seconds() * 1000, "attempts": data.get("attempt", 1),
                    "outcome": "failed" if failed else "completed", "ms": ms,
                    "summary": _summary(conv, ev)}
            if failed:
                step["failure"] = m.failure.message or m.failure.cause.message
            out.append(step)
        elif et == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            a = ev.workflow_execution_signaled_event_attributes
            out.append({"step": f"signal {a.signal_name}", "kind": "signal",
                        "at_ms": (ts - t0).total_seconds() * 1000, "attempts": 1, "outcome": "received",
                        "ms": None, "summary": ""})
        elif et in (EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
                    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED):
            outcome = EventType.Name(et).removeprefix("EVENT_TYPE_WORKFLOW_EXECUTION_").lower()
            step = {"step": "workflow", "kind": "end", "at_ms": (ts - t0).total_seconds() * 1000,
                    "attempts": 1, "outcome": outcome, "ms": (ts - t0).total_seconds() * 1000, "summary": ""}
            if et == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
                step["failure"] = ev.workflow_execution_failed_event_attributes.failure.message
            out.append(step)
    for s in out:
        s.pop("start", None)
    return out


def _summary(conv: Any, ev: Any) -> str:
    """The readable summary the workflow attached to an activity (user metadata)."""
    if not ev.HasField("user_metadata") or not ev.user_metadata.HasField("summary"):
        return ""
    try:
        return str(conv.from_payload(ev.user_metadata.summary, str))
    except Exception:
        return ""


def render_timeline(history: Any) -> str:
    rows = []
    notes = []
    for s in timeline(history):
        ms = f"{s['ms']:.0f}" if s.get("ms") is not None else "-"
        rows.append([f"+{s['at_ms']:.0f}", s["step"], s["kind"], s["attempts"], ms, s["outcome"],
                     (s.get("summary") or "")[:70]])
        for key in ("last_failure", "failure"):
            if s.get(key):
                notes.append(f"  {s['step']}: {key.replace('_', ' ')}: {s[key]}")
    out = f"workflow {history.workflow_id}\n" + table(
        rows, ["at ms", "step", "kind", "attempts", "ms", "outcome", "summary"])
    if notes:
        out += "\n\nfailures\n" + "\n".join(notes)
    return out


def cmd_replay(args: argparse.Namespace) -> int:
    return run_and_exit(_replay(args))


async def _replay(args: argparse.Namespace) -> int:
    from temporalio.client import WorkflowHistory
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Replayer

    from workflows.compact_session import CompactSessionWorkflow
    from workflows.sweep import SweepSessionsWorkflow

    path = Path(args.source)
    if path.suffix == ".json" and path.exists():
        history = WorkflowHistory.from_json(path.stem, path.read_text())
    else:
        history = await _fetch_history(_settings(args), args.source)
    from workers.codec import codec_from_settings, with_codec

    # Encrypted histories replay with the configured keys; plain ones pass through the codec.
    converter = with_codec(pydantic_data_converter, codec_from_settings(_settings(args)))
    replayer = Replayer(workflows=[CompactSessionWorkflow, SweepSessionsWorkflow],
                        data_converter=converter)
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:
        print(f"replay of {history.workflow_id} FAILED: {result.replay_failure}", file=sys.stderr)
        return 1
    print(f"replay of {history.workflow_id}: ok ({len(history.events)} events, deterministic)")
    return 0


# --- sweep ---------------------------------------------------------------------------------------


def _interval(text: str) -> timedelta:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        n, u = float(text[:-1]), text[-1]
        return timedelta(seconds=n * units[u])
    except (ValueError, KeyError, IndexError):
        raise InvalidInput(f"invalid interval {text!r}: use e.g. 30s, 10m, 1h") from None


def cmd_sweep(args: argparse.Namespace) -> int:
    return run_and_exit(_sweep(args))


async def _sweep(args: argparse.Namespace) -> int:
    from temporalio.client import (
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleIntervalSpec,
        ScheduleSpec,
    )
    from temporalio.service import RPCError

    from activities.contracts import SWEEP_WORKFLOW_NAME, PolicyRef, SweepInput, SweepOutput

    settings = _settings(args)
    inp = SweepInput(
        tenant=settings.tenant,
        policy=PolicyRef(preset=args.policy, window=args.window, max_output=args.max_output),
        summarizer=settings.summarizer,  # type: ignore[arg-type]
    )
    from compactor.tenancy import check_sweep_request

    check_sweep_request(inp)  # before a schedule or workflow exists
    client = await _client(settings)
    sched_id = f"compactor-sweep-{settings.tenant}"
    if args.delete:
        await client.get_schedule_handle(sched_id).delete()
        print(f"deleted schedule {sched_id}")
        return 0
    if args.once:
        from datetime import datetime, timezone

        wf_id = f"sweep/{settings.tenant}/{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}"
        out: SweepOutput = await client.execute_workflow(
            SWEEP_WORKFLOW_NAME, inp, id=wf_id, task_queue=settings.task_queue, result_type=SweepOutput)
        started = out.started_count or len(out.started)
        print(f"sweep {wf_id}: scanned {out.scanned} sessions in {out.pages or 1} page(s), started "
              f"{started} compactions" + (": " + ", ".join(out.started) if out.started else ""))
        if out.unshrinkable:
            print(f"  {out.unshrinkable} session(s) over the trigger not started: their last "
                  f"compaction could not shrink them and they have not grown since")
        if out.skipped_count:
            print(f"  skipped {out.skipped_count} session(s) that could not be read "
                  f"(run `compactor verify SESSION` on each):")
            for sk in out.skipped:
                print(f"    {sk.session}: {sk.error}")
        return 0
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(SWEEP_WORKFLOW_NAME, inp, id=f"sweep/{settings.tenant}",
                                           task_queue=settings.task_queue),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=_interval(args.every))]),
    )
    from temporalio.service import RPCStatusCode

    try:
        await client.create_schedule(sched_id, schedule)
        print(f"created schedule {sched_id}: sweep tenant {settings.tenant} every {args.every}")
    except Exception as exc:
        exists = (isinstance(exc, RPCError) and exc.status == RPCStatusCode.ALREADY_EXISTS) or (
            "already" in str(exc).lower())
        if not exists:
            raise
        # Replace it (delete + create keeps the spec exactly as given).
        await client.get_schedule_handle(sched_id).delete()
        await client.create_schedule(sched_id, schedule)
        print(f"replaced schedule {sched_id}: sweep tenant {settings.tenant} every {args.every}")
    return 0
