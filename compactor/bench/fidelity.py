"""``compactor bench fidelity``: does a continuing agent still know what it needs?

For each transcript (files, and with ``--synthetic N`` generated sessions from
``compactor.bench.synthetic``) and each ratio of ``--ratios``: import it, extract key facts
from the ORIGINAL events with the independent extractor in ``compactor.bench.facts``, then
build three views at the same token target ``max(--min-target, ratio x tokens)``:

- ``ours``: ``compactor.engine.compact.compact`` (layers + lifted-state summary + verbatim tail);
- ``truncate``: pinned events + the newest events that fit, never starting inside a tool
  pair (a tool_result whose tool_use was cut is dropped with it);
- ``mask``: observation masking (every tool result but the newest ``--keep-results`` is
  replaced by a short placeholder), then truncated the same way if still over.

Every size is the engine's own budget measure, ``measure.view_tokens`` (the rendered
Anthropic request), so "fits its target" means the same for the three methods. A fact is
recalled when the view carries it by the rule of its kind (``facts.recalled``). A view over
its target is graded on the part that fits (pinned + newest events, whole tool pairs), since
a request at that budget could not carry more. The report gives, per ratio: per file tokens
before and after, the layers our compaction used, invariant violations, state items our
summary left out for space, whether each view fits, and recall per method; then mean recall,
recall per category and per fact kind, and the count of views that fit.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

from compactor.bench.facts import KINDS, Fact, Haystack, extract_facts, recall, recalled, view_haystack
from compactor.events import Event, TextBlock, ToolResultBlock
from compactor.engine.measure import view_tokens
from compactor.tokens import count_event, with_tokens

METHODS = ("ours", "truncate", "mask")
DEFAULT_RATIOS = (0.15, 0.05)
DEFAULT_MIN_TARGET = 3_000
DEFAULT_KEEP_RESULTS = 10
MASK_PLACEHOLDER = "[old tool output omitted]"
CATEGORIES: dict[str, tuple[str, ...]] = {
    "requests": ("first_request", "latest_request"),
    "constraints": ("constraint",),
    "links": ("user_url",),
    "files": ("file_changed",),
    "errors": ("error", "error_cause", "resolution"),
    "tests": ("failed_test", "last_test"),
    "outcomes": ("turn_outcome",),
    "pending": ("pending_call",),
    "artifacts": ("constant", "data_file"),
}
"""Fact kinds grouped into what a continuing agent must know; every kind is in one category."""
assert sorted(k for ks in CATEGORIES.values() for k in ks) == sorted(KINDS)

_LEFT_OUT_MORE = re.compile(r"\((\d+) more not shown for space")
_LEFT_OUT_GONE = re.compile(r"\(Not shown for space, in the full log: ([^)]*)\)")


# --- baselines --------------------------------------------------------------------------------


def _pair_safe_start(rest: Sequence[Event], start: int) -> int:
    """Move ``start`` past leading events whose tool results lost their tool_use."""
    while True:
        kept_uses = {u.id for e in rest[start:] for u in e.tool_uses}
        bad = next((i for i in range(start, len(rest))
                    if any(r.tool_use_id not in kept_uses for r in rest[i].tool_results)), None)
        if bad is None:
            return start
        start = bad + 1


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
    start = _pair_safe_start(rest, start)
    # per-event counts only estimate the rendered request: drop more until it really fits
    while start < len(rest):
        over = view_tokens(pinned + rest[start:]) - target
        if over <= 0:
            break
        freed = 0
        while start < len(rest) and freed < over:
            freed += count_event(rest[start])
            start += 1
        start = _pair_safe_start(rest, start)
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
    if view_tokens(out) > target:
        out = truncate_view(out, target)
    return out


# --- one transcript ---------------------------------------------------------------------------


def left_out(record: Any, view: Sequence[Event]) -> dict[str, int]:
    """State items our summary left out for space: ``record.left_out`` when the engine
    reports it, else the counts the summary's own notes state."""
    given = getattr(record, "left_out", None)
    if isinstance(given, dict):
        return {str(k): int(v) for k, v in given.items() if v}
    out: dict[str, int] = {}
    text = view_haystack(view)
    more = sum(int(n) for n in _LEFT_OUT_MORE.findall(text))
    if more:
        out["(more not shown)"] = more
    for listing in _LEFT_OUT_GONE.findall(text):
        for part in listing.rstrip(".").split(","):
            m = re.match(r"\s*(.*?)\s+(\d+)\s*$", part)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def _ours(events: list[Event], target: int, policy_name: str) -> dict[str, Any]:
    from compactor.engine.compact import compact
    from compactor.engine.policy import make_policy

    policy = make_policy(policy_name)
    res = compact(events, policy, target_tokens=target)
    violations: list[str] = []
    try:
        from compactor.engine.invariants import validate
    except ImportError:
        violations = ["(validator not available)"]
    else:
        vs = validate(events=events, checkpoint=res.checkpoint, view=res.view, target_tokens=target,
                      artifacts=res.artifacts)
        violations = [v.code for v in vs]
    return {"view": res.view, "layers": list(res.record.layers), "violations": violations,
            "left_out": left_out(res.record, res.view)}


def target_for(tokens: int, ratio: float, min_target: int) -> int:
    """The token target a transcript of ``tokens`` is compacted to at ``ratio``."""
    return max(min_target, int(ratio * tokens))


def evaluate(events: Sequence[Event], *, ratio: float = DEFAULT_RATIOS[0],
             min_target: int = DEFAULT_MIN_TARGET, policy: str = "default",
             keep_results: int = DEFAULT_KEEP_RESULTS, name: str = "",
             facts: Sequence[Fact] | None = None) -> dict[str, Any]:
    """Run the three methods on one transcript at one ratio and grade them; a JSON-safe dict."""
    evs = with_tokens(events)
    tokens = view_tokens(evs)
    target = target_for(tokens, ratio, min_target)
    facts = list(facts) if facts is not None else extract_facts(evs)
    row: dict[str, Any] = {"file": name, "ratio": ratio, "events": len(evs), "tokens": tokens,
                           "target": target, "facts": len(facts), "fits": tokens <= target,
                           "pinned_tokens": view_tokens([e for e in evs if e.kind == "pinned"]),
                           "left_out": {}}
    views: dict[str, list[Event]] = {}
    try:
        ours = _ours(evs, target, policy)
        views["ours"] = ours["view"]
        row["layers"] = ours["layers"]
        row["violations"] = ours["violations"]
        row["left_out"] = ours["left_out"]
    except Exception as exc:  # noqa: BLE001 - reported per file, the run goes on
        row["layers"] = []
        row["violations"] = []
        row["error"] = f"{type(exc).__name__}: {exc}"
    views["truncate"] = truncate_view(evs, target)
    views["mask"] = mask_view(evs, target, keep_results)
    row["methods"] = {}
    if "ours" not in views:
        # a failed compaction recalls nothing and fits nothing: count it, do not leave it out
        row["methods"]["ours"] = {"tokens": None, "fits_target": False, "over_budget": True,
                                  "recall": 0.0, "recall_unbounded": 0.0,
                                  "by_kind": {k: [0, b] for k, b in _kind_totals(facts).items()},
                                  "missed": [f.model_dump() for f in facts][:50]}
    for m in METHODS:
        if m in views:
            row["methods"][m] = grade(facts, views[m], target)
    return row


def grade(facts: Sequence[Fact], view: Sequence[Event], target: int) -> dict[str, Any]:
    """One view's size, fit and recall; a view over ``target`` is graded on what fits."""
    size = view_tokens(view)
    hay = Haystack(view_haystack(view))
    raw, per = recall(facts, hay)
    r = raw
    over = size > target
    if over:
        # A view over budget would not be sent as is: grade what fits, newest first.
        view = truncate_view(view, target)
        hay = Haystack(view_haystack(view))
        r, per = recall(facts, hay)
    return {
        "tokens": size,
        "fits_target": not over,
        "over_budget": over,
        "recall": round(r, 4),
        "recall_unbounded": round(raw, 4),
        "by_kind": {k: list(v) for k, v in sorted(per.items())},
        "missed": [f.model_dump() for f in facts if not recalled(f, hay)][:50],
    }


def _kind_totals(facts: Sequence[Fact]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in facts:
        out[f.kind] = out.get(f.kind, 0) + 1
    return out


def _ratio_of(cells: Sequence[int]) -> float | None:
    return round(cells[0] / cells[1], 4) if cells[1] else None


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means, per-kind and per-category recall, fits and left-out counts over ``rows``."""
    out: dict[str, Any] = {}
    for m in METHODS:
        ms = [r["methods"][m] for r in rows if m in r["methods"]]
        vals = [x["recall"] for x in ms]
        comp = [r["methods"][m]["recall"] for r in rows if m in r["methods"] and not r["fits"]]
        # a target below the pinned events alone is met by no method: reported, not averaged in
        feasible = [r["methods"][m]["recall"] for r in rows
                    if m in r["methods"] and r.get("pinned_tokens", 0) <= r["target"]]
        hits = sum(sum(a for a, _ in x["by_kind"].values()) for x in ms)
        total = sum(sum(b for _, b in x["by_kind"].values()) for x in ms)
        out[m] = {
            "mean_recall": round(sum(vals) / len(vals), 4) if vals else None,
            "mean_recall_compacted": round(sum(comp) / len(comp), 4) if comp else None,
            "mean_recall_feasible": round(sum(feasible) / len(feasible), 4) if feasible else None,
            "feasible_files": len(feasible),
            "micro_recall": round(hits / total, 4) if total else None,
            "files": len(vals),
            "views_fit": sum(bool(x["fits_target"]) for x in ms),
        }
    kinds: dict[str, dict[str, list[int]]] = {}
    for r in rows:
        for m, res in r["methods"].items():
            for k, (a, b) in res["by_kind"].items():
                cell = kinds.setdefault(k, {}).setdefault(m, [0, 0])
                cell[0] += a
                cell[1] += b
    out["by_kind"] = {k: kinds[k] for k in sorted(kinds)}
    cats: dict[str, dict[str, Any]] = {}
    for cat, ks in CATEGORIES.items():
        cells = {m: [sum(kinds.get(k, {}).get(m, [0, 0])[0] for k in ks),
                     sum(kinds.get(k, {}).get(m, [0, 0])[1] for k in ks)] for m in METHODS}
        if any(c[1] for c in cells.values()):
            cats[cat] = {m: {"recalled": c[0], "facts": c[1], "recall": _ratio_of(c)} for m, c in cells.items()}
    out["by_category"] = cats
    out["views"] = sum(len(r["methods"]) for r in rows)
    out["views_fit"] = sum(bool(x["fits_target"]) for r in rows for x in r["methods"].values())
    out["left_out"] = sum(sum(r.get("left_out", {}).values()) for r in rows)
    out["violations"] = sum(len(r.get("violations") or []) for r in rows)
    out["over_budget"] = [f"{r['file']} ({m})" for r in rows for m in METHODS
                          if m in r["methods"] and not r["methods"][m]["fits_target"]]
    out["failed"] = [r["file"] for r in rows if r.get("error")]
    return out


# --- CLI --------------------------------------------------------------------------------------


def _ratios(text: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ratios takes numbers like 0.15,0.05, not {text!r}") from None
    if not vals or any(not 0 < v <= 1 for v in vals):
        raise argparse.ArgumentTypeError(f"--ratios must be fractions in (0, 1], got {text!r}")
    return vals


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fidelity", help="recall of key facts after compaction vs truncation and masking")
    p.add_argument("files", nargs="*", metavar="FILE", help="transcripts (any supported format) or directories")
    p.add_argument("--ratios", type=_ratios, default=list(DEFAULT_RATIOS), metavar="R[,R...]",
                   help="target = max(--min-target, R x tokens), one run per R (default 0.15,0.05)")
    p.add_argument("--target-ratio", type=float, default=None, help="one ratio (same as --ratios R)")
    p.add_argument("--min-target", type=int, default=DEFAULT_MIN_TARGET, help="(default %(default)s)")
    p.add_argument("--synthetic", type=int, default=0, metavar="N",
                   help="also grade N generated sessions (long turns, heredoc file writes; default 0)")
    p.add_argument("--seed", type=int, default=0, help="first seed of the synthetic sessions (default 0)")
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


def sessions(args: argparse.Namespace) -> list[tuple[str, list[Event]]]:
    """(label, events) for every file and synthetic session the arguments name."""
    from compactor.bench.synthetic import synthetic_sessions
    from compactor.errors import InvalidInput
    from compactor.importers import import_file

    files = _expand(args.files)
    if not files and not args.synthetic:
        raise InvalidInput("no transcripts given; pass files or a directory such as ../shared/corpus, "
                           "or --synthetic N")
    out = [(_label(path), import_file(path).events) for path in files]
    out += list(synthetic_sessions(args.synthetic, seed=args.seed))
    return out


def bench(named: Sequence[tuple[str, Sequence[Event]]], ratios: Sequence[float], *,
          min_target: int = DEFAULT_MIN_TARGET, policy: str = "default",
          keep_results: int = DEFAULT_KEEP_RESULTS) -> dict[str, Any]:
    """The whole report: one run (rows + summary) per ratio, and the views that fit overall."""
    prepared = [(name, with_tokens(evs)) for name, evs in named]
    facts = {name: extract_facts(evs) for name, evs in prepared}  # once, not once per ratio
    runs = []
    for ratio in ratios:
        rows = [evaluate(evs, ratio=ratio, min_target=min_target, policy=policy,
                         keep_results=keep_results, name=name, facts=facts[name]) for name, evs in prepared]
        runs.append({"ratio": ratio, "min_target": min_target, "files": rows, "summary": summarize(rows)})
    return {"runs": runs,
            "views": sum(r["summary"]["views"] for r in runs),
            "views_fit": sum(r["summary"]["views_fit"] for r in runs)}


def run(args: argparse.Namespace) -> int:
    from compactor.cli.common import table

    ratios = [args.target_ratio] if args.target_ratio is not None else args.ratios
    report = bench(sessions(args), ratios, min_target=args.min_target, policy=args.policy,
                   keep_results=args.keep_results)
    plotted = bool(args.plot) and _plot(report["runs"], args.plot)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for r in report["runs"]:
        print(f"== target = max({r['min_target']:,}, {r['ratio']:g} x tokens) ==\n")
        print(render_table(r["files"], r["summary"], table))
        print()
    print(f"views that fit their target: {report['views_fit']}/{report['views']}")
    if plotted:
        print(f"\nplot written to {args.plot}")
    return 0


def _label(path: Path) -> str:
    parts = path.parts
    return "/".join(parts[-2:]) if len(parts) >= 2 else path.name


def _cell(res: dict[str, Any] | None) -> str:
    if res is None:
        return "-"
    return f"{res['recall']:.2f}" + ("" if res["fits_target"] else "*")


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
            sum(r.get("left_out", {}).values()),
            r["facts"],
            *(_cell(ms.get(m)) for m in METHODS),
        ])
    out = table(body, ["file", "tokens", "target", "after", "layers", "violations", "left out",
                       "facts", "ours", "truncate", "mask"])
    lines = [out, ""]
    for m in METHODS:
        s = summary[m]
        if s["mean_recall"] is None:
            continue
        comp = s["mean_recall_compacted"]
        lines.append(f"mean recall {m:<8} {s['mean_recall']:.3f}  (micro {s['micro_recall']:.3f}"
                     + (f", files that needed compaction {comp:.3f}" if comp is not None else "")
                     + (f", feasible targets {s['mean_recall_feasible']:.3f} over {s['feasible_files']}"
                        if s.get("mean_recall_feasible") is not None and s["feasible_files"] < s["files"] else "")
                     + f"; views that fit {s['views_fit']}/{s['files']})")
    lines.append("")
    cat_rows = [[c, cells["ours"]["facts"],
                 *(f"{cells[m]['recalled']}/{cells[m]['facts']} ({cells[m]['recall']:.2f})" for m in METHODS)]
                for c, cells in summary["by_category"].items()]
    lines.append(table(cat_rows, ["category", "facts", *METHODS]))
    lines.append("")
    kind_rows = [[k, cells.get("ours", [0, 0])[1],
                  *(f"{cells[m][0]}/{cells[m][1]}" if m in cells else "-" for m in METHODS)]
                 for k, cells in summary["by_kind"].items()]
    lines.append(table(kind_rows, ["fact kind", "facts", *METHODS]))
    lines.append("")
    if summary["over_budget"]:
        lines.append("* view over its target: graded on what fits (pinned + newest events), as a "
                     "request at that budget would carry")
    lines.append(f"views that fit: {summary['views_fit']}/{summary['views']}; state items left out for "
                 f"space (ours): {summary['left_out']}; invariant violations (ours): {summary['violations']}")
    lines.append("views over budget: " + (", ".join(summary["over_budget"]) or "none"))
    for r in rows:
        if r.get("error"):
            lines.append(f"{r['file']}: our compaction failed: {r['error']}")
        if r.get("pinned_tokens", 0) > r["target"]:
            lines.append(f"{r['file']}: its pinned events alone are {r['pinned_tokens']:,} tokens, over the "
                         f"{r['target']:,} target: no method that keeps them verbatim can fit")
    return "\n".join(lines)


def _plot(runs: Sequence[dict[str, Any]], out: str) -> bool:
    """One bar chart panel per ratio: recall per file and method; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("--plot needs matplotlib: pip install 'compactor[plot]' (skipping the chart)", file=sys.stderr)
        return False
    rows0 = runs[0]["files"] if runs else []
    fig, axes = plt.subplots(len(runs), 1, figsize=(max(8, 1.1 * len(rows0) + 2), 4.2 * len(runs)),
                             squeeze=False)
    width = 0.27
    for ax, r in zip(axes[:, 0], runs):
        rows = r["files"]
        names = [x["file"].split("/")[-1][:28] for x in rows]
        for k, m in enumerate(METHODS):
            vals = [x["methods"].get(m, {}).get("recall", 0.0) for x in rows]
            ax.bar([i + (k - 1) * width for i in range(len(rows))], vals, width, label=m)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_ylim(0, 1.2)
        ax.set_ylabel("recall of key facts")
        ax.set_title(f"Fidelity at the same token budget: max({r.get('min_target', 0):,}, "
                     f"{r.get('ratio', 0):g} x tokens)")
        ax.legend(loc="upper center", ncol=len(METHODS), frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True
