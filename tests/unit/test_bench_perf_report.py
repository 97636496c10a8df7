"""``compactor bench perf``'s printed report: the durable figures against issue 17's targets."""

from __future__ import annotations

from pathlib import Path

from compactor.bench import perf


def test_report_gives_the_overhead_and_the_current_targets() -> None:
    d = {"ratio_tokens": 100_000, "durable_ms": 166.6, "inline_ms": 87.4, "overhead_ms": 79.2,
         "ratio_best_of": 1.885, "sessions": 20, "worker_processes": 2, "throughput_compactions": 60,
         "throughput_s": 2.032, "worker_cpu_ms_per_compaction": 38.3, "server_cpu_ms_per_compaction": 22.0,
         "client_cpu_ms_per_compaction": 2.3, "first_ms": 86.4, "k": 8, "kth_ms": 84.2,
         "inline_kth_first_ratio": 0.947, "store": "local dir", "cpus": 2, "load_before": 0.85}
    text = perf.report({"durable_inline_ratio": 1.905, "compactions_per_s": 29.52,
                        "kth_first_ratio": 0.98, "details": d})
    ratio, throughput, growing, _ = text.splitlines()
    assert "1.91" in ratio and "overhead 79 ms" in ratio and "<= 1.5 and <= 40 ms" in ratio
    assert "29.5 compactions/s" in throughput and ">= 45 on 2 cores" in throughput
    assert "0.98" in growing and "target <= 1.2" in growing


def test_docs_table_states_the_same_targets() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "bench-perf.md").read_text()
    table = doc.split("## Scale:")[0]
    assert "| <= 1.5 (overhead <= 40 ms) |" in table and "| >= 45 on 2 cores |" in table
    assert "| <= 1.2 |" in table
