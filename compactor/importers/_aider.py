"""Aider chat history (``.aider.chat.history.md``), which may hold many sessions.

``#### `` lines are the user's input, ``> `` lines are aider's own console output, everything
else is the assistant's Markdown. Aider records no call ids, so applied edits and commands it
ran become tool calls with deterministic synthetic ids (``aider-<n>``, counted in file
order). Command output added to the chat is not in the file; the result records what is.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from compactor.events import TextBlock, ToolResultBlock, ToolUseBlock
from compactor.importers._common import ImportResult, Source, source_key
from compactor.importers._drafts import Builder, Draft

FORMAT = "aider"

_STARTED = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_APPLIED = re.compile(r"^Applied edit to (.+?)\s*$")
_RUNNING = re.compile(r"^Running (.+?)\s*$")
_TOKENS = re.compile(r"^Tokens: ([\d.]+)(k?) sent.*?([\d.]+)(k?) received", re.I)


def parse(src: Source, name: str) -> ImportResult:
    b = Builder(FORMAT, source_key(src))
    st = _State(b)
    for no, raw in src.lines(keep_empty=True):
        st.line(no, raw)
    st.flush()
    return b.finish()


class _State:
    def __init__(self, b: Builder) -> None:
        self.b = b
        self.at: datetime | None = None
        self.session = 0
        self.kind: str | None = None  # "user" | "assistant" | "tool" | None
        self.buf: list[str] = []
        self.start = 0
        self.calls = 0
        self.turn_assistant: Draft | None = None  # assistant draft of the current exchange
        self.block_assistant: Draft | None = None
        self.block_calls: list[tuple[str, list[str]]] = []

    def eid(self, no: int) -> str:
        return f"aider-{self.b.key}-L{no}"

    def line(self, no: int, raw: str) -> None:
        m = _STARTED.match(raw)
        if m:
            self.flush()
            self.session += 1
            self.at = datetime.fromisoformat(m.group(1))
            self.turn_assistant = None
            return
        if raw.startswith("####"):
            self.switch("user", no)
            body = raw[4:]
            self.buf.append(body[1:].rstrip() if body.startswith(" ") else body.rstrip())
            return
        if raw.startswith("> ") or raw == ">":
            self.switch("tool", no)
            self.console(no, raw[2:].rstrip())
            return
        if self.kind in ("user", "tool") and not raw.strip():
            self.flush()  # a blank line ends a run of user input or console output
            return
        self.switch("assistant", no)
        self.buf.append(raw.rstrip())

    def switch(self, kind: str, no: int) -> None:
        if self.kind != kind:
            self.flush()
            self.kind = kind
            self.start = no

    def flush(self) -> None:
        kind, buf = self.kind, self.buf
        self.kind, self.buf = None, []
        self.close_calls()
        if kind == "user":
            text = "\n".join(buf).strip("\n")
            if text.strip():
                meta: dict[str, Any] = {"line": self.start, "aider_session": self.session}
                if text.startswith("/"):
                    meta["slash_command"] = text.split()[0]
                self.b.new("user", self.eid(self.start), at=self.at, blocks=[TextBlock(text=text)], meta=meta)
                self.turn_assistant = None
        elif kind == "assistant":
            text = "\n".join(buf).strip()
            if text:
                self.turn_assistant = self.b.new(
                    "assistant",
                    self.eid(self.start),
                    at=self.at,
                    blocks=[TextBlock(text=text)],
                    meta={"line": self.start, "aider_session": self.session},
                )

    # aider console output ----------------------------------------------------------------
    def console(self, no: int, text: str) -> None:
        applied = _APPLIED.match(text)
        running = _RUNNING.match(text)
        if applied or running:
            self.calls += 1
            call_id = f"aider-{self.calls}"
            if applied:
                use = ToolUseBlock(id=call_id, name="apply_edit", input={"path": applied.group(1)})
            else:
                use = ToolUseBlock(id=call_id, name="run", input={"command": running.group(1)})  # type: ignore[union-attr]
            if self.block_assistant is None:
                self.block_assistant = self.assistant_for_call(no)
            self.block_assistant.blocks.append(use)
            self.block_calls.append((call_id, [text]))
            return
        tokens = _TOKENS.match(text)
        if tokens and self.turn_assistant is not None:
            self.turn_assistant.meta["aider_tokens"] = {
                "sent": _num(tokens.group(1), tokens.group(2)),
                "received": _num(tokens.group(3), tokens.group(4)),
            }
            return
        if self.block_calls and text:
            self.block_calls[-1][1].append(text)

    def assistant_for_call(self, no: int) -> Draft:
        """The assistant event the calls belong to: the reply that produced them, if last."""
        last = self.b.last()
        if last is not None and last is self.turn_assistant:
            return last
        return self.b.new(
            "assistant",
            self.eid(no),
            at=self.at,
            meta={"line": no, "aider_session": self.session, "synthetic": True},
        )

    def close_calls(self) -> None:
        """End of a console block: its calls' results go into one user event."""
        d = self.block_assistant
        calls = self.block_calls
        self.block_assistant, self.block_calls = None, []
        if d is None or not calls:
            return
        results = [
            ToolResultBlock(tool_use_id=cid, content=[TextBlock(text="\n".join(lines))])
            for cid, lines in calls
        ]
        self.b.new("user", f"{d.id}-results", at=self.at, blocks=results, meta={"line": d.meta.get("line")})
        self.turn_assistant = None


def _num(value: str, k: str) -> int:
    return int(round(float(value) * (1000 if k else 1)))
