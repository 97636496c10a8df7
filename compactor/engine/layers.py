"""Compaction layers, cheapest first. Pure: artifact bytes are returned, never written.

(a) ``externalize_tool_results`` — a tool result over the policy's limits moves to a
    sha256-addressed artifact; the view keeps an ``ArtifactRefBlock`` with head/tail previews
    (``Checkpoint.replacements``). Nothing is lost: the bytes are stored beside the log.
(b) ``clear_old_tool_results`` — once more than ``clear_tool_results_after`` results exist,
    all but the newest ``keep_recent_tool_results`` are replaced by a placeholder that names
    the artifact holding the content; the tool_use stays, so pairing is untouched.
(c) ``summarize_range`` — lift the covered range's state (merged with the previous
    checkpoint's) and render the structured summary within a token budget.

Each layer reports the tokens it freed (per-event counts, before/after), so the engine can
stop as soon as the target is met.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from typing import TYPE_CHECKING, Sequence

from pydantic import BaseModel, ConfigDict, Field

from compactor.events import (
    ArtifactRefBlock,
    _shared_fields_set,
    Block,
    Event,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
)
from compactor.engine.policy import Policy
from compactor.engine.view import light_copy, with_blocks
from compactor.tokens import MESSAGE_OVERHEAD, count_blocks, count_event, count_text, encoding

if TYPE_CHECKING:
    from compactor.lifting.state import LiftedState

ARTIFACT_URI = "artifact://sha256/{}"
CLEARED_TEXT = "[Old tool result content cleared; full content kept as an artifact]"

LAYER_EXTERNALIZE = "externalize"
LAYER_CLEAR = "clear_tool_results"
LAYER_SUMMARY = "summary"
LAYERS = [LAYER_EXTERNALIZE, LAYER_CLEAR, LAYER_SUMMARY]


class LayerOutcome(BaseModel):
    """What one replacement layer did."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    layer: str = Field(description="externalize | clear_tool_results")
    replacements: dict[int, list[Block]] = Field(
        default_factory=dict, description="seq -> blocks shown instead (only changed events)."
    )
    artifacts: dict[str, bytes] = Field(default_factory=dict, description="sha256 -> bytes to store.")
    freed_tokens: int = Field(default=0, description="Sum of per-event token savings.")
    items: int = Field(default=0, description="Tool results externalized or cleared.")
    counts: dict[int, int] = Field(
        default_factory=dict, description="seq -> tokens of the event shown with its replacement "
        "(``count_blocks``): counted here once, not again by each view that shows it.")


def make_artifact(
    data: bytes, *, head_chars: int = 2_000, tail_chars: int = 1_000, media_type: str = "text/plain",
    preview_head: str | None = None,
) -> ArtifactRefBlock:
    """An artifact reference for ``data`` with head/tail previews of its text (``preview_head``:
    this head instead, e.g. the clearing layer's marker, with ``tail_chars=0``)."""
    digest = hashlib.sha256(data).hexdigest()
    if preview_head is not None and not tail_chars:
        return ArtifactRefBlock(uri=ARTIFACT_URI.format(digest), sha256=digest, bytes=len(data),
                                preview_head=preview_head, preview_tail="", media_type=media_type)
    text = data.decode("utf-8", errors="replace") if media_type.startswith("text/") else ""
    head = text[:head_chars]
    tail = text[-tail_chars:] if tail_chars and len(text) > head_chars else ""
    if tail and len(text) < head_chars + tail_chars:
        tail = text[max(head_chars, len(text) - tail_chars):]
    return ArtifactRefBlock(
        uri=ARTIFACT_URI.format(digest),
        sha256=digest,
        bytes=len(data),
        preview_head=head,
        preview_tail=tail,
        media_type=media_type,
    )


def apply_replacements(events: Sequence[Event], replacements: dict[int, list[Block]]) -> list[Event]:
    """Events as the view shows them: replaced blocks swapped in (tokens recounted)."""
    if not replacements:
        return list(events)
    out: list[Event] = []
    for e in events:
        blocks = replacements.get(e.seq)
        out.append(e if blocks is None else with_blocks(e, list(blocks)))
    return out


def _over_limit(text: str, policy: Policy) -> bool:
    if policy.tool_result_char_limit is not None and len(text) > policy.tool_result_char_limit:
        return True
    if policy.tool_result_line_limit is not None and text.count("\n") + 1 > policy.tool_result_line_limit:
        return True
    if policy.tool_result_byte_limit is not None and len(text.encode()) > policy.tool_result_byte_limit:
        return True
    if policy.tool_result_token_limit is not None:
        # cheap bound first: a token is at least one character
        if len(text) > policy.tool_result_token_limit and count_text(text) > policy.tool_result_token_limit:
            return True
    return False


def _is_ref_only(r: ToolResultBlock) -> bool:
    return bool(r.content) and all(isinstance(c, ArtifactRefBlock) for c in r.content)


def externalize_tool_results(events: Sequence[Event], policy: Policy) -> LayerOutcome:
    """Layer (a): tool results over the policy's limits -> artifact + previews.

    ``events`` are shown as the view currently shows them (earlier replacements applied).
    Pinned events are never touched.
    """
    out = LayerOutcome(layer=LAYER_EXTERNALIZE)
    freed = items = 0  # (set on ``out`` once: an assignment to the model is validated)
    for e in events:
        if e.kind == "pinned" or not e.tool_results:
            continue
        changed = False
        blocks: list[Block] = []
        for b in e.blocks:
            if isinstance(b, ToolResultBlock) and not _is_ref_only(b):
                text = b.text
                if text and _over_limit(text, policy):
                    data = text.encode("utf-8")
                    ref = make_artifact(
                        data, head_chars=policy.preview_head_chars, tail_chars=policy.preview_tail_chars
                    )
                    rest = [c for c in b.content if not isinstance(c, TextBlock)]
                    new = b.model_copy(update={"content": [ref, *rest]})
                    out.artifacts[ref.sha256] = data
                    blocks.append(new)
                    items += 1
                    changed = True
                    continue
            blocks.append(b)
        if changed:
            freed += _record(out, e, blocks)
    out.items, out.freed_tokens = items, freed
    return out


def clear_old_tool_results(
    events: Sequence[Event], policy: Policy, *, keep: int | None = None
) -> LayerOutcome:
    """Layer (b): clear all but the newest ``keep`` tool results, once more than the policy's
    ``clear_tool_results_after`` exist. The placeholder is an artifact ref (so the content is
    recoverable and the validator can resolve it); the tool_use is untouched.
    """
    keep = policy.keep_recent_tool_results if keep is None else keep
    out = LayerOutcome(layer=LAYER_CLEAR)
    located: list[tuple[int, int]] = []  # (event index, block index) of live tool results
    for i, e in enumerate(events):
        if e.kind == "pinned" or not e.tool_results:  # (cached on the event: most have none)
            continue
        for j, b in enumerate(e.blocks):
            if isinstance(b, ToolResultBlock) and not _is_cleared(b):
                located.append((i, j))
    if len(located) <= policy.clear_tool_results_after or len(located) <= keep:
        return out
    victims = located[: len(located) - keep]
    by_event: dict[int, list[int]] = {}
    for i, j in victims:
        by_event.setdefault(i, []).append(j)
    artifacts = out.artifacts
    freed = items = 0  # (set on ``out`` once: an assignment to the model is validated)
    for i, idxs in by_event.items():
        e = events[i]
        blocks: list[Block] = list(e.blocks)
        known: int | None = 0  # tokens of the cleared results, when _cleared knows them all
        for j in idxs:
            new, arts, n = _cleared(blocks[j])  # type: ignore[arg-type]
            artifacts.update(arts)
            blocks[j] = new
            known = None if n is None or known is None else known + n
        items += len(idxs)
        after = None
        if known is not None:  # count_blocks(blocks): additive per block, a result always renders
            rest = count_blocks([b for j, b in enumerate(blocks) if j not in idxs]) if len(blocks) > len(idxs) else 0
            after = MESSAGE_OVERHEAD + known + (rest - MESSAGE_OVERHEAD if rest else 0)
        freed += _record(out, e, blocks, after)
    out.items, out.freed_tokens = items, freed
    return out


def _is_cleared(r: ToolResultBlock) -> bool:
    return any(isinstance(c, ArtifactRefBlock) and c.preview_head == CLEARED_TEXT for c in r.content)


def _cleared(r: ToolResultBlock) -> tuple[ToolResultBlock, dict[str, bytes], int | None]:
    """The cleared copy of ``r``, the artifacts it names, and its tokens in the request (the
    result's share of ``count_blocks``) when it holds only a ref made here, else None."""
    arts: dict[str, bytes] = {}
    content: list = []
    text = r.text
    tokens: int | None = None
    if text:
        data = text.encode("utf-8")
        ref = _cleared_ref(data, "text/plain")
        arts[ref.sha256] = data
        content.append(ref)
        tokens = _RESULT_TOKENS + cleared_ref_tokens(ref)
    for c in r.content:
        if not isinstance(c, TextBlock):
            tokens = None  # (counted by count_blocks)
        if isinstance(c, ArtifactRefBlock):
            # already externalized: point at the same artifact, drop the previews
            content.append(c.model_copy(update={"preview_head": CLEARED_TEXT, "preview_tail": ""}))
        elif isinstance(c, ImageBlock):
            if c.ref is not None:
                content.append(c.model_copy(update={"data": None}))
            elif c.data:
                try:
                    data = base64.b64decode(c.data.encode(), validate=False)
                except (binascii.Error, ValueError):
                    data = c.data.encode()  # not valid base64: keep the text as given
                ref = _cleared_ref(data, c.media_type)
                arts[ref.sha256] = data
                content.append(ref)
    if not content:
        content = [TextBlock(text=CLEARED_TEXT)]
    return light_copy(r, {"content": content}), arts, tokens


_RESULT_TOKENS = 4
"""What ``tokens.count_blocks`` adds for a tool_result block besides its content."""

# A cleared result's ref renders (``events.render_artifact_ref``) as
#   "[output stored as artifact://sha256" "/<sha256>" " (<bytes> bytes, sha256" " <sha256[:12]>"
#   "); preview:]\n<CLEARED_TEXT>\n...\n"
# and cl100k's pre-split cuts at each of those joints (a run of letters or digits never takes
# the punctuation or space after it), so its count is the sum of the parts' counts. The two
# hex parts are cut further into the pre-split's own pieces - a letter run (with the "/" or
# space before it), a lone "/" or space, up to three digits - each counted once and
# remembered: one ref costs a few dictionary lookups instead of a tokenizer call on 216
# characters (the ref of nearly every result of a big session, issue 17). Checked against
# count_text on random and all-letter/all-digit digests (tests/unit/test_layers.py).
_REF_HEAD = "[output stored as artifact://sha256"
_REF_TAIL = "); preview:]\n" + CLEARED_TEXT + "\n...\n"
# The two hex parts are cut in one pass over "/<sha256> <sha256[:12]>": no piece spans the
# space between them (a piece that ends in a letter or digit never takes a space after it).
_HEX_PIECES = re.compile(r"[/ ]?[a-f]+|[/ ]|[0-9]{1,3}")


class _PieceTokens(dict):  # type: ignore[type-arg]
    """piece -> its token count, counted on first lookup (``__missing__``: a lookup per piece
    without a Python call when known; at most 65k pieces)."""

    def __missing__(self, piece: str) -> int:
        if len(self) > 1 << 16:
            self.clear()
        n = self[piece] = len(encoding().encode_ordinary(piece))
        return n


_PIECE_TOKENS = _PieceTokens()
_piece_tokens = _PIECE_TOKENS.__getitem__


def cleared_ref_tokens(ref: ArtifactRefBlock) -> int:
    """``count_text(render_artifact_ref(ref))`` for a ref made by ``_cleared_ref`` (see above)."""
    digest = ref.sha256
    return (count_text(_REF_HEAD) + sum(map(_piece_tokens, _HEX_PIECES.findall("/" + digest + " " + digest[:12])))
            + count_text(f" ({ref.bytes} bytes, sha256") + count_text(_REF_TAIL))


_CLEARED_FIELDS = frozenset({"uri", "sha256", "bytes", "preview_head", "preview_tail", "media_type"})


def _cleared_ref(data: bytes, media_type: str) -> ArtifactRefBlock:
    """``make_artifact(data, head_chars=0, tail_chars=0, media_type=media_type,
    preview_head=CLEARED_TEXT)``, built without validating fields made here (one per cleared
    result: nearly every result of a big session, issue 17): the same values and fields-set."""
    digest = hashlib.sha256(data).hexdigest()
    ref = object.__new__(ArtifactRefBlock)
    object.__setattr__(ref, "__dict__", {
        "type": "artifact_ref", "uri": ARTIFACT_URI.format(digest), "sha256": digest, "bytes": len(data),
        "preview_head": CLEARED_TEXT, "preview_tail": "", "media_type": media_type,
    })
    object.__setattr__(ref, "__pydantic_extra__", None)
    object.__setattr__(ref, "__pydantic_private__", None)
    object.__setattr__(ref, "__pydantic_fields_set__", _shared_fields_set(_CLEARED_FIELDS))
    return ref


def _record(out: LayerOutcome, e: Event, blocks: list[Block], after: int | None = None) -> int:
    """``e`` shown with ``blocks`` (``after`` tokens, counted when None); the tokens freed."""
    before = count_event(e)  # the count cached on the event (prepare counts every event)
    if after is None:
        after = count_blocks(blocks)
    out.replacements[e.seq] = blocks
    out.counts[e.seq] = after
    return before - after


# --- (c) summary ------------------------------------------------------------------------------


class SummaryOutcome(BaseModel):
    """Layer (c): the lifted state and its rendered summary for a covered range."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    state: dict = Field(description="LiftedState as JSON (Checkpoint.state).")
    text: str
    sections: dict = Field(default_factory=dict)
    tokens: int = Field(description="Tokens of the rendered summary text.")
    covered_tokens: int = Field(description="Tokens of the newly covered events.")
    dropped: dict = Field(default_factory=dict, description="Section -> items left out for budget.")
    left_out_weight: int = Field(default=0, description="summary.RenderedSummary.left_out_weight.")


def summarize_range(
    covered: Sequence[Event], prev_state: dict | None, budget_tokens: int, *, latest_full: bool = False,
    state: LiftedState | None = None, state_fields: frozenset[str] | None = None,
    covered_tokens: int | None = None,
) -> SummaryOutcome:
    """Lift ``covered`` on top of ``prev_state`` and render it within ``budget_tokens``.

    ``state``: the ``LiftedState`` of exactly that, when the caller has it already (the
    engine's ``Lifter`` extends one pass over the shrink ladder's cuts). ``state_fields``:
    dump only these fields of it (the engine's ladder: a candidate's checks read a few, and
    only the picked candidate's whole state is stored, issue 17). ``covered_tokens``: the
    tokens of ``covered``, when the caller has summed them already.
    """
    from compactor.lifting.lift import LiftedState, lift_state
    from compactor.summarize.structured import render_summary

    if state is None:
        prev = LiftedState.model_validate(prev_state) if prev_state else None
        state = lift_state(list(covered), prev)
    rendered = render_summary(state, budget_tokens, latest_full=latest_full)
    return SummaryOutcome(
        state=state.model_dump(mode="json", include=state_fields),
        text=rendered.text,
        sections=dict(rendered.sections),
        tokens=rendered.tokens,
        covered_tokens=sum(count_event(e) for e in covered) if covered_tokens is None else covered_tokens,
        dropped=dict(rendered.dropped),
        left_out_weight=rendered.left_out_weight,
    )
