"""``compactor demo``: the main job on embedded defaults.

Compacts the bundled sample transcript end to end — import into the local session log,
run the compaction workflow on an embedded Temporal dev server, write the view — then shows
what was stored (checkpoint and record). Needs no setup beyond ``make install``.
"""

from __future__ import annotations

import argparse
from importlib import resources

from compactor.cli.common import add_store_args

SAMPLE = "demo-session.claude.jsonl"


def sample_path() -> str:
    return str(resources.files("compactor") / "samples" / SAMPLE)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="compact the bundled sample transcript end to end (embedded stack)")
    add_store_args(p)
    p.add_argument("--target-tokens", type=int, default=3_000, help="view budget (default %(default)s)")
    p.add_argument("--out", default="demo-view.json", help="where to write the view (default %(default)s)")
    p.add_argument("--inline", action="store_true", help="run the engine in-process instead of on Temporal")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from compactor.cli import main

    path = sample_path()
    print(f"== compacting the bundled sample {SAMPLE} (target {args.target_tokens:,} tokens)\n")
    cmd = ["compact", path, "--target-tokens", str(args.target_tokens), "--out", args.out]
    if args.inline:
        cmd.append("--inline")
    else:
        cmd += ["--store", args.store, "--tenant", args.tenant, "--session", "demo"]
    rc = main(cmd)
    if rc != 0 or args.inline:
        return rc
    print("\n== what the session log now holds (compactor inspect demo)\n")
    return main(["inspect", "demo", "--store", args.store, "--tenant", args.tenant])
