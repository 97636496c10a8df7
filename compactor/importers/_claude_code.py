"""Claude Code session logs (``~/.claude/projects/<proj>/<sessionId>.jsonl``).

One API response is written over several lines (one content block per line) sharing
``message.id``; they are merged into one assistant event, with the tool results that arrive
in between gathered into the user event that follows it. Only ``user``/``assistant`` lines and
``system`` compact boundaries carry the conversation; other line types are bookkeeping.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from compactor.events import (
    CompactionBlock,
    TextBlock,
    ToolResultBlock,
)
from compactor.importers import _build as build
from compactor.importers._common import (
    CURRENT_LINE,
    Source,
    ImportResult,
    image,
    iter_jsonl,
    parse_time,
    publish_line,
    result_block,
    source_key,
    usage_of,
)
from compactor.importers._drafts import Builder, Draft, shared_draft

FORMAT = "claude-code"

#: Line types that exist in the log but are not conversation.
NON_CONVERSATION = {
    "attachment",
    "progress",
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "last-prompt",
    "ai-title",
    "mode",
    "summary",
    "custom-title",
    "tag",
}

# User text the harness writes around local slash commands: not typed by the human.
_INJECTED_TEXT = re.compile(
    r"^\s*<(local-command-caveat|local-command-stdout|local-command-stderr|system-reminder)>"
)
_COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<]*?)\s*</command-name>")


#: The keys of a usual line's ``meta``, in the order they are set (``build.keyed``).
_LINE = ("line",)
_LINE_COMMAND = ("line", "slash_command")
_LINE_ID = ("line", "message_id")
_LINE_MODEL = ("line", "model")
_LINE_MODEL_ID = ("line", "model", "message_id")

#: A streamed import hands drafts over once this many are pending.
RELEASE_EVERY = 256


def parse(src: Source, name: str) -> ImportResult:
    b = Builder(FORMAT, source_key(src), sink=src.sink, finishing=src.finishing)
    # The assistant draft the next line of the same response may extend. Only the newest one
    # can be extended (``_only_results_since``), so older ones are forgotten.
    by_msg_id: dict[str, Draft] = {}
    streamed = b.sink is not None
    drafts = b.drafts  # (the builder's list, changed in place until ``finish``)
    where: list[int | None] = [CURRENT_LINE.get()]
    try:
        _parse_lines(b, src, where, by_msg_id, streamed, drafts)
    except BaseException:
        publish_line(where)  # (the line ``iter_jsonl`` would have set ``CURRENT_LINE`` to)
        raise
    publish_line(where)
    return b.finish()


def _parse_lines(
    b: Builder,
    src: Source,
    where: list[int | None],
    by_msg_id: dict[str, Draft],
    streamed: bool,
    drafts: list[Draft],
) -> None:
    """``parse``'s loop over the lines (``iter_jsonl`` writing the line to ``where``)."""
    pending_compaction: Draft | None = None
    for no, line in iter_jsonl(src, b, where):
        if streamed and len(drafts) >= RELEASE_EVERY:
            _release_finished(b)
        typ = line.get("type")
        if typ != "system" and (typ in NON_CONVERSATION or typ not in ("user", "assistant")):
            continue  # bookkeeping or unknown (the test below, moved up): no time or id needed
        at = line.get("timestamp")
        if type(at) is str and len(at) == 24 and at[23] == "Z" and at[19] == ".":
            try:  # (``parse_time``'s first case, without its call: issue 17)
                at = fromisoformat(at)
            except ValueError:
                at = parse_time(at)
        else:
            at = parse_time(at)
        uid = line.get("uuid")
        if type(uid) is not str or not uid:  # (the usual uuid is the id as it is)
            uid = str(uid or f"cc-{b.key}-L{no}")
        if typ == "system":
            if line.get("subtype") == "compact_boundary":
                md = line.get("compactMetadata") or {}
                meta = {
                    "trigger": md.get("trigger"),
                    "tokens_before": md.get("preTokens"),
                    "boundary_uuid": line.get("uuid"),
                    "logical_parent_uuid": line.get("logicalParentUuid"),
                    "line": no,
                }
                pending_compaction = b.new(
                    "user",
                    uid,
                    at=at,
                    kind="compaction",
                    blocks=[CompactionBlock(content="")],
                    meta={k: v for k, v in meta.items() if v is not None},
                )
            continue
        msg = line.get("message")  # (``typ`` is "user" or "assistant" here: tested above)
        if not isinstance(msg, dict):
            b.skip(no, f"{typ} line without a message object")
            continue
        if not (line.get("isSidechain") or line.get("isApiErrorMessage") or line.get("isCompactSummary")) and (
            _fast_assistant(b, msg, uid, at, no, by_msg_id) if typ == "assistant" else _fast_user(b, line, msg, uid, at, no)
        ):
            pending_compaction = None
            continue

        meta: dict[str, Any] = {"line": no}
        if line.get("isSidechain"):
            meta["sidechain"] = True
        if line.get("isApiErrorMessage"):
            meta["api_error"] = True

        if line.get("isCompactSummary"):
            summary = _plain_text(msg.get("content"))
            if pending_compaction is not None:
                pending_compaction.blocks = [CompactionBlock(content=summary)]
                pending_compaction.meta["summary_uuid"] = line.get("uuid")
                pending_compaction = None
            else:
                b.new(
                    "user",
                    uid,
                    at=at,
                    kind="compaction",
                    blocks=[CompactionBlock(content=summary)],
                    meta={"summary_uuid": line.get("uuid"), "line": no},
                )
            continue
        pending_compaction = None

        if typ == "assistant":
            _assistant(b, line, msg, uid, at, meta, by_msg_id)
        else:
            _user(b, line, msg, uid, at, meta)


def _assistant(
    b: Builder,
    line: dict[str, Any],
    msg: dict[str, Any],
    uid: str,
    at: Any,
    meta: dict[str, Any],
    by_msg_id: dict[str, Draft],
) -> None:
    blocks = _assistant_blocks(msg.get("content"), meta)
    mid = msg.get("id")
    usage_raw = msg.get("usage")
    usage = usage_of(
        usage_raw.get("input_tokens"),
        usage_raw.get("output_tokens"),
        usage_raw.get("cache_read_input_tokens"),
        usage_raw.get("cache_creation_input_tokens"),
    ) if usage_raw else None  # (``usage_of`` of four Nones is None)
    _add_assistant(b, msg, uid, at, mid, blocks, usage, meta["line"], meta, by_msg_id)


def _add_assistant(
    b: Builder,
    msg: dict[str, Any],
    uid: str,
    at: Any,
    mid: Any,
    blocks: list[Any],
    usage: Any,
    no: int,
    meta: dict[str, Any] | None,
    by_msg_id: dict[str, Draft],
) -> None:
    """Extend the draft of the same response (``mid``) with line ``no``'s ``blocks`` when
    only results came since, else start a draft of them; ``blocks`` and ``meta`` are the
    line's own (kept, not copied). ``meta`` None: a line of the usual shape
    (``_fast_assistant``), its draft ``SHARED``."""
    target = by_msg_id.get(mid) if mid else None
    if target is not None and _only_results_since(b, target):
        target.blocks.extend(blocks)
        if usage is not None:  # later lines of a response carry the final usage
            target.usage = usage
        target.add_line(no)
        return
    model = msg.get("model")
    if model and type(model) is str:
        model = build.intern(model)  # the same name on every response: one string for all of them
    if meta is None:  # a fast line's: its dict made with its keys (``build.keyed``)
        if model:
            meta = build.keyed(_LINE_MODEL_ID if mid else _LINE_MODEL)
            meta["line"] = no
            meta["model"] = model
        else:
            meta = build.keyed(_LINE_ID if mid else _LINE)
            meta["line"] = no
        if mid:
            meta["message_id"] = mid
        d = shared_draft("assistant", uid, at, False, blocks, usage, meta)
    else:
        if model:
            meta["model"] = model
        if mid:
            meta["message_id"] = mid
        d = Draft("assistant", uid, at, "message", False, blocks, usage, meta)
    b.drafts.append(d)
    if mid:
        by_msg_id.clear()
        by_msg_id[mid] = d


def _fast_assistant(
    b: Builder, msg: dict[str, Any], uid: str, at: Any, no: int, by_msg_id: dict[str, Draft]
) -> bool:
    """``_assistant`` of a line of the usual shape (text, thinking and tool-call parts of the
    types they should have, a dict of usage or none, a string id), its draft made without
    ``Builder.new``'s copies; False, having changed nothing, for any other line (issue 17)."""
    content = msg.get("content")
    if type(content) is str:
        blocks = [text_block(content)] if content else []
    elif type(content) is list:
        blocks = []
        for part in content:
            if type(part) is not dict:
                return False
            t = part.get("type")
            if t == "text":
                text = part.get("text", "")
                if type(text) is not str:
                    return False
                blocks.append(text_block(text))
            elif t == "tool_use":
                inp = part.get("input")
                bid = part.get("id")
                name = part.get("name", "")
                if type(inp) is not dict or type(bid) is not str or type(name) is not str:
                    return False
                blocks.append(build.tool_use_block(bid, name, inp))
            elif t == "thinking":
                thinking = part.get("thinking", "")
                if type(thinking) is not str:
                    return False
                blocks.append(build.thinking_block(thinking, part.get("signature")))
            else:
                return False
    else:
        return False
    mid = msg.get("id")
    if mid is not None and type(mid) is not str:
        return False
    usage_raw = msg.get("usage")
    if not usage_raw:
        usage = None
    elif type(usage_raw) is dict:
        usage = usage_of(
            usage_raw.get("input_tokens"),
            usage_raw.get("output_tokens"),
            usage_raw.get("cache_read_input_tokens"),
            usage_raw.get("cache_creation_input_tokens"),
        )
    else:
        return False
    _add_assistant(b, msg, uid, at, mid, blocks, usage, no, None, by_msg_id)
    return True


def _fast_user(b: Builder, line: dict[str, Any], msg: dict[str, Any], uid: str, at: Any, no: int) -> bool:
    """``_user`` of a line of the usual shape (a typed text, or only tool results whose output
    is a string), its draft made without ``Builder.new``'s copies; False, having changed
    nothing, for any other line (issue 17)."""
    content = msg.get("content")
    if type(content) is str:
        injected = bool(line.get("isMeta")) or bool(_INJECTED_TEXT.match(content))
        cmd = _COMMAND_NAME.search(content)
        meta = build.keyed(_LINE_COMMAND if cmd else _LINE)
        meta["line"] = no
        if cmd:
            meta["slash_command"] = cmd.group(1)
        b.drafts.append(shared_draft("user", uid, at, injected, [text_block(content)], None, meta))
        return True
    if type(content) is not list or not content:
        return False
    results: list[Any] = []
    for part in content:
        if type(part) is not dict or part.get("type") != "tool_result":
            return False
        tool_use_id = part.get("tool_use_id", "")
        output = part.get("content")
        if type(tool_use_id) is not str or type(output) is not str:
            return False
        # ``build.tool_result_block(tool_use_id, [text_block(output)], is_error)`` with the
        # values it tests known to pass and its copy of ``content`` not made: the list here is
        # fresh and of exactly its length, the copy validation would keep (issue 17)
        m = _new(ToolResultBlock)
        _set_slot(m, "type", "tool_result")
        _set_slot(m, "tool_use_id", tool_use_id)
        _set_slot(m, "content", [text_block(output)] if output else [])
        _set_slot(m, "is_error", bool(part.get("is_error")))
        _set_slot(m, "__pydantic_fields_set__", _TOOL_RESULT)
        _set_slot(m, "__pydantic_extra__", None)
        _set_slot(m, "__pydantic_private__", None)
        results.append(m)
    drafts = b.drafts
    d = drafts[-1] if drafts else None
    # a results-only draft right after the call collects parallel results (the role first:
    # after a call, the usual case, the draft is the assistant's, issue 17)
    if d is not None and d.role == "user" and d.results_only:
        d.blocks.extend(results)
        d.add_line(no)
        return True
    meta = build.keyed(_LINE)
    meta["line"] = no
    drafts.append(shared_draft("user", uid, at, False, results, None, meta))
    return True


text_block = build.text_block
fromisoformat = datetime.fromisoformat
_new = object.__new__
_set_slot = object.__setattr__
_TOOL_RESULT = build.TOOL_RESULT_FIELDS


def _release_finished(b: Builder) -> None:
    """Hand over the drafts no later line can change: those before the newest draft that is
    not results-only (it may still absorb a fragment of its response; the results-only drafts
    after it may absorb more results; a pending compaction is always the newest draft)."""
    for i in range(len(b.drafts) - 1, -1, -1):
        if not b.drafts[i].results_only:
            b.release(i)
            return


def _only_results_since(b: Builder, target: Draft) -> bool:
    """True when every draft after ``target`` only carries tool results."""
    for d in reversed(b.drafts):
        if d is target:
            return True
        if not d.results_only:
            return False
    return False


def _user(
    b: Builder,
    line: dict[str, Any],
    msg: dict[str, Any],
    uid: str,
    at: Any,
    meta: dict[str, Any],
) -> None:
    content = msg.get("content")
    results: list[ToolResultBlock] = []
    others: list[Any] = []
    if isinstance(content, str):
        others.append(build.text_block(content))
    elif isinstance(content, list):
        for part in content:
            if not isinstance(part, dict):
                continue
            t = part.get("type")
            if t == "tool_result":
                results.append(
                    result_block(
                        str(part.get("tool_use_id", "")),
                        part.get("content"),
                        bool(part.get("is_error")),
                        meta,
                    )
                )
            elif t == "text":
                others.append(build.text_block(str(part.get("text", ""))))
            elif t == "image":
                src = part.get("source") or {}
                others.append(image(src.get("media_type"), src.get("data"), meta))
    if results:
        d = b.last()
        # a results-only draft right after the call collects parallel results
        if d is not None and d.results_only and not others:
            d.blocks.extend(results)
            d.add_line(meta["line"])
            return
        b.new("user", uid, at=at, blocks=[*results, *others], meta=meta)
        return
    if not others:
        return
    text = "\n".join(o.text for o in others if isinstance(o, TextBlock))
    # a sidechain's "user" is the parent agent prompting a sub-agent, not the human
    injected = bool(line.get("isMeta")) or bool(line.get("isSidechain")) or bool(_INJECTED_TEXT.match(text))
    cmd = _COMMAND_NAME.search(text)
    if cmd:
        meta["slash_command"] = cmd.group(1)
    b.new("user", uid, at=at, blocks=others, injected=injected, meta=meta)


def _assistant_blocks(content: Any, meta: dict[str, Any]) -> list[Any]:
    if isinstance(content, str):
        return [build.text_block(content)] if content else []
    out: list[Any] = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        t = part.get("type")
        if t == "text":
            out.append(build.text_block(str(part.get("text", ""))))
        elif t == "thinking":
            out.append(build.thinking_block(str(part.get("thinking", "")), part.get("signature")))
        elif t == "redacted_thinking":
            out.append(build.thinking_block("", part.get("data")))
        elif t == "tool_use":
            inp = part.get("input")
            out.append(
                build.tool_use_block(
                    str(part.get("id")),
                    str(part.get("name", "")),
                    inp if isinstance(inp, dict) else {"input": inp},
                )
            )
        elif t == "image":
            src = part.get("source") or {}
            out.append(image(src.get("media_type"), src.get("data"), meta))
    return out


def _plain_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""
