"""Gemini CLI chat recordings (``~/.gemini/tmp/<projectHash>/chats/session-*.json``).

One JSON object with ``messages[]``; a ``gemini`` message holds its tool calls *and* their
results (``toolCalls[].result``), so each call becomes a tool_use in the assistant event and
its result a tool_result in the user event that follows. ``info``/``error`` messages are
what the CLI printed, not conversation, and are left out.
"""

from __future__ import annotations

from typing import Any

from compactor.errors import ParseError
from compactor.events import TextBlock, ThinkingBlock, ToolUseBlock
from compactor.importers._common import (
    Source,
    ImportResult,
    as_text,
    load_json,
    parse_time,
    result_block,
    source_key,
    usage_of,
)
from compactor.importers._drafts import Builder

FORMAT = "gemini-chat"


def parse(src: Source, name: str) -> ImportResult:
    doc = load_json(src, name, FORMAT)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise ParseError(f"{name}: a Gemini CLI chat file needs a 'messages' list", name=name)
    b = Builder(FORMAT, str(doc.get("sessionId") or source_key(src)))
    prefix = f"gemini-{b.key}"
    for i, m in enumerate(doc["messages"]):
        if not isinstance(m, dict):
            continue
        typ = m.get("type")
        at = parse_time(m.get("timestamp"))
        eid = f"{prefix}-{m.get('id') or i}"
        meta: dict[str, Any] = {"index": i}
        content = as_text(m.get("content"))
        if typ == "user":
            if content:
                b.new("user", eid, at=at, blocks=[TextBlock(text=content)], meta=meta)
            continue
        if typ != "gemini":
            continue
        blocks: list[Any] = []
        for th in m.get("thoughts") or []:
            if isinstance(th, dict):
                subj, desc = th.get("subject"), th.get("description")
                blocks.append(ThinkingBlock(thinking="\n".join(str(x) for x in (subj, desc) if x)))
        if content:
            blocks.append(TextBlock(text=content))
        calls = [c for c in m.get("toolCalls") or [] if isinstance(c, dict)]
        for j, c in enumerate(calls):
            args = c.get("args")
            blocks.append(
                ToolUseBlock(
                    id=str(c.get("id") or f"{eid}-call{j}"),
                    name=str(c.get("name", "")),
                    input=args if isinstance(args, dict) else {"input": args},
                )
            )
        tok = m.get("tokens") or {}
        cached = int(tok.get("cached") or 0)
        usage = usage_of(max(0, int(tok.get("input") or 0) - cached), tok.get("output"), cached, 0)
        if m.get("model"):
            meta["model"] = m["model"]
        if tok.get("thoughts"):
            meta["thought_tokens"] = tok["thoughts"]
        b.new("assistant", eid, at=at, blocks=blocks, usage=usage, meta=meta)
        for j, c in enumerate(calls):
            res = _result_text(c)
            if res is None:
                continue  # no result recorded: the call stays unresolved
            text, is_error = res
            b.add_result(
                result_block(str(c.get("id") or f"{eid}-call{j}"), text, is_error, meta),
                f"{eid}-results",
                parse_time(c.get("timestamp")) or at,
            )
    return b.finish()


def _result_text(call: dict[str, Any]) -> tuple[str, bool] | None:
    status = call.get("status")
    is_error = status == "error"
    result = call.get("result")
    if isinstance(result, list) and result:
        texts = []
        for part in result:
            if not isinstance(part, dict):
                continue
            fr = part.get("functionResponse")
            if isinstance(fr, dict):
                resp = fr.get("response") or {}
                if isinstance(resp, dict) and ("output" in resp or "error" in resp):
                    if resp.get("error"):
                        is_error = True
                    texts.append(as_text(resp.get("output") if "output" in resp else resp.get("error")))
                else:
                    texts.append(as_text(resp))
            elif "text" in part:
                texts.append(str(part["text"]))
        return "\n".join(t for t in texts if t), is_error
    if status in ("success", "error", "cancelled"):
        display = call.get("resultDisplay")
        return (
            display if isinstance(display, str) else as_text(display)
        ) or f"[{status}]", is_error or status == "cancelled"
    return None
