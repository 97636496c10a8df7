"""Gemini CLI ``--output-format stream-json`` captures (JSONL of CLI events).

Assistant text may arrive as several ``message`` chunks (``delta``); consecutive chunks are
joined into one assistant event that also takes the ``tool_use`` lines that follow it, and
the ``tool_result`` lines go into the next user event. A file may hold several runs (several
``init`` lines); each event records which run it came from.
"""

from __future__ import annotations

from typing import Any

from compactor.events import TextBlock, ToolUseBlock
from compactor.importers._common import (
    Source,
    ImportResult,
    as_text,
    iter_jsonl,
    parse_time,
    result_block,
    source_key,
)
from compactor.importers._drafts import Builder, Draft

FORMAT = "gemini-stream"


def parse(src: Source, name: str) -> ImportResult:
    b = Builder(FORMAT, source_key(src))
    run = 0
    session: str | None = None
    assistant: Draft | None = None
    for no, e in iter_jsonl(src, b):
        typ = e.get("type")
        at = parse_time(e.get("timestamp"))  # `ts` is harness local time with no zone
        eid = f"gstream-{b.key}-L{no}"
        meta: dict[str, Any] = {"line": no, "run": run}
        if session:
            meta["session_id"] = session
        if typ == "init":
            run += 1
            session = e.get("session_id") or session
            assistant = None
            continue
        if typ == "message":
            role = e.get("role")
            content = as_text(e.get("content"))
            if role == "assistant":
                if assistant is not None and b.last() is assistant:
                    # streamed chunks of one reply
                    tb = assistant.blocks[-1] if assistant.blocks else None
                    if isinstance(tb, TextBlock) and e.get("delta"):
                        assistant.blocks[-1] = TextBlock(text=tb.text + content)
                    elif content:
                        assistant.blocks.append(TextBlock(text=content))
                    continue
                assistant = b.new(
                    "assistant", eid, at=at, blocks=[TextBlock(text=content)] if content else [], meta=meta
                )
                continue
            assistant = None
            if content:
                if run == 0:
                    meta["harness_prompt"] = True  # written by the capture harness before init
                b.new("user", eid, at=at, blocks=[TextBlock(text=content)], meta=meta)
        elif typ == "tool_use":
            if assistant is None or b.last() is not assistant:
                assistant = b.new("assistant", eid, at=at, meta=meta)
            params = e.get("parameters")
            assistant.blocks.append(
                ToolUseBlock(
                    id=str(e.get("tool_id") or eid),
                    name=str(e.get("tool_name", "")),
                    input=params if isinstance(params, dict) else {"input": params},
                )
            )
        elif typ == "tool_result":
            assistant = None
            is_error = e.get("status") == "error"
            out = e.get("output")
            err = e.get("error")
            text = as_text(out)
            if is_error and isinstance(err, dict) and err.get("message"):
                text = f"{text}\n{err['message']}".strip()
            b.add_result(result_block(str(e.get("tool_id", "")), text, is_error, meta), eid, at)
        elif typ == "result":
            assistant = None
            d = b.last()
            if d is not None:
                d.meta["run_result"] = {"status": e.get("status"), "stats": e.get("stats")}
    _mark_harness_duplicate(b)
    return b.finish()


def _mark_harness_duplicate(b: Builder) -> None:
    """The capture harness writes the task prompt before ``init``; the CLI then echoes it.

    When the echo is there, the harness copy is a duplicate of the request, so it is marked
    injected (kept, not counted as a second user request).
    """
    users = [d for d in b.drafts if d.role == "user" and not d.results_only]
    for i, d in enumerate(users[:-1]):
        if d.meta.get("harness_prompt") and _text(users[i + 1]) == _text(d):
            d.injected = True
            d.meta["duplicate_of_line"] = users[i + 1].meta.get("line")


def _text(d: Draft) -> str:
    return "\n".join(x.text for x in d.blocks if isinstance(x, TextBlock)).strip()
