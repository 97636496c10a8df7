"""Plain OpenAI chat-completions message lists: ``[...]`` or ``{"messages": [...]}``.

``system``/``developer`` messages are pinned; assistant ``tool_calls`` become tool_use blocks
(arguments JSON parsed) and consecutive ``tool`` messages become the tool_result blocks of one
user event.
"""

from __future__ import annotations

from typing import Any

from compactor.errors import ParseError
from compactor.events import TextBlock, ToolUseBlock
from compactor.importers._common import (
    Source,
    ImportResult,
    as_text,
    image,
    load_json,
    parse_arguments,
    result_block,
    source_key,
)
from compactor.importers._drafts import Builder

FORMAT = "openai-messages"


def parse(src: Source, name: str) -> ImportResult:
    doc = load_json(src, name, FORMAT)
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list):
        raise ParseError(f"{name}: expected a list of messages or an object with 'messages'", name=name)
    b = Builder(FORMAT, source_key(src))
    prefix = f"openai-{b.key}"
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            b.skip(i + 1, f"message {i} is not an object")
            continue
        role = m.get("role")
        eid = f"{prefix}-{i}"
        meta: dict[str, Any] = {"index": i}
        if role in ("system", "developer"):
            txt = _text(m.get("content"))
            if txt:
                meta["source_role"] = role
                b.new("system", eid, kind="pinned", blocks=[TextBlock(text=txt)], meta=meta)
        elif role in ("tool", "function"):
            call_id = str(m.get("tool_call_id") or m.get("name") or "")
            b.add_result(result_block(call_id, _text(m.get("content")), False, meta), eid)
        elif role == "assistant":
            blocks: list[Any] = []
            txt = _text(m.get("content"))
            if txt:
                blocks.append(TextBlock(text=txt))
            for j, c in enumerate(m.get("tool_calls") or []):
                fn = c.get("function") or {}
                blocks.append(
                    ToolUseBlock(
                        id=str(c.get("id") or f"{eid}-call{j}"),
                        name=str(fn.get("name", "")),
                        input=parse_arguments(fn.get("arguments")),
                    )
                )
            fc = m.get("function_call")
            if isinstance(fc, dict):  # legacy single function call, paired by name
                blocks.append(
                    ToolUseBlock(
                        id=str(fc.get("name")),
                        name=str(fc.get("name")),
                        input=parse_arguments(fc.get("arguments")),
                    )
                )
            b.new("assistant", eid, blocks=blocks, meta=meta)
        elif role == "user":
            blocks = _user_blocks(m.get("content"), meta)
            b.new("user", eid, blocks=blocks, meta=meta)
        else:
            b.skip(i + 1, f"message {i} has unsupported role {role!r}")
    return b.finish()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return as_text(content)


def _user_blocks(content: Any, meta: dict[str, Any]) -> list[Any]:
    if not isinstance(content, list):
        txt = as_text(content)
        return [TextBlock(text=txt)] if txt else []
    out: list[Any] = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") in ("text", "input_text"):
            out.append(TextBlock(text=str(p.get("text", ""))))
        elif p.get("type") == "image_url":
            url = (p.get("image_url") or {}).get("url", "")
            if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
                head, data = url.split(";base64,", 1)
                out.append(image(head[5:], data, meta))
            else:
                out.append(TextBlock(text=f"[image {url}]"))
    return out
