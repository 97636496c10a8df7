"""Plain Anthropic Messages API lists: ``[...]`` or ``{"system": ..., "messages": [...]}``.

One event per message; the system prompt becomes a pinned event. There are no ids or
timestamps, so ids are ``anthropic-<key>-<index>`` with ``key`` a hash of the file's head.
"""

from __future__ import annotations

from typing import Any

from compactor.errors import ParseError
from compactor.events import CompactionBlock, TextBlock, ThinkingBlock, ToolUseBlock
from compactor.importers._common import (
    Source,
    ImportResult,
    as_text,
    image,
    load_json,
    result_block,
    source_key,
)
from compactor.importers._drafts import Builder

FORMAT = "anthropic-messages"


def parse(src: Source, name: str) -> ImportResult:
    doc = load_json(src, name, FORMAT)
    system: Any = None
    if isinstance(doc, dict):
        system = doc.get("system")
        messages = doc.get("messages")
    else:
        messages = doc
    if not isinstance(messages, list):
        raise ParseError(f"{name}: expected a list of messages or an object with 'messages'", name=name)
    b = Builder(FORMAT, source_key(src))
    prefix = f"anthropic-{b.key}"
    sys_text = as_text(system)
    if sys_text:
        b.new("system", f"{prefix}-system", kind="pinned", blocks=[TextBlock(text=sys_text)])
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            b.skip(i + 1, f"message {i} is not an object")
            continue
        role = m.get("role")
        meta: dict[str, Any] = {"index": i}
        if role not in ("user", "assistant"):
            b.skip(i + 1, f"message {i} has unsupported role {role!r}")
            continue
        blocks = _blocks(m.get("content"), meta)
        if role == "user" and blocks and all(isinstance(x, CompactionBlock) for x in blocks):
            b.new("user", f"{prefix}-{i}", kind="compaction", blocks=blocks, meta=meta)
            continue
        b.new(role, f"{prefix}-{i}", blocks=blocks, meta=meta)
    return b.finish()


def _blocks(content: Any, meta: dict[str, Any]) -> list[Any]:
    if isinstance(content, str):
        return [TextBlock(text=content)] if content else []
    out: list[Any] = []
    for p in content or []:
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t == "text":
            out.append(TextBlock(text=str(p.get("text", ""))))
        elif t == "thinking":
            out.append(ThinkingBlock(thinking=str(p.get("thinking", "")), signature=p.get("signature")))
        elif t == "redacted_thinking":
            out.append(ThinkingBlock(thinking="", signature=p.get("data")))
        elif t == "tool_use":
            inp = p.get("input")
            out.append(
                ToolUseBlock(
                    id=str(p.get("id")),
                    name=str(p.get("name", "")),
                    input=inp if isinstance(inp, dict) else {"input": inp},
                )
            )
        elif t == "tool_result":
            out.append(
                result_block(str(p.get("tool_use_id", "")), p.get("content"), bool(p.get("is_error")), meta)
            )
        elif t == "image":
            src = p.get("source") or {}
            out.append(image(src.get("media_type"), src.get("data"), meta))
        elif t == "compaction":
            out.append(CompactionBlock(content=str(p.get("content") or ""), raw=dict(p)))
        elif t == "document":
            out.append(TextBlock(text=as_text((p.get("source") or {}).get("data") or p.get("title") or "")))
    return out
