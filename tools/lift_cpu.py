"""CPU of one lifting pass, and hashes of the lifted states (issue 17's lift rounds).

``cpu``: the CPU seconds of ``Lifter(events, None).state_at(last_seq)`` alone, with the cyclic
collector paused as in the engine, best of ``--runs`` (the first run also fills the events'
cached fields), for generated sessions of small events (``compactor.bench.scale``) and, with
``--corpus``, for every transcript of the corpus (one figure for all of them)::

    .venv/bin/python tools/lift_cpu.py cpu --sizes 10k,100k --runs 3
    .venv/bin/python tools/lift_cpu.py cpu --sizes none --corpus ../shared/corpus

``hashes``: one line per session (corpus transcripts, 6 synthetic sessions, generated 1k and
10k sessions): the sha256 of the lifted state's JSON at 4 cuts of one pass (30%, 60%, 90%,
100% of the events) and of its summary rendered at 300, 2,000 and 12,000 tokens. Run it with
each tree first on ``PYTHONPATH`` and ``diff`` the outputs::

    PYTHONPATH=/tmp/base .venv/bin/python tools/lift_cpu.py hashes > /tmp/before
    PYTHONPATH=. .venv/bin/python tools/lift_cpu.py hashes > /tmp/after
    diff /tmp/before /tmp/after && echo same
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import sys
import tempfile
import time
from pathlib import Path


def _generated(n: int, tmp: Path) -> list:
    from compactor.bench.scale import write_session
    from compactor.importers import import_file
    from compactor.tokens import with_tokens

    path = tmp / f"small{n}.jsonl"
    if not path.exists():
        write_session(path, n)
    return with_tokens(import_file(path).events)


def _corpus(root: Path) -> list[tuple[str, list]]:
    from compactor.importers import import_file
    from compactor.tokens import with_tokens

    if not root.is_dir():
        return []
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md")
    return [(str(p.relative_to(root)), with_tokens(import_file(p).events)) for p in files]


def _best(sessions: list[list], runs: int) -> list[float]:
    from compactor.lifting.lift import Lifter

    out = []
    was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(runs):
            t = time.process_time()
            for evs in sessions:
                Lifter(evs, None).state_at(evs[-1].seq if evs else None)
            out.append(round(time.process_time() - t, 3))
    finally:
        if was:
            gc.enable()
    return out


def cmd_cpu(args: argparse.Namespace) -> int:
    from compactor.bench.scale import parse_sizes

    with tempfile.TemporaryDirectory(prefix="lift-cpu-") as tmp:
        for n in parse_sizes(args.sizes):
            evs = _generated(n, Path(tmp))
            ts = _best([evs], args.runs)
            print(f"small{n}: {len(evs)} events, lift CPU s {ts}, best {min(ts):.3f} "
                  f"({min(ts) / len(evs) * 1e6:.1f} us/event)", flush=True)
            del evs
    if args.corpus is not None:
        sessions = [evs for _, evs in _corpus(args.corpus)]
        n = sum(len(s) for s in sessions)
        if n:
            ts = _best(sessions, args.runs)
            print(f"corpus: {len(sessions)} transcripts, {n} events, lift CPU s {ts}, best {min(ts):.3f} "
                  f"({min(ts) / n * 1e6:.1f} us/event)", flush=True)
    return 0


def cmd_hashes(args: argparse.Namespace) -> int:
    from compactor.bench.scale import parse_sizes
    from compactor.bench.synthetic import synthetic_sessions
    from compactor.lifting.lift import Lifter
    from compactor.summarize.structured import render_summary

    total = hashlib.sha256()
    with tempfile.TemporaryDirectory(prefix="lift-hashes-") as tmp:
        sessions = _corpus(args.corpus)
        sessions += [(name, list(evs)) for name, evs in synthetic_sessions(6, seed=11)]
        sessions += [(f"small{n}", _generated(n, Path(tmp))) for n in parse_sizes(args.sizes)]
        for name, evs in sessions:
            seqs = [e.seq for e in evs]
            lifter = Lifter(evs)
            h = hashlib.sha256()
            for f in (0.3, 0.6, 0.9, 1.0):
                st = lifter.state_at(seqs[int((len(seqs) - 1) * f)] if seqs else None)
                h.update(st.model_dump_json().encode())
                if args.renders:
                    for budget in (300, 2_000, 12_000):
                        h.update(render_summary(st, budget).model_dump_json().encode())
            total.update(h.digest())
            print(name, h.hexdigest()[:16], flush=True)
    print("TOTAL", total.hexdigest())
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    cpu = sub.add_parser("cpu", help="CPU seconds of one lifting pass")
    cpu.add_argument("--sizes", default="10k", help="generated sessions (default %(default)s; none for none)")
    cpu.add_argument("--runs", type=int, default=3, help="passes per session, the best reported (default 3)")
    cpu.add_argument("--corpus", type=Path, default=None, help="also one figure for every transcript of DIR")
    hs = sub.add_parser("hashes", help="hashes of the lifted states at 4 cuts of one pass")
    hs.add_argument("--corpus", type=Path, default=Path("../shared/corpus"),
                    help="transcripts to lift (default %(default)s; skipped when absent)")
    hs.add_argument("--sizes", default="1k,10k", help="generated sessions (default %(default)s)")
    hs.add_argument("--no-renders", dest="renders", action="store_false",
                    help="hash the states only, not their summaries")
    args = ap.parse_args()
    return cmd_cpu(args) if args.cmd == "cpu" else cmd_hashes(args)


if __name__ == "__main__":
    sys.exit(main())
