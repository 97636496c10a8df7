"""What ``compactor compact`` prints, whichever path ran (durable or inline)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MIN_TARGET = 8_000
TARGET_RATIO = 0.15


def default_target(tokens_before: int) -> int:
    """The benchmark's budget: 15% of the transcript, at least 8,000 tokens."""
    return max(MIN_TARGET, int(tokens_before * TARGET_RATIO))


def print_outcome(rec: Any, *, session: str, tenant: str | None, out: str | None, source: str | None,
                  fmt: str | None, workflow_id: str | None = None, store: str | None = None) -> None:
    """``compact --json``: one document, whichever path ran (shape in docs/cli.md)."""
    from compactor.cli.common import print_json

    print_json({
        "tenant": tenant, "session": session, "store": store, "source": source, "format": fmt,
        "workflow_id": workflow_id, "status": rec.status, "checkpoint": rec.checkpoint,
        "tokens_before": rec.tokens_before, "tokens_after": rec.tokens_after, "out": out,
        "record": rec.model_dump(mode="json"),
    })


def render_report(path: Path | str, fmt: str, rec: Any, out: str | None) -> str:
    covers = f"events {rec.covers.start}-{rec.covers.end}" if rec.covers and not rec.covers.empty else "none"
    freed = ", ".join(f"{k} {v:,}" for k, v in rec.freed_by_layer.items()) or "-"
    rows = [
        ["file" if fmt != "stored" else "session", f"{path} ({fmt})"],
        ["policy", rec.policy],
        ["tokens", f"{rec.tokens_before:,} -> {rec.tokens_after:,} (target {rec.target_tokens:,})"],
        ["layers", ", ".join(rec.layers) or "none"],
        ["freed", freed],
        ["covered", covers],
        ["summary", f"{rec.summary_tokens:,} tokens"],
        ["tail kept", f"{rec.retained_tail_tokens:,} tokens"],
        ["artifacts", str(rec.artifacts_written)],
        ["invariants", "ok" if not rec.violations else f"{len(rec.violations)} violated"],
        ["status", rec.status],
    ]
    if out:
        rows.append(["written", out])
    width = max(len(r[0]) for r in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    for v in rec.violations:
        lines.append(f"  ! {v}")
    if rec.fallback_reason:
        lines.append(f"  note: {rec.fallback_reason}")
    if rec.error:
        lines.append(f"  note: {rec.error}")
    return "\n".join(lines)
