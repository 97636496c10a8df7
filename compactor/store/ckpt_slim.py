"""A checkpoint read for views and reports: everything but the lifted state's bulk.

A compacted huge session's checkpoint is mostly its lifted ``state`` (a 300k-event session:
45 MB of JSON, 148k ``files_read`` and 148k ``commands`` entries), which nothing that shows a
view or a summary reads: the view needs only ``state.unknown_actions`` (the names of calls the
summary covers, ``engine.view``). ``Checkpoint.model_validate_json`` of the whole document cost
+523 MB (pydantic-core builds its own tree of the whole document first, even for fields a
model drops); ``json.loads`` +286 MB.

``parse_slim`` walks the document's text instead: the top-level object member by member, the
``state`` object and its members' lists item by item, each item checked by the standard JSON
decoder and let go (memory: the text and the largest item of a state list). The document is
then parsed by the model with ``state`` replaced by ``{"unknown_actions": ...}`` (its own text),
so every other field goes through the same validation as a full read. Anything the walk does
not accept (invalid JSON or UTF-8, a state that is not an object, a repeated key, trailing
text) and any validation error is left to the full parse, which raises exactly what a full
read raises. The digest of the stored bytes is checked by the caller, as before.

The result is a ``Checkpoint`` whose ``state`` holds only ``unknown_actions``: never cache it
where a full checkpoint is expected (``SessionDocuments`` keeps the two apart).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from json.decoder import scanstring

from pydantic import ValidationError

from compactor.records import Checkpoint

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
# json decodes an escaped lone surrogate, pydantic refuses it: any escaped surrogate in the
# state (a pair too, or text that only looks like one: json.dumps' ensure_ascii writes
# characters past U+FFFF so; compactor's writer does not) leaves the decision to the full parse
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
# state kept for the readers: engine.view names the calls the summary covers from it
KEPT = "unknown_actions"


class _Refused(ValueError):
    """The walk does not take this document: the full parse decides."""


def _ws(s: str, i: int) -> int:
    m = _WS.match(s, i)
    return m.end() if m else i


def _key(s: str, i: int) -> tuple[str, int]:
    """A member's key at ``i`` and the index of its value."""
    if s[i:i + 1] != '"':
        raise _Refused(i)
    key, i = scanstring(s, i + 1)
    i = _ws(s, i)
    if s[i:i + 1] != ":":
        raise _Refused(i)
    return key, _ws(s, i + 1)


def _end(s: str, i: int, levels: int) -> int:
    """The end of the JSON value at ``i``: ``levels`` levels of containers are walked here,
    the values below them decoded (checked) one at a time and let go."""
    c = s[i:i + 1]
    if levels <= 0 or c not in ("[", "{"):
        return _DECODER.raw_decode(s, i)[1]
    if c == "{":
        return _members(s, i, {}, lambda key: levels - 1)
    i = _ws(s, i + 1)
    if s[i:i + 1] == "]":
        return i + 1
    done = False
    while not done:
        done, i = _after(s, _end(s, i, levels - 1), "]")
    return i


def _members(s: str, i: int, spans: dict[str, tuple[int, int]], walk: Callable[[str], int],
             inner: dict[str, tuple[int, int]] | None = None) -> int:
    """The end of the object at ``i``; ``spans`` gets each member's value span (a repeated
    key is refused: which one a parser keeps is its own choice), whose value is walked
    ``walk(key)`` levels deep (``_end``); -1: an object whose members' spans go to ``inner``,
    their values walked one level (lists item by item)."""
    if s[i:i + 1] != "{":
        raise _Refused(i)
    i = _ws(s, i + 1)
    if s[i:i + 1] == "}":
        return i + 1
    done = False
    while not done:
        key, start = _key(s, i)
        if key in spans:
            raise _Refused(start)
        levels = walk(key)
        end = _members(s, start, inner if inner is not None else {}, lambda k: 1) if levels < 0 else _end(s, start, levels)
        spans[key] = (start, end)
        done, i = _after(s, end, "}")
    return i


def _after(s: str, i: int, close: str) -> tuple[bool, int]:
    """After a container's item: (True, its end) at ``close``, (False, the next item) at a comma."""
    i = _ws(s, i)
    ch = s[i:i + 1]
    if ch == close:
        return True, i + 1
    if ch != ",":
        raise _Refused(i)
    return False, _ws(s, i + 1)


def _utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8, checked a megabyte at a time (no text of it kept)."""
    dec = codecs.getincrementaldecoder("utf-8")()
    try:
        for i in range(0, len(data), 1 << 20):
            dec.decode(data[i:i + (1 << 20)])
        dec.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def slim_json(data: bytes) -> bytes:
    """The document with ``state`` replaced by ``{"unknown_actions": ...}`` (the same bytes;
    no such member: ``{}``), every skipped item checked as JSON; _Refused otherwise.

    The walk reads the bytes as Latin-1 (one character a byte, so its indexes are the bytes'):
    JSON's syntax is ASCII, and no byte of a multi-byte UTF-8 character is, so the walk sees
    the same structure; the bytes are checked as UTF-8 on their own."""
    s = data.decode("latin-1")
    top: dict[str, tuple[int, int]] = {}
    state: dict[str, tuple[int, int]] = {}
    try:
        # state: an object of lists (and a few scalars), its lists walked item by item
        end = _members(s, _ws(s, 0), top, lambda key: -1 if key == "state" else 0, state)
        if _ws(s, end) != len(s):
            raise _Refused(end)
    except (ValueError, IndexError) as exc:  # json's JSONDecodeError is a ValueError
        raise _Refused(0) from exc
    del s
    if not _utf8(data):
        raise _Refused(0)
    if "state" not in top:
        return data
    st, en = top["state"]
    if _SURROGATE.search(data, st, en):
        raise _Refused(st)
    kept = b'{"' + KEPT.encode() + b'":' + data[state[KEPT][0]:state[KEPT][1]] + b"}" if KEPT in state else b"{}"
    return data[:st] + kept + data[en:]


def parse_slim(data: bytes) -> Checkpoint:
    """``Checkpoint.model_validate_json(data)`` without the state's bulk (module docstring):
    the same checkpoint but ``state``, which holds only ``unknown_actions``; the same
    ValidationError as the full parse when the document does not validate."""
    try:
        return Checkpoint.model_validate_json(slim_json(data))
    except (_Refused, ValidationError):
        pass
    return Checkpoint.model_validate_json(data)  # raises what a full read raises (or parses)
