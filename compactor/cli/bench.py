"""``compactor bench``: one subcommand per module under ``compactor.bench`` (missing ones skipped)."""

from __future__ import annotations

import argparse
import importlib

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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks (store, fidelity, constraints, perf, probes, load, sweep, chaos, model-path)")
    bench_sub = p.add_subparsers(dest="bench", metavar="BENCH")
    for name in BENCH_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # benchmark not built yet
            raise
        mod.register(bench_sub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
