"""Did a change keep inline compaction's outputs the same? (issue 17's byte-identity check)

Run from a tree's root; it compacts, each in its own ``python -m compactor`` process of that
tree, every transcript of the corpus plus generated sessions of small events
(``compactor.bench.scale``), under three policies and two targets, and writes one line per
compaction to ``OUTDIR/HASHES``: the sha256 of the ``--out`` document (messages, system,
checkpoint with its lifted state, record) with the record's ``durations_ms`` removed.
``created_at`` is fixed with ``--now``. Two trees' files are compared with ``diff``:

    (cd BEFORE && .venv/bin/python tools/same_outputs.py /tmp/before)
    (cd AFTER && .venv/bin/python tools/same_outputs.py /tmp/after)
    diff /tmp/before/HASHES /tmp/after/HASHES && echo same

A compaction that fails is a line too (its exit code and last error line), so a tree that
refuses where the other compacts shows up in the diff.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

POLICIES = ("default", "claude-code", "codex")
TARGETS = (None, 3_000)  # the default target (15% of the transcript), and a tight one
NOW = "2026-01-01T00:00:00Z"


def _strip(doc: object) -> object:
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k != "durations_ms"}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def one(file: Path, policy: str, target: int | None, out: Path) -> str:
    name = f"{file.name}-{policy}-{target or 'default'}"
    dest = out / f"{name}.json"
    argv = [sys.executable, "-m", "compactor", "compact", "--inline", str(file), "--policy", policy,
            "--now", NOW, "--out", str(dest), "--json"]
    if target:
        argv += ["--target-tokens", str(target)]
    env = dict(os.environ, PYTHONPATH=os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run(argv, capture_output=True, text=True, env=env)
    if p.returncode != 0 or not dest.exists():
        last = (p.stderr.strip().splitlines() or [""])[-1]
        return f"{name} exit {p.returncode}: {last}"
    doc = json.loads(dest.read_text())
    text = json.dumps(_strip(doc), sort_keys=True, ensure_ascii=False)
    return f"{name} {hashlib.sha256(text.encode()).hexdigest()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--corpus", type=Path, default=Path("../shared/corpus"),
                    help="transcripts to compact (default %(default)s; skipped when absent)")
    ap.add_argument("--sizes", default="1k,10k", help="generated sessions of small events (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="compactions at once (default %(default)s)")
    args = ap.parse_args()

    from compactor.bench.scale import parse_sizes, write_session

    out: Path = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in args.corpus.rglob("*") if p.is_file() and p.name != "README.md") \
        if args.corpus.is_dir() else []
    # said, not silent: run from a tree without ../shared beside it, the default finds nothing and
    # two trees' HASHES would compare the generated sessions only
    print(f"{len(files)} transcripts from {args.corpus}" + ("" if files else " (none there: pass --corpus DIR)"),
          file=sys.stderr)
    for n in parse_sizes(args.sizes):
        gen = out / f"small{n}.jsonl"
        if not gen.exists():
            write_session(gen, n)
        files.append(gen)
    if not files:
        print("no transcripts: pass --corpus DIR or --sizes", file=sys.stderr)
        return 2
    jobs = [(f, pol, t) for f in files for pol in POLICIES for t in TARGETS]
    lines = []
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for i, line in enumerate(pool.map(lambda j: one(*j, out), jobs), 1):
            lines.append(line)
            print(f"\r{i}/{len(jobs)} compactions", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    (out / "HASHES").write_text("\n".join(sorted(lines)) + "\n")
    failed = sum(" exit " in ln for ln in lines)
    print(f"{len(lines)} compactions hashed into {out / 'HASHES'}" + (f" ({failed} failed)" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
