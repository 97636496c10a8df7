"""A stored segment's events decoded without pydantic's validation pass (issue 17).

Every durable compaction decodes the session's new segments, and ``view``, ``verify`` and
``inspect`` decode the whole log. ``TypeAdapter(list[Event]).validate_json`` gives each event
and block a ``__dict__`` of its own and calls ``model_post_init`` (the shared fields-set) per
model; the importers build their events without validation (``events.trusted``).

``trusted_events`` parses the segment's JSON array with pydantic-core's own JSON parser
(``from_json``: the parser ``validate_json`` uses, so the same numbers, strings, escapes, depth
limit and duplicate-key rule), checks by hand what validation checks of each field of each
model (exact types - no lax coercion -, the literals and block tags, ``id``'s length,
``seq >= 0``, no unknown key, ``Event._check``'s rule; ``at`` through pydantic-core's datetime
validator) and builds the instances validation gives: the same field values in field order,
the same fields-set (the keys the JSON object holds, shared as validation shares it), so
``==``, ``model_dump`` and ``model_dump_json`` are the same. Each model's fields go into the
class's shared key table (``events.trusted``'s reason; set through the instance's ``__dict__``,
half the calls of ``trusted_event``): ~380 bytes an event less than a validated one.

It returns None - and the caller validates the bytes, which raises what it always raised - for
anything it does not accept: bytes the parser refuses, any unknown key, block type, type or
constraint, an int beyond 64 bits, a value nested deeper than ``_MAX_DEPTH`` in ``meta``, a
call's ``input`` or a summary's ``raw``. Nothing partial is kept: one refused event sends the
whole segment to validation.

Measured (docs/bench-perf.md, round nineteen ``dec20``): the decode itself costs about what
validation costs (callgrind: ~60k instructions an event against ~56k; the parse alone is
~18k), the events hold ~22% less memory, and readers that then use them (``view``) spend less.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import from_json

from compactor.events import (
    ArtifactRefBlock,
    CompactionBlock,
    Event,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    _shared_fields_set,
    trusted,
)

_new = object.__new__
# what validation sets on a model beside its fields (``events._validated_state``), by the slots'
# own descriptors
_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__
#: Deepest container nesting accepted inside ``meta``, a call's ``input``, a summary's ``raw``.
_MAX_DEPTH = 64
_INT_MAX = (1 << 63) - 1
_KINDS = frozenset({"message", "pinned", "compaction"})
_ROLES = frozenset({"user", "assistant", "system"})
#: ``datetime`` validation of a string, as a model field's (pydantic-core's own parser).
_DATETIME = TypeAdapter(datetime).validator.validate_python


class _Refused(Exception):
    """The fast path does not take this segment (validation decides)."""


def trusted_events(data: bytes) -> list[Event] | None:
    """``TypeAdapter(list[Event]).validate_json(data)`` for a segment's JSON array, or None
    where this path does not accept the bytes (module docstring)."""
    try:
        items = from_json(data)
        if type(items) is not list:
            return None
        out: list[Event] = [None] * len(items)  # type: ignore[list-item]
        for i, d in enumerate(items):
            out[i] = _event(d)
        return out
    except Exception:  # (_Refused, a missing key, a wrong type, bad JSON: validation decides)
        return None


def _names(cls: type, d: dict[str, Any], cache: dict[tuple[str, ...], set[str]]) -> set[str]:
    """The shared fields-set of ``cls`` validated from ``d`` (its keys), refused on an unknown key."""
    keys = tuple(d)
    names = cache.get(keys)
    if names is None:
        if not set(keys) <= cls.model_fields.keys():  # type: ignore[attr-defined]
            raise _Refused(cls.__name__)
        names = cache[keys] = _shared_fields_set(set(keys))
    return names


_EVENT_NAMES: dict[tuple[str, ...], set[str]] = {}
_TEXT_NAMES: dict[tuple[str, ...], set[str]] = {}
_USE_NAMES: dict[tuple[str, ...], set[str]] = {}
_RESULT_NAMES: dict[tuple[str, ...], set[str]] = {}
_OTHER_NAMES: dict[type, dict[tuple[str, ...], set[str]]] = {}
_TEXT_TYPE = _shared_fields_set({"type", "text"})
_USE_ALL = _shared_fields_set({"type", "id", "name", "input"})
_RESULT_ALL = _shared_fields_set({"type", "tool_use_id", "content", "is_error"})


def _str(v: Any) -> str:
    if type(v) is not str:
        raise _Refused("str")
    return v


def _opt_str(v: Any) -> str | None:
    if v is not None and type(v) is not str:
        raise _Refused("str | None")
    return v


def _int(v: Any) -> int:
    if type(v) is not int or not -_INT_MAX <= v <= _INT_MAX:
        raise _Refused("int")
    return v


def _bool(v: Any) -> bool:
    if v is not True and v is not False:
        raise _Refused("bool")
    return v


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """A ``dict[str, Any]`` value as validation keeps it: the decoded dict, refused if nested
    deeper than pydantic-core's parser goes."""
    if type(d) is not dict:
        raise _Refused("dict")
    for v in d.values():
        t = type(v)
        if t is dict or t is list:
            _depth(d, 0)
            break
    return d


def _depth(v: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _Refused("depth")
    for x in (v.values() if type(v) is dict else v):
        t = type(x)
        if t is dict or t is list:
            _depth(x, depth + 1)


def _text(d: dict[str, Any]) -> TextBlock:
    text = d["text"]
    if len(d) == 2:  # (``type`` and ``text``: the only keys a text block can have two of)
        fields = _TEXT_TYPE
    else:
        fields = _TEXT_NAMES.get(tuple(d)) or _names(TextBlock, d, _TEXT_NAMES)
    if type(text) is not str:
        raise _Refused("text")
    m = _new(TextBlock)
    v = m.__dict__  # (the fields into the class's shared keys, in field order)
    v["type"] = "text"
    v["text"] = text
    _FIELDS_SET(m, fields)
    _EXTRA(m, None)
    _PRIVATE(m, None)
    return m


def _tool_use(d: dict[str, Any]) -> ToolUseBlock:
    if len(d) == 4 and "input" in d and "name" in d and "id" in d:  # (and ``type``)
        fields = _USE_ALL
    else:
        fields = _USE_NAMES.get(tuple(d)) or _names(ToolUseBlock, d, _USE_NAMES)
    bid = d["id"]
    name = d["name"]
    if type(bid) is not str or type(name) is not str:
        raise _Refused("tool_use")
    inp = _plain(d["input"]) if "input" in d else {}
    m = _new(ToolUseBlock)
    v = m.__dict__
    v["type"] = "tool_use"
    v["id"] = bid
    v["name"] = name
    v["input"] = inp
    _FIELDS_SET(m, fields)
    _EXTRA(m, None)
    _PRIVATE(m, None)
    return m


def _tool_result(d: dict[str, Any]) -> ToolResultBlock:
    if len(d) == 4 and "content" in d and "is_error" in d and "tool_use_id" in d:  # (and ``type``)
        fields = _RESULT_ALL
    else:
        fields = _RESULT_NAMES.get(tuple(d)) or _names(ToolResultBlock, d, _RESULT_NAMES)
    use_id = d["tool_use_id"]
    err = d["is_error"] if "is_error" in d else False
    if type(use_id) is not str or (err is not True and err is not False):
        raise _Refused("tool_result")
    if "content" in d:
        items = d["content"]
        if type(items) is not list:
            raise _Refused("content")
        content = [None] * len(items)
        for i, c in enumerate(items):
            content[i] = _RESULT_CONTENT[c["type"]](c)
    else:
        content = []
    m = _new(ToolResultBlock)
    v = m.__dict__
    v["type"] = "tool_result"
    v["tool_use_id"] = use_id
    v["content"] = content
    v["is_error"] = err
    _FIELDS_SET(m, fields)
    _EXTRA(m, None)
    _PRIVATE(m, None)
    return m


_ABSENT: Any = object()


def _other_names(cls: type, d: dict[str, Any]) -> set[str]:
    cache = _OTHER_NAMES.get(cls)
    if cache is None:
        cache = _OTHER_NAMES[cls] = {}
    return cache.get(tuple(d)) or _names(cls, d, cache)


def _thinking(d: dict[str, Any]) -> ThinkingBlock:
    names = _other_names(ThinkingBlock, d)
    return trusted(ThinkingBlock, {"type": "thinking", "thinking": _str(d["thinking"]),
                                   "signature": _opt_str(d.get("signature"))}, names)


def _artifact_ref(d: dict[str, Any]) -> ArtifactRefBlock:
    names = _other_names(ArtifactRefBlock, d)
    if d.get("type", "artifact_ref") != "artifact_ref":  # (the tag, or a nested ``ref``'s)
        raise _Refused("type")
    return trusted(ArtifactRefBlock, {
        "type": "artifact_ref",
        "uri": _str(d["uri"]),
        "sha256": _str(d["sha256"]),
        "bytes": _int(d["bytes"]),
        "preview_head": _str(d.get("preview_head", "")),
        "preview_tail": _str(d.get("preview_tail", "")),
        "media_type": _str(d.get("media_type", "text/plain")),
    }, names)


def _image(d: dict[str, Any]) -> ImageBlock:
    names = _other_names(ImageBlock, d)
    ref = d.get("ref")
    if ref is not None:
        if type(ref) is not dict:
            raise _Refused("ref")
        ref = _artifact_ref(ref)
    return trusted(ImageBlock, {
        "type": "image",
        "media_type": _str(d.get("media_type", "image/png")),
        "ref": ref,
        "data": _opt_str(d.get("data")),
    }, names)


def _compaction(d: dict[str, Any]) -> CompactionBlock:
    names = _other_names(CompactionBlock, d)
    raw = d.get("raw")
    return trusted(CompactionBlock, {
        "type": "compaction",
        "content": _str(d.get("content", "")),
        "raw": None if raw is None else _plain(raw),
    }, names)


def _usage(d: Any) -> Usage:
    if type(d) is not dict:
        raise _Refused("usage")
    names = _other_names(Usage, d)
    g = d.get
    return trusted(Usage, {
        "input_tokens": _int(g("input_tokens", 0)),
        "output_tokens": _int(g("output_tokens", 0)),
        "cache_read_input_tokens": _int(g("cache_read_input_tokens", 0)),
        "cache_creation_input_tokens": _int(g("cache_creation_input_tokens", 0)),
    }, names)


# the discriminator's tags (a ``str`` key: any other JSON value misses or is unhashable)
_BLOCK = {
    "text": _text,
    "tool_use": _tool_use,
    "tool_result": _tool_result,
    "thinking": _thinking,
    "artifact_ref": _artifact_ref,
    "image": _image,
    "compaction": _compaction,
}
_RESULT_CONTENT = {"text": _text, "image": _image, "artifact_ref": _artifact_ref}


#: An event's fields in field order, each at its default (``_ABSENT``: none, or a new list/dict)
_EVENT_DEFAULTS = {"seq": 0, "id": _ABSENT, "at": None, "kind": "message", "role": _ABSENT, "blocks": _ABSENT,
                   "tokens": None, "usage": None, "injected": False, "source": None, "meta": _ABSENT}


def _event(d: Any, names: dict[tuple[str, ...], set[str]] = _EVENT_NAMES) -> Event:
    if type(d) is not dict:
        raise _Refused("event")
    fields = names.get(tuple(d)) or _names(Event, d, names)
    # (every key is a field: merged into the defaults, in field order)
    seq, eid, at, kind, role, raw, tokens, usage, injected, source, meta = {**_EVENT_DEFAULTS, **d}.values()
    if (
        type(seq) is not int
        or not 0 <= seq <= _INT_MAX
        or type(eid) is not str
        or not 0 < len(eid) <= 256
        or type(kind) is not str
        or kind not in _KINDS
        or type(role) is not str
        or role not in _ROLES
        or (kind == "pinned" and role == "assistant")  # Event._check
        or (tokens is not None and (type(tokens) is not int or not -_INT_MAX <= tokens <= _INT_MAX))
        or (source is not None and type(source) is not str)
        or (injected is not True and injected is not False)
    ):
        raise _Refused("event")
    if at is not None:
        if type(at) is not str:
            raise _Refused("at")
        at = _DATETIME(at)
    if raw is _ABSENT:
        blocks: list[Any] = []
    elif type(raw) is not list:
        raise _Refused("blocks")
    elif len(raw) == 1:  # (a list of exactly its length, as validation's)
        blocks = [_BLOCK[raw[0]["type"]](raw[0])]
    else:
        blocks = [None] * len(raw)
        for i, b in enumerate(raw):
            blocks[i] = _BLOCK[b["type"]](b)
    if usage is not None:
        usage = _usage(usage)
    meta = {} if meta is _ABSENT else _plain(meta)
    m = _new(Event)
    v = m.__dict__  # (the fields into the class's shared keys, in field order)
    v["seq"] = seq
    v["id"] = eid
    v["at"] = at
    v["kind"] = kind
    v["role"] = role
    v["blocks"] = blocks
    v["tokens"] = tokens
    v["usage"] = usage
    v["injected"] = injected
    v["source"] = source
    v["meta"] = meta
    _FIELDS_SET(m, fields)
    _EXTRA(m, None)
    _PRIVATE(m, None)
    return m
