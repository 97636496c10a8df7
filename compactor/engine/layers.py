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
from functools import lru_cache
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
from compactor.engine.view import _updated_set, light_copy, with_blocks
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


def _under_every_limit(policy: Policy) -> int:
    """A length of text at or under which ``_over_limit`` is False for any text (an ASCII one,
    when the policy limits bytes): a character is at most one newline, at least one token's
    worth, and one byte in ASCII."""
    limits = [policy.tool_result_char_limit, policy.tool_result_token_limit, policy.tool_result_byte_limit,
              None if policy.tool_result_line_limit is None else policy.tool_result_line_limit - 1]
    return min((n for n in limits if n is not None), default=1 << 62)


def _is_ref_only(r: ToolResultBlock) -> bool:
    return bool(r.content) and all(isinstance(c, ArtifactRefBlock) for c in r.content)


def externalize_tool_results(events: Sequence[Event], policy: Policy) -> LayerOutcome:
    """Layer (a): tool results over the policy's limits -> artifact + previews.

    ``events`` are shown as the view currently shows them (earlier replacements applied).
    Pinned events are never touched.
    """
    out = LayerOutcome(layer=LAYER_EXTERNALIZE)
    freed = items = 0  # (set on ``out`` once: an assignment to the model is validated)
    short = _under_every_limit(policy)
    ascii_only = policy.tool_result_byte_limit is not None  # (a byte each: encoded, as _over_limit would)
    for e in events:
        if not e.tool_results or e.kind == "pinned":
            continue
        results = e.tool_results
        if len(results) == 1:  # (most: one result of one short text, under every limit)
            content = results[0].content
            if len(content) == 1 and type(content[0]) is TextBlock:
                text = content[0].text
                if len(text) <= short and (not ascii_only or text.isascii()):
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
    events: Sequence[Event], policy: Policy, *, keep: int | None = None, lazy: bool = False
) -> LayerOutcome:
    """Layer (b): clear all but the newest ``keep`` tool results, once more than the policy's
    ``clear_tool_results_after`` exist. The placeholder is an artifact ref (so the content is
    recoverable and the validator can resolve it); the tool_use is untouched.

    ``lazy``: an event of one result of one text alone (nearly every cleared event of a big
    session) gets a ``ClearedText`` in ``replacements`` instead of its blocks - what makes
    them, and its count, when a view shows the event (``realize_cleared``; ``counts`` has no
    entry for it); its artifact and ``freed_tokens`` are the same (the engine's
    ``apply_layers``: a summary covers most cleared events, whose blocks no view ever shows,
    issue 17).
    """
    keep = policy.keep_recent_tool_results if keep is None else keep
    out = LayerOutcome(layer=LAYER_CLEAR)
    # (event index, block indices) of the live tool results, in order, and how many there are
    located: list[tuple[int, Sequence[int]]] = []
    live = 0
    for i, e in enumerate(events):
        if not e.tool_results or e.kind == "pinned":  # (cached on the event: most have none)
            continue
        blocks = e.blocks
        if len(blocks) == 1 and type(blocks[0]) is ToolResultBlock:  # (most: one result alone)
            if not _is_cleared(blocks[0]):
                located.append((i, _ALONE))
                live += 1
            continue
        js = [j for j, b in enumerate(blocks) if isinstance(b, ToolResultBlock) and not _is_cleared(b)]
        if js:
            located.append((i, js))
            live += len(js)
    if live <= policy.clear_tool_results_after or live <= keep:
        return out
    artifacts, replacements, counts = out.artifacts, out.replacements, out.counts
    freed = 0  # (set on ``out`` once: an assignment to the model is validated)
    left = live - keep  # the oldest results are cleared: all but the newest ``keep``
    alone_tokens = MESSAGE_OVERHEAD + _RESULT_TOKENS + _fixed_tokens()  # an event of one cleared text
    lazy_digests: list[str] = []
    for i, idxs in located:
        if left <= 0:
            break
        e = events[i]
        if idxs is _ALONE:  # (most: one result of one text, alone in its event)
            r = e.blocks[0]
            content = r.content
            if len(content) == 1 and type(content[0]) is TextBlock and content[0].text:
                left -= 1
                data = content[0].text.encode("utf-8")
                digest = _sha256(data).hexdigest()
                artifacts[digest] = data
                size = len(data)
                seq = e.seq
                before = e.tokens  # (count_event: the count cached on the event)
                if before is None:
                    before = count_blocks(e.blocks)
                if lazy:  # (its count made with its blocks; the digests' share of freed in bulk below)
                    replacements[seq] = ClearedText(r, digest, size)  # type: ignore[assignment]
                    lazy_digests.append(digest)
                    freed += before - alone_tokens - _size_tokens(size)
                    continue
                replacements[seq] = [_with_content(r, [_text_ref(digest, size, "text/plain")])]
                counts[seq] = after = alone_tokens + _size_tokens(size) + _hex_tokens(digest)
                freed += before - after
                continue
        if len(idxs) > left:
            idxs = idxs[:left]
        left -= len(idxs)
        blocks: list[Block] = list(e.blocks)
        known: int | None = 0  # tokens of the cleared results, when _cleared knows them all
        for j in idxs:
            new, n = _cleared(blocks[j], artifacts)  # type: ignore[arg-type]
            blocks[j] = new
            known = None if n is None or known is None else known + n
        if known is None:
            after = count_blocks(blocks)
        elif len(blocks) == len(idxs):
            after = MESSAGE_OVERHEAD + known
        else:  # count_blocks(blocks): additive per block, a result always renders
            rest = count_blocks([b for j, b in enumerate(blocks) if j not in idxs])
            after = MESSAGE_OVERHEAD + known + (rest - MESSAGE_OVERHEAD if rest else 0)
        seq = e.seq
        replacements[seq] = blocks
        counts[seq] = after
        freed += count_event(e) - after  # (the count cached on the event: prepare counts every event)
    if lazy_digests:
        freed -= _hex_tokens_sum(lazy_digests)
    out.items, out.freed_tokens = live - keep, freed
    return out


class ClearedText:
    """A cleared result of one text alone in its event, its blocks not made yet (``lazy``):
    the result, and its text's sha256 and size in UTF-8 bytes. ``blocks()`` makes what the
    eager layer puts in ``replacements`` (``_cleared_text``'s copy holding its ref): the same
    values, fields-set and field order (``tests/unit/test_clearing_lazy.py``). 56 bytes an
    event instead of the copy, the ref, its uri and their list (~600, issue 17, memory)."""

    __slots__ = ("result", "digest", "size")

    def __init__(self, result: ToolResultBlock, digest: str, size: int) -> None:
        self.result, self.digest, self.size = result, digest, size

    def blocks(self) -> list[Block]:
        return [_with_content(self.result, [_text_ref(self.digest, self.size, "text/plain")])]

    def tokens(self) -> int:
        """The event's tokens shown with ``blocks()`` (what the eager layer puts in ``counts``)."""
        return (MESSAGE_OVERHEAD + _RESULT_TOKENS + _fixed_tokens() + _size_tokens(self.size)
                + _hex_tokens(self.digest))


def realize_cleared(repl: dict[int, list[Block]], after: int,
                    counted: dict[int, tuple[list[Block], int]] | None = None) -> dict[int, list[Block]]:
    """``repl``'s replacements of the events after seq ``after`` (in ``repl``'s order), a
    ``ClearedText`` made into its blocks - written back into ``repl`` (and ``counted``'s
    pair, seq -> (blocks, tokens)), so every later view and checkpoint shows the same blocks."""
    kept = {s: b for s, b in repl.items() if s > after}
    made = [(s, b) for s, b in kept.items() if type(b) is ClearedText]
    for s, lazy in made:
        kept[s] = repl[s] = blocks = lazy.blocks()  # type: ignore[attr-defined]
        if counted is not None and s in counted:
            counted[s] = (blocks, lazy.tokens())  # type: ignore[attr-defined]
    return kept


def _is_cleared(r: ToolResultBlock) -> bool:
    content = r.content
    if len(content) == 1 and type(content[0]) is TextBlock:  # (most results: a text, no ref)
        return False
    return any(isinstance(c, ArtifactRefBlock) and c.preview_head == CLEARED_TEXT for c in r.content)


def _cleared_text(r: ToolResultBlock, text: str, arts: dict[str, bytes]) -> tuple[ToolResultBlock, ArtifactRefBlock]:
    """``r``, a result of one text, cleared: its copy holding only the ref to ``text``'s bytes
    (put in ``arts``), and that ref."""
    data = text.encode("utf-8")
    ref = _cleared_ref(data, "text/plain")
    arts[ref.sha256] = data
    return _with_content(r, [ref]), ref


def _cleared(r: ToolResultBlock, arts: dict[str, bytes]) -> tuple[ToolResultBlock, int | None]:
    """The cleared copy of ``r`` (the artifacts it names put in ``arts``), and its tokens in
    the request (the result's share of ``count_blocks``) when it holds only a ref made here,
    else None."""
    content: list = r.content
    if len(content) == 1 and type(content[0]) is TextBlock and content[0].text:  # (most: one text)
        copy, ref = _cleared_text(r, content[0].text, arts)
        return copy, _RESULT_TOKENS + cleared_ref_tokens(ref)
    content = []
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
    return _with_content(r, content), tokens


_RESULT_TOKENS = 4
"""What ``tokens.count_blocks`` adds for a tool_result block besides its content."""

# A cleared result's ref renders (``events.render_artifact_ref``) as
#   "[output stored as artifact://sha256" "/<sha256>" " (<bytes> bytes, sha256" " <sha256[:12]>"
#   "); preview:]\n<CLEARED_TEXT>\n...\n"
# and cl100k's pre-split cuts at each of those joints (a run of letters or digits never takes
# the punctuation or space after it), so its count is the sum of the parts' counts. The two
# hex parts are cut further into the pre-split's own pieces: a run of letters (the first with
# the "/" or space before it, when the digest opens with a letter), a lone "/" or space (when
# it opens with a digit), and each run of digits in pieces of up to three, one token each (all
# 1,110 such strings are single tokens in cl100k). A letter run is counted once and
# remembered: one ref costs two byte translations, a split, a count and a dictionary lookup
# per letter run instead of a tokenizer call on 216 characters (the ref of nearly every
# result of a big session, issue 17). Checked against count_text on random and
# all-letter/all-digit digests (tests/unit/test_layers.py).
_REF_HEAD = "[output stored as artifact://sha256"
_REF_TAIL = "); preview:]\n" + CLEARED_TEXT + "\n...\n"
_LETTER_RUNS = bytes.maketrans(b"0123456789", b" " * 10)  # digits -> spaces: split() gives the letter runs


class _PieceTokens(dict):  # type: ignore[type-arg]
    """piece (ASCII bytes) -> its token count, counted on first lookup (``__missing__``: a
    lookup per piece without a Python call when known; at most 65k pieces)."""

    def __missing__(self, piece: bytes) -> int:
        if len(self) > 1 << 16:
            self.clear()
        n = self[piece] = len(encoding().encode_ordinary(piece.decode("ascii")))
        return n


_PIECE_TOKENS = _PieceTokens()
_piece_tokens = _PIECE_TOKENS.__getitem__


@lru_cache(maxsize=1)
def _fixed_tokens() -> int:
    return count_text(_REF_HEAD) + count_text(_REF_TAIL)


@lru_cache(maxsize=1 << 12)
def _size_tokens(size: int) -> int:
    return count_text(f" ({size} bytes, sha256")


def cleared_ref_tokens(ref: ArtifactRefBlock) -> int:
    """``count_text(render_artifact_ref(ref))`` for a ref made by ``_cleared_ref`` (see above)."""
    return _fixed_tokens() + _size_tokens(ref.bytes) + _hex_tokens(ref.sha256)


def _hex_tokens(digest: str) -> int:
    """The tokens of a cleared ref's two hex parts, "/<digest>" and " <digest[:12]>": its
    letter runs counted one by one; its digit runs, pieces of up to three digits, one token
    each, counted in bulk - each digit made a "0", each run given two more ("0 " -> "000 ": a
    space ends every run), so the run's pieces are its non-overlapping "000"s; the "/" and
    space before the first run of each part, as the first letter run takes them (``_LeadTokens``)."""
    hexes = (digest + " " + digest[:12] + " ").encode("ascii")
    letters = hexes.translate(_LETTER_RUNS).split()
    return (sum(map(_piece_tokens, letters)) + hexes.translate(_ZEROS).replace(b"0 ", b"000 ").count(b"000")
            + _lead(letters[0] if digest[0] >= "a" else b""))


def _hex_tokens_sum(digests: list[str]) -> int:
    """``sum(map(_hex_tokens, digests))``, counted in bulk: each digest written as
    "/<digest> |<digest[:12]> " - "|" standing for the space before the short part, so that a
    letter run after "/" or "|" is the piece the pre-split makes of it with that character
    (``_BulkPieces``), and one alone stands for itself alone, as in ``_LeadTokens`` - then
    its letter runs looked up, its digit runs counted as ``_hex_tokens`` counts them, all
    digests at once (a Python call and seven C calls per digest fewer, issue 17), 2,048 at a
    time (the letter runs' list: ~20 small bytes a digest, held a chunk at a time)."""
    n = 0
    for i in range(0, len(digests), 2048):
        text = "".join([f"/{d} |{d[:12]} " for d in digests[i:i + 2048]]).encode("ascii")
        # a run of L digits is ceil(L / 3) pieces: its "000"s, and one more when L % 3 digits
        # are left (the run after taking them out: a " 0"; the text opens with "/", a space)
        zeros = text.translate(_BULK_ZEROS)
        n += (sum(map(_bulk_piece_tokens, text.translate(_LETTER_RUNS).split()))
              + zeros.count(b"000") + zeros.replace(b"000", b"").count(b" 0"))
    return n


class _BulkPieces(dict):  # type: ignore[type-arg]
    """A piece of ``_hex_tokens_sum``'s text -> its tokens: "|" as a space (``__missing__``:
    counted on first lookup; at most 65k pieces)."""

    def __missing__(self, piece: bytes) -> int:
        if len(self) > 1 << 16:
            self.clear()
        n = self[piece] = _piece_tokens(b" " + piece[1:] if piece[:1] == b"|" else piece)
        return n


_bulk_piece_tokens = _BulkPieces().__getitem__
_BULK_ZEROS = bytes.maketrans(b"0123456789abcdef/|", b"0000000000" + b" " * 8)  # digits -> "0", the rest spaces


class _LeadTokens(dict):  # type: ignore[type-arg]
    """the digest's first letter run (b"" when it opens with a digit) -> what the "/" and the
    space before its two parts add to the count of the runs (``__missing__``: counted on first
    lookup; at most the runs a digest opens with)."""

    def __missing__(self, first: bytes) -> int:
        if len(self) > 1 << 16:
            self.clear()
        if not first:  # each alone before a digit
            n = _piece_tokens(b"/") + _piece_tokens(b" ")
        else:  # the first letter run of each part takes the "/" or space before it
            first12 = first[:12]
            n = (_piece_tokens(b"/" + first) - _piece_tokens(first)
                 + _piece_tokens(b" " + first12) - _piece_tokens(first12))
        self[first] = n
        return n


_lead = _LeadTokens().__getitem__
_ZEROS = bytes.maketrans(b"0123456789abcdef", b"0000000000      ")  # digits -> "0", letters -> spaces


_CLEARED_FIELDS = frozenset({"uri", "sha256", "bytes", "preview_head", "preview_tail", "media_type"})


def _cleared_ref(data: bytes, media_type: str) -> ArtifactRefBlock:
    """``make_artifact(data, head_chars=0, tail_chars=0, media_type=media_type,
    preview_head=CLEARED_TEXT)``, built without validating fields made here (one per cleared
    result: nearly every result of a big session, issue 17): the same values and fields-set."""
    digest = hashlib.sha256(data).hexdigest()
    return _text_ref(digest, len(data), media_type)


def _text_ref(digest: str, size: int, media_type: str) -> ArtifactRefBlock:
    """``_cleared_ref`` of bytes of this digest and size. Its fields are stored one by one, in
    field order, as ``events.trusted`` stores them (the class's shared-key values array, not a
    dict of its own: 300 bytes a ref with its uri instead of 492, issue 17, memory)."""
    ref = _new(ArtifactRefBlock)
    _set(ref, "type", "artifact_ref")
    _set(ref, "uri", _URI_HEAD + digest)
    _set(ref, "sha256", digest)
    _set(ref, "bytes", size)
    _set(ref, "preview_head", CLEARED_TEXT)
    _set(ref, "preview_tail", "")
    _set(ref, "media_type", media_type)
    _set(ref, "__pydantic_fields_set__", _CLEARED_SET)
    _set(ref, "__pydantic_extra__", None)
    _set(ref, "__pydantic_private__", None)
    return ref


def _with_content(r: ToolResultBlock, content: list) -> ToolResultBlock:
    """``r.model_copy(update={"content": content})`` (``view.light_copy``'s copy), its fields
    read one by one and stored as ``_text_ref`` stores them: ``r`` is not given a ``__dict__``
    (a dict made on the original result, 64 bytes each) and the copy has none of its own."""
    if type(r) is not ToolResultBlock or r.__pydantic_extra__ is not None or r.__pydantic_private__ is not None:
        return light_copy(r, {"content": content})
    new = _new(ToolResultBlock)
    _set(new, "type", r.type)
    _set(new, "tool_use_id", r.tool_use_id)
    _set(new, "content", content)
    _set(new, "is_error", r.is_error)
    _set(new, "__pydantic_fields_set__", _updated_set(r.__pydantic_fields_set__, _CONTENT))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


_new = object.__new__
_set = object.__setattr__
_sha256 = hashlib.sha256
_URI_HEAD = ARTIFACT_URI.format("")
_CLEARED_SET = _shared_fields_set(_CLEARED_FIELDS)
_CONTENT = frozenset({"content"})
_ALONE = (0,)
"""The block indices of an event that is one tool result alone (shared: most events)."""


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
    covered: Sequence[Event] | None, prev_state: dict | None, budget_tokens: int, *, latest_full: bool = False,
    state: LiftedState | None = None, state_fields: frozenset[str] | None = None,
    covered_tokens: int | None = None,
) -> SummaryOutcome:
    """Lift ``covered`` on top of ``prev_state`` and render it within ``budget_tokens``.

    ``state``: the ``LiftedState`` of exactly that, when the caller has it already (the
    engine's ``Lifter`` extends one pass over the shrink ladder's cuts). ``state_fields``:
    dump only these fields of it (the engine's ladder: a candidate's checks read a few, and
    only the picked candidate's whole state is stored, issue 17). ``covered_tokens``: the
    tokens of ``covered``, when the caller has summed them already. ``covered`` None: both
    are given (the engine's ladder: no slice of the body per rung, a pointer an event, issue 17).
    """
    from compactor.lifting.lift import LiftedState, lift_state
    from compactor.summarize.structured import render_summary

    assert covered is not None or (state is not None and covered_tokens is not None)
    if state is None:
        assert covered is not None
        prev = LiftedState.model_validate(prev_state) if prev_state else None
        state = lift_state(list(covered), prev)
    rendered = render_summary(state, budget_tokens, latest_full=latest_full)
    return SummaryOutcome(
        state=state.model_dump(mode="json", include=state_fields),
        text=rendered.text,
        sections=dict(rendered.sections),
        tokens=rendered.tokens,
        covered_tokens=sum(count_event(e) for e in covered or ()) if covered_tokens is None else covered_tokens,
        dropped=dict(rendered.dropped),
        left_out_weight=rendered.left_out_weight,
    )
