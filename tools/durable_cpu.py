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

``--latency`` and ``--history`` measure one compaction by an in-process worker instead
(``tools/durable_latency.py``).

``--profile``: each worker also profiles its main (asyncio) thread with cProfile on the thread's
CPU clock from the first activation of the measured rounds: ms per compaction by function,
cumulative and own (the profiler's overhead inflates the totals ~2x; the split is the point).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
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
        from durable_latency import history_census  # (tools/)

        print(json.dumps(asyncio.run(history_census())))
        return 0
    if args.latency:
        from durable_latency import latency  # (tools/)

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
