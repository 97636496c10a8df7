"""CPU of the clearing layer and of ``content_hash``, two trees in one process (issue 17, round 12).

A whole compaction's phases (``tools/phase_cpu.py``) swing 10-20% on a shared machine: too much
to see a change of a few hundred ms. This imports FILE once (this tree's importer), then runs
the base tree's ``engine/layers.py`` and ``events.content_hash_line`` beside this tree's on the
same events, alternated, and prints the least CPU of each over ``--reps`` runs (and checks they
give the same outcome). The base modules are loaded from their files against this tree's
``compactor`` package (its block classes), so only those two pieces differ::

    .venv/bin/python tools/layer_ab.py /tmp/s13/base /tmp/s13/small100000.jsonl --reps 10
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", type=Path, help="the base tree's root")
    ap.add_argument("file", type=Path)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args()

    import compactor.engine.layers as layers
    import compactor.events as events_mod
    from compactor.cli.common import import_into
    from compactor.engine.policy import make_policy
    from compactor.tokens import with_tokens

    spec = importlib.util.spec_from_file_location("base_layers", args.base / "compactor/engine/layers.py")
    base_layers = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["base_layers"] = base_layers
    spec.loader.exec_module(base_layers)  # type: ignore[union-attr]
    base_layers.LayerOutcome.model_rebuild(_types_namespace=vars(base_layers))
    src = (args.base / "compactor/events.py").read_text()
    ns = dict(vars(events_mod))
    exec(src[src.index("def content_hash_line("):src.index("def _dumped_line(")], ns)  # noqa: S102

    gc.disable()
    events: list = []
    import_into(args.file, "auto", None, sink=lambda b: events.extend(with_tokens(b)), count=True)
    for e in events:
        e.tool_results  # noqa: B018 (cached, as the engine's earlier phases leave it)
    policy = make_policy("default")
    runs = {
        "clear base": lambda: base_layers.clear_old_tool_results(events, policy),
        "clear after": lambda: layers.clear_old_tool_results(events, policy),
        "clear after lazy": lambda: layers.clear_old_tool_results(events, policy, lazy=True),  # (the engine's)
        "clear base lazy": lambda: base_layers.clear_old_tool_results(events, policy, lazy=True),
        "content_hash_line base": lambda: list(map(ns["content_hash_line"], events)),
        "content_hash_line after": lambda: list(map(events_mod.content_hash_line, events)),
    }
    best: dict[str, float] = {}
    got: dict[str, object] = {}
    for _ in range(args.reps):
        for name, run in runs.items():
            t = time.process_time()
            out = run()
            best[name] = min(best.get(name, 1e9), time.process_time() - t)
            if hasattr(out, "counts"):  # (a lazily cleared event's count: made with its blocks)
                out = (out.items, out.freed_tokens, {s: out.counts[s] if s in out.counts else b.tokens()
                                                     for s, b in out.replacements.items()})
            got[name] = out
            del out
    assert got["clear base"] == got["clear after"] == got["clear after lazy"] == got["clear base lazy"] and got["content_hash_line base"] == got["content_hash_line after"]
    print({name: round(s * 1000) for name, s in best.items()}, f"(min CPU ms of {args.reps}, {len(events)} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
