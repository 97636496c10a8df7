"""`compactor bench store` runs end to end on tiny sizes (numbers are not asserted)."""

from __future__ import annotations

import json

from compactor.cli import main


def test_bench_store_json(capsys, s3_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    rc = main(["bench", "store", "--sizes", "30,60", "--backends", "local,s3", "--agent-events", "25", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["backend"].split()[0], r["events"]) for r in out["store"]] == [
        ("local", 30), ("local", 60), ("s3", 30), ("s3", 60)
    ]
    for r in out["store"]:
        assert r["agent_events_per_s"] > 0 and r["view_cold_ms"] > 0 and r["head_segments"] >= 1
    assert out["tokenizer"]["tokens"] > 0 and out["tokenizer"]["tokens_per_s_per_core"] > 0
    # stored vs live bytes around gc, per backend
    assert [r["backend"] for r in out["gc"]] == ["local", "s3"]
    for r in out["gc"]:
        assert r["appends"] == 100 and r["stored_before"] > r["stored_after"] >= r["live_before"] > 0
        assert r["ratio_after"] <= 1.3


def test_bench_store_table(capsys):
    rc = main(["bench", "store", "--sizes", "20", "--backends", "local", "--agent-events", "10", "--no-tokenizer",
               "--no-gc"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "agent append ev/s" in out and "local" in out
