"""CPU seconds of each phase of an inline compaction, two trees alternated (issue 17 perf rounds).

The record's ``durations_ms`` are wall-clock times, which swing 2-5x on a shared machine. This
runs ``compactor compact --inline FILE --json`` in a child process per tree (``PYTHONPATH=TREE``)
with the engine's clock (``time.perf_counter`` as ``compactor.engine.compact`` sees it) read
from ``time.process_time`` instead, so the same record fields are CPU milliseconds (the whole
process's: the engine runs on one thread), and prints them with the child's user+system CPU
and peak RSS (its own ``getrusage``) and the load average::

    .venv/bin/python tools/phase_cpu.py /tmp/base . --files small10000.jsonl small30000.jsonl --reps 2

Trees alternate within each repetition (base, after, base, after, ...). ``--out-dir`` keeps
each run's ``--out`` document (hash them to compare outputs; ``durations_ms`` aside).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import sys, time, types
import compactor.engine.compact as engine
engine.time = types.SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("__")})
engine.time.perf_counter = time.process_time
from compactor.cli import main
rc = main(sys.argv[1:])
import json, resource
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"cpu_s": r.ru_utime + r.ru_stime, "peak_mb": r.ru_maxrss / 1024}), file=sys.stderr)
sys.exit(rc)
"""


def run(tree: Path, file: Path, out: Path | None) -> dict:
    argv = [sys.executable, "-c", _CHILD, "compact", "--inline", str(file.resolve()), "--json",
            "--now", "2026-01-01T00:00:00Z"]
    if out is not None:
        argv += ["--out", str(out.resolve())]
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    # In the tree's root: ``python -c`` puts the working directory before PYTHONPATH, so a
    # child started elsewhere (in another tree's root) would import that tree's code.
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tree.resolve())
    if p.returncode != 0:
        raise SystemExit(f"{tree}: {file}: exit {p.returncode}: {(p.stderr.strip().splitlines() or [''])[-1]}")
    record = json.loads(p.stdout)["record"]
    usage = json.loads(p.stderr.strip().splitlines()[-1])
    return {
        "cpu_s": round(usage["cpu_s"], 2),
        "peak_mb": round(usage["peak_mb"], 1),
        "phases_cpu_ms": {k: round(v) for k, v in record["durations_ms"].items()},
        "load": os.getloadavg()[0],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path, help="tree roots (each on PYTHONPATH in turn)")
    ap.add_argument("--files", nargs="+", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--out-dir", type=Path, default=None)
    args = ap.parse_args()
    for file in args.files:
        for rep in range(args.reps):
            for i, tree in enumerate(args.trees):
                out = None
                if args.out_dir is not None:
                    args.out_dir.mkdir(parents=True, exist_ok=True)
                    out = args.out_dir / f"{file.stem}-tree{i}-{rep}.json"
                got = run(tree, file, out)
                print(json.dumps({"file": file.name, "tree": str(tree), "rep": rep, **got}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
