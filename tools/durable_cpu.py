"""Where a durable compaction's worker CPU goes (issue 17; docs/bench-perf.md, round three).

Runs the throughput scenario of ``compactor bench perf`` (20 sessions of ~5k tokens, target
2.5k; a warm round, then ``--rounds`` measured rounds, each appending 12 tool rounds to every
session and compacting all 20 at once) on the embedded stack, served by ``--workers``
``compactor worker`` processes started through this file, which time in each worker:

* every store activity's body (thread CPU of the executor thread that runs it),
* the cyclic collector's passes, by generation (``gc.callbacks``; inside the bodies' or
  activations' time when they trigger one),
* the workflow activations (thread CPU of ``_RunningWorkflow.activate``),
* the SDK's payload passes over activations and completions (main-thread CPU),
* the CPU of every thread of the process from the first measured round to the end, by name
  (``main`` = the asyncio loop: polling, activity dispatch, data conversion; ``python`` =
  executor threads; ``tokio-*`` = the SDK's Rust core).

Then prints per compaction: those timers, the threads, and the CPU of the worker processes,
the dev server and this client (``/proc``; the client without its appends). Linux only;
timers wrap SDK internals of the pinned temporalio (1.35) and are for measuring, never for
serving.

    .venv/bin/python tools/durable_cpu.py [--rounds 3] [--workers 2] [--plain] [--json]
    .venv/bin/python tools/durable_cpu.py --history    # one compaction's history: events by type
    .venv/bin/python tools/durable_cpu.py --profile     # + where the asyncio thread's CPU goes
    .venv/bin/python tools/durable_cpu.py --latency 5   # wall time of the 100k-token compaction, by part

``--profile``: each worker also profiles its main (asyncio) thread with cProfile on the thread's
CPU clock from the first activation of the measured rounds: ms per compaction by function,
cumulative and own (the profiler's overhead inflates the totals ~2x; the split is the point).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

GO_ENV = "DURABLE_CPU_GO"  # a file that exists once the measured rounds start
PROFILE_ENV = "DURABLE_CPU_PROFILE"  # set: profile the main thread
OUT_ENV = "DURABLE_CPU_OUT"  # where each worker writes its timers at exit


def _threads() -> dict[str, float]:
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1 : st.rindex(")")]
        fields = st.rsplit(")", 1)[1].split()
        name = "main" if int(tid) == os.getpid() else comm
        out[name] += (int(fields[11]) + int(fields[12])) * 1000 / tick
    return out


def serve_timed_worker() -> None:
    """``compactor worker`` with timers around the SDK's and the activities' work."""
    import temporalio.bridge.worker as bridge
    import temporalio.worker._workflow as wf

    import activities.store_activities as sa

    go, out_dir = os.environ[GO_ENV], os.environ[OUT_ENV]
    ms: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()

    def add(name: str, t0: float) -> None:
        if os.path.exists(go):
            ms[name] += (time.thread_time() - t0) * 1000
            calls[name] += 1

    def timed_async(name: str, fn):  # noqa: ANN001, ANN202
        async def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
            t0 = time.thread_time()
            try:
                return await fn(*a, **k)
            finally:
                add(name, t0)
        return run

    bridge.decode_activation = timed_async("sdk payload passes (decode)", bridge.decode_activation)
    bridge.encode_completion = timed_async("sdk payload passes (encode)", bridge.encode_completion)
    activate = wf._RunningWorkflow.activate

    local = threading.local()
    act_profs: list = []
    step_profs: list = []  # the store steps' bodies, in the executor threads

    def timed_activate(self, act):  # noqa: ANN001, ANN202
        prof = None
        if os.environ.get(PROFILE_ENV) and os.path.exists(go):
            prof = getattr(local, "prof", None)
            if prof is None:  # one per executor thread: a profiler records the thread enabling it
                import cProfile

                prof = local.prof = cProfile.Profile(time.thread_time)
                act_profs.append(prof)
            prof.enable()
        t0 = time.thread_time()
        try:
            return activate(self, act)
        finally:
            add("workflow activations", t0)
            if prof is not None:
                prof.disable()

    wf._RunningWorkflow.activate = timed_activate
    run_in_pool = sa.StoreActivities._run

    async def timed_run(self, fn):  # noqa: ANN001, ANN202
        from temporalio import activity

        name = "activity " + (activity.info().activity_type if activity.in_activity() else "?")

        def body():  # noqa: ANN202
            prof = None
            if os.environ.get(PROFILE_ENV) and os.path.exists(go):
                prof = getattr(local, "step_prof", None)
                if prof is None:  # one per executor thread, as for the activations
                    import cProfile

                    prof = local.step_prof = cProfile.Profile(time.thread_time)
                    step_profs.append(prof)
                prof.enable()
            t0 = time.thread_time()
            try:
                return fn()
            finally:
                add(name, t0)
                if prof is not None:
                    prof.disable()
        return await run_in_pool(self, body)

    sa.StoreActivities._run = timed_run
    import compactor.tokens as tokens_mod

    load_encoder = tokens_mod._encoder

    def timed_encoder():  # noqa: ANN202 - the tokenizer's load, once per process
        t0 = time.thread_time()
        try:
            return load_encoder()
        finally:
            add("tokenizer load (once per process)", t0)

    tokens_mod._encoder = timed_encoder

    import gc

    gc_t0 = threading.local()

    def gc_timer(phase: str, info: dict) -> None:  # the collector's passes, by generation
        if phase == "start":
            gc_t0.t = time.thread_time()
        elif hasattr(gc_t0, "t"):
            add(f"gc generation {info['generation']}", gc_t0.t)

    gc.callbacks.append(gc_timer)
    base: dict[str, float] = {}

    def mark() -> None:
        while not os.path.exists(go):
            time.sleep(0.02)
        base.update(_threads())

    threading.Thread(target=mark, daemon=True).start()
    prof = None
    if os.environ.get(PROFILE_ENV):
        import cProfile

        prof = cProfile.Profile(time.thread_time)
        handle = wf._WorkflowWorker._handle_activation

        async def profiled_handle(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
            # the profiler is bound to the thread that enables it: the asyncio thread, here
            if not getattr(prof, "on", False) and os.path.exists(go):
                prof.on = True
                prof.enable()
            return await handle(self, *a, **k)

        wf._WorkflowWorker._handle_activation = profiled_handle
    real_exit = os._exit

    def dump_and_exit(rc: int) -> None:
        now = _threads()
        if prof is not None and getattr(prof, "on", False):
            prof.disable()
            prof.dump_stats(str(Path(out_dir) / f"{os.getpid()}.pstats"))
        for n, p in enumerate(act_profs):
            p.dump_stats(str(Path(out_dir) / f"{os.getpid()}-{n}.activations"))
        for n, p in enumerate(step_profs):
            p.dump_stats(str(Path(out_dir) / f"{os.getpid()}-{n}.steps"))
        with open(Path(out_dir) / f"{os.getpid()}.json", "w") as f:
            json.dump({"ms": ms, "calls": calls,
                       "threads": {k: v - base.get(k, 0.0) for k, v in now.items()}}, f)
        real_exit(rc)

    os._exit = dump_and_exit  # the worker command leaves through os._exit
    from compactor.cli import main

    sys.exit(main(["worker"]))


async def measure(rounds: int, n_workers: int, plain: bool = False, profile: bool = False) -> dict:
    from compactor.bench.perf import _cpu_ms, _stop_workers, turns
    from compactor.client import CompactorClient
    from compactor.store import SessionLog, open_store
    from compactor.tokens import with_tokens
    from workers.devstack import start_temporal
    from workers.settings import Settings
    from workers.worker import _store_s3_client, connect

    tmp = Path(tempfile.mkdtemp(prefix="durable-cpu-"))
    go, out_dir = tmp / "go", tmp / "out"
    out_dir.mkdir()
    url = f"file://{tmp}/store"
    store = open_store(url)
    server = await asyncio.to_thread(start_temporal)
    tq = f"cpu-{os.getpid()}"
    try:
        client = await connect(Settings(store=url, task_queue=tq), server.address,
                               s3_client=_store_s3_client(store))
        env = dict(os.environ, TEMPORAL_ADDRESS=server.address, COMPACTOR_STORE=url,
                   COMPACTOR_TASK_QUEUE=tq, COMPACTOR_LLM_TASK_QUEUE=tq + "-llm",
                   **{GO_ENV: str(go), OUT_ENV: str(out_dir)}, **({PROFILE_ENV: "1"} if profile else {}))
        cmd = [sys.executable, "-m", "compactor", "worker"] if plain else [sys.executable, __file__, "--serve"]
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True) for _ in range(n_workers)]
        try:
            await asyncio.sleep(4.0)
            cc = CompactorClient(client, store, tenant="cpu", task_queue=tq)
            names = [f"tp{n}" for n in range(20)]
            setup_ms = 0.0
            for r in [-1, *range(rounds)]:  # -1: the unmeasured warm round
                if r == 0:
                    go.touch()
                    pids = {"workers": [p.pid for p in procs], "dev server": [server.proc.pid],
                            "client": [os.getpid()]}
                    cpu0 = {k: _cpu_ms(v) for k, v in pids.items()}
                    t0, done = time.perf_counter(), 0
                c = _cpu_ms([os.getpid()])
                for s in names:
                    SessionLog(store, "cpu", s).append(with_tokens(turns(12, prefix=s, start=(r + 1) * 100)))
                if r >= 0:  # the appends are the bench's setup, not the client's cost
                    setup_ms += _cpu_ms([os.getpid()]) - c
                outs = await asyncio.gather(*(cc.compact(s, target_tokens=2_500) for s in names))
                if r >= 0:
                    done += sum(1 for o in outs if o.status in ("committed", "noop"))
            wall = time.perf_counter() - t0
            cpu = {k: round((_cpu_ms(v) - cpu0[k] - (setup_ms if k == "client" else 0.0)) / done, 1)
                   for k, v in pids.items()}
        finally:
            _stop_workers(procs)
    finally:
        await asyncio.to_thread(server.stop)
    ms: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    for f in out_dir.glob("*.json"):
        d = json.loads(f.read_text())
        ms.update(d["ms"])
        calls.update(d["calls"])
        threads.update(d["threads"])
    profiled = {}
    stats = sorted(out_dir.glob("*.pstats"))
    if stats:
        import pstats

        st = pstats.Stats(*map(str, stats))

        def where(fn: tuple) -> str:
            path = fn[0]
            for cut in ("site-packages/", "/python3.11/"):
                if cut in path:
                    path = path[path.index(cut) + len(cut):]
            return f"{path}:{fn[1]}:{fn[2]}"

        rows = st.stats.items()  # type: ignore[attr-defined]
        act_files = sorted(out_dir.glob("*.activations"))
        acts = pstats.Stats(*map(str, act_files)).stats.items() if act_files else []  # type: ignore[attr-defined]
        step_files = sorted(out_dir.glob("*.steps"))
        steps = pstats.Stats(*map(str, step_files)).stats.items() if step_files else []  # type: ignore[attr-defined]
        profiled = {
            "steps_cumulative_ms_per_compaction": {
                where(k): round(v[3] * 1000 / done, 2) for k, v in sorted(steps, key=lambda kv: -kv[1][3])[:60]},
            "activations_cumulative_ms_per_compaction": {
                where(k): round(v[3] * 1000 / done, 2) for k, v in sorted(acts, key=lambda kv: -kv[1][3])[:50]},
            "main_thread_profiled_ms_per_compaction": round(sum(v[2] for _, v in rows) * 1000 / done, 2),
            "main_thread_cumulative_ms_per_compaction": {
                where(k): round(v[3] * 1000 / done, 2) for k, v in sorted(rows, key=lambda kv: -kv[1][3])[:70]},
            "main_thread_own_ms_per_compaction": {
                where(k): round(v[2] * 1000 / done, 2) for k, v in sorted(rows, key=lambda kv: -kv[1][2])[:40]},
        }
    return {
        **profiled,
        "compactions": done, "per_s": round(done / wall, 2), "cpu_ms_per_compaction": cpu,
        "timers_ms_per_compaction": {k: round(v / done, 2) for k, v in ms.most_common()},
        "timer_calls_per_compaction": {k: round(calls[k] / done, 1) for k, _ in ms.most_common()},
        "worker_threads_ms_per_compaction": {k: round(v / done, 2) for k, v in threads.most_common()},
        "load_average": os.getloadavg()[0],
    }


@contextlib.asynccontextmanager
async def _embedded_stack(queue: str, url: str):  # noqa: ANN202
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

    async with _embedded_stack("hist", f"file://{tempfile.mkdtemp(prefix='durable-hist-')}") as (store, client):
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
        async with _embedded_stack("lat", f"file://{tempfile.mkdtemp(prefix='durable-lat-')}/store") as (store, client):
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", action="store_true")
    p.add_argument("--plain", action="store_true",
                   help="plain `compactor worker` processes (no timers: CPU totals only)")
    p.add_argument("--history", action="store_true",
                   help="only print what one compaction leaves in Temporal history (events by type, bytes)")
    p.add_argument("--profile", action="store_true",
                   help="also profile the workers' asyncio threads: CPU by function (cumulative, own)")
    p.add_argument("--latency", type=int, metavar="RUNS", default=0,
                   help="only the wall time of RUNS durable compactions of bench perf's 100k-token "
                        "session, by part (activations, steps, fsyncs, puts, the rest)")
    p.add_argument("--tokens", type=int, default=100_000, help="session size for --latency")
    p.add_argument("--growth", type=int, metavar="K", default=0,
                   help="--latency: bench perf's growing session instead, K compactions, one row each")
    p.add_argument("--inline-first", action="store_true",
                   help="--latency: also time inline before each durable run (same events, another session)")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve_timed_worker()
        return 0
    if args.history:
        print(json.dumps(asyncio.run(history_census())))
        return 0
    if args.latency:
        lat = asyncio.run(latency(args.latency, args.tokens, args.inline_first, args.growth))
        if args.json:
            print(json.dumps(lat))
        else:
            print(f"{lat['runs']} runs, {lat['tokens']:,} tokens, load {lat['load_average']:.1f}; median ms:")
            for k, v in lat["median_ms"].items():
                print(f"  {k:70s} {v:9.2f}")
        return 0
    res = asyncio.run(measure(args.rounds, args.workers, args.plain, args.profile))
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"{res['compactions']} compactions, {res['per_s']}/s, load {res['load_average']:.1f}")
    print("CPU per compaction (ms):", res["cpu_ms_per_compaction"])
    for k, v in res["timers_ms_per_compaction"].items():
        print(f"  {k:40s} {v:7.2f} ms  ({res['timer_calls_per_compaction'][k]} per compaction)")
    print("worker threads (ms per compaction):", res["worker_threads_ms_per_compaction"])
    for kind in ("main_thread_cumulative", "main_thread_own", "activations_cumulative", "steps_cumulative"):
        for k, v in res.get(f"{kind}_ms_per_compaction", {}).items():
            print(f"  {kind}: {k:70s} {v:7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH (another tree) wins
    raise SystemExit(main())
