"""Operator commands: dev, worker, inspect, rollback, verify, breaker, sweep (history and replay:
``compactor.cli.history``).

Commands that talk to Temporal use ``TEMPORAL_ADDRESS`` (or ``--address``); ``compactor dev``
prints the address to export. Store commands use ``--store`` / ``COMPACTOR_STORE``.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from compactor.cli.common import (
    add_json_arg,
    add_session_args,
    add_store_args,
    add_temporal_args,
    open_log,
    print_json,
    report_error,
    table,
)
from compactor.errors import InvalidInput, NotFound


#: ``--diff`` given without a value: the current checkpoint (an empty value is an error).
CURRENT = object()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dev", help="run the embedded stack (Temporal dev server + UI + worker)")
    p.add_argument("--port", type=int, default=7233, help="Temporal frontend port (default %(default)s)")
    p.add_argument("--ui-port", type=int, default=8233, help="Temporal UI port (default %(default)s)")
    p.add_argument("--db", default=None, help="persist the dev server's state in this SQLite file")
    p.add_argument("--namespace", default=None, help="namespace the worker serves (default 'default')")
    add_json_arg(p, "print the stack's addresses as one JSON line once it is up")
    add_store_args(p)
    p.set_defaults(func=cmd_dev)

    p = sub.add_parser("worker", help="run a worker against TEMPORAL_ADDRESS until interrupted")
    add_temporal_args(p)
    p.add_argument("--task-queue", default=None, help="task queue (default COMPACTOR_TASK_QUEUE)")
    add_json_arg(p, "print the worker's configuration as one JSON line at start")
    add_store_args(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("inspect", help="a session's head, checkpoints and compaction records (--diff: what "
                       "a checkpoint replaced)")
    add_session_args(p)
    p.add_argument("--diff", nargs="?", const=CURRENT, default=None, metavar="CHECKPOINT",
                   help="show what CHECKPOINT (default: the current one) replaced and what its summary kept")
    add_json_arg(p)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("rollback", help="point a session at an earlier checkpoint (or none)")
    add_session_args(p)
    p.add_argument("--to", required=True, metavar="CHECKPOINT|none")
    p.add_argument("--force", action="store_true",
                   help="roll back even when `compactor verify` finds damaged segments")
    add_json_arg(p)
    p.set_defaults(func=cmd_rollback)

    p = sub.add_parser(
        "verify",
        help="check a session's stored objects for damage or tampering",
        description="Check the head (version, segments, checkpoint digest and range), every "
        "segment's sha256 and seqs, every checkpoint and record, and the artifacts the current "
        "checkpoint references. Exit 0 when clean, 1 when problems are found, 2 when the "
        "session does not exist.",
    )
    add_session_args(p, nargs="?")
    p.add_argument("--all", action="store_true", help="every session of the tenant")
    add_json_arg(p)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("breaker", help="a session's circuit breaker for automatic compaction (show or --clear)")
    add_session_args(p)
    p.add_argument("--clear", action="store_true", help="close it: automatic compaction resumes")
    add_json_arg(p)
    p.set_defaults(func=cmd_breaker)

    p = sub.add_parser("sweep", help="compact every session over its trigger (once or on a schedule)")
    p.add_argument("--once", action="store_true", help="run one sweep now and wait for it")
    p.add_argument("--every", default="10m", help="schedule interval, e.g. 30s, 10m, 1h (default %(default)s)")
    p.add_argument("--delete", action="store_true", help="delete the tenant's sweep schedule")
    p.add_argument("--policy", default="default")
    p.add_argument("--window", type=int, default=200_000)
    p.add_argument("--max-output", type=int, default=32_000)
    add_json_arg(p)
    add_temporal_args(p)
    add_store_args(p)
    p.set_defaults(func=cmd_sweep)


# --- helpers -------------------------------------------------------------------------------------


def run_and_exit(coro: Any, *, cli: bool = True) -> int:
    """Run a command that holds a Temporal client, then leave the process at once.

    The SDK's core runtime threads can call into Python while the interpreter finalizes and
    abort it (exit 134) after the command already succeeded; short-lived CLI processes that
    used a client therefore flush and ``os._exit`` with the command's own status.
    """
    import asyncio  # in the functions that run: `compactor <cmd> --help` imports this module
    import os

    from compactor.errors import CompactorError
    from workers.telemetry import flush_tracing, quiet_exporters_for_cli

    if cli:  # a worker (cli=False) keeps its one exporter-error line per interval
        quiet_exporters_for_cli()  # a collector that is down is not this command's business
    try:
        rc = int(asyncio.run(coro) or 0)
    except CompactorError as exc:
        report_error(str(exc), code=exc.code, exit_code=exc.exit_code)
        rc = exc.exit_code
    except KeyboardInterrupt:
        rc = 130
    except Exception as exc:  # RPC errors (unknown workflow id, server down): say what failed
        rc = 2 if _is_not_found(exc) else 1
        if not cli:  # a worker that crashed: its operator needs where, not only what
            import traceback

            traceback.print_exc()
        report_error(f"{type(exc).__name__}: {exc}", code="not_found" if rc == 2 else "failed", exit_code=rc)
    try:
        flush_tracing()
    except Exception as exc:  # noqa: BLE001 - telemetry must never change the exit status
        print(f"compactor: could not export traces: {exc}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)


def _is_not_found(exc: BaseException) -> bool:
    """A Temporal RPC that says the workflow (or schedule) does not exist: exit 2, as every
    other not-found."""
    from temporalio.service import RPCError, RPCStatusCode

    return isinstance(exc, RPCError) and exc.status == RPCStatusCode.NOT_FOUND


def _settings(args: argparse.Namespace, **extra: Any) -> Any:
    from compactor.cli.common import settings

    s = settings()
    upd: dict[str, Any] = {}
    if getattr(args, "store", None):
        upd["store"] = args.store
    if getattr(args, "tenant", None):
        upd["tenant"] = args.tenant
    if getattr(args, "address", None):
        upd["temporal_address"] = args.address
    if getattr(args, "namespace", None):
        upd["temporal_namespace"] = args.namespace
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


# --- dev / worker --------------------------------------------------------------------------------


def cmd_dev(args: argparse.Namespace) -> int:
    from compactor.cli.config import warn_unknown_variables

    warn_unknown_variables()  # a mistyped COMPACTOR_* variable is said, not silently ignored
    for what, port in (("Temporal frontend", args.port), ("Temporal UI", args.ui_port)):
        _refuse_busy_port(what, port)
    import asyncio

    return asyncio.run(_dev(args))


def _refuse_busy_port(what: str, port: int) -> None:
    """A port already in use would make the dev server fail while our readiness check sees the
    other server answer: the worker would then join someone else's cluster with this store."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        busy = s.connect_ex(("127.0.0.1", port)) == 0
    if busy:
        raise InvalidInput(
            f"port {port} ({what}) is already in use; stop what listens there, pick another port "
            f"(--port / --ui-port), or use that server: export TEMPORAL_ADDRESS=127.0.0.1:{port} "
            f"and run `compactor worker`"
        )


async def _dev(args: argparse.Namespace) -> int:
    import asyncio

    from compactor.store import open_store
    from workers.devstack import start_temporal
    from workers.logs import configure_from_settings
    from workers.telemetry import WorkerTelemetry
    from workers.worker import _store_s3_client, build_workers, connect, model_call_grace_s

    settings = _settings(args)
    configure_from_settings(settings)
    import tempfile

    from compactor.errors import TemporalUnavailable

    # The server's own log, kept while it runs: said when it dies right after opening its port
    # (e.g. its UI port was taken meanwhile), instead of a bare "connection refused".
    server_log = tempfile.NamedTemporaryFile(prefix="compactor-dev-temporal-", suffix=".log", delete=False)
    server_log.close()
    server = await asyncio.to_thread(
        start_temporal, args.port, args.ui_port, False, args.db, server_log.name, 90.0
    )
    try:
        store = open_store(settings.store)
        tel = WorkerTelemetry.create(settings)
        try:
            client = await connect(settings, server.address, s3_client=_store_s3_client(store),
                                   runtime=tel.runtime)
        except TemporalUnavailable as e:
            died = _server_died(server, server_log.name)
            if died:
                raise TemporalUnavailable(f"{e}: {died}", address=server.address) from e
            raise
        workers = build_workers(client, settings, store)
        queues = [w.config()["task_queue"] for w in workers]
        metrics = (f"http://127.0.0.1:{settings.metrics_port}/metrics"
                   if settings.metrics_port is not None else None)
        if args.json:
            print(json.dumps({"address": server.address, "namespace": settings.temporal_namespace,
                              "ui": f"http://127.0.0.1:{args.ui_port}", "store": store.url,
                              "task_queues": queues, "metrics": metrics}), flush=True)
        else:
            print(f"Temporal   {server.address}   (export TEMPORAL_ADDRESS={server.address})")
            print(f"UI         http://127.0.0.1:{args.ui_port}")
            print(f"store      {store.url}")
            print(f"queues     {', '.join(queues)}")
            if metrics:
                print(f"metrics    {metrics}   (/healthz /readyz)")
            print("worker running; Ctrl-C to stop", flush=True)
        async with tel.serving(client, store) as serving, _monitor(settings, client, store):
            await _serve_until_signal(workers, quiet=args.json, on_stop=serving.drain,
                                      grace_s=settings.graceful_shutdown_s, model_grace_s=model_call_grace_s(settings))
    finally:
        await asyncio.to_thread(server.stop)
        Path(server_log.name).unlink(missing_ok=True)
    return 0


def _server_died(server: Any, log_path: str, lines: int = 5) -> str | None:
    """If the dev server has exited: its exit code and the last lines of its log, one line."""
    code = server.proc.poll()
    if code is None:
        return None
    try:
        tail = Path(log_path).read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        tail = []
    said = " | ".join(x.strip() for x in tail if x.strip())
    return f"the Temporal dev server exited with code {code}" + (f"; its log ends: {said}" if said else "")


async def _serve_until_signal(workers: list[Any], quiet: bool = False, on_stop: Any = None,
                              grace_s: float | None = None, model_grace_s: float = 0.0) -> None:
    """Run workers until SIGINT/SIGTERM, then shut them down gracefully (``on_stop`` first:
    readiness turns 503 while in-flight activities drain; the drain is logged)."""
    import asyncio
    import contextlib
    import signal

    from workers.logs import log_drain_finished, log_drain_started, log_worker_started

    stop = asyncio.Event()
    got: list[str] = []
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, lambda s=sig: (got.append(s.name), stop.set()))
    started = None
    async with contextlib.AsyncExitStack() as stack:
        for w in workers:
            await stack.enter_async_context(w)
        log_worker_started([w.task_queue for w in workers])
        await stop.wait()
        if on_stop is not None:
            on_stop()
        if not quiet:
            print("stopping ...", flush=True)
        if grace_s is not None:
            started = log_drain_started(grace_s, got[0] if got else "SIGTERM", model_grace_s)
    if started is not None:
        log_drain_finished(started)


def _monitor(settings: Any, client: Any, store: Any) -> Any:
    """Outage/recovery lines for Temporal and the store (probing inside the worker's tenant)."""
    from workers.logs import ConnectivityMonitor

    prefix = f"t/{settings.tenants[0]}/" if settings.tenants else "t/"
    return ConnectivityMonitor.for_worker(client, store, prefix)


def cmd_worker(args: argparse.Namespace) -> int:
    from workers.logs import configure_from_settings

    settings = _settings(args)
    configure_from_settings(settings)  # JSON or text lines on stderr (COMPACTOR_LOG_FORMAT)
    if not settings.temporal_address:
        raise InvalidInput("no Temporal address: set TEMPORAL_ADDRESS or pass --address")
    if args.json:
        print(json.dumps({"address": settings.temporal_address, "namespace": settings.temporal_namespace,
                          "task_queues": [settings.task_queue, settings.llm_task_queue],
                          "store": settings.store}), flush=True)
    else:
        print(f"worker: {settings.temporal_address} namespace {settings.temporal_namespace}, "
              f"queues {settings.task_queue} / {settings.llm_task_queue}, store {settings.store}", flush=True)
    # run_and_exit: one line (no traceback) for a refused start, and no abort at exit
    return run_and_exit(_worker(settings, quiet=args.json), cli=False)


async def _worker(settings: Any, quiet: bool = False) -> None:
    import asyncio
    import contextlib

    from compactor.store import open_store
    from workers.backlog import BacklogGauge
    from workers.telemetry import WorkerTelemetry
    from workers.setup import require_search_attributes
    from workers.worker import _store_s3_client, build_workers, check_conditional_writes, connect, model_call_grace_s

    from compactor.cli.config import warn_unknown_variables

    warn_unknown_variables()  # a mistyped COMPACTOR_* variable is said, not silently ignored
    store = open_store(settings.store)
    await asyncio.to_thread(check_conditional_writes, store, settings)  # refuse an S3 that ignores them
    tel = WorkerTelemetry.create(settings)
    client = await connect(settings, s3_client=_store_s3_client(store), runtime=tel.runtime)
    await require_search_attributes(client, settings.temporal_namespace)  # else: `compactor setup`
    workers = build_workers(client, settings, store)
    async with contextlib.AsyncExitStack() as stack:
        serving = await stack.enter_async_context(tel.serving(client, store))
        await stack.enter_async_context(_monitor(settings, client, store))
        if tel.provider is not None:  # the autoscaler's metric (infra/k8s): queue backlog
            await stack.enter_async_context(BacklogGauge(
                client, settings.temporal_namespace, [settings.task_queue, settings.llm_task_queue]))
        await _serve_until_signal(workers, quiet=quiet, on_stop=serving.drain,
                                  grace_s=settings.graceful_shutdown_s, model_grace_s=model_call_grace_s(settings))


# --- inspect / rollback --------------------------------------------------------------------------


def cmd_inspect(args: argparse.Namespace) -> int:
    from compactor import operator

    if isinstance(args.diff, str) and not args.diff.strip():
        raise InvalidInput("--diff: empty checkpoint id; give one (`compactor inspect SESSION` lists "
                           "them) or --diff alone for the current checkpoint")
    log = open_log(args)
    if args.diff is not None:
        diff = operator.checkpoint_diff(log, None if args.diff is CURRENT else args.diff)
        if args.json:
            print_json(diff)
        else:
            print(render_diff(log, diff))
        return 0
    rep = operator.inspect_session(log)
    if args.json:
        print_json(rep)
        return 0
    print(f"session    {rep.tenant}/{rep.session}  version {rep.version}  "
          f"segments {rep.segments}  checkpoint {rep.checkpoint or 'none'}")
    if rep.checkpoints:
        print("\ncheckpoints")
        print(table([[("* " if c.current else "  ") + c.id, f"1-{c.covers_end}" if c.covers_end else "-",
                      c.snapshot_version, c.summary_tokens, c.summarizer, c.based_on or "-",
                      c.created_at.isoformat(timespec="seconds") if c.created_at else "-"] for c in rep.checkpoints],
                    ["id", "covers", "snapshot", "summary tok", "summarizer", "based on", "created"]))
    if rep.records:
        print("\nrecords")
        print(table([[r.workflow_id or r.id, r.status, f"1-{r.covers.end}" if r.covers else "-",
                      r.tokens_before, r.tokens_after, ",".join(r.layers) or "-", r.conflicts_merged,
                      r.attempts, f"{sum(v for k, v in r.durations_ms.items() if k != 'total'):.0f}",
                      (r.error or r.fallback_reason or "")[:60]] for r in rep.records],
                    ["workflow", "status", "covers", "before", "after", "layers", "merged",
                     "attempts", "ms", "note"]))
    return 0


#: Items per kind the text diff lists (``--json`` has them all).
DIFF_ROWS = 15


def render_diff(log: Any, diff: Any) -> str:
    """The text form of ``inspect --diff``."""
    prev = f" (after {diff.based_on}, which covered 1-{diff.replaced_start - 1})" if diff.based_on else ""
    lines = [f"checkpoint {diff.checkpoint} of {log.tenant}/{log.session}{prev}"]
    if diff.covers_end >= diff.replaced_start:
        lines.append(f"replaced   events {diff.replaced_start}-{diff.covers_end} ({diff.replaced_events} events, "
                     f"{diff.replaced_tokens:,} tokens) with a {diff.summary_tokens:,}-token "
                     f"{diff.summarizer} summary")
    else:
        lines.append("replaced   no events (no new summary); tool results below are shown by reference")
    dropped = len(diff.dropped)
    lines.append(f"kept       {len(diff.items) - dropped} of {len(diff.items)} items (+ named in the summary or "
                 f"reachable by artifact ref; - gone from the view)")
    titles = {"request": "requests", "file": "files", "error": "errors", "tool_result": "tool results"}
    for kind, title in titles.items():
        items = diff.of(kind)
        if not items:
            continue
        lines.append(f"\n{title}")
        for i in items[:DIFF_ROWS]:
            mark = "+" if i.kept else "-"
            extra = ""
            if kind == "tool_result":
                extra = f"  {i.tool_use_id}  {i.bytes:,} B" + ("  error" if i.is_error else "")
                extra += f"  -> {i.artifact}" if i.artifact else "  (inline)"
                extra += "  [shown by reference]" if i.where == "replaced" else ""
            lines.append(f"  {mark} #{i.seq:<5} {i.text}{extra}")
        if len(items) > DIFF_ROWS:
            lines.append(f"  ... and {len(items) - DIFF_ROWS} more (--json lists all)")
    return "\n".join(lines)


def cmd_rollback(args: argparse.Namespace) -> int:
    from compactor import operator

    target = None if args.to.lower() == "none" else args.to
    res = operator.rollback(open_log(args), target, force=args.force)
    if args.json:
        print_json(res)
        return 0
    name = f"{res.tenant}/{res.session}"
    if not res.changed:
        print(f"{name} already at checkpoint {target or 'none'}")
        return 0
    print(f"{name}: checkpoint {res.from_checkpoint or 'none'} -> {target or 'none'} "
          f"(version {res.version}; nothing deleted)")
    if not res.digest_recorded:
        print(f"note: no digest was recorded for checkpoint {target} (written before checkpoints "
              f"were verified); its current bytes are now the reference")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from compactor import operator
    from compactor.store import SessionLog, list_sessions, open_store
    from compactor.store.verify import render, verify_session

    if bool(args.session) == bool(args.all):
        raise InvalidInput("give a session id or --all (not both)")
    store = open_store(args.store)
    sessions = list_sessions(store, args.tenant) if args.all else [args.session]
    logs = [SessionLog(store, args.tenant, s) for s in sessions]
    if not args.all and not _exists(logs[0]):
        operator.require(logs[0])  # NotFound, exit 2, like every command
    reports = [verify_session(log) for log in logs]
    if args.json:
        print_json([dict(r.model_dump(mode="json"), ok=r.ok) for r in reports])
    elif reports:
        print(render(reports))
    else:
        print(f"no sessions for tenant {args.tenant} in {store.url}")
    return 0 if all(r.ok for r in reports) else 1


def _exists(log: Any) -> bool:
    """Whether the session has a head; an unreadable one (a link, say) exists for verify."""
    from compactor.errors import IntegrityError

    try:
        return log.exists()
    except IntegrityError:
        return True


def cmd_breaker(args: argparse.Namespace) -> int:
    import getpass

    from compactor import operator

    log = open_log(args)
    name = f"{log.tenant}/{log.session}"
    st = operator.breaker(log, clear_by=f"operator {getpass.getuser()}" if args.clear else None)
    if args.json:
        print_json(st)
        return 0
    if args.clear:
        print(f"{name}: breaker closed (by {st.cleared_by}); automatic compaction resumes")
        return 0
    if not st.history and not st.open and st.consecutive_failures == 0 and not st.cleared_by:
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
        print(f"  clear with: compactor breaker {log.session} --clear (or request a manual compaction)")
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
    from activities.contracts import SWEEP_WORKFLOW_NAME, PolicyRef, SweepInput, SweepOutput
    from workers.setup import schedule_id_for

    settings = _settings(args)
    inp = SweepInput(
        tenant=settings.tenant,
        policy=PolicyRef(preset=args.policy, window=args.window, max_output=args.max_output),
        summarizer=settings.summarizer,  # type: ignore[arg-type]
    )
    from compactor.tenancy import check_sweep_request

    check_sweep_request(inp)  # before a schedule or workflow exists
    client = await _client(settings)
    sched_id = schedule_id_for(settings.tenant)
    if args.delete:
        try:
            await client.get_schedule_handle(sched_id).delete()
        except Exception as exc:
            if _is_not_found(exc):
                raise NotFound(f"no sweep schedule {sched_id!r} for tenant {settings.tenant}") from None
            raise
        _say(args, {"schedule": sched_id, "action": "deleted"}, f"deleted schedule {sched_id}")
        return 0
    if args.once:
        from datetime import datetime, timezone

        wf_id = f"sweep/{settings.tenant}/{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S')}"
        out: SweepOutput = await client.execute_workflow(
            SWEEP_WORKFLOW_NAME, inp, id=wf_id, task_queue=settings.task_queue, result_type=SweepOutput)
        started = out.started_count or len(out.started)
        lines = [f"sweep {wf_id}: scanned {out.scanned} sessions in {out.pages or 1} page(s), started "
                 f"{started} compactions" + (": " + ", ".join(out.started) if out.started else "")]
        if out.unshrinkable:
            lines.append(f"  {out.unshrinkable} session(s) over the trigger not started: their last "
                         f"compaction could not shrink them and they have not grown since")
        if out.skipped_count:
            lines.append(f"  skipped {out.skipped_count} session(s) that could not be read "
                         f"(run `compactor verify SESSION` on each):")
            lines += [f"    {sk.session}: {sk.error}" for sk in out.skipped]
        _say(args, {"workflow_id": wf_id, **out.model_dump(mode="json")}, "\n".join(lines))
        return 0
    from workers.setup import ensure_sweep_schedule

    res = await ensure_sweep_schedule(client, inp, every=_interval(args.every), every_text=args.every,
                                      task_queue=settings.task_queue)
    _say(args, {"schedule": sched_id, "action": res.action, "every": args.every, "tenant": settings.tenant},
         f"{res.action} schedule {sched_id}: sweep tenant {settings.tenant} every {args.every}")
    return 0


def _say(args: argparse.Namespace, doc: dict[str, Any], text: str) -> None:
    """``--json``: the document; else the sentence."""
    if args.json:
        print_json(doc)
    else:
        print(text)
