"""pi coding agent sessions (pi-mono session format v3, JSONL tree of entries).

Entries are read in file order along the active branch (a session is a tree; a branch the
user abandoned is left out and counted in ``stats["off_branch_entries"]``). ``message``
entries carry the conversation (user, assistant with ``toolCall`` blocks, ``toolResult``);
``compaction`` entries are the agent's own summaries and become compaction events;
``custom_message`` entries are context the harness injected. Lines broken by invalid
escapes are repaired where possible (see iter_jsonl).
"""

from __future__ import annotations

from typing import Any

from compactor.events import CompactionBlock, TextBlock, ThinkingBlock, ToolUseBlock
from compactor.importers._common import (
    Source,
    ImportResult,
    as_text,
    image,
    CURRENT_LINE,
    iter_jsonl,
    parse_time,
    result_block,
    source_key,
    usage_of,
)
from compactor.importers._drafts import Builder

FORMAT = "pi"


def parse(src: Source, name: str) -> ImportResult:
    b = Builder(FORMAT, source_key(src))
    lines, off_branch = _active_branch(list(iter_jsonl(src, b)))
    sid = next((str(e.get("id")) for _, e in lines if e.get("type") == "session" and e.get("id")), None)
    prefix = f"pi-{sid or b.key}"
    model: str | None = None
    for no, e in lines:
        CURRENT_LINE.set(no)
        typ = e.get("type")
        at = parse_time(e.get("timestamp"))
        eid = f"{prefix}-{e['id']}" if e.get("id") else f"{prefix}-L{no}"
        meta: dict[str, Any] = {"line": no}
        if e.get("parentId"):
            meta["parent_id"] = e["parentId"]
        if typ == "model_change":
            model = e.get("modelId") or model
        elif typ == "compaction":
            for k_src, k_dst in (
                ("tokensBefore", "tokens_before"),
                ("firstKeptEntryId", "first_kept_entry_id"),
                ("shortSummary", "short_summary"),
                ("details", "details"),
            ):
                if e.get(k_src) is not None:
                    meta[k_dst] = e[k_src]
            if e.get("trigger"):
                meta["trigger"] = e["trigger"]
            b.new(
                "user",
                eid,
                at=at,
                kind="compaction",
                blocks=[CompactionBlock(content=str(e.get("summary") or ""))],
                meta=meta,
            )
        elif typ == "branch_summary":
            summary = str(e.get("summary") or "")
            if summary:
                meta["branch_summary_from"] = e.get("fromId")
                b.new("user", eid, at=at, injected=True, blocks=[TextBlock(text=summary)], meta=meta)
        elif typ == "custom_message":
            content = e.get("content")
            txt = as_text(content)
            if txt:
                meta["custom_type"] = e.get("customType")
                b.new("user", eid, at=at, injected=True, blocks=[TextBlock(text=txt)], meta=meta)
        elif typ == "message":
            msg = e.get("message")
            if not isinstance(msg, dict):
                b.skip(no, "message entry without a message object")
                continue
            _message(b, msg, eid, at, meta, model)
    res = b.finish()
    res.stats["off_branch_entries"] = off_branch
    return res


def _active_branch(lines: list[tuple[int, dict[str, Any]]]) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """Entries on the path from the root to the current leaf (the last entry).

    A pi session is a tree: after the user goes back to an earlier point and continues,
    the abandoned branch stays in the file but is no longer in the model's context. A linear
    file (each entry's parent is the entry before it) is returned unchanged.
    """
    ids = {e["id"]: i for i, (_, e) in enumerate(lines) if e.get("id") and e.get("type") != "session"}
    prev = None
    linear = True
    for _, e in lines:
        if e.get("type") == "session":
            continue
        parent = e.get("parentId")
        if parent is not None and prev is not None and parent != prev and parent in ids:
            linear = False
            break
        prev = e.get("id") or prev
    if linear:
        return lines, 0
    leaf = next((e for _, e in reversed(lines) if e.get("id") in ids), None)
    keep: set[str] = set()
    while leaf is not None and leaf["id"] not in keep:
        keep.add(leaf["id"])
        parent = leaf.get("parentId")
        leaf = lines[ids[parent]][1] if parent in ids else None
    kept = [(no, e) for no, e in lines if e.get("id") not in ids or e["id"] in keep]
    return kept, len(lines) - len(kept)


def _message(
    b: Builder, msg: dict[str, Any], eid: str, at: Any, meta: dict[str, Any], model: str | None
) -> None:
    role = msg.get("role")
    content = msg.get("content")
    if role == "toolResult":
        d = b.add_result(
            result_block(str(msg.get("toolCallId", "")), content, bool(msg.get("isError")), meta),
            eid,
            at,
        )
        d.meta.setdefault("line", meta["line"])
        if meta.get("images_not_inline"):
            d.meta.setdefault("images_not_inline", []).extend(meta["images_not_inline"])
        return
    blocks: list[Any] = []
    if isinstance(content, str):
        blocks.append(TextBlock(text=content))
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        t = part.get("type")
        if t == "text":
            blocks.append(TextBlock(text=str(part.get("text", ""))))
        elif t == "thinking":
            blocks.append(
                ThinkingBlock(
                    thinking=str(part.get("thinking", "")),
                    signature=part.get("thinkingSignature") or None,
                )
            )
        elif t == "toolCall":
            args = part.get("arguments")
            blocks.append(
                ToolUseBlock(
                    id=str(part.get("id")),
                    name=str(part.get("name", "")),
                    input=args if isinstance(args, dict) else {"input": args},
                )
            )
        elif t == "image":
            blocks.append(image(part.get("mimeType"), part.get("data"), meta))
    if role == "assistant":
        u = msg.get("usage") or {}
        usage = usage_of(u.get("input"), u.get("output"), u.get("cacheRead"), u.get("cacheWrite"))
        for k in ("model", "provider", "stopReason"):
            if msg.get(k):
                meta[k] = msg[k]
        meta.setdefault("model", model)
        b.new("assistant", eid, at=at, blocks=blocks, usage=usage, meta=meta)
    elif role == "user":
        b.new("user", eid, at=at, blocks=blocks, meta=meta)
    else:
        meta["source_role"] = role
        b.new("user", eid, at=at, injected=True, blocks=blocks, meta=meta)
