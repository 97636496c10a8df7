"""The dev server's CPU per durable compaction, and what eager start saves (issue 17; docs/bench-perf.md,
round sixteen, `durable17`).

Default: eager start on vs off on one embedded stack (dev server + an in-process worker on the
client that starts the runs, as ``bench perf``'s ratio and growing runs and ``compactor compact``
have it), alternating blocks; each block compacts ``-n`` fresh sessions one after another (~5k
tokens, target 2.5k; ``--big``: ``bench perf``'s 100k-token session, target 15k) and reports per
compaction the median wall ms, the dev server's CPU ms and this process' CPU ms (Linux /proc).

``--parts``: the server's CPU per run of a stand-in workflow with the kinds of requests a
compaction makes, switched on one at a time (bare start and completion; + the start's search
attributes and summary; + a patch marker, which brings the SDK's TemporalChangeVersion upsert;
+ two local activities; + the final upsert), 20 runs at once as the throughput run starts them,
the worker on a Client of its own (no eager start) unless ``--eager``.

    .venv/bin/python tools/server_cpu.py [--blocks 6] [-n 20] [--big]
    .venv/bin/python tools/server_cpu.py --parts [--eager] [--reps 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio import activity, workflow  # noqa: E402
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes  # noqa: E402

SA_STATUS = SearchAttributeKey.for_keyword("CompactorStatus")


def cpu_ms(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


async def eager_ab(args: argparse.Namespace) -> list[dict]:
    from compactor.bench.perf import turns
    from compactor.client import CompactorClient
    from compactor.store import SessionLog, open_store
    from compactor.tokens import with_tokens
    from workers.devstack import start_temporal
    from workers.settings import Settings
    from workers.worker import _store_s3_client, build_workers, connect

    url = f"file://{tempfile.mkdtemp(prefix='server-cpu-')}"
    store = open_store(url)
    server = await asyncio.to_thread(start_temporal)
    rows: list[dict] = []
    try:
        settings = Settings(store=url, task_queue="q", llm_task_queue="q-llm")
        client = await connect(settings, server.address, s3_client=_store_s3_client(store))
        workers = build_workers(client, settings, store, with_llm=False)
        for w in workers:
            await w.__aenter__()
        start = client.start_workflow
        mode = {"eager": True}

        async def forced(*a, **kw):  # noqa: ANN002, ANN003, ANN202
            kw["request_eager_start"] = mode["eager"]
            return await start(*a, **kw)

        client.start_workflow = forced  # type: ignore[method-assign]
        cc = CompactorClient(client, store, tenant="t", task_queue="q")
        if args.big:
            events, target = with_tokens(turns(100_000 // 440, prefix="big")), 15_000
        else:
            events, target = with_tokens(turns(12, prefix="s", start=9_000)), 2_500
        names = iter(range(1_000_000))

        async def one() -> tuple[float, bool]:
            name = f"s{next(names)}"
            SessionLog(store, "t", name).append(events)
            t = time.perf_counter()
            handle = await cc.start_compaction(name, target_tokens=target)
            out = await handle.result()
            assert out.status == "committed", out
            return (time.perf_counter() - t) * 1000, getattr(handle, "__temporal_eagerly_started")

        for _ in range(3):  # warm-up
            await one()
        for b in range(args.blocks):
            for eager in ((True, False) if b % 2 == 0 else (False, True)):
                mode["eager"] = eager
                s0, c0 = cpu_ms(server.proc.pid), cpu_ms(os.getpid())
                runs = [await one() for _ in range(args.n)]
                s1, c1 = cpu_ms(server.proc.pid), cpu_ms(os.getpid())
                rows.append({"eager": eager, "eagerly_started": sorted({e for _, e in runs}),
                             "median_ms": round(statistics.median(ms for ms, _ in runs), 1),
                             "server_cpu_ms": round((s1 - s0) / args.n, 2),
                             "process_cpu_ms": round((c1 - c0) / args.n, 2),  # with the appends
                             "load": round(os.getloadavg()[0], 2)})
                print(json.dumps(rows[-1]), flush=True)
        for w in reversed(workers):
            await w.__aexit__(None, None, None)
    finally:
        await asyncio.to_thread(server.stop)
    for eager in (True, False):
        r = [x for x in rows if x["eager"] == eager]
        print(f"{'eager' if eager else 'plain'}: median of block medians "
              f"{statistics.median(x['median_ms'] for x in r):.1f} ms, server CPU "
              f"{statistics.median(x['server_cpu_ms'] for x in r):.1f} ms, process CPU "
              f"{statistics.median(x['process_cpu_ms'] for x in r):.1f} ms per compaction")
    return rows


@activity.defn(name="server_cpu_noop")
def _noop(n: int) -> str:
    return "x" * n


@workflow.defn(name="ServerCpuParts", sandboxed=False)
class Parts:
    @workflow.run
    async def run(self, parts: list[str]) -> str:
        if "patch" in parts:
            workflow.patched("server-cpu-patch")
        if "local activities" in parts:
            for _ in range(2):
                await workflow.execute_local_activity(_noop, 1_500, start_to_close_timeout=timedelta(seconds=30))
        if "final upsert" in parts:
            workflow.upsert_search_attributes([
                SA_STATUS.value_set("committed"),
                SearchAttributeKey.for_int("CompactorTokensBefore").value_set(5_000),
                SearchAttributeKey.for_int("CompactorTokensAfter").value_set(2_400),
            ])
        return "y" * 800


PARTS = ["bare", "start attributes", "patch", "local activities", "final upsert"]


async def parts(args: argparse.Namespace) -> None:
    import concurrent.futures

    from temporalio.client import Client
    from temporalio.worker import Worker

    from workers.devstack import start_temporal

    server = await asyncio.to_thread(start_temporal)
    try:
        worker_client = await Client.connect(server.address)
        client = worker_client if args.eager else await Client.connect(server.address)
        async with Worker(worker_client, task_queue="parts", workflows=[Parts], activities=[_noop],
                          activity_executor=concurrent.futures.ThreadPoolExecutor(8)):
            async def one(on: list[str]) -> None:
                kw: dict = {}
                if "start attributes" in on:
                    kw["search_attributes"] = TypedSearchAttributes([
                        SearchAttributePair(SearchAttributeKey.for_keyword("CompactorTenant"), "t"),
                        SearchAttributePair(SearchAttributeKey.for_keyword("CompactorSession"), "s"),
                        SearchAttributePair(SA_STATUS, "running")])
                    kw["static_summary"] = "compact t/s (bench)"
                handle = await client.start_workflow("ServerCpuParts", on, id=f"p/{uuid.uuid4().hex}",
                                                     task_queue="parts", request_eager_start=args.eager, **kw)
                await handle.result()

            def upto(part: str) -> list[str]:
                return PARTS[1:PARTS.index(part) + 1]

            for p in PARTS:  # warm-up
                await asyncio.gather(*(one(upto(p)) for _ in range(20)))
            ms: dict[str, list[float]] = {p: [] for p in PARTS}
            for r in range(args.reps):
                for p in (PARTS if r % 2 == 0 else PARTS[::-1]):
                    s0 = cpu_ms(server.proc.pid)
                    for _ in range(3):
                        await asyncio.gather(*(one(upto(p)) for _ in range(20)))
                    ms[p].append((cpu_ms(server.proc.pid) - s0) / 60)
        prev = None
        for p in PARTS:
            m = statistics.median(ms[p])
            print(f"{('+ ' if prev is not None else '') + p:20s} server CPU ms per run {m:6.2f}"
                  + (f" ({m - prev:+.2f})" if prev is not None else "") + f"  reps {[round(x, 1) for x in ms[p]]}")
            prev = m
        print(f"eager start: {args.eager}; load {os.getloadavg()[0]:.1f}")
    finally:
        await asyncio.to_thread(server.stop)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--parts", action="store_true")
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--reps", type=int, default=6)
    args = ap.parse_args()
    asyncio.run(parts(args) if args.parts else eager_ab(args))


if __name__ == "__main__":
    main()
