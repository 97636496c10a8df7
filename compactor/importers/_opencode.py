"""OpenCode exports (``opencode export`` JSON: ``info`` + ``messages[]`` with ``parts[]``).

A ``tool`` part holds both the call and its result; it becomes a tool_use in the assistant
event and, once the call finished (``completed``/``error``), a tool_result in the user event
after it. A call still ``running``/``pending`` stays unresolved. ``step-start`` splits an
assistant message into one event per model request; ``step-finish`` carries its usage.
"""

from __future__ import annotations

from typing import Any

from compactor.errors import ParseError
from compactor.events import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
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

FORMAT = "opencode"


def parse(src: Source, name: str) -> ImportResult:
    doc = load_json(src, name, FORMAT)
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise ParseError(f"{name}: an OpenCode export needs a 'messages' list", name=name)
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    b = Builder(FORMAT, str(info.get("id") or source_key(src)))
    prefix = f"opencode-{b.key}"
    for i, m in enumerate(doc["messages"]):
        if not isinstance(m, dict):
            continue
        mi = m.get("info") if isinstance(m.get("info"), dict) else {}
        role = mi.get("role")
        mid = str(mi.get("id") or i)
        at = parse_time((mi.get("time") or {}).get("created"))
        parts = [p for p in m.get("parts") or [] if isinstance(p, dict)]
        meta: dict[str, Any] = {"message_id": mid}
        for k in ("modelID", "providerID", "agent", "mode", "finish"):
            if mi.get(k):
                meta[k] = mi[k]
        if role == "user":
            _user(b, parts, f"{prefix}-{mid}", at, meta)
        elif role == "assistant":
            _assistant(b, parts, f"{prefix}-{mid}", at, meta, mi.get("tokens"))
    return b.finish()


def _user(b: Builder, parts: list[dict[str, Any]], eid: str, at: Any, meta: dict[str, Any]) -> None:
    typed: list[TextBlock] = []
    synthetic: list[TextBlock] = []
    for p in parts:
        if p.get("type") == "text" and p.get("text"):
            (synthetic if p.get("synthetic") else typed).append(TextBlock(text=str(p["text"])))
        elif p.get("type") == "file":
            synthetic.append(TextBlock(text=f"[file {p.get('filename') or p.get('url') or ''}]"))
    if typed:
        b.new("user", eid, at=at, blocks=typed, meta=meta)
    if synthetic:
        # text OpenCode added itself (file contents, tool replays): context, not the human
        b.new("user", f"{eid}-context", at=at, injected=True, blocks=synthetic, meta=meta)


def _assistant(
    b: Builder,
    parts: list[dict[str, Any]],
    eid: str,
    at: Any,
    meta: dict[str, Any],
    tokens: Any,
) -> None:
    step = 0
    blocks: list[Any] = []
    results: list[ToolResultBlock] = []
    step_usage = None
    last_usage = None

    def flush() -> None:
        nonlocal blocks, results, step_usage, last_usage
        if blocks:
            sid = eid if step <= 1 else f"{eid}-s{step}"
            d = b.new("assistant", sid, at=at, blocks=blocks, usage=step_usage, meta={**meta, "step": step})
            last_usage = d
        for r in results:
            b.add_result(r, f"{eid}-s{step}-results", at)
        blocks, results, step_usage = [], [], None

    for p in parts:
        t = p.get("type")
        if t == "step-start":
            flush()
            step += 1
        elif t == "step-finish":
            step_usage = _usage(p.get("tokens"))
        elif t == "text" and p.get("text"):
            blocks.append(TextBlock(text=str(p["text"])))
        elif t == "reasoning" and p.get("text"):
            blocks.append(ThinkingBlock(thinking=str(p["text"])))
        elif t == "tool":
            state = p.get("state") if isinstance(p.get("state"), dict) else {}
            call_id = str(p.get("callID") or p.get("id"))
            inp = state.get("input")
            blocks.append(
                ToolUseBlock(
                    id=call_id, name=str(p.get("tool", "")), input=inp if isinstance(inp, dict) else {}
                )
            )
            status = state.get("status")
            if status == "completed":
                results.append(result_block(call_id, as_text(state.get("output")), False, meta))
            elif status == "error":
                results.append(
                    result_block(call_id, as_text(state.get("error") or state.get("output")), True, meta)
                )
    flush()
    if last_usage is not None and last_usage.usage is None and step <= 1:
        last_usage.usage = _usage(tokens)


def _usage(tokens: Any):
    if not isinstance(tokens, dict):
        return None
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    return usage_of(tokens.get("input"), tokens.get("output"), cache.get("read"), cache.get("write"))
