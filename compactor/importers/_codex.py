"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

The conversation is the ``response_item`` payloads. ``event_msg`` lines repeat what the UI
showed and are used only for provider usage (``token_count``) and aborted turns. Developer
messages and the first-turn context blocks (AGENTS.md, ``<environment_context>``, permissions)
are marked injected; ``session_meta.base_instructions`` is the pinned system prompt, and
developer messages and the standing context blocks (``STANDING_PREFIXES``) are pinned too.
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
    parse_arguments,
    parse_time,
    result_block,
    source_key,
    usage_of,
)
from compactor.importers._drafts import Builder, Draft

FORMAT = "codex"

#: Injected user-role context that stands for the whole session (AGENTS.md, the environment,
#: permissions, collaboration mode): pinned like developer messages. Codex rebuilds exactly
#: this context (``build_initial_context``) after its own compaction, so a compaction here
#: keeps it verbatim instead of summarizing the agent's standing rules away.
STANDING_PREFIXES = (
    "# AGENTS.md instructions",
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<collaboration_mode>",
    "<INSTRUCTIONS>",
    "<personality>",
)

#: User-role text the harness writes, not the human (checked after leading whitespace): the
#: standing context, and per-turn notes that stay ordinary events.
INJECTED_PREFIXES = STANDING_PREFIXES + ("<turn_aborted>", "<user_shell_command>", "<skill>")

_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "web_search_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def parse(src: Source, name: str) -> ImportResult:
    b = Builder(FORMAT, source_key(src))
    lines = list(iter_jsonl(src, b))
    sid = next(
        (
            (line.get("payload") or {}).get("id")
            for _, line in lines
            if line.get("type") == "session_meta" and isinstance(line.get("payload"), dict)
        ),
        None,
    )
    st = _State(b, f"codex-{sid}" if sid else f"codex-{b.key}")
    for no, line in lines:
        CURRENT_LINE.set(no)
        st.line(no, line)
    return b.finish()


class _State:
    def __init__(self, b: Builder, prefix: str) -> None:
        self.b = b
        self.prefix = prefix
        self.assistant: Draft | None = None  # open assistant draft (current model response)
        self.last_assistant: Draft | None = None
        self.last_total: int | None = None

    def eid(self, no: int) -> str:
        return f"{self.prefix}-L{no}"

    def line(self, no: int, line: dict[str, Any]) -> None:
        typ = line.get("type")
        payload = line.get("payload")
        at = parse_time(line.get("timestamp"))
        if not isinstance(payload, dict):
            return
        if typ == "session_meta":
            self.session_meta(no, payload, at)
        elif typ == "response_item":
            self.item(no, payload, at)
        elif typ == "compacted":
            self.compacted(no, payload, at)
        elif typ == "event_msg":
            self.event(no, payload)

    # ------------------------------------------------------------------------------------
    def session_meta(self, no: int, p: dict[str, Any], at: Any) -> None:
        bi = p.get("base_instructions")
        text = bi.get("text") if isinstance(bi, dict) else bi if isinstance(bi, str) else None
        meta = {
            k: p.get(k)
            for k in ("id", "cwd", "originator", "cli_version", "model_provider", "source")
            if p.get(k) is not None
        }
        meta["line"] = no
        if text:
            self.b.new(
                "system",
                f"{self.prefix}-instructions",
                at=at or parse_time(p.get("timestamp")),
                kind="pinned",
                blocks=[TextBlock(text=text)],
                meta=meta,
            )

    def open_assistant(self, no: int, at: Any) -> Draft:
        if self.assistant is None or self.b.last() is not self.assistant:
            self.assistant = self.b.new("assistant", self.eid(no), at=at, meta={"line": no})
            self.last_assistant = self.assistant
        return self.assistant

    def item(self, no: int, p: dict[str, Any], at: Any) -> None:
        t = p.get("type")
        meta: dict[str, Any] = {"line": no}
        if t == "message":
            role = p.get("role")
            texts = [
                str(c.get("text", ""))
                for c in p.get("content") or []
                if isinstance(c, dict) and c.get("type") in ("input_text", "output_text", "text")
            ]
            if role == "assistant":
                d = self.open_assistant(no, at)
                d.blocks.extend(TextBlock(text=x) for x in texts if x)
                if p.get("phase"):
                    d.meta.setdefault("phases", []).append(p["phase"])
                return
            self.assistant = None
            images = [
                c for c in p.get("content") or [] if isinstance(c, dict) and c.get("type") == "input_image"
            ]
            if not texts and not images:
                return
            kind = "message"
            if role == "developer":
                meta["source_role"] = "developer"
                injected = True
            else:
                injected = bool(texts) and all(x.lstrip().startswith(INJECTED_PREFIXES) for x in texts)
            if injected and not images and (role == "developer" or all(
                    x.lstrip().startswith(STANDING_PREFIXES) for x in texts)):
                kind = "pinned"  # standing instructions: Codex puts them back after its own compaction
            blocks: list[Any] = [TextBlock(text=x) for x in texts]
            blocks.extend(_image(c.get("image_url"), meta) for c in images)
            self.b.new("user", self.eid(no), at=at, kind=kind, injected=injected, blocks=blocks, meta=meta)
        elif t == "reasoning":
            summary = "\n\n".join(
                str(s.get("text", "")) for s in p.get("summary") or [] if isinstance(s, dict)
            ).strip()
            if not summary and isinstance(p.get("content"), list):
                summary = "\n\n".join(as_text(c) for c in p["content"]).strip()
            d = self.open_assistant(no, at)
            if summary:
                d.blocks.append(ThinkingBlock(thinking=summary))
        elif t in _CALLS:
            d = self.open_assistant(no, at)
            call_id = str(p.get("call_id") or p.get("id") or f"{self.prefix}-call-L{no}")
            if t == "function_call":
                inp = parse_arguments(p.get("arguments"))
                name = p.get("name") or "function"
            elif t == "custom_tool_call":
                raw = p.get("input")
                inp = {"input": raw} if isinstance(raw, str) else parse_arguments(raw)
                name = p.get("name") or "custom_tool"
            elif t == "local_shell_call":
                inp = p.get("action") if isinstance(p.get("action"), dict) else {}
                name = "local_shell"
            else:  # web_search_call
                inp = p.get("action") if isinstance(p.get("action"), dict) else {}
                name = "web_search"
            d.blocks.append(ToolUseBlock(id=call_id, name=str(name), input=inp))
            if t == "web_search_call" and p.get("status") in ("completed", "failed"):
                # The search runs server-side and the rollout never records an output item;
                # its status is the only result there is. Recording it keeps the call paired.
                self.assistant = None
                self.b.add_result(
                    result_block(call_id, f"[web search {p['status']}]", p["status"] == "failed", {}),
                    self.eid(no) + "-result",
                    at,
                )
                self.b.last().meta["synthesized_from_status"] = True  # type: ignore[union-attr]
        elif t in _OUTPUTS:
            self.assistant = None
            out = p.get("output")
            is_error = False
            if isinstance(out, dict):  # older rollouts: {"content": ..., "success": bool}
                is_error = out.get("success") is False
                out = out.get("content", out)
            d = self.b.add_result(
                result_block(str(p.get("call_id", "")), as_text(out), is_error, meta),
                self.eid(no),
                at,
            )
            d.meta.setdefault("line", no)

    def compacted(self, no: int, p: dict[str, Any], at: Any) -> None:
        self.assistant = None
        summary = str(p.get("message") or "")
        history = p.get("replacement_history") or []
        if not summary and history:
            texts = []
            for it in history:
                if isinstance(it, dict) and it.get("type") == "message":
                    texts.extend(
                        str(c.get("text", "")) for c in it.get("content") or [] if isinstance(c, dict)
                    )
            summary = "\n\n".join(t for t in texts if t)
        meta: dict[str, Any] = {"line": no, "replacement_items": len(history)}
        if self.last_total is not None:
            # context size of the last request before the compaction (from token_count)
            meta["tokens_before"] = self.last_total
        self.b.new(
            "user",
            self.eid(no),
            at=at,
            kind="compaction",
            blocks=[CompactionBlock(content=summary)],
            meta=meta,
        )

    def event(self, no: int, p: dict[str, Any]) -> None:
        t = p.get("type")
        if t == "token_count":
            info = p.get("info") or {}
            last = info.get("last_token_usage") if isinstance(info, dict) else None
            d = self.last_assistant
            if isinstance(last, dict) and last.get("total_tokens") is not None:
                self.last_total = int(last["total_tokens"])
            if isinstance(last, dict) and d is not None and d.usage is None:
                cached = int(last.get("cached_input_tokens") or 0)
                d.usage = usage_of(
                    max(0, int(last.get("input_tokens") or 0) - cached),
                    last.get("output_tokens"),
                    cached,
                    0,
                )
        elif t == "turn_aborted":
            d = self.b.last()
            if d is not None:
                d.meta["turn_aborted"] = p.get("reason") or True
        elif t == "context_compacted":
            d = self.b.last()
            if d is not None and d.kind == "compaction":
                d.meta["context_compacted_event"] = no
        elif t == "thread_rolled_back":
            d = self.b.last()
            if d is not None:
                d.meta["thread_rolled_back"] = p.get("num_turns", True)


def _image(url: Any, meta: dict[str, Any]) -> Any:
    """A Codex ``input_image`` (a data URL, or a URL the rollout only references)."""
    if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
        head, data = url.split(";base64,", 1)
        return image(head[5:], data, meta)
    return TextBlock(text=f"[image {url or ''}]".rstrip())
