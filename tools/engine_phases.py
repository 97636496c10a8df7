"""CPU seconds of each phase of an inline compaction (issue 17's per-phase figures).

Runs what ``compactor compact --inline FILE`` runs - the import with each event counted as
it arrives, the default target's count (handed to the engine), ``engine.compact`` - in this process, with the
collector paused as the CLI pauses it, and prints CPU milliseconds (``time.process_time``)
per step: the import + count, the target's count, and the record's own phases (the engine's
clock is set to the process's CPU clock for the run, so ``durations_ms`` are CPU ms), plus a
separate ``content_hash`` of every event (the checkpoint id's share, for reference) and a
sha256 of the outputs without timings (view request, checkpoint, record), so that two trees
can be compared on the same file:

    PYTHONPATH=/tmp/before .venv/bin/python tools/engine_phases.py small10000.jsonl
    PYTHONPATH=. .venv/bin/python tools/engine_phases.py small10000.jsonl
    PYTHONPATH=. .venv/bin/python tools/engine_phases.py small30000.jsonl --profile 40

``--profile N`` prints cProfile's N most expensive functions of the compaction (cumulative
and own time) instead of a clean timing. Generated files: ``compactor.bench.scale.write_session``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import types
from datetime import datetime, timezone
from pathlib import Path

from same_outputs import _strip  # (tools/: the documents hashed without their timings)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--policy", default="default")
    ap.add_argument("--target-tokens", type=int)
    ap.add_argument("--profile", type=int, metavar="N", help="cProfile the compaction, print the top N")
    ap.add_argument("--pstats", type=Path, help="with --profile: also write the profile to this file")
    args = ap.parse_args()

    from compactor.cli.common import import_into
    from compactor.cli.compact import default_target
    from compactor.engine import compact as engine
    from compactor.engine.gc_pause import collector_paused
    from compactor.engine.measure import quick_view_tokens, render_request, view_tokens
    from compactor.engine.policy import make_policy
    from compactor.events import content_hash
    from compactor.tokens import with_tokens

    cpu = time.process_time
    out: dict[str, object] = {"file": args.file.name}
    with collector_paused():
        t = cpu()
        events: list = []
        import_into(args.file, "auto", None, sink=lambda b: events.extend(with_tokens(b)), count=True)
        out["import_count_ms"] = round((cpu() - t) * 1000, 1)
        out["events"] = len(events)
        policy = make_policy(args.policy)
        t = cpu()
        target, counted = args.target_tokens, None
        if not target:  # as the CLI: the count handed to the engine's plan
            counted = quick_view_tokens(events, placed=True)
            target = default_target(view_tokens(events) if counted is None else counted)
        out["target_count_ms"] = round((cpu() - t) * 1000, 1)
        t = cpu()
        content_hash(events)
        out["content_hash_ms"] = round((cpu() - t) * 1000, 1)
        engine.time = types.SimpleNamespace(perf_counter=cpu)  # type: ignore[attr-defined]
        now = datetime(2026, 1, 1, tzinfo=timezone.utc)
        t = cpu()
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            res = prof.runcall(engine.compact, events, policy, target, now=now, tokens_before=counted)
        else:
            res = engine.compact(events, policy, target, now=now, tokens_before=counted)
        out["compact_ms"] = round((cpu() - t) * 1000, 1)
        out["durations_ms"] = {k: round(v, 1) for k, v in res.record.durations_ms.items()}
        system, messages = render_request(res.view)
        doc = {"messages": messages, "system": system,
               "checkpoint": res.checkpoint.model_dump(mode="json") if res.checkpoint else None,
               "record": res.record.model_dump(mode="json")}
        text = json.dumps(_strip(doc), sort_keys=True, ensure_ascii=False)
        out["outputs_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    out["process_cpu_s"] = round(cpu(), 2)
    print(json.dumps(out))
    if args.profile:
        if args.pstats:
            prof.dump_stats(args.pstats)
        st = pstats.Stats(prof, stream=sys.stdout)
        st.sort_stats("cumulative").print_stats(args.profile)
        st.sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
