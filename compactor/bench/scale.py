"""The scale table of ``compactor bench perf``: cost per event of big sessions of small events.

For each size (default 1k, 10k, 100k and 300k events) one Claude-Code-style JSONL transcript
of small events is written (a user request every 100 events, then assistant text + ``Bash``
call / short tool result pairs), and three CLI commands run on it, each in its own process so
its peak memory is its own (``os.wait4``: the child's ``ru_maxrss``, taken by a small launcher
process, ``_LAUNCHER``: Linux carries the high-water RSS of the process that starts a child into
the child's ``ru_maxrss`` across ``exec``, so a child started by this process, itself holding
~180 MB by the 300k row, would report at least that):

* ``inline``: ``compactor compact --inline FILE --json`` (parse + engine, nothing stored);
* ``import``: ``compactor import FILE --store file://DIR`` (parse + append to a local store);
* ``view``: ``compactor view SESSION --store file://DIR`` (read the log, print the view).

``measure_one`` also runs ``verify`` (``compactor verify SESSION --store file://DIR --json``:
every segment read and checked), which the table leaves out.

Time is the command's wall time (interpreter start and imports included, as a user sees it)
and its CPU time (user + system, from the same rusage: steadier than wall time on a shared
machine); ``us_per_event`` and ``cpu_us_per_event`` divide them by the events generated.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

DEFAULT_SIZES = (1_000, 10_000, 100_000, 300_000)
OPS = ("inline", "import", "view")
REQUEST_EVERY = 100


def small_session_lines(n: int, seed: int = 0) -> Iterator[str]:
    """``n`` JSONL lines of a Claude Code session, one small event each (deterministic)."""
    rnd = random.Random(seed)
    i = 0
    k = 0

    def line(typ: str, msg: dict[str, Any]) -> str:
        nonlocal i
        i += 1
        return json.dumps({"type": typ, "message": msg, "uuid": f"u-{i:07d}", "sessionId": "scale",
                           "timestamp": f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z"})

    while i < n:
        if k % (REQUEST_EVERY // 2) == 0:
            yield line("user", {"role": "user", "content": (
                f"Task {k}: fix the failing test in src/mod_{k}.py. Do not modify the tests.")})
            if i >= n:
                break
        k += 1
        uid = f"toolu_{k:08d}"
        yield line("assistant", {"id": f"msg_{k}", "role": "assistant", "content": [
            {"type": "text", "text": f"Checking module {k}."},
            {"type": "tool_use", "id": uid, "name": "Bash", "input": {"command": f"cat src/mod_{k}.py"}}]})
        if i >= n:
            break
        yield line("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uid,
                   "content": f"def f_{k}(x):\n    return x + {rnd.randint(0, 99)}\n"}]})


def write_session(path: Path, n: int) -> None:
    with path.open("w") as f:
        for ln in small_session_lines(n):
            f.write(ln + "\n")


# Run by ``python -S -c`` (a few MB): forks the command from this small process, reaps it with
# wait4 and writes [wall s, CPU s, ru_maxrss KiB, exit code] to the fd in argv[1]; it leaves
# with the command's exit code. Nothing of the bench's own memory reaches the command.
_LAUNCHER = """
import json, os, sys, time
fd = int(sys.argv[1]); argv = sys.argv[2:]
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.close(fd)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t
rc = os.waitstatus_to_exitcode(status)
with os.fdopen(fd, "w") as f:
    json.dump([wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, rc], f)
sys.exit(rc if 0 <= rc < 256 else 1)
"""


def measure_one(op: str, file: Path, store: str, session: str) -> dict[str, Any]:
    """Run one command in a child process and return its wall time, CPU time and peak RSS.

    ``op``: ``inline``, ``import``, ``view`` or ``verify`` (the last two need the session
    imported into ``store`` first)."""
    argv = {
        "inline": ["compact", "--inline", str(file), "--json"],
        "import": ["import", str(file), "--store", store, "--session", session, "--json"],
        "view": ["view", session, "--store", store],
        "verify": ["verify", session, "--store", store, "--json"],
    }[op]
    rfd, wfd = os.pipe()
    try:
        p = subprocess.Popen([sys.executable, "-S", "-c", _LAUNCHER, str(wfd), sys.executable,
                              "-m", "compactor", *argv],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(wfd,))
    finally:
        os.close(wfd)
    # read stdout while it runs (a view of 300k events is tens of MB); the launcher writes the
    # command's own wall time and rusage to its pipe once it has reaped it
    assert p.stdout is not None and p.stderr is not None
    out = p.stdout.read()
    err = p.stderr.read()
    p.wait()
    with os.fdopen(rfd) as f:
        wall, cpu, maxrss_kb, rc = json.loads(f.read())
    p.returncode = rc
    res: dict[str, Any] = {"s": round(wall, 3), "cpu_s": round(cpu, 3),
                           "peak_mb": round(maxrss_kb / 1024, 1), "exit": p.returncode}
    if p.returncode not in (0, 1):
        res["error"] = err.decode(errors="replace").strip().splitlines()[-1:]
    elif op in ("inline", "import"):
        try:
            doc = json.loads(out)
        except ValueError:
            doc = {}
        if op == "import":
            res["events"] = doc.get("events")
        else:
            rec = doc.get("record") or {}
            res["status"] = doc.get("status")
            res["engine_ms"] = round((rec.get("durations_ms") or {}).get("total", 0.0), 1)
    return res


def measure(sizes: tuple[int, ...] = DEFAULT_SIZES, runs: int = 1) -> list[dict[str, Any]]:
    """One row per size: for each command the best of ``runs`` wall times and its peak RSS."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="compactor-scale-") as tmp:
        for n in sizes:
            file = Path(tmp) / f"small{n}.jsonl"
            write_session(file, n)
            row: dict[str, Any] = {"events": n}
            for op in OPS:
                best: dict[str, Any] | None = None
                for r in range(runs):
                    store = f"file://{tmp}/store-{n}-{r}"
                    if op == "view":  # needs the session imported (not measured)
                        if not Path(f"{tmp}/store-{n}-{r}").exists():
                            measure_one("import", file, store, "scale")
                    got = measure_one(op, file, store, "scale")
                    runs_s = (best or {}).get("runs_s", []) + [got["s"]]
                    if best is None or got["s"] < best["s"]:
                        best = got
                    best["runs_s"] = runs_s
                    if op == "import" and got.get("events"):
                        row["events"] = got["events"]
                assert best is not None
                best["us_per_event"] = round(best["s"] * 1e6 / max(row["events"], 1), 1)
                best["cpu_us_per_event"] = round(best["cpu_s"] * 1e6 / max(row["events"], 1), 1)
                row[op] = best
            rows.append(row)
            file.unlink()
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    head = f"{'events':>8}  " + "  ".join(
        f"{op + ' s':>9} {'cpu s':>7} {'MB':>6} {'us/ev':>6}" for op in OPS)
    lines = ["scale (small events; each command in its own process, best of the runs; wall time, "
             "CPU time, peak RSS, wall us per event):", head]
    for r in rows:
        cells = []
        for op in OPS:
            c = r[op]
            cells.append(f"{c['s']:>9.2f} {c['cpu_s']:>7.2f} {c['peak_mb']:>6.0f} {c['us_per_event']:>6.0f}")
        lines.append(f"{r['events']:>8,}  " + "  ".join(cells))
    lines.append("targets: inline <= 60 us/event at 100k; 300k inline <= 15 s and <= 500 MB; "
                 "import and view of 300k <= 400 MB")
    return "\n".join(lines)


def parse_sizes(text: str) -> tuple[int, ...]:
    """``--sizes 1k,10k,100000`` -> (1000, 10000, 100000); ``none`` -> () (no scale table)."""
    if text.strip().lower() in ("none", "0", ""):
        return ()
    out = []
    for part in text.split(","):
        p = part.strip().lower()
        mult = 1_000 if p.endswith("k") else 1
        try:
            n = int(float(p.rstrip("k")) * mult)
        except ValueError:
            raise ValueError(f"--sizes: {part.strip()!r} is not a number of events (e.g. 1k,10k,100000)") from None
        if n < 10:
            raise ValueError(f"--sizes: {n} events is too few (at least 10)")
        out.append(n)
    return tuple(out)
