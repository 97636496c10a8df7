"""Plain-text rendering of events for blind probes (``../shared/probes``' format).

Lines start ``[user]``, ``[assistant]``, ``[assistant tool call ID] NAME INPUT`` and
``[tool result ID] OUTPUT``; pinned instructions are ``[system]``. The same renderer serves the
full transcript (for the question writer) and each compacted view (for the readers), so a
reader of a view sees exactly what the next model request would carry, in the same shape.
"""

from __future__ import annotations

import json
from typing import Iterable

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    render_artifact_ref,
)


def _result_text(b: ToolResultBlock) -> str:
    parts: list[str] = []
    for c in b.content:
        if isinstance(c, TextBlock):
            parts.append(c.text)
        elif isinstance(c, ArtifactRefBlock):
            parts.append(render_artifact_ref(c))
        elif isinstance(c, ImageBlock):
            parts.append("[image]")
    return "\n".join(parts)


def probe_text(events: Iterable[Event], *, max_result_chars: int | None = None) -> str:
    """Render ``events`` as the probe protocol's plain text.

    Args:
        events: a transcript or a view, in order.
        max_result_chars: clip each tool result to this many characters (head and tail kept),
            for writers paging through very long transcripts; ``None`` keeps everything.
    """
    out: list[str] = []
    for e in events:
        role = "system" if e.kind == "pinned" else e.role
        for b in e.blocks:
            if isinstance(b, TextBlock):
                if b.text.strip():
                    out.append(f"[{role}] {b.text}")
            elif isinstance(b, CompactionBlock):
                out.append(f"[{role}] {b.content}")
            elif isinstance(b, ThinkingBlock):
                continue  # not sent back to the model as text
            elif isinstance(b, ToolUseBlock):
                out.append(f"[assistant tool call {b.id}] {b.name} "
                           f"{json.dumps(b.input, ensure_ascii=False)}")
            elif isinstance(b, ToolResultBlock):
                text = _result_text(b)
                if max_result_chars is not None and len(text) > max_result_chars:
                    half = max_result_chars // 2
                    text = (text[:half] + f"\n[... {len(text) - 2 * half} characters clipped ...]\n"
                            + text[-half:])
                err = " (error)" if b.is_error else ""
                out.append(f"[tool result {b.tool_use_id}]{err} {text}")
            elif isinstance(b, ArtifactRefBlock):
                out.append(f"[{role}] {render_artifact_ref(b)}")
            elif isinstance(b, ImageBlock):
                out.append(f"[{role}] [image]")
    return "\n".join(out) + "\n"
