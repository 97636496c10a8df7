"""A busy session for the storage-lifecycle numbers (``compactor bench store``, its gc table)
and tests: an agent's appends with compactions that merge appends made while they ran.

The compactions run the real store steps (``activities.store_activities.StoreActivities``,
called directly, no Temporal) under the same work prefixes and record as a workflow run, so
the store ends up holding what a real deployment leaves: superseded segments, every run's work
objects, checkpoints, records, artifacts.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from compactor.events import Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.store import ObjectStore, SessionLog

_WORDS = ("def return value config request cache index query table session token retry "
          "timeout branch commit merge patch handler worker queue schedule metric").split()


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def agent_round(rng: random.Random, k: int, prefix: str = "r") -> list[Event]:
    """One append of a coding agent: a tool call and its result (sometimes a large one, which
    compaction externalizes to the artifact store), now and then a user message first."""
    out: list[Event] = []
    if k % 7 == 0:
        out.append(Event(id=f"{prefix}{k}-u", role="user",
                         blocks=[TextBlock(text=f"Request {k}: {_text(rng, 20)}")]))
    uid = f"toolu_{prefix}{k:05d}"
    size = 6_000 if k % 5 == 0 else rng.randint(40, 200)
    out.append(Event(id=f"{prefix}{k}-a", role="assistant", blocks=[
        TextBlock(text=f"Step {k}: {_text(rng, 12)}"),
        ToolUseBlock(id=uid, name="Bash", input={"command": f"cat src/mod_{k}.py"}),
    ]))
    out.append(Event(id=f"{prefix}{k}-r", role="user", blocks=[
        ToolResultBlock(tool_use_id=uid, content=[TextBlock(text=f"# mod {k}\n" + _text(rng, size))]),
    ]))
    return out


async def busy_session(store: ObjectStore, tenant: str, session: str, *, appends: int = 100,
                       compactions: int = 20, target_tokens: int = 3_000, seed: int = 7,
                       prefix: str = "r") -> dict[str, int]:
    """``appends`` appends with ``compactions`` compactions spread over them; each compaction
    sees one append land between its validation and its swap, so its commit merges it.

    Returns counts: appends, events (of the agent rounds), committed, noop, merges.
    """
    from activities.contracts import (
        CommitInput, ExternalizeInput, FreezeInput, LiftInput, PlanInput, PolicyRef, RecordInput,
        SummarizeInput, ValidateInput, params_hash, work_prefix,
    )
    from activities.store_activities import StoreActivities
    from compactor.records import CompactionRecord, SeqRange

    rng = random.Random(seed)
    acts = StoreActivities(store)
    log = SessionLog(store, tenant, session)
    log.append([Event(id="sys", kind="pinned", role="system",
                      blocks=[TextBlock(text="You are a careful coding agent. Never push to main.")]),
                Event(id="goal", role="user", blocks=[TextBlock(text="Fix the flaky tests in src/.")])])
    done = {"appends": 1, "events": 0, "committed": 0, "noop": 0, "merges": 0}

    def append_round(k: int) -> None:
        batch = agent_round(rng, k, prefix)
        log.append(batch)
        done["appends"] += 1
        done["events"] += len(batch)

    k = 0
    per = max(1, (appends - 1) // max(1, compactions))
    pol = PolicyRef(target_tokens=target_tokens)
    for c in range(compactions):
        for _ in range(per - 1):
            k += 1
            append_round(k)
        snap = await acts.freeze_snapshot(FreezeInput(tenant=tenant, session=session))
        phash = params_hash(policy=pol.model_dump(), summarizer="structured", model="structured",
                            prev=snap.checkpoint)
        pre = work_prefix(tenant, session, snap.version, phash)
        run = f"{prefix}{c:03d}-{uuid.uuid4().hex[:8]}"
        rec = CompactionRecord(id=run, tenant=tenant, session=session, workflow_id=f"compact/{tenant}/{session}",
                               snapshot_version=snap.version, created_at=datetime.now(timezone.utc))
        plan = await acts.plan_compaction(PlanInput(snapshot=snap, policy=pol, plan_key=pre + "plan.json"))
        k += 1
        if not plan.needed:
            append_round(k)
            done["noop"] += 1
            await acts.write_record(RecordInput(record=rec.model_copy(update={"status": "noop"})))
            continue
        ext = await acts.externalize(ExternalizeInput(snapshot=snap, policy=pol, plan_key=plan.plan_key,
                                                      layers_key=pre + "layers.json"))
        lift = await acts.lift_state(LiftInput(snapshot=snap, covers_end=ext.covers_end, layers_key=ext.layers_key,
                                               state_key=pre + "state.json", prev_checkpoint=snap.checkpoint))
        summ = await acts.summarize_structured(SummarizeInput(
            tenant=tenant, session=session, snapshot_version=snap.version, covers_end=ext.covers_end,
            prev_checkpoint=snap.checkpoint, prev_checkpoint_sha256=snap.checkpoint_sha256,
            state_key=lift.state_key, budget_tokens=ext.summary_budget, model="structured",
            mode="template", output_key=pre + "summary-structured.json"))
        val = await acts.validate_candidate(ValidateInput(
            snapshot=snap, policy=pol, plan_key=plan.plan_key, layers_key=ext.layers_key,
            state_key=lift.state_key, summary_key=summ.output_key, candidate_key=pre + "candidate.json",
            covers_end=ext.covers_end))
        append_round(k)  # the agent goes on while the compaction runs
        if val.violations:
            await acts.write_record(RecordInput(record=rec.model_copy(update={"status": "failed"})))
            continue
        out = await acts.commit_swap(CommitInput(snapshot=snap, policy=pol, candidate_key=val.candidate_key))
        done["committed"] += 1
        done["merges"] += out.conflicts_merged
        await acts.write_record(RecordInput(record=rec.model_copy(update={
            "status": "committed", "checkpoint": out.checkpoint_id, "checkpoint_sha256": out.checkpoint_sha256,
            "committed_version": out.committed_version, "conflicts_merged": out.conflicts_merged,
            "covers": SeqRange(start=1, end=ext.covers_end), "tokens_after": val.view_tokens,
        })))
    while done["appends"] < appends:
        k += 1
        append_round(k)
    return done


def stored_bytes(store: Any, prefix: str) -> int:
    return sum(i.size for i in store.list_info(prefix))


async def bench_gc(store: ObjectStore, *, appends: int = 100, compactions: int = 20,
                   tenant: str = "bench", session: str | None = None) -> dict[str, Any]:
    """Build a busy session, then gc it (grace 0: everything unreferenced goes): stored and
    live bytes before and after, what was removed, and how long gc took."""
    from compactor.store.gc import GcSettings, gc_tenant

    session = session or "busy-" + uuid.uuid4().hex[:6]
    t = time.perf_counter()
    counts = await busy_session(store, tenant, session, appends=appends, compactions=compactions)
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    rep = gc_tenant(store, tenant, GcSettings(grace_s=0))
    gc_s = time.perf_counter() - t
    tot = rep.totals()
    removed: dict[str, int] = {}
    for s in rep.sessions:
        for kind, n in s.removed.items():
            removed[kind] = removed.get(kind, 0) + n
    if rep.artifacts_removed:
        removed["artifact"] = rep.artifacts_removed
    return {
        **counts, "compactions": compactions, "build_s": round(build_s, 2), "gc_s": round(gc_s, 3),
        "stored_before": tot["stored_bytes"], "live_before": tot["live_bytes"],
        "stored_after": tot["after_bytes"], "removed": removed,
        "ratio_before": round(tot["stored_bytes"] / max(1, tot["live_bytes"]), 2),
        "ratio_after": round(tot["after_bytes"] / max(1, tot["live_bytes"]), 2),
    }


def bench_gc_row(store: ObjectStore, backend: str, *, quiet: bool = False) -> dict[str, Any]:
    """``bench_gc`` on a fresh tenant of ``store``, as one row of ``bench store``'s gc table."""
    import asyncio

    if not quiet:
        print(f"... {backend}: gc after 100 appends and 20 compactions", flush=True)
    row = asyncio.run(bench_gc(store, tenant="gc-" + uuid.uuid4().hex[:6]))
    return {"backend": backend, **row}


def gc_table(rows: list[dict[str, Any]], *, markdown: bool = False) -> str:
    """Stored vs live bytes before and after gc, one line per backend."""
    header = ["backend", "appends", "compactions (merges)", "stored before", "live", "stored after",
              "before / live", "after / live", "removed", "gc s"]
    body = [[r["backend"], str(r["appends"]), f"{r['committed']} committed, {r['noop']} noop ({r['merges']})",
             f"{r['stored_before']:,}", f"{r['live_before']:,}", f"{r['stored_after']:,}",
             f"{r['ratio_before']:.2f}x", f"{r['ratio_after']:.2f}x",
             ", ".join(f"{n} {k}" for k, n in sorted(r["removed"].items())), f"{r['gc_s']:.2f}"] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body])
    from compactor.cli.common import table

    return "gc (bytes; target after gc <= 1.3x live):\n" + table(body, header)


# --- gc beside bench chaos ------------------------------------------------------------------


class GcLoop:
    """``compactor gc`` of one session over and over in a thread, through the trial's store (the
    faulty one in s3 trials), with a short grace period: the harshest neighbour a compaction,
    an appender and a killed worker can have. A gc that fails midway is counted and run again."""

    def __init__(self, store: Any, tenant: str, session: str, grace_s: float) -> None:
        from compactor.store.gc import GcSettings

        self.args = (store, tenant, session, GcSettings(grace_s=grace_s))
        self.runs = self.removed = self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        from compactor.store.gc import gc_session

        while not self._stop.is_set():
            try:
                rep = gc_session(*self.args)
                self.runs += 1
                self.removed += sum(rep.removed.values())
            except Exception:  # noqa: BLE001 - store faults: gc is safe to stop anywhere
                self.errors += 1
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def gc_problems(store: Any, tenant: str, session: str) -> list[str]:
    """After a last gc (grace 0, nothing running): verify finds nothing, and every checkpoint a
    record or the head names is there to roll back to."""
    from compactor.store import SessionLog
    from compactor.store.gc import GcSettings, gc_session
    from compactor.store.verify import verify_session

    gc_session(store, tenant, session, GcSettings(grace_s=0))
    log = SessionLog(store, tenant, session)
    out = [f"verify: {f.key}: {f.message}"[:200] for f in verify_session(log).problems]
    named = {r.checkpoint for r in log.list_records() if r.checkpoint} | {log.head().checkpoint} - {None}
    out += [f"checkpoint {c} named but gone" for c in sorted(named)
            if store.head(f"{log.prefix}ckpt/{c}.json") is None]
    return out
