"""``compactor plot SESSION``: the session's view size over its life, each compaction marked.

From the records only (no re-tokenizing): the log's tokens grow with every event; a committed
compaction at version ``v`` drops the view to its ``tokens_after``, and events after it add
on top; a rollback returns to the view of the checkpoint it names (or the whole log). Failed
and noop runs are marked where they were tried. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, Field

from compactor.cli.common import add_json_arg, add_session_args, open_log, print_json
from compactor.errors import InvalidInput

INSTALL_HINT = "compactor plot needs matplotlib: pip install 'compactor[plot]' (or: pip install matplotlib)"


class Mark(BaseModel):
    """One compaction (or rollback) on the plot."""

    seq: int = Field(description="Log version it took effect at (x).")
    status: str
    before: int
    after: int
    layers: list[str] = Field(default_factory=list)
    checkpoint: str | None = None


class Series(BaseModel):
    """The plot's data: view tokens and log tokens after each event, and the marks."""

    seqs: list[int] = Field(default_factory=list)
    view: list[int] = Field(default_factory=list)
    log: list[int] = Field(default_factory=list, description="Tokens with no compaction at all.")
    marks: list[Mark] = Field(default_factory=list)


def token_series(event_tokens: Iterable[tuple[int, int]], records: Sequence[Any]) -> Series:
    """Pure: ``(seq, tokens)`` per event (read once, in order) + compaction records -> the
    plot's series.

    A record takes effect at its ``committed_version`` (else ``snapshot_version``); ``view``
    after seq n is the last effective view size plus the tokens of the events since.
    """
    def at(r: Any) -> int:
        return r.committed_version or r.snapshot_version

    ordered = sorted(records, key=lambda r: (at(r), r.created_at or datetime.min.replace(tzinfo=timezone.utc)))
    after_ckpt: dict[str, int] = {}  # checkpoint -> view tokens right after it was committed
    out = Series()
    total = view = 0
    i = 0
    for seq, tok in event_tokens:
        total += tok
        view += tok
        while i < len(ordered) and at(ordered[i]) <= seq:
            r = ordered[i]
            i += 1
            if r.status == "committed" and r.tokens_after:
                after_ckpt[r.checkpoint or ""] = r.tokens_after
                # the record's own count (the rendered request, placeholders included) wins
                before = r.tokens_before or view
                out.marks.append(Mark(seq=seq, status=r.status, before=before, after=r.tokens_after,
                                      layers=list(r.layers), checkpoint=r.checkpoint))
                view = r.tokens_after
            elif r.status == "rolled_back":
                new = total if r.checkpoint is None else after_ckpt.get(r.checkpoint, view)
                out.marks.append(Mark(seq=seq, status=r.status, before=view, after=new, checkpoint=r.checkpoint))
                view = new
            elif r.status in ("failed", "noop"):
                out.marks.append(Mark(seq=seq, status=r.status, before=view, after=view, layers=list(r.layers)))
        out.seqs.append(seq)
        out.view.append(view)
        out.log.append(total)
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a session's tokens over its life, each compaction marked (PNG)")
    add_session_args(p)
    p.add_argument("--out", default=None, metavar="PNG", help="where to write the picture (default SESSION-tokens.png)")
    add_json_arg(p, "print the plotted series as JSON (shape in docs/cli.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from compactor import operator

    try:
        import matplotlib
    except ModuleNotFoundError:
        raise InvalidInput(INSTALL_HINT) from None
    matplotlib.use("Agg")  # files only: no display needed
    log = open_log(args)
    head = operator.require(log)
    # segment by segment: only each event's seq and tokens are kept (issue 17: the whole
    # decoded session was held, 734 MB at 300k small events)
    events = log.iter_events(1, head.version, head=head)
    series = token_series(((e.seq, e.tokens or 0) for e in events), log.list_records())
    out = args.out or f"{log.session}-tokens.png"
    draw(series, f"{log.tenant}/{log.session}", out)
    if args.json:
        print_json({"tenant": log.tenant, "session": log.session, "out": out, **series.model_dump(mode="json")})
    else:
        done = sum(1 for m in series.marks if m.status == "committed")
        print(f"wrote {out}: {len(series.seqs)} events, {done} compaction(s), "
              f"{len(series.marks) - done} other mark(s)", file=sys.stdout)
    return 0


def draw(series: Series, title: str, out: str) -> None:
    """Write the PNG: view tokens (solid), log tokens (dashed), a drop per compaction."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5), dpi=100)
    ax.plot(series.seqs, series.log, linestyle="--", color="0.6", label="log (no compaction)")
    ax.plot(series.seqs, series.view, color="tab:blue", label="view")
    styles = {"committed": ("v", "tab:green"), "rolled_back": ("^", "tab:orange"),
              "failed": ("x", "tab:red"), "noop": ("o", "0.4")}
    seen: set[str] = set()
    for m in series.marks:
        marker, color = styles.get(m.status, ("o", "k"))
        ax.vlines(m.seq, min(m.before, m.after), max(m.before, m.after), colors=color, linewidth=2)
        ax.plot([m.seq], [m.after], marker=marker, color=color, linestyle="none",
                label=None if m.status in seen else m.status.replace("_", " "))
        seen.add(m.status)
        label = f"{m.before:,}->{m.after:,}" + (f" [{','.join(m.layers)}]" if m.layers else "")
        ax.annotate(label, (m.seq, m.after), textcoords="offset points", xytext=(4, -12), fontsize=7, color=color)
    ax.set_xlabel("event (log version)")
    ax.set_ylabel("tokens")
    ax.set_title(f"{title}: view tokens over the session")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
