"""Tool outputs over the inline size limit: moved to the artifact store (the event keeps an
``artifact_ref`` block with previews) or, without a store, cut to head + tail with a marker.
Each case is listed in the import's result (``Truncation``) and counted in its stats.
"""

from __future__ import annotations

from typing import Any

from compactor.events import Event, TextBlock, ToolResultBlock
from compactor.importers._common import ImportResult, Spill, Truncation


def bound_tool_outputs(result: ImportResult, limit: int, spill: Spill | None) -> ImportResult:
    """Tool-output text over ``limit`` bytes: to the artifact store through ``spill`` (the event
    keeps an artifact_ref block with previews), or without a store cut to head + tail with a
    marker. Each case is listed in ``result.truncated`` and counted in the stats."""
    truncs: list[Truncation] = []
    events = [bound_event(e, limit, spill, truncs) for e in result.events]
    if not truncs:
        return result
    return with_truncations(result.model_copy(update={"events": events}), truncs)


def bound_event(e: Event, limit: int, spill: Spill | None, truncs: list[Truncation]) -> Event:
    """``bound_tool_outputs`` of one event (the same event when nothing is over the limit)."""
    for b in e.blocks:
        if type(b) is not TextBlock and isinstance(b, ToolResultBlock) and _any_over(b, limit):
            break
    else:
        return e  # no tool output over the limit in it: nothing to change
    blocks = [_bound_result(b, limit, spill, truncs) if isinstance(b, ToolResultBlock) else b for b in e.blocks]
    changed = any(n is not o for n, o in zip(blocks, e.blocks))
    return e.with_(blocks=blocks) if changed else e


def with_truncations(result: ImportResult, truncs: list[Truncation]) -> ImportResult:
    """``result`` listing ``truncs`` and counting them in its stats."""
    if not truncs:
        return result
    stats = dict(result.stats)
    stats["tool_outputs_to_artifacts"] = sum(1 for t in truncs if t.artifact)
    stats["tool_outputs_truncated"] = sum(1 for t in truncs if not t.artifact)
    return result.model_copy(update={"truncated": truncs, "stats": stats})


def _any_over(b: ToolResultBlock, limit: int) -> bool:
    """A text of ``b`` that ``_bound_result`` moves or cuts."""
    for c in b.content:
        if isinstance(c, TextBlock) and len(c.text) * 4 > limit and _over(c.text, limit):
            return True
    return False


def _over(text: str, limit: int) -> bool:
    if len(text) > limit:
        return True  # at least one byte per character
    if len(text) * 4 <= limit:
        return False  # at most four
    return len(text.encode("utf-8", "replace")) > limit


def _bound_result(b: ToolResultBlock, limit: int, spill: Spill | None, truncs: list[Truncation]) -> ToolResultBlock:
    content: list[Any] = []
    for c in b.content:
        if isinstance(c, TextBlock) and _over(c.text, limit):
            data = c.text.encode("utf-8", "replace")
            if spill is not None:
                ref = spill(data)
                truncs.append(Truncation(tool_use_id=b.tool_use_id, bytes=len(data), kept_bytes=0, artifact=ref.uri))
                content.append(ref)
            else:
                text, kept = cut_text(data, limit)
                truncs.append(Truncation(tool_use_id=b.tool_use_id, bytes=len(data), kept_bytes=kept))
                content.append(TextBlock(text=text))
            del data
        else:
            content.append(c)
    if all(n is o for n, o in zip(content, b.content)):
        return b
    return b.model_copy(update={"content": content})


def cut_text(data: bytes, limit: int) -> tuple[str, int]:
    """Head + marker + tail of ``data`` within about ``limit`` bytes; (text, bytes kept)."""
    half = max(limit // 2, 1)
    # "ignore" drops a character split by the cut, so both halves stay valid UTF-8
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    kept = len(head.encode()) + len(tail.encode())
    return f"{head}\n[... {len(data) - kept:,} bytes truncated at import ...]\n{tail}", kept
