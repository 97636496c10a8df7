"""Blocks and events built from values the importer has already checked, without pydantic
re-validating them (issue 17: three to four ``validate_python`` calls and as many
``model_post_init`` per imported event were a fifth of a big import's CPU).

Each builder gives the same instance validation would - the same field values (the very
objects validation keeps), the same ``model_fields_set``, the shared fields-set - so dumps,
stored segments, hashes and views are byte-identical. Where a value is not of the exact type
validation would keep unchanged (a ``str`` subclass, a non-ASCII id validation must check, a
non-``str`` key), the builder falls back to the validating constructor, so a bad value still
fails as before.

Repeated strings (tool names, tool-input keys, model names) are interned: every JSONL line is
parsed on its own, so each line held its own copy of ``"Bash"`` and ``"command"``.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

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
    trusted_event,
)

intern = sys.intern
_M = TypeVar("_M", bound=BaseModel)

_TEXT = _shared_fields_set({"text"})
_TOOL_USE = _shared_fields_set({"id", "name", "input"})
_TOOL_RESULT = _shared_fields_set({"tool_use_id", "content", "is_error"})
_THINKING = _shared_fields_set({"thinking", "signature"})
_USAGE = _shared_fields_set(
    {"input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}
)
#: What ``Event(seq=, id=, at=, kind=, role=, blocks=, usage=, injected=, source=, meta=)`` sets.
EVENT_FIELDS_SET = _shared_fields_set(
    {"seq", "id", "at", "kind", "role", "blocks", "usage", "injected", "source", "meta"}
)
#: The same with ``tokens`` (an event counted as it is made: ``tokens.count_into``'s set).
EVENT_FIELDS_SET_TOKENS = _shared_fields_set(EVENT_FIELDS_SET | {"tokens"})

_BLOCK_TYPES = frozenset(
    {TextBlock, ThinkingBlock, ImageBlock, ToolUseBlock, ToolResultBlock, ArtifactRefBlock, CompactionBlock}
)
_RESULT_CONTENT_TYPES = frozenset({TextBlock, ImageBlock, ArtifactRefBlock})
_STR = frozenset({str})
_KINDS = frozenset({"message", "pinned", "compaction"})
_ROLES = frozenset({"user", "assistant", "system"})
#: ``Event.id``'s length bounds (validation counts characters).
_ID_MAX = 256


def text_block(text: Any) -> TextBlock:
    """``TextBlock(text=text)``."""
    if type(text) is str:  # (``_block``, inlined: the most frequent block)
        m = _new(TextBlock)
        _set_dict(m, {"type": "text", "text": text})
        _set_fields_set(m, _TEXT)
        _set_extra(m, None)
        _set_private(m, None)
        return m
    return TextBlock(text=text)


_new = object.__new__


def _slot_setter(name: str) -> Any:
    """The setter of ``BaseModel``'s slot ``name``: its descriptor's, called directly (issue
    17: a third cheaper than ``object.__setattr__``, which looks the name up along the class's
    bases and checks them on every call; the same slot set)."""
    desc = BaseModel.__dict__.get(name)
    setter = getattr(desc, "__set__", None)
    if setter is None:  # (a pydantic laid out otherwise)
        return lambda m, value: object.__setattr__(m, name, value)
    return setter


_set_dict = _slot_setter("__dict__")
_set_fields_set = _slot_setter("__pydantic_fields_set__")
_set_extra = _slot_setter("__pydantic_extra__")
_set_private = _slot_setter("__pydantic_private__")


def _block(cls: type[_M], values: dict[str, Any], names: set[str]) -> _M:
    """``events.trusted(cls, values, names)`` of a block (or usage): the same instance, its
    slots set through their descriptors."""
    m = _new(cls)
    _set_dict(m, values)
    _set_fields_set(m, names)
    _set_extra(m, None)
    _set_private(m, None)
    return m


def thinking_block(thinking: Any, signature: Any) -> ThinkingBlock:
    """``ThinkingBlock(thinking=thinking, signature=signature)``."""
    if type(thinking) is str and (signature is None or type(signature) is str):
        return _block(ThinkingBlock, {"type": "thinking", "thinking": thinking, "signature": signature}, _THINKING)
    return ThinkingBlock(thinking=thinking, signature=signature)


def tool_use_block(id: Any, name: Any, input: Any) -> ToolUseBlock:
    """``ToolUseBlock(id=id, name=name, input=input)``: the input dict copied as validation
    copies it, its keys and the tool's name interned."""
    if type(id) is str and type(name) is str and type(input) is dict:
        copied: dict[str, Any] = {}
        for k, v in input.items():
            if type(k) is not str:
                break
            copied[intern(k)] = v
        else:
            return _block(
                ToolUseBlock, {"type": "tool_use", "id": id, "name": intern(name), "input": copied}, _TOOL_USE
            )
    return ToolUseBlock(id=id, name=name, input=input)


def tool_result_block(tool_use_id: Any, content: list[Any], is_error: bool) -> ToolResultBlock:
    """``ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)``;
    ``content`` is copied as validation copies it."""
    if (
        type(tool_use_id) is str
        and type(content) is list
        and type(is_error) is bool
        and _RESULT_CONTENT_TYPES.issuperset(map(type, content))
    ):
        return _block(
            ToolResultBlock,
            # a copy of exactly its length, as validation makes (a list grown by appends holds
            # spare room: 24 bytes more for one block)
            {"type": "tool_result", "tool_use_id": tool_use_id, "content": content[:], "is_error": is_error},
            _TOOL_RESULT,
        )
    return ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)


def usage(input_tokens: int, output_tokens: int, cache_read: int, cache_creation: int) -> Usage:
    """``Usage(...)`` of four ints (``_common.usage_of`` made them with ``int``)."""
    if type(input_tokens) is int and type(output_tokens) is int and type(cache_read) is int and type(cache_creation) is int:
        return _block(
            Usage,
            {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_creation,
            },
            _USAGE,
        )
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_input_tokens=cache_read,
        cache_creation_input_tokens=cache_creation,
    )


def event(
    seq: int,
    id: str,
    at: datetime | None,
    kind: str,
    role: str,
    blocks: list[Any],
    usage: Usage | None,
    injected: bool,
    source: str,
    meta: dict[str, Any],
    tokens: int | None = None,
) -> Event:
    """``Event(seq=, id=, at=, kind=, role=, blocks=, usage=, injected=, source=, meta=)``;
    ``blocks`` is copied as validation copies it, ``meta`` is the caller's own (kept, where
    validation would copy it). ``tokens``: the event's count (``count_blocks`` of ``blocks``),
    set as ``tokens.count_into`` sets it; only on an event made without validation (the
    caller counts one that ``tokens`` is still None on)."""
    if (
        type(seq) is int
        and seq >= 0
        and type(id) is str
        and 0 < len(id) <= _ID_MAX
        and id.isascii()  # validation checks a constrained str is valid UTF-8 (no lone surrogate)
        and (at is None or type(at) is datetime)
        and type(kind) is str
        and kind in _KINDS
        and type(role) is str
        and role in _ROLES
        and not (kind == "pinned" and role == "assistant")  # Event._check's rule
        and type(blocks) is list
        and _BLOCK_TYPES.issuperset(map(type, blocks))
        and (usage is None or type(usage) is Usage)
        and type(injected) is bool
        and type(source) is str
        and type(meta) is dict
        and _STR.issuperset(map(type, meta))
    ):
        # ``blocks[:]``: a copy of exactly its length, as validation's
        return trusted_event(seq, id, at, kind, role, blocks[:], tokens, usage, injected, source, meta,
                             EVENT_FIELDS_SET if tokens is None else EVENT_FIELDS_SET_TOKENS)
    return Event(
        seq=seq,
        id=id,
        at=at,
        kind=kind,  # type: ignore[arg-type]
        role=role,  # type: ignore[arg-type]
        blocks=blocks,
        usage=usage,
        injected=injected,
        source=source,
        meta=meta,
    )
