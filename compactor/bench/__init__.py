"""Benchmarks run by ``compactor bench``; each module has ``register(bench_subparsers)``."""
