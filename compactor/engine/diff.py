"""What a checkpoint replaced and what its summary kept (``compactor inspect --diff``).

Pure: the caller reads the events and checkpoints; this module compares. "Replaced" is what
the view showed before the checkpoint and no longer shows verbatim: the events after the
previous checkpoint's range up to this one's end, plus tool results after the range that the
checkpoint shows as an artifact reference or cleared (layers a/b, ``replacements``). "Kept"
means the summary text names the item (a request's opening words, a path, an error name, an
artifact's digest), so an operator sees at a glance what a candidate would drop.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, Field

from compactor.events import ArtifactRefBlock, Event, TextBlock, ToolResultBlock, ToolUseBlock
from compactor.lifting.lift import is_genuine_request, lift_state
from compactor.records import Checkpoint

#: Opening characters of a request the summary must contain for it to count as kept.
REQUEST_KEY_CHARS = 60


class DiffItem(BaseModel):
    """One replaced thing and whether the summary kept it."""

    kind: str = Field(description="request | file | error | tool_result")
    seq: int = Field(default=0, description="Seq of the event it comes from (0: several).")
    text: str = Field(description="The request, path, error or tool call, cut short.")
    kept: bool = Field(description="The summary names it.")
    tool_use_id: str | None = None
    artifact: str | None = Field(default=None, description="Artifact URI the tool result is stored under.")
    is_error: bool = False
    bytes: int = Field(default=0, description="Size of the tool result (stored or inline).")
    where: str = Field(default="covered", description="covered (summarized) or replaced (after the range, "
                       "shown by reference).")


class CheckpointDiff(BaseModel):
    """The diff of one checkpoint against the view before it."""

    checkpoint: str
    based_on: str | None = None
    covers_end: int = Field(description="Last seq the checkpoint covers.")
    replaced_start: int = Field(description="First seq this checkpoint newly summarized.")
    replaced_events: int = 0
    replaced_tokens: int = Field(default=0, description="Our count of the newly summarized events.")
    summary_tokens: int = 0
    summarizer: str = "structured"
    items: list[DiffItem] = Field(default_factory=list)

    def of(self, kind: str) -> list[DiffItem]:
        return [i for i in self.items if i.kind == kind]

    @property
    def dropped(self) -> list[DiffItem]:
        return [i for i in self.items if not i.kept]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _text(e: Event) -> str:
    return "\n".join(b.text for b in e.blocks if isinstance(b, TextBlock))


def _result_bytes(r: ToolResultBlock) -> tuple[int, str | None]:
    size, uri = 0, None
    for c in r.content:
        if isinstance(c, ArtifactRefBlock):
            size, uri = size + c.bytes, c.uri
        elif isinstance(c, TextBlock):
            size += len(c.text.encode())
    return size, uri


def _artifact_kept(uri: str, summary: str) -> bool:
    digest = uri.rsplit("/", 1)[-1].lower()
    return _norm(uri) in summary or (len(digest) >= 12 and digest[:12] in summary)


def diff_checkpoint(events: Sequence[Event], ckpt: Checkpoint, prev: Checkpoint | None) -> CheckpointDiff:
    """Compare ``ckpt`` with the view before it (``prev`` = its ``based_on``, or None).

    Args:
        events: the session's events, at least up to ``ckpt.snapshot_version``.
        ckpt: the checkpoint to explain.
        prev: the checkpoint it replaced, whose range was already summarized.
    """
    start = (prev.covers.end if prev and not prev.covers.empty else 0) + 1
    end = 0 if ckpt.covers.empty else ckpt.covers.end
    replaced = [e for e in events if start <= e.seq <= end and e.kind != "pinned"]
    summary = _norm(ckpt.summary or "")
    items: list[DiffItem] = []
    for e in replaced:
        if e.role == "user" and is_genuine_request(e):
            text = _text(e)
            key = _norm(text)[:REQUEST_KEY_CHARS]
            items.append(DiffItem(kind="request", seq=e.seq, text=_clip(text), kept=bool(key) and key in summary))
    state = lift_state(replaced)
    listed: set[str] = set()  # (the file items' paths: a scan of the items per file was quadratic)
    for f in [*state.files_changed, *state.files_read]:
        if f.path in listed:
            continue
        listed.add(f.path)
        items.append(DiffItem(kind="file", seq=f.seq, text=f.path, kept=_norm(f.path) in summary))
    for err in state.errors:
        items.append(DiffItem(kind="error", seq=err.seq, text=_clip(f"{err.name}: {err.message}"),
                              kept=_norm(err.name) in summary, tool_use_id=err.tool_use_id))
    names = {b.id: _call(b) for e in events for b in e.blocks if isinstance(b, ToolUseBlock)}
    for e in replaced:
        for b in e.blocks:
            if isinstance(b, ToolResultBlock):
                size, uri = _result_bytes(b)
                kept = _artifact_kept(uri, summary) if uri else False
                items.append(DiffItem(kind="tool_result", seq=e.seq, text=names.get(b.tool_use_id, "tool"),
                                      kept=kept, tool_use_id=b.tool_use_id, artifact=uri,
                                      is_error=b.is_error, bytes=size))
    items += _replacements(events, ckpt, names)
    return CheckpointDiff(
        checkpoint=ckpt.id, based_on=ckpt.based_on, covers_end=end, replaced_start=start,
        replaced_events=len(replaced), replaced_tokens=sum(e.tokens or 0 for e in replaced),
        summary_tokens=ckpt.summary_tokens, summarizer=ckpt.summarizer, items=items,
    )


def _replacements(events: Sequence[Event], ckpt: Checkpoint, names: dict[str, str]) -> list[DiffItem]:
    """Tool results after the range that the view shows by reference (or cleared)."""
    by_seq = {e.seq: e for e in events}
    out: list[DiffItem] = []
    for seq, blocks in sorted(ckpt.replacements.items()):
        orig = {b.tool_use_id: b for b in by_seq[seq].blocks if isinstance(b, ToolResultBlock)} if seq in by_seq else {}
        for b in blocks:
            if not isinstance(b, ToolResultBlock):
                continue
            _, uri = _result_bytes(b)
            size = _result_bytes(orig[b.tool_use_id])[0] if b.tool_use_id in orig else 0
            # Still in the view, by reference: the agent can fetch it, nothing is lost.
            out.append(DiffItem(kind="tool_result", seq=seq, text=names.get(b.tool_use_id, "tool"),
                                kept=uri is not None, tool_use_id=b.tool_use_id, artifact=uri,
                                is_error=b.is_error, bytes=size, where="replaced"))
    return out


def _call(use: ToolUseBlock) -> str:
    """A tool call for people: its name and main argument (command, path, pattern, url)."""
    for key in ("command", "cmd", "file_path", "path", "pattern", "url", "query"):
        v = use.input.get(key)
        if isinstance(v, str) and v:
            return _clip(f"{use.name} {v}", 80)
    return use.name


def _clip(text: str, n: int = 160) -> str:
    one = re.sub(r"\s+", " ", text).strip()
    return one if len(one) <= n else one[: n - 1] + "…"
