"""``compactor demo``: the main job on embedded defaults.

Compacts the bundled sample transcript end to end — import into the local session log,
run the compaction workflow on an embedded Temporal dev server, write the view — then shows
what was stored (checkpoint and record). Needs no setup beyond ``make install``.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
import subprocess
import sys
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
    p.add_argument("--session", default=None, help="session id (default: demo-<UTC time>)")
    p.add_argument("--inline", action="store_true", help="run the engine in-process instead of on Temporal")
    p.add_argument("--json", action="store_true",
                   help="print {session, compact, view, inspect}: each step's own --json output")
    p.set_defaults(func=run)


def _run(cmd: list[str]) -> int:
    # Each step in its own process: the durable path leaves its process at once after use
    # (see compactor.cli.ops.run_and_exit), and operators would run these commands one by one.
    return subprocess.call([sys.executable, "-m", "compactor", *cmd])


def _run_json(cmd: list[str]) -> tuple[int, object]:
    res = subprocess.run([sys.executable, "-m", "compactor", *cmd, "--json"], stdout=subprocess.PIPE, text=True)
    try:
        return res.returncode, json.loads(res.stdout) if res.stdout.strip() else None
    except ValueError:
        return res.returncode or 1, None


def _run_all_json(args: argparse.Namespace, session: str, compact_cmd: list[str]) -> int:
    """``demo --json``: the same steps, one JSON document."""
    doc: dict[str, object] = {"session": None if args.inline else session}
    rc, doc["compact"] = _run_json(compact_cmd)
    if rc == 0 and not args.inline:
        where = ["--store", args.store, "--tenant", args.tenant]
        rc, doc["view"] = _run_json(["view", session, *where])
        if rc == 0:
            rc, doc["inspect"] = _run_json(["inspect", session, *where])
    print(json.dumps(doc, indent=2, ensure_ascii=False))
    return rc


def run(args: argparse.Namespace) -> int:
    path = sample_path()
    # A new session per run, so every run shows a whole compaction (the log is append-only:
    # re-running on the same session would rightly find nothing left to do).
    session = args.session or "demo-" + datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    cmd = ["compact", path, "--target-tokens", str(args.target_tokens), "--out", args.out]
    if args.inline:
        cmd.append("--inline")
    else:
        cmd += ["--store", args.store, "--tenant", args.tenant, "--session", session]
    if args.json:
        return _run_all_json(args, session, cmd)
    print(f"== compacting the bundled sample {SAMPLE} (target {args.target_tokens:,} tokens)\n")
    rc = _run(cmd)
    if rc != 0 or args.inline:
        return rc
    print(f"\n== the view the agent's next model request is built from (compactor view {session})\n")
    rc = _run(["view", session, "--store", args.store, "--tenant", args.tenant])
    if rc != 0:
        return rc
    print(f"\n== what the session log now holds (compactor inspect {session})\n")
    rc = _run(["inspect", session, "--store", args.store, "--tenant", args.tenant])
    print(
        "\nnext: keep a stack running with `compactor dev` (UI on :8233), run "
        "`TEMPORAL_ADDRESS=127.0.0.1:7233 compactor demo`, then read the steps with "
        f"`compactor history {session}`; roll back with "
        f"`compactor rollback {session} --to none`."
    )
    return rc
