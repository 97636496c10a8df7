"""``compactor bench chaos``: compactions under worker kills, concurrent appends and S3 faults.

Each trial runs on the embedded stack (a Temporal dev server; a local store, or with ``--s3`` a
``moto_server`` behind ``compactor.testing.s3_fault_proxy``) and does what a faulty world does
to one session:

* a realistic start: a system prompt, a request with constraints, tool rounds, an abandoned
  call (its outcome unknown) and a last call still waiting for its result;
* a worker subprocess (``compactor.testing.chaos_worker``) and a compaction started;
* ``kill`` / ``append`` trials: the worker is SIGKILLed at a random moment, inside commit_swap
  after the checkpoint is written, or right after the swap; a new worker is started;
* ``append`` trials: an agent appends every 0-0.4 s meanwhile (tool rounds, user turns, late
  tool results for calls still in the tail and for the abandoned call the checkpoint covers);
* ``s3`` trials (``--s3``): no kill, the store answers through the fault proxy (5xx,
  write-then-500, dropped connections, stalls) and the agent appends every 100 ms: a
  needed compaction (not a noop) "lands" when it commits within 30 s.

After each trial: every appended event is in the log exactly once and in order (seqs gap-free,
ids unique), the view renders to a valid Messages API request, the workflow closed (no stuck
workflow), its outcome agrees with the head, the record and the search attribute (committed:
the head's checkpoint is the run's; noop/failed: the checkpoint is unchanged), and the run
committed at most one checkpoint. ``gc`` runs on the trial's session in a loop meanwhile
(``--gc-grace``, default 5 s); after the trial a last gc (grace 0) and then ``verify`` find
nothing, and every checkpoint a record names is still there to roll back to.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from compactor.bench.chaos_world import Agent, chaos_session, log_problems, request_problems
from compactor.bench.lifecycle import GcLoop, gc_problems
from compactor.bench.store import _pct
from compactor.events import Event

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("kill", "append", "s3")
KILL_POINTS = ("random", "in-commit", "after-commit")
DEFAULT_FAULTS = "error=0.04,write500=0.02,drop=0.02,stall=0.02"
LAND_WITHIN_S = 30.0
STEADY_INTERVAL_S = 0.1
# gc beside every trial. 1 s was too short on a loaded 2-core box: a worker that had just read
# the head imported the engine (cold process) for over a second before fetching the segments.
GC_GRACE_S = 5.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chaos",
        help="compactions under worker SIGKILL, concurrent appenders and S3 faults",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--trials", type=int, default=30, help="number of trials (default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of the whole run (default %(default)s)")
    p.add_argument("--s3", action="store_true",
                   help="add S3-fault trials (moto_server behind the fault proxy) to the mix")
    p.add_argument("--faults", default=DEFAULT_FAULTS,
                   help="fault proxy rates per request (default %(default)s)")
    p.add_argument("--parallel", type=int, default=2, help="trials run at once (default %(default)s)")
    p.add_argument("--stuck-after", type=float, default=180.0,
                   help="seconds after which an open workflow counts as stuck (default %(default)s)")
    p.add_argument("--gc-grace", type=float, default=GC_GRACE_S,
                   help="each trial runs `gc` on its session in a loop with this grace period in "
                   "seconds (default %(default)s; a negative value: no gc)")
    p.add_argument("--json", action="store_true", help="print the summary and per-trial rows as JSON")
    p.add_argument("--out", help="also write the JSON (summary + rows) to this file")
    p.set_defaults(func=run)


# --- a trial -----------------------------------------------------------------------------------


@dataclass
class TrialSpec:
    index: int
    kind: str
    seed: int
    kill: str | None = None


@dataclass
class TrialRow:
    index: int
    kind: str
    seed: int
    kill: str | None
    session: str = ""
    outcome: str = ""
    error: str | None = None
    finish_s: float | None = None
    events: int = 0
    appended_during: int = 0
    late_results: int = 0
    merges: int = 0
    killed_at: str | None = None
    lost: int = 0
    duplicated: int = 0
    invalid_view: list[str] = field(default_factory=list)
    log_problems: list[str] = field(default_factory=list)
    mismatch: list[str] = field(default_factory=list)
    two_checkpoints: bool = False
    stuck: bool = False
    landed: bool | None = None
    gc_runs: int = 0
    gc_removed: int = 0
    gc_errors: int = 0
    gc_problems: list[str] = field(default_factory=list)


def plan_trials(n: int, seed: int, s3: bool) -> list[TrialSpec]:
    """The mix: kill / append (/ s3) in turn; kill points drawn per trial."""
    rng = random.Random(seed)
    kinds = KINDS if s3 else KINDS[:2]
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        kill = rng.choices(KILL_POINTS, weights=[0.45, 0.2, 0.35])[0] if kind != "s3" else None
        out.append(TrialSpec(i, kind, rng.randrange(1 << 30), kill))
    return out


class Stack:
    """The embedded stack shared by all trials: dev server, client, stores, fault proxy."""

    def __init__(self, *, s3: bool, faults: str, seed: int, temporal_address: str | None = None,
                 s3_endpoint: str | None = None) -> None:
        self.want_s3 = s3
        self.faults = faults
        self.seed = seed
        self.temporal_address = temporal_address
        self.s3_endpoint = s3_endpoint
        self._procs: list[Any] = []
        self.proxy: Any = None
        self.tmp = tempfile.mkdtemp(prefix="compactor-chaos-")
        self.tenant = "chaos" + uuid.uuid4().hex[:6]

    async def start(self) -> None:
        from compactor.store import open_store
        from workers.devstack import start_moto, start_temporal
        from workers.settings import Settings
        from workers.worker import _store_s3_client, connect

        if self.temporal_address is None:
            server = await asyncio.to_thread(start_temporal)
            self._procs.append(server)
            self.temporal_address = server.address
        self.local_url = f"file://{self.tmp}"
        self.local = open_store(self.local_url)
        settings = Settings(store=self.local_url)
        s3_client = None
        if self.want_s3:
            from compactor.store.s3 import S3Store
            from compactor.testing.s3_fault_proxy import FaultRates, S3FaultProxy

            for k, v in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                         ("AWS_DEFAULT_REGION", "us-east-1")):
                os.environ.setdefault(k, v)
            if self.s3_endpoint is None:
                moto = await asyncio.to_thread(start_moto)
                self._procs.append(moto)
                self.s3_endpoint = moto.address
            self.bucket = f"chaos-{uuid.uuid4().hex[:10]}"
            import boto3

            boto3.client("s3", endpoint_url=self.s3_endpoint, region_name="us-east-1").create_bucket(Bucket=self.bucket)
            self.proxy = S3FaultProxy(self.s3_endpoint, FaultRates.parse(self.faults), seed=self.seed)
            self.proxy_url = self.proxy.start()
            self.s3_url = f"s3://{self.bucket}/chaos"
            self.s3_direct = S3Store(self.bucket, "chaos", endpoint_url=self.s3_endpoint)
            self.s3_faulty = S3Store(self.bucket, "chaos", endpoint_url=self.proxy_url)
            settings = Settings(store=self.s3_url)
            s3_client = self.s3_direct.client
        self.client = await connect(settings, self.temporal_address, s3_client=s3_client or _store_s3_client(self.local))

    async def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        for p in reversed(self._procs):
            await asyncio.to_thread(p.stop)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stores(self, kind: str) -> tuple[Any, Any, str, dict[str, str]]:
        """(store the agent and workers use, store the checks read, its URL, worker env)."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        if kind == "s3":
            env["AWS_ENDPOINT_URL"] = self.proxy_url
            return self.s3_faulty, self.s3_direct, self.s3_url, env
        return self.local, self.local, self.local_url, env

    def spawn(self, store_url: str, task_queue: str, mode: str, env: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "compactor.testing.chaos_worker", self.temporal_address or "",
             store_url, task_queue, mode],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True,
        )


def _kill(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _lines(proc: subprocess.Popen) -> "asyncio.Queue[str]":
    """The worker's stdout lines, fed from a thread ("" at EOF)."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue[str] = asyncio.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            loop.call_soon_threadsafe(q.put_nowait, line.strip())
        loop.call_soon_threadsafe(q.put_nowait, "")

    threading.Thread(target=pump, daemon=True).start()
    return q


async def _wait_line(q: "asyncio.Queue[str]", want: str) -> bool:
    while True:
        line = await q.get()
        if line == want:
            return True
        if line == "":
            return False


class Appender:
    """Runs the agent in a thread: a batch every ``interval()`` seconds until stopped; a batch
    that fails is retried as is (its ids make the retry idempotent)."""

    def __init__(self, log: Any, agent: Agent, interval: Any) -> None:
        self.log = log
        self.agent = agent
        self.interval = interval
        self.appended: list[str] = []
        self.unconfirmed: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _append(self, batch: list[Event], deadline: float) -> None:
        while True:
            try:
                self.log.append(batch)
                self.appended.extend(e.id for e in batch)
                return
            except Exception:  # store blips, CAS contention: an agent retries the same batch
                if time.monotonic() > deadline:
                    self.unconfirmed.update(e.id for e in batch)
                    return
                time.sleep(0.05)

    def _run(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            self._append(self.agent.step(), time.monotonic() + 60)
            nxt = max(nxt + self.interval(), time.monotonic() - 1.0)
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def stop(self, extra: list[Event] | None = None) -> None:
        self._stop.set()
        self._thread.join()
        if extra:
            self._append(extra, time.monotonic() + 60)


async def run_trial(stack: Stack, spec: TrialSpec, *, stuck_after: float, gc_grace: float = -1.0) -> TrialRow:
    from temporalio.client import WorkflowFailureError

    from compactor.client import CompactorClient
    from compactor.store import SessionLog

    rng = random.Random(spec.seed)
    row = TrialRow(spec.index, spec.kind, spec.seed, spec.kill)
    store, check_store, store_url, env = stack.stores(spec.kind)
    prefix = f"c{spec.index:04d}{uuid.uuid4().hex[:4]}"
    row.session = session = "s-" + prefix
    initial = chaos_session(rng, prefix)
    await asyncio.to_thread(SessionLog(check_store, stack.tenant, session).append, initial)
    before = await asyncio.to_thread(SessionLog(check_store, stack.tenant, session).head)
    tq = f"chaos-{prefix}"
    mode = {"in-commit": "in", "after-commit": "after"}.get(spec.kill or "", "plain")
    w1 = stack.spawn(store_url, tq, mode, env)
    w2: subprocess.Popen | None = None
    appender: Appender | None = None
    gc_loop: GcLoop | None = None
    lines = _lines(w1)
    try:
        if not await asyncio.wait_for(_wait_line(lines, "ready"), 180):
            raise RuntimeError(f"chaos worker exited ({w1.poll()}) before it was ready")
        agent = Agent(rng, prefix)
        if spec.kind != "kill":
            steady = spec.kind == "s3"
            appender = Appender(SessionLog(store, stack.tenant, session), agent,
                                (lambda: STEADY_INTERVAL_S) if steady else (lambda: rng.uniform(0.0, 0.4)))
        cc = CompactorClient(stack.client, store, tenant=stack.tenant, task_queue=tq)
        t0 = time.monotonic()
        handle = await cc.start_compaction(session, target_tokens=rng.choice([2_000, 2_500, 3_000, 8_000]))
        run_id = handle.result_run_id
        if appender is not None:
            appender.start()
        if gc_grace >= 0:
            gc_loop = GcLoop(store, stack.tenant, session, gc_grace)
            gc_loop.start()
        result = asyncio.ensure_future(handle.result())
        if spec.kill is not None:
            row.killed_at = await _kill_at(spec.kill, rng, lines, result, w1)
            if not result.done():
                w2 = stack.spawn(store_url, tq, "plain", env)
        out, err = None, None
        try:
            out = await asyncio.wait_for(asyncio.shield(result), stuck_after)
        except asyncio.TimeoutError:
            row.stuck = True
            result.cancel()
            await handle.terminate("chaos: stuck")
        except WorkflowFailureError as exc:
            cause = exc.cause
            err = f"{getattr(cause, 'type', None) or type(cause).__name__}"
        row.finish_s = round(time.monotonic() - t0, 3)
        if appender is not None:
            # A late result for the abandoned call: once committed, the checkpoint covers it.
            appender.stop([agent.deploy_result()] if not agent.deploy_done else None)
        if gc_loop is not None:
            await asyncio.to_thread(gc_loop.stop)
            row.gc_runs, row.gc_removed, row.gc_errors = gc_loop.runs, gc_loop.removed, gc_loop.errors
        row.outcome = "stuck" if row.stuck else (out.status if out is not None else "failed")
        row.error = err or (out.record.error if out is not None and out.status != "committed" else None)
        if out is not None:
            row.merges = out.record.conflicts_merged
        expected = [e.id for e in initial] + (appender.appended if appender else [])
        unconfirmed = appender.unconfirmed if appender else set()
        row.appended_during = len(appender.appended) if appender else 0
        row.late_results = agent.late if appender else 0
        row.events = len(expected)
        sa = None
        if not row.stuck:
            from workflows.compact_session import SA_STATUS

            sa = (await handle.describe()).typed_search_attributes.get(SA_STATUS)
        await asyncio.to_thread(_check, row, SessionLog(check_store, stack.tenant, session), before,
                                expected, unconfirmed, run_id, out, sa)
        if gc_loop is not None:
            row.gc_problems = await asyncio.to_thread(gc_problems, check_store, stack.tenant, session)
        if spec.kind == "s3" and row.outcome != "noop":  # a noop has nothing to land
            row.landed = row.outcome == "committed" and (row.finish_s or 1e9) <= LAND_WITHIN_S
    finally:
        if appender is not None and appender._thread.is_alive():
            appender.stop()
        if gc_loop is not None and gc_loop._thread.is_alive():
            gc_loop.stop()
        _kill(w1)
        _kill(w2)
    return row


async def _kill_at(point: str, rng: random.Random, lines: "asyncio.Queue[str]", result: Any,
                   proc: subprocess.Popen) -> str:
    """SIGKILL the worker at ``point``; returns where it was (the hook seen, or the delay)."""
    if point == "random":
        delay = rng.uniform(0.0, 0.8)  # a compaction takes 0.3-1.5 s here
        await asyncio.wait([result], timeout=delay)
        _kill(proc)
        return f"t+{delay:.2f}s" + (" (after the result)" if result.done() else "")
    want = "in-commit-swap" if point == "in-commit" else "after-commit-swap"
    hook = asyncio.ensure_future(_wait_line(lines, want))
    await asyncio.wait([hook, result], timeout=120, return_when=asyncio.FIRST_COMPLETED)
    seen = hook.done() and hook.result()
    hook.cancel()
    _kill(proc)
    return want if seen else f"{want} not reached"


def _check(row: TrialRow, log: Any, before: Any, expected: list[str], unconfirmed: set[str],
           run_id: str | None, out: Any, sa: str | None) -> None:
    head = log.head()
    events = log.read_events(head=head)
    lp = log_problems(events, expected, unconfirmed)
    row.lost, row.duplicated = len(lp["lost"]), len(lp["duplicated"])
    row.log_problems = [k for k in ("out_of_order", "seq_gap") if lp[k]] + \
        [f"foreign id {i}" for i in lp["foreign"][:3]]
    row.invalid_view = request_problems(log.read_view(head=head))[:5]
    records = [r for r in log.list_records() if r.id == run_id]
    mism: list[str] = []
    if row.outcome == "committed":
        if head.checkpoint != out.checkpoint:
            mism.append(f"result names {out.checkpoint}, head has {head.checkpoint}")
        if head.checkpoint_run != run_id:
            mism.append(f"head's checkpoint set by run {head.checkpoint_run}, not {run_id}")
        if [(r.status, r.checkpoint) for r in records] != [("committed", head.checkpoint)]:
            mism.append(f"records {[(r.status, r.checkpoint) for r in records]} vs head {head.checkpoint}")
    elif row.outcome in ("noop", "failed"):
        if (head.checkpoint, head.checkpoint_run) != (before.checkpoint, before.checkpoint_run):
            mism.append(f"{row.outcome} but the head's checkpoint moved to {head.checkpoint} (run {head.checkpoint_run})")
        if [r.status for r in records] not in ([], [row.outcome]):
            mism.append(f"{row.outcome} but records say {[r.status for r in records]}")
    if sa is not None and row.outcome in ("committed", "noop", "failed") and sa != row.outcome:
        mism.append(f"CompactorStatus {sa!r} vs outcome {row.outcome}")
    row.mismatch = mism
    # At most one checkpoint per run: the head's checkpoint builds on the one before the run.
    if head.checkpoint and head.checkpoint != before.checkpoint:
        ck = log.current_checkpoint(head)
        row.two_checkpoints = ck.based_on != before.checkpoint


# --- the run -----------------------------------------------------------------------------------


def summarize(rows: list[TrialRow]) -> dict[str, Any]:
    """The report's numbers over all trials."""
    times = [r.finish_s for r in rows if r.finish_s is not None and not r.stuck]
    steady = [r for r in rows if r.landed is not None]
    return {
        "trials": len(rows),
        "by_kind": dict(Counter(r.kind for r in rows)),
        "events_appended": sum(r.events for r in rows),
        "appended_during_compaction": sum(r.appended_during for r in rows),
        "late_results": sum(r.late_results for r in rows),
        "lost": sum(r.lost for r in rows),
        "duplicated": sum(r.duplicated for r in rows),
        "log_order_problems": sum(1 for r in rows if r.log_problems),
        "invalid_views": sum(1 for r in rows if r.invalid_view),
        "outcome_mismatches": sum(1 for r in rows if r.mismatch),
        "two_checkpoint_runs": sum(1 for r in rows if r.two_checkpoints),
        "stuck_workflows": sum(1 for r in rows if r.stuck),
        "gc_runs": sum(r.gc_runs for r in rows),
        "gc_removed": sum(r.gc_removed for r in rows),
        "gc_errors": sum(r.gc_errors for r in rows),
        "gc_problems": sum(1 for r in rows if r.gc_problems),
        "outcomes": dict(Counter(r.outcome for r in rows)),
        "kills": dict(Counter((r.killed_at or "").split(" ")[0].split("+")[0] for r in rows if r.kill)),
        "landed": sum(1 for r in steady if r.landed),
        "landed_of": len(steady),
        "landed_share": round(sum(1 for r in steady if r.landed) / len(steady), 3) if steady else None,
        "finish_s_p50": round(statistics.median(times), 2) if times else None,
        "finish_s_p95": _pct(times, 0.95) if times else None,
        "finish_s_max": max(times) if times else None,
    }


async def run_chaos(trials: int, *, seed: int = 1, s3: bool = False, faults: str = DEFAULT_FAULTS,
                    parallel: int = 2, stuck_after: float = 180.0, temporal_address: str | None = None,
                    s3_endpoint: str | None = None, progress: Any = None,
                    gc_grace: float = GC_GRACE_S) -> dict[str, Any]:
    """Run the trials on an embedded stack (or the given server/endpoint); summary + rows."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=16 + 8 * parallel))
    stack = Stack(s3=s3, faults=faults, seed=seed, temporal_address=temporal_address, s3_endpoint=s3_endpoint)
    await stack.start()
    rows: list[TrialRow] = []
    gate = asyncio.Semaphore(max(1, parallel))
    t0 = time.monotonic()

    async def one(spec: TrialSpec) -> None:
        async with gate:
            try:
                row = await run_trial(stack, spec, stuck_after=stuck_after, gc_grace=gc_grace)
            except Exception as exc:  # a harness failure is reported, not hidden
                row = TrialRow(spec.index, spec.kind, spec.seed, spec.kill, outcome="harness-error",
                               error=f"{type(exc).__name__}: {exc}"[:300])
            rows.append(row)
            if progress is not None:
                progress(row, len(rows))

    try:
        await asyncio.gather(*(one(s) for s in plan_trials(trials, seed, s3)))
    finally:
        await stack.stop()
    rows.sort(key=lambda r: r.index)
    summary = summarize(rows)
    summary.update(seed=seed, s3=s3, faults=faults if s3 else None, parallel=parallel,
                   gc_grace_s=gc_grace if gc_grace >= 0 else None,
                   wall_s=round(time.monotonic() - t0, 1), cpus=os.cpu_count())
    if stack.proxy is not None:
        summary["proxy"] = {"requests": stack.proxy.stats.requests, "injected": stack.proxy.stats.injected}
    return {"summary": summary, "trials": [asdict(r) for r in rows]}


def report(res: dict[str, Any]) -> str:
    """The Markdown table of the summary."""
    s = res["summary"]
    landed = (f"{s['landed']}/{s['landed_of']} ({s['landed_share']:.0%}) of needed compactions "
              f"committed within {LAND_WITHIN_S:.0f} s" if s["landed_of"] else "n/a (no --s3 trials)")
    rows = [
        ("trials", f"{s['trials']} ({', '.join(f'{k} {v}' for k, v in s['by_kind'].items())})"),
        ("events appended", f"{s['events_appended']:,} ({s['appended_during_compaction']:,} during "
                            f"compactions, {s['late_results']} late results)"),
        ("lost", s["lost"]),
        ("duplicated", s["duplicated"]),
        ("invalid views", s["invalid_views"]),
        ("outcome mismatches", s["outcome_mismatches"]),
        ("two-checkpoint runs", s["two_checkpoint_runs"]),
        ("stuck workflows", s["stuck_workflows"]),
        ("gc alongside (grace {} s)".format(s.get("gc_grace_s")),
         f"{s.get('gc_runs', 0):,} runs removed {s.get('gc_removed', 0):,} objects "
         f"({s.get('gc_errors', 0)} stopped by store faults); trials with a problem after gc: "
         f"{s.get('gc_problems', 0)}"),
        ("landed under steady appends (100 ms, S3 faults)", landed),
        ("time to finish p50 / p95 / max", f"{s['finish_s_p50']} s / {s['finish_s_p95']} s / {s['finish_s_max']} s"),
        ("outcomes", ", ".join(f"{k} {v}" for k, v in sorted(s["outcomes"].items()))),
    ]
    if s.get("proxy"):
        inj = s["proxy"]["injected"]
        rows.append(("S3 faults injected", f"{sum(inj.values())} of {s['proxy']['requests']:,} requests ("
                     + ", ".join(f"{k} {v}" for k, v in inj.items()) + ")"))
    out = ["| measure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]
    bad = [t for t in res["trials"] if t["lost"] or t["duplicated"] or t["invalid_view"] or t["mismatch"]
           or t["two_checkpoints"] or t["stuck"] or t["log_problems"] or t["outcome"] == "harness-error"
           or t.get("gc_problems")]
    for t in bad[:20]:
        out.append(f"- trial {t['index']} ({t['kind']}, kill {t['kill']}, seed {t['seed']}): "
                   f"{t['outcome']} {t['error'] or ''} lost {t['lost']} dup {t['duplicated']} "
                   f"view {t['invalid_view'][:2]} mismatch {t['mismatch'][:2]} log {t['log_problems']}"
                   + (f" gc {t['gc_problems'][:2]}" if t.get("gc_problems") else ""))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from compactor.cli.ops import run_and_exit

    return run_and_exit(_main(args))


async def _main(args: argparse.Namespace) -> int:
    def progress(row: TrialRow, n: int) -> None:
        flag = "" if not (row.lost or row.duplicated or row.invalid_view or row.mismatch
                          or row.two_checkpoints or row.stuck or row.gc_problems) else "  <-- PROBLEM"
        print(f"[{n}/{args.trials}] trial {row.index} {row.kind} kill={row.kill} -> {row.outcome}"
              f" {row.error or ''} in {row.finish_s}s ({row.killed_at or '-'}){flag}",
              file=sys.stderr, flush=True)

    res = await run_chaos(args.trials, seed=args.seed, s3=args.s3, faults=args.faults,
                          parallel=args.parallel, stuck_after=args.stuck_after, progress=progress,
                          gc_grace=args.gc_grace)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1) if args.json else report(res))
    s = res["summary"]
    bad = s["lost"] + s["duplicated"] + s["invalid_views"] + s["outcome_mismatches"] + \
        s["two_checkpoint_runs"] + s["stuck_workflows"] + s["gc_problems"]
    return 1 if bad else 0
