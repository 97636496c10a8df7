"""The durable compaction's step body, without Temporal: thread CPU of ``freeze_snapshot`` by part
(issue 17; docs/bench-perf.md, round eighteen).

Since round seventeen a committing structured run is one local activity, ``freeze_snapshot``
asked to plan, finish and commit (``FreezeInput.commit_as``). This calls that activity as the
workflow does, in this process (``temporalio.testing.ActivityEnvironment``, a local store in a
temporary directory), on the scenarios of ``compactor bench perf``, and prints per compaction the
body's thread CPU (the executor thread that runs it), the CPU of its parts (thread-CPU timers
around the store activities' helpers and the session log's reads and writes; a part's time
includes the parts it calls), and ``engine.compact``'s CPU on the same events: the share of the
worker's CPU that is the step itself, with no dev server, SDK or other process in the figures,
so it moves far less with the machine's load than ``tools/durable_cpu.py``.

    .venv/bin/python tools/freeze_cpu.py throughput [--rounds 3] [--workers 2]
    .venv/bin/python tools/freeze_cpu.py growing [--k 8]     # one row per compaction
    .venv/bin/python tools/freeze_cpu.py big [--runs 5]       # the 100k-token session

``throughput``: 20 sessions, a warm round then ``--rounds`` rounds of 12 tool rounds appended
to each and a compaction of each (target 2.5k), spread at random (seeded) over ``--workers``
``StoreActivities`` with their own caches, as worker processes would be. ``growing``: the
growing session (40 tool rounds per batch, target 4k). ``big``: bench perf's 100k-token session,
a fresh session per run (the worker decodes all of it, as a worker process does). Another tree:
``cd TREE && PYTHONPATH=TREE .venv/bin/python /path/to/tools/freeze_cpu.py ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
PARTS = {  # (module, class or None, attribute): timed while a freeze body runs
    "plan (in freeze)": ("activities.store_activities", "StoreActivities", "_plan_in_freeze"),
    "finish (in freeze)": ("activities.store_activities", "StoreActivities", "_finish_in_freeze"),
    "commit + record (in freeze)": ("activities.store_activities", "StoreActivities", "_commit_in_freeze"),
    "  commit": ("activities.commit_steps", "CommitSteps", "_commit"),
    "  record": ("activities.commit_steps", "CommitSteps", "_write_record"),
    "  the snapshot's events again (merge)": ("activities.merge", "Merge", "old_events"),
    "engine events": ("activities.store_activities", "StoreActivities", "engine_events"),
    "  decode (new segments)": ("compactor.store.log", "SessionLog", "_decode"),
    "head read": ("compactor.store.log", "SessionLog", "head"),
    "previous checkpoint": ("compactor.store.log", "SessionLog", "current_checkpoint"),
    "work objects written": ("activities.store_activities", "StoreActivities", "_put_json"),
    "work objects written + parsed": ("activities.store_activities", "StoreActivities", "_put_parsed"),
    "work objects read": ("activities.store_activities", "StoreActivities", "_get_json"),
    "checkpoint written": ("compactor.store.log", "SessionLog", "write_checkpoint"),
    "head swapped": ("compactor.store.log", "SessionLog", "set_checkpoint"),
    "record written": ("compactor.store.log", "SessionLog", "write_record"),
}
_in_body = threading.local()
_ms: collections.Counter[str] = collections.Counter()


def _timers() -> None:
    """Thread-CPU timers around PARTS, counted only inside a freeze body (not the appends)."""
    import importlib

    for label, (mod, cls, attr) in PARTS.items():
        owner = getattr(importlib.import_module(mod), cls)
        fn = getattr(owner, attr, None)  # (inherited: wrapped on this class)
        if fn is None:  # (a tree without the helper: the part is absent)
            continue

        def timed(*a: Any, _fn: Any = fn, _label: str = label, **k: Any) -> Any:
            if not getattr(_in_body, "on", False):
                return _fn(*a, **k)
            t = time.thread_time()
            try:
                return _fn(*a, **k)
            finally:
                _ms[_label] += (time.thread_time() - t) * 1000

        setattr(owner, attr, timed)


class Freezer:
    """freeze_snapshot as a committing structured run asks it, body timed (thread CPU)."""

    def __init__(self, store_url: str) -> None:
        from activities.store_activities import StoreActivities
        from compactor.store import open_store

        self.acts = StoreActivities(open_store(store_url))
        self.body_ms = 0.0

    async def compact(self, session: str, run: str, target: int) -> Any:
        from temporalio.testing import ActivityEnvironment

        from activities.contracts import FreezeInput, PolicyRef
        from compactor.records import CompactionRecord

        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, workflow_run_id=run)
        rec = CompactionRecord(id=run, tenant="t", session=session, workflow_id=f"compact/t/{session}",
                               trigger="manual", policy="default", summarizer="structured", status="running",
                               created_at=NOW)
        inp = FreezeInput(tenant="t", session=session, check_breaker=True, plan_policy=PolicyRef(target_tokens=target),
                          plan_summarizer="structured", plan_model="m", finish_now=NOW, commit_as=rec)
        real = type(self.acts)._run
        acts = self.acts

        async def timed_run(fn: Any) -> Any:
            def body() -> Any:
                _in_body.on = True
                t = time.thread_time()
                try:
                    return fn()
                finally:
                    self.body_ms = (time.thread_time() - t) * 1000
                    _in_body.on = False
            return await real(acts, body)

        acts._run = timed_run  # type: ignore[method-assign]
        try:
            out = await env.run(acts.freeze_snapshot, inp)
        finally:
            del acts._run
        if out.committed is None:
            raise RuntimeError(f"{session}: freeze did not commit ({out.plan and out.plan.needed})")
        return out


def _inline_ms(evs: list, target: int, prev: Any = None, session: str = "s") -> float:
    from compactor.engine.compact import compact
    from compactor.engine.policy import make_policy

    t = time.thread_time()
    compact(evs, make_policy("default"), target, prev, tenant="t", session=session)
    return (time.thread_time() - t) * 1000


async def throughput(url: str, rounds: int, workers: int) -> list[dict[str, float]]:
    from compactor.bench.perf import turns
    from compactor.store import SessionLog, open_store
    from compactor.tokens import with_tokens

    store, pick = open_store(url), random.Random(17)
    freezers = [Freezer(url) for _ in range(workers)]
    names = [f"tp{n}" for n in range(20)]
    rows = []
    for r in [-1, *range(rounds)]:  # -1: the warm round
        for s in names:
            SessionLog(store, "t", s).append(with_tokens(turns(12, prefix=s, start=(r + 1) * 100)))
        for s in names:
            f = freezers[pick.randrange(workers)]
            _ms.clear()
            await f.compact(s, f"run-{s}-{r}", 2_500)
            if r >= 0:
                rows.append({"body": f.body_ms, **_ms})
    return rows


async def growing(url: str, k: int) -> list[dict[str, float]]:
    from compactor.bench.perf import grow
    from compactor.store import SessionLog, open_store

    store, f = open_store(url), Freezer(url)
    grow(SessionLog(store, "t", "warm"), 0)
    await f.compact("warm", "run-warm", 4_000)
    glog, rows = SessionLog(store, "t", "grow"), []
    for i in range(k):
        _, prev, evs = grow(glog, i)
        inline = _inline_ms(evs, 4_000, prev, "grow")
        _ms.clear()
        await f.compact("grow", f"run-grow-{i}", 4_000)
        rows.append({"body": f.body_ms, "inline (engine.compact)": inline, **_ms})
    return rows


async def big(url: str, runs: int, tokens: int = 100_000) -> list[dict[str, float]]:
    from compactor.bench.perf import turns
    from compactor.store import SessionLog, open_store
    from compactor.tokens import with_tokens

    store, f = open_store(url), Freezer(url)
    events = with_tokens(turns(max(1, tokens // 440), prefix="big"))
    target = max(8_000, int(tokens * 0.15))
    rows = []
    for n in range(-1, runs):  # -1: warm
        s = f"big{n}"
        SessionLog(store, "t", s).append(events)
        _ms.clear()
        await f.compact(s, f"run-{s}", target)
        row = {"body": f.body_ms, **_ms}
        row["inline (engine.compact)"] = _inline_ms(SessionLog(store, "t", s).read_events(), target, session=s)
        if n >= 0:
            rows.append(row)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", choices=("throughput", "growing", "big"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    _timers()
    url = f"file://{tempfile.mkdtemp(prefix='freeze-cpu-')}/store"
    if args.scenario == "throughput":
        rows = asyncio.run(throughput(url, args.rounds, args.workers))
    elif args.scenario == "growing":
        rows = asyncio.run(growing(url, args.k))
    else:
        rows = asyncio.run(big(url, args.runs))
    keys = ["body", *(k for k in ("inline (engine.compact)", *PARTS) if any(k in r for r in rows))]
    med = {k: round(statistics.median(r.get(k, 0.0) for r in rows), 2) for k in keys}
    mean = {k: round(sum(r.get(k, 0.0) for r in rows) / len(rows), 2) for k in keys}
    out = {"scenario": args.scenario, "compactions": len(rows), "load_average": round(os.getloadavg()[0], 2),
           "median_ms": med, "mean_ms": mean,
           **({"per_compaction_ms": [{k: round(r.get(k, 0.0), 2) for k in keys} for r in rows]}
              if args.scenario == "growing" else {})}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{args.scenario}: {len(rows)} compactions, load {out['load_average']}; thread CPU ms (median, mean)")
    for k in keys:
        print(f"  {k:34s} {med[k]:8.2f} {mean[k]:8.2f}")
    if args.scenario == "growing":
        print("  per compaction: " + " | ".join(f"{r['body']:.1f}/{r['inline (engine.compact)']:.1f}" for r in rows)
              + "  (body / inline)")
    return 0


if __name__ == "__main__":
    sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH (another tree) wins
    raise SystemExit(main())
