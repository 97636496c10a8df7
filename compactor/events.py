"""Canonical session events, in the Anthropic content-block shape.

Every importer produces these, the session log stores them, the engine reads them and the
view is built from them. They are a durable contract: stored segments written today must load
with tomorrow's code, so new fields are optional with defaults and nothing is renamed.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import datetime
from functools import cached_property
from typing import Annotated, Any, Iterable, Literal, Mapping, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator


_set_slot = object.__setattr__
_new = object.__new__


class _cached(cached_property):  # type: ignore[type-arg]
    """``functools.cached_property`` that stores the value as an attribute (the generic
    ``object.__setattr__``) rather than by ``instance.__dict__[name] = value``: an event
    ``trusted`` made keeps its fields in the class's shared-key values array (see there), and
    a key written into its ``__dict__`` directly turned that into a full dict of its own
    (464 -> 832 bytes, issue 17). The same value, cached the same way (read back from the
    instance, ``model_copy`` drops it)."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = self.func(instance)
        _set_slot(instance, self.attrname, value)
        return value


_FIELDS_SETS: dict[frozenset[str], set[str]] = {}
_M = TypeVar("_M", bound=BaseModel)


def _shared_fields_set(fields: set[str]) -> set[str]:
    """One set object per distinct set of field names (issue 17, memory): pydantic keeps a
    fresh ``__pydantic_fields_set__`` per instance (216-728 bytes; ~1.1 KB of a small
    event's ~4 KB with its blocks). The models are frozen and pydantic copies the set before
    it changes one (``model_copy``), so instances can share an equal set."""
    key = frozenset(fields)
    got = _FIELDS_SETS.get(key)
    if got is None:
        got = _FIELDS_SETS[key] = set(key)
    return got


class SharedFieldsSet(BaseModel):
    """A frozen model whose instances share their fields-set object (``_shared_fields_set``):
    the events and blocks here, the lifted state's items (``lifting.state``). Only for frozen
    models: a mutable one would change the shared set on assignment."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _shape_keys(cls)

    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", _shared_fields_set(self.__pydantic_fields_set__))

    def model_copy(self, *, update: Any = None, deep: bool = False) -> Any:
        out = super().model_copy(update=update, deep=deep)
        fields = out.__pydantic_fields_set__
        if len(fields) == len(self.__pydantic_fields_set__):  # nothing new: share the original's
            object.__setattr__(out, "__pydantic_fields_set__", self.__pydantic_fields_set__)
        else:
            object.__setattr__(out, "__pydantic_fields_set__", _shared_fields_set(fields))
        return out


def _shape_keys(cls: type[BaseModel]) -> None:
    """Put the names of ``cls``'s fields, then of its cached properties (``_cached``), in its
    shared key table, in that order, before any instance is made (issue 17, memory).

    An instance ``trusted`` builds keeps its fields in a values array keyed by that table
    (see there), which only has room for keys the table holds or can still take: each new
    instance - a validated one too - takes one from the room a table starts with (~30), so
    a key first set after ~30 validated instances (a test module's constants, an import that
    validates first) turned every later instance's array into a dict of its own (344 bytes a
    text block instead of 112), and a property cached after the instance was made would too."""
    m = _new(cls)
    for name in cls.model_fields:
        _set_slot(m, name, None)
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, _cached):
                _set_slot(m, name, None)


class _Model(SharedFieldsSet):
    model_config = ConfigDict(extra="forbid", frozen=True)




def trusted(cls: type[_M], values: dict[str, Any], names: set[str]) -> _M:
    """``cls.model_construct(_fields_set=names, **values)`` without its per-field Python loop,
    for values the caller built and checked itself (issue 17: validating the blocks and events
    an importer has just made was a fifth of a big import's CPU).

    ``values`` must hold every field of ``cls``, in field order, each already of the exact type
    validation would give it (the same objects validation keeps: str, int, bool, datetime,
    block models, lists and dicts it would have copied); ``names`` is the fields-set validation
    would record, shared (``_shared_fields_set``). Dumps then equal a validated instance's.
    Only for the frozen models here (no extra fields, no private attributes).

    The fields are stored one by one, not as a ``__dict__`` of their own (issue 17, memory):
    CPython (3.11+) then keeps them in a values array keyed by the class's shared key table
    (PEP 412), and the instance's ``__dict__`` (made on first use) has the same items in the
    same order. The array has a slot per key the table holds and one spare, once the class
    has ~30 instances (the first ones get room for more): an event's 11 fields and 3 cached
    properties take ~320 bytes less than a dict of their own, a text block 112 bytes with its
    object instead of 264 (the block's dict and its key table), a lifted ``FileRef`` 297 with
    its two lists instead of 473. The class's key table holds the names from its creation
    (``_shape_keys``). A dict made later (a dump, an equality test) is a 64-byte view of the
    same array.
    """
    if cls is Event:
        return trusted_event(**values, names=names)  # type: ignore[return-value]
    m = _new(cls)
    for name, value in values.items():  # each into the class's shared-key values, in field order
        _set_slot(m, name, value)
    return _validated_state(m, names)


def trusted_event(seq: int, id: str, at: datetime | None, kind: str, role: str, blocks: list[Any],
                  tokens: int | None, usage: Usage | None, injected: bool, source: str | None,
                  meta: dict[str, Any], names: set[str]) -> Event:
    """``trusted(Event, {...}, names)``, the fields given one by one (issue 17: an imported
    event's values were put in a dict only to be read back out of it). The same rules as
    ``trusted``: values of the exact types validation keeps, ``names`` shared."""
    m = _new(Event)
    # each into the class's shared-key values, in field order (see ``trusted``)
    _set_slot(m, "seq", seq)
    _set_slot(m, "id", id)
    _set_slot(m, "at", at)
    _set_slot(m, "kind", kind)
    _set_slot(m, "role", role)
    _set_slot(m, "blocks", blocks)
    _set_slot(m, "tokens", tokens)
    _set_slot(m, "usage", usage)
    _set_slot(m, "injected", injected)
    _set_slot(m, "source", source)
    _set_slot(m, "meta", meta)
    return _validated_state(m, names)




def _validated_state(m: _M, names: set[str]) -> _M:
    """What validation sets on a model beside its fields: the names set, no extra, no private."""
    _set_slot(m, "__pydantic_fields_set__", names)
    _set_slot(m, "__pydantic_extra__", None)
    _set_slot(m, "__pydantic_private__", None)
    return m


# --- blocks -----------------------------------------------------------------------------------


class TextBlock(_Model):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Model):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = Field(default=None, description="Provider signature, opaque.")


class ArtifactRefBlock(_Model):
    """Content moved to the artifact store; the view keeps previews and the reference."""

    type: Literal["artifact_ref"] = "artifact_ref"
    uri: str = Field(description="Where the bytes live, e.g. artifact://sha256/<hex>.")
    sha256: str = Field(description="Hex sha256 of the stored bytes; verified on read.")
    bytes: int = Field(description="Size of the stored content in bytes.")
    preview_head: str = Field(default="", description="First characters of the content.")
    preview_tail: str = Field(default="", description="Last characters of the content.")
    media_type: str = Field(default="text/plain")


class ImageBlock(_Model):
    """An image; large data is held by artifact reference, never inline in the log."""

    type: Literal["image"] = "image"
    media_type: str = "image/png"
    ref: ArtifactRefBlock | None = None
    data: str | None = Field(default=None, description="Base64 data, only for small images.")


class ToolUseBlock(_Model):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


ToolResultContent = Annotated[
    Union[TextBlock, ImageBlock, ArtifactRefBlock], Field(discriminator="type")
]


class ToolResultBlock(_Model):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: list[ToolResultContent] = Field(default_factory=list)
    is_error: bool = False

    @property
    def text(self) -> str:
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))


class CompactionBlock(_Model):
    """A summary made by a compaction (the source agent's, a provider's native one, or ours).

    ``raw`` holds a provider block that must be replayed verbatim (Anthropic native compaction).
    """

    type: Literal["compaction"] = "compaction"
    content: str = ""
    raw: dict[str, Any] | None = None


Block = Annotated[
    Union[
        TextBlock,
        ThinkingBlock,
        ImageBlock,
        ToolUseBlock,
        ToolResultBlock,
        ArtifactRefBlock,
        CompactionBlock,
    ],
    Field(discriminator="type"),
]


# --- events -----------------------------------------------------------------------------------


_NONE: list[Any] = []
"""The ``tool_uses``/``tool_results`` of every event that has none (read-only, like theirs)."""


EventKind = Literal["message", "pinned", "compaction"]
Role = Literal["user", "assistant", "system"]


class Usage(_Model):
    """Token usage the model provider reported for the request that produced this event."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """Everything the provider counted as context for that request."""
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


class Event(_Model):
    """One entry of a session log.

    ``kind``: ``message`` (ordinary turn), ``pinned`` (system/developer instructions that are
    re-injected and never summarized), ``compaction`` (a compaction the source agent made
    itself; its summary is a CompactionBlock, kept rather than silently dropped).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(_cached,))

    seq: int = Field(default=0, ge=0, description="1-based, gap-free per session; 0 until appended.")
    id: str = Field(min_length=1, max_length=256, description="Client idempotency key.")
    at: datetime | None = None
    kind: EventKind = "message"
    role: Role
    blocks: list[Block] = Field(default_factory=list)
    tokens: int | None = Field(default=None, description="Counted once at append, cached.")
    usage: Usage | None = None
    injected: bool = Field(
        default=False, description="Context the harness injected, not typed by the human."
    )
    source: str | None = Field(default=None, description="Importer format that produced it.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Source-specific extras.")

    @model_validator(mode="after")
    def _check(self) -> Event:
        if self.kind == "pinned" and self.role == "assistant":
            raise ValueError("pinned events are system/developer/user instructions, not assistant")
        return self

    # convenience -------------------------------------------------------------------------
    # Cached on first use (the engine reads them dozens of times per event and compaction;
    # an event is frozen and its blocks are never changed in place). The returned lists are
    # shared: do not mutate them (an event without calls or results shares one empty list with
    # every other: 56 bytes an event, issue 17; an event of results only shares its ``blocks``).
    # ``model_copy`` drops them when it changes the blocks.
    @_cached
    def text(self) -> str:
        parts: list[str] = []
        for b in self.blocks:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, CompactionBlock):
                parts.append(b.content)
        return "\n".join(parts)

    @_cached
    def tool_uses(self) -> list[ToolUseBlock]:
        return _of_type(self.blocks, ToolUseBlock)

    @_cached
    def tool_results(self) -> list[ToolResultBlock]:
        return _of_type(self.blocks, ToolResultBlock)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Event:
        copied = super().model_copy(update=update, deep=deep)
        if update and "blocks" in update:  # the cached values are read from the blocks
            for name in _EVENT_CACHES:
                copied.__dict__.pop(name, None)
        return copied

    @property
    def is_user_request(self) -> bool:
        """A genuine user request: typed by the human, with text, not a tool result carrier."""
        return (
            self.kind == "message"
            and self.role == "user"
            and not self.injected
            and not self.tool_results
            and bool(self.text.strip())
        )

    def with_(self, **changes: Any) -> Event:
        return self.model_copy(update=changes)

    def to_json_line(self) -> str:
        return self.model_dump_json(exclude_none=True)

    @classmethod
    def from_json_line(cls, line: str | bytes) -> Event:
        return cls.model_validate_json(line)


_EVENT_CACHES = ("text", "tool_uses", "tool_results")


def _of_type(blocks: list[Any], cls: type) -> list[Any]:
    """The blocks that are ``cls`` instances, in order, as a read-only list (issue 17, memory):
    ``_NONE`` when there are none, ``blocks`` itself when every block is one (a tool-result
    event's results: 88 bytes less), else a list of exactly their number (a grown list keeps
    room for four: 24 bytes more for one)."""
    found = [b for b in blocks if isinstance(b, cls)]
    if not found:
        return _NONE
    return blocks if len(found) == len(blocks) else found[:]


def content_hash(events: Iterable[Event]) -> str:
    """Stable hash of events' content (seq, id, kind, role, blocks): a checkpoint's source_hash."""
    h = hashlib.sha256()
    for e in events:
        h.update(content_hash_line(e))
    return h.hexdigest()


def content_hash_line(e: Event) -> bytes:
    """One event's part of ``content_hash`` (a running sha256 over these, in order): the JSON
    dump of its seq, id, kind, role and blocks (``model_dump(mode="json")``), keys sorted,
    ASCII, no spaces, and a newline (``_dumped_line``).

    Written directly for the blocks most events hold - text, thinking, a tool call whose input
    is plain JSON (str keys; str, int, bool, None, finite float, list and dict values), a tool
    result of texts - and dumped by pydantic otherwise (issue 17: a ``model_dump`` and a JSON
    dump per event were 15-20 us of every event of a compaction, for the checkpoint id and the
    source hash). The same bytes (``tests/unit/test_content_hash.py``)."""
    seq = e.seq
    if type(seq) is not int:
        return _dumped_line(e)
    # (each piece one f-string: its parts joined in one allocation, not a chain of concatenations)
    parts = []
    add = parts.append
    for b in e.blocks:
        t = type(b)
        if t is TextBlock:
            add(f'{{"text":{_ascii(b.text)},"type":"text"}}')
        elif t is ToolUseBlock:
            inp = b.input
            if type(inp) is not dict:
                return _dumped_line(e)
            if len(inp) == 1:  # (most: one str argument, e.g. a shell command; written as the dump)
                for k, v in inp.items():
                    if type(k) is str and type(v) is str and k.isascii():
                        inp_json = f'{{{_ascii(k)}:{_ascii(v)}}}'
                    elif _plain_dict(inp):
                        inp_json = _sorted_json(inp)
                    else:
                        return _dumped_line(e)
            elif _plain_dict(inp):
                inp_json = _sorted_json(inp)
            else:
                return _dumped_line(e)
            add(f'{{"id":{_ascii(b.id)},"input":{inp_json},"name":{_ascii(b.name)},"type":"tool_use"}}')
        elif t is ToolResultBlock:
            err = b.is_error
            if err is not True and err is not False:
                return _dumped_line(e)
            content = b.content
            if len(content) == 1 and type(content[0]) is TextBlock:  # (most: one text)
                texts = f'{{"text":{_ascii(content[0].text)},"type":"text"}}'
            else:
                pieces = []
                for c in content:
                    if type(c) is not TextBlock:
                        return _dumped_line(e)
                    pieces.append(f'{{"text":{_ascii(c.text)},"type":"text"}}')
                texts = ",".join(pieces)
            add(f'{{"content":[{texts}],"is_error":{"true" if err else "false"},'
                f'"tool_use_id":{_ascii(b.tool_use_id)},"type":"tool_result"}}')
        elif t is ThinkingBlock:
            sig = b.signature
            add(f'{{"signature":{"null" if sig is None else _ascii(sig)},"thinking":{_ascii(b.thinking)},'
                f'"type":"thinking"}}')
        else:
            return _dumped_line(e)
    return (f'{{"blocks":[{",".join(parts)}],"id":{_ascii(e.id)},"kind":{_ascii(e.kind)},"role":{_ascii(e.role)},'
            f'"seq":{seq}}}\n').encode()


def _dumped_line(e: Event) -> bytes:
    """``content_hash_line`` by its definition: pydantic's JSON-mode dump, then ``json.dumps``."""
    return json.dumps(
        e.model_dump(mode="json", include={"seq", "id", "kind", "role", "blocks"}),
        sort_keys=True,
        separators=(",", ":"),
    ).encode() + b"\n"


_ascii = json.encoder.encode_basestring_ascii  # what json.dumps writes a str as (ensure_ascii)


def _no_default(o: Any) -> Any:
    raise TypeError(f"not plain JSON: {type(o).__name__}")


_C_SORTED = getattr(json.encoder, "c_make_encoder", None)
if _C_SORTED is not None:  # markers None: no circular check (a plain value is a tree: _plain_dict)
    _C_SORTED = _C_SORTED(None, _no_default, _ascii, None, ":", ",", True, False, False)


def _sorted_json(value: dict[str, Any]) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))`` of a plain dict."""
    if _C_SORTED is None:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "".join(_C_SORTED(value, 0))


def _plain_dict(d: dict[Any, Any], depth: int = 0) -> bool:
    """``d`` is plain JSON, which pydantic's JSON-mode dump returns as it is: exact ``str``
    keys, ASCII (pydantic encodes a key to UTF-8: a lone surrogate in one raises); exact str,
    int, bool, None, finite float, list and dict values (a tuple, a non-finite float, a
    non-str key or any other type is dumped by pydantic's rules: the caller falls back to its
    dump)."""
    for k, x in d.items():
        if type(k) is not str or not k.isascii():
            return False
        t = type(x)
        if t is str or t is int or t is bool or x is None:
            continue
        if not _plain(x, t, depth):
            return False
    return True


def _plain(x: Any, t: type, depth: int) -> bool:
    if t is float:
        return math.isfinite(x)
    if depth > 64:  # (deeper than any tool input: left to pydantic)
        return False
    if t is dict:
        return _plain_dict(x, depth + 1)
    if t is list:
        for y in x:
            ty = type(y)
            if not (ty is str or ty is int or ty is bool or y is None or _plain(y, ty, depth + 1)):
                return False
        return True
    return False


# --- provider shapes --------------------------------------------------------------------------


def _block_to_anthropic(b: Any) -> dict[str, Any] | None:
    if isinstance(b, TextBlock):
        # The API rejects empty and whitespace-only text blocks (models do return "\n\n").
        return {"type": "text", "text": b.text} if b.text.strip() else None
    if isinstance(b, ThinkingBlock):
        # Thinking without a valid signature is rejected by the API; send it as text instead.
        return None
    if isinstance(b, ToolUseBlock):
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    if isinstance(b, ToolResultBlock):
        content: list[dict[str, Any]] = []
        for c in b.content:
            if isinstance(c, TextBlock):
                if c.text.strip():
                    content.append({"type": "text", "text": c.text})
            elif isinstance(c, ArtifactRefBlock):
                content.append({"type": "text", "text": render_artifact_ref(c)})
            elif isinstance(c, ImageBlock):
                if c.data:
                    content.append(
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": c.media_type, "data": c.data},
                        }
                    )
                else:
                    content.append({"type": "text", "text": f"[image {c.ref.uri if c.ref else ''}]"})
        out: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_use_id, "content": content}
        if b.is_error:
            out["is_error"] = True
        return out
    if isinstance(b, ArtifactRefBlock):
        return {"type": "text", "text": render_artifact_ref(b)}
    if isinstance(b, ImageBlock):
        if b.data:
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": b.media_type, "data": b.data},
            }
        return {"type": "text", "text": f"[image {b.ref.uri if b.ref else ''}]"}
    if isinstance(b, CompactionBlock):
        if b.raw is not None:
            return dict(b.raw)
        return {"type": "text", "text": b.content} if b.content.strip() else None
    raise TypeError(f"unknown block {b!r}")


def render_artifact_ref(b: ArtifactRefBlock) -> str:
    head = b.preview_head
    tail = b.preview_tail
    return (
        f"[output stored as {b.uri} ({b.bytes} bytes, sha256 {b.sha256[:12]}); preview:]\n"
        f"{head}\n...\n{tail}"
    )


def to_anthropic(events: Iterable[Event]) -> tuple[str, list[dict[str, Any]]]:
    """Events -> (system, messages) for the Anthropic Messages API.

    Pinned system-role events become the system prompt; consecutive same-role events merge
    into one message so roles alternate; tool_result blocks lead their user message, as the API
    requires. A leading assistant message gets a placeholder user turn before it.
    """
    system_parts: list[str] = []
    messages: list[dict[str, Any]] = []
    for e in events:
        if e.role == "system":
            if e.kind == "pinned" or e.injected:
                system_parts.append(e.text)
                continue
            role = "user"
        else:
            role = e.role
        blocks = [x for x in (_block_to_anthropic(b) for b in e.blocks) if x is not None]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    for m in messages:
        if m["role"] == "user":
            # tool_result blocks must come first in a user message
            m["content"].sort(key=lambda blk: 0 if blk["type"] == "tool_result" else 1)
    if messages and messages[0]["role"] != "user" and not is_native_compaction(messages[0]):
        messages.insert(0, {"role": "user", "content": [{"type": "text", "text": "(continued)"}]})
    return "\n\n".join(p for p in system_parts if p), messages


def is_native_compaction(message: dict[str, Any]) -> bool:
    """An assistant message that opens with a provider compaction block (replayed verbatim)."""
    content = message.get("content")
    return (
        message.get("role") == "assistant"
        and isinstance(content, list)
        and bool(content)
        and content[0].get("type") == "compaction"
    )


def to_openai(events: Iterable[Event]) -> list[dict[str, Any]]:
    """Events -> OpenAI chat-completions message list (tool calls as `tool` messages)."""
    out: list[dict[str, Any]] = []
    for e in events:
        if e.role == "system":
            out.append({"role": "system", "content": e.text})
            continue
        if e.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": e.text or None}
            calls = [
                {
                    "id": u.id,
                    "type": "function",
                    "function": {"name": u.name, "arguments": json.dumps(u.input)},
                }
                for u in e.tool_uses
            ]
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
            continue
        for r in e.tool_results:
            text = "\n".join(
                c.text if isinstance(c, TextBlock) else render_artifact_ref(c)
                for c in r.content
                if isinstance(c, (TextBlock, ArtifactRefBlock))
            )
            out.append({"role": "tool", "tool_call_id": r.tool_use_id, "content": text})
        if e.text:
            out.append({"role": "user", "content": e.text})
    return out
