"""Whole-process CPU seconds and peak RSS of ``python -m compactor compact --inline FILE --json``,
two or more trees alternated (issue 17, round seventeen).

``tools/phase_cpu.py`` reads the child's CPU inside it, after ``main`` returns: the process's
exit (freeing what it holds, module teardown) is not counted there. This takes each run's
user+system CPU and ``ru_maxrss`` from ``os.wait4`` of the child, started by a small launcher
process as ``compactor.bench.scale`` does (a child inherits its starter's high-water RSS across
``exec``), so the figures are the command's whole life, as ``compactor bench perf`` sees it::

    .venv/bin/python tools/whole_cpu.py /tmp/s18/base . --files /tmp/s18/small100000.jsonl --reps 3

Each tree runs from its own root with ``PYTHONPATH=TREE``; trees alternate within each
repetition. Prints one JSON line per run (cpu_s, user_s, sys_s, peak_mb, load) and the median
per tree and file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_LAUNCHER = """
import json, os, sys
argv = sys.argv[1:]
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.execv(argv[0], argv)
_, status, ru = os.wait4(pid, 0)
print(json.dumps([ru.ru_utime, ru.ru_stime, ru.ru_maxrss, os.waitstatus_to_exitcode(status)]))
"""


def run(tree: Path, file: Path) -> dict:
    argv = [sys.executable, "-m", "compactor", "compact", "--inline", str(file.resolve()), "--json",
            "--now", "2026-01-01T00:00:00Z"]
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    p = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, *argv], capture_output=True, text=True,
                       env=env, cwd=tree.resolve())
    user, system, maxrss, rc = json.loads(p.stdout)
    if rc not in (0, 1):
        raise SystemExit(f"{tree}: {file}: exit {rc}")
    return {"cpu_s": round(user + system, 2), "user_s": round(user, 2), "sys_s": round(system, 2),
            "peak_mb": round(maxrss / 1024, 1), "load": round(os.getloadavg()[0], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--files", nargs="+", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    got: dict[tuple[str, str], list[dict]] = {}
    for file in args.files:
        for rep in range(args.reps):
            for tree in args.trees:
                r = run(tree, file)
                got.setdefault((str(tree), file.name), []).append(r)
                print(json.dumps({"file": file.name, "tree": str(tree), "rep": rep, **r}), flush=True)
    for (tree, name), rows in got.items():
        print(f"median {name} {tree}: cpu {statistics.median(r['cpu_s'] for r in rows):.2f} s, "
              f"peak {statistics.median(r['peak_mb'] for r in rows):.1f} MB, "
              f"load {min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
