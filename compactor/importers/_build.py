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
parsed on its own, so each line held its own copy of ``"Bash"`` and ``"command"``. An event's
``meta`` and a call's ``input`` share their key table with the other dicts of the same keys
(``shared_keys_dict``), and the blocks keep their fields in their class's (``events.trusted``).
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

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
    trusted_event,
)

intern = sys.intern

_TEXT = _shared_fields_set({"text"})
_TOOL_USE = _shared_fields_set({"id", "name", "input"})
_TOOL_RESULT = _shared_fields_set({"tool_use_id", "content", "is_error"})
#: The fields-set of a validated tool result (for an importer that makes its blocks inline).
TOOL_RESULT_FIELDS = _TOOL_RESULT
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
    if type(text) is str:  # (``trusted``, inlined: the most frequent block)
        m = _new(TextBlock)
        _set_slot(m, "type", "text")
        _set_slot(m, "text", text)
        _set_slot(m, "__pydantic_fields_set__", _TEXT)
        _set_slot(m, "__pydantic_extra__", None)
        _set_slot(m, "__pydantic_private__", None)
        return m
    return TextBlock(text=text)


_new = object.__new__
_set_slot = object.__setattr__


def thinking_block(thinking: Any, signature: Any) -> ThinkingBlock:
    """``ThinkingBlock(thinking=thinking, signature=signature)``."""
    if type(thinking) is str and (signature is None or type(signature) is str):
        return trusted(ThinkingBlock, {"type": "thinking", "thinking": thinking, "signature": signature}, _THINKING)
    return ThinkingBlock(thinking=thinking, signature=signature)


def tool_use_block(id: Any, name: Any, input: Any) -> ToolUseBlock:
    """``ToolUseBlock(id=id, name=name, input=input)``: the input dict copied as validation
    copies it (``shared_keys_dict``), the tool's name interned."""
    if type(id) is str and type(name) is str and type(input) is dict and _STR.issuperset(map(type, input)):
        m = _new(ToolUseBlock)  # (``trusted``, inlined: one per call, issue 17)
        _set_slot(m, "type", "tool_use")
        _set_slot(m, "id", id)
        _set_slot(m, "name", intern(name))
        _set_slot(m, "input", shared_keys_dict(input))
        _set_slot(m, "__pydantic_fields_set__", _TOOL_USE)
        _set_slot(m, "__pydantic_extra__", None)
        _set_slot(m, "__pydantic_private__", None)
        return m
    return ToolUseBlock(id=id, name=name, input=input)


#: Key tuple -> the class whose instances' key table the dicts of those keys share.
_KEY_TABLES: dict[tuple[str, ...], type] = {}
#: Distinct key tuples given a shared table at most (tool inputs come from the transcript).
MAX_KEY_TABLES = 256
#: Most keys of a dict given a shared table (a table holds at most 30; past that a dict
#: with a values array would turn into one of its own, the array wasted).
_MOST_KEYS = 16
#: Instances made with each new table: the table then gives each new dict room for its keys
#: and one spare, not for ~30 (CPython sizes a shared-key values array by the keys the table
#: holds plus the room it has left, which each new instance takes one from).
_TABLE_WARMUP = 32


def shared_keys_dict(d: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``d`` (a dict of exact ``str`` keys): equal, the same items in the same order,
    a plain ``dict``, whose keys live in a table shared with every other copy of the same keys
    in the same order (issue 17, memory): CPython's split dict (PEP 412), an instance's
    ``__dict__`` kept without the instance. 88 bytes for one key (an event's ``{"line": n}``),
    112 for four, against 184 for a dict of its own. Past ``MAX_KEY_TABLES`` tuples of keys, for
    an empty dict or one of more than ``_MOST_KEYS`` keys, a plain copy; its keys interned."""
    keys = tuple(d)
    cls = _KEY_TABLES.get(keys) or key_table(keys)
    if cls is None:
        return {intern(k): v for k, v in d.items()}
    out: dict[str, Any] = _new(cls).__dict__
    for k, v in d.items():  # (one by one: ``update`` of an empty dict takes the other's table)
        out[k] = v
    return out


def key_table(keys: tuple[str, ...]) -> type | None:
    """The class whose instances' ``__dict__`` share one key table holding ``keys`` in their
    order (``shared_keys_dict``'s, made on first use), or None where it gives a plain copy.
    An importer that knows a dict's keys as it makes it fills ``_new(cls).__dict__`` in that
    order itself: the dict ``shared_keys_dict`` would copy it into (issue 17: one dict and
    its copy less per event)."""
    cls = _KEY_TABLES.get(keys)
    if cls is None:
        if not keys or len(keys) > _MOST_KEYS or len(_KEY_TABLES) >= MAX_KEY_TABLES:
            return None
        cls = _KEY_TABLES[keys] = _key_table(keys)
    return cls


def keyed(keys: tuple[str, ...]) -> dict[str, Any]:
    """An empty dict for ``keys``: filled with them in their order, it is the dict
    ``shared_keys_dict`` would copy one of those items into (``key_table``)."""
    cls = _KEY_TABLES.get(keys) or key_table(keys)
    return {} if cls is None else _new(cls).__dict__


def _key_table(keys: tuple[str, ...]) -> type:
    """A class whose shared key table holds ``keys`` in their order, its spare room taken."""
    cls = type("_SharedKeys", (), {"__module__": __name__})
    first = _new(cls).__dict__
    for k in keys:
        first[intern(k)] = None
    for _ in range(_TABLE_WARMUP):
        _new(cls).__dict__
    return cls


def tool_result_block(tool_use_id: Any, content: list[Any], is_error: bool) -> ToolResultBlock:
    """``ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)``;
    ``content`` is copied as validation copies it."""
    if (
        type(tool_use_id) is str
        and type(content) is list
        and type(is_error) is bool
        and _RESULT_CONTENT_TYPES.issuperset(map(type, content))
    ):
        m = _new(ToolResultBlock)  # (``trusted``, inlined: one per result, issue 17)
        _set_slot(m, "type", "tool_result")
        _set_slot(m, "tool_use_id", tool_use_id)
        # a copy of exactly its length, as validation makes (a list grown by appends holds
        # spare room: 24 bytes more for one block)
        _set_slot(m, "content", content[:])
        _set_slot(m, "is_error", is_error)
        _set_slot(m, "__pydantic_fields_set__", _TOOL_RESULT)
        _set_slot(m, "__pydantic_extra__", None)
        _set_slot(m, "__pydantic_private__", None)
        return m
    return ToolResultBlock(tool_use_id=tool_use_id, content=content, is_error=is_error)


def usage(input_tokens: int, output_tokens: int, cache_read: int, cache_creation: int) -> Usage:
    """``Usage(...)`` of four ints (``_common.usage_of`` made them with ``int``)."""
    if type(input_tokens) is int and type(output_tokens) is int and type(cache_read) is int and type(cache_creation) is int:
        return trusted(
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
    ``blocks`` and ``meta`` are copied as validation copies them (``meta`` with a shared key
    table: ``shared_keys_dict``). ``tokens``: the event's count (``count_blocks`` of ``blocks``),
    set as ``tokens.count_into`` sets it; only on an event made without validation (the caller
    counts one that ``tokens`` is still None on)."""
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
        return trusted_event(seq, id, at, kind, role, blocks[:], tokens, usage, injected, source,
                             shared_keys_dict(meta), EVENT_FIELDS_SET if tokens is None else EVENT_FIELDS_SET_TOKENS)
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
