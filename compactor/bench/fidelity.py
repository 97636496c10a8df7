"""``compactor bench fidelity``: does a continuing agent still know what it needs?

For each transcript: import it, extract key facts from the ORIGINAL events with the
independent extractor in ``compactor.bench.facts``, then build three views at the same token
target (``max(--min-target, ratio x tokens)``):

- ``ours``: ``compactor.engine.compact`` (layers + lifted-state summary + verbatim tail);
- ``truncate``: pinned events + the newest events that fit, never starting inside a tool
  pair (a tool_result whose tool_use was cut is dropped with it);
- ``mask``: observation masking (every tool result but the newest ``--keep-results`` is
  replaced by a short placeholder), then truncated the same way if still over.

A fact is recalled when its identifying string appears in the view's text. A view over its
target is graded on the part that fits (pinned + newest events, whole tool pairs), since a
request at that budget could not carry more. The report gives
per file: tokens before and after, the layers our compaction used, invariant violations, and
recall per method; then the mean recall per method.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from compactor.bench.facts import Fact, extract_facts, recall, view_haystack
from compactor.events import Event, TextBlock, ToolResultBlock
from compactor.tokens import count_event, total_tokens, with_tokens

METHODS = ("ours", "truncate", "mask")
DEFAULT_RATIO = 0.15
DEFAULT_MIN_TARGET = 8_000
DEFAULT_KEEP_RESULTS = 10
MASK_PLACEHOLDER = "[old tool output omitted]"


# --- baselines --------------------------------------------------------------------------------


def truncate_view(events: Sequence[Event], target: int) -> list[Event]:
    """Pinned events + the newest events that fit in ``target``, whole tool pairs only."""
    pinned = [e for e in events if e.kind == "pinned"]
    rest = [e for e in events if e.kind != "pinned"]
    budget = target - sum(count_event(e) for e in pinned)
    start = len(rest)
    used = 0
    while start > 0 and used + count_event(rest[start - 1]) <= budget:
        start -= 1
        used += count_event(rest[start])
    # never start inside a tool pair: drop leading events whose results lost their tool_use
    while True:
        kept_uses = {u.id for e in rest[start:] for u in e.tool_uses}
        bad = next((i for i in range(start, len(rest))
                    if any(r.tool_use_id not in kept_uses for r in rest[i].tool_results)), None)
        if bad is None:
            break
        start = bad + 1
    return pinned + rest[start:]


def mask_view(events: Sequence[Event], target: int, keep_results: int = DEFAULT_KEEP_RESULTS) -> list[Event]:
    """Observation masking: old tool results become placeholders; then truncate if needed."""
    positions = [(i, j) for i, e in enumerate(events) for j, b in enumerate(e.blocks)
                 if isinstance(b, ToolResultBlock)]
    old = set(positions[:-keep_results] if keep_results else positions)
    out: list[Event] = []
    for i, e in enumerate(events):
        if not any((i, j) in old for j in range(len(e.blocks))):
            out.append(e)
            continue
        blocks = [
            ToolResultBlock(tool_use_id=b.tool_use_id, content=[TextBlock(text=MASK_PLACEHOLDER)],
                            is_error=b.is_error)
            if (i, j) in old and isinstance(b, ToolResultBlock) else b
            for j, b in enumerate(e.blocks)
        ]
        masked = e.with_(blocks=blocks, tokens=None)
        out.append(masked.with_(tokens=count_event(masked)))
    if total_tokens(out) > target:
        out = truncate_view(out, target)
    return out


# --- one transcript ---------------------------------------------------------------------------


def target_for(tokens: int, ratio: float, min_target: int) -> int:
    """The token target every method is held to: ``max(min_target, ratio x tokens)``."""
    return max(min_target, int(ratio * tokens))


def _ours(events: list[Event], target: int, policy_name: str) -> dict[str, Any]:
    from compactor.engine import compact
    from compactor.policy import make_policy

    policy = make_policy(policy_name)
    res = compact(events, policy, target_tokens=target)
    violations: list[str] = []
    try:
        from compactor.invariants import validate
    except ImportError:
        violations = ["(validator not available)"]
    else:
        vs = validate(events=events, checkpoint=res.checkpoint, view=res.view, target_tokens=target,
                      artifacts=res.artifacts)
        violations = [v.code for v in vs]
    return {"view": res.view, "layers": list(res.record.layers), "violations": violations}


def evaluate(events: Sequence[Event], *, ratio: float = DEFAULT_RATIO,
             min_target: int = DEFAULT_MIN_TARGET, policy: str = "default",
             keep_results: int = DEFAULT_KEEP_RESULTS, name: str = "") -> dict[str, Any]:
    """Run the three methods on one transcript and grade them; a JSON-safe dict."""
    evs = with_tokens(events)
    tokens = total_tokens(evs)
    target = target_for(tokens, ratio, min_target)
    facts = extract_facts(evs)
    row: dict[str, Any] = {"file": name, "events": len(evs), "tokens": tokens, "target": target,
                           "facts": len(facts), "fits": tokens <= target}
    views: dict[str, list[Event]] = {}
    try:
        ours = _ours(evs, target, policy)
        views["ours"] = ours["view"]
        row["layers"] = ours["layers"]
        row["violations"] = ours["violations"]
    except Exception as exc:  # noqa: BLE001 - reported per file, the run goes on
        row["layers"] = []
        row["violations"] = []
        row["error"] = f"{type(exc).__name__}: {exc}"
    views["truncate"] = truncate_view(evs, target)
    views["mask"] = mask_view(evs, target, keep_results)
    row["methods"] = {}
    if "ours" not in views:
        # a failed compaction recalls nothing: count it, do not leave it out of the mean
        row["methods"]["ours"] = {"tokens": None, "recall": 0.0, "by_kind": {k: [0, b] for k, b in
                                  _kind_totals(facts).items()}, "missed": [f.model_dump() for f in facts][:50]}
    for m in METHODS:
        if m not in views:
            continue
        view = views[m]
        tokens = total_tokens(view)
        raw, _ = recall(facts, view_haystack(view))
        over = tokens > target
        if over:
            # A view over budget would not be sent as is: grade what fits, newest first.
            view = truncate_view(view, target)
        r, per = recall(facts, view_haystack(view))
        row["methods"][m] = {
            "tokens": tokens,
            "over_budget": over,
            "recall": round(r, 4),
            "recall_unbounded": round(raw, 4),
            "by_kind": {k: list(v) for k, v in sorted(per.items())},
            "missed": [f.model_dump() for f in _missed(facts, view)][:50],
        }
    return row


def _kind_totals(facts: Sequence[Fact]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in facts:
        out[f.kind] = out.get(f.kind, 0) + 1
    return out


def _missed(facts: Sequence[Fact], view: Sequence[Event]) -> list[Fact]:
    from compactor.bench.facts import recalled

    hay = view_haystack(view)
    return [f for f in facts if not recalled(f, hay)]


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean recall per method (over files), also over the files that needed compaction."""
    out: dict[str, Any] = {}
    for m in METHODS:
        vals = [r["methods"][m]["recall"] for r in rows if m in r["methods"]]
        comp = [r["methods"][m]["recall"] for r in rows if m in r["methods"] and not r["fits"]]
        hits = sum(sum(a for a, _ in r["methods"][m]["by_kind"].values()) for r in rows if m in r["methods"])
        total = sum(sum(b for _, b in r["methods"][m]["by_kind"].values()) for r in rows if m in r["methods"])
        out[m] = {
            "mean_recall": round(sum(vals) / len(vals), 4) if vals else None,
            "mean_recall_compacted": round(sum(comp) / len(comp), 4) if comp else None,
            "micro_recall": round(hits / total, 4) if total else None,
            "files": len(vals),
        }
    kinds: dict[str, dict[str, list[int]]] = {}
    for r in rows:
        for m, res in r["methods"].items():
            for k, (a, b) in res["by_kind"].items():
                cell = kinds.setdefault(k, {}).setdefault(m, [0, 0])
                cell[0] += a
                cell[1] += b
    out["by_kind"] = {k: kinds[k] for k in sorted(kinds)}
    out["violations"] = sum(len(r.get("violations") or []) for r in rows)
    out["over_budget"] = [f"{r['file']} ({m})" for r in rows for m in METHODS
                          if m in r["methods"] and (r["methods"][m]["tokens"] or 0) > r["target"]]
    out["failed"] = [r["file"] for r in rows if r.get("error")]
    return out


# --- CLI --------------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fidelity", help="recall of key facts after compaction vs truncation and masking")
    p.add_argument("files", nargs="+", metavar="FILE", help="transcripts (any supported format) or directories")
    p.add_argument("--target-ratio", type=float, default=DEFAULT_RATIO,
                   help="target = max(--min-target, ratio x tokens) (default %(default)s)")
    p.add_argument("--min-target", type=int, default=DEFAULT_MIN_TARGET, help="(default %(default)s)")
    p.add_argument("--policy", default="default", help="policy preset for our compaction (default %(default)s)")
    p.add_argument("--keep-results", type=int, default=DEFAULT_KEEP_RESULTS,
                   help="tool results observation masking keeps (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print the full results as JSON")
    p.add_argument("--plot", metavar="PNG", help="write a bar chart of recall per file (needs matplotlib)")
    p.set_defaults(func=run)


def _expand(paths: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for s in paths:
        p = Path(s)
        if p.is_dir():
            out.extend(sorted(x for x in p.rglob("*") if x.is_file() and x.name.lower() != "readme.md"))
        else:
            out.append(p)
    return out


def run(args: argparse.Namespace) -> int:
    from compactor.cli.common import table
    from compactor.errors import InvalidInput
    from compactor.importers import import_file

    files = _expand(args.files)
    if not files:
        raise InvalidInput("no transcript files given; pass files or a directory such as ../shared/corpus")
    rows: list[dict[str, Any]] = []
    for path in files:
        res = import_file(path)
        rows.append(evaluate(res.events, ratio=args.target_ratio, min_target=args.min_target,
                             policy=args.policy, keep_results=args.keep_results, name=_label(path)))
    summary = summarize(rows)
    if args.plot:
        _plot(rows, args.plot)
    if args.json:
        print(json.dumps({"files": rows, "summary": summary}, indent=2))
        return 0
    print(render_table(rows, summary, table))
    if args.plot:
        print(f"\nplot written to {args.plot}")
    return 0


def _label(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else path.name


def render_table(rows: Sequence[dict[str, Any]], summary: dict[str, Any], table: Any) -> str:
    body = []
    for r in rows:
        ms = r["methods"]
        after = ms["ours"]["tokens"] if ms.get("ours", {}).get("tokens") is not None else "-"
        body.append([
            r["file"],
            f"{r['tokens']:,}",
            f"{r['target']:,}",
            f"{after:,}" if isinstance(after, int) else after,
            ",".join(r.get("layers") or []) or ("fits" if r["fits"] else "-"),
            "ERROR" if r.get("error") else (",".join(r.get("violations") or []) or "0"),
            r["facts"],
            *(f"{ms[m]['recall']:.2f}" + ("*" if ms[m].get("over_budget") else "") if m in ms else "-"
              for m in METHODS),
        ])
    out = table(body, ["file", "tokens", "target", "after", "layers", "violations", "facts",
                       "ours", "truncate", "mask"])
    lines = [out, ""]
    for m in METHODS:
        s = summary[m]
        if s["mean_recall"] is None:
            continue
        comp = s["mean_recall_compacted"]
        lines.append(f"mean recall {m:<8} {s['mean_recall']:.3f}  (micro {s['micro_recall']:.3f}"
                     + (f", files that needed compaction {comp:.3f})" if comp is not None else ")"))
    lines.append("")
    kind_rows = [[k, cells.get("ours", [0, 0])[1],
                  *(f"{cells[m][0]}/{cells[m][1]}" if m in cells else "-" for m in METHODS)]
                 for k, cells in summary["by_kind"].items()]
    lines.append(table(kind_rows, ["fact kind", "facts", *METHODS]))
    lines.append("")
    if summary["over_budget"]:
        lines.append("* view over its target: graded on what fits (pinned + newest events), as a "
                     "request at that budget would carry")
    lines.append(f"invariant violations (ours): {summary['violations']}; views over budget: "
                 + (", ".join(summary["over_budget"]) or "none"))
    for r in rows:
        if r.get("error"):
            lines.append(f"{r['file']}: our compaction failed: {r['error']}")
    return "\n".join(lines)


def _plot(rows: Sequence[dict[str, Any]], out: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install 'compactor[plot]' (skipping the chart)", file=sys.stderr)
        return
    names = [r["file"].split("/")[-1][:28] for r in rows]
    width = 0.27
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(rows) + 2), 4.8))
    for k, m in enumerate(METHODS):
        vals = [r["methods"].get(m, {}).get("recall", 0.0) for r in rows]
        ax.bar([i + (k - 1) * width for i in range(len(rows))], vals, width, label=m)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1.2)
    ax.set_ylabel("recall of key facts")
    ax.set_title("Fidelity at the same token budget")
    ax.legend(loc="upper center", ncol=len(METHODS), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
