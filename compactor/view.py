"""Build the view (what the next model request sees) from log events and a checkpoint. Pure."""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    render_artifact_ref,
)
from compactor.records import Checkpoint

SUMMARY_PREFIX = (
    "This session is being continued from an earlier conversation that ran out of context. "
    "The summary below covers the earlier part (events {start}-{end}); the messages after it "
    "are verbatim and newer, so a later user request there supersedes the summary's. The full "
    "log is kept and nothing was deleted.\n\n"
)


def summary_event(ckpt: Checkpoint) -> Event:
    """The synthetic user message that stands for the covered range in the view."""
    role = "user"
    if ckpt.native is not None:
        # The provider's compaction block is replayed verbatim as the first block of an
        # assistant turn at the very start of the conversation, where the API expects it.
        block = CompactionBlock(content=ckpt.summary, raw=ckpt.native)
        role = "assistant"
    else:
        text = SUMMARY_PREFIX.format(start=ckpt.covers.start, end=ckpt.covers.end) + ckpt.summary
        block = CompactionBlock(content=text)
    return Event(
        seq=0,
        id=f"checkpoint:{ckpt.id}",
        kind="compaction",
        role=role,
        blocks=[block],
        tokens=None,  # counted from its block (prefix included), like any event of the view
        meta={"checkpoint": ckpt.id, "covers": [ckpt.covers.start, ckpt.covers.end]},
    )


def build_view(events: Sequence[Event], ckpt: Checkpoint | None) -> list[Event]:
    """View = pinned events + summary (if any) + events after the checkpoint's range.

    ``events`` are all events of the log in seq order (or at least every pinned event and
    every event after the checkpoint).
    """
    if ckpt is None or ckpt.covers.empty:
        out = list(events)
        if ckpt is not None and ckpt.replacements:
            out = [_replace(e, ckpt) for e in out]
        return out
    end = ckpt.covers.end
    pinned = [e for e in events if e.kind == "pinned" and e.seq <= end]
    tail = [_replace(e, ckpt) for e in events if e.seq > end]
    return pinned + [summary_event(ckpt)] + _covered_results_as_text(tail, ckpt)


def _covered_results_as_text(tail: list[Event], ckpt: Checkpoint) -> list[Event]:
    """A tool_result whose call the summary covers (a late result of an abandoned call,
    appended after the checkpoint was committed) is shown as text naming the call, as
    ``engine.reconcile_checkpoint`` does during a merge: the Messages API rejects a
    tool_result without its tool_use. The log is untouched."""
    uses = {u.id for e in tail for u in e.tool_uses}
    if all(r.tool_use_id in uses for e in tail for r in e.tool_results):
        return tail
    names = {u.get("tool_use_id"): u.get("name") for u in (ckpt.state or {}).get("unknown_actions", []) or []}
    out: list[Event] = []
    for e in tail:
        if all(r.tool_use_id in uses for r in e.tool_results):
            out.append(e)
            continue
        blocks: list = []
        for b in e.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id not in uses:
                err = " (error)" if b.is_error else ""
                name = f" ({names[b.tool_use_id]})" if names.get(b.tool_use_id) else ""
                head = f"[result{err} of the earlier call {b.tool_use_id}{name}, which the summary covers]\n"
                blocks.append(TextBlock(text=head + b.text))
                blocks.extend(c for c in b.content if not isinstance(c, TextBlock))  # images, refs
            else:
                blocks.append(b)
        out.append(e.with_(blocks=blocks, tokens=None))
    return out


def _replace(e: Event, ckpt: Checkpoint) -> Event:
    blocks = ckpt.replacements.get(e.seq)
    if blocks is None:
        return e
    return e.with_(blocks=list(blocks), tokens=None)


def view_text(events: Iterable[Event]) -> str:
    """Readable plain-text rendering of a view, for the CLI."""
    lines: list[str] = []
    for e in events:
        tag = f"#{e.seq}" if e.seq else "#-"
        label = e.role if e.kind == "message" else f"{e.role}/{e.kind}"
        if e.injected:
            label += "/injected"
        lines.append(f"--- {tag} {label}")
        for b in e.blocks:
            if isinstance(b, TextBlock):
                lines.append(b.text)
            elif isinstance(b, CompactionBlock):
                lines.append(b.content)
            elif isinstance(b, ThinkingBlock):
                lines.append(f"(thinking) {b.thinking[:200]}")
            elif isinstance(b, ToolUseBlock):
                lines.append(f"[tool_use {b.id}] {b.name} {json.dumps(b.input)[:300]}")
            elif isinstance(b, ToolResultBlock):
                err = " ERROR" if b.is_error else ""
                lines.append(f"[tool_result {b.tool_use_id}{err}]")
                for c in b.content:
                    if isinstance(c, TextBlock):
                        lines.append(c.text)
                    elif isinstance(c, ArtifactRefBlock):
                        lines.append(render_artifact_ref(c))
            elif isinstance(b, ArtifactRefBlock):
                lines.append(render_artifact_ref(b))
    return "\n".join(lines)
