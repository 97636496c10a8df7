"""``compactor bench load`` and ``compactor bench sweep``: the platform's view of compaction.

``load``: N agents x T turns through the public client (``CompactorClient.append`` then
``ensure_budget`` each turn, as a platform calls them) against the embedded stack: a Temporal
dev server, ``--workers`` worker processes, a local store (or S3 on ``moto_server`` with
``--s3``). Reports p50/p99 of both calls, the actions ensure_budget took (none / started /
waited) and why it started none past a trigger, the compactions by status with the noop
share, the share of turns that blocked and how long, and views returned over the hard limit.

``sweep``: ``--sessions`` sessions in one tenant (a few over the trigger), then the sweep's
page activity over all of them, as the sweep workflow runs it: wall time and store objects
read per session (one head each, plus the listing pages).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def register(bench_sub: argparse._SubParsersAction) -> None:
    p = bench_sub.add_parser("load", help="N agents x T turns through ensure_budget (noop share, blocked turns)")
    p.add_argument("--agents", type=int, default=50, help="concurrent agents (default %(default)s)")
    p.add_argument("--turns", type=int, default=30, help="turns per agent (default %(default)s)")
    p.add_argument("--window", type=int, default=40_000, help="model window (default %(default)s)")
    p.add_argument("--max-output", type=int, default=4_000, help="max output (default %(default)s)")
    p.add_argument("--turn-tokens", type=int, default=1_200, help="tokens appended per turn (about)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default %(default)s)")
    p.add_argument("--s3", action="store_true", help="store on S3 (moto_server) instead of a local dir")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run_load)

    q = bench_sub.add_parser("sweep", help="sweep wall time and objects read per session")
    q.add_argument("--sessions", type=int, default=10_000, help="sessions in the tenant (default %(default)s)")
    q.add_argument("--due", type=int, default=10, help="sessions over the trigger (default %(default)s)")
    q.add_argument("--page-size", type=int, default=500, help="sessions per page (default %(default)s)")
    q.add_argument("--s3", action="store_true", help="store on S3 (moto_server) instead of a local dir")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.set_defaults(func=_run_sweep)


# --- shared -------------------------------------------------------------------------------------


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 1)


class _Stack:
    """A store (local dir or S3 on moto) and, for ``load``, a dev server + workers."""

    def __init__(self, s3: bool) -> None:
        self.s3 = s3
        self.tmp: str | None = None
        self.moto: Any = None
        self.server: Any = None
        self.procs: list[Any] = []

    def store_url(self) -> str:
        if not self.s3:
            self.tmp = tempfile.mkdtemp(prefix="compactor-load-")
            return f"file://{self.tmp}"
        import boto3

        from workers.devstack import start_moto

        for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                     ("AWS_DEFAULT_REGION", "us-east-1")):
            os.environ.setdefault(k, v)
        self.moto = start_moto()
        os.environ["AWS_ENDPOINT_URL"] = self.moto.address
        bucket = f"load-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=self.moto.address, region_name="us-east-1").create_bucket(Bucket=bucket)
        return f"s3://{bucket}/c"

    def close(self) -> None:
        from compactor.bench.perf import _stop_workers

        _stop_workers(self.procs)
        for p in (self.server, self.moto):
            if p is not None:
                p.stop()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)


# --- load ---------------------------------------------------------------------------------------


def _run_load(args: argparse.Namespace) -> int:
    from compactor.cli.ops import run_and_exit

    return run_and_exit(_load_main(args))


async def _load_main(args: argparse.Namespace) -> int:
    res = await measure_load(agents=args.agents, turns=args.turns, window=args.window,
                             max_output=args.max_output, turn_tokens=args.turn_tokens,
                             workers=args.workers, s3=args.s3)
    print(json.dumps(res) if args.json else load_report(res))
    return 0


async def measure_load(*, agents: int = 50, turns: int = 30, window: int = 40_000, max_output: int = 4_000,
                       turn_tokens: int = 1_200, workers: int = 2, s3: bool = False) -> dict[str, Any]:
    from compactor.bench.perf import _start_workers
    from compactor.bench.perf import turns as make_turns
    from compactor.client import CompactorClient
    from compactor.engine.policy import make_policy
    from compactor.store import SessionLog, open_store
    from workers.devstack import start_temporal
    from workers.settings import Settings
    from workers.worker import _store_s3_client, build_workers, connect

    # One thread per agent: the client runs store calls in threads (the default pool of a
    # 2-core box has 6, which would measure the pool, not the system).
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=agents + 8))
    stack = _Stack(s3)
    store_url = stack.store_url()
    store = open_store(store_url)
    stack.server = await asyncio.to_thread(start_temporal)
    tq = f"load-{uuid.uuid4().hex[:8]}"
    tenant = f"load{uuid.uuid4().hex[:6]}"
    settings = Settings(store=store_url, task_queue=tq, llm_task_queue=tq + "-llm")
    policy = make_policy("default", window=window, max_output=max_output)
    rounds = max(1, turn_tokens // 500)
    in_proc: list[Any] = []
    try:
        client = await connect(settings, stack.server.address, s3_client=_store_s3_client(store))
        stack.procs = _start_workers(workers, stack.server.address, store_url, tq)
        if not stack.procs:
            in_proc = build_workers(client, settings, store, with_llm=False)
            for w in in_proc:
                await w.__aenter__()
        else:
            await asyncio.sleep(4.0)  # let them poll
        cc = CompactorClient(client, store, tenant=tenant, task_queue=tq)
        append_ms: list[float] = []
        ensure_ms: list[float] = []
        waits: list[float] = []
        actions: dict[str, int] = {}
        reasons: dict[str, int] = {}
        over_hard = 0

        async def agent(i: int) -> None:
            nonlocal over_hard
            session = f"a{i:04d}"
            for t in range(turns):
                evs = make_turns(rounds, result_tokens=400, prefix=f"{session}t{t}", start=t)
                t0 = time.perf_counter()
                await cc.append(session, evs)
                append_ms.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                r = await cc.ensure_budget(session, window, max_output=max_output)
                ms = (time.perf_counter() - t0) * 1000
                ensure_ms.append(ms)
                actions[r.action] = actions.get(r.action, 0) + 1
                if r.reason:
                    reasons[r.reason] = reasons.get(r.reason, 0) + 1
                if r.action == "waited":
                    waits.append(ms)
                if r.tokens >= policy.hard_tokens:
                    over_hard += 1

        t_all = time.perf_counter()
        await asyncio.gather(*(agent(i) for i in range(agents)))
        wall = time.perf_counter() - t_all
        # let the background compactions finish before counting them
        for i in range(agents):
            h = client.get_workflow_handle(f"compact/{tenant}/a{i:04d}")
            try:
                await h.result()
            except Exception:  # noqa: BLE001 - none started, or failed: counted from records
                pass
        status: dict[str, int] = {}
        for i in range(agents):
            for rec in await asyncio.to_thread(SessionLog(store, tenant, f"a{i:04d}").list_records):
                status[rec.status] = status.get(rec.status, 0) + 1
    finally:
        for w in reversed(in_proc):
            await w.__aexit__(None, None, None)
        stack.close()
    total = sum(status.values())
    n_turns = agents * turns
    return {
        "agents": agents, "turns": turns, "window": window, "max_output": max_output,
        "store": "s3 (moto_server)" if s3 else "local", "workers": workers, "cpus": os.cpu_count(),
        "soft_tokens": policy.soft_tokens, "target_tokens": policy.post_compact_tokens,
        "hard_tokens": policy.hard_tokens, "wall_s": round(wall, 1),
        "append_ms": {"p50": _pct(append_ms, 0.5), "p99": _pct(append_ms, 0.99)},
        "ensure_budget_ms": {"p50": _pct(ensure_ms, 0.5), "p99": _pct(ensure_ms, 0.99)},
        "actions": actions, "not_started": reasons,
        "compactions": status, "noop_share": round(status.get("noop", 0) / total, 3) if total else 0.0,
        "blocked_turn_share": round(len(waits) / n_turns, 4),
        "wait_ms": {"p50": _pct(waits, 0.5), "max": round(max(waits), 1) if waits else 0.0},
        "views_over_hard": over_hard,
    }


def load_report(r: dict[str, Any]) -> str:
    return "\n".join([
        f"{r['agents']} agents x {r['turns']} turns, window {r['window']:,} (soft {r['soft_tokens']:,}, "
        f"target {r['target_tokens']:,}, hard {r['hard_tokens']:,}), store {r['store']}, "
        f"{r['workers']} worker processes, {r['cpus']} CPUs: {r['wall_s']} s",
        f"append        p50 {r['append_ms']['p50']} ms  p99 {r['append_ms']['p99']} ms",
        f"ensure_budget p50 {r['ensure_budget_ms']['p50']} ms  p99 {r['ensure_budget_ms']['p99']} ms",
        f"actions       {r['actions']}  not started past a trigger: {r['not_started'] or 'none'}",
        f"compactions   {r['compactions']}  noop share {r['noop_share']:.1%}",
        f"blocked turns {r['blocked_turn_share']:.2%}  wait p50 {r['wait_ms']['p50']} ms, "
        f"max {r['wait_ms']['max']} ms; views returned over the hard limit: {r['views_over_hard']}",
    ])


# --- sweep --------------------------------------------------------------------------------------


def _run_sweep(args: argparse.Namespace) -> int:
    res = measure_sweep(sessions=args.sessions, due=args.due, page_size=args.page_size, s3=args.s3)
    print(json.dumps(res) if args.json else sweep_report(res))
    return 0


def measure_sweep(*, sessions: int = 10_000, due: int = 10, page_size: int = 500, s3: bool = False) -> dict[str, Any]:
    """Seed ``sessions`` sessions (``due`` of them over the default trigger at W=40,000),
    then run the sweep's page activity over the tenant, page by page, as the workflow does."""
    from activities.contracts import PolicyRef, SweepInput
    from activities.store_activities import StoreActivities
    from compactor.bench.perf import turns as make_turns
    from compactor.store import SessionLog, open_store
    from compactor.tokens import with_tokens

    stack = _Stack(s3)
    try:
        url = stack.store_url()
        store = open_store(url)
        if hasattr(store, "fsync"):
            store.fsync = False  # seeding speed only; the sweep reads
        tenant = f"sw{uuid.uuid4().hex[:6]}"
        small = with_tokens(make_turns(2, result_tokens=200, prefix="s"))
        big = with_tokens(make_turns(40, result_tokens=500, prefix="b"))  # ~22k tokens > 17,250
        t = time.perf_counter()

        def seed(i: int) -> None:
            SessionLog(store, tenant, f"s{i:06d}").append(big if i < due else small)

        with ThreadPoolExecutor(max_workers=16) as ex:
            list(ex.map(seed, range(sessions)))
        seed_s = time.perf_counter() - t
        acts = StoreActivities(store)
        inp = SweepInput(tenant=tenant, policy=PolicyRef(window=40_000, max_output=4_000), page_size=page_size)
        found: list[str] = []
        reads = pages = scanned = 0
        t = time.perf_counter()
        cursor = None
        while True:
            out = asyncio.run(acts.list_due_sessions(inp.model_copy(update={"cursor": cursor})))
            found += out.sessions
            reads += out.objects_read
            scanned += out.scanned
            pages += 1
            cursor = out.next_cursor
            if cursor is None:
                break
        wall = time.perf_counter() - t
    finally:
        stack.close()
    return {
        "sessions": sessions, "scanned": scanned, "due_found": len(found), "due_seeded": due,
        "pages": pages, "page_size": page_size, "store": "s3 (moto_server)" if s3 else "local",
        "sweep_s": round(wall, 2), "ms_per_session": round(wall * 1000 / max(scanned, 1), 3),
        "objects_read_per_session": round(reads / max(scanned, 1), 3),
        "list_requests": pages, "seed_s": round(seed_s, 1),
    }


def sweep_report(r: dict[str, Any]) -> str:
    return (
        f"sweep of {r['scanned']:,} sessions ({r['store']}, {r['pages']} pages of {r['page_size']}): "
        f"{r['sweep_s']} s ({r['ms_per_session']} ms/session), {r['objects_read_per_session']} objects "
        f"read per session + {r['list_requests']} list requests; found {r['due_found']} of "
        f"{r['due_seeded']} due sessions"
    )
