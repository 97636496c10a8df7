"""A short `compactor bench chaos`: worker SIGKILLs (random, in and right after commit_swap),
an agent appending late results meanwhile, and S3 faults, on the real dev server and moto; gc
runs on each trial's session all along."""

from __future__ import annotations

import pytest

from compactor.bench.chaos import run_chaos

pytestmark = pytest.mark.integration


async def test_chaos_trials_lose_nothing_and_every_outcome_matches(temporal_address, s3_endpoint):
    res = await run_chaos(6, seed=11, s3=True, parallel=2, stuck_after=150,
                          temporal_address=temporal_address, s3_endpoint=s3_endpoint)
    s, rows = res["summary"], res["trials"]
    assert s["trials"] == 6 and s["by_kind"] == {"kill": 2, "append": 2, "s3": 2}
    assert not [r for r in rows if r["outcome"] == "harness-error"], rows
    # the faults did happen: workers were killed, the agent appended (late results too), the
    # proxy injected errors
    assert all(r["killed_at"] for r in rows if r["kind"] != "s3")
    assert s["appended_during_compaction"] > 0 and s["late_results"] > 0
    assert sum(s["proxy"]["injected"].values()) > 0
    bad = {k: s[k] for k in ("lost", "duplicated", "log_order_problems", "invalid_views",
                             "outcome_mismatches", "two_checkpoint_runs", "stuck_workflows", "gc_problems")}
    assert bad == dict.fromkeys(bad, 0), [r for r in rows if r["mismatch"] or r["invalid_view"]]
    assert {r["outcome"] for r in rows} <= {"committed", "noop", "failed"}
    assert s["outcomes"].get("committed", 0) >= 3
    # gc ran beside every trial (grace 1 s) and removed what the runs left behind
    assert all(r["gc_runs"] > 0 for r in rows) and s["gc_removed"] > 0
