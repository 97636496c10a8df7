"""SWE-agent trajectories (``*.traj``): the conversation is ``history[]``.

``trajectory[].messages`` repeats the full prompt at every step, so it is ignored. Two
variants exist: function calling (``tool_calls`` on assistant entries, ``tool`` entries with
``tool_call_ids``) and the older one, where the command is a fenced block in the assistant
text (``action``) and the observation is the next ``user`` entry; there the call gets a
synthetic id ``swe-<index>``. There are no wall-clock timestamps.
"""

from __future__ import annotations

from typing import Any

from compactor.events import TextBlock, ToolUseBlock
from compactor.importers._common import (
    Source,
    ImportResult,
    as_text,
    load_json,
    parse_arguments,
    result_block,
    source_key,
)
from compactor.importers._drafts import Builder, Draft

FORMAT = "swe-agent"


def parse(src: Source, name: str) -> ImportResult:
    doc = load_json(src, name, FORMAT)
    if not isinstance(doc, dict) or not isinstance(doc.get("history"), list):
        from compactor.errors import ParseError

        raise ParseError(f"{name}: a SWE-agent trajectory needs a 'history' list", name=name)
    b = Builder(FORMAT, source_key(src))
    pending: str | None = None  # synthetic id of a fenced action awaiting its observation
    task_seen = False
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    for i, h in enumerate(doc["history"]):
        if not isinstance(h, dict):
            continue
        role = h.get("role")
        content = as_text(h.get("content"))
        eid = f"swe-{b.key}-{i}"
        meta: dict[str, Any] = {"index": i}
        for k in ("agent", "message_type"):
            if h.get(k):
                meta[k] = h[k]
        if role == "system":
            b.new("system", eid, kind="pinned", blocks=[TextBlock(text=content)], meta=meta)
            continue
        if role == "assistant":
            blocks: list[Any] = [TextBlock(text=content)] if content else []
            calls = h.get("tool_calls") or []
            for c in calls:
                fn = c.get("function") or {}
                blocks.append(
                    ToolUseBlock(
                        id=str(c.get("id")),
                        name=str(fn.get("name", "")),
                        input=parse_arguments(fn.get("arguments")),
                    )
                )
            pending = None
            if not calls:
                # Every assistant turn is an action attempt; the harness answers each one with
                # an observation (an error message when the output had no valid command).
                action = h.get("action")
                command = action.strip() if isinstance(action, str) else ""
                pending = f"swe-{i}"
                blocks.append(ToolUseBlock(id=pending, name="bash", input={"command": command}))
                if not command:
                    meta["empty_action"] = True
            if h.get("thought") and h.get("thought") != content:
                meta["thought"] = h["thought"]
            b.new("assistant", eid, blocks=blocks, meta=meta)
            continue
        if role == "tool":
            ids = h.get("tool_call_ids") or []
            for j, cid in enumerate(ids):
                b.add_result(result_block(str(cid), content if j == 0 else "", False, meta), eid)
            if not ids and pending:
                b.add_result(result_block(pending, content, False, meta), eid)
                pending = None
            elif not ids and content:
                b.new(
                    "user",
                    eid,
                    injected=True,
                    blocks=[TextBlock(text=content)],
                    meta={**meta, "observation": True},
                )
            _annotate(b.last(), meta)
            continue
        # user
        if h.get("is_demo") or h.get("message_type") == "demonstration":
            b.new("user", eid, injected=True, blocks=[TextBlock(text=content)], meta={**meta, "demo": True})
            continue
        if pending is not None:
            b.add_result(result_block(pending, content, False, meta), eid)
            pending = None
            continue
        if content:
            # the first user message is the task; later ones without a pending action are
            # harness messages (observations, format errors), not a human's request
            b.new("user", eid, injected=task_seen, blocks=[TextBlock(text=content)], meta=meta)
            task_seen = True
    last = b.last()
    if last is not None and info.get("exit_status"):
        last.meta["exit_status"] = info["exit_status"]
    return b.finish()


def _annotate(d: Draft | None, meta: dict[str, Any]) -> None:
    if d is not None:
        d.meta.setdefault("index", meta["index"])
