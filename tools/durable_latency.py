"""Where the wall time of one durable compaction goes, and what it leaves in Temporal history
(``tools/durable_cpu.py --latency`` and ``--history``; docs/bench-perf.md).

Both run an in-process worker on the embedded stack (a dev server, the store in a temporary
directory): ``latency`` times each workflow activation, each store step (its coroutine and its
body), every fsync and every store put on the wall clock and splits a run's time into them
(``_split``); ``history_census`` counts one compaction's history events by type. Apart from
``durable_cpu`` because they measure one compaction in this process, where ``durable_cpu``
measures the CPU of worker processes over rounds of 20. Timers wrap SDK internals of the pinned
temporalio (1.35): for measuring, never for serving.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import tempfile
import time


@contextlib.asynccontextmanager
async def embedded_stack(queue: str, url: str):  # noqa: ANN202
    """A dev server and an in-process worker serving ``queue`` on the store at ``url``: yields
    (store, client)."""
    from compactor.store import open_store
    from workers.devstack import start_temporal
    from workers.settings import Settings
    from workers.worker import _store_s3_client, build_workers, connect

    store = open_store(url)
    server = await asyncio.to_thread(start_temporal)
    try:
        settings = Settings(store=url, task_queue=queue, llm_task_queue=queue + "-llm")
        client = await connect(settings, server.address, s3_client=_store_s3_client(store))
        workers = build_workers(client, settings, store, with_llm=False)
        for w in workers:
            await w.__aenter__()
        try:
            yield store, client
        finally:
            for w in reversed(workers):
                await w.__aexit__(None, None, None)
    finally:
        await asyncio.to_thread(server.stop)


async def history_census() -> dict:
    """What one compaction leaves in Temporal history: events by type (markers by name), bytes.

    A 12-round session (target 2.5k) compacted on the embedded stack by an in-process worker.
    """
    from compactor.bench.perf import turns
    from compactor.client import CompactorClient
    from compactor.store import SessionLog
    from compactor.tokens import with_tokens

    async with embedded_stack("hist", f"file://{tempfile.mkdtemp(prefix='durable-hist-')}") as (store, client):
        SessionLog(store, "t", "s").append(with_tokens(turns(12, prefix="s", start=9_000)))
        out = await CompactorClient(client, store, tenant="t", task_queue="hist").compact("s", target_tokens=2_500)
        history = await client.get_workflow_handle("compact/t/s").fetch_history()
    kinds: collections.Counter[str] = collections.Counter()
    for ev in history.events:
        kind = (ev.WhichOneof("attributes") or "?").removesuffix("_event_attributes")
        if kind == "marker_recorded":
            kind += ":" + ev.marker_recorded_event_attributes.marker_name
        kinds[kind] += 1
    return {"status": out.status, "events": len(history.events),
            "bytes": sum(ev.ByteSize() for ev in history.events), "by_type": dict(kinds)}


async def latency(runs: int, tokens: int, inline_first: bool = False, growth: int = 0) -> dict:
    """Where the wall time of one durable compaction of ``bench perf``'s big session goes.

    The bench's 100k-token session (fresh session id per run, target 15% of it), compacted by an
    in-process worker as ``bench perf`` does, with wall-clock timers (``perf_counter``) around
    each workflow activation, each store activity (from its coroutine's start to its return, and
    its body in the executor thread), every ``os.fsync`` (by the step it ran in; artifact writes
    run in the store's I/O pool) and every store put (by kind of key); then ``engine.compact`` on
    the same events, as ``bench perf`` times inline. Per run: client start -> result, split into
    the steps' bodies, the SDK's hops around them (dispatch -> body, body -> return), the
    activations, and the rest (the client's start, the server's round trips, the SDK core).
    """
    import statistics
    import threading

    import temporalio.worker._workflow as wf
    from temporalio import activity

    import activities.store_activities as sa
    from compactor.bench.perf import _compact_fresh, turns
    from compactor.client import CompactorClient
    from compactor.engine.compact import compact
    from compactor.engine.policy import make_policy
    from compactor.store import SessionLog
    from compactor.store.local import LocalStore
    from compactor.tokens import with_tokens

    spans: list[tuple[str, float, float]] = []
    cur = threading.local()

    def note(what: str, t0: float) -> None:
        spans.append((what, t0, time.perf_counter()))

    activate = wf._RunningWorkflow.activate

    def timed_activate(self, act):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        try:
            return activate(self, act)
        finally:
            note("activation:" + "+".join(sorted({j.WhichOneof("variant") or "?" for j in act.jobs})), t0)

    run_in_pool = sa.StoreActivities._run

    async def timed_run(self, fn):  # noqa: ANN001, ANN202
        name = activity.info().activity_type if activity.in_activity() else "?"
        t_enter = time.perf_counter()

        def body():  # noqa: ANN202
            cur.name = name
            t0 = time.perf_counter()
            note("hop:" + name, t_enter)
            try:
                return fn()
            finally:
                note("body:" + name, t0)
                cur.name = None
                cur.done = time.perf_counter()
        try:
            return await run_in_pool(self, body)
        finally:
            note("step:" + name, t_enter)

    # every write: ``put`` and the etag-free ``write`` it calls (a tree before round fourteen: ``put``)
    hooked = "write" if hasattr(LocalStore, "write") else "put"
    real_fsync, real_put = os.fsync, getattr(LocalStore, hooked)

    def timed_fsync(fd: int) -> None:
        t0 = time.perf_counter()
        try:
            real_fsync(fd)
        finally:
            note("fsync:" + (getattr(cur, "name", None) or "io pool (artifacts)"), t0)

    def timed_put(self, key, data, **kw):  # noqa: ANN001, ANN003, ANN202
        t0 = time.perf_counter()
        try:
            return real_put(self, key, data, **kw)
        finally:
            kind = next((k for k in ("/work/", "/ckpt/", "/records/", "/log/", "/a/sha256/") if k in key),
                        key.rsplit("/", 1)[-1])
            note(f"put:{kind.strip('/')}{'' if self.fsync else ' (unsynced)'}", t0)

    wf._RunningWorkflow.activate = timed_activate
    sa.StoreActivities._run = timed_run
    os.fsync = timed_fsync
    setattr(LocalStore, hooked, timed_put)

    per_run: list[dict[str, float]] = []
    try:
        async with embedded_stack("lat", f"file://{tempfile.mkdtemp(prefix='durable-lat-')}/store") as (store, client):
            cc = CompactorClient(client, store, tenant="lat", task_queue="lat")
            await _compact_fresh(cc, store, "lat", "warm", turns(20), 3_000)
            big = with_tokens(turns(max(1, tokens // 440), prefix="big"))
            target = max(8_000, int(tokens * 0.15))
            glog = SessionLog(store, "lat", "grow")
            if growth:  # (a tree from before round eight has no perf.grow: --growth needs this one's)
                from compactor.bench.perf import grow
            for i in range(growth):  # bench perf's growing session, same order: inline, then durable
                head, prev, evs = grow(glog, i)
                ti = time.perf_counter()
                compact(evs, make_policy("default"), 4_000, prev, tenant="lat", session="grow")
                inline = (time.perf_counter() - ti) * 1000
                spans.clear()
                t0 = time.perf_counter()
                out = await cc.compact("grow", target_tokens=4_000)
                t1 = time.perf_counter()
                row = _split(spans, t0, t1, inline)
                row.update({f"record {k}": v for k, v in out.record.durations_ms.items()})
                row["previous checkpoint (KB)"] = len(store.get(f"t/lat/s/grow/ckpt/{prev.id}.json")[0]) / 1024 if prev else 0
                row["events after the previous checkpoint"] = len(evs)
                row["segments in the head"] = len(head.segments)
                per_run.append(row)
            for n in range(0 if growth else runs):
                if inline_first:  # the same events under another session id, compacted inline first
                    SessionLog(store, "lat", f"pre{n}").append(big)
                    evs = SessionLog(store, "lat", f"pre{n}").read_events()
                    ti = time.perf_counter()
                    compact(evs, make_policy("default"), target, tenant="lat", session=f"pre{n}")
                    first_ms = (time.perf_counter() - ti) * 1000
                spans.clear()
                t0 = time.perf_counter()
                ms = await _compact_fresh(cc, store, "lat", f"big{n}", big, target)
                t1 = time.perf_counter()
                got = [(w, a, b) for w, a, b in spans if a >= t0 - 1.0]
                start = t1 - ms / 1000  # _compact_fresh's own clock: after its append
                evs = SessionLog(store, "lat", f"big{n}").read_events()
                ti = time.perf_counter()
                compact(evs, make_policy("default"), target, tenant="lat", session=f"big{n}")
                inline = (time.perf_counter() - ti) * 1000
                per_run.append(_split(got, start, t1, inline))
                if inline_first:
                    per_run[-1]["inline before the durable run"] = first_ms
    finally:
        os.fsync = real_fsync
        setattr(LocalStore, hooked, real_put)
    keys = sorted({k for r in per_run for k in r}, key=lambda k: -statistics.median(r.get(k, 0.0) for r in per_run))
    return {"runs": len(per_run), "tokens": tokens, "load_average": os.getloadavg()[0],
            "median_ms": {k: round(statistics.median(r.get(k, 0.0) for r in per_run), 2) for k in keys},
            "per_run_ms": [{k: round(v, 2) for k, v in r.items()} for r in per_run]}


def _split(spans: list[tuple[str, float, float]], start: float, end: float, inline: float) -> dict[str, float]:
    """One durable run's wall time (``start``..``end``) by part, in ms (see ``latency``)."""
    out: dict[str, float] = collections.defaultdict(float)
    out["durable (client start -> result)"] = (end - start) * 1000
    out["inline (engine.compact)"] = inline
    busy: list[tuple[float, float, str]] = []
    for what, a, b in spans:
        if b < start or a > end:
            continue
        kind, _, name = what.partition(":")
        ms = (b - a) * 1000
        if kind == "activation":
            out["activations (workflow code + SDK, the asyncio thread)"] += ms
            out["activations (count)"] += 1
            busy.append((a, b, f"activation({name})"))
        elif kind == "step":
            out["steps (coroutine start -> return)"] += ms
            busy.append((a, b, name))
        elif kind == "body":
            out[f"body {name}"] += ms
            out["bodies (all steps)"] += ms
        elif kind == "hop":
            out["hops: step start -> body in its thread"] += ms
        else:
            out[f"{kind} {name}"] += ms
    for what, a, b in spans:  # body end -> the step's return (the executor's hand-back)
        if what.startswith("step:") and start <= a <= end:
            body = [(x, y) for w, x, y in spans if w == "body:" + what[5:] and a <= x <= b]
            if body:
                out["hops: body -> step return"] += (b - max(y for _, y in body)) * 1000
    busy.sort()
    covered, last, gaps, prev = 0.0, start, [], "start"
    for a, b, what in busy:
        a, b = max(a, last), min(b, end)
        if b > a:
            gaps.append(a - last)
            if len(gaps) > 1:
                out[f"    gap {prev} -> {what}"] += (a - last) * 1000
            covered += b - a
            last, prev = b, what
    out["outside activations and steps (server round trips, SDK core, client)"] = (end - start - covered) * 1000
    if gaps:
        out["  of it: client start -> first activation"] = gaps[0] * 1000
        out["  of it: between activations and steps (core, local-activity dispatch)"] = sum(gaps[1:]) * 1000
        out["  of it: last activation -> the client has the result"] = (end - last) * 1000
    return dict(out)
