"""``compactor bench``: one subcommand per module under ``compactor.bench`` (missing ones skipped)."""

from __future__ import annotations

import argparse

from compactor.cli.lazy import LazySubParsers

BENCH_MODULES = [
    "compactor.bench.store",
    "compactor.bench.fidelity",
    "compactor.bench.constraints",
    "compactor.bench.perf",
    "compactor.bench.probes",
    "compactor.bench.load",
    "compactor.bench.chaos",
    "compactor.bench.model_path",
]

#: Each benchmark module's subcommands and help lines: the module (with the engine and the
#: tokenizer it imports) is imported only when its benchmark is parsed (issue 17).
BENCHES: dict[str, tuple[tuple[str, str], ...]] = {
    "compactor.bench.store": (
        ("store", "append throughput, view latency vs session length; tokenizer throughput"),),
    "compactor.bench.fidelity": (
        ("fidelity", "recall of key facts after compaction vs truncation and masking"),),
    "compactor.bench.constraints": (
        ("constraints", "precision/recall of constraint classification on the labelled set"),),
    "compactor.bench.perf": (("perf", "durable vs inline latency, throughput, k-th compaction cost"),),
    "compactor.bench.probes": (
        ("probes", "blind reader/judge probes over compacted views (Messages API)"),),
    "compactor.bench.load": (
        ("load", "N agents x T turns through ensure_budget (noop share, blocked turns)"),
        ("sweep", "sweep wall time and objects read per session")),
    "compactor.bench.chaos": (
        ("chaos", "compactions under worker SIGKILL, concurrent appenders and S3 faults"),),
    "compactor.bench.model_path": (
        ("model-path", "the model summarizer on stand-in model answers, inline and durable"),),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (store, fidelity, constraints, perf, probes, load, sweep, chaos, model-path)")
    bench_sub = p.add_subparsers(dest="bench", metavar="BENCH", action=LazySubParsers)
    bench_sub.add_modules(BENCH_MODULES, BENCHES)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
