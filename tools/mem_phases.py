"""Where does ``compact --inline`` reach its peak memory? (issue 17, memory rounds)

Runs ``compactor compact --inline FILE --json`` in this process with the phases of the inline
path wrapped: the import, the default target's count, the engine's plan, its replacement
layers, the cleared candidate's count, each rung of the summary ladder (lift, render, checks),
the result, the request's render and the ``--out`` dump. Per phase it prints how far the
process's peak RSS (``ru_maxrss``) rose inside it, and the peak RSS at its end; with
``--trace``, also the traced (``tracemalloc``) memory at its entry and exit and the highest
traced memory inside it (slower: 2-3x the CPU). ``--snap PHASE[:K]`` takes a ``tracemalloc``
snapshot at the end of the K-th call (default: the first) of PHASE and prints the lines that
hold the most (``--top N``, grouped by ``--depth`` frames); ``PHASE:K:in`` takes it at the K-th
call's entry instead. ``--since PHASE[:K][:in]`` takes a first snapshot there and prints what
grew between the two (``Snapshot.compare_to``): where the memory added between two points is.

Run from a tree's root (``PYTHONPATH=.`` for an exported tree without a venv of its own):

    .venv/bin/python tools/mem_phases.py /tmp/s9/small30000.jsonl
    .venv/bin/python tools/mem_phases.py /tmp/s9/small10000.jsonl --trace --snap ladder:1 --top 30
    .venv/bin/python tools/mem_phases.py /tmp/s16/small100000.jsonl --since clear:1 --snap ladder_lift:1:in

Compaction arguments after ``--`` go to ``compact`` (e.g. ``-- --policy codex --out F``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import io
import linecache
import resource
import sys
import time
import tracemalloc
from typing import Any, Callable

MB = 1024 * 1024

# (module, attribute, phase) wrapped where the inline path looks them up; a phase missing in a
# tree (an older commit) is skipped.
PHASES = [
    ("compactor.cli.common", "import_into", "import"),
    ("compactor.cli.compact", "default_target", "default_target"),
    ("compactor.engine.compact", "plan", "plan"),
    ("compactor.engine.compact", "CoveredText", "covered_text"),
    ("compactor.engine.compact", "externalize_tool_results", "externalize"),
    ("compactor.engine.compact", "clear_old_tool_results", "clear"),
    ("compactor.engine.compact", "streamed_view_tokens", "count_view"),
    ("compactor.engine.compact", "summarize_range", "ladder_render"),
    ("compactor.summarize.ladder_count", "piece_cut_extra", "render_text"),  # (a rung's whole text laid out: its peak)
    ("compactor.summarize.ladder_count", "piece_cut_extra_of", "render_text"),  # (since ladmem17: the text read around its piece cuts only)
    ("compactor.engine.compact", "validate", "validate"),
    ("compactor.engine.compact", "build_view", "build_view"),
    ("compactor.engine.compact", "_result", "result"),
    ("compactor.lifting.lift.Lifter", "state_at", "ladder_lift"),
    ("compactor.engine.measure", "render_request", "render_request"),
    ("compactor.cli.compact", "print_outcome", "print"),
    ("json", "dump", "dump_out"),
]


class Recorder:
    def __init__(self, trace: bool, snap: tuple[str, int, bool] | None, top: int, depth: int,
                 since: tuple[str, int, bool] | None = None) -> None:
        self.trace = trace
        self.snap = snap
        self.since = since
        self.base: tracemalloc.Snapshot | None = None
        self.top = top
        self.depth = depth
        self.rows: dict[str, dict[str, Any]] = {}
        self.order: list[str] = []
        self.stack: list[str] = []
        self.carry: list[int] = []  # per open phase: the highest traced peak of what it ran so far
        self.snapshot: tracemalloc.Snapshot | None = None
        self.t0 = time.process_time()

    def wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*a: Any, **kw: Any) -> Any:
            row = self.rows.get(phase)
            if row is None:
                row = self.rows[phase] = {"calls": 0, "rise": 0.0, "peak_end": 0.0, "cpu": 0.0,
                                          "traced_in": 0.0, "traced_out": 0.0, "traced_peak": 0.0}
                self.order.append(phase)
            row["calls"] += 1
            self._take(phase, row["calls"], True)
            before = _maxrss()
            if self.trace:
                cur, peak = tracemalloc.get_traced_memory()
                if self.carry:  # the enclosing phase's peak so far
                    self.carry[-1] = max(self.carry[-1], peak)
                self.carry.append(0)
                row["traced_in"] = max(row["traced_in"], cur / MB)
                tracemalloc.reset_peak()
            c0 = time.process_time()
            self.stack.append(phase)
            try:
                return fn(*a, **kw)
            finally:
                self.stack.pop()
                row["cpu"] += time.process_time() - c0
                after = _maxrss()
                row["rise"] += after - before
                row["peak_end"] = after
                if self.trace:
                    cur, peak = tracemalloc.get_traced_memory()
                    peak = max(peak, self.carry.pop())
                    if self.carry:  # the enclosing phase's peak counts this one's
                        self.carry[-1] = max(self.carry[-1], peak)
                    row["traced_out"] = cur / MB
                    row["traced_peak"] = max(row["traced_peak"], peak / MB)
                self._take(phase, row["calls"], False)
        return wrapped

    def _take(self, phase: str, call: int, entry: bool) -> None:
        at = (phase, call, entry)
        if self.since is not None and self.since == at and self.base is None:
            self.base = tracemalloc.take_snapshot()
        if self.snap is not None and self.snap == at and self.snapshot is None:
            self.snapshot = tracemalloc.take_snapshot()

    def report(self, out: io.TextIOBase) -> None:
        print(f"{'phase':16} {'calls':>5} {'cpu s':>7} {'rss rise MB':>11} {'peak RSS at end':>15}"
              + ("  traced MB: in / out / peak inside" if self.trace else ""), file=out)
        for phase in self.order:
            r = self.rows[phase]
            line = f"{phase:16} {r['calls']:5d} {r['cpu']:7.2f} {r['rise']:11.1f} {r['peak_end']:15.1f}"
            if self.trace:
                line += f"  {r['traced_in']:8.1f} / {r['traced_out']:6.1f} / {r['traced_peak']:6.1f}"
            print(line, file=out)
        print(f"process: peak RSS {_maxrss():.1f} MB, CPU {time.process_time():.2f} s", file=out)
        if self.snapshot is not None:
            self._print_snapshot(out)

    def _print_snapshot(self, out: io.TextIOBase) -> None:
        assert self.snapshot is not None
        assert self.snap is not None
        drop = [tracemalloc.Filter(False, tracemalloc.__file__)]
        snap = self.snapshot.filter_traces(drop)
        by_file = getattr(self, "by_file", False)
        key = "filename" if by_file else "traceback" if self.depth > 1 else "lineno"
        stats = snap.statistics(key)
        total = sum(s.size for s in stats)
        where = "entry" if self.snap[2] else "end"
        print(f"\nsnapshot at the {where} of {self.snap[0]}:{self.snap[1]}: {total / MB:.1f} MB traced", file=out)
        if self.base is not None and self.since is not None:
            assert self.since is not None
            diff = snap.compare_to(self.base.filter_traces(drop), key)
            grown = sum(d.size_diff for d in diff)
            print(f"grown since the {'entry' if self.since[2] else 'end'} of {self.since[0]}:{self.since[1]}: "
                  f"{grown / MB:+.1f} MB (the lines that grew most)", file=out)
            for d in sorted(diff, key=lambda d: -d.size_diff)[:self.top]:
                f = d.traceback[0]
                print(f"{d.size_diff / MB:+8.2f} MB {d.count_diff:+9d} blocks  {_short(f.filename)}:{f.lineno}  "
                      f"{linecache.getline(f.filename, f.lineno).strip()[:90]}", file=out)
            return
        if self.depth > 1 and not by_file:  # group by the innermost DEPTH frames
            grouped: dict[tuple[Any, ...], list[int]] = {}
            for s in stats:
                key = tuple((f.filename, f.lineno) for f in list(s.traceback)[:self.depth])
                g = grouped.setdefault(key, [0, 0])
                g[0] += s.size
                g[1] += s.count
            items = sorted(grouped.items(), key=lambda kv: -kv[1][0])[:self.top]
            for key, (size, count) in items:
                print(f"{size / MB:8.2f} MB {count:9d} blocks", file=out)
                for fn, ln in key:
                    print(f"      {_short(fn)}:{ln}  {linecache.getline(fn, ln).strip()[:90]}", file=out)
            return
        for s in stats[:self.top]:
            f = s.traceback[0]
            if by_file:
                print(f"{s.size / MB:8.2f} MB {s.count:9d} blocks  {_short(f.filename)}", file=out)
                continue
            print(f"{s.size / MB:8.2f} MB {s.count:9d} blocks  {_short(f.filename)}:{f.lineno}  "
                  f"{linecache.getline(f.filename, f.lineno).strip()[:90]}", file=out)


def _short(path: str) -> str:
    for mark in ("/compactor/", "/site-packages/", "/lib/python3"):
        i = path.find(mark)
        if i >= 0:
            return path[i + 1:]
    return path


def _point(spec: str) -> tuple[str, int, bool]:
    """``PHASE[:K][:in]`` -> (phase, K, at its entry)."""
    name, _, rest = spec.partition(":")
    k, _, where = rest.partition(":")
    if k == "in":
        k, where = "", "in"
    return name, int(k or 1), where == "in"


def _maxrss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _install(rec: Recorder) -> None:
    for mod_name, attr, phase in PHASES:
        owner: Any
        try:
            owner = importlib.import_module(mod_name)
        except ImportError:  # a class path: module.Class
            mod_name, cls = mod_name.rsplit(".", 1)
            try:
                owner = getattr(importlib.import_module(mod_name), cls)
            except (ImportError, AttributeError):
                continue
        fn = getattr(owner, attr, None)
        if fn is None:
            continue
        setattr(owner, attr, rec.wrap(fn, phase))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--trace", action="store_true", help="tracemalloc: traced memory per phase")
    ap.add_argument("--snap", default=None, help="PHASE[:K][:in]: snapshot at the end (entry) of its K-th call")
    ap.add_argument("--since", default=None, help="PHASE[:K][:in]: print what grew from here to --snap")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--depth", type=int, default=1, help="frames per snapshot group (default 1)")
    ap.add_argument("--by-file", action="store_true", help="group the snapshot by file, not by line")
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:len(argv) - len(rest) - (1 if rest or "--" in argv else 0)])
    snap = _point(args.snap) if args.snap else None
    since = _point(args.since) if args.since else None
    if snap is not None:
        args.trace = True
    if args.trace:
        tracemalloc.start(max(1, args.depth))
    rec = Recorder(args.trace, snap, args.top, args.depth, since)
    rec.by_file = args.by_file
    _install(rec)
    from compactor.cli import main as cli_main

    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        rc = cli_main(["compact", "--inline", args.file, "--json", *rest])
    rec.report(sys.stdout)  # type: ignore[arg-type]
    print(f"exit code {rc}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
